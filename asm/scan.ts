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

/** The lowest address of quarter `k` (of `quarter` elements) in scan order. */
@inline function lowest(x: usize, len: i32, quarter: i32, k: i32, reverse: bool): usize {
  return x + (<usize>(reverse ? len - (k + 1) * quarter : k * quarter) << 2);
}

/**
 * The float32 sum scan of one row of `len` values from `start` (an f64 running sum: -0 at a
 * row's start, the sum of what precedes otherwise; flags bit 2 says the row continues one, so an
 * exclusive first output is `start`, not 0). One sequential f64 chain is bound by the add's
 * latency, so a long row runs as four chains over its quarters, each starting from the sum of
 * the quarters before it: the same f64 prefix sums up to the rounding of those starts (about
 * 2^-53 of the running magnitude), each rounded to f32 once.
 */
function sumRow(out: usize, x: usize, len: i32, flags: i32, start: f64): void {
  const exclusive = (flags & 1) != 0;
  const reverse = (flags & 2) != 0;
  const continued = (flags & 4) != 0;
  const step: isize = reverse ? -4 : 4;
  const chains = len >= CHAINED_LENGTH ? 4 : 1;
  const quarter = len / chains;
  // Chain k scans positions [k * quarter, (k + 1) * quarter) of the scan order (the last one to
  // the end); position s is element s, or len - 1 - s in reverse.
  let a0 = start;
  let a1: f64 = 0;
  let a2: f64 = 0;
  let a3: f64 = 0;
  if (chains == 4) {
    // A quarter's elements are contiguous in memory either way.
    a1 = a0 + offsetSum(lowest(x, len, quarter, 0, reverse), quarter);
    a2 = a1 + offsetSum(lowest(x, len, quarter, 1, reverse), quarter);
    a3 = a2 + offsetSum(lowest(x, len, quarter, 2, reverse), quarter);
    let p0 = at(x, len, 0, reverse);
    let p1 = at(x, len, quarter, reverse);
    let p2 = at(x, len, 2 * quarter, reverse);
    let p3 = at(x, len, 3 * quarter, reverse);
    let q0 = at(out, len, 0, reverse);
    let q1 = at(out, len, quarter, reverse);
    let q2 = at(out, len, 2 * quarter, reverse);
    let q3 = at(out, len, 3 * quarter, reverse);
    if (exclusive) {
      // Position 0's output: 0 at a row's start (never -0), else the sum so far.
      store<f32>(q0, continued ? <f32>a0 : <f32>0.0);
      a0 += <f64>load<f32>(p0);
      store<f32>(q1, <f32>a1);
      a1 += <f64>load<f32>(p1);
      store<f32>(q2, <f32>a2);
      a2 += <f64>load<f32>(p2);
      store<f32>(q3, <f32>a3);
      a3 += <f64>load<f32>(p3);
      for (let j = 1; j < quarter; j++) {
        p0 += step; p1 += step; p2 += step; p3 += step;
        q0 += step; q1 += step; q2 += step; q3 += step;
        store<f32>(q0, <f32>a0);
        store<f32>(q1, <f32>a1);
        store<f32>(q2, <f32>a2);
        store<f32>(q3, <f32>a3);
        a0 += <f64>load<f32>(p0);
        a1 += <f64>load<f32>(p1);
        a2 += <f64>load<f32>(p2);
        a3 += <f64>load<f32>(p3);
      }
    } else {
      for (let j = 0; j < quarter; j++) {
        a0 += <f64>load<f32>(p0);
        a1 += <f64>load<f32>(p1);
        a2 += <f64>load<f32>(p2);
        a3 += <f64>load<f32>(p3);
        store<f32>(q0, <f32>a0);
        store<f32>(q1, <f32>a1);
        store<f32>(q2, <f32>a2);
        store<f32>(q3, <f32>a3);
        p0 += step; p1 += step; p2 += step; p3 += step;
        q0 += step; q1 += step; q2 += step; q3 += step;
      }
    }
  }
  // One chain: the whole row (short rows), or the last chain's remainder (4 * quarter to len).
  let acc = chains == 4 ? a3 : a0;
  const from = chains == 4 ? 4 * quarter : 0;
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
