/**
 * Gradient rules of the indexing ops: a gather's cotangent is a scatter-add of it (duplicate
 * indices accumulate), a scatter's is a gather. Indices carry no gradient. Segment maxima and
 * minima split a segment's cotangent evenly between its tied extremes (as `max`); segment products
 * handle zeros as `prod`. `at` and `maskedSelect` scatter back to the positions they read, found
 * by applying the op to a ramp of positions.
 * @module
 */
import type { Tensor } from "../tensor.ts";
import { normalizeAxis } from "../core/shape.ts";
import { zeros } from "../creation.ts";
import {
  add,
  div,
  equal,
  greater,
  less,
  logicalAnd,
  maximum,
  mul,
  where,
} from "../ops/elementwise.ts";
import {
  at,
  type AtRange,
  gather,
  maskedSelect,
  scatter,
  scatterAdd,
  segmentProd,
  segmentSum,
  take,
} from "../ops/indexing.ts";
import { broadcastTo, reshape, slice } from "../ops/shape.ts";
import { untaped } from "../_tape.ts";
import { defineRule, positionsOf, type RuleContext, scatterToPositions } from "./_rules.ts";

function zerosShaped(shape: readonly number[], like: Tensor): Tensor {
  return zeros(shape, { dtype: like.dtype, device: like.device });
}

function axisOf(c: RuleContext, rank: number, fallback: number): number {
  return normalizeAxis("grad", (c.attrs.axis as number | undefined) ?? fallback, Math.max(rank, 1));
}

defineRule("gather", (c) => {
  const x = c.inputs[0] as Tensor, indices = c.inputs[1] as Tensor, g = c.cts[0]!;
  const axis = axisOf(c, x.rank, -1);
  return [scatterAdd(zerosShaped(x.shape, g), indices, g, { axis }), null];
});

defineRule("takeAlongAxis", (c) => {
  const x = c.inputs[0] as Tensor, indices = c.inputs[1] as Tensor, g = c.cts[0]!;
  const axis = axisOf(c, x.rank, -1);
  // Indices and x broadcast on the other axes: scatter into x's shape widened to the result's
  // there (backprop sums the widening away).
  const target = g.shape.map((d, i) => (i === axis ? x.shape[axis] : d));
  const wide = untaped(() => broadcastTo(indices, g.shape));
  return [scatterAdd(zerosShaped(target, g), wide, g, { axis }), null];
});

/** The cotangent of a take of `indices` along `axis` (the indices' axes replaced it). */
function untake(g: Tensor, x: Tensor, indices: Tensor, axis: number | null): Tensor {
  if (axis === null) return scatterToPositions(g, x, indices);
  const m = indices.size;
  const shape = x.shape.map((d, i) => (i === axis ? m : d));
  const g2 = reshape(g, shape);
  const at = untaped(() =>
    broadcastTo(reshape(indices, x.shape.map((_, i) => (i === axis ? m : 1))), shape)
  );
  return scatterAdd(zerosShaped(x.shape, g), at, g2, { axis });
}

defineRule("take", (c) => {
  const x = c.inputs[0] as Tensor;
  const axis = c.attrs.axis === undefined ? null : axisOf(c, x.rank, 0);
  return [untake(c.cts[0]!, x, c.inputs[1] as Tensor, axis), null];
});

defineRule("indexSelect", (c) => {
  const x = c.inputs[0] as Tensor;
  return [untake(c.cts[0]!, x, c.inputs[1] as Tensor, axisOf(c, x.rank, 0)), null];
});

function scatterGrad(c: RuleContext, summed: boolean): (Tensor | null)[] {
  const x = c.inputs[0] as Tensor, indices = c.inputs[1] as Tensor, g = c.cts[0]!;
  const axis = axisOf(c, x.rank, -1);
  // Replaced elements pass no gradient to x; summed ones do.
  const dx = c.needs[0]
    ? summed ? g : where(greater(scatter(zerosShaped(x.shape, g), indices, 1, { axis }), 0), 0, g)
    : null;
  const du = c.needs[2] ? gather(g, indices, { axis }) : null;
  return [dx, null, du];
}

defineRule("scatterAdd", (c) => scatterGrad(c, true));
/**
 * scatter's reductions with x among the terms (PyTorch's `include_self`): "mean" divides each
 * slot's cotangent by its term count; "max" and "min" split it evenly between the tied extremes
 * (x's value and the updates that equal the result); "prod" gives x the updates' product and each
 * update the product of the slot's other terms (zeros exact, as `prod`).
 */
