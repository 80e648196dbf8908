/**
 * Property tests of the sort family's GPU kernels (src/gpu/_codegen_sort.ts: the bitonic network,
 * its steps all global or those below a tile in workgroup memory, and the LSD radix sort, each
 * forced)
 * against the WASM reference (asm/sort.ts, a stable radix sort): sort, argsort, rankK (top, mid,
 * bottom, every k from 0 to n), kthvalue, quantile (q as numbers or a tensor) and median (every
 * method) and searchsorted,
 * over random shapes and axes (rows of 1, odd, prime and power-of-two lengths), float32, float16,
 * int32 and uint32, contiguous, broadcast, transposed, sliced and 0-d inputs, and values from the
 * whole domain (NaN, infinities, signed zeros, subnormals, the extremes) or heavy duplicates (a
 * few distinct values), already sorted or reverse sorted at times.
 *
 * Tolerances. Everything but interpolated quantiles is exact: both devices order the same keys
 * (-0 equal to +0, NaN largest) with ties broken by index, so the values (their bits, -0 and NaN
 * payloads included) and the int32 indices must match exactly. Interpolated quantiles (linear,
 * midpoint, the median's mean of two) take the same f32 steps on both devices, each rounded as
 * the reference rounds it (the kernel keeps products out of multiply-adds and works below
 * 2^-102 in integers or on exponent-raised words, since the H200 fused and flushed there): within
 * 1 ULP, for a compiler that still evaluates a step otherwise, plus a subnormal result flushed.
 * @module
 */
import fc from "fast-check";
import { SORT_VARIANTS, type SortChoice, type SortVariant } from "../src/tuning.ts";
import { equal as assertEqual } from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import {
  Bag,
  type FloatDomain,
  forcePlan,
  hostData,
  type LayoutKind,
  makeLayout,
  MAX_F32,
  mulberry32,
  plansRan,
  property,
  shapeArb,
  sizeOf,
  within,
} from "./_harness.ts";

type DType = "float32" | "float16" | "int32" | "uint32";
type Op = "sort" | "argsort" | "rankK" | "kthvalue" | "quantile" | "searchsorted";

interface Case {
  op: Op;
  dtype: DType;
  shape: number[];
  axisPick: number;
  descending: boolean;
  kind: "top" | "mid" | "bottom";
  /** k as a fraction of the axis length (0 and 1 included). */
  kPick: number;
  method: "linear" | "lower" | "higher" | "nearest" | "midpoint" | "median";
  /** nanquantile and nanmedian instead. */
  skipNaN: boolean;
  layout: LayoutKind;
  values: "full" | "duplicates" | "rare";
  order: "random" | "sorted" | "reversed";
  right: boolean;
  variant: SortVariant;
  /** The bitonic tree's segments: 512 pairs (many stages) or the plan's. */
  smallTile: boolean;
  /** false: the radix scatter's workgroup-memory scan even where subgroups exist. */
  subgroups: boolean;
  /** The ballot scatter's counters (plain where the device allows them, else packed). */
  counters: "plain" | "packed";
  /** The ballot radix sort's digit offsets: onesweep's look-back or the multipass scan. */
  prefix: "lookback" | "multipass";
  seed: number;
}

const FULL: FloatDomain = {
  kind: "log",
  minExp: -140,
  maxExp: 127,
  specials: [NaN, -NaN, Infinity, -Infinity, 0, -0, MAX_F32, -MAX_F32, 2 ** -149],
  pSpecial: 0.15,
};
/**
 * The whole domain with specials rare: in long rows, FULL's 15% of specials (NaN, infinities,
 * extremes) put every top or bottom window's threshold on a special value, so the keys strictly
 * beyond it (the selection's and the streaming forms' main path) would go untested.
 */
const RARE: FloatDomain = { ...FULL, pSpecial: 0.0005 };
const FEW: FloatDomain = {
  kind: "uniform",
  lo: -2,
  hi: 2,
  integers: true,
  specials: [NaN, -0, 0],
  pSpecial: 0.2,
};

