/**
 * Every typed error: the right class, with `op`, `argument`, `expected` and `received` filled;
 * after each, the runtime still computes correctly and no storage leaked.
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import { devices, liveCounts, values } from "./_devices.ts";

const DEVICES = await devices();

type ErrorClass = new (...args: never[]) => gyre.GyreError;

/** Checks the error's class and fields. */
function checkError(
  e: unknown,
  cls: ErrorClass,
  op: string,
  argument: string,
  received?: RegExp,
): gyre.GyreError {
  assert.ok(e instanceof cls, `expected ${cls.name}, got ${e}`);
  assert.ok(e instanceof gyre.GyreError);
  assert.equal(e.name, cls.name);
  assert.equal(e.op, op);
  assert.equal(e.argument, argument);
  assert.ok(e.expected.length > 0, "expected is filled");
  assert.ok(e.received.length > 0, "received is filled");
  if (received) assert.match(e.received, received);
  assert.match(e.message, new RegExp(`^${op}: argument '${argument.replace(/[[\]]/g, "\\$&")}'`));
  return e;
}

/** After a failure: no live storage changed, and the runtime still computes on `device`. */
async function stillWorks(device: gyre.DeviceName, before: ReturnType<typeof liveCounts>) {
  assert.deepEqual(liveCounts(), before, "the failed call leaked storage");
  const b = gyre.tidy(() => {
    const a = gyre.tensor([1, 2, 3], { device });
    return a.mul(2).add(a.sum());
  });
  assert.deepEqual(await values(b), [8, 10, 12]);
  b.dispose();
  assert.deepEqual(liveCounts(), before, "the check itself leaked");
}

/** `fn` must throw `cls` with these fields, leak nothing, and leave the runtime working. */
async function expectThrow(
  device: gyre.DeviceName,
  fn: () => unknown,
  cls: ErrorClass,
  op: string,
  argument: string,
  received?: RegExp,
): Promise<gyre.GyreError> {
  // Compute pending (lazy) tensors first: an op may compute its operands before it validates
  // its options, which is storage the operands own, not a leak of the failed call.
  gyre.flush();
  const before = liveCounts();
  let caught: unknown = null;
  try {
    const r = fn();
    if (r instanceof Promise) await r;
  } catch (e) {
    caught = e;
  }
  assert.ok(caught !== null, `${op}: expected a ${cls.name}, nothing was thrown`);
  const e = checkError(caught, cls, op, argument, received);
  await stillWorks(device, before);
  return e;
}

function test(name: string, fn: (device: gyre.DeviceName) => Promise<void>): void {
  for (const device of DEVICES) Deno.test(`${name} [${device}]`, () => fn(device));
}

test("ShapeError: add of shapes that do not broadcast", async (device) => {
  const a = gyre.zeros([2, 3], { device });
  const b = gyre.zeros([4], { device });
  const e = await expectThrow(device, () => a.add(b), gyre.ShapeError, "add", "b", /\[4\]/);
  assert.match(e.expected, /\[2, 3\]/);
  await expectThrow(device, () => gyre.mul(b, a), gyre.ShapeError, "mul", "b");
  const cond = a.greater(0);
  await expectThrow(device, () => gyre.where(cond, a, b), gyre.ShapeError, "where", "b");
  a.dispose();
  b.dispose();
  cond.dispose();
});

test("AxisError: sum over an axis out of range or repeated", async (device) => {
  const x = gyre.zeros([2, 3], { device });
  const e = await expectThrow(
    device,
    () => x.sum({ axis: 2 }),
    gyre.AxisError,
    "sum",
    "options.axis",
    /^2$/,
  );
  assert.match(e.expected, /\[-2, 2\)/);
  await expectThrow(device, () => x.sum({ axis: -3 }), gyre.AxisError, "sum", "options.axis");
  await expectThrow(
    device,
    () => x.max({ axis: [0, -2] }),
    gyre.AxisError,
    "max",
    "options.axis",
    /\[0, -2\]/,
  );
  await expectThrow(device, () => x.sum({ axis: 0.5 }), gyre.AxisError, "sum", "options.axis");
  await expectThrow(device, () => x.mean({ axis: 5 }), gyre.AxisError, "mean", "options.axis");
  // A scalar operand becomes a tensor inside mean and sum; a bad axis must not leak it.
  await expectThrow(
    device,
    () => gyre.mean(5, { axis: 0 }),
    gyre.AxisError,
    "mean",
    "options.axis",
  );
  await expectThrow(device, () => gyre.sum(5, { axis: 0 }), gyre.AxisError, "sum", "options.axis");
  await expectThrow(device, () => gyre.concat([x, x], 2), gyre.AxisError, "concat", "axis");
  await expectThrow(device, () => gyre.stack([x, x], -4), gyre.AxisError, "stack", "axis");
  await expectThrow(device, () => x.expandDims(3), gyre.AxisError, "expandDims", "axis");
  x.dispose();
});

