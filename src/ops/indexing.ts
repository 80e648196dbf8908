/**
 * Integer-array indexing: gathers (`takeAlongAxis`, `gather`, `take`, `indexSelect`, `at`),
 * scatters (`scatter` with a reduction, `scatterAdd`), segment reductions (`segmentSum`,
 * `segmentMean`, `segmentMax`, `segmentMin`, `segmentProd`) and counting (`bincount`,
 * `histogram`, `oneHot`), with NumPy/PyTorch semantics. Indices are int32 tensors on the
 * operand's device; negative ones count from the end of their axis (segment ids: negative ones
 * are dropped, as TensorFlow's; bincount: an error). An index outside its axis is an
 * IndexError: on WASM when the op runs, on the GPU from the next read of any result.
 *
 * Each op describes its work as one iteration space with a stride list per operand (a gather or
 * a scatter job, src/contract/indexing.ts), so one kernel a device serves them all.
 * @module
 */
import { taped } from "../_tape.ts";
import type { DeviceName, View } from "../core/view.ts";
import { checkDType, type DType } from "../core/dtype.ts";
import { broadcastShapes, contiguousStrides, normalizeAxis, sizeOf } from "../core/shape.ts";
import { describe, DTypeError, ShapeError, ValueError } from "../core/errors.ts";
import { checkBooleanOption, checkOptions } from "../core/options.ts";
import { E } from "../ir/expr.ts";
import {
  type GatherJob,
  type IndexedAxis,
  INDEXING_MAX_RANK,
  type ScatterReduce,
} from "../contract/indexing.ts";
import { makePending, type Producer } from "../_lazy.ts";
import { mergeAxes } from "../plans/indexing.ts";
import { planOverrides } from "../plans/overrides.ts";
import { backendFor, runtime } from "../runtime.ts";
import { metaOf, Tensor, tensorFromStorage, viewOf } from "../tensor.ts";
import { runElementwise, type TensorLike } from "./_dispatch.ts";
import { minimum, where as select } from "./elementwise.ts";
import { concat } from "./shape.ts";
import { searchsorted } from "./sort.ts";
import { tidy } from "../tidy.ts";
import { arange, full } from "../creation.ts";

// Re-exported so that this module's `export *` in mod.ts makes it public with the options.
export type { ScatterReduce } from "../contract/indexing.ts";

/** Options of {@link takeAlongAxis}, {@link gather}, {@link scatterAdd}. */
export interface AxisOption {
  /** The indexed axis (negative counts from the end). Default -1, the last. */
  axis?: number;
}

/** Options of {@link take} and {@link indexSelect}. */
export interface TakeOptions {
  /** The indexed axis; `take` without one indexes x flattened, `indexSelect`'s default is 0. */
  axis?: number;
}

/** Options of {@link scatter}. */
export interface ScatterOptions extends AxisOption {
  /**
   * How updates meeting at one element combine with it and each other: "none" (the default)
   * writes them (which of several duplicates wins is unspecified, as in PyTorch), "sum", "prod",
   * "max", "min" or "mean" (x's value counts as one of the terms: PyTorch's `include_self`).
   */
  reduce?: ScatterReduce;
}

/** Options of the segment reductions. */
export interface SegmentOptions {
  /** The number of segments: the output's first axis. Ids at or past it are an IndexError. */
  numSegments: number;
  /**
   * The ids are sorted ascending (in row-major order): the GPU then reduces each segment in a
   * fixed order without atomics, so float sums and means are the same from run to run (and
   * faster). A promise both devices check: ids out of order are an IndexError.
   */
  sorted?: boolean;
}

/** Options of {@link bincount}. */
export interface BincountOptions {
  /** A weight per value (float32): the counts become sums of weights. */
  weights?: Tensor;
  /**
   * The output's length, which must be known without reading x: values must lie in
   * [0, minlength) (else an IndexError); within that, the result is NumPy's. (For NumPy's
   * length, max(x) + 1 when larger, see {@link bincountAsync}.)
   */
  minlength: number;
}

/** Options of {@link histogram}. */
export interface HistogramOptions {
  /** Number of equal-width bins. Default 10. */
  bins?: number;
  /** The lower and upper edges; default x's minimum and maximum (computed on the device). */
  range?: readonly [number, number];
}

/** Options of {@link oneHot}. */
export interface OneHotOptions {
  /** The result's dtype. Default "int32" (PyTorch's integer one-hot). */
  dtype?: DType;
}

function tensorArg(op: string, argument: string, value: unknown): Tensor {
  if (!(value instanceof Tensor)) {
    throw new ValueError({ op, argument, expected: "a Tensor", received: describe(value) });
  }
  return value;
}

/** An options argument checked (checkOptions: an object of known keys; null counts as absent). */
function optionsOf<T extends string>(
  op: string,
  value: unknown,
  keys: readonly T[],
): Partial<Record<T, unknown>> {
  const object = (value ?? undefined) as Record<string, unknown> | undefined;
  return checkOptions(op, object, keys) as Partial<Record<T, unknown>>;
}

function integerOption(op: string, argument: string, value: unknown, min: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value >= 2 ** 31) {
    throw new ValueError({
      op,
      argument,
      expected: `an integer of at least ${min}`,
      received: describe(value),
    });
  }
  return value;
}

/** An int32 index tensor's view on `device`. */
function indexView(op: string, argument: string, indices: unknown, device: string): View {
  const t = tensorArg(op, argument, indices);
  const meta = metaOf(t, op, argument);
  if (meta.dtype !== "int32") {
    throw new DTypeError({
      op,
      argument,
      expected: 'int32 indices (cast with .cast("int32"))',
      received: meta.dtype,
    });
  }
  if (meta.device !== device) {
    throw new ValueError({
      op,
      argument,
      expected: `a tensor on x's device (${device})`,
      received: meta.device,
    });
  }
  return viewOf(t, op, argument);
}

function rankError(op: string, argument: string, expected: string, shape: readonly number[]) {
  return new ShapeError({ op, argument, expected, received: `shape ${describe(shape)}` });
}

/** Runs a gather over `shape` with the operands' strides merged where they allow. */
function runGather(
  op: string,
  x: View,
  indices: View,
  shape: readonly number[],
  xStrides: readonly number[],
  indexStrides: readonly number[],
  axis: IndexedAxis,
): Tensor {
  const merged = mergeAxes(shape, [xStrides, indexStrides]);
  checkRank(op, merged.shape);
  const backend = backendFor(x.storage.backend.name, op);
  const job: GatherJob = {
    overrides: planOverrides(),
    op,
    x,
    indices,
    shape: merged.shape,
    xStrides: merged.strides[0],
    indexStrides: merged.strides[1],
    axis,
  };
  if (backend.name === "gpu" && runtime().fusion && sizeOf(shape) > 0) {
    // Lazy: elementwise consumers of the gathered values fold into its kernel as an epilogue
    // (the device returns null where they do not fit it), so `take(x, i).mul(w)` is one kernel
    // reading x only where i points.
    const producer: Producer = {
      op,
      dtype: x.dtype,
      run(label, epilogue, inputs) {
        const result = backend.gather({
          ...job,
          op: label,
          ...(epilogue ? { epilogue: { expr: epilogue, inputs, shape } } : {}),
        });
        return result ? result.output : null;
      },
    };
    // It holds x's and the indices' storage until it runs.
    return new Tensor(
      makePending(op, backend, E.producer(x.dtype), shape, [x, indices], [], producer),
    );
  }
  return tensorFromStorage(backend.gather(job)!.output, x.dtype, shape);
}