function data(c: Case, rng: () => number, n: number): gyre.TypedArray {
  const few = c.values === "duplicates";
  const range = few ? { lo: -2, hi: 2 } : undefined;
  const out = hostData(rng, c.dtype, n, few ? FEW : c.values === "rare" ? RARE : FULL, range);
  if (c.order !== "random") {
    // Sorted by the order the kernels use (NaN last), or reversed.
    const sorted = Array.from(out).sort((a, b) =>
      Number.isNaN(a) ? (Number.isNaN(b) ? 0 : 1) : Number.isNaN(b) ? -1 : a - b
    );
    if (c.order === "reversed") sorted.reverse();
    out.set(sorted);
  }
  return out;
}

/** Bits of a result (float32 data as its words: -0 and NaN payloads count). */
function bits(t: gyre.TypedArray): ArrayLike<number> {
  return t instanceof Float32Array ? new Uint32Array(t.buffer, t.byteOffset, t.length) : t;
}

/**
 * GPU results equal the reference's bit for bit (float16 NaN payloads aside: the widening to
 * float32 and back may change them), or within 1 ULP and flushing where `interpolated`.
 */
function expectSame(
  label: string,
  g: gyre.TypedArray,
  w: gyre.TypedArray,
  dtype: DType,
  interpolated = false,
): void {
  const gb = bits(g);
  const wb = bits(w);
  for (let j = 0; j < w.length; j++) {
    const ok = interpolated
      ? within(g[j], w[j], { ulp: 1 }, { ftz: true })
      : gb[j] === wb[j] || (Number.isNaN(g[j]) && Number.isNaN(w[j]) && dtype === "float16");
    if (!ok) throw new Error(`${label} [${j}] gpu ${g[j]} wasm ${w[j]}`);
  }
}

async function check(c: Case): Promise<void> {
  const bag = new Bag();
  try {
    const rng = mulberry32(c.seed);
    const layout = makeLayout(rng, c.layout, c.shape);
    // A 0-d layout replaces the shape.
    const shape = layout.kind === "zeroD" ? [] : c.shape;
    const rank = shape.length;
    const axis = rank === 0 ? 0 : c.axisPick % rank;
    const n = rank === 0 ? 1 : shape[axis];
    const base = data(c, rng, sizeOf(layout.baseShape));
    const on = (device: gyre.DeviceName) => {
      const t = bag.add(gyre.tensor(base, { shape: layout.baseShape, dtype: c.dtype, device }));
      return layout.kind === "broadcast"
        ? bag.add(t.broadcastTo(c.shape))
        : bag.add(layout.view(t));
    };
    const k = Math.round(c.kPick * n);
    const run = (x: gyre.Tensor): gyre.Tensor[] => {
      switch (c.op) {
        case "sort":
          return [gyre.sort(x, { axis, descending: c.descending })];
        case "argsort":
          return [gyre.argsort(x, { axis, descending: c.descending })];
        case "rankK":
          return gyre.rankK(x, k, { kind: c.kind, axis });
        case "kthvalue":
          return gyre.kthvalue(x, Math.max(1, k), { axis, keepdims: c.descending });
        case "quantile": {
          // Seven q, or four (the most a radix selection takes at once: two targets a q).
          const q = c.seed % 2 === 0
            ? [0, c.kPick, 0.5, 1, 2 ** -100, 2 ** -140, 1 - 2 ** -24]
            : [c.kPick, 2 ** -140, 1 - 2 ** -24, 0.5];
          if (c.method === "median") {
            return [(c.skipNaN ? gyre.nanmedian : gyre.median)(x, { axis })];
          }
          // q as a tensor on the device half the time (its values read there), else numbers.
          const qs = c.right ? bag.add(gyre.tensor(q, { device: x.device })) : q;
          return [
            (c.skipNaN ? gyre.nanquantile : gyre.quantile)(x, qs, { axis, method: c.method }),
          ];
        }
        case "searchsorted": {
          const sorted = gyre.sort(x.reshape([sizeOf(x.shape)]));
          const probe = gyre.tensor(data(c, mulberry32(c.seed + 1), 7), {
            dtype: c.dtype,
            device: x.device,
          });
          const out = gyre.searchsorted(sorted, probe, { side: c.right ? "right" : "left" });
          sorted.dispose();
          probe.dispose();
          return [out];
        }
      }
    };
    const gx = on("gpu");
    const wx = on("wasm");
    forcePlan("sort", {
      variant: c.variant,
      subgroups: c.subgroups,
      counters: c.counters,
      prefix: c.prefix,
      ...(c.smallTile && c.variant === "bitonic-tree" ? { tile: 512 } : {}),
    });
    const got = run(gx).map((t) => bag.add(t));
    forcePlan("sort", null);
    const want = run(wx).map((t) => bag.add(t));
    const label = `${c.op} ${c.variant} ${c.dtype} [${shape}] axis ${axis} k ${k} ${c.kind} ` +
      `${c.descending ? "descending " : ""}${c.method} ${layout.describe} ${c.values} ${c.order}`;
    for (let i = 0; i < want.length; i++) {
      const [g, w] = await Promise.all([got[i].data(), want[i].data()]);
      if (String(got[i].shape) !== String(want[i].shape) || g.length !== w.length) {
        throw new Error(`${label}: output ${i} shape [${got[i].shape}] vs [${want[i].shape}]`);
      }
      const interpolated = c.op === "quantile" &&
        ["linear", "midpoint", "median"].includes(c.method);
      expectSame(`${label}: output ${i}`, g, w, c.dtype, interpolated);
    }
  } finally {
    forcePlan("sort", null);
    bag.dispose();
  }
}

