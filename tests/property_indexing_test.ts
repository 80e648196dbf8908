/**
 * Property tests of the indexing family's GPU kernels (src/gpu/_codegen_indexing.ts: the gather,
 * the scatter as a store, one atomic instruction or a compare-and-swap loop, each forced) against
 * the WASM reference (asm/indexing.ts): takeAlongAxis, gather, take, indexSelect and at; scatter
 * with every reduction, scatterAdd, the segment reductions and bincount; over random shapes and
 * axes, every dtype, contiguous, broadcast, transposed and sliced operands, and index patterns:
 * random (negatives included), all equal, sorted, reverse sorted, and the boundaries (0, n - 1,
 * -1, -n).
 *
 * Tolerances. Gathers move bits: exact (float16 NaN payloads aside). Scatters: stores (unique
 * indices, since duplicates are unspecified), max, min and every integer reduction are exact (the
 * order of integer wraparound sums and products does not matter, and max and min are exact). Float
 * sums and means: the reference rounds the f64 sum once, the GPU adds in the order updates meet,
 * each addition rounding once: within (c + 1) u S (+ (c + 1) 2^-126 for flushed subnormals),
 * with c the terms, S the sum of their magnitudes and u the dtype's epsilon (float16 rounds every
 * step to half precision, u = 2^-10); a mean adds its division's 3 ULP. Float products likewise,
 * relative to the product, over values in [0.8, 1.25] with signs, zeros, infinities and NaN:
 * products of a few thousand arbitrary floats overflow or underflow in an order-dependent way, so
 * the whole float domain would make the reference meaningless there (documented limit). Sums draw
 * magnitudes below 2^100 for the same reason (overflow depends on the order).
 * @module
 */
import fc from "fast-check";
import * as gyre from "../src/mod.ts";
import {
  Bag,
  expectClose,
  type FloatDomain,
  forcePlan,
  hostData,
  type LayoutKind,
  makeLayout,
  MAX_F32,
  MIN_NORMAL,
  mulberry32,
  pick,
  plansRan,
  property,
  randInt,
  shapeArb,
  sizeOf,
  within,
} from "./_harness.ts";

type DType = "float32" | "float16" | "int32" | "uint32" | "bool";
type Pattern = "random" | "equal" | "sorted" | "reversed" | "boundary";

const DTYPES: readonly DType[] = ["float32", "float32", "float16", "int32", "uint32", "bool"];
const PATTERNS: readonly Pattern[] = [
  "random",
  "random",
  "equal",
  "sorted",
  "reversed",
  "boundary",
];
const LENGTHS = [1, 2, 3, 5, 7, 13, 64, 257, 1025];

const FULL: FloatDomain = {
  kind: "log",
  minExp: -140,
  maxExp: 127,
  specials: [NaN, Infinity, -Infinity, 0, -0, MAX_F32, -MAX_F32, 2 ** -149, 1e-40],
  pSpecial: 0.15,
};
const SUMS: FloatDomain = {
  ...FULL,
  maxExp: 100,
  specials: [NaN, Infinity, -Infinity, 0, -0, 2 ** -149, 1e-40],
};
const PRODUCTS: FloatDomain = {
  kind: "uniform",
  lo: -1.25,
  hi: 1.25,
  specials: [NaN, Infinity, -Infinity, 0, -0, 1, -1],
  pSpecial: 0.05,
};

/** `count` indices into an axis of `n` by `pattern` (negative ones from [-n, 0) where `wrap`). */
function indexData(
  rng: () => number,
  pattern: Pattern,
  count: number,
  n: number,
  low: number,
): Int32Array {
  const out = new Int32Array(count);
  const equal = randInt(rng, low, n - 1);
  for (let i = 0; i < count; i++) {
    out[i] = pattern === "equal"
      ? equal
      : pattern === "boundary"
      ? pick(rng, low < 0 ? [0, n - 1, -1, low] : [0, n - 1])
      : randInt(rng, low, n - 1);
  }
  if (pattern === "sorted" || pattern === "reversed") {
    out.sort();
    if (pattern === "reversed") out.reverse();
  }
  return out;
}

/** Bits of results: exact comparison, NaN with NaN (float16 payloads may differ). */
function expectSameBits(label: string, g: gyre.TypedArray, w: gyre.TypedArray): void {
  const gb = g instanceof Float32Array ? new Uint32Array(g.buffer, g.byteOffset, g.length) : g;
  const wb = w instanceof Float32Array ? new Uint32Array(w.buffer, w.byteOffset, w.length) : w;
  expectClose(
    label,
    g,
    w,
    (i) => gb[i] === wb[i] || (Number.isNaN(g[i]) && Number.isNaN(w[i])),
  );
}

// ---------------------------------------------------------------------------------------------
// Gathers.

type GatherOp = "takeAlongAxis" | "gather" | "take" | "indexSelect" | "at";