function scatterReduceGrad(c: RuleContext, reduce: string): (Tensor | null)[] {
  const x = c.inputs[0] as Tensor, indices = c.inputs[1] as Tensor, g = c.cts[0]!;
  const updates = c.inputs[2];
  const axis = axisOf(c, x.rank, -1);
  // A number as the updates is that value at every index.
  const u = typeof updates === "number"
    ? untaped(() => zerosShaped(indices.shape, g).add(updates))
    : updates as Tensor;
  const y = c.outputs[0];
  // Per slot: the sum of `terms` over the updates scattered there.
  const slots = (terms: Tensor) => scatterAdd(zerosShaped(x.shape, g), indices, terms, { axis });
  const ones = () => untaped(() => zerosShaped(indices.shape, g).add(1));
  if (reduce === "mean") {
    const count = untaped(() => slots(ones()).add(1));
    const share = div(g, count);
    return [c.needs[0] ? share : null, null, c.needs[2] ? gather(share, indices, { axis }) : null];
  }
  if (reduce === "max" || reduce === "min") {
    const hitX = equal(x, y);
    const hitU = equal(u, gather(y, indices, { axis }));
    const count = untaped(() => slots(where(hitU, 1, 0).cast(g.dtype)).add(where(hitX, 1, 0)));
    const share = div(g, count);
    return [
      c.needs[0] ? where(hitX, share, 0) : null,
      null,
      c.needs[2] ? where(hitU, gather(share, indices, { axis }), 0) : null,
    ];
  }
  // prod: y = x * (the updates' product). Zeros among a slot's updates handled as `prod` does.
  const zero = equal(u, 0);
  const products = (terms: Tensor) =>
    scatter(zerosShaped(x.shape, g).add(1), indices, terms, { axis, reduce: "prod" });
  const all = products(u);
  const zeros = untaped(() => slots(where(zero, 1, 0).cast(g.dtype)));
  const others = products(where(zero, 1, u));
  const at = (t: Tensor) => gather(t, indices, { axis });
  const du = () => {
    const gx = mul(at(g), at(x));
    const none = div(at(all), u);
    const one = where(logicalAnd(equal(at(zeros), 1), zero), at(others), 0);
    return mul(gx, where(equal(at(zeros), 0), none, one));
  };
  return [c.needs[0] ? mul(g, all) : null, null, c.needs[2] ? du() : null];
}

defineRule("scatter", (c) => {
  const reduce = (c.attrs.reduce as string | undefined) ?? "none";
  if (reduce === "none" || reduce === "sum") return scatterGrad(c, reduce === "sum");
  if (typeof c.inputs[2] === "number") {
    return [
      scatterReduceGrad({ ...c, inputs: [c.inputs[0], c.inputs[1], null] }, reduce)[0],
      null,
      null,
    ];
  }
  return scatterReduceGrad(c, reduce);
});

/** ids with the negative ones (dropped by the forward) at 0, and the mask of those. */
function segmentRows(c: RuleContext): { rows: Tensor; dropped: Tensor } {
  const ids = c.inputs[1] as Tensor;
  return untaped(() => {
    const dropped = less(ids, 0);
    return { rows: where(dropped, 0, ids), dropped };
  });
}

/** `values` taken at each data row's segment, zero for dropped rows. */
function perRow(values: Tensor, c: RuleContext): Tensor {
  const data = c.inputs[0] as Tensor, ids = c.inputs[1] as Tensor;
  const { rows, dropped } = segmentRows(c);
  const taken = take(values, reshape(rows, [-1]), { axis: 0 });
  const shaped = reshape(taken, data.shape);
  const mask = reshape(dropped, [...ids.shape, ...data.shape.slice(ids.rank).map(() => 1)]);
  return where(mask, 0, shaped);
}

defineRule("segmentSum", (c) => [perRow(c.cts[0]!, c), null]);

defineRule("segmentMean", (c) => {
  const ids = c.inputs[1] as Tensor, g = c.cts[0]!;
  const counts = untaped(() =>
    maximum(
      segmentSum(zerosShaped(ids.shape, g).add(1), ids, {
        numSegments: g.shape[0],
      }),
      1,
    )
  );
  const perSegment = div(g, reshape(counts, [g.shape[0], ...g.shape.slice(1).map(() => 1)]));
  return [perRow(perSegment, c), null];
});

for (const op of ["segmentMax", "segmentMin"]) {
  defineRule(op, (c) => {
    const data = c.inputs[0] as Tensor, ids = c.inputs[1] as Tensor, g = c.cts[0]!;
    const numSegments = g.shape[0];
    const hit = equal(data, perRow(c.outputs[0], c));
    const ties = maximum(segmentSum(where(hit, 1, 0).cast(g.dtype), ids, { numSegments }), 1);
    return [where(hit, div(perRow(g, c), perRow(ties, c)), 0), null];
  });
}

defineRule("segmentProd", (c) => {
  const data = c.inputs[0] as Tensor, ids = c.inputs[1] as Tensor, g = c.cts[0]!;
  const numSegments = g.shape[0];
  const zero = equal(data, 0);
  const zeros = perRow(segmentSum(where(zero, 1, 0).cast(g.dtype), ids, { numSegments }), c);
  const others = perRow(segmentProd(where(zero, 1, data), ids, { numSegments }), c);
  const y = perRow(c.outputs[0], c);
  // As prod: y / x without zeros; at a segment's only zero, the product of the others.
  const d = where(
    equal(zeros, 0),
    div(y, data),
    where(logicalAnd(equal(zeros, 1), zero), others, 0),
  );
  return [mul(perRow(g, c), d), null];
});

defineRule("at", (c) => {
  const x = c.inputs[0] as Tensor, g = c.cts[0]!;
  const ranges = c.attrs.ranges as AtRange[];
  const read = untaped(() => at(positionsOf(x), ...ranges));
  return [scatterToPositions(g, x, read), ...ranges.map(() => null)];
});

defineRule("maskedSelect", (c) => {
  const x = c.inputs[0] as Tensor, mask = c.inputs[1] as Tensor, g = c.cts[0]!;
  const size = g.shape[0];
  // Positions shifted by one: padding (fill 0) lands in slot 0, dropped afterwards.
  const from = untaped(() => maskedSelect(add(positionsOf(x), 1), mask, { size, fillValue: 0 }));
  const flat = zerosShaped([x.size + 1], g);
  const summed = scatterAdd(flat, from, g, { axis: 0 });
  return [reshape(slice(summed, [1, x.size + 1]), x.shape), null];
});

// A weighted bincount sums each weight into its value's bin: the weight's cotangent is its bin's.
defineRule("bincount", (c) => {
  const x = c.inputs[0] as Tensor, g = c.cts[0]!;
  return [null, c.needs[1] ? reshape(take(g, reshape(x, [-1])), x.shape) : null];
});
