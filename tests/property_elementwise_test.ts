/**
 * Property tests of the elementwise kernels (src/ir/elementwise_table.ts): every unary and
 * binary op, every dtype it accepts, against the WASM reference, over random shapes and layouts
 * (contiguous, broadcast, transposed, sliced with negative steps, 0-d, JS scalars) so that the
 * vec4, scalar and strided GPU variants all run; the scalar variant is also forced through
 * `setPlanOverride`.
 *
 * Tolerances follow the WGSL accuracy table (f32): each GPU builtin may be off from the exact
 * value by the stated amount, and the WASM reference (AssemblyScript computing in f64 and rounding
 * once) is within 0.5 ULP of the exact value, so the GPU-vs-WASM distance gets 0.5 ULP more
 * (rounded up to whole ULPs). Subnormals: WGSL lets a GPU flush subnormal inputs and results to
 * zero, so results below 2^-126 compare as zero and a result may instead match the reference
 * computed with subnormal inputs replaced by ±0 (or, for ops monotone near 0, lie between the
 * references at ±0 and at ±2^-126: lavapipe's log of a subnormal treats it as a value of exponent
 * -127, neither the value nor zero).
 * @module
 */
import fc from "fast-check";
import * as gyre from "../src/mod.ts";
import {
  Bag,
  EXACT,
  fillFloat,
  type FloatDomain,
  forcePlan,
  FULL,
  hostData,
  type LayoutKind,
  LAYOUTS,
  makeLayout,
  MIN_NORMAL,
  mulberry32,
  operandOn,
  property,
  shapeArb,
  sizeOf,
  SPECIALS_F32,
  type Tol,
  ulpOf,
  within,
} from "./_harness.ts";

type DType = gyre.DType;
const U = 2 ** -24;

/** How one op is tested. */
interface OpSpec {
  /** Operand dtypes drawn (each operand independently, 60% of the time equal to the first). */
  dtypes: readonly DType[];
  /** Float values of operand `k`. */
  domain?: (k: number) => FloatDomain;
  /** Integer values of operand `k` (full range and specials when absent). */
  intRange?: (k: number, dtype: DType) => { lo: number; hi: number } | undefined;
  /** Tolerance of float results; `x` are the operands' values at the element. Exact when absent. */
  tol?: (x: number[], want: number) => Tol;
  /** Near zero the op is monotone in each operand (see the module doc on subnormals). */
  monotone?: boolean;
  /** ±0 must match exactly (ops that copy or negate the sign bit). */
  signedZero?: boolean;
  /** Ops taking `{ alpha }`: its values (the same constant on both devices; x[1] in `tol`). */
  alpha?: FloatDomain;
}

const ALL: readonly DType[] = ["float32", "float16", "int32", "uint32", "bool"];
const NUMERIC = ALL;
/** Float ops accept every dtype: integers and bools compute in float32. */
const FLOATS = ALL;

/** Integers small enough to convert to f32 exactly (float ops on integer tensors). */
const smallInts = (_k: number, dtype: DType) =>
  dtype === "uint32" ? { lo: 0, hi: 1 << 20 } : { lo: -(1 << 20), hi: 1 << 20 };

const ulps = (n: number): Tol => ({ ulp: Math.ceil(n) });

/**
 * log and log2: not WGSL's builtins (an absolute 2^-21 on [0.5, 2]) but g_log and g_log2: the
 * exponent from the bits, e ln 2 with an exact product, and a polynomial of 2.6e-8 relative error
 * on [sqrt(1/2), sqrt(2)), so relative everywhere, also near 1: 3.13 ULP measured on lavapipe
 * over 2^22 inputs of every exponent (bench/results/accuracy-*.md); bound 3.5, +0.5 reference.
 */
const logTol = (_x: number[], _w: number): Tol => ulps(4);

/**
 * exp: not WGSL's builtin (3 + 2|x| ULP) but g_exp: Cody-Waite by ln 2 with exact products, a
 * Taylor polynomial to r^7 and an exact scaling: 1.15 ULP measured; bound 2, plus the reference's
 * 1 (WASM's exp is g_exp's algorithm in f32x4, asm/vector_math.ts: within 1 ULP over every f32).
 */
const expTol = (): Tol => ulps(expUlps() + 1);

/** log's whole range with the values next to 1, where WGSL's builtin lost every digit. */
const LOG_DOMAIN: FloatDomain = {
  ...FULL,
  specials: [...SPECIALS_F32, 0.5, 2, 0.75, 0.99999994, 1.0000001, 0.9999932646751404, 1e-40],
};

