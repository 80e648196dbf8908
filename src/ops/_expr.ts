/**
 * The scalar expression IR every elementwise kernel is built from. The GPU backend compiles a
 * whole expression into one WGSL kernel; the WASM backend evaluates it node by node with
 * precompiled AssemblyScript kernels. Fusion (a later stage) grows these expressions.
 * @module
 */
import { type DType, f16BitsToF32, f32ToF16Bits } from "../dtype.ts";

/** Ops of one operand; names match the op table in `_elementwise_table.ts`. */
export type UnaryOp = string;
/** Ops of two operands; names match the op table in `_elementwise_table.ts`. */
export type BinaryOp = string;

/** One node of an elementwise expression; `dtype` is the node's result type. */
export type Expr =
  | { kind: "input"; index: number; dtype: DType }
  | { kind: "const"; value: number; dtype: DType }
  | { kind: "index"; dtype: "uint32" }
  | { kind: "unary"; op: UnaryOp; x: Expr; dtype: DType }
  | { kind: "binary"; op: BinaryOp; a: Expr; b: Expr; dtype: DType }
  | { kind: "where"; cond: Expr; a: Expr; b: Expr; dtype: DType }
  | { kind: "cast"; x: Expr; dtype: DType };

/** Builders for expression nodes. */
export const E = {
  input: (index: number, dtype: DType): Expr => ({ kind: "input", index, dtype }),
  /** A float16 constant holds its half-precision value (0.1 is 0.0999755859375, 1e5 is inf). */
  constant: (value: number, dtype: DType): Expr => ({
    kind: "const",
    value: dtype === "float16" ? f16BitsToF32(f32ToF16Bits(value)) : value,
    dtype,
  }),
  index: (): Expr => ({ kind: "index", dtype: "uint32" }),
  unary: (op: UnaryOp, x: Expr, dtype: DType = x.dtype): Expr => ({ kind: "unary", op, x, dtype }),
  binary: (op: BinaryOp, a: Expr, b: Expr, dtype: DType = a.dtype): Expr => ({
    kind: "binary",
    op,
    a,
    b,
    dtype,
  }),
  where: (cond: Expr, a: Expr, b: Expr): Expr => ({ kind: "where", cond, a, b, dtype: a.dtype }),
  cast: (x: Expr, dtype: DType): Expr => x.dtype === dtype ? x : { kind: "cast", x, dtype },
};

/** A structural key: equal keys mean the same kernel. Constants are part of the key. */
export function exprKey(e: Expr): string {
  switch (e.kind) {
    case "input":
      return `i${e.index}:${e.dtype}`;
    case "const":
      return `c(${Object.is(e.value, -0) ? "-0" : e.value}:${e.dtype})`;
    case "index":
      return "idx";
    case "unary":
      return `${e.op}(${exprKey(e.x)})`;
    case "binary":
      return `${e.op}(${exprKey(e.a)},${exprKey(e.b)})`;
    case "where":
      return `where(${exprKey(e.cond)},${exprKey(e.a)},${exprKey(e.b)})`;
    case "cast":
      return `${e.dtype}(${exprKey(e.x)})`;
  }
}

/** Number of input slots an expression reads (highest input index + 1). */
export function inputCount(e: Expr): number {
  switch (e.kind) {
    case "input":
      return e.index + 1;
    case "const":
    case "index":
      return 0;
    case "unary":
    case "cast":
      return inputCount(e.x);
    case "binary":
      return Math.max(inputCount(e.a), inputCount(e.b));
    case "where":
      return Math.max(inputCount(e.cond), inputCount(e.a), inputCount(e.b));
  }
}
