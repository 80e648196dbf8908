/**
 * Property tests of the pooling kernels (src/gpu/_codegen_pool.ts) against the WASM reference
 * (asm/pool.ts): maxPool2d (values and indices), avgPool2d, adaptiveMaxPool2d and
 * adaptiveAvgPool2d over random N, C, H, W (0 batches, 1, primes, planes smaller than the window
 * that padding rescues), every valid kernel/stride/padding/dilation/ceilMode combination drawn at
 * random, contiguous, offset and transposed inputs, float32, float16 and int32. Every variant of
 * the pool plan is forced through `setPlanOverride("pool", ...)`: unrolled with 1, 2 or 4 outputs
 * per invocation, unrolled with vec4 loads (when the layout allows it), looped, teams of
 * invocations per output (averages), and a small workgroup; the rule's own choice runs too.
 *
 * Tolerances. Max pooling selects an element: values must match bit for bit (NaN as NaN, -0 as
 * -0) and indices exactly. Subnormal inputs appear only in cases without indices, whose values are
 * compared after flushing subnormals to zero: WGSL lets a GPU flush them, which may change which
 * of two tiny values wins. Averages: both devices add the window's n terms in f32 (PyTorch's
 * accumulator), in the same row-major order today, but the bound does not rely on it: each sum is
 * within (n - 1) u sum|x| of the exact one (u = 2^-24, Higham 4.2), so the two are within
 * 2 (n - 1) u sum|x| / |divisor|, computed per output as 2 (n - 1) u times the reference's average
 * of |x| (same windows, same divisor); plus the division: WGSL allows 2.5 ULP, the reference is
 * correctly rounded, 3 ULP together; float16 results round once more (one half ULP, `within`).
 * @module
 */
import fc from "fast-check";
import * as gyre from "../src/mod.ts";
import type * as tuning from "../src/tuning.ts";
import {
  Bag,
  EXACT,
  type FloatDomain,
  forcePlan,
  FULL,
  hostData,
  MIN_NORMAL,
  mulberry32,
  property,
  SPECIALS_F32,
  within,
} from "./_harness.ts";

type DType = gyre.DType;
type Pair = [number, number];
const U = 2 ** -24;

/** Plan overrides every case draws from (null: the rule). */
const OVERRIDES: readonly (Partial<tuning.PoolChoice> | null)[] = [
  null,
  { variant: "looped" },
  { variant: "unrolled", outputsPerInvocation: 1, vec4: false },
  { variant: "unrolled", outputsPerInvocation: 2, vec4: false },
  { variant: "unrolled", outputsPerInvocation: 4, vec4: false },
  // The rule's outputs per invocation for vec4 (honoured only where the layout allows vec4).
  { variant: "unrolled", vec4: true },
  { variant: "unrolled", outputsPerInvocation: 4, vec4: true },
  { workgroupSize: 64 },
  // Teams (averages with subgroups; max pooling falls back to the rule's other variants).
  { variant: "team" },
  { variant: "team", teamSize: 4, workgroupSize: 64 },
];

/** Spatial sizes: 1, small, primes, around multiples of 4 (vec4 loads) and a few longer rows. */
const SIDES = [1, 2, 3, 4, 5, 7, 8, 11, 12, 13, 16, 17, 31, 32, 33];

/** How x is laid out: contiguous, contiguous at an odd offset (a batch slice), or transposed. */
type Layout = "contiguous" | "offset" | "transposed";

interface Case {
  shape: number[];
  dtype: DType;
  layout: Layout;
  override: Partial<tuning.PoolChoice> | null;
  seed: number;
}

interface WindowCase extends Case {
  kernel: Pair;
  stride: Pair;
  padding: Pair;
  dilation: Pair;
  ceilMode: boolean;
}

const side = fc.constantFrom(...SIDES);

/** N, C, H, W (or C, H, W); N is 0 now and then. */
const shapeArb = fc.record({
  batched: fc.boolean(),
  n: fc.constantFrom(0, 1, 1, 2, 3),
  c: fc.constantFrom(1, 2, 3, 5),
  h: side,
  w: side,
}).map(({ batched, n, c, h, w }) => (batched ? [n, c, h, w] : [c, h, w]));

