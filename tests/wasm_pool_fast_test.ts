/**
 * The vector pooling entries of asm/pool.ts (`pool_max_fast_*`, `pool_avg_fast_f32`, which
 * src/wasm/pool.ts runs) against the scalar entries they replaced, which stay as the reference
 * (the override \`wasmPool: { form: "reference" }\`): random shapes (rows shorter and longer than a vector block,
 * planes narrower than the window), kernels, strides, padding, dilation and ceil mode, max pooling
 * with and without indices (float32, float16, int32) and average pooling (float32, float16) under
 * every divisor rule, on one thread and split between threads at random row boundaries (over
 * workspaces left holding stale row tags). Values come from the whole float domain: NaN with
 * random payloads and signs, infinities, signed zeros, subnormals, the extremes and magnitudes
 * 2^-149..2^127, or small integers with -0 next to +0 (ties).
 *
 * The bar is bit equality, not a tolerance. Max pooling selects an input element, and each lane
 * applies PyTorch's update in the scalar loop's order (or over consecutive runs of it, which gives
 * the same element), so even NaN payloads and the sign of a zero maximum match; indices match
 * exactly. Averages add each window's elements in the scalar loop's order in f32 and divide the
 * same way, so they match bit for bit too, except that a NaN sum's payload may differ where two
 * NaNs meet (which operand's payload an addition keeps is up to the CPU's instruction): a NaN
 * average only has to be a NaN. Each run checks which kernels ran, through the kernel observers.
 * @module
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import * as gyre from "../src/mod.ts";
import { mulberry32 } from "./_random.ts";
import { kernelObservers, type KernelRecord } from "../src/contract/backend.ts";
import * as tuning from "../src/tuning.ts";
import { postedTasks } from "../src/wasm/threads.ts";
import { wasmBackendOf } from "../src/runtime.ts";

const rt = await gyre.init({ device: "wasm" });
/** Threads this machine offers (2 on the 2-core CI box). */
const THREADS = await gyre.startWasmThreads();
const threaded = rt.wasm.shared && THREADS > 1;

type Pair = [number, number];
type DType = "float32" | "float16" | "int32";
type Values = "full" | "ties";
/** How x lies in memory: NCHW, each plane transposed, or channels-last (NHWC). */
type Layout = "nchw" | "transposed" | "channelsLast";

interface Case {
  shape: number[];
  dtype: DType;
  op: "max" | "avg";
  indices: boolean;
  kernel: Pair;
  stride: Pair;
  padding: Pair;
  dilation: Pair;
  ceilMode: boolean;
  countIncludePad: boolean;
  divisor: number | undefined;
  layout: Layout;
  values: Values;
  /** Threads to split between (1: no split); the case's rows are the most it can use. */
  threads: number;
  seed: number;
}

/** Widths: shorter than a block of four outputs, around multiples of 4, and long rows. */
const SIDES = [1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 16, 17, 23, 31, 32, 33, 40, 64, 67];

const axisArb = fc.record({
  k: fc.oneof(
    { arbitrary: fc.integer({ min: 1, max: 4 }), weight: 6 },
    fc.integer({ min: 5, max: 7 }),
  ),
  s: fc.integer({ min: 1, max: 4 }),
  p: fc.nat(),
  d: fc.oneof({ arbitrary: fc.constant(1), weight: 3 }, fc.integer({ min: 2, max: 3 })),
});