interface GatherCase {
  op: GatherOp;
  dtype: DType;
  shape: number[];
  axisPick: number;
  layout: LayoutKind;
  pattern: Pattern;
  /** Indices along the axis: a count, or a shape of up to two axes for take and at. */
  count: number;
  extra: number;
  /** take without an axis (x flattened); at with numbers beside the tensor. */
  flat: boolean;
  /** The form forced (the plan keeps "gather" where the others cannot run). */
  variant: "gather" | "gather-vec4" | "gather-quad";
  /** "gather": output elements an invocation. */
  perInvocation?: number;
  seed: number;
}

async function checkGather(c: GatherCase): Promise<void> {
  const bag = new Bag();
  try {
    const rng = mulberry32(c.seed);
    const shape = c.shape.length === 0 ? [3] : c.shape;
    const rank = shape.length;
    const axis = c.axisPick % rank;
    const layout = makeLayout(rng, c.layout, shape);
    const base = hostData(rng, c.dtype, sizeOf(layout.baseShape), FULL);
    const flatLength = sizeOf(shape);
    const n = c.op === "take" && c.flat ? flatLength : shape[axis];
    // An empty axis takes no indices (any would be out of range).
    const count = n === 0 ? 0 : c.count;
    let indexShape: number[];
    switch (c.op) {
      case "takeAlongAxis":
        indexShape = shape.map((d, k) => (k === axis ? count : (c.extra >> k) & 1 ? 1 : d));
        break;
      case "gather":
        indexShape = shape.map((
          d,
          k,
        ) => (k === axis ? count : Math.min(d, 1 + ((c.extra >> k) % 3))));
        break;
      case "take":
      case "at":
        indexShape = c.extra % 3 === 0 ? [] : c.extra % 3 === 1 ? [count] : [2, count];
        if (n === 0) indexShape = [0];
        break;
      default:
        indexShape = [count];
    }
    const indices = indexData(rng, c.pattern, sizeOf(indexShape), n, -n);
    const numbers = c.op === "at" && c.flat && rank > 1;
    const run = (device: gyre.DeviceName): gyre.Tensor => {
      const t = bag.add(gyre.tensor(base, { shape: layout.baseShape, dtype: c.dtype, device }));
      const x = bag.add(layout.kind === "broadcast" ? t.broadcastTo(shape) : layout.view(t));
      const i = bag.add(gyre.tensor(indices, { shape: indexShape, dtype: "int32", device }));
      switch (c.op) {
        case "takeAlongAxis":
          return gyre.takeAlongAxis(x, i, { axis });
        case "gather":
          return gyre.gather(x, i, { axis: axis - rank });
        case "take":
          return c.flat ? gyre.take(x, i) : gyre.take(x, i, { axis });
        case "indexSelect":
          return gyre.indexSelect(x, i, { axis });
        case "at": {
          // Numbers (index 0) on the axes other than `axis` half the time, else whole axes.
          const ranges = shape.map((d, k) => (k === axis ? i : numbers && d > 0 ? 0 : null));
          return gyre.at(x, ...ranges);
        }
      }
    };
    forcePlan("indexing", { variant: c.variant, perInvocation: c.perInvocation ?? 1 });
    const got = bag.add(run("gpu"));
    forcePlan("indexing", null);
    const want = bag.add(run("wasm"));
    const label =
      `${c.op} ${c.dtype} [${shape}] axis ${axis} indices [${indexShape}] ${c.pattern} ` +
      layout.describe;
    if (String(got.shape) !== String(want.shape)) {
      throw new Error(`${label}: shape [${got.shape}] vs [${want.shape}]`);
    }
    const [g, w] = await Promise.all([got.data(), want.data()]);
    expectSameBits(label, g, w);
    if (
      sizeOf(want.shape) > 0 &&
      !plansRan("indexing").some((r) => r.variants[0].startsWith("gather"))
    ) {
      throw new Error(`${label}: the GPU ran no gather`);
    }
    const perInvocation = c.perInvocation ?? 1;
    if (
      c.variant === "gather" && sizeOf(want.shape) > 0 && perInvocation > 1 &&
      c.dtype !== "float16" &&
      !plansRan("indexing").some((r) =>
        (r.choice as { perInvocation?: number }).perInvocation === perInvocation
      )
    ) {
      throw new Error(`${label}: the gather did not take ${perInvocation} outputs an invocation`);
    }
  } finally {
    forcePlan("indexing", null);
    bag.dispose();
  }
}

property(
  [
    "indexing/takeAlongAxis",
    "indexing/gather",
    "indexing/take",
    "indexing/indexSelect",
    "indexing/at",
  ],
  "gathers equal the WASM reference bit for bit",
  fc.record({
    op: fc.constantFrom<GatherOp>("takeAlongAxis", "gather", "take", "indexSelect", "at"),
    dtype: fc.constantFrom(...DTYPES),
    shape: shapeArb(3, LENGTHS),
    axisPick: fc.nat(),
    layout: fc.constantFrom<LayoutKind>("contiguous", "broadcast", "transposed", "sliced"),
    pattern: fc.constantFrom(...PATTERNS),
    count: fc.constantFrom(0, 1, 2, 5, 64, 300),
    extra: fc.nat(),
    flat: fc.boolean(),
    variant: fc.constant<GatherCase["variant"]>("gather"),
    seed: fc.integer(),
  }),
  checkGather,
  { numRuns: 80, variants: ["indexing/gather"] },
);

