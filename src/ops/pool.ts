/**
 * 2-D pooling over NCHW (or CHW) tensors with PyTorch's semantics: `maxPool2d`, `avgPool2d`,
 * `adaptiveMaxPool2d` and `adaptiveAvgPool2d`. Options are validated as PyTorch does (padding at
 * most half the kernel, output at least 1x1, ceil mode's last window starting inside the input
 * or the left padding) before anything is allocated, then built into a pooling job
 * (src/contract/pool.ts). The GPU (src/gpu/pool.ts) runs kernels from src/gpu/_codegen_pool.ts as
 * `planPool` chooses; WASM (src/wasm/pool.ts) runs asm/pool.ts's vector kernels (the scalar
 * reference loops for adaptive pooling), shared among threads when large. Both read contiguous
 * planes: strided views are copied first, except channels-last ones on WASM (NHWC memory: PyTorch's
 * channels_last, TensorFlow's layout), which its channels-last kernels pool in place into a
 * channels-last result.
 * @module
 */
import { taped } from "../_tape.ts";
import { sizeOf } from "../core/shape.ts";
import type { DType } from "../core/dtype.ts";
import { describe, DTypeError, ShapeError, ValueError } from "../core/errors.ts";
import { backendOf } from "../contract/backend.ts";
import { planOverrides } from "../plans/overrides.ts";
import type { Pair, PoolDType, PoolProblem } from "../contract/pool.ts";
import { metaOf, Tensor, tensorFromStorage, viewOf } from "../tensor.ts";
import { checkOptions } from "../core/options.ts";

// Re-exported so that the single `export *` of this module in mod.ts also exports the plan
// (documented in src/plans.ts).

/**
 * A size given for both spatial axes (a number) or as [height, width].
 *
 * @example
 * ```ts
 * const kernel: Size2d = [3, 1];
 * ```
 */
export type Size2d = number | readonly [number, number];

/**
 * Options of {@link maxPool2d}.
 *
 * @example
 * ```ts
 * const options: MaxPool2dOptions = { kernelSize: 3, stride: 2, padding: 1 };
 * ```
 */
export interface MaxPool2dOptions {
  /** Window size. */
  kernelSize: Size2d;
  /** Step between windows; defaults to `kernelSize`. */
  stride?: Size2d;
  /** Implicit -Infinity padding on each side; at most half the kernel size. Default 0. */
  padding?: Size2d;
  /** Spacing between window elements. Default 1. */
  dilation?: Size2d;
  /** Round the output size up (the last window must still start inside the input or left padding). */
  ceilMode?: boolean;
  /** Also return the flat index `h * W + w` of each maximum within its plane. */
  returnIndices?: boolean;
}

/**
 * Options of {@link avgPool2d}.
 *
 * @example
 * ```ts
 * const options: AvgPool2dOptions = { kernelSize: 2, countIncludePad: false };
 * ```
 */
export interface AvgPool2dOptions {
  /** Window size. */
  kernelSize: Size2d;
  /** Step between windows; defaults to `kernelSize`. */
  stride?: Size2d;
  /** Implicit zero padding on each side; at most half the kernel size. Default 0. */
  padding?: Size2d;
  /** Round the output size up (the last window must still start inside the input or left padding). */
  ceilMode?: boolean;
  /** Count padding in the divisor (never the ceil-mode overhang). Default true. */
  countIncludePad?: boolean;
  /** Divide every window's sum by this non-zero integer instead. */
  divisorOverride?: number;
}

/**
 * Options of {@link adaptiveMaxPool2d}.
 *
 * @example
 * ```ts
 * const options: AdaptiveMaxPool2dOptions = { returnIndices: true };
 * ```
 */
export interface AdaptiveMaxPool2dOptions {
  /** Also return the flat index `h * W + w` of each maximum within its plane. */
  returnIndices?: boolean;
}

/**
 * An adaptive pool's output size: one number for both axes, or [height, width] (null keeps the
 * input's).
 *
 * @example
 * ```ts
 * const size: AdaptiveSize = [1, null]; // one row, all columns
 * ```
 */
export type AdaptiveSize = number | readonly [number | null, number | null];

/**
 * Max pooling's values and int32 indices.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const { values, indices }: PoolWithIndices = gyre.maxPool2d(gyre.ones([1, 4, 4]), {
 *   kernelSize: 2,
 *   returnIndices: true,
 * });
 * ```
 */
