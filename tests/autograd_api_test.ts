/**
 * The autograd API on both devices: conventions at kinks and ties (exact values, as PyTorch),
 * parameter trees, argnums and aux, higher order (grad of grad, Hessian-vector products by jvp of
 * grad), jit of grad, stopGradient, typed errors that leave the runtime usable, pool statistics
 * flat over many steps, and the fusion of backward passes (dispatch counts, GPU).
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import { devices, liveCounts, values } from "./_devices.ts";

const DEVICES = await devices();

function test(name: string, fn: (device: gyre.DeviceName) => Promise<void> | void): void {
  for (const device of DEVICES) Deno.test(`autograd: ${name} [${device}]`, () => fn(device));
}

/** The gradient of sum(f(x)) at `x` (values), read back. */
async function gradAt(
  device: gyre.DeviceName,
  f: (x: gyre.Tensor) => gyre.Tensor,
  x: number[],
): Promise<number[]> {
  const t = gyre.tensor(x, { device });
  const g = gyre.grad((v: gyre.Tensor) => f(v).sum())(t) as gyre.Tensor;
  const out = await values(g);
  t.dispose();
  g.dispose();
  return out;
}

function close(got: number[], want: number[], tol = 1e-5): void {
  assert.equal(got.length, want.length);
  got.forEach((g, i) => {
    const w = want[i];
    if (Number.isNaN(w)) assert.ok(Number.isNaN(g), `[${i}] ${g}, want NaN`);
    else if (!Number.isFinite(w)) assert.equal(g, w, `[${i}]`);
    else assert.ok(Math.abs(g - w) <= tol * (1 + Math.abs(w)), `[${i}] ${g}, want ${w}`);
  });
}

test("conventions at kinks: relu'(0) = 0, abs'(0) = 0, clip passes at its bounds", async (d) => {
  assert.deepEqual(await gradAt(d, gyre.relu, [-1, 0, 2]), [0, 0, 1]);
  assert.deepEqual(await gradAt(d, gyre.abs, [-1, 0, 2]), [-1, 0, 1]);
  assert.deepEqual(await gradAt(d, (x) => gyre.clip(x, -1, 1), [-2, -1, 0, 1, 2]), [0, 1, 1, 1, 0]);
  assert.deepEqual(await gradAt(d, (x) => gyre.leakyRelu(x, { alpha: 0.5 }), [-1, 0, 1]), [
    0.5,
    0.5,
    1,
  ]);
  assert.deepEqual(await gradAt(d, gyre.floor, [0.5, 1.5]), [0, 0]);
});

test("ties: maximum and minimum split in halves, max and min reductions evenly", async (d) => {
  const t = gyre.tensor([1, 2, 3], { device: d });
  const [ga, gb] = gyre.grad((a: gyre.Tensor, b: gyre.Tensor) => gyre.maximum(a, b).sum(), {
    argnums: [0, 1],
  })(t, gyre.tensor([1, 5, 0], { device: d })) as gyre.Tensor[];
  assert.deepEqual(await values(ga), [0.5, 0, 1]);
  assert.deepEqual(await values(gb), [0.5, 1, 0]);
  assert.deepEqual(await gradAt(d, (x) => x.max(), [1, 3, 3, 2]), [0, 0.5, 0.5, 0]);
  close(await gradAt(d, (x) => x.min(), [0, 3, 0, 0]), [1 / 3, 0, 1 / 3, 1 / 3]);
  for (const x of [t, ga, gb]) x.dispose();
});