const caseArb: fc.Arbitrary<Case> = fc.record({
  n: fc.constantFrom(0, 1, 1, 2, 3),
  // Channels-last vectors take 4 channels at a time: fewer, a multiple, and a tail.
  c: fc.constantFrom(1, 2, 3, 4, 5, 8),
  h: fc.constantFrom(...SIDES),
  w: fc.constantFrom(...SIDES),
  dtype: fc.constantFrom<DType>("float32", "float32", "float16", "int32"),
  op: fc.constantFrom<"max" | "avg">("max", "max", "avg"),
  indices: fc.boolean(),
  hAxis: axisArb,
  wAxis: axisArb,
  // The default stride (the kernel) half the time; 2 and 1 (the literal-stride loops) often.
  strideIsKernel: fc.boolean(),
  ceilMode: fc.boolean(),
  countIncludePad: fc.boolean(),
  divisor: fc.oneof(
    { arbitrary: fc.constant(undefined), weight: 4 },
    fc.constantFrom(1, 3, -2, 7),
  ),
  layout: fc.constantFrom<Layout>("nchw", "transposed", "channelsLast"),
  values: fc.constantFrom<Values>("full", "full", "ties"),
  threads: fc.integer({ min: 1, max: 4 }),
  seed: fc.integer(),
}).map((r) => {
  const avg = r.op === "avg";
  const shape = [r.n, r.c, r.h, r.w];
  const axes = [r.hAxis, r.wAxis].map((a, i) => {
    const p = a.p % (Math.floor(a.k / 2) + 1);
    const d = avg ? 1 : a.d;
    const s = r.strideIsKernel ? a.k : a.s;
    // Grow the plane until at least one window fits (padding may make that smaller than k).
    shape[2 + i] = Math.max(shape[2 + i], d * (a.k - 1) + 1 - 2 * p);
    return { k: a.k, s, p, d };
  });
  return {
    shape,
    // Averages take float32 and float16 (int32 has no average).
    dtype: avg && r.dtype === "int32" ? "float32" : r.dtype,
    op: r.op,
    indices: !avg && r.indices,
    kernel: [axes[0].k, axes[1].k] as Pair,
    stride: [axes[0].s, axes[1].s] as Pair,
    padding: [axes[0].p, axes[1].p] as Pair,
    dilation: [axes[0].d, axes[1].d] as Pair,
    ceilMode: r.ceilMode,
    countIncludePad: r.countIncludePad,
    divisor: r.divisor,
    layout: r.layout,
    values: r.values,
    threads: r.threads,
    seed: r.seed,
  };
});

/** A float32 NaN with a random payload and sign. */
function randomNaN(rng: () => number): number {
  const bits = new Uint32Array([
    0x7f800000 | (1 + Math.floor(rng() * 0x7fffff)) | (rng() < 0.5 ? 0x80000000 : 0),
  ]);
  return new Float32Array(bits.buffer)[0];
}

const SPECIALS = [Infinity, -Infinity, 0, -0, 1e-40, -3e-42, 1.4e-45, -1.4e-45, 2 ** -126];
const MAX_F32 = 3.4028234663852886e38;

/** The elements of x (NCHW order), as float32 bits (int32 for int32). */
function data(c: Case, count: number): Float32Array | Int32Array {
  const rng = mulberry32(c.seed);
  if (c.dtype === "int32") {
    const specials = [-2147483648, 2147483647, 0, -1];
    return Int32Array.from({ length: count }, () => {
      if (rng() < 0.1) return specials[Math.floor(rng() * specials.length)];
      return c.values === "ties" ? Math.floor(rng() * 7) - 3 : Math.floor(rng() * 2 ** 32) | 0;
    });
  }
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) {
    const u = rng();
    if (c.values === "ties") {
      out[i] = u < 0.1
        ? randomNaN(rng)
        : u < 0.3
        ? (rng() < 0.5 ? -0 : 0)
        : Math.floor(rng() * 7) - 3;
    } else if (u < 0.06) out[i] = randomNaN(rng);
    else if (u < 0.2) out[i] = SPECIALS[Math.floor(rng() * SPECIALS.length)];
    else if (u < 0.23) out[i] = rng() < 0.5 ? MAX_F32 : -MAX_F32;
    else out[i] = (rng() < 0.5 ? -1 : 1) * 2 ** (-149 + rng() * 276);
  }
  // float16 keeps its own range: the device rounds the values to half on upload.
  if (c.dtype === "float16") {
    for (let i = 0; i < count; i++) out[i] = Math.fround(out[i] / 2 ** 100);
  }
  return out;
}

