/**
 * Topology of a scalar residual graph (issue 26): its structure as a canonical key — the ops,
 * how nodes share operands, and which leaves are parameters or constants, but not the leaves'
 * values — so that thousands of residuals of a few shapes group into a few kernels, each
 * instance contributing only its parameter slots and constant values as data.
 * @module
 */
import type { Value } from "./value.ts";

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
  const ids = new Map<Value, number>();
  const entries: string[] = [];
  const params: Value[] = [];
  const constants: number[] = [];
  const stack: [Value, number][] = [[root, 0]];
  while (stack.length) {
    const top = stack[stack.length - 1];
    const [node, next] = top;
    if (ids.has(node)) {
      stack.pop();
      continue;
    }
    if (next < node.inputs.length) {
      top[1]++;
      if (!ids.has(node.inputs[next])) stack.push([node.inputs[next], 0]);
      continue;
    }
    stack.pop();
    let entry: string;
    if (node.op === "param") entry = `P${params.push(node) - 1}`;
    else if (node.op === "const") entry = `C${constants.push(node.data) - 1}`;
    else entry = `${node.op}(${node.inputs.map((i) => ids.get(i)).join(",")})`;
    ids.set(node, entries.push(entry) - 1);
  }
  const key = entries.join(";");
  return { key, hash: hashOf(key), params, constants };
}
