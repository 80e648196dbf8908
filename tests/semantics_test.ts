/**
 * Semantics with hand-computed values, each test run on every available device: broadcasting,
 * dtype promotion, views, reductions, empty tensors, concat/stack, creation, numeric edge cases,
 * read-back and lifetime.
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import * as tuning from "../src/tuning.ts";
import {
  devices,
  expectClose,
  expectTensor,
  expectUlps,
  expm1Ulps,
  liveCounts,
  log1pUlps,
  values,
} from "./_devices.ts";

const DEVICES = await devices();

function test(name: string, fn: (device: gyre.DeviceName) => Promise<void> | void): void {
  for (const device of DEVICES) Deno.test(`${name} [${device}]`, () => fn(device));
}

/** int32 0..n-1 reshaped, on `device`. */
function iota(shape: number[], device: gyre.DeviceName, dtype: gyre.DType = "int32"): gyre.Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  return gyre.tidy(() => gyre.arange(n, undefined, 1, { device, dtype }).reshape(shape));
}

// ---------------------------------------------------------------------------------------------
// The elementwise plan

Deno.test("planElementwise: tiles or the transposing copy on hardware GPUs, where the problem allows it", () => {
  const hardware = { isFallbackAdapter: false } as unknown as gyre.DeviceCaps;
  const software = { isFallbackAdapter: true } as unknown as gyre.DeviceCaps;
  const copy = { elements: 1 << 20, vec4Eligible: false, transposedCopy: true, elementBytes: 4 };
  const plan = (caps: gyre.DeviceCaps, problem: Parameters<typeof tuning.planElementwise>[1]) => {
    const choice = tuning.planElementwise(caps, problem);
    return [choice.variant, choice.workgroupSize];
  };
  // Transposed operands of a computation: tiles of 256 invocations on hardware GPUs from 1 Mi.
  const operands = { elements: 1 << 20, vec4Eligible: false, transposedOperands: 1 };
  assert.deepEqual(plan(hardware, operands), ["tiled", 256]);
  assert.deepEqual(plan(software, operands), ["scalar", 256]);
  assert.deepEqual(plan(hardware, { ...operands, elements: (1 << 20) - 1 }), ["scalar", 256]);
  assert.deepEqual(plan(hardware, { ...operands, transposedOperands: 0 }), ["scalar", 256]);
  // Plain copies: the transposing copy, or from 4 Mi 4-byte elements tiles of 128 invocations.
  assert.deepEqual(plan(hardware, copy), ["transpose", 256]);
  const large = { ...copy, elements: 1 << 22, transposedOperands: 1 };
  assert.deepEqual(plan(hardware, large), ["tiled", 128]);
  assert.deepEqual(plan(hardware, { ...large, elementBytes: 2 }), ["transpose", 256]);
  assert.equal(tuning.planElementwise(software, copy).variant, "scalar", "llvmpipe gathers faster");
  assert.equal(
    tuning.planElementwise(hardware, { ...copy, transposedCopy: false }).variant,
    "scalar",
  );
  let ov: Partial<tuning.ElementwiseChoice> | null;
  {
    // Forced: taken where the problem is a transposed copy, refused (vec4 or scalar) elsewhere.
    ov = { variant: "transpose" };
    assert.equal(tuning.planElementwise(software, copy, ov).variant, "transpose");
    assert.equal(
      tuning.planElementwise(hardware, { elements: 64, vec4Eligible: true }, ov).variant,
      "vec4",
    );
    assert.equal(
      tuning.planElementwise(hardware, { elements: 64, vec4Eligible: false }, ov).variant,
      "scalar",
    );
    ov = { variant: "vec4" };
    assert.equal(tuning.planElementwise(hardware, copy, ov).variant, "scalar", "no vec4 layout");
    // Tiles only with transposed operands, in workgroups of whole tile rows.
    ov = { variant: "tiled" };
    assert.equal(tuning.planElementwise(software, operands, ov).variant, "tiled");
    ov = { variant: "tiled", workgroupSize: 64 };
    assert.equal(tuning.planElementwise(hardware, operands, ov).workgroupSize, 256);
    // 512 where the device allows it (WebGPU's default limit is 256).
    ov = { variant: "tiled", workgroupSize: 512 };
    assert.equal(tuning.planElementwise(hardware, operands, ov).workgroupSize, 256);
    const wide = { ...hardware, limits: { maxComputeInvocationsPerWorkgroup: 1024 } };
    assert.equal(tuning.planElementwise(wide as gyre.DeviceCaps, operands, ov).workgroupSize, 512);
    assert.equal(
      tuning.planElementwise(hardware, { elements: 64, vec4Eligible: true }, ov).variant,
      "vec4",
    );
  }
});

// ---------------------------------------------------------------------------------------------
// Broadcasting

test("broadcast: scalar, row and column", async (device) => {
  const m = gyre.tensor([[1, 2, 3], [4, 5, 6]], { device });
  await expectTensor(m.add(10), [2, 3], "float32", [11, 12, 13, 14, 15, 16]);
  await expectTensor(gyre.sub(10, m), [2, 3], "float32", [9, 8, 7, 6, 5, 4]);
  const row = gyre.tensor([10, 20, 30], { device });
  await expectTensor(m.add(row), [2, 3], "float32", [11, 22, 33, 14, 25, 36]);
  await expectTensor(row.add(m), [2, 3], "float32", [11, 22, 33, 14, 25, 36]);
  const col = gyre.tensor([[100], [200]], { device });
  await expectTensor(m.add(col), [2, 3], "float32", [101, 102, 103, 204, 205, 206]);
  m.dispose();
  row.dispose();
  col.dispose();
});

test("broadcast: both sides [3,1] + [1,4]", async (device) => {
  const a = gyre.tensor([[0], [1], [2]], { device });
  const b = gyre.tensor([[0, 10, 20, 30]], { device });
  await expectTensor(a.add(b), [3, 4], "float32", [0, 10, 20, 30, 1, 11, 21, 31, 2, 12, 22, 32]);
  await expectTensor(b.mul(a), [3, 4], "float32", [0, 0, 0, 0, 0, 10, 20, 30, 0, 20, 40, 60]);
  a.dispose();
  b.dispose();
});