export interface PoolWithIndices {
  /** The pooled values. */
  values: Tensor;
  /** The int32 flat index (`h * W + w` within its plane) of each maximum. */
  indices: Tensor;
}

/** What validation needs of x: its shape and dtype, read without computing a pending tensor. */
interface Meta {
  shape: readonly number[];
  dtype: DType;
}

function checkTensor(op: string, x: unknown): Meta {
  if (!(x instanceof Tensor)) {
    throw new ValueError({ op, argument: "x", expected: "a Tensor", received: describe(x) });
  }
  return metaOf(x, op, "x");
}

function checkInput(op: string, view: Meta, dtypes: readonly DType[], adaptive: boolean): void {
  const rank = view.shape.length;
  if (rank !== 3 && rank !== 4) {
    throw new ShapeError({
      op,
      argument: "x",
      expected: "a 3-D [C, H, W] or 4-D [N, C, H, W] tensor",
      received: `shape ${describe(view.shape)}`,
    });
  }
  // PyTorch: only the batch axis may be empty (adaptive pools also allow C = 0 without a batch).
  const first = rank === 4 || adaptive ? 1 : 0;
  if (view.shape.slice(first).some((d) => d === 0)) {
    throw new ShapeError({
      op,
      argument: "x",
      expected: rank === 4
        ? "non-zero C, H and W (only N may be 0)"
        : adaptive
        ? "non-zero H and W"
        : "non-zero C, H and W",
      received: `shape ${describe(view.shape)}`,
    });
  }
  if (!dtypes.includes(view.dtype)) {
    throw new DTypeError({
      op,
      argument: "x",
      expected: dtypes.join(" or "),
      received: view.dtype,
    });
  }
}

/** The options of a pool whose kernel size has no default: an object, not undefined. */
function required<T extends object>(op: string, options: T | undefined): T {
  if (options === undefined) {
    throw new ValueError({
      op,
      argument: "options",
      expected: "an options object with kernelSize",
      received: "undefined",
    });
  }
  return options;
}

function checkBoolean(op: string, argument: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== "boolean") {
    throw new ValueError({ op, argument, expected: "a boolean", received: describe(value) });
  }
  return value;
}

/** A number or [h, w] of integers >= `min`, as a pair. */
function pair(op: string, argument: string, value: unknown, min: number): Pair {
  const list = typeof value === "number" ? [value, value] : value;
  const expected = `an integer >= ${min} or a pair [height, width] of them`;
  if (!Array.isArray(list) || list.length !== 2) {
    throw new ValueError({ op, argument, expected, received: describe(value) });
  }
  for (const v of list) {
    if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > 2 ** 30) {
      throw new ValueError({ op, argument, expected, received: describe(value) });
    }
  }
  return [list[0], list[1]];
}

/** PyTorch's pooling_output_shape: floor (or ceil) division, then the ceil-mode start rule. */
function outputSize(
  size: number,
  kernel: number,
  padding: number,
  stride: number,
  dilation: number,
  ceilMode: boolean,
): number {
  let out = Math.floor(
    (size + 2 * padding - dilation * (kernel - 1) - 1 + (ceilMode ? stride - 1 : 0)) / stride,
  ) + 1;
  // The last window must start inside the input or the left padding.
  if (ceilMode && (out - 1) * stride >= size + padding) out--;
  return out;
}

interface WindowOptions {
  kernelSize?: unknown;
  stride?: unknown;
  padding?: unknown;
  dilation?: unknown;
  ceilMode?: unknown;
}

