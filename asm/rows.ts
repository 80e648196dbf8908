// Row kernels of softmax, logSoftmax and the normalisations (layerNorm, rmsNorm, groupNorm,
// batchNorm): the CPU fallback and the reference the GPU row kernels (src/gpu/_codegen_rows.ts) are
// checked against. Each works on `rows` contiguous rows of `len` float32 values, in SIMD, and a
// range of rows is a call of its own (src/wasm/rows.ts shares rows among threads that way).
// Statistics are accumulated in f64: layerNorm's mean and variance in one pass of sums and
// squares where the mean is small against the spread (ONE_PASS_CANCELLATION), else two. The norms
// round each result to f32 once (within half an f32 ULP of the exact answer for the f32 inputs,
// plus the f64 sums' errors: tests/wasm_rows_oracle_test.ts); softmax takes e^(x - max) from exp_f32x4
// (asm/vector_math.ts, within 0.8 ULP), so its results are within 4.25u relative (u = 2^-24)
// and logSoftmax's within 1.6u + u|y| absolute (the bounds at softmax_rows_f32).
//
// Special values follow PyTorch: a row containing NaN, or +inf, or nothing but -inf, is NaN
// throughout under softmax and logSoftmax; the norms propagate NaN and infinities through their
// arithmetic (a row with an infinity has an infinite or NaN mean, so it comes out NaN).

// @ts-nocheck: AssemblyScript, compiled by asc, not by Deno.

import { exp_nonpositive_lo_f32x4 } from "./vector_math";

/**
 * Sum of `n` f32 values at `p`, in f64: four f64x2 accumulators over two f32x4 loads a step, so
 * that four add chains run at once (with two, each step waited on the add's latency: layerNorm
 * of [4096, 4096] spent some 5 ms per statistics pass on one thread).
 */
function sumF64(p: usize, n: i32): f64 {
  let a = f64x2.splat(0);
  let b = f64x2.splat(0);
  let c = f64x2.splat(0);
  let d = f64x2.splat(0);
  let j = 0;
  for (; j + 8 <= n; j += 8) {
    const v = v128.load(p + (<usize>j << 2));
    const w = v128.load(p + (<usize>j << 2), 16);
    a = f64x2.add(a, f64x2.promote_low_f32x4(v));
    b = f64x2.add(b, f64x2.promote_low_f32x4(i32x4.shuffle(v, v, 2, 3, 0, 1)));
    c = f64x2.add(c, f64x2.promote_low_f32x4(w));
    d = f64x2.add(d, f64x2.promote_low_f32x4(i32x4.shuffle(w, w, 2, 3, 0, 1)));
  }
  const e = f64x2.add(f64x2.add(a, b), f64x2.add(c, d));
  let total = f64x2.extract_lane(e, 0) + f64x2.extract_lane(e, 1);
  for (; j < n; j++) total += <f64>load<f32>(p + (<usize>j << 2));
  return total;
}

/** The sum of squares that sumAndSquaresF64 found beside its returned sum. */
let squaresF64: f64 = 0;

/**
 * Sum of `n` f32 values at `p` in f64 (returned), and the sum of their squares (in
 * `squaresF64`): sumF64's four chains and four more for the squares, one pass over the row.
 */
function sumAndSquaresF64(p: usize, n: i32): f64 {
  let a = f64x2.splat(0);
  let b = f64x2.splat(0);
  let c = f64x2.splat(0);
  let d = f64x2.splat(0);
  let a2 = f64x2.splat(0);
  let b2 = f64x2.splat(0);
  let c2 = f64x2.splat(0);
  let d2 = f64x2.splat(0);
  let j = 0;
  for (; j + 8 <= n; j += 8) {
    const v = v128.load(p + (<usize>j << 2));
    const w = v128.load(p + (<usize>j << 2), 16);
    const v0 = f64x2.promote_low_f32x4(v);
    const v1 = f64x2.promote_low_f32x4(i32x4.shuffle(v, v, 2, 3, 0, 1));
    const w0 = f64x2.promote_low_f32x4(w);
    const w1 = f64x2.promote_low_f32x4(i32x4.shuffle(w, w, 2, 3, 0, 1));
    a = f64x2.add(a, v0);
    b = f64x2.add(b, v1);
    c = f64x2.add(c, w0);
    d = f64x2.add(d, w1);
    a2 = f64x2.add(a2, f64x2.mul(v0, v0));
    b2 = f64x2.add(b2, f64x2.mul(v1, v1));
    c2 = f64x2.add(c2, f64x2.mul(w0, w0));
    d2 = f64x2.add(d2, f64x2.mul(w1, w1));
  }
  const e = f64x2.add(f64x2.add(a, b), f64x2.add(c, d));
  const e2 = f64x2.add(f64x2.add(a2, b2), f64x2.add(c2, d2));
  let total = f64x2.extract_lane(e, 0) + f64x2.extract_lane(e, 1);
  let squares = f64x2.extract_lane(e2, 0) + f64x2.extract_lane(e2, 1);
  for (; j < n; j++) {
    const x = <f64>load<f32>(p + (<usize>j << 2));
    total += x;
    squares += x * x;
  }
  squaresF64 = squares;
  return total;
}

