/**
 * Reductions over any set of axes: `sum`, `prod`, `max`, `min`, `mean`. The kept axes become rows
 * and the reduced axes each row's elements, read through strides without a copy on the GPU.
 * @module
 */
import { checkOptions } from "../core/options.ts";
import type { View } from "../contract/backend.ts";
import type { FusedSource, ReduceOp } from "../contract/reduce.ts";
import { bind, fusedLabel, makePending, type Producer } from "../_lazy.ts";
import { planOverrides } from "../plans/overrides.ts";
import { normalizeAxes, sizeOf } from "../core/shape.ts";
import { type DType, isFloat } from "../core/dtype.ts";
import { checkNumber, describe, ValueError } from "../core/errors.ts";
import { backendFor, runtime } from "../runtime.ts";
import { metaOf, pendingOf, Tensor, tensorFromStorage, viewOf } from "../tensor.ts";
import { evaluate, MAX_FUSED_INPUTS, runElementwise, type TensorLike } from "./_dispatch.ts";
import { E } from "../ir/expr.ts";
import { cast, div, mul, sqrt } from "./elementwise.ts";
import { tidy } from "../tidy.ts";
import { taped } from "../_tape.ts";

/** The keys of {@link ReduceOptions}, checked at run time. */
const REDUCE_KEYS = ["axis", "keepdims"] as const;

/**
 * What a reduction reads: a pending elementwise tensor is fused in as the kernel's prologue (no
 * intermediate buffer), otherwise the tensor's view.
 */
function reduceSource(t: Tensor, op: string): View | FusedSource {
  const pending = runtime().fusion ? pendingOf(t, op, "x") : null;
  if (pending && !pending.readsIndex && !pending.producer && pending.inputs < MAX_FUSED_INPUTS) {
    const bound = bind(pending.expr);
    // A prologue needs a view to take its shape and layout from.
    if (bound.inputs.length > 0) return { ...bound, dtype: pending.dtype };
  }
  return viewOf(t, op, "x");
}

/** Options of every reduction. */
export interface ReduceOptions {
  /**
   * Axes to reduce (negative counts from the end); all axes when omitted. `[]` reduces none: each
   * element alone (NumPy's `axis=()`), so sums are the input and variances 0.
   */
  axis?: number | readonly number[];
  /** Keep reduced axes as length 1. */
  keepdims?: boolean;
}

function asTensor(op: string, x: TensorLike): Tensor {
  return x instanceof Tensor ? x : runElementwise(op, [x], ["x"], ([leaf]) => leaf);
}

