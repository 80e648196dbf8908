/**
 * Property tests of the matmul kernels against the WASM GEMM (itself checked against an f64
 * triple loop in tests/matmul_test.ts): random M, N, K (1, primes, around tile multiples),
 * broadcast batches, 1-D operands, transposes by option and by strided view, float32, float16
 * (float32 and float16 accumulation) and int32, with every plan variant forced through
 * `setPlanOverride("matmul", ...)`: tiles from 32x32 to 128x128 with 4 to 16 outputs per
 * invocation, single and double buffering, scalar loads, split-K, and both matrix-vector forms.
 *
 * Tolerance (float32): each device's sum of K products has an error of at most
 * gamma_K * (|A| |B|)_ij with gamma_K = K u / (1 - K u), u = 2^-24, whatever the order of the sum
 * (Higham, Accuracy and Stability of Numerical Algorithms, 3.5), so the two differ by at most
 * 2 gamma_K (|A| |B|)_ij, computed here elementwise in f64; results are compared after flushing
 * subnormals (a GPU may flush them). float16 storage with float32 accumulation adds one half-
 * precision rounding of the result on each side: one float16 ulp. float16 accumulation rounds
 * every multiply-add to half precision: (K + 2) 2^-11 (|A| |B|)_ij. int32 wraps identically:
 * exact. Elementwise prologues fused into the product (pending operands) are checked against the
 * same graph unfused and on WASM, with their own tolerance stated there.
 * @module
 */
import fc from "fast-check";
import * as gyre from "../src/mod.ts";
import type * as tuning from "../src/tuning.ts";
import {
  Bag,
  forcePlan,
  halfUlpOf,
  MIN_NORMAL,
  mulberry32,
  pick,
  property,
  randInt,
  rt,
  show,
} from "./_harness.ts";

/** The largest finite float16. */
const HALF_MAX = 65504;

type DType = "float32" | "float16" | "int32";
type Transpose = "none" | "option" | "view";

/** Lengths: 1, primes, around the tile sizes (4 to 128) and their multiples. */
const LENGTHS = [1, 2, 3, 4, 5, 7, 8, 13, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129] as const;

/** A forced tiled choice: tile M x N x K, outputs per invocation, and any other fields. */
function tiled(
  tileM: number,
  tileN: number,
  tileK: number,
  threadM: number,
  threadN: number,
  extra: Partial<tuning.MatmulChoice> = {},
): Partial<tuning.MatmulChoice> {
  return { variant: "tiled", tileM, tileN, tileK, threadM, threadN, ...extra };
}

/** Every plan variant and several tiles, forced on the GPU (null: the plan's own rule). */
const TILED: readonly (Partial<tuning.MatmulChoice> | null)[] = [
  null,
  tiled(128, 128, 8, 8, 8),
  tiled(64, 64, 16, 4, 4, { laneColumns: 4 }),
  tiled(32, 64, 8, 4, 4, { swizzle: 1 }),
  // float16 accumulation in pairs of k (two partial sums per output) or with A's values stored
  // twice, rather than one A value times four B values; with float32 math the form changes
  // nothing.
  tiled(64, 64, 8, 8, 4, { productForm: "pairedK" }),
  tiled(64, 128, 16, 8, 8, { productForm: "pairedK" }),
  tiled(64, 64, 8, 8, 4, { productForm: "repeatedA" }),
  tiled(128, 64, 16, 16, 8, { productForm: "repeatedA" }),
  // The rule's large float16-accumulation tiles (A repeated, one shared buffer).
  tiled(128, 128, 16, 8, 8, { productForm: "repeatedA", doubleBuffer: false }),
  tiled(128, 128, 8, 8, 16, { laneColumns: 2, productForm: "repeatedA", doubleBuffer: false }),
  // A copied into [K, M] order by the transposing kernel first (the rule does it for large
  // float16-accumulation products), from row-major, sliced and batched operands.
  tiled(64, 64, 8, 8, 4, { transposeAFirst: true }),
  tiled(128, 128, 16, 8, 8, {
    productForm: "repeatedA",
    doubleBuffer: false,
    transposeAFirst: true,
  }),
  {
    variant: "splitK",
    splitK: 2,
    tileM: 32,
    tileN: 32,
    tileK: 8,
    threadM: 4,
    threadN: 4,
    transposeAFirst: true,
  },
  tiled(64, 32, 4, 8, 4, { doubleBuffer: false }),
  tiled(64, 128, 8, 8, 16, { laneColumns: 16 }),
  tiled(32, 32, 8, 4, 4, { vectorLoads: false }),
  { variant: "splitK", splitK: 3, tileM: 32, tileN: 32, tileK: 4, threadM: 4, threadN: 4 },
  { variant: "splitK", splitK: 7, tileM: 64, tileN: 64, tileK: 8, threadM: 8, threadN: 8 },
  // Stream-K: persistent workgroups over (tile, K step) units, so tiles are cut anywhere in K,
  // across up to all of them (few units per workgroup) or none (one workgroup).
  { variant: "streamK", streamKGroups: 3, tileM: 32, tileN: 32, tileK: 4, threadM: 4, threadN: 4 },
  { variant: "streamK", streamKGroups: 7, tileM: 64, tileN: 64, tileK: 8, threadM: 8, threadN: 8 },
  { variant: "streamK", streamKGroups: 1, tileM: 32, tileN: 64, tileK: 8, threadM: 4, threadN: 8 },
  tiled(128, 128, 8, 8, 16, { laneColumns: 2, variant: "streamK", streamKGroups: 5 }),
  tiled(64, 64, 4, 4, 4, { variant: "streamK", streamKGroups: 40, doubleBuffer: false }),
  // Loads without bounds tests where every tile is whole (the rule: float32 only), forced on
  // for every dtype, and off.
  tiled(32, 32, 8, 4, 4, { interiorLoads: true }),
  tiled(64, 64, 16, 8, 8, { interiorLoads: true, productForm: "repeatedA" }),
  tiled(32, 64, 8, 4, 8, { interiorLoads: false }),
];

