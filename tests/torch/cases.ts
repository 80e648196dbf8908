/**
 * The cases that check gyre against PyTorch: issue 3's ops and the elementwise math, over inputs
 * chosen for their semantic corners (NaN, +-Inf, -0, ties, empty axes, every option, views, bad
 * arguments) and over shapes large enough for the GPU's other schemes. Inputs are deterministic,
 * so `expected.py` can compute PyTorch's answers once (`expected.jsonl`, committed for the small
 * cases) and `tests/torch_semantics_test.ts` checks both devices against them without PyTorch;
 * `check.ts` runs every case on a GPU host.
 * @module
 */
import * as gyre from "../../src/mod.ts";

/**
 * A tensor as JSON: its values as float64 bytes in base64, which keeps NaN, infinities and -0
 * exactly and large inputs small.
 */
export interface EncodedTensor {
  shape: number[];
  dtype: string;
  base64: string;
}

/** What one device gave for a case: its output tensors, or the error it threw. */
export type DeviceResult = { outputs: EncodedTensor[] } | { error: string };

/** One op call: the op, its options and named inputs (x first), and what each device gave. */
export interface CaseSpec {
  name: string;
  op: string;
  params: Record<string, unknown>;
  inputs: Record<string, EncodedTensor>;
  /** A view of input x taken before the op: an axis permutation, then NumPy-style ranges. */
  view?: ViewSpec;
}

/** `slice` ranges are `[start, end, step]` (step 1 or more) or null; `flip` reverses axes. */
export interface ViewSpec {
  permute?: number[];
  slice?: ([number, number, number] | null)[];
  flip?: number[];
}

export function encode(
  shape: readonly number[],
  dtype: string,
  data: ArrayLike<number>,
): EncodedTensor {
  const bytes = new Uint8Array(Float64Array.from(data).buffer);
  let text = "";
  for (let i = 0; i < bytes.length; i += 32768) {
    text += String.fromCharCode(...bytes.subarray(i, i + 32768));
  }
  return { shape: [...shape], dtype, base64: btoa(text) };
}

/** Float64 values from base64 bytes (the encoding of {@link EncodedTensor} and of expectations). */
export function fromBase64(text: string): Float64Array {
  const binary = atob(text);
  const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
  return new Float64Array(bytes.buffer);
}

/** The values of an encoded tensor. */
export function values(encoded: EncodedTensor): Float64Array {
  return fromBase64(encoded.base64);
}

/** Elements over all of a case's inputs: above 5000 a case is "large", left to GPU hosts. */
export function inputElements(spec: CaseSpec): number {
  return Object.values(spec.inputs).reduce((n, t) => n + sizeOf(t.shape), 0);
}

/** Deterministic float32 values in [low, high) (mulberry32), so every run writes the same inputs. */
function randomValues(count: number, seed: number, low = -3, high = 3): Float32Array {
  let state = seed >>> 0;
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    out[i] = low + (high - low) * (((t ^ (t >>> 14)) >>> 0) / 4294967296);
  }
  return out;
}

