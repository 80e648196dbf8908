/**
 * Gradient rules of pooling: max pooling's cotangent goes to each window's maximum (the element
 * its indices name; ties as the forward's indices, the first in the window), summed where windows
 * overlap; average pooling's is spread over each window's elements divided by the window's
 * divisor (PyTorch's: the padded window with `countIncludePad`, else its elements, or
 * `divisorOverride`), through a table of (position, weight) pairs made on the host per geometry.
 * @module
 */
import type { Tensor } from "../tensor.ts";
import { zeros } from "../creation.ts";
import { scatterAdd } from "../ops/indexing.ts";
import { adaptiveMaxPool2d, maxPool2d, type MaxPool2dOptions } from "../ops/pool.ts";
import { broadcastTo, reshape } from "../ops/shape.ts";
import { mul } from "../ops/elementwise.ts";
import { tensor } from "../creation.ts";
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

type Pair = [number, number];

function pairOf(value: unknown, fallback: Pair): Pair {
  if (value === undefined || value === null) return fallback;
  if (typeof value === "number") return [value, value];
  const [a, b] = value as [number, number];
  return [a, b];
}

/** One output's window: its rows and columns in the input, and its divisor. */
interface Window {
  h0: number;
  h1: number;
  w0: number;
  w1: number;
  divisor: number;
}

/** Each output's window elements as (flat position, 1 / divisor), padded to `k` per output. */
function table(
  out: Pair,
  width: number,
  k: number,
  window: (oh: number, ow: number) => Window,
): { index: Int32Array; weight: Float32Array } {
  const n = out[0] * out[1] * k;
  const index = new Int32Array(n), weight = new Float32Array(n);
  for (let oh = 0; oh < out[0]; oh++) {
    for (let ow = 0; ow < out[1]; ow++) {
      const { h0, h1, w0, w1, divisor } = window(oh, ow);
      let at = (oh * out[1] + ow) * k;
      for (let h = h0; h < h1; h++) {
        for (let w = w0; w < w1; w++) {
          index[at] = h * width + w;
          weight[at++] = 1 / divisor;
        }
      }
    }
  }
  return { index, weight };
}

/** The cotangent of an average pool of x with the windows of `window` (k elements at most). */
function unpoolAverage(c: RuleContext, k: number, window: (oh: number, ow: number) => Window) {
  const x = c.inputs[0] as Tensor, g = c.cts[0]!;
  const [height, width] = x.shape.slice(x.rank - 2);
  const out: Pair = [g.shape[g.rank - 2], g.shape[g.rank - 1]];
  const planes = x.size / (height * width);
  const { index, weight } = table(out, width, k, window);
  const outputs = out[0] * out[1];
  const weights = tensor(weight, { shape: [outputs, k], device: g.device });
  const spread = reshape(mul(reshape(g, [planes, outputs, 1]), weights), [planes, outputs * k]);
  const at = untaped(() =>
    broadcastTo(tensor(index, { shape: [1, outputs * k], dtype: "int32", device: g.device }), [
      planes,
      outputs * k,
    ])
  );
  const flat = zeros([planes, height * width], { dtype: spread.dtype, device: g.device });
  return [reshape(scatterAdd(flat, at, spread, { axis: 1 }), x.shape)];
}

defineRule("avgPool2d", (c) => {
  const x = c.inputs[0] as Tensor;
  const [height, width] = x.shape.slice(x.rank - 2);
  const kernel = pairOf(c.attrs.kernelSize, [1, 1]);
  const stride = pairOf(c.attrs.stride, kernel);
  const padding = pairOf(c.attrs.padding, [0, 0]);
  const includePad = c.attrs.countIncludePad !== false;
  const override = c.attrs.divisorOverride as number | undefined;
  return unpoolAverage(c, kernel[0] * kernel[1], (oh, ow) => {
    // PyTorch's avg_pool2d: the window clipped to the padded input for the padded count, then to
    // the input for the elements.
    let h0 = oh * stride[0] - padding[0], w0 = ow * stride[1] - padding[1];
    let h1 = Math.min(h0 + kernel[0], height + padding[0]);
    let w1 = Math.min(w0 + kernel[1], width + padding[1]);
    const padded = (h1 - h0) * (w1 - w0);
    h0 = Math.max(h0, 0);
    w0 = Math.max(w0, 0);
    h1 = Math.min(h1, height);
    w1 = Math.min(w1, width);
    const divisor = override ?? (includePad ? padded : (h1 - h0) * (w1 - w0));
    return { h0, h1, w0, w1, divisor };
  });
});

defineRule("adaptiveAvgPool2d", (c) => {
  const x = c.inputs[0] as Tensor, g = c.cts[0]!;
  const [height, width] = x.shape.slice(x.rank - 2);
  const out: Pair = [g.shape[g.rank - 2], g.shape[g.rank - 1]];
  const bin = (o: number, n: number, size: number): Pair => [
    Math.floor((o * size) / n),
    Math.ceil(((o + 1) * size) / n),
  ];
  // The largest bin: ceil(size / out) + 1 covers every bin's length.
  const k = (Math.ceil(height / out[0]) + 1) * (Math.ceil(width / out[1]) + 1);
  return unpoolAverage(c, k, (oh, ow) => {
    const [h0, h1] = bin(oh, out[0], height), [w0, w1] = bin(ow, out[1], width);
    return { h0, h1, w0, w1, divisor: (h1 - h0) * (w1 - w0) };
  });
});
