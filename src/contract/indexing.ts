/**
 * The indexing family's jobs: gathers (takeAlongAxis, take, indexSelect, `at`), which read each
 * output element from x at an index an int32 tensor holds, and scatters (scatter with a
 * reduction, scatterAdd, the segment reductions, bincount, histogram), which combine each update
 * into the output element its index names. Ops build them (src/ops/indexing.ts) as strides over
 * one iteration space, so one kernel serves every op; each device runs them
 * (src/gpu/indexing.ts, src/wasm/indexing.ts).
 * @module
 */
import type { PlanOverrides } from "../plans/overrides.ts";
import type { DType } from "../core/dtype.ts";
import type { Shape } from "../core/shape.ts";
import type { Storage, View } from "../core/view.ts";
import type { Expr } from "../ir/expr.ts";

/** The most axes a job's iteration space has (ops merge adjacent axes that move together). */
export const INDEXING_MAX_RANK = 8;

/** Where an index of an indexed axis may lie, and what happens outside. */
export interface IndexedAxis {
  /** The axis' stride in the indexed tensor's elements (may be negative or 0). */
  stride: number;
  /** Its length n: indices lie in [-n, n) (negatives count from the end) or [0, n). */
  length: number;
  /**
   * How negative indices count: "wrap" from the end (NumPy), "drop" the element (TensorFlow's
   * segment ids), "error" (bincount); "drop-all" drops every index outside [0, n) (a compaction's
   * positions past its size).
   */
  negative: "wrap" | "drop" | "error" | "drop-all";
}

/**
 * out[t] = x[xOffset(t) + index(t) * axis.stride] over the output's elements t, where
 * xOffset and the index's own position are the dot products of t's coordinates in `shape` with
 * `xStrides` and `indexStrides` (added to each view's offset).
 */
export interface GatherJob {
  overrides: Readonly<PlanOverrides>;
  op: string;
  x: View;
  /** int32. */
  indices: View;
  /** The output's shape (at most {@link INDEXING_MAX_RANK} axes). */
  shape: Shape;
  xStrides: readonly number[];
  indexStrides: readonly number[];
  axis: IndexedAxis;
  /**
   * Elementwise consumers fused in (GPU): `expr` over input 0, the gathered value, and inputs
   * 1... (`inputs`, views broadcast to `shape`, the output's unmerged shape); the result is of
   * expr's dtype.
   */
  epilogue?: { expr: Expr; inputs: readonly View[]; shape: Shape };
}

/**
 * What a gather job makes: new contiguous storage of x's dtype (or the epilogue's) and the job's
 * shape.
 */
export interface GatherResult {
  output: Storage;
}

/** How a scatter combines the updates that meet at one output element. */
export type ScatterReduce = "none" | "sum" | "prod" | "max" | "min" | "mean";

/**
 * Combines each update into out[outOffset(t) + index(t) * axis.stride] over the updates'
 * iteration space t (`shape`), the offsets being dot products of t's coordinates with the
 * strides. The output starts as a copy of `base` or, with none, as the reduction's identity
 * (0 for sums, 1 for products, -Inf or the dtype's least value for max, +Inf or the greatest for
 * min; mean then counts no base, and a slot nothing reaches is 0).
 */