/** x on the WASM device: contiguous, or a view of the same values as the case's layout says. */
function input(c: Case, values: Float32Array | Int32Array): gyre.Tensor {
  if (c.layout === "nchw") {
    return gyre.tensor(values, { shape: c.shape, dtype: c.dtype, device: "wasm" });
  }
  const [n, ch, h, w] = c.shape;
  const swapped = new (values.constructor as Float32ArrayConstructor)(values.length);
  if (c.layout === "channelsLast") {
    for (let b = 0; b < n; b++) {
      for (let k = 0; k < ch; k++) {
        for (let i = 0; i < h * w; i++) {
          swapped[(b * h * w + i) * ch + k] = values[(b * ch + k) * h * w + i];
        }
      }
    }
    const stored = gyre.tensor(swapped, { shape: [n, h, w, ch], dtype: c.dtype, device: "wasm" });
    const view = stored.transpose([0, 3, 1, 2]);
    stored.dispose();
    return view;
  }
  for (let p = 0; p < n * ch; p++) {
    for (let i = 0; i < h; i++) {
      for (let j = 0; j < w; j++) swapped[p * h * w + j * h + i] = values[p * h * w + i * w + j];
    }
  }
  const stored = gyre.tensor(swapped, { shape: [n, ch, w, h], dtype: c.dtype, device: "wasm" });
  const view = stored.transpose([0, 1, 3, 2]);
  stored.dispose();
  return view;
}

/** The op on x: its outputs (values, then indices when asked). */
function pool(c: Case, x: gyre.Tensor): gyre.Tensor[] {
  if (c.op === "avg") {
    return [gyre.avgPool2d(x, {
      kernelSize: c.kernel,
      stride: c.stride,
      padding: c.padding,
      ceilMode: c.ceilMode,
      countIncludePad: c.countIncludePad,
      divisorOverride: c.divisor,
    })];
  }
  const options = {
    kernelSize: c.kernel,
    stride: c.stride,
    padding: c.padding,
    dilation: c.dilation,
    ceilMode: c.ceilMode,
  };
  if (!c.indices) return [gyre.maxPool2d(x, options)];
  const r = gyre.maxPool2d(x, { ...options, returnIndices: true });
  return [r.values, r.indices];
}

/** Runs the case's op with the options set, recording the WASM kernels launched. */
async function run(
  c: Case,
  x: gyre.Tensor,
  options: { form: "vector" | "channels-last" | "reference"; threads?: number },
): Promise<{ outputs: Uint32Array[]; rows: number; kernels: string[] }> {
  const kernels: string[] = [];
  const observer = (r: KernelRecord) => {
    if (r.device === "wasm" && r.kernel.startsWith("pool_")) kernels.push(r.kernel);
  };
  tuning.setPlanOverride("wasmPool", { form: options.form });
  tuning.setPlanOverride("wasmThreads", options.threads ? { threads: options.threads } : null);
  kernelObservers.add(observer);
  let results: gyre.Tensor[];
  try {
    results = pool(c, x).map((t) => t.realize());
  } finally {
    kernelObservers.delete(observer);
    tuning.setPlanOverride("wasmPool", null);
    tuning.setPlanOverride("wasmThreads", null);
  }
  try {
    // Float16 reads back widened to Float32Array: every output is 4-byte words.
    const outputs = await Promise.all(results.map(async (t) => {
      const d = await t.data();
      return new Uint32Array(d.buffer, d.byteOffset, d.length);
    }));
    const rows = results[0].shape.slice(0, -1).reduce((a, b) => a * b, 1);
    return { outputs, rows, kernels };
  } finally {
    for (const t of results) t.dispose();
  }
}

function describe(c: Case): string {
  return `${c.op} ${c.dtype} [${c.shape}] ${c.layout} k[${c.kernel}] ` +
    `s[${c.stride}] p[${c.padding}] d[${c.dilation}]${c.ceilMode ? " ceil" : ""}` +
    `${c.indices ? " indices" : ""}${
      c.op === "avg" ? ` ${c.countIncludePad ? "countIncludePad" : "valid"} ${c.divisor}` : ""
    } ${c.values} threads ${c.threads}`;
}

/** PyTorch's output size. */
function outputSize(size: number, k: number, p: number, s: number, d: number, ceil: boolean) {
  let out = Math.floor((size + 2 * p - d * (k - 1) - 1 + (ceil ? s - 1 : 0)) / s) + 1;
  if (ceil && (out - 1) * s >= size + p) out--;
  return out;
}

/**
 * Leaves blocks of the size of a max pooling's workspace on the free list, filled with one input
 * row number: a kernel that trusted its ring's stale row tags would find them there.
 */
