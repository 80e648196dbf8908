/**
 * Property tests of the row kernels (src/gpu/_codegen_rows.ts) behind softmax, logSoftmax,
 * layerNorm, rmsNorm, groupNorm and batchNorm against their WASM references (asm/rows.ts, which
 * accumulate in f64 and round once; softmax's vector exp adds an error of its own, below), over
 * random shapes (0, 1, primes, around workgroup multiples, one case over 1 Mi elements), axes
 * (the last, others, sets of axes), layouts (contiguous, transposed, sliced with negative steps:
 * the strided and across-rows paths), float32 and float16, affine parameters present or not, and
 * every plan variant forced through `setPlanOverride("rows", ...)`: one pass with vec4 or scalar
 * registers, chunked (partials, merge, apply) with small chunks, threads per row from 1 (across
 * rows) to 64, and the shuffle, subgroup and shared-memory combines.
 *
 * Tolerances, with u = 2^-24 (half an f32 ULP at 1) and per element, from the row's own data:
 * - Sums: a sum of n terms whose every term passes through at most h additions is within
 *   h u sum|terms| (first order). In these kernels h <= 32 (register accumulation) + 2
 *   (horizontal) + 7 (subgroup tree) + 128 (one slot per subgroup, 1024 lanes over subgroups of 8)
 *   + 16 (merging chunk partials) < H = 256, so every sum is taken within H u sum|terms|.
 * - softmax y = exp(d) / S, d = x - max: WGSL's exp is within (3 + 2|d|) ULP (relative up to
 *   2u each), d itself within u|d|; S is within H u plus the exp errors of its terms weighted by
 *   the terms; 1/S and the product add 3.5 ULP: relative tolerance e(d) + e(S) + 8u. The WASM
 *   reference is not exact either: its exp is within 0.8 ULP (asm/vector_math.ts), so its softmax
 *   is within W = 4.25u relative (the bound at asm/rows.ts's softmax_rows_f32, checked against
 *   a float64 oracle by tests/wasm_rows_oracle_test.ts), added to the tolerance.
 * - logSoftmax y = d - log S: absolute u|d| + log's 2^-21 (for S in [0.5, 2]; else 3 ULP of log S,
 *   taken as 6u|log S|) + e(S) + 2u|y|, plus the WASM reference's 1.6u + u|y| (its S within
 *   1.6u, then one rounding).
 * - layerNorm z = (x - mean) rstd: the mean is within dm = H u mean|x| + u|mean|; the variance (two-
 *   pass, mean from the first pass) within H u + 5u relative plus the second-order dm^2 / var;
 *   rstd adds inverseSqrt's 2 ULP and halves the variance's: |dz| <= rstd (dm + u|x - mean|) +
 *   |z| (rho + u) with rho = (H u + 5u + dm^2 / (var + eps)) / 2 + 4u; y = z w + b adds
 *   |w| |dz| + 2u (|y| + |b|).
 * - rmsNorm: as layerNorm with mean 0: |dy| <= |w x| rstd (rho + 2u) + u|y|.
 * Results below 2^-126 compare as zero (a GPU may flush subnormals); float16 results may differ by
 * one more half-precision rounding of the f32 result (the harness's `half` rule).
 * @module
 */
import fc from "fast-check";
import * as gyre from "../src/mod.ts";
import type * as tuning from "../src/tuning.ts";
import {
  Bag,
  expectClose,
  forcePlan,
  type LayoutKind,
  makeLayout,
  MIN_NORMAL,
  mulberry32,
  pick,
  property,
  randInt,
  sizeOf,
  type Tol,
  within,
} from "./_harness.ts";

const U = 2 ** -24;
/** Additions any term of a kernel's sums passes through, at most (see the module doc). */
const H = 256;
type Tensor = gyre.Tensor;