function checkRank(op: string, shape: readonly number[]): void {
  if (shape.length > INDEXING_MAX_RANK) {
    throw new ShapeError({
      op,
      argument: "x",
      expected:
        `at most ${INDEXING_MAX_RANK} axes that do not merge (after dropping length-1 axes)`,
      received: `${shape.length}`,
    });
  }
}

/** x's view, at least 1-d. */
function operandView(op: string, x: unknown, argument = "x"): View {
  const view = viewOf(tensorArg(op, argument, x), op, argument);
  return view.shape.length === 0 ? { ...view, shape: [1], strides: [1] } : view;
}

/**
 * NumPy's `take_along_axis`: out[..., j, ...] = x[..., indices[..., j, ...], ...] along `axis`,
 * indices of x's rank broadcasting with x on the other axes. Negative indices count from the end.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const x = gyre.tensor([[10, 30, 20], [60, 40, 50]]);
 * const order = x.argsort({ axis: 1 });
 * const sorted = gyre.takeAlongAxis(x, order, { axis: 1 }); // [[10, 20, 30], [40, 50, 60]]
 * ```
 */
export function takeAlongAxis(x: Tensor, indices: Tensor, options?: AxisOption): Tensor {
  return taped(
    "takeAlongAxis",
    [x, indices],
    { ...options },
    () => takeAlongAxisOf(x, indices, options),
  );
}

function takeAlongAxisOf(x: Tensor, indices: Tensor, options?: AxisOption): Tensor {
  const op = "takeAlongAxis";
  const { xv, iv, rank, axis } = alongAxis(op, x, indices, options);
  if (iv.shape.length !== rank) throw rankError(op, "indices", `${rank} axes, as x`, iv.shape);
  const shape = xv.shape.map((d, k) => {
    const e = iv.shape[k];
    if (k === axis) return e;
    if (d !== e && d !== 1 && e !== 1) {
      throw rankError(
        op,
        "indices",
        `a shape that broadcasts with x's ${describe(xv.shape)}`,
        iv.shape,
      );
    }
    return d === 1 ? e : d;
  });
  return runGather(
    op,
    xv,
    iv,
    shape,
    xv.strides.map((s, k) => (k === axis || xv.shape[k] === 1 ? 0 : s)),
    iv.strides.map((s, k) => (iv.shape[k] === 1 ? 0 : s)),
    { stride: xv.strides[axis], length: xv.shape[axis], negative: "wrap" },
  );
}

/** x's and the indices' views and the axis (default -1) of an op along one axis of x. */
function alongAxis(op: string, x: Tensor, indices: Tensor, options: AxisOption | undefined) {
  const o = optionsOf(op, options, ["axis"]);
  const xv = operandView(op, x);
  const iv = indexView(op, "indices", indices, xv.storage.backend.name);
  const rank = xv.shape.length;
  const axis = normalizeAxis(op, (o.axis as number | undefined) ?? -1, rank, "options.axis");
  return { xv, iv, rank, axis };
}

/** Whether indices of x's rank are no larger than x on every axis but `axis`. */
function checkAlongIndices(op: string, xv: View, iv: View, axis: number): void {
  const rank = xv.shape.length;
  if (iv.shape.length !== rank || iv.shape.some((e, k) => k !== axis && e > xv.shape[k])) {
    throw rankError(
      op,
      "indices",
      `${rank} axes, each but axis ${axis} at most x's ${describe(xv.shape)}`,
      iv.shape,
    );
  }
}

/**
 * PyTorch's `gather`: out[i][j][k] = x[i][indices[i][j][k]][k] along `axis`; the output has the
 * indices' shape, which may be smaller than x's on every axis but `axis`'s. Negative indices
 * count from the end.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const logits = gyre.tensor([[0.1, 0.9], [0.8, 0.2]]);
 * const labels = gyre.tensor([[1], [0]], { dtype: "int32" });
 * const picked = gyre.gather(logits, labels, { axis: 1 }); // [[0.9], [0.8]]
 * ```
 */
export function gather(x: Tensor, indices: Tensor, options?: AxisOption): Tensor {
  return taped("gather", [x, indices], { ...options }, () => gatherOf(x, indices, options));
}

function gatherOf(x: Tensor, indices: Tensor, options?: AxisOption): Tensor {
  const op = "gather";
  const { xv, iv, axis } = alongAxis(op, x, indices, options);
  checkAlongIndices(op, xv, iv, axis);
  return runGather(
    op,
    xv,
    iv,
    iv.shape,
    xv.strides.map((s, k) => (k === axis ? 0 : s)),
    iv.strides,
    { stride: xv.strides[axis], length: xv.shape[axis], negative: "wrap" },
  );
}

/** A take along `axis`: the indices' axes replace it. */
function takeAlong(op: string, xv: View, iv: View, axis: number): Tensor {
  const before = xv.shape.slice(0, axis);
  const after = xv.shape.slice(axis + 1);
  const zeros = (n: number) => new Array<number>(n).fill(0);
  return runGather(
    op,
    xv,
    iv,
    [...before, ...iv.shape, ...after],
    [...xv.strides.slice(0, axis), ...zeros(iv.shape.length), ...xv.strides.slice(axis + 1)],
    [...zeros(axis), ...iv.strides, ...zeros(after.length)],
    { stride: xv.strides[axis], length: xv.shape[axis], negative: "wrap" },
  );
}

/**
 * NumPy's `take`: the elements of x at `indices` along `axis` (the indices' axes replace it), or
 * of x flattened without an axis. Negative indices count from the end.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const x = gyre.tensor([[1, 2], [3, 4]]);
 * const i = gyre.tensor([3, 0], { dtype: "int32" });
 * const flat = gyre.take(x, i); // [4, 1]
 * const rows = gyre.take(x, gyre.tensor([1, 1], { dtype: "int32" }), { axis: 0 }); // [[3, 4], [3, 4]]
 * ```
 */
export function take(x: Tensor, indices: Tensor, options?: TakeOptions): Tensor {
  return taped("take", [x, indices], { ...options }, () => takeOf(x, indices, options));
}

function takeOf(x: Tensor, indices: Tensor, options?: TakeOptions): Tensor {
  // Intermediate tensors are disposed; the result is kept.
  return tidy(() => {
    const op = "take";
    const o = optionsOf(op, options, ["axis"]);
    let xv = operandView(op, x);
    const iv = indexView(op, "indices", indices, xv.storage.backend.name);
    if (o.axis === undefined) xv = operandView(op, tensorArg(op, "x", x).reshape([-1]));
    const axis = normalizeAxis(
      op,
      (o.axis as number | undefined) ?? 0,
      xv.shape.length,
      "options.axis",
    );
    return takeAlong(op, xv, iv, axis);
  });
}

