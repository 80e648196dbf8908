/**
 * Unit tests of softmax, logSoftmax, layerNorm, rmsNorm, groupNorm and batchNorm: hand-computed
 * values for every semantic corner (special values, axes, affine parameters, returned batch
 * statistics) on both devices, the GPU again under forced plan variants, typed errors that leave
 * no allocation behind, and the row plan's rule.
 * @module
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import * as tuning from "../src/tuning.ts";
import { devices, expectClose, liveCounts } from "./_devices.ts";
import { H200 } from "./_caps.ts";

const DEVICES = await devices();
const caps = gyre.runtime().caps ?? undefined;

/** Plan variants the GPU repeats the hand-computed cases under. */
const GPU_VARIANTS: (Partial<tuning.RowsChoice> | null)[] = [
  null,
  { variant: "chunked", threadsPerRow: 2, registers: 1, combineThreads: 2 },
  { threadsPerRow: 1 },
  { subgroups: false, threadsPerRow: 4 },
  { vec4: false, threadsPerRow: 64 },
];

/** Runs `body` on every device, and on the GPU under every variant. */
function eachDevice(name: string, body: (device: gyre.DeviceName) => Promise<void>): void {
  for (const device of DEVICES) {
    const variants = device === "gpu" ? GPU_VARIANTS : [null];
    Deno.test({
      name: `${name} (${device})`,
      sanitizeOps: false,
      sanitizeResources: false,
      fn: async () => {
        for (const v of variants) {
          tuning.setPlanOverride("rows", v);
          try {
            await body(device);
          } catch (e) {
            if (e instanceof Error) e.message = `under plan ${JSON.stringify(v)}: ${e.message}`;
            throw e;
          } finally {
            tuning.setPlanOverride("rows", null);
          }
        }
      },
    });
  }
}

const SOFTMAX_123 = [0.09003057317038046, 0.24472847105479767, 0.6652409557748219];
const LOG_SOFTMAX_123 = [-2.4076059644443806, -1.4076059644443804, -0.4076059644443804];

eachDevice("softmax and logSoftmax of [1, 2, 3], along either axis", async (device) => {
  const x = gyre.tensor([1, 2, 3], { device });
  await expectClose(gyre.softmax(x), [3], "float32", SOFTMAX_123, 2e-7);
  await expectClose(gyre.logSoftmax(x), [3], "float32", LOG_SOFTMAX_123, 2e-7);
  // Axis 0 of the transposed matrix: the same rows, read through strides.
  const m = gyre.tensor([[1, 5], [2, 5], [3, 5]], { device });
  await expectClose(
    gyre.softmax(m, { axis: 0 }),
    [3, 2],
    "float32",
    [SOFTMAX_123[0], 1 / 3, SOFTMAX_123[1], 1 / 3, SOFTMAX_123[2], 1 / 3],
    2e-7,
  );
  await expectClose(
    gyre.logSoftmax(m, { axis: -2 }),
    [3, 2],
    "float32",
    [
      LOG_SOFTMAX_123[0],
      -Math.log(3),
      LOG_SOFTMAX_123[1],
      -Math.log(3),
      LOG_SOFTMAX_123[2],
      -Math.log(3),
    ],
    2e-7,
  );
  for (const t of [x, m]) t.dispose();
});

eachDevice("softmax special values follow PyTorch", async (device) => {
  const rows = [
    [1000, 1000, 999], // max-shifted: no overflow
    [0, -Infinity, 0], // -inf contributes exp(-inf) = 0
    [-Infinity, -Infinity, -Infinity], // all -inf: NaN
    [1, NaN, 2], // NaN spreads over its row
    [1, Infinity, 2], // +inf: inf - inf = NaN
    [-0, 0, -0], // signed zeros are equal
  ];
  const x = gyre.tensor(rows, { device });
  const a = Math.exp(-1);
  const nan3 = [NaN, NaN, NaN];
  await expectClose(gyre.softmax(x), [6, 3], "float32", [
    ...[1 / (2 + a), 1 / (2 + a), a / (2 + a)],
    ...[0.5, 0, 0.5],
    ...nan3,
    ...nan3,
    ...nan3,
    ...[1 / 3, 1 / 3, 1 / 3],
  ], 2e-7);
  const l = Math.log(2 + a);
  await expectClose(gyre.logSoftmax(x), [6, 3], "float32", [
    ...[-l, -l, -1 - l],
    ...[-Math.log(2), -Infinity, -Math.log(2)],
    ...nan3,
    ...nan3,
    ...nan3,
    ...[-Math.log(3), -Math.log(3), -Math.log(3)],
  ], 2e-7);
  // A row of one element is 1 (log: 0), unless it is not finite.
  const one = gyre.tensor([[5], [-Infinity], [Infinity]], { device });
  await expectClose(gyre.softmax(one), [3, 1], "float32", [1, NaN, NaN]);
  await expectClose(gyre.logSoftmax(one), [3, 1], "float32", [0, NaN, NaN]);
  // A 0-d tensor is a row of one; empty tensors stay empty.
  const scalar = gyre.tensor(7, { device });
  await expectClose(gyre.softmax(scalar), [], "float32", [1]);
  const empty = gyre.zeros([0, 3], { device });
  await expectClose(gyre.softmax(empty, { axis: 0 }), [0, 3], "float32", []);
  for (const t of [x, one, scalar, empty]) t.dispose();
});

