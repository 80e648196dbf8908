/**
 * Gradient rules of sorting and selection: the values' cotangents go back to the positions the
 * values came from (a scatter-add at the indices), so ties route to the element the op's indices
 * name; a quantile's (and the median's) to the two order statistics it interpolates, weighted as
 * it interpolates them.
 * @module
 */
import type { Tensor } from "../tensor.ts";
import { normalizeAxis } from "../core/shape.ts";
import { scatterAdd } from "../ops/indexing.ts";
import { argsort } from "../ops/sort.ts";
import { expandDims, reshape, slice } from "../ops/shape.ts";
import { add, equal, mul, where } from "../ops/elementwise.ts";
import { sum } from "../ops/reduce.ts";
import { take, takeAlongAxis } from "../ops/indexing.ts";
import { tensor, zeros } from "../creation.ts";
import { ValueError } from "../core/errors.ts";
import { untaped } from "../_tape.ts";
import { along, defineRule, type RuleContext } from "./_rules.ts";

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

/** The weights of the order statistics at `lo` and `lo + 1` for position `p` under `method`. */
function interpolation(method: string, p: number): [number, number] {
  const lo = Math.floor(p), frac = Math.fround(p - lo);
  switch (method) {
    case "lower":
      return [1, 0];
    case "higher":
      return frac > 0 ? [0, 1] : [1, 0];
    case "midpoint":
      return frac > 0 ? [0.5, 0.5] : [1, 0];
    case "nearest":
      // Ties to the even index, as NumPy.
      return frac < 0.5 || (frac === 0.5 && lo % 2 === 0) ? [1, 0] : [0, 1];
    default:
      return [1 - frac, frac];
  }
}

/**
 * What both quantile rules start from: the q values (numbers only: a tensor q has no rule yet),
 * x along its reduced axis (flattened when no axis was given), and where the cotangent's reduced
 * axis goes back in.
 */
function quantileSetup(c: RuleContext, qs: unknown, op: string) {
  const x = c.inputs[0] as Tensor;
  const scalar = typeof qs === "number";
  if (!scalar && !(Array.isArray(qs) && qs.every((q) => typeof q === "number"))) {
    throw new ValueError({
      op: "grad",
      argument: "f",
      expected: `${op} with q given as numbers (a tensor q has no gradient rule yet)`,
      received: `${op} with a tensor q`,
    });
  }
  const flat = c.attrs.axis === undefined;
  const xs = flat ? reshape(x, [-1]) : x;
  const axis = flat ? 0 : axisOf(c, x);
  const keep = c.attrs.keepdims === true && !flat;
  /** q number j's cotangent with the reduced axis put back. */
  const cotangent = (j: number) => {
    const g = c.cts[0]!;
    const gq = scalar ? g : slice(g, j);
    return flat ? reshape(gq, [1]) : keep ? gq : expandDims(gq, axis);
  };
  return { x, xs, axis, flat, qs: scalar ? [qs as number] : qs as number[], cotangent };
}

/**
 * Quantiles (median: q = 0.5): each is an interpolation of two order statistics, so its cotangent
 * goes to the two elements they sit at (ties as argsort orders them), weighted as the method
 * interpolates. q must be numbers (a tensor q has no rule yet).
 */
function quantileGrad(c: RuleContext, qs: unknown, method: string): (Tensor | null)[] {
  const g = c.cts[0]!;
  const { x, xs, axis, flat, qs: list, cotangent } = quantileSetup(c, qs, "quantile");
  const n = xs.shape[axis];
  const order = untaped(() => argsort(xs, { axis }));
  let total: Tensor | null = null;
  list.forEach((q, j) => {
    // As the forward: q rounded to float32, its position exact (f64), the fraction in float32.
    const p = Math.fround(q) * (n - 1);
    const lo = Math.floor(p);
    const weights = interpolation(method, p);
    const gq = cotangent(j);
    [lo, Math.min(lo + 1, n - 1)].forEach((k, side) => {
      if (weights[side] === 0) return;
      const at = untaped(() => slice(order, ...along(axis, [k, k + 1])));
      const part = unselect(mul(gq, weights[side]), xs, at, axis);
      total = total ? add(total, part) : part;
    });
  });
  const d = total ?? zeros(xs.shape, { dtype: g.dtype, device: g.device });
  return [flat ? reshape(d, x.shape) : d];
}

/**
 * The NaN-skipping quantiles: as `quantileGrad`, with each row's count of numbers in place of its
 * length (argsort puts NaN last, so a row's numbers come first in its order). The positions and
 * weights for every count are tabled on the host (exact, as the forward computes them) and each
 * row takes its own.
 */
function nanQuantileGrad(c: RuleContext, qs: unknown, method: string): (Tensor | null)[] {
  const g = c.cts[0]!;
  const { x, xs, axis, flat, qs: list, cotangent } = quantileSetup(c, qs, "nanquantile");
  const n = xs.shape[axis];
  const device = g.device;
  const { order, counts } = untaped(() => ({
    order: argsort(xs, { axis }),
    counts: sum(where(equal(xs, xs), 1, 0), { axis, keepdims: true }),
  }));
  let total: Tensor | null = null;
  list.forEach((q, j) => {
    const lo = new Int32Array(n + 1), hi = new Int32Array(n + 1);
    const wLo = new Float32Array(n + 1), wHi = new Float32Array(n + 1);
    for (let a = 1; a <= n; a++) {
      const p = Math.fround(q) * (a - 1);
      lo[a] = Math.floor(p);
      hi[a] = Math.min(lo[a] + 1, a - 1);
      [wLo[a], wHi[a]] = interpolation(method, p);
    }
    // Each row's entry of a table, shaped like the row counts.
    const perRow = (table: Int32Array | Float32Array) =>
      untaped(() =>
        reshape(
          take(
            tensor(table, { device, dtype: table instanceof Int32Array ? "int32" : "float32" }),
            reshape(counts, [-1]),
          ),
          counts.shape,
        )
      );
    const gq = cotangent(j);
    for (const [positions, weights] of [[lo, wLo], [hi, wHi]] as const) {
      const at = untaped(() => takeAlongAxis(order, perRow(positions), { axis }));
      const part = unselect(mul(gq, perRow(weights)), xs, at, axis);
      total = total ? add(total, part) : part;
    }
  });
  const d = total ?? zeros(xs.shape, { dtype: g.dtype, device });
  return [flat ? reshape(d, x.shape) : d];
}

defineRule("median", (c) => quantileGrad(c, 0.5, "linear"));
defineRule("quantile", (c) => quantileGrad(c, c.attrs.q, (c.attrs.method as string) ?? "linear"));
defineRule("nanmedian", (c) => nanQuantileGrad(c, 0.5, "linear"));
defineRule(
  "nanquantile",
  (c) => nanQuantileGrad(c, c.attrs.q, (c.attrs.method as string) ?? "linear"),
);