/** Plan variants every property draws from. */
const VARIANTS: { name: string; override: Partial<tuning.RowsChoice> | null }[] = [
  { name: "rule", override: null },
  { name: "rule", override: null },
  { name: "scalar", override: { vec4: false } },
  { name: "across rows (one lane per row)", override: { threadsPerRow: 1 } },
  { name: "shuffle (4 lanes)", override: { threadsPerRow: 4, workgroupSize: 64 } },
  { name: "subgroup (64 lanes)", override: { threadsPerRow: 64 } },
  { name: "shared memory", override: { subgroups: false } },
  {
    name: "chunked, subgroups",
    override: { variant: "chunked", threadsPerRow: 32, registers: 2, combineThreads: 4 },
  },
  {
    // The combine keeps the rule's thread count: one thread would merge every chunk in a serial
    // chain (3840 of them for 15360 elements), past the H additions the tolerance allows.
    name: "chunked, across rows",
    override: { variant: "chunked", threadsPerRow: 1, registers: 4 },
  },
  {
    name: "chunked, shared memory",
    override: {
      variant: "chunked",
      subgroups: false,
      threadsPerRow: 16,
      registers: 1,
      combineThreads: 16,
    },
  },
];

const LENGTHS = [0, 1, 2, 3, 4, 5, 7, 8, 13, 31, 64, 127, 128, 255, 256, 257, 1000, 1024, 1031];

/** A shape of rank 0..4 with one axis of a special length and the others 1..5. */
const shapeArb = fc
  .record({
    rank: fc.integer({ min: 0, max: 4 }),
    long: fc.constantFrom(...LENGTHS),
    short: fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 4, maxLength: 4 }),
    at: fc.nat(),
  })
  .map(({ rank, long, short, at }) => {
    if (rank === 0) return [];
    const shape = short.slice(0, rank);
    shape[at % rank] = long;
    return shape;
  });

/** For each logical element of `shape`: its row (over the kept axes) and its place in the row. */
function rowsOf(shape: readonly number[], axes: readonly number[]) {
  const n = sizeOf(shape);
  const kept = shape.map((_, i) => i).filter((i) => !axes.includes(i));
  const len = sizeOf(axes.map((a) => shape[a]));
  const rows = sizeOf(kept.map((a) => shape[a]));
  const row = new Int32Array(n);
  const place = new Int32Array(n);
  const coord = shape.map(() => 0);
  for (let i = 0; i < n; i++) {
    let r = 0, j = 0;
    for (const a of kept) r = r * shape[a] + coord[a];
    for (const a of axes) j = j * shape[a] + coord[a];
    row[i] = r;
    place[i] = j;
    for (let d = shape.length - 1; d >= 0; d--) {
      if (++coord[d] < shape[d]) break;
      coord[d] = 0;
    }
  }
  return { row, place, rows, len };
}

/** Per-row f64 statistics of the logical input. */
function rowStats(xs: ArrayLike<number>, row: Int32Array, rows: number) {
  const count = new Float64Array(rows);
  const sum = new Float64Array(rows);
  const sumAbs = new Float64Array(rows);
  const max = new Float64Array(rows).fill(-Infinity);
  for (let i = 0; i < xs.length; i++) {
    const r = row[i];
    count[r]++;
    sum[r] += xs[i];
    sumAbs[r] += Math.abs(xs[i]);
    max[r] = Math.max(max[r], xs[i]);
  }
  const mean = sum.map((s, r) => s / count[r]);
  const m2 = new Float64Array(rows);
  const sq = new Float64Array(rows);
  for (let i = 0; i < xs.length; i++) {
    const d = xs[i] - mean[row[i]];
    m2[row[i]] += d * d;
    sq[row[i]] += xs[i] * xs[i];
  }
  return {
    count,
    max,
    mean,
    meanAbs: sumAbs.map((s, r) => s / count[r]),
    variance: m2.map((m, r) => m / count[r]),
    meanSquare: sq.map((s, r) => s / count[r]),
  };
}