/** PyTorch's output size, restated here so that the op's own formula is checked too. */
function outputSize(size: number, k: number, p: number, s: number, d: number, ceil: boolean) {
  let out = Math.floor((size + 2 * p - d * (k - 1) - 1 + (ceil ? s - 1 : 0)) / s) + 1;
  if (ceil && (out - 1) * s >= size + p) out--;
  return out;
}

/** A valid window case: the planes grow to fit the window when the draw made them too small. */
function windowArb(dtypes: readonly DType[], dilated: boolean): fc.Arbitrary<WindowCase> {
  const axis = fc.record({
    // Mostly the unrolled rule's range, sometimes past 7x7 (the looped rule).
    k: fc.oneof(
      { arbitrary: fc.integer({ min: 1, max: 5 }), weight: 5 },
      fc.integer({ min: 8, max: 10 }),
    ),
    s: fc.integer({ min: 1, max: 4 }),
    p: fc.nat(),
    d: dilated
      ? fc.oneof({ arbitrary: fc.constant(1), weight: 2 }, fc.integer({ min: 2, max: 3 }))
      : fc.constant(1),
  });
  return fc.record({
    shape: shapeArb,
    dtype: fc.constantFrom(...dtypes),
    layout: fc.constantFrom<Layout>("contiguous", "contiguous", "offset", "transposed"),
    override: fc.constantFrom(...OVERRIDES),
    seed: fc.integer(),
    hAxis: axis,
    wAxis: axis,
    ceilMode: fc.boolean(),
    // Stride equal to the kernel (the default, and the vec4 fast path's usual case) half the time.
    strideIsKernel: fc.boolean(),
    // A third of the cases fit vec4 loads: no column padding or dilation, W a multiple of 4.
    vec4Layout: fc.integer({ min: 0, max: 2 }).map((k) => k === 0),
  }).map(({ hAxis, wAxis, strideIsKernel, vec4Layout, ...c }) => {
    const shape = [...c.shape];
    const rank = shape.length;
    if (vec4Layout) {
      wAxis = { ...wAxis, p: 0, d: 1 };
      shape[rank - 1] = Math.ceil(Math.max(shape[rank - 1], wAxis.k) / 4) * 4;
    }
    const axes = [hAxis, wAxis].map((a, i) => {
      const p = a.p % (Math.floor(a.k / 2) + 1);
      const s = strideIsKernel ? a.k : a.s;
      // Grow the plane until at least one window fits (padding may make that smaller than k).
      const span = a.d * (a.k - 1) + 1;
      shape[rank - 2 + i] = Math.max(shape[rank - 2 + i], span - 2 * p);
      return { k: a.k, s, p, d: a.d };
    });
    return {
      ...c,
      shape,
      kernel: [axes[0].k, axes[1].k] as Pair,
      stride: [axes[0].s, axes[1].s] as Pair,
      padding: [axes[0].p, axes[1].p] as Pair,
      dilation: [axes[0].d, axes[1].d] as Pair,
    };
  });
}

/**
 * Float values: magnitudes 2^-30..2^30 and NaN, infinities, ±0, ±MAX, subnormals when asked; or
 * (`ties`) small integers, so that windows often hold equal maxima, -0 next to +0 included.
 */
function maxDomain(dtype: DType, subnormals: boolean, ties = false): FloatDomain {
  if (ties) {
    return {
      kind: "uniform",
      lo: -3,
      hi: 3,
      integers: true,
      specials: [NaN, -0, -Infinity],
      pSpecial: 0.1,
    };
  }
  const specials = SPECIALS_F32.filter((v) => subnormals || !(v !== 0 && Math.abs(v) < MIN_NORMAL));
  // float16 keeps to its normal range: a GPU may flush half subnormals on the way to f32.
  return dtype === "float16"
    ? {
      kind: "log",
      minExp: -12,
      maxExp: 12,
      specials: [NaN, Infinity, -Infinity, 0, -0, 1, -1],
      pSpecial: 0.15,
    }
    : { ...FULL, specials, pSpecial: 0.15 };
}

