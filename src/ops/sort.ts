/**
 * Sorting, Rank-K selection and order statistics along one axis: `sort`, `argsort`, `rankK` (and
 * `topk`, `bottomk`, `midk`), `kthvalue`, `median`, `quantile` with their NaN-skipping forms, and
 * `searchsorted`, with NumPy/PyTorch semantics.
 *
 * The order is numeric with -0 equal to +0 and NaN above +Infinity (last ascending, first
 * descending), and stable: equal values keep their order, so ties go to the lower index and the
 * results, indices included, are the same on every device. Each op validates its arguments, then
 * builds one job (src/contract/sort.ts) for its operand's device: a window of each row's sorted
 * order, quantiles of each row, or binary searches. The WASM device (src/wasm/sort.ts) is the
 * reference: a stable radix sort of (key, index) pairs per row.
 * @module
 */
import { taped } from "../_tape.ts";
import type { QuantileJob, QuantileMethod, SortJob } from "../contract/sort.ts";
import type { View } from "../core/view.ts";
import { planOverrides } from "../plans/overrides.ts";
import { normalizeAxis, sizeOf } from "../core/shape.ts";
import type { DType } from "../core/dtype.ts";
import { describe, DTypeError, ShapeError, ValueError } from "../core/errors.ts";
import { backendFor } from "../runtime.ts";
import { metaOf, Tensor, tensorFromStorage, viewOf } from "../tensor.ts";
import { checkOptions } from "../core/options.ts";

// Re-exported so that this module's `export *` in mod.ts makes it public with the options.
export type { QuantileMethod } from "../contract/sort.ts";

/** Options of {@link sort} and {@link argsort}. */
export interface SortOptions {
  /** The axis to sort along (negative counts from the end). Default -1, the last. */
  axis?: number;
  /** Largest first (NaN first). Default false: smallest first, NaN last. */
  descending?: boolean;
}

/** Which k elements {@link rankK} selects. */
export type RankKKind = "top" | "mid" | "bottom";

/** Options of {@link rankK}, {@link topk}, {@link bottomk} and {@link midk}. */
export interface RankKOptions {
  /** "top" (the default): the k largest; "bottom": the k smallest; "mid": the k central ones. */
  kind?: RankKKind;
  /** The axis to select along (negative counts from the end). Default -1, the last. */
  axis?: number;
  /**
   * Return the k in order (top: largest first; bottom and mid: ascending). Default true. With
   * false the order is unspecified (gyre returns them sorted anyway).
   */
  sorted?: boolean;
}

/** Options of {@link kthvalue} and {@link median}. */
export interface OrderStatisticOptions {
  /** The axis (negative counts from the end); {@link median} and {@link quantile}: all axes, flattened, by default. */
  axis?: number;
  /** Keep the reduced axis with length 1. Default false. */
  keepdims?: boolean;
}

/** Options of {@link quantile} and {@link nanquantile}. */
export interface QuantileOptions extends OrderStatisticOptions {
  /** How to interpolate between the order statistics around a quantile. Default "linear". */
  method?: QuantileMethod;
}

/** Options of {@link searchsorted}. */
export interface SearchSortedOptions {
  /** "left" (the default): the first suitable position; "right": the last. */
  side?: "left" | "right";
}

const ORDERED: readonly DType[] = ["float32", "float16", "int32", "uint32"];
const METHODS: readonly QuantileMethod[] = ["linear", "lower", "higher", "nearest", "midpoint"];

/** x's view, checked: a Tensor of an ordered dtype, seen as 1-d when 0-d. */
function orderedView(op: string, x: unknown): View {
  if (!(x instanceof Tensor)) {
    throw new ValueError({ op, argument: "x", expected: "a Tensor", received: describe(x) });
  }
  const meta = metaOf(x, op, "x");
  if (!ORDERED.includes(meta.dtype)) {
    throw new DTypeError({
      op,
      argument: "x",
      expected: "float32, float16, int32 or uint32",
      received: meta.dtype,
    });
  }
  const view = viewOf(x, op, "x");
  return view.shape.length === 0 ? { ...view, shape: [1], strides: [1] } : view;
}