/** Rows of 1, odd, prime and power-of-two lengths, and a few long ones. */
const LENGTHS = [1, 2, 3, 5, 7, 8, 13, 16, 31, 33, 64, 97, 128, 257, 1000, 4099];

function cases(ops: readonly Op[]): fc.Arbitrary<Case> {
  return fc.record({
    op: fc.constantFrom(...ops),
    dtype: fc.constantFrom<DType>("float32", "float32", "float16", "int32", "uint32"),
    shape: shapeArb(3, LENGTHS),
    axisPick: fc.nat(),
    descending: fc.boolean(),
    kind: fc.constantFrom<Case["kind"]>("top", "mid", "bottom"),
    kPick: fc.oneof(fc.constantFrom(0, 1), fc.double({ min: 0, max: 1, noNaN: true })),
    method: fc.constantFrom<Case["method"]>(
      "linear",
      "lower",
      "higher",
      "nearest",
      "midpoint",
      "median",
    ),
    skipNaN: fc.boolean(),
    layout: fc.constantFrom<LayoutKind>("contiguous", "broadcast", "transposed", "sliced", "zeroD"),
    values: fc.constantFrom<Case["values"]>("full", "full", "duplicates"),
    order: fc.constantFrom<Case["order"]>("random", "random", "sorted", "reversed"),
    right: fc.boolean(),
    variant: fc.constantFrom(...SORT_VARIANTS),
    smallTile: fc.boolean(),
    subgroups: fc.boolean(),
    counters: fc.constantFrom<Case["counters"]>("plain", "packed"),
    prefix: fc.constantFrom<Case["prefix"]>("lookback", "multipass"),
    seed: fc.integer(),
  });
}

property(
  ["sort/sort", "sort/argsort"],
  "sort and argsort equal the WASM reference bit for bit",
  cases(["sort", "argsort"]),
  check,
  {
    numRuns: 60,
    variants: [
      "sort/bitonic",
      "sort/bitonic-local",
      "sort/radix",
      "sort/radix-ballot",
      "sort/bitonic-tree",
      "sort/radix-select",
      "sort/subgroup",
      "sort/merge",
    ],
  },
);

property(
  ["sort/rankK", "sort/kthvalue"],
  "rankK (top, mid, bottom) and kthvalue equal the WASM reference, indices included",
  cases(["rankK", "kthvalue"]),
  check,
  {
    numRuns: 60,
    variants: [
      "sort/bitonic",
      "sort/bitonic-local",
      "sort/radix",
      "sort/radix-ballot",
      "sort/bitonic-tree",
      "sort/radix-select",
      "sort/subgroup",
      "sort/merge",
    ],
  },
);

