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
      let acc: f64 = -0.0;
      for (let j = 0; j < len; j++) {
        const v = <f64>load<f32>(pin);
        if (exclusive) store<f32>(pout, j == 0 ? <f32>0.0 : <f32>acc);
        acc += v;
        if (!exclusive) store<f32>(pout, <f32>acc);
        pin += step;
        pout += step;
      }
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
