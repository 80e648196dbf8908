/**
 * The sort family with hand-computed values on every device: sort and argsort (stable, NaN last
 * or first, -0 equal to +0, every axis, strided views, 0-d and empty tensors, float16, int32 and
 * uint32 extremes), rankK's top, mid and bottom (k = 0, k = n, ties to the lower index, NaN),
 * kthvalue, median and quantile with NumPy's methods and semantics, their NaN-skipping forms,
 * searchsorted, and typed errors that leave nothing allocated.
 * @module
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import { devices, expectTensor, liveCounts } from "./_devices.ts";
import { mulberry32 } from "./_random.ts";
import * as tuning from "../src/tuning.ts";
import { postedTasks } from "../src/wasm/threads.ts";
import { gpuBackendOf } from "../src/runtime.ts";
import { tensorFromStorage, viewOf } from "../src/tensor.ts";
import { QUANTILE_INDEX } from "../src/gpu/_codegen_sort.ts";

const DEVICES = await devices();

function test(name: string, fn: (device: gyre.DeviceName) => Promise<void> | void): void {
  for (const device of DEVICES) {
    Deno.test({
      name: `${name} [${device}]`,
      sanitizeOps: false,
      sanitizeResources: false,
      fn: () => fn(device),
    });
  }
}

/** Values with -0 told from +0 (assert.deepEqual treats them as equal). */
async function signed(t: gyre.Tensor): Promise<string[]> {
  const d = await t.data();
  t.dispose();
  return Array.from(d, (v) => (Object.is(v, -0) ? "-0" : String(v)));
}

test("sort and argsort: ascending and descending, stable, NaN and signed zeros", async (device) => {
  const x = gyre.tensor([3, NaN, -1, 0, 2, -0, 2, -Infinity, Infinity], { device });
  assert.deepEqual(await signed(gyre.sort(x)), [
    "-Infinity",
    "-1",
    "0",
    "-0",
    "2",
    "2",
    "3",
    "Infinity",
    "NaN",
  ]);
  await expectTensor(gyre.argsort(x), [9], "int32", [7, 2, 3, 5, 4, 6, 0, 8, 1]);
  // Descending: NaN first, equal values (0 and -0, the 2s) still in their order.
  assert.deepEqual(await signed(gyre.sort(x, { descending: true })), [
    "NaN",
    "Infinity",
    "3",
    "2",
    "2",
    "0",
    "-0",
    "-1",
    "-Infinity",
  ]);
  await expectTensor(gyre.argsort(x, { descending: true }), [9], "int32", [
    1,
    8,
    0,
    4,
    6,
    3,
    5,
    2,
    7,
  ]);
  x.dispose();
});

test("sort along every axis, of strided views, 0-d and empty tensors", async (device) => {
  const x = gyre.tensor([[[5, 1], [0, 4]], [[2, 7], [6, 3]]], { device });
  await expectTensor(gyre.sort(x, { axis: 0 }), [2, 2, 2], "float32", [2, 1, 0, 3, 5, 7, 6, 4]);
  await expectTensor(gyre.sort(x, { axis: 1 }), [2, 2, 2], "float32", [0, 1, 5, 4, 2, 3, 6, 7]);
  await expectTensor(gyre.sort(x, { axis: -1 }), [2, 2, 2], "float32", [1, 5, 0, 4, 2, 7, 3, 6]);
  await expectTensor(gyre.argsort(x, { axis: 0 }), [2, 2, 2], "int32", [1, 0, 0, 1, 0, 1, 1, 0]);
  const t = x.transpose([2, 0, 1]);
  await expectTensor(gyre.sort(t), [2, 2, 2], "float32", [0, 5, 2, 6, 1, 4, 3, 7]);
  t.dispose();
  const s = gyre.tensor([9, 8, 7, 6, 5, 4], { device }).slice([1, 6, 2]);
  await expectTensor(gyre.sort(s), [3], "float32", [4, 6, 8]);
  s.dispose();
  const zero = gyre.tensor(4, { device });
  await expectTensor(gyre.sort(zero), [], "float32", [4]);
  await expectTensor(gyre.argsort(zero), [], "int32", [0]);
  zero.dispose();
  const empty = gyre.zeros([3, 0], { device });
  await expectTensor(gyre.sort(empty), [3, 0], "float32", []);
  await expectTensor(gyre.argsort(empty, { axis: 0 }), [3, 0], "int32", []);
  empty.dispose();
  x.dispose();
});

