/**
 * Property tests of the scan kernels (src/gpu/_codegen_scan.ts): cumsum, cumprod, cummax and
 * cummin against the WASM reference (asm/scan.ts) over random shapes, axes, dtypes, exclusive and
 * reverse, on contiguous, broadcast, transposed and sliced inputs, with every variant the scan plan
 * can choose forced through `setPlanOverride`: `row` (teams of every size, with and without
 * subgroups), `multipass` (tiles made small so that rows of a few thousand elements take many tiles
 * and a second level of tile totals, or, in two passes, groups of them), `lookback`, and the `transpose` layout for inner axes.
 *
 * The look-back runs here on lavapipe although the plan never picks it there (no forward progress
 * between workgroups): a tile whose predecessor stays silent reduces that tile itself (the kernel's
 * fallback), so it terminates and stays correct; these properties showed it, after lavapipe was seen
 * to cut a plain spin short (it ends an invocation's loops after 65535 iterations in all).
 *
 * Tolerances. Integers and bools: exact (wrapping sums and products are exact in any order).
 * cummax/cummin: exact, signed zeros included (both devices pick the later of tied elements) and
 * NaN matching NaN. float32 sums: output i is a sum of its prefix computed along chains of at most
 * k roundings, so |gpu - exact| <= gamma_k * S_i where S_i is the sum of |x| over the prefix and
 * gamma_k = k u / (1 - k u), u = 2^-24 (Higham, Accuracy and Stability of Numerical Algorithms,
 * 4.2); the reference adds in f64 and rounds once (1 ULP more). k is derived from the plan's actual
 * choice: the serial chain inside a tile (3 inside a vec4, one per vec4 chunk, up to a subgroup's
 * size across lanes, log2 of the clusters across the workgroup, 3 to apply the prefix), times the
 * levels of tile totals for multipass, plus, for the look-back, up to (subgroup size + states
 * per lane + 2) per preceding tile and a fallback tile's serial segment. float32 products: each rounding is relative,
 * so |gpu - exact| <= gamma_k |exact| with the same k. float16 results round once more to half
 * precision (one half ULP). Non-finite results must match exactly. Inputs avoid subnormals (a GPU
 * may flush them, which would change which of two tied zeros cummax picks) and sums stay far from
 * overflow.
 * @module
 */
import fc from "fast-check";
import * as gyre from "../src/mod.ts";
import * as tuning from "../src/tuning.ts";
import {
  Bag,
  type FloatDomain,
  forcePlan,
  hostData,
  type LayoutKind,
  makeLayout,
  MAX_F32,
  mulberry32,
  property,
  rt,
  shapeArb,
  sizeOf,
  SPECIAL_LENGTHS,
  type Tol,
  within,
} from "./_harness.ts";

type DType = gyre.DType;
type Op = "cumsum" | "cumprod" | "cummax" | "cummin";
const U = 2 ** -24;
const OPS: readonly Op[] = ["cumsum", "cumprod", "cummax", "cummin"];
const DTYPES: readonly DType[] = ["float32", "float16", "int32", "uint32", "bool"];
const FN: Record<Op, (x: gyre.Tensor, o: gyre.ScanOptions) => gyre.Tensor> = {
  cumsum: gyre.cumsum,
  cumprod: gyre.cumprod,
  cummax: gyre.cummax,
  cummin: gyre.cummin,
};
const caps = rt.caps!;

interface Case {
  op: Op;
  dtype: DType;
  shape: number[];
  /** Which axis: drawn, then taken modulo the rank; negative half the time. */
  axisPick: number;
  negativeAxis: boolean;
  exclusive: boolean;
  reverse: boolean;
  layout: LayoutKind;
  /** Float sums over small integers: exact in any order, so compared exactly. */
  integers: boolean;
  override: Partial<tuning.ScanChoice> | null;
  seed: number;
}

/** Special values without subnormals (see the module doc). */
const SPECIALS = [NaN, Infinity, -Infinity, 0, -0, 1, -1, 0.5, -2.5];

