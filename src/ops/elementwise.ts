/**
 * Elementwise ops. Each builds one expression (casts included) that a backend runs as one kernel.
 *
 * Dtype rules: binary operands promote by {@link promoteTypes} (JS numbers are weakly typed and
 * take the tensor's dtype). Float-only ops (exp, div, ...) compute integers and bools in float32;
 * arithmetic on bools computes in int32; comparisons return bool; float16 computes in f32 and
 * rounds each result to half precision.
 * @module
 */
import { checkDType, type DType, isFloat, isInteger, promoteTypes } from "../core/dtype.ts";
import { describe, DTypeError, ValueError } from "../core/errors.ts";
import type { Tensor } from "../tensor.ts";
import { runElementwise, type TensorLike } from "./_dispatch.ts";
import {
  BINARY,
  type BinaryOp,
  type ElementwiseDef,
  opDef,
  UNARY,
  type UnaryOp,
} from "../ir/elementwise_table.ts";
import { E } from "../ir/expr.ts";
import { taped } from "../_tape.ts";

/**
 * The dtype an op computes in for operands of `dtype` (see the module's dtype rules): for `exp`
 * of int32, float32. Internal to this module.
 */
function computeDtype(op: string, def: ElementwiseDef, dtype: DType, argument = "x"): DType {
  switch (def.accepts) {
    case "float":
      return isFloat(dtype) ? dtype : "float32";
    case "numeric":
      return dtype === "bool" ? "int32" : dtype;
    case "any":
      return dtype === "bool" ? "int32" : dtype;
    case "bool":
      return "bool";
    case "integer":
      if (isInteger(dtype)) return dtype;
      throw new DTypeError({ op, argument, expected: "int32 or uint32", received: dtype });
  }
}

/**
 * Builds the function of a unary op from the op table (how every unary op here is made).
 *
 * @example
 * ```ts
 * import { unaryOp } from "@gyre/gyre";
 * const exp = unaryOp("exp");
 * ```
 */
export function unaryOp(op: UnaryOp): (x: TensorLike) => Tensor {
  const def = tableEntry("unaryOp", UNARY, op, "one operand");
  return (x) =>
    taped(op, [x], {}, () =>
      runElementwise(op, [x], ["x"], ([leaf], [dtype]) => {
        const ct = computeDtype(op, def, dtype);
        return E.unary(op, E.cast(leaf, ct), def.result === "bool" ? "bool" : ct);
      }));
}

/** `table`'s entry for `name`, or a ValueError from `builder` when the table has none. */
function tableEntry(
  builder: string,
  table: Readonly<Record<string, ElementwiseDef>>,
  name: unknown,
  operands: string,
): ElementwiseDef {
  if (typeof name !== "string" || !Object.hasOwn(table, name)) {
    throw new ValueError({
      op: builder,
      argument: "op",
      expected: `the name of an op of ${operands} in the op table`,
      received: describe(name),
    });
  }
  return table[name];
}

/**
 * Builds the function of a binary op from the op table.
 *
 * @example
 * ```ts
 * import { binaryOp } from "@gyre/gyre";
 * const add = binaryOp("add");
 * ```
 */
export function binaryOp(op: BinaryOp): (a: TensorLike, b: TensorLike) => Tensor {
  const def = tableEntry("binaryOp", BINARY, op, "two operands");
  return (a, b) =>
    taped(op, [a, b], {}, () =>
      runElementwise(op, [a, b], ["a", "b"], ([x, y], [da, db]) => {
        const ct = computeDtype(op, def, promoteTypes(da, db), "a");
        return E.binary(op, E.cast(x, ct), E.cast(y, ct), def.result === "bool" ? "bool" : ct);
      }));
}

/**
 * Negation, `-x`.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.neg(gyre.tensor([0.5, -2]));
 * ```
 */
export const neg: (x: TensorLike) => Tensor = unaryOp("neg");

/**
 * Absolute value.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.abs(gyre.tensor([0.5, -2]));
 * ```
 */