test("broadcast: rank extension [2,1,3] + [4,1] -> [2,4,3]", async (device) => {
  const a = iota([2, 1, 3], device); // a[i,0,k] = 3i + k
  const b = gyre.tensor(new Int32Array([0, 10, 20, 30]), { shape: [4, 1], device });
  const expected: number[] = [];
  for (let i = 0; i < 2; i++) {
    for (let j = 0; j < 4; j++) for (let k = 0; k < 3; k++) expected.push(3 * i + k + 10 * j);
  }
  assert.deepEqual(expected.slice(0, 6), [0, 1, 2, 10, 11, 12]);
  await expectTensor(a.add(b), [2, 4, 3], "int32", expected);
  // A 0-d tensor against a rank-3 one.
  const s = gyre.tensor(5, { device, dtype: "int32" });
  assert.deepEqual(s.shape, []);
  await expectTensor(a.mul(s), [2, 1, 3], "int32", [0, 5, 10, 15, 20, 25]);
  a.dispose();
  b.dispose();
  s.dispose();
});

// ---------------------------------------------------------------------------------------------
// Dtype promotion

Deno.test("promoteTypes: the table bool < uint32 < int32 < float16 < float32", () => {
  const order: gyre.DType[] = ["bool", "uint32", "int32", "float16", "float32"];
  for (let i = 0; i < order.length; i++) {
    for (let j = 0; j < order.length; j++) {
      assert.equal(gyre.promoteTypes(order[i], order[j]), order[Math.max(i, j)]);
    }
  }
  assert.equal(gyre.promoteTypes("int32", "uint32"), "int32");
  assert.equal(gyre.promoteTypes("uint32", "int32"), "int32");
  assert.equal(gyre.promoteTypes("int32", "float16"), "float16");
});

test("promotion: tensor-tensor result dtypes and values", async (device) => {
  const b = gyre.tensor([true, false], { device });
  const u = gyre.tensor(new Uint32Array([3, 4]), { device });
  const i = gyre.tensor(new Int32Array([-1, 2]), { device });
  const h = gyre.tensor([0.5, 1.5], { device, dtype: "float16" });
  const f = gyre.tensor([0.25, 0.125], { device });
  await expectTensor(b.add(u), [2], "uint32", [4, 4]);
  await expectTensor(u.add(i), [2], "int32", [2, 6]);
  await expectTensor(i.add(u), [2], "int32", [2, 6]);
  await expectTensor(i.add(h), [2], "float16", [-0.5, 3.5]);
  await expectTensor(h.add(f), [2], "float32", [0.75, 1.625]);
  await expectTensor(b.add(b), [2], "int32", [2, 0]); // arithmetic on bools counts in int32
  for (const t of [b, u, i, h, f]) t.dispose();
});

test("promotion: weak JS scalars", async (device) => {
  const i = gyre.tensor(new Int32Array([1, -2]), { device });
  await expectTensor(i.add(2), [2], "int32", [3, 0]);
  await expectTensor(i.add(2.5), [2], "float32", [3.5, 0.5]);
  await expectTensor(i.mul(-1), [2], "int32", [-1, 2]);
  const u = gyre.tensor(new Uint32Array([7]), { device });
  await expectTensor(u.add(1), [1], "uint32", [8]);
  const h = gyre.tensor([1, 3], { device, dtype: "float16" });
  await expectTensor(h.mul(1.5), [2], "float16", [1.5, 4.5]);
  // float16 rounds each result to half precision: 1 + 2^-12 is not representable.
  await expectTensor(h.add(2 ** -12), [2], "float16", [1, 3]);
  // The scalar itself takes float16: 0.1 becomes 0.0999755859375, equal to a stored 0.1.
  const tenth = gyre.tensor([0.1, 0.2], { device, dtype: "float16" });
  await expectTensor(tenth.equal(0.1), [2], "bool", [1, 0]);
  await expectTensor(tenth.less(0.2), [2], "bool", [1, 0]);
  tenth.dispose();
  const b = gyre.tensor([true, false], { device });
  await expectTensor(b.add(1), [2], "int32", [2, 1]);
  await expectTensor(b.logicalAnd(true), [2], "bool", [1, 0]);
  for (const t of [i, u, h, b]) t.dispose();
});

test("promotion: division of ints is float32, comparisons are bool", async (device) => {
  const i = gyre.tensor(new Int32Array([7, -7, 1]), { device });
  await expectTensor(i.div(2), [3], "float32", [3.5, -3.5, 0.5]);
  const j = gyre.tensor(new Int32Array([2, 2, 4]), { device });
  await expectTensor(i.div(j), [3], "float32", [3.5, -3.5, 0.25]);
  await expectTensor(i.less(j), [3], "bool", [0, 1, 1]);
  await expectTensor(i.greaterEqual(1), [3], "bool", [1, 0, 1]);
  await expectTensor(i.equal(1), [3], "bool", [0, 0, 1]);
  await expectTensor(i.notEqual(1), [3], "bool", [1, 1, 0]);
  await expectTensor(i.lessEqual(-7), [3], "bool", [0, 1, 0]);
  await expectTensor(i.greater(j), [3], "bool", [1, 0, 0]);
  const nan = gyre.tensor([NaN, 1], { device });
  await expectTensor(nan.equal(nan), [2], "bool", [0, 1]);
  await expectTensor(nan.notEqual(nan), [2], "bool", [1, 0]);
  i.dispose();
  j.dispose();
  nan.dispose();
});

test("promotion: sum of bool is int32, max of bool stays bool", async (device) => {
  const b = gyre.tensor([[true, false, true], [true, true, true]], { device });
  await expectTensor(b.sum(), [], "int32", [5]);
  await expectTensor(b.sum({ axis: 1 }), [2], "int32", [2, 3]);
  await expectTensor(b.max({ axis: 0 }), [3], "bool", [1, 1, 1]);
  await expectTensor(b.min({ axis: 0 }), [3], "bool", [1, 0, 1]);
  await expectClose(b.mean({ axis: 1 }), [2], "float32", [2 / 3, 1]);
  b.dispose();
});

// ---------------------------------------------------------------------------------------------
// Views