test("zeros: prod and cumprod are exact with one zero and with two", async (d) => {
  assert.deepEqual(await gradAt(d, (x) => x.prod(), [2, 0, 3]), [0, 6, 0]);
  assert.deepEqual(await gradAt(d, (x) => x.prod(), [0, 2, 0]), [0, 0, 0]);
  assert.deepEqual(await gradAt(d, (x) => x.prod(), [2, 4, 3]), [12, 6, 8]);
  // scatter's product: x = 2 meets updates [0, 3] in slot 0, so y = 0.
  const base = gyre.tensor([2, 5], { device: d });
  const at = gyre.tensor([0, 0], { dtype: "int32", device: d });
  const [gx, gu] = gyre.grad(
    (b: gyre.Tensor, u: gyre.Tensor) => gyre.scatter(b, at, u, { axis: 0, reduce: "prod" }).sum(),
    { argnums: [0, 1] },
  )(base, gyre.tensor([0, 3], { device: d })) as gyre.Tensor[];
  assert.deepEqual(await values(gx), [0, 1]);
  assert.deepEqual(await values(gu), [6, 0]);
  for (const t of [base, at, gx, gu]) t.dispose();
  // d/dx_i of sum_j prod_{k <= j} x_k, by brute force.
  const brute = (x: number[]) =>
    x.map((_, i) => {
      let total = 0;
      for (let j = i; j < x.length; j++) {
        let p = 1;
        for (let k = 0; k <= j; k++) if (k !== i) p *= x[k];
        total += p;
      }
      return total;
    });
  for (const x of [[2, 0, 3, 4], [0, 2, 0, 3], [1.5, -2, 0.5, 3], [0, 0, 0, 1], [3, 2, 1, 0]]) {
    close(await gradAt(d, (v) => gyre.cumprod(v), x), brute(x));
  }
});

test("pow at zero: no NaN where PyTorch gives none, sqrt'(0) = Infinity", async (d) => {
  close(await gradAt(d, (x) => x.pow(2), [0, 3]), [0, 6]);
  assert.deepEqual(await gradAt(d, (x) => x.pow(0), [0, 3]), [0, 0]);
  const base = gyre.zeros([2], { device: d });
  const g = gyre.grad((e: gyre.Tensor) => base.pow(e).sum())(gyre.tensor([2, 0.5], { device: d }));
  assert.deepEqual(await values(g as gyre.Tensor), [0, 0]);
  assert.deepEqual(await gradAt(d, gyre.sqrt, [0, 4]), [Infinity, 0.25]);
  const nan = await gradAt(d, (x) => x.mul(x), [NaN, 1]);
  assert.ok(Number.isNaN(nan[0]) && nan[1] === 2);
  base.dispose();
});

test("parameter trees, argnums, hasAux and valueAndGrad", async (d) => {
  const params = {
    w: gyre.tensor([[1, 2], [3, 4]], { device: d }),
    layers: [gyre.tensor([1, -1], { device: d })],
  };
  const x = gyre.tensor([1, 1], { device: d });
  const loss = (p: typeof params, input: gyre.Tensor) =>
    gyre.matmul(p.w, input).mul(p.layers[0]).sum();
  const g = gyre.grad(loss)(params, x) as typeof params;
  assert.deepEqual(await values(g.w), [1, 1, -1, -1]);
  assert.deepEqual(await values(g.layers[0]), [3, 7]);
  const [gp, gx] = gyre.grad(loss, { argnums: [0, 1] })(params, x) as [typeof params, gyre.Tensor];
  assert.deepEqual(await values(gx), [-2, -2]);
  const [[value, aux], g2] = gyre.valueAndGrad(
    (p: typeof params) => [loss(p, x), { note: p.w.sum() }],
    { hasAux: true },
  )(params) as [[gyre.Tensor, { note: gyre.Tensor }], typeof params];
  assert.deepEqual(await values(value), [-4]);
  assert.deepEqual(await values(aux.note), [10]);
  assert.deepEqual(await values(g2.layers[0]), [3, 7]);
  // An argument passed twice is two variables (as JAX), each with its own gradient tensor.
  const [ga, gb] = gyre.grad((a: gyre.Tensor, b: gyre.Tensor) => a.add(b).sum(), {
    argnums: [0, 1],
  })(x, x) as gyre.Tensor[];
  assert.notEqual(ga, gb);
  ga.dispose();
  assert.deepEqual(await values(gb), [1, 1]);
  for (
    const t of [params.w, params.layers[0], x, g.w, g.layers[0], gp.w, gp.layers[0], gx, value]
  ) t.dispose();
  for (const t of [aux.note, g2.w, g2.layers[0], gb]) t.dispose();
});

