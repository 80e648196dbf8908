// Helper functions shared by generated elementwise kernels. Each mirrors a function of the same
// name in asm/math.ts, the WASM reference; keep the two in step.

fn g_isnan(x: f32) -> bool {
  // A bit test: `x != x` can be folded away by fast-math drivers.
  return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

fn g_f32_to_i32(x: f32) -> i32 {
  // Truncation toward zero, saturating at i32's limits, NaN to 0: the WASM reference's
  // i32.trunc_sat_f32_s. Both limits are tested here: WGSL's i32() clamps only to 2^31 - 128 (the
  // largest f32 below 2^31) and leaves NaN to the driver, and SPIR-V's conversion is undefined out
  // of range, so the clamp is up to the WGSL compiler's version.
  if (g_isnan(x)) { return 0; }
  if (x >= 2147483648.0) { return 2147483647; }
  if (x <= -2147483648.0) { return bitcast<i32>(0x80000000u); }
  return i32(x);
}

fn g_f32_to_bool(x: f32) -> bool {
  // On the bits: NaN is true (x != 0), which fast-math drivers get wrong for a plain `x != 0.0`,
  // and so is a subnormal, which an H200 flushed to zero there (nonzero missed 1e-40, measured).
  return (bitcast<u32>(x) & 0x7fffffffu) != 0u;
}

fn g_f32_to_u32(x: f32) -> u32 {
  // As g_f32_to_i32 (i32.trunc_sat_f32_u): 0 at and below 0 (-0.5 truncates to 0 too), 2^32 - 1
  // from 2^32 (WGSL's u32() clamps to 2^32 - 256).
  if (g_isnan(x)) { return 0u; }
  if (x >= 4294967296.0) { return 4294967295u; }
  if (x <= 0.0) { return 0u; }
  return u32(x);
}

fn g_max_f32(a: f32, b: f32) -> f32 {
  // NumPy's maximum propagates NaN; WGSL's max leaves NaN handling to the driver, and the sign of
  // max(-0, +0) too: +0 here, as WASM's f32.max (IEEE 754-2019 maximum). Equal operands differ
  // at most in a zero's sign bit, so the AND of their bits is +0 for mixed zeros.
  let m = select(max(a, b), bitcast<f32>(bitcast<u32>(a) & bitcast<u32>(b)), a == b);
  return select(select(m, a, g_isnan(a)), b, g_isnan(b));
}

fn g_min_f32(a: f32, b: f32) -> f32 {
  // min(-0, +0) is -0 (f32.min): the OR of the bits.
  let m = select(min(a, b), bitcast<f32>(bitcast<u32>(a) | bitcast<u32>(b)), a == b);
  return select(select(m, a, g_isnan(a)), b, g_isnan(b));
}

fn g_sign_f32(x: f32) -> f32 {
  // In integer arithmetic on the bits: a compiler turns float comparisons and selects (even of
  // bit-cast constants) into its sign instruction, which keeps -0 (lavapipe did); sign(-0) is +0,
  // as NumPy and the WASM reference. NaN stays itself.
  let bits = bitcast<u32>(x);
  let magnitude = bits & 0x7fffffffu;
  let one = (bits & 0x80000000u) | 0x3f800000u;
  return bitcast<f32>(select(select(one, 0u, magnitude == 0u), bits, magnitude > 0x7f800000u));
}

fn g_mod_f32(a: f32, b: f32) -> f32 {
  // Python/NumPy remainder: the result takes the divisor's sign. From the exact fmod, as the
  // reference's `%`: a - b * trunc(a / b) rounds twice and goes wrong near integer quotients,
  // past |a / b| = 2^24 and for infinite b.
  var r = g_fmod_f32(a, b);
  if (r != 0.0 && ((r < 0.0) != (b < 0.0))) { r = r + b; }
  return r;
}

fn g_fmod_f32(x: f32, y: f32) -> f32 {
  // C's fmodf, exact (musl's integer long division on the significands): NaN for NaN operands,
  // infinite x or zero y; x for infinite y; otherwise x - n*y exactly, with x's sign.
  var ux = bitcast<u32>(x);
  var uy = bitcast<u32>(y);
  var ex = i32((ux >> 23u) & 0xffu);
  var ey = i32((uy >> 23u) & 0xffu);
  let sx = ux & 0x80000000u;
  if ((uy << 1u) == 0u || g_isnan(y) || ex == 0xff) { return bitcast<f32>(0x7fc00000u); }
  if ((ux << 1u) <= (uy << 1u)) {
    if ((ux << 1u) == (uy << 1u)) { return bitcast<f32>(sx); }
    return x;
  }
  // Both normal and |y| >= 2^-103 (so every remainder is normal or zero): the significands'
  // remainder eight bits per step with u32 %, where the loop below takes one bit per step (it
  // alone ran mod at 42% of copy on an H200). Exact integer arithmetic, so the same bits.
  if (ex != 0 && ey >= 24) {
    let my = (uy & 0x7fffffu) | 0x800000u;
    // Both significands lie in [2^23, 2^24), so one subtraction reduces x's below y's.
    let mx = (ux & 0x7fffffu) | 0x800000u;
    var rem = select(mx, mx - my, mx >= my);
    var d = ex - ey;
    loop {
      if (d <= 0) { break; }
      if (d <= 3) {
        // A few bits left: shift and subtract, cheaper than a division.
        rem = rem << 1u;
        rem = select(rem, rem - my, rem >= my);
        d -= 1;
        continue;
      }
      let step = min(d, 8);
      rem = (rem << u32(step)) % my;
      d -= step;
    }
    if (rem == 0u) { return bitcast<f32>(sx); }
    // rem * 2^(ey - 150): normalised so that bit 23 leads, the exponent lowered to match.
    let lz = countLeadingZeros(rem) - 8u;
    return bitcast<f32>(sx | ((u32(ey) - lz) << 23u) | ((rem << lz) & 0x7fffffu));
  }
  if (ex == 0) {
    var i = ux << 9u;
    loop { if ((i >> 31u) != 0u) { break; } ex -= 1; i = i << 1u; }
    ux = ux << u32(1 - ex);
  } else {
    ux = (ux & 0x7fffffu) | 0x800000u;
  }
  if (ey == 0) {
    var i = uy << 9u;
    loop { if ((i >> 31u) != 0u) { break; } ey -= 1; i = i << 1u; }
    uy = uy << u32(1 - ey);
  } else {
    uy = (uy & 0x7fffffu) | 0x800000u;
  }
  loop {
    if (ex <= ey) { break; }
    let i = ux - uy;
    if ((i >> 31u) == 0u) {
      if (i == 0u) { return bitcast<f32>(sx); }
      ux = i;
    }
    ux = ux << 1u;
    ex -= 1;
  }
  let i = ux - uy;
  if ((i >> 31u) == 0u) {
    if (i == 0u) { return bitcast<f32>(sx); }
    ux = i;
  }
  loop { if ((ux >> 23u) != 0u) { break; } ux = ux << 1u; ex -= 1; }
  if (ex > 0) {
    ux = (ux - 0x800000u) | (u32(ex) << 23u);
  } else {
    ux = ux >> u32(1 - ex);
  }
  return bitcast<f32>(ux | sx);
}

fn g_abs_i32(a: i32) -> i32 {
  // Not the builtin: SPIR-V's SAbs leaves abs(-2^31) undefined, and NVIDIA's compiler took its
  // result to be non-negative, so a fused abs(x) % 3 skipped the sign fix (-2^31 gave 2, not 1).
  // In unsigned arithmetic abs(-2^31) wraps to -2^31, as WGSL and the WASM reference define it.
  let m = bitcast<u32>(a >> 31u);
  return bitcast<i32>((bitcast<u32>(a) ^ m) - m);
}

fn g_rem_i32(a: i32, b: i32) -> i32 {
  // Truncated remainder (C's %, the dividend's sign) through unsigned magnitudes: signed % and /
  // gave wrong results for negative operands on an NVIDIA H200 (measured), so they are avoided.
  let ua = select(u32(a), 0u - u32(a), a < 0);
  let ub = select(u32(b), 0u - u32(b), b < 0);
  let r = i32(ua % max(ub, 1u));
  return select(r, -r, a < 0);
}

fn g_quot_i32(a: i32, b: i32) -> i32 {
  // Truncated quotient through unsigned magnitudes (see g_rem_i32); wraps for MIN / -1.
  let ua = select(u32(a), 0u - u32(a), a < 0);
  let ub = select(u32(b), 0u - u32(b), b < 0);
  let q = ua / max(ub, 1u);
  return bitcast<i32>(select(q, 0u - q, (a < 0) != (b < 0)));
}

fn g_mod_i32(a: i32, b: i32) -> i32 {
  if (b == 0) { return 0; }
  if (b == -1) { return 0; }
  var r = g_rem_i32(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) { r = r + b; }
  return r;
}

fn g_mod_u32(a: u32, b: u32) -> u32 {
  return select(a % max(b, 1u), 0u, b == 0u);
}

fn g_floordiv_f32(a: f32, b: f32) -> f32 {
  return floor(a / b);
}

fn g_floordiv_i32(a: i32, b: i32) -> i32 {
  if (b == 0) { return 0; }
  if (b == -1) { return 0 - a; }
  var q = g_quot_i32(a, b);
  if ((g_rem_i32(a, b) != 0) && ((a < 0) != (b < 0))) { q = q - 1; }
  return q;
}

fn g_floordiv_u32(a: u32, b: u32) -> u32 {
  return select(a / max(b, 1u), 0u, b == 0u);
}

fn g_pow_f32(x: f32, y: f32) -> f32 {
  if (y == 0.0 || x == 1.0) { return 1.0; }
  if (g_isnan(x) || g_isnan(y)) { return x + y; }
  // (-1) ** +-Inf is 1 (C and NumPy); pow(1, Inf) below would be exp2(Inf * 0), NaN.
  if (x == -1.0 && abs(y) == bitcast<f32>(0x7f800000u)) { return 1.0; }
  // An odd integer exponent keeps the base's sign; exponents past 2^24 are all even in f32.
  let odd = abs(y) < 16777216.0 && trunc(y) == y && (i32(abs(y)) & 1) == 1;
  let inf = bitcast<f32>(0x7f800000u);
  if (x == 0.0) {
    // C's pow(+-0, y): +-Inf below 0, +-0 above, the sign kept only for odd y (pow(-0, -3) = -Inf).
    let r = select(0.0, inf, y < 0.0);
    return select(r, -r, odd && (bitcast<u32>(x) & 0x80000000u) != 0u);
  }
  if (x == -inf) {
    // pow(-Inf, y): 0 below 0 and Inf above, negative for odd y, for any y (2.5 included).
    let r = select(0.0, inf, y > 0.0);
    return select(r, -r, odd);
  }
  if (x < 0.0) {
    if (trunc(y) != y) { return bitcast<f32>(0x7fc00000u); }
    let magnitude = pow(-x, y);
    return select(magnitude, -magnitude, odd);
  }
  return pow(x, y);
}

fn g_pow_i32(x: i32, y: i32) -> i32 {
  // Negative exponents truncate toward zero: only |x| == 1 gives a non-zero result.
  if (y < 0) {
    if (x == 1) { return 1; }
    if (x == -1) { return select(1, -1, (y & 1) == 1); }
    return 0;
  }
  var result = 1;
  var base = x;
  var e = u32(y);
  for (var i = 0u; i < 32u && e != 0u; i++) {
    if ((e & 1u) == 1u) { result = result * base; }
    base = base * base;
    e = e >> 1u;
  }
  return result;
}

fn g_pow_u32(x: u32, y: u32) -> u32 {
  var result = 1u;
  var base = x;
  var e = y;
  for (var i = 0u; i < 32u && e != 0u; i++) {
    if ((e & 1u) == 1u) { result = result * base; }
    base = base * base;
    e = e >> 1u;
  }
  return result;
}

// x = t ln 2 + r, |r| <= 0.35, t an integer clamped to [-152, 129] (as a float): Cody and Waite
// with ln 2's high part of 16 significant bits, so t times it is exact and so is x minus that
// (Sterbenz); the low part's product rounds far below r's ULP.
fn g_exp_split(x: f32) -> vec2<f32> {
  let t = clamp(round(x * 1.4426950408889634), -152.0, 129.0);
  return vec2<f32>(t, (x - t * 0.693145751953125) - t * 1.4286067653302226e-6);
}

// y 2^t by two exact multiplications with powers of two made from bits: one would overflow at
// t = 128 or give no subnormal below -126; ldexp and an integer division cost a third of exp's
// speed on an H200.
fn g_times_pow2(y: f32, t: f32) -> f32 {
  let k = i32(t);
  let k1 = k >> 1u;
  return (y * bitcast<f32>(u32(k1 + 127) << 23u)) * bitcast<f32>(u32(k - k1 + 127) << 23u);
}

// e^x from e^r for x = t ln 2 + r: past the range, +Inf or 0 (t was clamped); NaN stays NaN.
fn g_exp_finish(x: f32, er: f32, t: f32) -> f32 {
  let y = g_times_pow2(er, t);
  return select(select(y, 0.0, x < -103.97207641601562), bitcast<f32>(0x7f800000u), x > 88.72283935546875);
}

fn g_exp(x: f32) -> f32 {
  // Not the builtin: WGSL bounds exp only to 3 + 2|x| ULP (an H200's was 61 ULP off near 86).
  // e^x = 2^t e^r (g_exp_split), e^r by Taylor to r^7 (truncation below 2^-27 relative).
  let s = g_exp_split(x);
  let r = s.y;
  let p = ((((((1.984126984126984e-4 * r + 1.388888888888889e-3) * r + 8.333333333333333e-3) * r
    + 0.041666666666666664) * r + 0.16666666666666666) * r + 0.5) * r + 1.0) * r + 1.0;
  return g_exp_finish(x, p, s.x);
}

fn g_exp_fast(x: f32) -> f32 {
  // e^x for the activations (sigmoid, tanh, silu, softplus, mish): as g_exp, but e^r =
  // 2^(r / ln 2) by the builtin on |r / ln 2| <= 1/2, where WGSL bounds it to 4 ULP; 4.5 ULP in
  // all instead of g_exp's 2, for speed: on an H200 the activations keep 2-4 points of copy
  // bandwidth more than with g_exp's polynomial (bench/README.md, session 17).
  let s = g_exp_split(x);
  return g_exp_finish(x, exp2(s.y * 1.4426950408889634), s.x);
}

// ln(1 + f) = f P(f) on f in [sqrt(1/2) - 1, sqrt(2) - 1]: a least-squares fit in relative error,
// iteratively reweighted towards minimax (2.6e-8), the same as src/ir/portable_math.ts's.
fn g_log1p_reduced(f: f32) -> f32 {
  let p = (((((((0.08722349256277084 * f - 0.14366839826107025) * f + 0.14952267706394196) * f
    - 0.16562393307685852) * f + 0.19956833124160767) * f - 0.25002074241638184) * f
    + 0.3333418667316437) * f - 0.49999988079071045) * f + 1.0;
  return f * p;
}

// x = 2^e (1 + f) with f in [sqrt(1/2) - 1, sqrt(2) - 1], from x's bits for finite x > 0: also for
// subnormal x, which a GPU that flushes subnormals would read as 0 in any float operation.
fn g_log_split(x: f32) -> vec2<f32> {
  var b = bitcast<u32>(x);
  var bias = 127;
  if (b < 0x00800000u) {
    // A subnormal is its mantissa times 2^-149: the mantissa as a float is exact and normal.
    b = bitcast<u32>(f32(b));
    bias = 127 + 149;
  }
  var e = i32(b >> 23u) - bias;
  var m = bitcast<f32>((b & 0x007fffffu) | 0x3f800000u);
  if (m > 1.4142135381698608) {
    m = m * 0.5;
    e = e + 1;
  }
  return vec2<f32>(f32(e), m - 1.0);
}

// The special arguments of log and log2, from the bits: NaN, negative, +-0 and +Inf (0 if none).
fn g_log_special(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  if ((b & 0x7fffffffu) == 0u) { return 0xff800000u; }
  if (b > 0x7f800000u) { return 0x7fc00000u; }
  if (b == 0x7f800000u) { return b; }
  return 0u;
}

fn g_log(x: f32) -> f32 {
  // Not the builtin: WGSL bounds log only to an absolute 2^-21 on [0.5, 2] (an H200's was 1e5 ULP
  // off near 1) and leaves subnormal arguments to the driver. e ln 2 + ln(1 + f) with ln 2's
  // high part of 16 bits, so that e times it is exact: within 3 ULP everywhere.
  let special = g_log_special(x);
  if (special != 0u) { return bitcast<f32>(special); }
  let s = g_log_split(x);
  return s.x * 0.693145751953125 + (g_log1p_reduced(s.y) + s.x * 1.4286067653302226e-6);
}

fn g_log2(x: f32) -> f32 {
  // As g_log: e + ln(1 + f) / ln 2.
  let special = g_log_special(x);
  if (special != 0u) { return bitcast<f32>(special); }
  let s = g_log_split(x);
  return s.x + g_log1p_reduced(s.y) * 1.4426950408889634;
}

// sqrt, inverseSqrt and 1 / x of a subnormal argument, which a GPU that flushes subnormals reads
// as 0 (an H200 gave sqrt 0 and rsqrt +Inf for all of them): the argument is m 2^-149 for its
// mantissa bits m, so 2m (exact and normal as a float) carries it, scaled back by an exact power
// of two. Other arguments take the builtins.
fn g_is_subnormal(x: f32) -> bool {
  let a = bitcast<u32>(x) & 0x7fffffffu;
  return a != 0u && a < 0x00800000u;
}

fn g_sqrt(x: f32) -> f32 {
  if (g_is_subnormal(x)) {
    if (bitcast<u32>(x) >= 0x80000000u) { return bitcast<f32>(0x7fc00000u); }
    return sqrt(f32(bitcast<u32>(x) * 2u)) * 2.6469779601696886e-23;
  }
  return sqrt(x);
}

fn g_rsqrt(x: f32) -> f32 {
  if (g_is_subnormal(x)) {
    if (bitcast<u32>(x) >= 0x80000000u) { return bitcast<f32>(0x7fc00000u); }
    return inverseSqrt(f32(bitcast<u32>(x) * 2u)) * 3.777893186295716e22;
  }
  return inverseSqrt(x);
}

fn g_reciprocal(x: f32) -> f32 {
  if (g_is_subnormal(x)) {
    // 1 / (m 2^-149) = (1 / m) 2^149, the power of two added to the exponent bits (2^149 is not
    // a float, and a driver may fold a product of two constants into one: Mesa's did, to +Inf).
    let b = bitcast<u32>(x);
    let r = bitcast<u32>(1.0 / f32(b & 0x7fffffffu));
    let scaled = select(r + (149u << 23u), 0x7f800000u, (r >> 23u) + 149u >= 255u);
    return bitcast<f32>(scaled | (b & 0x80000000u));
  }
  return 1.0 / x;
}

fn g_log1p(x: f32) -> f32 {
  // No cancellation tricks: WGSL float math is not exact, so drivers may reassociate it (Mesa's
  // NIR folds (1 + x) - 1 to x and 1 + x == 1 to x == 0), which turned Goldberg's
  // log(u) * x / (u - 1), u = 1 + x, into log(1 + x) near 0 (log1p(1e-7) came out 1.19e-7).
  // For x in [-0.5, 2), log1p(x) = 2 atanh(s) with s = x / (2 + x) in [-1/3, 1/2): the odd series
  // to s^23 (truncation below 2^-28 relative), Horner in s^2. It also keeps log off u = 1 + x in
  // [0.5, 2], where WGSL bounds log only to an absolute 2^-21. Below 2^-25, x itself is the
  // correctly rounded result (and x / 2 would round a subnormal x).
  if (g_isnan(x)) { return x; }
  if (abs(x) < 2.9802322387695312e-8) { return x; }
  if (x >= -0.5 && x < 2.0) {
    let s = x / (2.0 + x);
    let s2 = s * s;
    let p = 0.043478260869565216 * s2 + 0.047619047619047616;
    let p1 = p * s2 + 0.05263157894736842;
    let p2 = p1 * s2 + 0.058823529411764705;
    let p3 = p2 * s2 + 0.06666666666666667;
    let p4 = p3 * s2 + 0.07692307692307693;
    let p5 = p4 * s2 + 0.09090909090909091;
    let p6 = p5 * s2 + 0.1111111111111111;
    let p7 = p6 * s2 + 0.14285714285714285;
    let p8 = p7 * s2 + 0.2;
    let p9 = p8 * s2 + 0.3333333333333333;
    return (2.0 * s) * (p9 * s2 + 1.0);
  }
  if (x < -1.0) { return bitcast<f32>(0x7fc00000u); }
  if (x == -1.0) { return bitcast<f32>(0xff800000u); }
  if (x == bitcast<f32>(0x7f800000u)) { return x; }
  return g_log(1.0 + x);
}

fn g_expm1(x: f32) -> f32 {
  // No cancellation tricks (see g_log1p). As g_exp: x = k ln 2 + r by Cody and Waite, |r| <= 0.35,
  // then e^x - 1 = 2^k (e^r - 1) + (2^k - 1) with e^r - 1 = r + r^2 (1/2 + r/6 + ...) by Taylor to
  // r^8 (truncation below 2^-29 relative), which loses nothing near 0; 2^k - 1 is exact for the
  // k where it matters. One path for every x: a branch on |x| < ln 2 made both run wherever a
  // workgroup held both (80% of copy on an H200).
  if (g_isnan(x)) { return x; }
  if (x > 88.72283935546875) { return bitcast<f32>(0x7f800000u); }
  // e^x is below half an ULP of 1 there: -1.
  if (x < -18.0) { return -1.0; }
  let split = g_exp_split(x);
  let t = split.x;
  let r = split.y;
  let q = (((((2.48015873015873e-5 * r + 1.984126984126984e-4) * r + 1.388888888888889e-3) * r
    + 8.333333333333333e-3) * r + 0.041666666666666664) * r + 0.16666666666666666) * r + 0.5;
  let em1 = r + (r * r) * q;
  // t = 128 (x in [88.38, 88.72]): 2^t is not a float; e^x - 1 = e^x there, e^r in [0.7, 1.42]
  // times 2^128 on the exponent bits (Inf past f32's largest). As g_times_pow2's two products the
  // H200's compiler shared 2^64 * 2^64 = Inf with p below and gave Inf for 3e38 (measured).
  if (t == 128.0) { return bitcast<f32>(min(bitcast<u32>(em1 + 1.0) + 0x40000000u, 0x7f800000u)); }
  let p = g_times_pow2(1.0, t);
  return em1 * p + (p - 1.0);
}

// sin, cos and tan over every finite f32 (WGSL bounds its builtins only inside [-pi, pi], to an
// absolute 2^-11, and an H100 returned sin(1e5) = 0.0429 for 0.0357). |x| is reduced exactly by
// pi/2 in integer arithmetic (Payne and Hanek: the bits of 2/pi that matter for x's exponent,
// times x's significand), so no float rewrite a compiler may make can touch it, and the remainder
// r in [-pi/4, pi/4] goes to Taylor polynomials (truncation below 2^-36 relative there).

fn g_mul_wide(a: u32, b: u32) -> vec2<u32> {
  // The 64-bit product a * b as (low word, high word), from 16-bit halves.
  let a0 = a & 0xffffu;
  let a1 = a >> 16u;
  let b0 = b & 0xffffu;
  let b1 = b >> 16u;
  let p00 = a0 * b0;
  let p01 = a0 * b1;
  let p10 = a1 * b0;
  let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
  return vec2<u32>((p00 & 0xffffu) | (mid << 16u), a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}

fn g_two_over_pi(i: u32) -> u32 {
  // Word i of the binary fraction of 2/pi (0.a2f9836e 4e441529 ...); i <= 6 for f32 exponents.
  return select(select(select(select(select(select(0xfe5163abu, 0x3c439041u, i == 5u), 0xdb629599u,
    i == 4u), 0xf534ddc0u, i == 3u), 0xfc2757d1u, i == 2u), 0x4e441529u, i == 1u), 0xa2f9836eu,
    i == 0u);
}

fn g_two_over_pi_at(i: u32, o: u32) -> u32 {
  // The 32 bits of 2/pi's fraction from bit 32 i + o + 1 on (o < 32).
  return (g_two_over_pi(i) << o) | select(g_two_over_pi(i + 1u) >> (32u - o), 0u, o == 0u);
}

fn g_bits_at(l: vec4<u32>, b: u32) -> u32 {
  // The 32 bits of the 128-bit number l (l.x least significant) from bit b up, b <= 96.
  let i = b >> 5u;
  let o = b & 31u;
  let w0 = select(select(select(l.w, l.z, i == 2u), l.y, i == 1u), l.x, i == 0u);
  let w1 = select(select(l.w, l.z, i == 1u), l.y, i == 0u);
  return (w0 >> o) | select(w1 << (32u - o), 0u, o == 0u);
}

fn g_trig_reduce(x: f32) -> vec2<u32> {
  // |x| = (q + f) pi/2 with integer q and |f| <= 1/2, for |x| >= pi/4: returns (bits of the f32
  // nearest f pi/2, q mod 4). |x| = m 2^(e - 150) with m the 24-bit significand; the bits of 2/pi
  // before the 96-bit window below times |x| are multiples of 4 (whole turns), those after it
  // change the product's lowest 25 bits only, and f keeps 62 bits above them (no f32 lies closer
  // than about 2^-32 of a quarter turn to a multiple of pi/2, so 30 significant bits survive).
  let a = bitcast<u32>(x) & 0x7fffffffu;
  let e = a >> 23u;
  let m = (a & 0x7fffffu) | 0x800000u;
  // From exponent 152 on the window starts right after the bits that make whole turns (bit e - 151
  // of 2/pi), so the bits taken below lie 32 above the product's lowest, which the bits of 2/pi
  // past the window would change (at x = 1.09e17, a window on word boundaries left sin 2.7 ULP off).
  let skip = select(0u, e - 152u, e >= 152u);
  let k = skip >> 5u;
  let o = skip & 31u;
  let p2 = g_mul_wide(m, g_two_over_pi_at(k + 2u, o));
  let p1 = g_mul_wide(m, g_two_over_pi_at(k + 1u, o));
  let p0 = g_mul_wide(m, g_two_over_pi_at(k, o));
  let l1 = p1.x + p2.y;
  let l2a = p1.y + select(0u, 1u, l1 < p2.y);
  let l2 = l2a + p0.x;
  let l3 = p0.y + select(0u, 1u, l2 < p0.x);
  // The binary point of |x| 2/pi lies at bit 246 + skip - e of the product (94 from exponent 152
  // on); take 2 integer bits and 62 fraction bits, and round to the nearest quadrant.
  let limbs = vec4<u32>(p2.x, l1, l2, l3);
  let s = 184u + skip - e;
  let vl = g_bits_at(limbs, s);
  let vh = g_bits_at(limbs, s + 32u);
  let q = (vh + 0x20000000u) >> 30u;
  var fh = vh - (q << 30u);
  var fl = vl;
  let negative = (fh >> 31u) != 0u;
  if (negative) {
    fl = 0u - vl;
    fh = ~fh + select(0u, 1u, vl == 0u);
  }
  // |f| 2^62 normalised to its top 32 bits N, then N times pi/2 2^31 (0xc90fdaa2), rounded to 24
  // bits to nearest, ties to even: r = (that) 2^(-61 - c) for c leading zeros of |f| 2^62.
  let c = select(countLeadingZeros(fh), 32u + countLeadingZeros(fl), fh == 0u);
  if (c >= 64u) { return vec2<u32>(0u, q); }
  let top = select(select(fh << c, (fh << c) | (fl >> (32u - c)), c > 0u), fl << (c - 32u), c >= 32u);
  let p = g_mul_wide(top, 0xc90fdaa2u);
  let lz = countLeadingZeros(p.y);
  let n = select(p.y, (p.y << 1u) | (p.x >> 31u), lz == 1u);
  let sticky = (p.x << lz) != 0u;
  let keep = n >> 8u;
  let rest = n & 0xffu;
  let up = rest > 0x80u || (rest == 0x80u && (sticky || (keep & 1u) == 1u));
  let bits = ((129u - lz - c) << 23u) + (keep - 0x800000u) + select(0u, 1u, up);
  return vec2<u32>(bits | select(0u, 0x80000000u, negative), q);
}

fn g_sin_poly(r: f32, c: f32) -> f32 {
  // sin(r + c) for |r| <= pi/4 and a correction |c| <= 2^-20 |r|: sin r + c cos r, cos r ~ 1.
  let z = r * r;
  let p = ((((-2.505210838544172e-8 * z + 2.755731922398589e-6) * z - 1.984126984126984e-4) * z
    + 8.333333333333333e-3) * z - 0.16666666666666666);
  return r + (r * z * p + c);
}

fn g_cos_poly(r: f32, c: f32) -> f32 {
  // cos(r + c): cos r - c sin r.
  let z = r * r;
  let p = (((((2.08767569878681e-9 * z - 2.755731922398589e-7) * z + 2.48015873015873e-5) * z
    - 1.388888888888889e-3) * z + 0.041666666666666664) * z - 0.5);
  return 1.0 + (z * p - r * c);
}

fn g_trig(x: f32) -> vec3<f32> {
  // (r, c, q mod 4) with |x| = q pi/2 + r + c, |r| <= pi/4 (a little more below 800) and c a
  // correction far below r's ULP. Below pi/4, |x| itself. Below 800 (q < 512), Cody and Waite's
  // reduction with pi/2 in three 15-bit parts and a 24-bit fourth, each q * part exact: r1 is
  // exact (Sterbenz), r2 is a multiple of 2^-32 and so exact below 2^-8, and then r3 rounds once;
  // above 2^-8, r2 rounds once and the rest joins c. Above 800, Payne and Hanek (g_trig_reduce),
  // whose integer arithmetic costs about five times the memory traffic of an elementwise kernel.
  let a = bitcast<u32>(x) & 0x7fffffffu;
  let ax = bitcast<f32>(a);
  if (a < 0x3f490fdbu) { return vec3<f32>(ax, 0.0, 0.0); }
  if (a < 0x44480000u) {
    let q = round(ax * 0.6366197466850281);
    let r1 = ax - q * 1.57080078125;
    let r2 = r1 - q * -4.454515874385834e-6;
    let q3 = q * 6.077272018956137e-11;
    let q4 = q * -1.7151245100058819e-15;
    let wide = abs(r2) >= 0.00390625;
    let r = select(r2 - q3, r2, wide);
    let c = select(-q4, -(q3 + q4), wide);
    return vec3<f32>(r, c, f32(u32(q) & 3u));
  }
  let t = g_trig_reduce(x);
  return vec3<f32>(bitcast<f32>(t.x), 0.0, f32(t.y));
}

fn g_sin(x: f32) -> f32 {
  let a = bitcast<u32>(x) & 0x7fffffffu;
  if (a >= 0x7f800000u) { return bitcast<f32>(0x7fc00000u); }
  // Below 2^-12, x^3 / 6 is under half an ULP of x (and -0 stays -0).
  if (a < 0x39800000u) { return x; }
  let t = g_trig(x);
  let q = u32(t.z);
  let v = select(g_sin_poly(t.x, t.y), g_cos_poly(t.x, t.y), (q & 1u) == 1u);
  // sin(|x|) is negative in quadrants 2 and 3; sin is odd.
  return select(v, -v, ((q & 2u) == 2u) != (x < 0.0));
}

fn g_cos(x: f32) -> f32 {
  let a = bitcast<u32>(x) & 0x7fffffffu;
  if (a >= 0x7f800000u) { return bitcast<f32>(0x7fc00000u); }
  let t = g_trig(x);
  let q = u32(t.z);
  let v = select(g_cos_poly(t.x, t.y), g_sin_poly(t.x, t.y), (q & 1u) == 1u);
  // cos(|x|) is negative in quadrants 1 and 2.
  return select(v, -v, q == 1u || q == 2u);
}

fn g_tan_poly(r: f32, c: f32) -> f32 {
  // tan(r + c) for |r| <= 0.8 and a small correction c: tan r + c (1 + tan^2 r), tan r =
  // r + r^3 T(r^2) with T a least-squares fit in relative error, reweighted towards minimax
  // (5.8e-9 of tan r), rather than sin r / cos r, whose two polynomials and division reached 4.2
  // ULP on an H100.
  let z = r * r;
  let p = (((((0.004003810230642557 * z + 0.000909367692656815) * z + 0.01013821829110384) * z
    + 0.02156994119286537) * z + 0.0540010929107666) * z + 0.1333319991827011) * z
    + 0.3333333432674408;
  let t = r + (r * z) * p;
  return t + c * (1.0 + t * t);
}

fn g_tan(x: f32) -> f32 {
  let a = bitcast<u32>(x) & 0x7fffffffu;
  if (a >= 0x7f800000u) { return bitcast<f32>(0x7fc00000u); }
  // Below 2^-12, x^3 / 3 is under half an ULP of x.
  if (a < 0x39800000u) { return x; }
  let t = g_trig(x);
  let q = u32(t.z);
  let v0 = g_tan_poly(t.x, t.y);
  // tan(|x|) = tan r in even quadrants, -1 / tan r in odd ones; tan is odd. WGSL's division is
  // 2.5 ULP: one correction by the residual, which fma computes exactly.
  let inv = 1.0 / v0;
  let v = select(v0, -(inv + inv * fma(-inv, v0, 1.0)), (q & 1u) == 1u);
  return select(v, -v, x < 0.0);
}

fn g_tanh(x: f32) -> f32 {
  // Not the builtin: some drivers compute it as (e^2x - 1) / (e^2x + 1), which loses every digit
  // near 0 and overflows to NaN past |x| ~ 44. A series near 0 (relative error < 2e-10 below
  // 0.125), and (1 - e^-2|x|) / (1 + e^-2|x|) elsewhere, which cannot overflow.
  if (g_isnan(x)) { return x; }
  let z = abs(x);
  if (z < 0.125) {
    let x2 = x * x;
    return x * (1.0 + x2 * (-0.3333333333333333 + x2 * (0.13333333333333333 - x2 * 0.05396825396825397)));
  }
  let e = g_exp_fast(-2.0 * min(z, 15.0));
  let t = (1.0 - e) / (1.0 + e);
  return select(t, -t, x < 0.0);
}

fn g_sigmoid(x: f32) -> f32 {
  return 1.0 / (1.0 + g_exp_fast(-x));
}

fn g_erf(x: f32) -> f32 {
  // Taylor series near 0 (relative error < 3e-8 for |x| < 0.5); Numerical Recipes' erfc
  // Chebyshev fit elsewhere (fractional error < 1.2e-7).
  let z = abs(x);
  if (z < 0.5) {
    let x2 = x * x;
    return 1.1283791670955126 * x * (1.0 + x2 * (-0.3333333333333333 + x2 * (0.1 + x2 * (-0.023809523809523808 + x2 * (0.004629629629629629 - x2 * 0.0007575757575757576)))));
  }
  let t = 1.0 / (1.0 + 0.5 * z);
  let poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
  let r = 1.0 - t * exp(poly);
  return select(r, -r, x < 0.0);
}

fn g_pcg(v: u32) -> u32 {
  // PCG's RXS-M-XS output permutation: a cheap, well-mixed 32-bit hash.
  let state = v * 747796405u + 2891336453u;
  let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
  return (word >> 22u) ^ word;
}

// Activations (src/ops/activations.ts). Each mirrors the f64 function of the same name with a 64
// suffix in asm/math.ts.

fn g_relu(x: f32) -> f32 {
  // max(NaN, 0) is driver-defined; PyTorch's relu keeps NaN.
  return select(max(x, 0.0), x, g_isnan(x));
}

fn g_gelu(x: f32) -> f32 {
  return 0.5 * x * (1.0 + g_erf(x * 0.7071067811865476));
}

fn g_gelu_tanh(x: f32) -> f32 {
  let inner = 0.7978845608028654 * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + g_tanh(inner));
}

fn g_silu(x: f32) -> f32 {
  // x * sigmoid(x) written as a quotient: exp(-x) overflowing to +Inf gives -0, not NaN.
  // Below -80, silu(x) = x e^x (to 1e-35) and stays normal down to x ~ -91.5, but exp(-x)
  // overflows past 88.7 and exp(x) is subnormal (flushed by some GPUs): scale by 2^64 inside.
  if (x < -80.0) { return (x * g_exp_fast(x + 44.3614195558365)) * 5.421010862427522e-20; }
  return x / (1.0 + g_exp_fast(-x));
}

fn g_softplus(x: f32) -> f32 {
  // log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow for large x, and for negative x
  // log1p(e^x), as accurate as e^x itself (g_log1p keeps its relative accuracy near 0).
  return select(max(x, 0.0) + g_log1p(g_exp_fast(-abs(x))), x, g_isnan(x));
}

fn g_mish(x: f32) -> f32 {
  // tanh(log(1 + e^x)) = n / (n + 2) with n = e^x (e^x + 2): one exponential and one division
  // instead of softplus's logarithm and tanh's own exponential and division (mish ran at 49% of
  // copy on an H200 that way). Past 20, n / (n + 2) rounds to 1 (and n would overflow past 44):
  // x. Below -80, mish(x) = x e^x (to 1e-35), which stays normal down to x ~ -91.5 while e^x is
  // subnormal (flushed by some GPUs): as g_silu, scaled by 2^64 inside.
  if (g_isnan(x)) { return x; }
  if (x < -80.0) { return (x * g_exp_fast(x + 44.3614195558365)) * 5.421010862427522e-20; }
  if (x > 20.0) { return x; }
  let e = g_exp_fast(x);
  let n = e * (e + 2.0);
  return x * (n / (n + 2.0));
}

fn g_hardswish(x: f32) -> f32 {
  // Divide before multiplying: x * 6 overflows for x above f32 max / 6.
  return select(x * (clamp(x + 3.0, 0.0, 6.0) / 6.0), x, g_isnan(x));
}

fn g_hardsigmoid(x: f32) -> f32 {
  return select(clamp(x / 6.0 + 0.5, 0.0, 1.0), x, g_isnan(x));
}

fn g_selu(x: f32) -> f32 {
  return 1.0507009873554805 * select(1.6732632423543772 * g_expm1(x), x, x > 0.0);
}

fn g_softsign(x: f32) -> f32 {
  // Past 2^30 the quotient rounds to +-1; dividing there would take the reciprocal of a number
  // above 2^126, which NVIDIA flushes to zero (softsign(3e38) came out 0, measured). Infinities
  // give NaN, Inf / Inf, as PyTorch's x / (1 + |x|) does (tests/torch checks it).
  if ((bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u) { return bitcast<f32>(0x7fc00000u); }
  return select(x / (1.0 + abs(x)), sign(x), abs(x) > 1073741824.0);
}

fn g_leaky_relu(x: f32, alpha: f32) -> f32 {
  return select(alpha * x, x, x >= 0.0);
}

fn g_elu(x: f32, alpha: f32) -> f32 {
  return select(alpha * g_expm1(x), x, x > 0.0);
}

// Stateful reductions (src/gpu/_codegen_reduce.ts).

fn g_lse_merge(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
  // (max, sum of exp(x - max)) pairs. NaN wins; an empty side (-Inf, 0) leaves the other; a term
  // at the maximum counts exp(0) = 1 even when the maximum is +Inf.
  if (g_isnan(a.x) || g_isnan(b.x)) { return vec2<f32>(a.x + b.x, 1.0); }
  let m = max(a.x, b.x);
  if (m == bitcast<f32>(0xff800000u)) { return vec2<f32>(m, 0.0); }
  let ea = select(exp(a.x - m), 1.0, a.x == m);
  let eb = select(exp(b.x - m), 1.0, b.x == m);
  return vec2<f32>(m, a.y * ea + b.y * eb);
}

fn g_lse_final(a: vec2<f32>) -> f32 {
  // Infinite or NaN maxima are the answer themselves.
  if (g_isnan(a.x) || abs(a.x) == bitcast<f32>(0x7f800000u)) { return a.x; }
  return a.x + log(a.y);
}

fn g_moments_seed(v: f32) -> f32 {
  // M2 of one element: 0, or NaN for an infinity (its deviation from the mean is Inf - Inf) or
  // a NaN (on the bits: a compiler may assume v == v).
  return select(0.0, bitcast<f32>(0x7fc00000u), (bitcast<u32>(v) & 0x7fffffffu) >= 0x7f800000u);
}

fn g_moments_merge(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> {
  // (count, mean, M2) pairs, Chan, Golub and LeVeque's update.
  let n = a.x + b.x;
  if (b.x == 0.0) { return a; }
  if (a.x == 0.0) { return b; }
  let d = b.y - a.y;
  let w = b.x / n;
  var m2 = a.z + b.z + d * d * a.x * w;
  // An infinite mean on either side: the deviations are undefined.
  let inf = bitcast<f32>(0x7f800000u);
  if (abs(a.y) == inf || abs(b.y) == inf) { m2 = bitcast<f32>(0x7fc00000u); }
  return vec4<f32>(n, a.y + d * w, m2, 0.0);
}

fn g_isnan4(x: vec4<f32>) -> vec4<bool> {
  // Lane-wise g_isnan (a bit test, safe from fast-math folding).
  return (bitcast<vec4<u32>>(x) & vec4<u32>(0x7fffffffu)) > vec4<u32>(0x7f800000u);
}

fn g_isfinite4(x: vec4<f32>) -> vec4<bool> {
  // Neither infinite nor NaN, lane-wise, by the exponent bits.
  return (bitcast<vec4<u32>>(x) & vec4<u32>(0x7fffffffu)) < vec4<u32>(0x7f800000u);
}

fn g_round_f16(x: f32) -> f32 {
  // x rounded to the nearest float16 value (ties to even; overflow to infinity), in f32: the
  // cast to float16 as bit arithmetic, because a driver may fold f32(f16(x)) back to x (NVIDIA's
  // did: 65536 stayed 65536, measured) and f16() of an out-of-range value is indeterminate.
  let bits = bitcast<u32>(x);
  let sign = bits & 0x80000000u;
  let a = bits & 0x7fffffffu;
  if (a >= 0x7f800000u) { return x; }
  // 65520 and above round to 65536, past float16's largest finite value (65504).
  if (a >= 0x477ff000u) { return bitcast<f32>(sign | 0x7f800000u); }
  if (a >= 0x38800000u) {
    // A normal float16 (2^-14 and above): keep 10 fraction bits, ties to even.
    let r = (a + 0xfffu + ((a >> 13u) & 1u)) & 0xffffe000u;
    return bitcast<f32>(sign | r);
  }
  // Subnormal float16: a multiple of 2^-24 (both scalings are exact; round() is ties to even).
  let q = round(bitcast<f32>(a) * 16777216.0) * 5.9604644775390625e-8;
  return bitcast<f32>(sign | bitcast<u32>(q));
}

fn g_div_f32(a: f32, b: f32) -> f32 {
  // WGSL bounds a / b only for |b| in [2^-126, 2^126]; past 2^126 a GPU may multiply by a
  // reciprocal that flushes to zero (NVIDIA does: 1e38 / 3e38 gave 0). Scaling both by 1/4 is
  // exact there and brings b back in range.
  if (abs(b) > bitcast<f32>(0x7e800000u)) { return (a * 0.25) / (b * 0.25); }
  return a / b;
}
