/**
 * Memory: thousands of ops inside `tidy` leave the GPU pool and the WASM allocator exactly where
 * they started; what `tidy` keeps and frees; nesting and throwing; pooled buffers get reused.
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import * as tuning from "../src/tuning.ts";
import { devices, liveCounts, values } from "./_devices.ts";
import { gpuBackendOf } from "../src/runtime.ts";

const DEVICES = await devices();

function test(name: string, fn: (device: gyre.DeviceName) => Promise<void> | void): void {
  for (const device of DEVICES) Deno.test(`${name} [${device}]`, () => fn(device));
}

test("leak: 3000+ mixed ops inside tidy leave the live counts where they started", async (device) => {
  const x = gyre.tidy(() =>
    gyre.arange(64, undefined, 1, { device, dtype: "float32" }).reshape([8, 8])
  );
  const before = liveCounts();
  const statsBefore = gyre.runtime().stats();
  let ops = 0;
  const iterations = 400;
  const result = gyre.tidy(() => {
    let acc = gyre.zeros([], { device });
    ops++;
    for (let i = 0; i < iterations; i++) {
      const e = x.mul(2).sub(1); // e[r][c] = 2(8r + c) - 1
      const rows = e.sum({ axis: 1 });
      const v = e.transpose().slice([1, 5]); // columns 1..4 of e, as rows
      const c = gyre.concat([v, v.neg()], 0);
      const m = c.max(); // max of e[:, 1:5] = e[7][4] = 119
      const b = rows.greater(0).logicalAnd(true).cast("int32").sum().reshape([1]).squeeze();
      acc = acc.add(m).add(b.sub(8)); // b counts the 8 positive row sums
      ops += 13;
    }
    return acc;
  });
  assert.ok(ops >= 3000, `${ops} ops`);
  assert.deepEqual(result.shape, []);
  assert.deepEqual(await values(result), [119 * iterations]);
  result.dispose();
  assert.deepEqual(liveCounts(), before);
  // WASM blocks freed go back to their size class: the heap itself did not grow past them.
  const statsAfter = gyre.runtime().stats();
  if (device === "wasm") {
    assert.equal(statsAfter.wasm.liveBlocks, statsBefore.wasm.liveBlocks);
    assert.ok(statsAfter.wasm.pooledBlocks > 0);
  } else {
    assert.equal(statsAfter.gpu!.liveBuffers, statsBefore.gpu!.liveBuffers);
    assert.equal(statsAfter.gpu!.liveBytes, statsBefore.gpu!.liveBytes);
  }
  x.dispose();
});

test("tidy keeps a returned tensor and disposes the rest", async (device) => {
  const before = liveCounts();
  const made: gyre.Tensor[] = [];
  const outside = gyre.ones([3], { device });
  const kept = gyre.tidy(() => {
    const a = gyre.ones([3], { device });
    const b = a.add(outside);
    const c = b.mul(3);
    made.push(a, b);
    return c;
  });
  assert.ok(made.every((t) => t.isDisposed));
  assert.ok(!kept.isDisposed);
  assert.ok(!outside.isDisposed, "tensors made outside the tidy are not its to dispose");
  assert.deepEqual(await values(kept), [6, 6, 6]);
  kept.dispose();
  outside.dispose();
  assert.deepEqual(liveCounts(), before);
});

test("tidy keeps tensors inside returned arrays, objects and maps", async (device) => {
  const before = liveCounts();
  const dropped: gyre.Tensor[] = [];
  const out = gyre.tidy(() => {
    const a = gyre.full([2], 1, { device });
    const b = gyre.full([2], 2, { device });
    const c = gyre.full([2], 3, { device });
    const d = gyre.full([2], 4, { device });
    dropped.push(gyre.full([2], 5, { device }), a.add(b));
    return { list: [a, { deep: b }], map: new Map([["c", c]]), d, label: "x", n: 1 };
  });
  assert.ok(dropped.every((t) => t.isDisposed));
  const [a, { deep: b }] = out.list as [gyre.Tensor, { deep: gyre.Tensor }];
  const c = out.map.get("c")!;
  assert.deepEqual(await gyre.readAll([a, b, c, out.d]), [
    new Float32Array([1, 1]),
    new Float32Array([2, 2]),
    new Float32Array([3, 3]),
    new Float32Array([4, 4]),
  ]);
  for (const t of [a, b, c, out.d]) t.dispose();
  assert.deepEqual(liveCounts(), before);
  // A result with no tensor keeps nothing.
  const n = gyre.tidy(() => gyre.ones([4], { device }).sum().shape.length);
  assert.equal(n, 0);
  assert.deepEqual(liveCounts(), before);
});

test("tidy keeps a view whose base it disposes", async (device) => {
  const before = liveCounts();
  const v = gyre.tidy(() => gyre.arange(4, undefined, 1, { device }).reshape([2, 2]).transpose());
  assert.deepEqual(await v.array(), [[0, 2], [1, 3]]);
  v.dispose();
  assert.deepEqual(liveCounts(), before);
});

test("nested tidy: inner results move to the outer scope", async (device) => {
  const before = liveCounts();
  let inner: gyre.Tensor | null = null;
  let innerDropped: gyre.Tensor | null = null;
  let outerDropped: gyre.Tensor | null = null;
  const result = gyre.tidy(() => {
    inner = gyre.tidy(() => {
      innerDropped = gyre.ones([2], { device });
      return innerDropped.add(1);
    });
    assert.ok(innerDropped!.isDisposed, "the inner scope freed its intermediates");
    assert.ok(!inner.isDisposed, "the inner result lives on in the outer scope");
    const twice = gyre.tidy(() => gyre.tidy(() => inner!.mul(2)));
    outerDropped = twice;
    return twice.add(inner);
  });
  assert.ok(inner!.isDisposed, "the outer scope freed the inner result it did not return");
  assert.ok(outerDropped!.isDisposed);
  assert.deepEqual(await values(result), [6, 6]);
  result.dispose();
  assert.deepEqual(liveCounts(), before);
});

test("tidy that throws disposes everything it made", async (device) => {
  const before = liveCounts();
  const made: gyre.Tensor[] = [];
  assert.throws(
    () =>
      gyre.tidy(() => {
        made.push(gyre.ones([8], { device }));
        made.push(gyre.tidy(() => made[0].exp()));
        made.push(made[1].add(gyre.zeros([3], { device }))); // ShapeError
        return made[0];
      }),
    gyre.ShapeError,
  );
  assert.equal(made.length, 2);
  assert.ok(made.every((t) => t.isDisposed));
  assert.deepEqual(liveCounts(), before);
  assert.throws(
    () =>
      gyre.tidy(() => {
        made.push(gyre.ones([8], { device }));
        throw new Error("boom");
      }),
    /boom/,
  );
  assert.ok(made[2].isDisposed);
  assert.deepEqual(liveCounts(), before);
  // An async function is refused, and what it made synchronously is freed.
  assert.throws(
    () =>
      gyre.tidy(() => {
        gyre.ones([8], { device });
        return Promise.resolve(1);
      }),
    gyre.ValueError,
  );
  assert.deepEqual(liveCounts(), before);
  // The scope stack is intact afterwards: a later tidy still works.
  const ok = gyre.tidy(() => gyre.ones([1], { device }).add(1));
  assert.deepEqual(await values(ok), [2]);
  ok.dispose();
  assert.deepEqual(liveCounts(), before);
});

Deno.test({
  name: "pool reuse: same-size work after a flush creates no new GPU buffers",
  ignore: !DEVICES.includes("gpu"),
  fn: async () => {
    const gpu = gpuBackendOf()!;
    const x = gyre.random.uniform([1000], { device: "gpu", seed: 1 });
    gyre.flush(); // x is lazy until then
    const before = gpu.bufferPool.stats();
    const created: number[] = [];
    for (let i = 0; i < 6; i++) {
      // realize() gives the intermediate a buffer of its own (fusion would otherwise need none).
      const r = gyre.tidy(() => x.mul(2).realize().add(1).exp().sum().add(x.max()));
      assert.ok((await values(r))[0] > 1000);
      r.dispose();
      gyre.flush();
      created.push(gpu.bufferPool.stats().created);
    }
    // The first round creates buffers; every later round reuses them (a flush with nothing
    // recorded still makes released buffers reusable).
    assert.ok(created[0] > before.created);
    for (let i = 1; i < created.length; i++) assert.equal(created[i], created[0], `${created}`);
    const after = gpu.bufferPool.stats();
    assert.equal(after.liveBuffers, before.liveBuffers);
    assert.equal(after.liveBytes, before.liveBytes);
    assert.ok(after.pooledBuffers > 0);
    // Released buffers wait for the batch's submit before they can be reused. (`add` is lazy:
    // flush computes y into a buffer of its own, then its release is deferred.)
    const y = x.add(1);
    gyre.flush();
    const live = gpu.bufferPool.stats();
    y.dispose();
    assert.equal(gpu.bufferPool.stats().pooledBuffers, live.pooledBuffers, "deferred until submit");
    gyre.flush();
    assert.equal(gpu.bufferPool.stats().pooledBuffers, live.pooledBuffers + 1);
    x.dispose();
  },
});

Deno.test({
  name: "computations with transposed operands (tiled) leave the pool as it was",
  ignore: !DEVICES.includes("gpu"),
  fn: async () => {
    const gpu = gpuBackendOf()!;
    const x = gyre.random.uniform([64, 96], { device: "gpu", seed: 2 });
    const y = gyre.random.uniform([96, 64], { device: "gpu", seed: 3 });
    gyre.flush();
    const before = gpu.bufferPool.stats();
    tuning.setPlanOverride("elementwise", { variant: "tiled" });
    try {
      for (let i = 0; i < 3; i++) {
        // tidy: the untidied intermediate would keep a buffer of its own (it stays readable).
        const z = gyre.tidy(() => gyre.maximum(x.transpose(), y).add(x.transpose()));
        const [got, xs, ys] = await gyre.readAll([z, x, y]);
        // z[i, j] = max(x[j, i], y[i, j]) + x[j, i]
        assert.equal(
          got[5 * 64 + 7],
          Math.fround(Math.max(xs[7 * 96 + 5], ys[5 * 64 + 7]) + xs[7 * 96 + 5]),
        );
        z.dispose();
        gyre.flush();
      }
    } finally {
      tuning.setPlanOverride("elementwise", null);
    }
    const after = gpu.bufferPool.stats();
    assert.equal(after.liveBuffers, before.liveBuffers);
    assert.equal(after.liveBytes, before.liveBytes);
    x.dispose();
    y.dispose();
  },
});

Deno.test("allocator reuse: same-size WASM work does not grow the heap", async () => {
  const x = gyre.random.uniform([1000], { device: "wasm", seed: 1 });
  const footprint: number[] = [];
  for (let i = 0; i < 6; i++) {
    const r = gyre.tidy(() => x.mul(2).add(1).exp().sum().add(x.max()));
    assert.ok((await values(r))[0] > 1000);
    r.dispose();
    const s = gyre.runtime().stats().wasm;
    footprint.push(s.liveBlocks + s.pooledBlocks);
  }
  for (let i = 1; i < footprint.length; i++) {
    assert.equal(footprint[i], footprint[0], `${footprint}`);
  }
  x.dispose();
});
