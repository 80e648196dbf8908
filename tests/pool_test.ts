/**
 * Pooling (src/ops/pool.ts) with hand-computed values on every device: output sizes in floor and
 * ceil mode (including the rule that the last window starts inside the input or left padding),
 * max pooling with padding, dilation, NaN and indices, the average's divisor near borders
 * (countIncludePad, ceil-mode overhang, divisorOverride), adaptive bins that do not divide the
 * input, dtypes, and typed errors that leave nothing allocated.
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import * as tuning from "../src/tuning.ts";
import { devices, expectClose, expectTensor, liveCounts } from "./_devices.ts";

const DEVICES = await devices();

function test(name: string, fn: (device: gyre.DeviceName) => Promise<void> | void): void {
  for (const device of DEVICES) {
    Deno.test({
      name: `${name} [${device}]`,
      // The GPU device is shared by the whole file (see tests/_harness.ts).
      sanitizeOps: false,
      sanitizeResources: false,
      fn: () => fn(device),
    });
  }
}

/** A float32 tensor of `values` in `shape`. */
function input(
  device: gyre.DeviceName,
  values: number[],
  shape: number[],
  dtype: gyre.DType = "float32",
) {
  return gyre.tensor(values, { device, shape, dtype });
}

const range = (n: number, f: (i: number) => number = (i) => i) =>
  Array.from({ length: n }, (_, i) => f(i));

test("maxPool2d: 2x2 windows, values and flat indices", async (device) => {
  const x = input(device, range(16), [1, 1, 4, 4]);
  await expectTensor(gyre.maxPool2d(x, { kernelSize: 2 }), [1, 1, 2, 2], "float32", [5, 7, 13, 15]);
  // Maxima at the top-left of each window: indices are h * W + w within the plane.
  const y = input(device, range(32, (i) => 100 - i), [2, 1, 4, 4]);
  const { values, indices } = gyre.maxPool2d(y, { kernelSize: 2, returnIndices: true });
  await expectTensor(values, [2, 1, 2, 2], "float32", [100, 98, 92, 90, 84, 82, 76, 74]);
  await expectTensor(indices, [2, 1, 2, 2], "int32", [0, 2, 8, 10, 0, 2, 8, 10]);
  x.dispose();
  y.dispose();
});

test("maxPool2d: padding never wins, kernel 3 stride 2 padding 1", async (device) => {
  // All values negative: a padding of 0 would win; PyTorch pads with -inf.
  const x = input(device, range(16, (i) => -1 - i), [1, 1, 4, 4]);
  const { values, indices } = gyre.maxPool2d(x, {
    kernelSize: 3,
    stride: 2,
    padding: 1,
    returnIndices: true,
  });
  // Output 2x2; windows start at rows/columns -1 and 1, so their first in-range element is the
  // maximum: (0,0), (0,1), (1,0), (1,1).
  await expectTensor(values, [1, 1, 2, 2], "float32", [-1, -2, -5, -6]);
  await expectTensor(indices, [1, 1, 2, 2], "int32", [0, 1, 4, 5]);
  x.dispose();
});

test("maxPool2d: ceilMode output sizes and the last-window rule", async (device) => {
  const x = input(device, range(5, (i) => i + 1), [1, 1, 1, 5]);
  // W = 5, kernel 2, stride 2: floor gives 2, ceil gives 3 (the last window holds one element).
  await expectTensor(gyre.maxPool2d(x, { kernelSize: [1, 2] }), [1, 1, 1, 2], "float32", [2, 4]);
  await expectTensor(
    gyre.maxPool2d(x, { kernelSize: [1, 2], ceilMode: true }),
    [1, 1, 1, 3],
    "float32",
    [2, 4, 5],
  );
  // Padding 1, ceil: (5 + 2 - 2 + 1) / 2 + 1 = 4, but the 4th window would start at column 6,
  // past the input and left padding (6 >= 5 + 1), so PyTorch drops it: 3 outputs.
  await expectTensor(
    gyre.maxPool2d(x, { kernelSize: [1, 2], padding: [0, 1], ceilMode: true }),
    [1, 1, 1, 3],
    "float32",
    [1, 3, 5],
  );
  // Kernel 1, stride 2 over W = 4: ceil would give 3 but the 3rd window starts at 4: 2 outputs.
  const y = input(device, [1, 2, 3, 4], [1, 1, 4]);
  await expectTensor(
    gyre.maxPool2d(y, { kernelSize: 1, stride: 2, ceilMode: true }),
    [1, 1, 2],
    "float32",
    [1, 3],
  );
  x.dispose();
  y.dispose();
});

