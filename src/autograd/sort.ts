/**
 * Gradient rules of sorting and selection: the values' cotangents go back to the positions the
 * values came from (a scatter-add at the indices), so ties route to the element the op's indices
 * name (median's to the element kthvalue picks for it).
 * @module
 */
import type { Tensor } from "../tensor.ts";
import { normalizeAxis } from "../core/shape.ts";
import { zeros } from "../creation.ts";
import { scatterAdd } from "../ops/indexing.ts";
import { argsort, kthvalue } from "../ops/sort.ts";
import { expandDims, reshape } from "../ops/shape.ts";
import { untaped } from "../_tape.ts";
import { defineRule, type RuleContext } from "./_rules.ts";

/** `g` (values taken from x at `indices` along `axis`) scattered back into zeros like x. */
function unselect(g: Tensor, x: Tensor, indices: Tensor, axis: number): Tensor {
  return scatterAdd(zeros(x.shape, { dtype: g.dtype, device: g.device }), indices, g, { axis });
}

function axisOf(c: RuleContext, x: Tensor): number {
  return normalizeAxis("grad", (c.attrs.axis as number | undefined) ?? -1, Math.max(x.rank, 1));
}

defineRule("sort", (c) => {
  const x = c.inputs[0] as Tensor;
  if (x.rank === 0) return [c.cts[0]];
  const axis = axisOf(c, x);
  const order = untaped(() =>
    argsort(x, { axis, ...(c.attrs.descending ? { descending: true } : {}) })
  );
  return [unselect(c.cts[0]!, x, order, axis)];
});

defineRule(["rankK", "topk", "bottomk", "midk"], (c) => {
  const x = c.inputs[0] as Tensor;
  if (!c.cts[0]) return [null];
  return [unselect(c.cts[0], x, c.outputs[1], axisOf(c, x))];
});

/** An order statistic's cotangent, the reduced axis put back unless it was kept. */
function unselectOne(c: RuleContext, g: Tensor, index: Tensor, x: Tensor, axis: number) {
  const keep = c.attrs.keepdims === true;
  return unselect(keep ? g : expandDims(g, axis), x, keep ? index : expandDims(index, axis), axis);
}

defineRule("kthvalue", (c) => {
  const x = c.inputs[0] as Tensor;
  if (!c.cts[0]) return [null];
  return [unselectOne(c, c.cts[0], c.outputs[1], x, axisOf(c, x))];
});

// The lower median (PyTorch's): kthvalue's k = floor((n - 1) / 2) + 1 names its element.
defineRule("median", (c) => {
  const x = c.inputs[0] as Tensor;
  const flat = c.attrs.axis === undefined;
  const xs = flat ? reshape(x, [-1]) : x;
  const axis = flat ? 0 : axisOf(c, x);
  const n = xs.shape[axis];
  const index = untaped(() =>
    kthvalue(xs, Math.floor((n - 1) / 2) + 1, { axis, keepdims: true })[1]
  );
  const g = c.cts[0]!;
  const gk = flat ? reshape(g, [1]) : c.attrs.keepdims ? g : expandDims(g, axis);
  const d = unselect(gk, xs, index, axis);
  return [flat ? reshape(d, x.shape) : d];
});
