/**
 * WGSL of the sort family's GPU kernels (src/gpu/sort.ts runs them), all over rows of 32-bit
 * words, ordered by keys (floats with -0 as +0, or in total order for quantiles, and NaN
 * largest; descending as the complement) with ties broken by index:
 * - `keys`: each row's ordered keys and indices, padded to a power of two with the largest key,
 *   which sorts after every element (padding's indices come last);
 * - `bitonic`: one compare-exchange step (j, k) of a bitonic sort of every row's (key, index)
 *   pairs, ordered by key then index: a strict total order, so the unstable network gives the
 *   stable order, the same as the WASM reference's radix sort;
 * - `bitonic-local`: the steps with j below a tile of SORT_TILE elements, in workgroup memory;
 * - `radix-count` and `radix-scatter` / `radix-ballot`: one stable pass of an LSD radix sort over
 *   8-bit digits of the keys (count each tile's digits; the host scans the counts per row,
 *   digit-major, with the scan family's kernels; then each tile ranks its pairs by the digit in
 *   workgroup memory, by nine one-bit splits or by subgroup ballots, and writes each pair at its
 *   digit's offset plus its rank among the tile's pairs of that digit); the first pass makes
 *   the keys from x, the last writes the window's values and indices; with `lookback`
 *   (onesweep) the ballot scatter finds each tile's digit offsets itself, by a look-back over
 *   the row's tiles, after `radix-hist` (every pass's digit histogram at once, into words
 *   zeroed by `GpuHost.zero`);
 * - `rank-tile`: one stage of the bitonic tree (segments sorted in workgroup memory, each
 *   keeping the window's end);
 * - `rank-stream`: one stage of the streaming forms (segments streamed through a buffer in
 *   workgroup memory against a running threshold, each keeping the window's end);
 * - `select-hist` and `select-pick`: one pass of the radix selection of quantiles' order
 *   statistics or of Rank-K's threshold (a digit's histogram among keys matching each prefix;
 *   the digit picked);
 * - `rank-count` and `rank-compact`: Rank-K's candidates below and at the threshold, counted per
 *   tile and compacted after a scan of the counts, or (`lookback`) compacted in one pass;
 * - `gather`: the window [start, start + count) of each sorted row: values by index, and the
 *   indices;
 * - `quantile`: each row's quantiles from its sorted values, at order statistics and weights the
 *   host computed (the same float64 arithmetic as the WASM reference);
 * - `search`: binary searches of ordered keys in a sorted sequence.
 * @module
 */

import { ballotPoolWords, SELECT_TILE, SORT_WORKGROUP, STREAM_CHUNK } from "../plans/sort.ts";
import { workgroupInclusiveSum } from "./_codegen_workgroup.ts";

export { SELECT_TILE, SORT_WORKGROUP, STREAM_CHUNK };

/** The kernels of the sort family. */
export type SortStage =
  | "keys"
  | "bitonic"
  | "bitonic-local"
  | "radix-count"
  | "radix-scatter"
  | "radix-ballot"
  | "radix-hist"
  | "gather"
  | "quantile"
  | "select-hist"
  | "select-pick"
  | "rank-tile"
  | "rank-count"
  | "rank-compact"
  | "rank-stream"
  | "search";

/** Elements a workgroup of the one-bit-split radix scatter takes (4 per invocation). */
export const RADIX_TILE = 1024;

/** Options of a stage's WGSL: subgroup operations, pairs per invocation, ballot mask words. */
export interface SortKernelOptions {
  subgroups?: boolean;
  perInvocation?: number;
  words?: number;
  /** The ballot scatter's counters in 16-bit halves of atomic words (else plain words). */
  packed?: boolean;
  /** The smallest subgroup the ballot scatter's memory is sized for. */
  minSubgroup?: number;
  /** A radix pass reading x (keys made on the fly). */
  first?: boolean;
  /** A radix pass writing the window's values and indices. */
  last?: boolean;
  /** Order statistics a row the selection kernels find at once. */
  targets?: number;
  /** Pairs a workgroup of the bitonic tree sorts. */
  tile?: number;
  /** The selection's pick finds one rank a row (Rank-K's threshold), not quantiles. */
  rank?: boolean;
  /** Rank-K's compaction in one pass: each tile's offsets by a look-back over its row's tiles. */
  lookback?: boolean;
}

/** Elements a workgroup of `bitonic-local` sorts in workgroup memory (8 KiB of keys and indices). */
export const SORT_TILE = 1024;

/** Every option of a stage's WGSL, once: the cache key names each that is set. */
const OPTION_FIELDS: Record<keyof SortKernelOptions, true> = {
  subgroups: true,
  perInvocation: true,
  words: true,
  packed: true,
  minSubgroup: true,
  first: true,
  last: true,
  targets: true,
  tile: true,
  rank: true,
  lookback: true,
};
const OPTION_NAMES = Object.keys(OPTION_FIELDS) as (keyof SortKernelOptions)[];

/**
 * Cache key of a stage's kernel (its WGSL depends on the stage and its options). Built on every
 * dispatch of the radix passes: a loop over a fixed list, not a sort of the options' entries
 * (which took a sixth of a top-k's host time on the H200).
 */
export function sortKey(stage: SortStage, options: SortKernelOptions = {}): string {
  let key = `sort:${stage}`;
  for (const name of OPTION_NAMES) {
    const value = options[name];
    if (value !== undefined) key += `,${name}=${value}`;
  }
  return key;
}

/**
 * WGSL: the ordered key of 32-bit words of type `kind` (0 float32, 1 int32, 2 uint32, 3 float32
 * in total order: -0 below +0), by selects: branches on loaded words make each load wait for
 * the one before (a radix pass over 16 Mi floats took 0.35 ms with them, 0.2 without, on the
 * H200); and its inverse.
 */
const ORDERED_KEY = [
  "fn ordered_key(b: u32, kind: u32) -> u32 {",
  "  let v = select(b, 0u, b == 0x80000000u && kind == 0u);",
  "  var f = select(v ^ 0x80000000u, ~v, (v >> 31u) != 0u);",
  "  f = select(f, 0xffffffffu, (b & 0x7fffffffu) > 0x7f800000u);",
  "  return select(select(f, b, kind == 2u), b ^ 0x80000000u, kind == 1u);",
  "}",
  // The inverse, where the key stands for one word: floats' -0 (kind 0) and NaN (kinds 0 and 3)
  // share their keys, so callers read those words from x (`merged_key`).
  "fn key_word(key: u32, kind: u32) -> u32 {",
  "  let float = select(~key, key ^ 0x80000000u, key >= 0x80000000u);",
  "  return select(select(float, key, kind == 2u), key ^ 0x80000000u, kind == 1u);",
  "}",
  "fn merged_key(key: u32, kind: u32) -> bool {",
  "  return (kind == 0u && key == 0x80000000u) || ((kind == 0u || kind == 3u) && key == 0xffffffffu);",
  "}",
].join("\n");

/**
 * WGSL: floor(h) and the float32 rounding (to nearest, ties to even) of h - floor(h) for h = a q,
 * a < 2^31 an integer and q a float32 in [0, 1] given by its bits, exactly: the f64 arithmetic
 * of the WASM reference (exact there for a < 2^29), in 64-bit integers made of u32 pairs (x low,
 * y high). q = m 2^-s with m a 24-bit integer and s >= 24, so a m < 2^55 is exact.
 */
export const QUANTILE_INDEX = [
  "fn mul_wide(a: u32, b: u32) -> vec2<u32> {",
  "  let a0 = a & 0xffffu; let a1 = a >> 16u; let b0 = b & 0xffffu; let b1 = b >> 16u;",
  "  let p00 = a0 * b0; let p01 = a0 * b1; let p10 = a1 * b0; let p11 = a1 * b1;",
  "  let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);",
  "  return vec2<u32>((p00 & 0xffffu) | (mid << 16u), p11 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));",
  "}",
  "fn shr_wide(v: vec2<u32>, n: u32) -> vec2<u32> {",
  "  if (n == 0u) { return v; }",
  "  if (n >= 64u) { return vec2<u32>(0u, 0u); }",
  "  if (n >= 32u) { return vec2<u32>(v.y >> (n - 32u), 0u); }",
  "  return vec2<u32>((v.x >> n) | (v.y << (32u - n)), v.y >> n);",
  "}",
  "fn low_wide(v: vec2<u32>, n: u32) -> vec2<u32> {",
  "  if (n >= 64u) { return v; }",
  "  if (n >= 32u) { return vec2<u32>(v.x, select(v.y & ((1u << (n - 32u)) - 1u), 0u, n == 32u)); }",
  "  return vec2<u32>(select(v.x & ((1u << n) - 1u), 0u, n == 0u), 0u);",
  "}",
  // v / 2^t rounded to nearest, ties to even.
  "fn round_wide(v: vec2<u32>, t: u32) -> u32 {",
  "  if (t == 0u) { return v.x; }",
  "  if (t >= 64u) { return 0u; }",
  "  var r = shr_wide(v, t).x;",
  "  let dropped = low_wide(v, t);",
  "  let half = select(vec2<u32>(0u, 1u << (t - 33u)), vec2<u32>(1u << (t - 1u), 0u), t <= 32u);",
  "  let above = dropped.y > half.y || (dropped.y == half.y && dropped.x > half.x);",
  "  let tie = dropped.x == half.x && dropped.y == half.y;",
  "  if (above || (tie && (r & 1u) == 1u)) { r += 1u; }",
  "  return r;",
  "}",
  "fn quantile_index(a: u32, qb: u32) -> vec2<u32> {",
  "  if (qb == 0u || a == 0u) { return vec2<u32>(0u, 0u); }",
  "  if (qb == 0x3f800000u) { return vec2<u32>(a, 0u); }",
  "  let e = qb >> 23u;",
  "  let m = select(qb & 0x7fffffu, (qb & 0x7fffffu) | 0x800000u, e != 0u);",
  "  let s = 150u - max(e, 1u);",
  "  let prod = mul_wide(a, m);",
  "  let whole = shr_wide(prod, s).x;",
  "  let rem = low_wide(prod, s);",
  "  if (rem.x == 0u && rem.y == 0u) { return vec2<u32>(whole, 0u); }",
  // The leading bit of the remainder, and the weight rem 2^-s in [2^(lead - s), 2^(lead - s + 1)).
  "  let lead = select(firstLeadingBit(rem.x), 32u + firstLeadingBit(rem.y), rem.y != 0u);",
  "  let biased = i32(lead) - i32(s) + 127;",
  // Below the normal range the weight is an exact multiple of 2^-149 (s <= 149).
  "  if (biased < 1) { return vec2<u32>(whole, rem.x << (149u - s)); }",
  "  var mant = 0u;",
  "  var exponent = u32(biased);",
  "  if (lead <= 23u) {",
  "    mant = rem.x << (23u - lead);",
  "  } else {",
  "    mant = round_wide(rem, lead - 23u);",
  "    if (mant == 0x1000000u) { mant = 0x800000u; exponent += 1u; }",
  "  }",
  "  return vec2<u32>(whole, (exponent << 23u) | (mant & 0x7fffffu));",
  "}",
].join("\n");