/** Averages: no ±MAX (an overflow would depend on the order of additions). */
function avgDomain(dtype: DType): FloatDomain {
  return {
    kind: "log",
    minExp: dtype === "float16" ? -10 : -20,
    maxExp: dtype === "float16" ? 10 : 20,
    specials: [NaN, Infinity, -Infinity, 0, -0, 1, -1, 0.5],
    pSpecial: 0.04,
  };
}

/** x on `device` in the case's layout, holding `data` in logical (NCHW) order. */
function inputOn(bag: Bag, device: gyre.DeviceName, c: Case, data: gyre.TypedArray): gyre.Tensor {
  const shape = c.shape;
  const rank = shape.length;
  if (c.layout === "offset") {
    // One extra leading plane sliced off: contiguous, at an offset of one plane (often not a
    // multiple of 4, which turns vec4 loads off).
    const plane = shape.slice(1).reduce((a, b) => a * b, 1);
    const padded = new (data.constructor as Float32ArrayConstructor)(data.length + plane);
    padded.set(data as Float32Array, plane);
    const base = bag.add(
      gyre.tensor(padded, { shape: [shape[0] + 1, ...shape.slice(1)], dtype: c.dtype, device }),
    );
    return bag.add(base.slice([1, null]));
  }
  if (c.layout === "transposed") {
    // Stored with H and W swapped, then transposed back: a strided view of the same values.
    const [h, w] = shape.slice(rank - 2);
    const swapped = new (data.constructor as Float32ArrayConstructor)(data.length);
    const planes = data.length / (h * w || 1);
    for (let p = 0; p < planes; p++) {
      for (let i = 0; i < h; i++) {
        for (let j = 0; j < w; j++) swapped[p * h * w + j * h + i] = data[p * h * w + i * w + j];
      }
    }
    const stored = bag.add(
      gyre.tensor(swapped, { shape: [...shape.slice(0, rank - 2), w, h], dtype: c.dtype, device }),
    );
    const perm = [...Array(rank).keys()];
    [perm[rank - 2], perm[rank - 1]] = [perm[rank - 1], perm[rank - 2]];
    return bag.add(stored.transpose(perm));
  }
  return bag.add(gyre.tensor(data, { shape, dtype: c.dtype, device }));
}

/** Runs `op` on the GPU under the case's override, and on WASM. */
function both(
  bag: Bag,
  c: Case,
  data: gyre.TypedArray,
  op: (x: gyre.Tensor) => gyre.Tensor | gyre.PoolWithIndices,
): { gpu: gyre.Tensor[]; ref: gyre.Tensor[] } {
  const collect = (r: gyre.Tensor | gyre.PoolWithIndices) =>
    r instanceof gyre.Tensor ? [bag.add(r)] : [bag.add(r.values), bag.add(r.indices)];
  const gpuInput = inputOn(bag, "gpu", c, data);
  forcePlan("pool", c.override);
  let gpu: gyre.Tensor[];
  try {
    gpu = collect(op(gpuInput));
  } finally {
    forcePlan("pool", null);
  }
  return { gpu, ref: collect(op(inputOn(bag, "wasm", c, data))) };
}

/** Asserts the output shape of a window case. */
function expectShape(label: string, c: WindowCase, got: gyre.Tensor): void {
  const rank = c.shape.length;
  const want = [
    ...c.shape.slice(0, rank - 2),
    ...[0, 1].map((i) =>
      outputSize(
        c.shape[rank - 2 + i],
        c.kernel[i],
        c.padding[i],
        c.stride[i],
        c.dilation[i],
        c.ceilMode,
      )
    ),
  ];
  if (got.shape.join() !== want.join()) {
    throw new Error(`${label}: shape [${got.shape}], want [${want}]`);
  }
}

function describeCase(c: Case, extra: string): string {
  return `${c.dtype} [${c.shape}] ${c.layout} ${extra} override ${JSON.stringify(c.override)}`;
}