property(
  "sort/quantile",
  "quantile and median (every method) and their NaN-skipping forms match the WASM reference",
  cases(["quantile"]),
  check,
  {
    numRuns: 60,
    variants: [
      "sort/bitonic",
      "sort/bitonic-local",
      "sort/radix",
      "sort/radix-ballot",
      "sort/select",
    ],
  },
);

property(
  "sort/searchsorted",
  "searchsorted equals the WASM reference",
  cases(["searchsorted"]),
  check,
  { numRuns: 40 },
);

/**
 * Rows long enough for many stages of the bitonic tree at its smallest segments, or many tiles
 * of the radix selection's passes and compaction.
 */
interface TreeCase {
  variant: "bitonic-tree" | "radix-select" | "subgroup" | "merge";
  dtype: DType;
  rows: number;
  length: number;
  /** k as a fraction of the most a 512-pair segment keeps (256). */
  kPick: number;
  kind: "top" | "bottom" | "mid";
  values: "full" | "duplicates" | "rare";
  order: "random" | "sorted" | "reversed";
  /** The streaming forms' segment (used where it is at least twice the window's end). */
  segment: number;
  /** The radix selection's compaction, and its look-back's reads before counting a tile. */
  compaction: "one-pass" | "two-pass";
  lookbackSpin: number;
  seed: number;
}

async function checkTree(c: TreeCase): Promise<void> {
  const bag = new Bag();
  try {
    const rng = mulberry32(c.seed);
    const base = data(
      { dtype: c.dtype, values: c.values, order: c.order } as Case,
      rng,
      c.rows * c.length,
    );
    const k = Math.max(1, Math.round(c.kPick * 256));
    await forcedRankK(bag, {
      base,
      dtype: c.dtype,
      shape: [c.rows, c.length],
      k,
      kind: c.kind,
      plan: c.variant === "bitonic-tree"
        ? { variant: c.variant, tile: 512 }
        : c.variant === "radix-select"
        ? { variant: c.variant, compaction: c.compaction, lookbackSpin: c.lookbackSpin }
        : { variant: c.variant, segment: c.segment },
      label: `${c.kind} k ${k} of [${c.rows}, ${c.length}] ${c.dtype}`,
      // Mid windows past a segment fall back to another variant, and a tree to a tile that
      // holds twice the window: of the forced fields only the compaction is checked.
      allowFallback: true,
      checked: c.variant === "radix-select" ? ["compaction"] : [],
    });
  } finally {
    forcePlan("sort", null);
    bag.dispose();
  }
}

property(
  "sort/rankK",
  "the bitonic tree over many stages (segments of 512), the radix selection over many tiles and the streaming forms over many segments equal the WASM reference",
  fc.record({
    variant: fc.constantFrom<TreeCase["variant"]>(
      "bitonic-tree",
      "radix-select",
      "subgroup",
      "merge",
    ),
    dtype: fc.constantFrom<DType>("float32", "float16", "int32", "uint32"),
    rows: fc.integer({ min: 1, max: 3 }),
    length: fc.integer({ min: 513, max: 20000 }),
    kPick: fc.double({ min: 0, max: 1, noNaN: true }),
    kind: fc.constantFrom<TreeCase["kind"]>("top", "bottom", "mid"),
    values: fc.constantFrom<TreeCase["values"]>("full", "duplicates", "rare", "rare"),
    order: fc.constantFrom<TreeCase["order"]>("random", "random", "sorted", "reversed"),
    segment: fc.constantFrom(512, 1024, 3000, 8192),
    compaction: fc.constantFrom<TreeCase["compaction"]>("one-pass", "two-pass"),
    lookbackSpin: fc.constantFrom(0, 128),
    seed: fc.integer(),
  }),
  checkTree,
  {
    numRuns: 48,
    variants: ["sort/bitonic-tree", "sort/radix-select", "sort/subgroup", "sort/merge"],
  },
);

/**
 * Rank-K of `base` (shape [rows, n]) on the GPU under the forced `plan`, then on WASM: the same
 * values and indices bit for bit, and every GPU plan that ran (after the results, as lazy work
 * runs then) was the forced one in each of its fields (or those `checked`); with
 * `allowFallback`, every plan that ran the forced variant (the harness counts that some did).
 */