eachDevice("softmax in float16 computes in float32 and rounds once", async (device) => {
  const x = gyre.tensor([1, 2, 3], { device, dtype: "float16" });
  // The nearest halves of the float32 results.
  await expectClose(gyre.softmax(x), [3], "float16", [
    0.09002685546875,
    0.2447509765625,
    0.6650390625,
  ], 0);
  x.dispose();
});

eachDevice("layerNorm of [1, 2, 3, 4]: eps, weight, bias, axes", async (device) => {
  const x = gyre.tensor([1, 2, 3, 4], { device });
  // mean 2.5, biased variance 1.25.
  const z = [-1.3416354199689269, -0.447211806656309, 0.447211806656309, 1.3416354199689269];
  await expectClose(gyre.layerNorm(x), [4], "float32", z, 1e-6);
  await expectClose(
    gyre.layerNorm(x, { eps: 0 }),
    [4],
    "float32",
    [-3, -1, 1, 3].map((v) => v / Math.sqrt(5)),
    1e-6,
  );
  const weight = gyre.tensor([1, 2, -1, 0.5], { device });
  const bias = gyre.tensor([0, 1, 0, -1], { device });
  await expectClose(
    gyre.layerNorm(x, { weight, bias }),
    [4],
    "float32",
    [z[0], 2 * z[1] + 1, -z[2], 0.5 * z[3] - 1],
    1e-6,
  );
  // Over both axes of [[1, 2], [3, 4]] equals the flat case; a broadcast weight of shape [2]
  // repeats along the first normalised axis.
  const m = gyre.tensor([[1, 2], [3, 4]], { device });
  const w2 = gyre.tensor([2, 3], { device });
  await expectClose(
    gyre.layerNorm(m, { axis: [0, 1], weight: w2 }),
    [2, 2],
    "float32",
    [2 * z[0], 3 * z[1], 2 * z[2], 3 * z[3]],
    1e-6,
  );
  // Over axis 0 (a non-last axis): each column [1, 3] and [2, 4] becomes [-1, 1].
  await expectClose(gyre.layerNorm(m, { axis: 0, eps: 0 }), [2, 2], "float32", [-1, -1, 1, 1]);
  // Constant rows: (x - mean) = 0. (eps 1 keeps rstd at 1: GPU division is within 2.5 ULP, so
  // the mean of [7, 7, 7] may be off by an ULP of 7, which 1 / sqrt(1e-5) would magnify.)
  const c = gyre.tensor([[7, 7, 7]], { device });
  await expectClose(gyre.layerNorm(c, { eps: 1 }), [1, 3], "float32", [0, 0, 0], 1e-6);
  // An infinity makes its row NaN; other rows are untouched.
  const inf = gyre.tensor([[1, Infinity], [1, 3]], { device });
  await expectClose(gyre.layerNorm(inf, { eps: 0 }), [2, 2], "float32", [NaN, NaN, -1, 1]);
  for (const t of [x, weight, bias, m, w2, c, inf]) t.dispose();
});

eachDevice("rmsNorm: x / sqrt(mean(x^2) + eps) * weight", async (device) => {
  const x = gyre.tensor([[3, 4], [0, 0]], { device });
  await expectClose(
    gyre.rmsNorm(x),
    [2, 2],
    "float32",
    [0.8485281034827336, 1.1313708046436448, 0, 0],
    1e-6,
  );
  const weight = gyre.tensor([2, -1], { device });
  await expectClose(
    gyre.rmsNorm(x, { weight, eps: 0 }),
    [2, 2],
    "float32",
    // A zero row with eps 0 is 0 / 0.
    [2 * 0.848528137423857, -1.131370849898476, NaN, NaN],
    1e-6,
  );
  for (const t of [x, weight]) t.dispose();
});

