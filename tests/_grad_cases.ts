/**
 * The gradient cases every autograd test draws on: one per rule (and per option that changes a
 * rule), each a function of small float tensors with the domain its inputs come from.
 *
 * Domains are the op's smooth region, away from kinks and poles by more than the finite-difference
 * step (a central difference across relu's kink or mod's jump measures nothing): "any" is +-[0.3,
 * 1.5], "pos" [0.3, 1.5], "unit" +-[0.1, 0.7] (tan, where |x| stays below pi/2 - 0.8), "spread" a
 * permutation of distinct values 0.15 apart (max, sort, pooling: no ties within a step), "gaps"
 * the same with a NaN in every fourth place (the NaN-skipping order statistics). The
 * conventions at kinks and ties are tested exactly, elsewhere (tests/autograd_api_test.ts).
 * @module
 */
import * as gyre from "../src/mod.ts";
import { mulberry32 } from "./_random.ts";

/** Where an input's values come from (see the module doc). */
export type Domain = "any" | "pos" | "unit" | "spread" | "gaps";

/** One input: its shape and domain. */
export interface InputSpec {
  shape: number[];
  domain?: Domain;
}

/** One gradient case. */
export interface GradCase {
  name: string;
  inputs: InputSpec[];
  /** The function differentiated (any output shape: tests contract it with fixed weights). */
  f: (...xs: gyre.Tensor[]) => gyre.Tensor;
  /** Leave out of the jvp/vjp transposition test (rules whose pullback uses untaped indices). */
  noTranspose?: boolean;
}

/** Deterministic values in [0, 1) from a seed (tests/_random.ts's generator). */
export const prng: (seed: number) => () => number = mulberry32;

/** Host values of `spec` drawn from `rand`. */
export function draw(spec: InputSpec, rand: () => number): number[] {
  const n = spec.shape.reduce((a, b) => a * b, 1);
  const domain = spec.domain ?? "any";
  if (domain === "spread" || domain === "gaps") {
    const order = Array.from({ length: n }, (_, i) => i);
    for (let i = n - 1; i > 0; i--) {
      const j = Math.floor(rand() * (i + 1));
      [order[i], order[j]] = [order[j], order[i]];
    }
    return order.map((k, i) =>
      domain === "gaps" && i % 4 === 1 ? NaN : Math.fround(-0.9 + 0.15 * k + 0.01 * rand())
    );
  }
  return Array.from({ length: n }, () => {
    const sign = domain === "pos" || rand() < 0.5 ? 1 : -1;
    const mag = domain === "unit" ? 0.1 + 0.6 * rand() : 0.3 + 1.2 * rand();
    return Math.fround(sign * mag);
  });
}

let device: gyre.DeviceName = "wasm";

/** Sets the device the cases' constants are made on (that of their inputs). */
export function useDevice(d: gyre.DeviceName): void {
  device = d;
}

const i32 = (values: number[], shape: number[]) =>
  gyre.tensor(values, { shape, dtype: "int32", device });
const constant = (values: gyre.NestedArray) => gyre.tensor(values, { device });
const ramp = (n: number) => gyre.arange(n, undefined, 1, { device });

const unary: [string, (x: gyre.Tensor) => gyre.Tensor, Domain?][] = [
  ["neg", gyre.neg],
  ["abs", gyre.abs],
  ["square", gyre.square],
  ["reciprocal", gyre.reciprocal, "pos"],
  ["exp", gyre.exp],
  ["exp2", gyre.exp2],
  ["log", gyre.log, "pos"],
  ["log2", gyre.log2, "pos"],
  ["log1p", gyre.log1p, "pos"],
  ["expm1", gyre.expm1],
  ["sqrt", gyre.sqrt, "pos"],
  ["rsqrt", gyre.rsqrt, "pos"],
  ["sin", gyre.sin],
  ["cos", gyre.cos],
  ["tan", gyre.tan, "unit"],
  ["tanh", gyre.tanh],
  ["sigmoid", gyre.sigmoid],
  ["erf", gyre.erf],
  ["relu", gyre.relu],
  ["gelu", (x) => gyre.gelu(x)],
  ["gelu tanh", (x) => gyre.gelu(x, { approximate: "tanh" })],
  ["silu", gyre.silu],
  ["mish", gyre.mish],
  ["softplus", (x) => gyre.softplus(x)],
  ["softplus beta 2 threshold 1", (x) => gyre.softplus(x, { beta: 2, threshold: 1 })],
  ["hardswish", (x) => gyre.hardswish(x.mul(3))],
  ["hardsigmoid", (x) => gyre.hardsigmoid(x.mul(3))],
  ["selu", gyre.selu],
  ["softsign", gyre.softsign],
  ["leakyRelu", (x) => gyre.leakyRelu(x, { alpha: 0.2 })],
  ["elu", (x) => gyre.elu(x, { alpha: 0.7 })],
  ["floor (zero)", (x) => gyre.floor(x).add(x)],
  ["sign (zero)", (x) => gyre.sign(x).mul(x)],
];