function poisonWorkspaces(c: Case): void {
  const backend = wasmBackendOf(rt);
  const size = backend.kernels.pool_max_fast_workspace as unknown as (...args: number[]) => number;
  const ow = outputSize(
    c.shape[3],
    c.kernel[1],
    c.padding[1],
    c.stride[1],
    c.dilation[1],
    c.ceilMode,
  );
  const words = Math.ceil(size(c.kernel[0], c.dilation[0], ow) / 4);
  const row = Math.abs(c.seed) % c.shape[2];
  const blocks = Array.from(
    { length: 4 },
    () => gyre.full([words], row, { dtype: "int32", device: "wasm" }).realize(),
  );
  for (const b of blocks) b.dispose();
}

const isNaNBits = (b: number) => (b & 0x7f800000) === 0x7f800000 && (b & 0x7fffff) !== 0;

/**
 * Checks one case: the vector path, or the channels-last one for channels-last input (split as
 * the case says), against the scalar reference.
 */
async function check(c: Case): Promise<void> {
  const count = c.shape.reduce((a, b) => a * b, 1);
  const x = input(c, data(c, count));
  try {
    const split = c.threads > 1 && threaded;
    if (c.op === "max" && !c.indices) poisonWorkspaces(c);
    // Channels-last kernels take float32 and int32 without indices, in place (the rest copies).
    const inPlace = c.layout === "channelsLast" && !c.indices && c.dtype !== "float16";
    const form = c.layout === "channelsLast" ? "channels-last" : "vector";
    const posted = postedTasks();
    const fast = await run(c, x, { form, threads: split ? c.threads : 1 });
    const sharedWork = postedTasks() > posted;
    const reference = await run(c, x, { form: "reference" });
    const label = describe(c);
    const suffix = c.dtype === "int32" ? "i32" : "f32";
    const name = c.op === "avg" ? "avg" : "max";
    if (fast.outputs[0].length > 0) {
      const kernel = inPlace ? `pool_${name}_cl_${suffix}` : `pool_${name}_fast_${suffix}`;
      assert.ok(fast.kernels.includes(kernel), `${label}: ${fast.kernels}`);
      assert.ok(!fast.kernels.includes(`pool_${name}_${suffix}`), `${label}: ${fast.kernels}`);
      assert.ok(reference.kernels.includes(`pool_${name}_${suffix}`), label);
      assert.ok(!reference.kernels.some((k) => /_fast_|_cl_/.test(k)), label);
      // A split of two or more output rows (over all planes, or over images for channels-last
      // ones) posts work to a worker.
      const rows = inPlace ? fast.rows / c.shape[1] : fast.rows;
      assert.equal(sharedWork, split && rows > 1, `${label}: work shared or not`);
    }
    assert.equal(fast.outputs.length, reference.outputs.length);
    fast.outputs.forEach((got, k) => {
      const want = reference.outputs[k];
      assert.equal(got.length, want.length, `${label}: output ${k} length`);
      for (let i = 0; i < got.length; i++) {
        if (got[i] === want[i]) continue;
        // An average's NaN payload may differ (see the module doc).
        if (c.op === "avg" && isNaNBits(got[i]) && isNaNBits(want[i])) continue;
        assert.fail(
          `${label}: output ${k} [${i}] is ${got[i].toString(16)}, the reference ` +
            `${want[i].toString(16)}`,
        );
      }
    });
  } finally {
    x.dispose();
  }
}

Deno.test("the vector pooling equals the scalar reference bit for bit, on one thread and split", async () => {
  await fc.assert(fc.asyncProperty(caseArb, check), { numRuns: 400 });
});

const LAYOUT_DTYPES = [
  ["nchw", "float32"],
  ["nchw", "int32"],
  ["channelsLast", "float32"],
  ["channelsLast", "int32"],
] as const;