eachDevice("groupNorm with 2 groups, spatial positions and per-channel affine", async (device) => {
  // N = 1, C = 4: groups {1, 3} and {10, 20}, each normalised to [-1, 1].
  const x = gyre.tensor([[1, 3, 10, 20]], { device });
  await expectClose(gyre.groupNorm(x, { groups: 2, eps: 0 }), [1, 4], "float32", [-1, 1, -1, 1]);
  // N = 2, C = 2, 2 positions, 1 group per channel: like instance norm.
  const y = gyre.tensor([[[0, 2], [5, 5]], [[1, 1], [-1, 3]]], { device });
  const weight = gyre.tensor([2, 3], { device });
  const bias = gyre.tensor([10, 20], { device });
  await expectClose(
    gyre.groupNorm(y, { groups: 2, eps: 0, weight, bias }),
    [2, 2, 2],
    "float32",
    [8, 12, NaN, NaN, NaN, NaN, 17, 23],
    1e-6,
  );
  // One group over everything of a sample: layerNorm over axes [1, 2].
  await expectClose(
    gyre.groupNorm(y, { groups: 1 }),
    [2, 2, 2],
    "float32",
    [-3, -1, 2, 2].map((v) => v / Math.sqrt(4.5 + 1e-5)).concat(
      [0, 0, -2, 2].map((v) => v / Math.sqrt(2 + 1e-5)),
    ),
    1e-6,
  );
  for (const t of [x, y, weight, bias]) t.dispose();
});

eachDevice("batchNorm inference uses the running statistics", async (device) => {
  // N = 2, C = 2: channel 0 has mean 1, variance 4; channel 1 mean 2, variance 1.
  const x = gyre.tensor([[1, 2], [3, 4]], { device });
  const mean = gyre.tensor([1, 2], { device });
  const variance = gyre.tensor([4, 1], { device });
  await expectClose(gyre.batchNorm(x, { mean, variance, eps: 0 }), [2, 2], "float32", [0, 0, 1, 2]);
  const weight = gyre.tensor([10, -1], { device });
  const bias = gyre.tensor([1, 1], { device });
  await expectClose(
    gyre.batchNorm(x, { mean, variance, weight, bias, eps: 0 }),
    [2, 2],
    "float32",
    [1, 1, 11, -1],
  );
  // NCHW: channel statistics broadcast over the spatial axes.
  const img = gyre.tensor([[[[1, 3]], [[2, 4]]]], { device }); // [1, 2, 1, 2]
  await expectClose(
    gyre.batchNorm(img, { mean, variance, eps: 0 }),
    [1, 2, 1, 2],
    "float32",
    [0, 1, 0, 2],
  );
  for (const t of [x, mean, variance, weight, bias, img]) t.dispose();
});

eachDevice("batchNorm training: output, batch statistics and running updates", async (device) => {
  const x = gyre.tensor([[1, 10], [3, 30]], { device });
  const runningMean = gyre.tensor([0, 0], { device });
  const runningVariance = gyre.tensor([1, 1], { device });
  const r = gyre.batchNorm(x, {
    training: true,
    eps: 0,
    mean: runningMean,
    variance: runningVariance,
    momentum: 0.1,
  });
  await expectClose(r.output, [2, 2], "float32", [-1, -1, 1, 1]);
  await expectClose(r.mean, [2], "float32", [2, 20]);
  await expectClose(r.variance, [2], "float32", [1, 100]); // biased: divided by n = 2
  await expectClose(r.unbiasedVariance, [2], "float32", [2, 200]); // divided by n - 1
  await expectClose(r.runningMean!, [2], "float32", [0.2, 2]);
  await expectClose(r.runningVariance!, [2], "float32", [0.9 + 0.2, 0.9 + 20]);
  // Without running statistics there is nothing to update; float16 input keeps float32 stats.
  const h = gyre.tensor([[[1, 3]], [[5, 7]]], { device, dtype: "float16" }); // [2, 1, 2]
  const weight = gyre.tensor([2], { device });
  const s = gyre.batchNorm(h, { training: true, eps: 0, weight });
  assert.equal(s.runningMean, undefined);
  const d = Math.sqrt(5);
  await expectClose(s.output, [2, 1, 2], "float16", [-3, -1, 1, 3].map((v) => (2 * v) / d), 1e-3);
  await expectClose(s.mean, [1], "float32", [4]);
  await expectClose(s.variance, [1], "float32", [5]);
  await expectClose(s.unbiasedVariance, [1], "float32", [20 / 3], 1e-6);
  for (const t of [x, runningMean, runningVariance, h, weight, s.unbiasedVariance]) t.dispose();
});