function regularProblem(
  op: "maxPool2d" | "avgPool2d",
  view: Meta,
  options: WindowOptions,
  avg: { countIncludePad: boolean; divisor: number } | null,
): PoolProblem {
  const kernel = pair(op, "options.kernelSize", options.kernelSize, 1);
  const stride = options.stride === undefined
    ? kernel
    : pair(op, "options.stride", options.stride, 1);
  const padding = options.padding === undefined
    ? [0, 0] as Pair
    : pair(op, "options.padding", options.padding, 0);
  const dilation = options.dilation === undefined
    ? [1, 1] as Pair
    : pair(op, "options.dilation", options.dilation, 1);
  const ceilMode = checkBoolean(op, "options.ceilMode", options.ceilMode, false);
  if (padding[0] > Math.floor(kernel[0] / 2) || padding[1] > Math.floor(kernel[1] / 2)) {
    throw new ValueError({
      op,
      argument: "options.padding",
      expected: `at most half the kernel size [${kernel}] ([${
        kernel.map((k) => Math.floor(k / 2))
      }])`,
      received: describe(padding),
    });
  }
  const rank = view.shape.length;
  const [inHeight, inWidth] = view.shape.slice(rank - 2);
  const outHeight = outputSize(inHeight, kernel[0], padding[0], stride[0], dilation[0], ceilMode);
  const outWidth = outputSize(inWidth, kernel[1], padding[1], stride[1], dilation[1], ceilMode);
  if (outHeight < 1 || outWidth < 1) {
    throw new ShapeError({
      op,
      argument: "x",
      expected: `a height and width giving an output of at least 1x1 for kernel [${kernel}], ` +
        `stride [${stride}], padding [${padding}], dilation [${dilation}]`,
      received: `shape ${describe(view.shape)} (output ${outHeight}x${outWidth})`,
    });
  }
  return {
    op: avg ? "avg" : "max",
    adaptive: false,
    dtype: view.dtype as PoolDType,
    planes: sizeOf(view.shape.slice(0, rank - 2)),
    inHeight,
    inWidth,
    outHeight,
    outWidth,
    outShape: [...view.shape.slice(0, rank - 2), outHeight, outWidth],
    kernel,
    stride,
    padding,
    dilation,
    countIncludePad: avg?.countIncludePad ?? false,
    divisor: avg?.divisor ?? 0,
  };
}

function adaptiveProblem(
  op: "adaptiveMaxPool2d" | "adaptiveAvgPool2d",
  view: Meta,
  size: unknown,
): PoolProblem {
  const rank = view.shape.length;
  const [inHeight, inWidth] = view.shape.slice(rank - 2);
  const list = typeof size === "number" ? [size, size] : size;
  const expected = "an integer >= 1, or [height, width] of integers >= 1 or null";
  if (!Array.isArray(list) || list.length !== 2) {
    throw new ValueError({ op, argument: "outputSize", expected, received: describe(size) });
  }
  const [outHeight, outWidth] = list.map((v, i) => (v === null ? [inHeight, inWidth][i] : v));
  for (const v of [outHeight, outWidth]) {
    if (typeof v !== "number" || !Number.isInteger(v) || v < 1) {
      throw new ValueError({ op, argument: "outputSize", expected, received: describe(size) });
    }
  }
  // Bin bounds are computed in 32-bit arithmetic on the GPU.
  if ((outHeight + 1) * inHeight >= 2 ** 31 || (outWidth + 1) * inWidth >= 2 ** 31) {
    throw new ValueError({
      op,
      argument: "outputSize",
      expected: "(output size + 1) * input size below 2^31 on each axis",
      received: `${describe([outHeight, outWidth])} for input ${describe([inHeight, inWidth])}`,
    });
  }
  const largestBin = (input: number, output: number) => {
    let largest = 0;
    for (let i = 0; i < output; i++) {
      const start = Math.floor((i * input) / output);
      const end = Math.floor(((i + 1) * input + output - 1) / output);
      largest = Math.max(largest, end - start);
    }
    return largest;
  };
  return {
    op: op === "adaptiveMaxPool2d" ? "max" : "avg",
    adaptive: true,
    dtype: view.dtype as PoolDType,
    planes: sizeOf(view.shape.slice(0, rank - 2)),
    inHeight,
    inWidth,
    outHeight,
    outWidth,
    outShape: [...view.shape.slice(0, rank - 2), outHeight, outWidth],
    kernel: [largestBin(inHeight, outHeight), largestBin(inWidth, outWidth)],
    stride: [1, 1],
    padding: [0, 0],
    dilation: [1, 1],
    countIncludePad: false,
    divisor: 0,
  };
}

