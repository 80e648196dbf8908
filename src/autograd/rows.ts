/**
 * Gradient rules of the row ops: softmax, logSoftmax, layerNorm, rmsNorm, groupNorm and batchNorm
 * (with weight and bias; batchNorm in inference mode also to its running mean and variance, in
 * training mode through the batch statistics it normalises with, and from its statistics outputs). Where the device has a one-pass backward for the rows (src/ops/_rows_backward.ts) the
 * input's cotangent is one kernel; elsewhere it is composed of one or two row sums and
 * elementwise ops (`composedRowBackward`, the reference the one-pass kernel is tested against).
 * @module
 */
import type { Tensor } from "../tensor.ts";
import { normalizeAxes } from "../core/shape.ts";
import { add, div, exp, mul, neg, pow, rsqrt, sub } from "../ops/elementwise.ts";
import { mean, sum, variance } from "../ops/reduce.ts";
import { reshape } from "../ops/shape.ts";
import { defineRule, type RuleContext } from "./_rules.ts";
import type { RowKind } from "../contract/rows.ts";
import { isFollowed } from "../_tape.ts";
import { fusedRowBackward } from "../ops/_rows_backward.ts";

function rowAxis(c: { attrs: Readonly<Record<string, unknown>> }, x: Tensor): number[] {
  return normalizeAxes("grad", (c.attrs.axis as number | number[] | undefined) ?? -1, x.rank);
}

/** A parameter of the normalised axes' shape, reshaped to broadcast against x. */
function alongAxes(p: Tensor, x: Tensor, axes: number[]): Tensor {
  return reshape(p, x.shape.map((d, i) => (axes.includes(i) ? d : 1)));
}

/** The norms' statistics: the centred (layerNorm) or plain (rmsNorm) x, and 1 / its RMS. */
function normStats(layer: boolean, x: Tensor, axis: number[], eps: number) {
  const keep = { axis, keepdims: true };
  const centred = layer ? sub(x, mean(x, keep)) : x;
  const spread = layer ? variance(x, keep) : mean(mul(x, x), keep);
  const rstd = rsqrt(add(spread, eps));
  return { rstd, xhat: mul(centred, rstd) };
}

/**
 * The cotangent of a row op's input, composed of row sums and elementwise ops: `a` is softmax's
 * and logSoftmax's output, the norms' input; `g` the output's cotangent; `axis` the normalised
 * axes.
 */
export function composedRowBackward(
  kind: RowKind,
  a: Tensor,
  g: Tensor,
  weight: Tensor | null,
  eps: number,
  axis: number[],
): Tensor {
  const keep = { axis, keepdims: true };
  if (kind === "softmax") return mul(a, sub(g, sum(mul(g, a), keep)));
  if (kind === "logSoftmax") return sub(g, mul(exp(a), sum(g, keep)));
  const layer = kind === "layerNorm";
  const { rstd, xhat } = normStats(layer, a, axis, eps);
  const gw = weight ? mul(g, alongAxes(weight, a, axis)) : g;
  let inner = sub(gw, mul(xhat, mean(mul(gw, xhat), keep)));
  if (layer) inner = sub(inner, mean(gw, keep));
  return mul(rstd, inner);
}

/**
 * The input's cotangent: the device's one pass where it applies (rows along the last axis, and
 * no open tape differentiating the backward itself: its kernel has no rule, so under a tape the
 * composed form is recorded instead and higher orders stay exact), else composed.
 */
function rowBackward(
  kind: RowKind,
  a: Tensor,
  g: Tensor,
  weight: Tensor | null,
  eps: number,
  axis: number[],
): Tensor {
  const lastAxis = axis.length === 1 && axis[0] === a.rank - 1;
  const taped = [a, g, weight].some((t) => t !== null && isFollowed(t));
  return (lastAxis && !taped ? fusedRowBackward(kind, a, g, weight, eps) : null) ??
    composedRowBackward(kind, a, g, weight, eps, axis);
}

for (const kind of ["softmax", "logSoftmax"] as const) {
  defineRule(kind, (c) => {
    const y = c.outputs[0];
    return [rowBackward(kind, y, c.cts[0]!, null, 0, rowAxis(c, y))];
  });
}

function normGrad(c: RuleContext, layer: boolean): (Tensor | null)[] {
  const x = c.inputs[0] as Tensor, weight = (c.inputs[1] as Tensor | undefined) ?? null;
  const g = c.cts[0]!;
  const axis = rowAxis(c, x);
  const eps = (c.attrs.eps as number | undefined) ?? (layer ? 1e-5 : 1e-6);
  const kind = layer ? "layerNorm" : "rmsNorm";
  const dx = c.needs[0] ? rowBackward(kind, x, g, weight, eps, axis) : null;
  const others = x.shape.map((_, i) => i).filter((i) => !axis.includes(i));
  const dw = c.needs[1] && weight
    ? reshape(sum(mul(g, normStats(layer, x, axis, eps).xhat), { axis: others }), weight.shape)
    : null;
  const db = layer && c.needs[2]
    ? reshape(sum(g, { axis: others }), (c.inputs[2] as Tensor).shape)
    : null;
  return layer ? [dx, dw, db] : [dx, dw];
}