test("a tensor f does not use gets a zero gradient; stopGradient blocks the flow", async (d) => {
  const [ga, gb] = gyre.grad((a: gyre.Tensor, _b: gyre.Tensor) => a.square().sum(), {
    argnums: [0, 1],
  })(gyre.tensor([3], { device: d }), gyre.tensor([[1, 2]], { device: d })) as gyre.Tensor[];
  assert.deepEqual(await values(ga), [6]);
  assert.deepEqual(gb.shape, [1, 2]);
  assert.deepEqual(await values(gb), [0, 0]);
  const g = gyre.grad((x: gyre.Tensor) => x.mul(gyre.stopGradient(x)).sum())(
    gyre.tensor([3, -2], { device: d }),
  ) as gyre.Tensor;
  assert.deepEqual(await values(g), [3, -2]);
  for (const t of [ga, gb, g]) t.dispose();
});

test("higher order: grad of grad, third derivatives, Hessian-vector products", async (d) => {
  const x = gyre.tensor([0.5, -1, 2], { device: d });
  const d1 = gyre.grad((v: gyre.Tensor) => v.sin().sum());
  const d2 = gyre.grad((v: gyre.Tensor) => (d1(v) as gyre.Tensor).sum());
  close(await values(d2(x) as gyre.Tensor), [0.5, -1, 2].map((v) => -Math.sin(v)));
  const f4 = (v: gyre.Tensor) => v.pow(4).sum();
  const g1 = gyre.grad(f4);
  const g2 = gyre.grad((v: gyre.Tensor) => (g1(v) as gyre.Tensor).sum());
  const g3 = gyre.grad((v: gyre.Tensor) => (g2(v) as gyre.Tensor).sum());
  close(await values(g3(x) as gyre.Tensor), [12, -24, 48]);
  // f(x) = sum(x^2 y) + sum(exp(x)): H = diag(2y + e^x).
  const y = gyre.tensor([1, 2, 3], { device: d });
  const v = gyre.tensor([1, -1, 0.5], { device: d });
  const f = (t: gyre.Tensor) => t.square().mul(y).sum().add(t.exp().sum());
  const [grad, hv] = gyre.jvp((t: gyre.Tensor) => gyre.grad(f)(t) as gyre.Tensor, [x], [v]);
  close(
    await values(grad as gyre.Tensor),
    [0.5, -1, 2].map((t, i) => 2 * t * (i + 1) + Math.exp(t)),
  );
  close(
    await values(hv as gyre.Tensor),
    [0.5, -1, 2].map((t, i) => (2 * (i + 1) + Math.exp(t)) * [1, -1, 0.5][i]),
  );
  // The same product as a gradient of <grad f, v>.
  const hv2 = gyre.grad((t: gyre.Tensor) => (gyre.grad(f)(t) as gyre.Tensor).mul(v).sum())(x);
  close(await values(hv2 as gyre.Tensor), await values(hv as gyre.Tensor));
  // Through a product: f(W) = sum((X W)^2), H v = 2 X^T X v.
  const X = gyre.tensor([[1, 2], [0, 1], [-1, 1]], { device: d });
  const W = gyre.tensor([[0.5, -1], [2, 1]], { device: d });
  const V = gyre.tensor([[1, 0], [0.5, -2]], { device: d });
  const [, hW] = gyre.jvp(
    (w: gyre.Tensor) =>
      gyre.grad((u: gyre.Tensor) => gyre.matmul(X, u).square().sum())(w) as gyre.Tensor,
    [W],
    [V],
  );
  const want = gyre.matmul(X, gyre.matmul(X, V), { transposeA: true }).mul(2);
  close(await values(hW as gyre.Tensor), await values(want));
  for (const t of [x, y, v, X, W, V, want]) t.dispose();
});