function reduction(op: string, kind: ReduceOp, x: TensorLike, options: ReduceOptions = {}): Tensor {
  checkOptions(op, options, REDUCE_KEYS);
  const scalarInput = !(x instanceof Tensor);
  const t = asTensor(op, x);
  try {
    const view = metaOf(t, op, "x");
    const axes = normalizeAxes(op, options.axis, view.shape.length, "options.axis");
    const kept = view.shape.filter((_, i) => !axes.includes(i));
    const outShape = options.keepdims ? view.shape.map((d, i) => (axes.includes(i) ? 1 : d)) : kept;
    // Arg reductions give int32 indices; sums and products of bools count in int32; max and min
    // of bools stay bool.
    const arg = kind === "argmax" || kind === "argmin";
    const outDtype: DType = arg || (view.dtype === "bool" && (kind === "sum" || kind === "prod"))
      ? "int32"
      : view.dtype;
    const count = sizeOf(axes.map((a) => view.shape[a]));
    if (count === 0 && sizeOf(kept) > 0) {
      if (kind !== "sum" && kind !== "prod" && kind !== "logsumexp" && kind !== "moments") {
        throw new ValueError({
          op,
          argument: "x",
          expected: `a non-empty axis to take the ${kind} over (${kind} has no identity)`,
          received: `shape [${view.shape.join(", ")}] reduced over axis ${axes.join(", ")}`,
        });
      }
    }
    const device = t.device;
    if (count === 0) {
      // The identity, made on the input's device (not the default one) directly in the output
      // shape: a broadcast view of a scalar here used to leak the scalar's storage.
      // Empty sums are 0, products 1, logsumexp -Inf (the log of an empty sum), M2 0.
      const fill = kind === "prod" ? 1 : kind === "logsumexp" ? -Infinity : 0;
      return evaluate(op, device, E.constant(fill, outDtype), [], outShape);
    }
    if (axes.length === 0 && arg) return evaluate(op, device, E.constant(0, "int32"), [], outShape);
    if (axes.length === 0) {
      // Over no axes each element is its own reduction (NumPy's axis=()): itself, or for moments
      // the M2 of one element, 0, NaN for an infinity or a NaN (as g_moments_seed).
      const flat = runElementwise(op, [t], ["x"], ([leaf]) => {
        const x = E.cast(leaf, outDtype);
        if (kind !== "moments") return x;
        const infinite = E.binary(
          "equal",
          E.unary("abs", x),
          E.constant(Infinity, outDtype),
          "bool",
        );
        const nonFinite = E.binary("logicalOr", E.unary("isnan", x, "bool"), infinite);
        return E.where(nonFinite, E.constant(NaN, outDtype), E.constant(0, outDtype));
      });
      try {
        return flat.reshape(outShape);
      } finally {
        flat.dispose();
      }
    }
    const backend = backendFor(device, op);
    let input = t;
    if (view.dtype === "bool") input = cast(t, "int32");
    try {
      const source = reduceSource(input, op);
      // Named after the fused prologue too, for profiles and explain.
      const pending = "expr" in source ? pendingOf(input, op) : null;
      const label = pending ? `${fusedLabel(pending)}+${op}` : op;
      if (backend.name === "gpu" && runtime().fusion && outDtype !== "bool") {
        // Lazy: elementwise consumers (mean's division, a scale, a bias) run in the
        // reduction's store, as its epilogue. The node holds the source's views until it runs.
        const overrides = planOverrides();
        const producer: Producer = {
          op: label,
          dtype: outDtype,
          run: (runLabel, epilogue, inputs) =>
            backend.reduce({
              op: runLabel,
              reduction: kind,
              input: source,
              axes,
              outDtype,
              epilogue: epilogue ? { expr: epilogue, inputs } : undefined,
              overrides,
            }),
        };
        const views = "expr" in source ? source.inputs : [source];
        return new Tensor(
          makePending(label, backend, E.producer(outDtype), outShape, views, [], producer),
        );
      }
      // Without an epilogue every device reduces.
      const storage = backend.reduce({
        op: label,
        reduction: kind,
        input: source,
        axes,
        outDtype: outDtype === "bool" ? "int32" : outDtype,
        overrides: planOverrides(),
      })!;
      const result = tensorFromStorage(
        storage,
        outDtype === "bool" ? "int32" : outDtype,
        outShape,
      );
      if (outDtype !== "bool") return result;
      try {
        return cast(result, "bool");
      } finally {
        result.dispose();
      }
    } finally {
      if (input !== t) input.dispose();
    }
  } finally {
    if (scalarInput) t.dispose();
  }
}

/**
 * Sum over `axis` (all axes by default). Bools count as int32; integer sums wrap.
 * Float sums accumulate in float32 on the GPU, in float64 on WASM.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const s = gyre.sum(gyre.tensor([[1, 2], [3, 4]]), { axis: 0 }); // [4, 6]
 * ```
 */
export function sum(x: TensorLike, options?: ReduceOptions): Tensor {
  return taped("sum", [x], { ...options }, () => reduction("sum", "sum", x, options));
}

/**
 * Product over `axis`.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const p = gyre.prod(gyre.tensor([1, 2, 3, 4])); // 24
 * ```
 */
export function prod(x: TensorLike, options?: ReduceOptions): Tensor {
  return taped("prod", [x], { ...options }, () => reduction("prod", "prod", x, options));
}

/**
 * Maximum over `axis`; NaN propagates, as NumPy. Throws on an empty reduction.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const m = gyre.max(gyre.tensor([[1, 5], [3, 4]]), { axis: 1, keepdims: true }); // [[5], [4]]
 * ```
 */
export function max(x: TensorLike, options?: ReduceOptions): Tensor {
  return taped("max", [x], { ...options }, () => reduction("max", "max", x, options));
}

/**
 * Minimum over `axis`; NaN propagates. Throws on an empty reduction.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const m = gyre.min(gyre.tensor([3, 1, 2])); // 1
 * ```
 */
export function min(x: TensorLike, options?: ReduceOptions): Tensor {
  return taped("min", [x], { ...options }, () => reduction("min", "min", x, options));
}

/**
 * Arithmetic mean over `axis`; integers and bools average in float32. NaN for an empty reduction.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const m = gyre.mean(gyre.tensor([1, 2, 3, 4])); // 2.5
 * ```
 */
