/**
 * Scans (cumsum, cumprod, cummax, cummin) with hand-computed values on every device: exclusive and
 * reverse, identities per dtype, NaN and signed zeros, integer wraparound, bools, axes of any rank,
 * strided inputs, empty and 0-d tensors, float16 rounding, errors without leaks, and on the GPU
 * the plan's rule and every forced variant on a row long enough to take many tiles.
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import * as tuning from "../src/tuning.ts";
import { SCAN_EPOCHS } from "../src/gpu/_codegen_scan.ts";
import { _scanEpochs } from "../src/gpu/scan.ts";
import { bufferWords, devices, expectTensor, liveCounts } from "./_devices.ts";
import { gpuBackendOf } from "../src/runtime.ts";

const DEVICES = await devices();
const INT_MIN = -2147483648;
const INT_MAX = 2147483647;
const UINT_MAX = 4294967295;

/**
 * Asserts `got[i] === want(i)` for every i, reporting the first difference and how many: not a
 * diff of a long array, which would exhaust memory before the assertion printed.
 */
function sameElements(
  got: ArrayLike<number>,
  length: number,
  want: (i: number) => number,
  label: string,
): void {
  assert.equal(got.length, length, `${label}: length`);
  let first = -1, count = 0;
  for (let i = 0; i < got.length; i++) {
    if (got[i] !== want(i)) {
      if (first < 0) first = i;
      count++;
    }
  }
  assert.equal(count, 0, `${label}: ${count} differ, first [${first}] = ${got[first]}`);
}

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

test("cumsum: inclusive, exclusive, reverse and both", async (device) => {
  const x = gyre.tensor([1, 2, 3], { device });
  await expectTensor(gyre.cumsum(x), [3], "float32", [1, 3, 6]);
  await expectTensor(gyre.cumsum(x, { exclusive: true }), [3], "float32", [0, 1, 3]);
  await expectTensor(gyre.cumsum(x, { reverse: true }), [3], "float32", [6, 5, 3]);
  await expectTensor(gyre.cumsum(x, { exclusive: true, reverse: true }), [3], "float32", [5, 3, 0]);
  x.dispose();
});

test("cumprod: inclusive, exclusive, reverse", async (device) => {
  const x = gyre.tensor([1, 2, 3, 4], { device });
  await expectTensor(gyre.cumprod(x), [4], "float32", [1, 2, 6, 24]);
  await expectTensor(gyre.cumprod(x, { exclusive: true }), [4], "float32", [1, 1, 2, 6]);
  await expectTensor(gyre.cumprod(x, { reverse: true }), [4], "float32", [24, 24, 12, 4]);
  x.dispose();
});

test("cummax/cummin: running extremes; once NaN appears it stays", async (device) => {
  const x = gyre.tensor([1, 3, 2, NaN, 5], { device });
  await expectTensor(gyre.cummax(x), [5], "float32", [1, 3, 3, NaN, NaN]);
  await expectTensor(gyre.cummin(x), [5], "float32", [1, 1, 1, NaN, NaN]);
  await expectTensor(gyre.cummax(x, { reverse: true }), [5], "float32", [NaN, NaN, NaN, NaN, 5]);
  await expectTensor(gyre.cummin(x, { exclusive: true }), [5], "float32", [Infinity, 1, 1, 1, NaN]);
  x.dispose();
  const y = gyre.tensor([NaN, -Infinity, 7], { device });
  await expectTensor(gyre.cummin(y), [3], "float32", [NaN, NaN, NaN]);
  y.dispose();
});

test("signed zeros: cumsum keeps a leading -0; cummax takes the later of tied zeros", async (device) => {
  const z = gyre.tensor([-0, -0, 0], { device });
  await expectTensor(gyre.cumsum(z), [3], "float32", [-0, -0, 0]);
  // The exclusive first output is the identity written as +0.
  await expectTensor(gyre.cumsum(z, { exclusive: true }), [3], "float32", [0, -0, -0]);
  await expectTensor(gyre.cummax(z), [3], "float32", [-0, -0, 0]);
  await expectTensor(gyre.cummin(z, { reverse: true }), [3], "float32", [-0, -0, 0]);
  z.dispose();
  const w = gyre.tensor([0, -0], { device });
  await expectTensor(gyre.cummax(w), [2], "float32", [0, -0]);
  w.dispose();
});

