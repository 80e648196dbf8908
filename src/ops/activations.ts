/**
 * Activation functions, PyTorch semantics. Each is one elementwise primitive (or a small
 * expression of them), so the GPU runs it as one kernel; integers compute in float32.
 * @module
 */
import type { Tensor } from "../tensor.ts";
import { checkNumber, ValueError } from "../core/errors.ts";
import { runElementwise, type TensorLike } from "./_dispatch.ts";
import { E, type Expr } from "../ir/expr.ts";
import { unaryOp } from "./elementwise.ts";
import { isFloat } from "../core/dtype.ts";
import { checkOptions } from "../core/options.ts";
import { taped } from "../_tape.ts";

/**
 * `max(x, 0)`; NaN stays NaN.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.relu(gyre.tensor([-1, 2])); // [0, 2]
 * ```
 */
export const relu: (x: TensorLike) => Tensor = unaryOp("relu");

/**
 * `x * sigmoid(x)` (also called swish).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.silu(gyre.tensor([-1, 0, 1]));
 * ```
 */
export const silu: (x: TensorLike) => Tensor = unaryOp("silu");

/**
 * `x * tanh(softplus(x))`.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.mish(gyre.tensor([-1, 0, 1]));
 * ```
 */
export const mish: (x: TensorLike) => Tensor = unaryOp("mish");

/**
 * `x * relu6(x + 3) / 6`.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.hardswish(gyre.tensor([-4, 0, 1, 4])); // [0, 0, 0.6667, 4]
 * ```
 */
export const hardswish: (x: TensorLike) => Tensor = unaryOp("hardswish");

/**
 * `relu6(x + 3) / 6`.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.hardsigmoid(gyre.tensor([-4, 0, 4])); // [0, 0.5, 1]
 * ```
 */
export const hardsigmoid: (x: TensorLike) => Tensor = unaryOp("hardsigmoid");

/**
 * Scaled ELU with the self-normalising constants (alpha 1.6733, scale 1.0507).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.selu(gyre.tensor([-1, 1]));
 * ```
 */
export const selu: (x: TensorLike) => Tensor = unaryOp("selu");

/**
 * `x / (1 + |x|)`: +-1 for huge values, NaN for infinities (Inf / Inf), as PyTorch.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.softsign(gyre.tensor([-3, 1])); // [-0.75, 0.5]
 * ```
 */
export const softsign: (x: TensorLike) => Tensor = unaryOp("softsign");

/** Options of {@link gelu}. */
export interface GeluOptions {
  /** "none" (default): the exact erf form; "tanh": the tanh approximation. */
  approximate?: "none" | "tanh";
}

/**
 * Gaussian error linear unit, `x * Phi(x)`, exact (erf) by default or the tanh approximation.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.gelu(gyre.tensor([-1, 0, 1]), { approximate: "tanh" });
 * ```
 */
export function gelu(x: TensorLike, options: GeluOptions = {}): Tensor {
  checkOptions("gelu", options, ["approximate"]);
  const approximate = options.approximate ?? "none";
  if (approximate !== "none" && approximate !== "tanh") {
    throw new ValueError({
      op: "gelu",
      argument: "options.approximate",
      expected: '"none" or "tanh"',
      received: String(approximate),
    });
  }
  return taped(
    "gelu",
    [x],
    { approximate },
    () => floatUnary("gelu", x, (v) => E.unary(approximate === "tanh" ? "geluTanh" : "gelu", v)),
  );
}

function checkScalar(op: string, argument: string, value: number): number {
  return checkNumber(op, argument, value, "a number");
}

/** Runs a float activation built from `x` already cast to a float dtype. */
function floatUnary(op: string, x: TensorLike, build: (v: Expr) => Expr): Tensor {
  return runElementwise(
    op,
    [x],
    ["x"],
    ([leaf], [dtype]) => build(E.cast(leaf, isFloat(dtype) ? dtype : "float32")),
  );
}

/**
 * `x` where `x >= 0`, else `alpha * x`.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.leakyRelu(gyre.tensor([-2, 3]), { alpha: 0.1 }); // [-0.2, 3]
 * ```
 */
export function leakyRelu(x: TensorLike, options: { alpha?: number } = {}): Tensor {
  checkOptions("leakyRelu", options, ["alpha"]);
  const alpha = checkScalar("leakyRelu", "options.alpha", options.alpha ?? 0.01);
  return taped(
    "leakyRelu",
    [x],
    { alpha },
    () => floatUnary("leakyRelu", x, (v) => E.binary("leakyRelu", v, E.constant(alpha, v.dtype))),
  );
}

/**
 * `x` where `x > 0`, else `alpha * (exp(x) - 1)`.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.elu(gyre.tensor([-1, 2])); // [-0.632, 2]
 * ```
 */
export function elu(x: TensorLike, options: { alpha?: number } = {}): Tensor {
  checkOptions("elu", options, ["alpha"]);
  const alpha = checkScalar("elu", "options.alpha", options.alpha ?? 1);
  return taped(
    "elu",
    [x],
    { alpha },
    () => floatUnary("elu", x, (v) => E.binary("elu", v, E.constant(alpha, v.dtype))),
  );
}

/**
 * `log(1 + exp(beta * x)) / beta`, and `x` itself where `beta * x > threshold` (PyTorch).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.softplus(gyre.tensor([-1, 0, 30]), { beta: 1, threshold: 20 });
 * ```
 */
export function softplus(
  x: TensorLike,
  options: { beta?: number; threshold?: number } = {},
): Tensor {
  checkOptions("softplus", options, ["beta", "threshold"]);
  const beta = checkNumber(
    "softplus",
    "options.beta",
    options.beta ?? 1,
    "a non-zero number",
    (v) => v !== 0 && !Number.isNaN(v),
  );
  const threshold = checkScalar("softplus", "options.threshold", options.threshold ?? 20);
  return taped("softplus", [x], { beta, threshold }, () => softplusOf(x, beta, threshold));
}

function softplusOf(x: TensorLike, beta: number, threshold: number): Tensor {
  return floatUnary("softplus", x, (v) => {
    const scaled = beta === 1 ? v : E.binary("mul", v, E.constant(beta, v.dtype));
    const smooth = beta === 1
      ? E.unary("softplus", scaled)
      : E.binary("div", E.unary("softplus", scaled), E.constant(beta, v.dtype));
    const linear = E.binary("greater", scaled, E.constant(threshold, v.dtype), "bool");
    return E.where(linear, v, smooth);
  });
}