Deno.test("the vector pooling equals the scalar reference on the benchmark's windows", async () => {
  // The literal-window loops (3x3 and 2x2, strides 2 and 1) over rows of many blocks.
  const shape = [2, 3, 67, 130];
  const windows: Partial<Case>[] = [
    { op: "max", kernel: [3, 3], stride: [2, 2], padding: [0, 0] },
    { op: "max", kernel: [3, 3], stride: [2, 2], padding: [1, 1] },
    { op: "max", kernel: [2, 2], stride: [2, 2], padding: [0, 0] },
    { op: "max", kernel: [3, 3], stride: [1, 1], padding: [1, 1] },
    { op: "max", kernel: [2, 2], stride: [1, 1], padding: [1, 1], ceilMode: true },
    { op: "max", kernel: [3, 3], stride: [2, 2], padding: [1, 1], indices: true },
    { op: "avg", kernel: [3, 3], stride: [2, 2], padding: [1, 1] },
    { op: "avg", kernel: [2, 2], stride: [2, 2], padding: [0, 0] },
    { op: "avg", kernel: [3, 3], stride: [1, 1], padding: [1, 1], countIncludePad: true },
  ];
  for (const [k, w] of windows.entries()) {
    for (const [layout, dtype] of LAYOUT_DTYPES) {
      if (w.op === "avg" && dtype === "int32") continue;
      for (const values of ["full", "ties"] as const) {
        for (const threads of [1, 2]) {
          await check({
            // Channels-last: six channels, a vector and a tail.
            shape: layout === "channelsLast" ? [2, 6, 67, 130] : shape,
            dtype,
            op: "max",
            indices: false,
            kernel: [3, 3],
            stride: [2, 2],
            padding: [0, 0],
            dilation: [1, 1],
            ceilMode: false,
            countIncludePad: false,
            divisor: undefined,
            layout,
            values,
            threads,
            seed: 1000 + k,
            ...w,
          });
        }
      }
    }
  }
});

Deno.test("a large pooling is shared between threads, and a small one is not", () => {
  if (!threaded) return;
  const x = gyre.ones([8, 64, 64, 64], { device: "wasm" });
  const small = gyre.ones([1, 2, 8, 8], { device: "wasm" });
  try {
    let posted = postedTasks();
    gyre.maxPool2d(x, { kernelSize: 3, stride: 2 }).realize().dispose();
    assert.ok(postedTasks() > posted, "the large pooling posted work to a worker");
    posted = postedTasks();
    gyre.maxPool2d(small, { kernelSize: 3, stride: 2 }).realize().dispose();
    gyre.avgPool2d(small, { kernelSize: 2 }).realize().dispose();
    assert.equal(postedTasks(), posted, "the small poolings ran on this thread");
  } finally {
    x.dispose();
    small.dispose();
  }
});

Deno.test("the plan pools channels-last input in place into a channels-last result", async () => {
  const seen: string[] = [];
  const observer = (r: KernelRecord) => {
    if (r.device === "wasm" && r.kernel.startsWith("pool_")) seen.push(r.kernel);
  };
  // [1, 4, 3, 3] as NHWC memory: channel k of pixel (i, j) is 100 k + 3 i + j.
  const values = Float32Array.from({ length: 36 }, (_, e) => {
    const k = e % 4;
    const pixel = Math.floor(e / 4);
    return 100 * k + pixel;
  });
  const stored = gyre.tensor(values, { shape: [1, 3, 3, 4], device: "wasm" });
  const x = stored.transpose([0, 3, 1, 2]);
  kernelObservers.add(observer);
  try {
    const y = gyre.maxPool2d(x, { kernelSize: 2, stride: 1 });
    const z = gyre.avgPool2d(x, { kernelSize: 2, stride: 1 });
    assert.deepEqual(y.shape, [1, 4, 2, 2]);
    assert.deepEqual(
      Array.from(await y.data()),
      [0, 100, 200, 300].flatMap((b) => [b + 4, b + 5, b + 7, b + 8]),
    );
    assert.deepEqual(
      Array.from(await z.data()),
      [0, 100, 200, 300].flatMap((b) => [b + 2, b + 3, b + 5, b + 6]),
    );
    assert.deepEqual(seen, ["pool_max_cl_f32", "pool_avg_cl_f32"]);
    assert.deepEqual(
      tuning.planWasmPool(null, { channelsLast: true, channels: 4 }).form,
      "channels-last",
    );
    // Three channels: the NCHW vectors, after a copy.
    assert.equal(tuning.planWasmPool(null, { channelsLast: true, channels: 3 }).form, "vector");
    assert.equal(
      tuning.planWasmPool({ form: "channels-last" }, { channelsLast: false, channels: 8 }).form,
      "vector",
    );
    // The result feeds on: a sum over it reads the channels-last strides.
    assert.equal((await gyre.sum(y).data())[0], 4 * 24 + 4 * 100 * (0 + 1 + 2 + 3));
    y.dispose();
    z.dispose();
  } finally {
    kernelObservers.delete(observer);
    x.dispose();
    stored.dispose();
  }
});