test("maxPool2d: dilation", async (device) => {
  // 5x5, kernel 2, dilation 2 (span 3), stride 2: windows at rows/cols {0, 2} and {2, 4}.
  const x = input(device, range(25, (i) => 100 - i), [1, 1, 5, 5]);
  const { values, indices } = gyre.maxPool2d(x, {
    kernelSize: 2,
    dilation: 2,
    returnIndices: true,
  });
  await expectTensor(values, [1, 1, 2, 2], "float32", [100, 98, 90, 88]);
  await expectTensor(indices, [1, 1, 2, 2], "int32", [0, 2, 10, 12]);
  // Dilation on one axis only, stride 1: out = (5 - 3) / 1 + 1 = 3 columns, 5 rows.
  const r = gyre.maxPool2d(x, {
    kernelSize: [1, 2],
    dilation: [1, 2],
    stride: 1,
    returnIndices: true,
  });
  assert.deepEqual(r.values.shape, [1, 1, 5, 3]);
  await expectTensor(r.indices.slice(null, null, [0, 1], null), [1, 1, 1, 3], "int32", [0, 1, 2]);
  r.values.dispose();
  r.indices.dispose();
  x.dispose();
});

test("maxPool2d: NaN propagates with the last NaN's index; -inf windows keep the first", async (device) => {
  const x = input(device, [1, NaN, NaN, 0, -Infinity, -Infinity, -Infinity, -Infinity], [
    2,
    1,
    2,
    2,
  ]);
  const { values, indices } = gyre.maxPool2d(x, { kernelSize: 2, returnIndices: true });
  const got = Array.from(await values.data());
  assert.ok(Number.isNaN(got[0]), `NaN window gave ${got[0]}`);
  assert.equal(got[1], -Infinity);
  await expectTensor(indices, [2, 1, 1, 1], "int32", [2, 0]);
  values.dispose();
  // A lone -inf with padding around: still -inf at index 0, never the padding.
  const y = input(device, [-Infinity], [1, 1, 1]);
  const r = gyre.maxPool2d(y, { kernelSize: 3, stride: 1, padding: 1, returnIndices: true });
  await expectTensor(r.values, [1, 1, 1], "float32", [-Infinity]);
  await expectTensor(r.indices, [1, 1, 1], "int32", [0]);
  // Ties: the first maximum; -0 before +0 stays -0.
  const z = input(device, [-0, 0, 3, 3], [1, 1, 4]);
  const t = gyre.maxPool2d(z, { kernelSize: [1, 2], returnIndices: true });
  const v = Array.from(await t.values.data());
  assert.ok(Object.is(v[0], -0) && v[1] === 3, `got ${v}`);
  await expectTensor(t.indices, [1, 1, 2], "int32", [0, 2]);
  t.values.dispose();
  for (const a of [x, y, z]) a.dispose();
});

test("maxPool2d: a window entirely in padding (dilation) is -inf at PyTorch's start index", async (device) => {
  // H = W = 2, kernel 2, dilation 3, padding 1: the one window covers rows/cols -1 and 2, both
  // outside. PyTorch steps the start past 0 by the dilation (to 2) and reports index 2 * 2 + 2.
  const x = input(device, [1, 2, 3, 4], [1, 2, 2]);
  const r = gyre.maxPool2d(x, { kernelSize: 2, dilation: 3, padding: 1, returnIndices: true });
  await expectTensor(r.values, [1, 1, 1], "float32", [-Infinity]);
  await expectTensor(r.indices, [1, 1, 1], "int32", [6]);
  x.dispose();
});