/** The WASM reference's own error: softmax relative, logSoftmax's log(sum) absolute. */
const WASM_SOFTMAX = 4.25 * U;
const WASM_LOG_SUM = 1.6 * U;

/** WGSL exp's relative error bound at d, plus the rounding of d itself. */
const expError = (d: number) => (3 + 2 * Math.abs(d)) * 2 * U + U * Math.abs(d);

/** Per-element tolerances of softmax (log = false) or logSoftmax over rows of `xs`. */
function softmaxTolerance(xs: ArrayLike<number>, row: Int32Array, rows: number, log: boolean) {
  const { max } = rowStats(xs, row, rows);
  const total = new Float64Array(rows);
  const weighted = new Float64Array(rows);
  for (let i = 0; i < xs.length; i++) {
    const d = xs[i] - max[row[i]];
    const t = Math.exp(d);
    if (t === 0 || !Number.isFinite(d)) continue;
    total[row[i]] += t;
    weighted[row[i]] += t * expError(d);
  }
  const sumError = (r: number) => H * U + weighted[r] / total[r];
  return (i: number, want: number): Tol => {
    const r = row[i];
    const d = xs[i] - max[r];
    if (!log) return { rtol: expError(d) + sumError(r) + 8 * U + WASM_SOFTMAX, atol: MIN_NORMAL };
    const logS = Math.log(total[r]);
    return {
      atol: U * Math.abs(d) + 2 ** -21 + 6 * U * Math.abs(logS) + sumError(r) +
        2 * U * Math.abs(want) + WASM_LOG_SUM + U * Math.abs(want),
    };
  };
}

/**
 * Per-element tolerance of layerNorm (centred) or rmsNorm given each element's row and affine
 * parameters (`w`, `b` of element i).
 */
function normTolerance(
  xs: ArrayLike<number>,
  row: Int32Array,
  rows: number,
  eps: number,
  centred: boolean,
  w: (i: number) => number,
  b: (i: number) => number,
) {
  const s = rowStats(xs, row, rows);
  return (i: number, want: number): Tol => {
    const r = row[i];
    const x = xs[i];
    if (centred) {
      const variance = s.variance[r] + eps;
      const rstd = 1 / Math.sqrt(variance);
      const dm = H * U * s.meanAbs[r] + U * Math.abs(s.mean[r]);
      const rho = (H * U + 5 * U + (dm * dm) / variance) / 2 + 4 * U;
      const z = (x - s.mean[r]) * rstd;
      const dz = rstd * (dm + U * Math.abs(x - s.mean[r])) + Math.abs(z) * (rho + U);
      return {
        atol: Math.abs(w(i)) * dz + 2 * U * (Math.abs(want) + Math.abs(b(i))) + MIN_NORMAL,
      };
    }
    const rstd = 1 / Math.sqrt(s.meanSquare[r] + eps);
    const rho = (H * U + 3 * U) / 2 + 4 * U;
    return {
      atol: Math.abs(w(i) * x) * rstd * (rho + 2 * U) + U * Math.abs(want) + MIN_NORMAL,
    };
  };
}

/** Values of the two devices' results, compared under `tol`. */
async function compare(
  label: string,
  gpu: Tensor,
  wasm: Tensor,
  tol: (i: number, want: number) => Tol,
  context: (i: number) => string = () => "",
): Promise<void> {
  if (gpu.dtype !== wasm.dtype) throw new Error(`${label}: dtype ${gpu.dtype} vs ${wasm.dtype}`);
  if (gpu.shape.join() !== wasm.shape.join()) {
    throw new Error(`${label}: shape [${gpu.shape}] vs [${wasm.shape}]`);
  }
  const [got, want] = await Promise.all([gpu.data(), wasm.data()]);
  const half = gpu.dtype === "float16";
  expectClose(
    label,
    got,
    want,
    (i) => within(got[i], want[i], tol(i, want[i]), { half, ftz: true }),
    context,
  );
}