/**
 * PyTorch's `index_select`: the slices of x at the 1-d `indices` along `axis` (default 0).
 * Negative indices count from the end.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const table = gyre.tensor([[0, 0], [1, 1], [2, 2]]);
 * const rows = gyre.indexSelect(table, gyre.tensor([2, 0], { dtype: "int32" })); // [[2, 2], [0, 0]]
 * ```
 */
export function indexSelect(x: Tensor, indices: Tensor, options?: TakeOptions): Tensor {
  return taped(
    "indexSelect",
    [x, indices],
    { ...options },
    () => indexSelectOf(x, indices, options),
  );
}

function indexSelectOf(x: Tensor, indices: Tensor, options?: TakeOptions): Tensor {
  // Intermediate tensors are disposed; the result is kept.
  return tidy(() => {
    const op = "indexSelect";
    const o = optionsOf(op, options, ["axis"]);
    const xv = operandView(op, x);
    const iv = indexView(op, "indices", indices, xv.storage.backend.name);
    if (iv.shape.length > 1) throw rankError(op, "indices", "a 1-d tensor", iv.shape);
    const axis = normalizeAxis(
      op,
      (o.axis as number | undefined) ?? 0,
      xv.shape.length,
      "options.axis",
    );
    const flat = iv.shape.length === 0 ? { ...iv, shape: [1], strides: [1] } : iv;
    return takeAlong(op, xv, flat, axis);
  });
}

/** One axis of {@link at}: a range as `slice` takes it, or an int32 tensor of indices. */
export type AtRange = number | null | undefined | readonly (number | null)[] | Tensor;

/**
 * NumPy indexing with one integer array: `at(x, null, idx)` is `x[:, idx]`, `at(x, 0, idx)` is
 * `x[0, idx]`. Every range but the tensor is basic indexing (see `slice`); the tensor's axes
 * replace its axis, or come first when numbers and the tensor are not next to each other (NumPy's
 * rule for separated advanced indices).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const x = gyre.arange(12).reshape([3, 4]);
 * const cols = gyre.at(x, [1, 3], gyre.tensor([0, 3], { dtype: "int32" })); // [[4, 7], [8, 11]]
 * ```
 */
export function at(x: Tensor, ...ranges: AtRange[]): Tensor {
  return taped("at", [x, ...ranges], { ranges }, () => atOf(x, ...ranges));
}

function atOf(x: Tensor, ...ranges: AtRange[]): Tensor {
  // Intermediate tensors are disposed; the result is kept.
  return tidy(() => {
    const op = "at";
    const t = tensorArg(op, "x", x);
    ranges.forEach((r, k) => {
      const basic = r === null || r === undefined || typeof r === "number" || Array.isArray(r);
      if (!basic && !(r instanceof Tensor)) {
        throw new ValueError({
          op,
          argument: `ranges[${k}]`,
          expected: "an index, a [start, end, step] array, null, or an int32 index tensor",
          received: describe(r),
        });
      }
    });
    const positions = ranges.flatMap((r, k) => (r instanceof Tensor ? [k] : []));
    if (positions.length === 0) return t.slice(...(ranges as never[]));
    if (positions.length > 1) {
      throw new ValueError({
        op,
        argument: "ranges",
        expected: "at most one index tensor",
        received: `${positions.length}`,
      });
    }
    const p = positions[0];
    const basic = ranges.map((r, k) => (k === p ? null : r)) as never[];
    const sliced = t.slice(...basic);
    // The tensor's axis among those the numbers leave.
    const dropped = (k: number) => typeof ranges[k] === "number";
    let axis = 0;
    for (let k = 0; k < p; k++) if (!dropped(k)) axis++;
    const indices = ranges[p] as Tensor;
    const result = indexSelectAlong(op, sliced, indices, axis);
    const numbers = ranges.flatMap((r, k) => (typeof r === "number" ? [k] : []));
    const advanced = [...numbers, p].sort((a, b) => a - b);
    const adjacent = advanced.every((k, i) => i === 0 || k === advanced[i - 1] + 1);
    if (adjacent || axis === 0) return result;
    const rank = result.shape.length;
    const r = metaOf(indices, op, "indices").shape.length;
    const front = Array.from({ length: r }, (_, i) => axis + i);
    const rest = Array.from({ length: rank }, (_, i) => i).filter((i) => i < axis || i >= axis + r);
    return result.transpose([...front, ...rest]);
  });
}

function indexSelectAlong(op: string, x: Tensor, indices: Tensor, axis: number): Tensor {
  const xv = operandView(op, x);
  const iv = indexView(op, "indices", indices, xv.storage.backend.name);
  return takeAlong(op, xv, iv, normalizeAxis(op, axis, xv.shape.length, "ranges"));
}

const REDUCES: readonly ScatterReduce[] = ["none", "sum", "prod", "max", "min", "mean"];

/** An operand of x's dtype and device: a tensor, or a number filling `shape`. */
function updatesView(op: string, updates: unknown, x: View, shape: readonly number[]): View {
  if (typeof updates === "number") {
    const device = x.storage.backend.name;
    const one = viewOf(full([1], updates, { dtype: x.dtype, device }), op, "updates");
    return { ...one, shape: [...shape], strides: shape.map(() => 0) };
  }
  const t = tensorArg(op, "updates", updates);
  const meta = metaOf(t, op, "updates");
  if (meta.dtype !== x.dtype) {
    throw new DTypeError({
      op,
      argument: "updates",
      expected: `x's dtype (${x.dtype})`,
      received: meta.dtype,
    });
  }
  if (meta.device !== x.storage.backend.name) {
    throw new ValueError({
      op,
      argument: "updates",
      expected: `a tensor on x's device (${x.storage.backend.name})`,
      received: meta.device,
    });
  }
  return viewOf(t, op, "updates");
}

function checkReduceDType(op: string, argument: string, reduce: ScatterReduce, dtype: DType): void {
  if (dtype === "bool" && reduce !== "none" && reduce !== "max" && reduce !== "min") {
    throw new DTypeError({
      op,
      argument,
      expected: `a numeric dtype for reduce "${reduce}" (bool takes "none", "max" or "min")`,
      received: dtype,
    });
  }
}

/** Runs a scatter over `shape` with the operands' strides merged where they allow. */
function runScatter(
  op: string,
  base: View | number | null,
  outShape: readonly number[],
  dtype: DType,
  updates: View | null,
  indices: View,
  shape: readonly number[],
  strides: [readonly number[], readonly number[], readonly number[]],
  axis: IndexedAxis,
  reduce: ScatterReduce,
  extra: {
    /** The ids are sorted (segment ops): see ScatterJob.sorted. */
    sorted?: boolean;
    /** The argument the indices came from, as an IndexError names it ("indices" by default). */
    indexName?: string;
    /** A compaction: the indices are the rows' bool words (see ScatterJob.compact). */
    compact?: boolean;
  } = {},
): Tensor {
  const { sorted = false, indexName, compact } = extra;
  // A compaction keeps its axes: its first is the rows' (one row merges away otherwise).
  const merged = compact && sizeOf(shape) > 0
    ? { shape: [...shape], strides: strides.map((s) => [...s]) }
    : mergeAxes(shape, strides);
  checkRank(op, merged.shape);
  const { output } = backendFor(indices.storage.backend.name, op).scatter({
    overrides: planOverrides(),
    op,
    base: typeof base === "number" ? null : base,
    ...(typeof base === "number" ? { fill: base } : {}),
    outShape,
    dtype,
    updates,
    indices,
    shape: sizeOf(shape) === 0 ? [0] : merged.shape,
    updateStrides: merged.strides[0],
    indexStrides: merged.strides[1],
    outStrides: merged.strides[2],
    axis,
    reduce,
    sorted,
    ...(indexName ? { indexName } : {}),
    ...(compact ? { compact } : {}),
  });
  return tensorFromStorage(output, dtype, outShape);
}

