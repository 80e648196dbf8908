/**
 * The runtime: one mapAsync per read-back of many GPU tensors, mixed-device readAll, device
 * selection and caps, device loss with the "auto" fallback, and the counter-based RNG.
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import { devices, values } from "./_devices.ts";
import { gpuBackendOf } from "../src/runtime.ts";
import { acquireDevice } from "../src/gpu/device.ts";

const DEVICES = await devices();
const HAS_GPU = DEVICES.includes("gpu");

/** Runs `fn` while counting `GPUBuffer.prototype.mapAsync` calls; restores it afterwards. */
async function countMapAsync(fn: () => Promise<void>): Promise<number> {
  const proto = GPUBuffer.prototype;
  const original = proto.mapAsync;
  let calls = 0;
  proto.mapAsync = function (this: GPUBuffer, ...args: Parameters<GPUBuffer["mapAsync"]>) {
    calls++;
    return original.apply(this, args);
  };
  try {
    await fn();
  } finally {
    proto.mapAsync = original;
  }
  assert.equal(GPUBuffer.prototype.mapAsync, original, "mapAsync restored");
  return calls;
}

Deno.test({
  name: "read-back of ten GPU tensors makes exactly one mapAsync call",
  ignore: !HAS_GPU,
  fn: async () => {
    const device = "gpu";
    const base = gyre.arange(12, undefined, 1, { device }).reshape([3, 4]);
    const tensors = [
      base,
      base.add(1),
      base.transpose(), // strided: copied on the device before the read
      base.slice(1, [1, 3]), // offset view
      base.cast("float16"), // 2-byte elements
      base.greater(5), // bool
      base.sum({ axis: 0 }),
      gyre.full([], 2.5, { device }),
      gyre.tensor(new Uint32Array([4e9]), { device }),
      gyre.ones([1000], { device }).mul(3),
    ];
    assert.equal(tensors.length, 10);
    assert.ok(tensors.every((t) => t.device === "gpu"));
    const gpu = gpuBackendOf()!;
    let arrays: gyre.TypedArray[] = [];
    const submits = gpu.batch.totalSubmits;
    const calls = await countMapAsync(async () => {
      arrays = await gyre.readAll(tensors);
    });
    assert.equal(calls, 1);
    assert.equal(gpu.batch.totalSubmits, submits + 1, "one submit for the pending work and copies");
    assert.deepEqual(Array.from(arrays[0]), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    assert.deepEqual(Array.from(arrays[1]), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    assert.deepEqual(Array.from(arrays[2]), [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]);
    assert.deepEqual(Array.from(arrays[3]), [5, 6]);
    assert.ok(arrays[4] instanceof Float32Array);
    assert.deepEqual(Array.from(arrays[4]), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    assert.ok(arrays[5] instanceof Uint8Array);
    assert.deepEqual(Array.from(arrays[5]), [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1]);
    assert.deepEqual(Array.from(arrays[6]), [12, 15, 18, 21]);
    assert.deepEqual(Array.from(arrays[7]), [2.5]);
    assert.deepEqual(Array.from(arrays[8]), [4e9]);
    assert.equal(arrays[9].length, 1000);
    assert.ok(arrays[9].every((v) => v === 3));
    // One tensor at a time is one mapAsync each; empty tensors need none.
    const single = await countMapAsync(async () => {
      for (const t of tensors.slice(0, 3)) await t.data();
    });
    assert.equal(single, 3);
    const empty = gyre.zeros([0, 4], { device });
    const none = await countMapAsync(async () => {
      assert.deepEqual(await gyre.readAll([empty, empty]), [
        new Float32Array(0),
        new Float32Array(0),
      ]);
    });
    assert.equal(none, 0);
    for (const t of [...tensors, empty]) t.dispose();
  },
});

Deno.test({
  name: "readAll mixes wasm and gpu tensors, in argument order",
  ignore: !HAS_GPU,
  fn: async () => {
    const w = gyre.tensor([[1, 2], [3, 4]], { device: "wasm" });
    const g = gyre.tensor([[5, 6], [7, 8]], { device: "gpu" });
    const wt = w.transpose();
    const gt = g.transpose();
    const wb = w.less(3);
    const gi = g.cast("int32");
    const calls = await countMapAsync(async () => {
      const out = await gyre.readAll([w, g, wt, gt, wb, gi]);
      assert.deepEqual(out, [
        new Float32Array([1, 2, 3, 4]),
        new Float32Array([5, 6, 7, 8]),
        new Float32Array([1, 3, 2, 4]),
        new Float32Array([5, 7, 6, 8]),
        new Uint8Array([1, 1, 0, 0]),
        new Int32Array([5, 6, 7, 8]),
      ]);
    });
    assert.equal(calls, 1, "the wasm tensors need no mapAsync; the gpu ones share one");
    for (const t of [w, g, wt, gt, wb, gi]) t.dispose();
  },
});

Deno.test({
  name: 'init({ device: "auto" }) picks the GPU and records its caps',
  ignore: !HAS_GPU,
  fn: async () => {
    const rt = await gyre.init({ device: "auto" });
    assert.equal(gyre.runtime(), rt);
    assert.equal(rt.preference, "auto");
    assert.equal(rt.device, "gpu");
    assert.ok(rt.gpu);
    const caps = rt.caps!;
    assert.equal(caps, rt.gpu.caps);
    assert.equal(typeof caps.description, "string");
    assert.ok(caps.description.length > 0 && caps.description !== "unknown adapter");
    assert.equal(typeof caps.vendor, "string");
    assert.equal(typeof caps.isFallbackAdapter, "boolean");
    assert.ok(Array.isArray(caps.features));
    // The flags agree with the feature list.
    assert.equal(caps.timestampQuery, caps.features.includes("timestamp-query"));
    assert.equal(caps.subgroups, caps.features.includes("subgroups"));
    assert.equal(caps.shaderF16, caps.features.includes("shader-f16"));
    assert.equal(caps.float32Atomics, caps.features.includes("wgpu-shader-float32-atomic"));
    assert.equal(
      caps.int64Atomics,
      caps.features.includes("wgpu-shader-int64") &&
        caps.features.includes("wgpu-shader-int64-atomic-all-ops"),
    );
    // Features the device really has.
    for (const f of caps.features) {
      if (!f.startsWith("wgpu-")) assert.ok(rt.gpu.device.features.has(f as GPUFeatureName), f);
    }
    if (caps.subgroups) {
      assert.ok(caps.subgroupMinSize >= 1 && caps.subgroupMinSize <= caps.subgroupMaxSize);
    }
    // This project's CI adapter (lavapipe) offers these; a GPU without them is still valid.
    if (/llvmpipe|lavapipe/i.test(caps.description)) {
      assert.ok(caps.features.includes("timestamp-query"));
      assert.ok(caps.subgroups);
    }
    for (const [name, value] of Object.entries(caps.limits)) {
      assert.ok(Number.isInteger(value) && value > 0, `${name} = ${value}`);
      assert.equal(value, rt.gpu.device.limits[name as keyof GPUSupportedLimits], name);
    }
    assert.ok(caps.limits.maxStorageBufferBindingSize >= 128 * 1024 * 1024);
    const t = gyre.ones([2]);
    assert.equal(t.device, "gpu", "new tensors default to the GPU");
    t.dispose();
    assert.deepEqual(Object.keys(rt.stats()).sort(), ["gpu", "wasm"]);
    assert.ok(rt.stats().gpu);
    await gyre.sync(); // flushes and waits; nothing pending, no error
  },
});

Deno.test('init({ device: "wasm" }) has no GPU; "gpu" yields one', async () => {
  const rt = await gyre.init({ device: "wasm" });
  assert.equal(rt.device, "wasm");
  assert.equal(rt.gpu, null);
  assert.equal(rt.caps, null);
  assert.equal(rt.stats().gpu, null);
  const t = gyre.ones([2]);
  assert.equal(t.device, "wasm");
  t.dispose();
  if (HAS_GPU) {
    const g = await gyre.init({ device: "gpu" });
    assert.equal(g.device, "gpu");
  }
  await gyre.init({ device: "auto" });
});

Deno.test({
  name: "device loss: GPU ops throw GpuError device-lost; auto falls back to wasm",
  ignore: !HAS_GPU,
  fn: async () => {
    const rt = await gyre.init({ device: "auto" });
    const gpu = rt.gpu!;
    const onGpu = gyre.tensor([1, 2, 3]);
    assert.equal(onGpu.device, "gpu");
    assert.deepEqual(await values(onGpu), [1, 2, 3]);
    gpu.device.destroy();
    const info = await gpu.device.lost;
    assert.equal(info.reason, "destroyed");
    assert.notEqual(gpu.lostReason, null);
    assert.equal(rt.device, "wasm", "the auto runtime fell back");

    const lost = (op: string, argument: string) => (e: unknown) => {
      assert.ok(e instanceof gyre.GpuError, `${e}`);
      assert.equal(e.kind, "device-lost");
      assert.equal(e.op, op);
      assert.equal(e.argument, argument);
      assert.match(e.received, /lost/);
      return true;
    };
    assert.throws(() => onGpu.add(1), lost("add", "device"));
    assert.throws(() => onGpu.sum(), lost("sum", "device"));
    assert.throws(() => gyre.concat([onGpu, onGpu]), lost("concat", "device"));
    await assert.rejects(onGpu.data(), lost("read", "device"));
    await assert.rejects(onGpu.to("wasm"), lost("read", "device"));
    assert.throws(() => gyre.tensor([1], { device: "gpu" }), lost("tensor", "options.device"));
    // Views need no device work, and disposing a lost tensor is fine.
    const view = onGpu.reshape([3, 1]);
    view.dispose();
    onGpu.dispose();

    // New tensors default to wasm and compute.
    const w = gyre.tidy(() => gyre.tensor([1, 2, 3]).mul(2).sum());
    assert.equal(w.device, "wasm");
    assert.deepEqual(await values(w), [12]);
    w.dispose();

    // A fresh runtime gets a fresh device.
    const fresh = await gyre.init({ device: "auto" });
    assert.notEqual(fresh.gpu, gpu);
    assert.equal(fresh.device, "gpu");
    assert.equal(fresh.gpu!.lostReason, null);
    const g = gyre.tidy(() => gyre.tensor([1, 2, 3]).mul(2).sum());
    assert.equal(g.device, "gpu");
    assert.deepEqual(await values(g), [12]);
    g.dispose();
  },
});

// ---------------------------------------------------------------------------------------------
// Random numbers

Deno.test("random.uniform: the same seed gives identical numbers on every device", async () => {
  const draws = await Promise.all(DEVICES.map(async (device) => {
    const a = gyre.random.uniform([4096], { seed: 1234, device });
    const b = gyre.random.uniform([4096], { seed: 1234, device });
    const prefix = gyre.random.uniform([2, 5], { seed: 1234, device });
    const [da, db, dp] = await gyre.readAll([a, b, prefix]);
    a.dispose();
    b.dispose();
    prefix.dispose();
    assert.deepEqual(da, db, `${device}: same seed, same numbers`);
    // Counter-based: element i depends only on (i, seed), not on the shape.
    assert.deepEqual(Array.from(dp), Array.from(da.slice(0, 10)));
    return da;
  }));
  for (const d of draws.slice(1)) assert.deepEqual(d, draws[0], "devices agree bit for bit");
  const u = Array.from(draws[0]);
  assert.ok(u.every((v) => v >= 0 && v < 1));
  // 4096 draws of U(0,1): the mean's standard error is sqrt(1/12/4096) = 0.0045; 0.03 is ~6.6 SE.
  const mean = u.reduce((s, v) => s + v, 0) / u.length;
  assert.ok(Math.abs(mean - 0.5) < 0.03, `mean ${mean}`);
  assert.ok(new Set(u).size > 4000, "values are not repeated");
});

Deno.test("random.uniform: different seeds differ; low/high scale", async () => {
  for (const device of DEVICES) {
    const a = gyre.random.uniform([256], { seed: 1, device });
    const b = gyre.random.uniform([256], { seed: 2, device });
    const c = gyre.random.uniform([256], { seed: 1, device, low: -3, high: 5 });
    const [da, db, dc] = await gyre.readAll([a, b, c]);
    const same = Array.from(da).filter((v, i) => v === db[i]).length;
    assert.ok(same < 5, `${device}: ${same} equal draws across seeds`);
    assert.ok(Array.from(dc).every((v) => v >= -3 && v < 5));
    // low + u * (high - low), elementwise from the same u.
    Array.from(dc).forEach((v, i) => assert.ok(Math.abs(v - (-3 + 8 * da[i])) < 1e-5));
    for (const t of [a, b, c]) t.dispose();
  }
  assert.throws(() => gyre.random.uniform([2], { seed: 0.5 }), gyre.ValueError);
});

Deno.test("random.normal: mean ~ 0 and std ~ 1 over 1e5 samples on each device", async () => {
  const n = 100_000;
  const results: Float32Array[] = [];
  for (const device of DEVICES) {
    const z = gyre.random.normal([n], { seed: 99, device });
    const d = (await z.data()) as Float32Array;
    z.dispose();
    results.push(d);
    let sum = 0;
    let sq = 0;
    for (const v of d) {
      assert.ok(Number.isFinite(v));
      sum += v;
      sq += v * v;
    }
    const mean = sum / n;
    const std = Math.sqrt(sq / n - mean * mean);
    // Standard errors for n = 1e5 standard normals: mean 1/sqrt(n) = 0.0032, std 1/sqrt(2n) =
    // 0.0022. Bounds of 0.02 are more than 6 SE, so a correct generator fails with
    // probability < 1e-9, while a wrong scale (e.g. a missing sqrt(-2 log u)) misses by far.
    assert.ok(Math.abs(mean) < 0.02, `${device}: mean ${mean}`);
    assert.ok(Math.abs(std - 1) < 0.02, `${device}: std ${std}`);
    // About 68.3% within one std (binomial SE 0.0015 at n = 1e5).
    const within = d.filter((v) => Math.abs(v) < 1).length / n;
    assert.ok(Math.abs(within - 0.6827) < 0.01, `${device}: ${within} within 1 std`);
  }
  // The devices compute the same transform of the same bits; transcendental rounding may differ.
  if (results.length === 2) {
    let worst = 0;
    for (let i = 0; i < n; i++) worst = Math.max(worst, Math.abs(results[0][i] - results[1][i]));
    assert.ok(worst < 1e-3, `devices differ by up to ${worst}`);
  }
  const shifted = gyre.random.normal([1000], { seed: 99, mean: 10, std: 0.5, device: "wasm" });
  const base = gyre.random.normal([1000], { seed: 99, device: "wasm" });
  const [ds, db] = await gyre.readAll([shifted, base]);
  Array.from(ds).forEach((v, i) => assert.ok(Math.abs(v - (10 + 0.5 * db[i])) < 1e-4));
  shifted.dispose();
  base.dispose();
});

Deno.test({
  name: "a batch is submitted every `submitEvery` dispatches, before any read-back",
  ignore: !HAS_GPU,
  fn: async () => {
    const gpu = gpuBackendOf()!;
    await gyre.sync();
    const saved = gpu.batch.submitEvery;
    gpu.batch.submitEvery = 8;
    try {
      const submits = gpu.batch.totalSubmits;
      let x = gyre.ones([64], { device: "gpu" });
      for (let i = 0; i < 20; i++) {
        const next = x.add(1).realize(); // one dispatch each
        x.dispose();
        x = next;
      }
      // 20 dispatches (and the ones tensor) at 8 per batch: two submits before the read-back.
      assert.equal(gpu.batch.totalSubmits - submits, 2);
      assert.ok((await x.data()).every((v) => v === 21));
      x.dispose();
    } finally {
      gpu.batch.submitEvery = saved;
    }
  },
});

Deno.test({
  name: "profiler: a timed group that runs no dispatch is an error, not a garbage time",
  ignore: !HAS_GPU || !gyre.runtime().caps?.timestampQuery,
  fn: async () => {
    const { GpuProfiler } = await import("../src/gpu/profiler.ts");
    const profiler = new GpuProfiler(gyre.runtime().gpu!);
    const x = gyre.ones([256], { device: "gpu" }).realize();
    profiler.startGroups();
    // A lazy result that is never realized records nothing.
    assert.throws(() => profiler.group("lazy", () => x.add(1).dispose()), /ran no dispatch/);
    profiler.group("realized", () => x.add(1).realize().dispose());
    const timings = await profiler.stop();
    assert.ok(timings.some((t) => t.kernel === "realized" && t.nanoseconds >= 0));
    x.dispose();
  },
});

Deno.test("public handles: a Runtime or GpuProfiler over an object gyre did not make is a ValueError", async () => {
  const { GpuProfiler } = await import("../src/gpu/profiler.ts");
  const fake = { device: {}, caps: {}, lostReason: null } as unknown as gyre.GpuDeviceHandle;
  assert.throws(
    () => new gyre.Runtime("auto", fake),
    (e) => e instanceof gyre.ValueError && /Runtime/.test(e.message) && /gpu/.test(e.message),
  );
  assert.throws(
    () => new GpuProfiler(fake),
    (e) => e instanceof gyre.ValueError && /GpuProfiler/.test(e.message),
  );
  // The handles are narrow: the backend's machinery is not part of the public type.
  const gpu = gyre.runtime().gpu;
  if (gpu) assert.equal(gpuBackendOf(), gpu);
  assert.equal(await gyre.tensor([1, 2]).add(1).data().then((d) => d[1]), 3);
});

Deno.test("init: a tensor of the runtime init replaced is a DeviceError when used, and disposable", async () => {
  const device = gyre.runtime().device;
  const old = gyre.tensor([1, 2, 3]);
  const pending = old.add(1);
  await gyre.init({ device });
  for (
    const [label, use] of [
      ["add", () => old.add(1)],
      ["a pending result", () => pending.mul(2)],
      ["sum", () => gyre.sum(old)],
    ] as const
  ) {
    assert.throws(
      use,
      (e) => e instanceof gyre.DeviceError && /before gyre.init replaced/.test(e.message),
      label,
    );
  }
  await assert.rejects(old.data(), gyre.DeviceError);
  old.dispose();
  pending.dispose();
  // The new runtime works.
  assert.deepEqual([...(await gyre.tensor([1, 2]).add(1).data())], [2, 3]);
});

Deno.test("acquireDevice: a failed request is made again with a fresh adapter; a lasting failure surfaces after 3 tries", async () => {
  if (!(await devices()).includes("gpu")) return;
  const gpu = navigator.gpu;
  const real = gpu.requestAdapter;
  let adapters = 0;
  let failWith = "";
  let always = false;
  // The first adapter's devices fail as a lost one did on an H200 under parallel test processes.
  gpu.requestAdapter = async (options) => {
    const adapter = (await real.call(gpu, options))!;
    if ((++adapters > 1 && !always) || !failWith) return adapter;
    return new Proxy(adapter, {
      get: (target, name) =>
        name === "requestDevice"
          ? () => Promise.reject(new Error(failWith))
          : typeof Reflect.get(target, name, target) === "function"
          ? Reflect.get(target, name, target).bind(target)
          : Reflect.get(target, name, target),
    });
  };
  try {
    failWith = "OperationError: Parent device is lost";
    const acquired = await acquireDevice();
    assert.equal(adapters, 2, "a second adapter");
    assert.ok(acquired?.device);
    acquired!.device.destroy();
    adapters = 0;
    always = true;
    failWith = "OperationError: limit exceeded";
    await assert.rejects(acquireDevice(), /limit exceeded/);
    assert.equal(adapters, 3, "three tries");
  } finally {
    gpu.requestAdapter = real;
  }
});
