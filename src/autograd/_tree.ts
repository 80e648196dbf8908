/**
 * Parameter trees: a tensor, or arrays and plain objects nesting tensors (a model's parameters as
 * one object). Transformations flatten a tree to its tensors and rebuild one of the same structure.
 * @module
 */
import { describe, ValueError } from "../core/errors.ts";
import { Tensor } from "../tensor.ts";

/** A tensor, or arrays and plain objects of trees. */
export type Tree = Tensor | readonly Tree[] | { readonly [key: string]: Tree };

/** The tensors of `tree` in a fixed order (array order, then object keys in insertion order). */
export function leaves(tree: unknown, op: string, argument: string): Tensor[] {
  const out: Tensor[] = [];
  const walk = (node: unknown, path: string) => {
    if (node instanceof Tensor) out.push(node);
    else if (Array.isArray(node)) node.forEach((n, i) => walk(n, `${path}[${i}]`));
    else if (
      node !== null && typeof node === "object" && Object.getPrototypeOf(node) === Object.prototype
    ) {
      for (const [k, v] of Object.entries(node)) walk(v, `${path}.${k}`);
    } else {
      throw new ValueError({
        op,
        argument: path,
        expected: "a Tensor, or arrays and plain objects of tensors",
        received: describe(node),
      });
    }
  };
  walk(tree, argument);
  return out;
}

/** A tree of `tree`'s structure whose tensors are `values`, in {@link leaves}' order. */
export function rebuild<T>(tree: unknown, values: readonly unknown[]): T {
  let at = 0;
  const walk = (node: unknown): unknown => {
    if (node instanceof Tensor) return values[at++];
    if (Array.isArray(node)) return node.map(walk);
    return Object.fromEntries(Object.entries(node as object).map(([k, v]) => [k, walk(v)]));
  };
  return walk(tree) as T;
}

/**
 * Puts `values` in place of `tree`'s tensors, in {@link leaves}' order, mutating its arrays and
 * objects (an optimizer updates a model's parameter object this way). A bare tensor has no place
 * to change: the caller keeps the new one.
 */
export function replaceLeaves(tree: unknown, values: readonly unknown[]): void {
  let at = 0;
  const walk = (node: unknown) => {
    if (node instanceof Tensor) {
      at++;
      return;
    }
    const entries: [string | number, unknown][] = Array.isArray(node)
      ? node.map((v, i) => [i, v])
      : Object.entries(node as object);
    for (const [k, v] of entries) {
      if (v instanceof Tensor) (node as Record<string | number, unknown>)[k] = values[at++];
      else walk(v);
    }
  };
  walk(tree);
}