test("maxPool2d: int32 and float16, 3-D input", async (device) => {
  const i = input(device, [5, -7, 2147483647, -2147483648, 0, 1], [1, 2, 3], "int32");
  // Rows [5, -7, INT_MAX] and [INT_MIN, 0, 1]: column maxima.
  await expectTensor(gyre.maxPool2d(i, { kernelSize: [2, 1] }), [1, 1, 3], "int32", [
    5,
    0,
    2147483647,
  ]);
  i.dispose();
  const h = input(device, [0.5, 1.5, 2049, -3], [1, 2, 2], "float16");
  // 2049 is not a float16: stored as 2048.
  await expectTensor(gyre.maxPool2d(h, { kernelSize: 2 }), [1, 1, 1], "float16", [2048]);
  h.dispose();
});

test("maxPool2d: empty batch and strided input", async (device) => {
  const e = gyre.zeros([0, 3, 4, 4], { device });
  await expectTensor(gyre.maxPool2d(e, { kernelSize: 2 }), [0, 3, 2, 2], "float32", []);
  e.dispose();
  // A transposed view (W and H swapped) is pooled as the values it shows.
  const x = input(device, range(16), [1, 1, 4, 4]);
  const t = x.transpose([0, 1, 3, 2]);
  await expectTensor(gyre.maxPool2d(t, { kernelSize: 2 }), [1, 1, 2, 2], "float32", [5, 13, 7, 15]);
  t.dispose();
  x.dispose();
});

test("avgPool2d: countIncludePad divisor near borders", async (device) => {
  const x = gyre.ones([1, 1, 3, 3], { device });
  // Kernel 2, padding 1: windows at -1 and 1. Counting padding, the corner window holds 1 of 4.
  await expectClose(
    gyre.avgPool2d(x, { kernelSize: 2, padding: 1 }),
    [1, 1, 2, 2],
    "float32",
    [0.25, 0.5, 0.5, 1],
  );
  await expectClose(
    gyre.avgPool2d(x, { kernelSize: 2, padding: 1, countIncludePad: false }),
    [1, 1, 2, 2],
    "float32",
    [1, 1, 1, 1],
  );
  // Sums [[1, 2], [2, 4]] divided by 4 whatever the window.
  await expectClose(
    gyre.avgPool2d(x, { kernelSize: 2, padding: 1, divisorOverride: 4 }),
    [1, 1, 2, 2],
    "float32",
    [0.25, 0.5, 0.5, 1],
  );
  await expectClose(
    gyre.avgPool2d(x, { kernelSize: 2, padding: 1, divisorOverride: -2 }),
    [1, 1, 2, 2],
    "float32",
    [-0.5, -1, -1, -2],
  );
  x.dispose();
});

test("avgPool2d: the ceil-mode overhang is never counted, the padding is", async (device) => {
  // W = 6, kernel 3, stride 2, padding 1, ceil: 4 windows starting at -1, 1, 3, 5. The last one
  // covers column 5, the padding column 6 and the overhang column 7: PyTorch clips it at the
  // padded border (W + padding = 7), so counting padding divides by 2, not 3.
  const x = input(device, [1, 2, 3, 4, 5, 6], [1, 1, 1, 6]);
  const options = {
    kernelSize: [1, 3] as [number, number],
    stride: [1, 2] as [number, number],
    padding: [0, 1] as [number, number],
    ceilMode: true,
  };
  await expectClose(gyre.avgPool2d(x, options), [1, 1, 1, 4], "float32", [1, 3, 5, 3]);
  await expectClose(
    gyre.avgPool2d(x, { ...options, countIncludePad: false }),
    [1, 1, 1, 4],
    "float32",
    [1.5, 3, 5, 6],
  );
  // Without padding, ceil mode: W = 5, kernel 2: the last window holds one element, divisor 1.
  const y = input(device, [1, 2, 3, 4, 5], [1, 1, 5]);
  await expectClose(
    gyre.avgPool2d(y, { kernelSize: [1, 2], ceilMode: true }),
    [1, 1, 3],
    "float32",
    [1.5, 3.5, 5],
  );
  x.dispose();
  y.dispose();
});

test("avgPool2d: NaN and infinities, float16", async (device) => {
  const x = input(device, [1, NaN, 2, 3, Infinity, 1, 2, 3, Infinity, -Infinity, 0, 0], [
    3,
    1,
    2,
    2,
  ]);
  const got = Array.from(await gyre.avgPool2d(x, { kernelSize: 2 }).data());
  assert.ok(Number.isNaN(got[0]) && got[1] === Infinity && Number.isNaN(got[2]), `got ${got}`);
  x.dispose();
  const h = input(device, [1, 2, 3, 5], [1, 2, 2], "float16");
  await expectClose(gyre.avgPool2d(h, { kernelSize: 2 }), [1, 1, 1], "float16", [2.75]);
  h.dispose();
});