function options<T extends string>(
  op: string,
  value: unknown,
  keys: readonly T[],
): Partial<Record<T, unknown>> {
  if (value === undefined || value === null) return {};
  if (typeof value !== "object" || Array.isArray(value)) {
    throw new ValueError({
      op,
      argument: "options",
      expected: `an object { ${keys.join(", ")} }`,
      received: describe(value),
    });
  }
  return checkOptions(op, value as Record<string, unknown>, keys) as Partial<Record<T, unknown>>;
}

function booleanOption(op: string, name: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== "boolean") {
    throw new ValueError({
      op,
      argument: `options.${name}`,
      expected: "a boolean",
      received: describe(value),
    });
  }
  return value;
}

function axisOption(op: string, value: unknown, rank: number): number {
  if (value !== undefined && (typeof value !== "number" || !Number.isInteger(value))) {
    throw new ValueError({
      op,
      argument: "options.axis",
      expected: "an integer",
      received: describe(value),
    });
  }
  return normalizeAxis(op, (value ?? -1) as number, rank, "options.axis");
}

/** Runs a sort job: the window [start, start + count) of each row's order. */
function window(
  op: string,
  view: View,
  axis: number,
  descending: boolean,
  start: number,
  count: number,
  indices: boolean,
): [Tensor, Tensor | null] {
  const job: SortJob = {
    overrides: planOverrides(),
    op,
    x: view,
    axis,
    descending,
    start,
    count,
    indices,
  };
  const result = backendFor(view.storage.backend.name, op).sort(job);
  const shape = view.shape.map((d, i) => (i === axis ? count : d));
  const values = tensorFromStorage(result.values, view.dtype, shape);
  const order = result.indices ? tensorFromStorage(result.indices, "int32", shape) : null;
  return [values, order];
}

/**
 * Sorts along `axis` (default the last), stably: equal values keep their order; -0 and +0 are
 * equal; NaN sorts above +Infinity (last, or first when `descending`), as NumPy and PyTorch.
 * float32, float16, int32 and uint32.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * await gyre.sort(gyre.tensor([3, NaN, -1, 2])).array(); // [-1, 2, 3, NaN]
 * await gyre.sort(gyre.tensor([[3, 1], [0, 2]]), { axis: 0, descending: true }).array(); // [[3, 2], [0, 1]]
 * ```
 */
export function sort(x: Tensor, options_?: SortOptions): Tensor {
  return taped("sort", [x], { ...options_ }, () => sortOf(x, options_));
}

function sortOf(x: Tensor, options_?: SortOptions): Tensor {
  const op = "sort";
  const view = orderedView(op, x);
  const o = options(op, options_, ["axis", "descending"]);
  const axis = axisOption(op, o.axis, view.shape.length);
  const descending = booleanOption(op, "descending", o.descending, false);
  const [values] = window(op, view, axis, descending, 0, view.shape[axis], false);
  return x.shape.length === 0 ? values.reshape([]) : values;
}

/**
 * The int32 indices that sort `x` along `axis` (default the last), stably (equal values keep
 * their order), with {@link sort}'s order.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * await gyre.argsort(gyre.tensor([3, 1, 2, 1])).array(); // [1, 3, 2, 0]
 * await gyre.argsort(gyre.tensor([3, 1, 2, 1]), { descending: true }).array(); // [0, 2, 1, 3]
 * ```
 */
export function argsort(x: Tensor, options_?: SortOptions): Tensor {
  const op = "argsort";
  const view = orderedView(op, x);
  const o = options(op, options_, ["axis", "descending"]);
  const axis = axisOption(op, o.axis, view.shape.length);
  const descending = booleanOption(op, "descending", o.descending, false);
  const [values, order] = window(op, view, axis, descending, 0, view.shape[axis], true);
  values.dispose();
  return x.shape.length === 0 ? (order as Tensor).reshape([]) : order as Tensor;
}

/** k checked against the axis length n. */
function checkK(op: string, k: unknown, n: number): number {
  if (typeof k !== "number" || !Number.isInteger(k) || k < 0 || k > n) {
    throw new ValueError({
      op,
      argument: "k",
      expected: `an integer from 0 to the axis length n = ${n}`,
      received: describe(k),
    });
  }
  return k;
}