/**
 * PyTorch's `scatter` and `scatter_reduce` (with `include_self`), returning a new tensor: for
 * every position of `indices` (x's rank, no larger than `updates` anywhere nor than x off the
 * axis), the update there meets x's element at the index along `axis` (default -1). Negative
 * indices count from the end. `updates` may be a number. With float sums, means and products on
 * the GPU the order in which updates meet varies, so results can differ in their last bits
 * between runs; max, min and integer results do not.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const x = gyre.zeros([2, 3]);
 * const i = gyre.tensor([[0, 2], [1, 1]], { dtype: "int32" });
 * const y = gyre.scatter(x, i, gyre.tensor([[5, 6], [7, 8]]), { axis: 1, reduce: "sum" });
 * // [[5, 0, 6], [0, 15, 0]]
 * ```
 */
export function scatter(
  x: Tensor,
  indices: Tensor,
  updates: Tensor | number,
  options?: ScatterOptions,
): Tensor {
  return taped(
    "scatter",
    [x, indices, updates],
    { ...options },
    () => scatterOf(x, indices, updates, options),
  );
}

function scatterOf(
  x: Tensor,
  indices: Tensor,
  updates: Tensor | number,
  options?: ScatterOptions,
): Tensor {
  return scatterAlong("scatter", x, indices, updates, options);
}

/**
 * `scatter` with `reduce: "sum"` (PyTorch's `scatter_add`).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const bins = gyre.scatterAdd(gyre.zeros([3]), gyre.tensor([0, 2, 2], { dtype: "int32" }), gyre.ones([3]));
 * // [1, 0, 2]
 * ```
 */
export function scatterAdd(
  x: Tensor,
  indices: Tensor,
  updates: Tensor | number,
  options?: AxisOption,
): Tensor {
  return taped(
    "scatterAdd",
    [x, indices, updates],
    { ...options },
    () => scatterAddOf(x, indices, updates, options),
  );
}

function scatterAddOf(
  x: Tensor,
  indices: Tensor,
  updates: Tensor | number,
  options?: AxisOption,
): Tensor {
  const o = optionsOf("scatterAdd", options, ["axis"]);
  return scatterAlong("scatterAdd", x, indices, updates, {
    axis: o.axis as number | undefined,
    reduce: "sum",
  });
}

function scatterAlong(
  op: string,
  x: Tensor,
  indices: Tensor,
  updates: Tensor | number,
  options?: ScatterOptions,
): Tensor {
  // Intermediate tensors (a number made a tensor) are disposed; the result is kept.
  return tidy(() => {
    const o = optionsOf(op, options, ["axis", "reduce"]);
    const reduce = (o.reduce ?? "none") as ScatterReduce;
    if (!REDUCES.includes(reduce)) {
      throw new ValueError({
        op,
        argument: "options.reduce",
        expected: REDUCES.map((r) => `"${r}"`).join(", "),
        received: describe(o.reduce),
      });
    }
    const xv = operandView(op, x);
    const iv = indexView(op, "indices", indices, xv.storage.backend.name);
    const rank = xv.shape.length;
    const axis = normalizeAxis(op, (o.axis as number | undefined) ?? -1, rank, "options.axis");
    checkReduceDType(op, "x", reduce, xv.dtype);
    checkAlongIndices(op, xv, iv, axis);
    const uv = updatesView(op, updates, xv, iv.shape);
    if (uv.shape.length !== rank || uv.shape.some((e, k) => e < iv.shape[k])) {
      throw rankError(
        op,
        "updates",
        `${rank} axes, each at least the indices' ${describe(iv.shape)}`,
        uv.shape,
      );
    }
    const outStrides = contiguousStrides(xv.shape);
    return runScatter(
      op,
      xv,
      xv.shape,
      xv.dtype,
      uv,
      iv,
      iv.shape,
      [uv.strides, iv.strides, outStrides.map((s, k) => (k === axis ? 0 : s))],
      { stride: outStrides[axis], length: xv.shape[axis], negative: "wrap" },
      reduce,
    );
  });
}

/** A segment reduction of data's leading axes (the ids' shape) into `numSegments` rows. */
function segmentReduce(
  op: string,
  reduce: ScatterReduce,
  data: Tensor,
  segmentIds: Tensor,
  options: SegmentOptions,
): Tensor {
  // Intermediate tensors (a number made a tensor) are disposed; the result is kept.
  return tidy(() => {
    const o = optionsOf(op, options, ["numSegments", "sorted"]);
    if (o.numSegments === undefined) {
      throw new ValueError({
        op,
        argument: "options.numSegments",
        expected: "the number of segments (the output's first axis)",
        received: "undefined",
      });
    }
    const segments = integerOption(op, "options.numSegments", o.numSegments, 0);
    checkBooleanOption(op, "options.sorted", o.sorted);
    let dv = viewOf(tensorArg(op, "data", data), op, "data");
    let iv = indexView(op, "segmentIds", segmentIds, dv.storage.backend.name);
    checkReduceDType(op, "data", reduce, dv.dtype);
    let k = iv.shape.length;
    if (k === 0 || k > dv.shape.length || iv.shape.some((e, d) => e !== dv.shape[d])) {
      throw rankError(
        op,
        "segmentIds",
        `the leading axes of data's shape ${describe(dv.shape)}`,
        iv.shape,
      );
    }
    if (o.sorted === true && k > 1) {
      // Sorted ids over one axis of rows, as the in-order reduction walks them.
      const rows = sizeOf(iv.shape);
      const rest = dv.shape.slice(k);
      iv = viewOf((segmentIds as Tensor).reshape([rows]), op, "segmentIds");
      dv = viewOf((data as Tensor).reshape([rows, ...rest]), op, "data");
      k = 1;
    }
    const rest = dv.shape.slice(k);
    const inner = sizeOf(rest);
    const restStrides = contiguousStrides(rest);
    return runScatter(
      op,
      null,
      [segments, ...rest],
      dv.dtype,
      dv,
      iv,
      dv.shape,
      [dv.strides, [...iv.strides, ...rest.map(() => 0)], [
        ...iv.shape.map(() => 0),
        ...restStrides,
      ]],
      { stride: inner, length: segments, negative: "drop" },
      reduce,
      { sorted: o.sorted === true, indexName: "segmentIds" },
    );
  });
}