/** An input drawn on both devices from one seed, with `edit` applied to the logical values. */
interface Input {
  gpu: Tensor;
  wasm: Tensor;
  /** The logical values (as the op sees them, float16 already rounded). */
  xs: Float32Array;
  describe: string;
}

/**
 * Builds x of `shape` in layout `kind` on both devices. `values(i)` gives logical element i
 * (the base array is filled through the layout's index map, so logical rows can be targeted).
 */
async function makeInput(
  bag: Bag,
  rng: () => number,
  kind: LayoutKind,
  shape: readonly number[],
  dtype: gyre.DType,
  values: (i: number) => number,
): Promise<Input> {
  const layout = makeLayout(rng, kind, shape);
  const baseSize = sizeOf(layout.baseShape);
  // Which base element each logical element reads: a view of an iota.
  const iota = bag.add(
    gyre.tensor(Float32Array.from({ length: baseSize }, (_, i) => i), {
      shape: layout.baseShape,
      device: "wasm",
    }),
  );
  const map = await bag.add(layout.view(iota)).data();
  const base = new Float32Array(baseSize);
  for (let i = 0; i < map.length; i++) base[map[i]] = values(i);
  const make = (device: gyre.DeviceName) => {
    const t = bag.add(gyre.tensor(base, { shape: layout.baseShape, dtype, device }));
    return bag.add(layout.view(t));
  };
  const wasm = make("wasm");
  return {
    gpu: make("gpu"),
    wasm,
    xs: (await wasm.data()) as Float32Array,
    describe: `${dtype} [${shape}] ${layout.describe}`,
  };
}

/** Runs `body` under each of the plan overrides `variants`, always restoring the rule. */
async function withVariants(
  variants: readonly number[],
  body: (name: string) => Promise<void>,
): Promise<void> {
  for (const v of variants) {
    forcePlan("rows", VARIANTS[v].override);
    try {
      await body(VARIANTS[v].name);
    } finally {
      forcePlan("rows", null);
    }
  }
}

const layoutArb = fc.constantFrom<LayoutKind>("contiguous", "contiguous", "transposed", "sliced");
const dtypeArb = fc.constantFrom<gyre.DType>("float32", "float32", "float16");
/** Each case runs under two or three plan variants (the WASM reference once per variant). */
const variantsArb = fc.uniqueArray(fc.nat({ max: VARIANTS.length - 1 }), {
  minLength: 2,
  maxLength: 3,
});

// ---------------------------------------------------------------------------------------------

/** Row patterns with special values for softmax (PyTorch: NaN, +inf or all -inf rows are NaN). */
const SOFTMAX_ROW_SPECIALS = ["all -inf", "one NaN", "one +inf", "some -inf", "zeros", "equal"];

