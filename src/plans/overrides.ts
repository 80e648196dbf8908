/**
 * Plan overrides: fields of a plan's choice forced by a test or a tuner. An override applies to
 * the work recorded while it is set: ops capture {@link planOverrides} when they are issued, into
 * the job a device later runs, so a lazy result computed after the override is cleared still runs
 * the forced variant. Plans take the captured override as an argument and stay pure.
 * @module
 */
import { ValueError } from "../core/errors.ts";
import type { ElementwiseChoice, WasmElementwiseChoice } from "./elementwise.ts";
import type { MatmulChoice, WasmGemmChoice } from "./matmul.ts";
import type { PoolChoice, WasmPoolChoice } from "./pool.ts";
import type { ReduceChoice } from "./reduce.ts";
import type { RowsChoice } from "./rows.ts";
import type { ScanChoice } from "./scan.ts";
import type { SortChoice } from "./sort.ts";
import type { IndexingChoice } from "./indexing.ts";
import type { WasmThreadsChoice } from "./wasm_threads.ts";

/** The override of each plan, by kernel family. */
export interface PlanOverrides {
  /** Fields forced in the elementwise plan. */
  elementwise?: Partial<ElementwiseChoice>;
  /** Fields forced in the reduction plan. */
  reduce?: Partial<ReduceChoice>;
  /** Fields forced in the pooling plan. */
  pool?: Partial<PoolChoice>;
  /** Fields forced in the scan plan. */
  scan?: Partial<ScanChoice>;
  /** Rows of each source matrix. */
  rows?: Partial<RowsChoice>;
  /** Fields forced in the matrix product plan. */
  matmul?: Partial<MatmulChoice>;
  /** Fields forced in the sort plan. */
  sort?: Partial<SortChoice>;
  /** Fields forced in the gather and scatter plans. */
  indexing?: Partial<IndexingChoice>;
  /** Fields forced in the WASM GEMM plan. */
  wasmGemm?: Partial<WasmGemmChoice>;
  /** Fields forced in the WASM elementwise plan. */
  wasmElementwise?: Partial<WasmElementwiseChoice>;
  /** Threads of the WASM device's jobs other than GEMMs. */
  wasmThreads?: Partial<WasmThreadsChoice>;
  /** Fields forced in the WASM pooling plan. */
  wasmPool?: Partial<WasmPoolChoice>;
}

/** The families a plan override can name. */
export type PlanFamily = keyof PlanOverrides;

const FAMILIES: readonly PlanFamily[] = [
  "elementwise",
  "reduce",
  "pool",
  "scan",
  "rows",
  "matmul",
  "sort",
  "indexing",
  "wasmGemm",
  "wasmElementwise",
  "wasmThreads",
  "wasmPool",
];

/** No overrides: what work recorded outside any override captures. */
export const NO_OVERRIDES: Readonly<PlanOverrides> = Object.freeze({});

let current: Readonly<PlanOverrides> = NO_OVERRIDES;

/**
 * Forces fields of a plan's choice for the work issued from now on (tests use it to cover every
 * variant; a tuner, to measure them). `null` restores the rule. Work already issued keeps the
 * override it was issued under, even if it is computed later.
 *
 * @example
 * ```ts
 * import { setPlanOverride } from "@gyre/gyre/tuning";
 * setPlanOverride("reduce", { subgroups: false }); // the shared-memory path
 * setPlanOverride("reduce", null);
 * ```
 */
export function setPlanOverride<F extends PlanFamily>(
  family: F,
  override: PlanOverrides[F] | null,
): void {
  if (!FAMILIES.includes(family)) {
    throw new ValueError({
      op: "setPlanOverride",
      argument: "family",
      expected: FAMILIES.map((f) => `"${f}"`).join(", "),
      received: String(family),
    });
  }
  if (override !== null && (typeof override !== "object" || Array.isArray(override))) {
    throw new ValueError({
      op: "setPlanOverride",
      argument: "override",
      expected: "an object of choice fields, or null",
      received: typeof override,
    });
  }
  const next: PlanOverrides = { ...current };
  if (override === null) delete next[family];
  else next[family] = Object.freeze({ ...override }) as PlanOverrides[F];
  current = Object.freeze(next);
}

/**
 * The overrides in force now, as an immutable snapshot: what ops capture into the jobs they issue.
 *
 * @example
 * ```ts
 * import { planOverrides } from "@gyre/gyre/tuning";
 * console.log(planOverrides().reduce); // undefined unless set
 * ```
 */
export function planOverrides(): Readonly<PlanOverrides> {
  return current;
}