test("sort of float16, int32 and uint32, extremes included", async (device) => {
  const h = gyre.tensor([65504, -0.5, NaN, -65504, 0.25], { dtype: "float16", device });
  await expectTensor(gyre.sort(h), [5], "float16", [-65504, -0.5, 0.25, 65504, NaN]);
  h.dispose();
  const i = gyre.tensor([2147483647, -2147483648, 0, -1, 5], { dtype: "int32", device });
  await expectTensor(gyre.sort(i, { descending: true }), [5], "int32", [
    2147483647,
    5,
    0,
    -1,
    -2147483648,
  ]);
  i.dispose();
  const u = gyre.tensor([4294967295, 0, 7, 2147483648], { dtype: "uint32", device });
  await expectTensor(gyre.sort(u), [4], "uint32", [0, 7, 2147483648, 4294967295]);
  u.dispose();
});

test("rankK: top, mid and bottom, k = 0 and k = n, ties to the lower index", async (device) => {
  const x = gyre.tensor([5, 1, 4, 1, 5, 9, NaN, 2], { device });
  let [v, i] = gyre.topk(x, 3);
  await expectTensor(v, [3], "float32", [NaN, 9, 5]);
  await expectTensor(i, [3], "int32", [6, 5, 0]);
  [v, i] = gyre.bottomk(x, 3);
  await expectTensor(v, [3], "float32", [1, 1, 2]);
  await expectTensor(i, [3], "int32", [1, 3, 7]);
  // Ascending order 1 1 2 4 5 5 9 NaN: k = 2 from floor((8 - 2) / 2) = 3.
  [v, i] = gyre.midk(x, 2);
  await expectTensor(v, [2], "float32", [4, 5]);
  await expectTensor(i, [2], "int32", [2, 0]);
  [v, i] = gyre.rankK(x, 0);
  await expectTensor(v, [0], "float32", []);
  await expectTensor(i, [0], "int32", []);
  [v, i] = gyre.rankK(x, 8, { kind: "bottom" });
  await expectTensor(i, [8], "int32", [1, 3, 7, 2, 0, 4, 5, 6]);
  v.dispose();
  const m = gyre.tensor([[3, 3, 1], [2, 8, 8]], { device });
  [v, i] = gyre.topk(m, 2);
  await expectTensor(v, [2, 2], "float32", [3, 3, 8, 8]);
  await expectTensor(i, [2, 2], "int32", [0, 1, 1, 2]);
  [v, i] = gyre.topk(m, 1, { axis: 0 });
  await expectTensor(v, [1, 3], "float32", [3, 8, 8]);
  await expectTensor(i, [1, 3], "int32", [0, 1, 1]);
  // A row of one element.
  const one = gyre.tensor([[7], [3]], { device });
  [v, i] = gyre.rankK(one, 1, { kind: "mid" });
  await expectTensor(v, [2, 1], "float32", [7, 3]);
  await expectTensor(i, [2, 1], "int32", [0, 0]);
  for (const t of [x, m, one]) t.dispose();
});

test("kthvalue, with keepdims", async (device) => {
  const x = gyre.tensor([[7, 5, 9, 5], [1, NaN, 0, 2]], { device });
  let [v, i] = gyre.kthvalue(x, 2);
  await expectTensor(v, [2], "float32", [5, 1]);
  await expectTensor(i, [2], "int32", [3, 0]);
  [v, i] = gyre.kthvalue(x, 4, { keepdims: true });
  await expectTensor(v, [2, 1], "float32", [9, NaN]);
  await expectTensor(i, [2, 1], "int32", [2, 1]);
  [v, i] = gyre.kthvalue(x, 1, { axis: 0 });
  await expectTensor(v, [4], "float32", [1, 5, 0, 2]);
  await expectTensor(i, [4], "int32", [1, 0, 1, 1]);
  x.dispose();
});

