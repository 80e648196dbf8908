/**
 * Gradient rules of the view and layout ops: reshapes and transposes move the cotangent back,
 * a broadcast's is summed (by backprop), a slice's is scattered into zeros, a concatenation's
 * is sliced apart.
 * @module
 */
import type { Tensor } from "../tensor.ts";
import { normalizeAxis, sizeOf } from "../core/shape.ts";
import { arange, zeros } from "../creation.ts";
import { reshape, slice, type SliceRange, transpose } from "../ops/shape.ts";
import { scatterAdd } from "../ops/indexing.ts";
import { untaped } from "../_tape.ts";
import { defineRule } from "./_rules.ts";

const same = (c: { cts: readonly (Tensor | null)[] }) => [c.cts[0]];
const back = (c: { cts: readonly (Tensor | null)[]; inputs: readonly unknown[] }) => [
  reshape(c.cts[0]!, (c.inputs[0] as Tensor).shape),
];

defineRule(["clone", "broadcastTo"], same);
defineRule(["reshape", "expandDims", "squeeze"], back);

defineRule("transpose", (c) => {
  const x = c.inputs[0] as Tensor;
  const perm = (c.attrs.permutation as number[] | undefined) ??
    x.shape.map((_, i) => x.rank - 1 - i);
  const inverse = new Array<number>(perm.length);
  perm.forEach((p, i) => (inverse[normalizeAxis("grad", p, x.rank)] = i));
  return [transpose(c.cts[0]!, inverse)];
});

/**
 * `g` (the cotangent of `slice(x, ...ranges)`) placed at the sliced positions of zeros shaped like
 * x: the flat positions are the same slice of an index ramp (steps and reversals included).
 */
export function unslice(g: Tensor, x: Tensor, ranges: readonly SliceRange[]): Tensor {
  const positions = untaped(() => {
    const ramp = reshape(arange(0, x.size, 1, { dtype: "int32", device: x.device }), x.shape);
    return reshape(slice(ramp, ...ranges), [-1]);
  });
  if (positions.size === 0) return zeros(x.shape, { dtype: g.dtype, device: g.device });
  const flat = zeros([sizeOf(x.shape)], { dtype: g.dtype, device: g.device });
  return reshape(scatterAdd(flat, positions, reshape(g, [-1]), { axis: 0 }), x.shape);
}

defineRule(
  "slice",
  (c) => [unslice(c.cts[0]!, c.inputs[0] as Tensor, c.attrs.ranges as SliceRange[])],
);

defineRule("concat", (c) => {
  const g = c.cts[0]!;
  const first = c.inputs[0] as Tensor;
  const axis = normalizeAxis("grad", (c.attrs.axis as number | undefined) ?? 0, first.rank);
  let at = 0;
  return c.inputs.map((t, k) => {
    const n = (t as Tensor).shape[axis];
    const ranges: SliceRange[] = new Array(axis).fill(null);
    ranges.push([at, at + n]);
    at += n;
    return c.needs[k] ? slice(g, ...ranges) : null;
  });
});

defineRule("stack", (c) => {
  const g = c.cts[0]!;
  const axis = normalizeAxis("grad", (c.attrs.axis as number | undefined) ?? 0, g.rank);
  return c.inputs.map((_, k) => {
    const ranges: SliceRange[] = new Array(axis).fill(null);
    ranges.push(k);
    return c.needs[k] ? slice(g, ...ranges) : null;
  });
});