/** Every case. */
export const CASES: GradCase[] = [
  ...unary.map(([name, f, domain]) => ({
    name,
    inputs: [{ shape: [2, 3], domain }],
    f: (x: gyre.Tensor) => f(x),
  })),
  { name: "add (broadcast)", inputs: [{ shape: [2, 3] }, { shape: [3] }], f: (a, b) => a.add(b) },
  {
    name: "sub (broadcast)",
    inputs: [{ shape: [2, 1] }, { shape: [1, 3] }],
    f: (a, b) => a.sub(b),
  },
  {
    name: "mul (broadcast)",
    inputs: [{ shape: [2, 3] }, { shape: [2, 1] }],
    f: (a, b) => a.mul(b),
  },
  {
    name: "div",
    inputs: [{ shape: [2, 3] }, { shape: [2, 3], domain: "pos" }],
    f: (a, b) => a.div(b),
  },
  {
    name: "pow",
    inputs: [{ shape: [2, 3], domain: "pos" }, { shape: [2, 3] }],
    f: (a, b) => a.pow(b),
  },
  { name: "pow by a number", inputs: [{ shape: [4] }], f: (a) => a.pow(3) },
  {
    name: "maximum",
    inputs: [{ shape: [6], domain: "spread" }, { shape: [6], domain: "spread" }],
    f: (a, b) => a.maximum(b.add(0.07)),
  },
  {
    name: "minimum",
    inputs: [{ shape: [6], domain: "spread" }, { shape: [6], domain: "spread" }],
    f: (a, b) => a.minimum(b.add(0.07)),
  },
  {
    name: "mod",
    inputs: [{ shape: [4], domain: "pos" }, { shape: [4], domain: "pos" }],
    // a in [0.3, 1.5], b + 2 in [2.3, 3.5]: floor(a / b) = 0, away from the jumps.
    f: (a, b) => gyre.mod(a, b.add(2)),
  },
  {
    name: "where",
    inputs: [{ shape: [2, 3] }, { shape: [3] }],
    f: (a, b) => gyre.where(constant([[true, false, true], [false, true, true]]), a, b),
  },
  { name: "clip", inputs: [{ shape: [6], domain: "spread" }], f: (x) => gyre.clip(x, -0.43, 0.41) },
  { name: "cast float32", inputs: [{ shape: [3] }], f: (x) => x.cast("float32").mul(x) },
  { name: "sum axis", inputs: [{ shape: [2, 3] }], f: (x) => x.sum({ axis: 1 }) },
  { name: "sum all keepdims", inputs: [{ shape: [2, 3] }], f: (x) => x.sum({ keepdims: true }) },
  { name: "mean axis 0", inputs: [{ shape: [3, 2] }], f: (x) => x.mean({ axis: 0 }) },
  { name: "prod", inputs: [{ shape: [2, 3] }], f: (x) => x.prod({ axis: 1 }) },
  { name: "max", inputs: [{ shape: [2, 4], domain: "spread" }], f: (x) => x.max({ axis: 1 }) },
  {
    name: "min keepdims",
    inputs: [{ shape: [2, 4], domain: "spread" }],
    f: (x) => x.min({ axis: 0, keepdims: true }),
  },
  { name: "logsumexp", inputs: [{ shape: [2, 3] }], f: (x) => gyre.logsumexp(x, { axis: -1 }) },
  {
    name: "variance ddof 1",
    inputs: [{ shape: [2, 4] }],
    f: (x) => gyre.variance(x, { axis: 1, ddof: 1 }),
  },
  { name: "std", inputs: [{ shape: [5] }], f: (x) => gyre.std(x) },
  {
    name: "reshape",
    inputs: [{ shape: [2, 3] }],
    f: (x) => x.reshape([3, 2]).mul(x.reshape([3, 2])),
  },
  {
    name: "transpose",
    inputs: [{ shape: [2, 3, 2] }],
    f: (x) => x.transpose([2, 0, 1]).mul(ramp(3).reshape([1, 1, 3])),
  },
  {
    name: "expandDims squeeze",
    inputs: [{ shape: [3] }],
    f: (x) => x.expandDims(0).square().squeeze(),
  },
  {
    name: "slice with steps",
    inputs: [{ shape: [4, 5] }],
    f: (x) => x.slice([1, 4], [null, null, -2]).square(),
  },
  {
    name: "broadcastTo",
    inputs: [{ shape: [3, 1] }],
    f: (x) => x.broadcastTo([2, 3, 4]).mul(ramp(4)),
  },
  {
    name: "concat",
    inputs: [{ shape: [2, 2] }, { shape: [2, 3] }],
    f: (a, b) => gyre.concat([a, b.square()], 1),
  },
  {
    name: "stack",
    inputs: [{ shape: [3] }, { shape: [3] }],
    f: (a, b) => gyre.stack([a, b.exp()], 1),
  },
  { name: "clone", inputs: [{ shape: [3] }], f: (x) => gyre.clone(x).square() },
  {
    name: "matmul",
    inputs: [{ shape: [2, 3] }, { shape: [3, 4] }],
    f: (a, b) => gyre.matmul(a, b),
  },
  {
    name: "matmul transposeA",
    inputs: [{ shape: [3, 2] }, { shape: [3, 4] }],
    f: (a, b) => gyre.matmul(a, b, { transposeA: true }),
  },
  {
    name: "matmul transposeB",
    inputs: [{ shape: [2, 3] }, { shape: [4, 3] }],
    f: (a, b) => gyre.matmul(a, b, { transposeB: true }),
  },
  {
    name: "matmul both transposed",
    inputs: [{ shape: [3, 2] }, { shape: [4, 3] }],
    f: (a, b) => gyre.matmul(a, b, { transposeA: true, transposeB: true }),
  },
  {
    name: "matmul batched by 2-D",
    inputs: [{ shape: [2, 2, 3] }, { shape: [3, 2] }],
    f: (a, b) => gyre.matmul(a, b),
  },
  {
    name: "matmul batched by 2-D transposeB",
    inputs: [{ shape: [2, 2, 3] }, { shape: [2, 3] }],
    f: (a, b) => gyre.matmul(a, b, { transposeB: true }),
  },
  {
    name: "matmul broadcast batch",
    inputs: [{ shape: [1, 2, 3] }, { shape: [2, 3, 2] }],
    f: (a, b) => gyre.matmul(a, b),
  },
  {
    name: "matmul vector-matrix",
    inputs: [{ shape: [3] }, { shape: [3, 2] }],
    f: (a, b) => gyre.matmul(a, b),
  },
  {
    name: "matmul matrix-vector",
    inputs: [{ shape: [2, 3] }, { shape: [3] }],
    f: (a, b) => gyre.matmul(a, b),
  },
  { name: "matmul dot", inputs: [{ shape: [3] }, { shape: [3] }], f: (a, b) => gyre.matmul(a, b) },
  ...(["none", "relu", "gelu", "silu", "tanh", "sigmoid"] as const).map((activation) => ({
    name: `linear ${activation}`,
    inputs: [{ shape: [2, 3] }, { shape: [4, 3] }, { shape: [4] }],
    f: (x: gyre.Tensor, w: gyre.Tensor, b: gyre.Tensor) =>
      gyre.linear(x, w, { bias: b, activation }),
  })),
  {
    name: "linear batched, no bias",
    inputs: [{ shape: [2, 2, 3] }, { shape: [2, 3] }],
    f: (x, w) => gyre.linear(x, w),
  },
  { name: "softmax", inputs: [{ shape: [2, 4] }], f: (x) => gyre.softmax(x) },
  { name: "softmax axis 0", inputs: [{ shape: [3, 2] }], f: (x) => gyre.softmax(x, { axis: 0 }) },
  { name: "logSoftmax", inputs: [{ shape: [2, 4] }], f: (x) => gyre.logSoftmax(x) },
  {
    name: "layerNorm with weight and bias",
    inputs: [{ shape: [2, 4] }, { shape: [4] }, { shape: [4] }],
    f: (x, w, b) => gyre.layerNorm(x, { weight: w, bias: b }),
  },
  {
    name: "layerNorm over two axes",
    inputs: [{ shape: [2, 2, 3] }, { shape: [2, 3] }],
    f: (x, w) => gyre.layerNorm(x, { axis: [1, 2], weight: w }),
  },
  {
    name: "rmsNorm with weight",
    inputs: [{ shape: [2, 4] }, { shape: [4] }],
    f: (x, w) => gyre.rmsNorm(x, { weight: w }),
  },
  { name: "cumsum", inputs: [{ shape: [2, 4] }], f: (x) => gyre.cumsum(x) },
  {
    name: "cumsum exclusive reverse axis 0",
    inputs: [{ shape: [3, 2] }],
    f: (x) => gyre.cumsum(x, { axis: 0, exclusive: true, reverse: true }),
  },
  { name: "cumprod", inputs: [{ shape: [2, 4] }], f: (x) => gyre.cumprod(x) },
  {
    name: "cumprod exclusive",
    inputs: [{ shape: [2, 4] }],
    f: (x) => gyre.cumprod(x, { exclusive: true }),
  },
  {
    name: "cumprod reverse",
    inputs: [{ shape: [5] }],
    f: (x) => gyre.cumprod(x, { reverse: true }),
  },
  {
    name: "gather",
    inputs: [{ shape: [2, 3] }],
    f: (x) => gyre.gather(x, i32([0, 2, 2, 1, 0, 1], [2, 3]), { axis: 1 }),
  },
  {
    name: "takeAlongAxis broadcast",
    inputs: [{ shape: [3, 4] }],
    f: (x) => gyre.takeAlongAxis(x, i32([3, 0, 3], [1, 3]), { axis: 1 }),
  },
  { name: "take flat", inputs: [{ shape: [2, 3] }], f: (x) => gyre.take(x, i32([5, 0, 5], [3])) },
  {
    name: "take axis",
    inputs: [{ shape: [2, 3] }],
    f: (x) => gyre.take(x, i32([2, 0, 2, 1], [2, 2]), { axis: 1 }),
  },
  {
    name: "indexSelect",
    inputs: [{ shape: [3, 2] }],
    f: (x) => gyre.indexSelect(x, i32([2, 2, 0], [3])),
  },
  {
    name: "scatterAdd",
    inputs: [{ shape: [2, 4] }, { shape: [2, 3] }],
    f: (x, u) => gyre.scatterAdd(x, i32([0, 3, 0, 1, 1, 2], [2, 3]), u.square(), { axis: 1 }),
  },
  {
    name: "scatter (replace)",
    inputs: [{ shape: [2, 4] }, { shape: [2, 2] }],
    f: (x, u) => gyre.scatter(x.square(), i32([0, 3, 2, 1], [2, 2]), u, { axis: 1 }),
  },
  ...(["mean", "max", "min", "prod"] as const).map((reduce) => ({
    name: `scatter ${reduce}`,
    inputs: [{ shape: [2, 4], domain: "spread" as Domain }, {
      shape: [2, 3],
      domain: "spread" as Domain,
    }],
    f: (x: gyre.Tensor, u: gyre.Tensor) =>
      gyre.scatter(x, i32([0, 3, 0, 1, 1, 2], [2, 3]), u, { axis: 1, reduce }),
  })),
  {
    name: "scatter sum",
    inputs: [{ shape: [5] }, { shape: [3] }],
    f: (x, u) => gyre.scatter(x, i32([4, 0, 4], [3]), u, { axis: 0, reduce: "sum" }),
  },
  {
    name: "segmentSum",
    inputs: [{ shape: [4, 2] }],
    f: (x) => gyre.segmentSum(x.square(), i32([0, 2, 0, -1], [4]), { numSegments: 3 }),
  },
  {
    name: "segmentMean",
    inputs: [{ shape: [4] }],
    f: (x) => gyre.segmentMean(x, i32([1, 1, 0, 1], [4]), { numSegments: 2 }),
  },
  {
    name: "sort",
    inputs: [{ shape: [2, 4], domain: "spread" }],
    f: (x) => gyre.sort(x).mul(ramp(4)),
  },
  {
    name: "sort descending axis 0",
    inputs: [{ shape: [3, 2], domain: "spread" }],
    f: (x) => gyre.sort(x, { axis: 0, descending: true }).square(),
  },
  { name: "topk", inputs: [{ shape: [2, 5], domain: "spread" }], f: (x) => gyre.topk(x, 2)[0] },
  { name: "bottomk", inputs: [{ shape: [6], domain: "spread" }], f: (x) => gyre.bottomk(x, 3)[0] },
  {
    name: "kthvalue",
    inputs: [{ shape: [2, 5], domain: "spread" }],
    f: (x) => gyre.kthvalue(x, 2, { axis: 1 })[0],
  },
  {
    name: "median",
    inputs: [{ shape: [7], domain: "spread" }],
    f: (x) => gyre.median(x).mul(x.sum()),
  },
  {
    name: "median axis keepdims",
    inputs: [{ shape: [2, 4], domain: "spread" }],
    f: (x) => gyre.median(x, { axis: 1, keepdims: true }),
  },
  {
    name: "quantile linear, two q",
    inputs: [{ shape: [2, 5], domain: "spread" }],
    f: (x) => gyre.quantile(x, [0.3, 0.9], { axis: 1 }),
  },
  {
    name: "quantile nearest",
    inputs: [{ shape: [6], domain: "spread" }],
    f: (x) => gyre.quantile(x, 0.7, { method: "nearest" }),
  },
  {
    name: "nanmedian",
    inputs: [{ shape: [2, 6], domain: "gaps" }],
    f: (x) => gyre.nanmedian(x, { axis: 1 }),
  },
  {
    name: "nanquantile two q",
    inputs: [{ shape: [9], domain: "gaps" }],
    f: (x) => gyre.nanquantile(x, [0.2, 0.65]),
  },
  {
    name: "maxPool2d",
    inputs: [{ shape: [1, 2, 4, 4], domain: "spread" }],
    f: (x) => gyre.maxPool2d(x, { kernelSize: 2, stride: 1 }),
  },
  {
    name: "adaptiveMaxPool2d",
    inputs: [{ shape: [2, 3, 3], domain: "spread" }],
    f: (x) => gyre.adaptiveMaxPool2d(x, 2),
  },
  { name: "cummax", inputs: [{ shape: [2, 5], domain: "spread" }], f: (x) => gyre.cummax(x) },
  {
    name: "cummin reverse exclusive",
    inputs: [{ shape: [6], domain: "spread" }],
    f: (x) => gyre.cummin(x, { reverse: true, exclusive: true }).slice([0, 5]),
  },
  {
    name: "groupNorm",
    inputs: [{ shape: [2, 4, 3] }, { shape: [4] }, { shape: [4] }],
    f: (x, w, b) => gyre.groupNorm(x, { groups: 2, weight: w, bias: b }),
  },
  {
    name: "batchNorm inference",
    inputs: [{ shape: [3, 2, 2] }, { shape: [2] }, { shape: [2] }, { shape: [2] }, {
      shape: [2],
      domain: "pos",
    }],
    f: (x, w, b, m, v) => gyre.batchNorm(x, { weight: w, bias: b, mean: m, variance: v }),
  },
  {
    name: "batchNorm training",
    inputs: [{ shape: [4, 3] }, { shape: [3] }, { shape: [3] }],
    f: (x, w, b) => gyre.batchNorm(x, { weight: w, bias: b, training: true }).output,
  },
  {
    name: "batchNorm training statistics",
    inputs: [{ shape: [4, 3] }, { shape: [3] }, { shape: [3] }, { shape: [3] }, {
      shape: [3],
      domain: "pos",
    }],
    f: (x, w, b, m, v) => {
      const r = gyre.batchNorm(x, { weight: w, bias: b, mean: m, variance: v, training: true });
      return gyre.concat([
        r.output.reshape([-1]),
        r.mean,
        r.variance,
        r.unbiasedVariance,
        r.runningMean!,
        r.runningVariance!,
      ]);
    },
  },
  {
    name: "segmentMax",
    inputs: [{ shape: [5, 2], domain: "spread" }],
    f: (x) => gyre.segmentMax(x, i32([0, 1, 0, 1, 1], [5]), { numSegments: 2 }),
  },
  {
    name: "segmentMin",
    inputs: [{ shape: [4], domain: "spread" }],
    f: (x) => gyre.segmentMin(x, i32([1, 1, 0, 1], [4]), { numSegments: 2 }),
  },
  {
    name: "segmentProd",
    inputs: [{ shape: [5] }],
    f: (x) => gyre.segmentProd(x, i32([0, 0, 1, 1, 1], [5]), { numSegments: 2 }),
  },
  {
    name: "bincount weights",
    inputs: [{ shape: [5] }],
    f: (w) => gyre.bincount(i32([2, 0, 2, 3, 0], [5]), { minlength: 4, weights: w }),
  },
  {
    name: "at",
    inputs: [{ shape: [4, 5] }],
    f: (x) => gyre.at(x, [1, 3], i32([0, 3, 3], [3])).square(),
  },
  {
    name: "maskedSelect",
    inputs: [{ shape: [2, 3] }],
    f: (x) =>
      gyre.maskedSelect(x, constant([[true, false, true], [false, true, true]]), { size: 4 }),
  },
  {
    name: "avgPool2d padded",
    inputs: [{ shape: [1, 2, 4, 5] }],
    f: (x) => gyre.avgPool2d(x, { kernelSize: 3, stride: 2, padding: 1 }),
  },
  {
    name: "avgPool2d ceil mode without padding in the count",
    inputs: [{ shape: [2, 5, 5] }],
    f: (x) =>
      gyre.avgPool2d(x, {
        kernelSize: 2,
        stride: 2,
        padding: 1,
        ceilMode: true,
        countIncludePad: false,
      }),
  },
  {
    name: "avgPool2d divisor override",
    inputs: [{ shape: [1, 1, 4, 4] }],
    f: (x) => gyre.avgPool2d(x, { kernelSize: [2, 3], stride: 1, divisorOverride: 5 }),
  },
  {
    name: "adaptiveAvgPool2d",
    inputs: [{ shape: [1, 2, 5, 7] }],
    f: (x) => gyre.adaptiveAvgPool2d(x, [3, 4]),
  },
  {
    name: "composition: softmax cross-entropy of an MLP",
    inputs: [{ shape: [3, 4] }, { shape: [5, 4] }, { shape: [5] }],
    f: (x, w, b) => {
      const logits = gyre.linear(x, w, { bias: b, activation: "tanh" });
      return gyre.logSoftmax(logits).mul(gyre.oneHot(i32([1, 4, 0], [3]), 5)).sum().neg();
    },
  },
];