/**
 * Selects k elements along `axis` (default the last) by rank, returning `[values, indices]`
 * (indices int32, along the axis): with `kind` "top" (the default) the k largest, largest first
 * (`torch.topk`; NaN counts as larger than +Infinity); "bottom" the k smallest, smallest first
 * (NaN last); "mid" the k central elements of the ascending order, positions floor((n - k) / 2)
 * on. Ties go to the lower index, so results are the same on every device. k = 0 gives empty
 * results; k > n is a ValueError.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const x = gyre.tensor([5, 1, 4, 2, 3]);
 * const [top, where] = gyre.rankK(x, 2); // [5, 4] at [0, 2]
 * const [mid] = gyre.rankK(x, 3, { kind: "mid" }); // [2, 3, 4]
 * ```
 */
export function rankK(x: Tensor, k: number, options_?: RankKOptions): [Tensor, Tensor] {
  return taped("rankK", [x], { ...options_, k }, () => rankKOf(x, k, options_));
}

function rankKOf(x: Tensor, k: number, options_?: RankKOptions): [Tensor, Tensor] {
  return selectRank("rankK", x, k, options_, null);
}

/** rankK's work under the name of the op called (`kind` fixed by topk, bottomk and midk). */
function selectRank(
  op: string,
  x: Tensor,
  k: number,
  options_: unknown,
  fixed: RankKKind | null,
): [Tensor, Tensor] {
  const view = orderedView(op, x);
  const o = options(op, options_, fixed ? ["axis", "sorted"] : ["kind", "axis", "sorted"]);
  const axis = axisOption(op, o.axis, view.shape.length);
  const kind = fixed ?? (o as { kind?: unknown }).kind ?? "top";
  if (kind !== "top" && kind !== "mid" && kind !== "bottom") {
    throw new ValueError({
      op,
      argument: "options.kind",
      expected: '"top", "mid" or "bottom"',
      received: describe(kind),
    });
  }
  booleanOption(op, "sorted", o.sorted, true);
  const n = view.shape[axis];
  const count = checkK(op, k, n);
  const start = kind === "mid" ? Math.floor((n - count) / 2) : 0;
  const [values, indices] = window(op, view, axis, kind === "top", start, count, true);
  return [values, indices as Tensor];
}

/**
 * The k largest along the axis, largest first: `rankK(x, k, { kind: "top" })`.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const [values, indices] = gyre.topk(gyre.tensor([1, 3, 2, 3]), 2); // [3, 3] at [1, 3]
 * ```
 */
export function topk(
  x: Tensor,
  k: number,
  options_?: Omit<RankKOptions, "kind">,
): [Tensor, Tensor] {
  return taped("topk", [x], { ...options_, k }, () => topkOf(x, k, options_));
}

function topkOf(
  x: Tensor,
  k: number,
  options_?: Omit<RankKOptions, "kind">,
): [Tensor, Tensor] {
  return selectRank("topk", x, k, options_, "top");
}

/**
 * The k smallest along the axis, smallest first: `rankK(x, k, { kind: "bottom" })`.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const [values, indices] = gyre.bottomk(gyre.tensor([4, NaN, 2, 3]), 2); // [2, 3] at [2, 3]
 * ```
 */
export function bottomk(
  x: Tensor,
  k: number,
  options_?: Omit<RankKOptions, "kind">,
): [Tensor, Tensor] {
  return taped("bottomk", [x], { ...options_, k }, () => bottomkOf(x, k, options_));
}

function bottomkOf(
  x: Tensor,
  k: number,
  options_?: Omit<RankKOptions, "kind">,
): [Tensor, Tensor] {
  return selectRank("bottomk", x, k, options_, "bottom");
}

/**
 * The k central elements of the ascending order along the axis: `rankK(x, k, { kind: "mid" })`.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const [values] = gyre.midk(gyre.tensor([9, 1, 8, 2, 7, 3]), 2); // [3, 7]
 * ```
 */
export function midk(
  x: Tensor,
  k: number,
  options_?: Omit<RankKOptions, "kind">,
): [Tensor, Tensor] {
  return taped("midk", [x], { ...options_, k }, () => midkOf(x, k, options_));
}

function midkOf(
  x: Tensor,
  k: number,
  options_?: Omit<RankKOptions, "kind">,
): [Tensor, Tensor] {
  return selectRank("midk", x, k, options_, "mid");
}

