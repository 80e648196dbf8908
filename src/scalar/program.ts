/**
 * Tracing residual graphs into a program (issue 26): each residual's topology key, parameter
 * indices and constants (src/scalar/topology.ts), grouped by key; src/plans/residuals.ts makes
 * the program the devices run.
 * @module
 */
import { describe, ValueError } from "../core/errors.ts";
import type { ResidualProgram } from "../contract/residuals.ts";
import { planResiduals, type TracedGroup } from "../plans/residuals.ts";
import { keyOf, nextMark, postOrder } from "./topology.ts";
import { Value } from "./value.ts";

/** A group's node structure: op per node, operand ids. */
interface Shape {
  ops: string[];
  /** Node k's operands are args[start[k] .. start[k + 1]). */
  start: Int32Array;
  args: Int32Array;
  /** The positions of the parameter leaves, and of the constants: the instance's data. */
  params: Int32Array;
  constants: Int32Array;
}

/**
 * A growable typed array. The traced graph is young and large when tracing ends: growing JS
 * arrays here would allocate on the heap and make each minor collection copy the whole graph;
 * typed arrays' storage lives off the heap.
 */
class Column<T extends Int32Array | Float64Array> {
  length = 0;
  constructor(public data: T) {}
  push(v: number): void {
    if (this.length === this.data.length) {
      const bigger = new (this.data.constructor as new (n: number) => T)(2 * this.length + 16);
      bigger.set(this.data);
      this.data = bigger;
    }
    this.data[this.length++] = v;
  }
  view(): T {
    return this.data.subarray(0, this.length) as T;
  }
}

interface Shaped {
  key: string;
  params: Column<Int32Array>;
  constants: Column<Float64Array>;
  rows: Column<Int32Array>;
  shape: Shape;
}

function shapeOf(nodes: readonly Value[]): Shape {
  const start = new Int32Array(nodes.length + 1);
  const args: number[] = [];
  nodes.forEach((node, k) => {
    for (const input of node.inputs) args.push(input._id);
    start[k + 1] = args.length;
  });
  const at = (op: string) => Int32Array.from(nodes.flatMap((n, k) => (n.op === op ? [k] : [])));
  return {
    ops: nodes.map((n) => n.op),
    start,
    args: Int32Array.from(args),
    params: at("param"),
    constants: at("const"),
  };
}

/** Past this depth a graph is matched by the general walk (which has no recursion limit). */
const MATCH_DEPTH = 2000;

/**
 * Whether the graph under `root` has `shape`: one walk in the order `postOrder` lists nodes,
 * checking each node's op and operands as it is listed (so a graph of another shape stops at its
 * first difference). On success `nodes[k]` is the graph's node k. Fuses the walk, the comparison
 * and the list: most residuals have the shape of the one before.
 */
function matchShape(root: Value, shape: Shape, nodes: Value[]): boolean {
  const mark = nextMark();
  const { ops, start, args } = shape;
  let next = 0;
  const walk = (node: Value, depth: number): boolean => {
    node._mark = mark;
    const inputs = node.inputs;
    for (let i = 0; i < inputs.length; i++) {
      const child = inputs[i];
      if (child._mark !== mark && (depth >= MATCH_DEPTH || !walk(child, depth + 1))) return false;
    }
    const k = next++;
    if (k >= ops.length || node.op !== ops[k]) return false;
    const s = start[k];
    if (inputs.length !== start[k + 1] - s) return false;
    for (let i = 0; i < inputs.length; i++) if (inputs[i]._id !== args[s + i]) return false;
    node._id = k;
    nodes[k] = node;
    return true;
  };
  return walk(root, 0) && next === ops.length;
}

/**
 * Groups `residuals` (graphs over `params`) by topology into a program.
 *
 * @example
 * ```ts
 * import { V } from "./value.ts";
 * import { compileProgram } from "./program.ts";
 * const x = [V.W(1), V.W(2), V.W(4)];
 * const program = compileProgram(x, [V.sub(x[1], x[0]), V.sub(x[2], x[1])]);
 * program.groups.length; // 1: both residuals share one topology
 * ```
 */
export function compileProgram(
  params: readonly Value[],
  residuals: readonly Value[],
  op = "CompiledResiduals.compile",
): ResidualProgram {
  params.forEach((p, i) => {
    if (!(p instanceof Value) || p.op !== "param") {
      throw new ValueError({
        op,
        argument: `params[${i}]`,
        expected: "a parameter made by V.W",
        received: p instanceof Value ? `a Value made by ${p.op}` : describe(p),
      });
    }
    if (p._param >= 0 && p._param < i && params[p._param] === p) {
      throw new ValueError({
        op,
        argument: `params[${i}]`,
        expected: "each parameter listed once",
        received: `the parameter of params[${p._param}] again`,
      });
    }
    if (!Number.isFinite(p.data)) {
      throw new ValueError({
        op,
        argument: `params[${i}]`,
        expected: "a finite starting value",
        received: String(p.data),
      });
    }
    // Stamped on the parameter (checked against the list: a stamp may be another compile's).
    p._param = i;
  });
  const byKey = new Map<string, Shaped>();
  const order: Shaped[] = [];
  const nodes: Value[] = [];
  let last: Shaped | null = null;
  for (let r = 0; r < residuals.length; r++) {
    const root = residuals[r];
    if (!(root instanceof Value)) {
      throw new ValueError({
        op,
        argument: `residuals[${r}]`,
        expected: "a Value",
        received: describe(root),
      });
    }
    // Residuals built by one piece of code come in runs of one shape: the last group's shape is
    // matched first, and only a residual of another shape is listed again and keyed.
    let group: Shaped | null = last && matchShape(root, last.shape, nodes) ? last : null;
    if (!group) {
      postOrder(root, nodes);
      const key = keyOf(nodes);
      group = byKey.get(key) ?? null;
      if (!group) {
        group = {
          key,
          params: new Column(new Int32Array(64)),
          constants: new Column(new Float64Array(64)),
          rows: new Column(new Int32Array(64)),
          shape: shapeOf(nodes),
        };
        byKey.set(key, group);
        order.push(group);
      }
    }
    last = group;
    const traced = group;
    traced.rows.push(r);
    // Only the leaves: the shape lists where they are.
    const { params: leaves, constants } = group.shape;
    for (let k = 0; k < leaves.length; k++) {
      const node = nodes[leaves[k]];
      const i = node._param;
      if (i < 0 || params[i] !== node) {
        throw new ValueError({
          op,
          argument: `residuals[${r}]`,
          expected: "graphs whose parameters are all in params",
          received: `a parameter${node.label ? ` "${node.label}"` : ""} not in params`,
        });
      }
      traced.params.push(i);
    }
    for (let k = 0; k < constants.length; k++) traced.constants.push(nodes[constants[k]].data);
  }
  const groups: TracedGroup[] = order.map((g) => ({
    key: g.key,
    params: g.params.view(),
    constants: g.constants.view(),
    rows: g.rows.view(),
  }));
  return planResiduals(params.length, residuals.length, groups);
}