export const abs: (x: TensorLike) => Tensor = unaryOp("abs");

/**
 * -1, 0 or 1 by the sign of `x` (NaN stays NaN).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.sign(gyre.tensor([0.5, -2]));
 * ```
 */
export const sign: (x: TensorLike) => Tensor = unaryOp("sign");

/**
 * `x * x`.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.square(gyre.tensor([0.5, -2]));
 * ```
 */
export const square: (x: TensorLike) => Tensor = unaryOp("square");

/**
 * `1 / x` (integers promote to float32).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.reciprocal(gyre.tensor([0.5, -2]));
 * ```
 */
export const reciprocal: (x: TensorLike) => Tensor = unaryOp("reciprocal");

/**
 * e to the power `x`.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.exp(gyre.tensor([0.5, -2]));
 * ```
 */
export const exp: (x: TensorLike) => Tensor = unaryOp("exp");

/**
 * 2 to the power `x`.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.exp2(gyre.tensor([0.5, -2]));
 * ```
 */
export const exp2: (x: TensorLike) => Tensor = unaryOp("exp2");

/**
 * Natural logarithm.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.log(gyre.tensor([0.5, -2]));
 * ```
 */
export const log: (x: TensorLike) => Tensor = unaryOp("log");

/**
 * Base-2 logarithm.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.log2(gyre.tensor([0.5, -2]));
 * ```
 */
export const log2: (x: TensorLike) => Tensor = unaryOp("log2");

/**
 * `log(1 + x)`, accurate for small `x`.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.log1p(gyre.tensor([0.5, -2]));
 * ```
 */
export const log1p: (x: TensorLike) => Tensor = unaryOp("log1p");

/**
 * `exp(x) - 1`, accurate for small `x`.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.expm1(gyre.tensor([0.5, -2]));
 * ```
 */
export const expm1: (x: TensorLike) => Tensor = unaryOp("expm1");

/**
 * Square root.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.sqrt(gyre.tensor([0.5, -2]));
 * ```
 */
export const sqrt: (x: TensorLike) => Tensor = unaryOp("sqrt");

/**
 * `1 / sqrt(x)`.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.rsqrt(gyre.tensor([0.5, -2]));
 * ```
 */
export const rsqrt: (x: TensorLike) => Tensor = unaryOp("rsqrt");

/**
 * Sine (radians), accurate over every finite float32 on both devices (on the GPU within 2 ULP of
 * the exact value: the argument is reduced by pi/2 exactly, not by WGSL's builtin).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.sin(gyre.tensor([0.5, -2]));
 * ```
 */
export const sin: (x: TensorLike) => Tensor = unaryOp("sin");

/**
 * Cosine (radians), accurate over every finite float32 on both devices (on the GPU within 2 ULP of
 * the exact value).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.cos(gyre.tensor([0.5, -2]));
 * ```
 */
export const cos: (x: TensorLike) => Tensor = unaryOp("cos");

/**
 * Tangent (radians), accurate over every finite float32 on both devices (on the GPU within about
 * 4 ULP of the exact value: sine over cosine).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.tan(gyre.tensor([0.5, -2]));
 * ```
 */
export const tan: (x: TensorLike) => Tensor = unaryOp("tan");

/**
 * Hyperbolic tangent.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.tanh(gyre.tensor([0.5, -2]));
 * ```
 */
export const tanh: (x: TensorLike) => Tensor = unaryOp("tanh");

/**
 * Logistic sigmoid, `1 / (1 + exp(-x))`.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.sigmoid(gyre.tensor([0.5, -2]));
 * ```
 */
export const sigmoid: (x: TensorLike) => Tensor = unaryOp("sigmoid");

/**
 * The error function.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.erf(gyre.tensor([0.5, -2]));
 * ```
 */
export const erf: (x: TensorLike) => Tensor = unaryOp("erf");