/**
 * The k-th smallest element along `axis` (default the last; k counts from 1, as PyTorch) and its
 * index, `[values, indices]`, the axis removed unless `keepdims`. Ties go to the lower index; NaN
 * is the largest.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const [value, index] = gyre.kthvalue(gyre.tensor([7, 5, 9, 5]), 2); // 5 at index 3
 * ```
 */
export function kthvalue(
  x: Tensor,
  k: number,
  options_?: OrderStatisticOptions,
): [Tensor, Tensor] {
  return taped("kthvalue", [x], { ...options_, k }, () => kthvalueOf(x, k, options_));
}

function kthvalueOf(
  x: Tensor,
  k: number,
  options_?: OrderStatisticOptions,
): [Tensor, Tensor] {
  const op = "kthvalue";
  const view = orderedView(op, x);
  const o = options(op, options_, ["axis", "keepdims"]);
  const axis = axisOption(op, o.axis, view.shape.length);
  const keepdims = booleanOption(op, "keepdims", o.keepdims, false);
  const n = view.shape[axis];
  if (typeof k !== "number" || !Number.isInteger(k) || k < 1 || k > n) {
    throw new ValueError({
      op,
      argument: "k",
      expected: `an integer from 1 to the axis length n = ${n}`,
      received: describe(k),
    });
  }
  const [values, indices] = window(op, view, axis, false, k - 1, 1, true);
  if (keepdims || x.shape.length === 0) {
    if (x.shape.length === 0) return [values.reshape([]), (indices as Tensor).reshape([])];
    return [values, indices as Tensor];
  }
  const squeezed = [values.squeeze(axis), (indices as Tensor).squeeze(axis)] as [Tensor, Tensor];
  values.dispose();
  indices?.dispose();
  return squeezed;
}

/** The view to take quantiles of and its axis: every axis flattened when none is given. */
function quantileView(op: string, x: unknown, axisValue: unknown): { view: View; axis: number } {
  const view = orderedView(op, x);
  if (axisValue === undefined) {
    const flat = (x as Tensor).reshape([sizeOf(view.shape)]);
    try {
      return { view: viewOf(flat, op, "x"), axis: 0 };
    } finally {
      flat.dispose();
    }
  }
  return { view, axis: axisOption(op, axisValue, view.shape.length) };
}

function runQuantile(
  op: string,
  x: Tensor,
  q: readonly number[] | View,
  qn: number,
  scalarQ: boolean,
  method: QuantileJob["method"],
  skipNaN: boolean,
  options_: unknown,
): Tensor {
  const o = options(op, options_, ["axis", "keepdims", "method"]);
  const keepdims = booleanOption(op, "keepdims", o.keepdims, false);
  const { view, axis } = quantileView(op, x, o.axis);
  const job: QuantileJob = {
    overrides: planOverrides(),
    op,
    x: view,
    axis,
    q,
    method,
    skipNaN,
  };
  const { values } = backendFor(view.storage.backend.name, op).quantile(job);
  // The job's layout: [...every axis but `axis`, q].
  const kept = view.shape.filter((_, i) => i !== axis);
  const t = tensorFromStorage(values, "float32", [...kept, qn]);
  let reduced: number[];
  if (o.axis === undefined) reduced = keepdims ? x.shape.map(() => 1) : [];
  else {
    reduced = keepdims ? view.shape.map((d, i) => (i === axis ? 1 : d)) : kept;
    if (x.shape.length === 0) reduced = [];
  }
  // q first (NumPy), then the reduced shape.
  const moved = t.transpose([kept.length, ...kept.keys()]);
  t.dispose();
  const out = moved.reshape(scalarQ ? reduced : [qn, ...reduced]);
  moved.dispose();
  return out;
}

/** q as a list of numbers in [0, 1], and whether it was one number. */
/**
 * q checked: numbers in [0, 1] (as float32, -0 as +0: NumPy takes a Python float q as float32 for
 * float32 data, and both devices see the same q), or a float tensor of rank 0 or 1 on x's device
 * (its values read on the device: out of [0, 1] or NaN gives NaN there).
 */