/** The whole f32 range for the trigonometric ops, with values nearest multiples of pi/2. */
const TRIG: FloatDomain = {
  kind: "log",
  minExp: -126,
  maxExp: 127,
  specials: [...SPECIALS_F32, Math.PI, -Math.PI, 1.5707963, 1e38, 3.0e5, 1e5, 2 ** -12],
};

const UNARY_SPECS: Record<string, OpSpec> = {
  // Exact ops: WGSL requires correctly rounded negation, abs, min, max, floor, ceil, round,
  // multiplication; the reference computes the same f32 operation.
  neg: { dtypes: NUMERIC, signedZero: true },
  abs: { dtypes: NUMERIC, signedZero: true },
  sign: { dtypes: NUMERIC },
  square: { dtypes: NUMERIC },
  floor: { dtypes: FLOATS, intRange: smallInts, signedZero: true },
  ceil: { dtypes: FLOATS, intRange: smallInts, signedZero: true },
  round: {
    dtypes: FLOATS,
    intRange: smallInts,
    signedZero: true,
    // Halves exercise round-half-to-even.
    domain: () => ({
      ...FULL,
      specials: [...SPECIALS_F32, 0.5, -0.5, 3.5, -3.5, 4.5, 2.5e6 + 0.5],
    }),
  },
  // 1/x: WGSL division is 2.5 ULP for |x| in [2^-126, 2^126], +0.5 reference = 3 ULP. Larger
  // divisors have a subnormal reciprocal, which a GPU may flush (the comparison allows it);
  // subnormal divisors go through g_reciprocal's exact scaling. The whole range.
  reciprocal: {
    dtypes: FLOATS,
    intRange: smallInts,
    domain: () => FULL,
    tol: () => ulps(3),
    monotone: true,
  },
  exp: {
    dtypes: FLOATS,
    intRange: () => ({ lo: -100, hi: 100 }),
    domain: () => ({ ...FULL, kind: "uniform", lo: -100, hi: 100 }),
    tol: expTol,
    monotone: true,
  },
  exp2: {
    dtypes: FLOATS,
    intRange: () => ({ lo: -150, hi: 130 }),
    domain: () => ({ ...FULL, kind: "uniform", lo: -150, hi: 130 }),
    tol: expTol,
    monotone: true,
  },
  log: {
    dtypes: FLOATS,
    intRange: smallInts,
    // The whole range, subnormals included (g_log reads their exponent from the bits, so a GPU
    // that flushes subnormal operands still gets them right), with values next to 1.
    domain: () => LOG_DOMAIN,
    tol: logTol,
    monotone: true,
  },
  log2: {
    dtypes: FLOATS,
    intRange: smallInts,
    domain: () => LOG_DOMAIN,
    tol: logTol,
    monotone: true,
  },
  // log1p: on [-0.5, 2), 2 atanh(x / (2 + x)) by its series: WGSL's 2.5-ULP division and 2 + x's
  // rounding carry into the result, plus the series' roundings (2.1 ULP measured): 5 ULP;
  // elsewhere g_log(1 + x), log's 3.5 ULP plus 1 + x's rounding: 4.5. +0.5 reference.
  // Relative down to 0: the absolute 2^-20 allowed near 0 before hid log1p(1e-7) = 1.19e-7.
  log1p: {
    dtypes: FLOATS,
    intRange: () => ({ lo: -1, hi: 1 << 20 }),
    domain: () => ({
      kind: "log",
      minExp: -30,
      maxExp: 30,
      specials: [...SPECIALS_F32, -0.5, 1, -0.99, 1e-8, -1e-8],
    }),
    tol: (x) => ulps(log1pUlps(x[0]) + 0.5),
    monotone: true,
  },
  // expm1: g_expm1, 2^k (e^r - 1) + (2^k - 1) with e^r - 1 by a Taylor polynomial that loses
  // nothing near 0 (1.38 ULP measured on lavapipe over 2^22 inputs of every exponent): the
  // polynomial's few roundings, the product and the sum, 3 ULP; +0.5 reference. Relative down to
  // 0: the absolute 2^-20 allowed near 0 once hid expm1(1e-7) = 1.19e-7.
  expm1: {
    dtypes: FLOATS,
    intRange: () => ({ lo: -100, hi: 100 }),
    domain: () => ({
      kind: "uniform",
      lo: -100,
      hi: 100,
      // 88.42 and 88.7: t = 128, where 2^t is no float (the H200 once gave Inf there).
      specials: [...SPECIALS_F32, 1e-8, -1e-8, 0.25, -0.25, 0.69, -0.69, 88.42, 88.7],
      pSpecial: 0.2,
    }),
    tol: (x) => ulps(expm1Ulps(x[0]) + 0.5),
    monotone: true,
  },
  // sqrt (WGSL): inherited from 1 / inverseSqrt(x): 2 + 2.5 ULP, +0.5 reference.
  sqrt: { dtypes: FLOATS, intRange: smallInts, tol: () => ulps(5), monotone: true },
  // inverseSqrt (WGSL): 2 ULP, +0.5 reference.
  rsqrt: { dtypes: FLOATS, intRange: smallInts, tol: () => ulps(3), monotone: true },
  // sin, cos, tan: not WGSL's builtins (absolute 2^-11 inside [-pi, pi] only) but g_sin, g_cos and
  // g_tan, which reduce by pi/2 exactly and so hold over every finite f32. Measured against
  // float64 (lavapipe, every f32 from pi/4 to 800 and 2^20 random bit patterns): sin 1.71 ULP,
  // cos 1.69, tan 3.65 (a division more); their bounds 2, 2 and 4, +0.5 for the reference. The
  // whole range, exponents -126 to 127, with every special and the f32 values nearest pi/2, pi
  // and 1e38.
  sin: {
    dtypes: FLOATS,
    domain: () => TRIG,
    tol: () => ulps(2.5),
    monotone: true,
  },
  cos: {
    dtypes: FLOATS,
    domain: () => TRIG,
    tol: () => ulps(2.5),
    monotone: true,
  },
  tan: {
    dtypes: FLOATS,
    domain: () => TRIG,
    tol: () => ulps(4.5),
    monotone: true,
  },
  // tanh: g_tanh, a series below 0.125 (3 roundings), else (1 - e) / (1 + e) with e = exp(-2|x|)
  // (|x| clamped to 15), g_exp_fast's 4.5 ULP grown by 2e / (1 - e^2) through the subtraction and the
  // quotient, plus four roundings (3.75 ULP measured at 0.125); plus the reference's
  // (wasmTanhUlps). Beyond 20 it is +-1 exactly; the whole range's specials are drawn too.
  tanh: {
    dtypes: FLOATS,
    intRange: () => ({ lo: -20, hi: 20 }),
    domain: () => ({ ...FULL, kind: "uniform", lo: -20, hi: 20 }),
    tol: (x) => ulps(tanhUlps(Math.abs(x[0])) + wasmTanhUlps(Math.abs(x[0]))),
    monotone: true,
  },
  // sigmoid = 1 / (1 + exp(-x)): g_exp_fast's 4.5 ULP shrinks through 1 + e, + add 0.5, divide
  // 2.5: 7.5 ULP; the reference's 2.5 (WASM's sigmoid is f32x4 from e^-|x|, asm/vector_math.ts,
  // 2.23 ULP measured): 10 ULP.
  sigmoid: {
    dtypes: FLOATS,
    intRange: () => ({ lo: -100, hi: 100 }),
    domain: () => ({ ...FULL, kind: "uniform", lo: -100, hi: 100 }),
    tol: () => ulps(10),
    monotone: true,
  },
  // erf: both devices evaluate the same formula (g_erf / g_erf64), so only f32 evaluation error
  // counts. |x| < 0.5: a 6-term polynomial, ~8 ULP. Otherwise r = 1 - t exp(p) with |p| <= 20
  // where the term matters: p's rounding (~20 ULP of 20) plus exp's 3 + 2|p| ULP, relative on a
  // term <= 0.5, is below 2^-18 absolute.
  erf: {
    dtypes: FLOATS,
    intRange: () => ({ lo: -5, hi: 5 }),
    domain: () => ({ ...FULL, kind: "uniform", lo: -6, hi: 6 }),
    tol: (x) => (Math.abs(x[0]) < 0.5 ? ulps(8) : { atol: 2 ** -18 }),
    monotone: true,
  },
  logicalNot: { dtypes: ALL },

  // Activations: the GPU evaluates the prelude formula in f32, the reference the same formula in
  // f64 rounded once. Each bound sums the WGSL error of the builtins the formula uses, as
  // propagated to the result, plus RTOL_F32 for the f32 rounding of the formula's constants and
  // of the final multiply/add/divide.
  // relu: a selection or max(x, 0), exact (either zero for -0: max's sign of zero is driver's).
  relu: { dtypes: FLOATS, intRange: smallInts },
  // hardsigmoid: x / 6 (2.5 ULP of x/6, absolute, kept by the + 0.5) then the add.
  hardsigmoid: {
    dtypes: FLOATS,
    intRange: smallInts,
    domain: () => ACT,
    tol: (x) => ({ atol: 3 * ulpOf(x[0] / 6), rtol: RTOL_F32 }),
  },
  // hardswish: x + 3 rounds (half an ULP of x + 3, absolute, times |x| / 6), then a multiply and
  // a divide (3 ULP).
  hardswish: {
    dtypes: FLOATS,
    intRange: smallInts,
    domain: () => ACT,
    tol: (x) => ({ atol: (Math.abs(x[0]) * ulpOf(x[0] + 3)) / 6, rtol: 3 * RTOL_F32 }),
  },
  // softsign: 1 + |x| (0.5 ULP) and a divide (2.5 ULP).
  softsign: { dtypes: FLOATS, intRange: smallInts, tol: () => ({ rtol: 4 * RTOL_F32 }) },
  // silu = x / (1 + exp(-x)): as sigmoid, 8 ULP; below -80, x e^(x + 64 ln 2) 2^-64: g_exp_fast's
  // 4.5 ULP plus the rounding of x + 64 ln 2 (32 ULP of a number below 64) and of the constant,
  // plus two multiplies.
  silu: {
    dtypes: FLOATS,
    intRange: () => ({ lo: -100, hi: 100 }),
    domain: () => ({ ...ACT, lo: -100, hi: 100 }),
    tol: (x) => ulps(x[0] < -80 ? 2 * FAST_EXP_ULPS + 66.5 : 8),
  },
  // gelu = x/2 (1 + erf(x / sqrt 2)): erf's bound (8 ULP below 0.5, else absolute 2^-18) on the
  // 1 + erf term, times |x| / 2.
  gelu: {
    dtypes: FLOATS,
    intRange: smallInts,
    domain: () => ACT,
    tol: (x) => {
      const z = x[0] * Math.SQRT1_2;
      const derf = Math.abs(z) < 0.5 ? 8 * ulpOf(Math.abs(z) * 1.13) : 2 ** -18;
      return { atol: 0.5 * Math.abs(x[0]) * derf, rtol: 2 * RTOL_F32 };
    },
  },
  // geluTanh = x/2 (1 + tanh(k (x + 0.044715 x^3))): tanh's absolute (3 + 2|t|) 2^-21 (|t| <= 15,
  // as tanh above) plus the inner polynomial's few ULP of t (tanh' <= 1), times |x| / 2.
  geluTanh: {
    dtypes: FLOATS,
    intRange: smallInts,
    domain: () => ACT,
    tol: (x) => {
      const t = 0.7978845608028654 * (x[0] + 0.044715 * x[0] ** 3);
      const dt = (3 + 2 * Math.min(15, Math.abs(t))) * 2 ** -21 + 4 * U * Math.abs(t);
      return { atol: 0.5 * Math.abs(x[0]) * dt, rtol: 2 * RTOL_F32 };
    },
  },
  // softplus = max(x, 0) + log1p(e), e = exp(-|x|) <= 1: exp's (3 + 2|x|) ULP of e passes
  // through log1p with a gain of at most 1, plus log1p's own bound (doubled: an error of k ULP of
  // one value is up to 2k ULP of another in a different binade), scaled by log1p's share of the
  // result when x > 0, plus the add. Relative down to 0 (softplus(-20) = 2.06e-9): an absolute
  // 2^-20 allowed before hid softplus(-20) = 0.
  softplus: {
    dtypes: FLOATS,
    intRange: () => ({ lo: -100, hi: 100 }),
    domain: () => ({ ...ACT, lo: -100, hi: 100 }),
    tol: (x) => ulps(softplusUlps(x[0]) + 0.5),
  },
  // mish = x n / (n + 2), n = e (e + 2), e = exp(x) (g_mish: tanh of softplus in closed form):
  // g_exp_fast's 4.5 ULP twice through n, its roundings, the quotient and the multiply (see
  // mishUlps); x above 20; below -80, x e^(x + 64 ln 2) 2^-64: exp's bound, plus the rounding of
  // x + 64 ln 2 and of the constant (half an ULP of a number below 64: 32 ULP each), plus two
  // multiplies. Relative down to 0.
  mish: {
    dtypes: FLOATS,
    intRange: () => ({ lo: -100, hi: 100 }),
    domain: () => ({ ...ACT, lo: -100, hi: 100 }),
    tol: (x) => ulps(mishUlps(x[0]) + 0.5),
  },
  // selu = l (x > 0 ? x : a expm1(x)): expm1's bound (above, doubled for the binade), two
  // constants and two multiplies.
  selu: {
    dtypes: FLOATS,
    intRange: () => ({ lo: -100, hi: 100 }),
    domain: () => ({ ...ACT, lo: -100, hi: 100 }),
    tol: (x) => expm1Scaled(x[0], 4),
  },
  // leakyRelu(x, { alpha }): a selection or one multiply, exact.
  leakyRelu: {
    dtypes: FLOATS,
    intRange: smallInts,
    domain: () => ACT,
    alpha: { kind: "uniform", lo: 0, hi: 1, specials: [0, -0, 1, 0.01, 3] },
  },
  // elu(x, { alpha }) = x > 0 ? x : alpha expm1(x): expm1's bound (doubled for the binade) and
  // the multiply (alpha is the same f32 constant on both devices).
  elu: {
    dtypes: FLOATS,
    intRange: () => ({ lo: -100, hi: 100 }),
    domain: () => ({ ...ACT, lo: -100, hi: 100 }),
    alpha: { kind: "uniform", lo: 0, hi: 2, specials: [0, 1, -1, 0.5] },
    tol: (x) => expm1Scaled(x[0], 1),
    monotone: true,
  },
};

