/**
 * Float32 functions built only from operations that every device rounds the same way: float32
 * `add`, `sub` and `mul` (correctly rounded in WGSL and WebAssembly alike; the GPU code generator
 * keeps a compiler from contracting them into fmas), comparisons, `where`, exact integer-to-float
 * casts and integer bit operations. Division, `sqrt`, `log` and `cos` are not among them: WGSL
 * bounds them only to a few ULP (or an absolute error), and each GPU rounds them its own way. An
 * expression built from these functions therefore gives the same bits on the GPU and on WASM.
 *
 * Each function is used where its argument range is known (the random generators), so that no
 * intermediate value is subnormal: a GPU may flush those, and WASM does not.
 * @module
 */
import { E, type Expr } from "./expr.ts";

const f32 = (v: number): Expr => E.constant(Math.fround(v), "float32");
const u32 = (v: number): Expr => E.constant(v, "uint32");
const add = (a: Expr, b: Expr): Expr => E.binary("add", a, b);
const sub = (a: Expr, b: Expr): Expr => E.binary("sub", a, b);
const mul = (a: Expr, b: Expr): Expr => E.binary("mul", a, b);
const ge = (a: Expr, v: number): Expr => E.binary("greaterEqual", a, f32(v), "bool");
const lt = (a: Expr, v: number): Expr => E.binary("less", a, f32(v), "bool");

/** Horner's scheme: c[0] + x (c[1] + x (c[2] + ...)). */
function horner(x: Expr, c: readonly number[]): Expr {
  let acc = f32(c[c.length - 1]);
  for (let i = c.length - 2; i >= 0; i--) acc = add(f32(c[i]), mul(x, acc));
  return acc;
}

// Least-squares fits in relative error (iteratively reweighted towards minimax) over the reduced
// ranges, rounded to float32: ln(1 + y) = y P(y) on [sqrt(1/2) - 1, sqrt(2) - 1] to 2.6e-8;
// sin x = x + x^3 S(x^2) and cos x = 1 - x^2/2 + x^4 C(x^2) on [0, pi/4] to 1.2e-7 of S and
// 4.9e-8 of C, far below float32's resolution of the whole value.
// LOG_P is also g_log1p_reduced's polynomial in wgsl/prelude.wgsl (the GPU's log).
const LOG_P = [
  1.0,
  -0.49999988079071045,
  0.3333418667316437,
  -0.25002074241638184,
  0.19956833124160767,
  -0.16562393307685852,
  0.14952267706394196,
  -0.14366839826107025,
  0.08722349256277084,
];
const SIN_S = [-0.166666641831398, 0.008332745172083378, -0.00019587361020967364];
const COS_C = [0.0416666641831398, -0.0013888301327824593, 2.4547607608838007e-5];
// ln 2 in two parts: the high part has 16 significant bits, so its product with an exponent of up
// to 24 (5 bits) is exact.
const LN2_HI = 0.693145751953125;
const LN2_LO = Math.fround(Math.LN2 - LN2_HI);

/**
 * ln(m / 2^24) for a uint32 `m` in [1, 2^24] (a uniform draw in (0, 1], exactly): m as a float is
 * exact; it is scaled into [sqrt(1/2), sqrt(2)) by powers of two (exact), and the logarithm of
 * that is a polynomial. Within 2.4 ULP of ln over all 2^24 arguments (tests/portable_math_test.ts).
 */
export function logOfUnitCount(m: Expr): Expr {
  let g = E.cast(m, "float32");
  let k = f32(0);
  for (const b of [16, 8, 4, 2, 1]) {
    const big = ge(g, 2 ** b);
    g = E.where(big, mul(g, f32(2 ** -b)), g);
    k = E.where(big, add(k, f32(b)), k);
  }
  // g in [1, 2): move the upper part down so that y = g - 1 (exact) is small on both sides.
  const high = ge(g, Math.SQRT2);
  g = E.where(high, mul(g, f32(0.5)), g);
  k = E.where(high, add(k, f32(1)), k);
  const y = sub(g, f32(1));
  const e = sub(k, f32(24));
  // e ln2_hi is exact; the small terms are added first.
  return add(mul(e, f32(LN2_HI)), add(mul(y, horner(y, LOG_P)), mul(e, f32(LN2_LO))));
}

