/**
 * Topology of a scalar residual graph (issue 26): its structure as a canonical key — the ops,
 * how nodes share operands, and which leaves are parameters or constants, but not the leaves'
 * values — so that thousands of residuals of a few shapes group into a few kernels, each
 * instance contributing only its parameter slots and constant values as data.
 * @module
 */
import { describe, ValueError } from "../core/errors.ts";
import { Value } from "./value.ts";

/** A residual's structure and its instance data. */
export interface Topology {
  /**
   * The canonical structure, one entry a node in post-order: "P<k>" (the k-th distinct parameter),
   * "C<k>" (the k-th constant), or `op(i,j,...)` over earlier entries. Equal keys, same kernel.
   */
  key: string;
  /** A 53-bit hash of the key (FNV-1a), for tables and logs; the key decides equality. */
  hash: number;
  /** The instance's parameters, in their slot order. */
  params: Value[];
  /** The instance's constant values, in their slot order. */
  constants: number[];
}

/** FNV-1a over the key's UTF-16 units, folded to 53 bits. */
function hashOf(key: string): number {
  let h = 0xcbf29ce484222325n;
  for (let i = 0; i < key.length; i++) {
    h ^= BigInt(key.charCodeAt(i));
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return Number(h & 0x1fffffffffffffn);
}

let traversal = 0;

/** A new traversal's mark (walks mark the nodes they reach with it: `Value._mark`). */
export function nextMark(): number {
  return ++traversal;
}

/** Depth past which the walk continues with an explicit stack (no call-stack overflow). */
const RECURSION_LIMIT = 2000;

function visit(node: Value, mark: number, out: Value[], depth: number): void {
  node._mark = mark;
  const inputs = node.inputs;
  for (let i = 0; i < inputs.length; i++) {
    const child = inputs[i];
    if (child._mark === mark) continue;
    if (depth < RECURSION_LIMIT) visit(child, mark, out, depth + 1);
    else visitDeep(child, mark, out);
  }
  node._id = out.push(node) - 1;
}

/** The same walk with an explicit stack, for deep graphs. */
function visitDeep(root: Value, mark: number, out: Value[]): void {
  const nodes: Value[] = [root];
  const cursor: number[] = [0];
  root._mark = mark;
  while (nodes.length) {
    const top = nodes.length - 1;
    const node = nodes[top];
    const k = cursor[top];
    if (k < node.inputs.length) {
      cursor[top] = k + 1;
      const child = node.inputs[k];
      if (child._mark !== mark) {
        child._mark = mark;
        nodes.push(child);
        cursor.push(0);
      }
      continue;
    }
    nodes.pop();
    cursor.pop();
    node._id = out.push(node) - 1;
  }
}

/**
 * The nodes under `root` in canonical order, into `out` (cleared first): a post-order that follows
 * operand order (two graphs built the same way list their nodes alike), each shared node once,
 * each node's `_id` its position. Marks nodes (`_mark`) instead of keeping a set: this runs once
 * per residual, over every node of every residual.
 */
export function postOrder(root: Value, out: Value[]): Value[] {
  out.length = 0;
  visit(root, ++traversal, out, 0);
  return out;
}

/**
 * The canonical key of nodes in {@link postOrder}: one entry a node, "P<k>" (the k-th parameter
 * leaf), "C<k>" (the k-th constant) or `op(i,j,...)` over earlier entries.
 */
export function keyOf(nodes: readonly Value[]): string {
  let key = "";
  let params = 0, constants = 0;
  for (let k = 0; k < nodes.length; k++) {
    const node = nodes[k];
    let entry: string;
    if (node.op === "param") entry = `P${params++}`;
    else if (node.op === "const") entry = `C${constants++}`;
    else {
      entry = `${node.op}(`;
      for (let i = 0; i < node.inputs.length; i++) {
        entry += i ? `,${node.inputs[i]._id}` : `${node.inputs[i]._id}`;
      }
      entry += ")";
    }
    key += k ? `;${entry}` : entry;
  }
  return key;
}

/**
 * The topology of the graph under `root`: nodes in a post-order that follows operand order (so
 * two graphs built the same way list their nodes alike), each shared node listed once.
 *
 * @example
 * ```ts
 * import { V } from "./value.ts";
 * import { topology } from "./topology.ts";
 * const edge = (a: number, b: number) => V.sub(V.sub(V.W(a), V.W(b)), V.C(1));
 * topology(edge(1, 2)).key === topology(edge(5, 7)).key; // true: one kernel serves both
 * ```
 */
export function topology(root: Value): Topology {
  if (!(root instanceof Value)) {
    throw new ValueError({
      op: "topology",
      argument: "root",
      expected: "a Value",
      received: describe(root),
    });
  }
  const nodes = postOrder(root, []);
  const key = keyOf(nodes);
  const params = nodes.filter((n) => n.op === "param");
  const constants = nodes.filter((n) => n.op === "const").map((n) => n.data);
  return { key, hash: hashOf(key), params, constants };
}
