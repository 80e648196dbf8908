/**
 * Plans: the one place where heuristics pick a kernel variant and its parameters, one file per
 * kernel family. Each plan is a pure function of the device's caps, the problem's shape and the
 * override captured with the job, returning a plain {@link Choice} record, so a tuner can replace
 * a rule with a measured table. Plans may import core and contract types only: never a device, an
 * op or a code generator (generators import the plans' choice types instead).
 * @module
 */
import type { ElementwiseChoice, WasmElementwiseChoice } from "./elementwise.ts";
import type { MatmulChoice, WasmGemmChoice } from "./matmul.ts";
import type { PoolChoice, WasmPoolChoice } from "./pool.ts";
import type { ReduceChoice } from "./reduce.ts";
import type { RowsChoice } from "./rows.ts";
import type { ScanChoice } from "./scan.ts";
import type { SortChoice } from "./sort.ts";
import type { IndexingChoice } from "./indexing.ts";
import type { WasmThreadsChoice } from "./wasm_threads.ts";

export * from "./elementwise.ts";
export * from "./reduce.ts";
export * from "./pool.ts";
export * from "./scan.ts";
export * from "./sort.ts";
export * from "./indexing.ts";
export * from "./rows.ts";
export * from "./matmul.ts";
export * from "./overrides.ts";
export * from "./wasm_threads.ts";

/** Any plan's result. */
export type Choice =
  | ElementwiseChoice
  | ReduceChoice
  | PoolChoice
  | ScanChoice
  | RowsChoice
  | MatmulChoice
  | SortChoice
  | IndexingChoice
  | WasmGemmChoice
  | WasmElementwiseChoice
  | WasmThreadsChoice
  | WasmPoolChoice;
export * from "./variants.ts";