function checkQ(
  op: string,
  q: unknown,
  x: Tensor,
): { q: readonly number[] | View; count: number; scalar: boolean } {
  if (q instanceof Tensor) {
    const meta = metaOf(q, op, "q");
    const xMeta = metaOf(x, op, "x");
    if (meta.dtype !== "float32" && meta.dtype !== "float16") {
      throw new DTypeError({
        op,
        argument: "q",
        expected: "float32 or float16",
        received: meta.dtype,
      });
    }
    if (meta.shape.length > 1) {
      throw new ShapeError({
        op,
        argument: "q",
        expected: "a 0-d or 1-d tensor",
        received: `shape ${describe(meta.shape)}`,
      });
    }
    if (meta.device !== xMeta.device) {
      throw new ValueError({
        op,
        argument: "q",
        expected: `a tensor on x's device (${xMeta.device})`,
        received: meta.device,
      });
    }
    const view = viewOf(q, op, "q");
    const count = sizeOf(view.shape);
    const flat = view.shape.length === 0 ? { ...view, shape: [1], strides: [1] } : view;
    return { q: flat, count, scalar: view.shape.length === 0 };
  }
  const list = typeof q === "number" ? [q] : Array.isArray(q) ? q : null;
  if (list === null || list.some((v) => typeof v !== "number" || !(v >= 0 && v <= 1))) {
    throw new ValueError({
      op,
      argument: "q",
      expected: "a number in [0, 1], an array of them, or a float tensor of them",
      received: describe(q),
    });
  }
  const values = (list as number[]).map((v) => Math.fround(v) || 0);
  return { q: values, count: values.length, scalar: typeof q === "number" };
}

function checkMethod(op: string, options_: unknown): QuantileMethod {
  const o = options(op, options_, ["axis", "keepdims", "method"]);
  const method = o.method ?? "linear";
  if (!METHODS.includes(method as QuantileMethod)) {
    throw new ValueError({
      op,
      argument: "options.method",
      expected: METHODS.map((m) => `"${m}"`).join(", "),
      received: describe(method),
    });
  }
  return method as QuantileMethod;
}

/**
 * The median along `axis` (default: of all elements), NumPy's `median`: the middle value, or the
 * mean of the middle two of an even count; a slice holding NaN gives NaN. float32 results
 * (float16 and integer inputs included), the axis removed unless `keepdims`.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * await gyre.median(gyre.tensor([4, 1, 3, 2])).array(); // 2.5
 * await gyre.median(gyre.tensor([[1, 9, 5], [2, NaN, 0]]), { axis: 1 }).array(); // [5, NaN]
 * ```
 */
export function median(x: Tensor, options_?: OrderStatisticOptions): Tensor {
  return taped("median", [x], { ...options_ }, () => medianOf(x, options_));
}

function medianOf(x: Tensor, options_?: OrderStatisticOptions): Tensor {
  options("median", options_, ["axis", "keepdims"]);
  return runQuantile("median", x, [0.5], 1, true, "median", false, options_);
}

/**
 * {@link median} skipping NaN (NumPy's `nanmedian`); a slice of only NaN gives NaN.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * await gyre.nanmedian(gyre.tensor([4, NaN, 1, 3])).array(); // 3
 * ```
 */
export function nanmedian(x: Tensor, options_?: OrderStatisticOptions): Tensor {
  return taped("nanmedian", [x], { ...options_ }, () => nanmedianOf(x, options_));
}

function nanmedianOf(x: Tensor, options_?: OrderStatisticOptions): Tensor {
  options("nanmedian", options_, ["axis", "keepdims"]);
  return runQuantile("nanmedian", x, [0.5], 1, true, "median", true, options_);
}

/**
 * Quantiles along `axis` (default: of all elements) with NumPy's `quantile` semantics: `q` a
 * number or an array of numbers in [0, 1], or a 0-d or 1-d float tensor on x's device whose values
 * are read there (one out of [0, 1] or NaN gives NaN) (an array or 1-d tensor puts its axis first
 * in the result); `method`
 * "linear" (the default: a + (b - a) g at the virtual index (n - 1) q), "lower", "higher",
 * "nearest" (ties to the even index) or "midpoint"; a slice holding NaN gives NaN. The virtual
 * index is taken in float64, the interpolation in float32 (NumPy's `_lerp` order); float32
 * results.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const x = gyre.tensor([1, 2, 4, 8]);
 * await gyre.quantile(x, 0.5).array(); // 3
 * await gyre.quantile(x, [0, 0.25, 1], { method: "lower" }).array(); // [1, 1, 8]
 * ```
 */