/**
 * TensorFlow's `unsorted_segment_sum`: out[s] = the sum of data's slices whose id is s; ids
 * (int32) cover data's leading axes; negative ids are dropped; an empty segment is 0. Float sums
 * on the GPU can differ in their last bits between runs (see `scatter`), unless the ids are
 * `sorted`: then the order is fixed.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const data = gyre.tensor([[1, 2], [3, 4], [5, 6]]);
 * const ids = gyre.tensor([0, 2, 0], { dtype: "int32" });
 * const s = gyre.segmentSum(data, ids, { numSegments: 3 }); // [[6, 8], [0, 0], [3, 4]]
 * ```
 */
export function segmentSum(data: Tensor, segmentIds: Tensor, options: SegmentOptions): Tensor {
  return taped(
    "segmentSum",
    [data, segmentIds],
    { ...options },
    () => segmentSumOf(data, segmentIds, options),
  );
}

function segmentSumOf(data: Tensor, segmentIds: Tensor, options: SegmentOptions): Tensor {
  return segmentReduce("segmentSum", "sum", data, segmentIds, options);
}

/**
 * The mean of each segment (see {@link segmentSum}); an empty segment is 0 (integers: the floor of
 * the mean).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const m = gyre.segmentMean(gyre.tensor([1, 3, 10]), gyre.tensor([0, 0, 1], { dtype: "int32" }), { numSegments: 2 });
 * // [2, 10]
 * ```
 */
export function segmentMean(data: Tensor, segmentIds: Tensor, options: SegmentOptions): Tensor {
  return taped(
    "segmentMean",
    [data, segmentIds],
    { ...options },
    () => segmentMeanOf(data, segmentIds, options),
  );
}

function segmentMeanOf(data: Tensor, segmentIds: Tensor, options: SegmentOptions): Tensor {
  return segmentReduce("segmentMean", "mean", data, segmentIds, options);
}

/**
 * The maximum of each segment (see {@link segmentSum}); NaN wins; an empty segment holds the
 * identity: -Infinity for floats, the least value for integers (TensorFlow gives the least finite
 * float instead).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const m = gyre.segmentMax(gyre.tensor([1, 3, 10]), gyre.tensor([0, 0, 1], { dtype: "int32" }), { numSegments: 2 });
 * // [3, 10]
 * ```
 */
export function segmentMax(data: Tensor, segmentIds: Tensor, options: SegmentOptions): Tensor {
  return taped(
    "segmentMax",
    [data, segmentIds],
    { ...options },
    () => segmentMaxOf(data, segmentIds, options),
  );
}

function segmentMaxOf(data: Tensor, segmentIds: Tensor, options: SegmentOptions): Tensor {
  return segmentReduce("segmentMax", "max", data, segmentIds, options);
}

/**
 * The minimum of each segment (see {@link segmentMax}); an empty segment holds +Infinity or the
 * integer dtype's greatest value.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const m = gyre.segmentMin(gyre.tensor([1, 3, 10]), gyre.tensor([0, 0, 1], { dtype: "int32" }), { numSegments: 2 });
 * // [1, 10]
 * ```
 */
export function segmentMin(data: Tensor, segmentIds: Tensor, options: SegmentOptions): Tensor {
  return taped(
    "segmentMin",
    [data, segmentIds],
    { ...options },
    () => segmentMinOf(data, segmentIds, options),
  );
}

function segmentMinOf(data: Tensor, segmentIds: Tensor, options: SegmentOptions): Tensor {
  return segmentReduce("segmentMin", "min", data, segmentIds, options);
}

/**
 * The product of each segment (see {@link segmentSum}); an empty segment is 1.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const p = gyre.segmentProd(gyre.tensor([2, 3, 10]), gyre.tensor([0, 0, 1], { dtype: "int32" }), { numSegments: 2 });
 * // [6, 10]
 * ```
 */
export function segmentProd(data: Tensor, segmentIds: Tensor, options: SegmentOptions): Tensor {
  return taped(
    "segmentProd",
    [data, segmentIds],
    { ...options },
    () => segmentProdOf(data, segmentIds, options),
  );
}

function segmentProdOf(data: Tensor, segmentIds: Tensor, options: SegmentOptions): Tensor {
  return segmentReduce("segmentProd", "prod", data, segmentIds, options);
}

/**
 * NumPy's `bincount` with a length known up front: out[v] counts the values equal to v (or sums
 * their weights) for v in [0, minlength); a value outside that range is an IndexError.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const counts = gyre.bincount(gyre.tensor([0, 1, 1, 3], { dtype: "int32" }), { minlength: 4 });
 * // [1, 2, 0, 1]
 * ```
 */
export function bincount(x: Tensor, options: BincountOptions): Tensor {
  return taped("bincount", [x, options?.weights], { ...options }, () => bincountOf(x, options));
}

function bincountOf(x: Tensor, options: BincountOptions): Tensor {
  // Intermediate tensors are disposed; the result is kept.
  return tidy(() => {
    const op = "bincount";
    const o = optionsOf(op, options, ["weights", "minlength"]);
    const length = integerOption(op, "options.minlength", o.minlength, 0);
    const iv = viewOf(tensorArg(op, "x", x), op, "x");
    const device = iv.storage.backend.name;
    indexView(op, "x", x, device);
    if (iv.shape.length !== 1) throw rankError(op, "x", "a 1-d tensor", iv.shape);
    let updates: View;
    let dtype: DType = "int32";
    if (o.weights !== undefined) {
      const w = viewOf(tensorArg(op, "options.weights", o.weights), op, "options.weights");
      if (w.dtype !== "float32") {
        throw new DTypeError({
          op,
          argument: "options.weights",
          expected: "float32",
          received: w.dtype,
        });
      }
      if (w.shape.length !== 1 || w.shape[0] !== iv.shape[0]) {
        throw rankError(op, "options.weights", `x's shape ${describe(iv.shape)}`, w.shape);
      }
      updates = w;
      dtype = "float32";
    } else {
      const one = viewOf(full([1], 1, { dtype: "int32", device }), op, "x");
      updates = { ...one, shape: [...iv.shape], strides: [0] };
    }
    return runScatter(
      op,
      null,
      [length],
      dtype,
      updates,
      iv,
      iv.shape,
      [updates.strides, iv.strides, [0]],
      { stride: 1, length, negative: "error" },
      "sum",
      { indexName: "x" },
    );
  });
}

/**
 * NumPy's `bincount` exactly: the output's length is max(x) + 1 or `minlength` (default 0),
 * whichever is larger, so x's maximum is read back first (one device synchronisation); negative
 * values are an IndexError.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const counts = await gyre.bincountAsync(gyre.tensor([0, 1, 1, 3], { dtype: "int32" }));
 * // [1, 2, 0, 1]
 * ```
 */