/**
 * Largest integer not above `x`.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.floor(gyre.tensor([0.5, -2]));
 * ```
 */
export const floor: (x: TensorLike) => Tensor = unaryOp("floor");

/**
 * Smallest integer not below `x`.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.ceil(gyre.tensor([0.5, -2]));
 * ```
 */
export const ceil: (x: TensorLike) => Tensor = unaryOp("ceil");

/**
 * Nearest integer, halves to even (as NumPy).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.round(gyre.tensor([0.5, -2]));
 * ```
 */
export const round: (x: TensorLike) => Tensor = unaryOp("round");

/**
 * Logical not; any dtype is read as a truth value.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.logicalNot(gyre.tensor([true, false]));
 * ```
 */
export const logicalNot: (x: TensorLike) => Tensor = unaryOp("logicalNot");

/**
 * Elementwise sum with broadcasting.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.add(gyre.tensor([1, 2, 3]), 2);
 * ```
 */
export const add: (a: TensorLike, b: TensorLike) => Tensor = binaryOp("add");

/**
 * Elementwise difference with broadcasting.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.sub(gyre.tensor([1, 2, 3]), 2);
 * ```
 */
export const sub: (a: TensorLike, b: TensorLike) => Tensor = binaryOp("sub");

/**
 * Elementwise product with broadcasting.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.mul(gyre.tensor([1, 2, 3]), 2);
 * ```
 */
export const mul: (a: TensorLike, b: TensorLike) => Tensor = binaryOp("mul");

/**
 * True division: integers promote to float32.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.div(gyre.tensor([1, 2, 3]), 2);
 * ```
 */
export const div: (a: TensorLike, b: TensorLike) => Tensor = binaryOp("div");

/**
 * `a` to the power `b`. Integer powers with negative exponents truncate toward zero.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.pow(gyre.tensor([1, 2, 3]), 2);
 * ```
 */
export const pow: (a: TensorLike, b: TensorLike) => Tensor = binaryOp("pow");

/**
 * Elementwise maximum; NaN propagates (as NumPy).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.maximum(gyre.tensor([1, 2, 3]), 2);
 * ```
 */
export const maximum: (a: TensorLike, b: TensorLike) => Tensor = binaryOp("maximum");

/**
 * Elementwise minimum; NaN propagates (as NumPy).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.minimum(gyre.tensor([1, 2, 3]), 2);
 * ```
 */
export const minimum: (a: TensorLike, b: TensorLike) => Tensor = binaryOp("minimum");

/**
 * Remainder with the sign of the divisor (NumPy `remainder`); integer division by zero gives 0.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.mod(gyre.tensor([1, 2, 3]), 2);
 * ```
 */
export const mod: (a: TensorLike, b: TensorLike) => Tensor = binaryOp("mod");

/**
 * `a == b`, as bool.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.equal(gyre.tensor([1, 2, 3]), 2);
 * ```
 */
export const equal: (a: TensorLike, b: TensorLike) => Tensor = binaryOp("equal");

/**
 * `a != b`, as bool (true where either is NaN).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.notEqual(gyre.tensor([1, 2, 3]), 2);
 * ```
 */
export const notEqual: (a: TensorLike, b: TensorLike) => Tensor = binaryOp("notEqual");

/**
 * `a < b`, as bool.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.less(gyre.tensor([1, 2, 3]), 2);
 * ```
 */
export const less: (a: TensorLike, b: TensorLike) => Tensor = binaryOp("less");

/**
 * `a <= b`, as bool.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.lessEqual(gyre.tensor([1, 2, 3]), 2);
 * ```
 */
export const lessEqual: (a: TensorLike, b: TensorLike) => Tensor = binaryOp("lessEqual");

/**
 * `a > b`, as bool.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.greater(gyre.tensor([1, 2, 3]), 2);
 * ```
 */
export const greater: (a: TensorLike, b: TensorLike) => Tensor = binaryOp("greater");

/**
 * `a >= b`, as bool.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.greaterEqual(gyre.tensor([1, 2, 3]), 2);
 * ```
 */