/**
 * WGSL: the quantile between order statistics a (at lo) and b with weight g in [0, 1) given by
 * its bits, by method code (as asm/sort.ts `sort_quantile_rows`, in the same f32 operations).
 * The weight is read by its bits: a subnormal g (q near 2^-140) would be flushed to zero by GPUs
 * that flush (the H200 does) where the reference keeps it; diff g for a subnormal g (linear only)
 * is (diff (g 2^64)) 2^-64 with g 2^64 made from its bits, rounded as diff g wherever normal.
 * Below 2^-102 a subnormal term (a, b, b - a or (b - a) w) moves the result, and the H200
 * flushes them (the property test drew each case: b - a, a, (b - a) / 2). Where both a and b are
 * below 2^-120, the whole lerp runs in integers of 2^-149 (`tiny_lerp`), each rounding as
 * float32's; elsewhere below 2^-102 the same float steps run on words whose exponents are raised
 * by 64 (subnormals normalized; no float multiply, which the H200's compiler may fold), with
 * the product rounded from the significands' exact product as the reference rounds it; so does
 * a below 2^-102 with b far above it where (b - a) w is below 2^-100 (a tiny weight), b
 * below 2^-102 with a far below it where (b - a)(1 - w) is, and the median's mean of two values
 * below 2^-102.
 */
const INTERPOLATE = [
  // x 2^149, an integer, for |x| < 2^-120 (exponent field at most 7).
  "fn units(x: f32) -> i32 {",
  "  let b = bitcast<u32>(x);",
  "  let e = (b >> 23u) & 0xffu;",
  "  let m = b & 0x7fffffu;",
  "  let mag = select((m | 0x800000u) << (e - 1u), m, e == 0u);",
  "  return select(i32(mag), -i32(mag), (b >> 31u) != 0u);",
  "}",
  // An integer below 2^31 rounded to 24 significant bits (float32's).
  "fn round24(n: u32) -> u32 {",
  "  if (n < 0x1000000u) { return n; }",
  "  let t = firstLeadingBit(n) - 23u;",
  "  return round_wide(vec2<u32>(n, 0u), t) << t;",
  "}",
  // The reference's lerp where |a|, |b| < 2^-120, all in integers of 2^-149: diff = b - a and
  // diff w (w by its bits; 1 - w from b where `from_b`) rounded as float32 rounds them (24 bits,
  // or to whole units below 2^-126), then a + low or b - low, and its float32 word (subnormal
  // results written by their bits: no float operation here flushes).
  "fn tiny_lerp(a: f32, b: f32, wb: u32, from_b: bool) -> f32 {",
  "  let ua = units(a);",
  "  let ub = units(b);",
  "  let diff = round24(u32(ub - ua));",
  "  let e = wb >> 23u;",
  "  let s = 150u - max(e, 1u);",
  "  let m = select(wb & 0x7fffffu, (wb & 0x7fffffu) | 0x800000u, e != 0u);",
  "  let prod = mul_wide(diff, m);",
  "  var low = 0u;",
  "  if (prod.x != 0u || prod.y != 0u) {",
  "    let lead = select(firstLeadingBit(prod.x), 32u + firstLeadingBit(prod.y), prod.y != 0u);",
  "    let t = max(s, max(lead, 23u) - 23u);",
  "    if (t < 64u) { low = round_wide(prod, t) << (t - s); }",
  "  }",
  "  let r = select(ua + i32(low), ub - i32(low), from_b);",
  "  let mag = round24(u32(abs(r)));",
  "  let sign = select(0u, 0x80000000u, r < 0);",
  "  if (mag < 0x800000u) { return bitcast<f32>(mag | sign); }",
  "  let top = firstLeadingBit(mag);",
  "  return bitcast<f32>(((top - 22u) << 23u) | ((mag >> (top - 23u)) & 0x7fffffu) | sign);",
  "}",
  // v 2^64 by its word, for |v| < 2^-102 (subnormals normalized; zeros kept).
  "fn scale_up(v: f32) -> f32 {",
  "  let bits = bitcast<u32>(v);",
  "  let m = bits & 0x7fffffu;",
  "  if ((bits & 0x7f800000u) != 0u) { return bitcast<f32>(bits + 0x20000000u); }",
  "  if (m == 0u) { return v; }",
  "  let top = firstLeadingBit(m);",
  "  return bitcast<f32>((bits & 0x80000000u) | ((top + 42u) << 23u) | ((m << (23u - top)) & 0x7fffffu));",
  "}",
  // v 2^-64 by its word (v normal; a result below the normal range is a signed zero, the
  // flushing the tests allow).
  "fn scale_down(v: f32) -> f32 {",
  "  let bits = bitcast<u32>(v);",
  "  if (((bits >> 23u) & 0xffu) <= 64u) { return bitcast<f32>(bits & 0x80000000u); }",
  "  return bitcast<f32>(bits - 0x20000000u);",
  "}",
  // The reference's float32 rounding of v w (24 bits, or whole units of 2^-149 below 2^-126),
  // times 2^up, for v = (the normal positive float of word vb) 2^-down and w by its bits: from
  // the exact product of the significands, built on f32(r) by its exponent field.
  "fn ref_product(vb: u32, down: i32, wb: u32, up: i32) -> f32 {",
  "  let ev = i32(vb >> 23u) - down;",
  "  let e = wb >> 23u;",
  "  let s = i32(150u - max(e, 1u));",
  "  let mw = select(wb & 0x7fffffu, (wb & 0x7fffffu) | 0x800000u, e != 0u);",
  "  let prod = mul_wide((vb & 0x7fffffu) | 0x800000u, mw);",
  "  if (prod.x == 0u && prod.y == 0u) { return 0.0; }",
  "  let lead = i32(select(firstLeadingBit(prod.x), 32u + firstLeadingBit(prod.y), prod.y != 0u));",
  "  let t = max(max(lead - 23, 1 + s - ev), 0);",
  "  if (t >= 64) { return 0.0; }",
  "  let r = round_wide(prod, u32(t));",
  "  if (r == 0u) { return 0.0; }",
  "  return bitcast<f32>(u32(i32(bitcast<u32>(f32(r))) + ((t + ev - 150 - s + up) << 23u)));",
  "}",
  // x as a float32 value (rounded): `zero` is 0 at run time, unknown to the compiler, so a
  // product passed through here cannot be fused into the add that follows (the H200 fused
  // b - diff (1 - w) into one multiply-add: 0.7 of [-60.15, 31.52] came out 4.0211458 for the
  // reference's 4.0211449).
  "fn rounded(x: f32, zero: u32) -> f32 { return bitcast<f32>(bitcast<u32>(x) | zero); }",
  "fn interpolate(a: f32, b: f32, gb: u32, lo: u32, method: u32) -> f32 {",
  // lo, an order statistic's index, is below 2^31.
  "  let zero = lo >> 31u;",
  "  let g = bitcast<f32>(gb);",
  "  let some = gb != 0u;",
  "  if (method == 1u) { return a; }",
  "  if (method == 2u) { return select(a, b, some); }",
  "  if (method == 3u) { return select(a, b, g > 0.5 || (g == 0.5 && (lo & 1u) == 1u)); }",
  "  let small = ((bitcast<u32>(a) >> 23u) & 0xffu) <= 24u && ((bitcast<u32>(b) >> 23u) & 0xffu) <= 24u;",
  // The median's mean below 2^-102 on exponent-raised words (a subnormal term kept).
  "  if (method == 5u && small) { return select(a, scale_down((scale_up(a) + scale_up(b)) * 0.5), some); }",
  "  if (method == 5u) { return select(a, (a + b) / 2.0, some); }",
  "  var w = g;",
  "  if (method == 4u) { w = select(0.0, 0.5, some); }",
  "  let wbits = select(gb, select(0u, 0x3f000000u, some), method == 4u);",
  "  let ea = (bitcast<u32>(a) >> 23u) & 0xffu;",
  "  let eb = (bitcast<u32>(b) >> 23u) & 0xffu;",
  "  if (ea <= 7u && eb <= 7u && units(a) != units(b)) {",
  "    if (w >= 0.5) { return tiny_lerp(a, b, bitcast<u32>(1.0 - w), true); }",
  "    return tiny_lerp(a, b, wbits, false);",
  "  }",
  // Below 2^-102 (a flushed subnormal term would move the result): the same steps on words
  // scaled by 2^64, each product rounded as the reference rounds it.
  "  if (ea <= 24u && eb <= 24u && bitcast<u32>(a) != bitcast<u32>(b)) {",
  "    let sa = scale_up(a);",
  "    let sb = scale_up(b);",
  "    let d = sb - sa;",
  "    if (d > 0.0) {",
  "      if (w >= 0.5) { return scale_down(sb - ref_product(bitcast<u32>(d), 64, bitcast<u32>(1.0 - w), 64)); }",
  "      return scale_down(sa + ref_product(bitcast<u32>(d), 64, wbits, 64));",
  "    }",
  "  }",
  "  let diff = b - a;",
  "  var low = rounded(diff * w, zero);",
  // a below 2^-102 and b far above it: a product below 2^-100, which may be subnormal, added to
  // a on exponent-raised words.
  "  if (ea <= 24u && w < 0.5 && diff > 0.0 && abs(low) < 0x1p-100f) {",
  "    return scale_down(scale_up(a) + ref_product(bitcast<u32>(diff), 0, wbits, 64));",
  "  }",
  // The same from b: b below 2^-102 and a far below it (w near 1).
  "  let high = rounded(diff * (1.0 - w), zero);",
  "  if (eb <= 24u && w >= 0.5 && diff > 0.0 && high < 0x1p-100f) {",
  "    return scale_down(scale_up(b) - ref_product(bitcast<u32>(diff), 0, bitcast<u32>(1.0 - w), 64));",
  "  }",
  "  if (method != 4u && some && gb < 0x00800000u) { low = rounded((diff * (f32(gb) * 0x1p-85f)) * 0x1p-64f, zero); }",
  "  return select(a + low, b - high, w >= 0.5);",
  "}",
].join("\n");

/**
 * WGSL: adds 1 at `counter(index)` (an atomic in workgroup memory) for this invocation where
 * `ok`. With subgroups, a subgroup whose lanes all hold one index (the high bytes of floats of
 * one magnitude, which would make every invocation hit one counter) adds them with one atomic.
 */
function tallyAdd(
  subgroups: boolean,
  counter: (index: string) => string,
  index: string,
  ok: string,
): string[] {
  if (!subgroups) return [`  if (${ok}) { atomicAdd(${counter(index)}, 1u); }`];
  return [
    `  { let d = select(0xffffffffu, ${index}, ${ok});`,
    "    let low = subgroupMin(d);",
    "    let high = subgroupMax(d);",
    "    let lanes = subgroupAdd(1u);",
    "    if (d != 0xffffffffu) {",
    `      if (low == high) { if (sg_lane == 0u) { atomicAdd(${counter("d")}, lanes); } }`,
    `      else { atomicAdd(${counter("d")}, 1u); }`,
    "    } }",
  ];
}

/** WGSL: an inclusive scan of `sums` (one word an invocation) by Hillis and Steele. */
function inclusiveScan(indent: string): string[] {
  return workgroupInclusiveSum("sums", "l", SORT_WORKGROUP, indent);
}