/** Activations' values: mostly [-8, 8] (where they bend), with every special. */
const ACT: FloatDomain = { kind: "uniform", lo: -8, hi: 8, specials: SPECIALS_F32, pSpecial: 0.1 };
/** One f32 rounding, relative: constants rounded to f32 and the final operation. */
const RTOL_F32 = 2 ** -23;

/** g_exp's bound, in ULP of e^x (see exp above). */
const expUlps = (_x?: number) => 2;
/**
 * g_exp_fast's bound, in ULP of e^x: the activations' exponential, WGSL's exp2 (4 ULP on
 * |t| <= 1/2) of the Cody-Waite remainder over ln 2 (half an ULP more) and an exact scaling.
 */
const FAST_EXP_ULPS = 4.5;
/** The GPU's expm1 against the exact value, in ULP (see expm1 above). */
const expm1Ulps = (_x: number) => 3;
/** The GPU's log1p against the exact value, in ULP (see log1p above). */
const log1pUlps = (x: number) => (x >= -0.5 && x < 2 ? 5 : 4.5);
/**
 * WASM's tanh of z >= 0 against the exact value, in ULP: g_tanh's formula with the accurate exp
 * (0.8 ULP) in f32x4 (asm/vector_math.ts), so the GPU's bound with 0.8 for 4.5 and 2.5 roundings;
 * 3.59 ULP at most over every 16th float in [0, 20] (at 0.1253, where this gives 8.8).
 */