defineRule("layerNorm", (c) => normGrad(c, true));
defineRule("rmsNorm", (c) => normGrad(c, false));

/** A per-channel ([C]) parameter shaped to broadcast along axis 1 of x. */
function perChannel(p: Tensor, x: Tensor): Tensor {
  return reshape(p, x.shape.map((d, i) => (i === 1 ? d : 1)));
}

/** Every axis of x but the channels' (axis 1). */
function notChannels(x: Tensor): number[] {
  return x.shape.map((_, i) => i).filter((i) => i !== 1);
}

defineRule("groupNorm", (c) => {
  const x = c.inputs[0] as Tensor, weight = (c.inputs[1] as Tensor | undefined) ?? null;
  const g = c.cts[0]!;
  const groups = c.attrs.groups as number;
  const eps = (c.attrs.eps as number | undefined) ?? 1e-5;
  // A group's channels and positions form one layerNorm row of [N, groups, rest].
  const rows = [x.shape[0], groups, -1];
  const xr = reshape(x, rows);
  const gw = weight ? mul(g, perChannel(weight, x)) : g;
  const dx = c.needs[0]
    ? reshape(rowBackward("layerNorm", xr, reshape(gw, rows), null, eps, [2]), x.shape)
    : null;
  const xhat = () => reshape(normStats(true, xr, [2], eps).xhat, x.shape);
  return [
    dx,
    c.needs[1] ? sum(mul(g, xhat()), { axis: notChannels(x) }) : null,
    c.needs[2] ? sum(g, { axis: notChannels(x) }) : null,
  ];
});

defineRule("batchNorm", (c) => {
  const [x, weight, , runningMean, runningVariance] = c.inputs as (Tensor | undefined)[];
  const xt = x!;
  const eps = (c.attrs.eps as number | undefined) ?? 1e-5;
  const axes = notChannels(xt);
  if (c.attrs.training === true) return batchNormTrainingGrad(c, xt, weight ?? null, eps, axes);
  const g = c.cts[0];
  if (!g) return [null, null, null, null, null];
  const gw = weight ? mul(g, perChannel(weight, xt)) : g;
  // Inference: y = (x - mean) rstd w + b with the running statistics as inputs.
  const rstd = rsqrt(add(perChannel(runningVariance!, xt), eps));
  const centred = sub(xt, perChannel(runningMean!, xt));
  return [
    c.needs[0] ? mul(gw, rstd) : null,
    c.needs[1] ? sum(mul(g, mul(centred, rstd)), { axis: axes }) : null,
    c.needs[2] ? sum(g, { axis: axes }) : null,
    c.needs[3] ? neg(sum(mul(gw, rstd), { axis: axes })) : null,
    c.needs[4] ? sum(mul(mul(gw, centred), mul(pow(rstd, 3), -0.5)), { axis: axes }) : null,
  ];
});

/**
 * batchNorm in training mode, to every output: the normalised output (layerNorm's backward over
 * every axis but the channels'), the batch mean and the biased and unbiased variances (each a
 * per-channel statistic of x), and the running statistics, `(1 - momentum) running + momentum
 * batch`, which also reach the running inputs.
 */
function batchNormTrainingGrad(
  c: RuleContext,
  x: Tensor,
  weight: Tensor | null,
  eps: number,
  axes: number[],
): (Tensor | null)[] {
  const [g, gMean, gVariance, gUnbiased, gRunningMean, gRunningVariance] = c.cts;
  const momentum = (c.attrs.momentum as number | undefined) ?? 0.1;
  const n = axes.reduce((p, a) => p * x.shape[a], 1);
  let dx: Tensor | null = null;
  const plus = (t: Tensor) => (dx = dx ? add(dx, t) : t);
  if (g && c.needs[0]) {
    plus(rowBackward("layerNorm", x, weight ? mul(g, perChannel(weight, x)) : g, null, eps, axes));
  }
  // The statistics' cotangents, per channel: the mean's, and the biased variance's (the unbiased
  // one is n / (n - 1) times it; the running ones take `momentum` of the batch's).
  const scaled = (t: Tensor | null, k: number) => (t ? mul(t, k) : null);
  const meanCt = [gMean, scaled(gRunningMean, momentum)].filter((t): t is Tensor => t !== null);
  const varianceCt = [
    gVariance,
    scaled(gUnbiased, n / (n - 1)),
    scaled(gRunningVariance, (momentum * n) / (n - 1)),
  ].filter((t): t is Tensor => t !== null);
  if (c.needs[0] && meanCt.length) plus(div(perChannel(meanCt.reduce((a, b) => add(a, b)), x), n));
  if (c.needs[0] && varianceCt.length) {
    const centred = sub(x, mean(x, { axis: axes, keepdims: true }));
    plus(mul(perChannel(varianceCt.reduce((a, b) => add(a, b)), x), mul(centred, 2 / n)));
  }
  return [
    dx,
    g && c.needs[1] ? sum(mul(g, normStats(true, x, axes, eps).xhat), { axis: axes }) : null,
    g && c.needs[2] ? sum(g, { axis: axes }) : null,
    gRunningMean && c.needs[3] ? mul(gRunningMean, 1 - momentum) : null,
    gRunningVariance && c.needs[4] ? mul(gRunningVariance, 1 - momentum) : null,
  ];
}