test("jit(grad(f)) traces once and replays with new inputs", async (d) => {
  const w = gyre.tensor([[1, -2], [0.5, 3]], { device: d });
  const loss = (x: gyre.Tensor) => gyre.relu(gyre.matmul(x, w)).square().mean();
  const step = gyre.jit((x: gyre.Tensor) => gyre.grad(loss)(x) as gyre.Tensor);
  for (const data of [[[1, 2], [3, -4]], [[-1, 0.5], [2, 2]], [[0.1, 0.2], [0.3, 0.4]]]) {
    const x = gyre.tensor(data, { device: d });
    const got = step(x) as gyre.Tensor;
    const want = gyre.grad(loss)(x) as gyre.Tensor;
    close(await values(got), await values(want));
    for (const t of [x, got, want]) t.dispose();
  }
  if (d === "gpu") assert.equal(step.traces, 1);
  step.dispose();
  w.dispose();
});

test("vjp: many pullbacks from one forward, then dispose", async (d) => {
  const x = gyre.tensor([1, 2, 3], { device: d });
  const before = liveCounts();
  const [y, pullback] = gyre.vjp((t: gyre.Tensor) => t.square().exp(), x);
  for (const scale of [1, 2]) {
    const [g] = pullback(gyre.full([3], scale, { device: d })) as gyre.Tensor[];
    close(await values(g), [1, 2, 3].map((t) => scale * 2 * t * Math.exp(t * t)), 1e-4);
    g.dispose();
  }
  pullback.dispose();
  (y as gyre.Tensor).dispose();
  assert.throws(() => pullback(gyre.ones([3], { device: d })), gyre.ValueError);
  assert.deepEqual(liveCounts(), before);
  x.dispose();
});

test("typed errors name the op and argument, and the runtime stays usable", async (d) => {
  const x = gyre.tensor([1, 2], { device: d });
  const ints = gyre.tensor([1], { dtype: "int32", device: d });
  const three = gyre.ones([3], { device: d });
  const before = liveCounts();
  assert.throws(() => gyre.grad((t: gyre.Tensor) => t.mul(2))(x), gyre.ShapeError);
  assert.throws(() => gyre.grad((t: gyre.Tensor) => t.sum())(ints), gyre.DTypeError);
  assert.throws(
    () => gyre.grad((_t: gyre.Tensor) => 3 as unknown as gyre.Tensor)(x),
    gyre.ValueError,
  );
  assert.throws(() => gyre.grad((t: gyre.Tensor) => t.sum(), { argnums: 2 })(x), gyre.ValueError);
  assert.throws(
    () => gyre.valueAndGrad((t: gyre.Tensor) => t.sum(), { hasAux: true })(x),
    gyre.ValueError,
  );
  // A case without a rule: a quantile whose q is a tensor.
  const q = gyre.tensor([0.5], { device: d });
  assert.throws(
    () => gyre.grad((t: gyre.Tensor) => gyre.quantile(t, q).sum())(x),
    (e: unknown) => e instanceof gyre.ValueError && e.received.includes("tensor q"),
  );
  q.dispose();
  assert.throws(() =>
    gyre.grad((_t: gyre.Tensor) => {
      throw new RangeError("inside f");
    })(x), RangeError);
  assert.throws(() => gyre.grad("f" as unknown as () => gyre.Tensor), gyre.ValueError);
  assert.throws(
    () => gyre.grad((t: { a: unknown }) => t.a as gyre.Tensor)({ a: 3 }),
    gyre.ValueError,
  );
  const [, pullback] = gyre.vjp((t: gyre.Tensor) => t.exp(), x);
  assert.throws(() => pullback(three), gyre.ShapeError);
  pullback.dispose();
  assert.throws(() => gyre.jvp((t: gyre.Tensor) => t, [x], [three]), gyre.ShapeError);
  assert.throws(() => gyre.stopGradient(3 as unknown as gyre.Tensor), gyre.ValueError);
  // Nothing recorded after the errors: a plain op is untouched, and nothing leaked.
  const g = gyre.grad((t: gyre.Tensor) => t.square().sum())(x) as gyre.Tensor;
  assert.deepEqual(await values(g), [2, 4]);
  g.dispose();
  assert.deepEqual(liveCounts(), before);
  for (const t of [x, ints, three]) t.dispose();
});

