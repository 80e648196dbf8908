/**
 * Scalar expression graphs (issue 26's first part): `Value` nodes made by `V.W` (a parameter),
 * `V.C` (a constant) and the ops of `V`, each holding its number (float64, computed eagerly) and,
 * after `backward()`, its gradient. For small problems on the CPU, and the form residual functions
 * are written in (the compiled path, to WGSL and WASM, is still to come). Internal until then:
 * not exported from `mod.ts`.
 * @module
 */
import { describe, ValueError } from "../core/errors.ts";

/** A node of a scalar expression graph. */
export class Value {
  /** The op that made it: "param", "const" or an op of {@link V}. */
  readonly op: string;
  /** Its operands. */
  readonly inputs: readonly Value[];
  /** Its value (float64). */
  readonly data: number;
  /** d(root)/d(this) after the root's `backward()`; 0 before. */
  grad = 0;
  /** A name, for parameters and constants. */
  readonly label?: string;
  /** The local derivatives d(this)/d(input k), given the node's value. */
  readonly #local: () => readonly number[];

  /** Internal: use `V.W`, `V.C` and the ops of `V`. */
  constructor(
    op: string,
    inputs: readonly Value[],
    data: number,
    local: () => readonly number[],
    label?: string,
  ) {
    this.op = op;
    this.inputs = inputs;
    this.data = data;
    this.#local = local;
    if (label !== undefined) this.label = label;
  }

  /**
   * Reverse accumulation from this node: every node it depends on gets `grad` = d(this)/d(node)
   * (gradients of an earlier `backward` are reset first).
   */
  backward(): void {
    const order: Value[] = [];
    const seen = new Set<Value>();
    // Iterative post-order: graphs of many thousand nodes would overflow a recursive walk.
    const stack: [Value, number][] = [[this, 0]];
    while (stack.length) {
      const top = stack[stack.length - 1];
      const [node, next] = top;
      if (next === 0) {
        if (seen.has(node)) {
          stack.pop();
          continue;
        }
        seen.add(node);
      }
      if (next < node.inputs.length) {
        top[1]++;
        const child = node.inputs[next];
        if (!seen.has(child)) stack.push([child, 0]);
      } else {
        stack.pop();
        order.push(node);
      }
    }
    for (const node of order) node.grad = 0;
    this.grad = 1;
    for (let i = order.length - 1; i >= 0; i--) {
      const node = order[i];
      if (node.grad === 0 || node.inputs.length === 0) continue;
      const local = node.#local();
      node.inputs.forEach((input, k) => {
        // A zero local derivative passes nothing, even from an infinite gradient.
        if (local[k] !== 0) input.grad += node.grad * local[k];
      });
    }
  }
}

/** A number or a Value. */
export type Scalar = Value | number;

function leaf(op: "param" | "const", value: unknown, label?: string): Value {
  if (typeof value !== "number") {
    throw new ValueError({
      op: op === "param" ? "V.W" : "V.C",
      argument: "value",
      expected: "a number",
      received: describe(value),
    });
  }
  return new Value(op, [], value, () => [], label);
}

function lift(op: string, x: unknown, argument: string): Value {
  if (x instanceof Value) return x;
  if (typeof x === "number") return leaf("const", x);
  throw new ValueError({ op, argument, expected: "a Value or a number", received: describe(x) });
}

function unary(op: string, f: (a: number) => number, d: (a: number, y: number) => number) {
  return (x: Scalar): Value => {
    const a = lift(`V.${op}`, x, "x");
    const y = f(a.data);
    return new Value(op, [a], y, () => [d(a.data, y)]);
  };
}

function binary(
  op: string,
  f: (a: number, b: number) => number,
  d: (a: number, b: number, y: number) => readonly [number, number],
) {
  return (x: Scalar, z: Scalar): Value => {
    const a = lift(`V.${op}`, x, "a"), b = lift(`V.${op}`, z, "b");
    const y = f(a.data, b.data);
    return new Value(op, [a, b], y, () => d(a.data, b.data, y));
  };
}

const sigmoid = (a: number) => 1 / (1 + Math.exp(-a));

/**
 * The scalar ops. Conventions at kinks as the tensor ops (PyTorch's): relu'(0) = 0, abs'(0) = 0,
 * min and max split a tie in halves; comparisons are 0 or 1 with no gradient; `where` passes the
 * gradient to the branch it takes only.
 *
 * @example
 * ```ts
 * import { V } from "./value.ts";
 * const x = V.W(3, "x"), y = V.W(4, "y");
 * const r = V.sqrt(V.add(V.mul(x, x), V.mul(y, y))); // 5
 * r.backward(); // x.grad 0.6, y.grad 0.8
 * ```
 */