function wasmTanhUlps(z: number): number {
  if (z < 0.125) return 2;
  const e = Math.exp(-2 * Math.min(z, 15));
  return (2 * 0.8 * 2 * e) / (1 - e * e) + 2.5;
}

/** The GPU's tanh of z >= 0 against the exact value, in ULP (see tanh above). */
function tanhUlps(z: number): number {
  if (z < 0.125) return 3;
  const e = Math.exp(-2 * Math.min(z, 15));
  return (2 * FAST_EXP_ULPS * 2 * e) / (1 - e * e) + 4;
}

/**
 * expm1's bound times a constant, relative (doubled for the binade), plus `roundings` (the
 * constants' and the multiplies'), +0.5 reference; above 0 the identity times the constants.
 */
function expm1Scaled(x: number, roundings: number): Tol {
  if (!(x <= 0)) return { rtol: 2 * RTOL_F32 };
  return ulps(2 * expm1Ulps(x) + roundings + 0.5);
}

/** The GPU's softplus against the exact value, in ULP (see softplus above). */
function softplusUlps(x: number): number {
  const a = Math.abs(x);
  const l = Math.log1p(Math.exp(-a));
  const share = x > 0 ? l / (x + l) : 1;
  return 2 * share * (2 * FAST_EXP_ULPS + log1pUlps(Math.exp(-a))) + 1;
}