function sizeOf(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/**
 * An input: its shape, values (random unless given), values to overwrite at indices, and dtype
 * (float16 values rounded to float16, int32 values to integers).
 */
function input(
  shape: number[],
  seed: number,
  options: {
    low?: number;
    high?: number;
    set?: [number, number][];
    values?: number[];
    dtype?: "float32" | "float16" | "int32" | "bool";
  } = {},
): EncodedTensor {
  // Float64 until the dtype is known: int32 values past 2^24 must not round through float32.
  const data = Float64Array.from(
    options.values ?? randomValues(sizeOf(shape), seed, options.low, options.high),
  );
  for (const [index, value] of options.set ?? []) data[index] = value;
  const dtype = options.dtype ?? "float32";
  if (dtype === "float32") data.forEach((v, i) => data[i] = Math.fround(v));
  if (dtype === "float16") data.forEach((v, i) => data[i] = Math.f16round(v));
  if (dtype === "int32") data.forEach((v, i) => data[i] = Math.round(v));
  // Booleans: truthiness as NumPy casts (NaN is true); random values are true above 0.
  if (dtype === "bool") {
    data.forEach((v, i) => data[i] = (options.values ? v !== 0 : v > 0) ? 1 : 0);
  }
  return encode(shape, dtype, data);
}

function decode(encoded: EncodedTensor, device: gyre.DeviceName): gyre.Tensor {
  const numbers = values(encoded);
  const data = encoded.dtype === "int32"
    ? Int32Array.from(numbers)
    : encoded.dtype === "bool"
    ? Array.from(numbers, (v) => v !== 0)
    : Float32Array.from(numbers);
  return gyre.tensor(data, {
    shape: encoded.shape,
    dtype: encoded.dtype as gyre.DType,
    device,
  });
}

type Run = (
  inputs: Record<string, gyre.Tensor>,
  params: Record<string, unknown>,
  device: gyre.DeviceName,
) => gyre.Tensor[];

// deno-lint-ignore no-explicit-any
const options = (params: Record<string, unknown>) => params as any;

const reductions: Record<string, (x: gyre.Tensor, o: never) => gyre.Tensor> = {
  sum: gyre.sum,
  mean: gyre.mean,
  max: gyre.max,
  min: gyre.min,
  prod: gyre.prod,
  argmax: gyre.argmax,
  argmin: gyre.argmin,
  all: gyre.all,
  any: gyre.any,
  logsumexp: gyre.logsumexp,
  variance: gyre.variance,
  std: gyre.std,
};
const activations: Record<string, (x: gyre.Tensor, o: never) => gyre.Tensor> = {
  relu: gyre.relu,
  gelu: gyre.gelu,
  silu: gyre.silu,
  mish: gyre.mish,
  hardswish: gyre.hardswish,
  hardsigmoid: gyre.hardsigmoid,
  leakyRelu: gyre.leakyRelu,
  elu: gyre.elu,
  selu: gyre.selu,
  softplus: gyre.softplus,
  softsign: gyre.softsign,
};
const scans: Record<string, (x: gyre.Tensor, o: never) => gyre.Tensor> = {
  cumsum: gyre.cumsum,
  cumprod: gyre.cumprod,
  cummax: gyre.cummax,
  cummin: gyre.cummin,
};

/** Elementwise math (the ops every kernel above builds on): one input, or two broadcast. */
const UNARY = [
  "neg",
  "abs",
  "sign",
  "square",
  "reciprocal",
  "exp",
  "exp2",
  "log",
  "log2",
  "log1p",
  "expm1",
  "sqrt",
  "rsqrt",
  "sin",
  "cos",
  "tan",
  "tanh",
  "sigmoid",
  "erf",
  "floor",
  "ceil",
  "round",
  "logicalNot",
] as const;
const BINARY = [
  "add",
  "sub",
  "mul",
  "div",
  "pow",
  "maximum",
  "minimum",
  "mod",
  "equal",
  "notEqual",
  "less",
  "lessEqual",
  "greater",
  "greaterEqual",
  "logicalAnd",
  "logicalOr",
] as const;

function runner(op: string): Run {
  const single = reductions[op] ?? activations[op] ?? scans[op];
  if (single) return ({ x }, params) => [single(x, options(params) as never)];
  if ((UNARY as readonly string[]).includes(op)) {
    const fn = gyre[op as typeof UNARY[number]] as (x: gyre.Tensor) => gyre.Tensor;
    return ({ x }) => [fn(x)];
  }
  if ((BINARY as readonly string[]).includes(op)) {
    const fn = gyre[op as typeof BINARY[number]] as (x: gyre.Tensor, y: gyre.Tensor) => gyre.Tensor;
    return ({ x, y }) => [fn(x, y)];
  }
  switch (op) {
    // Creation (no inputs: the device comes from the case's run) and data movement.
    case "arange":
      return (_, p, device) => [
        gyre.arange(p.start as number, p.stop as number, p.step as number, { device }),
      ];
    case "linspace":
      return (_, p, device) => [
        gyre.linspace(p.start as number, p.stop as number, p.num as number, {
          device,
          endpoint: p.endpoint as boolean,
        }),
      ];
    case "eye":
      return (_, p, device) => [gyre.eye(p.n as number, p.m as number, { device })];
    case "full":
      return (_, p, device) => [gyre.full(p.shape as number[], p.value as number, { device })];
    case "cast":
      return ({ x }, p) => [gyre.cast(x, p.dtype as gyre.DType)];
    case "concat":
      return ({ x, y }, p) => [gyre.concat([x, y], p.axis as number)];
    case "stack":
      return ({ x, y }, p) => [gyre.stack([x, y], p.axis as number)];
    case "slice":
      return ({ x }, p) => [x.slice(...(p.ranges as gyre.SliceRange[]))];
    case "reshape":
      return ({ x }, p) => [gyre.reshape(x, p.shape as number[])];
    case "transpose":
      return ({ x }, p) => [gyre.transpose(x, p.permutation as number[] | undefined)];
    case "squeeze":
      return ({ x }, p) => [gyre.squeeze(x, p.axis as number | number[] | undefined)];
    case "expandDims":
      return ({ x }, p) => [gyre.expandDims(x, p.axis as number)];
    case "broadcastTo":
      return ({ x }, p) => [gyre.broadcastTo(x, p.shape as number[])];
    case "matmul":
      return ({ x, y }, params) => [gyre.matmul(x, y, options(params))];
    case "linear":
      return ({ x, weight, bias }, params) => [
        gyre.linear(x, weight, { ...options(params), bias }),
      ];
    case "clip":
      return ({ x }, params) => [
        gyre.clip(x, params.min as number | null, params.max as number | null),
      ];
    case "where":
      return ({ condition, x, y }) => [gyre.where(condition, x, y)];
    case "softmax":
      return ({ x }, params) => [gyre.softmax(x, options(params))];
    case "logSoftmax":
      return ({ x }, params) => [gyre.logSoftmax(x, options(params))];
    case "layerNorm":
      return ({ x, weight, bias }, params) => [
        gyre.layerNorm(x, { ...options(params), weight, bias }),
      ];
    case "rmsNorm":
      return ({ x, weight }, params) => [gyre.rmsNorm(x, { ...options(params), weight })];
    case "groupNorm":
      return ({ x, weight, bias }, params) => [
        gyre.groupNorm(x, { ...options(params), weight, bias }),
      ];
    case "batchNorm":
      return ({ x, mean, variance, weight, bias }, params) => {
        const all: gyre.BatchNormOptions = { ...options(params), mean, variance, weight, bias };
        if (!params.training) return [gyre.batchNorm(x, { ...all, training: false })];
        const result = gyre.batchNorm(x, { ...all, training: true });
        return [
          result.output,
          result.mean,
          result.variance,
          result.unbiasedVariance,
          ...(result.runningMean ? [result.runningMean, result.runningVariance!] : []),
        ];
      };
    case "maxPool2d":
      return ({ x }, params) => {
        const result = gyre.maxPool2d(x, options(params));
        return result instanceof gyre.Tensor ? [result] : [result.values, result.indices];
      };
    case "avgPool2d":
      return ({ x }, params) => [gyre.avgPool2d(x, options(params))];
    case "adaptiveAvgPool2d":
      return ({ x }, params) => [gyre.adaptiveAvgPool2d(x, options(params).outputSize)];
    case "adaptiveMaxPool2d":
      return ({ x }, params) => {
        const result = gyre.adaptiveMaxPool2d(x, options(params).outputSize, {
          returnIndices: Boolean(params.returnIndices),
        });
        return result instanceof gyre.Tensor ? [result] : [result.values, result.indices];
      };
  }
  throw new Error(`no runner for ${op}`);
}

/** Every case, in a fixed order; names are unique. */
export const cases: CaseSpec[] = [];
function add(
  name: string,
  op: string,
  params: Record<string, unknown>,
  inputs: Record<string, EncodedTensor>,
  view?: ViewSpec,
) {
  if (cases.some((c) => c.name === name)) throw new Error(`two cases named ${name}`);
  cases.push(view ? { name, op, params, inputs, view } : { name, op, params, inputs });
}

/**
 * Input x seen through `view`, as the Python side takes it (permute, slice, then flip); each view
 * made is pushed onto `made`, for the caller to dispose.
 */
function applyView(x: gyre.Tensor, view: ViewSpec, made: gyre.Tensor[]): gyre.Tensor {
  let out = x;
  const take = (next: gyre.Tensor) => {
    made.push(next);
    out = next;
  };
  if (view.permute) take(out.transpose(view.permute));
  if (view.slice) take(out.slice(...view.slice));
  for (const axis of view.flip ?? []) {
    const ranges: gyre.SliceRange[] = out.shape.map(() => null);
    ranges[axis] = [null, null, -1];
    take(out.slice(...ranges));
  }
  return out;
}

// Reductions over [3, 4, 5]: every op under several axis sets, with and without keepdims.
const cube = input([3, 4, 5], 1);
const cubeNear1 = input([3, 4, 5], 2, { low: 0.6, high: 1.5 });
for (const op of Object.keys(reductions)) {
  const x = op === "prod"
    ? cubeNear1
    : op === "all" || op === "any"
    ? input([3, 4, 5], 3, { low: -1, high: 1, set: [[0, 0], [7, 0], [20, 0], [21, 0], [22, 0]] })
    : cube;
  const axes: (number | number[] | null)[] = op.startsWith("arg")
    ? [null, 0, 2, -1]
    : [null, 1, [0, 2], -1, [0, 1, 2]];
  for (const axis of axes) {
    for (const keepdims of [false, true]) {
      const params: Record<string, unknown> = { keepdims };
      if (axis !== null) params.axis = axis;
      add(`${op} axis ${JSON.stringify(axis)} keepdims ${keepdims}`, op, params, { x });
    }
  }
}
for (const ddof of [0, 1, 2]) {
  for (const op of ["variance", "std"]) {
    add(`${op} ddof ${ddof} axis 2`, op, { axis: 2, ddof }, { x: cube });
  }
}
// Ties (first occurrence wins), NaN (propagates; argmax points at the first NaN), infinities.
const ties = input([4, 6], 0, {
  values: [1, 3, 3, 0, 3, 2, 5, 5, 5, 5, 5, 5, -1, -2, -2, -1, -2, 0, 0, -0, 0, -0, 0, 0],
});
const withNaN = input([4, 6], 4, { set: [[2, NaN], [4, NaN], [9, NaN], [23, NaN]] });
const withInf = input([4, 6], 5, {
  set: [
    [0, Infinity],
    [7, -Infinity],
    [8, Infinity],
    [12, -Infinity],
    [13, -Infinity],
    [14, -Infinity],
    [
      15,
      -Infinity,
    ],
    [16, -Infinity],
    [17, -Infinity],
    [20, Infinity],
    [21, -Infinity],
  ],
});
for (const [label, x] of [["ties", ties], ["NaN", withNaN], ["Inf", withInf]] as const) {
  for (const op of ["max", "min", "argmax", "argmin", "sum", "logsumexp", "mean"]) {
    for (const axis of [0, 1]) add(`${op} ${label} axis ${axis}`, op, { axis }, { x });
    if (op.startsWith("arg")) add(`${op} ${label} flat`, op, {}, { x });
  }
}
// Reducing an empty axis: sum 0, prod 1, mean NaN, max and argmax throw (as PyTorch).
const empty = encode([3, 0, 2], "float32", []);
for (const op of ["sum", "prod", "mean", "max", "argmax", "any", "all"]) {
  add(`${op} empty axis`, op, { axis: 1 }, { x: empty });
}

// Activations over the corners of each formula (softplus's threshold, hardswish's knees, -0).
const corners = [
  -Infinity,
  -100,
  -30,
  -20.5,
  -10,
  -3.5,
  -3,
  -2.5,
  -1,
  -0.5,
  -1e-7,
  -0,
  0,
  1e-7,
  0.5,
  1,
  2.5,
  3,
  3.5,
  9.99,
  10,
  10.01,
  19.99,
  20,
  20.01,
  30,
  88,
  100,
  Infinity,
  NaN,
];
const activationInput = input([corners.length + 34], 0, {
  values: [...corners, ...randomValues(34, 6, -6, 6)],
});
const activationParams: Record<string, Record<string, unknown>[]> = {
  gelu: [{}, { approximate: "none" }, { approximate: "tanh" }],
  leakyRelu: [{}, { alpha: 0.2 }, { alpha: -0.5 }],
  elu: [{}, { alpha: 0.5 }, { alpha: 2 }],
  softplus: [{}, { beta: 2 }, { beta: 0.5, threshold: 5 }, { beta: 1, threshold: 10 }],
};
for (const op of Object.keys(activations)) {
  for (const params of activationParams[op] ?? [{}]) {
    add(`${op} ${JSON.stringify(params)}`, op, params, { x: activationInput });
  }
}

// Softmax and logSoftmax: a row of -Inf (NaN, as PyTorch), rows holding +Inf or NaN, both axes.
const rows = input([5, 7], 7, {
  set: [
    ...Array.from({ length: 7 }, (_, i) => [7 + i, -Infinity] as [number, number]),
    [15, Infinity],
    [23, NaN],
    [28, -Infinity],
    [29, -Infinity],
  ],
});
for (const op of ["softmax", "logSoftmax"]) {
  for (const axis of [-1, 0, 1]) add(`${op} axis ${axis}`, op, { axis }, { x: rows });
  add(`${op} default axis, large values`, op, {}, { x: input([3, 9], 8, { low: -80, high: 80 }) });
}

// Layer, RMS, group and batch norms with and without affine parameters.
const norm3 = input([2, 3, 8], 9);
add("layerNorm last axis, weight and bias", "layerNorm", {}, {
  x: norm3,
  weight: input([8], 10),
  bias: input([8], 11),
});
add("layerNorm last two axes, eps 1e-3", "layerNorm", { axis: [-2, -1], eps: 1e-3 }, {
  x: norm3,
  weight: input([3, 8], 12),
  bias: input([3, 8], 13),
});
add("layerNorm no affine", "layerNorm", {}, { x: input([4, 1000], 14, { low: 90, high: 110 }) });
add("rmsNorm last axis, weight", "rmsNorm", {}, { x: norm3, weight: input([8], 15) });
add("rmsNorm last two axes, eps 1e-4", "rmsNorm", { axis: [-2, -1], eps: 1e-4 }, { x: norm3 });
const nchw = input([2, 6, 4, 5], 16);
for (const groups of [1, 3, 6]) {
  add(`groupNorm ${groups} groups`, "groupNorm", { groups }, {
    x: nchw,
    weight: input([6], 17),
    bias: input([6], 18),
  });
}
add("groupNorm no affine, eps 1e-3", "groupNorm", { groups: 2, eps: 1e-3 }, { x: nchw });
const channelStats = {
  mean: input([6], 19, { low: -0.5, high: 0.5 }),
  variance: input([6], 20, { low: 0.5, high: 2 }),
  weight: input([6], 21),
  bias: input([6], 22),
};
add("batchNorm inference", "batchNorm", {}, { x: nchw, ...channelStats });
add("batchNorm training with running statistics, momentum 0.3", "batchNorm", {
  training: true,
  momentum: 0.3,
}, { x: nchw, ...channelStats });
add("batchNorm training NC, no running statistics", "batchNorm", { training: true }, {
  x: input([5, 3], 23),
});

// Scans on both axes, exclusive and reversed, NaN in the max and min, and long rows that take
// the GPU's multipass (40000) and look-back (300000) schemes.
const scanInput = input([3, 10], 24);
const scanNear1 = input([3, 10], 25, { low: 0.7, high: 1.4 });
const scanNaN = input([3, 10], 26, { set: [[3, NaN], [12, NaN], [29, NaN]] });
for (const op of Object.keys(scans)) {
  const x = op === "cumprod" ? scanNear1 : scanInput;
  for (const axis of [-1, 0]) {
    for (const exclusive of [false, true]) {
      for (const reverse of [false, true]) {
        add(`${op} axis ${axis} exclusive ${exclusive} reverse ${reverse}`, op, {
          axis,
          exclusive,
          reverse,
        }, { x });
      }
    }
  }
  add(`${op} NaN`, op, {}, { x: scanNaN });
}
for (const length of [40000, 300000]) {
  add(`cumsum of ${length}`, "cumsum", {}, { x: input([length], 27, { low: -1, high: 1 }) });
  add(`cummax of ${length}`, "cummax", {}, { x: input([length], 28) });
}

// Pools on [2, 3, 9, 11], options crossed: padding, dilation, ceil mode, indices, divisors.
const image = input([2, 3, 9, 11], 29, {
  set: [[5, NaN], [100, Infinity], [101, -Infinity]],
});
const imageFinite = input([2, 3, 9, 11], 30);
const maxPools: Record<string, unknown>[] = [
  { kernelSize: 2 },
  { kernelSize: 3, stride: 2, padding: 1 },
  { kernelSize: 3, stride: 2, padding: 1, ceilMode: true },
  { kernelSize: [2, 3], stride: [2, 1], padding: [1, 0], dilation: [2, 1], ceilMode: true },
  { kernelSize: 3, stride: 3, ceilMode: true, returnIndices: true },
  { kernelSize: [3, 2], stride: 2, padding: 1, dilation: 2, returnIndices: true },
];
for (const params of maxPools) {
  for (const [label, x] of [["finite", imageFinite], ["NaN and Inf", image]] as const) {
    add(`maxPool2d ${JSON.stringify(params)} ${label}`, "maxPool2d", params, { x });
  }
}
const avgPools: Record<string, unknown>[] = [
  { kernelSize: 2 },
  { kernelSize: 3, stride: 2, padding: 1 },
  { kernelSize: 3, stride: 2, padding: 1, countIncludePad: false },
  { kernelSize: 3, stride: 2, padding: 1, ceilMode: true },
  { kernelSize: 3, stride: 2, padding: 1, ceilMode: true, countIncludePad: false },
  { kernelSize: [2, 3], stride: [1, 2], padding: [1, 1], ceilMode: true },
  { kernelSize: 3, stride: 2, padding: 1, divisorOverride: 5 },
];
for (const params of avgPools) {
  add(`avgPool2d ${JSON.stringify(params)}`, "avgPool2d", params, { x: imageFinite });
}
for (const outputSize of [4, [3, 5], [1, null], [9, 11], [5, 2]]) {
  add(`adaptiveAvgPool2d ${JSON.stringify(outputSize)}`, "adaptiveAvgPool2d", { outputSize }, {
    x: imageFinite,
  });
  for (const returnIndices of [false, true]) {
    add(
      `adaptiveMaxPool2d ${JSON.stringify(outputSize)} indices ${returnIndices}`,
      "adaptiveMaxPool2d",
      { outputSize, returnIndices },
      { x: imageFinite },
    );
  }
}

// Edges the lists above miss: ddof at and past the axis length, three-dimensional norms, int32
// inputs, and float16 storage (float32 arithmetic) for the ops issue 3 names.
for (const ddof of [5, 7]) {
  add(`variance ddof ${ddof} of 5`, "variance", { axis: 2, ddof }, { x: cube });
}
const ncl = input([4, 6, 7], 31);
add("groupNorm [N, C, L]", "groupNorm", { groups: 2 }, { x: ncl });
add("batchNorm [N, C, L] training", "batchNorm", { training: true }, { x: ncl });
add("rmsNorm no weight", "rmsNorm", {}, { x: ncl });
add("softmax middle axis", "softmax", { axis: 1 }, { x: ncl });
const integers = input([4, 9], 32, { low: -50, high: 50, dtype: "int32" });
for (const op of ["sum", "max", "min", "argmax", "argmin", "prod", "cumsum", "cummax"]) {
  const x = op === "prod" ? input([4, 5], 33, { low: -3, high: 3, dtype: "int32" }) : integers;
  add(`${op} int32 axis 1`, op, { axis: 1 }, { x });
}
const halves = input([6, 40], 34, { dtype: "float16", set: [[3, NaN], [50, Infinity]] });
const halvesFinite = input([6, 40], 35, { dtype: "float16" });
for (const op of ["sum", "mean", "max", "min", "argmax", "logsumexp", "variance", "prod"]) {
  const x = op === "prod" ? input([6, 40], 36, { low: 0.9, high: 1.1, dtype: "float16" }) : halves;
  for (const axis of [0, 1]) add(`${op} float16 axis ${axis}`, op, { axis }, { x });
}
for (const op of ["relu", "gelu", "silu", "softplus", "mish", "softsign"]) {
  add(`${op} float16`, op, {}, { x: halvesFinite });
}
for (const op of ["softmax", "logSoftmax", "layerNorm", "rmsNorm"]) {
  add(`${op} float16`, op, {}, { x: halvesFinite });
}

// Elementwise math over the corners: every unary op; every binary op on a column of corners
// against a row of them (the broadcast fast paths), against a row vector and against a scalar.
for (const op of UNARY) {
  const x = op === "logicalNot"
    ? input([corners.length], 0, { values: corners, dtype: "bool" })
    : activationInput;
  add(`${op} corners`, op, {}, { x });
}
for (const op of ["exp", "log", "sqrt", "tanh", "sigmoid", "erf"]) {
  add(`${op} float16`, op, {}, { x: halvesFinite });
}
const pairCorners = [
  -Infinity,
  -100,
  -5,
  -3,
  -2.5,
  -1,
  -0.5,
  -0,
  0,
  0.5,
  1,
  2,
  2.5,
  3,
  5,
  100,
  3e38,
  Infinity,
  NaN,
  1 / 3,
];
for (const op of BINARY) {
  const dtype = op.startsWith("logical") ? "bool" : "float32";
  const column = input([pairCorners.length, 1], 0, { values: pairCorners, dtype });
  const row = input([1, pairCorners.length], 0, { values: pairCorners, dtype });
  add(`${op} column by row`, op, {}, { x: column, y: row });
  const square = input([6, 20], 37, { dtype, low: -4, high: 4 });
  add(`${op} by a row vector`, op, {}, {
    x: square,
    y: input([20], 38, { dtype, low: -4, high: 4 }),
  });
  add(`${op} by a scalar`, op, {}, { x: square, y: input([], 0, { values: [2.5], dtype }) });
}
add("clip", "clip", { min: -1, max: 2 }, { x: activationInput });
add("clip lower only", "clip", { min: 0.5, max: null }, { x: activationInput });
add("where", "where", {}, {
  condition: input([6, 20], 39, { dtype: "bool", low: -1, high: 1 }),
  x: input([6, 20], 40),
  y: input([20], 41),
});

// Shapes large enough for the GPU's other schemes: rows longer than a workgroup (two-stage
// softmax and norms), columns, reductions over many workgroups, multipass scans, large pools.
const longRows = input([4, 70000], 42, { low: -20, high: 20 });
for (const op of ["softmax", "logSoftmax"]) {
  add(`${op} long rows`, op, {}, { x: longRows });
  add(`${op} long columns`, op, { axis: 0 }, { x: input([70000, 3], 43, { low: -20, high: 20 }) });
}
add("layerNorm long rows", "layerNorm", {}, {
  x: input([3, 70000], 44, { low: 5, high: 7 }),
  weight: input([70000], 45),
  bias: input([70000], 46),
});
add("rmsNorm long rows", "rmsNorm", {}, { x: input([3, 70000], 47), weight: input([70000], 48) });
const wide = input([700, 600], 49);
add("sum columns", "sum", { axis: 0 }, { x: wide });
add("sum all of 420000", "sum", {}, { x: wide });
add("mean rows", "mean", { axis: 1 }, { x: wide });
add("variance columns", "variance", { axis: 0, ddof: 1 }, { x: wide });
add("std rows", "std", { axis: 1 }, { x: wide });
add("argmin columns", "argmin", { axis: 0 }, {
  x: input([700, 600], 50, { low: -9, high: 9, dtype: "int32" }),
});
const longTies = input([3, 100000], 51, { low: -50, high: 50, dtype: "int32" });
add("argmax long rows with ties", "argmax", { axis: 1 }, { x: longTies });
add("max long rows with a NaN", "max", { axis: 1 }, {
  x: input([3, 100000], 52, { set: [[150000, NaN]] }),
});
add("logsumexp long rows", "logsumexp", { axis: 1 }, {
  x: input([2, 100000], 53, { low: -50, high: 50 }),
});
add("prod long rows", "prod", { axis: 1 }, {
  x: input([4, 20000], 54, { low: 0.9999, high: 1.0001 }),
});
add("any long rows", "any", { axis: 1 }, {
  x: input([3, 100000], 55, { values: new Array(300000).fill(0), set: [[250000, 1]] }),
});
add("all long rows", "all", { axis: 1 }, {
  x: input([3, 100000], 56, { values: new Array(300000).fill(1), set: [[99999, 0]] }),
});
add("cumsum columns", "cumsum", { axis: 0 }, { x: input([3000, 64], 57) });
add("cumsum reverse exclusive rows", "cumsum", { reverse: true, exclusive: true }, {
  x: input([64, 3000], 58),
});
add("cumprod long rows", "cumprod", {}, { x: input([2, 5000], 59, { low: 0.999, high: 1.001 }) });
add("cummin long row", "cummin", {}, { x: input([200000], 60) });
const bigImage = input([2, 8, 128, 128], 61);
add("maxPool2d large", "maxPool2d", { kernelSize: 3, stride: 2, padding: 1, returnIndices: true }, {
  x: bigImage,
});
add("avgPool2d large", "avgPool2d", { kernelSize: 3, stride: 2, padding: 1, ceilMode: true }, {
  x: bigImage,
});
const featureMap = input([2, 16, 112, 112], 62);
add("adaptiveAvgPool2d 112 to 7", "adaptiveAvgPool2d", { outputSize: 7 }, { x: featureMap });
add("adaptiveMaxPool2d 112 to [5, 3]", "adaptiveMaxPool2d", {
  outputSize: [5, 3],
  returnIndices: true,
}, { x: featureMap });
add("groupNorm large", "groupNorm", { groups: 8 }, { x: input([4, 32, 32, 32], 63) });
add("batchNorm large training", "batchNorm", { training: true }, { x: input([16, 8, 32, 32], 64) });

// Arguments PyTorch refuses: gyre must refuse them too.
add("softmax axis out of range", "softmax", { axis: 2 }, { x: rows });
add("cumsum axis out of range", "cumsum", { axis: 3 }, { x: scanInput });
add("groupNorm groups not dividing channels", "groupNorm", { groups: 4 }, { x: nchw });
add("layerNorm weight of the wrong shape", "layerNorm", {}, { x: norm3, weight: input([7], 65) });
add("maxPool2d padding over half the kernel", "maxPool2d", { kernelSize: 2, padding: 2 }, {
  x: imageFinite,
});
add("avgPool2d padding over half the kernel", "avgPool2d", { kernelSize: 3, padding: 2 }, {
  x: imageFinite,
});
add("maxPool2d kernel larger than the input", "maxPool2d", { kernelSize: 12 }, { x: imageFinite });

// float16 norms with float16 affine parameters, and float16 group and batch norms.
add("layerNorm float16 with weight and bias", "layerNorm", {}, {
  x: halvesFinite,
  weight: input([40], 70, { dtype: "float16" }),
  bias: input([40], 71, { dtype: "float16" }),
});
add("rmsNorm float16 with weight", "rmsNorm", {}, {
  x: halvesFinite,
  weight: input([40], 72, { dtype: "float16" }),
});
const halfImage = input([2, 6, 4, 5], 73, { dtype: "float16" });
add("groupNorm float16", "groupNorm", { groups: 3 }, { x: halfImage });
add("batchNorm float16 training", "batchNorm", { training: true }, { x: halfImage });
add("softmax float16 long rows", "softmax", {}, {
  x: input([2, 70000], 74, { low: -8, high: 8, dtype: "float16" }),
});

// Matrix products: NumPy's matmul shapes (1-D operands, broadcast batches), transposed
// operands by flag and by view, K = 0, int32, float16 storage, and linear's fused epilogue.
const matmulPairs: [string, number[], number[], Record<string, unknown>, ViewSpec?][] = [
  ["[5, 7] @ [7, 3]", [5, 7], [7, 3], {}],
  ["[7] @ [7, 3]", [7], [7, 3], {}],
  ["[5, 7] @ [7]", [5, 7], [7], {}],
  ["[7] @ [7]", [7], [7], {}],
  ["[2, 1, 4, 5] @ [3, 5, 2]", [2, 1, 4, 5], [3, 5, 2], {}],
  ["transposeA [7, 5] @ [7, 3]", [7, 5], [7, 3], { transposeA: true }],
  ["transposeB [5, 7] @ [3, 7]", [5, 7], [3, 7], { transposeB: true }],
  ["both transposed, batched", [2, 7, 5], [2, 3, 7], { transposeA: true, transposeB: true }],
  ["a transposed view", [7, 5], [7, 3], {}, { permute: [1, 0] }],
  ["[33, 65] @ [65, 31] (partial tiles)", [33, 65], [65, 31], {}],
  ["K = 0", [4, 0], [0, 3], {}],
  ["[130, 257] @ [257, 190]", [130, 257], [257, 190], {}],
  ["[64, 4096] @ [4096, 48]", [64, 4096], [4096, 48], {}],
  ["[1, 3000] @ [3000, 700] (matrix-vector)", [1, 3000], [3000, 700], {}],
];
for (const [label, aShape, bShape, params, view] of matmulPairs) {
  add(`matmul ${label}`, "matmul", params, {
    x: input(aShape, 75, { low: -2, high: 2 }),
    y: input(bShape, 76, { low: -2, high: 2 }),
  }, view);
}
add("matmul int32", "matmul", {}, {
  x: input([4, 6], 77, { low: -9, high: 9, dtype: "int32" }),
  y: input([6, 5], 78, { low: -9, high: 9, dtype: "int32" }),
});
add("matmul float16", "matmul", {}, {
  x: input([9, 40], 79, { dtype: "float16" }),
  y: input([40, 11], 80, { dtype: "float16" }),
});
add("matmul inner axes differ", "matmul", {}, { x: input([3, 4], 81), y: input([5, 2], 82) });
add("matmul batches that do not broadcast", "matmul", {}, {
  x: input([2, 3, 4], 83),
  y: input([3, 4, 2], 84),
});
for (const activation of ["none", "relu", "gelu", "silu", "tanh", "sigmoid"]) {
  add(`linear ${activation}`, "linear", { activation }, {
    x: input([2, 3, 6], 85),
    weight: input([4, 6], 86),
    bias: input([4], 87),
  });
}
add("linear without bias", "linear", {}, { x: input([5, 6], 88), weight: input([4, 6], 89) });

// Creation, casts and data movement (NumPy's slicing: negative steps, clamped bounds).
for (const [start, stop, step] of [[0, 10, 1], [2, -7, -3], [0.5, 3.2, 0.25], [-1, 1, 0.1]]) {
  add(`arange ${start} ${stop} ${step}`, "arange", { start, stop, step }, {});
}
for (const [start, stop, num, endpoint] of [[0, 1, 11, true], [-2, 5, 7, false], [3, 3, 1, true]]) {
  add(
    `linspace ${start} ${stop} ${num} ${endpoint}`,
    "linspace",
    { start, stop, num, endpoint },
    {},
  );
}
add("eye 3 x 5", "eye", { n: 3, m: 5 }, {});
add("full [2, 3] of -1.5", "full", { shape: [2, 3], value: -1.5 }, {});
const castable = input([12], 0, {
  values: [-2.9, -2.5, -1.1, -0.5, -0, 0, 0.49, 0.5, 1.7, 2.5, 1e6 + 0.5, -16777217],
});
for (const dtype of ["int32", "bool", "float16"]) {
  add(`cast float32 to ${dtype}`, "cast", { dtype }, { x: castable });
}
add("cast int32 to float32", "cast", { dtype: "float32" }, {
  x: input([4], 0, { values: [16777217, -16777219, 2147483647, -7], dtype: "int32" }),
});
add("cast bool to float32", "cast", { dtype: "float32" }, {
  x: input([4], 0, { values: [1, 0, NaN, 0], dtype: "bool" }),
});
const pair = [input([2, 3, 4], 90), input([2, 3, 4], 91)] as const;
const box = input([5, 4, 6], 95);
for (const axis of [0, 1, -1]) {
  add(`concat axis ${axis}`, "concat", { axis }, { x: pair[0], y: pair[1] });
  add(`stack axis ${axis}`, "stack", { axis }, { x: pair[0], y: pair[1] });
}
add("concat of different lengths", "concat", { axis: 1 }, {
  x: input([2, 3], 92),
  y: input([2, 5], 93),
});
for (
  const ranges of [
    [1, [0, 3], null],
    [null, [null, null, -1], [3, 0, -2]],
    [[-1, null, null], [-10, 10, 2], [1, -1]],
    [[5, 9], null, null],
  ]
) {
  add(`slice ${JSON.stringify(ranges)}`, "slice", { ranges }, { x: box });
}
add("reshape with -1", "reshape", { shape: [4, -1, 3] }, { x: box });
add("transpose default", "transpose", {}, { x: box });
add("transpose [1, 2, 0]", "transpose", { permutation: [1, 2, 0] }, { x: box });
const ones = input([1, 3, 1, 2], 94);
add("squeeze all", "squeeze", {}, { x: ones });
add("squeeze axis 2", "squeeze", { axis: 2 }, { x: ones });
add("expandDims -1", "expandDims", { axis: -1 }, { x: pair[0] });
add("broadcastTo", "broadcastTo", { shape: [3, 2, 3, 4] }, { x: pair[0] });

// Inputs that are views (transposed, sliced with steps, reversed): the strided and transposed
// paths of every kernel family.
const block = input([5, 4, 6], 66);
const transposed: ViewSpec = { permute: [2, 0, 1] };
for (const op of ["sum", "max", "argmax", "logsumexp", "variance", "prod", "any"]) {
  for (const axis of [0, [1, 2], -1]) {
    if (op === "argmax" && Array.isArray(axis)) continue;
    add(`${op} of a transposed view, axis ${JSON.stringify(axis)}`, op, { axis }, {
      x: block,
    }, transposed);
  }
}
for (const op of ["cumsum", "cummax", "cumprod"]) {
  for (const axis of [0, -1]) {
    add(`${op} of a transposed view, axis ${axis}`, op, { axis }, { x: block }, transposed);
  }
  add(`${op} of a stepped, reversed slice`, op, {}, { x: block }, {
    slice: [null, [1, 4, 1], [0, 6, 2]],
    flip: [2],
  });
}
for (const op of ["softmax", "logSoftmax", "layerNorm", "rmsNorm"]) {
  add(`${op} of a transposed view`, op, {}, { x: input([9, 5], 67) }, { permute: [1, 0] });
}
for (const op of ["exp", "relu", "gelu", "sign"]) {
  add(`${op} of a stepped slice`, op, {}, { x: block }, { slice: [[0, 5, 2], null, [1, 6, 2]] });
}
add("add a transposed view to a row", "add", {}, { x: input([6, 5], 68), y: input([6], 69) }, {
  permute: [1, 0],
});
add("maxPool2d of a stepped slice", "maxPool2d", { kernelSize: 2, returnIndices: true }, {
  x: imageFinite,
}, { slice: [null, null, [1, 8, 1], [0, 11, 2]] });
add("avgPool2d of a transposed view", "avgPool2d", { kernelSize: 2, padding: 1 }, {
  x: imageFinite,
}, { permute: [0, 1, 3, 2] });
add("groupNorm of a reversed view", "groupNorm", { groups: 3 }, { x: nchw }, { flip: [3] });

/** Runs one case on one device: its outputs, or the error it threw (every tensor disposed). */
export async function runCase(spec: CaseSpec, device: gyre.DeviceName): Promise<DeviceResult> {
  const tensors: Record<string, gyre.Tensor> = {};
  for (const [key, value] of Object.entries(spec.inputs)) {
    tensors[key] = decode(value, device);
  }
  const made: gyre.Tensor[] = [];
  let outputs: gyre.Tensor[] = [];
  try {
    const viewed = spec.view ? { ...tensors, x: applyView(tensors.x, spec.view, made) } : tensors;
    outputs = runner(spec.op)(viewed, spec.params, device);
    const data = await gyre.readAll(outputs);
    return {
      outputs: outputs.map((t, i) => encode(t.shape, t.dtype, data[i] as ArrayLike<number>)),
    };
  } catch (error) {
    return { error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) };
  } finally {
    for (const t of [...outputs, ...made, ...Object.values(tensors)]) t.dispose();
  }
}