/**
 * Where one pass's variance mean(x^2) - mean^2 serves: at most 2^-10 of mean^2 cancels. Each f64
 * sum is within (len / 8 + 8) 2^-53 of its terms' sum, 2^-42 relative for rows of 16 Ki, so the
 * variance stays within 2^-42 (1 + mean^2 / var) < 2^-31 relative, far below the f32 rounding of
 * the results; larger means (and infinities, NaN) take the two passes.
 */
const ONE_PASS_CANCELLATION: f64 = 1024;

/** Sum of (x - centre)^2 over `n` f32 values at `p`, in f64 (four chains, as sumF64). */
function squaredDeviationsF64(p: usize, n: i32, centre: f64): f64 {
  const k = f64x2.splat(centre);
  let a = f64x2.splat(0);
  let b = f64x2.splat(0);
  let c = f64x2.splat(0);
  let d = f64x2.splat(0);
  let j = 0;
  for (; j + 8 <= n; j += 8) {
    const v = v128.load(p + (<usize>j << 2));
    const w = v128.load(p + (<usize>j << 2), 16);
    const v0 = f64x2.sub(f64x2.promote_low_f32x4(v), k);
    const v1 = f64x2.sub(f64x2.promote_low_f32x4(i32x4.shuffle(v, v, 2, 3, 0, 1)), k);
    const w0 = f64x2.sub(f64x2.promote_low_f32x4(w), k);
    const w1 = f64x2.sub(f64x2.promote_low_f32x4(i32x4.shuffle(w, w, 2, 3, 0, 1)), k);
    a = f64x2.add(a, f64x2.mul(v0, v0));
    b = f64x2.add(b, f64x2.mul(v1, v1));
    c = f64x2.add(c, f64x2.mul(w0, w0));
    d = f64x2.add(d, f64x2.mul(w1, w1));
  }
  const e = f64x2.add(f64x2.add(a, b), f64x2.add(c, d));
  let total = f64x2.extract_lane(e, 0) + f64x2.extract_lane(e, 1);
  for (; j < n; j++) {
    const x = <f64>load<f32>(p + (<usize>j << 2)) - centre;
    total += x * x;
  }
  return total;
}

/**
 * Maximum of `n` f32 values at `p`, ignoring NaN (pmax is one instruction, max several; a NaN
 * reaches the sum of softmax_rows_f32, which catches it). Four accumulators: independent chains.
 */
function maxF32(p: usize, n: i32): f32 {
  let m0 = f32x4.splat(-Infinity);
  let m1 = m0;
  let m2 = m0;
  let m3 = m0;
  let j = 0;
  for (; j + 16 <= n; j += 16) {
    const a = p + (<usize>j << 2);
    m0 = f32x4.pmax(m0, v128.load(a));
    m1 = f32x4.pmax(m1, v128.load(a, 16));
    m2 = f32x4.pmax(m2, v128.load(a, 32));
    m3 = f32x4.pmax(m3, v128.load(a, 48));
  }
  for (; j + 4 <= n; j += 4) m0 = f32x4.pmax(m0, v128.load(p + (<usize>j << 2)));
  const m = f32x4.pmax(f32x4.pmax(m0, m1), f32x4.pmax(m2, m3));
  let top = max<f32>(
    max<f32>(f32x4.extract_lane(m, 0), f32x4.extract_lane(m, 1)),
    max<f32>(f32x4.extract_lane(m, 2), f32x4.extract_lane(m, 3)),
  );
  for (; j < n; j++) {
    const v = load<f32>(p + (<usize>j << 2));
    if (v > top) top = v;
  }
  return top;
}