function domain(c: Case, len: number): FloatDomain {
  // Small integers: sums, and products of -2..2 (overflow included), are exact in any order.
  if (c.integers) {
    const r = c.op === "cumprod" ? 2 : 8;
    return { kind: "uniform", lo: -r, hi: r, integers: true };
  }
  const half = c.dtype === "float16";
  switch (c.op) {
    case "cumsum":
      // float16 sums stay below its 65504 maximum.
      return {
        kind: "log",
        minExp: half ? -8 : -20,
        maxExp: half ? Math.min(3, Math.log2(30000 / Math.max(1, len))) : 20,
        specials: SPECIALS,
        pSpecial: 0.02,
      };
    case "cumprod": {
      // log2 |prefix| is a random walk (a straight line for a broadcast input): steps of at most w
      // keep it well inside the normal range.
      const steps = c.layout === "broadcast" ? len : Math.sqrt(len);
      const w = Math.min(1, 30 / Math.max(1, steps));
      return { kind: "log", minExp: -w, maxExp: w, specials: SPECIALS, pSpecial: 0.01 };
    }
    default:
      return {
        kind: "log",
        minExp: half ? -12 : -30,
        maxExp: half ? 15 : 30,
        specials: [...SPECIALS, MAX_F32, -MAX_F32],
        pSpecial: 0.1,
      };
  }
}

/** Roundings along the longest chain behind one output, for the plan `choice` (module doc). */
function chainLength(choice: tuning.ScanChoice, len: number): number {
  const sg = choice.subgroups ? caps.subgroupMaxSize : 1;
  const wg = choice.workgroupSize;
  const subTile = wg * choice.elementsPerThread;
  const tile = subTile * (choice.variant === "lookback" ? choice.subTiles : 1);
  // Inside a sub-tile, then one rounding per earlier sub-tile of the tile.
  const inTile = 3 + choice.elementsPerThread / 4 + sg + Math.log2(wg) + 3 + choice.subTiles;
  const tiles = len <= subTile ? 1 : Math.ceil(len / tile);
  // A column walk (inner axes only, but harmless as a bound): one rounding per element.
  if (choice.layout === "columns") return Math.max(len + 4, inTile);
  if (choice.variant === "row" || tiles <= 1) return inTile;
  if (choice.variant === "lookback") {
    const fallback = tile / (choice.subgroups ? caps.subgroupMinSize : 1) + sg;
    return inTile + fallback + tiles * (sg + choice.lookbackStates + 2);
  }
  if (choice.variant === "multipass" && choice.superTiles > 1 && choice.subgroups) {
    // Two passes (sums and products): a tile's total (its chunks, the vec4, the subgroup, the
    // subgroups in turn), its group's (S tiles in turn), the final pass's fold of the group totals
    // before it (strided over the workgroup, then a subgroup and the subgroups in turn) and of
    // the earlier tiles of its group, then the tile's own scan.
    const tileTotal = choice.elementsPerThread / 4 + 2 + sg + wg / sg;
    const groups = Math.ceil(tiles / choice.superTiles);
    return inTile + tileTotal + choice.superTiles + Math.ceil(groups / wg) + 1 + sg + wg / sg;
  }
  let levels = 0;
  for (let t = tiles; t > 1; t = Math.ceil(t / tile)) levels++;
  return inTile * (levels + 1) + levels;
}

/**
 * Per output element, in scan order: the sum of |x| over its prefix (finite x; the S_i of the sum
 * bound) and the prefix's length (the roundings of a product).
 */
function prefixStats(
  x: ArrayLike<number>,
  shape: number[],
  axis: number,
  exclusive: boolean,
  reverse: boolean,
): { magnitude: Float64Array; count: Uint32Array } {
  const len = shape[axis];
  const inner = sizeOf(shape.slice(axis + 1));
  const outer = sizeOf(shape.slice(0, axis));
  const magnitude = new Float64Array(x.length);
  const count = new Uint32Array(x.length);
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < inner; i++) {
      let s = 0;
      for (let k = 0; k < len; k++) {
        const j = reverse ? len - 1 - k : k;
        const at = (o * len + j) * inner + i;
        const v = Math.abs(x[at]);
        if (exclusive) magnitude[at] = s;
        if (Number.isFinite(v)) s += v;
        if (!exclusive) magnitude[at] = s;
        count[at] = exclusive ? k : k + 1;
      }
    }
  }
  return { magnitude, count };
}