export function mean(x: TensorLike, options: ReduceOptions = {}): Tensor {
  return taped("mean", [x], { ...options }, () => meanOf(x, options));
}

function meanOf(x: TensorLike, options: ReduceOptions): Tensor {
  checkOptions("mean", options, REDUCE_KEYS);
  const view = x instanceof Tensor ? metaOf(x, "mean", "x") : null;
  // Checked before a scalar `x` becomes a tensor, which a throw here would leak.
  const axes = normalizeAxes("mean", options.axis, view?.shape.length ?? 0, "options.axis");
  const t = asTensor("mean", x);
  const shape = metaOf(t, "mean").shape;
  const count = sizeOf(axes.map((a) => shape[a]));
  // float16 is summed and divided in float32 (as PyTorch): a float16 sum overflows at 65504,
  // and a count past that is Inf as a float16 divisor. The float16 result is rounded once.
  const floating = isFloat(t.dtype) && t.dtype !== "float16" ? t : cast(t, "float32");
  try {
    const total = sum(floating, options);
    try {
      // An empty mean is NaN. Stored directly: on some GPU compilers (lavapipe) `x / 0.0` with a
      // literal zero divisor folds to 0 instead of NaN.
      if (count === 0) {
        const dtype = t.dtype === "float16" ? "float16" : total.dtype;
        return evaluate("mean", total.device, E.constant(NaN, dtype), [], total.shape);
      }
      if (t.dtype !== "float16") return div(total, count);
      return tidy(() => cast(div(total, count), "float16"));
    } finally {
      total.dispose();
    }
  } finally {
    if (floating !== t) floating.dispose();
    if (!(x instanceof Tensor)) t.dispose();
  }
}

/** Options of {@link argmax} and {@link argmin}: one axis, or the flattened tensor. */
export interface ArgReduceOptions {
  /** The axis to search along; the flattened tensor when omitted. */
  axis?: number;
  /** Keep the reduced axis with length 1. Default false. */
  keepdims?: boolean;
}

function argReduction(
  op: "argmax" | "argmin",
  x: TensorLike,
  options: ArgReduceOptions = {},
): Tensor {
  if (options.axis !== undefined && typeof options.axis !== "number") {
    throw new ValueError({
      op,
      argument: "options.axis",
      expected: "one axis (a number) or none",
      received: describe(options.axis),
    });
  }
  return reduction(op, op, x, options);
}

/**
 * Index of the largest value along `axis` (of the flattened tensor by default), as int32; the
 * first occurrence on ties, and the first NaN if there is one (NumPy). Throws on an empty axis.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const i = gyre.argmax(gyre.tensor([[1, 5, 5], [7, 0, 2]]), { axis: 1 }); // [1, 0]
 * ```
 */
export function argmax(x: TensorLike, options?: ArgReduceOptions): Tensor {
  return argReduction("argmax", x, options);
}

/**
 * Index of the smallest value along `axis`, as int32; first occurrence on ties, first NaN wins.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const i = gyre.argmin(gyre.tensor([3, 1, 1])); // 1
 * ```
 */
export function argmin(x: TensorLike, options?: ArgReduceOptions): Tensor {
  return argReduction("argmin", x, options);
}

/**
 * True where every element along `axis` is non-zero (true for an empty axis).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const a = gyre.all(gyre.tensor([[true, false], [true, true]]), { axis: 1 }); // [false, true]
 * ```
 */
export function all(x: TensorLike, options: ReduceOptions = {}): Tensor {
  return truthReduction("all", x, options);
}

/**
 * True where any element along `axis` is non-zero (false for an empty axis).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const a = gyre.any(gyre.tensor([0, 0, 3])); // true
 * ```
 */
export function any(x: TensorLike, options: ReduceOptions = {}): Tensor {
  return truthReduction("any", x, options);
}

function truthReduction(op: "all" | "any", x: TensorLike, options: ReduceOptions): Tensor {
  checkOptions(op, options, REDUCE_KEYS);
  return tidy(() => {
    const t = asTensor(op, x);
    const shape = metaOf(t, op, "x").shape;
    const axes = normalizeAxes(op, options.axis, shape.length, "options.axis");
    if (sizeOf(axes.map((a) => shape[a])) === 0) {
      // The empty conjunction is true, the empty disjunction false.
      const kept = options.keepdims
        ? shape.map((d, i) => (axes.includes(i) ? 1 : d))
        : shape.filter((_, i) => !axes.includes(i));
      return evaluate(op, t.device, E.constant(op === "all" ? 1 : 0, "bool"), [], kept);
    }
    // As 0/1 words, "all" is the minimum and "any" the maximum.
    const truth = runElementwise(op, [t], ["x"], ([leaf]) => E.cast(E.cast(leaf, "bool"), "int32"));
    return cast(reduction(op, op === "all" ? "min" : "max", truth, options), "bool");
  });
}

