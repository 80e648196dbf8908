/**
 * The scalar expression IR every elementwise kernel is built from. The GPU backend compiles a
 * whole expression into one WGSL kernel; the WASM backend evaluates it node by node with
 * precompiled AssemblyScript kernels. Fusion (a later stage) grows these expressions.
 * @module
 */
import type { View } from "../core/view.ts";
import { type DType, f16BitsToF32, f32ToF16Bits } from "../core/dtype.ts";

import type { BinaryOp, UnaryOp } from "./elementwise_table.ts";

export type { BinaryOp, UnaryOp };

/** One node of an elementwise expression; `dtype` is the node's result type. */
export type Expr =
  | { kind: "input"; index: number; dtype: DType }
  /** A tensor's view itself, in a pending (not yet bound) expression; see src/_lazy.ts. */
  | { kind: "view"; view: View; dtype: DType }
  /**
   * The element a producer kernel (a matrix product) computes here, in a pending expression
   * whose other nodes become that kernel's epilogue; see src/_lazy.ts.
   */
  | { kind: "producer"; dtype: DType }
  | { kind: "const"; value: number; dtype: DType }
  | { kind: "index"; dtype: "uint32" }
  | { kind: "unary"; op: UnaryOp; x: Expr; dtype: DType }
  | { kind: "binary"; op: BinaryOp; a: Expr; b: Expr; dtype: DType }
  | { kind: "where"; cond: Expr; a: Expr; b: Expr; dtype: DType }
  | { kind: "cast"; x: Expr; dtype: DType };

/** Builders for expression nodes. */
export const E = {
  input: (index: number, dtype: DType): Expr => ({ kind: "input", index, dtype }),
  /**
   * A float16 constant holds its half-precision value (0.1 is 0.0999755859375, 1e5 is inf); a
   * bool constant is 1 for any non-zero value, NaN included (NumPy), not a value a byte truncates.
   */
  constant: (value: number, dtype: DType): Expr => ({
    kind: "const",
    value: dtype === "float16"
      ? f16BitsToF32(f32ToF16Bits(value))
      : dtype === "bool"
      ? (value !== 0 ? 1 : 0)
      : value,
    dtype,
  }),
  index: (): Expr => ({ kind: "index", dtype: "uint32" }),
  view: (view: View, dtype: DType): Expr => ({ kind: "view", view, dtype }),
  producer: (dtype: DType): Expr => ({ kind: "producer", dtype }),
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

/**
 * A structural key: equal keys mean the same kernel. A constant is keyed by its dtype and place
 * only, not its value: the GPU kernels read constants from their uniforms (slot k is the k-th
 * constant of {@link constantNodes}), so one kernel serves every value. Nodes are numbered in
 * post-order and refer to their operands by number, so shared subexpressions are described once.
 */
export function exprKey(root: Expr): string {
  const ids = new Map<Expr, number>();
  const parts: string[] = [];
  for (const e of postOrder(root)) {
    const arg = (x: Expr) => ids.get(x)!;
    let part: string;
    switch (e.kind) {
      case "input":
        part = `i${e.index}:${e.dtype}`;
        break;
      case "view":
      case "producer":
        throw new Error("internal: a pending expression must be bound before it is keyed");
      case "const":
        part = `c:${e.dtype}`;
        break;
      case "index":
        part = "idx";
        break;
      case "unary":
        part = `${e.op}(${arg(e.x)}):${e.dtype}`;
        break;
      case "binary":
        part = `${e.op}(${arg(e.a)},${arg(e.b)}):${e.dtype}`;
        break;
      case "where":
        part = `where(${arg(e.cond)},${arg(e.a)},${arg(e.b)})`;
        break;
      case "cast":
        part = `${e.dtype}(${arg(e.x)})`;
        break;
    }
    ids.set(e, ids.size);
    parts.push(part);
  }
  return parts.join(";");
}

/**
 * The distinct constant nodes of an expression in post-order: constant slot k of a GPU kernel
 * holds the k-th one's value.
 */
export function constantNodes(root: Expr): (Expr & { kind: "const" })[] {
  return postOrder(root).filter((e): e is Expr & { kind: "const" } => e.kind === "const");
}

/** Number of input slots an expression reads (highest input index + 1). */
export function inputCount(e: Expr): number {
  let count = 0;
  for (const n of postOrder(e)) if (n.kind === "input") count = Math.max(count, n.index + 1);
  return count;
}

/** The operands of a node. */
export function children(e: Expr): Expr[] {
  switch (e.kind) {
    case "unary":
    case "cast":
      return [e.x];
    case "binary":
      return [e.a, e.b];
    case "where":
      return [e.cond, e.a, e.b];
    default:
      return [];
  }
}

/**
 * The distinct nodes of an expression in post-order (operands before users). Fusion shares
 * subexpressions, so an expression is a DAG: walking it as a tree could take exponential time.
 */
export function postOrder(root: Expr): Expr[] {
  const seen = new Set<Expr>();
  const order: Expr[] = [];
  const stack: [Expr, boolean][] = [[root, false]];
  while (stack.length) {
    const [e, expanded] = stack.pop()!;
    if (expanded) {
      order.push(e);
      continue;
    }
    if (seen.has(e)) continue;
    seen.add(e);
    stack.push([e, true]);
    const kids = children(e);
    for (let i = kids.length - 1; i >= 0; i--) if (!seen.has(kids[i])) stack.push([kids[i], false]);
  }
  return order;
}

/** Number of distinct nodes. */
export function nodeCount(e: Expr): number {
  return postOrder(e).length;
}

/** True when the expression reads the output's linear index (so it cannot be broadcast). */
export function readsIndex(e: Expr): boolean {
  return postOrder(e).some((n) => n.kind === "index");
}

/** An input leaf: a bound input slot, an unbound view or a producer's value. */
export type Leaf = Expr & { kind: "input" | "view" | "producer" };

/** Rebuilds an expression with every input or view leaf replaced; shared nodes stay shared. */
export function substitute(root: Expr, leaf: (leaf: Leaf) => Expr): Expr {
  const memo = new Map<Expr, Expr>();
  for (const e of postOrder(root)) {
    let out: Expr;
    switch (e.kind) {
      case "input":
      case "view":
      case "producer":
        out = leaf(e);
        break;
      case "unary":
      case "cast":
        out = { ...e, x: memo.get(e.x)! };
        break;
      case "binary":
        out = { ...e, a: memo.get(e.a)!, b: memo.get(e.b)! };
        break;
      case "where":
        out = { ...e, cond: memo.get(e.cond)!, a: memo.get(e.a)!, b: memo.get(e.b)! };
        break;
      default:
        out = e;
    }
    memo.set(e, out);
  }
  return memo.get(root)!;
}