export function quantile(
  x: Tensor,
  q: number | readonly number[] | Tensor,
  options_?: QuantileOptions,
): Tensor {
  return taped("quantile", [x], { ...options_, q }, () => quantileOf(x, q, options_));
}

function quantileOf(
  x: Tensor,
  q: number | readonly number[] | Tensor,
  options_?: QuantileOptions,
): Tensor {
  const op = "quantile";
  const { q: qs, count, scalar } = checkQ(op, q, x);
  return runQuantile(op, x, qs, count, scalar, checkMethod(op, options_), false, options_);
}

/**
 * {@link quantile} skipping NaN (NumPy's `nanquantile`); a slice of only NaN gives NaN.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * await gyre.nanquantile(gyre.tensor([NaN, 1, 2, 3]), 0.5).array(); // 2
 * ```
 */
export function nanquantile(
  x: Tensor,
  q: number | readonly number[] | Tensor,
  options_?: QuantileOptions,
): Tensor {
  return taped("nanquantile", [x], { ...options_, q }, () => nanquantileOf(x, q, options_));
}

function nanquantileOf(
  x: Tensor,
  q: number | readonly number[] | Tensor,
  options_?: QuantileOptions,
): Tensor {
  const op = "nanquantile";
  const { q: qs, count, scalar } = checkQ(op, q, x);
  return runQuantile(op, x, qs, count, scalar, checkMethod(op, options_), true, options_);
}

/**
 * Where `values` would be inserted into the ascending 1-d `sortedSequence` to keep it sorted
 * (NumPy's `searchsorted`): with `side` "left" (the default) the first suitable index, with
 * "right" the last; int32, of values's shape. Both of one ordered dtype and device; NaN is the
 * largest, -0 equals +0.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const s = gyre.tensor([1, 2, 2, 3]);
 * await gyre.searchsorted(s, gyre.tensor([2, 0, 5])).array(); // [1, 0, 4]
 * await gyre.searchsorted(s, gyre.tensor([2]), { side: "right" }).array(); // [3]
 * ```
 */
export function searchsorted(
  sortedSequence: Tensor,
  values: Tensor,
  options_?: SearchSortedOptions,
): Tensor {
  const op = "searchsorted";
  const o = options(op, options_, ["side"]);
  const side = o.side ?? "left";
  if (side !== "left" && side !== "right") {
    throw new ValueError({
      op,
      argument: "options.side",
      expected: '"left" or "right"',
      received: describe(side),
    });
  }
  if (!(sortedSequence instanceof Tensor)) {
    throw new ValueError({
      op,
      argument: "sortedSequence",
      expected: "a Tensor",
      received: describe(sortedSequence),
    });
  }
  if (!(values instanceof Tensor)) {
    throw new ValueError({
      op,
      argument: "values",
      expected: "a Tensor",
      received: describe(values),
    });
  }
  const sortedMeta = metaOf(sortedSequence, op, "sortedSequence");
  if (sortedMeta.shape.length !== 1) {
    throw new ShapeError({
      op,
      argument: "sortedSequence",
      expected: "a 1-d tensor",
      received: `shape ${describe(sortedMeta.shape)}`,
    });
  }
  const valuesMeta = metaOf(values, op, "values");
  if (!ORDERED.includes(sortedMeta.dtype) || valuesMeta.dtype !== sortedMeta.dtype) {
    throw new DTypeError({
      op,
      argument: "values",
      expected: `the dtype of sortedSequence (${sortedMeta.dtype}), one of float32, float16, ` +
        "int32, uint32",
      received: `${valuesMeta.dtype} and ${sortedMeta.dtype}`,
    });
  }
  if (valuesMeta.device !== sortedMeta.device) {
    throw new ValueError({
      op,
      argument: "values",
      expected: `a tensor on sortedSequence's device (${sortedMeta.device})`,
      received: valuesMeta.device,
    });
  }
  const sorted = viewOf(sortedSequence, op, "sortedSequence");
  const v = viewOf(values, op, "values");
  const { indices } = backendFor(sorted.storage.backend.name, op).searchsorted({
    overrides: planOverrides(),
    op,
    sorted,
    values: v,
    right: side === "right",
  });
  return tensorFromStorage(indices, "int32", valuesMeta.shape);
}