property(
  ["rows/softmax", "rows/logSoftmax"],
  "softmax and logSoftmax: shapes, axes, layouts, variants and special rows",
  fc.record({
    shape: shapeArb,
    axis: fc.nat(),
    layout: layoutArb,
    dtype: dtypeArb,
    variants: variantsArb,
    log: fc.boolean(),
    wide: fc.boolean(),
    specials: fc.boolean(),
    seed: fc.nat(),
  }),
  async (c) => {
    const rng = mulberry32(c.seed);
    const rank = c.shape.length;
    const axis = rank === 0 ? -1 : (c.axis % (2 * rank)) - rank;
    const normalised = rank === 0 ? 0 : (axis + rank) % rank;
    const { row, rows } = rowsOf(rank ? c.shape : [1], [normalised]);
    // Per-row special patterns, then per-element values.
    const pattern = Array.from(
      { length: rows },
      () => (c.specials && rng() < 0.3 ? pick(rng, SOFTMAX_ROW_SPECIALS) : "none"),
    );
    const firstOfRow = new Set<number>();
    const seen = new Set<number>();
    row.forEach((r, i) => {
      if (!seen.has(r)) (seen.add(r), firstOfRow.add(i));
    });
    const span = c.wide ? 1e4 : 30;
    const values = (i: number) => {
      const p = pattern[row[i]];
      const v = (rng() * 2 - 1) * span;
      switch (p) {
        case "all -inf":
          return -Infinity;
        case "one NaN":
          return firstOfRow.has(i) ? NaN : v;
        case "one +inf":
          return firstOfRow.has(i) ? Infinity : v;
        case "some -inf":
          return !firstOfRow.has(i) && rng() < 0.5 ? -Infinity : v;
        case "zeros":
          return rng() < 0.5 ? -0 : 0;
        case "equal":
          return 2.5;
        default:
          return v;
      }
    };
    const bag = new Bag();
    try {
      const input = await makeInput(bag, rng, c.layout, c.shape, c.dtype, values);
      await withVariants(c.variants, async (variant) => {
        const f = c.log ? gyre.logSoftmax : gyre.softmax;
        const gpu = bag.add(f(input.gpu, { axis }));
        const wasm = bag.add(f(input.wasm, { axis }));
        await compare(
          `${c.log ? "logSoftmax" : "softmax"} axis ${axis} of ${input.describe}, ${variant}`,
          gpu,
          wasm,
          softmaxTolerance(input.xs, row, rows, c.log),
          (i) => `row ${row[i]} (${pattern[row[i]]}) x ${input.xs[i]}`,
        );
      });
    } finally {
      bag.dispose();
    }
  },
  {
    numRuns: 100,
    variants: [
      "rows/single",
      "rows/chunked",
      "rows/none",
      "rows/shuffle",
      "rows/subgroup",
      "rows/shared",
    ],
  },
);

/** Draws a parameter tensor broadcastable to `shape` on both devices (or none). */
function parameter(
  bag: Bag,
  rng: () => number,
  shape: readonly number[],
  present: boolean,
  broadcast: boolean,
  around: number,
) {
  if (!present) return { gpu: undefined, wasm: undefined, at: (_j: number) => around };
  // Broadcast: leading axes dropped and some set to 1 (shape stays broadcastable to `shape`).
  const drop = broadcast ? randInt(rng, 0, shape.length) : 0;
  const own = shape.slice(drop).map((d) => (broadcast && rng() < 0.4 ? 1 : d));
  const data = Float32Array.from({ length: sizeOf(own) }, () => around + (rng() * 2 - 1) * 2);
  const dtype: gyre.DType = rng() < 0.25 ? "float16" : "float32";
  const make = (device: gyre.DeviceName) =>
    bag.add(gyre.tensor(data, { shape: own, dtype, device }));
  const wasm = make("wasm");
  // The values as the ops see them (float16 rounded), at every place of `shape`.
  const full = bag.add(bag.add(wasm.broadcastTo(shape)).clone());
  let values: Float32Array | null = null;
  return {
    gpu: make("gpu"),
    wasm,
    /** The value at place j of the normalised shape (read lazily after `load`). */
    at: (j: number) => values![j],
    load: async () => (values = (await full.data()) as Float32Array),
  };
}