/**
 * e^(x - m) of four lanes, x - m taken exactly as a sum hi + lo (Knuth's TwoSum): its rounding
 * alone would cost |x - m| 2^-24 relative, 64 ULP at x - m = -80.
 */
@inline function expShifted(v: v128, negM: v128): v128 {
  const s = f32x4.add(v, negM);
  const bv = f32x4.sub(s, v);
  const av = f32x4.sub(s, bv);
  const lo = f32x4.add(f32x4.sub(v, av), f32x4.sub(negM, bv));
  return exp_nonpositive_lo_f32x4(s, lo);
}

/** The f32 lanes 0 and 1 of `v` as f64. */
@inline function low64(v: v128): v128 {
  return f64x2.promote_low_f32x4(v);
}

/** The f32 lanes 2 and 3 of `v` as f64. */
@inline function high64(v: v128): v128 {
  return f64x2.promote_low_f32x4(i32x4.shuffle(v, v, 2, 3, 0, 1));
}

/**
 * softmax (`logarithm` 0) or logSoftmax (1) of each row: exp(x - max) / sum(exp(x - max)), or
 * (x - max) - log(sum(exp(x - max))). Three passes over a row: the max; e = exp_f32x4(x - max)
 * (stored in `out` for softmax) summed in f64; then e times 1 / sum in f64, or for logSoftmax
 * (x - max) - log(sum) in f64, each rounded to f32 once.
 *
 * Error, u = 2^-24: e is within 0.8 ULP (bench/exp_ulp.ts), 1.6u relative, and exact (1) at the
 * max; the sum S, a mean of those errors weighted by the terms, within 1.6u (S - 1) / S relative
 * (plus 2^-53 per f64 addition, a chain of at most len / 2 + 8); the reciprocal and the product
 * in f64 add 2^-52, then the rounding to f32 u: softmax within 4.25u relative (plus 1.3 2^-149
 * absolute where e^(x - max) is subnormal), logSoftmax within 1.6u (S - 1) / S + u|y| absolute
 * (tests/wasm_rows_oracle_test.ts checks both against a float64 oracle).
 */
export function softmax_rows_f32(out: usize, x: usize, rows: i32, len: i32, logarithm: i32): void {
  const rowBytes = <usize>len << 2;
  for (let r = 0; r < rows; r++) {
    const p = x + <usize>r * rowBytes;
    const q = out + <usize>r * rowBytes;
    const top = maxF32(p, len);
    // +inf (inf - inf in the sum) or a row of only -inf and NaN: NaN, as PyTorch computes it.
    if (top == Infinity || top == -Infinity) {
      fillNaN(q, len);
      continue;
    }
    const negM = f32x4.splat(-top);
    // Four f64x2 accumulators: independent chains of additions, each at most len / 8 + 2 long.
    let a0 = f64x2.splat(0);
    let a1 = a0;
    let a2 = a0;
    let a3 = a0;
    let j = 0;
    for (; j + 8 <= len; j += 8) {
      const o = <usize>j << 2;
      const e0 = expShifted(v128.load(p + o), negM);
      const e1 = expShifted(v128.load(p + o, 16), negM);
      if (!logarithm) {
        v128.store(q + o, e0);
        v128.store(q + o, e1, 16);
      }
      a0 = f64x2.add(a0, low64(e0));
      a1 = f64x2.add(a1, high64(e0));
      a2 = f64x2.add(a2, low64(e1));
      a3 = f64x2.add(a3, high64(e1));
    }
    for (; j + 4 <= len; j += 4) {
      const o = <usize>j << 2;
      const e = expShifted(v128.load(p + o), negM);
      if (!logarithm) v128.store(q + o, e);
      a0 = f64x2.add(a0, low64(e));
      a1 = f64x2.add(a1, high64(e));
    }
    const a = f64x2.add(f64x2.add(a0, a1), f64x2.add(a2, a3));
    let total = f64x2.extract_lane(a, 0) + f64x2.extract_lane(a, 1);
    for (; j < len; j++) {
      const o = <usize>j << 2;
      const e = f32x4.extract_lane(expShifted(f32x4.splat(load<f32>(p + o)), negM), 0);
      if (!logarithm) store<f32>(q + o, e);
      total += <f64>e;
    }
    // A NaN anywhere in the row made the sum NaN.
    if (total != total) {
      fillNaN(q, len);
      continue;
    }
    if (logarithm) {
      // (x - max) is exact in f64 for the f32 inputs; then one f64 subtraction of log(sum).
      const m = f64x2.splat(<f64>top);
      const shift = f64x2.splat(Math.log(total));
      j = 0;
      for (; j + 4 <= len; j += 4) {
        const o = <usize>j << 2;
        const v = v128.load(p + o);
        const lo = f64x2.sub(f64x2.sub(f64x2.promote_low_f32x4(v), m), shift);
        const hi = f64x2.sub(
          f64x2.sub(f64x2.promote_low_f32x4(i32x4.shuffle(v, v, 2, 3, 0, 1)), m),
          shift,
        );
        v128.store(q + o, demote4(lo, hi));
      }
      const mm = <f64>top;
      const ss = f64x2.extract_lane(shift, 0);
      for (; j < len; j++) {
        const o = <usize>j << 2;
        store<f32>(q + o, <f32>((<f64>load<f32>(p + o) - mm) - ss));
      }
    } else {
      // Multiplying by 1 / sum in f64 costs 2^-52 relative before the f32 rounding, as a
      // division would within a factor; a division in f32 would add half an ULP.
      const inv = f64x2.splat(1.0 / total);
      j = 0;
      for (; j + 4 <= len; j += 4) {
        const o = <usize>j << 2;
        const e = v128.load(q + o);
        const lo = f64x2.mul(f64x2.promote_low_f32x4(e), inv);
        const hi = f64x2.mul(f64x2.promote_low_f32x4(i32x4.shuffle(e, e, 2, 3, 0, 1)), inv);
        v128.store(q + o, demote4(lo, hi));
      }
      const s = f64x2.extract_lane(inv, 0);
      for (; j < len; j++) {
        const o = <usize>j << 2;
        store<f32>(q + o, <f32>(<f64>load<f32>(q + o) * s));
      }
    }
  }
}