/**
 * WGSL: one compare-exchange of a bitonic step (j, k) on (key, index) pairs in workgroup memory
 * (`sk`, `si`), pair q's first at a = q with the bit of j cleared; ascending where bit k of the
 * position `at` (of a) is clear.
 */
function compareExchange(indent: string, at: string): string[] {
  return [
    // j is a power of two: q's bits above j's moved up one (no division).
    "let a = ((q & ~(j - 1u)) << 1u) | (q & (j - 1u));",
    "let b = a + j;",
    "let ka = sk[a];",
    "let kb = sk[b];",
    "let ia = si[a];",
    "let ib = si[b];",
    "let greater = ka > kb || (ka == kb && ia > ib);",
    `if (greater == ((${at} & k) == 0u)) {`,
    "  sk[a] = kb;",
    "  sk[b] = ka;",
    "  si[a] = ib;",
    "  si[b] = ia;",
    "}",
  ].map((line) => indent + line);
}

/** The flat invocation index over a grid folded into two dimensions. */
const MAIN = [
  `@compute @workgroup_size(${SORT_WORKGROUP})`,
  "fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {",
  `  let t = gid.x + gid.y * nwg.x * ${SORT_WORKGROUP}u;`,
];

/** The WGSL of one stage. Bindings: storage buffers in order, the last ones writable, then Params. */
export function generateSort(stage: SortStage, options: SortKernelOptions = {}): string {
  switch (stage) {
    case "keys":
      return [
        "struct Params { total: u32, len: u32, padded: u32, kind: u32, flip: u32, off: u32, rows: u32 }",
        "@group(0) @binding(0) var<storage, read> x: array<u32>;",
        "@group(0) @binding(1) var<storage, read_write> keys: array<u32>;",
        "@group(0) @binding(2) var<storage, read_write> order: array<u32>;",
        "@group(0) @binding(3) var<uniform> p: Params;",
        ORDERED_KEY,
        ...MAIN,
        "  if (t >= p.total) { return; }",
        "  let row = t / p.padded;",
        "  let i = t - row * p.padded;",
        "  order[t] = i;",
        // Padding, and the rows that round the pairs up to whole workgroup tiles.
        "  if (i >= p.len || row >= p.rows) { keys[t] = 0xffffffffu; return; }",
        "  keys[t] = ordered_key(x[p.off + row * p.len + i], p.kind) ^ p.flip;",
        "}",
      ].join("\n");
    case "bitonic":
      return [
        "struct Params { total: u32, half: u32, j: u32, k: u32 }",
        "@group(0) @binding(0) var<storage, read_write> keys: array<u32>;",
        "@group(0) @binding(1) var<storage, read_write> order: array<u32>;",
        "@group(0) @binding(2) var<uniform> p: Params;",
        ...MAIN,
        "  if (t >= p.total) { return; }",
        // Pair t of its row: i with the bit of j cleared, and i + j.
        "  let row = t / p.half;",
        "  let q = t - row * p.half;",
        "  let i = (q / p.j) * 2u * p.j + q % p.j;",
        "  let a = row * p.half * 2u + i;",
        "  let b = a + p.j;",
        "  let ka = keys[a];",
        "  let kb = keys[b];",
        "  let ia = order[a];",
        "  let ib = order[b];",
        "  let greater = ka > kb || (ka == kb && ia > ib);",
        // Ascending runs where bit k of i is clear, descending where it is set.
        "  if (greater == ((i & p.k) == 0u)) {",
        "    keys[a] = kb;",
        "    keys[b] = ka;",
        "    order[a] = ib;",
        "    order[b] = ia;",
        "  }",
        "}",
      ].join("\n");
    case "bitonic-local":
      // The steps with j below a tile (SORT_TILE pairs' worth) in workgroup memory: every stage
      // from k_lo to k_hi, each from j = min(k, SORT_TILE) / 2 down to 1, with a barrier between
      // steps. A step's direction comes from the element's position in its row (rows are
      // `padded` long and tiles never straddle two unless rows are shorter than a tile).
      return [
        "struct Params { padded: u32, kLo: u32, kHi: u32 }",
        "@group(0) @binding(0) var<storage, read_write> keys: array<u32>;",
        "@group(0) @binding(1) var<storage, read_write> order: array<u32>;",
        "@group(0) @binding(2) var<uniform> p: Params;",
        `var<workgroup> sk: array<u32, ${SORT_TILE}>;`,
        `var<workgroup> si: array<u32, ${SORT_TILE}>;`,
        `@compute @workgroup_size(${SORT_WORKGROUP})`,
        "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,",
        "    @builtin(local_invocation_index) l: u32) {",
        `  let base = (wid.x + wid.y * nwg.x) * ${SORT_TILE}u;`,
        `  for (var e = 0u; e < ${SORT_TILE / SORT_WORKGROUP}u; e++) {`,
        `    let q = l + e * ${SORT_WORKGROUP}u;`,
        "    sk[q] = keys[base + q];",
        "    si[q] = order[base + q];",
        "  }",
        "  workgroupBarrier();",
        "  for (var k = p.kLo; k <= p.kHi && k != 0u; k = k * 2u) {",
        `    for (var j = min(k, ${SORT_TILE}u) / 2u; j >= 1u; j = j / 2u) {`,
        `      for (var e = 0u; e < ${SORT_TILE / 2 / SORT_WORKGROUP}u; e++) {`,
        `        let q = l + e * ${SORT_WORKGROUP}u;`,
        ...compareExchange("        ", "((base + a) & (p.padded - 1u))"),
        "      }",
        "      workgroupBarrier();",
        "    }",
        "  }",
        `  for (var e = 0u; e < ${SORT_TILE / SORT_WORKGROUP}u; e++) {`,
        `    let q = l + e * ${SORT_WORKGROUP}u;`,
        "    keys[base + q] = sk[q];",
        "    order[base + q] = si[q];",
        "  }",
        "}",
      ].join("\n");
    case "radix-count":
      return radixCount(
        options.subgroups ?? false,
        options.perInvocation ?? SPLIT_PER_INVOCATION,
        options.first ?? false,
      );
    case "radix-scatter":
      return radixScatter(
        options.subgroups ?? false,
        options.first ?? false,
        options.last ?? false,
      );
    case "radix-ballot":
      return radixBallot(
        options.perInvocation ?? 8,
        options.words ?? 1,
        options.packed ?? true,
        options.minSubgroup ?? 8,
        options.first ?? false,
        options.last ?? false,
        options.lookback ?? false,
      );
    case "radix-hist":
      return radixHist(options.subgroups ?? false, options.perInvocation ?? 8);
    case "gather":
      return [
        "struct Params { total: u32, len: u32, padded: u32, start: u32, count: u32, off: u32 }",
        "@group(0) @binding(0) var<storage, read> x: array<u32>;",
        "@group(0) @binding(1) var<storage, read> order: array<u32>;",
        "@group(0) @binding(2) var<storage, read_write> values: array<u32>;",
        "@group(0) @binding(3) var<storage, read_write> indices: array<u32>;",
        "@group(0) @binding(4) var<uniform> p: Params;",
        ...MAIN,
        "  if (t >= p.total) { return; }",
        "  let row = t / p.count;",
        "  let c = t - row * p.count;",
        "  let i = order[row * p.padded + p.start + c];",
        "  values[t] = x[p.off + row * p.len + i];",
        "  indices[t] = i;",
        "}",
      ].join("\n");
    case "quantile":
      // table[3 j .. 3 j + 2]: the lower order statistic, the upper one and the weight's bits
      // (method codes as asm/sort.ts `sort_quantile_rows`); with `bits`, table[j] is q's bits and
      // each row computes those three exactly (QUANTILE_INDEX) from its count of values: all of
      // them, or with `skip` those before the first NaN.
      return [
        "struct Params { total: u32, len: u32, qn: u32, method: u32, skip: u32, bits: u32 }",
        "@group(0) @binding(0) var<storage, read> sorted: array<f32>;",
        "@group(0) @binding(1) var<storage, read> table: array<u32>;",
        "@group(0) @binding(2) var<storage, read_write> out: array<f32>;",
        "@group(0) @binding(3) var<uniform> p: Params;",
        QUANTILE_INDEX,
        INTERPOLATE,
        ...MAIN,
        "  if (t >= p.total) { return; }",
        "  let row = t / p.qn;",
        "  let j = t - row * p.qn;",
        "  let base = row * p.len;",
        "  var lo = 0u;",
        "  var hi = 0u;",
        "  var gb = 0u;",
        "  var count = p.len;",
        "  if (p.skip == 1u) {",
        // NaN sorts last: the first NaN by bisection (at most 33 steps).
        "    var a = 0u;",
        "    var b = p.len;",
        "    for (var step = 0u; step < 33u && a < b; step++) {",
        "      let mid = (a + b) / 2u;",
        "      if ((bitcast<u32>(sorted[base + mid]) & 0x7fffffffu) > 0x7f800000u) { b = mid; }",
        "      else { a = mid + 1u; }",
        "    }",
        "    count = a;",
        "  } else {",
        "    let last = bitcast<u32>(sorted[base + p.len - 1u]);",
        "    if ((last & 0x7fffffffu) > 0x7f800000u) { count = 0u; }",
        "  }",
        "  if (count == 0u) { out[t] = bitcast<f32>(0x7fc00000u); return; }",
        "  if (p.bits == 1u) {",
        "    var qb = table[j];",
        // -0 as +0; a q outside [0, 1] or NaN has no order statistic.
        "    if (qb == 0x80000000u) { qb = 0u; }",
        "    let q = bitcast<f32>(qb);",
        "    if (!(q >= 0.0 && q <= 1.0)) { out[t] = bitcast<f32>(0x7fc00000u); return; }",
        "    let index = quantile_index(count - 1u, qb);",
        "    lo = index.x;",
        "    hi = min(lo + 1u, count - 1u);",
        "    gb = index.y;",
        "  } else {",
        "    lo = table[3u * j];",
        "    hi = table[3u * j + 1u];",
        "    gb = table[3u * j + 2u];",
        "  }",
        "  out[t] = interpolate(sorted[base + lo], sorted[base + hi], gb, lo, p.method);",
        "}",
      ].join("\n");
    case "select-hist":
      return selectHist(options.subgroups ?? false, options.targets ?? 2);
    case "select-pick":
      return selectPick(options.targets ?? 2, options.rank ?? false);
    case "rank-count":
      return rankCount();
    case "rank-compact":
      return rankCompact(options.subgroups ?? false, options.lookback ?? false);
    case "rank-tile":
      return rankTile(options.tile ?? 2048, options.first ?? false, options.last ?? false);
    case "rank-stream":
      return rankStream(
        options.tile ?? 2048,
        options.subgroups ?? false,
        options.first ?? false,
        options.last ?? false,
      );
    case "search":
      return [
        "struct Params { total: u32, n: u32, kind: u32, right: u32, soff: u32, voff: u32 }",
        "@group(0) @binding(0) var<storage, read> sorted: array<u32>;",
        "@group(0) @binding(1) var<storage, read> values: array<u32>;",
        "@group(0) @binding(2) var<storage, read_write> out: array<i32>;",
        "@group(0) @binding(3) var<uniform> p: Params;",
        ORDERED_KEY,
        ...MAIN,
        "  if (t >= p.total) { return; }",
        "  let key = ordered_key(values[p.voff + t], p.kind);",
        "  var lo = 0u;",
        "  var hi = p.n;",
        // At most 32 halvings: bounded without relying on the data.
        "  for (var step = 0u; step < 33u && lo < hi; step++) {",
        "    let mid = (lo + hi) / 2u;",
        "    let k = ordered_key(sorted[p.soff + mid], p.kind);",
        "    if (select(k < key, k <= key, p.right == 1u)) { lo = mid + 1u; } else { hi = mid; }",
        "  }",
        "  out[t] = i32(lo);",
        "}",
      ].join("\n");
  }
}