test("memory: 10,000 training steps under tidy leave the pool where it started", async (d) => {
  const params = {
    w1: gyre.random.normal([8, 4], { seed: 1, device: d }).mul(0.3).realize(),
    b1: gyre.zeros([8], { device: d }),
    w2: gyre.random.normal([1, 8], { seed: 2, device: d }).mul(0.3).realize(),
  };
  const x = gyre.random.normal([16, 4], { seed: 3, device: d }).realize();
  const y = x.sum({ axis: 1, keepdims: true }).sin().realize();
  const loss = (p: typeof params) =>
    gyre.linear(gyre.linear(x, p.w1, { bias: p.b1, activation: "tanh" }), p.w2).sub(y).square()
      .mean();
  const opt = gyre.optim.adam(params, { lr: 1e-2 });
  const step = () => gyre.tidy(() => opt.step(gyre.grad(loss)(params) as typeof params));
  step();
  await gyre.sync();
  const before = liveCounts();
  const lossNow = async () => {
    const value = gyre.tidy(() => loss(params));
    const [v] = await values(value);
    value.dispose();
    return v;
  };
  const first = await lossNow();
  for (let i = 1; i < 10_000; i++) {
    step();
    if (i % 1000 === 0) {
      await gyre.sync();
      assert.deepEqual(liveCounts(), before, `after ${i} steps`);
    }
  }
  const last = await lossNow();
  assert.ok(last < first / 2, `the loss fell: ${first} -> ${last}`);
  assert.deepEqual(liveCounts(), before);
  opt.dispose();
  x.dispose();
  y.dispose();
});

if (DEVICES.includes("gpu")) {
  const kernelsOf = (fn: () => gyre.Tensor) =>
    gyre.explain(fn, { print: false }).kernels.map((k) => k.kernel);

  Deno.test("autograd: a chain of elementwise ops has a one-kernel gradient [gpu]", () => {
    const x = gyre.random.normal([64, 64], { seed: 1 }).realize();
    const kernels = kernelsOf(() =>
      gyre.grad((t: gyre.Tensor) => t.sin().mul(3).exp().tanh().sum())(x) as gyre.Tensor
    );
    // The seed of ones, and one kernel for the whole backward (the forward is recomputed inside).
    assert.deepEqual(kernels.length, 2, kernels.join(", "));
    assert.ok(kernels[1].includes("cos") && kernels[1].includes("tanh"), kernels[1]);
    x.dispose();
  });

  Deno.test("autograd: relu's backward runs in the epilogue of the product [gpu]", () => {
    const x = gyre.random.normal([64, 64], { seed: 1 }).realize();
    const w1 = gyre.random.normal([64, 64], { seed: 2 }).realize();
    const w2 = gyre.random.normal([64, 64], { seed: 3 }).realize();
    const kernels = kernelsOf(() =>
      gyre.grad((t: gyre.Tensor) => gyre.matmul(gyre.relu(gyre.matmul(t, w1)), w2).sum())(
        x,
      ) as gyre.Tensor
    );
    assert.ok(kernels.some((k) => /lessEqual\+matmul.*\+where/.test(k)), kernels.join(", "));
    // No kernel of its own for the mask.
    assert.ok(
      !kernels.some((k) => /^(lessEqual|where)[+a-z×0-9]*$/.test(k) && !k.includes("matmul")),
      kernels.join(", "),
    );
    for (const t of [x, w1, w2]) t.dispose();
  });

  Deno.test("autograd: a broadcast's gradient is one reduction with the product fused in [gpu]", () => {
    const x = gyre.random.normal([64, 64], { seed: 1 }).realize();
    const kernels = kernelsOf(() =>
      gyre.grad((b: gyre.Tensor) => x.add(b).square().sum())(gyre.zeros([64])) as gyre.Tensor
    );
    assert.deepEqual(
      kernels.filter((k) => k !== "ones" && k !== "zeros").length,
      1,
      kernels.join(", "),
    );
    assert.ok(kernels.some((k) => k.endsWith("+sum")), kernels.join(", "));
    x.dispose();
  });
}