const GEMV: readonly (Partial<tuning.MatmulChoice> | null)[] = [
  null,
  { gemvWidth: 1, gemvWorkgroupSize: 64 },
  { gemvWidth: 4 },
  { gemvWidth: 8, subgroups: false },
  { gemvWidth: 32, gemvWorkgroupSize: 128 },
  { gemvWidth: 8, vectorLoads: false },
  { variant: "tiled", tileM: 32, tileN: 32, tileK: 8, threadM: 4, threadN: 4 },
  { variant: "splitK", splitK: 4, tileM: 32, tileN: 32, tileK: 4, threadM: 4, threadN: 4 },
];

interface Case {
  m: number;
  n: number;
  k: number;
  /** Batch shape of the output; each operand takes a suffix with some axes set to 1. */
  batch: number[];
  aOneD: boolean;
  bOneD: boolean;
  transposeA: Transpose;
  transposeB: Transpose;
  /** Read A through a step-2 slice (strides that allow no vec4 loads). */
  slicedA: boolean;
  dtype: DType;
  halfAccumulate: boolean;
  override: Partial<tuning.MatmulChoice> | null;
  /** Probability of NaN or an infinity in each input element. */
  special: number;
  seed: number;
}

function caseArb(
  overrides: readonly (Partial<tuning.MatmulChoice> | null)[],
  vector: boolean,
): fc.Arbitrary<Case> {
  return fc.record({
    m: fc.constantFrom(...LENGTHS),
    n: fc.constantFrom(...LENGTHS),
    k: fc.constantFrom(...LENGTHS),
    batch: fc.array(fc.integer({ min: 1, max: 3 }), { maxLength: 2 }),
    oneD: fc.constantFrom(0, 0, 0, 1, 2),
    transposeA: fc.constantFrom<Transpose>("none", "option", "view"),
    transposeB: fc.constantFrom<Transpose>("none", "option", "view"),
    slicedA: fc.boolean(),
    dtype: fc.constantFrom<DType>("float32", "float32", "float16", "int32"),
    halfAccumulate: fc.boolean(),
    override: fc.constantFrom(...overrides),
    special: fc.constantFrom(0, 0, 0.02),
    seed: fc.integer(),
  }).map((c) => {
    let m: number = c.m, n: number = c.n;
    if (vector) {
      // Matrix-vector products: M = 1 (vector on the left) or N = 1.
      if (c.seed & 1) m = 1;
      else n = 1;
    }
    // Keep each case small enough for a software adapter.
    let k: number = c.k;
    const batch = c.oneD ? 1 : c.batch.reduce((x, y) => x * y, 1);
    while (m * n * k * batch > 400_000 && k > 1) k = Math.ceil(k / 2);
    return {
      m,
      n,
      k,
      batch: c.oneD ? [] : c.batch,
      aOneD: c.oneD === 1 && m === 1,
      bOneD: c.oneD === 2 && n === 1,
      transposeA: c.transposeA,
      transposeB: c.transposeB,
      slicedA: c.slicedA,
      dtype: c.dtype,
      halfAccumulate: c.dtype === "float16" && c.halfAccumulate,
      override: c.override,
      special: c.dtype === "int32" || c.halfAccumulate ? 0 : c.special,
      seed: c.seed,
    };
  });
}