property(
  ["rows/layerNorm", "rows/rmsNorm"],
  "layerNorm and rmsNorm: shapes, axis sets, layouts, affine parameters, variants",
  fc.record({
    shape: shapeArb,
    axes: fc.nat(),
    layout: layoutArb,
    dtype: dtypeArb,
    variants: variantsArb,
    rms: fc.boolean(),
    weight: fc.boolean(),
    bias: fc.boolean(),
    broadcast: fc.boolean(),
    offset: fc.constantFrom(0, 0, 3, 1000),
    scale: fc.constantFrom(1e-3, 1, 1, 50),
    eps: fc.constantFrom(1e-5, 1e-6, 0.1),
    specials: fc.boolean(),
    seed: fc.nat(),
  }),
  async (c) => {
    const rng = mulberry32(c.seed);
    const rank = c.shape.length;
    // Axis set: bit k of `axes` picks axis k; the last axis alone when none is picked.
    let axes = c.shape.map((_, k) => k).filter((k) => (c.axes >> k) & 1);
    if (axes.length === 0 && rank > 0) axes = [rank - 1];
    const { row, place, rows } = rowsOf(c.shape, axes);
    const normShape = axes.map((a) => c.shape[a]);
    const special = Array.from({ length: rows }, () => c.specials && rng() < 0.2);
    const values = (i: number) => {
      if (special[row[i]] && rng() < 0.05) return pick(rng, [NaN, Infinity, -Infinity]);
      return c.offset + (rng() * 2 - 1) * c.scale;
    };
    const bag = new Bag();
    try {
      const input = await makeInput(bag, rng, c.layout, c.shape, c.dtype, values);
      const w = parameter(bag, rng, normShape, c.weight, c.broadcast, 1);
      const b = parameter(bag, rng, normShape, c.bias && !c.rms, c.broadcast, 0);
      await w.load?.();
      await b.load?.();
      await withVariants(c.variants, async (variant) => {
        const axis = rank === 0 ? [] : axes;
        const run = (x: Tensor, device: "gpu" | "wasm") =>
          c.rms
            ? gyre.rmsNorm(x, { axis, weight: w[device], eps: c.eps })
            : gyre.layerNorm(x, { axis, weight: w[device], bias: b[device], eps: c.eps });
        const gpu = bag.add(run(input.gpu, "gpu"));
        const wasm = bag.add(run(input.wasm, "wasm"));
        await compare(
          `${
            c.rms ? "rmsNorm" : "layerNorm"
          } axes [${axes}] of ${input.describe}, weight ${c.weight}, bias ${c.bias}, eps ${c.eps}, ${variant}`,
          gpu,
          wasm,
          normTolerance(
            input.xs,
            row,
            rows,
            c.eps,
            !c.rms,
            (i) => w.at(place[i]),
            (i) => b.at(place[i]),
          ),
          (i) => `row ${row[i]} x ${input.xs[i]}`,
        );
      });
    } finally {
      bag.dispose();
    }
  },
  { numRuns: 100, variants: ["rows/single", "rows/chunked"] },
);

/** Channel counts (groups x channels per group) and spatial shapes of the N, C, ... ops. */
const channelsArb = fc.record({
  n: fc.integer({ min: 1, max: 3 }),
  groups: fc.constantFrom(1, 2, 3, 4, 8, 32),
  perGroup: fc.constantFrom(1, 2, 3, 4, 5),
  spatial: fc.array(fc.constantFrom(1, 2, 3, 4, 7, 16, 31, 64), { maxLength: 2 }),
});

property(
  "rows/groupNorm",
  "groupNorm: groups, spatial shapes, layouts, per-channel affine, variants",
  fc.record({
    dims: channelsArb,
    layout: layoutArb,
    dtype: dtypeArb,
    variants: variantsArb,
    weight: fc.boolean(),
    bias: fc.boolean(),
    offset: fc.constantFrom(0, 5),
    seed: fc.nat(),
  }),
  async (c) => {
    const rng = mulberry32(c.seed);
    const { n, groups, perGroup, spatial } = c.dims;
    const channels = groups * perGroup;
    const shape = [n, channels, ...spatial];
    const grouped = [n, groups, perGroup, ...spatial];
    const { row, place, rows } = rowsOf(grouped, grouped.map((_, i) => i).slice(2));
    const spatialSize = sizeOf(spatial);
    const channelOf = (i: number) =>
      (row[i] % groups) * perGroup + Math.floor(place[i] / spatialSize);
    const bag = new Bag();
    try {
      const input = await makeInput(
        bag,
        rng,
        c.layout,
        shape,
        c.dtype,
        () => c.offset + rng() * 2 - 1,
      );
      const w = parameter(bag, rng, [channels], c.weight, false, 1);
      const b = parameter(bag, rng, [channels], c.bias, false, 0);
      await w.load?.();
      await b.load?.();
      await withVariants(c.variants, async (variant) => {
        const run = (x: Tensor, device: "gpu" | "wasm") =>
          gyre.groupNorm(x, { groups, weight: w[device], bias: b[device] });
        const gpu = bag.add(run(input.gpu, "gpu"));
        const wasm = bag.add(run(input.wasm, "wasm"));
        await compare(
          `groupNorm ${groups} groups of ${input.describe}, ${variant}`,
          gpu,
          wasm,
          normTolerance(
            input.xs,
            row,
            rows,
            1e-5,
            true,
            (i) => w.at(channelOf(i)),
            (i) => b.at(channelOf(i)),
          ),
        );
      });
    } finally {
      bag.dispose();
    }
  },
  { numRuns: 50 },
);

