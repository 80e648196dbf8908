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

/**
 * e^x lane by lane, within 1 ULP over every f32 (0.75 at most: bench/exp_ulp.ts sweeps every f32
 * in [-104, 89], tests/wasm_vector_math_test.ts samples the rest): e^x = 2^t e^r, e^r by Taylor to
 * r^7 (truncation below 2^-27 relative), 2^t by two exact multiplications with powers of two made
 * from bits, so that t = 128 does not overflow and t down to -152 gives subnormals with one
 * rounding. NaN stays NaN (through every step), +Inf gives +Inf and -Inf and x < -103.97 give 0
 * (by the final selections).
 */
@inline export function exp_f32x4(x: v128): v128 {
  return exp_lo_f32x4(x, f32x4.splat(0));
}

/**
 * e^(x + xl) lane by lane for a sum x + xl with |xl| at most half an ULP of x (x - max in
 * softmax, taken exactly as such a sum): exp_f32x4's algorithm with xl added to r's low part.
 */
@inline export function exp_lo_f32x4(x: v128, xl: v128): v128 {
  // round(x log2 e) clamped, by adding 1.5 2^23: the sum's low bits are the integer (ties to
  // even, as round), read back as k. pmin/pmax (one instruction each, where min/max take several)
  // keep a NaN first operand, and trunc_sat's guards are not needed.
  const z = f32x4.pmax(
    f32x4.pmin(f32x4.mul(x, f32x4.splat(LOG2E)), f32x4.splat(129)),
    f32x4.splat(-152),
  );
  const shifted = f32x4.add(z, f32x4.splat(ROUNDER));
  const t = f32x4.sub(shifted, f32x4.splat(ROUNDER));
  // r = a - b to within half an ULP of r, and r's rounding error plus xl in c (exact where
  // |a| >= |b|, Fast2Sum; elsewhere both are below 2.2e-4 and c's own error is far below e^x's
  // ULP).
  const a = f32x4.sub(x, f32x4.mul(t, f32x4.splat(LN2_HI)));
  const b = f32x4.mul(t, f32x4.splat(LN2_LO));
  const r = f32x4.sub(a, b);
  const c = f32x4.add(f32x4.sub(f32x4.sub(a, r), b), xl);
  // e^r = 1 + r + r^2 q, q = 1/2 + r/6 + ... + r^5/5040 (Taylor to r^7 as g_exp).
  let q = f32x4.add(
    f32x4.mul(f32x4.splat(<f32>1.984126984126984e-4), r),
    f32x4.splat(<f32>1.388888888888889e-3),
  );
  q = f32x4.add(f32x4.mul(q, r), f32x4.splat(<f32>8.333333333333333e-3));
  q = f32x4.add(f32x4.mul(q, r), f32x4.splat(<f32>0.041666666666666664));
  q = f32x4.add(f32x4.mul(q, r), f32x4.splat(<f32>0.16666666666666666));
  q = f32x4.add(f32x4.mul(q, r), f32x4.splat(<f32>0.5));
  // Without fused multiply-adds Horner's last two steps cost 1.18 ULP; instead 1 + r exactly as
  // hi + (1 - hi) + r (Fast2Sum, |r| < 1) with the small terms added to its low part, so e^r is
  // rounded once, plus about 0.2 ULP from r^2 q. e^(r + c) = e^r (1 + c): c times e^r, since c
  // reaches 2^-18 (xl) where c r^2 / 2 would be 4 ULP.
  const hi = f32x4.add(f32x4.splat(1), r);
  const lo = f32x4.add(f32x4.add(f32x4.sub(f32x4.splat(1), hi), r), f32x4.mul(f32x4.mul(r, r), q));
  const p = f32x4.add(hi, f32x4.add(lo, f32x4.mul(c, f32x4.add(hi, lo))));
  // p 2^k1 2^(k - k1), k1 = k >> 1: each factor a normal power of two for k in [-152, 129].
  // NaN lanes give some k (harmless: p is NaN).
  const k = i32x4.sub(shifted, i32x4.splat(ROUNDER_BITS));
  const k1 = i32x4.shr_s(k, 1);
  const bias = i32x4.splat(127);
  const s1 = i32x4.shl(i32x4.add(k1, bias), 23);
  const s2 = i32x4.shl(i32x4.add(i32x4.sub(k, k1), bias), 23);
  const y = f32x4.mul(f32x4.mul(p, s1), s2);
  // Past the range: 0 below, +Inf above (t was clamped); NaN compares false and stays NaN.
  const low = f32x4.lt(x, f32x4.splat(EXP_UNDERFLOW));
  const high = f32x4.gt(x, f32x4.splat(EXP_OVERFLOW));
  return v128.bitselect(f32x4.splat(Infinity), v128.andnot(y, low), high);
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