// Runs of x copied four elements at a time (indexSelect and take of rows a multiple of 4 long),
// forced where it can run and where it cannot (takeAlongAxis, gather: the plan keeps "gather").
property(
  ["indexing/indexSelect", "indexing/takeAlongAxis", "indexing/gather", "indexing/take"],
  "the vec4 form of the gather equals the WASM reference bit for bit",
  fc.record({
    op: fc.constantFrom<GatherOp>("indexSelect", "take", "takeAlongAxis", "gather"),
    dtype: fc.constantFrom<DType>("float32", "int32", "float16", "bool"),
    shape: fc.tuple(
      fc.constantFrom(1, 3, 17),
      fc.constantFrom(4, 8, 64, 256, 300, 1024, 4099),
    ).map(([r, l]) => [r, l]),
    axisPick: fc.constantFrom(0, 1),
    layout: fc.constantFrom<LayoutKind>("contiguous", "contiguous", "sliced", "transposed"),
    pattern: fc.constantFrom(...PATTERNS),
    count: fc.constantFrom(1, 5, 64, 300),
    extra: fc.nat(),
    flat: fc.constant(false),
    variant: fc.constant<GatherCase["variant"]>("gather-vec4"),
    seed: fc.integer(),
  }),
  checkGather,
  { numRuns: 40, variants: ["indexing/gather-vec4"] },
);

// The "gather" form taking several outputs an invocation (the plan's choice from
// GATHER_RUN_FROM outputs) and its quad form (indices and outputs four at a time), forced at
// every count they offer, output lengths not a multiple of a workgroup's run.
property(
  ["indexing/takeAlongAxis", "indexing/take", "indexing/gather", "indexing/indexSelect"],
  "the gather taking several outputs an invocation equals the WASM reference bit for bit",
  fc.record({
    op: fc.constantFrom<GatherOp>("takeAlongAxis", "take", "gather", "indexSelect"),
    dtype: fc.constantFrom<DType>("float32", "int32", "float16", "bool"),
    shape: fc.tuple(fc.constantFrom(1, 3), fc.constantFrom(1, 5, 300, 4096, 4100)).map((
      [r, l],
    ) => [r, l]),
    axisPick: fc.constantFrom(1, 1, 0),
    layout: fc.constantFrom<LayoutKind>("contiguous", "contiguous", "sliced", "transposed"),
    pattern: fc.constantFrom(...PATTERNS),
    count: fc.constantFrom(1, 5, 300, 5000),
    extra: fc.nat(),
    flat: fc.boolean(),
    variant: fc.constantFrom<GatherCase["variant"]>("gather", "gather-quad"),
    perInvocation: fc.constantFrom(4, 8, 16),
    seed: fc.integer(),
  }).filter(
    // At most 2^23 outputs (take by [2, count] indices along an axis of x's rows): a software
    // adapter binds 128 MiB.
    (c) => 2 * c.count * c.shape[0] * c.shape[1] <= 2 ** 23,
  ),
  checkGather,
  { numRuns: 40, variants: ["indexing/gather", "indexing/gather-quad"] },
);

// ---------------------------------------------------------------------------------------------
// Scatters.

type ScatterOp = "scatter" | "scatterAdd" | "segment" | "bincount";
type Reduce = gyre.ScatterReduce;

interface ScatterCase {
  op: ScatterOp;
  reduce: Reduce;
  dtype: DType;
  shape: number[];
  axisPick: number;
  layout: LayoutKind;
  pattern: Pattern;
  /** Updates along the axis (scatter), or segments (segment ops, bincount). */
  count: number;
  extra: number;
  combine: "store" | "atomic" | "cas";
  /** The form forced (the plan keeps "scatter" where the others cannot run). */
  form: "scatter" | "scatter-runs" | "scatter-segments" | "scatter-sorted" | "scatter-shared";
  /** Segment ops: the ids sorted and declared so. */
  sorted: boolean;
  seed: number;
}

const SEGMENT_OPS = {
  sum: gyre.segmentSum,
  mean: gyre.segmentMean,
  max: gyre.segmentMax,
  min: gyre.segmentMin,
  prod: gyre.segmentProd,
} as const;

/**
 * A product's factors of magnitude below 1 ("small"; others 1) or above 1 and finite ("big"):
 * their products bound every partial product of the terms.
 */
function factors(t: gyre.Tensor, which: "small" | "big"): gyre.Tensor {
  return gyre.tidy(() => {
    const a = t.abs();
    const keep = which === "small"
      ? a.less(1).logicalAnd(a.notEqual(0))
      : a.greater(1).logicalAnd(a.less(Infinity));
    return gyre.where(keep, a, 1);
  });
}

