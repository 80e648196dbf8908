/**
 * Gradient rules of the row ops: softmax, logSoftmax, layerNorm and rmsNorm (with weight and
 * bias). Each is a few elementwise ops around one or two row sums, which fuse as the forward's do.
 * @module
 */
import type { Tensor } from "../tensor.ts";
import { normalizeAxes } from "../core/shape.ts";
import { add, exp, mul, rsqrt, sub } from "../ops/elementwise.ts";
import { mean, sum, variance } from "../ops/reduce.ts";
import { reshape } from "../ops/shape.ts";
import { defineRule, type RuleContext } from "./_rules.ts";

function rowAxis(c: { attrs: Readonly<Record<string, unknown>> }, x: Tensor): number[] {
  return normalizeAxes("grad", (c.attrs.axis as number | number[] | undefined) ?? -1, x.rank);
}

defineRule("softmax", (c) => {
  const y = c.outputs[0], g = c.cts[0]!;
  const axis = rowAxis(c, y);
  return [mul(y, sub(g, sum(mul(g, y), { axis, keepdims: true })))];
});

defineRule("logSoftmax", (c) => {
  const y = c.outputs[0], g = c.cts[0]!;
  const axis = rowAxis(c, y);
  return [sub(g, mul(exp(y), sum(g, { axis, keepdims: true })))];
});

/** A parameter of the normalised axes' shape, reshaped to broadcast against x. */
function alongAxes(p: Tensor, x: Tensor, axes: number[]): Tensor {
  return reshape(p, x.shape.map((d, i) => (axes.includes(i) ? d : 1)));
}

function normGrad(c: RuleContext, layer: boolean): (Tensor | null)[] {
  const x = c.inputs[0] as Tensor, weight = c.inputs[1] as Tensor | undefined;
  const g = c.cts[0]!;
  const axis = rowAxis(c, x);
  const eps = (c.attrs.eps as number | undefined) ?? (layer ? 1e-5 : 1e-6);
  const keep = { axis, keepdims: true };
  const centred = layer ? sub(x, mean(x, keep)) : x;
  const spread = layer ? variance(x, keep) : mean(mul(x, x), keep);
  const rstd = rsqrt(add(spread, eps));
  const xhat = mul(centred, rstd);
  const gh = weight ? mul(g, alongAxes(weight, x, axis)) : g;
  let inner = sub(gh, mul(xhat, mean(mul(gh, xhat), keep)));
  if (layer) inner = sub(inner, mean(gh, keep));
  const dx = c.needs[0] ? mul(rstd, inner) : null;
  const others = x.shape.map((_, i) => i).filter((i) => !axis.includes(i));
  const dw = c.needs[1] && weight
    ? reshape(sum(mul(g, xhat), { axis: others }), weight.shape)
    : null;
  const db = layer && c.needs[2]
    ? reshape(sum(g, { axis: others }), (c.inputs[2] as Tensor).shape)
    : null;
  return layer ? [dx, dw, db] : [dx, dw];
}

defineRule("layerNorm", (c) => normGrad(c, true));
defineRule("rmsNorm", (c) => normGrad(c, false));