/** The GPU's mish against the exact value, in ULP (see mish above). */
function mishUlps(x: number): number {
  if (x < -80) return 2 * FAST_EXP_ULPS + 66;
  if (x > 20) return 0;
  // x n / (n + 2), n = e (e + 2): e's error, twice through the product, three roundings, the
  // quotient's share (at most n's relative error) and 2.5 for the division, then the multiply.
  return 2 * FAST_EXP_ULPS + 1.5 + 0.5 + 2.5 + 0.5;
}

/**
 * pow (WGSL): inherited from exp2(y * log2(x)). With z = y log2|x|, log2's error d (2^-21
 * absolute for |x| in [0.5, 2], else 3 ULP of log2|x|) gives |y| d + 0.5 ULP(z) on z, which exp2
 * turns into a relative ln2 * that; exp2 adds 3 + 2|z| ULP.
 */
function powTol(x: number[], _want: number): Tol {
  const [a, b] = x;
  const l = Math.log2(Math.abs(a));
  const z = Math.abs(b * l);
  if (!Number.isFinite(z)) return ulps(4);
  const d = Math.abs(a) >= 0.5 && Math.abs(a) <= 2 ? 2 ** -21 : 3 * U * Math.abs(l) * 2;
  const rel = Math.LN2 * (Math.abs(b) * d + z * U * 2);
  return { ulp: Math.ceil(4 + 2 * z + rel / U) };
}