/** Runs a validated problem on x's device; returns the values and, when asked, the indices. */
function run(op: string, x: Tensor, p: PoolProblem, indices: boolean): Tensor[] {
  const view = viewOf(x, op);
  const result = backendOf(view).pool({
    op,
    x: view,
    problem: p,
    indices,
    overrides: planOverrides(),
  });
  // A channels-last result ([N, OH, OW, C] in memory) is the [N, C, OH, OW] view of it.
  const strides = result.channelsLast ? channelsLastStrides(p.outShape) : undefined;
  const out = [tensorFromStorage(result.values, p.dtype, p.outShape, strides)];
  if (result.indices) out.push(tensorFromStorage(result.indices, "int32", p.outShape));
  return out;
}

/** Strides of a [..., C, H, W] view over [..., H, W, C] memory (rank 3 or 4). */
function channelsLastStrides(shape: readonly number[]): number[] {
  const [c, h, w] = shape.slice(-3);
  const strides = [1, w * c, c];
  return shape.length === 4 ? [h * w * c, ...strides] : strides;
}

const MAX_DTYPES: readonly DType[] = ["float32", "float16", "int32"];
const AVG_DTYPES: readonly DType[] = ["float32", "float16"];

/**
 * 2-D max pooling over the last two axes of a [N, C, H, W] or [C, H, W] tensor, as PyTorch's
 * `max_pool2d`: output size `floor((H + 2p - d(k - 1) - 1) / s) + 1` (ceil with `ceilMode`, the
 * last window starting inside the input or the left padding); padding never wins; a window
 * holding NaN gives NaN. With `returnIndices`, also the int32 flat index `h * W + w` of each
 * maximum within its plane (the first maximum; the last NaN). float32, float16 and int32.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const x = gyre.arange(16).reshape([1, 1, 4, 4]);
 * const y = gyre.maxPool2d(x, { kernelSize: 2 }); // [[[[5, 7], [13, 15]]]]
 * const { values, indices } = gyre.maxPool2d(x, { kernelSize: 2, returnIndices: true });
 * ```
 */
export function maxPool2d(
  x: Tensor,
  options: MaxPool2dOptions & { returnIndices: true },
): PoolWithIndices;
/** Max pooling without the indices (see the overload above). */
export function maxPool2d(
  x: Tensor,
  options: MaxPool2dOptions & { returnIndices?: false },
): Tensor;
/** Max pooling, with or without the indices as `options.returnIndices` says. */
export function maxPool2d(x: Tensor, options: MaxPool2dOptions): Tensor | PoolWithIndices;
export function maxPool2d(x: Tensor, options: MaxPool2dOptions): Tensor | PoolWithIndices {
  return taped("maxPool2d", [x], { ...options }, () => maxPool2dOf(x, options));
}

function maxPool2dOf(x: Tensor, options: MaxPool2dOptions): Tensor | PoolWithIndices {
  const op = "maxPool2d";
  const view = checkTensor(op, x);
  checkInput(op, view, MAX_DTYPES, false);
  const o = checkOptions(op, required(op, options), [
    "kernelSize",
    "stride",
    "padding",
    "dilation",
    "ceilMode",
    "returnIndices",
  ]);
  const returnIndices = checkBoolean(op, "options.returnIndices", o.returnIndices, false);
  const problem = regularProblem(op, view, o, null);
  const [values, indices] = run(op, x, problem, returnIndices);
  return returnIndices ? { values, indices } : values;
}

/**
 * 2-D average pooling, as PyTorch's `avg_pool2d`: the output size of {@link maxPool2d} without
 * dilation; each window's sum (float32 accumulation) divided by `divisorOverride` if given, else
 * by the window clipped at the padded border (`countIncludePad`, the default: padding counts, the
 * ceil-mode overhang does not), else by the number of input elements in it. float32 and float16.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const x = gyre.ones([1, 1, 3, 3]);
 * const y = gyre.avgPool2d(x, { kernelSize: 2, padding: 1 }); // corners 0.25, as PyTorch
 * ```
 */
export function avgPool2d(x: Tensor, options: AvgPool2dOptions): Tensor {
  return taped("avgPool2d", [x], { ...options }, () => avgPool2dOf(x, options));
}