test("median and quantile with NumPy's methods", async (device) => {
  const x = gyre.tensor([1, 2, 4, 8], { device });
  await expectTensor(gyre.median(x), [], "float32", [3]);
  await expectTensor(gyre.quantile(x, 0.5), [], "float32", [3]);
  // Virtual index 3q: 0, 0.75, 1.5, 2.25, 3.
  const q = [0, 0.25, 0.5, 0.75, 1];
  await expectTensor(gyre.quantile(x, q), [5], "float32", [1, 1.75, 3, 5, 8]);
  await expectTensor(gyre.quantile(x, q, { method: "lower" }), [5], "float32", [1, 1, 2, 4, 8]);
  await expectTensor(gyre.quantile(x, q, { method: "higher" }), [5], "float32", [1, 2, 4, 8, 8]);
  // nearest rounds 1.5 to the even index 2.
  await expectTensor(gyre.quantile(x, q, { method: "nearest" }), [5], "float32", [1, 2, 4, 4, 8]);
  await expectTensor(gyre.quantile(x, q, { method: "midpoint" }), [5], "float32", [
    1,
    1.5,
    3,
    6,
    8,
  ]);
  const m = gyre.tensor([[1, 9, 5], [2, NaN, 0]], { device });
  await expectTensor(gyre.median(m, { axis: 1 }), [2], "float32", [5, NaN]);
  await expectTensor(gyre.median(m, { axis: 1, keepdims: true }), [2, 1], "float32", [5, NaN]);
  await expectTensor(gyre.median(m), [], "float32", [NaN]);
  await expectTensor(gyre.quantile(m, [0, 1], { axis: 0 }), [2, 3], "float32", [
    1,
    NaN,
    0,
    2,
    NaN,
    5,
  ]);
  const ints = gyre.tensor([3, 1, 2, 10], { dtype: "int32", device });
  await expectTensor(gyre.median(ints), [], "float32", [2.5]);
  const empty = gyre.zeros([2, 0], { device });
  await expectTensor(gyre.median(empty, { axis: 1 }), [2], "float32", [NaN, NaN]);
  for (const t of [x, m, ints, empty]) t.dispose();
});

test("quantile of a tensor of q: the numbers' results; out of [0, 1] or NaN gives NaN", async (device) => {
  const x = gyre.tensor([[1, 2, 4, 8], [3, NaN, 1, 2]], { device });
  const q = gyre.tensor([0, 0.25, 0.3, -0, 1], { device });
  const [byTensor, byNumbers] = await gyre.readAll([
    gyre.quantile(x, q, { axis: 1 }),
    gyre.quantile(x, [0, 0.25, 0.3, 0, 1], { axis: 1 }),
  ]);
  assert.deepEqual(Array.from(byTensor), Array.from(byNumbers));
  const [nanByTensor, nanByNumbers] = await gyre.readAll([
    gyre.nanquantile(x, q, { axis: 1, method: "nearest" }),
    gyre.nanquantile(x, [0, 0.25, 0.3, 0, 1], { axis: 1, method: "nearest" }),
  ]);
  assert.deepEqual(Array.from(nanByTensor), Array.from(nanByNumbers));
  const scalar = gyre.tensor(0.5, { device });
  await expectTensor(gyre.quantile(x, scalar, { axis: 1 }), [2], "float32", [3, NaN]);
  const wrong = gyre.tensor([1.5, NaN, -0.25, 0.5], { device });
  await expectTensor(gyre.nanquantile(x, wrong, { axis: 1 }), [4, 2], "float32", [
    NaN,
    NaN,
    NaN,
    NaN,
    NaN,
    NaN,
    3,
    2,
  ]);
  const before = liveCounts();
  const ints = gyre.tensor([0, 1], { dtype: "int32", device });
  const matrix = gyre.tensor([[0.5]], { device });
  const after = liveCounts();
  assert.throws(() => gyre.quantile(x, ints), gyre.DTypeError);
  assert.throws(() => gyre.quantile(x, matrix), gyre.ShapeError);
  assert.deepEqual(liveCounts(), after);
  void before;
  for (const t of [x, q, scalar, wrong, ints, matrix]) t.dispose();
});