const BINARY_SPECS: Record<string, OpSpec> = {
  // x + y, x - y, x * y (WGSL): correctly rounded; integers wrap.
  add: { dtypes: NUMERIC },
  sub: { dtypes: NUMERIC },
  mul: { dtypes: NUMERIC },
  // x / y (WGSL): 2.5 ULP for |y| in [2^-126, 2^126] (no bound outside; g_div_f32 scales both
  // operands by an exact 1/4 past 2^126, into range), +0.5 reference.
  div: {
    dtypes: FLOATS,
    intRange: smallInts,
    domain: (k) =>
      k === 0 ? FULL : {
        kind: "log",
        minExp: -125,
        maxExp: 127,
        specials: [NaN, Infinity, -Infinity, 0, -0, 1, -1, 3, 3.4e38, -1e38],
      },
    tol: () => ulps(3),
    monotone: true,
  },
  maximum: { dtypes: NUMERIC },
  minimum: { dtypes: NUMERIC },
  // Remainder with the divisor's sign: both devices compute fmod exactly then one correctly
  // rounded add, so exact; integer mod by 0 (and by -1) gives 0.
  mod: {
    dtypes: NUMERIC,
    domain: (k) =>
      k === 0 ? FULL : {
        kind: "log",
        minExp: -20,
        maxExp: 20,
        specials: [NaN, Infinity, -Infinity, 0, -0, 1, -1, 3, 0.1, 1e-40],
      },
  },
  pow: {
    dtypes: NUMERIC,
    domain: (k) =>
      k === 0
        ? { kind: "log", minExp: -10, maxExp: 10, specials: [...SPECIALS_F32, -2, -3, 10] }
        : {
          kind: "uniform",
          lo: -10,
          hi: 10,
          specials: [NaN, Infinity, -Infinity, 0, -0, 1, 2, 3, -1, -2, 0.5, 1e-40],
          pSpecial: 0.3,
        },
    tol: powTol,
    monotone: true,
  },
  equal: { dtypes: ALL },
  notEqual: { dtypes: ALL },
  less: { dtypes: ALL },
  lessEqual: { dtypes: ALL },
  greater: { dtypes: ALL },
  greaterEqual: { dtypes: ALL },
  logicalAnd: { dtypes: ALL },
  logicalOr: { dtypes: ALL },
};

type Fn = (...args: gyre.TensorLike[]) => gyre.Tensor;
const fns = gyre as unknown as Record<string, Fn>;
const fnsAlpha = gyre as unknown as Record<
  string,
  (x: gyre.TensorLike, o: { alpha: number }) => gyre.Tensor
>;

/** One case of an elementwise property. */
interface Case {
  shape: number[];
  dtypes: DType[];
  kinds: LayoutKind[];
  forceScalar: boolean;
  seed: number;
}

function caseArb(arity: number, spec: OpSpec, shapes = shapeArb()): fc.Arbitrary<Case> {
  return fc
    .record({
      shape: shapes,
      first: fc.constantFrom(...spec.dtypes),
      others: fc.array(fc.option(fc.constantFrom(...spec.dtypes), { freq: 2 }), {
        minLength: arity,
        maxLength: arity,
      }),
      kinds: fc.array(fc.constantFrom<LayoutKind>(...LAYOUTS), {
        minLength: arity,
        maxLength: arity,
      }),
      forceScalar: fc.boolean(),
      seed: fc.integer(),
    })
    .map(({ shape, first, others, kinds, forceScalar, seed }) => {
      if (!kinds.some((k) => k !== "scalar")) kinds[0] = "contiguous";
      const dtypes = others.map((d, k) => (k === 0 ? first : d ?? first));
      // A JS scalar is weakly typed: it takes the dtype of the tensor beside it.
      const strong = dtypes[kinds.findIndex((k) => k !== "scalar")];
      return {
        shape,
        dtypes: dtypes.map((d, k) => (kinds[k] === "scalar" ? strong : d)),
        kinds,
        forceScalar,
        seed,
      };
    });
}

/**
 * Replaces subnormals by a zero of their sign (a flushing GPU), or by the smallest subnormal or
 * smallest normal of their sign (the ends of what a GPU that mis-reads subnormals may see); null
 * when there are none.
 */