/**
 * A GPU product may be NaN where the exact one (the reference's, in float64) is infinite or 0:
 * it multiplies in the dtype's precision (float16 rounded at each step), so a partial product
 * can underflow to 0 before an infinite factor (0 * Inf) or overflow before a 0. Allowed only
 * where the factors' bounds say a partial product can leave the range: `small` (the product of
 * the factors below 1 in magnitude, rounded to the dtype) below the least normal, or `big`
 * infinite.
 */
function productNaN(got: number, want: number, small: number, big: number, half: boolean) {
  if (!Number.isNaN(got)) return false;
  const tiny = half ? 2 ** -14 : MIN_NORMAL;
  return (!Number.isFinite(want) && !Number.isNaN(want) && small < tiny) ||
    (want === 0 && !Number.isFinite(big));
}

async function checkScatter(c: ScatterCase): Promise<void> {
  const bag = new Bag();
  try {
    const rng = mulberry32(c.seed);
    // Bool takes plain stores, max and min only.
    const op: ScatterOp = c.dtype === "bool" && c.op === "scatterAdd" ? "scatter" : c.op;
    let reduce: Reduce = op === "scatterAdd" || op === "bincount"
      ? "sum"
      : op === "segment" && c.reduce === "none"
      ? "sum"
      : c.reduce;
    if (c.dtype === "bool" && op !== "bincount" && !["none", "max", "min"].includes(reduce)) {
      reduce = "max";
    }
    const dtype: DType = op === "bincount" ? (c.extra % 2 ? "float32" : "int32") : c.dtype;
    const float = dtype === "float32" || dtype === "float16";
    const domain = reduce === "prod" ? PRODUCTS : SUMS;
    const shape = c.shape.length === 0 ? [3] : c.shape;
    const rank = shape.length;
    const axis = c.axisPick % rank;
    // x (scatter) or data (segment, bincount's weights) and the indices' shape.
    let xShape: number[];
    let indexShape: number[];
    let updateShape: number[];
    let n: number;
    if (op === "scatter" || op === "scatterAdd") {
      xShape = shape;
      n = shape[axis];
      indexShape = shape.map((
        d,
        k,
      ) => (k === axis ? (n === 0 ? 0 : c.count) : Math.min(d, 1 + ((c.extra >> k) % 3))));
      // Unique indices for plain stores: which duplicate wins is unspecified.
      if (reduce === "none") indexShape[axis] = Math.min(indexShape[axis], n);
      updateShape = indexShape.map((d, k) => d + ((c.extra >> (k + 4)) & 1));
    } else if (op === "segment") {
      n = c.count;
      xShape = shape;
      const lead = 1 + (c.extra % rank);
      indexShape = shape.slice(0, lead);
      updateShape = shape;
    } else {
      n = c.count;
      xShape = [shape[0]];
      indexShape = [shape[0]];
      updateShape = [shape[0]];
    }
    const low = op === "segment" ? -1 : op === "bincount" ? 0 : -n;
    let indices: Int32Array;
    if (reduce === "none") {
      // Along the axis, a permutation's prefix in every line (so no two updates meet).
      indices = new Int32Array(sizeOf(indexShape));
      const m = indexShape[axis];
      const lines = m === 0 ? 0 : indices.length / m;
      const stride = sizeOf(indexShape.slice(axis + 1));
      for (let line = 0; line < lines; line++) {
        const perm = [...Array(n).keys()];
        for (let i = n - 1; i > 0; i--) {
          const j = randInt(rng, 0, i);
          [perm[i], perm[j]] = [perm[j], perm[i]];
        }
        const outer = Math.floor(line / stride);
        const inner = line % stride;
        for (let k = 0; k < m; k++) {
          indices[(outer * m + k) * stride + inner] = perm[k] - (rng() < 0.3 ? n : 0);
        }
      }
    } else {indices = indexData(
        rng,
        c.pattern,
        sizeOf(indexShape),
        Math.max(n, 1),
        n === 0 ? 0 : low,
      );}
    if (n === 0 && op !== "segment") indices.fill(0);
    const sorted = op === "segment" && c.sorted;
    if (sorted) indices.sort();
    const layout = makeLayout(rng, c.layout, updateShape);
    const updates = hostData(rng, dtype, sizeOf(layout.baseShape), domain, { lo: -50, hi: 50 });
    const xData = hostData(rng, dtype, sizeOf(xShape), domain, { lo: -50, hi: 50 });
    // "magnitudes": sums of |terms| and the terms' count; "small"/"big": products of the factors
    // below/above 1 in magnitude (the least and greatest a partial product can reach).
    const run = (
      device: gyre.DeviceName,
      mode: "main" | "magnitudes" | "small" | "big" = "main",
    ): gyre.Tensor[] => {
      const magnitudes = mode === "magnitudes";
      const abs = (t: gyre.Tensor) =>
        mode === "main" || !float ? t : bag.add(
          mode === "magnitudes" ? t.abs() : factors(t, mode),
        );
      const ones = (dims: number[]) => bag.add(gyre.ones(dims, { device }));
      const u0 = bag.add(gyre.tensor(updates, { shape: layout.baseShape, dtype, device }));
      const u = abs(
        bag.add(layout.kind === "broadcast" ? u0.broadcastTo(updateShape) : layout.view(u0)),
      );
      const i = bag.add(gyre.tensor(indices, { shape: indexShape, dtype: "int32", device }));
      const x = abs(bag.add(gyre.tensor(xData, { shape: xShape, dtype, device })));
      const r: Reduce = magnitudes ? "sum" : mode === "main" ? reduce : "prod";
      switch (op) {
        case "scatter":
        case "scatterAdd": {
          const main = op === "scatterAdd" && mode === "main"
            ? gyre.scatterAdd(x, i, u, { axis })
            : gyre.scatter(x, i, u, { axis, reduce: r });
          if (!magnitudes) return [main];
          // The terms each element gathers (its base counts one).
          return [main, gyre.scatter(ones(xShape), i, ones(updateShape), { axis, reduce: "sum" })];
        }
        case "segment": {
          const f = magnitudes ? gyre.segmentSum : SEGMENT_OPS[r as keyof typeof SEGMENT_OPS];
          const main = f(u, i, { numSegments: n, sorted });
          if (!magnitudes) return [main];
          return [main, gyre.segmentSum(ones(updateShape), i, { numSegments: n, sorted })];
        }
        case "bincount": {
          const w = dtype === "float32" ? abs(u) : undefined;
          const main = gyre.bincount(i, { minlength: n, weights: w });
          if (!magnitudes) return [main];
          return [main, gyre.bincount(i, { minlength: n })];
        }
      }
    };
    forcePlan("indexing", { variant: c.form, combine: c.combine });
    const [got] = run("gpu").map((t) => bag.add(t));
    forcePlan("indexing", null);
    const [want] = run("wasm").map((t) => bag.add(t));
    const label =
      `${op} ${reduce} ${dtype} ${c.form} ${c.combine} [${xShape}] axis ${axis} indices ` +
      `[${indexShape}] updates [${updateShape}] ${c.pattern}${sorted ? " sorted" : ""} ` +
      layout.describe;
    const segmentsRan = plansRan("indexing").some((r) => r.variants[0] === "scatter-segments");
    // (One row of updates merges away the rows' axis: the plain scatter writes each once.)
    if (sorted && c.form === "scatter-segments" && sizeOf(indexShape) > 1 && !segmentsRan) {
      throw new Error(`${label}: the sorted ids did not take the segmented reduction`);
    }
    if (String(got.shape) !== String(want.shape)) {
      throw new Error(`${label}: shape [${got.shape}] vs [${want.shape}]`);
    }
    const [g, w] = await Promise.all([got.data(), want.data()]);
    if (!float || reduce === "none" || reduce === "max" || reduce === "min") {
      expectSameBits(label, g, w);
    } else {
      const [s, k] = run("wasm", "magnitudes").map((t) => bag.add(t));
      const [sum, terms] = await Promise.all([s.data(), k.data()]);
      const [small, big] = reduce === "prod"
        ? await Promise.all(
          ["small", "big"].map((m) => bag.add(run("wasm", m as "small" | "big")[0]).data()),
        )
        : [null, null];
      const half = dtype === "float16";
      const u = half ? 2 ** -10 : 2 ** -23;
      expectClose(label, g, w, (j) => {
        const count = terms[j] + 1;
        const scale = reduce === "prod"
          ? Math.abs(w[j])
          : sum[j] / (reduce === "mean" ? Math.max(terms[j], 1) : 1);
        const atol = count * u * scale + count * (half ? 2 ** -24 : MIN_NORMAL);
        if (small && big && productNaN(g[j], w[j], small[j], big[j], half)) return true;
        return within(g[j], w[j], { atol, ulp: reduce === "mean" ? 3 : 0 }, { half, ftz: true });
      }, (j) => `(${terms[j]} terms, magnitudes ${sum[j]})`);
    }
  } finally {
    forcePlan("indexing", null);
    bag.dispose();
  }
}