async function check(c: Case): Promise<void> {
  const bag = new Bag();
  try {
    const rank = c.shape.length;
    const axis = rank === 0 ? 0 : c.axisPick % rank;
    const options = {
      axis: c.negativeAxis ? axis - Math.max(rank, 1) : axis,
      exclusive: c.exclusive,
      reverse: c.reverse,
    };
    const len = rank === 0 ? 1 : c.shape[axis];
    const rng = mulberry32(c.seed);
    const layout = makeLayout(rng, c.layout, c.shape);
    const base = hostData(rng, c.dtype, sizeOf(layout.baseShape), domain(c, len));
    const on = (device: gyre.DeviceName) => {
      const t = bag.add(gyre.tensor(base, { shape: layout.baseShape, dtype: c.dtype, device }));
      const view = layout.kind === "broadcast"
        ? bag.add(t.broadcastTo(c.shape))
        : bag.add(layout.view(t));
      return view;
    };
    const gx = on("gpu");
    const wx = on("wasm");
    forcePlan("scan", c.override);
    const got = bag.add(FN[c.op](gx, options));
    forcePlan("scan", null);
    const want = bag.add(FN[c.op](wx, options));
    const [g, w, x] = await Promise.all([got.data(), want.data(), wx.data()]);
    const label = `${c.op} ${c.dtype} [${c.shape}] axis ${options.axis} ` +
      `${c.exclusive ? "exclusive " : ""}${c.reverse ? "reverse " : ""}${layout.describe} ` +
      `plan ${JSON.stringify(c.override)}`;
    if (got.dtype !== want.dtype || String(got.shape) !== String(c.shape)) {
      throw new Error(`${label}: ${got.dtype} [${got.shape}] vs ${want.dtype} [${want.shape}]`);
    }
    const float = c.dtype === "float32" || c.dtype === "float16";
    if (!float) {
      expectAll(label, g, w, (i) => g[i] === w[i]);
      return;
    }
    const half = c.dtype === "float16";
    if (c.op === "cummax" || c.op === "cummin" || c.integers) {
      expectAll(label, g, w, (i) => within(g[i], w[i], { ulp: 0 }, { half, signedZero: true }));
      return;
    }
    const inner = rank === 0 ? 1 : sizeOf(c.shape.slice(axis + 1));
    const k = chainLength(choiceOf(c, Math.max(1, sizeOf(c.shape) / len), len, inner), len);
    const gamma = (m: number) => (m * U) / (1 - m * U);
    const stats = prefixStats(x, rank === 0 ? [1] : c.shape, axis, c.exclusive, c.reverse);
    // Sums: gamma_k times the prefix's magnitude. Products: both sides round once per factor.
    const tolerance = (i: number): Tol =>
      c.op === "cumsum"
        ? { ulp: 1, atol: gamma(k) * stats.magnitude[i] }
        : { ulp: 1, rtol: gamma(2 * stats.count[i] + 1) };
    expectAll(label, g, w, (i) => {
      if (!Number.isFinite(w[i])) return Object.is(g[i], w[i]);
      return within(g[i], w[i], tolerance(i), { half });
    }, (i) => `(tolerance ${JSON.stringify(tolerance(i))})`);
  } finally {
    forcePlan("scan", null);
    bag.dispose();
  }
}

/** The plan the GPU ran for a case (the rule, then the case's override, then the coercions). */
function choiceOf(c: Case, rows: number, len: number, inner: number): tuning.ScanChoice {
  const op = ({ cumsum: "sum", cumprod: "prod", cummax: "max", cummin: "min" } as const)[c.op];
  return tuning.planScan(caps, { rows, rowLength: len, inner, op }, c.override);
}

function expectAll(
  label: string,
  got: ArrayLike<number>,
  want: ArrayLike<number>,
  ok: (i: number) => boolean,
  context: (i: number) => string = () => "",
): void {
  const bad: string[] = [];
  let count = 0;
  for (let i = 0; i < got.length; i++) {
    if (ok(i)) continue;
    if (++count <= 5) bad.push(`  [${i}] gpu ${got[i]} wasm ${want[i]} ${context(i)}`);
  }
  if (got.length !== want.length) {
    throw new Error(`${label}: lengths ${got.length}, ${want.length}`);
  }
  if (count) throw new Error(`${label}: ${count} of ${got.length} differ\n${bad.join("\n")}`);
}