/** A case's seed: a hash of its name. */
export function seedOf(name: string): number {
  let h = 2166136261;
  for (const ch of name) h = Math.imul(h ^ ch.charCodeAt(0), 16777619);
  return h >>> 0;
}

/** The case's inputs as tensors on `device`. */
export function make(c: GradCase, values: number[][], device: gyre.DeviceName): gyre.Tensor[] {
  return values.map((v, i) => gyre.tensor(v, { shape: c.inputs[i].shape, device }));
}

/** The case's output shape (one run of f on WASM). */
function outputShape(c: GradCase, values: number[][]): number[] {
  useDevice("wasm");
  return gyre.tidy(() => c.f(...make(c, values, "wasm")).shape);
}

/** A case's inputs, loss weights and output shape. */
export interface Problem {
  xs: number[][];
  w: number[];
  outShape: number[];
}

/** The case's deterministic inputs and loss weights. */
export function problem(c: GradCase): Problem {
  const rand = prng(seedOf(c.name));
  const xs = c.inputs.map((spec) => draw(spec, rand));
  const outShape = outputShape(c, xs);
  const size = outShape.reduce((a, b) => a * b, 1);
  const w = Array.from({ length: size }, () => Math.fround(rand() * 2 - 1));
  return { xs, w, outShape };
}