property(
  [
    "indexing/scatter",
    "indexing/scatterAdd",
    "indexing/segmentSum",
    "indexing/segmentMean",
    "indexing/segmentMax",
    "indexing/segmentMin",
    "indexing/segmentProd",
    "indexing/bincount",
  ],
  "scatters, segment reductions and bincount match the WASM reference",
  fc.record({
    op: fc.constantFrom<ScatterOp>(
      "scatter",
      "scatter",
      "scatterAdd",
      "segment",
      "segment",
      "bincount",
    ),
    reduce: fc.constantFrom<Reduce>("none", "sum", "prod", "max", "min", "mean"),
    dtype: fc.constantFrom(...DTYPES),
    shape: shapeArb(3, LENGTHS),
    axisPick: fc.nat(),
    layout: fc.constantFrom<LayoutKind>("contiguous", "broadcast", "transposed", "sliced"),
    pattern: fc.constantFrom(...PATTERNS),
    count: fc.constantFrom(1, 2, 3, 7, 64, 300),
    extra: fc.nat(),
    combine: fc.constantFrom<ScatterCase["combine"]>("store", "atomic", "atomic", "cas"),
    form: fc.constantFrom<ScatterCase["form"]>(
      "scatter",
      "scatter-runs",
      "scatter-segments",
      "scatter-sorted",
      "scatter-shared",
    ),
    sorted: fc.boolean(),
    seed: fc.integer(),
  }),
  checkScatter,
  {
    numRuns: 120,
    variants: [
      "indexing/scatter",
      "indexing/scatter-runs",
      "indexing/scatter-segments",
      "indexing/scatter-sorted",
      "indexing/scatter-shared",
      "indexing/store",
      "indexing/atomic",
      "indexing/cas",
    ],
  },
);