function replaceSubnormals(
  data: gyre.TypedArray,
  to: "zero" | "tiny" | "min",
): gyre.TypedArray | null {
  if (!(data instanceof Float32Array)) return null;
  let any = false;
  const out = data.map((v) => {
    if (v !== 0 && Math.abs(v) < MIN_NORMAL) {
      any = true;
      const s = v < 0 ? -1 : 1;
      return to === "zero" ? (s < 0 ? -0 : 0) : to === "tiny" ? s * 2 ** -149 : s * MIN_NORMAL;
    }
    return v;
  });
  return any ? out : null;
}

/** Runs `op` on both devices for one case and compares. */
async function checkCase(op: string, spec: OpSpec, c: Case): Promise<void> {
  const bag = new Bag();
  try {
    const rng = mulberry32(c.seed);
    const layouts = c.kinds.map((k) => makeLayout(rng, k, c.shape));
    const bases = layouts.map((l, k) =>
      hostData(
        rng,
        c.dtypes[k],
        l.kind === "scalar" ? 1 : sizeOf(l.baseShape),
        // Scalars and 0-d operands become constants or broadcasts: make specials likely there.
        l.baseShape.length === 0
          ? { ...(spec.domain?.(k) ?? FULL), pSpecial: 0.5 }
          : spec.domain?.(k) ?? FULL,
        spec.intRange?.(k, c.dtypes[k]),
      )
    );
    const alpha = spec.alpha ? fillFloat(rng, new Float32Array(1), spec.alpha)[0] : undefined;
    const run = (device: gyre.DeviceName, data: gyre.TypedArray[]) => {
      const args = layouts.map((l, k) => operandOn(bag, device, l, c.dtypes[k], data[k]));
      if (op === "geluTanh") return bag.add(gyre.gelu(args[0], { approximate: "tanh" }));
      return bag.add(alpha === undefined ? fns[op](...args) : fnsAlpha[op](args[0], { alpha }));
    };
    if (c.forceScalar) forcePlan("elementwise", { variant: "scalar" });
    const gpu = run("gpu", bases);
    forcePlan("elementwise", null);
    const ref = run("wasm", bases);
    // Alternative references for GPUs that flush subnormal inputs.
    const alts: gyre.Tensor[] = [];
    for (const to of spec.monotone ? (["zero", "tiny", "min"] as const) : (["zero"] as const)) {
      const replaced = bases.map((b) => replaceSubnormals(b, to));
      if (replaced.some((r) => r)) alts.push(run("wasm", replaced.map((r, k) => r ?? bases[k])));
    }
    // Operand values at each output element (tolerances depend on them).
    const inputs = layouts.map((l, k) => {
      const o = operandOn(bag, "wasm", l, c.dtypes[k], bases[k]);
      const t = o instanceof gyre.Tensor
        ? o
        : bag.add(gyre.tensor([Number(o)], { shape: [], device: "wasm" }));
      return bag.add(gyre.broadcastTo(t, gpu.shape));
    });
    const [got, want, ...rest] = await gyre.readAll([gpu, ref, ...alts, ...inputs]);
    const altData = rest.slice(0, alts.length);
    const xs = rest.slice(alts.length);
    if (gpu.dtype !== ref.dtype || gpu.shape.join() !== ref.shape.join()) {
      throw new Error(
        `${gpu.dtype} [${gpu.shape}] on the GPU, ${ref.dtype} [${ref.shape}] on WASM`,
      );
    }
    const half = gpu.dtype === "float16";
    const float = half || gpu.dtype === "float32";
    const opts = { half, signedZero: spec.signedZero, ftz: true };
    const x = (i: number) => (alpha === undefined ? xs.map((a) => a[i]) : [xs[0][i], alpha]);
    const ok = (i: number): boolean => {
      const g = got[i];
      if (!float) return g === want[i] || altData.some((a) => g === a[i]);
      const tol = spec.tol ? spec.tol(x(i), want[i]) : EXACT;
      if (within(g, want[i], tol, opts) || altData.some((a) => within(g, a[i], tol, opts))) {
        return true;
      }
      // Monotone near zero: anything between the references at the smallest subnormal and at
      // the smallest normal of the subnormal inputs' signs.
      if (spec.monotone && altData.length === 3) {
        const [a, b] = [altData[1][i], altData[2][i]];
        return g >= Math.min(a, b) && g <= Math.max(a, b);
      }
      return false;
    };
    const label = `${op}(${c.dtypes.join(", ")}) shape [${c.shape}] ${
      layouts.map((l) => l.describe).join(" | ")
    }` +
      `${c.forceScalar ? " [scalar plan]" : ""}`;
    const bad: string[] = [];
    let count = 0;
    for (let i = 0; i < got.length; i++) {
      if (ok(i)) {
        continue;
      }
      if (++count <= 5) {
        bad.push(`  [${i}] x=(${x(i).join(", ")}) gpu ${showNum(got[i])} wasm ${showNum(want[i])}`);
      }
    }
    if (count) {
      throw new Error(`${label}: ${count} of ${got.length} differ\n${bad.join("\n")}`);
    }
  } finally {
    bag.dispose();
  }
}