property(
  "rows/batchNorm",
  "batchNorm: training (output, batch and running statistics) and inference, variants",
  fc.record({
    dims: channelsArb,
    layout: layoutArb,
    dtype: dtypeArb,
    variants: variantsArb,
    training: fc.boolean(),
    weight: fc.boolean(),
    bias: fc.boolean(),
    running: fc.boolean(),
    momentum: fc.constantFrom(0.1, 0.5, 1),
    seed: fc.nat(),
  }),
  async (c) => {
    const rng = mulberry32(c.seed);
    const { n, groups, perGroup, spatial } = c.dims;
    const channels = groups * perGroup;
    const shape = [n + 1, channels, ...spatial]; // N >= 2: more than one value per channel
    const axes = shape.map((_, i) => i).filter((i) => i !== 1);
    const { row, rows } = rowsOf(shape, axes);
    const channelOf = (i: number) => row[i];
    const bag = new Bag();
    try {
      const input = await makeInput(bag, rng, c.layout, shape, c.dtype, () => 2 + rng() * 4 - 2);
      const w = parameter(bag, rng, [channels], c.weight, false, 1);
      const b = parameter(bag, rng, [channels], c.bias, false, 0);
      const mean = parameter(bag, rng, [channels], c.running || !c.training, false, 2);
      const variance = parameter(bag, rng, [channels], c.running || !c.training, false, 3);
      for (const p of [w, b, mean, variance]) await p.load?.();
      await withVariants(c.variants, async (variant) => {
        const options = (device: "gpu" | "wasm") => ({
          weight: w[device],
          bias: b[device],
          mean: mean[device],
          variance: variance[device],
          momentum: c.momentum,
        });
        const label = `batchNorm ${
          c.training ? "training" : "inference"
        } of ${input.describe}, ${variant}`;
        if (!c.training) {
          const gpu = bag.add(gyre.batchNorm(input.gpu, options("gpu")));
          const wasm = bag.add(gyre.batchNorm(input.wasm, options("wasm")));
          // One fused elementwise kernel, f32 node by node on WASM: (x - m) is the same f32
          // subtraction on both, inverseSqrt 2 ULP against a correctly rounded one, then two
          // products and a sum: within 5 ULP of |(x - m) rstd w| plus 2u |y| + |b| u.
          await compare(label, gpu, wasm, (i, want) => {
            const ch = channelOf(i);
            const z = (input.xs[i] - mean.at(ch)) / Math.sqrt(variance.at(ch) + 1e-5);
            return {
              atol: 10 * U * Math.abs(z * w.at(ch)) +
                2 * U * (Math.abs(want) + Math.abs(b.at(ch))) +
                MIN_NORMAL,
            };
          });
          return;
        }
        const gpu = gyre.batchNorm(input.gpu, { ...options("gpu"), training: true });
        const wasm = gyre.batchNorm(input.wasm, { ...options("wasm"), training: true });
        for (const r of [gpu, wasm]) Object.values(r).forEach((t) => bag.add(t as Tensor));
        await compare(
          label,
          gpu.output,
          wasm.output,
          normTolerance(
            input.xs,
            row,
            rows,
            1e-5,
            true,
            (i) => w.at(channelOf(i)),
            (i) => b.at(channelOf(i)),
          ),
        );
        // Batch statistics: the mean within dm, the variance within H u + 5u + dm^2 / var relative.
        const s = rowStats(input.xs, row, rows);
        const dm = (ch: number) => H * U * s.meanAbs[ch] + U * Math.abs(s.mean[ch]);
        const varTol = (ch: number, scale = 1) => ({
          atol: scale *
              ((H * U + 6 * U) * s.variance[ch] + dm(ch) ** 2 + 2 * U * s.variance[ch]) +
            MIN_NORMAL,
        });
        const len = s.count[0];
        await compare(
          `${label}: mean`,
          gpu.mean,
          wasm.mean,
          (ch) => ({ atol: dm(ch) + MIN_NORMAL }),
        );
        await compare(`${label}: variance`, gpu.variance, wasm.variance, (ch) => varTol(ch));
        await compare(
          `${label}: unbiased variance`,
          gpu.unbiasedVariance,
          wasm.unbiasedVariance,
          (ch) => varTol(ch, len / (len - 1)),
        );
        assert(Boolean(gpu.runningMean) === c.running, `${label}: running statistics returned`);
        if (c.running) {
          const m = c.momentum;
          await compare(`${label}: running mean`, gpu.runningMean!, wasm.runningMean!, (ch) => ({
            atol: m * dm(ch) + 4 * U * (Math.abs(mean.at(ch)) + Math.abs(s.mean[ch])) + MIN_NORMAL,
          }));
          await compare(
            `${label}: running variance`,
            gpu.runningVariance!,
            wasm.runningVariance!,
            (ch) => ({
              atol: m * varTol(ch, len / (len - 1)).atol +
                4 * U * (Math.abs(variance.at(ch)) + s.variance[ch] * 2) + MIN_NORMAL,
            }),
          );
        }
      });
    } finally {
      bag.dispose();
    }
  },
  { numRuns: 50 },
);