test("nanmedian and nanquantile skip NaN", async (device) => {
  const x = gyre.tensor([[4, NaN, 1, 3], [NaN, NaN, NaN, NaN]], { device });
  await expectTensor(gyre.nanmedian(x, { axis: 1 }), [2], "float32", [3, NaN]);
  await expectTensor(gyre.nanquantile(x, [0, 1], { axis: 1 }), [2, 2], "float32", [1, NaN, 4, NaN]);
  x.dispose();
});

test("quantiles read order statistics in total order (-0 below +0), by selection or sort", async (device) => {
  // Positions do not decide a zero's sign: a selection does not keep them.
  const x = gyre.tensor([0, -0, 1, -0, 0], { device });
  for (const variant of [undefined, "select", "bitonic-local"] as const) {
    tuning.setPlanOverride("sort", variant ? { variant } : null);
    const q = gyre.quantile(x, [0, 0.25, 0.5, 0.75], { method: "lower" });
    const m = gyre.median(x);
    tuning.setPlanOverride("sort", null);
    const got = Array.from(await q.data());
    assert.deepEqual(got.map((v) => Object.is(v, -0)), [true, true, false, false], `${variant}`);
    assert.deepEqual(got, [-0, -0, 0, 0]);
    assert.ok(Object.is((await m.data())[0], 0));
    q.dispose();
    m.dispose();
  }
  x.dispose();
});

test("quantiles round each step of the lerp as float32 does (tiny values, subnormal terms, cancellation)", async (device) => {
  // A GPU that flushes subnormals loses b - a when it is subnormal (the H200 gave a), and a
  // subnormal a itself. The reference rounds b - a, (b - a) w and the sum to float32 in turn.
  const f32 = (words: number[]) => new Float32Array(new Uint32Array(words).buffer);
  const pairs = [
    f32([0x8340_0123, 0x8340_0123 - 5]), // normal neighbours 5 units apart near -2^-121
    f32([0x0000_0abc, 0x0152_3456]), // a subnormal a below a normal b near 2^-124
    f32([0x8000_7001, 0x0001_0002]), // subnormals of both signs
    f32([0x0780_0123, 0x0780_0128]), // normal neighbours near 2^-112: the gap below 2^-126
    f32([0x8800_0007, 0x8800_0000]), // 7 units apart near -2^-111: half the gap below 2^-126
    f32([0x0000_0123, 0x0600_0000]), // a subnormal a below b = 2^-115
    f32([0x007f_ffff, 0x0380_0000]), // the largest subnormal and 2^-120: their mean keeps a
    f32([0x8500_1234, 0x1a80_0000]), // a near -2^-117, b = 2^-74: at q = 2^-60, (b - a) q ~ 2^-134
    // A subnormal b far above a: b - (b - a)(1 - q) at q = 0.999 keeps b's term.
    f32([0x902e_ed41, 0x8038_d594]),
    // Cancellation: b - (b - a) 0.3 fused into one multiply-add misses the reference by 2 units.
    Float32Array.of(-60.15060043334961, 31.523324966430664),
  ];
  const qs = [0.3, 0.7, 0.5, 0.1, 2 ** -60, 0.999];
  for (const [a, b] of pairs) {
    const lerp = (w: number) => {
      const diff = Math.fround(b - a);
      return w < 0.5
        ? Math.fround(a + Math.fround(diff * Math.fround(w)))
        : Math.fround(b - Math.fround(diff * Math.fround(1 - Math.fround(w))));
    };
    const x = gyre.tensor([b, a], { device });
    const linear = gyre.quantile(x, qs);
    const midpoint = gyre.quantile(x, qs, { method: "midpoint" });
    const median = gyre.median(x);
    const label = `a ${a}, b ${b}`;
    // Exact, but for a subnormal result, which the GPU may flush to zero (the stated tolerance).
    const same = (got: ArrayLike<number>, want: number[]) =>
      want.forEach((v, i) =>
        assert.ok(
          Object.is(got[i], v) || (Math.abs(v) < 2 ** -126 && got[i] === 0),
          `${label}: q ${qs[i]} gave ${got[i]}, want ${v}`,
        )
      );
    same(await linear.data(), qs.map(lerp));
    same(await midpoint.data(), qs.map(() => lerp(0.5)));
    same(await median.data(), [Math.fround(Math.fround(a + b) / 2)]);
    // Each pair tells the exact lerp from one that loses a subnormal term (giving a or b).
    assert.ok(qs.some((q) => lerp(q) !== a && lerp(q) !== b), label);
    for (const t of [x, linear, midpoint, median]) t.dispose();
  }
});

