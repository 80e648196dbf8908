/**
 * The elementwise op table: for every primitive, which dtypes it computes in, its WGSL (used by
 * the GPU code generator) and its AssemblyScript (used by `scripts/gen_asm.ts` to build the WASM
 * reference kernels). One entry per op keeps the two devices' definitions side by side.
 *
 * Compute types: float32 and float16 both compute in `f32` (float16 is a storage format);
 * `bool` computes as a WGSL/AS bool and is stored as a 32-bit word.
 * @module
 */

/** The type an expression node is evaluated in. */
export type ComputeType = "f32" | "i32" | "u32" | "bool";

/** Which operand dtypes an op accepts after promotion. */
export type Accepts = "float" | "numeric" | "integer" | "bool" | "any";

/** Code templates: `a` and `b` are operand expressions already in the compute type. */
type Template = (a: string, b: string) => string;

/** One primitive elementwise op. */
export interface ElementwiseDef {
  arity: 1 | 2;
  accepts: Accepts;
  /** "same": result has the operands' type; "bool": a predicate. */
  result: "same" | "bool";
  wgsl: Partial<Record<ComputeType, Template>>;
  asm: Partial<Record<ComputeType, Template>>;
}

const all3 = (f: Template) => ({ f32: f, i32: f, u32: f });
/** AS float ops run in f64 and round once, so the reference is the correctly rounded value or close. */
const f64 = (fn: string): Template => (a) => `<f32>${fn}(<f64>${a})`;

/**
 * The name of an op of one operand: exactly the keys of {@link UNARY} (the compiler checks
 * the table against this list both ways, so they cannot drift).
 */
export type UnaryOp =
  | "neg"
  | "abs"
  | "sign"
  | "square"
  | "reciprocal"
  | "exp"
  | "exp2"
  | "log"
  | "log2"
  | "log1p"
  | "expm1"
  | "sqrt"
  | "rsqrt"
  | "sin"
  | "cos"
  | "tan"
  | "tanh"
  | "sigmoid"
  | "erf"
  | "floor"
  | "ceil"
  | "round"
  | "logicalNot"
  | "isnan"
  | "relu"
  | "gelu"
  | "geluTanh"
  | "silu"
  | "mish"
  | "softplus"
  | "hardswish"
  | "hardsigmoid"
  | "selu"
  | "softsign"
  | "pcgHash";

/** The name of an op of two operands: exactly the keys of {@link BINARY}. */
export type BinaryOp =
  | "add"
  | "sub"
  | "mul"
  | "div"
  | "maximum"
  | "minimum"
  | "mod"
  | "pow"
  | "floorDiv"
  | "equal"
  | "notEqual"
  | "less"
  | "lessEqual"
  | "greater"
  | "greaterEqual"
  | "logicalAnd"
  | "logicalOr"
  | "leakyRelu"
  | "elu"
  | "bitwiseXor"
  | "bitwiseAnd"
  | "bitwiseOr"
  | "shiftRight";