/** An operand batch shape: a suffix of `batch` with some axes set to 1. */
function operandBatch(rng: () => number, batch: readonly number[]): number[] {
  return batch.slice(randInt(rng, 0, batch.length)).map((d) => (rng() < 0.3 ? 1 : d));
}

/** Host values: small integers scaled by 1/8 (exact in float16), with optional NaN and infinities. */
function values(rng: () => number, n: number, dtype: DType, special: number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    if (special > 0 && rng() < special) out[i] = pick(rng, [NaN, Infinity, -Infinity]);
    else if (dtype === "int32") out[i] = randInt(rng, -1000, 1000) * (rng() < 0.01 ? 1e6 : 1);
    else {
      // float16 keeps to a range where neither the inputs nor the sums overflow.
      const spread = dtype === "float16" ? 4 : 20;
      out[i] = randInt(rng, -64, 64) / 8 * (rng() < 0.1 ? 2 ** randInt(rng, -spread, spread) : 1);
    }
  }
  return out;
}

/**
 * Builds an operand of logical shape [...batch, rows, cols] (or [cols]/[rows] for 1-D) on
 * `device`, stored as `transpose` asks, and returns it with its logical row-major host data.
 */
function operand(
  bag: Bag,
  device: gyre.DeviceName,
  dtype: DType,
  shape: number[],
  data: Float32Array,
  transpose: Transpose,
  sliced: boolean,
): { tensor: gyre.Tensor; transposeOption: boolean } {
  const rank = shape.length;
  if (rank < 2) {
    return { tensor: bag.add(gyre.tensor(data, { shape, dtype, device })), transposeOption: false };
  }
  const rows = shape[rank - 2], cols = shape[rank - 1];
  const batch = shape.slice(0, rank - 2);
  const count = batch.reduce((x, y) => x * y, 1);
  // Stored transposed: [..., cols, rows].
  const stored = transpose === "none" ? data : new Float32Array(data.length);
  if (transpose !== "none") {
    for (let b = 0; b < count; b++) {
      for (let i = 0; i < rows; i++) {
        for (let j = 0; j < cols; j++) {
          stored[b * rows * cols + j * rows + i] = data[b * rows * cols + i * cols + j];
        }
      }
    }
  }
  const storedShape = transpose === "none" ? shape : [...batch, cols, rows];
  let t: gyre.Tensor;
  if (sliced) {
    // Every other element of a twice-as-long last axis.
    const last = storedShape[rank - 1];
    const wide = new Float32Array(stored.length * 2);
    for (let i = 0; i < stored.length; i++) wide[2 * i] = stored[i];
    const base = bag.add(
      gyre.tensor(wide, { shape: [...storedShape.slice(0, -1), 2 * last], dtype, device }),
    );
    t = bag.add(base.slice(...storedShape.slice(0, -1).map(() => null), [0, 2 * last, 2]));
  } else {
    t = bag.add(gyre.tensor(stored, { shape: storedShape, dtype, device }));
  }
  if (transpose === "view") {
    const perm = [...Array(rank).keys()];
    [perm[rank - 2], perm[rank - 1]] = [perm[rank - 1], perm[rank - 2]];
    return { tensor: bag.add(t.transpose(perm)), transposeOption: false };
  }
  return { tensor: t, transposeOption: transpose === "option" };
}

/** Rounds to the dtype's values (float16 operands hold half-precision values). */
function toDType(x: Float32Array, dtype: DType): Float32Array {
  if (dtype !== "float16") return x;
  return x.map((v) => {
    if (!Number.isFinite(v) || v === 0) return v;
    const e = Math.max(Math.floor(Math.log2(Math.abs(v))), -14);
    const q = 2 ** (e - 10);
    const r = Math.round(v / q) * q;
    return Math.abs(r) > 65504 ? Math.sign(r) * Infinity : r;
  });
}