async function forcedRankK(
  bag: Bag,
  c: {
    base: gyre.TypedArray;
    dtype: DType;
    shape: number[];
    k: number;
    kind: "top" | "mid" | "bottom";
    plan: Partial<SortChoice>;
    label: string;
    allowFallback?: boolean;
    /** The plan's fields checked (all of `plan`'s by default). */
    checked?: readonly (keyof SortChoice)[];
  },
): Promise<void> {
  const run = (device: gyre.DeviceName) => {
    const x = bag.add(gyre.tensor(c.base, { shape: c.shape, dtype: c.dtype, device }));
    return gyre.rankK(x, c.k, { kind: c.kind }).map((t) => bag.add(t));
  };
  forcePlan("sort", c.plan);
  const got = run("gpu");
  forcePlan("sort", null);
  const want = run("wasm");
  for (let i = 0; i < 2; i++) {
    const [g, w] = await Promise.all([got[i].data(), want[i].data()]);
    expectSame(`${c.label}: output ${i}`, g, w, c.dtype);
  }
  const ran = plansRan("sort");
  assertEqual(ran.length > 0, true, "a GPU sort plan ran");
  for (const record of ran) {
    const choice = record.choice as unknown as Record<string, unknown>;
    if (c.allowFallback && choice.variant !== c.plan.variant) continue;
    for (const field of c.checked ?? (Object.keys(c.plan) as (keyof SortChoice)[])) {
      assertEqual(choice[field], c.plan[field], field);
    }
  }
}

/**
 * The radix selection's compaction over rows of many tiles (both forms, the look-back's
 * fallback).
 */
interface CompactionCase {
  rows: number;
  length: number;
  /** k as a fraction of the most the candidates' segment holds (4096). */
  kPick: number;
  kind: "top" | "bottom" | "mid";
  dtype: DType;
  values: "full" | "duplicates" | "rare";
  compaction: "one-pass" | "two-pass";
  lookbackSpin: number;
  seed: number;
}

property(
  "sort/rankK",
  "the radix selection's one-pass (look-back, its fallback forced at times) and two-pass compactions over many tiles equal the WASM reference",
  fc.record({
    rows: fc.integer({ min: 1, max: 3 }),
    length: fc.integer({ min: 4097, max: 40000 }),
    kPick: fc.double({ min: 0, max: 1, noNaN: true }),
    kind: fc.constantFrom<CompactionCase["kind"]>("top", "bottom", "mid"),
    dtype: fc.constantFrom<DType>("float32", "float32", "int32", "float16"),
    values: fc.constantFrom<CompactionCase["values"]>("rare", "rare", "full", "duplicates"),
    compaction: fc.constantFrom<CompactionCase["compaction"]>("one-pass", "two-pass"),
    lookbackSpin: fc.constantFrom(0, 128),
    seed: fc.integer(),
  }),
  async (c: CompactionCase) => {
    const bag = new Bag();
    try {
      // The window's end fits the candidates' segment (keep <= 4096): mid windows take rows of
      // fewer than 7600 (keep = floor((n - k) / 2) + k) and k up to 8191 - n.
      const length = c.kind === "mid" ? 4097 + (c.length % 3500) : c.length;
      const most = c.kind === "mid" ? 8191 - length : 4096;
      const k = Math.max(1, Math.round(c.kPick * most));
      const rng = mulberry32(c.seed);
      const base = data(
        { dtype: c.dtype, values: c.values, order: "random" } as Case,
        rng,
        c.rows * length,
      );
      await forcedRankK(bag, {
        base,
        dtype: c.dtype,
        shape: [c.rows, length],
        k,
        kind: c.kind,
        plan: { variant: "radix-select", compaction: c.compaction, lookbackSpin: c.lookbackSpin },
        label: `${c.kind} k ${k} of [${c.rows}, ${length}] ${c.dtype} ${c.compaction}`,
      });
    } finally {
      forcePlan("sort", null);
      bag.dispose();
    }
  },
  { numRuns: 30, variants: ["sort/radix-select"] },
);