test("searchsorted, left and right", async (device) => {
  const s = gyre.tensor([1, 2, 2, 3, NaN], { device });
  const v = gyre.tensor([[2, 0], [5, NaN]], { device });
  await expectTensor(gyre.searchsorted(s, v), [2, 2], "int32", [1, 0, 4, 4]);
  await expectTensor(gyre.searchsorted(s, v, { side: "right" }), [2, 2], "int32", [3, 0, 4, 5]);
  await expectTensor(s.searchsorted(gyre.tensor([-0], { device })), [1], "int32", [0]);
  s.dispose();
  v.dispose();
});

test("bad arguments are typed errors naming the op, and leave nothing allocated", (device) => {
  const x = gyre.tensor([[1, 2], [3, 4]], { device });
  const before = liveCounts();
  assert.throws(() => gyre.rankK(x, 3), /rankK.*k.*n = 2/s);
  assert.throws(() => gyre.topk(x, -1), gyre.ValueError);
  assert.throws(() => gyre.topk(x, 1.5), gyre.ValueError);
  assert.throws(() => gyre.rankK(x, 1, { kind: "middle" as "mid" }), gyre.ValueError);
  assert.throws(() => gyre.sort(x, { axis: 2 }), gyre.AxisError);
  assert.throws(() => gyre.sort(x, { descending: "yes" as unknown as boolean }), gyre.ValueError);
  assert.throws(() => gyre.sort(x, { order: 1 } as unknown as gyre.SortOptions), gyre.ValueError);
  assert.throws(() => gyre.sort([1, 2] as unknown as gyre.Tensor), gyre.ValueError);
  const b = gyre.tensor([true, false], { device });
  assert.throws(() => gyre.sort(b), gyre.DTypeError);
  assert.throws(() => gyre.kthvalue(x, 0), gyre.ValueError);
  assert.throws(() => gyre.quantile(x, 1.5), gyre.ValueError);
  assert.throws(() => gyre.quantile(x, [0.5, NaN]), gyre.ValueError);
  assert.throws(() => gyre.quantile(x, 0.5, { method: "cubic" as "linear" }), gyre.ValueError);
  assert.throws(
    () => gyre.median(x, { method: "linear" } as gyre.OrderStatisticOptions),
    gyre.ValueError,
  );
  assert.throws(() => gyre.searchsorted(x, x), gyre.ShapeError);
  const f = gyre.tensor([1, 2], { device });
  const i = gyre.tensor([1], { dtype: "int32", device });
  assert.throws(() => gyre.searchsorted(f, i), gyre.DTypeError);
  assert.throws(() => gyre.searchsorted(f, f, { side: "middle" as "left" }), gyre.ValueError);
  b.dispose();
  f.dispose();
  i.dispose();
  assert.deepEqual(liveCounts(), before);
  // Still usable.
  const [v] = gyre.topk(x, 1);
  v.dispose();
  x.dispose();
});

test("results free what they allocate", async (device) => {
  const x = gyre.tensor([3, 1, 2, 5, 4], { device });
  const before = liveCounts();
  for (let r = 0; r < 3; r++) {
    const sorted = gyre.sort(x);
    const outs = [
      sorted,
      gyre.argsort(x, { descending: true }),
      ...gyre.rankK(x, 2, { kind: "mid" }),
      ...gyre.kthvalue(x, 2),
      gyre.median(x),
      gyre.quantile(x, [0.1, 0.9]),
      gyre.searchsorted(sorted, x),
    ];
    await gyre.readAll(outs);
    for (const t of outs) t.dispose();
  }
  gyre.flush();
  assert.deepEqual(liveCounts(), before);
  x.dispose();
});

