/**
 * Gradient rules of the scans. cumsum's cotangent is the cumsum of the cotangent run the other
 * way; cumprod's handles zeros exactly (PyTorch's rule): before a row's first zero it is the
 * reverse cumsum of g y divided by x, at the first zero the reverse cumsum of g times the products
 * with that zero taken as 1, after it 0. cummax's and cummin's go to the element each running
 * extreme came from (the latest of ties, and a NaN once one is met, as PyTorch's indices).
 * @module
 */
import type { Tensor } from "../tensor.ts";
import { normalizeAxis } from "../core/shape.ts";
import { zeros } from "../creation.ts";
import {
  div,
  equal,
  logicalAnd,
  logicalNot,
  logicalOr,
  mul,
  notEqual,
  where,
} from "../ops/elementwise.ts";
import { cummax, cummin, cumprod, cumsum } from "../ops/scan.ts";
import { arange } from "../creation.ts";
import { scatterAdd } from "../ops/indexing.ts";
import { untaped } from "../_tape.ts";
import { concat, reshape, slice } from "../ops/shape.ts";
import { along, defineRule, type RuleContext } from "./_rules.ts";

interface ScanAttrs {
  axis: number;
  exclusive: boolean;
  reverse: boolean;
}

function scanAttrs(c: RuleContext, x: Tensor): ScanAttrs {
  const rank = Math.max(x.rank, 1);
  return {
    axis: normalizeAxis("grad", (c.attrs.axis as number | undefined) ?? rank - 1, rank),
    exclusive: c.attrs.exclusive === true,
    reverse: c.attrs.reverse === true,
  };
}

defineRule("cumsum", (c) => {
  const x = c.inputs[0] as Tensor;
  const { axis, exclusive, reverse } = scanAttrs(c, x);
  return [cumsum(c.cts[0]!, { axis, exclusive, reverse: !reverse })];
});

/** The cotangent of an inclusive forward cumprod of `x` (zeros included). */
function cumprodGrad(g: Tensor, x: Tensor, axis: number): Tensor {
  const y = cumprod(x, { axis });
  const zero = equal(x, 0);
  const zerosBefore = cumsum(where(zero, 1, 0), { axis, exclusive: true });
  const clean = equal(zerosBefore, 0);
  const before = logicalAnd(clean, logicalNot(zero));
  const first = logicalAnd(clean, zero);
  const back = (t: Tensor) => cumsum(t, { axis, reverse: true });
  const beforeGrad = div(back(mul(g, y)), x);
  const firstGrad = back(mul(g, cumprod(where(first, 1, x), { axis })));
  return where(before, beforeGrad, where(first, firstGrad, 0));
}

/**
 * The cotangent of a scan along `axis` (reversed, exclusive) from that of the inclusive forward
 * scan of the flipped input (`inclusive(g, x)`): the flips and the exclusive shift undone around
 * it, as cumprod does.
 */
function normalisedScan(
  c: RuleContext,
  inclusive: (g: Tensor, x: Tensor, axis: number) => Tensor,
): (Tensor | null)[] {
  const x = c.inputs[0] as Tensor;
  let g = c.cts[0]!;
  const { axis, exclusive, reverse } = scanAttrs(c, x);
  if (x.rank === 0) return [g];
  const flip = (t: Tensor) => (reverse ? slice(t, ...along(axis, [null, null, -1])) : t);
  g = flip(g);
  if (exclusive) {
    const n = x.shape[axis];
    const tail = zeros(x.shape.map((d, i) => (i === axis ? 1 : d)), {
      dtype: g.dtype,
      device: g.device,
    });
    g = n > 1 ? concat([slice(g, ...along(axis, [1, n])), tail], axis) : tail;
  }
  return [flip(inclusive(g, flip(x), axis))];
}

for (const [op, scan] of [["cummax", cummax], ["cummin", cummin]] as const) {
  defineRule(op, (c) =>
    normalisedScan(c, (g, x, axis) => {
      const from = untaped(() => {
        const y = scan(x, { axis });
        const n = x.shape[axis];
        const ramp = reshape(
          arange(0, n, 1, { dtype: "int32", device: x.device }),
          x.shape.map((_, i) => (i === axis ? n : 1)),
        );
        // Where the running extreme was set: x equals it, or both are NaN.
        const set = logicalOr(equal(x, y), logicalAnd(notEqual(x, x), notEqual(y, y)));
        return cummax(where(set, ramp, -1), { axis });
      });
      return scatterAdd(zeros(x.shape, { dtype: g.dtype, device: g.device }), from, g, { axis });
    }));
}

defineRule("cumprod", (c) => normalisedScan(c, cumprodGrad));
