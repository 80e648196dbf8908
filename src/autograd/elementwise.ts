/**
 * Gradient rules of the elementwise ops and activations. Conventions at kinks follow PyTorch:
 * relu'(0) = 0, abs'(0) = 0 (sign), maximum/minimum split a tie's gradient in halves, clip passes
 * the gradient where the bound is met (x >= min and x <= max). floor, ceil, round and sign have
 * zero gradient; comparisons and logical ops return bools, which carry none.
 * @module
 */
import type { Tensor } from "../tensor.ts";
import { isFloat } from "../core/dtype.ts";
import type { TensorLike } from "../ops/_dispatch.ts";
import {
  abs,
  add,
  cos,
  div,
  equal,
  erf,
  exp,
  floor,
  greater,
  greaterEqual,
  less,
  lessEqual,
  log,
  logicalAnd,
  mul,
  neg,
  pow,
  sigmoid,
  sign,
  sin,
  square,
  sub,
  tanh,
  where,
} from "../ops/elementwise.ts";
import { softplus } from "../ops/activations.ts";
import { defineRule, defineZeroRule, type RuleContext } from "./_rules.ts";

type Unary = (g: Tensor, x: Tensor, y: Tensor, attrs: Readonly<Record<string, unknown>>) => Tensor;

const SQRT_2_OVER_PI = Math.sqrt(2 / Math.PI);
const SELU_ALPHA = 1.6732632423543772;
const SELU_SCALE = 1.0507009873554805;

/** The cotangent of gelu at `x` (`approximate`: "tanh" or the exact erf form). */
export function geluGrad(g: Tensor, x: Tensor, approximate: unknown): Tensor {
  if (approximate === "tanh") {
    // d/dx of 0.5 x (1 + tanh(k (x + c x^3))), as PyTorch's gelu_backward.
    const c = 0.044715;
    const t = tanh(mul(add(x, mul(pow(x, 3), c)), SQRT_2_OVER_PI));
    const inner = mul(add(mul(square(x), 3 * c), 1), SQRT_2_OVER_PI);
    const d = add(mul(add(t, 1), 0.5), mul(mul(mul(x, 0.5), sub(1, square(t))), inner));
    return mul(g, d);
  }
  // Phi(x) + x phi(x).
  const cdf = mul(add(erf(mul(x, Math.SQRT1_2)), 1), 0.5);
  const pdf = mul(exp(mul(square(x), -0.5)), 1 / Math.sqrt(2 * Math.PI));
  return mul(g, add(cdf, mul(x, pdf)));
}

/** The cotangent of silu at `x`: s (1 + x (1 - s)) with s = sigmoid(x). */
export function siluGrad(g: Tensor, x: Tensor): Tensor {
  const s = sigmoid(x);
  return mul(g, mul(s, add(mul(x, sub(1, s)), 1)));
}

const UNARY_RULES: Record<string, Unary> = {
  neg: (g) => neg(g),
  abs: (g, x) => mul(g, sign(x)),
  square: (g, x) => mul(g, mul(x, 2)),
  reciprocal: (g, _x, y) => neg(mul(g, square(y))),
  exp: (g, _x, y) => mul(g, y),
  exp2: (g, _x, y) => mul(g, mul(y, Math.LN2)),
  log: (g, x) => div(g, x),
  log2: (g, x) => div(g, mul(x, Math.LN2)),
  log1p: (g, x) => div(g, add(x, 1)),
  expm1: (g, _x, y) => mul(g, add(y, 1)),
  sqrt: (g, _x, y) => div(g, mul(y, 2)),
  rsqrt: (g, _x, y) => mul(g, mul(mul(square(y), y), -0.5)),
  sin: (g, x) => mul(g, cos(x)),
  cos: (g, x) => neg(mul(g, sin(x))),
  tan: (g, _x, y) => mul(g, add(square(y), 1)),
  tanh: (g, _x, y) => mul(g, sub(1, square(y))),
  sigmoid: (g, _x, y) => mul(g, mul(y, sub(1, y))),
  erf: (g, x) => mul(g, mul(exp(neg(square(x))), 2 / Math.sqrt(Math.PI))),
  // PyTorch's threshold_backward: zero where the result is <= 0 (so at 0 too).
  relu: (g, _x, y) => where(lessEqual(y, 0), 0, g),
  gelu: (g, x, _y, a) => geluGrad(g, x, a.approximate),
  geluTanh: (g, x) => geluGrad(g, x, "tanh"),
  silu: (g, x) => siluGrad(g, x),
  mish: (g, x) => {
    const t = tanh(softplus(x));
    return mul(g, add(t, mul(mul(x, sub(1, square(t))), sigmoid(x))));
  },
  softplus: (g, x, _y, a) => {
    const beta = (a.beta as number | undefined) ?? 1;
    const threshold = (a.threshold as number | undefined) ?? Infinity;
    const scaled = mul(x, beta);
    return where(greater(scaled, threshold), g, mul(g, sigmoid(scaled)));
  },
  hardswish: (g, x) =>
    where(less(x, -3), 0, where(lessEqual(x, 3), mul(g, add(div(x, 3), 0.5)), g)),
  hardsigmoid: (g, x) => where(logicalAnd(greater(x, -3), less(x, 3)), div(g, 6), 0),
  selu: (g, x, y) =>
    where(greater(x, 0), mul(g, SELU_SCALE), mul(g, add(y, SELU_SCALE * SELU_ALPHA))),
  softsign: (g, x) => div(g, square(add(abs(x), 1))),
  leakyRelu: (g, x, _y, a) => where(greater(x, 0), g, mul(g, a.alpha as number)),
  elu: (g, x, y, a) => where(greater(x, 0), g, mul(g, add(y, a.alpha as number))),
};