export const V = {
  /** A parameter (solved for). */
  W: (value: number, label?: string): Value => leaf("param", value, label),
  /** A constant (data). */
  C: (value: number, label?: string): Value => leaf("const", value, label),
  add: binary("add", (a, b) => a + b, () => [1, 1]),
  sub: binary("sub", (a, b) => a - b, () => [1, -1]),
  mul: binary("mul", (a, b) => a * b, (a, b) => [b, a]),
  div: binary("div", (a, b) => a / b, (a, b) => [1 / b, -a / (b * b)]),
  pow: binary("pow", (a, b) => a ** b, (a, b, y) => [
    b === 0 ? 0 : b * a ** (b - 1),
    a === 0 && b >= 0 ? 0 : y * Math.log(a),
  ]),
  atan2: binary("atan2", (a, b) => Math.atan2(a, b), (a, b) => {
    const r = a * a + b * b;
    return r === 0 ? [0, 0] : [b / r, -a / r];
  }),
  min: binary("min", Math.min, (a, b) => (a === b ? [0.5, 0.5] : a < b ? [1, 0] : [0, 1])),
  max: binary("max", Math.max, (a, b) => (a === b ? [0.5, 0.5] : a > b ? [1, 0] : [0, 1])),
  less: binary("less", (a, b) => (a < b ? 1 : 0), () => [0, 0]),
  greater: binary("greater", (a, b) => (a > b ? 1 : 0), () => [0, 0]),
  neg: unary("neg", (a) => -a, () => -1),
  abs: unary("abs", Math.abs, (a) => Math.sign(a)),
  sqrt: unary("sqrt", Math.sqrt, (_a, y) => 1 / (2 * y)),
  exp: unary("exp", Math.exp, (_a, y) => y),
  log: unary("log", Math.log, (a) => 1 / a),
  sin: unary("sin", Math.sin, Math.cos),
  cos: unary("cos", Math.cos, (a) => -Math.sin(a)),
  tan: unary("tan", Math.tan, (_a, y) => 1 + y * y),
  tanh: unary("tanh", Math.tanh, (_a, y) => 1 - y * y),
  sigmoid: unary("sigmoid", sigmoid, (_a, y) => y * (1 - y)),
  relu: unary("relu", (a) => Math.max(a, 0), (a) => (a > 0 ? 1 : 0)),
  square: unary("square", (a) => a * a, (a) => 2 * a),
  /** `x` limited to [lo, hi]: gradient 1 inside and at the bounds, 0 outside. */
  clamp: (x: Scalar, lo: number, hi: number): Value => {
    const a = lift("V.clamp", x, "x");
    return new Value(
      "clamp",
      [a],
      Math.min(Math.max(a.data, lo), hi),
      () => [a.data >= lo && a.data <= hi ? 1 : 0],
    );
  },
  /** `condition != 0 ? a : b`; the gradient goes to the branch taken. */
  where: (condition: Scalar, a: Scalar, b: Scalar): Value => {
    const c = lift("V.where", condition, "condition");
    const x = lift("V.where", a, "a"), y = lift("V.where", b, "b");
    const taken = c.data !== 0;
    return new Value(
      "where",
      [c, x, y],
      taken ? x.data : y.data,
      () => [0, taken ? 1 : 0, taken ? 0 : 1],
    );
  },
  /** The sum of any number of terms (0 for none). */
  sum: (terms: readonly Scalar[]): Value => {
    const vs = terms.map((t, i) => lift("V.sum", t, `terms[${i}]`));
    return new Value("sum", vs, vs.reduce((s, v) => s + v.data, 0), () => vs.map(() => 1));
  },
  /** The mean of one or more terms. */
  mean: (terms: readonly Scalar[]): Value => {
    if (!Array.isArray(terms) || terms.length === 0) {
      throw new ValueError({
        op: "V.mean",
        argument: "terms",
        expected: "a non-empty array of Values or numbers",
        received: describe(terms),
      });
    }
    const vs = terms.map((t, i) => lift("V.mean", t, `terms[${i}]`));
    const n = vs.length;
    return new Value("mean", vs, vs.reduce((s, v) => s + v.data, 0) / n, () => vs.map(() => 1 / n));
  },
};
