/**
 * matmul and linear (src/ops/matmul.ts) with hand-computed values on every device: 2x3 @ 3x2,
 * 1-D operands (the added axis removed), broadcast batches, transposes by option and by view,
 * strided slices, K = 0 and empty outputs, float16 (both accumulations), int32 wrapping, dtype
 * promotion, NaN and infinities, linear with bias and every activation (one fused dispatch on the
 * GPU), typed errors that leave nothing allocated, the plan's rule and its override checks, A
 * copied into [K, M] order before the product (and the transposing copy itself, every form and
 * tile shape, exactly), and the WASM GEMM itself against a plain f64 triple loop.
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import * as tuning from "../src/tuning.ts";
import type { DeviceCaps } from "../src/gpu/device.ts";
import type { GpuStorage } from "../src/gpu/host.ts";
import { transposeCopy } from "../src/gpu/elementwise.ts";
import { transposeSharedBytes } from "../src/gpu/_codegen_transpose.ts";
import {
  transposePairs,
  type TransposeSpec,
  type TransposeUniforms,
} from "../src/plans/elementwise.ts";
import { devices, expectClose, expectTensor, liveCounts, values } from "./_devices.ts";
import { tensorFromStorage, viewOf } from "../src/tensor.ts";
import { gpuBackendOf } from "../src/runtime.ts";

const DEVICES = await devices();

function test(name: string, fn: (device: gyre.DeviceName) => Promise<void> | void): void {
  for (const device of DEVICES) {
    Deno.test({
      name: `${name} [${device}]`,
      // The GPU device is shared by the whole file (see tests/_harness.ts).
      sanitizeOps: false,
      sanitizeResources: false,
      fn: async () => {
        try {
          await fn(device);
        } finally {
          tuning.setPlanOverride("matmul", null);
        }
      },
    });
  }
}

function t(
  device: gyre.DeviceName,
  data: number[] | number[][] | number[][][],
  dtype: gyre.DType = "float32",
) {
  return gyre.tensor(data, { device, dtype });
}

test("2x3 @ 3x2", async (device) => {
  const a = t(device, [[1, 2, 3], [4, 5, 6]]);
  const b = t(device, [[7, 8], [9, 10], [11, 12]]);
  // [1*7 + 2*9 + 3*11, 1*8 + 2*10 + 3*12], [4*7 + 5*9 + 6*11, 4*8 + 5*10 + 6*12]
  await expectTensor(gyre.matmul(a, b), [2, 2], "float32", [58, 64, 139, 154]);
  // b^T a^T = (ab)^T
  await expectTensor(
    gyre.matmul(b, a, { transposeA: true, transposeB: true }),
    [2, 2],
    "float32",
    [58, 139, 64, 154],
  );
  a.dispose();
  b.dispose();
});

test("1-D operands: the added axis is removed", async (device) => {
  const v = t(device, [1, 2, 3]);
  const w = t(device, [4, 5, 6]);
  const m = t(device, [[1, 2, 3], [4, 5, 6]]);
  const batched = t(device, [[[1, 0, 0], [0, 1, 0]], [[0, 0, 1], [1, 1, 1]]]);
  await expectTensor(gyre.matmul(v, w), [], "float32", [32]); // 4 + 10 + 18
  await expectTensor(gyre.matmul(m, v), [2], "float32", [14, 32]);
  await expectTensor(gyre.matmul(t(device, [1, -1]), m), [3], "float32", [-3, -3, -3]);
  await expectTensor(gyre.matmul(batched, v), [2, 2], "float32", [1, 2, 3, 6]);
  // [3] @ [2, 3, 2]: v times each matrix of batched^T (each [3, 2]).
  await expectTensor(
    gyre.matmul(v, batched, { transposeB: true }),
    [2, 2],
    "float32",
    [1, 2, 3, 6],
  );
  // Transposing a 1-D operand changes nothing (as NumPy's v.T).
  await expectTensor(gyre.matmul(v, w, { transposeA: true, transposeB: true }), [], "float32", [
    32,
  ]);
  for (const x of [v, w, m, batched]) x.dispose();
});

test("batch axes broadcast: [2, 1, 2, 2] @ [3, 2, 2] -> [2, 3, 2, 2]", async (device) => {
  // a[i] = (i + 1) I, b[j] = [[j, 1], [0, j]]: a[i] @ b[j] = (i + 1) b[j].
  const a = gyre.tensor([1, 0, 0, 1, 2, 0, 0, 2], { device, shape: [2, 1, 2, 2] });
  const b = gyre.tensor([0, 1, 0, 0, 1, 1, 0, 1, 2, 1, 0, 2], { device, shape: [3, 2, 2] });
  const expected: number[] = [];
  for (let i = 1; i <= 2; i++) {
    for (let j = 0; j < 3; j++) expected.push(i * j, i, 0, i * j);
  }
  await expectTensor(gyre.matmul(a, b), [2, 3, 2, 2], "float32", expected);
  // A stride-0 broadcast view as an operand.
  const shared = gyre.tensor([[1, 2], [3, 4]], { device }).broadcastTo([3, 2, 2]);
  await expectTensor(gyre.matmul(shared, b), [3, 2, 2], "float32", [
    0,
    1,
    0,
    3,
    1,
    3,
    3,
    7,
    2,
    5,
    6,
    11,
  ]);
  a.dispose();
  b.dispose();
  shared.dispose();
});

test("transposed and strided views are read through their strides", async (device) => {
  const at = t(device, [[1, 4], [2, 5], [3, 6]]); // a^T of [[1, 2, 3], [4, 5, 6]]
  const b = t(device, [[7, 8], [9, 10], [11, 12]]);
  await expectTensor(gyre.matmul(at.transpose(), b), [2, 2], "float32", [58, 64, 139, 154]);
  await expectTensor(gyre.matmul(at, b, { transposeA: true }), [2, 2], "float32", [
    58,
    64,
    139,
    154,
  ]);
  // transposeA on a transposed view undoes it.
  const a = at.transpose();
  await expectTensor(gyre.matmul(a.transpose(), b, { transposeA: true }), [2, 2], "float32", [
    58,
    64,
    139,
    154,
  ]);
  // Every other column of a wider matrix; reversed rows (negative strides are copied first).
  const wide = t(device, [[1, 0, 2, 0, 3, 0], [4, 0, 5, 0, 6, 0]]);
  await expectTensor(gyre.matmul(wide.slice(null, [0, 6, 2]), b), [2, 2], "float32", [
    58,
    64,
    139,
    154,
  ]);
  await expectTensor(
    gyre.matmul(b.slice([null, null, -1]), a.slice(null, [0, 2])),
    [3, 2],
    "float32",
    [
      11 * 1 + 12 * 4,
      11 * 2 + 12 * 5,
      9 + 40,
      18 + 50,
      7 + 32,
      14 + 40,
    ],
  );
  for (const x of [at, b, a, wide]) x.dispose();
});

test("K = 0 gives zeros; empty outputs", async (device) => {
  const a = gyre.zeros([2, 0], { device });
  const b = gyre.zeros([0, 3], { device });
  await expectTensor(gyre.matmul(a, b), [2, 3], "float32", [0, 0, 0, 0, 0, 0]);
  await expectTensor(
    gyre.matmul(gyre.zeros([0, 3], { device }), gyre.ones([3, 2], { device })),
    [0, 2],
    "float32",
    [],
  );
  await expectTensor(
    gyre.matmul(gyre.zeros([0, 2, 3], { device }), gyre.ones([3, 4], { device })),
    [0, 2, 4],
    "float32",
    [],
  );
  // linear with K = 0: the activation of the bias.
  await expectTensor(
    gyre.linear(gyre.zeros([2, 0], { device }), gyre.zeros([2, 0], { device }), {
      bias: t(device, [-1, 3]),
      activation: "relu",
    }),
    [2, 2],
    "float32",
    [0, 3, 0, 3],
  );
  a.dispose();
  b.dispose();
});

test("float16 (both accumulations), int32 wrapping and promotion", async (device) => {
  const a = [[1, 2, 3], [4, 5, 6]];
  const b = [[7, 8], [9, 10], [11, 12]];
  await expectTensor(
    gyre.matmul(t(device, a, "float16"), t(device, b, "float16")),
    [2, 2],
    "float16",
    [
      58,
      64,
      139,
      154,
    ],
  );
  await expectTensor(
    gyre.matmul(t(device, a, "float16"), t(device, b, "float16"), { accumulate: "float16" }),
    [2, 2],
    "float16",
    [58, 64, 139, 154],
  );
  // 2049 is not a float16 value: float32 accumulation rounds once at the end (2048 + 1 -> 2048).
  await expectTensor(
    gyre.matmul(t(device, [[2048, 1]], "float16"), t(device, [[1], [1]], "float16")),
    [1, 1],
    "float16",
    [2048],
  );
  await expectTensor(gyre.matmul(t(device, a, "int32"), t(device, b, "int32")), [2, 2], "int32", [
    58,
    64,
    139,
    154,
  ]);
  // 65536^2 = 2^32 wraps to 0; 46341^2 = 2147488281 wraps to -2147479015.
  await expectTensor(
    gyre.matmul(t(device, [[65536, 46341]], "int32"), t(device, [[65536, 0], [0, 46341]], "int32")),
    [1, 2],
    "int32",
    [0, -2147479015],
  );
  await expectTensor(gyre.matmul(t(device, a, "float16"), t(device, b)), [2, 2], "float32", [
    58,
    64,
    139,
    154,
  ]);
  await expectTensor(gyre.matmul(t(device, a, "int32"), t(device, b)), [2, 2], "float32", [
    58,
    64,
    139,
    154,
  ]);
});

test("NaN and infinities propagate as in a plain sum", async (device) => {
  const c = gyre.matmul(
    t(device, [[NaN, 1], [Infinity, 1], [Infinity, -Infinity], [Infinity, 0], [0, 2]]),
    t(device, [[1, 0], [1, 1]]),
  );
  // Rows: NaN + 1 | Inf + 1, Inf*0 + 1 | Inf - Inf, Inf*0 - Inf | Inf, Inf*0 | 0 + 2, 2
  const got = await values(c);
  c.dispose();
  assert.ok(Number.isNaN(got[0]) && Number.isNaN(got[1]));
  assert.deepEqual(got.slice(2, 4), [Infinity, NaN]);
  assert.ok(Number.isNaN(got[4]) && Number.isNaN(got[5]));
  assert.equal(got[6], Infinity);
  assert.ok(Number.isNaN(got[7]));
  assert.deepEqual(got.slice(8), [2, 2]);
});

test("every plan variant gives the same product", async (device) => {
  // 37 x 45 x 70 and a vector; data in small integers, so every variant is exact.
  const a = gyre.tensor(Array.from({ length: 37 * 70 }, (_, i) => (i * 7) % 11 - 5), {
    device,
    shape: [37, 70],
  });
  const b = gyre.tensor(Array.from({ length: 70 * 45 }, (_, i) => (i * 5) % 13 - 6), {
    device,
    shape: [70, 45],
  });
  const want = await values(gyre.matmul(a, b));
  const overrides: Partial<tuning.MatmulChoice>[] = [
    { variant: "tiled", tileM: 32, tileN: 32, tileK: 8, threadM: 4, threadN: 4 },
    {
      variant: "tiled",
      tileM: 64,
      tileN: 64,
      tileK: 4,
      threadM: 8,
      threadN: 8,
      doubleBuffer: false,
    },
    {
      variant: "tiled",
      tileM: 64,
      tileN: 32,
      tileK: 8,
      threadM: 4,
      threadN: 4,
      sharedLayout: "interleaved",
    },
    { variant: "splitK", splitK: 3, tileM: 32, tileN: 32, tileK: 8, threadM: 4, threadN: 4 },
    // 4 tiles of 9 K steps: 5 workgroups cut tiles mid-K, 36 take one step each (a tile summed
    // from 9 of them), 1 takes everything.
    ...[5, 36, 1].map((streamKGroups) => ({
      variant: "streamK" as const,
      streamKGroups,
      tileM: 32,
      tileN: 32,
      tileK: 8,
      threadM: 4,
      threadN: 4,
    })),
  ];
  for (const o of overrides) {
    tuning.setPlanOverride("matmul", o);
    assert.deepEqual(await values(gyre.matmul(a, b)), want, JSON.stringify(o));
  }
  const row = a.slice([0, 1]);
  tuning.setPlanOverride("matmul", null);
  const wantRow = await values(gyre.matmul(row, b));
  assert.deepEqual(wantRow, want.slice(0, 45));
  for (const o of [{ gemvWidth: 1 }, { gemvWidth: 16 }, { variant: "tiled" as const }]) {
    tuning.setPlanOverride("matmul", o);
    assert.deepEqual(await values(gyre.matmul(row, b)), wantRow, JSON.stringify(o));
    assert.deepEqual(
      await values(gyre.matmul(b, row, { transposeA: true, transposeB: true })),
      wantRow,
      `N = 1, ${JSON.stringify(o)}`,
    );
  }
  a.dispose();
  b.dispose();
  row.dispose();
});

test("float16 accumulation in pairs of k or with A repeated gives the same product as one A value at a time", async (device) => {
  if (device === "gpu" && !gyre.runtime().caps?.shaderF16) return;
  const tiles: Partial<tuning.MatmulChoice>[] = [
    { variant: "tiled", tileM: 32, tileN: 32, tileK: 8, threadM: 4, threadN: 4 },
    { variant: "tiled", tileM: 64, tileN: 64, tileK: 16, threadM: 8, threadN: 8 },
    {
      variant: "tiled",
      tileM: 32,
      tileN: 64,
      tileK: 8,
      threadM: 4,
      threadN: 8,
      doubleBuffer: false,
    },
    { variant: "splitK", splitK: 3, tileM: 32, tileN: 64, tileK: 4, threadM: 4, threadN: 8 },
  ];
  // M x K x N in small integers (every partial sum an integer below 2048, exact in float16):
  // multiples of 4 take vec4 loads (along k for A and for B stored [N, K], along N for B, along
  // M for A stored [K, M]), the others scalar ones.
  for (const [m, k, n] of [[37, 72, 48], [37, 70, 45], [40, 24, 20]]) {
    const a = gyre.tensor(Array.from({ length: m * k }, (_, i) => (i * 7) % 9 - 4), {
      device,
      shape: [m, k],
      dtype: "float16",
    });
    const b = gyre.tensor(Array.from({ length: k * n }, (_, i) => (i * 5) % 7 - 3), {
      device,
      shape: [k, n],
      dtype: "float16",
    });
    // Stored transposed: B's loads then run along k, A's along M.
    const bT = b.transpose().clone().realize();
    const aT = a.transpose().clone().realize();
    const want = await values(gyre.matmul(a.cast("float32"), b.cast("float32")));
    try {
      for (const tile of tiles) {
        for (const productForm of ["pairedK", "repeatedA", "broadcast"] as const) {
          tuning.setPlanOverride("matmul", { ...tile, productForm });
          const label = JSON.stringify({ m, k, n, ...tile, productForm });
          const options = { accumulate: "float16" as const };
          assert.deepEqual(await values(gyre.matmul(a, b, options)), want, label);
          const transposed = gyre.matmul(a, bT, { ...options, transposeB: true });
          assert.deepEqual(await values(transposed), want, `${label} transposeB`);
          const viaA = gyre.matmul(aT, b, { ...options, transposeA: true });
          assert.deepEqual(await values(viaA), want, `${label} transposeA`);
        }
      }
    } finally {
      tuning.setPlanOverride("matmul", null);
    }
    for (const x of [a, b, aT, bT]) x.dispose();
  }
});

test("A copied into [K, M] order first: the same product, one more dispatch, nothing kept", async (device) => {
  if (device !== "gpu") return;
  const gpu = gpuBackendOf()!;
  // Sizes around the transposing kernel's 64 x 64 tiles; batches broadcast, sliced and whole.
  // Even sizes in float16 take the kernel's paired form (two elements per word).
  const cases: [number[], number[], boolean][] = [
    [[70, 129], [129, 5], false],
    [[2, 3, 64, 65], [65, 33], false],
    [[3, 1, 17, 64], [2, 64, 9], true],
    [[66, 130], [130, 12], false],
    [[2, 1, 64, 66], [3, 66, 8], false],
  ];
  const dtypes = gyre.runtime().caps?.shaderF16
    ? ["float32", "float16"] as const
    : ["float32"] as const;
  for (const dtype of dtypes) {
    for (const [aShape, bShape, sliced] of cases) {
      const size = (s: number[]) => s.reduce((x, y) => x * y, 1);
      const k = aShape[aShape.length - 1];
      const a0 = gyre.tensor(Array.from({ length: size(aShape) * 2 }, (_, i) => (i * 7) % 9 - 4), {
        device,
        shape: [...aShape.slice(0, -1), 2 * k],
        dtype,
      });
      // Every other column when sliced (A's strides allow no vector loads), else the first half.
      const a = a0.slice(...aShape.slice(0, -1).map(() => null), sliced ? [0, 2 * k, 2] : [0, k]);
      const b = gyre.tensor(Array.from({ length: size(bShape) }, (_, i) => (i * 5) % 7 - 3), {
        device,
        shape: bShape,
        dtype,
      });
      const want = await values(gyre.matmul(a, b));
      gyre.flush();
      const before = gpu.bufferPool.stats();
      const dispatches = gpu.batch.totalDispatches;
      let got: gyre.Tensor;
      try {
        // Tiles in one pass (a software adapter's plan splits K where a thread would idle).
        tuning.setPlanOverride("matmul", { transposeAFirst: true, variant: "tiled" });
        got = gyre.matmul(a, b).realize();
        gyre.flush();
      } finally {
        tuning.setPlanOverride("matmul", null);
      }
      const label = JSON.stringify({ dtype, aShape, bShape, sliced });
      assert.equal(gpu.batch.totalDispatches - dispatches, 2, label);
      // Small integers: both orders give every sum exactly.
      assert.deepEqual(await values(got), want, label);
      got.dispose();
      gyre.flush();
      assert.equal(
        gpu.bufferPool.stats().liveBuffers,
        before.liveBuffers,
        `${label}: the copy is released`,
      );
      for (const x of [a0, a, b]) x.dispose();
    }
  }
});

test("the transposing copy: every form and tile shape gives the exact transpose", async (device) => {
  if (device !== "gpu") return;
  const gpu = gpuBackendOf()!;
  const dtypes = gyre.runtime().caps?.shaderF16
    ? ["float32", "float16"] as const
    : ["float32"] as const;
  // [batches, rows, columns]: partial tiles, more tiles than a workgroup takes, one tile.
  for (const [batches, rows, columns] of [[1, 130, 66], [3, 64, 200], [2, 2, 64]]) {
    for (const dtype of dtypes) {
      // Source rows padded to columns + 2, starting at element 2: strides and offsets count.
      const pitch = columns + 2;
      const data = Array.from({ length: 2 + batches * rows * pitch }, (_, i) => (i % 1999) - 999);
      const x = gyre.tensor(data, { device, dtype });
      const copy: TransposeUniforms = {
        rows,
        columns,
        batches,
        offset: 2,
        rowStride: pitch,
        columnStride: 1,
        batchStride: rows * pitch,
      };
      const want: number[] = [];
      for (let b = 0; b < batches; b++) {
        for (let c = 0; c < columns; c++) {
          for (let r = 0; r < rows; r++) want.push(data[2 + b * rows * pitch + r * pitch + c]);
        }
      }
      for (const paired of transposePairs(dtype, copy) ? [false, true] : [false]) {
        for (const [tileRows, tileColumns] of [[64, 64], [128, 64], [64, 128], [32, 32]]) {
          const spec: TransposeSpec = { dtype, paired, tileRows, tileColumns };
          if (paired && tileRows < 64 || paired && tileColumns < 64) continue;
          if (transposeSharedBytes(spec) > gpu.caps.limits.maxComputeWorkgroupStorageSize) continue;
          const out = gpu.allocate("test", dtype, want.length) as GpuStorage;
          transposeCopy(
            gpu,
            "test",
            (viewOf(x).storage as GpuStorage).buffer,
            out.buffer,
            { ...copy, dtype },
            spec,
          );
          const got = tensorFromStorage(out, dtype, [want.length]);
          const label = JSON.stringify({ batches, rows, columns, ...spec });
          assert.deepEqual(Array.from(await got.data()), want, label);
          got.dispose();
        }
      }
      x.dispose();
    }
  }
});

test("linear: x @ weight^T + bias, then the activation", async (device) => {
  const x = t(device, [[1, 2]]);
  const w = t(device, [[1, 0], [0, 1], [1, -1]]);
  const bias = t(device, [0, 1, 0]);
  await expectTensor(gyre.linear(x, w), [1, 3], "float32", [1, 2, -1]);
  await expectTensor(gyre.linear(x, w, { bias }), [1, 3], "float32", [1, 3, -1]);
  await expectTensor(gyre.linear(x, w, { bias, activation: "relu" }), [1, 3], "float32", [1, 3, 0]);
  await expectTensor(gyre.linear(t(device, [1, 2]), w, { bias }), [3], "float32", [1, 3, -1]);
  // z = [0.5, 1, -0.5] for each activation.
  const z = [0.5, 1, -0.5];
  const half = t(device, [[0.5]]);
  const column = t(device, [[1], [2], [-1]]);
  const erf = (v: number) => {
    let term = v, sum = v;
    for (let n = 1; n < 40; n++) {
      term *= -v * v / n;
      sum += term / (2 * n + 1);
    }
    return (2 / Math.sqrt(Math.PI)) * sum;
  };
  const reference: Record<gyre.LinearActivation, (v: number) => number> = {
    relu: (v) => Math.max(v, 0),
    sigmoid: (v) => 1 / (1 + Math.exp(-v)),
    tanh: Math.tanh,
    silu: (v) => v / (1 + Math.exp(-v)),
    gelu: (v) => 0.5 * v * (1 + erf(v / Math.SQRT2)),
  };
  for (const [name, f] of Object.entries(reference)) {
    await expectClose(
      gyre.linear(half, column, { activation: name as gyre.LinearActivation }),
      [1, 3],
      "float32",
      z.map(f),
      2e-6,
    );
  }
  for (const v of [x, w, bias, half, column]) v.dispose();
});

test("linear runs bias and activation in the matmul's dispatch", async (device) => {
  if (device !== "gpu") return;
  const x = gyre.ones([64, 96], { device });
  const w = gyre.ones([80, 96], { device });
  const bias = gyre.full([80], -100, { device });
  const bias4 = gyre.full([80], 4, { device });
  // Compute the (lazy) inputs first: only the product's dispatches are counted.
  await gyre.readAll([x, w, bias, bias4]);
  const batch = gpuBackendOf()!.batch;
  const before = batch.totalDispatches;
  // Tiles in one pass (a software adapter's plan splits K where a thread would idle).
  tuning.setPlanOverride("matmul", { variant: "tiled" });
  let y: gyre.Tensor;
  try {
    y = gyre.linear(x, w, { bias, activation: "relu" });
  } finally {
    tuning.setPlanOverride("matmul", null);
  }
  assert.equal(batch.totalDispatches - before, 1, "one dispatch for matmul + bias + relu");
  assert.deepEqual(new Set(await values(y)), new Set([0]));
  // Split K: the partials' reduction applies the epilogue (two dispatches in all).
  tuning.setPlanOverride("matmul", { variant: "splitK", splitK: 3 });
  const before2 = batch.totalDispatches;
  const z = gyre.linear(x, w, { bias: bias4, activation: "sigmoid" });
  assert.equal(batch.totalDispatches - before2, 2);
  await expectClose(z, [64, 80], "float32", new Array(64 * 80).fill(1), 1e-6);
  for (const v of [x, w, bias, bias4, y]) v.dispose();
});

test("stream-K: tiles cut anywhere in K, the epilogue after the sum, two dispatches", async (device) => {
  if (device !== "gpu") return;
  const gpu = gpuBackendOf()!;
  // 70 x 45 x 300 in small integers (exact in any order): 3 x 2 tiles of 32 x 32, 38 K steps.
  const x = gyre.tensor(Array.from({ length: 70 * 300 }, (_, i) => (i * 7) % 11 - 5), {
    device,
    shape: [70, 300],
  });
  const w = gyre.tensor(Array.from({ length: 45 * 300 }, (_, i) => (i * 5) % 13 - 6), {
    device,
    shape: [45, 300],
  });
  const bias = gyre.tensor(Array.from({ length: 45 }, (_, i) => i - 20), { device });
  await gyre.readAll([x, w, bias]);
  const tile = { tileM: 32, tileN: 32, tileK: 8, threadM: 4, threadN: 4 };
  tuning.setPlanOverride("matmul", { variant: "tiled", ...tile });
  const want = await values(gyre.linear(x, w, { bias, activation: "relu" }));
  assert.ok(want.some((v) => v > 0) && want.some((v) => v === 0), "relu cuts some outputs");
  // Whole waves of the group count run as plain tiles (1 and 2 groups: all six tiles; 4: four
  // tiles, then two shared by 4 workgroups, then their sums: three dispatches); 7, 19: tiles
  // cut once or twice; 228: one K step per workgroup, a tile summed from 38 parts; 500: no more
  // workgroups than units.
  const cases = [[1, 1], [2, 1], [4, 3], [7, 2], [19, 2], [228, 2], [500, 2]];
  for (const [streamKGroups, dispatches] of cases) {
    tuning.setPlanOverride("matmul", { variant: "streamK", streamKGroups, ...tile });
    const before = gpu.batch.totalDispatches;
    const got = gyre.linear(x, w, { bias, activation: "relu" });
    assert.equal(gpu.batch.totalDispatches - before, dispatches, `${streamKGroups} groups`);
    assert.deepEqual(await values(got), want, `${streamKGroups} groups`);
    got.dispose();
  }
  for (const v of [x, w, bias]) v.dispose();
});

test("typed errors name the argument and leave nothing allocated", async (device) => {
  const a = gyre.ones([2, 3], { device });
  const b = gyre.ones([4, 2], { device });
  const scalar = gyre.tensor(1, { device });
  const vector = gyre.ones([2], { device });
  const flags = a.greater(0);
  const unsigned = a.cast("uint32");
  const integers = a.cast("int32");
  const batchA = gyre.ones([2, 2, 3], { device });
  const batchB = gyre.ones([3, 3, 2], { device });
  const weights = [[3], [4, 2], [4, 3]].map((shape) => gyre.ones(shape, { device }));
  const intWeight = gyre.ones([4, 3], { device, dtype: "int32" });
  const bias3 = gyre.ones([3], { device });
  const other = DEVICES.length > 1
    ? gyre.ones([3, 2], { device: device === "gpu" ? "wasm" : "gpu" })
    : null;
  await gyre.readAll([
    a,
    b,
    scalar,
    vector,
    flags,
    unsigned,
    integers,
    batchA,
    batchB,
    ...weights,
    intWeight,
    bias3,
  ]);
  const before = liveCounts();
  const expectError = (
    fn: () => unknown,
    type: typeof gyre.GyreError,
    argument: string,
    includes: string[] = [],
  ) => {
    assert.throws(fn, (e: unknown) => {
      assert.ok(e instanceof type, `${e} is not a ${type.name}`);
      assert.equal((e as gyre.GyreError).argument, argument);
      for (const s of includes) {
        assert.ok((e as Error).message.includes(s), `"${(e as Error).message}" lacks ${s}`);
      }
      return true;
    });
    assert.deepEqual(liveCounts(), before, "a failed call leaked storage");
  };
  expectError(() => gyre.matmul(a, b), gyre.ShapeError, "b", ["[2, 3]", "[4, 2]"]);
  expectError(() => gyre.matmul(a, a), gyre.ShapeError, "b", ["[2, 3]"]);
  expectError(() => gyre.matmul(a, vector), gyre.ShapeError, "b", ["length"]);
  expectError(() => gyre.matmul(batchA, batchB), gyre.ShapeError, "b", ["[2]", "[3]"]);
  expectError(() => gyre.matmul(scalar, a), gyre.ShapeError, "a", ["rank"]);
  expectError(() => gyre.matmul(a, scalar), gyre.ShapeError, "b");
  expectError(() => gyre.matmul(flags, a), gyre.DTypeError, "a");
  expectError(() => gyre.matmul(a, unsigned, { transposeB: true }), gyre.DTypeError, "b");
  expectError(
    () => gyre.matmul(a, a, { transposeB: true, accumulate: "float16" }),
    gyre.ValueError,
    "options.accumulate",
  );
  expectError(
    () => gyre.matmul(a, a, { accumulate: "float64" as "float32" }),
    gyre.ValueError,
    "options.accumulate",
  );
  expectError(
    () => gyre.matmul(a, a, { transposeB: 1 as unknown as boolean }),
    gyre.ValueError,
    "options.transposeB",
  );
  expectError(() => gyre.matmul(a, [1, 2] as unknown as gyre.Tensor), gyre.ValueError, "b");
  expectError(() => gyre.linear(a, weights[0]), gyre.ShapeError, "weight");
  expectError(() => gyre.linear(a, weights[1]), gyre.ShapeError, "weight");
  expectError(() => gyre.linear(a, weights[2], { bias: bias3 }), gyre.ShapeError, "options.bias");
  expectError(
    () => gyre.linear(a, weights[2], { activation: "swish" as "relu" }),
    gyre.ValueError,
    "options.activation",
  );
  expectError(() => gyre.linear(integers, intWeight), gyre.DTypeError, "x");
  if (other) expectError(() => gyre.matmul(a, other), gyre.DeviceError, "b");
  for (
    const x of [
      a,
      b,
      scalar,
      vector,
      flags,
      unsigned,
      integers,
      batchA,
      batchB,
      ...weights,
      intWeight,
      bias3,
    ]
  ) {
    x.dispose();
  }
  other?.dispose();
});

test("nothing leaks across products, epilogues, split-K and stream-K partials", async (device) => {
  const a = gyre.ones([33, 70], { device, dtype: "float16" });
  const b = gyre.ones([70, 20], { device });
  await gyre.sync();
  const before = liveCounts();
  for (const o of [{ variant: "splitK", splitK: 2 }, { variant: "streamK", streamKGroups: 3 }]) {
    tuning.setPlanOverride("matmul", o as Partial<tuning.MatmulChoice>);
    gyre.tidy(() => {
      gyre.matmul(a, b);
      gyre.linear(b.transpose(), a.cast("float32"), {
        bias: gyre.ones([33], { device }),
        activation: "gelu",
      });
      gyre.matmul(a.slice([0, 1]), b);
    });
  }
  tuning.setPlanOverride("matmul", null);
  await gyre.sync();
  assert.deepEqual(liveCounts(), before);
  a.dispose();
  b.dispose();
});

Deno.test("the WASM GEMM matches an f64 triple loop within gamma_K |A||B|", async () => {
  await gyre.init({ device: "auto" });
  let seed = 12345;
  const rand = () => {
    seed = (seed * 1103515245 + 12345) >>> 0;
    return seed / 4294967296 - 0.5;
  };
  // Past the packing blocks (MC 128, KC 256, NR 8, MR 4) and their edges; transposed and
  // strided operands; a broadcast batch.
  const cases: [number, number, number, number, boolean, boolean][] = [
    [1, 1, 1, 1, false, false],
    [3, 5, 7, 1, false, true],
    [4, 8, 256, 1, false, false],
    [131, 9, 257, 1, true, false],
    [129, 2051, 3, 1, false, true],
    [17, 33, 600, 3, true, true],
  ];
  for (const [m, n, k, batch, transA, transB] of cases) {
    const aData = Float32Array.from({ length: batch * m * k }, rand);
    const bData = Float32Array.from({ length: k * n }, rand);
    // A stored as [batch, k, m] when transposed; B as [n, k].
    const aStored = transA
      ? gyre.tensor(aData, { device: "wasm", shape: [batch, k, m] })
      : gyre.tensor(aData, { device: "wasm", shape: [batch, m, k] });
    const bStored = transB
      ? gyre.tensor(bData, { device: "wasm", shape: [n, k] })
      : gyre.tensor(bData, { device: "wasm", shape: [k, n] });
    const c = gyre.matmul(aStored, bStored, { transposeA: transA, transposeB: transB });
    const got = await values(c);
    const u = 2 ** -24;
    const gamma = (k * u) / (1 - k * u);
    for (let q = 0; q < batch; q++) {
      for (let i = 0; i < m; i++) {
        for (let j = 0; j < n; j++) {
          let sum = 0, scale = 0;
          for (let p = 0; p < k; p++) {
            const x = (transA ? aData[q * m * k + p * m + i] : aData[q * m * k + i * k + p]) *
              (transB ? bData[j * k + p] : bData[p * n + j]);
            sum += x;
            scale += Math.abs(x);
          }
          const g = got[(q * m + i) * n + j];
          assert.ok(
            Math.abs(g - sum) <= gamma * scale + 1e-30,
            `${m}x${n}x${k}: [${q}, ${i}, ${j}] ${g} vs ${sum} (bound ${gamma * scale})`,
          );
        }
      }
    }
    for (const x of [aStored, bStored, c]) x.dispose();
  }
});

Deno.test("planMatmul: the rule's choices and what overrides may ask", () => {
  const h200 = {
    description: "NVIDIA H200",
    isFallbackAdapter: false,
    subgroups: true,
    subgroupMinSize: 32,
    subgroupMaxSize: 32,
    limits: { maxComputeWorkgroupStorageSize: 49152, maxComputeInvocationsPerWorkgroup: 1024 },
  } as unknown as DeviceCaps;
  const lavapipe = {
    ...h200,
    isFallbackAdapter: true,
    subgroupMinSize: 8,
    subgroupMaxSize: 8,
    limits: { maxComputeWorkgroupStorageSize: 32768, maxComputeInvocationsPerWorkgroup: 1024 },
  } as unknown as DeviceCaps;
  let ov: Partial<tuning.MatmulChoice> | null = null;
  const plan = (caps: DeviceCaps, m: number, n: number, k: number, extra = {}) =>
    tuning.planMatmul(caps, { m, n, k, batch: 1, dtype: "float32", ...extra }, ov);
  const halfProblem = { dtype: "float16" as const, halfAccumulate: true };
  const big = plan(h200, 4096, 4096, 4096);
  assert.deepEqual(
    [big.variant, big.tileM, big.tileN, big.tileK, big.threadM, big.threadN, big.streamKGroups],
    ["streamK", 128, 128, 8, 8, 16, 264],
  );
  // Stream-K only where whole waves of 264 tiles would leave the last part-empty for long
  // enough, on a GPU whose multiprocessors the rule knows, with float32 accumulation.
  const waves = (caps: DeviceCaps, n: number, extra = {}) =>
    plan(caps, 4096, n, 4096, extra).variant;
  assert.equal(waves(h200, 4224), "tiled", "1056 tiles: four whole waves");
  assert.equal(waves(h200, 4352), "streamK", "1088 tiles");
  assert.equal(waves(h200, 4096, { dtype: "float16" }), "streamK", "float16 storage");
  assert.equal(waves(h200, 4096, halfProblem), "tiled", "float16 accumulation");
  assert.equal(waves(h200, 4096, { dtype: "int32" }), "tiled", "int32");
  const h100 = { ...h200, description: "NVIDIA H100 80GB HBM3" } as DeviceCaps;
  assert.equal(plan(h100, 4096, 4096, 4096).streamKGroups, 264);
  const h100Sxm5 = { ...h200, description: "NVIDIA H100 SXM5 80GB" } as DeviceCaps;
  assert.equal(plan(h100Sxm5, 4096, 4096, 4096).streamKGroups, 264);
  const h100Pcie = { ...h200, description: "NVIDIA H100 PCIe" } as DeviceCaps;
  assert.equal(plan(h100Pcie, 4096, 4096, 4096).streamKGroups, 228);
  const unknown = { ...h200, description: "Some GPU" } as DeviceCaps;
  assert.equal(waves(unknown, 4096), "tiled", "multiprocessors unknown");
  assert.equal(waves(lavapipe, 4096), "tiled", "software adapter");
  assert.equal(plan(h200, 2048, 2048, 2048).variant, "tiled", "256 tiles: one wave 97% full");
  assert.equal(plan(h200, 4096, 4096, 1024).variant, "tiled", "too short a K to pay");
  assert.equal(plan(h200, 4096, 4352, 1024).variant, "streamK", "a wave of 32 tiles");
  // float16 accumulation: A repeated in one shared buffer; 8x8 per invocation with A stored
  // [K, M] (a large row-major A is copied into that order first), 8x16 with A row-major.
  const form = (c: tuning.MatmulChoice) => [
    c.tileK,
    c.threadM,
    c.threadN,
    c.productForm,
    c.doubleBuffer,
    c.transposeAFirst,
  ];
  const half = plan(h200, 4096, 4096, 4096, halfProblem);
  assert.deepEqual(form(half), [16, 8, 8, "repeatedA", false, true]);
  const columns = plan(h200, 4096, 4096, 4096, { ...halfProblem, transposeA: true });
  assert.deepEqual(form(columns), [16, 8, 8, "repeatedA", false, false]);
  // A row-major that cannot be copied (a fused prologue, scattered batch axes), or too small a
  // product for the copy to pay: A read as it is stored.
  const rowMajor = [8, 8, 16, "repeatedA", false, false];
  assert.deepEqual(
    form(plan(h200, 4096, 4096, 4096, { ...halfProblem, aCopyable: false })),
    rowMajor,
  );
  assert.deepEqual(form(plan(h200, 4096, 1024, 4096, halfProblem)), rowMajor);
  assert.equal(plan(h200, 4096, 4096, 4096).transposeAFirst, false, "float32 reads A as stored");
  assert.equal(plan(h200, 1, 4096, 4096, halfProblem).transposeAFirst, false, "gemv");
  assert.equal(
    plan(h200, 4096, 4096, 4096, { transposeA: true }).productForm,
    "broadcast",
    "float32",
  );
  assert.deepEqual([plan(h200, 1024, 1024, 1024).tileM, plan(h200, 2048, 2048, 2048).tileM], [
    64,
    128,
  ]);
  const vector = plan(h200, 1, 4096, 4096);
  assert.deepEqual([vector.variant, vector.gemvWidth], ["gemv", 4]);
  const dot = plan(h200, 4096, 1, 4096);
  assert.deepEqual([dot.variant, dot.gemvWidth, dot.subgroups], ["gemv", 32, true]);
  assert.equal(
    plan(lavapipe, 4096, 1, 4096).subgroups,
    false,
    "32 lanes do not fit 8-wide subgroups",
  );
  // A software adapter: the largest tile, K split where the tile count leaves a thread idle in
  // the last wave (the held-out lavapipe products' leaders).
  const twoThreads = { ...lavapipe, softwareThreads: 2 } as DeviceCaps;
  const soft = (c: tuning.MatmulChoice) => [c.variant, c.tileM, c.tileN, c.splitK];
  assert.deepEqual(soft(plan(twoThreads, 140, 75, 147)), ["tiled", 128, 128, 1], "2 tiles");
  assert.deepEqual(soft(plan(twoThreads, 68, 91, 658)), ["splitK", 128, 128, 2], "1 tile");
  assert.deepEqual(soft(plan(twoThreads, 286, 78, 168)), ["splitK", 128, 128, 2], "3 tiles");
  assert.deepEqual(soft(plan(twoThreads, 68, 91, 40)), ["tiled", 128, 128, 1], "K too short");
  const sixteen = { ...lavapipe, softwareThreads: 16 } as DeviceCaps;
  assert.deepEqual(soft(plan(sixteen, 128, 128, 4096)), ["splitK", 128, 128, 16]);
  assert.deepEqual(soft(plan(sixteen, 128, 128, 256)), ["splitK", 128, 128, 8], "K / 32");
  assert.equal(plan(sixteen, 1024, 1024, 1024).variant, "tiled", "64 tiles: whole waves");
  const split = plan(h200, 128, 128, 65536);
  assert.deepEqual([split.variant, split.tileM, split.splitK], ["splitK", 64, 64]);
  assert.equal(plan(h200, 128, 128, 1024).variant, "tiled", "short K is never split");
  // Every tile the rule picks fits the device.
  for (const caps of [h200, lavapipe]) {
    for (const s of [16, 100, 1024, 4096]) {
      plan(caps, s, s, s, { dtype: "float16", halfAccumulate: true });
    }
  }
  {
    ov = { tileM: 128, tileN: 128, tileK: 16, threadM: 8, threadN: 8 };
    // 128x128x16 double-buffered f32 tiles need 33 KiB: fine on an H200, refused on lavapipe.
    assert.equal(plan(h200, 64, 64, 64).tileK, 16);
    assert.throws(() => plan(lavapipe, 64, 64, 64), gyre.ValueError);
    ov = { variant: "gemv" };
    assert.equal(plan(h200, 64, 64, 64).variant, "tiled", "gemv needs M = 1 or N = 1");
    ov = { threadM: 3 };
    assert.throws(() => plan(h200, 64, 64, 64), gyre.ValueError);
    ov = { productForm: "pairs" as "pairedK" };
    assert.throws(() => plan(h200, 64, 64, 64), /matmul\.productForm/);
    // An override's form replaces the rule's repeated A.
    ov = { productForm: "pairedK" };
    const paired = plan(h200, 4096, 4096, 4096, { dtype: "float16", halfAccumulate: true });
    assert.equal(paired.productForm, "pairedK");
    // A repeated doubles A's shared tile: double-buffered float16 128x128x32 tiles with 8x8
    // per invocation take 32.5 KiB, and 48.5 KiB with A repeated, past an H200's 48.
    const tile = { tileM: 128, tileN: 128, tileK: 32, threadM: 8, threadN: 8, doubleBuffer: true };
    ov = tile;
    assert.equal(plan(h200, 64, 64, 64, halfProblem).tileK, 32);
    ov = { ...tile, productForm: "repeatedA" };
    assert.throws(() => plan(h200, 64, 64, 64, halfProblem), /48\.5 KiB|49664 bytes/);
    ov = { variant: "splitK", splitK: 5 };
    assert.equal(plan(h200, 64, 64, 64).splitK, 5);
    // Stream-K by override: the rule's slots, or as many workgroups as keep the device busy.
    ov = { variant: "streamK" };
    assert.deepEqual([plan(h200, 64, 64, 64).variant, plan(h200, 64, 64, 64).streamKGroups], [
      "streamK",
      264,
    ]);
    assert.equal(plan(lavapipe, 64, 64, 64).streamKGroups, 16);
    assert.equal(plan(h200, 64, 64, 64, halfProblem).variant, "tiled", "float16 accumulation");
    assert.equal(plan(h200, 64, 64, 64, { dtype: "int32" }).variant, "tiled", "int32");
    ov = { variant: "streamK", streamKGroups: 0 };
    assert.throws(() => plan(h200, 64, 64, 64), /matmul\.streamKGroups/);
    ov = { variant: "tiled", streamKGroups: 7 };
    assert.equal(plan(h200, 64, 64, 64).streamKGroups, 0, "only stream-K has persistent groups");
    // The copy may be forced on any dtype, but never where A is already stored [K, M].
    ov = { transposeAFirst: true };
    assert.equal(plan(h200, 64, 64, 64).transposeAFirst, true);
    assert.equal(plan(h200, 64, 64, 64, { transposeA: true }).transposeAFirst, false);
    assert.equal(plan(h200, 64, 64, 64, { aCopyable: false }).transposeAFirst, false);
  }
});