for (const [op, rule] of Object.entries(UNARY_RULES)) {
  defineRule(op, (c) => {
    // The table's binary leakyRelu and elu (binaryOp) carry alpha as their second operand.
    const attrs = c.inputs.length > 1 ? { alpha: c.inputs[1] } : c.attrs;
    return [rule(c.cts[0]!, c.inputs[0] as Tensor, c.outputs[0], attrs)];
  });
}

defineZeroRule(["sign", "floor", "ceil", "round", "floorDiv"]);

/** A binary rule's two cotangents, each computed only when needed. */
function binary(
  c: RuleContext,
  da: (g: Tensor, a: TensorLike, b: TensorLike) => Tensor,
  db: (g: Tensor, a: TensorLike, b: TensorLike) => Tensor,
): (Tensor | null)[] {
  const g = c.cts[0]!;
  const [a, b] = c.inputs as TensorLike[];
  return [c.needs[0] ? da(g, a, b) : null, c.needs[1] ? db(g, a, b) : null];
}

defineRule("add", (c) => binary(c, (g) => g, (g) => g));
defineRule("sub", (c) => binary(c, (g) => g, (g) => neg(g)));
defineRule("mul", (c) => binary(c, (g, _a, b) => mul(g, b), (g, a) => mul(g, a)));
defineRule("div", (c) =>
  binary(
    c,
    (g, _a, b) => div(g, b),
    // PyTorch's form, -g a / b^2.
    (g, a, b) => neg(div(mul(g, a), mul(b, b))),
  ));
defineRule("pow", (c) => {
  const y = c.outputs[0];
  return binary(
    c,
    // Zero where the exponent is 0 (x^0 is constant), as PyTorch: no 0 * Inf at x = 0.
    (g, a, b) =>
      typeof b === "number"
        ? (b === 0 ? mul(g, 0) : mul(g, mul(pow(a, b - 1), b)))
        : where(equal(b, 0), 0, mul(g, mul(b, pow(a, sub(b, 1))))),
    // Zero where the base is 0 and the exponent >= 0, as PyTorch (log 0 would give NaN).
    (g, a, b) => where(logicalAnd(equal(a, 0), greaterEqual(b, 0)), 0, mul(g, mul(y, log(a)))),
  );
});
// PyTorch: a tie splits the gradient in halves; otherwise it goes to the larger (smaller) one.
defineRule("maximum", (c) =>
  binary(
    c,
    (g, a, b) => where(less(a, b), 0, where(equal(a, b), div(g, 2), g)),
    (g, a, b) => where(greater(a, b), 0, where(equal(a, b), div(g, 2), g)),
  ));
defineRule("minimum", (c) =>
  binary(
    c,
    (g, a, b) => where(greater(a, b), 0, where(equal(a, b), div(g, 2), g)),
    (g, a, b) => where(less(a, b), 0, where(equal(a, b), div(g, 2), g)),
  ));
// NumPy's remainder: a - b floor(a / b).
defineRule("mod", (c) => binary(c, (g) => g, (g, a, b) => neg(mul(g, floor(div(a, b))))));

defineRule("where", (c) => {
  const g = c.cts[0]!;
  const cond = c.inputs[0] as TensorLike;
  return [null, c.needs[1] ? where(cond, g, 0) : null, c.needs[2] ? where(cond, 0, g) : null];
});

defineRule("clip", (c) => {
  const g = c.cts[0]!;
  const x = c.inputs[0] as Tensor;
  const lo = c.attrs.min as number | null, hi = c.attrs.max as number | null;
  let inside: Tensor | null = null;
  if (lo !== null) inside = greaterEqual(x, lo);
  if (hi !== null) inside = inside ? logicalAnd(inside, lessEqual(x, hi)) : lessEqual(x, hi);
  return [where(inside!, g, 0)];
});

// A cast between floats passes the cotangent (backprop casts it back); to or from integers none.
defineRule("cast", (c) => {
  const x = c.inputs[0] as Tensor;
  return [isFloat(c.outputs[0].dtype) && isFloat(x.dtype) ? c.cts[0] : null];
});