/** Compares max-pooling results: values bit for bit, indices exactly. */
async function checkMax(
  label: string,
  c: Case,
  gpu: gyre.Tensor[],
  ref: gyre.Tensor[],
  subnormals: boolean,
): Promise<void> {
  const [got, want, gotIndex, wantIndex] = await gyre.readAll([
    gpu[0],
    ref[0],
    ...gpu.slice(1),
    ...ref.slice(1),
  ]);
  if (gpu[0].shape.join() !== ref[0].shape.join()) {
    throw new Error(`${label}: shape [${gpu[0].shape}] on the GPU, [${ref[0].shape}] on WASM`);
  }
  const half = c.dtype === "float16";
  const exact = (i: number) =>
    c.dtype === "int32"
      ? got[i] === want[i]
      : within(got[i], want[i], EXACT, { half, signedZero: !subnormals, ftz: subnormals });
  report(label, got, want, exact);
  if (gotIndex) {
    report(`${label} indices`, gotIndex, wantIndex, (i) => gotIndex[i] === wantIndex[i]);
  }
}

function report(
  label: string,
  got: ArrayLike<number>,
  want: ArrayLike<number>,
  ok: (i: number) => boolean,
) {
  if (got.length !== want.length) {
    throw new Error(`${label}: ${got.length} vs ${want.length} elements`);
  }
  const bad: string[] = [];
  let count = 0;
  for (let i = 0; i < got.length; i++) {
    if (ok(i)) continue;
    if (++count <= 5) bad.push(`  [${i}] gpu ${show(got[i])} wasm ${show(want[i])}`);
  }
  if (count) throw new Error(`${label}: ${count} of ${got.length} differ\n${bad.join("\n")}`);
}

function show(v: number): string {
  return Object.is(v, -0) ? "-0" : String(v);
}

/** Compares averages under the bound of the module doc; `terms` is the largest window's size. */
async function checkAvg(
  label: string,
  c: Case,
  gpu: gyre.Tensor,
  ref: gyre.Tensor,
  refAbs: gyre.Tensor,
  terms: number,
): Promise<void> {
  const [got, want, magnitude] = await gyre.readAll([gpu, ref, refAbs]);
  if (gpu.shape.join() !== ref.shape.join()) {
    throw new Error(`${label}: shape [${gpu.shape}] on the GPU, [${ref.shape}] on WASM`);
  }
  const half = c.dtype === "float16";
  report(
    label,
    got,
    want,
    (i) =>
      within(got[i], want[i], {
        ulp: 3,
        atol: 2 * Math.max(0, terms - 1) * U * Math.abs(magnitude[i]),
      }, {
        half,
        ftz: true,
      }),
  );
}

/** |x| on WASM in the case's layout (the magnitude the average's tolerance scales with). */
function absOn(bag: Bag, c: Case, data: gyre.TypedArray): gyre.Tensor {
  return bag.add(gyre.abs(inputOn(bag, "wasm", c, data)));
}

const count = (shape: number[]) => shape.reduce((a, b) => a * b, 1);

property(
  "pool/maxPool2d",
  "GPU matches WASM: values bit for bit, indices exactly, every plan variant",
  fc.record({
    c: windowArb(["float32", "float32", "float16", "int32"], true),
    indices: fc.boolean(),
    values: fc.constantFrom("full", "subnormals", "ties"),
  }),
  async ({ c, indices, values }) => {
    const subnormals = values === "subnormals";
    const bag = new Bag();
    try {
      const returnIndices = indices && !subnormals;
      const rng = mulberry32(c.seed);
      const data = hostData(
        rng,
        c.dtype,
        count(c.shape),
        maxDomain(c.dtype, subnormals, values === "ties"),
        {
          lo: -5,
          hi: 5,
        },
      );
      const options = {
        kernelSize: c.kernel,
        stride: c.stride,
        padding: c.padding,
        dilation: c.dilation,
        ceilMode: c.ceilMode,
        returnIndices,
      };
      const { gpu, ref } = both(bag, c, data, (x) => gyre.maxPool2d(x, options));
      const label = `maxPool2d ${
        describeCase(
          c,
          `k[${c.kernel}] s[${c.stride}] p[${c.padding}] d[${c.dilation}]${
            c.ceilMode ? " ceil" : ""
          }`,
        )
      }`;
      expectShape(label, c, gpu[0]);
      await checkMax(label, c, gpu, ref, subnormals);
    } finally {
      bag.dispose();
    }
  },
  { numRuns: 60, variants: ["pool/looped", "pool/unrolled"] },
);