/**
 * `log(sum(exp(x)))` along `axis`, computed stably by shifting by the maximum: rows of all -Inf
 * give -Inf, a +Inf gives +Inf, NaN propagates. Integers compute in float32.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const l = gyre.logsumexp(gyre.tensor([1000, 1000])); // 1000.6931...
 * ```
 */
export function logsumexp(x: TensorLike, options: ReduceOptions = {}): Tensor {
  const op = "logsumexp";
  return taped(op, [x], { ...options }, () =>
    tidy(() => {
      const t = asTensor(op, x);
      // One pass: the kernel keeps (running max, sum of exp(x - max)).
      return reduction(op, "logsumexp", isFloat(t.dtype) ? t : cast(t, "float32"), options);
    }));
}

/** Options of {@link variance} and {@link std}. */
export interface VarianceOptions extends ReduceOptions {
  /** Delta degrees of freedom: the divisor is `n - ddof` (0: population, 1: sample). */
  ddof?: number;
}

/**
 * Variance along `axis` with divisor `n - ddof`, two-pass (mean first, then squared deviations),
 * never the cancellation-prone `mean(x^2) - mean(x)^2`. With `n - ddof <= 0` the divisor is 0, as
 * in NumPy and PyTorch: +Inf, or NaN where every value equals the mean (0 / 0) or one is NaN. Over
 * no axes (a 0-d tensor, or `axis: []`) each element's variance is 0 (NaN for an infinity or NaN,
 * and with `ddof >= 1`).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const v = gyre.variance(gyre.tensor([1, 2, 3, 4]), { ddof: 1 }); // 1.6667
 * ```
 */
export function variance(x: TensorLike, options: VarianceOptions = {}): Tensor {
  return taped("variance", [x], { ...options }, () => varianceAs("variance", x, options));
}

/** The variance, its errors naming `op` (std's name them std). */
function varianceAs(op: string, x: TensorLike, options: VarianceOptions): Tensor {
  checkOptions(op, options, [...REDUCE_KEYS, "ddof"]);
  const ddof = checkNumber(
    op,
    "options.ddof",
    options.ddof ?? 0,
    "a non-negative number",
    (v) => v >= 0 && v < Infinity,
  );
  return tidy(() => {
    const t = asTensor(op, x);
    const view = metaOf(t, op, "x");
    const axes = normalizeAxes(op, options.axis, view.shape.length, "options.axis");
    const n = sizeOf(axes.map((a) => view.shape[a]));
    // float16 in float32, rounded once at the end (as in `mean`: M2 and the count overflow).
    const floating = isFloat(t.dtype) && t.dtype !== "float16" ? t : cast(t, "float32");
    // One pass: the kernel merges (count, mean, M2) states; the division by n - ddof runs in its
    // store (a fused epilogue) or in whatever reads the result.
    const m2 = reduction(op, "moments", floating, {
      axis: options.axis,
      keepdims: options.keepdims,
    });
    // No degrees of freedom left: M2 / 0, as NumPy and PyTorch (+Inf; NaN where M2 is 0 or NaN).
    // Over no axes M2 is 0 or NaN, so that is NaN: stored directly, as a compiler may fold a
    // pending 0 * Inf (see mean).
    const result = n - ddof > 0
      ? div(m2, n - ddof)
      : axes.length === 0
      ? evaluate(op, t.device, E.constant(NaN, m2.dtype), [], m2.shape)
      : mul(m2, Infinity);
    return t.dtype === "float16" ? cast(result, "float16") : result;
  });
}

/**
 * Standard deviation: the square root of {@link variance} (same options).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const s = gyre.std(gyre.tensor([2, 4, 4, 4, 5, 5, 7, 9])); // 2
 * ```
 */
export function std(x: TensorLike, options: VarianceOptions = {}): Tensor {
  return taped("std", [x], { ...options }, () => tidy(() => sqrt(varianceAs("std", x, options))));
}