test("adaptiveMaxPool2d: bins for 5 -> 3 are [0, 2), [1, 4), [3, 5)", async (device) => {
  const x = input(device, range(25, (i) => (i * 7) % 25), [1, 1, 5, 5]);
  // x[h][w] = (7 * (5h + w)) mod 25.
  const { values, indices } = gyre.adaptiveMaxPool2d(x, 3, { returnIndices: true });
  // Bin (0,0) covers elements 0, 1, 5, 6 -> values 0, 7, 10, 17: max 17 at index 6.
  const want: number[] = [];
  const wantIndex: number[] = [];
  const bins = [[0, 2], [1, 4], [3, 5]];
  for (const [h0, h1] of bins) {
    for (const [w0, w1] of bins) {
      let best = -1, at = -1;
      for (let h = h0; h < h1; h++) {
        for (let w = w0; w < w1; w++) {
          const v = (7 * (5 * h + w)) % 25;
          if (v > best) [best, at] = [v, 5 * h + w];
        }
      }
      want.push(best);
      wantIndex.push(at);
    }
  }
  assert.equal(want[0], 17);
  await expectTensor(values, [1, 1, 3, 3], "float32", want);
  await expectTensor(indices, [1, 1, 3, 3], "int32", wantIndex);
  x.dispose();
});

test("adaptiveAvgPool2d: bins for 5 -> 3, null keeps a size, output larger than input", async (device) => {
  const x = input(device, range(25), [1, 5, 5]);
  await expectClose(
    gyre.adaptiveAvgPool2d(x, 3),
    [1, 3, 3],
    "float32",
    [3, 4.5, 6, 10.5, 12, 13.5, 18, 19.5, 21],
  );
  // [1, null]: one bin over all rows, columns kept.
  await expectClose(gyre.adaptiveAvgPool2d(x, [1, null]), [1, 1, 5], "float32", [
    10,
    11,
    12,
    13,
    14,
  ]);
  // 2 -> 3: bins [0, 1), [0, 2), [1, 2).
  const y = input(device, [2, 4], [1, 1, 2]);
  await expectClose(gyre.adaptiveAvgPool2d(y, [1, 3]), [1, 1, 3], "float32", [2, 3, 4]);
  await expectTensor(gyre.adaptiveMaxPool2d(y, [1, 3]), [1, 1, 3], "float32", [2, 4, 4]);
  // Global average pooling, and a 7x7 -> 1 bin divides twice: sum / 7 / 7.
  const g = input(device, range(2 * 49, (i) => i), [2, 1, 7, 7]);
  await expectClose(gyre.adaptiveAvgPool2d(g, 1), [2, 1, 1, 1], "float32", [24, 73]);
  for (const a of [x, y, g]) a.dispose();
});