export const greaterEqual: (a: TensorLike, b: TensorLike) => Tensor = binaryOp("greaterEqual");

/**
 * Logical and; operands are read as truth values.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.logicalAnd(gyre.tensor([true, false]), true);
 * ```
 */
export const logicalAnd: (a: TensorLike, b: TensorLike) => Tensor = binaryOp("logicalAnd");

/**
 * Logical or; operands are read as truth values.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.logicalOr(gyre.tensor([true, false]), true);
 * ```
 */
export const logicalOr: (a: TensorLike, b: TensorLike) => Tensor = binaryOp("logicalOr");

/**
 * `condition ? a : b` elementwise, with broadcasting across all three; `a` and `b` promote.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const x = gyre.tensor([-1, 2]);
 * const y = gyre.where(x.greater(0), x, 0); // [0, 2]
 * ```
 */
export function where(condition: TensorLike, a: TensorLike, b: TensorLike): Tensor {
  return taped("where", [condition, a, b], {}, () =>
    runElementwise(
      "where",
      [condition, a, b],
      ["condition", "a", "b"],
      ([c, x, y], [, da, db]) => {
        const dtype = promoteTypes(da, db);
        return E.where(E.cast(c, "bool"), E.cast(x, dtype), E.cast(y, dtype));
      },
    ));
}

/**
 * Limits values to `[min, max]`; a missing bound (`null` or `undefined`, NumPy's `None`) leaves
 * that side open, but one bound must be given. NaN stays NaN (and a NaN bound gives NaN, as NumPy).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.clip(gyre.tensor([-2, 0.5, 3]), 0, 1); // [0, 0.5, 1]
 * const z = gyre.clip(gyre.tensor([-2, 0.5, 3]), null, 1); // [-2, 0.5, 1]
 * ```
 */
export function clip(x: TensorLike, min?: number | null, max?: number | null): Tensor {
  const lo = clipBound("min", min), hi = clipBound("max", max);
  if (lo === null && hi === null) {
    throw new ValueError({
      op: "clip",
      argument: "min, max",
      expected: "at least one bound (a number)",
      received: `${describe(min)} and ${describe(max)}`,
    });
  }
  const numeric = opDef("maximum");
  return taped(
    "clip",
    [x],
    { min: lo, max: hi },
    () =>
      runElementwise("clip", [x], ["x"], ([leaf], [dtype]) => {
        const ct = computeDtype("clip", numeric, dtype);
        let e = E.cast(leaf, ct);
        if (lo !== null) e = E.binary("maximum", e, E.constant(lo, ct));
        if (hi !== null) e = E.binary("minimum", e, E.constant(hi, ct));
        return e;
      }),
  );
}

/** A bound of {@link clip}: a number, or null for none (from `null` or `undefined`). */
function clipBound(argument: "min" | "max", value: unknown): number | null {
  if (value === null || value === undefined) return null;
  if (typeof value !== "number") {
    throw new ValueError({
      op: "clip",
      argument,
      expected: "a number, or null or undefined for no bound",
      received: describe(value),
    });
  }
  return value;
}

/**
 * Converts to another dtype: floats to integers truncate toward zero and saturate at the type's
 * range, NaN to 0; integers to integers wrap; anything to bool is `x != 0` (NaN is true); to
 * float16 rounds to nearest even. The same on both devices.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.cast(gyre.tensor([1.7, -1.7]), "int32"); // [1, -1]
 * const u = gyre.cast(gyre.tensor([-1.5, 5e9, NaN]), "uint32"); // [0, 4294967295, 0]
 * ```
 */
export function cast(x: TensorLike, dtype: DType): Tensor {
  const target = checkDType("cast", "dtype", dtype);
  return taped(
    "cast",
    [x],
    { dtype: target },
    () => runElementwise("cast", [x], ["x"], ([leaf]) => E.cast(leaf, target)),
  );
}
