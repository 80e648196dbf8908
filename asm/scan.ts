// Scans (cumsum, cumprod, cummax, cummin): the WASM reference of the GPU scan kernels and the CPU
// fallback. Each export scans `rows` contiguous rows of `len` elements from `x` into `out`
// (both contiguous, same layout). `flags` bit 0: exclusive (output i combines elements before i,
// output 0 is the identity); bit 1: reverse (scan from the end of each row).
//
// Float sums accumulate in f64 and round each output to f32: the reference is then (nearly) the
// exactly rounded prefix, which the GPU's reassociated f32 sums are compared against. Products
// multiply in f32 in sequence, as PyTorch does, so overflow and underflow (and then inf * 0) happen
// where PyTorch's do; an f64 product would miss them.
// cummax/cummin follow PyTorch: a later element wins ties (so [-0, +0] gives [-0, +0]) and once a
// NaN appears it stays (the latest NaN wins). A scan is a serial dependency along the row, so SIMD
// does not pay here; the op module makes the scan axis last and contiguous before calling.

// @ts-nocheck: AssemblyScript, compiled by asc, not by Deno.

const SUM: i32 = 0;
const PROD: i32 = 1;
const MAX: i32 = 2;
const MIN: i32 = 3;

@inline function isNaNf(x: f32): bool {
  return x != x;
}

/** f32 rows: sums in f64, products in f32, max/min exact with PyTorch's NaN and tie rules. */
@inline function scanF32(op: i32, out: usize, x: usize, rows: i32, len: i32, flags: i32): void {
  const exclusive = (flags & 1) != 0;
  const reverse = (flags & 2) != 0;
  const step: isize = reverse ? -4 : 4;
  for (let r = 0; r < rows; r++) {
    const rowStart: usize = <usize>r * <usize>len << 2;
    let pin: usize = x + rowStart;
    let pout: usize = out + rowStart;
    if (reverse) {
      pin += <usize>(len - 1) << 2;
      pout += <usize>(len - 1) << 2;
    }
    if (op == SUM) {
      // -0 is the exact additive identity (-0 + x == x for every x, +0 and -0 included).
      sumRow(out + rowStart, x + rowStart, len, flags, -0.0);
    } else if (op == PROD) {
      let acc: f32 = 1;
      for (let j = 0; j < len; j++) {
        const v = load<f32>(pin);
        if (exclusive) store<f32>(pout, acc);
        acc *= v;
        if (!exclusive) store<f32>(pout, acc);
        pin += step;
        pout += step;
      }
    } else {
      let acc: f32 = op == MAX ? -Infinity : Infinity;
      for (let j = 0; j < len; j++) {
        const v = load<f32>(pin);
        if (exclusive) store<f32>(pout, acc);
        const wins = op == MAX ? v >= acc : v <= acc;
        if (isNaNf(v) || (!isNaNf(acc) && wins)) acc = v;
        if (!exclusive) store<f32>(pout, acc);
        pin += step;
        pout += step;
      }
    }
  }
}

/** 32-bit integer rows (T = i32 or u32): wrapping sums and products, exact max/min. */
@inline function scanInt<T>(
  op: i32,
  identity: T,
  out: usize,
  x: usize,
  rows: i32,
  len: i32,
  flags: i32,
): void {
  const exclusive = (flags & 1) != 0;
  const reverse = (flags & 2) != 0;
  const step: isize = reverse ? -4 : 4;
  for (let r = 0; r < rows; r++) {
    const rowStart: usize = <usize>r * <usize>len << 2;
    let pin: usize = x + rowStart;
    let pout: usize = out + rowStart;
    if (reverse) {
      pin += <usize>(len - 1) << 2;
      pout += <usize>(len - 1) << 2;
    }
    let acc: T = identity;
    for (let j = 0; j < len; j++) {
      const v = load<T>(pin);
      if (exclusive) store<T>(pout, acc);
      if (op == SUM) acc = acc + v;
      else if (op == PROD) acc = acc * v;
      else if (op == MAX) acc = max<T>(acc, v);
      else acc = min<T>(acc, v);
      if (!exclusive) store<T>(pout, acc);
      pin += step;
      pout += step;
    }
  }
}

/** Rows from which a float32 sum runs as four chains (below, one sequential loop). */
const CHAINED_LENGTH: i32 = 256;