test("pool errors are typed and allocate nothing", (device) => {
  const x = gyre.ones([1, 1, 4, 4], { device });
  const flat = gyre.ones([4, 4], { device });
  const emptyPlane = gyre.ones([1, 1, 0, 4], { device });
  const ints = gyre.ones([1, 1, 2, 2], { device, dtype: "int32" });
  const bools = gyre.ones([1, 1, 2, 2], { device, dtype: "bool" });
  const before = liveCounts();
  const bad = (fn: () => unknown, type: new (...args: never[]) => Error, argument: string) =>
    assert.throws(fn, (e: unknown) => {
      assert.ok(e instanceof type, `${e}`);
      assert.equal((e as gyre.GyreError).argument, argument);
      return true;
    });
  bad(() => gyre.maxPool2d(x, { kernelSize: 0 }), gyre.ValueError, "options.kernelSize");
  bad(() => gyre.maxPool2d(x, { kernelSize: 1.5 }), gyre.ValueError, "options.kernelSize");
  bad(() => gyre.maxPool2d(x, {} as gyre.MaxPool2dOptions), gyre.ValueError, "options.kernelSize");
  bad(
    () => gyre.maxPool2d(x, { kernelSize: [2, 2, 2] as unknown as number }),
    gyre.ValueError,
    "options.kernelSize",
  );
  bad(() => gyre.maxPool2d(x, { kernelSize: 2, stride: 0 }), gyre.ValueError, "options.stride");
  bad(() => gyre.maxPool2d(x, { kernelSize: 2, dilation: 0 }), gyre.ValueError, "options.dilation");
  bad(() => gyre.maxPool2d(x, { kernelSize: 2, padding: -1 }), gyre.ValueError, "options.padding");
  // Padding at most kernel / 2: 3 -> 1, 2 -> 1.
  bad(() => gyre.maxPool2d(x, { kernelSize: 3, padding: 2 }), gyre.ValueError, "options.padding");
  bad(
    () => gyre.avgPool2d(x, { kernelSize: [2, 1], padding: [1, 1] }),
    gyre.ValueError,
    "options.padding",
  );
  bad(
    () => gyre.avgPool2d(x, { kernelSize: 2, divisorOverride: 0 }),
    gyre.ValueError,
    "options.divisorOverride",
  );
  bad(() => gyre.maxPool2d(x, { kernelSize: 5 }), gyre.ShapeError, "x");
  bad(
    () => gyre.maxPool2d(x, { kernelSize: 2, ceilMode: 1 as unknown as boolean }),
    gyre.ValueError,
    "options.ceilMode",
  );
  bad(() => gyre.maxPool2d(flat, { kernelSize: 2 }), gyre.ShapeError, "x");
  bad(() => gyre.adaptiveAvgPool2d(flat, 2), gyre.ShapeError, "x");
  bad(() => gyre.maxPool2d(emptyPlane, { kernelSize: 1 }), gyre.ShapeError, "x");
  bad(() => gyre.adaptiveAvgPool2d(x, 0), gyre.ValueError, "outputSize");
  bad(() => gyre.adaptiveMaxPool2d(x, [2, 0]), gyre.ValueError, "outputSize");
  bad(() => gyre.adaptiveMaxPool2d(x, [2, -1]), gyre.ValueError, "outputSize");
  bad(() => gyre.avgPool2d(ints, { kernelSize: 2 }), gyre.DTypeError, "x");
  bad(() => gyre.adaptiveAvgPool2d(ints, 1), gyre.DTypeError, "x");
  bad(() => gyre.maxPool2d(bools, { kernelSize: 2 }), gyre.DTypeError, "x");
  bad(() => gyre.maxPool2d(3 as unknown as gyre.Tensor, { kernelSize: 2 }), gyre.ValueError, "x");
  assert.deepEqual(liveCounts(), before);
  for (const a of [x, flat, emptyPlane, ints, bools]) a.dispose();
});

test("pooling frees its temporaries (strided copies, float16 widening)", async (device) => {
  const x = gyre.tidy(() => gyre.random.uniform([2, 3, 9, 8], { device }).transpose([0, 1, 3, 2]));
  const h = gyre.ones([1, 2, 5, 5], { device, dtype: "float16" });
  // Compute the (lazy) inputs and warm the GPU buffer pool, then count.
  gyre.maxPool2d(x, { kernelSize: 2 }).dispose();
  gyre.maxPool2d(h, { kernelSize: 2 }).dispose();
  const before = liveCounts();
  const { values, indices } = gyre.maxPool2d(x, { kernelSize: 3, padding: 1, returnIndices: true });
  const outputs = [
    values,
    indices,
    gyre.avgPool2d(h, { kernelSize: 2, ceilMode: true }),
    gyre.adaptiveMaxPool2d(h, 3),
    gyre.adaptiveAvgPool2d(x, [2, 3]),
  ];
  await gyre.readAll(outputs);
  for (const t of outputs) t.dispose();
  assert.deepEqual(liveCounts(), before);
  x.dispose();
  h.dispose();
});