/** Cases: a shape with one long axis (mostly the scanned one), every op, dtype and layout. */
function cases(
  override: fc.Arbitrary<Partial<tuning.ScanChoice> | null>,
  options: { maxRank?: number; lengths?: readonly number[]; layouts?: readonly LayoutKind[] } = {},
): fc.Arbitrary<Case> {
  return fc.record({
    op: fc.constantFrom(...OPS),
    dtype: fc.constantFrom(...DTYPES),
    shape: shapeArb(options.maxRank ?? 3, options.lengths ?? SPECIAL_LENGTHS),
    axisPick: fc.nat(),
    negativeAxis: fc.boolean(),
    exclusive: fc.boolean(),
    reverse: fc.boolean(),
    layout: fc.constantFrom(
      ...(options.layouts ?? (["contiguous", "broadcast", "transposed", "sliced"] as const)),
    ),
    integers: fc.boolean(),
    override,
    seed: fc.nat(),
  }).map((c) => {
    // Scan the long axis most of the time.
    const long = c.shape.indexOf(Math.max(...c.shape));
    return c.axisPick % 4 !== 0 && long >= 0 ? { ...c, axisPick: long } : c;
  });
}

const small = { workgroupSize: 32, elementsPerThread: 4 };

property(
  ["scan/cumsum", "scan/cumprod", "scan/cummax", "scan/cummin"],
  "row variant: teams of every size, subgroups or shared memory",
  cases(
    fc.record({
      variant: fc.constant("row" as const),
      subgroups: fc.boolean(),
      workgroupSize: fc.constantFrom(64, 256),
      elementsPerThread: fc.constantFrom(4, 16, 32),
    }),
  ),
  check,
  { numRuns: 60, variants: ["scan/row"] },
);

property(
  ["scan/cumsum", "scan/cumprod", "scan/cummax", "scan/cummin"],
  "multipass variant: many small tiles, two levels of tile totals",
  cases(
    fc.record({
      variant: fc.constant("multipass" as const),
      subgroups: fc.boolean(),
      descendingFinalPass: fc.boolean(),
      superTiles: fc.constantFrom(1, 2, 4, 32),
      ...Object.fromEntries(Object.entries(small).map(([k, v]) => [k, fc.constant(v)])),
    }) as fc.Arbitrary<Partial<tuning.ScanChoice>>,
    { lengths: [129, 257, 1021, 4099, 17000], maxRank: 2 },
  ),
  check,
  { numRuns: 25, variants: ["scan/multipass"] },
);

property(
  ["scan/cumsum", "scan/cumprod", "scan/cummax", "scan/cummin"],
  "lookback variant: many tiles, window (subgroup) and one-at-a-time look-back",
  cases(
    fc.record({
      variant: fc.constant("lookback" as const),
      subgroups: fc.boolean(),
      workgroupSize: fc.constantFrom(32, 64),
      elementsPerThread: fc.constantFrom(4, 8, 12),
      lookbackStates: fc.constantFrom(1, 2, 8),
      earlyAggregate: fc.boolean(),
      wideStates: fc.boolean(),
      subTiles: fc.constantFrom(1, 2, 3),
    }),
    { lengths: [129, 257, 1021, 4099, 17000], maxRank: 2 },
  ),
  check,
  { numRuns: 25, variants: ["scan/lookback"] },
);

property(
  ["scan/cumsum", "scan/cumprod", "scan/cummax", "scan/cummin"],
  "strided, transpose and columns layouts for inner axes",
  cases(
    fc.record({
      layout: fc.constantFrom("transpose" as const, "columns" as const, "strided" as const),
      variant: fc.constantFrom("row" as const, "multipass" as const, "lookback" as const),
      ...Object.fromEntries(Object.entries(small).map(([k, v]) => [k, fc.constant(v)])),
    }) as fc.Arbitrary<Partial<tuning.ScanChoice>>,
    { maxRank: 3 },
  ).filter((c) => c.shape.length >= 2),
  check,
  { numRuns: 20, variants: ["scan/strided", "scan/transpose", "scan/columns"] },
);

property(
  ["scan/cumsum", "scan/cummax"],
  "over 1 Mi elements: the plan's own choice and the look-back",
  fc.record({
    op: fc.constantFrom<Op>("cumsum", "cummax"),
    dtype: fc.constantFrom<DType>("float32", "int32"),
    shape: fc.constantFrom<number[]>([1_048_583], [3, 400_009]),
    axisPick: fc.constant(1),
    negativeAxis: fc.constant(true),
    exclusive: fc.boolean(),
    reverse: fc.boolean(),
    layout: fc.constant<LayoutKind>("contiguous"),
    integers: fc.constant(true),
    override: fc.constantFrom(null, { variant: "lookback" as const }),
    seed: fc.nat(),
  }),
  check,
  { numRuns: 3 },
);