test("views: reshape, transpose and transpose().reshape() copy", async (device) => {
  const x = iota([3, 4], device);
  await expectTensor(x.reshape([2, -1]), [2, 6], "int32", [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
  const t = x.transpose();
  await expectTensor(t.clone(), [4, 3], "int32", [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]);
  await expectTensor(t.reshape([12]), [12], "int32", [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]);
  await expectTensor(t.reshape([2, 6]), [2, 6], "int32", [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]);
  const y = iota([2, 3, 4], device);
  // out[k, i, j] = y[i, j, k] = 12i + 4j + k
  const expected: number[] = [];
  for (let k = 0; k < 4; k++) {
    for (let i = 0; i < 2; i++) for (let j = 0; j < 3; j++) expected.push(12 * i + 4 * j + k);
  }
  await expectTensor(y.transpose([2, 0, 1]).reshape([24]), [24], "int32", expected);
  await expectTensor(y.transpose([-1, 0, 1]).add(0), [4, 2, 3], "int32", expected);
  t.dispose();
  x.dispose();
  y.dispose();
});

test("views: reshape of a contiguous tensor shares storage", async (device) => {
  const x = iota([2, 3], device);
  const before = liveCounts();
  const r = x.reshape([3, 2]);
  const e = r.expandDims(0);
  const s = e.squeeze();
  const tr = s.transpose();
  const row = x.slice(1);
  const b = row.broadcastTo([4, 3]);
  row.dispose();
  // No view allocated anything.
  assert.deepEqual(liveCounts(), before);
  x.dispose();
  // The views keep the storage alive after the original is gone.
  assert.deepEqual(await values(r), [0, 1, 2, 3, 4, 5]);
  assert.deepEqual(await values(tr), [0, 2, 4, 1, 3, 5]);
  assert.deepEqual(await values(b), [3, 4, 5, 3, 4, 5, 3, 4, 5, 3, 4, 5]);
  assert.deepEqual(e.shape, [1, 3, 2]);
  for (const t of [r, e, s, tr, b]) t.dispose();
  const after = liveCounts();
  assert.equal(after.wasmBlocks + after.gpuBuffers, before.wasmBlocks + before.gpuBuffers - 1);
});

test("views: slice with negative step, negative indices, clamping, index dropping", async (device) => {
  const x = iota([3, 4], device);
  await expectTensor(x.slice([null, null, -1]), [3, 4], "int32", [
    8,
    9,
    10,
    11,
    4,
    5,
    6,
    7,
    0,
    1,
    2,
    3,
  ]);
  await expectTensor(x.slice(null, [3, 0, -1]), [3, 3], "int32", [3, 2, 1, 7, 6, 5, 11, 10, 9]);
  await expectTensor(x.slice(-1), [4], "int32", [8, 9, 10, 11]);
  await expectTensor(x.slice(null, -2), [3], "int32", [2, 6, 10]);
  await expectTensor(x.slice(1, 2), [], "int32", [6]);
  await expectTensor(x.slice([-2]), [2, 4], "int32", [4, 5, 6, 7, 8, 9, 10, 11]);
  await expectTensor(x.slice([1, 100]), [2, 4], "int32", [4, 5, 6, 7, 8, 9, 10, 11]);
  await expectTensor(x.slice([-100, 1]), [1, 4], "int32", [0, 1, 2, 3]);
  await expectTensor(x.slice([5, 10]), [0, 4], "int32", []);
  await expectTensor(x.slice([2, 1]), [0, 4], "int32", []);
  await expectTensor(x.slice([null, null, -2], 1), [2], "int32", [9, 1]);
  await expectTensor(x.slice(null, [null, null, 3]), [3, 2], "int32", [0, 3, 4, 7, 8, 11]);
  await expectTensor(x.slice(null, [-1, -5, -2]), [3, 2], "int32", [3, 1, 7, 5, 11, 9]);
  // Slices of slices, then arithmetic through the strided view.
  const v = gyre.arange(10, undefined, 1, { device }).slice([1, 9]).slice([null, null, 3]);
  await expectTensor(v.mul(2), [3], "int32", [2, 8, 14]);
  v.dispose();
  x.dispose();
});

test("views: broadcastTo, expandDims, squeeze", async (device) => {
  const r = gyre.tensor([1, 2, 3], { device });
  await expectTensor(r.broadcastTo([2, 3]), [2, 3], "float32", [1, 2, 3, 1, 2, 3]);
  const c = gyre.tensor([[1], [2]], { device });
  await expectTensor(c.broadcastTo([2, 2, 3]), [2, 2, 3], "float32", [
    1,
    1,
    1,
    2,
    2,
    2,
    1,
    1,
    1,
    2,
    2,
    2,
  ]);
  await expectTensor(r.expandDims(0), [1, 3], "float32", [1, 2, 3]);
  await expectTensor(r.expandDims(-1), [3, 1], "float32", [1, 2, 3]);
  await expectTensor(r.expandDims(-1).add(r), [3, 3], "float32", [2, 3, 4, 3, 4, 5, 4, 5, 6]);
  const z = gyre.zeros([1, 3, 1, 2], { device });
  assert.deepEqual(gyre.tidy(() => z.squeeze().shape), [3, 2]);
  assert.deepEqual(gyre.tidy(() => z.squeeze(2).shape), [1, 3, 2]);
  assert.deepEqual(gyre.tidy(() => z.squeeze([0, -2]).shape), [3, 2]);
  for (const t of [r, c, z]) t.dispose();
});

// ---------------------------------------------------------------------------------------------
// Reductions

test("reductions: axis lists, negative axes, keepdims, full reduction", async (device) => {
  const x = iota([2, 3, 4], device, "float32"); // x[i,j,k] = 12i + 4j + k
  await expectTensor(x.sum(), [], "float32", [276]);
  await expectTensor(x.sum({ axis: [0, 2] }), [3], "float32", [60, 92, 124]);
  await expectTensor(x.sum({ axis: [2, 0] }), [3], "float32", [60, 92, 124]);
  await expectTensor(x.sum({ axis: -1 }), [2, 3], "float32", [6, 22, 38, 54, 70, 86]);
  await expectTensor(x.sum({ axis: -1, keepdims: true }), [2, 3, 1], "float32", [
    6,
    22,
    38,
    54,
    70,
    86,
  ]);
  await expectTensor(x.sum({ axis: [0, 1, 2], keepdims: true }), [1, 1, 1], "float32", [276]);
  await expectTensor(x.sum({ axis: [] }), [2, 3, 4], "float32", await values(x));
  await expectTensor(x.max({ axis: [0, 1] }), [4], "float32", [20, 21, 22, 23]);
  await expectTensor(x.min({ axis: -2, keepdims: true }), [2, 1, 4], "float32", [
    0,
    1,
    2,
    3,
    12,
    13,
    14,
    15,
  ]);
  await expectTensor(x.mean({ axis: [1, 2] }), [2], "float32", [5.5, 17.5]);
  await expectTensor(x.transpose().sum({ axis: 0 }), [3, 2], "float32", [6, 54, 22, 70, 38, 86]);
  const p = gyre.tensor([[1, 2], [3, 4]], { device });
  await expectTensor(p.prod(), [], "float32", [24]);
  await expectTensor(p.prod({ axis: 0 }), [2], "float32", [3, 8]);
  await expectTensor(p.mean({ axis: 1 }), [2], "float32", [1.5, 3.5]);
  const i = gyre.tensor(new Int32Array([1, 2, 3, 4]), { device });
  await expectTensor(i.mean(), [], "float32", [2.5]);
  await expectTensor(i.sum(), [], "int32", [10]);
  await expectTensor(i.max(), [], "int32", [4]);
  const n = gyre.tensor([1, NaN, 3], { device });
  await expectTensor(n.max(), [], "float32", [NaN]);
  await expectTensor(n.min(), [], "float32", [NaN]);
  assert.equal(await gyre.tidy(() => x.sum()).array(), 276);
  for (const t of [x, p, i, n]) t.dispose();
});

// ---------------------------------------------------------------------------------------------
// Empty tensors

test("empty tensors: elementwise keeps the shape", async (device) => {
  const a = gyre.zeros([0], { device });
  await expectTensor(a.add(1), [0], "float32", []);
  const b = gyre.zeros([2, 0, 3], { device });
  await expectTensor(b.exp(), [2, 0, 3], "float32", []);
  await expectTensor(b.add(gyre.tidy(() => gyre.ones([3], { device }))), [2, 0, 3], "float32", []);
  await expectTensor(b.transpose(), [3, 0, 2], "float32", []);
  assert.deepEqual(await b.array(), [[], []]);
  a.dispose();
  b.dispose();
});

test("empty tensors: sum = 0, prod = 1, max throws, mean = NaN", async (device) => {
  const b = gyre.zeros([2, 0, 3], { device });
  await expectTensor(b.sum({ axis: 1 }), [2, 3], "float32", [0, 0, 0, 0, 0, 0]);
  await expectTensor(b.prod({ axis: 1 }), [2, 3], "float32", [1, 1, 1, 1, 1, 1]);
  await expectTensor(b.sum({ axis: 1, keepdims: true }), [2, 1, 3], "float32", [0, 0, 0, 0, 0, 0]);
  await expectTensor(b.sum({ axis: 0 }), [0, 3], "float32", []);
  await expectTensor(b.max({ axis: 0 }), [0, 3], "float32", []);
  await expectTensor(b.sum(), [], "float32", [0]);
  assert.throws(() => b.max({ axis: 1 }), gyre.ValueError);
  assert.throws(() => b.min(), gyre.ValueError);
  await expectTensor(b.mean({ axis: 1 }), [2, 3], "float32", new Array(6).fill(NaN));
  const e = gyre.zeros([0], { device, dtype: "int32" });
  await expectTensor(e.sum(), [], "int32", [0]);
  await expectTensor(e.prod(), [], "int32", [1]);
  await expectTensor(e.mean(), [], "float32", [NaN]);
  b.dispose();
  e.dispose();
});

// ---------------------------------------------------------------------------------------------
// concat and stack

test("concat along each axis, negative axis, mixed dtypes", async (device) => {
  const a = gyre.tensor([[1, 2], [3, 4]], { device });
  const b = gyre.tensor([[5, 6]], { device });
  const c = gyre.tensor([[7], [8]], { device });
  await expectTensor(gyre.concat([a, b]), [3, 2], "float32", [1, 2, 3, 4, 5, 6]);
  await expectTensor(gyre.concat([b, a], 0), [3, 2], "float32", [5, 6, 1, 2, 3, 4]);
  await expectTensor(gyre.concat([a, c], 1), [2, 3], "float32", [1, 2, 7, 3, 4, 8]);
  await expectTensor(gyre.concat([c, a, c], -1), [2, 4], "float32", [7, 1, 2, 7, 8, 3, 4, 8]);
  // A strided (transposed) input.
  await expectTensor(gyre.concat([a.transpose(), b], 0), [3, 2], "float32", [1, 3, 2, 4, 5, 6]);
  const i = gyre.tensor(new Int32Array([1, 2]), { device });
  const f = gyre.tensor([0.5], { device });
  const bo = gyre.tensor([true, false], { device });
  await expectTensor(gyre.concat([i, f]), [3], "float32", [1, 2, 0.5]);
  await expectTensor(gyre.concat([bo, i]), [4], "int32", [1, 0, 1, 2]);
  await expectTensor(gyre.concat([bo, bo]), [4], "bool", [1, 0, 1, 0]);
  const e = gyre.zeros([0, 2], { device });
  await expectTensor(gyre.concat([e, b, e]), [1, 2], "float32", [5, 6]);
  for (const t of [a, b, c, i, f, bo, e]) t.dispose();
});

test("stack along each axis, negative axis, mixed dtypes", async (device) => {
  const a = gyre.tensor([1, 2, 3], { device });
  const b = gyre.tensor(new Int32Array([4, 5, 6]), { device });
  await expectTensor(gyre.stack([a, b]), [2, 3], "float32", [1, 2, 3, 4, 5, 6]);
  await expectTensor(gyre.stack([a, b], 1), [3, 2], "float32", [1, 4, 2, 5, 3, 6]);
  await expectTensor(gyre.stack([b, b], -1), [3, 2], "int32", [4, 4, 5, 5, 6, 6]);
  await expectTensor(gyre.stack([b, a], -2), [2, 3], "float32", [4, 5, 6, 1, 2, 3]);
  const m = gyre.tensor([[1, 2], [3, 4]], { device });
  await expectTensor(gyre.stack([m, m.mul(10)], 1), [2, 2, 2], "float32", [
    1,
    2,
    10,
    20,
    3,
    4,
    30,
    40,
  ]);
  for (const t of [a, b, m]) t.dispose();
});

// ---------------------------------------------------------------------------------------------
// Creation

test("tensor(): nested arrays, typed arrays, shape option, scalars", async (device) => {
  await expectTensor(gyre.tensor([[1, 2, 3], [4, 5, 6]], { device }), [2, 3], "float32", [
    1,
    2,
    3,
    4,
    5,
    6,
  ]);
  await expectTensor(gyre.tensor(new Int32Array([-1, 2]), { device }), [2], "int32", [-1, 2]);
  await expectTensor(gyre.tensor(new Uint32Array([4e9]), { device }), [1], "uint32", [4e9]);
  await expectTensor(gyre.tensor(new Uint8Array([0, 7]), { device }), [2], "bool", [0, 1]);
  await expectTensor(
    gyre.tensor(new Float32Array([1, 2, 3, 4, 5, 6]), { shape: [3, 2], device }),
    [3, 2],
    "float32",
    [1, 2, 3, 4, 5, 6],
  );
  await expectTensor(
    gyre.tensor([1, 2, 3, 4], { shape: [2, 2], dtype: "int32", device }),
    [
      2,
      2,
    ],
    "int32",
    [1, 2, 3, 4],
  );
  await expectTensor(gyre.tensor([1.9, -1.9], { dtype: "int32", device }), [2], "int32", [1, -1]);
  await expectTensor(gyre.tensor([0, 2], { dtype: "bool", device }), [2], "bool", [0, 1]);
  await expectTensor(gyre.tensor([[true], [false]], { device }), [2, 1], "bool", [1, 0]);
  await expectTensor(gyre.tensor(3.5, { device }), [], "float32", [3.5]);
  await expectTensor(gyre.tensor([], { device }), [0], "float32", []);
  await expectTensor(gyre.tensor([0.1], { dtype: "float16", device }), [1], "float16", [
    0.0999755859375,
  ]);
  const t = gyre.tensor([[1]], { device });
  assert.equal(t.device, device);
  assert.equal(t.rank, 2);
  assert.equal(t.size, 1);
  assert.equal(String(t), `Tensor(float32 [1, 1] ${device})`);
  t.dispose();
  assert.equal(String(t), "Tensor(disposed)");
});

test("zeros, ones, full", async (device) => {
  await expectTensor(gyre.zeros([2, 2], { device }), [2, 2], "float32", [0, 0, 0, 0]);
  await expectTensor(gyre.ones([3], { device, dtype: "int32" }), [3], "int32", [1, 1, 1]);
  await expectTensor(gyre.full([2], 7, { device, dtype: "int32" }), [2], "int32", [7, 7]);
  await expectTensor(gyre.full([2, 1], -2.5, { device }), [2, 1], "float32", [-2.5, -2.5]);
  await expectTensor(gyre.full([3], true, { device }), [3], "bool", [1, 1, 1]);
  await expectTensor(gyre.full([2], false, { device }), [2], "bool", [0, 0]);
  await expectTensor(gyre.full([], 4, { device }), [], "float32", [4]);
  await expectTensor(gyre.zeros([0, 3], { device }), [0, 3], "float32", []);
  const b = gyre.full([2], true, { device });
  assert.deepEqual(await b.array(), [true, true]);
  b.dispose();
});

test("bool from numbers: any non-zero value and NaN are true, in tensor(), full() and cast", async (device) => {
  // full([3], 0.2, bool) was false on WASM (0.2 truncated into a byte), and NaN false on both
  // devices in tensor() and full() (NaN is falsy in JS), where NumPy and the cast say true.
  const values = [0.2, NaN, 0, -0, -3, Infinity, 1e-30];
  const truth = [1, 1, 0, 0, 1, 1, 1];
  await expectTensor(gyre.full([3], 0.2, { device, dtype: "bool" }), [3], "bool", [1, 1, 1]);
  await expectTensor(gyre.full([2], NaN, { device, dtype: "bool" }), [2], "bool", [1, 1]);
  await expectTensor(gyre.full([2], -0, { device, dtype: "bool" }), [2], "bool", [0, 0]);
  await expectTensor(gyre.tensor(values, { device, dtype: "bool" }), [7], "bool", truth);
  await expectTensor(
    gyre.tensor(new Float32Array(values), { device, dtype: "bool" }),
    [7],
    "bool",
    truth,
  );
  const x = gyre.tensor(values, { device });
  await expectTensor(x.cast("bool"), [7], "bool", truth);
  // Fused, and from float16 (1e-30 is 0 in half precision).
  await expectTensor(x.mul(1).cast("bool"), [7], "bool", truth);
  const h = gyre.tensor(values, { device, dtype: "float16" });
  await expectTensor(h.cast("bool"), [7], "bool", [1, 1, 0, 0, 1, 1, 0]);
  x.dispose();
  h.dispose();
});

test("arange: int, float, negative step, empty", async (device) => {
  await expectTensor(gyre.arange(5, undefined, 1, { device }), [5], "int32", [0, 1, 2, 3, 4]);
  await expectTensor(gyre.arange(2, 5, 1, { device }), [3], "int32", [2, 3, 4]);
  await expectTensor(gyre.arange(0, 1, 0.25, { device }), [4], "float32", [0, 0.25, 0.5, 0.75]);
  await expectTensor(gyre.arange(5, 0, -2, { device }), [3], "int32", [5, 3, 1]);
  await expectTensor(gyre.arange(2, -2, -1, { device }), [4], "int32", [2, 1, 0, -1]);
  await expectTensor(gyre.arange(1, -1, -0.5, { device }), [4], "float32", [1, 0.5, 0, -0.5]);
  await expectTensor(gyre.arange(3, 3, 1, { device }), [0], "int32", []);
  await expectTensor(gyre.arange(3, 0, 1, { device }), [0], "int32", []);
  await expectTensor(gyre.arange(0, 3, 1, { device, dtype: "float32" }), [3], "float32", [0, 1, 2]);
});

test("linspace: endpoint, num 0 and 1", async (device) => {
  await expectTensor(gyre.linspace(0, 1, 5, { device }), [5], "float32", [0, 0.25, 0.5, 0.75, 1]);
  await expectTensor(gyre.linspace(0, 1, 4, { device, endpoint: false }), [4], "float32", [
    0,
    0.25,
    0.5,
    0.75,
  ]);
  await expectTensor(gyre.linspace(2, -2, 3, { device }), [3], "float32", [2, 0, -2]);
  await expectTensor(gyre.linspace(0, 1, 0, { device }), [0], "float32", []);
  await expectTensor(gyre.linspace(2, 5, 1, { device }), [1], "float32", [2]);
  await expectTensor(gyre.linspace(2, 5, 1, { device, endpoint: false }), [1], "float32", [2]);
  // The last value is exactly stop even where start + i * step would round elsewhere.
  const l = gyre.linspace(0, 0.3, 4, { device });
  const v = await values(l);
  assert.equal(v[3], Math.fround(0.3));
  l.dispose();
});

test("eye: square and rectangular", async (device) => {
  await expectTensor(gyre.eye(3, undefined, { device }), [3, 3], "float32", [
    1,
    0,
    0,
    0,
    1,
    0,
    0,
    0,
    1,
  ]);
  await expectTensor(gyre.eye(2, 3, { device }), [2, 3], "float32", [1, 0, 0, 0, 1, 0]);
  await expectTensor(gyre.eye(3, 2, { device, dtype: "int32" }), [3, 2], "int32", [
    1,
    0,
    0,
    1,
    0,
    0,
  ]);
  await expectTensor(gyre.eye(2, 2, { device, dtype: "bool" }), [2, 2], "bool", [1, 0, 0, 1]);
  await expectTensor(gyre.eye(0, 3, { device }), [0, 3], "float32", []);
});

// ---------------------------------------------------------------------------------------------
// Numeric edge cases

test("mod and floor follow NumPy for negatives", async (device) => {
  const a = gyre.tensor(new Int32Array([-7, 7, -7, 7, 6, -6]), { device });
  const b = gyre.tensor(new Int32Array([3, -3, -3, 3, 3, 3]), { device });
  await expectTensor(a.mod(b), [6], "int32", [2, -2, -1, 1, 0, 0]);
  await expectTensor(a.mod(0), [6], "int32", [0, 0, 0, 0, 0, 0]);
  const fa = gyre.tensor([-7, 7, -7, 7, -7.5, 1], { device });
  const fb = gyre.tensor([3, -3, -3, 3, 2, 0], { device });
  await expectTensor(fa.mod(fb), [6], "float32", [2, -2, -1, 1, 0.5, NaN]);
  const u = gyre.tensor(new Uint32Array([7, 9]), { device });
  await expectTensor(u.mod(4), [2], "uint32", [3, 1]);
  await expectTensor(u.mod(0), [2], "uint32", [0, 0]);
  const f = gyre.tensor([-1.5, 1.5, -2, 2.7], { device });
  await expectTensor(f.floor(), [4], "float32", [-2, 1, -2, 2]);
  await expectTensor(f.ceil(), [4], "float32", [-1, 2, -2, 3]);
  for (const t of [a, b, fa, fb, u, f]) t.dispose();
});

test("pow: negative bases, integer exponents", async (device) => {
  const f = gyre.tensor([-2, -2, -3, 2, 4], { device });
  const e = gyre.tensor([3, 2, -1, -2, 0.5], { device });
  await expectClose(f.pow(e), [5], "float32", [-8, 4, -1 / 3, 0.25, 2]);
  await expectClose(f.pow(2), [5], "float32", [4, 4, 9, 4, 16]);
  const nan = gyre.tensor([-8], { device });
  await expectClose(nan.pow(1 / 3), [1], "float32", [NaN]);
  const i = gyre.tensor(new Int32Array([-2, -3, 2, 1, -1, -1, 0]), { device });
  const ie = gyre.tensor(new Int32Array([3, 2, -1, -5, -1, -2, 0]), { device });
  // Integer powers with negative exponents truncate toward zero: 2^-1 = 0, (-1)^-1 = -1.
  await expectTensor(i.pow(ie), [7], "int32", [-8, 9, 0, 1, -1, 1, 1]);
  await expectTensor(i.pow(2), [7], "int32", [4, 9, 4, 1, 1, 1, 0]);
  for (const t of [f, e, nan, i, ie]) t.dispose();
});

test("pow of -Inf and of signed zeros follows C (and PyTorch)", async (device) => {
  const y = gyre.tensor([-2.5, 2.5, -3, 3, -2, 2], { device });
  const minusInf = gyre.tensor([-Infinity], { device });
  const minusZero = gyre.tensor([-0], { device });
  const plusZero = gyre.tensor([0], { device });
  const expected: [gyre.Tensor, number[]][] = [
    // -Inf: 0 below 0, Inf above; negative for odd integers, whatever y is (not NaN for 2.5).
    [minusInf, [0, Infinity, -0, -Infinity, 0, Infinity]],
    // -0: Inf below 0, 0 above, the sign kept for odd integers: pow(-0, -3) = -Inf.
    [minusZero, [Infinity, 0, -Infinity, -0, Infinity, 0]],
    [plusZero, [Infinity, 0, Infinity, 0, Infinity, 0]],
  ];
  for (const [base, want] of expected) {
    const got = await values(gyre.tidy(() => base.pow(y)));
    assert.ok(got.every((g, k) => Object.is(g, want[k])), `${got} vs ${want}`);
  }
  for (const t of [y, minusInf, minusZero, plusZero]) t.dispose();
});

test("round: halves to even", async (device) => {
  const x = gyre.tensor([0.5, 1.5, 2.5, 3.5, -1.5, -2.5, 2.4, 2.6, -2.6], { device });
  // +0 folds -0 (round(-0.5) is -0) so the comparison is by value.
  await expectClose(x.round(), [9], "float32", [0, 2, 2, 4, -2, -2, 2, 3, -3]);
  // round(-0.5) is -0, as in NumPy.
  const r = await values(gyre.tidy(() => gyre.tensor([-0.5, -0.4], { device }).round()));
  assert.ok(Object.is(r[0], -0) && Object.is(r[1], -0), `${r}`);
  x.dispose();
});

test("maximum and minimum propagate NaN", async (device) => {
  const a = gyre.tensor([1, NaN, 5, NaN], { device });
  const b = gyre.tensor([3, 2, NaN, NaN], { device });
  await expectTensor(a.maximum(b), [4], "float32", [3, NaN, NaN, NaN]);
  await expectTensor(a.minimum(b), [4], "float32", [1, NaN, NaN, NaN]);
  await expectTensor(a.clip(2, 4), [4], "float32", [2, NaN, 4, NaN]);
  const i = gyre.tensor(new Int32Array([-5, 5]), { device });
  await expectTensor(i.maximum(0), [2], "int32", [0, 5]);
  await expectTensor(i.minimum(0), [2], "int32", [-5, 0]);
  for (const t of [a, b, i]) t.dispose();
});

test("clip: a missing bound is null or undefined; a non-number bound, or none at all, is a ValueError", async (device) => {
  // clip(x, undefined, 2) gave NaN everywhere, without an error.
  const x = gyre.tensor([-2, 0.5, 3, NaN], { device });
  await expectTensor(gyre.clip(x, undefined, 2), [4], "float32", [-2, 0.5, 2, NaN]);
  await expectTensor(x.clip(0), [4], "float32", [0, 0.5, 3, NaN]);
  await expectTensor(x.clip(null, 1), [4], "float32", [-2, 0.5, 1, NaN]);
  await expectTensor(x.clip(0, undefined), [4], "float32", [0, 0.5, 3, NaN]);
  const before = liveCounts();
  const refused = (min: unknown, max: unknown, argument: string, received: string) =>
    assert.throws(
      () => gyre.clip(x, min as number, max as number),
      (e: gyre.ValueError) => {
        assert.ok(e instanceof gyre.ValueError);
        assert.deepEqual([e.op, e.argument, e.received], ["clip", argument, received]);
        return true;
      },
    );
  refused("0", 1, "min", '"0"');
  refused(0, { value: 1 }, "max", "Object");
  refused(undefined, null, "min, max", "undefined and null");
  // A JS scalar input is not leaked when a bound is refused.
  assert.throws(() => gyre.clip(5, 0, "1" as unknown as number), gyre.ValueError);
  assert.deepEqual(liveCounts(), before);
  x.dispose();
});

test("cast: float->int truncates and saturates; anything->bool is x != 0", async (device) => {
  const f = gyre.tensor([1.7, -1.7, 3e9, -3e9, 0.2], { device });
  await expectTensor(f.cast("int32"), [5], "int32", [1, -1, 2147483647, -2147483648, 0]);
  await expectTensor(f.cast("uint32"), [5], "uint32", [1, 0, 3e9, 0, 0]);
  // Saturation at the exact integer limits (WGSL's own conversion stops 128 below 2^31);
  // NaN converts to 0 as WASM's trunc_sat does.
  const big = gyre.tensor([5e9, -1, 2147483648, NaN], { device });
  await expectTensor(big.cast("uint32"), [4], "uint32", [4294967295, 0, 2147483648, 0]);
  await expectTensor(big.cast("int32"), [4], "int32", [2147483647, -1, 2147483647, 0]);
  const h = gyre.tensor([70000, -70000], { device, dtype: "float16" }); // +-inf in half
  await expectTensor(h.cast("int32"), [2], "int32", [2147483647, -2147483648]);
  h.dispose();
  await expectTensor(f.cast("bool"), [5], "bool", [1, 1, 1, 1, 1]);
  const z = gyre.tensor([0, -0.5, 0.5, NaN], { device });
  await expectTensor(z.cast("bool"), [4], "bool", [0, 1, 1, 1]);
  const i = gyre.tensor(new Int32Array([0, -3, 4]), { device });
  await expectTensor(i.cast("bool"), [3], "bool", [0, 1, 1]);
  await expectTensor(i.cast("uint32"), [3], "uint32", [0, 4294967293, 4]);
  await expectTensor(i.cast("float16"), [3], "float16", [0, -3, 4]);
  const b = gyre.tensor([true, false], { device });
  await expectTensor(b.cast("float32"), [2], "float32", [1, 0]);
  for (const t of [f, big, z, i, b]) t.dispose();
});

test("cast to integers saturates everywhere a cast runs: alone, fused, from float16, in linspace, in a reduction's prologue and a product's epilogue", async (device) => {
  // Truncation toward zero, saturation at the type's limits, NaN to 0 (WASM's trunc_sat); the
  // GPU's conversion tests both limits itself rather than trusting WGSL's u32() and i32().
  const values = [-1.5, -3e9, 2.7, 5e9, NaN, Infinity, -Infinity, 4294967040, -0.5, 2147483520];
  const u32 = [0, 0, 2, 4294967295, 0, 4294967295, 0, 4294967040, 0, 2147483520];
  const i32 = [-1, -2147483648, 2, 2147483647, 0, 2147483647, -2147483648, 2147483647, 0];
  i32.push(2147483520);
  const x = gyre.tensor(values, { device });
  const n = values.length;
  await expectTensor(x.cast("uint32"), [n], "uint32", u32);
  await expectTensor(x.cast("int32"), [n], "int32", i32);
  // Fused: the conversion runs inside the multiply's kernel.
  await expectTensor(x.mul(1).cast("uint32"), [n], "uint32", u32);
  await expectTensor(x.mul(1).cast("int32"), [n], "int32", i32);
  // float16 sources: 70000 is +Inf in half, 4294967040 too.
  const h = gyre.tensor([-1.5, 2.7, 70000, -70000, NaN, 65504], { device, dtype: "float16" });
  await expectTensor(h.cast("uint32"), [6], "uint32", [0, 2, 4294967295, 0, 0, 65504]);
  await expectTensor(h.mul(1).cast("int32"), [6], "int32", [
    -1,
    2,
    2147483647,
    -2147483648,
    0,
    65504,
  ]);
  await expectTensor(
    gyre.linspace(-3e9, 5e9, 3, { dtype: "uint32", device }),
    [3],
    "uint32",
    [0, 1e9, 4294967295],
  );
  await expectTensor(
    gyre.linspace(-3e9, 3e9, 3, { dtype: "int32", device }),
    [3],
    "int32",
    [-2147483648, 0, 2147483647],
  );
  // A pending cast read by a reduction is its prologue.
  await expectTensor(gyre.max(x.mul(1).cast("uint32")), [], "uint32", [4294967295]);
  await expectTensor(gyre.min(x.mul(-1).cast("uint32")), [], "uint32", [0]);
  await expectTensor(gyre.min(x.mul(1).cast("int32")), [], "int32", [-2147483648]);
  // A cast of a product is its epilogue: [[-3e9, 1.5], [3e9, -1.5]].
  const a = gyre.tensor([[1], [-1]], { device });
  const b = gyre.tensor([[-3e9, 1.5]], { device });
  await expectTensor(gyre.matmul(a, b).cast("uint32"), [2, 2], "uint32", [0, 1, 3e9, 0]);
  await expectTensor(gyre.matmul(a, b).cast("int32"), [2, 2], "int32", [
    -2147483648,
    1,
    2147483647,
    -1,
  ]);
  for (const t of [x, h, a, b]) t.dispose();
});

// ---------------------------------------------------------------------------------------------
// Read-back, devices and lifetime

test("array(): nested output and bool values", async (device) => {
  const m = gyre.tensor([[1, 2, 3], [4, 5, 6]], { device });
  assert.deepEqual(await m.array(), [[1, 2, 3], [4, 5, 6]]);
  const tr = m.transpose();
  assert.deepEqual(await tr.array(), [[1, 4], [2, 5], [3, 6]]);
  const b = m.greater(2).reshape([3, 2]);
  assert.deepEqual(await b.array(), [[false, false], [true, true], [true, true]]);
  const s = m.sum();
  assert.equal(await s.array(), 21);
  const c = gyre.tensor(true, { device });
  assert.equal(await c.array(), true);
  for (const t of [m, tr, b, s, c]) t.dispose();
});

Deno.test({
  name: "to(): wasm <-> gpu round trips",
  ignore: !DEVICES.includes("gpu"),
  fn: async () => {
    const a = gyre.tensor([[1.5, -2], [3, 4]], { device: "wasm" });
    const g = await a.to("gpu");
    assert.equal(g.device, "gpu");
    assert.deepEqual(await g.array(), [[1.5, -2], [3, 4]]);
    const back = await g.transpose().to("wasm");
    assert.equal(back.device, "wasm");
    assert.deepEqual(await back.array(), [[1.5, 3], [-2, 4]]);
    const h = gyre.tensor([0.5, 1], { device: "gpu", dtype: "float16" });
    const hw = await h.to("wasm");
    assert.equal(hw.dtype, "float16");
    assert.deepEqual(await values(hw), [0.5, 1]);
    const bg = await gyre.tensor([true, false], { device: "wasm" }).to("gpu");
    assert.deepEqual(await bg.array(), [true, false]);
    // Same device: a new view, no copy.
    const same = await g.to("gpu");
    assert.notEqual(same, g);
    g.dispose();
    assert.deepEqual(await same.array(), [[1.5, -2], [3, 4]]);
    for (const t of [a, back, h, hw, bg, same]) t.dispose();
  },
});

test("using declarations dispose; dispose twice is harmless", async (device) => {
  const before = liveCounts();
  let escaped: gyre.Tensor | null = null;
  {
    using t = gyre.zeros([4], { device });
    escaped = t;
    assert.deepEqual(await values(t), [0, 0, 0, 0]);
    assert.notDeepEqual(liveCounts(), before);
  }
  assert.ok(escaped.isDisposed);
  assert.deepEqual(liveCounts(), before);
  const u = gyre.ones([2], { device });
  u.dispose();
  u.dispose();
  assert.ok(u.isDisposed);
  assert.deepEqual(liveCounts(), before);
  // A second dispose must not free storage another view still holds.
  const x = gyre.ones([3], { device });
  const v = x.reshape([3, 1]);
  x.dispose();
  x.dispose();
  assert.deepEqual(await values(v), [1, 1, 1]);
  v.dispose();
  assert.deepEqual(liveCounts(), before);
});

test("method chaining", async (device) => {
  const a = gyre.tensor([0, 1, 2], { device });
  const b = gyre.tensor([1, 1, -2], { device });
  await expectClose(a.add(b).exp(), [3], "float32", [Math.E, Math.E ** 2, 1]);
  await expectClose(
    gyre.tidy(() => a.mul(2).sub(1).abs().sqrt().sum({ keepdims: true })),
    [1],
    "float32",
    [1 + 1 + Math.sqrt(3)],
  );
  a.dispose();
  b.dispose();
});

// ---------------------------------------------------------------------------------------------
// Edge cases a real GPU got wrong (NVIDIA H200): each fixed in wgsl/prelude.wgsl.

test("a uint32 operand of a float16 op rounds to float16 first (65536 -> Inf)", async (device) => {
  const half = gyre.tensor([0.5, 0, -Infinity, 3], { device, dtype: "float16" });
  const big = gyre.tensor(new Uint32Array([65536, 70000, 2147483648, 65519]), { device });
  // float16 (x) uint32 -> float16: the uint32 becomes Inf, Inf, Inf and 65504 (65519 rounds
  // down); 3 x 65504 then overflows float16.
  await expectTensor(half.mul(big), [4], "float16", [Infinity, NaN, -Infinity, Infinity]);
  await expectTensor(gyre.cast(big, "float16"), [4], "float16", [
    Infinity,
    Infinity,
    Infinity,
    65504,
  ]);
  half.dispose();
  big.dispose();
});

test("mod of negative int32 takes the divisor's sign (floored)", async (device) => {
  const a = gyre.tensor(new Int32Array([31, -2, -2147483648, 1075934726, 7, -7]), { device });
  const b = gyre.tensor(new Int32Array([-6, 1926758337, -10, -7, -2, 2]), { device });
  await expectTensor(gyre.mod(a, b), [6], "int32", [-5, 1926758335, -8, -1, -1, 1]);
  a.dispose();
  b.dispose();
});

test("division by numbers past 2^126 keeps its precision", async (device) => {
  const a = gyre.tensor([1e38, -3e38, 1, 2 ** 127], { device });
  const b = gyre.tensor([3e38, 3e38, 2 ** 127, 2 ** 127], { device });
  const q = await gyre.div(a, b).data();
  assert.ok(Math.abs(q[0] - 1e38 / 3e38) < 1e-7, `1e38 / 3e38 gave ${q[0]}`);
  assert.equal(q[1], -1);
  // A subnormal quotient: a GPU that flushes subnormals to zero may give 0.
  assert.ok(q[2] === 2 ** -127 || (device === "gpu" && q[2] === 0), `1 / 2^127 gave ${q[2]}`);
  assert.equal(q[3], 1);
  a.dispose();
  b.dispose();
});

test("pow(-1, +-Inf) is 1; softsign of huge values is +-1, of infinities NaN", async (device) => {
  const x = gyre.tensor([-1, -1, 2, 0.5], { device });
  const y = gyre.tensor([Infinity, -Infinity, Infinity, Infinity], { device });
  await expectTensor(gyre.pow(x, y), [4], "float32", [1, 1, Infinity, 0]);
  // PyTorch's x / (1 + |x|): the limit +-1 for finite values, Inf / Inf = NaN for infinities.
  const huge = gyre.tensor([3.4e38, -3.4e38, 2 ** 31, 1, Infinity, -Infinity], { device });
  await expectTensor(gyre.softsign(huge), [6], "float32", [1, -1, 1, 0.5, NaN, NaN]);
  x.dispose();
  y.dispose();
  huge.dispose();
});

/** Inputs near 0 (subnormals included), across the ranges' switch points, and the specials. */
const NEAR_ZERO = [
  ...[1e-7, 1e-20, 1e-38, 1e-40, 0.3, 0.5, 0.69, 2, 20, 88].flatMap((v) => [v, -v]),
  0,
  -0,
  Infinity,
  -Infinity,
  NaN,
];

test("expm1 and log1p keep their relative precision near 0, alone and fused", async (device) => {
  // Both were exact-cancellation tricks (Kahan's, Goldberg's) that GPU compilers folded away:
  // expm1(1e-7) and log1p(1e-7) came out 1.19e-7 on the GPU. The WASM reference rounds a float64
  // result once: 1 ULP of the exact value, with room for a double rounding.
  const gpu = device === "gpu";
  const x = gyre.tensor(NEAR_ZERO, { device });
  const logInputs = [...NEAR_ZERO, -1, -0.99, -0.5000001, 1, 1.999, 1e6, 3e38];
  const l = gyre.tensor(logInputs, { device });
  const options = { flush: gpu, signedZero: true };
  for (const fused of [false, true]) {
    // x * 1 is pending: the helper is inlined into the multiply's fused kernel.
    const [a, b] = fused ? [x.mul(1), l.mul(1)] : [x, l];
    await expectUlps(a.expm1(), NEAR_ZERO, Math.expm1, gpu ? expm1Ulps : () => 1, options);
    await expectUlps(b.log1p(), logInputs, Math.log1p, gpu ? log1pUlps : () => 1, options);
    if (fused) [a, b].forEach((t) => t.dispose());
  }
  x.dispose();
  l.dispose();
});