/** The f64 sum of `n` f32 values at `p`, from -0 (two f64x2 lanes; any order serves an offset). */
function offsetSum(p: usize, n: i32): f64 {
  let a = f64x2.splat(-0.0);
  let b = f64x2.splat(-0.0);
  let j = 0;
  for (; j + 4 <= n; j += 4) {
    const v = v128.load(p + (<usize>j << 2));
    a = f64x2.add(a, f64x2.promote_low_f32x4(v));
    b = f64x2.add(b, f64x2.promote_low_f32x4(i64x2.shuffle(v, v, 1, 0)));
  }
  const c = f64x2.add(a, b);
  let total = f64x2.extract_lane(c, 0) + f64x2.extract_lane(c, 1);
  for (; j < n; j++) total += <f64>load<f32>(p + (<usize>j << 2));
  return total;
}

/** The address of scan position `s` of a row of `len` at `p`: element s, or len - 1 - s. */
@inline function at(p: usize, len: i32, s: i32, reverse: bool): usize {
  return p + (<usize>(reverse ? len - 1 - s : s) << 2);
}

/** The byte offset of the vector of scan positions s..s+3: s, or len - 4 - s reversed. */
@inline function vectorAt(len: i32, s: i32, reverse: bool): usize {
  return <usize>(reverse ? len - 4 - s : s) << 2;
}

/**
 * Four prefix sums of one f32x4 `v` (in scan order) from `carry` (an f64x2 splat of the sum so
 * far), stored at `pout` in memory order; returns the new carry. In f64: [a, a + b] and
 * [c, c + d], then (a + b) added to the second pair, then the carry to all four, so each output
 * is the sum so far to within f64 rounding (reassociated within the vector). Exclusive outputs
 * are the carry and the first three sums.
 */
@inline function prefix4(
  v: v128, pout: usize, carry: v128, exclusive: bool, reverse: bool,
): v128 {
  const identity = f64x2.splat(-0.0);
  const lo = f64x2.promote_low_f32x4(v);
  const hi = f64x2.promote_low_f32x4(i64x2.shuffle(v, v, 1, 0));
  const lo1 = f64x2.add(lo, i64x2.shuffle(identity, lo, 0, 2));
  const hi1 = f64x2.add(hi, i64x2.shuffle(identity, hi, 0, 2));
  const hi2 = f64x2.add(hi1, i64x2.shuffle(lo1, lo1, 1, 1));
  const outLo = f64x2.add(carry, lo1);
  const outHi = f64x2.add(carry, hi2);
  let sums: v128;
  if (exclusive) {
    sums = i64x2.shuffle(
      f32x4.demote_f64x2_zero(i64x2.shuffle(carry, outLo, 0, 2)),
      f32x4.demote_f64x2_zero(i64x2.shuffle(outLo, outHi, 1, 2)),
      0, 2,
    );
  } else {
    sums = i64x2.shuffle(f32x4.demote_f64x2_zero(outLo), f32x4.demote_f64x2_zero(outHi), 0, 2);
  }
  v128.store(pout, reverse ? i32x4.shuffle(sums, sums, 3, 2, 1, 0) : sums);
  return i64x2.shuffle(outHi, outHi, 1, 1);
}

/**
 * The float32 sum scan of one row of `len` values from `start` (an f64 running sum: -0 at a
 * row's start, the sum of what precedes otherwise; flags bit 2 says the row continues one, so an
 * exclusive first output is `start`, not 0). One sequential f64 chain is bound by the add's
 * latency, so a long row runs as two chains over its halves, each starting from the sum of what
 * precedes it, four elements a step in f64x2 (prefix4): the same f64 prefix sums up to the
 * rounding of the reassociated additions (about 2^-53 of the running magnitude), each rounded
 * to f32 once. Short rows are one sequential chain.
 */