test("DTypeError: an unknown dtype", async (device) => {
  const x = gyre.ones([2], { device });
  const e = await expectThrow(
    device,
    () => x.cast("float64" as gyre.DType),
    gyre.DTypeError,
    "cast",
    "dtype",
    /float64/,
  );
  assert.match(e.expected, /float32/);
  await expectThrow(
    device,
    () => gyre.tensor([1], { dtype: "int64" as gyre.DType, device }),
    gyre.DTypeError,
    "tensor",
    "options.dtype",
  );
  await expectThrow(
    device,
    () => gyre.zeros([2], { dtype: "complex64" as gyre.DType, device }),
    gyre.DTypeError,
    "zeros",
    "options.dtype",
  );
  x.dispose();
});

test("ValueError: bad shapes and values in creation", async (device) => {
  await expectThrow(
    device,
    () => gyre.zeros([2, -1], { device }),
    gyre.ValueError,
    "zeros",
    "shape[1]",
    /^-1$/,
  );
  await expectThrow(
    device,
    () => gyre.ones([1.5], { device }),
    gyre.ValueError,
    "ones",
    "shape[0]",
    /1\.5/,
  );
  await expectThrow(
    device,
    () => gyre.full([NaN], 1, { device }),
    gyre.ValueError,
    "full",
    "shape[0]",
  );
  await expectThrow(
    device,
    () => gyre.arange(0, 5, 0, { device }),
    gyre.ValueError,
    "arange",
    "step",
  );
  await expectThrow(
    device,
    () => gyre.arange(0, Infinity, 1, { device }),
    gyre.ValueError,
    "arange",
    "stop",
  );
  await expectThrow(
    device,
    () => gyre.linspace(0, 1, -1, { device }),
    gyre.ValueError,
    "linspace",
    "num",
  );
  await expectThrow(
    device,
    () => gyre.tensor([1, "x" as unknown as number]),
    gyre.ValueError,
    "tensor",
    "data[1]",
  );
  await expectThrow(
    device,
    () => gyre.tensor([1, 2], { shape: [3], device }),
    gyre.ShapeError,
    "tensor",
    "options.shape",
  );
  const x = gyre.zeros([2, 0, 3], { device });
  await expectThrow(device, () => x.max({ axis: 1 }), gyre.ValueError, "max", "x");
  await expectThrow(device, () => x.min(), gyre.ValueError, "min", "x");
  await expectThrow(device, () => x.slice(2), gyre.ValueError, "slice", "ranges[0]");
  await expectThrow(
    device,
    () => x.slice(null, [0, 1, 0]),
    gyre.ValueError,
    "slice",
    "ranges[1][2]",
  );
  await expectThrow(
    device,
    () => gyre.add(x, "1" as unknown as number),
    gyre.ValueError,
    "add",
    "b",
  );
  await expectThrow(device, () => gyre.concat([]), gyre.ValueError, "concat", "tensors");
  x.dispose();
});

test("ShapeError: ragged nested arrays in tensor()", async (device) => {
  const e = await expectThrow(
    device,
    () => gyre.tensor([[1, 2], [3]], { device }),
    gyre.ShapeError,
    "tensor",
    "data[1]",
    /length 1/,
  );
  assert.match(e.expected, /length 2/);
  await expectThrow(
    device,
    () => gyre.tensor([[1, 2], 3] as unknown as number[][], { device }),
    gyre.ShapeError,
    "tensor",
    "data[1]",
  );
  await expectThrow(
    device,
    () => gyre.tensor([[[1], [2]], [[3], [4, 5]]], { device }),
    gyre.ShapeError,
    "tensor",
    "data[1][1]",
  );
});

