/**
 * The reductions beyond sum, with hand-computed values on every device: max/min over long
 * aligned rows (NaN and infinities), argmax/argmin (ties, NaN, axes), all/any, logsumexp
 * (stability, infinite rows), variance/std (ddof).
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import * as tuning from "../src/tuning.ts";
import { H200 } from "./_caps.ts";
import { bufferWords, devices, expectClose, expectTensor } from "./_devices.ts";
import { gpuBackendOf } from "../src/runtime.ts";

const DEVICES = await devices();

function test(name: string, fn: (device: gyre.DeviceName) => Promise<void> | void): void {
  for (const device of DEVICES) Deno.test(`${name} [${device}]`, () => fn(device));
}

test("max/min: a NaN anywhere in a long aligned row wins; infinities stay", async (device) => {
  // Rows of 64 Ki aligned elements take the GPU's vec4 loop (blocks of 16, then single vectors),
  // which tracks NaN apart from the hardware max; positions hit the block, the vector tail and
  // every lane.
  const n = 1 << 16;
  for (const position of [0, 1, 2, 3, 4097, n - 5, n - 1]) {
    const values = new Float32Array(n).map((_, i) => (i % 13) - 6);
    values[position] = NaN;
    values[(position + 7) % n] = Infinity;
    values[(position + 11) % n] = -Infinity;
    const x = gyre.tensor(values, { device });
    await expectTensor(x.max(), [], "float32", [NaN]);
    await expectTensor(x.min(), [], "float32", [NaN]);
    values[position] = 0;
    const finite = gyre.tensor(values, { device });
    await expectTensor(finite.max(), [], "float32", [Infinity]);
    await expectTensor(finite.min(), [], "float32", [-Infinity]);
    x.dispose();
    finite.dispose();
    // One sign of infinity, a lone NaN, and sums that overflow: the probe must still catch the
    // NaN, and infinities alone are ordered by the hardware max.
    const cases: [number[], number, number][] = [
      [[Infinity], Infinity, -6],
      [[-Infinity], 6, -Infinity],
      [[Infinity, Infinity], Infinity, -6],
      [[NaN], NaN, NaN],
    ];
    for (const [inserted, max, min] of cases) {
      const v = new Float32Array(n).map((_, i) => (i % 13) - 6);
      inserted.forEach((value, k) => v[(position + 7 * k) % n] = value);
      const t = gyre.tensor(v, { device });
      await expectTensor(t.max(), [], "float32", [max]);
      await expectTensor(t.min(), [], "float32", [min]);
      t.dispose();
    }
    // Sums overflowing to +Inf over the first half and to -Inf over the second: a NaN probe.
    const huge = new Float32Array(n).map((_, i) =>
      (i < n / 2 ? 3e38 : -3e38) * (1 - (i % 7) / 1e3)
    );
    const overflowing = gyre.tensor(huge, { device });
    await expectTensor(overflowing.max(), [], "float32", [Math.fround(3e38)]);
    await expectTensor(overflowing.min(), [], "float32", [Math.fround(-3e38)]);
    huge[position] = NaN;
    const overflowingNaN = gyre.tensor(huge, { device });
    await expectTensor(overflowingNaN.max(), [], "float32", [NaN]);
    overflowing.dispose();
    overflowingNaN.dispose();
  }
});

test("argmax/argmin: first occurrence on ties, per axis and flattened", async (device) => {
  const x = gyre.tensor([[1, 5, 5], [7, 0, 7]], { device });
  await expectTensor(gyre.argmax(x, { axis: 1 }), [2], "int32", [1, 0]);
  await expectTensor(gyre.argmin(x, { axis: 1 }), [2], "int32", [0, 1]);
  await expectTensor(gyre.argmax(x, { axis: 0 }), [3], "int32", [1, 0, 1]);
  await expectTensor(gyre.argmax(x, { axis: -1, keepdims: true }), [2, 1], "int32", [1, 0]);
  await expectTensor(gyre.argmax(x), [], "int32", [3]);
  await expectTensor(x.argmin(), [], "int32", [4]);
  x.dispose();
});

test("argmax/argmin: the first NaN wins, as NumPy", async (device) => {
  const x = gyre.tensor([[1, NaN, 3, NaN], [-Infinity, -Infinity, -Infinity, -Infinity]], {
    device,
  });
  await expectTensor(gyre.argmax(x, { axis: 1 }), [2], "int32", [1, 0]);
  await expectTensor(gyre.argmin(x, { axis: 1 }), [2], "int32", [1, 0]);
  x.dispose();
});

test("argmax: integers, bools and long rows (two passes)", async (device) => {
  const i = gyre.tensor([3, -7, 9, 9], { device, dtype: "int32" });
  await expectTensor(gyre.argmax(i), [], "int32", [2]);
  await expectTensor(gyre.argmin(i), [], "int32", [1]);
  i.dispose();
  const b = gyre.tensor([false, true, true], { device });
  await expectTensor(gyre.argmax(b), [], "int32", [1]);
  b.dispose();
  // 300000 elements: more than one chunk, so the pair-passing second pass runs on the GPU.
  const n = 300000;
  const long = gyre.tidy(() => gyre.arange(n, undefined, 1, { device }).mod(1000).mul(-1));
  await expectTensor(gyre.argmax(long), [], "int32", [0]);
  await expectTensor(gyre.argmin(long), [], "int32", [999]);
  long.dispose();
});

test("argmax: errors on an empty axis and on axis lists", (device) => {
  const e = gyre.zeros([2, 0], { device });
  assert.throws(() => gyre.argmax(e, { axis: 1 }), gyre.ValueError);
  assert.throws(() => gyre.argmax(e, { axis: [0, 1] as unknown as number }), gyre.ValueError);
  e.dispose();
});

test("all/any: truth values, axes, empty", async (device) => {
  const x = gyre.tensor([[1, 0, 2], [3, 4, 5]], { device });
  await expectTensor(gyre.all(x, { axis: 1 }), [2], "bool", [0, 1]);
  await expectTensor(gyre.any(x, { axis: 0 }), [3], "bool", [1, 1, 1]);
  await expectTensor(gyre.all(x), [], "bool", [0]);
  await expectTensor(x.any({ keepdims: true }), [1, 1], "bool", [1]);
  x.dispose();
  const nan = gyre.tensor([NaN, 0], { device });
  await expectTensor(gyre.any(nan), [], "bool", [1]);
  nan.dispose();
  const empty = gyre.zeros([0, 3], { device });
  await expectTensor(gyre.all(empty, { axis: 0 }), [3], "bool", [1, 1, 1]);
  await expectTensor(gyre.any(empty, { axis: 0 }), [3], "bool", [0, 0, 0]);
  empty.dispose();
});

test("logsumexp: stable for large values, -Inf rows, +Inf and NaN", async (device) => {
  const x = gyre.tensor([[1000, 1000], [-Infinity, -Infinity], [1, Infinity], [0, NaN]], {
    device,
  });
  await expectClose(gyre.logsumexp(x, { axis: 1 }), [4], "float32", [
    1000 + Math.LN2,
    -Infinity,
    Infinity,
    NaN,
  ]);
  x.dispose();
  const y = gyre.tensor([[1, 2, 3]], { device });
  const expected = Math.log(Math.exp(1) + Math.exp(2) + Math.exp(3));
  await expectClose(gyre.logsumexp(y, { axis: -1, keepdims: true }), [1, 1], "float32", [expected]);
  await expectClose(y.logsumexp(), [], "float32", [expected]);
  y.dispose();
});

test("variance/std: population and sample, axes, no cancellation", async (device) => {
  const x = gyre.tensor([[1, 2, 3, 4], [2, 4, 4, 4]], { device });
  await expectClose(gyre.variance(x, { axis: 1 }), [2], "float32", [1.25, 0.75]);
  await expectClose(gyre.variance(x, { axis: 1, ddof: 1 }), [2], "float32", [5 / 3, 1]);
  await expectClose(gyre.std(x, { axis: 1, keepdims: true }), [2, 1], "float32", [
    Math.sqrt(1.25),
    Math.sqrt(0.75),
  ]);
  x.dispose();
  // Around 1e4 with spread 1: mean(x^2) - mean(x)^2 in float32 would lose every digit.
  const shifted = gyre.tensor([10000, 10001, 10002, 10003], { device });
  await expectClose(gyre.variance(shifted), [], "float32", [1.25], 1e-5);
  shifted.dispose();
  // No degrees of freedom left: M2 / 0, as NumPy and PyTorch: NaN for M2 = 0, else +Inf.
  const one = gyre.tensor([5], { device });
  await expectClose(gyre.variance(one, { ddof: 1 }), [], "float32", [NaN]);
  one.dispose();
  const spread = gyre.tensor([[1, 3], [5, 5], [1, NaN]], { device });
  await expectClose(gyre.variance(spread, { axis: 1, ddof: 2 }), [3], "float32", [
    Infinity,
    NaN,
    NaN,
  ]);
  await expectClose(gyre.std(spread, { axis: 1, ddof: 3 }), [3], "float32", [Infinity, NaN, NaN]);
  spread.dispose();
  const ints = gyre.tensor([1, 3], { device, dtype: "int32" });
  await expectClose(gyre.std(ints), [], "float32", [1]);
  ints.dispose();
});

test("reductions over no axes (a 0-d tensor, or axis: []) reduce each element alone, as NumPy's axis=()", async (device) => {
  // variance and std of one element are 0 (NaN for an infinity or a NaN: its deviation from the
  // mean is undefined); with ddof >= 1 no degrees of freedom are left: M2 / 0 = 0 / 0, NaN. They
  // returned the input (tensor(4).std() was 2, and +-Inf with ddof 1).
  const s = gyre.tensor(4, { device });
  await expectTensor(gyre.variance(s), [], "float32", [0]);
  await expectTensor(gyre.std(s), [], "float32", [0]);
  await expectTensor(gyre.std(s, { ddof: 1 }), [], "float32", [NaN]);
  await expectTensor(gyre.variance(s, { ddof: 0.5 }), [], "float32", [0]);
  const x = gyre.tensor([[1, -3], [Infinity, NaN]], { device });
  const axis: number[] = [];
  await expectTensor(gyre.variance(x, { axis }), [2, 2], "float32", [0, 0, NaN, NaN]);
  await expectTensor(gyre.std(x, { axis, keepdims: true }), [2, 2], "float32", [0, 0, NaN, NaN]);
  await expectTensor(gyre.std(x, { axis, ddof: 1 }), [2, 2], "float32", [NaN, NaN, NaN, NaN]);
  // Fused: the element is pending when variance reads it.
  await expectTensor(gyre.variance(x.mul(2), { axis }), [2, 2], "float32", [0, 0, NaN, NaN]);
  const h = gyre.tensor([1, 2], { device, dtype: "float16" });
  await expectTensor(gyre.variance(h, { axis }), [2], "float16", [0, 0]);
  // The others are the identity (in their result dtype); argmax of a 0-d tensor is 0, and an axis
  // list is refused by the arg reductions.
  const same = [1, -3, Infinity, NaN];
  for (const reduce of [gyre.sum, gyre.prod, gyre.max, gyre.min, gyre.mean, gyre.logsumexp]) {
    await expectTensor(reduce(x, { axis }), [2, 2], "float32", same);
  }
  await expectTensor(gyre.all(x, { axis }), [2, 2], "bool", [1, 1, 1, 1]);
  await expectTensor(gyre.any(gyre.tensor([0, NaN], { device }), { axis }), [2], "bool", [0, 1]);
  const b = gyre.tensor([true, false], { device });
  await expectTensor(gyre.sum(b, { axis }), [2], "int32", [1, 0]);
  const i = gyre.tensor([1, 2], { device, dtype: "int32" });
  await expectTensor(gyre.mean(i, { axis }), [2], "float32", [1, 2]);
  await expectTensor(gyre.std(i, { axis }), [2], "float32", [0, 0]);
  await expectTensor(gyre.argmax(s), [], "int32", [0]);
  assert.throws(
    () => gyre.argmax(x, { axis: axis as unknown as number }),
    (e: gyre.ValueError) => e.argument === "options.axis" && e.received === "[]",
  );
  for (const t of [s, x, h, b, i]) t.dispose();
});

Deno.test({
  name: "planReduce: partials in 64-bit atomic words only where the device has 64-bit atomics",
  ignore: !DEVICES.includes("gpu"),
  fn: () => {
    const caps = gyre.runtime().caps!;
    const long = { rows: 1, rowLength: 1 << 24, aligned: true };
    const wide = tuning.planReduce({ ...caps, int64Atomics: true }, long);
    assert.deepEqual([wide.combineChunks, wide.wideStates], ["last-workgroup", true]);
    assert.equal(tuning.planReduce({ ...caps, int64Atomics: false }, long).wideStates, false);
    tuning.setPlanOverride("reduce", { wideStates: true });
    try {
      assert.equal(tuning.planReduce({ ...caps, int64Atomics: false }, long).wideStates, false);
    } finally {
      tuning.setPlanOverride("reduce", null);
    }
  },
});

Deno.test("planReduce: one invocation a row for 48 rows an element of rows up to 128 on a GPU, the rule before on a software adapter", () => {
  const form = (caps: tuning.DeviceCaps, rows: number, rowLength: number) =>
    tuning.planReduce(caps, { rows, rowLength }).variant;
  const soft = { ...H200, isFallbackAdapter: true };
  const cases: [tuning.DeviceCaps, number, number, string][] = [
    [H200, 12184, 73, "thread"],
    [H200, 48 * 112, 112, "thread"],
    [H200, 48 * 112 - 1, 112, "workgroup"],
    [H200, 4233, 115, "workgroup"],
    [H200, 1 << 20, 129, "workgroup"],
    [soft, 48 * 64, 64, "workgroup"],
    [soft, 4096, 64, "thread"],
    [soft, 12184, 73, "workgroup"],
  ];
  assert.deepEqual(
    cases.map(([c, rows, length]) => form(c, rows, length)),
    cases.map((c) => c[3]),
  );
});

Deno.test({
  name: "last-workgroup reductions leave their partials and counters zeroed, in either word format",
  ignore: !DEVICES.includes("gpu"),
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const gpu = gpuBackendOf()!;
    // A stale tagged word would read as a partial published before the next dispatch wrote it.
    const values = Float32Array.from({ length: 3 * 5000 }, (_, i) => (i % 7) - 3);
    const base = gyre.tensor(values, { device: "gpu" });
    const x = base.reshape([3, 5000]);
    const rows = [0, 1, 2].map((r) => [...values.subarray(5000 * r, 5000 * (r + 1))]);
    const wants = {
      sum: rows.map((row) => row.reduce((t, v) => t + v, 0)),
      max: rows.map((row) => Math.max(...row)),
    };
    for (const wideStates of gpu.caps.int64Atomics ? [false, true] : [false]) {
      tuning.setPlanOverride("reduce", {
        variant: "workgroup",
        chunks: 9,
        combineChunks: "last-workgroup",
        wideStates,
      });
      try {
        for (const op of ["sum", "max"] as const) {
          const y = op === "sum" ? gyre.sum(x, { axis: 1 }) : gyre.max(x, { axis: 1 });
          assert.deepEqual([...await y.data() as Float32Array], wants[op], `${op} ${wideStates}`);
          y.dispose();
          const words = await bufferWords(gpu.scratch("reduce partials", 1));
          const left = words.findIndex((w) => w !== 0);
          assert.equal(left, -1, `${op}, wide ${wideStates}: word ${left} left at ${words[left]}`);
        }
      } finally {
        tuning.setPlanOverride("reduce", null);
      }
    }
    x.dispose();
    base.dispose();
  },
});

Deno.test("variance: a negative ddof is a typed error", () => {
  const x = gyre.tensor([1, 2]);
  assert.throws(
    () => gyre.variance(x, { ddof: -1 }),
    (e: gyre.ValueError) => e.argument === "options.ddof",
  );
  x.dispose();
});

test("mean, variance and std of float16 count and divide in float32, rounded once", async (device) => {
  // 140000 elements: the count is Inf as a float16 divisor, and M2 (about 73000) overflows
  // float16; PyTorch's float16 mean and var are finite here (0 and NaN before the fix).
  const n = 140000;
  const data = Float32Array.from({ length: n }, (_, i) => ((i * 7919) % 1000) / 400 - 1.25);
  const x = gyre.tensor(data, { dtype: "float16", device });
  const results = [gyre.mean(x), gyre.variance(x), gyre.std(x)];
  const [mean, variance, std] = await gyre.readAll(results);
  // The inputs are k/400 - 1.25 for k = 0..999 (rounded to float16), each about 140 times:
  // mean -0.00125 and variance 0.5208, to float16's three digits.
  assert.ok(Math.abs(mean[0] - -0.00125) < 2e-5, `mean ${mean[0]}`);
  assert.ok(Math.abs(variance[0] - 0.5208) < 1e-3, `variance ${variance[0]}`);
  assert.ok(Math.abs(std[0] - Math.sqrt(0.5208)) < 1e-3, `std ${std[0]}`);
  for (const r of results) assert.equal(r.dtype, "float16");
  for (const t of [x, ...results]) t.dispose();
  // Float16 in, float16 out, the empty mean included.
  const empty = gyre.zeros([3, 0], { dtype: "float16", device });
  const emptyMean = gyre.mean(empty, { axis: 1 });
  assert.equal(emptyMean.dtype, "float16");
  assert.ok((await emptyMean.data()).every(Number.isNaN));
  empty.dispose();
  emptyMean.dispose();
});