/**
 * The radix passes' parameters: row length, tiles a row, the digit's shift, `indices` (1: the
 * last pass writes indices too), x's words' key `kind`, complemented by `flip` for descending, at
 * offset `off` (the first pass reads x, the last writes each row's window [start, start +
 * count)), and the rows.
 */
const RADIX_PARAMS =
  "struct Params { len: u32, tiles: u32, shift: u32, indices: u32, kind: u32, flip: u32, off: u32, start: u32, count: u32, rows: u32, spin: u32 }";

/**
 * WGSL: the key and index of a row's element i (the pass's source: x in the `first` pass, else
 * the last pass's pairs). Loads are not guarded: past the row's end they read another row's word
 * or, past the buffer's end, whatever robust access gives, and the caller ignores those (guarded
 * loads compile to branches that keep the loads from overlapping).
 */
function radixLoad(first: boolean, indices: boolean): string {
  return [
    "fn load_key(row: u32, i: u32) -> u32 {",
    first
      ? "  return ordered_key(src[p.off + row * p.len + i], p.kind) ^ p.flip;"
      : "  return src[row * p.len + i];",
    "}",
    ...(indices
      ? [
        "fn load_index(row: u32, i: u32) -> u32 {",
        first ? "  return i;" : "  return order[row * p.len + i];",
        "}",
      ]
      : []),
  ].join("\n");
}

/**
 * WGSL: the word of x a pair's key (complemented by `flip`) stands for, x's rows `rowLength`
 * long: the key's inverse, or x's own word where keys merge words (zeros and NaN).
 */
const valueOfKey = (rowLength: string) =>
  [
    "fn value_of(row: u32, k: u32, v: u32) -> u32 {",
    "  let key = k ^ p.flip;",
    `  if (merged_key(key, p.kind)) { return x[p.off + row * ${rowLength} + v]; }`,
    "  return key_word(key, p.kind);",
    "}",
  ].join("\n");

/**
 * WGSL: writes the pair (k, v) at sorted position `to` of its row. The `last` pass writes the
 * value the key stands for (the inverse of `ordered_key`; zeros and NaN, whose keys merge -0
 * with +0 and every NaN payload, read from x) and the index, inside the window only.
 */
function radixStore(last: boolean): string {
  if (!last) {
    return [
      "fn store(row: u32, to: u32, k: u32, v: u32) {",
      "  outKeys[row * p.len + to] = k;",
      "  outOrder[row * p.len + to] = v;",
      "}",
    ].join("\n");
  }
  return [
    valueOfKey("p.len"),
    "fn store(row: u32, to: u32, k: u32, v: u32) {",
    "  if (to >= p.start && to - p.start < p.count) {",
    "    let o = row * p.count + to - p.start;",
    "    outKeys[o] = value_of(row, k, v);",
    "    if (p.indices != 0u) { outOrder[o] = v; }",
    "  }",
    "}",
  ].join("\n");
}

/**
 * Bindings of the radix scatters: sources, the scanned counts (or, `lookback`, the rows' digit
 * histograms of every pass), x, the outputs, (`lookback`) the tiles' look-back states, Params.
 */
function radixScatterBindings(first: boolean, last: boolean, lookback = false): string[] {
  return [
    RADIX_PARAMS,
    "@group(0) @binding(0) var<storage, read> src: array<u32>;",
    "@group(0) @binding(1) var<storage, read> order: array<u32>;",
    lookback
      ? "@group(0) @binding(2) var<storage, read> hist: array<u32>;"
      : "@group(0) @binding(2) var<storage, read> offsets: array<u32>;",
    "@group(0) @binding(3) var<storage, read> x: array<u32>;",
    "@group(0) @binding(4) var<storage, read_write> outKeys: array<u32>;",
    "@group(0) @binding(5) var<storage, read_write> outOrder: array<u32>;",
    ...(lookback
      ? [
        "@group(0) @binding(6) var<storage, read_write> states: array<atomic<u32>>;",
        "@group(0) @binding(7) var<uniform> p: Params;",
      ]
      : ["@group(0) @binding(6) var<uniform> p: Params;"]),
    ORDERED_KEY,
    radixLoad(first, true),
    radixStore(last),
  ];
}

/**
 * WGSL of the onesweep scatter's digit offsets (invocation l for digit l, after the tile's digit
 * totals `total` and starts `start`): the digit's base in the row (an exclusive scan of the
 * row's histogram over the digits) plus its count in the row's earlier tiles, by a decoupled
 * look-back. A tile's state for a digit is one word: a tag in bits 28 to 31 (2 pass + 1 its own
 * count, 2 pass + 2 the row's inclusive count through it; another pass's tag reads as silent)
 * over the count. Each invocation walks back on its own (no barriers): a tile still silent after
 * `p.spin` reads is counted for the digit from the pass's source by the reader, so no tile waits
 * on one that may not be running. (A first form looked back in step as a workgroup, counting a
 * silent tile together: its three barriers a step made 16 Mi sorts take 1.95 ms on the H200
 * against the multipass form's 1.0.) On lavapipe, which ends an invocation's loops after 65535
 * iterations in all, a walk may count at most about 30 silent tiles of 2048: the plan does not
 * take this form there.
 */
function onesweepPrefix(perInvocation: number): string[] {
  const T = perInvocation * SORT_WORKGROUP;
  return [
    // The digit's base in the row: an exclusive scan of the row's histogram (sums reused).
    "  workgroupBarrier();",
    "  var base = subgroupExclusiveAdd(rowCount);",
    "  let rowSum = subgroupAdd(rowCount);",
    "  if (sg_lane == 0u) { sums[sg] = rowSum; }",
    "  workgroupBarrier();",
    "  for (var g = 0u; g < sg; g++) { base += sums[g]; }",
    "  let round = p.shift / 8u;",
    "  let tagOwn = (2u * round + 1u) << 28u;",
    "  let tagAll = (2u * round + 2u) << 28u;",
    "  let at = (row * p.tiles + tile) * 256u + l;",
    "  atomicStore(&states[at], select(tagOwn, tagAll, tile == 0u) | total);",
    "  var prefix = 0u;",
    "  if (tile > 0u) {",
    "    var j = tile;",
    "    loop {",
    "      j -= 1u;",
    "      let word = (row * p.tiles + j) * 256u + l;",
    "      var st = 0u;",
    "      for (var k = 0u; k < p.spin; k++) {",
    "        st = atomicOr(&states[word], 0u);",
    "        if ((st & 0xf0000000u) == tagOwn || (st & 0xf0000000u) == tagAll) { break; }",
    "      }",
    "      if ((st & 0xf0000000u) != tagOwn && (st & 0xf0000000u) != tagAll) {",
    // Silent: count this digit among the tile's keys here; the row's first tile ends the walk.
    `        for (var i = j * ${T}u; i < min((j + 1u) * ${T}u, p.len); i++) {`,
    "          prefix += select(0u, 1u, ((load_key(row, i) >> p.shift) & 0xffu) == l);",
    "        }",
    "        if (j == 0u) { break; }",
    "        continue;",
    "      }",
    "      prefix += st & 0x0fffffffu;",
    "      if ((st & 0xf0000000u) == tagAll) { break; }",
    "    }",
    "    atomicStore(&states[at], tagAll | (prefix + total));",
    "  }",
    "  globalStart[l] = base + prefix - start;",
  ];
}

/**
 * The onesweep sort's histograms: each tile adds its counts of every pass's digit (4 x 256 a
 * row, hist[(row * 4 + pass) * 256 + digit], zeroed before) and clears its look-back states.
 * Two copies of the tally, taken by subgroup (or invocation), and one atomic where a subgroup's
 * lanes share a digit (the high bytes of floats of one magnitude), as the radix count.
 */
function radixHist(subgroups: boolean, perInvocation: number): string {
  const E = perInvocation;
  const copies = 2;
  return [
    RADIX_PARAMS,
    "@group(0) @binding(0) var<storage, read> src: array<u32>;",
    "@group(0) @binding(1) var<storage, read_write> hist: array<atomic<u32>>;",
    "@group(0) @binding(2) var<storage, read_write> states: array<u32>;",
    "@group(0) @binding(3) var<uniform> p: Params;",
    ORDERED_KEY,
    radixLoad(true, false),
    `var<workgroup> tally: array<atomic<u32>, ${1024 * copies}>;`,
    ...tileEntry(subgroups),
    `  for (var c = l; c < ${
      1024 * copies
    }u; c += ${SORT_WORKGROUP}u) { atomicStore(&tally[c], 0u); }`,
    "  states[(row * p.tiles + tile) * 256u + l] = 0u;",
    "  workgroupBarrier();",
    subgroups
      ? `  let copy = ((l / sg_size) % ${copies}u) * 1024u;`
      : `  let copy = (l % ${copies}u) * 1024u;`,
    `  for (var e = 0u; e < ${E}u; e++) {`,
    `    let i = tile * ${E * SORT_WORKGROUP}u + e * ${SORT_WORKGROUP}u + l;`,
    "    let ok = i < p.len;",
    "    let key = load_key(row, i);",
    ...[0, 1, 2, 3].flatMap((pass) =>
      tallyAdd(
        subgroups,
        (d) => `&tally[copy + ${d}]`,
        `${pass * 256}u + ((key >> ${8 * pass}u) & 0xffu)`,
        "ok",
      )
    ),
    "  }",
    "  workgroupBarrier();",
    `  for (var d = l; d < 1024u; d += ${SORT_WORKGROUP}u) {`,
    "    var total = 0u;",
    `    for (var c = 0u; c < ${copies}u; c++) { total += atomicLoad(&tally[c * 1024u + d]); }`,
    "    if (total != 0u) { atomicAdd(&hist[row * 1024u + d], total); }",
    "  }",
    "}",
  ].join("\n");
}

/** Pairs each invocation of the one-bit-split scatter holds (consecutive in the tile). */
const SPLIT_PER_INVOCATION = RADIX_TILE / SORT_WORKGROUP;

/**
 * The radix scatter by one-bit splits (see the module doc): `offsets` is the exclusive scan of
 * the counts along each row, digit-major, so the tile's first pair of each digit goes there.
 * Pairs past the row's end sort last in their tile (digit 256) and are not written. Each
 * invocation's pairs are named registers (naga does not unroll loops, and arrays indexed in
 * loops spill); the counts of ones before each invocation come from subgroup prefix sums and
 * one pass over the subgroups' totals where subgroups exist (their size read, never assumed),
 * else from a scan in workgroup memory.
 */
