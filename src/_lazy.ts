/**
 * The lazy graph: a pending elementwise computation (`Pending`) is an expression whose leaves are
 * tensors' views, plus the pending producers it folded in. Consumers fold a pending producer of
 * the same shape in by pointing at its expression (constant time per op); nothing runs until a
 * tensor is needed, when `bind` numbers the distinct views into kernel inputs.
 * @module
 */
import type { Backend, Storage, View } from "./contract/backend.ts";
import type { Shape } from "./core/shape.ts";
import type { DType } from "./core/dtype.ts";
import { type PlanOverrides, planOverrides } from "./plans/overrides.ts";
import { E, type Expr, postOrder, readsIndex, substitute } from "./ir/expr.ts";

/**
 * A kernel whose output feeds a pending expression as its `producer` leaf (a matrix product):
 * at launch the rest of the expression runs inside that kernel, as its epilogue.
 */
export interface Producer {
  /** The producer's op, e.g. "matmul". */
  op: string;
  dtype: DType;
  /**
   * Launches the kernel with `epilogue` (over the product's value as input 0 and `inputs` as
   * inputs 1...) folded in, or returns null when it cannot fold that epilogue in.
   */
  run(label: string, epilogue: Expr | null, inputs: View[]): Storage | null;
}

/** An elementwise computation recorded but not run yet. */
export interface Pending {
  /** The fused expression; its leaves are views (broadcast to `shape`), constants or the index. */
  expr: Expr;
  shape: Shape;
  dtype: DType;
  backend: Backend;
  /** The op that made this node (the last one fused). */
  op: string;
  /** View leaves this node added; it holds a reference on each one's storage. */
  views: View[];
  /** Pending producers folded into `expr`; it holds a reference on each. */
  children: Pending[];
  /** Holders: the tensor that owns it and the consumers that folded it in. */
  refs: number;
  /** Upper bounds (shared subexpressions counted once per use) on distinct nodes and inputs. */
  nodes: number;
  inputs: number;
  /** Reads the element index, so it cannot be re-broadcast to another shape. */
  readsIndex: boolean;
  /** The producer kernel whose output the expression reads, if any (at most one). */
  producer: Producer | null;
  /** The plan overrides in force when the op was issued: what its kernel runs under. */
  overrides: Readonly<PlanOverrides>;
}

/** A new pending node holding references on its views and children. */
export function makePending(
  op: string,
  backend: Backend,
  expr: Expr,
  shape: Shape,
  views: View[],
  children: Pending[],
  producer: Producer | null = null,
): Pending {
  for (const v of views) v.storage.refs++;
  for (const c of children) c.refs++;
  let nodes = 1 + views.length;
  let inputs = views.length;
  for (const c of children) {
    nodes += c.nodes;
    inputs += c.inputs;
  }
  return {
    expr,
    shape: [...shape],
    dtype: expr.dtype,
    backend,
    op,
    views,
    children,
    refs: 1,
    nodes,
    inputs,
    readsIndex: children.some((c) => c.readsIndex) || (children.length === 0 && readsIndex(expr)),
    producer: producer ?? children.find((c) => c.producer)?.producer ?? null,
    overrides: planOverrides(),
  };
}

/** Drops one reference; the last one releases the views' storage and the children. */
export function releasePending(p: Pending): void {
  if (--p.refs > 0) return;
  for (const v of p.views) {
    if (--v.storage.refs === 0) v.storage.backend.free(v.storage);
  }
  for (const c of p.children) releasePending(c);
}

/**
 * The expression with views numbered into kernel inputs (identical views share one input). With
 * `producerFirst`, the producer leaf is input 0 and views start at 1 (an epilogue's numbering).
 */
export function bind(expr: Expr, producerFirst = false): { expr: Expr; inputs: View[] } {
  const inputs: View[] = [];
  const base = producerFirst ? 1 : 0;
  const bound = substitute(expr, (leaf) => {
    if (leaf.kind === "input") return leaf;
    if (leaf.kind === "producer") return E.input(0, leaf.dtype);
    const view = leaf.view;
    let k = inputs.findIndex((v) =>
      v.storage === view.storage && v.offset === view.offset && v.dtype === view.dtype &&
      v.strides.length === view.strides.length && v.strides.every((s, i) => s === view.strides[i])
    );
    if (k < 0) k = inputs.push(view) - 1;
    return E.input(k + base, leaf.dtype);
  });
  return { expr: bound, inputs };
}

/** A copy of `expr` whose view leaves are replaced by `map(view)`; the new views are returned. */
export function remapViews(expr: Expr, map: (view: View) => View): { expr: Expr; views: View[] } {
  const views: View[] = [];
  const out = substitute(expr, (leaf) => {
    if (leaf.kind !== "view") return leaf;
    const view = map(leaf.view);
    views.push(view);
    return E.view(view, leaf.dtype);
  });
  return { expr: out, views };
}

/** The ops folded into a pending node, producers first (for `explain`). */
export function fusedOps(p: Pending): string[] {
  const seen = new Set<Pending>();
  const out: string[] = [];
  const walk = (n: Pending) => {
    if (seen.has(n)) return;
    seen.add(n);
    n.children.forEach(walk);
    out.push(n.op);
  };
  walk(p);
  return out;
}

/** Distinct nodes of a pending expression (exact, unlike the `nodes` bound). */
export function exactNodes(p: Pending): number {
  return postOrder(p.expr).length;
}

/** A short label for a fused kernel: its ops joined by "+", repeats folded ("add×95"). */
export function fusedLabel(p: Pending): string {
  const ops = fusedOps(p);
  const parts: string[] = [];
  for (let i = 0; i < ops.length;) {
    let j = i;
    while (j < ops.length && ops[j] === ops[i]) j++;
    parts.push(j - i > 1 ? `${ops[i]}×${j - i}` : ops[i]);
    i = j;
  }
  return parts.join("+");
}