test("exclusive identities per dtype", async (device) => {
  const f = gyre.tensor([5, 6], { device });
  await expectTensor(gyre.cummax(f, { exclusive: true }), [2], "float32", [-Infinity, 5]);
  await expectTensor(gyre.cumprod(f, { exclusive: true }), [2], "float32", [1, 5]);
  f.dispose();
  const i = gyre.tensor([5, 6], { device, dtype: "int32" });
  await expectTensor(gyre.cummax(i, { exclusive: true }), [2], "int32", [INT_MIN, 5]);
  await expectTensor(gyre.cummin(i, { exclusive: true }), [2], "int32", [INT_MAX, 5]);
  await expectTensor(gyre.cumsum(i, { exclusive: true }), [2], "int32", [0, 5]);
  await expectTensor(gyre.cumprod(i, { exclusive: true }), [2], "int32", [1, 5]);
  i.dispose();
  const u = gyre.tensor([5, 6], { device, dtype: "uint32" });
  await expectTensor(gyre.cummax(u, { exclusive: true }), [2], "uint32", [0, 5]);
  await expectTensor(gyre.cummin(u, { exclusive: true }), [2], "uint32", [UINT_MAX, 5]);
  u.dispose();
  const b = gyre.tensor([true, false], { device });
  await expectTensor(gyre.cummax(b, { exclusive: true }), [2], "bool", [0, 1]);
  await expectTensor(gyre.cummin(b, { exclusive: true }), [2], "bool", [1, 1]);
  b.dispose();
});

test("integers wrap around", async (device) => {
  const i = gyre.tensor([INT_MAX, 1, 1], { device, dtype: "int32" });
  await expectTensor(gyre.cumsum(i), [3], "int32", [INT_MAX, INT_MIN, INT_MIN + 1]);
  i.dispose();
  const p = gyre.tensor([65536, 65536, 3], { device, dtype: "int32" });
  await expectTensor(gyre.cumprod(p), [3], "int32", [65536, 0, 0]);
  p.dispose();
  const u = gyre.tensor([UINT_MAX, 2], { device, dtype: "uint32" });
  await expectTensor(gyre.cumsum(u), [2], "uint32", [UINT_MAX, 1]);
  // 65536 * 65537 = 2^32 + 65536.
  await expectTensor(
    gyre.cumprod(gyre.tensor([65536, 65537], { device, dtype: "uint32" })),
    [
      2,
    ],
    "uint32",
    [65536, 65536],
  );
  u.dispose();
});

test("bools: sums and products count in int32, max and min stay bool", async (device) => {
  const b = gyre.tensor([true, false, true, true], { device });
  await expectTensor(gyre.cumsum(b), [4], "int32", [1, 1, 2, 3]);
  await expectTensor(gyre.cumprod(b), [4], "int32", [1, 0, 0, 0]);
  await expectTensor(gyre.cumsum(b, { reverse: true }), [4], "int32", [3, 2, 2, 1]);
  await expectTensor(gyre.cummax(gyre.tensor([false, true, false], { device })), [3], "bool", [
    0,
    1,
    1,
  ]);
  await expectTensor(gyre.cummin(b), [4], "bool", [1, 0, 0, 0]);
  b.dispose();
});