for (const device of DEVICES) {
  Deno.test(`norm errors are typed and leave nothing allocated (${device})`, async () => {
    const x = gyre.tensor([[1, 2, 3], [4, 5, 6]], { device });
    const img = gyre.zeros([2, 4, 3], { device });
    const c4 = gyre.ones([4], { device });
    const c3 = gyre.ones([3], { device });
    const ints = gyre.tensor([1, 2], { device, dtype: "int32" });
    const other = DEVICES.length > 1
      ? gyre.ones([3], { device: device === "gpu" ? "wasm" : "gpu" })
      : gyre.ones([3], { device });
    const wide = gyre.ones([2, 3, 1], { device });
    const single = gyre.ones([1, 4], { device });
    const inputs = [x, img, c4, c3, ints, other, wide, single];
    // Computed first (creation may be deferred), so that only the failing calls are measured.
    await Promise.all(inputs.map((t) => t.data()));
    const before = liveCounts();
    const expect = (
      f: () => unknown,
      type: typeof gyre.GyreError,
      argument: string,
    ) => {
      assert.throws(f, (e: unknown) => {
        assert.ok(e instanceof type, `${e} is not a ${type.name}`);
        assert.equal((e as gyre.GyreError).argument, argument);
        return true;
      });
      assert.deepEqual(liveCounts(), before, `${f} left allocations behind`);
    };
    expect(() => gyre.softmax(x, { axis: 2 }), gyre.AxisError, "options.axis");
    expect(() => gyre.logSoftmax(x, { axis: -3 }), gyre.AxisError, "options.axis");
    expect(() => gyre.layerNorm(x, { axis: [0, 5] }), gyre.AxisError, "options.axis");
    expect(() => gyre.layerNorm(x, { axis: [1, -1] }), gyre.AxisError, "options.axis");
    expect(() => gyre.softmax(ints), gyre.DTypeError, "x");
    expect(() => gyre.layerNorm(x, { weight: c4 }), gyre.ShapeError, "options.weight");
    expect(() => gyre.layerNorm(x, { bias: wide }), gyre.ShapeError, "options.bias");
    expect(() => gyre.rmsNorm(x, { weight: ints }), gyre.DTypeError, "options.weight");
    expect(() => gyre.layerNorm(x, { eps: -1 }), gyre.ValueError, "options.eps");
    expect(() => gyre.groupNorm(img, { groups: 3 }), gyre.ValueError, "options.groups");
    expect(() => gyre.groupNorm(img, { groups: 0 }), gyre.ValueError, "options.groups");
    expect(() => gyre.groupNorm(c4, { groups: 1 }), gyre.ShapeError, "x");
    expect(() => gyre.groupNorm(img, { groups: 2, weight: c3 }), gyre.ShapeError, "options.weight");
    expect(() => gyre.batchNorm(img, {}), gyre.ValueError, "options.mean");
    expect(() => gyre.batchNorm(img, { mean: c4 }), gyre.ValueError, "options.variance");
    expect(
      () => gyre.batchNorm(img, { mean: c3, variance: c4 }),
      gyre.ShapeError,
      "options.mean",
    );
    expect(
      () => gyre.batchNorm(img, { training: true, momentum: 2 }),
      gyre.ValueError,
      "options.momentum",
    );
    expect(
      () => gyre.batchNorm(single, { training: true }),
      gyre.ValueError,
      "x",
    );
    if (DEVICES.length > 1) {
      expect(() => gyre.layerNorm(x, { weight: other }), gyre.DeviceError, "options.weight");
    }
    for (const t of inputs) t.dispose();
  });
}