Deno.test({
  name: "the GPU's quantile index is the WASM reference's float64 arithmetic, exactly",
  sanitizeOps: false,
  sanitizeResources: false,
  ignore: !DEVICES.includes("gpu"),
  fn: async () => {
    // floor(a q) and the float32 rounding of its fraction, against JS float64 (exact for a < 2^29),
    // over q from every binade (subnormal q included) and a up to 2^29.
    const rng = mulberry32(7);
    const f = new Float32Array(1);
    const u = new Uint32Array(f.buffer);
    const pairs: number[] = [];
    const specialsQ = [0, 1, 0.5, 2 ** -149, 2 ** -140, 2 ** -126, 1 - 2 ** -24, 0.1, 1 / 3];
    for (let i = 0; i < 4096; i++) {
      const a = i < 64 ? i : Math.floor(rng() * 2 ** (1 + rng() * 28));
      f[0] = i % 7 === 0
        ? specialsQ[i % specialsQ.length]
        : rng() * 2 ** -Math.floor(rng() * (i % 3 === 0 ? 150 : 24));
      pairs.push(a, u[0]);
    }
    const n = pairs.length / 2;
    const gpu = gpuBackendOf()!;
    const input = gyre.tensor(pairs, { dtype: "uint32", device: "gpu" });
    const out = gpu.alloc("test", "uint32", 2 * n);
    const source = [
      "struct Params { n: u32 }",
      "@group(0) @binding(0) var<storage, read> pairs: array<u32>;",
      "@group(0) @binding(1) var<storage, read_write> out: array<u32>;",
      "@group(0) @binding(2) var<uniform> p: Params;",
      QUANTILE_INDEX,
      "@compute @workgroup_size(64)",
      "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {",
      "  let i = gid.x;",
      "  if (i >= p.n) { return; }",
      "  let r = quantile_index(pairs[2u * i], pairs[2u * i + 1u]);",
      "  out[2u * i] = r.x;",
      "  out[2u * i + 1u] = r.y;",
      "}",
    ].join("\n");
    const pipeline = gpu.pipeline("test:quantile_index", 2, () => source);
    const buffer = (viewOf(input).storage as unknown as { buffer: GPUBuffer }).buffer;
    gpu.dispatch("test", pipeline, [buffer, out.buffer], Uint32Array.from([n, 0, 0, 0]), [
      Math.ceil(n / 64),
      1,
    ]);
    const result = tensorFromStorage(out, "uint32", [2 * n]);
    const got = await result.data();
    for (let i = 0; i < n; i++) {
      const a = pairs[2 * i];
      u[0] = pairs[2 * i + 1];
      const h = a * f[0];
      const lo = Math.floor(h);
      f[0] = h - lo;
      assert.equal(got[2 * i], lo, `floor(${a} q), q bits ${pairs[2 * i + 1].toString(16)}`);
      assert.equal(
        got[2 * i + 1],
        u[0],
        `fraction of ${a} q, q bits ${pairs[2 * i + 1].toString(16)}: ${
          got[2 * i + 1].toString(16)
        }`,
      );
    }
    input.dispose();
    result.dispose();
  },
});

Deno.test({
  name: "jit replays of sorting, Rank-K and quantiles equal their eager runs",
  sanitizeOps: false,
  sanitizeResources: false,
  ignore: !DEVICES.includes("gpu"),
  fn: async () => {
    // Composed work: an elementwise prologue, a top-k, a quantile (its uploaded table replayed
    // too) and a NaN-skipping median of a sorted copy, traced once and replayed on new inputs.
    const f = (x: gyre.Tensor) => {
      const y = x.mul(2).add(1);
      const [values, indices] = gyre.topk(y, 5);
      return [
        values,
        indices,
        gyre.quantile(y, [0.1, 0.9], { axis: 1 }),
        gyre.nanmedian(gyre.sort(y, { descending: true }), { axis: 0 }),
      ];
    };
    let traces = 0;
    const jitted = gyre.jit((x: gyre.Tensor) => {
      traces++;
      return f(x);
    });
    for (let call = 0; call < 3; call++) {
      const x = gyre.random.normal([6, 300], { seed: 40 + call, device: "gpu" }).realize();
      const got = jitted(x) as gyre.Tensor[];
      const want = f(x);
      const [g, w] = [await gyre.readAll(got), await gyre.readAll(want)];
      g.forEach((v, i) =>
        assert.deepEqual(Array.from(v), Array.from(w[i]), `call ${call} output ${i}`)
      );
      for (const t of [x, ...got, ...want]) t.dispose();
    }
    // Traced once, then replayed (a device that could not replay would call it each time).
    assert.equal(traces, 1);
    jitted.dispose();
  },
});

