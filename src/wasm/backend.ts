/**
 * The WASM device: the backend contract (src/contract/) over the AssemblyScript kernel module
 * (asm/). The device's own machinery (memory, kernels, casts) is in host.ts; each kernel family's
 * host code sits beside it under the family's stem (rows.ts, matmul.ts, ...). Modules here may
 * import core, ir, contract and plans; never the front end (tensors, ops).
 * @module
 */
import type { MatmulJob, MatmulResult } from "../contract/matmul.ts";
import type { RowsJob, RowsResult } from "../contract/rows.ts";
import { WasmHost } from "./host.ts";
import { runMatmulWasm } from "./matmul.ts";
import { runRowsWasm } from "./rows.ts";

/** The WASM backend over one instance of the kernel module. */
export class WasmBackend extends WasmHost {
  rows(job: RowsJob): RowsResult {
    return runRowsWasm(this, job);
  }

  matmul(job: MatmulJob): MatmulResult {
    return runMatmulWasm(this, job);
  }
}
