/**
 * Gradient rules of the scans. cumsum's cotangent is the cumsum of the cotangent run the other
 * way; cumprod's handles zeros exactly (PyTorch's rule): before a row's first zero it is the
 * reverse cumsum of g y divided by x, at the first zero the reverse cumsum of g times the products
 * with that zero taken as 1, after it 0.
 * @module
 */
import type { Tensor } from "../tensor.ts";
import { normalizeAxis } from "../core/shape.ts";
import { zeros } from "../creation.ts";
import { div, equal, logicalAnd, logicalNot, mul, where } from "../ops/elementwise.ts";
import { cumprod, cumsum } from "../ops/scan.ts";
import { concat, slice, type SliceRange } from "../ops/shape.ts";
import { defineRule, type RuleContext } from "./_rules.ts";

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

/** Ranges selecting `range` along `axis` and all of the axes before it. */
function along(axis: number, range: SliceRange): SliceRange[] {
  const ranges: SliceRange[] = new Array(axis).fill(null);
  ranges.push(range);
  return ranges;
}

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

defineRule("cumprod", (c) => {
  const x = c.inputs[0] as Tensor;
  let g = c.cts[0]!;
  const { axis, exclusive, reverse } = scanAttrs(c, x);
  if (x.rank === 0) return [g];
  const flip = (t: Tensor) => (reverse ? slice(t, ...along(axis, [null, null, -1])) : t);
  const xs = flip(x);
  g = flip(g);
  if (exclusive) {
    // Output i of the exclusive scan is output i - 1 of the inclusive one (output 0 is 1): shift
    // the cotangent one place down; the inclusive scan's last output is unused.
    const n = x.shape[axis];
    const tail = zeros(x.shape.map((d, i) => (i === axis ? 1 : d)), {
      dtype: g.dtype,
      device: g.device,
    });
    g = n > 1 ? concat([slice(g, ...along(axis, [1, n])), tail], axis) : tail;
  }
  return [flip(cumprodGrad(g, xs, axis))];
});