test("ShapeError: reshape to the wrong size, and other shape ops", async (device) => {
  const x = gyre.arange(6, undefined, 1, { device });
  const e = await expectThrow(
    device,
    () => x.reshape([4, 2]),
    gyre.ShapeError,
    "reshape",
    "shape",
    /\[4, 2\]/,
  );
  assert.match(e.expected, /6 elements/);
  await expectThrow(device, () => x.reshape([4, -1]), gyre.ShapeError, "reshape", "shape");
  // The non-contiguous path (which copies) must validate before copying.
  const t = x.reshape([2, 3]).transpose();
  await expectThrow(device, () => t.reshape([5]), gyre.ShapeError, "reshape", "shape");
  await expectThrow(device, () => x.reshape([-2, 3]), gyre.ValueError, "reshape", "shape[0]");
  await expectThrow(device, () => t.squeeze(0), gyre.ShapeError, "squeeze", "axis");
  await expectThrow(device, () => x.broadcastTo([2, 4]), gyre.ShapeError, "broadcastTo", "x");
  const r = x.reshape([2, 3]);
  await expectThrow(device, () => gyre.concat([t, r], 0), gyre.ShapeError, "concat", "tensors[1]");
  r.dispose();
  await expectThrow(device, () => gyre.stack([x, t]), gyre.ShapeError, "stack", "tensors[1]");
  t.dispose();
  x.dispose();
});

test("DisposedError: use after dispose", async (device) => {
  const x = gyre.ones([3], { device });
  const y = gyre.ones([3], { device });
  x.dispose();
  await expectThrow(device, () => x.add(1), gyre.DisposedError, "add", "a");
  await expectThrow(device, () => y.add(x), gyre.DisposedError, "add", "b");
  await expectThrow(device, () => x.exp(), gyre.DisposedError, "exp", "x");
  await expectThrow(device, () => x.sum(), gyre.DisposedError, "sum", "x");
  await expectThrow(device, () => x.mean(), gyre.DisposedError, "mean", "x");
  await expectThrow(device, () => x.reshape([3]), gyre.DisposedError, "reshape", "tensor");
  await expectThrow(device, () => x.data(), gyre.DisposedError, "data", "tensor");
  await expectThrow(device, () => x.array(), gyre.DisposedError, "data", "tensor");
  await expectThrow(
    device,
    () => gyre.readAll([y, x]),
    gyre.DisposedError,
    "readAll",
    "tensors[1]",
  );
  await expectThrow(device, () => gyre.concat([y, x]), gyre.DisposedError, "concat", "tensor");
  await expectThrow(device, () => x.shape, gyre.DisposedError, "shape", "tensor");
  assert.equal(String(x), "Tensor(disposed)");
  y.dispose();
});

Deno.test({
  name: "DeviceError: mixing a gpu and a wasm tensor in one op",
  ignore: !DEVICES.includes("gpu"),
  fn: async () => {
    const g = gyre.ones([2], { device: "gpu" });
    const w = gyre.ones([2], { device: "wasm" });
    for (const device of ["gpu", "wasm"] as const) {
      const e = await expectThrow(device, () => g.add(w), gyre.DeviceError, "add", "b", /"wasm"/);
      assert.match(e.expected, /"gpu"/);
      await expectThrow(device, () => w.mul(g), gyre.DeviceError, "mul", "b", /"gpu"/);
      const cond = w.greater(0);
      await expectThrow(device, () => gyre.where(cond, g, 1), gyre.DeviceError, "where", "a");
      cond.dispose();
      await expectThrow(
        device,
        () => gyre.concat([g, w]),
        gyre.DeviceError,
        "concat",
        "tensors[1]",
      );
      await expectThrow(device, () => gyre.stack([w, g]), gyre.DeviceError, "concat", "tensors[1]");
    }
    // Converting first makes it work.
    const w2 = await w.to("gpu");
    const s = g.add(w2);
    assert.deepEqual(await values(s), [2, 2]);
    for (const t of [g, w, w2, s]) t.dispose();
  },
});

Deno.test({
  name: "OutOfMemoryError: a GPU buffer larger than the device's binding limit names the GPU",
  ignore: !DEVICES.includes("gpu"),
  fn: async () => {
    const limit = gyre.runtime().caps!.limits.maxStorageBufferBindingSize;
    const n = limit / 4 + 1; // one float32 over the limit
    const e = await expectThrow(
      "gpu",
      () => gyre.zeros([n], { device: "gpu" }),
      gyre.OutOfMemoryError,
      "zeros",
      "size",
    );
    assert.equal((e as gyre.OutOfMemoryError).device, "gpu");
    assert.match(e.message, /gpu device/);
  },
});