Deno.test("planRows: the rule and what overrides may change", () => {
  // The GPU rule (this machine's adapter may be a software one, whose rule is below).
  const hardware = caps && { ...caps, isFallbackAdapter: false };
  const plan = (problem: Parameters<typeof tuning.planRows>[1]) =>
    tuning.planRows(hardware, problem);
  // 4096 floats: 128 lanes x 8 vec4 registers, one pass.
  const wide = plan({ rows: 4096, rowLength: 4096, vec4: true });
  assert.equal(wide.variant, "single");
  assert.equal(wide.threadsPerRow, 128);
  assert.equal(wide.registers, 8);
  assert.equal(wide.vec4, true);
  // Short rows share a workgroup, a lane per unit: a row of 8 vec4 units takes 8 lanes.
  const short = plan({ rows: 1 << 16, rowLength: 32, vec4: true });
  assert.deepEqual([short.threadsPerRow, short.registers, short.workgroupSize], [8, 1, 256]);
  // float16: 8 units per lane too.
  const half = plan({ rows: 4096, rowLength: 4096, vec4: true, elementBytes: 2 });
  assert.deepEqual([half.threadsPerRow, half.registers], [128, 8]);
  // Beyond 8 units per lane over 1024 lanes, or few long rows: chunked, with a merge pass.
  const long = plan({ rows: 4, rowLength: 1 << 20, vec4: true });
  assert.equal(long.variant, "chunked");
  assert.equal(long.chunks, (1 << 20) / 4 / (256 * 4));
  assert.ok(long.combineThreads >= 1 && long.combineThreads <= 256);
  // Statistics wanted: chunked even when a row would fit.
  assert.equal(plan({ rows: 64, rowLength: 64, stats: true }).variant, "chunked");
  // A strided axis with the kept axis innermost: one lane per row.
  const across = plan({ rows: 4096, rowLength: 4096, acrossRows: true });
  assert.deepEqual([across.threadsPerRow, across.variant], [1, "chunked"]);
  assert.equal(across.combine, "none");
  // A software adapter: few lanes of up to 32 units, chunks of 64 lanes x 8 units past 128
  // lanes' worth.
  const soft = { ...(caps ?? H200), isFallbackAdapter: true };
  const lanes = (n: number) => {
    const c = tuning.planRows(soft, { rows: 100, rowLength: n, vec4: false });
    return [c.variant, c.threadsPerRow, c.registers].join("/");
  };
  assert.deepEqual([lanes(17), lanes(115), lanes(233), lanes(646), lanes(13034)], [
    "single/4/8",
    "single/4/32",
    "single/16/16",
    "single/32/32",
    "chunked/64/8",
  ]);
  // Overrides: vec4 only where the layout allows; subgroups only where the device has them.
  const forced = tuning.planRows(caps, { rows: 10, rowLength: 1000, vec4: false }, {
    vec4: true,
    subgroups: false,
    threadsPerRow: 64,
  });
  assert.equal(forced.vec4, false);
  assert.equal(forced.combine, "shared");
  assert.equal(forced.registers, 16); // ceil(1000 / 64) rounded up to a power of two
  assert.equal(tuning.rowsCombine(undefined, 1, true), "none");
  assert.equal(tuning.rowsCombine(undefined, 64, true), "shared");
  if (caps?.subgroups && caps.subgroupMinSize >= 4) {
    assert.equal(tuning.rowsCombine(caps, caps.subgroupMinSize, true), "shuffle");
    assert.equal(tuning.rowsCombine(caps, 1024, true), "subgroup");
    assert.equal(tuning.rowsCombine(caps, 1024, false), "shared");
  }
});

for (const device of DEVICES) {
  Deno.test(`norm ops free their temporaries (${device})`, async () => {
    const x = gyre.tensor(Array.from({ length: 2 * 6 * 5 }, (_, i) => Math.sin(i)), {
      shape: [2, 6, 5],
      device,
    });
    const w = gyre.tensor([1, 2, 3, 4, 5, 6], { device });
    const h = gyre.tensor([1, 2, 3, 4, 5, 6], { device, dtype: "float16" });
    await Promise.all([x, w, h].map((t) => t.data()));
    const before = liveCounts();
    const variants = device === "gpu" ? GPU_VARIANTS : [null];
    for (const v of variants) {
      tuning.setPlanOverride("rows", v);
      try {
        const outputs = [
          gyre.softmax(x, { axis: 1 }),
          gyre.logSoftmax(x),
          gyre.layerNorm(x, { axis: [0, 2] }),
          gyre.rmsNorm(x, { axis: 1, weight: h }), // float16 weight: a float32 copy is made
          gyre.groupNorm(x, { groups: 3, weight: w, bias: w }),
          gyre.batchNorm(x, { mean: w, variance: w }),
          ...Object.values(gyre.batchNorm(x, { training: true, mean: w, variance: h })),
        ];
        await gyre.readAll(outputs);
        for (const t of outputs) t.dispose();
      } finally {
        tuning.setPlanOverride("rows", null);
      }
    }
    await gyre.sync();
    assert.deepEqual(liveCounts(), before);
    for (const t of [x, w, h]) t.dispose();
  });
}