/** The four f32 roundings of f64x2 `lo` and `hi`, in order. */
@inline function demote4(lo: v128, hi: v128): v128 {
  const a = f32x4.demote_f64x2_zero(lo);
  const b = f32x4.demote_f64x2_zero(hi);
  return i32x4.shuffle(a, b, 0, 1, 4, 5);
}

function fillNaN(q: usize, len: i32): void {
  const nan = f32x4.splat(NaN);
  let j = 0;
  for (; j + 4 <= len; j += 4) v128.store(q + (<usize>j << 2), nan);
  for (; j < len; j++) store<f32>(q + (<usize>j << 2), NaN);
}

/**
 * ((x - mean) rstd) w + b over `n` f32 values at `p` into `q`, in f64 as the scalar formula
 * (so each result is rounded once): w and b read at `wp` and `bp` element by element, or, where
 * those are 0, the splats `w` and `b` (1 and -0 leave y as it is, -0 included).
 */
@inline function normalise(
  q: usize,
  p: usize,
  n: i32,
  mean: f64,
  rstd: f64,
  wp: usize,
  bp: usize,
  w: f64,
  b: f64,
): void {
  const m = f64x2.splat(mean);
  const s = f64x2.splat(rstd);
  const ws = f64x2.splat(w);
  const bs = f64x2.splat(b);
  let j = 0;
  if (!wp && !bp && w == 1 && b == 0) {
    // No affine parameters (y * 1 + -0 is y): skip their multiplication and addition.
    for (; j + 4 <= n; j += 4) {
      const o = <usize>j << 2;
      const v = v128.load(p + o);
      const lo = f64x2.mul(f64x2.sub(f64x2.promote_low_f32x4(v), m), s);
      const hi = f64x2.mul(
        f64x2.sub(f64x2.promote_low_f32x4(i32x4.shuffle(v, v, 2, 3, 0, 1)), m),
        s,
      );
      v128.store(q + o, demote4(lo, hi));
    }
  }
  for (; j + 4 <= n; j += 4) {
    const o = <usize>j << 2;
    const v = v128.load(p + o);
    let lo = f64x2.mul(f64x2.sub(f64x2.promote_low_f32x4(v), m), s);
    let hi = f64x2.mul(f64x2.sub(f64x2.promote_low_f32x4(i32x4.shuffle(v, v, 2, 3, 0, 1)), m), s);
    if (wp) {
      const wv = v128.load(wp + o);
      lo = f64x2.mul(lo, f64x2.promote_low_f32x4(wv));
      hi = f64x2.mul(hi, f64x2.promote_low_f32x4(i32x4.shuffle(wv, wv, 2, 3, 0, 1)));
    } else {
      lo = f64x2.mul(lo, ws);
      hi = f64x2.mul(hi, ws);
    }
    if (bp) {
      const bv = v128.load(bp + o);
      lo = f64x2.add(lo, f64x2.promote_low_f32x4(bv));
      hi = f64x2.add(hi, f64x2.promote_low_f32x4(i32x4.shuffle(bv, bv, 2, 3, 0, 1)));
    } else {
      lo = f64x2.add(lo, bs);
      hi = f64x2.add(hi, bs);
    }
    v128.store(q + o, demote4(lo, hi));
  }
  for (; j < n; j++) {
    const o = <usize>j << 2;
    let y = (<f64>load<f32>(p + o) - mean) * rstd;
    y *= wp ? <f64>load<f32>(wp + o) : w;
    y += bp ? <f64>load<f32>(bp + o) : b;
    store<f32>(q + o, <f32>y);
  }
}