// Sorted segments across many of the segmented reduction's tiles (SEGMENT_ROWS rows a lane;
// wider rows take fewer lanes, so shorter tiles): segments that begin and end in one lane, cross
// lanes, cross tiles, or span many tiles, under every reduction.
interface SortedSegmentsCase {
  reduce: "sum" | "mean" | "max" | "min" | "prod";
  dtype: "float32" | "float16" | "int32";
  rows: number;
  inner: number;
  segments: number;
  dropped: number;
  seed: number;
}

async function checkSortedSegments(c: SortedSegmentsCase): Promise<void> {
  const bag = new Bag();
  try {
    const rng = mulberry32(c.seed);
    // Sorted ids in [-1, segments): a prefix dropped, the rest spread at random.
    const ids = new Int32Array(c.rows);
    for (let r = 0; r < c.rows; r++) {
      ids[r] = r < c.dropped ? -1 : randInt(rng, 0, c.segments - 1);
    }
    ids.sort();
    const shape = c.inner === 1 ? [c.rows] : [c.rows, c.inner];
    const float = c.dtype !== "int32";
    const domain = c.reduce === "prod" ? PRODUCTS : SUMS;
    const data = hostData(rng, c.dtype, sizeOf(shape), domain, { lo: -50, hi: 50 });
    const op = SEGMENT_OPS[c.reduce];
    const options = { numSegments: c.segments, sorted: true };
    const run = (device: gyre.DeviceName, f = op, values = data, dtype: DType = c.dtype) =>
      bag.add(
        f(
          bag.add(gyre.tensor(values, { shape, dtype, device })),
          bag.add(gyre.tensor(ids, { dtype: "int32", device })),
          options,
        ),
      );
    const got = run("gpu");
    const want = run("wasm");
    const label = `${c.reduce} ${c.dtype} [${shape}] into ${c.segments} (${c.dropped} dropped)`;
    if (c.rows > 1 && !plansRan("indexing").some((r) => r.variants[0] === "scatter-segments")) {
      throw new Error(`${label}: the segmented reduction did not run`);
    }
    const [g, w] = await Promise.all([got.data(), want.data()]);
    if (!float || c.reduce === "max" || c.reduce === "min") {
      expectSameBits(label, g, w);
      return;
    }
    // Any order of float additions: within count * u * (the sum of magnitudes), as above.
    const abs = Float32Array.from(data as Float32Array, Math.abs);
    const sums = await run("wasm", gyre.segmentSum, abs, "float32").data();
    const ones = new Float32Array(data.length).fill(1);
    const terms = await run("wasm", gyre.segmentSum, ones, "float32").data();
    const bound = (keep: (a: number) => boolean) =>
      run("wasm", gyre.segmentProd, abs.map((a) => (keep(a) ? a : 1))).data();
    const [small, big] = c.reduce === "prod"
      ? await Promise.all([bound((a) => a > 0 && a < 1), bound((a) => a > 1 && a < Infinity)])
      : [null, null];
    const half = c.dtype === "float16";
    const u = half ? 2 ** -10 : 2 ** -23;
    expectClose(label, g, w, (j) => {
      const count = terms[j] + 1;
      const scale = c.reduce === "prod"
        ? Math.abs(w[j])
        : sums[j] / (c.reduce === "mean" ? Math.max(terms[j], 1) : 1);
      const atol = count * u * scale + count * (half ? 2 ** -24 : MIN_NORMAL);
      if (small && big && productNaN(g[j], w[j], small[j], big[j], half)) return true;
      return within(g[j], w[j], { atol, ulp: c.reduce === "mean" ? 3 : 0 }, { half, ftz: true });
    }, (j) => `(${terms[j]} terms, magnitudes ${sums[j]})`);
  } finally {
    bag.dispose();
  }
}