test("axes: first, last, negative, and the middle of a 3-d tensor", async (device) => {
  const x = gyre.tensor([[1, 2], [3, 4]], { device });
  await expectTensor(gyre.cumsum(x, { axis: 0 }), [2, 2], "float32", [1, 2, 4, 6]);
  await expectTensor(gyre.cumsum(x), [2, 2], "float32", [1, 3, 3, 7]);
  await expectTensor(gyre.cumsum(x, { axis: -2, reverse: true }), [2, 2], "float32", [4, 6, 3, 4]);
  x.dispose();
  const y = gyre.tidy(() =>
    gyre.arange(12, undefined, 1, { device, dtype: "float32" }).reshape([2, 3, 2])
  );
  const negated = y.mul(-1);
  await expectTensor(gyre.cumsum(y, { axis: 1 }), [2, 3, 2], "float32", [
    0,
    1,
    2,
    4,
    6,
    9,
    6,
    7,
    14,
    16,
    24,
    27,
  ]);
  await expectTensor(gyre.cummax(negated, { axis: 1, exclusive: true }), [2, 3, 2], "float32", [
    -Infinity,
    -Infinity,
    -0,
    -1,
    -0,
    -1,
    -Infinity,
    -Infinity,
    -6,
    -7,
    -6,
    -7,
  ]);
  y.dispose();
  negated.dispose();
});

test("strided inputs: a transpose, a negative-step slice and a broadcast", async (device) => {
  const x = gyre.tensor([[1, 2], [3, 4]], { device });
  const t = x.transpose();
  await expectTensor(gyre.cumsum(t, { axis: 1 }), [2, 2], "float32", [1, 4, 2, 6]);
  const r = gyre.tensor([1, 2, 3, 4], { device });
  const s = r.slice([null, null, -1]);
  await expectTensor(gyre.cumsum(s), [4], "float32", [4, 7, 9, 10]);
  const b = gyre.tensor([2], { device }).broadcastTo([3, 4]);
  await expectTensor(gyre.cumprod(b, { axis: 0 }), [3, 4], "float32", [
    2,
    2,
    2,
    2,
    4,
    4,
    4,
    4,
    8,
    8,
    8,
    8,
  ]);
  for (const v of [x, t, r, s, b]) v.dispose();
});

test("empty axes and 0-d tensors", async (device) => {
  await expectTensor(gyre.cumsum(gyre.zeros([0], { device })), [0], "float32", []);
  await expectTensor(
    gyre.cummax(gyre.zeros([2, 0], { device }), { axis: 1 }),
    [2, 0],
    "float32",
    [],
  );
  await expectTensor(
    gyre.cumprod(gyre.zeros([0, 3], { device }), { axis: 1 }),
    [0, 3],
    "float32",
    [],
  );
  const s = gyre.tensor(5, { device });
  await expectTensor(gyre.cumsum(s), [], "float32", [5]);
  await expectTensor(gyre.cummax(s, { axis: 0 }), [], "float32", [5]);
  await expectTensor(gyre.cumsum(s, { axis: -1, exclusive: true }), [], "float32", [0]);
  s.dispose();
  await expectTensor(gyre.cumsum(true), [], "int32", [1]);
});

test("float16: f32 arithmetic, rounded to half once per output", async (device) => {
  if (device === "gpu" && !gyre.runtime().caps?.shaderF16) return;
  // In half precision 2048 + 1 rounds back to 2048 at every step; in f32 the running sum is
  // exact and only each stored output rounds: 2049 -> 2048, 2050 -> 2050.
  const h = gyre.tensor([1, 2048, 1], { device, dtype: "float16" });
  await expectTensor(gyre.cumsum(h), [3], "float16", [1, 2048, 2050]);
  await expectTensor(gyre.cummax(h, { reverse: true }), [3], "float16", [2048, 2048, 1]);
  h.dispose();
});