export async function bincountAsync(
  x: Tensor,
  options: Partial<BincountOptions> = {},
): Promise<Tensor> {
  const op = "bincountAsync";
  const o = optionsOf(op, options, ["weights", "minlength"]);
  const minlength = integerOption(op, "options.minlength", o.minlength ?? 0, 0);
  const t = tensorArg(op, "x", x);
  const meta = metaOf(t, op, "x");
  indexView(op, "x", t, meta.device);
  let length = minlength;
  if (sizeOf(meta.shape) > 0) {
    const max = tidy(() => t.max());
    try {
      length = Math.max(length, (await max.data())[0] + 1);
    } finally {
      max.dispose();
    }
  }
  const weights = o.weights as Tensor | undefined;
  return bincount(t, { minlength: length, ...(weights ? { weights } : {}) });
}

/**
 * NumPy's `histogram`: counts (int32) of x's values in `bins` equal-width bins over `range`
 * (default x's minimum and maximum, found on the device: no read-back), and the bins' edges
 * (float32, bins + 1 of them). The last bin includes its upper edge; values outside the range and
 * NaN are not counted. A value's bin is floor((v - lo) * bins / (hi - lo)), without NumPy's
 * correction against the rounded edges, so a value within an ULP of an inner edge may land in the
 * neighbouring bin.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const [counts, edges] = gyre.histogram(gyre.tensor([0, 1, 1, 2, 4]), { bins: 4 });
 * // counts [1, 2, 1, 1], edges [0, 1, 2, 3, 4]
 * ```
 */
export function histogram(x: Tensor, options?: HistogramOptions): [Tensor, Tensor] {
  // Intermediate tensors are disposed; the result is kept.
  return tidy(() => {
    const op = "histogram";
    const o = optionsOf(op, options, ["bins", "range"]);
    const bins = integerOption(op, "options.bins", o.bins ?? 10, 1);
    const t = tensorArg(op, "x", x);
    const meta = metaOf(t, op, "x");
    if (meta.dtype === "bool") {
      throw new DTypeError({ op, argument: "x", expected: "a numeric dtype", received: "bool" });
    }
    const v = (meta.dtype === "float32" ? t : t.cast("float32")).reshape([-1]);
    let lo: Tensor | number, hi: Tensor | number;
    if (o.range !== undefined) {
      const r = o.range as unknown;
      if (
        !Array.isArray(r) || r.length !== 2 || !r.every((e) =>
          typeof e === "number" && Number.isFinite(e)
        ) ||
        r[0] > r[1]
      ) {
        throw new ValueError({
          op,
          argument: "options.range",
          expected: "[lo, hi] with finite lo <= hi",
          received: describe(r),
        });
      }
      [lo, hi] = r[0] === r[1] ? [r[0] - 0.5, r[1] + 0.5] : [r[0], r[1]];
    } else if (meta.shape.length === 0 || sizeOf(meta.shape) > 0) {
      const min = v.min();
      const max = v.max();
      // NumPy widens an empty range by 0.5 each way.
      const same = min.equal(max);
      lo = min.sub(same.cast("float32").mul(0.5));
      hi = max.add(same.cast("float32").mul(0.5));
    } else [lo, hi] = [0, 1];
    const width = typeof hi === "number" && typeof lo === "number"
      ? hi - lo
      : runElementwise(op, [hi, lo], ["hi", "lo"], ([h, l]) => E.binary("sub", h, l, "float32"));
    const step = typeof width === "number" ? bins / width : width.reciprocal().mul(bins);
    const scaled = v.sub(lo).mul(step).floor();
    const inRange = v.greaterEqual(lo).logicalAnd(v.lessEqual(hi));
    const bin = scaled.minimum(bins - 1).cast("int32");
    const ids = select(inRange, bin, -1);
    const counts = segmentReduce(
      op,
      "sum",
      full([sizeOf(meta.shape)], 1, { dtype: "int32", device: meta.device }),
      ids,
      {
        numSegments: bins,
      },
    );
    const edges = arange(bins + 1, undefined, 1, { dtype: "float32", device: meta.device })
      .mul(typeof width === "number" ? width / bins : width.div(bins))
      .add(lo);
    return [counts, edges];
  });
}

/**
 * One-hot rows: out[..., c] = 1 where indices[...] == c, for c in [0, numClasses); an index
 * outside that range gives a row of zeros (TensorFlow's rule). An elementwise expression, so
 * `oneHot(labels, n).mul(w).sum({ axis: -1 })` fuses into one kernel and never materialises the
 * one-hot matrix.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const h = gyre.oneHot(gyre.tensor([0, 2], { dtype: "int32" }), 3); // [[1, 0, 0], [0, 0, 1]]
 * ```
 */
export function oneHot(indices: Tensor, numClasses: number, options?: OneHotOptions): Tensor {
  // Intermediate tensors are disposed; the result is kept.
  return tidy(() => {
    const op = "oneHot";
    const o = optionsOf(op, options, ["dtype"]);
    const t = tensorArg(op, "indices", indices);
    const meta = metaOf(t, op, "indices");
    indexView(op, "indices", t, meta.device);
    const classes = integerOption(op, "numClasses", numClasses, 0);
    const dtype = o.dtype === undefined ? "int32" : checkDType(op, "options.dtype", o.dtype);
    const iota = arange(classes, undefined, 1, { dtype: "int32", device: meta.device });
    return runElementwise(
      op,
      [t.expandDims(-1), iota],
      ["indices", "numClasses"],
      ([i, c]) => E.cast(E.binary("equal", i, c, "bool"), dtype),
    );
  });
}

/** Options of {@link nonzero}, {@link argwhere} and {@link maskedSelect}. */
export interface CompactOptions {
  /**
   * The result's length along its first axis (JAX's `size`): the first `size` selected elements,
   * padded with `fillValue` when fewer are selected. Required: the number selected is only known
   * once the data is read, and a tensor's shape is known when it is made (the `...Async` forms
   * read it and return exactly as many).
   */
  size: number;
  /** What pads the result past the selected elements. Default 0. */
  fillValue?: number;
}

function sizeOption(op: string, options: unknown): { size: number; fillValue: number } {
  const o = optionsOf(op, options, ["size", "fillValue"]);
  if (o.size === undefined) {
    throw new ValueError({
      op,
      argument: "options.size",
      expected: `the result's length (or use ${op}Async, which reads how many are selected)`,
      received: "undefined",
    });
  }
  const size = integerOption(op, "options.size", o.size, 0);
  const fillValue = o.fillValue ?? 0;
  if (typeof fillValue !== "number") {
    throw new ValueError({
      op,
      argument: "options.fillValue",
      expected: "a number",
      received: describe(fillValue),
    });
  }
  return { size, fillValue };
}

/**
 * Scatters the selected rows of `values` ([n, ...]) to their positions in a [size, ...] result
 * filled with `fill`: one scatter, its mask dropping the unselected rows and its "drop-all" rule
 * those past `size`.
 */