property(
  "pool/avgPool2d",
  "GPU matches WASM within the summation bound, every divisor rule and plan variant",
  fc.record({
    c: windowArb(["float32", "float32", "float16"], false),
    countIncludePad: fc.boolean(),
    divisorOverride: fc.oneof(
      { arbitrary: fc.constant(undefined), weight: 4 },
      fc.constantFrom(1, 3, -2, 7),
    ),
  }),
  async ({ c, countIncludePad, divisorOverride }) => {
    const bag = new Bag();
    try {
      const data = hostData(mulberry32(c.seed), c.dtype, count(c.shape), avgDomain(c.dtype));
      const options = {
        kernelSize: c.kernel,
        stride: c.stride,
        padding: c.padding,
        ceilMode: c.ceilMode,
        countIncludePad,
        divisorOverride,
      };
      const { gpu, ref } = both(bag, c, data, (x) => gyre.avgPool2d(x, options));
      const magnitude = bag.add(gyre.avgPool2d(absOn(bag, c, data), options));
      const label = `avgPool2d ${
        describeCase(
          c,
          `k[${c.kernel}] s[${c.stride}] p[${c.padding}]${c.ceilMode ? " ceil" : ""} ` +
            `${countIncludePad ? "countIncludePad" : "valid"} divisor ${divisorOverride}`,
        )
      }`;
      expectShape(label, c, gpu[0]);
      await checkAvg(label, c, gpu[0], ref[0], magnitude, c.kernel[0] * c.kernel[1]);
    } finally {
      bag.dispose();
    }
  },
  { numRuns: 50, variants: ["pool/looped", "pool/unrolled", "pool/team"] },
);

/** Adaptive cases: output sizes that divide the input or not, larger than it, or null (kept). */
function adaptiveArb(dtypes: readonly DType[]) {
  const out = fc.oneof(
    { arbitrary: fc.integer({ min: 1, max: 12 }), weight: 4 },
    { arbitrary: fc.constant(null), weight: 1 },
  );
  return fc.record({
    shape: shapeArb,
    dtype: fc.constantFrom(...dtypes),
    layout: fc.constantFrom<Layout>("contiguous", "contiguous", "offset", "transposed"),
    // Irregular bins have two variants (unrolled to the largest bin, looped); bins that divide
    // the input are regular windows and get the others too.
    override: fc.constantFrom<Partial<tuning.PoolChoice> | null>(
      null,
      { variant: "looped" },
      { variant: "looped" },
      { variant: "unrolled" },
      { variant: "unrolled", outputsPerInvocation: 2 },
      { variant: "unrolled", vec4: true },
      { variant: "team" },
      { variant: "team", teamSize: 8 },
    ),
    seed: fc.integer(),
    outputSize: fc.tuple(out, out),
    divides: fc.boolean(),
  }).map(({ outputSize, divides, ...c }): Case & { outputSize: [number | null, number | null] } => {
    const rank = c.shape.length;
    // Half the cases use an output size that divides the input (the regular-window fast path).
    const size = outputSize.map((o, i) => {
      const input = c.shape[rank - 2 + i];
      if (o === null || !divides) return o;
      const divisors = [...Array(input).keys()].map((k) => k + 1).filter((d) => input % d === 0);
      return divisors[o % divisors.length];
    }) as [number | null, number | null];
    return { ...c, outputSize: size };
  });
}

function largestBin(input: number, output: number): number {
  let largest = 0;
  for (let i = 0; i < output; i++) {
    largest = Math.max(
      largest,
      Math.ceil(((i + 1) * input) / output) - Math.floor((i * input) / output),
    );
  }
  return largest;
}

