/**
 * Gradient rules of pooling: max pooling's cotangent goes to each window's maximum (the element
 * its indices name; ties as the forward's indices, the first in the window), summed where windows
 * overlap.
 * @module
 */
import type { Tensor } from "../tensor.ts";
import { zeros } from "../creation.ts";
import { scatterAdd } from "../ops/indexing.ts";
import { adaptiveMaxPool2d, maxPool2d, type MaxPool2dOptions } from "../ops/pool.ts";
import { reshape } from "../ops/shape.ts";
import { untaped } from "../_tape.ts";
import { defineRule, type RuleContext } from "./_rules.ts";

function unpool(c: RuleContext, indices: () => Tensor): (Tensor | null)[] {
  const x = c.inputs[0] as Tensor, g = c.cts[0];
  if (!g) return [null];
  const idx = c.outputs[1] ?? untaped(indices);
  const plane = x.shape[x.rank - 2] * x.shape[x.rank - 1];
  const planes = x.size / plane;
  const flat = zeros([planes, plane], { dtype: g.dtype, device: g.device });
  const summed = scatterAdd(flat, reshape(idx, [planes, -1]), reshape(g, [planes, -1]), {
    axis: 1,
  });
  return [reshape(summed, x.shape)];
}

defineRule("maxPool2d", (c) =>
  unpool(c, () =>
    maxPool2d(c.inputs[0] as Tensor, {
      ...(c.attrs as unknown as MaxPool2dOptions),
      returnIndices: true,
    }).indices));

defineRule("adaptiveMaxPool2d", (c) =>
  unpool(c, () => {
    const { outputSize, ...options } = c.attrs as Record<string, unknown>;
    return adaptiveMaxPool2d(c.inputs[0] as Tensor, outputSize as number, {
      ...options,
      returnIndices: true,
    }).indices;
  }));