export interface ScatterJob {
  overrides: Readonly<PlanOverrides>;
  op: string;
  /**
   * The output's start (contiguous or not), of `outShape` and `dtype`; null: `fill` everywhere
   * (by default the reduction's identity).
   */
  base: View | null;
  /** The start where there is no base (plain stores only; else the identity). */
  fill?: number;
  outShape: Shape;
  dtype: DType;
  /**
   * Of `dtype`; null (plain int32 stores only): each update is its own linear position in the
   * iteration space (argwhere's coordinates of a 1-d x).
   */
  updates: View | null;
  /** int32. */
  indices: View;
  /** The argument the indices came from, as an IndexError names it ("indices" by default). */
  indexName?: string;
  /** The updates' iteration space (at most {@link INDEXING_MAX_RANK} axes). */
  shape: Shape;
  updateStrides: readonly number[];
  indexStrides: readonly number[];
  /** Strides into the contiguous output. */
  outStrides: readonly number[];
  axis: IndexedAxis;
  reduce: ScatterReduce;
  /**
   * The indices are declared sorted ascending along the first axis, and constant across the
   * others (segment ops' `sorted`): the GPU reduces each run of equal ones in order, and both
   * devices throw an IndexError ({@link SORTED_IDS}) where they are not.
   */
  sorted?: boolean;
  /**
   * A compaction (argwhere, maskedSelect, unique): the indices operand holds bool words, one per
   * row (the first axis of the iteration space; constant across the others); a row whose word is
   * false is dropped, and a kept row's index is how many kept rows come before it (rows whose
   * index reaches axis.length are dropped). Plain stores (reduce "none").
   */
  compact?: boolean;
}

/**
 * What a job declared `sorted` promises of its indices, as an IndexError says it.
 *
 * @example
 * ```ts
 * SORTED_IDS; // "ids sorted ascending (as `sorted: true` declares)"
 * ```
 */
export const SORTED_IDS = "ids sorted ascending (as `sorted: true` declares)";

/** What a scatter job makes: new contiguous storage of `dtype` and `outShape`. */
export interface ScatterResult {
  output: Storage;
}

/**
 * The codes both devices' scatter kernels take for each reduction.
 *
 * @example
 * ```ts
 * SCATTER_REDUCE_CODE.sum; // 1
 * ```
 */
export const SCATTER_REDUCE_CODE: Readonly<Record<ScatterReduce, number>> = {
  none: 0,
  sum: 1,
  prod: 2,
  max: 3,
  min: 4,
  mean: 5,
};

/**
 * The codes both devices' kernels take for the negative-index rule.
 *
 * @example
 * ```ts
 * NEGATIVE_INDEX_CODE.wrap; // 0
 * ```
 */
export const NEGATIVE_INDEX_CODE: Readonly<Record<IndexedAxis["negative"], number>> = {
  wrap: 0,
  drop: 1,
  error: 2,
  "drop-all": 3,
};

/**
 * The range an axis' indices must lie in, as an error message says it.
 *
 * @example
 * ```ts
 * indexRange({ stride: 1, length: 3, negative: "wrap" }); // "int32 indices in [-3, 3)"
 * ```
 */
export function indexRange(axis: IndexedAxis): string {
  return axis.negative === "wrap"
    ? `int32 indices in [${-axis.length}, ${axis.length})`
    : axis.negative === "drop"
    ? `int32 indices below ${axis.length} (negative ones are dropped)`
    : axis.negative === "drop-all"
    ? `int32 indices (those outside [0, ${axis.length}) are dropped)`
    : `int32 indices in [0, ${axis.length})`;
}

/**
 * The dtype codes both devices' indexing kernels take (bool is stored as uint32 words).
 *
 * @example
 * ```ts
 * INDEXING_DTYPE_CODE.float16; // 1
 * ```
 */
export const INDEXING_DTYPE_CODE: Readonly<Record<DType, number>> = {
  float32: 0,
  float16: 1,
  int32: 2,
  uint32: 3,
  bool: 3,
};

/**
 * What a scatter without a base starts from: its reduction's identity (0 for sums, means and
 * plain stores, 1 for products, the least value of the dtype for max (-Inf for floats), the
 * greatest for min).
 *
 * @example
 * ```ts
 * scatterIdentity("max", "int32"); // -2147483648
 * ```
 */
export function scatterIdentity(reduce: ScatterReduce, dtype: DType): number {
  const float = dtype === "float32" || dtype === "float16";
  switch (reduce) {
    case "prod":
      return 1;
    case "max":
      return float ? -Infinity : dtype === "int32" ? -(2 ** 31) : 0;
    case "min":
      return float
        ? Infinity
        : dtype === "int32"
        ? 2 ** 31 - 1
        : dtype === "bool"
        ? 1
        : 2 ** 32 - 1;
    default:
      return 0;
  }
}