/**
 * The square root of a float32 `r` in {0} or [2^-24, 64): scaled into [1, 4) by powers of four
 * (exact), then 1 / sqrt by a linear first guess and four Newton steps (multiplications only),
 * then times the scaled value. Within 2.7 ULP of sqrt over 4 Mi arguments spread evenly in
 * exponent over that range (tests/portable_math_test.ts).
 */
export function sqrtOfSmall(r: Expr): Expr {
  let g = r;
  let scale = f32(1);
  for (const b of [4, 2]) {
    const big = ge(g, 2 ** b);
    g = E.where(big, mul(g, f32(2 ** -b)), g);
    scale = E.where(big, mul(scale, f32(2 ** (b / 2))), scale);
  }
  for (const b of [16, 8, 4, 2]) {
    const small = lt(g, 2 ** (2 - b));
    g = E.where(small, mul(g, f32(2 ** b)), g);
    scale = E.where(small, mul(scale, f32(2 ** (-b / 2))), scale);
  }
  // g in [1, 4) (or 0). A line through 1/sqrt at 1 and 4 is within 19% of it; each Newton step
  // y (1.5 - g/2 y^2) takes a relative error e to about 1.5 e^2: 19%, 5%, 0.4%, 3e-5, 1e-9.
  const half = mul(g, f32(0.5));
  let y = sub(f32(7 / 6), mul(g, f32(1 / 6)));
  for (let i = 0; i < 4; i++) y = mul(y, sub(f32(1.5), mul(half, mul(y, y))));
  // r = 0 scales to 0 and stays 0 through the product; nothing divides by it.
  return mul(scale, mul(g, y));
}

/**
 * cos(2 pi t / 2^24) for a uint32 `t` in [0, 2^24) (a uniform draw in [0, 1) as a turn): the
 * quadrant and the position in it come from t's bits (exact), the position is folded into
 * [0, 1/8] of a turn, and sin or cos of that is a polynomial. Within 1.9 ULP of cos where
 * |cos| > 2^-20 and within 2^-44 absolute elsewhere, over all 2^24 arguments
 * (tests/portable_math_test.ts).
 */
export function cosOfTurnCount(t: Expr): Expr {
  const quadrant = E.binary("shiftRight", t, u32(22));
  const within = E.cast(E.binary("bitwiseAnd", t, u32(0x3fffff)), "float32");
  // Fold the position (in units of 2^-22 of a quadrant) into [0, 1/2] of a quadrant.
  const upper = ge(within, 2 ** 21);
  const folded = E.where(upper, sub(f32(2 ** 22), within), within);
  const x = mul(folded, f32(Math.PI / 2 / 2 ** 22));
  const x2 = mul(x, x);
  const sinX = add(x, mul(mul(x, x2), horner(x2, SIN_S)));
  const cosX = add(sub(f32(1), mul(x2, f32(0.5))), mul(mul(x2, x2), horner(x2, COS_C)));
  // The angle in the quadrant is x, or a quarter turn less x where the position was folded.
  const cosA = E.where(upper, sinX, cosX);
  const sinA = E.where(upper, cosX, sinX);
  const q = (n: number) => E.binary("equal", quadrant, u32(n), "bool");
  // cos(q pi/2 + a) is cos a, -sin a, -cos a, sin a for q = 0, 1, 2, 3.
  return E.where(
    q(0),
    cosA,
    E.where(q(1), E.unary("neg", sinA), E.where(q(2), E.unary("neg", cosA), sinA)),
  );
}
