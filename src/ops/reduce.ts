/**
 * Reductions over any set of axes: `sum`, `prod`, `max`, `min`, `mean`. The kept axes become rows
 * and the reduced axes each row's elements, read through strides without a copy on the GPU.
 * @module
 */
import type { ReduceOp } from "../_backend.ts";
import { normalizeAxes, sizeOf } from "../_shape.ts";
import { type DType, isFloat } from "../dtype.ts";
import { ValueError } from "../errors.ts";
import { runtime } from "../runtime.ts";
import { Tensor } from "../tensor.ts";
import { evaluate, runElementwise, type TensorLike } from "./_dispatch.ts";
import { E } from "./_expr.ts";
import { cast, div } from "./elementwise.ts";

/** Options of every reduction. */
export interface ReduceOptions {
  /** Axes to reduce (negative counts from the end); all axes when omitted. */
  axis?: number | readonly number[];
  /** Keep reduced axes as length 1. */
  keepdims?: boolean;
}

function asTensor(op: string, x: TensorLike): Tensor {
  return x instanceof Tensor ? x : runElementwise(op, [x], ["x"], ([leaf]) => leaf);
}

function reduction(op: string, kind: ReduceOp, x: TensorLike, options: ReduceOptions = {}): Tensor {
  const scalarInput = !(x instanceof Tensor);
  const t = asTensor(op, x);
  try {
    const view = t._view(op, "x");
    const axes = normalizeAxes(op, options.axis, view.shape.length, "options.axis");
    const kept = view.shape.filter((_, i) => !axes.includes(i));
    const outShape = options.keepdims ? view.shape.map((d, i) => (axes.includes(i) ? 1 : d)) : kept;
    // Sums and products of bools count in int32; max and min of bools stay bool.
    const outDtype: DType = view.dtype === "bool" && (kind === "sum" || kind === "prod")
      ? "int32"
      : view.dtype;
    const count = sizeOf(axes.map((a) => view.shape[a]));
    if (count === 0 && sizeOf(kept) > 0) {
      if (kind === "max" || kind === "min") {
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
      const fill = kind === "prod" ? 1 : 0;
      return evaluate(op, device, E.constant(fill, outDtype), [], outShape);
    }
    if (axes.length === 0) {
      const flat = runElementwise(op, [t], ["x"], ([leaf]) => E.cast(leaf, outDtype));
      try {
        return flat.reshape(outShape);
      } finally {
        flat.dispose();
      }
    }
    const backend = runtime().backend(device, op);
    let input = t;
    if (view.dtype === "bool") input = cast(t, "int32");
    try {
      const storage = backend.reduce(
        op,
        kind,
        input._view(op),
        axes,
        outDtype === "bool" ? "int32" : outDtype,
      );
      const result = Tensor._fromStorage(
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
  return reduction("sum", "sum", x, options);
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
  return reduction("prod", "prod", x, options);
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
  return reduction("max", "max", x, options);
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
  return reduction("min", "min", x, options);
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
  const view = x instanceof Tensor ? x._view("mean", "x") : null;
  // Checked before a scalar `x` becomes a tensor, which a throw here would leak.
  const axes = normalizeAxes("mean", options.axis, view?.shape.length ?? 0, "options.axis");
  const t = asTensor("mean", x);
  const shape = t._view("mean").shape;
  const count = sizeOf(axes.map((a) => shape[a]));
  const floating = isFloat(t.dtype) ? t : cast(t, "float32");
  try {
    const total = sum(floating, options);
    try {
      // An empty mean is NaN. Stored directly: on some GPU compilers (lavapipe) `x / 0.0` with a
      // literal zero divisor folds to 0 instead of NaN.
      if (count === 0) {
        return evaluate("mean", total.device, E.constant(NaN, total.dtype), [], total.shape);
      }
      return div(total, count);
    } finally {
      total.dispose();
    }
  } finally {
    if (floating !== t) floating.dispose();
    if (!(x instanceof Tensor)) t.dispose();
  }
}
