/**
 * Scalar expression graphs (issue 26's first part): `Value` nodes made by `V.W` (a parameter),
 * `V.C` (a constant) and the ops of `V`, each holding its number (float64, computed eagerly) and,
 * after `backward()`, its gradient. For small problems on the CPU, and the form residual functions
 * are written in (the compiled path, to WGSL and WASM, is still to come). Internal until then:
 * not exported from `mod.ts`.
 * @module
 */
import { describe, ValueError } from "../core/errors.ts";
import { SCALAR_OPS, type ScalarOp, type ScalarOpDef } from "../ir/scalar_table.ts";

/** A node of a scalar expression graph. */
export class Value {
  /** The op that made it: "param", "const" or an op of {@link V}. */
  readonly op: string;
  /** Its operands. */
  readonly inputs: readonly Value[];
  /**
   * Its value (float64). The solvers write their solution into the parameters' `data`; values
   * computed from them earlier are not updated.
   */
  data: number;
  /** d(root)/d(this) after the root's `backward()`; 0 before. */
  grad: number = 0;
  /** A name, for parameters and constants. */
  readonly label?: string;
  /** Internal (src/scalar/program.ts): the last traversal that reached this node, and its id there. */
  _mark: number = 0;
  /** Internal: the node's id in the traversal `_mark` names. */
  _id: number = 0;
  /** Internal (src/scalar/program.ts): a parameter's index in the compiled parameter list. */
  _param: number = -1;

  /** Internal: use `V.W`, `V.C` and the ops of `V`. */
  constructor(op: string, inputs: readonly Value[], data: number, label?: string) {
    this.op = op;
    this.inputs = inputs;
    this.data = data;
    // Always set, so that every Value has one shape (property access stays monomorphic).
    this.label = label;
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
      const local = localDerivatives(node);
      node.inputs.forEach((input, k) => {
        // A zero local derivative passes nothing, even from an infinite gradient.
        if (local[k] !== 0) input.grad += node.grad * local[k];
      });
    }
  }
}

/** d(node)/d(input k) from the op table (sum and mean: 1 and 1/n for every term). */
export function localDerivatives(node: Value): readonly number[] {
  const n = node.inputs.length;
  if (node.op === "sum") return new Array(n).fill(1);
  if (node.op === "mean") return new Array(n).fill(1 / n);
  const def: ScalarOpDef = SCALAR_OPS[node.op as ScalarOp];
  const [a, b, c] = node.inputs;
  return def.jsD(a.data, b?.data ?? 0, c?.data ?? 0, node.data);
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
  return new Value(op, [], value, label);
}

function lift(op: string, x: unknown, argument: string): Value {
  if (x instanceof Value) return x;
  if (typeof x === "number") return new Value("const", [], x);
  throw new ValueError({ op, argument, expected: "a Value or a number", received: describe(x) });
}

function unary(op: ScalarOp): (x: Scalar) => Value {
  const f = SCALAR_OPS[op].js as (a: number, b: number, c: number) => number;
  return (x: Scalar): Value => {
    const a = lift(`V.${op}`, x, "x");
    return new Value(op, [a], f(a.data, 0, 0));
  };
}

function binary(op: ScalarOp): (a: Scalar, b: Scalar) => Value {
  const f = SCALAR_OPS[op].js as (a: number, b: number, c: number) => number;
  return (x: Scalar, z: Scalar): Value => {
    const a = lift(`V.${op}`, x, "a"), b = lift(`V.${op}`, z, "b");
    return new Value(op, [a, b], f(a.data, b.data, 0));
  };
}