function avgPool2dOf(x: Tensor, options: AvgPool2dOptions): Tensor {
  const op = "avgPool2d";
  const view = checkTensor(op, x);
  checkInput(op, view, AVG_DTYPES, false);
  const o = checkOptions(op, required(op, options), [
    "kernelSize",
    "stride",
    "padding",
    "ceilMode",
    "countIncludePad",
    "divisorOverride",
  ]);
  const countIncludePad = checkBoolean(op, "options.countIncludePad", o.countIncludePad, true);
  let divisor = 0;
  if (o.divisorOverride !== undefined) {
    const d = o.divisorOverride;
    if (typeof d !== "number" || !Number.isInteger(d) || d === 0 || Math.abs(d) >= 2 ** 31) {
      throw new ValueError({
        op,
        argument: "options.divisorOverride",
        expected: "a non-zero 32-bit integer",
        received: describe(d),
      });
    }
    divisor = d;
  }
  const dilation = (o as { dilation?: unknown }).dilation;
  if (dilation !== undefined) {
    throw new ValueError({
      op,
      argument: "options.dilation",
      expected: "no dilation (average pooling has none)",
      received: describe(dilation),
    });
  }
  const problem = regularProblem(op, view, o, { countIncludePad, divisor });
  return run(op, x, problem, false)[0];
}

/**
 * Adaptive 2-D max pooling, as PyTorch's `adaptive_max_pool2d`: output (i, j) is the maximum
 * over rows `floor(i * H / outH)` to `ceil((i + 1) * H / outH)` and the same for columns. NaN
 * and indices as {@link maxPool2d}. float32, float16 and int32.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const x = gyre.arange(25).reshape([1, 5, 5]);
 * const y = gyre.adaptiveMaxPool2d(x, 3); // bins 0..2, 1..4, 3..5 on each axis
 * ```
 */
export function adaptiveMaxPool2d(
  x: Tensor,
  outputSize: AdaptiveSize,
  options: AdaptiveMaxPool2dOptions & { returnIndices: true },
): PoolWithIndices;
/** Adaptive max pooling without the indices (see the overload above). */
export function adaptiveMaxPool2d(
  x: Tensor,
  outputSize: AdaptiveSize,
  options?: AdaptiveMaxPool2dOptions & { returnIndices?: false },
): Tensor;
/** Adaptive max pooling, with or without the indices as `options.returnIndices` says. */
export function adaptiveMaxPool2d(
  x: Tensor,
  outputSize: AdaptiveSize,
  options?: AdaptiveMaxPool2dOptions,
): Tensor | PoolWithIndices;
export function adaptiveMaxPool2d(
  x: Tensor,
  outputSize: AdaptiveSize,
  options: AdaptiveMaxPool2dOptions = {},
): Tensor | PoolWithIndices {
  return taped(
    "adaptiveMaxPool2d",
    [x],
    { ...options, outputSize },
    () => adaptiveMaxPool2dOf(x, outputSize, options),
  );
}

function adaptiveMaxPool2dOf(
  x: Tensor,
  outputSize: AdaptiveSize,
  options: AdaptiveMaxPool2dOptions,
): Tensor | PoolWithIndices {
  const op = "adaptiveMaxPool2d";
  const view = checkTensor(op, x);
  checkInput(op, view, MAX_DTYPES, true);
  const o = checkOptions(op, options, ["returnIndices"]);
  const returnIndices = checkBoolean(op, "options.returnIndices", o.returnIndices, false);
  const problem = adaptiveProblem(op, view, outputSize);
  const [values, indices] = run(op, x, problem, returnIndices);
  return returnIndices ? { values, indices } : values;
}

/**
 * Adaptive 2-D average pooling, as PyTorch's `adaptive_avg_pool2d`: bins as
 * {@link adaptiveMaxPool2d}, each averaged as `sum / rows / columns`. float32 and float16.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const x = gyre.ones([2, 3, 7, 7]);
 * const y = gyre.adaptiveAvgPool2d(x, [1, null]); // shape [2, 3, 1, 7]
 * ```
 */
export function adaptiveAvgPool2d(x: Tensor, outputSize: AdaptiveSize): Tensor {
  return taped("adaptiveAvgPool2d", [x], { outputSize }, () => adaptiveAvgPool2dOf(x, outputSize));
}

function adaptiveAvgPool2dOf(x: Tensor, outputSize: AdaptiveSize): Tensor {
  const op = "adaptiveAvgPool2d";
  const view = checkTensor(op, x);
  checkInput(op, view, AVG_DTYPES, true);
  const problem = adaptiveProblem(op, view, outputSize);
  return run(op, x, problem, false)[0];
}