property(
  ["pool/adaptiveMaxPool2d", "pool/adaptiveAvgPool2d"],
  "GPU matches WASM on bins that do and do not divide the input, every plan variant",
  fc.record({
    c: adaptiveArb(["float32", "float32", "float16", "int32"]),
    avg: fc.boolean(),
    indices: fc.boolean(),
  }),
  async ({ c, avg, indices }) => {
    const bag = new Bag();
    try {
      const dtype = avg && c.dtype === "int32" ? "float32" : c.dtype;
      const d: Case = { ...c, dtype };
      const label = `${avg ? "adaptiveAvgPool2d" : "adaptiveMaxPool2d"} ${
        describeCase(d, `output ${JSON.stringify(c.outputSize)}`)
      }`;
      const rng = mulberry32(c.seed);
      if (avg) {
        const data = hostData(rng, dtype, count(c.shape), avgDomain(dtype));
        const { gpu, ref } = both(bag, d, data, (x) => gyre.adaptiveAvgPool2d(x, c.outputSize));
        const magnitude = bag.add(gyre.adaptiveAvgPool2d(absOn(bag, d, data), c.outputSize));
        const rank = c.shape.length;
        const [h, w] = c.shape.slice(rank - 2);
        const terms = largestBin(h, c.outputSize[0] ?? h) * largestBin(w, c.outputSize[1] ?? w);
        await checkAvg(label, d, gpu[0], ref[0], magnitude, terms);
      } else {
        const data = hostData(rng, dtype, count(c.shape), maxDomain(dtype, false, indices), {
          lo: -5,
          hi: 5,
        });
        const { gpu, ref } = both(
          bag,
          d,
          data,
          (x) => gyre.adaptiveMaxPool2d(x, c.outputSize, { returnIndices: indices }),
        );
        await checkMax(label, d, gpu, ref, false);
      }
    } finally {
      bag.dispose();
    }
  },
  { numRuns: 60, variants: ["pool/looped", "pool/unrolled", "pool/team"] },
);

// Above 1 Mi elements: the common ResNet/VGG shapes (2x2 stride 2, 3x3 stride 2 padding 1) and a
// global average, under the rule's choice, the looped variant and teams (lavapipe is a CPU: few
// runs).
property(
  ["pool/maxPool2d", "pool/avgPool2d", "pool/adaptiveAvgPool2d"],
  "GPU matches WASM above 1 Mi elements",
  fc.record({
    which: fc.constantFrom("max2", "max3", "avg2", "global"),
    variant: fc.constantFrom<"looped" | "team" | null>(null, "looped", "team"),
    seed: fc.integer(),
  }),
  async ({ which, variant, seed }) => {
    const bag = new Bag();
    try {
      const c: Case = {
        shape: which === "global" ? [4, 64, 64, 65] : [2, 4, 364, 364],
        dtype: "float32",
        layout: "contiguous",
        override: variant ? { variant } : null,
        seed,
      };
      const label = `${which} ${describeCase(c, "")}`;
      const rng = mulberry32(seed);
      if (which === "max2" || which === "max3") {
        const data = hostData(rng, "float32", count(c.shape), maxDomain("float32", false));
        const options = which === "max2"
          ? { kernelSize: 2, returnIndices: true as const }
          : { kernelSize: 3, stride: 2, padding: 1, returnIndices: true as const };
        const { gpu, ref } = both(bag, c, data, (x) => gyre.maxPool2d(x, options));
        await checkMax(label, c, gpu, ref, false);
      } else {
        const data = hostData(rng, "float32", count(c.shape), avgDomain("float32"));
        const op = which === "avg2"
          ? (x: gyre.Tensor) => gyre.avgPool2d(x, { kernelSize: 2 })
          : (x: gyre.Tensor) => gyre.adaptiveAvgPool2d(x, 1);
        const { gpu, ref } = both(bag, c, data, op);
        const magnitude = bag.add(op(absOn(bag, c, data)));
        await checkAvg(label, c, gpu[0], ref[0], magnitude, which === "avg2" ? 4 : 64 * 65);
      }
    } finally {
      bag.dispose();
    }
  },
  { numRuns: 4 },
);