function radixScatter(subgroups: boolean, first: boolean, last: boolean): string {
  const E = SPLIT_PER_INVOCATION;
  const each = (f: (e: number) => string[]) => Array.from({ length: E }, (_, e) => f(e)).flat();
  const scan = subgroups
    ? [
      "    let before = subgroupExclusiveAdd(ones);",
      "    let sgTotal = subgroupAdd(ones);",
      "    if (sg_lane == 0u) { sums[l / sg_size] = sgTotal; }",
      "    workgroupBarrier();",
      "    var onesBefore = before;",
      "    var totalOnes = 0u;",
      `    for (var g = 0u; g < ${SORT_WORKGROUP}u / sg_size; g++) {`,
      "      let c = sums[g];",
      "      if (g < l / sg_size) { onesBefore += c; }",
      "      totalOnes += c;",
      "    }",
    ]
    : [
      "    sums[l] = ones;",
      "    workgroupBarrier();",
      ...inclusiveScan("    "),
      `    let totalOnes = sums[${SORT_WORKGROUP - 1}u];`,
      "    var onesBefore = sums[l] - ones;",
    ];
  return [
    ...radixScatterBindings(first, last),
    `var<workgroup> sk: array<u32, ${RADIX_TILE}>;`,
    `var<workgroup> si: array<u32, ${RADIX_TILE}>;`,
    `var<workgroup> sd: array<u32, ${RADIX_TILE}>;`,
    `var<workgroup> sums: array<u32, ${SORT_WORKGROUP}>;`,
    "var<workgroup> first: array<u32, 256>;",
    ...tileEntry(subgroups),
    `  let base = tile * ${RADIX_TILE}u + ${E}u * l;`,
    // This invocation's pairs, straight from memory.
    ...each((e) => [
      `  var k${e} = 0u;`,
      `  var v${e} = 0u;`,
      `  var d${e} = 256u;`,
      `  if (base + ${e}u < p.len) {`,
      `    k${e} = load_key(row, base + ${e}u);`,
      `    v${e} = load_index(row, base + ${e}u);`,
      `    d${e} = (k${e} >> p.shift) & 0xffu;`,
      "  }",
    ]),
    // Nine stable one-bit splits by the digit's bits, low to high (bit 8 sends the pairs past
    // the row's end last); each round's pairs come back from workgroup memory.
    "  for (var b = 0u; b < 9u; b++) {",
    `    let ones = ${each((e) => [`((d${e} >> b) & 1u)`]).join(" + ")};`,
    ...scan,
    `    let zeros = ${RADIX_TILE}u - totalOnes;`,
    `    let first_slot = ${E}u * l;`,
    ...each((e) => [
      `    var to${e} = first_slot + ${e}u - onesBefore;`,
      `    if (((d${e} >> b) & 1u) == 1u) { to${e} = zeros + onesBefore; onesBefore += 1u; }`,
    ]),
    "    workgroupBarrier();",
    ...each((
      e,
    ) => [`    sk[to${e}] = k${e};`, `    si[to${e}] = v${e};`, `    sd[to${e}] = d${e};`]),
    "    workgroupBarrier();",
    ...each((e) => [
      `    k${e} = sk[first_slot + ${e}u];`,
      `    v${e} = si[first_slot + ${e}u];`,
      `    d${e} = sd[first_slot + ${e}u];`,
    ]),
    "  }",
    // Where each digit starts in the sorted tile.
    ...each((e) => [
      `  if (d${e} < 256u && (${E}u * l + ${e}u == 0u || sd[${E}u * l + ${e}u - 1u] != d${e})) {`,
      `    first[d${e}] = ${E}u * l + ${e}u;`,
      "  }",
    ]),
    "  workgroupBarrier();",
    ...each((e) => [
      `  if (d${e} < 256u) {`,
      `    store(row, offsets[(row * 256u + d${e}) * p.tiles + tile] + ${E}u * l + ${e}u - first[d${e}], k${e}, v${e});`,
      "  }",
    ]),
    "}",
  ].join("\n");
}

/**
 * The radix scatter by subgroup ballots (the ranking of Onesweep-style sorts): each subgroup
 * takes a run of `perInvocation` times its size of the tile's pairs, a subgroup's width at a
 * time; eight ballots of the digit's bits (and one of validity) give each lane the lanes with its
 * digit, so its rank among them and their count; the lowest of them adds the count to the
 * subgroup's counter of the digit and shuffles the old count to the others. The counters then
 * become each subgroup's offset within the digit, the digits' totals their starts in the tile,
 * and the pairs go through workgroup memory in sorted order (the same words as the counters,
 * after a barrier) so that each digit's run is written to memory contiguously. Masks are `words`
 * 32-bit words (subgroups of up to 32 lanes, or 128).
 *
 * Counters: `packed`, 16-bit halves of atomic words (so that subgroups of 8 fit in 32 KiB); else
 * one plain word a digit, which the lowest lane reads and writes alone, with a subgroup barrier
 * between rounds (atomic words cost the H200 half the scatter's speed: their loads and stores
 * in the staging too).
 */
function radixBallot(
  perInvocation: number,
  words: number,
  packed: boolean,
  minSubgroup: number,
  first: boolean,
  last: boolean,
  lookback: boolean,
): string {
  const E = perInvocation;
  const T = E * SORT_WORKGROUP;
  const per = packed ? 128 : 256;
  const pool = ballotPoolWords(T, minSubgroup, packed);
  const each = (f: (e: number) => string[]) => Array.from({ length: E }, (_, e) => f(e)).flat();
  const mask = words === 1 ? "u32" : "vec4<u32>";
  const ballot = (pred: string) =>
    words === 1 ? `subgroupBallot(${pred}).x` : `subgroupBallot(${pred})`;
  const count = (m: string) =>
    words === 1 ? `countOneBits(${m})` : `dot(countOneBits(${m}), vec4<u32>(1u))`;
  const put = (at: string, v: string) =>
    packed ? `atomicStore(&pool[${at}], ${v});` : `pool[${at}] = ${v};`;
  const get = (at: string) => packed ? `atomicLoad(&pool[${at}])` : `pool[${at}]`;
  // A digit's counter of this subgroup (the word, and the half of it where packed).
  const counter = (d: string) =>
    packed ? `(${get(`sg * 128u + (${d} >> 1u)`)} >> ((${d} & 1u) * 16u)) & 0xffffu` : get(
      `sg * 256u + ${d}`,
    );
  return [
    ...radixScatterBindings(first, last, lookback),
    `var<workgroup> pool: array<${packed ? "atomic<u32>" : "u32"}, ${pool}>;`,
    "var<workgroup> digitStart: array<u32, 256>;",
    "var<workgroup> globalStart: array<u32, 256>;",
    `var<workgroup> sums: array<u32, ${SORT_WORKGROUP / minSubgroup}>;`,
    // The lanes of a mask below lane i, and the lowest lane in a mask.
    words === 1
      ? [
        "fn below(i: u32) -> u32 { return select((1u << i) - 1u, 0xffffffffu, i >= 32u); }",
        "fn lowest(m: u32) -> u32 { return firstTrailingBit(m); }",
      ].join("\n")
      : [
        "fn below_word(i: u32, w: u32) -> u32 {",
        "  if (i >= 32u * (w + 1u)) { return 0xffffffffu; }",
        "  if (i <= 32u * w) { return 0u; }",
        "  return (1u << (i - 32u * w)) - 1u;",
        "}",
        "fn below(i: u32) -> vec4<u32> {",
        "  return vec4<u32>(below_word(i, 0u), below_word(i, 1u), below_word(i, 2u), below_word(i, 3u));",
        "}",
        "fn lowest(m: vec4<u32>) -> u32 {",
        "  if (m.x != 0u) { return firstTrailingBit(m.x); }",
        "  if (m.y != 0u) { return 32u + firstTrailingBit(m.y); }",
        "  if (m.z != 0u) { return 64u + firstTrailingBit(m.z); }",
        "  return 96u + firstTrailingBit(m.w);",
        "}",
      ].join("\n"),
    ...tileEntry(true),
    `  let subgroups = ${SORT_WORKGROUP}u / sg_size;`,
    "  let sg = l / sg_size;",
    // The tile's pairs and offsets first, so that their loads overlap the counters' clearing.
    `  let run = tile * ${T}u + sg * ${E}u * sg_size;`,
    ...each((e) => [
      `  let i${e} = run + ${e}u * sg_size + sg_lane;`,
      `  let ok${e} = i${e} < p.len;`,
      `  let k${e} = load_key(row, i${e});`,
      `  let v${e} = load_index(row, i${e});`,
      `  let d${e} = (k${e} >> p.shift) & 0xffu;`,
    ]),
    lookback
      ? "  let rowCount = hist[(row * 4u + p.shift / 8u) * 256u + l];"
      : "  globalStart[l] = offsets[(row * 256u + l) * p.tiles + tile];",
    `  for (var w = l; w < subgroups * ${per}u; w += ${SORT_WORKGROUP}u) { ${put("w", "0u")} }`,
    "  workgroupBarrier();",
    "  let lower = below(sg_lane);",
    ...each((e) => [
      `  var m${e}: ${mask} = ${ballot(`ok${e}`)};`,
      ...Array.from({ length: 8 }, (_, b) => [
        `  { let one = ((d${e} >> ${b}u) & 1u) == 1u; let bits = ${ballot("one")};`,
        `    m${e} &= select(~bits, bits, one); }`,
      ]).flat(),
      `  let below${e} = ${count(`m${e} & lower`)};`,
      `  var old${e} = 0u;`,
      `  if (ok${e} && below${e} == 0u) {`,
      ...(packed
        ? [
          `    let half = (d${e} & 1u) * 16u;`,
          `    old${e} = (atomicAdd(&pool[sg * 128u + (d${e} >> 1u)], ${
            count(`m${e}`)
          } << half) >> half) & 0xffffu;`,
        ]
        : [
          `    old${e} = pool[sg * 256u + d${e}];`,
          `    pool[sg * 256u + d${e}] = old${e} + ${count(`m${e}`)};`,
        ]),
      "  }",
      `  let r${e} = subgroupShuffle(old${e}, select(lowest(m${e}), sg_lane, !ok${e})) + below${e};`,
      // The next round's lowest lane of a digit may be another lane: it must see this write.
      ...(packed ? [] : ["  subgroupBarrier();"]),
    ]),
    "  workgroupBarrier();",
    // Each subgroup's counters become its offsets within the digits (packed: both halves at
    // once, as a digit's total in a tile is below 2^16 and the halves never carry).
    `  if (l < ${per}u) {`,
    "    var running = 0u;",
    "    for (var g = 0u; g < subgroups; g++) {",
    `      let c = ${get(`g * ${per}u + l`)};`,
    `      ${put(`g * ${per}u + l`, "running")}`,
    "      running += c;",
    "    }",
    ...(packed
      ? [
        "    digitStart[2u * l] = running & 0xffffu;",
        "    digitStart[2u * l + 1u] = running >> 16u;",
      ]
      : ["    digitStart[l] = running;"]),
    "  }",
    "  workgroupBarrier();",
    // The digits' starts in the tile: an exclusive scan of their totals.
    "  let total = digitStart[l];",
    "  var start = subgroupExclusiveAdd(total);",
    "  let sgTotal = subgroupAdd(total);",
    "  if (sg_lane == 0u) { sums[sg] = sgTotal; }",
    "  workgroupBarrier();",
    "  for (var g = 0u; g < sg; g++) { start += sums[g]; }",
    "  digitStart[l] = start;",
    ...(lookback ? onesweepPrefix(E) : ["  globalStart[l] -= start;"]),
    "  workgroupBarrier();",
    ...each((e) => [
      `  var to${e} = 0u;`,
      `  if (ok${e}) { to${e} = digitStart[d${e}] + (${counter(`d${e}`)}) + r${e}; }`,
    ]),
    "  workgroupBarrier();",
    ...each((
      e,
    ) => [`  if (ok${e}) { ${put(`to${e}`, `k${e}`)} ${put(`${T}u + to${e}`, `v${e}`)} }`]),
    "  workgroupBarrier();",
    `  let held = min(${T}u, p.len - tile * ${T}u);`,
    ...each((e) => [
      `  if (${e * SORT_WORKGROUP}u + l < held) {`,
      `    let j = ${e * SORT_WORKGROUP}u + l;`,
      `    let k = ${get("j")};`,
      `    store(row, globalStart[(k >> p.shift) & 0xffu] + j, k, ${get(`${T}u + j`)});`,
      "  }",
    ]),
    "}",
  ].join("\n");
}