/**
 * layerNorm (`centered` 1) or rmsNorm (0) of rows `begin` to `end` (exclusive) of `rows`:
 * (x - mean) / sqrt(var + eps) with the biased variance (rmsNorm: mean 0, var = mean(x^2)), then
 * `* weight + bias` when those pointers are not 0. The affine parameters of element j of row r
 * are at index `(r % period) * scale + j / divisor` (layerNorm: period 1, scale 0, divisor 1 gives
 * j; groupNorm: the channel). When `stats` is not 0 it receives the mean of each row at [r] and
 * the variance at [rows + r], as float32. `out`, `x` and `stats` point at row 0 of all `rows`,
 * so that threads given disjoint ranges (src/wasm/rows.ts) write disjoint places.
 */
export function layer_norm_rows_f32(
  out: usize,
  x: usize,
  rows: i32,
  len: i32,
  eps: f64,
  weight: usize,
  bias: usize,
  period: i32,
  scale: i32,
  divisor: i32,
  stats: usize,
  centered: i32,
  begin: i32,
  end: i32,
): void {
  const rowBytes = <usize>len << 2;
  for (let r = begin; r < end; r++) {
    const p = x + <usize>r * rowBytes;
    const q = out + <usize>r * rowBytes;
    // One pass of sums and squares where mean^2 is small against the variance (then their
    // difference keeps its accuracy: see ONE_PASS_CANCELLATION), else two: the mean, then
    // squared deviations from it.
    let mean: f64 = 0;
    let variance: f64 = 0;
    if (centered) {
      mean = sumAndSquaresF64(p, len) / <f64>len;
      variance = squaresF64 / <f64>len - mean * mean;
      if (!(variance * ONE_PASS_CANCELLATION >= mean * mean && variance < Infinity)) {
        variance = squaredDeviationsF64(p, len, mean) / <f64>len;
      }
    } else variance = squaredDeviationsF64(p, len, 0) / <f64>len;
    const rstd = 1.0 / Math.sqrt(variance + eps);
    if (stats) {
      store<f32>(stats + (<usize>r << 2), <f32>mean);
      store<f32>(stats + (<usize>(rows + r) << 2), <f32>variance);
    }
    const base = (r % period) * scale;
    if (divisor == 1 || (!weight && !bias)) {
      // Parameters element by element from `base` (layerNorm, rmsNorm), or none.
      const c = <usize>base << 2;
      normalise(q, p, len, mean, rstd, weight ? weight + c : 0, bias ? bias + c : 0, 1, -0.0);
    } else {
      // Runs of `divisor` elements share their parameters (groupNorm's channels).
      for (let j = 0; j < len; j += divisor) {
        const c = <usize>(base + j / divisor) << 2;
        const w: f64 = weight ? <f64>load<f32>(weight + c) : 1;
        const b: f64 = bias ? <f64>load<f32>(bias + c) : -0.0;
        const o = <usize>j << 2;
        normalise(q + o, p + o, min(divisor, len - j), mean, rstd, 0, 0, w, b);
      }
    }
  }
}