/**
 * The ballot radix sort over rows of many tiles: onesweep (its fallback forced at times) or
 * not.
 */
interface OnesweepCase {
  rows: number;
  length: number;
  dtype: DType;
  values: "full" | "duplicates" | "rare";
  order: "random" | "sorted" | "reversed";
  descending: boolean;
  /** A whole sort with indices, or the bottom k (the last pass writes a window). */
  kPick: number;
  prefix: "lookback" | "multipass";
  lookbackSpin: number;
  seed: number;
}

property(
  "sort/argsort",
  "the ballot radix sort in one dispatch a pass (look-back offsets, the fallback forced at times) and in three equals the WASM reference over rows of many tiles",
  fc.record({
    rows: fc.integer({ min: 1, max: 3 }),
    length: fc.integer({ min: 2049, max: 30000 }),
    dtype: fc.constantFrom<DType>("float32", "float32", "int32", "uint32", "float16"),
    values: fc.constantFrom<OnesweepCase["values"]>("rare", "full", "duplicates"),
    order: fc.constantFrom<OnesweepCase["order"]>("random", "random", "sorted", "reversed"),
    descending: fc.boolean(),
    kPick: fc.constantFrom(1, 1, 0.01, 0.5),
    prefix: fc.constantFrom<OnesweepCase["prefix"]>("lookback", "lookback", "multipass"),
    lookbackSpin: fc.constantFrom(0, 128),
    seed: fc.integer(),
  }),
  async (c: OnesweepCase) => {
    const bag = new Bag();
    try {
      const base = data(c as unknown as Case, mulberry32(c.seed), c.rows * c.length);
      const k = Math.max(1, Math.round(c.kPick * c.length));
      const kind = c.descending ? "top" : "bottom";
      await forcedRankK(bag, {
        base,
        dtype: c.dtype,
        shape: [c.rows, c.length],
        k,
        kind,
        plan: { variant: "radix-ballot", prefix: c.prefix, lookbackSpin: c.lookbackSpin },
        label: `${kind} ${k} of [${c.rows}, ${c.length}] ${c.dtype} ${c.prefix}`,
      });
    } finally {
      forcePlan("sort", null);
      bag.dispose();
    }
  },
  { numRuns: 30, variants: ["sort/radix-ballot"] },
);

/**
 * Interpolation over many pairs at once: 4096 rows of two values from the whole float32 range
 * (magnitudes 2^-149 to 2^11, both signs, zeros and subnormals), one q a case. Rows of two
 * make each quantile one lerp between them, so a step that rounds otherwise than the reference
 * (a fused multiply-add under cancellation, a flushed subnormal term) shows within a case.
 */
property(
  "sort/quantile",
  "quantiles of many two-value rows (each one lerp) match the WASM reference at any q",
  fc.record({
    q: fc.constantFrom(0.3, 0.5, 0.7, 0.999, 1 - 2 ** -20, 2 ** -20, 2 ** -60),
    method: fc.constantFrom<"linear" | "midpoint">("linear", "midpoint"),
    seed: fc.integer(),
  }),
  async (c: { q: number; method: "linear" | "midpoint"; seed: number }) => {
    const bag = new Bag();
    try {
      const rng = mulberry32(c.seed);
      const rows = 4096;
      const values = new Float32Array(2 * rows).map(() => {
        if (rng() < 0.05) return [0, -0, 2 ** -149, -(2 ** -149)][Math.floor(rng() * 4)];
        return (rng() < 0.5 ? -1 : 1) * 2 ** (-149 + rng() * 160);
      });
      const run = (device: gyre.DeviceName) => {
        const x = bag.add(gyre.tensor(values, { shape: [rows, 2], device }));
        return bag.add(gyre.quantile(x, c.q, { axis: 1, method: c.method }));
      };
      const [g, w] = await Promise.all([run("gpu").data(), run("wasm").data()]);
      expectSame(`quantile ${c.q} ${c.method} of pairs`, g, w, "float32", true);
    } finally {
      bag.dispose();
    }
  },
  { numRuns: 14 },
);