/** Copies of the count tally, so that invocations hitting one digit spread over banks. */
const TALLY_COPIES = 8;

/**
 * The radix count: counts[(row * 256 + digit) * tiles + tile] is how many of the tile's pairs have
 * the digit (tiles of `perInvocation` times the workgroup's pairs, loaded before counting).
 * Skewed digits (the high bytes of floats of one magnitude) make every invocation hit one
 * counter: the tally has TALLY_COPIES copies taken by invocation, and where subgroups exist a
 * subgroup whose lanes share a digit adds them with one atomic.
 */
function radixCount(subgroups: boolean, perInvocation: number, first: boolean): string {
  const E = perInvocation;
  const each = (f: (e: number) => string[]) => Array.from({ length: E }, (_, e) => f(e)).flat();
  return [
    RADIX_PARAMS,
    "@group(0) @binding(0) var<storage, read> src: array<u32>;",
    "@group(0) @binding(1) var<storage, read_write> counts: array<u32>;",
    "@group(0) @binding(2) var<uniform> p: Params;",
    ORDERED_KEY,
    radixLoad(first, false),
    `var<workgroup> tally: array<atomic<u32>, ${256 * TALLY_COPIES}>;`,
    ...tileEntry(subgroups),
    `  for (var c = 0u; c < ${TALLY_COPIES}u; c++) { atomicStore(&tally[c * 256u + l], 0u); }`,
    // This invocation's keys first, so that their loads overlap.
    ...each((e) => [
      `  let i${e} = tile * ${E * SORT_WORKGROUP}u + ${e * SORT_WORKGROUP}u + l;`,
      `  let digit${e} = select(256u, (load_key(row, i${e}) >> p.shift) & 0xffu, i${e} < p.len);`,
    ]),
    "  workgroupBarrier();",
    // A subgroup's lanes share a copy (their one atomic where they agree); without subgroups
    // neighbouring invocations alternate copies.
    subgroups
      ? `  let copy = ((l / sg_size) % ${TALLY_COPIES}u) * 256u;`
      : `  let copy = (l % ${TALLY_COPIES}u) * 256u;`,
    ...each((e) =>
      tallyAdd(subgroups, (d) => `&tally[copy + ${d}]`, `digit${e}`, `digit${e} < 256u`)
    ),
    "  workgroupBarrier();",
    "  var total = 0u;",
    `  for (var c = 0u; c < ${TALLY_COPIES}u; c++) { total += atomicLoad(&tally[c * 256u + l]); }`,
    "  counts[(row * 256u + l) * p.tiles + tile] = total;",
    "}",
  ].join("\n");
}

/**
 * The entry of a radix kernel: one workgroup per tile of a row (`row`, `tile`, invocation `l`);
 * Params name the row length, tiles a row and rows.
 */
function tileEntry(subgroups: boolean): string[] {
  return [
    `@compute @workgroup_size(${SORT_WORKGROUP})`,
    "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,",
    `    @builtin(local_invocation_index) l: u32${
      subgroups
        ? ", @builtin(subgroup_size) sg_size: u32,\n    @builtin(subgroup_invocation_id) sg_lane: u32"
        : ""
    }) {`,
    "  let group = wid.x + wid.y * nwg.x;",
    "  let row = group / p.tiles;",
    "  let tile = group - row * p.tiles;",
    // The grid folded into two dimensions rounds the workgroups up (uniform: before barriers).
    "  if (row >= p.rows) { return; }",
  ];
}

/**
 * Words of a row's selection state: each target's key prefix and remaining rank, the row's flags
 * and count, and each quantile's weight bits and lower order statistic.
 */
export function selectStateWords(targets: number, quantiles: number): number {
  return 2 * targets + 2 + 2 * quantiles;
}

/** Words of a row's histograms: 256 a target, and the row's count of NaN. */
export function selectHistWords(targets: number): number {
  return 256 * targets + 1;
}

/**
 * One pass of a radix selection (for quantiles of few order statistics a row): each tile's keys
 * (x's float32 words in total order, made on the fly) counted by their digit at `shift`, among
 * those whose higher digits match each target's prefix (the first pass, shift 24, counts every
 * key once for all targets, and the row's NaN), into the row's global histograms. Skewed digits
 * (floats of one magnitude share their high byte) hit one counter: a subgroup whose lanes agree
 * adds them with one atomic where subgroups exist.
 */
function selectHist(subgroups: boolean, targets: number): string {
  const E = SELECT_TILE / SORT_WORKGROUP;
  const each = (f: (e: number) => string[]) => Array.from({ length: E }, (_, e) => f(e)).flat();
  return [
    "struct Params { len: u32, tiles: u32, shift: u32, off: u32, state: u32, rows: u32, kind: u32, flip: u32 }",
    "@group(0) @binding(0) var<storage, read> x: array<u32>;",
    "@group(0) @binding(1) var<storage, read> state: array<u32>;",
    "@group(0) @binding(2) var<storage, read_write> hist: array<atomic<u32>>;",
    "@group(0) @binding(3) var<uniform> p: Params;",
    ORDERED_KEY,
    `var<workgroup> h: array<atomic<u32>, ${256 * targets}>;`,
    "var<workgroup> nans: atomic<u32>;",
    `var<workgroup> prefix: array<u32, ${targets}>;`,
    ...tileEntry(subgroups),
    ...each((e) => [
      `  let i${e} = tile * ${SELECT_TILE}u + ${e * SORT_WORKGROUP}u + l;`,
      `  let k${e} = ordered_key(x[p.off + row * p.len + i${e}], p.kind) ^ p.flip;`,
    ]),
    `  for (var w = l; w < ${256 * targets}u; w += ${SORT_WORKGROUP}u) { atomicStore(&h[w], 0u); }`,
    "  if (l == 0u) { atomicStore(&nans, 0u); }",
    `  if (l < ${targets}u) { prefix[l] = state[row * p.state + l]; }`,
    "  workgroupBarrier();",
    "  if (p.shift == 24u) {",
    ...each((e) => [
      ...tallyAdd(subgroups, (d) => `&h[${d}]`, `(k${e} >> 24u)`, `i${e} < p.len`),
      `  if (i${e} < p.len && k${e} == 0xffffffffu) { atomicAdd(&nans, 1u); }`,
    ]),
    "  } else {",
    "    let high = p.shift + 8u;",
    `    for (var t = 0u; t < ${targets}u; t++) {`,
    "      let want = prefix[t] >> high;",
    // Few keys match a prefix past the first pass: plain atomics, without the subgroup
    // reductions each key would cost (they made these passes slower than the first).
    ...each((e) => [
      `      if (i${e} < p.len && (k${e} >> high) == want) { atomicAdd(&h[t * 256u + ((k${e} >> p.shift) & 0xffu)], 1u); }`,
    ]),
    "    }",
    "  }",
    "  workgroupBarrier();",
    `  let base = row * ${selectHistWords(targets)}u;`,
    `  let used = select(${targets}u, 1u, p.shift == 24u);`,
    "  for (var t = 0u; t < used; t++) {",
    "    let c = atomicLoad(&h[t * 256u + l]);",
    "    if (c != 0u) { atomicAdd(&hist[base + t * 256u + l], c); }",
    "  }",
    "  if (l == 0u) {",
    "    let c = atomicLoad(&nans);",
    `    if (c != 0u) { atomicAdd(&hist[base + ${256 * targets}u], c); }`,
    "  }",
    "}",
  ].join("\n");
}

/**
 * A radix selection's pick (one workgroup a row, an invocation a digit): each target's rank
 * found among its histogram's digits, fixing the digit in its prefix and leaving the rank
 * within it; the histograms are cleared for the next pass. The first pass (shift 24) first sets
 * the targets: each quantile's two order statistics (2 j and 2 j + 1) from the row's count (all
 * values, or those not NaN when skipping NaN) and q's bits, exactly (QUANTILE_INDEX), or from
 * the host's table. The last pass (shift 0) writes each quantile from the two keys' values.
 * Flags: 1 the row's quantiles are NaN (a NaN not skipped, or nothing left).
 */