function sumRow(out: usize, x: usize, len: i32, flags: i32, start: f64): void {
  const exclusive = (flags & 1) != 0;
  const reverse = (flags & 2) != 0;
  const continued = (flags & 4) != 0;
  const step: isize = reverse ? -4 : 4;
  let from = 0;
  let acc = start;
  if (len >= CHAINED_LENGTH) {
    // Position 0 alone first: an exclusive row's first output is 0 (never -0).
    if (exclusive && !continued) {
      store<f32>(at(out, len, 0, reverse), <f32>0.0);
      acc += <f64>load<f32>(at(x, len, 0, reverse));
      from = 1;
    }
    // Chain 0 scans positions [from, from + 4h), chain 1 [from + 4h, from + 8h).
    const h = (len - from) >> 3;
    const mid = from + 4 * h;
    // Chain 0's elements lie at [from, mid) in memory, or at [len - mid, len - from) reversed.
    const first0 = reverse ? len - mid : from;
    let c0 = f64x2.splat(acc);
    let c1 = f64x2.splat(acc + offsetSum(x + (<usize>first0 << 2), 4 * h));
    for (let k = 0; k < h; k++) {
      const s0 = from + 4 * k;
      const s1 = mid + 4 * k;
      let v0 = v128.load(x + vectorAt(len, s0, reverse));
      let v1 = v128.load(x + vectorAt(len, s1, reverse));
      if (reverse) {
        v0 = i32x4.shuffle(v0, v0, 3, 2, 1, 0);
        v1 = i32x4.shuffle(v1, v1, 3, 2, 1, 0);
      }
      c0 = prefix4(v0, out + vectorAt(len, s0, reverse), c0, exclusive, reverse);
      c1 = prefix4(v1, out + vectorAt(len, s1, reverse), c1, exclusive, reverse);
    }
    acc = f64x2.extract_lane(c1, 0);
    from = mid + 4 * h;
  }
  // One chain: the whole row (short rows), or what the two chains left (fewer than 8).
  let pin = at(x, len, from, reverse);
  let pout = at(out, len, from, reverse);
  for (let s = from; s < len; s++) {
    const v = <f64>load<f32>(pin);
    if (exclusive) store<f32>(pout, s == 0 && !continued ? <f32>0.0 : <f32>acc);
    acc += v;
    if (!exclusive) store<f32>(pout, <f32>acc);
    pin += step;
    pout += step;
  }
}

/**
 * A piece of a long float32 sum scan shared among threads: `len` values at `x` scanned into `out`
 * from `start` (the sum of the pieces before it in scan order), flags as the row kernels' (bit 2:
 * not the row's first piece).
 */
export function scan_sum_piece_f32(out: usize, x: usize, len: i32, flags: i32, start: f64): void {
  sumRow(out, x, len, flags, start);
}

export function scan_sum_f32(out: usize, x: usize, rows: i32, len: i32, flags: i32): void {
  scanF32(SUM, out, x, rows, len, flags);
}
export function scan_prod_f32(out: usize, x: usize, rows: i32, len: i32, flags: i32): void {
  scanF32(PROD, out, x, rows, len, flags);
}
export function scan_max_f32(out: usize, x: usize, rows: i32, len: i32, flags: i32): void {
  scanF32(MAX, out, x, rows, len, flags);
}
export function scan_min_f32(out: usize, x: usize, rows: i32, len: i32, flags: i32): void {
  scanF32(MIN, out, x, rows, len, flags);
}

export function scan_sum_i32(out: usize, x: usize, rows: i32, len: i32, flags: i32): void {
  scanInt<i32>(SUM, 0, out, x, rows, len, flags);
}
export function scan_prod_i32(out: usize, x: usize, rows: i32, len: i32, flags: i32): void {
  scanInt<i32>(PROD, 1, out, x, rows, len, flags);
}
export function scan_max_i32(out: usize, x: usize, rows: i32, len: i32, flags: i32): void {
  scanInt<i32>(MAX, i32.MIN_VALUE, out, x, rows, len, flags);
}
export function scan_min_i32(out: usize, x: usize, rows: i32, len: i32, flags: i32): void {
  scanInt<i32>(MIN, i32.MAX_VALUE, out, x, rows, len, flags);
}

export function scan_sum_u32(out: usize, x: usize, rows: i32, len: i32, flags: i32): void {
  scanInt<u32>(SUM, 0, out, x, rows, len, flags);
}
export function scan_prod_u32(out: usize, x: usize, rows: i32, len: i32, flags: i32): void {
  scanInt<u32>(PROD, 1, out, x, rows, len, flags);
}
export function scan_max_u32(out: usize, x: usize, rows: i32, len: i32, flags: i32): void {
  scanInt<u32>(MAX, 0, out, x, rows, len, flags);
}
export function scan_min_u32(out: usize, x: usize, rows: i32, len: i32, flags: i32): void {
  scanInt<u32>(MIN, u32.MAX_VALUE, out, x, rows, len, flags);
}

// Bools are stored as u32 words 0/1; their max is "any so far" (identity false) and their min
// "all so far" (identity true).
export function scan_max_bool(out: usize, x: usize, rows: i32, len: i32, flags: i32): void {
  scanInt<u32>(MAX, 0, out, x, rows, len, flags);
}
export function scan_min_bool(out: usize, x: usize, rows: i32, len: i32, flags: i32): void {
  scanInt<u32>(MIN, 1, out, x, rows, len, flags);
}