/** Unary primitives. */
export const UNARY: Readonly<Record<UnaryOp, ElementwiseDef>> = {
  neg: {
    arity: 1,
    accepts: "numeric",
    result: "same",
    wgsl: { f32: (a) => `(-${a})`, i32: (a) => `(-${a})`, u32: (a) => `(0u - ${a})` },
    asm: { f32: (a) => `(-${a})`, i32: (a) => `(0 - ${a})`, u32: (a) => `(<u32>0 - ${a})` },
  },
  abs: {
    arity: 1,
    accepts: "numeric",
    result: "same",
    wgsl: { f32: (a) => `abs(${a})`, i32: (a) => `g_abs_i32(${a})`, u32: (a) => a },
    asm: { f32: (a) => `abs<f32>(${a})`, i32: (a) => `abs<i32>(${a})`, u32: (a) => a },
  },
  sign: {
    arity: 1,
    accepts: "numeric",
    result: "same",
    wgsl: {
      f32: (a) => `g_sign_f32(${a})`,
      i32: (a) => `sign(${a})`,
      u32: (a) => `select(0u, 1u, ${a} > 0u)`,
    },
    asm: {
      f32: (a) => `g_sign_f32(${a})`,
      i32: (a) => `g_sign_i32(${a})`,
      u32: (a) => `<u32>(${a} > 0)`,
    },
  },
  square: {
    arity: 1,
    accepts: "numeric",
    result: "same",
    wgsl: all3((a) => `(${a} * ${a})`),
    asm: all3((a) => `(${a} * ${a})`),
  },
  reciprocal: {
    arity: 1,
    accepts: "float",
    result: "same",
    wgsl: { f32: (a) => `g_reciprocal(${a})` },
    asm: { f32: (a) => `(<f32>1.0 / ${a})` },
  },
  // WASM: the GPU's g_exp lane for lane (asm/vector_math.ts, within 1 ULP), vectorised in tiles.
  exp: { ...float1("g_exp(a)", "Math.exp"), asm: { f32: (a) => `exp_f32(${a})` } },
  exp2: float1("exp2(a)", "Math.exp2"),
  log: float1("g_log(a)", "Math.log"),
  log2: float1("g_log2(a)", "Math.log2"),
  log1p: float1("g_log1p(a)", "Math.log1p"),
  expm1: float1("g_expm1(a)", "Math.expm1"),
  sqrt: float1("g_sqrt(a)", "Math.sqrt"),
  rsqrt: float1("g_rsqrt(a)", "g_rsqrt64"),
  sin: float1("g_sin(a)", "Math.sin"),
  cos: float1("g_cos(a)", "Math.cos"),
  tan: float1("g_tan(a)", "Math.tan"),
  // WASM: g_tanh with the accurate exp in f32x4 (asm/vector_math.ts), in tiles too.
  tanh: { ...float1("g_tanh(a)", "Math.tanh"), asm: { f32: (a) => `tanh_f32(${a})` } },
  // WASM: 1 / (1 + e^-x) from e^-|x| in f32x4 (asm/vector_math.ts, within 2.5 ULP), in tiles too.
  sigmoid: { ...float1("g_sigmoid(a)", "g_sigmoid64"), asm: { f32: (a) => `sigmoid_f32(${a})` } },
  erf: float1("g_erf(a)", "g_erf64"),
  floor: float1("floor(a)", "Math.floor"),
  ceil: float1("ceil(a)", "Math.ceil"),
  // WGSL round() and wasm's nearest both round half to even, as NumPy does.
  round: {
    arity: 1,
    accepts: "float",
    result: "same",
    wgsl: { f32: (a) => `round(${a})` },
    asm: { f32: (a) => `nearest<f32>(${a})` },
  },
  logicalNot: {
    arity: 1,
    accepts: "bool",
    result: "same",
    wgsl: { bool: (a) => `(!${a})` },
    asm: { bool: (a) => `(!${a})` },
  },
  isnan: {
    arity: 1,
    accepts: "float",
    result: "bool",
    wgsl: { f32: (a) => `g_isnan(${a})` },
    asm: { f32: (a) => `(${a} != ${a})` },
  },
  // Activations (src/ops/activations.ts): one primitive each, so the GPU and the WASM reference
  // each evaluate the whole function in one step (f32 on the GPU, f64 in the reference).
  relu: float1("g_relu(a)", "g_relu64"),
  gelu: float1("g_gelu(a)", "g_gelu64"),
  geluTanh: float1("g_gelu_tanh(a)", "g_gelu_tanh64"),
  silu: float1("g_silu(a)", "g_silu64"),
  mish: float1("g_mish(a)", "g_mish64"),
  softplus: float1("g_softplus(a)", "g_softplus64"),
  hardswish: float1("g_hardswish(a)", "g_hardswish64"),
  hardsigmoid: float1("g_hardsigmoid(a)", "g_hardsigmoid64"),
  selu: float1("g_selu(a)", "g_selu64"),
  softsign: float1("g_softsign(a)", "g_softsign64"),
  /** Internal: a 32-bit integer hash (PCG output permutation), the core of the counter RNG. */
  pcgHash: {
    arity: 1,
    accepts: "integer",
    result: "same",
    wgsl: { u32: (a) => `g_pcg(${a})` },
    asm: { u32: (a) => `g_pcg(${a})` },
  },
};

function float1(wgsl: string, asmFn: string): ElementwiseDef {
  return {
    arity: 1,
    accepts: "float",
    result: "same",
    wgsl: { f32: (a) => wgsl.replace(/\ba\b/, a) },
    asm: { f32: f64(asmFn) },
  };
}

const compare = (op: string): ElementwiseDef => ({
  arity: 2,
  accepts: "any",
  result: "bool",
  wgsl: { f32: cmp(op), i32: cmp(op), u32: cmp(op), bool: cmp(op) },
  asm: { f32: cmp(op), i32: cmp(op), u32: cmp(op), bool: cmp(op) },
});
function cmp(op: string): Template {
  // `!(a == b)` rather than `a != b`: the not-equal of NaN must be true whatever the compiler's
  // ordered/unordered choice.
  return op === "!=" ? (a, b) => `(!(${a} == ${b}))` : (a, b) => `(${a} ${op} ${b})`;
}

