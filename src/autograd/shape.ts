/**
 * Gradient rules of the view and layout ops: reshapes and transposes move the cotangent back,
 * a broadcast's is summed (by backprop), a slice's is scattered into zeros, a concatenation's
 * is sliced apart.
 * @module
 */
import type { Tensor } from "../tensor.ts";
import { normalizeAxis } from "../core/shape.ts";
import { reshape, slice, type SliceRange, transpose } from "../ops/shape.ts";
import { untaped } from "../_tape.ts";
import { along, defineRule, positionsOf, scatterToPositions } from "./_rules.ts";

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

// The positions a slice read are the same slice of x's positions (steps and reversals included).
defineRule("slice", (c) => {
  const x = c.inputs[0] as Tensor;
  const read = untaped(() => slice(positionsOf(x), ...(c.attrs.ranges as SliceRange[])));
  return [scatterToPositions(c.cts[0]!, x, read)];
});

defineRule("concat", (c) => {
  const g = c.cts[0]!;
  const first = c.inputs[0] as Tensor;
  const axis = normalizeAxis("grad", (c.attrs.axis as number | undefined) ?? 0, first.rank);
  let at = 0;
  return c.inputs.map((t, k) => {
    const n = (t as Tensor).shape[axis];
    const ranges = along(axis, [at, at + n]);
    at += n;
    return c.needs[k] ? slice(g, ...ranges) : null;
  });
});

defineRule("stack", (c) => {
  const g = c.cts[0]!;
  const axis = normalizeAxis("grad", (c.attrs.axis as number | undefined) ?? 0, g.rank);
  return c.inputs.map((_, k) => {
    return c.needs[k] ? slice(g, ...along(axis, k)) : null;
  });
});