function compact(op: string, values: Tensor | null, mask: Tensor, size: number, fill: number) {
  const flat = mask.reshape([-1]);
  const selected = metaOf(flat, op, "mask").dtype === "bool" ? flat : flat.cast("bool");
  // Values null: each selected element's own position (argwhere of a 1-d x), int32.
  const meta = values
    ? metaOf(values, op, "x")
    : { shape: [sizeOf(metaOf(selected, op, "mask").shape)], dtype: "int32" as const };
  const rest = meta.shape.slice(1);
  const mv = viewOf(selected, op, "mask");
  const uv = values ? viewOf(values, op, "x") : null;
  const restStrides = contiguousStrides(rest);
  return runScatter(
    op,
    fill,
    [size, ...rest],
    meta.dtype,
    uv,
    mv,
    meta.shape,
    [
      uv ? uv.strides : meta.shape.map(() => 0),
      [mv.strides[0], ...rest.map(() => 0)],
      [0, ...restStrides],
    ],
    { stride: sizeOf(rest), length: size, negative: "drop-all" },
    "none",
    { compact: true, indexName: "mask" },
  );
}

/**
 * The coordinates of x's non-zero elements (NaN counts as non-zero), one int32 row each in
 * row-major order: PyTorch's `nonzero`, NumPy's `argwhere`, here of a fixed `size` (JAX's
 * `size`, rows past the selected ones filled with `fillValue`). A 0-d x is seen as 1-d.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const x = gyre.tensor([[0, 3], [4, 0]]);
 * const rows = gyre.argwhere(x, { size: 3, fillValue: -1 }); // [[0, 1], [1, 0], [-1, -1]]
 * ```
 */
export function argwhere(x: Tensor, options: CompactOptions): Tensor {
  return argwhereAs("argwhere", x, options);
}

/** argwhere, its errors naming `op`. */
function argwhereAs(op: string, x: Tensor, options: CompactOptions): Tensor {
  // Intermediate tensors are disposed; the result is kept.
  return tidy(() => {
    const { size, fillValue } = sizeOption(op, options);
    const t = tensorArg(op, "x", x);
    const meta = metaOf(t, op, "x");
    const shape = meta.shape.length === 0 ? [1] : meta.shape;
    // 1-d: each selected element's coordinate is its position, which the scatter writes itself.
    if (shape.length === 1) return compact(op, null, t, size, fillValue).reshape([size, 1]);
    const n = sizeOf(shape);
    const linear = arange(n, undefined, 1, { dtype: "int32", device: meta.device });
    const strides = contiguousStrides(shape);
    // Coordinate k of element t: (t div stride_k) mod shape_k, in int32 (t below 2^31).
    const coords = shape.map((d, k) =>
      runElementwise(op, [linear], ["x"], ([t]) =>
        E.binary(
          "mod",
          E.binary("floorDiv", t, E.constant(strides[k], "int32")),
          E.constant(d, "int32"),
        )).expandDims(1)
    );
    return compact(op, concat(coords, 1), t, size, fillValue);
  });
}

/**
 * NumPy's `nonzero` (and one-argument `where`): one int32 index tensor per axis of x, of a
 * fixed `size` (see {@link argwhere}).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const [rows, cols] = gyre.nonzero(gyre.tensor([[0, 3], [4, 0]]), { size: 2 }); // [0, 1], [1, 0]
 * ```
 */
export function nonzero(x: Tensor, options: CompactOptions): Tensor[] {
  return nonzeroAs("nonzero", x, options);
}

function nonzeroAs(op: string, x: Tensor, options: CompactOptions): Tensor[] {
  // Intermediate tensors are disposed; the result is kept.
  return tidy(() => {
    const found = argwhereAs(op, x, options);
    const rank = found.shape[1];
    return Array.from({ length: rank }, (_, k) => found.slice(null, k));
  });
}

/**
 * NumPy's `where`: with three arguments, `condition ? a : b` elementwise (broadcast across all
 * three; `a` and `b` promote); with a condition and `{ size, fillValue }` only, the indices of
 * its non-zero elements, one int32 tensor per axis (JAX's `where(condition, size=...)`, which
 * is {@link nonzero}).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const x = gyre.tensor([-1, 2, 0, 5]);
 * const clipped = gyre.where(x.greater(0), x, 0); // [0, 2, 0, 5]
 * const [at] = gyre.where(x.greater(0), { size: 2 }); // [1, 3]
 * ```
 */
export function where(condition: TensorLike, a: TensorLike, b: TensorLike): Tensor;
/**
 * One-argument `where`: the indices of `condition`'s non-zero elements, one int32 tensor per
 * axis, of a fixed `size` (see {@link nonzero}).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const [rows, cols] = gyre.where(gyre.tensor([[0, 3], [4, 0]]), { size: 2 }); // [0, 1], [1, 0]
 * ```
 */
export function where(condition: Tensor, options: CompactOptions): Tensor[];
export function where(
  condition: TensorLike,
  a?: TensorLike | CompactOptions,
  b?: TensorLike,
): Tensor | Tensor[] {
  if (arguments.length >= 3) return select(condition, a as TensorLike, b as TensorLike);
  // One or two arguments: the indices form, whose options name its size.
  if (a !== undefined && (typeof a !== "object" || a instanceof Tensor)) {
    throw new ValueError({
      op: "where",
      argument: "b",
      expected: "a third argument (or `{ size }` alone, for the indices of the non-zero elements)",
      received: "none",
    });
  }
  return nonzeroAs("where", tensorArg("where", "condition", condition), a as CompactOptions);
}

/**
 * One-argument {@link where} with exactly as many indices as `condition` has non-zero elements
 * (one device synchronisation): NumPy's `where(condition)`.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const [at] = await gyre.whereAsync(gyre.tensor([0, 5, 0, 7])); // [1, 3]
 * ```
 */
export async function whereAsync(condition: Tensor): Promise<Tensor[]> {
  const t = tensorArg("whereAsync", "condition", condition);
  return nonzeroAs("whereAsync", t, { size: await selectedCount(t) });
}

/**
 * The elements of x where `mask` (broadcast to x's shape) is true, in row-major order: PyTorch's
 * `masked_select`, of a fixed `size` (see {@link argwhere}).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const x = gyre.tensor([1, -2, 3, -4]);
 * const positive = gyre.maskedSelect(x, x.greater(0), { size: 2 }); // [1, 3]
 * ```
 */
export function maskedSelect(x: Tensor, mask: Tensor, options: CompactOptions): Tensor {
  return taped("maskedSelect", [x, mask], { ...options }, () => maskedSelectOf(x, mask, options));
}

function maskedSelectOf(x: Tensor, mask: Tensor, options: CompactOptions): Tensor {
  // Intermediate tensors are disposed; the result is kept.
  return tidy(() => {
    const op = "maskedSelect";
    const { size, fillValue } = sizeOption(op, options);
    const t = tensorArg(op, "x", x);
    const m = tensorArg(op, "mask", mask);
    const meta = metaOf(t, op, "x");
    const maskMeta = metaOf(m, op, "mask");
    if (maskMeta.dtype !== "bool") {
      throw new DTypeError({ op, argument: "mask", expected: "bool", received: maskMeta.dtype });
    }
    const shape = broadcastShapes(op, meta.shape, maskMeta.shape, "mask");
    const values = t.broadcastTo(shape).reshape([-1]);
    return compact(op, values, m.broadcastTo(shape), size, fillValue);
  });
}

/** How many elements of `mask` are true (non-zero), read back: one device synchronisation. */
async function selectedCount(mask: Tensor): Promise<number> {
  const count = tidy(() => mask.cast("bool").cast("int32").sum());
  try {
    return (await count.data())[0];
  } finally {
    count.dispose();
  }
}