Deno.test("tidy refuses an async function with a typed error and leaks nothing", async () => {
  const before = liveCounts();
  assert.throws(
    () =>
      gyre.tidy(
        (async () => {
          const t = gyre.ones([2]);
          await Promise.resolve();
          return t;
        }) as unknown as () => gyre.Tensor,
      ),
    (e: unknown) =>
      e instanceof gyre.ValueError && /tidy/.test(String(e)) && /Promise/.test(String(e)),
  );
  assert.throws(() => gyre.tidy(3 as unknown as () => number), gyre.ValueError);
  await gyre.sync();
  assert.deepEqual(liveCounts(), before);
  // Usable afterwards.
  const t = gyre.tidy(() => gyre.ones([2]).add(1));
  assert.deepEqual([...(await t.data())], [2, 2]);
  t.dispose();
});

Deno.test("unaryOp and binaryOp name an op of the table, checked at run time", () => {
  assert.throws(
    () => gyre.unaryOp("exq" as gyre.UnaryOp),
    (e: unknown) =>
      e instanceof gyre.ValueError && /unaryOp/.test(String(e)) && /"exq"/.test(String(e)),
  );
  assert.throws(
    () => gyre.binaryOp("ad" as gyre.BinaryOp),
    (e: unknown) => e instanceof gyre.ValueError && /binaryOp/.test(String(e)),
  );
  // Inherited names are not ops either.
  assert.throws(() => gyre.unaryOp("toString" as gyre.UnaryOp), gyre.ValueError);
});

Deno.test("OutOfMemoryError: a tensor larger than WASM memory names WASM; the device stays usable", async () => {
  const e = await expectThrow(
    "wasm",
    () => gyre.zeros([1e6, 1e6], { device: "wasm" }),
    gyre.OutOfMemoryError,
    "zeros",
    "size",
  );
  assert.equal((e as gyre.OutOfMemoryError).device, "wasm");
  assert.match(e.message, /wasm device/);
  const t = gyre.ones([4], { device: "wasm" });
  assert.deepEqual([...(await t.data())], [1, 1, 1, 1]);
  t.dispose();
});

Deno.test("DeviceError: device options the runtime cannot serve", async () => {
  await assert.rejects(
    gyre.init({ device: "tpu" as "gpu" }),
    (e) => checkError(e, gyre.DeviceError, "init", "options.device", /tpu/) !== null,
  );
  const rt = await gyre.init({ device: "wasm" });
  try {
    assert.equal(rt.gpu, null);
    assert.equal(rt.device, "wasm");
    assert.equal(gyre.runtime(), rt);
    const before = liveCounts();
    await expectThrow(
      "wasm",
      () => gyre.tensor([1, 2], { device: "gpu" }),
      gyre.DeviceError,
      "tensor",
      "options.device",
    );
    await expectThrow(
      "wasm",
      () => gyre.zeros([2], { device: "gpu" }),
      gyre.DeviceError,
      "zeros",
      "options.device",
    );
    await expectThrow(
      "wasm",
      () => gyre.random.uniform([2], { device: "gpu" }),
      gyre.DeviceError,
      "random.uniform",
      "options.device",
    );
    const x = gyre.ones([2]);
    assert.equal(x.device, "wasm");
    await expectThrow("wasm", () => x.to("gpu"), gyre.DeviceError, "to", "device");
    await expectThrow(
      "wasm",
      () => x.to("npu" as "gpu"),
      gyre.DeviceError,
      "to",
      "device",
      /npu/,
    );
    x.dispose();
    assert.deepEqual(liveCounts(), before);
  } finally {
    // Later tests in this file get the auto runtime back.
    await gyre.init({ device: "auto" });
  }
});

Deno.test("errors carry their fields when constructed directly", () => {
  const e = new gyre.ShapeError({ op: "add", argument: "b", expected: "[2]", received: "[3]" });
  assert.equal(e.message, "add: argument 'b' expected [2], received [3]");
  assert.equal(e.name, "ShapeError");
  const g = new gyre.GpuError("validation", "read", "gpu work", "valid", "invalid");
  assert.equal(g.kind, "validation");
  assert.equal(g.op, "read");
});