function selectPick(targets: number, rankMode: boolean): string {
  const qn = rankMode ? 0 : targets / 2;
  const stateWords = selectStateWords(targets, qn);
  return [
    "struct Params { len: u32, rows: u32, shift: u32, method: u32, skip: u32, bits: u32, rank: u32, tiles: u32 }",
    "@group(0) @binding(0) var<storage, read> table: array<u32>;",
    "@group(0) @binding(1) var<storage, read_write> hist: array<u32>;",
    "@group(0) @binding(2) var<storage, read_write> state: array<u32>;",
    "@group(0) @binding(3) var<storage, read_write> out: array<f32>;",
    "@group(0) @binding(4) var<uniform> p: Params;",
    QUANTILE_INDEX,
    INTERPOLATE,
    ORDERED_KEY,
    `var<workgroup> sums: array<u32, ${SORT_WORKGROUP}>;`,
    `var<workgroup> prefix: array<u32, ${targets}>;`,
    `var<workgroup> rank: array<u32, ${targets}>;`,
    `@compute @workgroup_size(${SORT_WORKGROUP})`,
    "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,",
    "    @builtin(local_invocation_index) l: u32) {",
    "  let row = wid.x + wid.y * nwg.x;",
    "  if (row >= p.rows) { return; }",
    `  let s = row * ${stateWords}u;`,
    `  let hb = row * ${selectHistWords(targets)}u;`,
    "  if (p.shift == 24u) {",
    // Rank mode: one target, the rank p.rank of the row's keys.
    ...(rankMode
      ? [
        "    if (l == 0u) { rank[0] = p.rank; prefix[0] = 0u; }",
        // The one-pass compaction's look-back states of the row's tiles start empty.
        `    for (var t = l; t < p.tiles; t += ${SORT_WORKGROUP}u) { out[row * p.tiles + t] = 0.0; }`,
      ]
      : []),
    `    if (l < ${qn}u) {`,
    `      let nan = hist[hb + ${256 * targets}u];`,
    "      let count = select(p.len, p.len - nan, p.skip == 1u);",
    "      var flags = select(0u, 1u, count == 0u || (p.skip == 0u && nan != 0u));",
    "      var lo = 0u;",
    "      var hi = 0u;",
    "      var gb = 0u;",
    "      if (p.bits == 1u) {",
    "        var qb = table[l];",
    "        if (qb == 0x80000000u) { qb = 0u; }",
    "        let q = bitcast<f32>(qb);",
    // A q outside [0, 1] or NaN: this quantile's weight word marks it NaN.
    "        if (!(q >= 0.0 && q <= 1.0)) { gb = 0xffffffffu; }",
    "        else if (count > 0u) {",
    "          let index = quantile_index(count - 1u, qb);",
    "          lo = index.x;",
    "          hi = min(lo + 1u, count - 1u);",
    "          gb = index.y;",
    "        }",
    "      } else {",
    "        lo = table[3u * l];",
    "        hi = table[3u * l + 1u];",
    "        gb = table[3u * l + 2u];",
    "      }",
    "      rank[2u * l] = lo;",
    "      rank[2u * l + 1u] = hi;",
    "      prefix[2u * l] = 0u;",
    "      prefix[2u * l + 1u] = 0u;",
    `      state[s + ${2 * targets + 2}u + l] = gb;`,
    `      state[s + ${2 * targets + 2 + qn}u + l] = lo;`,
    `      if (l == 0u) { state[s + ${2 * targets}u] = flags; state[s + ${
      2 * targets + 1
    }u] = count; }`,
    "    }",
    "  } else {",
    `    if (l < ${targets}u) { prefix[l] = state[s + l]; rank[l] = state[s + ${targets}u + l]; }`,
    "  }",
    "  workgroupBarrier();",
    `  for (var t = 0u; t < ${targets}u; t++) {`,
    "    let at = hb + select(t, 0u, p.shift == 24u) * 256u + l;",
    "    let c = hist[at];",
    "    sums[l] = c;",
    "    workgroupBarrier();",
    ...inclusiveScan("    "),
    "    let before = sums[l] - c;",
    "    let r = rank[t];",
    "    workgroupBarrier();",
    "    if (c != 0u && r >= before && r - before < c) {",
    "      prefix[t] = prefix[t] | (l << p.shift);",
    "      rank[t] = r - before;",
    "    }",
    "    workgroupBarrier();",
    "  }",
    `  for (var t = 0u; t < ${targets}u; t++) { hist[hb + t * 256u + l] = 0u; }`,
    `  if (l == 0u) { hist[hb + ${256 * targets}u] = 0u; }`,
    `  if (l < ${targets}u) { state[s + l] = prefix[l]; state[s + ${targets}u + l] = rank[l]; }`,
    `  if (p.shift == 0u && l < ${qn}u) {`,
    `    let gb = state[s + ${2 * targets + 2}u + l];`,
    `    if ((state[s + ${2 * targets}u] & 1u) != 0u || gb == 0xffffffffu) {`,
    `      out[row * ${qn}u + l] = bitcast<f32>(0x7fc00000u);`,
    "      return;",
    "    }",
    // Keys back to values (total order is a bijection but for NaN, which no statistic is).
    "    let ka = prefix[2u * l];",
    "    let kb = prefix[2u * l + 1u];",
    "    let a = bitcast<f32>(key_word(ka, 3u));",
    "    let b = bitcast<f32>(key_word(kb, 3u));",
    `    let lo = state[s + ${2 * targets + 2 + qn}u + l];`,
    `    out[row * ${qn}u + l] = interpolate(a, b, gb, lo, p.method);`,
    "  }",
    "}",
  ].join("\n");
}

/**
 * One stage of the bitonic tree (Rank-K of small windows): each workgroup sorts a segment of
 * `tile` (key, index) pairs of its row in workgroup memory (a full bitonic network; pairs past
 * the row's end pad with the largest key and index, so they sort last) and keeps the first
 * `keep` of them: the next stage's row is the segments' kept pairs, until one segment is left,
 * whose window [start, start + count) the last stage writes as values and indices. The first
 * stage reads x (keys made on the fly, indices their positions). Keeping at most half a tile,
 * each stage at least halves the rows.
 */
function rankTile(tile: number, first: boolean, last: boolean): string {
  const steps = tile / 2 / SORT_WORKGROUP;
  const loads = tile / SORT_WORKGROUP;
  return [
    ...stageBindings(),
    `var<workgroup> sk: array<u32, ${tile}>;`,
    `var<workgroup> si: array<u32, ${tile}>;`,
    ...tileEntry(false),
    `  let base = tile * ${tile}u;`,
    `  for (var e = 0u; e < ${loads}u; e++) {`,
    `    let q = l + e * ${SORT_WORKGROUP}u;`,
    "    let i = base + q;",
    "    var key = 0xffffffffu;",
    "    var index = 0xffffffffu;",
    "    if (i < p.len) {",
    first
      ? "      key = ordered_key(x[p.off + row * p.xlen + i], p.kind) ^ p.flip; index = i;"
      : "      key = src[row * p.len + i]; index = order[row * p.len + i];",
    "    }",
    "    sk[q] = key;",
    "    si[q] = index;",
    "  }",
    "  workgroupBarrier();",
    `  for (var k = 2u; k <= ${tile}u; k = k * 2u) {`,
    "    for (var j = k / 2u; j >= 1u; j = j / 2u) {",
    `      for (var e = 0u; e < ${steps}u; e++) {`,
    `        let q = l + e * ${SORT_WORKGROUP}u;`,
    ...compareExchange("        ", "a"),
    "      }",
    "      workgroupBarrier();",
    "    }",
    "  }",
    ...stageOutput(last, "p.keep"),
    "}",
  ].join("\n");
}

/**
 * WGSL: the bindings of a stage of the bitonic tree or the streaming forms (the last stage's
 * rows `src` and `order`, or x in the first; the next stage's rows, or the window's values and
 * indices in the last) and their Params (`seg` the streaming forms' segment).
 */
function stageBindings(): string[] {
  return [
    "struct Params { len: u32, tiles: u32, keep: u32, kind: u32, flip: u32, off: u32, xlen: u32, rows: u32, start: u32, count: u32, indices: u32, seg: u32 }",
    "@group(0) @binding(0) var<storage, read> src: array<u32>;",
    "@group(0) @binding(1) var<storage, read> order: array<u32>;",
    "@group(0) @binding(2) var<storage, read> x: array<u32>;",
    "@group(0) @binding(3) var<storage, read_write> outKeys: array<u32>;",
    "@group(0) @binding(4) var<storage, read_write> outOrder: array<u32>;",
    "@group(0) @binding(5) var<uniform> p: Params;",
    ORDERED_KEY,
    valueOfKey("p.xlen"),
  ];
}

/**
 * WGSL: a stage's output from its sorted pairs in workgroup memory: the window of the row's
 * order (the last stage) or the first keep pairs, those past `held` as padding (the largest key
 * and index, which sort last).
 */
function stageOutput(last: boolean, held: string): string[] {
  if (last) {
    return [
      "  for (var j = p.start + l; j < p.start + p.count; j += " + SORT_WORKGROUP + "u) {",
      "    let v = si[j];",
      "    let o = row * p.count + j - p.start;",
      "    outKeys[o] = value_of(row, sk[j], v);",
      "    if (p.indices != 0u) { outOrder[o] = v; }",
      "  }",
    ];
  }
  return [
    "  for (var j = l; j < p.keep; j += " + SORT_WORKGROUP + "u) {",
    "    let o = row * p.tiles * p.keep + tile * p.keep + j;",
    `    outKeys[o] = select(0xffffffffu, sk[j], j < ${held});`,
    `    outOrder[o] = select(0xffffffffu, si[j], j < ${held});`,
    "  }",
  ];
}

/**
 * Rank-K by streaming ("subgroup" and "merge"): one workgroup a segment of `p.seg` elements of
 * its row, loaded STREAM_CHUNK a round (4 an invocation). A pair (key, index) that precedes the
 * running threshold (the buffer's pair of rank keep - 1 at its last sort; at first the largest
 * key and index, which every real pair precedes) is appended to a buffer of `tile` pairs in
 * workgroup memory: by a subgroup scan and one atomic a subgroup (`subgroups`), else by a
 * workgroup atomic a pair. Before a round that could overflow it, the buffer is sorted (a
 * bitonic network over the next power of two of its pairs, padded with the largest pair) and
 * cut to its first keep; the threshold is then the pair of rank keep - 1. The pairs are compared
 * whole, so later stages, whose rows are the segments' kept pairs (not in index order), filter
 * rightly. The order of appends does not matter: every sort is a total order on distinct pairs.
 */
function rankStream(tile: number, subgroups: boolean, first: boolean, last: boolean): string {
  const E = STREAM_CHUNK / SORT_WORKGROUP;
  const sort = [
    "    var size = 2u;",
    "    while (size < n) { size = size * 2u; }",
    `    for (var q = n + l; q < size; q += ${SORT_WORKGROUP}u) { sk[q] = 0xffffffffu; si[q] = 0xffffffffu; }`,
    "    workgroupBarrier();",
    "    for (var k = 2u; k <= size; k = k * 2u) {",
    "      for (var j = k / 2u; j >= 1u; j = j / 2u) {",
    `        for (var q = l; q < size / 2u; q += ${SORT_WORKGROUP}u) {`,
    ...compareExchange("          ", "a"),
    "        }",
    "        workgroupBarrier();",
    "      }",
    "    }",
    "    if (l == 0u) {",
    "      if (n >= p.keep) { limitKey = sk[p.keep - 1u]; limitIndex = si[p.keep - 1u]; }",
    "      let kept = min(n, p.keep);",
    "      atomicStore(&slots, kept);",
    "      held = kept;",
    "    }",
    "    workgroupBarrier();",
  ];
  const load = first
    ? [
      "      let key = ordered_key(x[p.off + row * p.xlen + i], p.kind) ^ p.flip;",
      "      let index = i;",
    ]
    : ["      let key = src[row * p.len + i];", "      let index = order[row * p.len + i];"];
  const append = subgroups
    ? [
      "    let before = subgroupExclusiveAdd(wanted);",
      "    let total = subgroupShuffle(before + wanted, sg_size - 1u);",
      "    var at = 0u;",
      "    if (sg_lane == 0u && total != 0u) { at = atomicAdd(&slots, total); }",
      "    at = subgroupShuffle(at, 0u) + before;",
      ...Array.from({ length: E }, (_, e) => [
        `    if (want${e}) { sk[at] = key${e}; si[at] = index${e}; at += 1u; }`,
      ]).flat(),
    ]
    : Array.from({ length: E }, (_, e) => [
      `    if (want${e}) { let at = atomicAdd(&slots, 1u); sk[at] = key${e}; si[at] = index${e}; }`,
    ]).flat();
  return [
    ...stageBindings(),
    `var<workgroup> sk: array<u32, ${tile}>;`,
    `var<workgroup> si: array<u32, ${tile}>;`,
    "var<workgroup> slots: atomic<u32>;",
    "var<workgroup> held: u32;",
    "var<workgroup> limitKey: u32;",
    "var<workgroup> limitIndex: u32;",
    ...tileEntry(subgroups),
    "  let begin = tile * p.seg;",
    "  let end = min(begin + p.seg, p.len);",
    "  if (l == 0u) {",
    "    atomicStore(&slots, 0u);",
    "    held = 0u;",
    "    limitKey = 0xffffffffu;",
    "    limitIndex = 0xffffffffu;",
    "  }",
    `  for (var c = begin; c < end; c += ${STREAM_CHUNK}u) {`,
    "    let n = workgroupUniformLoad(&held);",
    `    if (n + ${STREAM_CHUNK}u > ${tile}u) {`,
    ...sort,
    "    }",
    "    let lk = limitKey;",
    "    let li = limitIndex;",
    "    var wanted = 0u;",
    ...Array.from({ length: E }, (_, e) => [
      `    var key${e} = 0xffffffffu;`,
      `    var index${e} = 0xffffffffu;`,
      "    {",
      `      let i = c + ${e * SORT_WORKGROUP}u + l;`,
      ...load,
      `      if (i < end) { key${e} = key; index${e} = index; }`,
      "    }",
      `    let want${e} = key${e} < lk || (key${e} == lk && index${e} < li);`,
      `    wanted += select(0u, 1u, want${e});`,
    ]).flat(),
    ...append,
    "    workgroupBarrier();",
    "    if (l == 0u) { held = atomicLoad(&slots); }",
    "  }",
    "  {",
    "    let n = workgroupUniformLoad(&held);",
    ...sort,
    "  }",
    ...stageOutput(last, "held"),
    "}",
  ].join("\n");
}