if (DEVICES.includes("gpu")) {
  Deno.test("planPool: unrolled small windows, teams for large ones where subgroups exist", () => {
    const caps = gyre.runtime().caps!;
    const withSubgroups = { ...caps, subgroups: true, subgroupMinSize: 32, subgroupMaxSize: 32 };
    const without = { ...caps, subgroups: false };
    const bins = {
      window: "regular",
      kernel: [32, 32],
      stride: [32, 32],
      padding: [0, 0],
      dilation: [1, 1],
      inWidth: 224,
      outWidth: 7,
      alignedOffset: true,
    } as const;
    const large = tuning.planPool(withSubgroups, bins);
    assert.deepEqual([large.variant, large.teamSize, large.outputsPerInvocation], ["team", 32, 1]);
    assert.equal(large.vec4, false);
    assert.equal(tuning.planPool(without, bins).variant, "looped");
    // Teams fit the smallest subgroup.
    assert.equal(tuning.planPool({ ...withSubgroups, subgroupMinSize: 8 }, bins).teamSize, 8);
    const small = { ...bins, kernel: [7, 7], stride: [7, 7], inWidth: 49 } as const;
    assert.equal(tuning.planPool(withSubgroups, small).variant, "unrolled");
    assert.equal(tuning.planPool(withSubgroups, { ...bins, window: "adaptive" }).variant, "team");
    // Regular windows unroll up to 16x16, adaptive bins up to 11x11.
    const side = (n: number, window: "regular" | "adaptive" = "regular") =>
      tuning.planPool(withSubgroups, { ...bins, window, kernel: [n, n], stride: [n, n] }).variant;
    assert.deepEqual([side(16), side(17), side(11, "adaptive"), side(12, "adaptive")], [
      "unrolled",
      "team",
      "unrolled",
      "team",
    ]);
    // Past 11x11, few outputs go to teams on a GPU, never on a software adapter.
    const few = {
      ...bins,
      kernel: [14, 14],
      stride: [1, 1],
      outWidth: 46,
      totalOutputs: 4330,
    } as const;
    assert.deepEqual(
      [
        tuning.planPool({ ...withSubgroups, isFallbackAdapter: false }, few).variant,
        tuning.planPool({ ...withSubgroups, isFallbackAdapter: false }, {
          ...few,
          totalOutputs: 15212,
        })
          .variant,
        tuning.planPool({ ...withSubgroups, isFallbackAdapter: true }, few).variant,
      ],
      ["team", "unrolled", "unrolled"],
    );
    // A GPU: at most 2 outputs an invocation from stride 4, 4 at strides 2 and 3 from windows 10
    // wide, halved while there are fewer than 65536 invocations; unknown counts are many.
    const gpu = { ...withSubgroups, isFallbackAdapter: false };
    const opi = (problem: Parameters<typeof tuning.planPool>[1]) =>
      tuning.planPool(gpu, problem).outputsPerInvocation;
    const wide = { ...bins, kernel: [7, 7], stride: [4, 4], inWidth: 1075, outWidth: 268 } as const;
    const wider = { ...wide, kernel: [11, 11], stride: [3, 3], inWidth: 812 } as const;
    assert.deepEqual(
      [
        opi(wide),
        opi({ ...wide, totalOutputs: 131072 }),
        opi({ ...wide, totalOutputs: 131071 }),
        opi({ ...wide, totalOutputs: 65535 }),
        opi(wider),
        opi({ ...wider, kernel: [9, 9], inWidth: 810 }),
        opi({ ...wider, totalOutputs: 262143 }),
      ],
      [2, 2, 1, 1, 4, 2, 2],
    );
    // A software adapter: 4 outputs an invocation at any stride.
    const strided = {
      ...bins,
      kernel: [3, 3],
      stride: [2, 2],
      inWidth: 222,
      outWidth: 110,
    } as const;
    const outputs = (c: gyre.DeviceCaps) => tuning.planPool(c, strided).outputsPerInvocation;
    assert.deepEqual(
      [
        outputs({ ...withSubgroups, isFallbackAdapter: false }),
        outputs({ ...withSubgroups, isFallbackAdapter: true }),
      ],
      [2, 4],
    );
    // Forced: a team wider than the subgroups shrinks to them, the workgroup to whole teams;
    // without subgroups, no teams.
    const team = { variant: "team", teamSize: 64, workgroupSize: 48 } as const;
    const forced = tuning.planPool(withSubgroups, small, team);
    assert.deepEqual([forced.variant, forced.teamSize, forced.workgroupSize], ["team", 32, 256]);
    assert.equal(tuning.planPool(without, small, team).variant, "unrolled");
    assert.equal(tuning.planPool(without, bins, team).variant, "looped");
  });
}
