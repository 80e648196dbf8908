/**
 * Scalar expression graphs (src/scalar/): every op's value and derivatives against central
 * differences in float64 (step 1e-6, tolerance 1e-6 of 1 + |derivative|: the truncation error is
 * ~1e-12 times the third derivative, the rounding ~1e-16 / 1e-6 = 1e-10 of the values), the
 * conventions at kinks, gradient accumulation through shared nodes, vectors (normalisation safe
 * at zero length), and typed errors.
 */
import assert from "node:assert/strict";
import { type Scalar, V, type Value } from "../src/scalar/value.ts";
import { Vec2, Vec3 } from "../src/scalar/vec.ts";
import { ValueError } from "../src/core/errors.ts";

const H = 1e-6;

/** Checks f's gradient at `at` against central differences. */
function checkGrad(name: string, f: (...xs: Value[]) => Value, at: number[]): void {
  const xs = at.map((a) => V.W(a));
  const y = f(...xs);
  y.backward();
  at.forEach((_, i) => {
    const shifted = (d: number) => f(...at.map((a, k) => V.W(k === i ? a + d : a))).data;
    const fd = (shifted(H) - shifted(-H)) / (2 * H);
    assert.ok(
      Math.abs(xs[i].grad - fd) <= 1e-6 * (1 + Math.abs(fd)),
      `${name}: d/dx${i} = ${xs[i].grad}, central difference ${fd}`,
    );
  });
}

const UNARY: [string, (x: Value) => Value, number][] = [
  ["neg", V.neg, 0.7],
  ["abs", V.abs, -0.7],
  ["sqrt", V.sqrt, 1.3],
  ["exp", V.exp, 0.4],
  ["log", V.log, 1.7],
  ["sin", V.sin, 0.9],
  ["cos", V.cos, 0.9],
  ["tan", V.tan, 0.5],
  ["tanh", V.tanh, 0.8],
  ["sigmoid", V.sigmoid, -0.4],
  ["relu", V.relu, 0.6],
  ["square", V.square, -1.2],
  ["clamp", (x) => V.clamp(x, -1, 1), 0.3],
];
const BINARY: [string, (a: Value, b: Value) => Value, number, number][] = [
  ["add", V.add, 0.3, -1.1],
  ["sub", V.sub, 0.3, -1.1],
  ["mul", V.mul, 0.3, -1.1],
  ["div", V.div, 0.3, -1.1],
  ["pow", V.pow, 1.4, 0.7],
  ["atan2", V.atan2, 0.3, -1.1],
  ["min", V.min, 0.3, -1.1],
  ["max", V.max, 0.3, -1.1],
];

for (const [name, f, at] of UNARY) {
  Deno.test(`scalar: ${name} against central differences`, () => checkGrad(name, f, [at]));
}
for (const [name, f, a, b] of BINARY) {
  Deno.test(`scalar: ${name} against central differences`, () => checkGrad(name, f, [a, b]));
}

Deno.test("scalar: a composition, sums and means, where", () => {
  checkGrad("composition", (x, y) => V.mul(V.exp(V.sin(x)), V.add(V.square(y), V.tanh(x))), [
    0.4,
    -0.8,
  ]);
  checkGrad("sum", (x, y) => V.sum([x, V.mul(x, y), 3, V.square(y)]), [0.4, -0.8]);
  checkGrad("mean", (x, y) => V.mean([x, V.mul(x, y), V.square(y)]), [0.4, -0.8]);
  checkGrad("where", (x, y) => V.where(V.less(x, y), V.mul(x, 2), V.square(y)), [0.4, -0.8]);
  checkGrad("where other", (x, y) => V.where(V.less(x, y), V.mul(x, 2), V.square(y)), [-0.4, 0.8]);
});