/** The ops of {@link V}: numbers given for operands become constants. */
export interface ScalarOps {
  /** A parameter (solved for). */
  W(value: number, label?: string): Value;
  /** A constant (data). */
  C(value: number, label?: string): Value;
  /** a + b. */
  add(a: Scalar, b: Scalar): Value;
  /** a - b. */
  sub(a: Scalar, b: Scalar): Value;
  /** a * b. */
  mul(a: Scalar, b: Scalar): Value;
  /** a / b. */
  div(a: Scalar, b: Scalar): Value;
  /** a ** b (d/db is 0 where a is 0 and b >= 0). */
  pow(a: Scalar, b: Scalar): Value;
  /** atan2(a, b), the angle of (b, a); gradient 0 at the origin. */
  atan2(a: Scalar, b: Scalar): Value;
  /** The smaller (a tie splits the gradient in halves; NaN propagates). */
  min(a: Scalar, b: Scalar): Value;
  /** The larger (a tie splits the gradient in halves; NaN propagates). */
  max(a: Scalar, b: Scalar): Value;
  /** 1 where a < b, else 0 (no gradient). */
  less(a: Scalar, b: Scalar): Value;
  /** 1 where a > b, else 0 (no gradient). */
  greater(a: Scalar, b: Scalar): Value;
  /** -x. */
  neg(x: Scalar): Value;
  /** |x| (gradient 0 at 0). */
  abs(x: Scalar): Value;
  /** The square root. */
  sqrt(x: Scalar): Value;
  /** e^x. */
  exp(x: Scalar): Value;
  /** The natural logarithm. */
  log(x: Scalar): Value;
  /** The sine. */
  sin(x: Scalar): Value;
  /** The cosine. */
  cos(x: Scalar): Value;
  /** The tangent. */
  tan(x: Scalar): Value;
  /** The hyperbolic tangent. */
  tanh(x: Scalar): Value;
  /** 1 / (1 + e^-x). */
  sigmoid(x: Scalar): Value;
  /** max(x, 0) (gradient 0 at 0). */
  relu(x: Scalar): Value;
  /** x * x. */
  square(x: Scalar): Value;
  /** `x` limited to [lo, hi]: gradient 1 inside and at the bounds, 0 outside. */
  clamp(x: Scalar, lo: Scalar, hi: Scalar): Value;
  /** `condition != 0 ? a : b`; the gradient goes to the branch taken. */
  where(condition: Scalar, a: Scalar, b: Scalar): Value;
  /** The sum of any number of terms (0 for none). */
  sum(terms: readonly Scalar[]): Value;
  /** The mean of one or more terms. */
  mean(terms: readonly Scalar[]): Value;
}

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
export const V: ScalarOps = {
  /** A parameter (solved for). */
  W: (value: number, label?: string): Value => leaf("param", value, label),
  /** A constant (data). */
  C: (value: number, label?: string): Value => leaf("const", value, label),
  add: binary("add"),
  sub: binary("sub"),
  mul: binary("mul"),
  div: binary("div"),
  pow: binary("pow"),
  atan2: binary("atan2"),
  min: binary("min"),
  max: binary("max"),
  less: binary("less"),
  greater: binary("greater"),
  neg: unary("neg"),
  abs: unary("abs"),
  sqrt: unary("sqrt"),
  exp: unary("exp"),
  log: unary("log"),
  sin: unary("sin"),
  cos: unary("cos"),
  tan: unary("tan"),
  tanh: unary("tanh"),
  sigmoid: unary("sigmoid"),
  relu: unary("relu"),
  square: unary("square"),
  /** `x` limited to [lo, hi]: gradient 1 inside and at the bounds, 0 outside. */
  clamp: (x: Scalar, lo: Scalar, hi: Scalar): Value => {
    const a = lift("V.clamp", x, "x"), l = lift("V.clamp", lo, "lo"), h = lift("V.clamp", hi, "hi");
    return new Value("clamp", [a, l, h], Math.min(Math.max(a.data, l.data), h.data));
  },
  /** `condition != 0 ? a : b`; the gradient goes to the branch taken. */
  where: (condition: Scalar, a: Scalar, b: Scalar): Value => {
    const c = lift("V.where", condition, "condition");
    const x = lift("V.where", a, "a"), y = lift("V.where", b, "b");
    return new Value("where", [c, x, y], c.data !== 0 ? x.data : y.data);
  },
  /** The sum of any number of terms (0 for none). */
  sum: (terms: readonly Scalar[]): Value => {
    if (!Array.isArray(terms)) {
      throw new ValueError({
        op: "V.sum",
        argument: "terms",
        expected: "an array of Values or numbers",
        received: describe(terms),
      });
    }
    const vs = terms.map((t, i) => lift("V.sum", t, `terms[${i}]`));
    return new Value("sum", vs, vs.reduce((s, v) => s + v.data, 0));
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
    return new Value("mean", vs, vs.reduce((s, v) => s + v.data, 0) / n);
  },
};
