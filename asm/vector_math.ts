// Branch-free f32x4 transcendentals for the WASM kernels. exp_f32x4 is the GPU's g_exp
// (wgsl/prelude.wgsl: g_exp_split, g_times_pow2, g_exp_finish) lane for lane, so both devices
// compute nearly the same function; keep the two in step.

// @ts-nocheck: AssemblyScript, compiled by asc, not by Deno.

// x = t ln 2 + r, |r| <= 0.35, t = round(x log2 e) clamped to [-152, 129]: Cody and Waite with
// ln 2's high part of 16 significant bits, so t times it is exact and so is x minus that
// (Sterbenz); the low part's product rounds far below r's ULP (as g_exp_split).
const LOG2E: f32 = 1.4426950408889634;
const LN2_HI: f32 = 0.693145751953125;
const LN2_LO: f32 = 1.4286067653302226e-6;
// Past these e^x is 0 (below half the least subnormal) or +Inf (as g_exp_finish).
const EXP_UNDERFLOW: f32 = -103.97207641601562;
const EXP_OVERFLOW: f32 = 88.72283935546875;
// 1.5 2^23: an f32 in [2^23, 2^24) has ULP 1, so z + ROUNDER rounds z to an integer.
const ROUNDER: f32 = 12582912;
const ROUNDER_BITS: i32 = 0x4b400000;

// The constants as data, splat from memory where used (one instruction each): V8 builds a
// v128.const in the loop body from two 64-bit immediates, three or four instructions each, which
// made exp a third slower.
const EXP_CONSTANTS = memory.data<f32>([
  LOG2E,
  129,
  -152,
  ROUNDER,
  LN2_HI,
  LN2_LO,
  <f32>1.984126984126984e-4,
  <f32>1.388888888888889e-3,
  <f32>8.333333333333333e-3,
  <f32>0.041666666666666664,
  <f32>0.16666666666666666,
  0.5,
  1,
  reinterpret<f32>(ROUNDER_BITS),
  reinterpret<f32>(127),
  EXP_UNDERFLOW,
  EXP_OVERFLOW,
  Infinity,
]);

/** Constant `i` of EXP_CONSTANTS in every lane. */
@inline function K(i: i32): v128 {
  return v128.load32_splat(EXP_CONSTANTS + (<usize>i << 2));
}

/**
 * e^x lane by lane, within 1 ULP over every f32 (0.78 at most: bench/exp_ulp.ts sweeps every f32
 * in [-104, 89], tests/wasm_vector_math_test.ts samples the rest): e^x = 2^t e^r, e^r by Taylor to
 * r^7 (truncation below 2^-27 relative), 2^t by two exact multiplications with powers of two made
 * from bits, so that t = 128 does not overflow and t down to -152 gives subnormals with one
 * rounding. NaN stays NaN (through every step), +Inf gives +Inf and -Inf and x < -103.97 give 0
 * (by the final selections).
 */
@inline export function exp_f32x4(x: v128): v128 {
  return expCore(x, f32x4.splat(0), false);
}

/**
 * e^(x + xl) lane by lane for a sum x + xl with |xl| at most half an ULP of x (x - max in
 * softmax, taken exactly as such a sum): exp_f32x4's algorithm with xl added to r's low part.
 */
@inline export function exp_lo_f32x4(x: v128, xl: v128): v128 {
  return expCore(x, xl, false);
}

/**
 * exp_lo_f32x4 for x <= 0, -Inf or NaN (softmax's x - max): without the overflow's clamp and
 * selection, a tenth of softmax's time.
 */
@inline export function exp_nonpositive_lo_f32x4(x: v128, xl: v128): v128 {
  return expCore(x, xl, true);
}

@inline function expCore(x: v128, xl: v128, nonPositive: bool): v128 {
  // round(x log2 e) clamped, by adding 1.5 2^23: the sum's low bits are the integer (ties to
  // even, as round), read back as k. pmin/pmax (one instruction each, where min/max take several)
  // keep a NaN first operand, and trunc_sat's guards are not needed.
  const scaled = f32x4.mul(x, K(0));
  const z = f32x4.pmax(nonPositive ? scaled : f32x4.pmin(scaled, K(1)), K(2));
  const shifted = f32x4.add(z, K(3));
  const t = f32x4.sub(shifted, K(3));
  // r = a - b to within half an ULP of r, and r's rounding error plus xl in c (exact where
  // |a| >= |b|, Fast2Sum; elsewhere both are below 2.2e-4 and c's own error is far below e^x's
  // ULP).
  const a = f32x4.sub(x, f32x4.mul(t, K(4)));
  const b = f32x4.mul(t, K(5));
  const r = f32x4.sub(a, b);
  const c = f32x4.add(f32x4.sub(f32x4.sub(a, r), b), xl);
  // e^r = 1 + r + r^2 q, q = 1/2 + r/6 + ... + r^5/5040 (Taylor to r^7 as g_exp).
  let q = f32x4.add(
    f32x4.mul(K(6), r),
    K(7),
  );
  q = f32x4.add(f32x4.mul(q, r), K(8));
  q = f32x4.add(f32x4.mul(q, r), K(9));
  q = f32x4.add(f32x4.mul(q, r), K(10));
  q = f32x4.add(f32x4.mul(q, r), K(11));
  // Without fused multiply-adds Horner's last two steps cost 1.18 ULP; instead 1 + r exactly as
  // hi + (1 - hi) + r (Fast2Sum, |r| < 1) with the small terms added to its low part, so e^r is
  // rounded once, plus about 0.2 ULP from r^2 q. e^(r + c) = e^r (1 + c): c times e^r, since c
  // reaches 2^-18 (xl) where c r^2 / 2 would be 4 ULP.
  const hi = f32x4.add(K(12), r);
  const lo = f32x4.add(f32x4.add(f32x4.sub(K(12), hi), r), f32x4.mul(f32x4.mul(r, r), q));
  const p = f32x4.add(hi, f32x4.add(lo, f32x4.mul(c, f32x4.add(hi, lo))));
  // p 2^k1 2^(k - k1), k1 = k >> 1: each factor a normal power of two for k in [-152, 129].
  // NaN lanes give some k (harmless: p is NaN).
  const k = i32x4.sub(shifted, K(13));
  const k1 = i32x4.shr_s(k, 1);
  const bias = K(14);
  const s1 = i32x4.shl(i32x4.add(k1, bias), 23);
  const s2 = i32x4.shl(i32x4.add(i32x4.sub(k, k1), bias), 23);
  const y = f32x4.mul(f32x4.mul(p, s1), s2);
  // Past the range: 0 below, +Inf above (t was clamped); NaN compares false and stays NaN.
  const low = v128.andnot(y, f32x4.lt(x, K(15)));
  if (nonPositive) return low;
  return v128.bitselect(K(17), low, f32x4.gt(x, K(16)));
}

