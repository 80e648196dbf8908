/**
 * The sort family's jobs: a window of each row's stable sorted order (sort, argsort, topk,
 * bottomk, midk, kthvalue), quantiles of each row (median, quantile and their NaN-skipping forms)
 * and searches in a sorted sequence. Ops build them (src/ops/sort.ts); each device runs them
 * (src/gpu/sort.ts, src/wasm/sort.ts).
 *
 * Order: floats by value with -0 equal to +0 and every NaN above +Infinity; descending order
 * reverses it (NaN first); equal values keep their positions' order (stable), so the results,
 * indices included, are the same on every device.
 * @module
 */
import type { PlanOverrides } from "../plans/overrides.ts";
import type { DType } from "../core/dtype.ts";
import type { Storage, View } from "../core/view.ts";

/** Dtypes the sort family orders (float16 compares as float32). */
export type SortDType = "float32" | "float16" | "int32" | "uint32";

/** The window [start, start + count) of each row's stable order along `axis`. */
export interface SortJob {
  /** The plan overrides in force when the op was issued. */
  overrides: Readonly<PlanOverrides>;
  op: string;
  /** The input, at least 1-d, any strides; its rows are the lines along `axis`. */
  x: View;
  axis: number;
  /** Largest first (NaN first), else smallest first (NaN last). */
  descending: boolean;
  /** The window's first position in each row's order, and its length (0 to the row's length). */
  start: number;
  count: number;
  /** Also return each value's index along the axis (int32). */
  indices: boolean;
  /** Float32 in IEEE 754 total order (-0 before +0) instead of -0 equal to +0 (quantiles). */
  totalOrder?: boolean;
}

/** What a sort job makes: x's shape with `count` along the axis, contiguous. */
export interface SortResult {
  /** The window's values, of x's dtype, bit for bit as they were in x. */
  values: Storage;
  /** Their indices along the axis (int32), when asked. */
  indices: Storage | null;
}

/** The interpolation between the order statistics around a quantile (NumPy's `method`). */
export type QuantileMethod = "linear" | "lower" | "higher" | "nearest" | "midpoint";

/**
 * Quantiles of each row along `axis`, from order statistics in IEEE 754 total order (-0 below
 * +0; NumPy's partition leaves the order of -0 and +0 unspecified).
 */
export interface QuantileJob {
  overrides: Readonly<PlanOverrides>;
  op: string;
  x: View;
  axis: number;
  /**
   * The quantiles: numbers in [0, 1] (float32 values, -0 as +0), or a 1-d float32 view on x's
   * device read when the job runs, where a q outside [0, 1] or NaN gives NaN.
   */
  q: readonly number[] | View;
  /** NumPy's method, or "median" (the mean of the middle pair of an even count). */
  method: QuantileMethod | "median";
  /** Skip NaN (nanquantile); otherwise a row holding NaN gives NaN. */
  skipNaN: boolean;
}

/**
 * What a quantile job makes: float32 storage laid out [...x's shape without the axis, the number
 * of quantiles], contiguous.
 */
export interface QuantileResult {
  values: Storage;
}

/** Insertion points of `values` in the 1-d `sorted` (NumPy's searchsorted). */
export interface SearchJob {
  overrides: Readonly<PlanOverrides>;
  op: string;
  /** Sorted ascending (NaN last), 1-d. */
  sorted: View;
  /** Any shape, of sorted's dtype. */
  values: View;
  /** The last suitable position ("right"), else the first ("left"). */
  right: boolean;
}

/** What a search job makes: int32 storage of values's shape, contiguous. */
export interface SearchResult {
  indices: Storage;
}

/**
 * The 32-bit dtype a sort orders `dtype` in: float16 compares as float32.
 *
 * @example
 * ```ts
 * sortComputeDType("float16"); // "float32"
 * ```
 */
export function sortComputeDType(dtype: DType): DType {
  return dtype === "float16" ? "float32" : dtype;
}

/**
 * The key kind both devices' sort kernels take for each 32-bit compute dtype (0 float32, 1 int32,
 * 2 uint32): how the raw bits become an ordered unsigned key.
 *
 * @example
 * ```ts
 * SORT_KEY_KIND.int32; // 1
 * ```
 */
export const SORT_KEY_KIND: Readonly<Partial<Record<DType, number>>> = {
  float32: 0,
  int32: 1,
  uint32: 2,
};

/**
 * The key kind of float32 in IEEE 754 total order (-0 below +0, NaN largest): the order both
 * devices take quantiles' order statistics in, so that a zero order statistic's sign follows
 * from the values alone (a stable order would take it from positions, which a selection
 * without a full sort does not keep).
 *
 * @example
 * ```ts
 * TOTAL_ORDER_KIND; // 3
 * ```
 */
export const TOTAL_ORDER_KIND = 3;

/**
 * The method codes both devices' quantile kernels take.
 *
 * @example
 * ```ts
 * QUANTILE_METHOD_CODE.median; // 5
 * ```
 */
export const QUANTILE_METHOD_CODE: Readonly<Record<QuantileJob["method"], number>> = {
  linear: 0,
  lower: 1,
  higher: 2,
  nearest: 3,
  midpoint: 4,
  median: 5,
};

/**
 * How many quantiles a job asks for.
 *
 * @example
 * ```ts
 * quantileCount([0.25, 0.75]); // 2
 * ```
 */
export function quantileCount(q: readonly number[] | View): number {
  return Array.isArray(q) ? q.length : (q as View).shape.reduce((a, b) => a * b, 1);
}
