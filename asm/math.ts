// Scalar helpers for the generated elementwise kernels. Each mirrors the WGSL function of the same
// name in wgsl/prelude.wgsl, so both devices compute the same function; keep the two in step.

// @ts-nocheck: AssemblyScript, compiled by asc, not by Deno.

@inline export function g_sign_f32(x: f32): f32 {
  if (x != x) return x;
  return x > 0 ? 1 : x < 0 ? -1 : 0;
}

@inline export function g_sign_i32(x: i32): i32 {
  return x > 0 ? 1 : x < 0 ? -1 : 0;
}

@inline export function g_mod_f32(a: f32, b: f32): f32 {
  let r: f32 = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

@inline export function g_mod_i32(a: i32, b: i32): i32 {
  // Division by zero gives 0 (as NumPy does, without its warning); b == -1 avoids INT_MIN % -1.
  if (b == 0 || b == -1) return 0;
  let r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

@inline export function g_mod_u32(a: u32, b: u32): u32 {
  return b == 0 ? 0 : a % b;
}

@inline export function g_floordiv_f32(a: f32, b: f32): f32 {
  return Mathf.floor(a / b);
}

@inline export function g_floordiv_i32(a: i32, b: i32): i32 {
  if (b == 0) return 0;
  if (b == -1) return 0 - a;
  let q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) q -= 1;
  return q;
}

@inline export function g_floordiv_u32(a: u32, b: u32): u32 {
  return b == 0 ? 0 : a / b;
}

export function g_pow_f32(x: f32, y: f32): f32 {
  if (y == 0 || x == 1) return 1;
  if (x != x || y != y) return x + y;
  // (-1) ** +-Inf is 1 (C and NumPy; Math.pow says NaN).
  if (x == -1 && Mathf.abs(y) == Infinity) return 1;
  // An odd integer exponent keeps the base's sign (as the WGSL; C's rules for zeros and -Inf).
  const odd = Mathf.abs(y) < 16777216.0 && Mathf.trunc(y) == y && (<i32>Mathf.abs(y) & 1) == 1;
  if (x == 0) {
    const r: f32 = y < 0 ? Infinity : 0;
    return odd && (reinterpret<u32>(x) >> 31) != 0 ? -r : r;
  }
  if (x == -Infinity) {
    const r: f32 = y > 0 ? Infinity : 0;
    return odd ? -r : r;
  }
  if (x < 0) {
    if (Mathf.trunc(y) != y) return NaN;
    const magnitude = <f32>Math.pow(<f64>-x, <f64>y);
    return odd ? -magnitude : magnitude;
  }
  return <f32>Math.pow(<f64>x, <f64>y);
}

export function g_pow_i32(x: i32, y: i32): i32 {
  if (y < 0) {
    if (x == 1) return 1;
    if (x == -1) return (y & 1) == 1 ? -1 : 1;
    return 0;
  }
  let result: i32 = 1;
  let base = x;
  let e = <u32>y;
  while (e != 0) {
    if (e & 1) result *= base;
    base *= base;
    e >>= 1;
  }
  return result;
}

export function g_pow_u32(x: u32, y: u32): u32 {
  let result: u32 = 1;
  let base = x;
  let e = y;
  while (e != 0) {
    if (e & 1) result *= base;
    base *= base;
    e >>= 1;
  }
  return result;
}

@inline export function g_rsqrt64(x: f64): f64 {
  return 1.0 / Math.sqrt(x);
}

@inline export function g_sigmoid64(x: f64): f64 {
  return 1.0 / (1.0 + Math.exp(-x));
}

export function g_erf64(x: f64): f64 {
  // The formula of g_erf in wgsl/prelude.wgsl, evaluated in f64.
  const z = Math.abs(x);
  if (z < 0.5) {
    const x2 = x * x;
    return 1.1283791670955126 * x * (1.0 + x2 * (-0.3333333333333333 + x2 * (0.1 + x2 * (-0.023809523809523808 + x2 * (0.004629629629629629 - x2 * 0.0007575757575757576)))));
  }
  const t = 1.0 / (1.0 + 0.5 * z);
  const poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
  const r = 1.0 - t * Math.exp(poly);
  return x < 0 ? -r : r;
}

@inline export function g_pcg(v: u32): u32 {
  const state = v * 747796405 + 2891336453;
  const word = ((state >>> ((state >>> 28) + 4)) ^ state) * 277803737;
  return (word >>> 22) ^ word;
}

// IEEE half conversions (round to nearest even), for float16 storage.
export function f32_to_f16(value: f32): u16 {
  const x = reinterpret<u32>(value);
  const sign = (x >>> 16) & 0x8000;
  const exponent = <i32>((x >>> 23) & 0xff);
  let mantissa = x & 0x7fffff;
  if (exponent == 0xff) return <u16>(sign | 0x7c00 | (mantissa != 0 ? 0x200 : 0));
  const e = exponent - 127 + 15;
  if (e >= 0x1f) return <u16>(sign | 0x7c00);
  if (e <= 0) {
    if (e < -10) return <u16>sign;
    mantissa |= 0x800000;
    const shift = <u32>(14 - e);
    const half = mantissa >>> shift;
    const rest = mantissa & ((1 << shift) - 1);
    const halfway: u32 = 1 << (shift - 1);
    return <u16>(sign | (half + (rest > halfway || (rest == halfway && (half & 1) != 0) ? 1 : 0)));
  }
  const rest = mantissa & 0x1fff;
  let half = (<u32>e << 10) | (mantissa >>> 13);
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1) != 0)) half++;
  return <u16>(sign | half);
}