property(
  [
    "indexing/segmentSum",
    "indexing/segmentMean",
    "indexing/segmentMax",
    "indexing/segmentMin",
    "indexing/segmentProd",
  ],
  "sorted segment reductions across many tiles match the WASM reference",
  fc.record({
    reduce: fc.constantFrom<SortedSegmentsCase["reduce"]>(
      "sum",
      "sum",
      "mean",
      "max",
      "min",
      "prod",
    ),
    dtype: fc.constantFrom<SortedSegmentsCase["dtype"]>("float32", "float32", "float16", "int32"),
    rows: fc.constantFrom(1, 17, 4095, 4097, 9000),
    inner: fc.constantFrom(1, 1, 2, 3, 33, 300),
    segments: fc.constantFrom(1, 2, 5, 64, 3000),
    dropped: fc.constantFrom(0, 0, 1, 5000),
    seed: fc.integer(),
  }).filter((c) => c.rows * c.inner <= 40000),
  checkSortedSegments,
  { numRuns: 40, variants: ["indexing/scatter-segments"] },
);

// ---------------------------------------------------------------------------------------------
// Compaction: argwhere, nonzero and maskedSelect (each tile's count of the mask, the tiles'
// offsets, then each tile's selected elements written at their places) and unique (a sort
// first): exact, any size below, at or above the count selected, over one tile or several.

interface CompactCase {
  op: "argwhere" | "nonzero" | "maskedSelect" | "unique";
  dtype: DType;
  shape: number[];
  density: number;
  sizePick: number;
  /** How the compaction's tiles find their offsets, and its workgroup, forced. */
  offsets: "summed" | "pass";
  workgroupSize: number;
  seed: number;
}

async function checkCompact(c: CompactCase): Promise<void> {
  const bag = new Bag();
  try {
    const rng = mulberry32(c.seed);
    const n = sizeOf(c.shape);
    const values = hostData(rng, c.dtype, n, FULL);
    const mask = Uint8Array.from({ length: n }, () => (rng() < c.density ? 1 : 0));
    const size = Math.round(c.sizePick * (n + 2));
    const run = (device: gyre.DeviceName): gyre.Tensor[] => {
      const x = bag.add(gyre.tensor(values, { shape: c.shape, dtype: c.dtype, device }));
      const m = bag.add(gyre.tensor(mask, { shape: c.shape, dtype: "bool", device }));
      switch (c.op) {
        case "argwhere":
          return [gyre.argwhere(m, { size, fillValue: -1 })];
        case "nonzero":
          return gyre.nonzero(x, { size });
        case "maskedSelect":
          return [gyre.maskedSelect(x, m, { size, fillValue: 7 })];
        case "unique": {
          const r = gyre.unique(c.dtype === "bool" ? m.cast("int32") : x, {
            size,
            returnCounts: true,
            returnInverse: true,
          });
          return [r.values, r.counts!, r.inverse!];
        }
      }
    };
    forcePlan("indexing", { offsets: c.offsets, workgroupSize: c.workgroupSize });
    const got = run("gpu").map((t) => bag.add(t));
    forcePlan("indexing", null);
    const want = run("wasm").map((t) => bag.add(t));
    const label = `${c.op} ${c.dtype} [${c.shape}] size ${size} ${c.offsets}/${c.workgroupSize}`;
    for (let k = 0; k < want.length; k++) {
      const [g, w] = await Promise.all([got[k].data(), want[k].data()]);
      expectSameBits(`${label} output ${k}`, g, w);
    }
    const ran = plansRan("indexing").filter((r) => r.variants[0] === "scatter-compact");
    if (size > 0 && !ran.some((r) => (r.choice as { offsets?: string }).offsets === c.offsets)) {
      throw new Error(`${label}: the compaction did not find its offsets by "${c.offsets}"`);
    }
  } finally {
    forcePlan("indexing", null);
    bag.dispose();
  }
}

property(
  "indexing/scatter",
  "argwhere, nonzero, maskedSelect and unique equal the WASM reference",
  fc.record({
    op: fc.constantFrom<CompactCase["op"]>("argwhere", "nonzero", "maskedSelect", "unique"),
    dtype: fc.constantFrom(...DTYPES),
    shape: shapeArb(3, LENGTHS),
    density: fc.constantFrom(0, 0.01, 0.5, 0.99, 1),
    sizePick: fc.constantFrom(0, 0.3, 0.5, 1, 1.2),
    offsets: fc.constantFrom<CompactCase["offsets"]>("summed", "pass"),
    workgroupSize: fc.constantFrom(64, 256),
    seed: fc.integer(),
  }),
  checkCompact,
  { numRuns: 40, variants: ["indexing/scatter-compact"] },
);

// ---------------------------------------------------------------------------------------------
// Fusion: elementwise consumers of a gather run in the gather's kernel (an epilogue over the
// gathered value and other views of the output's shape). Exact ops only (mul, add, maximum,
// casts): the same IEEE steps on both devices, subnormal results flushed at most. Operands are
// normal numbers and specials, no subnormals: WGSL lets a GPU flush subnormal operands (an H200
// took 1e-40 * 1.5e5 for 0), which the elementwise family's own properties cover with flushed
// references; here the epilogue's wiring is what is tested.
const NORMALS: FloatDomain = {
  kind: "log",
  minExp: -100,
  maxExp: 100,
  specials: [NaN, Infinity, -Infinity, 0, -0, MAX_F32, -MAX_F32],
  pSpecial: 0.1,
};