/**
 * WGSL of the one-pass compaction's look-back, run by the whole workgroup in step (its branches
 * depend on uniform values only). A tile's state is one word: its status (1 its own counts, 2
 * its row's inclusive counts) in bits 30 and 31, its count of keys below the threshold in bits 0
 * to 12 (a row has fewer than keep <= 4096 of them) and of keys equal to it in bits 13 to 25,
 * saturating at 8191 (no tie past keep is taken, so a saturated count places none). The tile
 * publishes its counts, walks back to the nearest inclusive state adding counts, and publishes
 * its inclusive counts. A predecessor still silent after `p.spin` reads of its state (0 in
 * tests: every tile counts all of its predecessors) is counted from x by the whole workgroup,
 * 16 keys an invocation, so no tile waits on a workgroup that may not be running, and the loops
 * stay short (lavapipe ends an invocation's loops after 65535 iterations in all). Leaves the
 * tile's exclusive counts, below | ties << 16, in `base`.
 */
function lookbackCounts(): string[] {
  const E = SELECT_TILE / SORT_WORKGROUP;
  return [
    `  if (l == ${SORT_WORKGROUP - 1}u) { tileTotal = before + flags; }`,
    "  workgroupBarrier();",
    "  let total = tileTotal;",
    "  let own = pack_counts(total & 0xffffu, total >> 16u);",
    "  let at = row * p.tiles;",
    "  if (l == 0u) { atomicStore(&states[at + tile], own | select(0x40000000u, 0x80000000u, tile == 0u)); }",
    "  var below = 0u;",
    "  var ties = 0u;",
    "  if (tile > 0u) {",
    "    var j = tile;",
    "    loop {",
    "      j -= 1u;",
    "      if (l == 0u) {",
    "        var st = 0u;",
    "        for (var k = 0u; k < p.spin && st == 0u; k++) { st = atomicOr(&states[at + j], 0u); }",
    "        seen = st;",
    "        atomicStore(&part, 0u);",
    "      }",
    "      let st = workgroupUniformLoad(&seen);",
    "      if (st == 0u) {",
    "        var mine = 0u;",
    `        for (var e = 0u; e < ${E}u; e++) {`,
    `          let i = j * ${SELECT_TILE}u + e * ${SORT_WORKGROUP}u + l;`,
    "          let key = ordered_key(x[p.off + row * p.len + i], p.kind) ^ p.flip;",
    "          if (i < p.len) { mine += select(0u, 1u, key < threshold) + select(0u, 0x10000u, key == threshold); }",
    "        }",
    "        if (mine != 0u) { atomicAdd(&part, mine); }",
    "        workgroupBarrier();",
    "        let c = atomicLoad(&part);",
    "        workgroupBarrier();",
    "        below += c & 0xffffu;",
    "        ties = min(ties + (c >> 16u), 8191u);",
    "        if (j == 0u) { break; }",
    "        continue;",
    "      }",
    "      below += st & 0x1fffu;",
    "      ties = min(ties + ((st >> 13u) & 0x1fffu), 8191u);",
    "      if ((st >> 30u) == 2u || j == 0u) { break; }",
    "    }",
    "    if (l == 0u) {",
    "      atomicStore(&states[at + tile], pack_counts(below + (total & 0xffffu), ties + (total >> 16u)) | 0x80000000u);",
    "    }",
    "  }",
    "  let base = below | (ties << 16u);",
  ];
}

/** Parameters of Rank-K's count and compaction by threshold (rank-count, rank-compact). */
const RANK_PARAMS =
  "struct Params { len: u32, tiles: u32, off: u32, kind: u32, flip: u32, rows: u32, state: u32, keep: u32, spin: u32 }";

/**
 * Rank-K by selection, step 2: each tile's count of keys below the row's threshold K (the key of
 * rank keep - 1, which the selection left as the row's state) and of keys equal to it:
 * counts[(2 row) tiles + tile] and counts[(2 row + 1) tiles + tile].
 */
function rankCount(): string {
  const E = SELECT_TILE / SORT_WORKGROUP;
  return [
    RANK_PARAMS,
    "@group(0) @binding(0) var<storage, read> x: array<u32>;",
    "@group(0) @binding(1) var<storage, read> state: array<u32>;",
    "@group(0) @binding(2) var<storage, read_write> counts: array<u32>;",
    "@group(0) @binding(3) var<uniform> p: Params;",
    ORDERED_KEY,
    "var<workgroup> less: atomic<u32>;",
    "var<workgroup> ties: atomic<u32>;",
    ...tileEntry(false),
    "  if (l == 0u) { atomicStore(&less, 0u); atomicStore(&ties, 0u); }",
    "  let threshold = state[row * p.state];",
    "  var below = 0u;",
    "  var equal = 0u;",
    ...Array.from({ length: E }, (_, e) => [
      `  { let i = tile * ${SELECT_TILE}u + ${e * SORT_WORKGROUP}u + l;`,
      "    let key = ordered_key(x[p.off + row * p.len + i], p.kind) ^ p.flip;",
      "    if (i < p.len) { below += select(0u, 1u, key < threshold); equal += select(0u, 1u, key == threshold); } }",
    ]).flat(),
    "  workgroupBarrier();",
    "  if (below != 0u) { atomicAdd(&less, below); }",
    "  if (equal != 0u) { atomicAdd(&ties, equal); }",
    "  workgroupBarrier();",
    "  if (l == 0u) {",
    "    counts[2u * row * p.tiles + tile] = atomicLoad(&less);",
    "    counts[(2u * row + 1u) * p.tiles + tile] = atomicLoad(&ties);",
    "  }",
    "}",
  ].join("\n");
}

/**
 * Rank-K by selection, step 3 (after an exclusive scan of the counts along each row): each
 * tile writes its keys below the threshold at the scanned offset of those (their order does not
 * matter: the candidates are sorted next) and its keys equal to the threshold at the offset of
 * those past all of the row's keys below it, the first `keep` minus those below in index order
 * only (ties go to the lower index), as (key, index) candidates, `keep` a row. Each invocation
 * takes 16 consecutive keys, so one workgroup scan of the invocations' counts (both in 16-bit
 * halves) places them all (sixteen scans, one a round of strided keys, took three times as long).
 */
function rankCompact(subgroups: boolean, lookback: boolean): string {
  const E = SELECT_TILE / SORT_WORKGROUP;
  const each = (f: (e: number) => string[]) => Array.from({ length: E }, (_, e) => f(e)).flat();
  const scan = subgroups
    ? [
      "  var before = subgroupExclusiveAdd(flags);",
      "  if (sg_lane == sg_size - 1u) { sums[l / sg_size] = before + flags; }",
      "  workgroupBarrier();",
      `  for (var g = 0u; g < l / sg_size; g++) { before += sums[g]; }`,
    ]
    : [
      "  sums[l] = flags;",
      "  workgroupBarrier();",
      ...inclusiveScan("  "),
      "  let before = sums[l] - flags;",
    ];
  return [
    RANK_PARAMS,
    "@group(0) @binding(0) var<storage, read> x: array<u32>;",
    "@group(0) @binding(1) var<storage, read> state: array<u32>;",
    lookback
      ? "@group(0) @binding(2) var<storage, read_write> states: array<atomic<u32>>;"
      : "@group(0) @binding(2) var<storage, read> offsets: array<u32>;",
    "@group(0) @binding(3) var<storage, read_write> outKeys: array<u32>;",
    "@group(0) @binding(4) var<storage, read_write> outOrder: array<u32>;",
    "@group(0) @binding(5) var<uniform> p: Params;",
    ORDERED_KEY,
    `var<workgroup> sums: array<u32, ${SORT_WORKGROUP}>;`,
    ...(lookback
      ? [
        "var<workgroup> tileTotal: u32;",
        "var<workgroup> seen: u32;",
        "var<workgroup> part: atomic<u32>;",
        "fn pack_counts(below: u32, ties: u32) -> u32 { return below | (min(ties, 8191u) << 13u); }",
      ]
      : []),
    ...tileEntry(subgroups),
    "  let threshold = state[row * p.state];",
    // The threshold's rank within its equals: take that many plus one of them.
    "  let take = state[row * p.state + 1u] + 1u;",
    "  let lessCount = p.keep - take;",
    `  let first = tile * ${SELECT_TILE}u + l * ${E}u;`,
    "  var flags = 0u;",
    ...each((e) => [
      `  let k${e} = ordered_key(x[p.off + row * p.len + first + ${e}u], p.kind) ^ p.flip;`,
      `  let ok${e} = first + ${e}u < p.len;`,
      `  flags += select(0u, 1u, ok${e} && k${e} < threshold) + select(0u, 0x10000u, ok${e} && k${e} == threshold);`,
    ]),
    ...scan,
    ...(lookback
      ? [
        ...lookbackCounts(),
        "  var lessAt = (base & 0xffffu) + (before & 0xffffu);",
        "  var tieAt = (base >> 16u) + (before >> 16u);",
      ]
      : [
        "  var lessAt = offsets[2u * row * p.tiles + tile] + (before & 0xffffu);",
        "  var tieAt = offsets[(2u * row + 1u) * p.tiles + tile] + (before >> 16u);",
      ]),
    ...each((e) => [
      `  if (ok${e} && k${e} < threshold) {`,
      "    let o = row * p.keep + lessAt;",
      `    outKeys[o] = k${e};`,
      `    outOrder[o] = first + ${e}u;`,
      "    lessAt += 1u;",
      "  }",
      `  if (ok${e} && k${e} == threshold) {`,
      "    if (tieAt < take) {",
      "      let o = row * p.keep + lessCount + tieAt;",
      `      outKeys[o] = k${e};`,
      `      outOrder[o] = first + ${e}u;`,
      "    }",
      "    tieAt += 1u;",
      "  }",
    ]),
    "}",
  ].join("\n");
}