/**
 * {@link argwhere} with exactly as many rows as x has non-zero elements, read back first (one
 * device synchronisation).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const rows = await gyre.argwhereAsync(gyre.tensor([0, 5, 0, 7])); // [[1], [3]]
 * ```
 */
export async function argwhereAsync(x: Tensor): Promise<Tensor> {
  return argwhere(x, { size: await selectedCount(tensorArg("argwhereAsync", "x", x)) });
}

/**
 * {@link nonzero} with exactly as many indices as x has non-zero elements (one device
 * synchronisation).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const [i] = await gyre.nonzeroAsync(gyre.tensor([0, 5, 0, 7])); // [1, 3]
 * ```
 */
export async function nonzeroAsync(x: Tensor): Promise<Tensor[]> {
  return nonzero(x, { size: await selectedCount(tensorArg("nonzeroAsync", "x", x)) });
}

/**
 * {@link maskedSelect} with exactly as many elements as `mask` selects (one device
 * synchronisation).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const x = gyre.tensor([1, -2, 3]);
 * const positive = await gyre.maskedSelectAsync(x, x.greater(0)); // [1, 3]
 * ```
 */
export async function maskedSelectAsync(x: Tensor, mask: Tensor): Promise<Tensor> {
  const m = tensorArg("maskedSelectAsync", "mask", mask);
  const shape = broadcastShapes(
    "maskedSelectAsync",
    metaOf(tensorArg("maskedSelectAsync", "x", x), "maskedSelectAsync", "x").shape,
    metaOf(m, "maskedSelectAsync", "mask").shape,
    "mask",
  );
  const broadcast = m.broadcastTo(shape);
  const count = await selectedCount(broadcast).finally(() => broadcast.dispose());
  return maskedSelect(x, m, { size: count });
}

/** Options of {@link unique}. */
export interface UniqueOptions extends CompactOptions {
  /** Also return how many times each unique value occurs (int32). Default false. */
  returnCounts?: boolean;
  /** Also return, for each element of x (flattened), the index of its value among the unique. */
  returnInverse?: boolean;
}

/** What {@link unique} returns: the values, and the counts and inverse where asked. */
export interface UniqueResult {
  /** The distinct values, ascending (NaN last, all NaNs one value; -0 and +0 one value). */
  values: Tensor;
  /** Occurrences of each (0 in the padding), with `returnCounts`. */
  counts?: Tensor;
  /** x's shape, int32 indices into `values`, with `returnInverse`. */
  inverse?: Tensor;
}

/**
 * NumPy's `unique` (sorted, NaNs collapsed into one) of a fixed `size`: the first `size`
 * distinct values of x (flattened), padded with `fillValue`; `uniqueAsync` returns exactly as
 * many as there are. By a stable sort, a scan of where the value changes, and scatters.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const { values, counts } = gyre.unique(gyre.tensor([3, 1, 3, 2]), { size: 3, returnCounts: true });
 * // values [1, 2, 3], counts [1, 1, 2]
 * ```
 */
export function unique(x: Tensor, options: UniqueOptions): UniqueResult {
  const op = "unique";
  const o = optionsOf(op, options, ["size", "fillValue", "returnCounts", "returnInverse"]);
  const { size, fillValue } = sizeOption(op, { size: o.size, fillValue: o.fillValue });
  for (const name of ["returnCounts", "returnInverse"] as const) {
    checkBooleanOption(op, `options.${name}`, o[name]);
  }
  const t = tensorArg(op, "x", x);
  return tidy(() => uniqueFrom(op, sortedOnce(op, t), size, fillValue, o));
}

/** x flattened and stably sorted, its order, and where each new value starts. */
interface SortedOnce {
  order: Tensor;
  sorted: Tensor;
  first: Tensor;
  shape: readonly number[];
  device: DeviceName;
}

function sortedOnce(op: string, t: Tensor): SortedOnce {
  const meta = metaOf(t, op, "x");
  if (meta.dtype === "bool") {
    throw new DTypeError({ op, argument: "x", expected: "a numeric dtype", received: "bool" });
  }
  const flat = t.reshape([-1]);
  const order = flat.argsort();
  const sorted = take(flat, order);
  const first = changes(sorted, sizeOf(meta.shape), meta.device);
  return { order, sorted, first, shape: meta.shape, device: meta.device };
}

/** unique's result of `size` from the sort (shared by unique and uniqueAsync: one sort each). */
function uniqueFrom(
  op: string,
  s: SortedOnce,
  size: number,
  fillValue: number,
  o: { returnCounts?: unknown; returnInverse?: unknown },
): UniqueResult {
  const { order, sorted, first, device } = s;
  const n = sizeOf(s.shape);
  const result: UniqueResult = { values: compact(op, sorted, first, size, fillValue) };
  if (o.returnCounts || o.returnInverse) {
    // The group of each sorted element: how many changes up to it, less one.
    const group = first.cast("int32").cumsum().sub(1);
    if (o.returnCounts) {
      const ones = full([n], 1, { dtype: "int32", device });
      // Groups past `size` counted in one extra segment, cut off: the ids stay sorted.
      const kept = minimum(group, size);
      result.counts = segmentSum(ones, kept, { numSegments: size + 1, sorted: true })
        .slice([0, size]);
    }
    if (o.returnInverse) {
      const zeros = full([n], 0, { dtype: "int32", device });
      result.inverse = scatter(zeros, order, group, { axis: 0 }).reshape(s.shape);
    }
  }
  return result;
}

/**
 * Where a sorted sequence starts a new value: where the leftmost position of its value (a binary
 * search on the sort's own keys: -0 equal to +0, NaNs one value) is its own. Not a float
 * comparison of neighbours: a GPU may flush subnormals there (WGSL allows it), merging them with 0.
 */
function changes(sorted: Tensor, n: number, device: DeviceName): Tensor {
  const first = searchsorted(sorted, sorted);
  return first.equal(arange(n, undefined, 1, { dtype: "int32", device }));
}

/**
 * {@link unique} with exactly as many values as x has distinct ones (one device synchronisation
 * to count them).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const { values } = await gyre.uniqueAsync(gyre.tensor([2, 2, NaN, 1, NaN])); // [1, 2, NaN]
 * ```
 */
export async function uniqueAsync(
  x: Tensor,
  options?: Omit<UniqueOptions, "size" | "fillValue">,
): Promise<UniqueResult> {
  const op = "uniqueAsync";
  const o = optionsOf(op, options, ["returnCounts", "returnInverse"]);
  for (const name of ["returnCounts", "returnInverse"] as const) {
    checkBooleanOption(op, `options.${name}`, o[name]);
  }
  const t = tensorArg(op, "x", x);
  // Sorted once: the count is read from it, and the result made from it.
  const s = tidy(() => sortedOnce(op, t));
  try {
    const count = await selectedCount(s.first);
    return tidy(() => uniqueFrom("unique", s, count, 0, o));
  } finally {
    for (const kept of [s.order, s.sorted, s.first]) kept.dispose();
  }
}
