/**
 * The WASM device: the backend contract (src/contract/) over the AssemblyScript kernel module
 * (asm/). The device's own machinery (memory, kernels, casts) is in host.ts; each kernel family's
 * host code sits beside it under the family's stem (rows.ts, matmul.ts, ...). Modules here may
 * import core, ir, contract and plans; never the front end (tensors, ops).
 * @module
 */
import type { PoolJob, PoolResult } from "../contract/pool.ts";
import type { MatmulJob, MatmulResult } from "../contract/matmul.ts";
import type { Storage } from "../core/view.ts";
import type { Backend } from "../contract/backend.ts";
import type { ElementwiseJob } from "../contract/elementwise.ts";
import type { ReduceJob } from "../contract/reduce.ts";
import { runElementwiseWasm } from "./elementwise.ts";
import { runReduceWasm } from "./reduce.ts";
import type { RowsJob, RowsResult } from "../contract/rows.ts";
import type { ScanJob, ScanResult } from "../contract/scan.ts";
import { WasmHost } from "./host.ts";
import { runPoolWasm } from "./pool.ts";
import { runMatmulWasm } from "./matmul.ts";
import { runRowsWasm } from "./rows.ts";
import { runScanWasm } from "./scan.ts";
import type {
  QuantileJob,
  QuantileResult,
  SearchJob,
  SearchResult,
  SortJob,
  SortResult,
} from "../contract/sort.ts";
import { runQuantileWasm, runSearchWasm, runSortWasm } from "./sort.ts";
import type { GatherJob, GatherResult, ScatterJob, ScatterResult } from "../contract/indexing.ts";
import { runGatherWasm, runScatterWasm } from "./indexing.ts";
import { prepareResidualsWasm } from "./residuals.ts";
import type { PreparedResiduals, ResidualProgram } from "../contract/residuals.ts";

/** The WASM backend over one instance of the kernel module. */
export class WasmBackend extends WasmHost implements Backend {
  evaluate(job: ElementwiseJob): Storage {
    return runElementwiseWasm(this, job);
  }
  reduce(job: ReduceJob): Storage | null {
    return runReduceWasm(this, job);
  }
  rows(job: RowsJob): RowsResult {
    return runRowsWasm(this, job);
  }
  prepareResiduals(program: ResidualProgram): PreparedResiduals {
    return prepareResidualsWasm(program);
  }
  scan(job: ScanJob): ScanResult {
    return runScanWasm(this, job);
  }
  pool(job: PoolJob): PoolResult {
    return runPoolWasm(this, job);
  }
  sort(job: SortJob): SortResult {
    return runSortWasm(this, job);
  }
  quantile(job: QuantileJob): QuantileResult {
    return runQuantileWasm(this, job);
  }
  searchsorted(job: SearchJob): SearchResult {
    return runSearchWasm(this, job);
  }
  gather(job: GatherJob): GatherResult {
    return runGatherWasm(this, job);
  }
  scatter(job: ScatterJob): ScatterResult {
    return runScatterWasm(this, job);
  }
  matmul(job: MatmulJob): MatmulResult {
    return runMatmulWasm(this, job);
  }
  /** Nothing to gain from replaying: each kernel call is already direct. */
  capture(): null {
    return null;
  }
}