Deno.test({
  name: "jit replays every Rank-K form, the radix selection's histograms included",
  sanitizeOps: false,
  sanitizeResources: false,
  ignore: !DEVICES.includes("gpu"),
  fn: async () => {
    // Each form forced while the trace is recorded (overrides are captured with the work), then
    // replayed on new inputs: the selection's histogram scratch is zero between passes.
    for (const variant of ["radix-select", "merge", "bitonic-tree", "radix"] as const) {
      let traces = 0;
      const ran: string[] = [];
      const stop = tuning.onPlan((r) => r.family === "sort" && ran.push(...r.variants));
      const jitted = gyre.jit((x: gyre.Tensor) => {
        traces++;
        tuning.setPlanOverride("sort", { variant });
        try {
          return gyre.topk(x, 7);
        } finally {
          tuning.setPlanOverride("sort", null);
        }
      });
      for (let call = 0; call < 3; call++) {
        const x = gyre.random.normal([3, 5000], { seed: 90 + call, device: "gpu" }).realize();
        const got = jitted(x) as gyre.Tensor[];
        const onWasm = await x.to("wasm");
        const want = gyre.topk(onWasm, 7);
        const [g, w] = [await gyre.readAll(got), await gyre.readAll(want)];
        g.forEach((v, i) =>
          assert.deepEqual(Array.from(v), Array.from(w[i]), `${variant} ${call}`)
        );
        for (const t of [x, onWasm, ...got, ...want]) t.dispose();
      }
      stop();
      assert.ok(ran.includes(variant), `${variant} ran: ${ran}`);
      assert.equal(traces, 1, `${variant} replayed`);
      jitted.dispose();
    }
  },
});

Deno.test({
  name: "WASM: a long row shared among threads sorts as one thread sorts it",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const threads = await gyre.startWasmThreads();
    if (threads < 2) return;
    // Heavy duplicates, NaN and signed zeros: stability shows in the indices.
    const rng = mulberry32(3);
    const values = Float32Array.from(
      { length: 40000 },
      () => [NaN, -0, 0, 1, -1, 2.5][Math.floor(rng() * 6)] * (rng() < 0.5 ? 1 : 1e-30),
    );
    const x = gyre.tensor(values, { device: "wasm" });
    const run = async (count: number) => {
      tuning.setPlanOverride("wasmThreads", { threads: count });
      try {
        const posted = postedTasks();
        const i = gyre.argsort(x);
        const data = await i.data();
        i.dispose();
        return { data, shared: postedTasks() > posted };
      } finally {
        tuning.setPlanOverride("wasmThreads", null);
      }
    };
    const one = await run(1);
    const two = await run(2);
    assert.ok(!one.shared && two.shared, "the row was shared between threads only when asked");
    assert.deepEqual(Array.from(two.data), Array.from(one.data));
    x.dispose();
  },
});