function assert(ok: boolean, message: string): void {
  if (!ok) throw new Error(message);
}

property(
  ["rows/softmax", "rows/layerNorm"],
  "over 1 Mi elements: long rows (chunked by the rule), a wide batch, and a strided axis",
  fc.record({ which: fc.nat({ max: 2 }), seed: fc.nat() }),
  async (c) => {
    const rng = mulberry32(c.seed);
    const cases = [
      { shape: [1, (1 << 20) + 3], axis: -1, op: "layerNorm" },
      { shape: [257, 4099], axis: -1, op: "softmax" },
      { shape: [1030, 1024], axis: 0, op: "softmax" },
    ] as const;
    const { shape, axis, op } = cases[c.which];
    const normalised = (axis + shape.length) % shape.length;
    const { row, rows } = rowsOf(shape, [normalised]);
    const bag = new Bag();
    try {
      const input = await makeInput(
        bag,
        rng,
        "contiguous",
        shape,
        "float32",
        () => rng() * 20 - 10,
      );
      const f = op === "softmax"
        ? (x: Tensor) => gyre.softmax(x, { axis })
        : (x: Tensor) => gyre.layerNorm(x, { axis });
      const gpu = bag.add(f(input.gpu));
      const wasm = bag.add(f(input.wasm));
      await compare(
        `${op} axis ${axis} of [${shape}]`,
        gpu,
        wasm,
        op === "softmax"
          ? softmaxTolerance(input.xs, row, rows, false)
          : normTolerance(input.xs, row, rows, 1e-5, true, () => 1, () => 0),
      );
    } finally {
      bag.dispose();
    }
  },
  { numRuns: 3 },
);
