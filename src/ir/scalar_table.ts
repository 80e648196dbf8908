/**
 * The scalar op table (issue 26): for every op of `V`, its value and local derivatives in three
 * forms side by side — JavaScript (float64, the eager `Value` graph and the reference), WGSL
 * (float32, the compiled GPU kernels, calling the tensor op table's accurate math) and
 * AssemblyScript (float64, the WASM tape; `scripts/build.ts` generates its interpreter from this
 * table). Kink conventions follow the tensor ops (PyTorch's): relu'(0) = 0, abs'(0) = 0, a tie of
 * min or max splits the gradient in halves, comparisons have none, `where` and `clamp` pass it to
 * what they select only.
 * @module
 */

/** Code templates over operand expressions `a`, `b`, `c` and the op's own value `y`. */
type Code = (a: string, b: string, c: string, y: string) => string;

/** One scalar op. `sum` and `mean` are n-ary and lower to `add` (see src/plans/residuals.ts). */
export interface ScalarOpDef {
  arity: 1 | 2 | 3;
  /** Value in float64. */
  js: (a: number, b: number, c: number) => number;
  /** d(op)/d(operand k) in float64, given the operands and the value. */
  jsD: (a: number, b: number, c: number, y: number) => readonly number[];
  /** Value in WGSL (f32). */
  wgsl: Code;
  /** Local derivatives in WGSL; "0.0" marks a zero that the code generator skips. */
  wgslD: readonly Code[];
  /** Value in AssemblyScript (f64). */
  asm: Code;
  /** Local derivatives in AssemblyScript; "0.0" marks a zero. */
  asmD: readonly Code[];
}

const ZERO: Code = () => "0.0";
const ONE: Code = () => "1.0";
const sigmoid = (a: number) => 1 / (1 + Math.exp(-a));
const tie = (first: boolean) => (a: number, b: number) =>
  a === b ? [0.5, 0.5] : (first ? a > b : a < b) ? [1, 0] : [0, 1];

/**
 * atan2 in WGSL, to a few ULPs (WGSL's builtin promises only 4096): the angle's tangent reduced to
 * [0, 1] by the ratio of the smaller to the larger magnitude, then Cephes' atanf (a further
 * reduction by pi/8 steps and a degree-9 odd polynomial), and the quadrant restored with the
 * signs of both arguments (-0 included, as Math.atan2). And its gradient: d atan2(a, b) / d(a, b)
 * = (b, -a) / (a^2 + b^2), both scaled by max(|a|, |b|) first so that the squares neither
 * overflow nor vanish in float32; (0, 0) at the origin.
 */
export const ATAN2_WGSL = `fn s_atan_unit(x: f32) -> f32 {
  var base = 0.0;
  var t = x;
  if (x > 0.41421356) {
    base = 0.78539816;
    t = (x - 1.0) / (x + 1.0);
  }
  let z = t * t;
  return base + ((((0.0805374449538 * z - 0.138776856032) * z + 0.199777106478) * z - 0.333329491539) * z * t + t);
}
fn s_atan2(a: f32, b: f32) -> f32 {
  if (g_isnan(a) || g_isnan(b)) { return a + b; }
  let ay = abs(a);
  let ax = abs(b);
  var r = 0.0;
  if (ay > 3.4e38 && ax > 3.4e38) { r = 0.78539816; }
  else if (ay > ax) { r = 1.5707964 - s_atan_unit(g_div_f32(ax, ay)); }
  else if (ax > 0.0) { r = s_atan_unit(g_div_f32(ay, ax)); }
  if ((bitcast<u32>(b) & 0x80000000u) != 0u) { r = 3.1415927 - r; }
  return bitcast<f32>((bitcast<u32>(a) & 0x80000000u) | bitcast<u32>(r));
}
fn s_atan2_grad(a: f32, b: f32) -> vec2<f32> {
  // NaN in, NaN out (WGSL's max of a NaN may be either operand).
  if (g_isnan(a) || g_isnan(b)) { return vec2<f32>(a + b); }
  let s = max(abs(a), abs(b));
  if (!(s > 0.0) || s > 3.4e38) { return vec2<f32>(0.0, 0.0); }
  let x = a / s;
  let y = b / s;
  let r = (x * x + y * y) * s;
  return vec2<f32>(y / r, -x / r);
}`;