function showNum(v: number): string {
  return Object.is(v, -0) ? "-0" : String(v);
}

/** Registers an op's property; `id` must be the literal kernel id (the coverage test reads it). */
function elementwiseProperty(id: string, numRuns = 24): void {
  const op = id.slice("elementwise/".length);
  const spec = UNARY_SPECS[op] ?? BINARY_SPECS[op];
  const arity = UNARY_SPECS[op] ? 1 : 2;
  property(
    id,
    `GPU matches WASM on random shapes, layouts, dtypes`,
    caseArb(arity, spec),
    (c) => checkCase(op, spec, c),
    { numRuns, variants: ["elementwise/vec4", "elementwise/scalar"] },
  );
}

elementwiseProperty("elementwise/neg");
elementwiseProperty("elementwise/abs");
elementwiseProperty("elementwise/sign");
elementwiseProperty("elementwise/square");
elementwiseProperty("elementwise/reciprocal");
elementwiseProperty("elementwise/exp");
elementwiseProperty("elementwise/exp2");
elementwiseProperty("elementwise/log");
elementwiseProperty("elementwise/log2");
elementwiseProperty("elementwise/log1p");
elementwiseProperty("elementwise/expm1");
elementwiseProperty("elementwise/sqrt");
elementwiseProperty("elementwise/rsqrt");
elementwiseProperty("elementwise/sin");
elementwiseProperty("elementwise/cos");
elementwiseProperty("elementwise/tan");
elementwiseProperty("elementwise/tanh");
elementwiseProperty("elementwise/sigmoid");
elementwiseProperty("elementwise/erf");
elementwiseProperty("elementwise/floor");
elementwiseProperty("elementwise/ceil");
elementwiseProperty("elementwise/round");
elementwiseProperty("elementwise/logicalNot");
elementwiseProperty("elementwise/add", 40);
elementwiseProperty("elementwise/sub");
elementwiseProperty("elementwise/mul", 40);
elementwiseProperty("elementwise/div", 40);
elementwiseProperty("elementwise/maximum");
elementwiseProperty("elementwise/minimum");
elementwiseProperty("elementwise/mod", 40);
elementwiseProperty("elementwise/pow", 40);
elementwiseProperty("elementwise/equal");
elementwiseProperty("elementwise/notEqual");
elementwiseProperty("elementwise/less");
elementwiseProperty("elementwise/lessEqual");
elementwiseProperty("elementwise/greater");
elementwiseProperty("elementwise/greaterEqual");
elementwiseProperty("elementwise/logicalAnd");
elementwiseProperty("elementwise/logicalOr");
elementwiseProperty("elementwise/relu");
elementwiseProperty("elementwise/hardsigmoid");
elementwiseProperty("elementwise/hardswish");
elementwiseProperty("elementwise/softsign");
elementwiseProperty("elementwise/silu");
elementwiseProperty("elementwise/gelu");
elementwiseProperty("elementwise/geluTanh");
elementwiseProperty("elementwise/softplus");
elementwiseProperty("elementwise/mish");
elementwiseProperty("elementwise/selu");
elementwiseProperty("elementwise/leakyRelu");
elementwiseProperty("elementwise/elu");

// Above 1 Mi elements: a few runs of representative ops over every layout (lavapipe is a CPU).
property(
  ["elementwise/add", "elementwise/exp", "elementwise/mod", "elementwise/maximum"],
  "GPU matches WASM above 1 Mi elements",
  fc.record({
    op: fc.constantFrom("add", "exp", "mod", "maximum"),
    c: caseArb(
      2,
      { dtypes: ["float32", "int32", "float16"] },
      fc.constantFrom([(1 << 20) + 7], [1025, 1024], [3, 349527]),
    ),
  }),
  ({ op, c }) => {
    const spec = UNARY_SPECS[op] ?? BINARY_SPECS[op];
    const arity = UNARY_SPECS[op] ? 1 : 2;
    const dtypes = c.dtypes.slice(0, arity).map((d) => (spec.dtypes.includes(d) ? d : "float32"));
    return checkCase(op, spec, {
      ...c,
      dtypes,
      kinds: c.kinds.slice(0, arity).map((k) => (k === "scalar" && arity === 1 ? "contiguous" : k)),
    });
  },
  { numRuns: 4 },
);