test("errors name the op and the argument; nothing leaks", (device) => {
  const x = gyre.zeros([2, 3], { device });
  const before = liveCounts();
  assert.throws(() => gyre.cumsum(x, { axis: 2 }), gyre.AxisError);
  assert.throws(() => gyre.cumsum(x, { axis: -3 }), gyre.AxisError);
  assert.throws(() => gyre.cumprod(x, { axis: 0.5 }), gyre.AxisError);
  assert.throws(
    () => gyre.cummax(x, { exclusive: "yes" as unknown as boolean }),
    (e: unknown) =>
      e instanceof gyre.ValueError && e.op === "cummax" && e.argument === "options.exclusive",
  );
  assert.throws(() => gyre.cummin(x, 1 as unknown as gyre.ScanOptions), gyre.ValueError);
  assert.throws(() => gyre.cumsum(3, { axis: 1 }), gyre.AxisError);
  assert.deepEqual(liveCounts(), before);
  x.dispose();
  assert.throws(() => gyre.cumsum(x), gyre.DisposedError);
});

if (DEVICES.includes("gpu")) {
  const caps = gyre.runtime().caps!;

  Deno.test("planScan: a tile per row when it fits, else look-back for sums, else multipass", () => {
    const fast = { ...caps, isFallbackAdapter: false };
    const slow = { ...caps, isFallbackAdapter: true };
    assert.equal(tuning.planScan(fast, { rows: 1000, rowLength: 4096 }).variant, "row");
    assert.equal(tuning.planScan(fast, { rows: 1, rowLength: 1 << 26 }).variant, "multipass");
    assert.equal(tuning.planScan(slow, { rows: 1, rowLength: 1 << 26 }).variant, "multipass");
    // Inner axes: columns with many rows; with few, a transposing copy unless the stride is short.
    assert.equal(tuning.planScan(fast, { rows: 4096, rowLength: 9, inner: 2 }).layout, "columns");
    assert.equal(
      tuning.planScan(fast, { rows: 16, rowLength: 1e5, inner: 16 }).layout,
      "transpose",
    );
    assert.equal(tuning.planScan(fast, { rows: 2, rowLength: 1e5, inner: 2 }).layout, "strided");
    assert.equal(tuning.planScan(fast, { rows: 1e5, rowLength: 9 }).layout, "strided");
    // A row longer than the widest workgroup's tile cannot be forced into one.
    const row = { variant: "row" } as const;
    assert.equal(tuning.planScan(fast, { rows: 1, rowLength: 20000 }, row).variant, "multipass");
    assert.equal(tuning.planScan(slow, { rows: 1, rowLength: 40000 }, row).variant, "multipass");
    assert.equal(tuning.planScan(slow, { rows: 1, rowLength: 3000 }, row).variant, "row");
    // A software adapter: 32 elements an invocation; many short rows in multipass tiles.
    assert.equal(tuning.planScan(slow, { rows: 10, rowLength: 3000 }).elementsPerThread, 32);
    assert.equal(tuning.planScan(fast, { rows: 10, rowLength: 3000 }).elementsPerThread, 16);
    assert.deepEqual(
      [
        tuning.planScan(slow, { rows: 2273, rowLength: 68 }).variant,
        tuning.planScan(slow, { rows: 100, rowLength: 68 }).variant,
        tuning.planScan(fast, { rows: 2273, rowLength: 68 }).variant,
      ],
      ["multipass", "row", "row"],
    );
    // Rows up to 1024 x 16 elements take one workgroup as wide as they need.
    const rows = tuning.planScan(fast, { rows: 8192, rowLength: 8192 });
    assert.equal(rows.variant, "row");
    assert.equal(rows.workgroupSize, 512);
    assert.equal(tuning.planScan(fast, { rows: 1, rowLength: 16384 }).workgroupSize, 1024);
    assert.equal(tuning.planScan(fast, { rows: 1, rowLength: 16385 }).variant, "multipass");
    // Multipass in two passes with groups of tiles, sized to leave about 1024 first-pass
    // workgroups (between 2 and 128 tiles of 4096); three passes beyond 1024 groups.
    const sub = {
      ...fast,
      subgroups: true,
      subgroupMinSize: 32,
      subgroupMaxSize: 32,
      int64Atomics: false,
    };
    assert.equal(tuning.planScan(sub, { rows: 1, rowLength: 1 << 26 }).superTiles, 16);
    assert.equal(tuning.planScan(sub, { rows: 1, rowLength: 1 << 20 }).superTiles, 2);
    assert.equal(tuning.planScan(sub, { rows: 1, rowLength: 1 << 29 }).superTiles, 128);
    assert.equal(tuning.planScan(sub, { rows: 1, rowLength: 2 ** 31 }).superTiles, 1);
    assert.equal(
      tuning.planScan({ ...sub, subgroups: false }, { rows: 1, rowLength: 1 << 26 }).superTiles,
      1,
    );
    // Sums of 256 Ki elements and more on hardware GPUs with subgroups: the look-back, in tiles of
    // 512 x 32 where workgroups are that wide, or 256 x 32 with states in 64-bit words where the
    // device has 64-bit atomics.
    const sum = { rows: 1, rowLength: 1 << 26, op: "sum" } as const;
    const lookback = tuning.planScan(sub, sum);
    assert.deepEqual(
      [lookback.variant, lookback.workgroupSize, lookback.elementsPerThread, lookback.wideStates],
      ["lookback", 512, 32, false],
    );
    const wide = tuning.planScan({ ...sub, int64Atomics: true }, sum);
    assert.deepEqual(
      [wide.variant, wide.workgroupSize, wide.elementsPerThread, wide.wideStates],
      ["lookback", 256, 32, true],
    );
    // An override cannot ask for 64-bit states the device lacks.
    assert.equal(tuning.planScan(sub, sum, { wideStates: true }).wideStates, false);
    // Rows of 32 Mi and more publish each tile's aggregate before scanning the tile.
    assert.equal(lookback.earlyAggregate, true);
    assert.equal(tuning.planScan(sub, { ...sum, rowLength: 1 << 24 }).earlyAggregate, false);
    assert.equal(tuning.planScan(sub, { ...sum, rows: 64, rowLength: 1 << 14 }).variant, "row");
    assert.equal(tuning.planScan(sub, { ...sum, rows: 8, rowLength: 1 << 15 }).variant, "lookback");
    assert.equal(tuning.planScan(sub, { ...sum, rowLength: (1 << 18) - 4 }).variant, "multipass");
    assert.equal(tuning.planScan(sub, { ...sum, op: "prod" }).variant, "multipass");
    assert.equal(tuning.planScan(sub, { ...sum, op: "max" }).variant, "multipass");
    assert.equal(tuning.planScan({ ...sub, isFallbackAdapter: true }, sum).variant, "multipass");
    assert.equal(tuning.planScan({ ...sub, subgroups: false }, sum).variant, "multipass");
    const narrow = tuning.planScan({
      ...sub,
      limits: { ...sub.limits, maxComputeInvocationsPerWorkgroup: 256 },
    }, sum);
    assert.deepEqual([narrow.variant, narrow.workgroupSize, narrow.elementsPerThread], [
      "lookback",
      256,
      16,
    ]);
    // Forced on a product, the look-back takes its own tile too.
    const forced = tuning.planScan(sub, { ...sum, op: "prod" }, { variant: "lookback" });
    assert.equal(forced.workgroupSize, 512);
  });

  Deno.test({
    name: "a long cumsum is two dispatches, a long cummax three [gpu]",
    sanitizeOps: false,
    sanitizeResources: false,
    fn: async () => {
      if (!caps.subgroups) return;
      // The plan's forms (a device's tuned table may choose otherwise): below the look-back's
      // threshold (a sum of 256 Ki), which takes one dispatch.
      tuning.setTuningMode("off");
      const n = 1 << 17;
      const x = gyre.ones([n], { device: "gpu", dtype: "int32" });
      await x.data();
      const batch = gpuBackendOf()!.batch;
      const count = (f: () => gyre.Tensor) => {
        const before = batch.totalDispatches;
        const y = f();
        return { y, dispatches: batch.totalDispatches - before };
      };
      const sum = count(() => gyre.cumsum(x));
      assert.equal(sum.dispatches, 2);
      sameElements(await sum.y.data() as Int32Array, n, (i) => i + 1, "cumsum");
      const max = count(() => gyre.cummax(x));
      assert.equal(max.dispatches, 3);
      sameElements(await max.y.data() as Int32Array, n, () => 1, "cummax");
      // A leading -0 stays -0 in the two-pass scan's first tile.
      const host = new Float32Array(n).fill(1);
      host[0] = -0;
      const zeroFirst = gyre.tensor(host, { device: "gpu" });
      const summed = await gyre.cumsum(zeroFirst).data();
      assert.ok(Object.is(summed[0], -0), `cumsum[0] is ${summed[0]}`);
      assert.equal(summed[n - 1], n - 1);
      for (const t of [x, sum.y, max.y, zeroFirst]) t.dispose();
      tuning.setTuningMode("table");
    },
  });

  Deno.test({
    name: "look-back states carry epochs: one dispatch a scan, cleared when the epochs wrap [gpu]",
    sanitizeOps: false,
    sanitizeResources: false,
    fn: async () => {
      const gpu = gpuBackendOf()!;
      const n = 100003;
      // Tiles of 128 and aggregates only: every tile walks back over states an earlier scan left
      // in the same words, which must read as nothing yet.
      tuning.setPlanOverride("scan", {
        variant: "lookback",
        workgroupSize: 32,
        elementsPerThread: 4,
        publishPrefixes: false,
      });
      try {
        const scan = async (seed: number, label: string) => {
          const values = Int32Array.from({ length: n }, (_, i) => ((i + seed) * 7) % 13 - 6);
          const x = gyre.tensor(values, { device: "gpu" });
          const before = gpu.batch.totalDispatches;
          const y = gyre.cumsum(x);
          const dispatches = gpu.batch.totalDispatches - before;
          let run = 0;
          const want = Int32Array.from(values, (v) => run += v);
          sameElements(await y.data() as Int32Array, n, (i) => want[i], label);
          x.dispose();
          y.dispose();
          return dispatches;
        };
        _scanEpochs.set(gpu, 0);
        assert.equal(await scan(1, "epoch 1"), 1);
        assert.equal(await scan(2, "epoch 2"), 1);
        assert.equal(_scanEpochs.get(gpu), 2);
        _scanEpochs.set(gpu, SCAN_EPOCHS - 2);
        assert.equal(await scan(3, "the last epoch"), 1);
        assert.equal(_scanEpochs.get(gpu), SCAN_EPOCHS - 1);
        // Epoch 1 again: the states (epoch 1's among them) are zeroed first, by a dispatch.
        assert.equal(await scan(4, "epoch 1 again"), 2);
        assert.equal(_scanEpochs.get(gpu), 1);
        assert.equal(await scan(5, "epoch 2 again"), 1);
      } finally {
        tuning.setPlanOverride("scan", null);
      }
    },
  });

  Deno.test({
    name:
      "look-back tiles publish their inclusive prefixes, tagged with the epoch, in either state format [gpu]",
    sanitizeOps: false,
    sanitizeResources: false,
    fn: async () => {
      const gpu = gpuBackendOf()!;
      // A reader falls back to reducing a silent predecessor itself, so results alone cannot show
      // that states are published and read: this reads the state words back.
      const tiles = 40;
      const n = tiles * 128;
      const values = Int32Array.from({ length: n }, (_, i) => (i * 5) % 11 - 5);
      for (const wideStates of gpu.caps.int64Atomics ? [false, true] : [false]) {
        tuning.setPlanOverride("scan", {
          variant: "lookback",
          workgroupSize: 32,
          elementsPerThread: 4,
          wideStates,
        });
        try {
          const x = gyre.tensor(values, { device: "gpu" });
          const y = gyre.cumsum(x);
          const scanned = await y.data() as Int32Array;
          const words = await bufferWords(
            gpu.scratch("scan look-back states", 2 * tiles),
            8 * tiles,
          );
          const tag = (_scanEpochs.get(gpu)! << 2) | 2;
          for (let t = 0; t < tiles; t++) {
            const [lo, hi] = [words[2 * t], words[2 * t + 1]];
            const [gotTag, bits] = wideStates
              ? [hi, lo]
              : [lo >>> 16 === hi >>> 16 ? lo >>> 16 : -1, ((lo & 0xffff) | (hi << 16)) | 0];
            assert.equal(gotTag, tag, `tile ${t} tag, wide ${wideStates}`);
            assert.equal(bits | 0, scanned[128 * t + 127], `tile ${t} prefix, wide ${wideStates}`);
          }
          x.dispose();
          y.dispose();
        } finally {
          tuning.setPlanOverride("scan", null);
        }
      }
    },
  });

  Deno.test({
    name: "a run of -0 sums to -0 under every scheme (subgroup adds may start from +0) [gpu]",
    sanitizeOps: false,
    sanitizeResources: false,
    fn: async () => {
      const overrides: (Partial<tuning.ScanChoice> | null)[] = [
        null,
        { variant: "multipass", superTiles: 1 },
        { variant: "lookback" },
      ];
      for (const n of [1000, 1 << 20]) {
        const zeros = gyre.tensor(new Float32Array(n).fill(-0), { device: "gpu" });
        for (const override of overrides) {
          tuning.setPlanOverride("scan", override);
          try {
            const y = await gyre.cumsum(zeros).data();
            const positive = y.findIndex((v) => !Object.is(v, -0));
            assert.equal(positive, -1, `n ${n} ${JSON.stringify(override)}: [${positive}]`);
          } finally {
            tuning.setPlanOverride("scan", null);
          }
        }
        zeros.dispose();
      }
    },
  });

  Deno.test({
    name: "every variant scans 100003 integers in tiles of 128 [gpu]",
    sanitizeOps: false,
    sanitizeResources: false,
    fn: async () => {
      const n = 100003;
      // Values that differ from tile to tile, so a total read from the wrong tile or group shows.
      const values = Int32Array.from({ length: n }, (_, i) => (i * 7) % 11 - 5);
      const integers = gyre.tensor(values, { device: "gpu" });
      const want = new Int32Array(n);
      for (let i = n - 1, run = 0; i >= 0; i--) want[i] = run += values[i];
      for (const variant of ["lookback", "multipass"] as const) {
        for (const subgroups of [true, false]) {
          // Multipass in three passes (tile totals scanned) and in two (groups of 2 tiles: more
          // groups than four times the workgroup, so each invocation folds several; or of 8).
          // The look-back also with aggregates only, so each tile walks back window by window.
          // The look-back also with the aggregate published before the tile's scan.
          const settings = variant === "multipass"
            ? [1, 2, 8].map((superTiles) => ({ superTiles, publishPrefixes: true, early: false }))
            : [
              { superTiles: 1, publishPrefixes: true, early: false },
              { superTiles: 1, publishPrefixes: false, early: false },
              { superTiles: 1, publishPrefixes: true, early: true },
            ];
          for (const { superTiles, publishPrefixes, early } of settings) {
            tuning.setPlanOverride("scan", {
              variant,
              subgroups,
              descendingFinalPass: subgroups,
              workgroupSize: 32,
              elementsPerThread: 4,
              superTiles,
              publishPrefixes,
              earlyAggregate: early,
            });
            try {
              const y = gyre.cumsum(integers, { reverse: true });
              const label = `${variant} subgroups ${subgroups} groups of ${superTiles}` +
                (publishPrefixes ? "" : ", aggregates only") + (early ? ", early aggregate" : "");
              sameElements(await y.data() as Int32Array, n, (i) => want[i], label);
              y.dispose();
            } finally {
              tuning.setPlanOverride("scan", null);
            }
          }
        }
      }
      integers.dispose();
    },
  });
}