/** The name of a lowered scalar op (every op of `V` but the n-ary `sum` and `mean`). */
export type ScalarOp =
  | "add"
  | "sub"
  | "mul"
  | "div"
  | "pow"
  | "atan2"
  | "min"
  | "max"
  | "less"
  | "greater"
  | "neg"
  | "abs"
  | "sqrt"
  | "exp"
  | "log"
  | "sin"
  | "cos"
  | "tan"
  | "tanh"
  | "sigmoid"
  | "relu"
  | "square"
  | "clamp"
  | "where";

/** The table. Keys are the `op` of a Value. */
export const SCALAR_OPS: Readonly<Record<ScalarOp, ScalarOpDef>> = {
  add: {
    arity: 2,
    js: (a, b) => a + b,
    jsD: () => [1, 1],
    wgsl: (a, b) => `(${a} + ${b})`,
    wgslD: [ONE, ONE],
    asm: (a, b) => `(${a} + ${b})`,
    asmD: [ONE, ONE],
  },
  sub: {
    arity: 2,
    js: (a, b) => a - b,
    jsD: () => [1, -1],
    wgsl: (a, b) => `(${a} - ${b})`,
    wgslD: [ONE, () => "-1.0"],
    asm: (a, b) => `(${a} - ${b})`,
    asmD: [ONE, () => "-1.0"],
  },
  mul: {
    arity: 2,
    js: (a, b) => a * b,
    jsD: (a, b) => [b, a],
    wgsl: (a, b) => `(${a} * ${b})`,
    wgslD: [(_a, b) => b, (a) => a],
    asm: (a, b) => `(${a} * ${b})`,
    asmD: [(_a, b) => b, (a) => a],
  },
  div: {
    arity: 2,
    js: (a, b) => a / b,
    jsD: (a, b) => [1 / b, -a / (b * b)],
    wgsl: (a, b) => `g_div_f32(${a}, ${b})`,
    // (a / b) / b rather than a / b^2: b^2 overflows float32 long before the quotient does.
    wgslD: [
      (_a, b) => `g_div_f32(1.0, ${b})`,
      (a, b) => `(-g_div_f32(g_div_f32(${a}, ${b}), ${b}))`,
    ],
    asm: (a, b) => `(${a} / ${b})`,
    asmD: [(_a, b) => `(1.0 / ${b})`, (a, b) => `(-${a} / (${b} * ${b}))`],
  },
  pow: {
    arity: 2,
    // C's pow (as the tensor op and PyTorch): 1 ** y and (-1) ** +-inf are 1, where JS's ** gives NaN.
    js: (a, b) => (a === 1 || (a === -1 && Math.abs(b) === Infinity) ? 1 : a ** b),
    jsD: (a, b, _c, y) => [
      b === 0 ? 0 : b * a ** (b - 1),
      a === 0 && b >= 0 ? 0 : y * Math.log(a),
    ],
    wgsl: (a, b) => `g_pow_f32(${a}, ${b})`,
    wgslD: [
      (a, b) => `select(${b} * g_pow_f32(${a}, ${b} - 1.0), 0.0, ${b} == 0.0)`,
      (a, b, _c, y) => `select(${y} * g_log(${a}), 0.0, ${a} == 0.0 && ${b} >= 0.0)`,
    ],
    asm: (a, b) => `Math.pow(${a}, ${b})`,
    asmD: [
      (a, b) => `(${b} == 0.0 ? 0.0 : ${b} * Math.pow(${a}, ${b} - 1.0))`,
      (a, b, _c, y) => `(${a} == 0.0 && ${b} >= 0.0 ? 0.0 : ${y} * Math.log(${a}))`,
    ],
  },
  atan2: {
    arity: 2,
    js: (a, b) => Math.atan2(a, b),
    // Scaled by max(|a|, |b|) (no overflow); 0 at the origin and at infinity (the limits).
    jsD: (a, b) => {
      if (Number.isNaN(a) || Number.isNaN(b)) return [NaN, NaN];
      const s = Math.max(Math.abs(a), Math.abs(b));
      if (s === 0 || s === Infinity) return [0, 0];
      const [x, y] = [a / s, b / s];
      const r = (x * x + y * y) * s;
      return [y / r, -x / r];
    },
    wgsl: (a, b) => `s_atan2(${a}, ${b})`,
    wgslD: [(a, b) => `s_atan2_grad(${a}, ${b}).x`, (a, b) => `s_atan2_grad(${a}, ${b}).y`],
    asm: (a, b) => `Math.atan2(${a}, ${b})`,
    asmD: [
      (a, b) => `atan2_da(${a}, ${b})`,
      (a, b) => `atan2_db(${a}, ${b})`,
    ],
  },
  min: {
    arity: 2,
    js: (a, b) => Math.min(a, b),
    jsD: tie(false),
    wgsl: (a, b) => `g_min_f32(${a}, ${b})`,
    wgslD: [
      (a, b) => `select(select(0.0, 1.0, ${a} < ${b}), 0.5, ${a} == ${b})`,
      (a, b) => `select(select(1.0, 0.0, ${a} < ${b}), 0.5, ${a} == ${b})`,
    ],
    asm: (a, b) => `min<f64>(${a}, ${b})`,
    asmD: [
      (a, b) => `(${a} == ${b} ? 0.5 : ${a} < ${b} ? 1.0 : 0.0)`,
      (a, b) => `(${a} == ${b} ? 0.5 : ${a} < ${b} ? 0.0 : 1.0)`,
    ],
  },
  max: {
    arity: 2,
    js: (a, b) => Math.max(a, b),
    jsD: tie(true),
    wgsl: (a, b) => `g_max_f32(${a}, ${b})`,
    wgslD: [
      (a, b) => `select(select(0.0, 1.0, ${a} > ${b}), 0.5, ${a} == ${b})`,
      (a, b) => `select(select(1.0, 0.0, ${a} > ${b}), 0.5, ${a} == ${b})`,
    ],
    asm: (a, b) => `max<f64>(${a}, ${b})`,
    asmD: [
      (a, b) => `(${a} == ${b} ? 0.5 : ${a} > ${b} ? 1.0 : 0.0)`,
      (a, b) => `(${a} == ${b} ? 0.5 : ${a} > ${b} ? 0.0 : 1.0)`,
    ],
  },
  less: {
    arity: 2,
    js: (a, b) => (a < b ? 1 : 0),
    jsD: () => [0, 0],
    wgsl: (a, b) => `select(0.0, 1.0, ${a} < ${b})`,
    wgslD: [ZERO, ZERO],
    asm: (a, b) => `(${a} < ${b} ? 1.0 : 0.0)`,
    asmD: [ZERO, ZERO],
  },
  greater: {
    arity: 2,
    js: (a, b) => (a > b ? 1 : 0),
    jsD: () => [0, 0],
    wgsl: (a, b) => `select(0.0, 1.0, ${a} > ${b})`,
    wgslD: [ZERO, ZERO],
    asm: (a, b) => `(${a} > ${b} ? 1.0 : 0.0)`,
    asmD: [ZERO, ZERO],
  },
  neg: unary((a) => -a, () => -1, (a) => `(-${a})`, () => "-1.0", (a) => `(-${a})`, () => "-1.0"),
  abs: unary(
    Math.abs,
    (a) => Math.sign(a),
    (a) => `abs(${a})`,
    (a) => `g_sign_f32(${a})`,
    (a) => `Math.abs(${a})`,
    (a) => `Math.sign(${a})`,
  ),
  sqrt: unary(
    Math.sqrt,
    (_a, y) => 1 / (2 * y),
    (a) => `g_sqrt(${a})`,
    (_a, y) => `g_div_f32(0.5, ${y})`,
    (a) => `Math.sqrt(${a})`,
    (_a, y) => `(1.0 / (2.0 * ${y}))`,
  ),
  exp: unary(Math.exp, (_a, y) => y, (a) => `g_exp(${a})`, (_a, y) => y, (a) => `Math.exp(${a})`, (
    _a,
    y,
  ) => y),
  log: unary(
    Math.log,
    (a) => 1 / a,
    (a) => `g_log(${a})`,
    (a) => `g_div_f32(1.0, ${a})`,
    (a) => `Math.log(${a})`,
    (a) => `(1.0 / ${a})`,
  ),
  sin: unary(
    Math.sin,
    Math.cos,
    (a) => `g_sin(${a})`,
    (a) => `g_cos(${a})`,
    (a) => `Math.sin(${a})`,
    (a) => `Math.cos(${a})`,
  ),
  cos: unary(
    Math.cos,
    (a) => -Math.sin(a),
    (a) => `g_cos(${a})`,
    (a) => `(-g_sin(${a}))`,
    (a) => `Math.cos(${a})`,
    (a) => `(-Math.sin(${a}))`,
  ),
  tan: unary(
    Math.tan,
    (_a, y) => 1 + y * y,
    (a) => `g_tan(${a})`,
    (_a, y) => `(1.0 + ${y} * ${y})`,
    (a) => `Math.tan(${a})`,
    (_a, y) => `(1.0 + ${y} * ${y})`,
  ),
  tanh: unary(
    Math.tanh,
    (_a, y) => 1 - y * y,
    (a) => `g_tanh(${a})`,
    (_a, y) => `(1.0 - ${y} * ${y})`,
    (a) => `Math.tanh(${a})`,
    (_a, y) => `(1.0 - ${y} * ${y})`,
  ),
  sigmoid: unary(
    sigmoid,
    (_a, y) => y * (1 - y),
    (a) => `g_sigmoid(${a})`,
    (_a, y) => `(${y} * (1.0 - ${y}))`,
    (a) => `(1.0 / (1.0 + Math.exp(-${a})))`,
    (_a, y) => `(${y} * (1.0 - ${y}))`,
  ),
  relu: unary(
    (a) => Math.max(a, 0),
    (a) => (a > 0 ? 1 : 0),
    (a) => `g_relu(${a})`,
    (a) => `select(0.0, 1.0, ${a} > 0.0)`,
    (a) => `max<f64>(${a}, 0.0)`,
    (a) => `(${a} > 0.0 ? 1.0 : 0.0)`,
  ),
  square: unary(
    (a) => a * a,
    (a) => 2 * a,
    (a) => `(${a} * ${a})`,
    (a) => `(2.0 * ${a})`,
    (a) => `(${a} * ${a})`,
    (a) => `(2.0 * ${a})`,
  ),
  clamp: {
    arity: 3,
    js: (a, lo, hi) => Math.min(Math.max(a, lo), hi),
    jsD: (a, lo, hi) => [a >= lo && a <= hi ? 1 : 0, 0, 0],
    wgsl: (a, b, c) => `g_min_f32(g_max_f32(${a}, ${b}), ${c})`,
    wgslD: [(a, b, c) => `select(0.0, 1.0, ${a} >= ${b} && ${a} <= ${c})`, ZERO, ZERO],
    asm: (a, b, c) => `min<f64>(max<f64>(${a}, ${b}), ${c})`,
    asmD: [(a, b, c) => `(${a} >= ${b} && ${a} <= ${c} ? 1.0 : 0.0)`, ZERO, ZERO],
  },
  where: {
    arity: 3,
    js: (c, a, b) => (c !== 0 ? a : b),
    jsD: (c) => [0, c !== 0 ? 1 : 0, c !== 0 ? 0 : 1],
    // `!(c == 0.0)`: NaN selects `a`, as `NaN !== 0` does, whatever the compiler's NaN ordering.
    wgsl: (c, a, b) => `select(${b}, ${a}, !(${c} == 0.0))`,
    wgslD: [
      ZERO,
      (c) => `select(0.0, 1.0, !(${c} == 0.0))`,
      (c) => `select(1.0, 0.0, !(${c} == 0.0))`,
    ],
    asm: (c, a, b) => `(${c} != 0.0 ? ${a} : ${b})`,
    asmD: [ZERO, (c) => `(${c} != 0.0 ? 1.0 : 0.0)`, (c) => `(${c} != 0.0 ? 0.0 : 1.0)`],
  },
};

/** Opcodes of the WASM tape: leaves first, then the table's ops in its order. */
export const TAPE_LEAVES: readonly ["param", "const", "literal"] = ["param", "const", "literal"];

/** The tape opcode of a lowered op or leaf. */
export function opcode(op: ScalarOp | (typeof TAPE_LEAVES)[number]): number {
  const leaf = (TAPE_LEAVES as readonly string[]).indexOf(op);
  return leaf >= 0 ? leaf : TAPE_LEAVES.length + Object.keys(SCALAR_OPS).indexOf(op);
}

function unary(
  js: (a: number) => number,
  jsD: (a: number, y: number) => number,
  wgsl: (a: string) => string,
  wgslD: (a: string, y: string) => string,
  asm: (a: string) => string,
  asmD: (a: string, y: string) => string,
): ScalarOpDef {
  return {
    arity: 1,
    js,
    jsD: (a, _b, _c, y) => [jsD(a, y)],
    wgsl,
    wgslD: [(a, _b, _c, y) => wgslD(a, y)],
    asm,
    asmD: [(a, _b, _c, y) => asmD(a, y)],
  };
}