Deno.test("the sort plan allows the streaming forms where they fit, and stages rows that leave a GPU idle", () => {
  const caps = (subgroups: boolean, bytes: number): tuning.DeviceCaps => ({
    description: "test",
    vendor: "test",
    isFallbackAdapter: false,
    subgroupMinSize: subgroups ? 32 : 0,
    subgroupMaxSize: subgroups ? 32 : 0,
    features: subgroups ? ["subgroups"] : [],
    subgroups,
    shaderF16: false,
    timestampQuery: false,
    float32Atomics: false,
    int64Atomics: false,
    limits: {
      maxStorageBufferBindingSize: 2 ** 30,
      maxBufferSize: 2 ** 30,
      maxComputeWorkgroupStorageSize: bytes,
      maxComputeInvocationsPerWorkgroup: 256,
      maxComputeWorkgroupSizeX: 256,
      maxComputeWorkgroupsPerDimension: 65535,
      maxStorageBuffersPerShaderStage: 8,
      minUniformBufferOffsetAlignment: 256,
    },
  });
  const plan = (
    c: tuning.DeviceCaps,
    variant: tuning.SortVariant,
    rows: number,
    length: number,
    keep: number,
  ) => tuning.planSort(c, { rows, length, keep }, { variant });
  const full = caps(true, 32768);
  // Subgroup appends need subgroups; the atomic ones do not.
  assert.equal(plan(full, "subgroup", 8, 65536, 1024).variant, "subgroup");
  assert.equal(plan(caps(false, 32768), "subgroup", 8, 65536, 1024).variant, "radix-select");
  assert.equal(plan(caps(false, 32768), "merge", 8, 65536, 1024).variant, "merge");
  // The buffer holds the window's end and a round of candidates: 2048 pairs (16 KiB and its
  // counters) do not fit WebGPU's default 16 KiB; a window past 3072 fits no buffer.
  assert.notEqual(plan(caps(true, 16384), "merge", 8, 65536, 1024).variant, "merge");
  assert.notEqual(plan(full, "merge", 1, 1 << 20, 3073).variant, "merge");
  // Few rows: segments of a row, at least eight windows long, as many as fill 256 workgroups.
  assert.equal(plan(full, "subgroup", 8, 65536, 1024).segment, 8192);
  assert.equal(plan(full, "subgroup", 1, 1 << 24, 100).segment, 65536);
  assert.equal(tuning.twoStagesPay(full, { rows: 8, cols: 65536, keep: 1024 }), true);
  // Many rows fill the device: one workgroup a row.
  assert.equal(plan(full, "subgroup", 1024, 4096, 32).segment, 4096);
  assert.equal(tuning.twoStagesPay(full, { rows: 1024, cols: 4096, keep: 32 }), false);
  const rankK = tuning.planRankK(full, { kind: "top", rows: 8, cols: 65536, k: 1024 }, {
    variant: "subgroup",
  });
  assert.deepEqual([rankK.mk, rankK.stages, rankK.twoStage, rankK.ctile], [
    "subgroup",
    2,
    true,
    1024,
  ]);
  // Rank-K compacts in one pass up to 64 selection tiles a row, in two past them.
  const select = (length: number) =>
    tuning.planSort(full, { rows: 1, length, keep: 100 }, { variant: "radix-select" }).compaction;
  assert.deepEqual([select(64 * 4096), select(64 * 4096 + 1)], ["one-pass", "two-pass"]);
  // Onesweep where forced, but on a software adapter (lavapipe's loop limit) only up to 16
  // tiles of 2048 a row; its look-back counts hold 28 bits.
  const onesweep = (c: tuning.DeviceCaps, rows: number, length: number) =>
    tuning.planSort(c, { rows, length }, { variant: "radix-ballot", prefix: "lookback" }).prefix;
  const soft = { ...full, isFallbackAdapter: true };
  assert.deepEqual(
    [onesweep(full, 1, 1 << 20), onesweep(soft, 1, 16 * 2048), onesweep(soft, 1, 16 * 2048 + 1)],
    ["lookback", "lookback", "multipass"],
  );
  assert.equal(onesweep(full, 16, 1 << 24), "multipass");
  // Rank-K's rule: few long rows on a GPU by the tree in segments of twice the window; many
  // rows by the selection from 8 times the window, streamed by the merge where rows of 8192 or
  // more hold 131072 keys in all for each element of the window; lavapipe selects from rows of
  // 2048 and never merges.
  const rank = (c: tuning.DeviceCaps, rows: number, cols: number, k: number) => {
    const p = tuning.planRankK(c, { kind: "top", rows, cols, k });
    return `${p.mk}/${p.tile}`;
  };
  const cases: [tuning.DeviceCaps, number, number, number, string][] = [
    [full, 6, 2402, 79, "tree/512"],
    [full, 24, 2326, 233, "tree/512"],
    [full, 33, 34408, 106, "select/512"],
    [full, 1330, 1263, 70, "select/512"],
    [full, 1330, 1263, 200, "radix/2048"],
    [soft, 6, 2402, 79, "select/512"],
    [soft, 13, 1419, 114, "radix/2048"],
    [full, 105, 127962, 55, "merge/2048"],
    [full, 128, 8192, 8, "merge/2048"],
    [full, 128, 8192, 9, "select/512"],
    [full, 1024, 8191, 8, "select/512"],
    [soft, 105, 127962, 55, "select/512"],
  ];
  assert.deepEqual(
    cases.map(([c, rows, cols, k]) => rank(c, rows, cols, k)),
    cases.map((c) => c[4]),
  );
});