async function checkCase(
  c: Case,
  linearOptions?: { activation: gyre.LinearActivation | "none"; bias: boolean },
) {
  const bag = new Bag();
  try {
    const rng = mulberry32(c.seed);
    const aBatch = operandBatch(rng, c.batch);
    // linear's weight is one [n, k] matrix.
    const bBatch = linearOptions ? [] : operandBatch(rng, c.batch);
    const aShape = c.aOneD ? [c.k] : [...aBatch, c.m, c.k];
    if (c.aOneD) aBatch.length = 0;
    const bShape = c.bOneD ? [c.k] : [...bBatch, c.k, c.n];
    if (c.bOneD) bBatch.length = 0;
    const size = (s: number[]) => s.reduce((x, y) => x * y, 1);
    const aData = toDType(values(rng, size(aShape), c.dtype, c.special), c.dtype);
    const bData = toDType(values(rng, size(bShape), c.dtype, c.special), c.dtype);
    const biasData = toDType(values(rng, c.n, c.dtype, 0), c.dtype);
    const options = { accumulate: c.halfAccumulate ? "float16" as const : undefined };
    const run = (device: gyre.DeviceName) => {
      const a = operand(bag, device, c.dtype, aShape, aData, c.transposeA, c.slicedA);
      if (linearOptions) {
        // linear(x, weight): weight is [n, k], i.e. B transposed.
        const weight = new Float32Array(c.n * c.k);
        for (let i = 0; i < c.k; i++) {
          for (let j = 0; j < c.n; j++) weight[j * c.k + i] = bData[i * c.n + j];
        }
        const w = bag.add(gyre.tensor(weight, { shape: [c.n, c.k], dtype: c.dtype, device }));
        const bias = linearOptions.bias
          ? bag.add(gyre.tensor(biasData, { shape: [c.n], dtype: c.dtype, device }))
          : undefined;
        return bag.add(
          gyre.linear(a.tensor, w, { ...options, bias, activation: linearOptions.activation }),
        );
      }
      const b = operand(bag, device, c.dtype, bShape, bData, c.transposeB, false);
      return bag.add(gyre.matmul(a.tensor, b.tensor, {
        ...options,
        transposeA: a.transposeOption,
        transposeB: b.transposeOption,
      }));
    };
    forcePlan("matmul", c.override);
    let gpu: gyre.Tensor;
    try {
      // Computed inside the override: a product is lazy, and its kernel is planned when it runs.
      gpu = run("gpu").realize();
    } finally {
      forcePlan("matmul", null);
    }
    const wasm = run("wasm");
    const [got, want] = await gyre.readAll([gpu, wasm]);
    if (gpu.dtype !== wasm.dtype || gpu.shape.join() !== wasm.shape.join()) {
      throw new Error(`dtype/shape ${gpu.dtype} [${gpu.shape}] vs ${wasm.dtype} [${wasm.shape}]`);
    }
    // (|A| |B|)_ij in f64 over the broadcast batch, for the tolerance. The output's batch is
    // the operands' broadcast (both may have 1 where c.batch does not).
    const rank = Math.max(aBatch.length, bBatch.length);
    const batch = [...Array(rank).keys()].map((i) =>
      Math.max(aBatch[aBatch.length - rank + i] ?? 1, bBatch[bBatch.length - rank + i] ?? 1)
    );
    const count = size(batch);
    const scale = new Float64Array(count * c.m * c.n);
    // linear: the pre-activation value z = x . w + bias in f64.
    const preActivation = new Float64Array(count * c.m * c.n);
    const offsetIn = (shape: number[], b: number) => {
      // Row-major offset of batch index b (of `batch`) into an operand whose batch axes are the
      // trailing `shape.length - 2` axes of `batch`, broadcast where 1.
      const own = shape.length - 2;
      if (own <= 0) return 0;
      let off = 0, rest = b, stride = shape[own] * shape[own + 1];
      for (let d = batch.length - 1, j = own - 1; d >= 0; d--, j--) {
        const i = rest % batch[d];
        rest = Math.floor(rest / batch[d]);
        if (j >= 0) {
          if (shape[j] !== 1) off += i * stride;
          stride *= shape[j];
        }
      }
      return off;
    };
    for (let b = 0; b < count; b++) {
      const ao = offsetIn(aShape, b), bo = offsetIn(bShape, b);
      for (let i = 0; i < c.m; i++) {
        for (let j = 0; j < c.n; j++) {
          let s = 0, dot = 0;
          for (let p = 0; p < c.k; p++) {
            const x = aData[ao + i * c.k + p] * bData[bo + p * c.n + j];
            s += Math.abs(x);
            dot += x;
          }
          scale[(b * c.m + i) * c.n + j] = s;
          preActivation[(b * c.m + i) * c.n + j] = dot + (linearOptions?.bias ? biasData[j] : 0);
        }
      }
    }
    const u = c.halfAccumulate ? 2 ** -11 : 2 ** -24;
    const gamma = c.halfAccumulate ? (c.k + 2) * u : (2 * c.k * u) / (1 - c.k * u);
    // linear: the product's error passes through the bias add (one rounding of z) and the
    // activation, whose slope is at most 1.13 (gelu; silu 1.1, tanh 1, sigmoid 1/4). On top, each
    // device's own evaluation of the activation at z, as bounded in property_elementwise_test.ts
    // (f32 formula on the GPU, f64 in the reference but sigmoid's and tanh's, f32x4): silu
    // 7 + 2|z| ULP, sigmoid 2.5 more, tanh (3 + 2|z|) 2^-21 absolute, gelu 2^-18 |z| / 2 absolute
    // (erf's bound), relu exact.
    const slope = !linearOptions || linearOptions.activation === "none"
      ? 1
      : { relu: 1, gelu: 1.13, silu: 1.1, tanh: 1, sigmoid: 0.25 }[linearOptions.activation];
    const activationError = (z: number, result: number) => {
      const ulp = Math.max(Math.abs(result), MIN_NORMAL) * 2 ** -23;
      switch (linearOptions?.activation) {
        case "sigmoid":
          return (9.5 + 2 * Math.abs(z)) * ulp;
        case "silu":
          return (7 + 2 * Math.abs(z)) * ulp;
        case "tanh":
          // WASM's tanh is within 8.8 ULP (property_elementwise_test.ts, wasmTanhUlps).
          return (3 + 2 * Math.min(15, Math.abs(z))) * 2 ** -21 + 11 * ulp;
        case "gelu":
          return (Math.abs(z) * 2 ** -18) / 2 + 8 * ulp;
        default:
          return 0;
      }
    };
    const ftz = (x: number) => (Math.abs(x) < MIN_NORMAL ? 0 : x);
    let bad = 0;
    const lines: string[] = [];
    for (let i = 0; i < got.length; i++) {
      const g = ftz(got[i]), w = ftz(want[i]);
      let ok: boolean;
      if (c.dtype === "int32") ok = g === w;
      else if (Number.isNaN(g) || Number.isNaN(w)) ok = Number.isNaN(g) && Number.isNaN(w);
      else if (!Number.isFinite(g) || !Number.isFinite(w)) ok = g === w;
      else {
        const half = c.dtype === "float16" ? halfUlpOf(w) : 0;
        const z = preActivation[i];
        const zRounding = linearOptions ? 2 * Math.max(Math.abs(z), MIN_NORMAL) * 2 ** -24 : 0;
        ok = Math.abs(g - w) <=
          slope * (gamma * scale[i] + zRounding) + activationError(z, w) + half + 1e-30;
      }
      if (!ok && ++bad <= 4) {
        lines.push(`  [${i}] gpu ${show(got[i])} wasm ${show(want[i])} |A||B| ${scale[i]}`);
      }
    }
    if (bad) {
      throw new Error(
        `${bad} of ${got.length} differ: a [${aShape}] ${c.transposeA}${
          c.slicedA ? " sliced" : ""
        }, b [${bShape}] ${c.transposeB}, ` +
          `${c.dtype}${c.halfAccumulate ? " acc16" : ""}, override ${JSON.stringify(c.override)}\n${
            lines.join("\n")
          }`,
      );
    }
  } finally {
    bag.dispose();
  }
}