interface FusedCase {
  op: "take" | "indexSelect" | "takeAlongAxis";
  dtype: "float32" | "int32" | "float16";
  shape: number[];
  count: number;
  consumer: "mul" | "addScalar" | "maximum" | "castFloat" | "compare";
  layout: LayoutKind;
  /** Output elements an invocation, forced. */
  perInvocation: number;
  seed: number;
}

async function checkFused(c: FusedCase): Promise<void> {
  const bag = new Bag();
  try {
    const rng = mulberry32(c.seed);
    const shape = c.shape;
    const axis = shape.length - 1;
    const n = shape[axis];
    const base = hostData(rng, c.dtype, sizeOf(shape), NORMALS, { lo: -50, hi: 50 });
    const indexShape = c.op === "takeAlongAxis"
      ? shape.map((d, k) => (k === axis ? c.count : d))
      : [c.count];
    const indices = indexData(rng, "random", sizeOf(indexShape), n, -n);
    const outShape = c.op === "takeAlongAxis" ? indexShape : [...shape.slice(0, axis), c.count];
    const layout = makeLayout(rng, c.layout, outShape);
    const other = hostData(rng, c.dtype, sizeOf(layout.baseShape), NORMALS, { lo: -50, hi: 50 });
    const run = (device: gyre.DeviceName) => {
      const x = bag.add(gyre.tensor(base, { shape, dtype: c.dtype, device }));
      const i = bag.add(gyre.tensor(indices, { shape: indexShape, dtype: "int32", device }));
      const y0 = bag.add(gyre.tensor(other, { shape: layout.baseShape, dtype: c.dtype, device }));
      const y = bag.add(layout.kind === "broadcast" ? y0.broadcastTo(outShape) : layout.view(y0));
      return gyre.explain(() => {
        const g = c.op === "takeAlongAxis"
          ? gyre.takeAlongAxis(x, i, { axis })
          : c.op === "take"
          ? gyre.take(x, i, { axis })
          : gyre.indexSelect(x, i, { axis });
        switch (c.consumer) {
          case "mul":
            return g.mul(y);
          case "addScalar":
            return g.add(3);
          case "maximum":
            return gyre.maximum(g, y);
          case "castFloat":
            return g.cast("float32").mul(2);
          case "compare":
            return g.greater(y);
        }
      }, { print: false });
    };
    forcePlan("indexing", { perInvocation: c.perInvocation });
    const got = run("gpu");
    forcePlan("indexing", null);
    const want = run("wasm");
    const [g, w] = [got.outputs[0] as gyre.Tensor, want.outputs[0] as gyre.Tensor].map((t) =>
      bag.add(t)
    );
    const label = `${c.op} ${c.dtype} [${shape}] ${c.consumer} ${layout.describe}`;
    const [gv, wv] = await Promise.all([g.data(), w.data()]);
    const half = g.dtype === "float16";
    expectClose(label, gv, wv, (j) => within(gv[j], wv[j], { ulp: 0 }, { half, ftz: true }));
    const kernels = got.kernels.map((k) => k.kernel);
    // Fused: no kernel of the gather alone (the consumer's would carry the same label).
    if (
      sizeOf(outShape) > 0 &&
      (kernels.includes(c.op) || !kernels.some((k) => k.startsWith(`${c.op}+`)))
    ) {
      throw new Error(`${label}: the consumer did not fuse into the gather (${kernels})`);
    }
    const ran = plansRan("indexing").map((r) =>
      (r.choice as { perInvocation: number }).perInvocation
    );
    if (sizeOf(outShape) > 0 && !ran.includes(c.perInvocation)) {
      throw new Error(`${label}: the fused gather took ${ran} outputs an invocation (${kernels})`);
    }
  } finally {
    forcePlan("indexing", null);
    bag.dispose();
  }
}

property(
  ["indexing/take", "indexing/indexSelect", "indexing/takeAlongAxis"],
  "a gather's elementwise consumers fuse into its kernel and equal the WASM reference",
  fc.record({
    op: fc.constantFrom<FusedCase["op"]>("take", "indexSelect", "takeAlongAxis"),
    dtype: fc.constantFrom<FusedCase["dtype"]>("float32", "float32", "int32", "float16"),
    shape: fc.tuple(fc.constantFrom(1, 2, 5), fc.constantFrom(1, 3, 64, 257)).map((s) => [...s]),
    count: fc.constantFrom(1, 4, 33),
    consumer: fc.constantFrom<FusedCase["consumer"]>(
      "mul",
      "addScalar",
      "maximum",
      "castFloat",
      "compare",
    ),
    layout: fc.constantFrom<LayoutKind>("contiguous", "broadcast", "transposed", "sliced"),
    perInvocation: fc.constantFrom(1, 4, 8),
    seed: fc.integer(),
  }),
  checkFused,
  { numRuns: 40 },
);
