/**
 * jit: one trace per input signature, replays that compute what the function computes, captured
 * constants, a memory plan that returns every intermediate, and the WASM fallback.
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import { devices, liveCounts } from "./_devices.ts";
import { gpuBackendOf } from "../src/runtime.ts";

const DEVICES = await devices();
const hasGpu = DEVICES.includes("gpu");

function reference(x: Float32Array, w: Float32Array): number[] {
  // relu(x * w + 1), its sum, and a softmax-free second output: x * 2.
  const h = Array.from(x, (v, i) => Math.max(v * w[i] + 1, 0));
  return [h.reduce((a, b) => a + b, 0), ...Array.from(x, (v) => v * 2)];
}

Deno.test({
  name: "jit: traces once per signature and replays the same results",
  ignore: !hasGpu,
  fn: async () => {
    let traces = 0;
    const w = gyre.random.uniform([256], { seed: 1, low: -1, high: 1, device: "gpu" }).realize();
    const step = gyre.jit((x: gyre.Tensor) => {
      traces++;
      return [gyre.relu(x.mul(w).add(1)).sum(), x.mul(2)];
    });
    const [wv] = await gyre.readAll([w]);
    for (let call = 0; call < 4; call++) {
      const x = gyre.random.normal([256], { seed: 10 + call, device: "gpu" });
      const [s, d] = step(x) as gyre.Tensor[];
      const [xv, sv, dv] = await gyre.readAll([x, s, d]);
      const want = reference(xv as Float32Array, wv as Float32Array);
      assert.ok(Math.abs(sv[0] - want[0]) <= 1e-4 * Math.abs(want[0]), `${sv[0]} vs ${want[0]}`);
      assert.deepEqual(Array.from(dv), want.slice(1));
      for (const t of [x, s, d]) t.dispose();
    }
    assert.equal(traces, 1, "one trace for one signature");
    // Another shape is another signature.
    const y = gyre.ones([100], { device: "gpu" });
    assert.throws(() => step(y), gyre.ShapeError); // traced with w of 256: the function's own error
    y.dispose();
    w.dispose();
  },
});

Deno.test({
  name: "jit: a replay launches the traced kernels and nothing else",
  ignore: !hasGpu,
  fn: () => {
    const f = gyre.jit((a: gyre.Tensor, b: gyre.Tensor) => gyre.tanh(a.mul(b)).sum({ axis: 1 }));
    const a = gyre.ones([64, 64], { device: "gpu" }).realize();
    const b = gyre.ones([64, 64], { device: "gpu" }).realize();
    const first = gyre.explain(() => f(a, b), { print: false }).kernels;
    const second = gyre.explain(() => f(a, b), { print: false }).kernels;
    assert.deepEqual(second, first);
    assert.ok(first.length >= 1, first.map((k) => k.kernel).join(", "));
    a.dispose();
    b.dispose();
  },
});

Deno.test({
  name: "jit: replays return every intermediate to the pool",
  ignore: !hasGpu,
  fn: async () => {
    const f = gyre.jit((x: gyre.Tensor) => {
      const h = gyre.silu(x.mul(3)).realize(); // a kernel of its own: an intermediate buffer
      return gyre.exp(h.sub(1)).mean();
    });
    const x = gyre.random.uniform([4096], { seed: 3, device: "gpu" }).realize();
    (f(x) as gyre.Tensor).dispose(); // trace
    gyre.flush();
    const before = liveCounts();
    for (let i = 0; i < 20; i++) {
      const r = f(x) as gyre.Tensor;
      await r.data();
      r.dispose();
    }
    gyre.flush();
    assert.deepEqual(liveCounts(), before);
    x.dispose();
  },
});

Deno.test("jit: on WASM the function runs each call", async () => {
  let calls = 0;
  const f = gyre.jit((x: gyre.Tensor) => {
    calls++;
    return x.add(1);
  });
  for (let i = 0; i < 3; i++) {
    const x = gyre.tensor([1, 2], { device: "wasm" });
    const y = f(x) as gyre.Tensor;
    assert.deepEqual(Array.from(await y.data()), [2, 3]);
    x.dispose();
    y.dispose();
  }
  assert.equal(calls, 3);
});

Deno.test({
  name: "jit: an output never shares a buffer with a later replay's intermediates",
  ignore: !hasGpu,
  fn: async () => {
    // Each replay writes an intermediate then the output; the plan may give the output a buffer
    // an intermediate used first. Across a submit (2048 dispatches) such a buffer once went back
    // to the pool while its output was alive, and a later replay bound it as input and output.
    const f = gyre.jit((x: gyre.Tensor) => {
      const a = x.mul(2).realize(); // dies after the next kernel reads it
      const b = gyre.relu(a.add(1)).realize();
      return b.mul(x); // written third: its buffer may be a's
    });
    const x = gyre.random.uniform([4096], { seed: 5, device: "gpu" }).realize();
    (f(x) as gyre.Tensor).dispose(); // trace
    gyre.flush();
    const before = liveCounts();
    let last: gyre.Tensor | null = null;
    for (let i = 0; i < 1500; i++) {
      const y = (f(x) as gyre.Tensor).realize();
      last?.dispose();
      last = y;
    }
    await gyre.sync(); // throws a GpuError on a validation error
    const [xv, yv] = await gyre.readAll([x, last!]);
    xv.forEach((v, i) => assert.ok(Math.abs(yv[i] - Math.max(2 * v + 1, 0) * v) <= 1e-6));
    last!.dispose();
    gyre.flush();
    // A buffer released while its output lived would be released twice: the count would drop.
    assert.deepEqual(liveCounts(), before);
    x.dispose();
  },
});

Deno.test({
  name: "jit: tensors created inside the traced function are constants of the trace",
  ignore: !hasGpu,
  fn: async () => {
    // Issue 28: the constant [1, 0] went back to the pool at the end of the trace and a replay
    // wrote its result over it ([3, 6] instead of [3, 0]).
    const f = gyre.jit((x: gyre.Tensor) => gyre.mul(gyre.sum(x), gyre.tensor([1, 0])));
    for (const [input, want] of [[[0.1, 0.2], [0.3, 0]], [[1, 2], [3, 0]], [[5, 5], [10, 0]]]) {
      const x = gyre.tensor(input, { device: "gpu" });
      const y = f(x) as gyre.Tensor;
      const got = Array.from(await y.data());
      got.forEach((g, i) => assert.ok(Math.abs(g - want[i]) <= 1e-6, `${got} vs ${want}`));
      x.dispose();
      y.dispose();
    }
    assert.equal(f.traces, 1);
    f.dispose();
  },
});

Deno.test({
  name: "jit: a product with constant weights and bias replays without conflicting usages",
  ignore: !hasGpu,
  fn: async () => {
    const f = gyre.jit((x: gyre.Tensor) =>
      gyre.add(gyre.relu(gyre.matmul(x, gyre.tensor([[1, 2], [3, 4]]))), gyre.tensor([0.5, -0.5]))
    );
    for (
      const [row, want] of [[[1, 2], [7.5, 9.5]], [[1, 1], [4.5, 5.5]], [[-1, 0], [0.5, -0.5]]]
    ) {
      const x = gyre.tensor([row], { device: "gpu" });
      const y = f(x) as gyre.Tensor;
      assert.deepEqual(Array.from(await y.data()), want);
      x.dispose();
      y.dispose();
    }
    await gyre.sync();
    f.dispose();
  },
});

Deno.test({
  name: "jit: dispose releases the constants; a disposed function refuses calls",
  ignore: !hasGpu,
  fn: async () => {
    gyre.flush();
    const before = liveCounts();
    const w = gyre.tensor([1, 2, 3, 4], { device: "gpu" });
    const f = gyre.jit((x: gyre.Tensor) =>
      x.mul(w).add(gyre.tensor([1, 1, 1, 1])).mul(gyre.full([4], 3)).sum()
    );
    const x = gyre.ones([4], { device: "gpu" }).realize();
    for (let i = 0; i < 3; i++) {
      const y = f(x) as gyre.Tensor;
      assert.deepEqual(Array.from(await y.data()), [42]);
      y.dispose();
    }
    x.dispose();
    w.dispose(); // the trace still holds w's storage
    const twos = gyre.full([4], 2, { device: "gpu" });
    const y = f(twos) as gyre.Tensor;
    assert.deepEqual(Array.from(await y.data()), [72]);
    y.dispose();
    twos.dispose();
    f.dispose();
    f.dispose(); // twice is harmless
    gyre.flush();
    assert.deepEqual(liveCounts(), before, "the constants and w went back to the pool");
    assert.throws(() => f(gyre.ones([4])), gyre.DisposedError);
  },
});

Deno.test({
  name: "jit: 10,000 replays of a function with constants grow no pool",
  ignore: !hasGpu,
  fn: async () => {
    const gpu = gpuBackendOf()!;
    const f = gyre.jit((x: gyre.Tensor) => {
      const h = gyre.relu(gyre.matmul(x, gyre.tensor([[1, -1], [2, 0.5]]))).realize();
      return [gyre.softmax(h.add(gyre.tensor([0.5, -0.5]))), gyre.sum(h, { axis: 0 })];
    });
    const x = gyre.tensor([[1, 2], [3, 4], [-1, 0]], { device: "gpu" });
    for (const t of f(x) as gyre.Tensor[]) t.dispose(); // trace
    for (const t of f(x) as gyre.Tensor[]) t.dispose(); // first replay: the pool's buffers exist
    await gyre.sync();
    const before = liveCounts();
    const created = gpu.bufferPool.stats().created;
    let last: gyre.Tensor[] = [];
    for (let i = 0; i < 10_000; i++) {
      const out = f(x) as gyre.Tensor[];
      for (const t of last) t.dispose();
      last = out;
    }
    const [s, total] = await gyre.readAll(last);
    assert.deepEqual(Array.from(total), [16, 1]); // relu(x @ w): [5, 0], [11, 0], [0, 1]
    assert.ok(Math.abs(s[0] + s[1] - 1) < 1e-6);
    for (const t of last) t.dispose();
    gyre.flush();
    assert.deepEqual(liveCounts(), before);
    assert.ok(gpu.bufferPool.stats().created - created <= 8, "replays reuse the pool's buffers");
    x.dispose();
    f.dispose();
  },
});

Deno.test({
  name: "jit: tidy around and inside a jitted function, called from two places, reads interleaved",
  ignore: !hasGpu,
  fn: async () => {
    const f = gyre.jit((x: gyre.Tensor) =>
      gyre.tidy(() => x.mul(gyre.tensor([2, 3])).add(gyre.full([2], 1)).exp().log())
    );
    const a = gyre.tensor([1, 2], { device: "gpu" });
    const b = gyre.tensor([5, 7], { device: "gpu" });
    const ya = gyre.tidy(() => f(a)) as gyre.Tensor; // traced inside a caller's tidy
    const yb = f(b) as gyre.Tensor;
    const ya2 = gyre.tidy(() => (f(a) as gyre.Tensor).add(0));
    const [vb, va, va2] = await gyre.readAll([yb, ya, ya2]);
    const near = (got: ArrayLike<number>, want: number[]) =>
      want.forEach((w, i) => assert.ok(Math.abs(got[i] - w) <= 1e-5 * w, `${got[i]} vs ${w}`));
    near(va, [3, 7]);
    near(vb, [11, 22]);
    near(va2, [3, 7]);
    for (const t of [a, b, ya, yb, ya2]) t.dispose();
    f.dispose();
  },
});