property(
  "matmul/matmul",
  "tiled, split-K and stream-K products match the WASM GEMM within 2 gamma_K |A||B|",
  caseArb(TILED, false),
  (c) => checkCase(c),
  { numRuns: 60, variants: ["matmul/tiled", "matmul/splitK", "matmul/streamK"] },
);

property(
  "matmul/matmul",
  "matrix-vector products (M = 1 or N = 1) in every gemv form and width",
  caseArb(GEMV, true),
  (c) => checkCase(c),
  { numRuns: 60, variants: ["matmul/gemv"] },
);

property(
  "matmul/linear",
  "linear's fused bias and activation match the WASM GEMM plus elementwise epilogue",
  fc.tuple(
    caseArb([...TILED, ...GEMV.slice(1, 3)], false),
    fc.constantFrom<gyre.LinearActivation | "none">(
      "none",
      "relu",
      "gelu",
      "silu",
      "tanh",
      "sigmoid",
    ),
    fc.boolean(),
  ).map(([c, activation, bias]) => ({
    c: {
      ...c,
      dtype: c.dtype === "int32" ? "float32" as const : c.dtype,
      bOneD: false,
      transposeA: c.transposeA === "option" ? "view" as const : c.transposeA,
      transposeB: "none" as const,
      special: 0,
      batch: c.aOneD ? [] : c.batch,
      // Some cases as matrix-vector products (x one row).
      m: c.seed % 3 === 0 ? 1 : c.m,
    },
    activation,
    bias,
  })),
  ({ c, activation, bias }) => checkCase(c, { activation, bias }),
  { numRuns: 30 },
);