/** Binary primitives. */
export const BINARY: Readonly<Record<BinaryOp, ElementwiseDef>> = {
  add: {
    arity: 2,
    accepts: "numeric",
    result: "same",
    wgsl: all3(infix("+")),
    asm: all3(infix("+")),
  },
  sub: {
    arity: 2,
    accepts: "numeric",
    result: "same",
    wgsl: all3(infix("-")),
    asm: all3(infix("-")),
  },
  mul: {
    arity: 2,
    accepts: "numeric",
    result: "same",
    wgsl: all3(infix("*")),
    asm: all3(infix("*")),
  },
  div: {
    arity: 2,
    accepts: "float",
    result: "same",
    wgsl: { f32: call("g_div_f32") },
    asm: { f32: infix("/") },
  },
  maximum: {
    arity: 2,
    accepts: "numeric",
    result: "same",
    wgsl: { f32: call("g_max_f32"), i32: call("max"), u32: call("max") },
    // wasm's f32.max already propagates NaN.
    asm: { f32: call("max<f32>"), i32: call("max<i32>"), u32: call("max<u32>") },
  },
  minimum: {
    arity: 2,
    accepts: "numeric",
    result: "same",
    wgsl: { f32: call("g_min_f32"), i32: call("min"), u32: call("min") },
    asm: { f32: call("min<f32>"), i32: call("min<i32>"), u32: call("min<u32>") },
  },
  mod: {
    arity: 2,
    accepts: "numeric",
    result: "same",
    wgsl: { f32: call("g_mod_f32"), i32: call("g_mod_i32"), u32: call("g_mod_u32") },
    asm: { f32: call("g_mod_f32"), i32: call("g_mod_i32"), u32: call("g_mod_u32") },
  },
  pow: {
    arity: 2,
    accepts: "numeric",
    result: "same",
    wgsl: { f32: call("g_pow_f32"), i32: call("g_pow_i32"), u32: call("g_pow_u32") },
    asm: { f32: call("g_pow_f32"), i32: call("g_pow_i32"), u32: call("g_pow_u32") },
  },
  floorDiv: {
    arity: 2,
    accepts: "numeric",
    result: "same",
    wgsl: { f32: call("g_floordiv_f32"), i32: call("g_floordiv_i32"), u32: call("g_floordiv_u32") },
    asm: { f32: call("g_floordiv_f32"), i32: call("g_floordiv_i32"), u32: call("g_floordiv_u32") },
  },
  equal: compare("=="),
  notEqual: compare("!="),
  less: compare("<"),
  lessEqual: compare("<="),
  greater: compare(">"),
  greaterEqual: compare(">="),
  logicalAnd: {
    arity: 2,
    accepts: "bool",
    result: "same",
    wgsl: { bool: infix("&&") },
    asm: { bool: infix("&&") },
  },
  logicalOr: {
    arity: 2,
    accepts: "bool",
    result: "same",
    wgsl: { bool: infix("||") },
    asm: { bool: infix("||") },
  },
  /** Activations with a parameter: `b` is the parameter (alpha), a constant in practice. */
  leakyRelu: float2("g_leaky_relu", "g_leaky_relu64"),
  elu: float2("g_elu", "g_elu64"),
  bitwiseXor: bits("^"),
  bitwiseAnd: bits("&"),
  bitwiseOr: bits("|"),
  shiftRight: {
    arity: 2,
    accepts: "integer",
    result: "same",
    wgsl: { u32: (a, b) => `(${a} >> (${b} & 31u))`, i32: (a, b) => `(${a} >> (u32(${b}) & 31u))` },
    asm: { u32: (a, b) => `(${a} >>> (${b} & 31))`, i32: (a, b) => `(${a} >> (${b} & 31))` },
  },
};

function float2(wgsl: string, asmFn: string): ElementwiseDef {
  return {
    arity: 2,
    accepts: "float",
    result: "same",
    wgsl: { f32: call(wgsl) },
    asm: { f32: (a, b) => `<f32>${asmFn}(<f64>${a}, <f64>${b})` },
  };
}

function infix(op: string): Template {
  return (a, b) => `(${a} ${op} ${b})`;
}
function call(fn: string): Template {
  return (a, b) => `${fn}(${a}, ${b})`;
}
function bits(op: string): ElementwiseDef {
  return {
    arity: 2,
    accepts: "integer",
    result: "same",
    wgsl: { u32: infix(op), i32: infix(op) },
    asm: { u32: infix(op), i32: infix(op) },
  };
}

/** Both tables in one, for lookups by name (built once: code generators call {@link opDef} per node). */
const OPS: Readonly<Record<UnaryOp | BinaryOp, ElementwiseDef>> = { ...UNARY, ...BINARY };

/** Looks an op up in either table. */
export function opDef(op: string): ElementwiseDef {
  const def = (OPS as Record<string, ElementwiseDef | undefined>)[op];
  if (!def) throw new Error(`internal: unknown elementwise op ${op}`);
  return def;
}