export function f16_to_f32(bits: u16): f32 {
  const sign: u32 = (<u32>bits & 0x8000) << 16;
  const exponent: u32 = (<u32>bits >>> 10) & 0x1f;
  let mantissa: u32 = <u32>bits & 0x3ff;
  if (exponent == 0) {
    if (mantissa == 0) return reinterpret<f32>(sign);
    // Subnormal half: normalise into an f32 exponent.
    let e: i32 = -1;
    do {
      e++;
      mantissa <<= 1;
    } while ((mantissa & 0x400) == 0);
    return reinterpret<f32>(sign | (<u32>(127 - 15 - e) << 23) | ((mantissa & 0x3ff) << 13));
  }
  if (exponent == 0x1f) return reinterpret<f32>(sign | 0x7f800000 | (mantissa << 13));
  return reinterpret<f32>(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

// Activations: f64 mirrors of the g_* activation functions in wgsl/prelude.wgsl.

export function g_relu64(x: f64): f64 {
  return x != x ? x : Math.max(x, 0);
}

export function g_gelu64(x: f64): f64 {
  return 0.5 * x * (1.0 + g_erf64(x * 0.7071067811865476));
}

export function g_gelu_tanh64(x: f64): f64 {
  return 0.5 * x * (1.0 + Math.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

export function g_silu64(x: f64): f64 {
  return x / (1.0 + Math.exp(-x));
}

export function g_softplus64(x: f64): f64 {
  return x != x ? x : Math.max(x, 0) + Math.log1p(Math.exp(-Math.abs(x)));
}

export function g_mish64(x: f64): f64 {
  return x * Math.tanh(g_softplus64(x));
}

export function g_hardswish64(x: f64): f64 {
  return x * Math.min(Math.max(x + 3.0, 0), 6.0) / 6.0;
}

export function g_hardsigmoid64(x: f64): f64 {
  return Math.min(Math.max(x / 6.0 + 0.5, 0), 1.0);
}

export function g_selu64(x: f64): f64 {
  return 1.0507009873554805 * (x > 0 ? x : 1.6732632423543772 * Math.expm1(x));
}

export function g_softsign64(x: f64): f64 {
  // +-1 past 2^30, as the WGSL (where the quotient rounds to +-1 in f32 anyway); NaN for
  // infinities, Inf / Inf, as PyTorch's x / (1 + |x|).
  if (Math.abs(x) == Infinity) return NaN;
  return Math.abs(x) > 1073741824.0 ? (x > 0 ? 1.0 : -1.0) : x / (1.0 + Math.abs(x));
}

export function g_leaky_relu64(x: f64, alpha: f64): f64 {
  return x >= 0 ? x : alpha * x;
}

export function g_elu64(x: f64, alpha: f64): f64 {
  return x > 0 ? x : alpha * Math.expm1(x);
}