property(
  "matmul/matmul",
  "one product of about 1e8 multiply-adds (float32, the plan's own choice) matches WASM",
  fc.record({ seed: fc.integer(), shape: fc.constantFrom([509, 384, 512], [512, 509, 383]) }),
  ({ seed, shape: [m, n, k] }) =>
    checkCase({
      m,
      n,
      k,
      batch: [],
      aOneD: false,
      bOneD: false,
      transposeA: "none",
      transposeB: "option",
      slicedA: false,
      dtype: "float32",
      halfAccumulate: false,
      override: null,
      special: 0,
      seed,
    }),
  { numRuns: 1 },
);

/** Elementwise work in front of an operand; "many" reads too many inputs to be fused. */
type PrologueKind =
  | "none"
  | "scale"
  | "relu"
  | "broadcast"
  | "residual"
  | "select"
  | "cast"
  | "many";

const PROLOGUES: readonly PrologueKind[] = [
  "none",
  "scale",
  "relu",
  "broadcast",
  "residual",
  "select",
  "cast",
  "many",
];

/**
 * `t` with `kind`'s elementwise work in front, left pending so that a product can fuse it. Extra
 * inputs (of t's shape, or a row [last axis] and a column [rows, 1] broadcast against it) come
 * from `rng`, so two devices given the same seed build the same graph.
 */
function withPrologue(
  bag: Bag,
  device: gyre.DeviceName,
  kind: PrologueKind,
  t: gyre.Tensor,
  seed: number,
): gyre.Tensor {
  const rng = mulberry32(seed);
  const dtype = t.dtype as DType;
  const shape = t.shape;
  // float16 extras are scaled by 2^-6 (exactly) so that the operands stay within the range where
  // float16 accumulation does not overflow, as `values` keeps plain operands.
  const extra = (s: number[]) => {
    const data = values(rng, s.reduce((x, y) => x * y, 1), dtype, 0);
    if (dtype === "float16") data.forEach((v, i) => (data[i] = v / 64));
    return bag.add(gyre.tensor(toDType(data, dtype), { shape: s, dtype, device }));
  };
  const rank = shape.length;
  switch (kind) {
    case "none":
      return t;
    case "scale":
      return bag.add(t.mul(3));
    case "relu":
      // relu is a float op; int32 takes the same through maximum.
      return bag.add(dtype === "int32" ? t.sub(1).maximum(0) : t.sub(1).relu());
    case "broadcast": {
      const row = bag.add(t.mul(extra([shape[rank - 1]])));
      return rank < 2 ? row : bag.add(row.add(extra([shape[rank - 2], 1])));
    }
    case "residual":
      return bag.add(t.add(extra(shape)));
    case "select":
      return bag.add(gyre.where(bag.add(t.greater(0)), t, bag.add(t.mul(-2))));
    case "cast":
      // An int32 operand (saturating casts, wrapping products) promoted back by the product.
      return bag.add(bag.add(t.cast("int32")).mul(2));
    case "many": {
      const sum = bag.add(bag.add(t.add(extra(shape))).add(extra(shape)));
      return bag.add(sum.add(extra(shape)));
    }
  }
}