/** e^x of one f32 by exp_f32x4 (for loop tails: the same function as the vector body). */
@inline export function exp_f32(x: f32): f32 {
  return f32x4.extract_lane(exp_f32x4(f32x4.splat(x)), 0);
}

/** out[i] = exp_f32x4(x[i]) for `n` f32 values (a test entry; pointers are byte offsets). */
export function exp_f32x4_array(out: usize, x: usize, n: i32): void {
  let j = 0;
  for (; j + 4 <= n; j += 4) {
    const o = <usize>j << 2;
    v128.store(out + o, exp_f32x4(v128.load(x + o)));
  }
  for (; j < n; j++) {
    const o = <usize>j << 2;
    store<f32>(out + o, exp_f32(load<f32>(x + o)));
  }
}

/**
 * 1 / (1 + e^-x) lane by lane, from e = e^-|x| <= 1 so that nothing overflows: 1 / (1 + e) for
 * x >= 0, e / (1 + e) below, which keeps the tiny and subnormal results of x < -88 (the GPU's
 * g_sigmoid, 1 / (1 + e^-x), gives 0 there). e within 1.6u relative (u = 2^-24), 1 + e and the
 * division u each: 1 / (1 + e) within 2.8u, e / (1 + e) within 4.3u; 2.23 ULP at most measured
 * over 4 Mi arguments (tests/wasm_vector_math_test.ts). NaN stays NaN, +-Inf give 1 and 0.
 */
@inline export function sigmoid_f32x4(x: v128): v128 {
  const e = exp_nonpositive_lo_f32x4(f32x4.neg(f32x4.abs(x)), f32x4.splat(0));
  const d = f32x4.add(K(12), e);
  return v128.bitselect(f32x4.div(e, d), f32x4.div(K(12), d), f32x4.lt(x, f32x4.splat(0)));
}

/** sigmoid_f32x4 of one f32 (for loop tails). */
@inline export function sigmoid_f32(x: f32): f32 {
  return f32x4.extract_lane(sigmoid_f32x4(f32x4.splat(x)), 0);
}

/** out[i] = sigmoid_f32x4(x[i]) for `n` f32 values (a test entry). */
export function sigmoid_f32x4_array(out: usize, x: usize, n: i32): void {
  let j = 0;
  for (; j + 4 <= n; j += 4) {
    const o = <usize>j << 2;
    v128.store(out + o, sigmoid_f32x4(v128.load(x + o)));
  }
  for (; j < n; j++) {
    const o = <usize>j << 2;
    store<f32>(out + o, sigmoid_f32(load<f32>(x + o)));
  }
}

/**
 * tanh lane by lane, the GPU's g_tanh (wgsl/prelude.wgsl) with the accurate exp: the series to
 * x^7 below |x| = 0.125 (relative error < 2e-10), elsewhere (1 - e) / (1 + e) with e = e^-2|x|
 * (|x| clamped to 15, past which it is +-1), which cannot overflow; the sign copied from x.
 * exp's 0.78 ULP grows by 2e / (1 - e^2) through the quotient (4 at |x| = 0.125), plus four
 * roundings. NaN stays NaN.
 */
@inline export function tanh_f32x4(x: v128): v128 {
  const z = f32x4.abs(x);
  const x2 = f32x4.mul(x, x);
  let p = f32x4.sub(f32x4.splat(<f32>0.13333333333333333), f32x4.mul(x2, f32x4.splat(<f32>0.05396825396825397)));
  p = f32x4.add(f32x4.splat(<f32>-0.3333333333333333), f32x4.mul(x2, p));
  const series = f32x4.mul(x, f32x4.add(K(12), f32x4.mul(x2, p)));
  const e = exp_f32x4(f32x4.mul(f32x4.splat(-2), f32x4.pmin(z, f32x4.splat(15))));
  const t = f32x4.div(f32x4.sub(K(12), e), f32x4.add(K(12), e));
  const signed = v128.or(t, v128.and(x, i32x4.splat(0x80000000)));
  return v128.bitselect(series, signed, f32x4.lt(z, f32x4.splat(0.125)));
}

/** tanh_f32x4 of one f32 (for loop tails and the op table's scalar kernels). */
@inline export function tanh_f32(x: f32): f32 {
  return f32x4.extract_lane(tanh_f32x4(f32x4.splat(x)), 0);
}
