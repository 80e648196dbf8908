/**
 * Gradient rules of the reductions. max and min split the gradient evenly between tied maxima
 * (PyTorch's amax/amin); prod handles zeros exactly (one zero: its gradient is the product of the
 * others; two or more: all zero); std's gradient is 0 where the deviation is 0 (as PyTorch).
 * @module
 */
import type { Tensor } from "../tensor.ts";
import { sizeOf } from "../core/shape.ts";
import { div, equal, exp, logicalAnd, mul, sub, where } from "../ops/elementwise.ts";
import { mean, prod, sum } from "../ops/reduce.ts";
import { defineRule, reducedAxes, unreduce } from "./_rules.ts";

defineRule(
  "sum",
  (c) => [unreduce(c.cts[0]!, c.inputs[0] as Tensor, c.attrs.axis, c.attrs.keepdims)],
);

function count(x: Tensor, axis: unknown): number {
  return sizeOf(reducedAxes(x, axis).map((a) => x.shape[a]));
}

defineRule("mean", (c) => {
  const x = c.inputs[0] as Tensor;
  return [div(unreduce(c.cts[0]!, x, c.attrs.axis, c.attrs.keepdims), count(x, c.attrs.axis))];
});

for (const op of ["max", "min"]) {
  defineRule(op, (c) => {
    const x = c.inputs[0] as Tensor;
    const { axis, keepdims } = c.attrs;
    const hit = equal(x, unreduce(c.outputs[0], x, axis, keepdims));
    const ties = sum(hit, { axis: reducedAxes(x, axis), keepdims: true });
    return [where(hit, div(unreduce(c.cts[0]!, x, axis, keepdims), ties), 0)];
  });
}

defineRule("prod", (c) => {
  const x = c.inputs[0] as Tensor;
  const { axis, keepdims } = c.attrs;
  const axes = reducedAxes(x, axis);
  const g = unreduce(c.cts[0]!, x, axis, keepdims);
  const zero = equal(x, 0);
  const zeros = unreduce(sum(zero, { axis: axes, keepdims: true }), x, axes, true);
  // Without zeros: y / x. At a row's only zero: the product of the others.
  const others = unreduce(prod(where(zero, 1, x), { axis: axes, keepdims: true }), x, axes, true);
  const y = unreduce(c.outputs[0], x, axis, keepdims);
  const d = where(equal(zeros, 0), div(y, x), where(logicalAnd(equal(zeros, 1), zero), others, 0));
  return [mul(g, d)];
});

defineRule("logsumexp", (c) => {
  const x = c.inputs[0] as Tensor;
  const { axis, keepdims } = c.attrs;
  const y = unreduce(c.outputs[0], x, axis, keepdims);
  return [mul(unreduce(c.cts[0]!, x, axis, keepdims), exp(sub(x, y)))];
});

function deviation(x: Tensor, axis: unknown): Tensor {
  return sub(x, mean(x, { axis: reducedAxes(x, axis), keepdims: true }));
}

defineRule("variance", (c) => {
  const x = c.inputs[0] as Tensor;
  const { axis, keepdims } = c.attrs;
  const ddof = (c.attrs.ddof as number | undefined) ?? 0;
  const g = unreduce(c.cts[0]!, x, axis, keepdims);
  return [mul(g, mul(deviation(x, axis), 2 / (count(x, axis) - ddof)))];
});

defineRule("std", (c) => {
  const x = c.inputs[0] as Tensor;
  const { axis, keepdims } = c.attrs;
  const ddof = (c.attrs.ddof as number | undefined) ?? 0;
  const g = unreduce(c.cts[0]!, x, axis, keepdims);
  const y = unreduce(c.outputs[0], x, axis, keepdims);
  const d = div(deviation(x, axis), mul(y, count(x, axis) - ddof));
  return [where(equal(y, 0), 0, mul(g, d))];
});
