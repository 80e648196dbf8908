/**
 * The indexing family with hand-computed values on every device: gathers (NumPy's take and
 * take_along_axis, PyTorch's gather and index_select, `at` with NumPy's placement of separated
 * advanced indices), scatters under every reduction with duplicates, segment reductions (empty
 * segments, NaN, dropped negative ids), bincount, histogram and oneHot (fused, never
 * materialised), empty index lists, and typed errors: out-of-range indices (thrown by the GPU's
 * next read-back, after which the runtime works), float indices, wrong shapes; nothing leaks.
 * @module
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import { devices, expectTensor, liveCounts, testOn } from "./_devices.ts";
import * as tuning from "../src/tuning.ts";

const test = testOn(await devices());

const int = (v: number[] | number[][], device: gyre.DeviceName, shape?: number[]) =>
  gyre.tensor(v as number[], { dtype: "int32", device, shape });

test("take, takeAlongAxis, gather, indexSelect: NumPy and PyTorch semantics", async (device) => {
  const x = gyre.tensor([[1, 2, 3], [4, 5, 6]], { device });
  // take: flattened without an axis; negative indices from the end; the indices' shape inserted.
  await expectTensor(gyre.take(x, int([5, -6, 0], device)), [3], "float32", [6, 1, 1]);
  await expectTensor(
    gyre.take(x, int([[2, 0], [1, 1]], device), { axis: 1 }),
    [2, 2, 2],
    "float32",
    [3, 1, 2, 2, 6, 4, 5, 5],
  );
  // A 0-d index drops the axis.
  await expectTensor(gyre.take(x, int([1], device, []), { axis: 0 }), [3], "float32", [4, 5, 6]);
  // takeAlongAxis broadcasts indices of length 1 on the other axes.
  await expectTensor(
    gyre.takeAlongAxis(x, int([[2, -3]], device), { axis: 1 }),
    [2, 2],
    "float32",
    [3, 1, 6, 4],
  );
  // gather: the output has the indices' shape, smaller than x off the axis.
  await expectTensor(gyre.gather(x, int([[1], [2]], device), { axis: 1 }), [2, 1], "float32", [
    2,
    6,
  ]);
  await expectTensor(gyre.gather(x, int([[1, 0, 1]], device), { axis: 0 }), [1, 3], "float32", [
    4,
    2,
    6,
  ]);
  await expectTensor(
    gyre.indexSelect(x, int([1, 1, 0], device)),
    [3, 3],
    "float32",
    [4, 5, 6, 4, 5, 6, 1, 2, 3],
  );
  // Empty index lists give empty results of the right shape.
  await expectTensor(gyre.indexSelect(x, int([], device), { axis: 1 }), [2, 0], "float32", []);
  await expectTensor(gyre.take(x, int([], device)), [0], "float32", []);
  // Strided x (a transpose and a reversed slice) and every dtype.
  await expectTensor(gyre.take(x.transpose(), int([0, 5], device)), [2], "float32", [1, 6]);
  await expectTensor(
    gyre.take(x.slice(null, [null, null, -1]), int([0, 4], device)),
    [2],
    "float32",
    [3, 5],
  );
  await expectTensor(gyre.take(x.cast("float16"), int([1, 4, 5], device)), [3], "float16", [
    2,
    5,
    6,
  ]);
  await expectTensor(gyre.take(int([-7, 8], device), int([1, 0, 1], device)), [3], "int32", [
    8,
    -7,
    8,
  ]);
  await expectTensor(gyre.take(x.greater(3), int([0, 3], device)), [2], "bool", [0, 1]);
  x.dispose();
});

test("at: one index tensor among basic ranges, as NumPy places it", async (device) => {
  const x = gyre.arange(24, undefined, 1, { device, dtype: "float32" }).reshape([2, 3, 4]);
  const i = int([3, 0], device);
  // x[:, :, i]: the index axis stays in place.
  await expectTensor(x.at(null, null, i), [2, 3, 2], "float32", [
    3,
    0,
    7,
    4,
    11,
    8,
    15,
    12,
    19,
    16,
    23,
    20,
  ]);
  // x[1, :, i]: a number and the tensor separated by a slice put the tensor's axes first.
  await expectTensor(x.at(1, null, i), [2, 3], "float32", [15, 19, 23, 12, 16, 20]);
  // x[:, 2, i]: adjacent advanced indices keep the place.
  await expectTensor(x.at(null, 2, i), [2, 2], "float32", [11, 8, 23, 20]);
  x.dispose();
  i.dispose();
});

test("scatter: every reduction with duplicates, include_self semantics", async (device) => {
  const x = gyre.tensor([1, 2, 3, 4], { device });
  const i = int([0, 0, 3, -3], device);
  const u = gyre.tensor([5, -6, 7, 8], { device });
  const expected: Record<gyre.ScatterReduce, number[]> = {
    sum: [0, 10, 3, 11],
    prod: [-30, 16, 3, 28],
    max: [5, 8, 3, 7],
    min: [-6, 2, 3, 4],
    // (x + the updates) / (1 + their count).
    mean: [0, 5, 3, 5.5],
    none: [],
  };
  for (const reduce of ["sum", "prod", "max", "min", "mean"] as const) {
    await expectTensor(
      gyre.scatter(x, i, u, { axis: 0, reduce }),
      [4],
      "float32",
      expected[reduce],
    );
  }
  // Plain stores of duplicates: one of the updates wins.
  const stored = await gyre.scatter(x, i, u, { axis: 0 }).data();
  assert.ok([5, -6].includes(stored[0]) && stored[1] === 8 && stored[3] === 7, String(stored));
  // A number as the updates; integers wrap; integer means take the floor.
  await expectTensor(gyre.scatterAdd(x, i, 1, { axis: 0 }), [4], "float32", [3, 3, 3, 5]);
  const big = int([2147483647, -5], device);
  await expectTensor(
    gyre.scatter(big, int([0, 1, 1], device), int([1, -2, 0], device), { reduce: "sum" }),
    [2],
    "int32",
    [-2147483648, -7],
  );
  await expectTensor(
    gyre.scatter(big, int([1], device), int([-2], device), { reduce: "mean" }),
    [2],
    "int32",
    [2147483647, -4],
  );
  // 2-d along axis 1, updates larger than the indices.
  const z = gyre.zeros([2, 3], { device });
  await expectTensor(
    gyre.scatter(
      z,
      int([[0, 2], [1, 1]], device),
      gyre.tensor([[5, 6, 9], [7, 8, 9]], { device }),
      {
        axis: 1,
        reduce: "sum",
      },
    ),
    [2, 3],
    "float32",
    [5, 0, 6, 0, 15, 0],
  );
  // NaN wins max and min.
  await expectTensor(
    gyre.scatter(x, int([1, 1], device), gyre.tensor([NaN, 9], { device }), { reduce: "max" }),
    [4],
    "float32",
    [1, NaN, 3, 4],
  );
  for (const t of [x, i, u, big, z]) t.dispose();
});

test("segment reductions: empty segments, NaN, dropped negative ids, trailing axes", async (device) => {
  const data = gyre.tensor([[1, 2], [3, 4], [5, 6], [NaN, 1]], { device });
  const ids = int([0, 2, 0, -1], device);
  const opts = { numSegments: 4 };
  await expectTensor(gyre.segmentSum(data, ids, opts), [4, 2], "float32", [6, 8, 0, 0, 3, 4, 0, 0]);
  await expectTensor(gyre.segmentMean(data, ids, opts), [4, 2], "float32", [
    3,
    4,
    0,
    0,
    3,
    4,
    0,
    0,
  ]);
  await expectTensor(gyre.segmentProd(data, ids, opts), [4, 2], "float32", [
    5,
    12,
    1,
    1,
    3,
    4,
    1,
    1,
  ]);
  await expectTensor(gyre.segmentMax(data, ids, opts), [4, 2], "float32", [
    5,
    6,
    -Infinity,
    -Infinity,
    3,
    4,
    -Infinity,
    -Infinity,
  ]);
  // The NaN row's id is -1 (dropped); with id 1 it wins its segment.
  await expectTensor(gyre.segmentMin(data, int([0, 2, 0, 1], device), opts), [4, 2], "float32", [
    1,
    2,
    NaN,
    1,
    3,
    4,
    Infinity,
    Infinity,
  ]);
  // Integer identities for empty segments.
  const ints = int([5, -3], device);
  await expectTensor(
    gyre.segmentMax(ints, int([0, 0], device), { numSegments: 2 }),
    [2],
    "int32",
    [5, -2147483648],
  );
  // Ids covering two leading axes.
  await expectTensor(
    gyre.segmentSum(data.reshape([2, 2, 2]), int([[1, 0], [1, 1]], device), { numSegments: 2 }),
    [2, 2],
    "float32",
    [3, 4, NaN, 9],
  );
  // No data: every segment empty.
  await expectTensor(
    gyre.segmentSum(gyre.zeros([0, 2], { device }), int([], device), { numSegments: 2 }),
    [2, 2],
    "float32",
    [0, 0, 0, 0],
  );
  await expectTensor(
    gyre.segmentMean(gyre.zeros([0], { device }), int([], device), { numSegments: 1 }),
    [1],
    "float32",
    [0],
  );
  for (const t of [data, ids, ints]) t.dispose();
});

test("bincount, histogram and oneHot", async (device) => {
  const v = int([0, 1, 1, 3, 1], device);
  await expectTensor(gyre.bincount(v, { minlength: 5 }), [5], "int32", [1, 3, 0, 1, 0]);
  const w = gyre.tensor([0.5, 1, 2, 4, 8], { device });
  await expectTensor(gyre.bincount(v, { minlength: 4, weights: w }), [4], "float32", [
    0.5,
    11,
    0,
    4,
  ]);
  // NumPy's length: max + 1, or minlength where larger; an empty x gives minlength.
  await expectTensor(await gyre.bincountAsync(v), [4], "int32", [1, 3, 0, 1]);
  await expectTensor(await gyre.bincountAsync(v, { minlength: 6, weights: w }), [6], "float32", [
    0.5,
    11,
    0,
    4,
    0,
    0,
  ]);
  const empty = int([], device);
  await expectTensor(await gyre.bincountAsync(empty, { minlength: 2 }), [2], "int32", [0, 0]);
  empty.dispose();
  // NumPy: np.histogram([0, 1, 1, 2, 4], bins=4) and with a range (values outside not counted).
  const x = gyre.tensor([0, 1, 1, 2, 4], { device });
  const [counts, edges] = gyre.histogram(x, { bins: 4 });
  await expectTensor(counts, [4], "int32", [1, 2, 1, 1]);
  await expectTensor(edges, [5], "float32", [0, 1, 2, 3, 4]);
  const [c2, e2] = gyre.histogram(gyre.tensor([-1, 0.5, 1, NaN, 3], { device }), {
    bins: 2,
    range: [0, 1],
  });
  await expectTensor(c2, [2], "int32", [0, 2]);
  await expectTensor(e2, [3], "float32", [0, 0.5, 1]);
  // oneHot: out-of-range classes give zero rows; fused into one kernel with what follows.
  await expectTensor(gyre.oneHot(int([0, 2, 5, -1], device), 3), [4, 3], "int32", [
    1,
    0,
    0,
    0,
    0,
    1,
    0,
    0,
    0,
    0,
    0,
    0,
  ]);
  const labels = int([0, 2, 1], device);
  const logits = gyre.tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9]], { device });
  const e = gyre.explain(
    () => gyre.oneHot(labels, 3, { dtype: "float32" }).mul(logits).sum({ axis: -1 }),
    { print: false },
  );
  await expectTensor(e.outputs[0] as gyre.Tensor, [3], "float32", [1, 6, 8]);
  if (device === "gpu") {
    // The iota (arange) and one kernel for one-hot, product and sum: no one-hot matrix.
    assert.deepEqual(e.kernels.map((k) => k.kernel), ["arange", "oneHot+mul+sum"]);
  }
  for (const t of [v, w, x, labels, logits]) t.dispose();
});

test("float16 sums, means and products accumulate wider than float16, rounded once", async (device) => {
  const before = liveCounts();
  // Partial sums and products of these overflow float16 (65504) though most results do not
  // (the second sum does: 92208).
  const half = (v: number[]) => gyre.tensor(v, { dtype: "float16", device });
  const x = half([-60000, -60000, 60000, 30000, 31000, 31200, 300, 300, 1 / 300]);
  const ids = int([0, 0, 0, 1, 1, 1, 2, 2, 2], device);
  for (const sorted of [true, false]) {
    const opts = { numSegments: 3, sorted };
    await expectTensor(gyre.segmentSum(x, ids, opts), [3], "float16", [-60000, Infinity, 600]);
    await expectTensor(gyre.segmentMean(x, ids, opts), [3], "float16", [-20000, 30736, 200]);
    const product = gyre.tidy(() =>
      gyre.segmentProd(x.slice([6]), ids.slice([6]).sub(2), { numSegments: 1, sorted })
    );
    await expectTensor(product, [1], "float16", [300]);
  }
  // A scatter into a base: the base joins the wide sum.
  const base = half([60000, 0]);
  const at = int([0, 0], device);
  const updates = half([30000, -40000]);
  await expectTensor(gyre.scatter(base, at, updates, { reduce: "sum" }), [2], "float16", [
    49984,
    0,
  ]);
  for (const t of [x, ids, base, at, updates]) t.dispose();
  assert.deepEqual(liveCounts(), before);
});

test("sorted segment sums: the same bits from run to run, crossing many tiles", async (device) => {
  const before = liveCounts();
  const data = gyre.tidy(() => gyre.random.normal([50000], { seed: 11, device }).mul(1e3));
  const ids = gyre.tidy(() =>
    gyre.sort(
      gyre.random.uniform([50000], { seed: 12, low: 0, high: 7, device }).floor().cast("int32"),
    )
  );
  const runs: number[][] = [];
  for (let k = 0; k < 3; k++) {
    const s = gyre.segmentSum(data, ids, { numSegments: 7, sorted: true });
    runs.push(Array.from(new Uint32Array((await s.data()).buffer)));
    s.dispose();
  }
  assert.deepEqual(runs[1], runs[0]);
  assert.deepEqual(runs[2], runs[0]);
  // Unsorted ids sorted first (the form for devices without float atomics) are as repeatable.
  const shuffled = gyre.tidy(() =>
    gyre.random.uniform([50000], { seed: 13, low: 0, high: 7, device }).floor().cast("int32")
  );
  const sortedRuns: number[][] = [];
  for (let k = 0; k < 2; k++) {
    tuning.setPlanOverride("indexing", { variant: "scatter-sorted" });
    const s = gyre.segmentSum(data, shuffled, { numSegments: 7 });
    tuning.setPlanOverride("indexing", null);
    sortedRuns.push(Array.from(new Uint32Array((await s.data()).buffer)));
    s.dispose();
  }
  assert.deepEqual(sortedRuns[1], sortedRuns[0]);
  shuffled.dispose();
  data.dispose();
  ids.dispose();
  assert.deepEqual(liveCounts(), before);
});

Deno.test("the scatter plan: sorted ids reduce in order; float sums sort first without float atomics", () => {
  const job = {
    dtype: "float32" as const,
    reduce: "sum" as const,
    shape: [1000, 8],
    indexStrides: [1, 0],
    outStrides: [0, 1],
    outLength: 80,
    sorted: false,
  };
  const without = { float32Atomics: false };
  assert.equal(tuning.planScatter({ float32Atomics: true }, job).variant, "scatter");
  assert.equal(tuning.planScatter(without, job).variant, "scatter-sorted");
  assert.equal(tuning.planScatter(without, job).combine, "store");
  assert.equal(tuning.planScatter(without, { ...job, sorted: true }).variant, "scatter-segments");
  // Integer sums keep their atomics; a scatter along an inner axis (indices varying across the
  // row) cannot sort rows, so it keeps the compare-and-swap loop.
  assert.equal(tuning.planScatter(without, { ...job, dtype: "int32" }).combine, "atomic");
  const inner = { ...job, indexStrides: [8, 1], outStrides: [0, 0] };
  assert.deepEqual(
    [tuning.planScatter(without, inner).variant, tuning.planScatter(without, inner).combine],
    ["scatter", "cas"],
  );
});

test("out-of-range indices: an IndexError naming the op, then the runtime works", async (device) => {
  const before = liveCounts();
  const x = gyre.tensor([1, 2, 3], { device });
  const sorted = { numSegments: 2, sorted: true };
  const cases: [string, string, () => gyre.Tensor][] = [
    ["take", "indices", () => gyre.take(x, int([0, 3], device))],
    ["take", "indices", () => gyre.take(x, int([-4], device))],
    ["scatter", "indices", () => gyre.scatter(x, int([7], device), 1, { axis: 0, reduce: "sum" })],
    [
      "segmentSum",
      "segmentIds",
      () => gyre.segmentSum(x, int([0, 2, 1], device), { numSegments: 2 }),
    ],
    ["segmentSum", "segmentIds", () => gyre.segmentSum(x, int([0, 1, 2], device), sorted)],
    // Ids declared sorted that are not: the promise is checked on both devices.
    ["segmentMax", "segmentIds", () => gyre.segmentMax(x, int([1, 0, 1], device), sorted)],
    ["bincount", "x", () => gyre.bincount(int([-1], device), { minlength: 2 })],
  ];
  for (const [op, argument, make] of cases) {
    await assert.rejects(
      async () => {
        const t = gyre.tidy(make);
        try {
          await t.data();
        } finally {
          t.dispose();
        }
      },
      (e: unknown) => e instanceof gyre.IndexError && e.op === op && e.argument === argument,
      op,
    );
    // The next results are right (the GPU's report was cleared).
    await expectTensor(gyre.tidy(() => gyre.take(x, int([2], device))), [1], "float32", [3]);
  }
  x.dispose();
  assert.deepEqual(liveCounts(), before);
});

test("typed errors for bad indices and options, nothing allocated", (device) => {
  const before = liveCounts();
  const x = gyre.tensor([[1, 2], [3, 4]], { device });
  const f = gyre.tensor([0, 1], { device });
  const i = int([0, 1], device);
  assert.throws(() => gyre.tidy(() => gyre.take(x, f)), gyre.DTypeError);
  assert.throws(() => gyre.tidy(() => gyre.indexSelect(x, int([[0]], device))), gyre.ShapeError);
  assert.throws(() => gyre.tidy(() => gyre.takeAlongAxis(x, i)), gyre.ShapeError);
  assert.throws(
    () => gyre.tidy(() => gyre.gather(x, int([[0, 1, 0]], device, [1, 3]), { axis: 0 })),
    gyre.ShapeError,
  );
  assert.throws(
    () =>
      gyre.tidy(() =>
        gyre.scatter(x, int([[0]], device), gyre.zeros([1, 1], { dtype: "int32", device }))
      ),
    gyre.DTypeError,
  );
  assert.throws(
    () => gyre.tidy(() => gyre.scatter(x, int([[0]], device), 1, { reduce: "avg" as never })),
    gyre.ValueError,
  );
  assert.throws(
    () => gyre.tidy(() => gyre.scatterAdd(x.greater(1), int([[0]], device), true as never)),
    gyre.GyreError,
  );
  assert.throws(() => gyre.tidy(() => gyre.segmentSum(x, i, {} as never)), gyre.ValueError);
  assert.throws(
    () => gyre.tidy(() => gyre.segmentSum(x, int([0, 1, 1], device), { numSegments: 2 })),
    gyre.ShapeError,
  );
  assert.throws(() => gyre.tidy(() => gyre.bincount(i, {} as never)), gyre.ValueError);
  assert.throws(
    () => gyre.tidy(() => gyre.bincount(i, { minlength: 2, weights: i })),
    gyre.DTypeError,
  );
  assert.throws(() => gyre.tidy(() => gyre.histogram(f, { range: [1, 0] })), gyre.ValueError);
  assert.throws(() => gyre.tidy(() => gyre.oneHot(f, 2)), gyre.DTypeError);
  assert.throws(() => gyre.tidy(() => gyre.at(x, i, i)), gyre.ValueError);
  assert.throws(() => gyre.tidy(() => gyre.take(x, [0] as never)), gyre.ValueError);
  for (const t of [x, f, i]) t.dispose();
  assert.deepEqual(liveCounts(), before);
});

test("argwhere, nonzero, where, maskedSelect: fixed sizes, fill values, exact counts", async (device) => {
  const before = liveCounts();
  const x = gyre.tensor([[0, 3, 0], [4, NaN, -0]], { device });
  // NaN is non-zero; -0 is zero. Rows past the selected ones take the fill value.
  await expectTensor(gyre.argwhere(x, { size: 4, fillValue: -1 }), [4, 2], "int32", [
    0,
    1,
    1,
    0,
    1,
    1,
    -1,
    -1,
  ]);
  // A size below the count keeps the first ones.
  const [rows, cols] = gyre.nonzero(x, { size: 2 });
  await expectTensor(rows, [2], "int32", [0, 1]);
  await expectTensor(cols, [2], "int32", [1, 0]);
  const mask = gyre.tensor([true, false, true], { device });
  // The mask broadcasts over x's rows.
  await expectTensor(gyre.maskedSelect(x, mask, { size: 4 }), [4], "float32", [0, 0, 4, -0]);
  const big = x.greater(1);
  await expectTensor(await gyre.maskedSelectAsync(x, big), [2], "float32", [3, 4]);
  const none = gyre.zeros([3], { device });
  await expectTensor(await gyre.argwhereAsync(none), [0, 1], "int32", []);
  const v = gyre.tensor([0, 5, 0, 7], { device });
  const [only] = await gyre.nonzeroAsync(v);
  await expectTensor(only, [2], "int32", [1, 3]);
  // One-argument where is nonzero (JAX's size; NumPy's exact count through whereAsync).
  const [at] = gyre.where(v, { size: 3, fillValue: -1 });
  await expectTensor(at, [3], "int32", [1, 3, -1]);
  const [r, c] = await gyre.whereAsync(x);
  await expectTensor(r, [3], "int32", [0, 1, 1]);
  await expectTensor(c, [3], "int32", [1, 0, 1]);
  await expectTensor(gyre.tidy(() => gyre.where(v.greater(1), v, -1)), [4], "float32", [
    -1,
    5,
    -1,
    7,
  ]);
  assert.throws(() => (gyre.where as (c: unknown) => unknown)(v), gyre.ValueError);
  assert.throws(() => (gyre.where as (c: unknown, a: unknown) => unknown)(v, 2), gyre.ValueError);
  for (const t of [big, none, v]) t.dispose();
  assert.throws(() => gyre.tidy(() => gyre.argwhere(x, {} as never)), gyre.ValueError);
  assert.throws(
    () => gyre.tidy(() => gyre.maskedSelect(x, x, { size: 1 })),
    gyre.DTypeError,
  );
  x.dispose();
  mask.dispose();
  assert.deepEqual(liveCounts(), before);
});

test("unique: sorted, NaNs collapsed, counts and inverse, fixed and exact sizes", async (device) => {
  const before = liveCounts();
  const x = gyre.tensor([[3, 1, NaN], [3, -0, 0], [2, NaN, 1]], { device });
  const r = gyre.unique(x, { size: 6, fillValue: -9, returnCounts: true, returnInverse: true });
  // -0 and +0 are one value, shown as the first in x's order (the sort is stable).
  await expectTensor(r.values, [6], "float32", [-0, 1, 2, 3, NaN, -9]);
  await expectTensor(r.counts!, [6], "int32", [2, 2, 1, 2, 2, 0]);
  await expectTensor(r.inverse!, [3, 3], "int32", [3, 1, 4, 3, 0, 0, 2, 4, 1]);
  const ints = x.cast("int32");
  const exact = await gyre.uniqueAsync(ints);
  await expectTensor(exact.values, [4], "int32", [0, 1, 2, 3]);
  ints.dispose();
  // A size below the count keeps the smallest values; their counts stay right.
  const few = gyre.unique(x, { size: 2, returnCounts: true });
  await expectTensor(few.values, [2], "float32", [-0, 1]);
  await expectTensor(few.counts!, [2], "int32", [2, 2]);
  x.dispose();
  assert.deepEqual(liveCounts(), before);
});

test("jit: sorted segment sums replay in order, and ids out of order still throw", async (device) => {
  const f = gyre.jit((data: gyre.Tensor, ids: gyre.Tensor) =>
    gyre.segmentSum(data, ids, { numSegments: 3, sorted: true })
  );
  // 5000 rows: several tiles of the segmented reduction, so its carries' pass replays too.
  const data = gyre.tidy(() => gyre.arange(0, 5000, 1, { device }).mod(7));
  const idsOf = (values: number[]) =>
    gyre.tensor(Int32Array.from(values), { dtype: "int32", device });
  const sorted = idsOf(Array.from({ length: 5000 }, (_, r) => (r < 2000 ? 0 : r < 4500 ? 1 : 2)));
  for (let call = 0; call < 2; call++) {
    // The second call replays on the GPU: no plan is made again.
    const plans: string[] = [];
    const stop = tuning.onPlan((r) => plans.push(r.family));
    const got = f(data, sorted) as gyre.Tensor;
    stop();
    if (device === "gpu" && call === 1) assert.deepEqual(plans, []);
    const want = gyre.segmentSum(data, sorted, { numSegments: 3, sorted: true });
    const [g, w] = await gyre.readAll([got, want]);
    assert.deepEqual(Array.from(g), Array.from(w));
    got.dispose();
    want.dispose();
  }
  const unsorted = idsOf(Array.from({ length: 5000 }, (_, r) => (r === 4999 ? 0 : 1)));
  await assert.rejects(async () => {
    const out = f(data, unsorted) as gyre.Tensor;
    try {
      await out.data();
    } finally {
      out.dispose();
    }
  }, gyre.IndexError);
  for (const t of [data, sorted, unsorted]) t.dispose();
  f.dispose();
});

test("jit: indexing ops under jit equal their eager runs, and a bad index still throws", async (device) => {
  const f = gyre.jit((x: gyre.Tensor, i: gyre.Tensor) =>
    gyre.scatterAdd(gyre.zeros([4], { device }), i, gyre.take(x, i).mul(2), { axis: 0 })
  );
  const x = gyre.tensor([1, 2, 3, 4], { device });
  for (const [call, indices] of [[0, 3, 3], [1, 1, 2]].entries()) {
    const i = int(indices, device);
    // The second call replays on the GPU: no plan is made again (no op runs).
    const plans: string[] = [];
    const stop = tuning.onPlan((r) => plans.push(r.family));
    const jitted = f(x, i) as gyre.Tensor;
    stop();
    if (device === "gpu" && call === 1) assert.deepEqual(plans, []);
    const eager = gyre.scatterAdd(gyre.zeros([4], { device }), i, gyre.take(x, i).mul(2), {
      axis: 0,
    });
    const [got, want] = await gyre.readAll([jitted, eager]);
    assert.deepEqual(Array.from(got), Array.from(want));
    i.dispose();
  }
  const bad = int([0, 9, 1], device);
  await assert.rejects(async () => {
    const out = f(x, bad) as gyre.Tensor;
    try {
      await out.data();
    } finally {
      out.dispose();
    }
  }, gyre.IndexError);
  // The next call with good indices reads back without a stale report.
  const good = int([2, 2, 2], device);
  const out = f(x, good) as gyre.Tensor;
  assert.deepEqual(Array.from(await out.data()), [0, 0, 18, 0]);
  for (const t of [x, bad, good, out]) t.dispose();
  f.dispose();
});

test("a gather's elementwise consumers run in its kernel on the GPU", async (device) => {
  const x = gyre.tensor([[1, 2, 3], [4, 5, 6]], { device });
  const i = int([2, 0, 1, 1], device);
  const w = gyre.tensor([[10], [20]], { device });
  const e = gyre.explain(() => gyre.take(x, i, { axis: 1 }).mul(w).add(1), { print: false });
  await expectTensor(e.outputs[0] as gyre.Tensor, [2, 4], "float32", [
    31,
    11,
    21,
    21,
    121,
    81,
    101,
    101,
  ]);
  if (device === "gpu") assert.deepEqual(e.kernels.map((k) => k.kernel), ["take+mul+add"]);
  // A bad index still throws from a fused kernel.
  await assert.rejects(async () => {
    const t = gyre.tidy(() => gyre.take(x, int([7], device), { axis: 1 }).exp());
    try {
      await t.data();
    } finally {
      t.dispose();
    }
  }, gyre.IndexError);
  for (const t of [x, i, w]) t.dispose();
});