Deno.test("scalar: kinks as the tensor ops, shared nodes accumulate, backward resets", () => {
  const g = (f: (x: Value) => Value, at: number) => {
    const x = V.W(at);
    f(x).backward();
    return x.grad;
  };
  assert.equal(g(V.relu, 0), 0);
  assert.equal(g(V.abs, 0), 0);
  assert.equal(g((x) => V.max(x, 0), 0), 0.5);
  assert.equal(g((x) => V.clamp(x, -1, 1), 1), 1);
  assert.equal(g((x) => V.clamp(x, -1, 1), 2), 0);
  assert.equal(g((x) => V.pow(x, 0), 0), 0);
  // x * x + x: the node x is reached twice and three times over.
  const x = V.W(3);
  const y = V.add(V.mul(x, x), x);
  y.backward();
  assert.equal(x.grad, 7);
  y.backward();
  assert.equal(x.grad, 7, "a second backward starts from zero");
  // A deep chain does not overflow the stack.
  let z: Value = V.W(1);
  const start = z;
  for (let i = 0; i < 100_000; i++) z = V.add(z, 1e-6);
  z.backward();
  assert.equal(start.grad, 1);
});

Deno.test("scalar: vectors, and normalize at zero length", () => {
  const c = Vec3.of(1, 0, 0).cross(Vec3.of(0, 1, 0));
  assert.deepEqual([c.x.data, c.y.data, c.z.data], [0, 0, 1]);
  checkGrad("length", (x, y, z) => new Vec3(x, y, z).length(), [1, -2, 0.5]);
  checkGrad("normalize", (x, y, z) => new Vec3(x, y, z).normalize().dot(Vec3.of(0.3, 1, -2)), [
    1,
    -2,
    0.5,
  ]);
  checkGrad("cross", (x, y, z) => new Vec3(x, y, z).cross(Vec3.of(2, -1, 0.5)).length(), [
    1,
    -2,
    0.5,
  ]);
  checkGrad("2-D", (x, y) => V.add(new Vec2(x, y).cross(Vec2.of(1, 2)), new Vec2(x, y).length()), [
    0.6,
    -0.3,
  ]);
  const zero = [V.W(0), V.W(0), V.W(0)];
  const n = new Vec3(zero[0], zero[1], zero[2]).normalize();
  assert.deepEqual([n.x.data, n.y.data, n.z.data], [0, 0, 0]);
  V.sum([n.x, n.y, n.z]).backward();
  assert.deepEqual(zero.map((v) => v.grad), [0, 0, 0], "no NaN at zero length");
});

Deno.test("scalar: bad input is a typed error", () => {
  assert.throws(() => V.W("3" as unknown as number), ValueError);
  assert.throws(() => V.add(V.W(1), "2" as unknown as Scalar), ValueError);
  assert.throws(() => V.mean([]), ValueError);
  assert.throws(() => V.sum([{} as unknown as Scalar]), ValueError);
});

Deno.test("scalar: values against Math, signs where an extra operand would show", () => {
  // Math.min and Math.max take any number of arguments: a table entry passing a third (0) made
  // min(0.3, 1.1) 0 and max(-0.3, -1.1) 0.
  assert.equal(V.min(0.3, 1.1).data, 0.3);
  assert.equal(V.max(-0.3, -1.1).data, -0.3);
  assert.equal(V.clamp(5, 1, 2).data, 2);
  assert.equal(V.atan2(1, -1).data, Math.atan2(1, -1));
  // C's pow (the tensor op's, PyTorch's): 1 ** NaN and (-1) ** Infinity are 1.
  assert.equal(V.pow(1, NaN).data, 1);
  assert.equal(V.pow(-1, Infinity).data, 1);
  assert.ok(Number.isNaN(V.pow(-8, 1 / 3).data));
  for (
    const [name, f, g] of [
      ["sin", V.sin, Math.sin],
      ["exp", V.exp, Math.exp],
      ["tanh", V.tanh, Math.tanh],
      ["sqrt", V.sqrt, Math.sqrt],
    ] as const
  ) {
    for (const x of [0.25, 2.5]) assert.equal(f(x).data, g(x), `${name}(${x})`);
  }
  // atan2's derivative at infinity is its limit, 0 (not the NaN of Inf / Inf).
  const [a, b] = [V.W(Infinity), V.W(2)];
  V.atan2(a, b).backward();
  assert.deepEqual([a.grad, b.grad], [0, 0]);
});