/** The ops `explain` lists for a pending tensor (null once computed). */
function pendingLabel(t: gyre.Tensor): string | null {
  const { kernels } = gyre.explain(t, { print: false });
  return kernels.length ? kernels[0].kernel.replace(/ \(pending.*$/, "") : null;
}

property(
  "matmul/matmul",
  "elementwise prologues fused into the product match the same graph unfused and on WASM",
  fc.record({
    c: caseArb(TILED, false),
    a: fc.constantFrom(...PROLOGUES),
    b: fc.constantFrom(...PROLOGUES),
  }).map(({ c, a, b }) => ({
    // Finite values: the prologues' selects and maxima would move a NaN's payload around.
    c: { ...c, special: 0 },
    a: c.dtype === "float32" || a !== "cast" ? a : "scale" as const,
    b: c.dtype === "float32" || b !== "cast" ? b : "scale" as const,
  })),
  async ({ c, a: aKind, b: bKind }) => {
    const bag = new Bag();
    try {
      const rng = mulberry32(c.seed);
      const aShape = c.aOneD ? [c.k] : [...operandBatch(rng, c.batch), c.m, c.k];
      const bShape = c.bOneD ? [c.k] : [...operandBatch(rng, c.batch), c.k, c.n];
      const size = (s: number[]) => s.reduce((x, y) => x * y, 1);
      const aData = toDType(values(rng, size(aShape), c.dtype, 0), c.dtype);
      const bData = toDType(values(rng, size(bShape), c.dtype, 0), c.dtype);
      const accumulate = c.halfAccumulate ? "float16" as const : undefined;
      // The operands as the product sees them, and its options.
      const build = (device: gyre.DeviceName) => {
        const a = operand(bag, device, c.dtype, aShape, aData, c.transposeA, c.slicedA);
        const b = operand(bag, device, c.dtype, bShape, bData, c.transposeB, false);
        return {
          a: withPrologue(bag, device, aKind, a.tensor, c.seed ^ 0x5a5a),
          b: withPrologue(bag, device, bKind, b.tensor, c.seed ^ 0xa5a5),
          options: { accumulate, transposeA: a.transposeOption, transposeB: b.transposeOption },
        };
      };
      // Fused: the plan override holds while the (lazy) product runs, inside explain.
      const fusedOperands = build("gpu");
      // What each operand would run as its own kernel (read before the product computes it).
      const ownLabels = [pendingLabel(fusedOperands.a), pendingLabel(fusedOperands.b)];
      forcePlan("matmul", c.override);
      let fused: gyre.Tensor, kernels: string[];
      try {
        const explained = gyre.explain(
          () => gyre.matmul(fusedOperands.a, fusedOperands.b, fusedOperands.options),
          { print: false },
        );
        fused = bag.add(explained.outputs[0]);
        kernels = explained.kernels.map((k) => k.kernel);
      } finally {
        forcePlan("matmul", null);
      }
      const dtype = fused.dtype;
      // Fused wherever the kernel is tiled (M, N > 1) and the operand reads few enough inputs:
      // then the product is one kernel (two with split-K) named after what it fused.
      if (c.m > 1 && c.n > 1) {
        const parts: string[] = [];
        const expected: string[] = [];
        const kinds = [aKind, bKind];
        const tensors = [fusedOperands.a, fusedOperands.b];
        for (const [j, kind] of kinds.entries()) {
          const own = ownLabels[j];
          const t = tensors[j];
          const label = t.dtype === dtype ? own : own ? `${own}+cast` : "cast";
          if (kind === "many") expected.push(own!);
          else if (label) parts.push(label);
        }
        const product = [...parts, "matmul"].join("+");
        // A copied into [K, M] order first (only where the override asks) runs just before the
        // product, under a label of its own.
        const copies = kernels.filter((k) => k.startsWith("transpose A"));
        if (
          copies.length > (c.override?.transposeAFirst ? 1 : 0) ||
          copies.some((k) => k !== `transpose A (${product})`)
        ) {
          throw new Error(`kernels ${JSON.stringify(kernels)}: an unexpected copy of A`);
        }
        kernels = kernels.filter((k) => !copies.includes(k));
        const got = kernels.slice(expected.length);
        // The product: one dispatch, two with split-K's sums, up to three with stream-K (whole
        // waves, the shared tiles, their sums).
        if (
          kernels.slice(0, expected.length).join() !== expected.join() || got.length < 1 ||
          got.length > 3 || got.some((k) => k !== product)
        ) {
          throw new Error(
            `kernels ${JSON.stringify(kernels)}, expected ${expected} then ${product}`,
          );
        }
      }
      // The same graph with fusion off, under the same plan: each operand computed first.
      gyre.runtime().fusion = false;
      forcePlan("matmul", c.override);
      let unfused: gyre.Tensor;
      try {
        const o = build("gpu");
        unfused = bag.add(gyre.matmul(o.a, o.b, o.options).realize());
      } finally {
        forcePlan("matmul", null);
        gyre.runtime().fusion = true;
      }
      const w = build("wasm");
      const wasm = bag.add(gyre.matmul(w.a, w.b, w.options));
      // (|A'| |B'|)_ij of the operands after their prologues, summed in float32 on WASM: within
      // gamma_K of the exact sum, a margin the factor below covers.
      const scale = dtype === "int32" ? null : bag.add(
        gyre.matmul(
          bag.add(bag.add(w.a.abs()).cast("float32")),
          bag.add(bag.add(w.b.abs()).cast("float32")),
          { transposeA: w.options.transposeA, transposeB: w.options.transposeB },
        ),
      );
      const [got, off, want, s] = await gyre.readAll(
        scale ? [fused, unfused, wasm, scale] : [fused, unfused, wasm],
      );
      // Tolerance. A prologue does the same operations in the same compute type as the kernel
      // that would compute the operand, so an operand element differs at most where a compiler
      // contracts a multiply-add in one kernel and not the other: one ulp of that element in its
      // dtype (u = 2^-23 float32, 2^-10 float16), an error of at most (2u + u^2) |A'||B'| in each
      // output. Each side's sum then has its own rounding error (2 gamma_K |A'||B'| together, as
      // above; float16 accumulation (K + 2) 2^-11), and float16 results one rounding each: the
      // same bound against the unfused GPU product and WASM. int32 is exact.
      const u = dtype === "float16" ? 2 ** -10 : 2 ** -23;
      const operandError = 2 * u + u * u;
      const k = c.k;
      const gamma = c.halfAccumulate ? (k + 2) * 2 ** -11 : (2 * k * 2 ** -24) / (1 - k * 2 ** -24);
      const ftz = (x: number) => (Math.abs(x) < MIN_NORMAL ? 0 : x);
      const compare = (other: ArrayLike<number>, what: string) => {
        const bad: string[] = [];
        for (let i = 0; i < got.length; i++) {
          const g = ftz(got[i]), r = ftz(other[i]);
          let ok: boolean;
          if (!s) ok = g === r;
          else {
            const bound = (operandError + gamma) * s[i] * (1 + 2 ** -10) +
              (dtype === "float16" ? halfUlpOf(r) : 0);
            if (c.halfAccumulate && s[i] * (1 + gamma) >= HALF_MAX) {
              // A float16 running sum can reach |A'||B'|: past 65504 it may overflow on the
              // way, to either infinity (or NaN), whatever the exact result.
              ok = true;
            } else if (!Number.isFinite(g) || !Number.isFinite(r)) {
              // A float16 result within its bound of 65504 may round to infinity.
              const overflow = dtype === "float16" && Number.isFinite(r) &&
                Math.sign(g) === Math.sign(r) && Math.abs(r) + bound >= HALF_MAX;
              ok = Object.is(g, r) || g === r || overflow;
            } else ok = Math.abs(g - r) <= bound;
          }
          if (!ok && bad.length < 4) {
            bad.push(`  [${i}] fused ${show(got[i])} ${what} ${show(other[i])}`);
          }
        }
        if (bad.length) {
          throw new Error(
            `fused vs ${what}: a [${aShape}] ${c.transposeA}${
              c.slicedA ? " sliced" : ""
            } ${aKind}, ` +
              `b [${bShape}] ${c.transposeB} ${bKind}, ${c.dtype}${
                c.halfAccumulate ? " acc16" : ""
              }, ` +
              `override ${JSON.stringify(c.override)}\n${bad.join("\n")}`,
          );
        }
      };
      if (fused.shape.join() !== wasm.shape.join() || dtype !== wasm.dtype) {
        throw new Error(`dtype/shape ${dtype} [${fused.shape}] vs ${wasm.dtype} [${wasm.shape}]`);
      }
      compare(off, "unfused");
      compare(want, "wasm");
    } finally {
      bag.dispose();
    }
  },
  { numRuns: 60 },
);

void rt;
