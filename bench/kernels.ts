/**
 * Kernel benchmarks: times every kernel with GPU timestamp queries (median of many runs), reports
 * achieved GB/s and the fraction of the device's own measured copy bandwidth, the per-op overhead
 * of a chain of small ops read back once, and the number of `mapAsync` calls of a ten-tensor
 * read-back. Writes JSON and Markdown to bench/results/.
 *
 * Usage: deno task bench [--scale small|full] [--out bench/results] [--runs N]
 * (default scale: full where the adapter binds 256 MiB buffers and is not a software one)
 * @module
 */
import * as gyre from "../src/mod.ts";
import * as tuning from "../src/tuning.ts";
import { GpuProfiler } from "../src/gpu/profiler.ts";
import { WGSL } from "../src/gpu/_wgsl_bundle.ts";
import { BINARY, UNARY } from "../src/ir/elementwise_table.ts";
import { INTERNAL_KERNELS } from "../src/kernels.ts";
import { kernelObservers } from "../src/contract/backend.ts";
import { dispatchBreakdown, median, slugOf } from "./_util.ts";
import type { GpuStorage } from "../src/gpu/host.ts";
import { transposeCopy } from "../src/gpu/elementwise.ts";
import { transposeSharedBytes } from "../src/gpu/_codegen_transpose.ts";
import type { TransposeSpec, TransposeUniforms } from "../src/plans/elementwise.ts";
import { viewOf } from "../src/tensor.ts";
import { gpuBackendOf } from "../src/runtime.ts";

const args = Deno.args;
const flag = (name: string, fallback: string) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const Mi = 1 << 20;
const rt = await gyre.init({ device: "gpu" });
const gpu = gpuBackendOf(rt)!;
const caps = rt.caps!;
// The full scale binds 256 MiB buffers: past a software adapter's limit (lavapipe: 128 MiB), and
// minutes of work on a CPU. Such adapters default to the small scale.
const FULL_BYTES = 64 * Mi * 4;
const fits = caps.limits.maxStorageBufferBindingSize >= FULL_BYTES;
const scale = flag("scale", fits && !caps.isFallbackAdapter ? "full" : "small");
if (scale === "full" && !fits) {
  console.error(
    `bench: --scale full binds ${
      FULL_BYTES / Mi
    } MiB buffers; this adapter (${caps.description}) ` +
      `binds at most ${caps.limits.maxStorageBufferBindingSize / Mi} MiB. Use --scale small.`,
  );
  Deno.exit(2);
}
const outDir = flag("out", "bench/results");
const runs = Number(flag("runs", scale === "full" ? "30" : "5"));
const big = scale === "full" ? 64 * Mi : Mi;
const mid = scale === "full" ? 16 * Mi : Mi / 4;
console.error(`bench: ${caps.description}, scale ${scale}, median of ${runs} runs per kernel`);
const profiler = new GpuProfiler(gpu);

interface Row {
  name: string;
  elements: number;
  bytes: number;
  dispatches: number;
  medianUs: number;
  gbps: number;
  fractionOfCopy: number;
  /**
   * Fraction of a copy that moves the same bytes (half read, half written): the yardstick at
   * this size, where a launch's fill and drain weigh as much on the copy as on the kernel.
   */
  fractionOfSameSizeCopy: number;
  /** The SM clock just after the timed runs (nvidia-smi), where known. */
  clockMHz: number | null;
}
const rows: Row[] = [];

// Progress: each row as it is timed, with an estimate of the time left from the row count of the
// last committed table of this device and scale (when there is one).
const started = performance.now();
const expectedRows = await (async () => {
  try {
    const last = JSON.parse(
      await Deno.readTextFile(`bench/results/kernels-${slugOf(caps.description)}-${scale}.json`),
    );
    return Array.isArray(last.kernels) ? last.kernels.length : null;
  } catch {
    return null;
  }
})();
function progress(): string {
  const done = rows.length;
  const seconds = (performance.now() - started) / 1000;
  if (!expectedRows || done >= expectedRows) return `[${done}, ${seconds.toFixed(0)} s]`;
  const left = (seconds / done) * (expectedRows - done);
  return `[${done}/~${expectedRows}, ${seconds.toFixed(0)} s, ~${left.toFixed(0)} s left]`;
}
const failures: string[] = [];

/**
 * GPU time spent on untimed runs just before the timed ones. An H200 left mostly idle between
 * short bursts (this bench's host work) drops its SM clock to 345 MHz, and memory-bound kernels
 * then ran 2-3x slower for the rest of a run (sampled with nvidia-smi in session 3): the warm-up
 * runs are recorded in the same stream as the timed ones, so the GPU is busy when timing starts.
 */
const WARM_UP_MS = 150;

/** The SM clock in MHz from nvidia-smi, or null where there is none. */
async function smClock(): Promise<number | null> {
  try {
    const out = await new Deno.Command("nvidia-smi", {
      args: ["--query-gpu=clocks.sm", "--format=csv,noheader,nounits"],
      stdout: "piped",
      stderr: "null",
    }).output();
    const mhz = Number(new TextDecoder().decode(out.stdout).trim().split("\n")[0]);
    return Number.isFinite(mhz) && mhz > 0 ? mhz : null;
  } catch {
    return null;
  }
}

/** Times `fn` `runs` times with timestamps; each run's dispatches are summed. */
async function timeKernel(
  fn: () => gyre.Tensor | void,
): Promise<{ us: number; dispatches: number; clockMHz: number | null }> {
  // gyre is lazy: realize() makes each run compute its result (recorded, not waited for).
  const once = () => gyre.tidy(() => fn())?.realize().dispose();
  once(); // compile and warm the pool
  await gyre.sync();
  // One timed run sizes the warm-up; then the warm-up and the timed runs go out back to back.
  profiler.startGroups();
  profiler.group("estimate", once);
  const estimate = (await profiler.stop())[0].nanoseconds;
  const warmUps = Math.min(20000, Math.ceil((WARM_UP_MS * 1e6) / Math.max(estimate, 1000)));
  for (let r = 0; r < warmUps; r++) once();
  // Each run's dispatches share one timed pass: the GPU time of the whole op.
  let dispatches = 0;
  const count = () => dispatches++;
  kernelObservers.add(count);
  profiler.startGroups();
  for (let r = 0; r < runs; r++) profiler.group("op", once);
  kernelObservers.delete(count);
  const timings = await profiler.stop();
  return {
    us: median(timings.map((t) => t.nanoseconds)) / 1000,
    dispatches: dispatches / runs,
    clockMHz: await smClock(),
  };
}

// The yardstick: a plain vec4 copy kernel and the queue's buffer copy, both timestamp-timed.
async function copyBandwidth(bytes: number): Promise<{ kernel: number; queue: number }> {
  const device = gpu.device;
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
  const src = device.createBuffer({ size: bytes, usage });
  const dst = device.createBuffer({ size: bytes, usage });
  const module = device.createShaderModule({ code: WGSL.copy_vec4 });
  const pipeline = device.createComputePipeline({
    layout: "auto",
    compute: { module, entryPoint: "main" },
  });
  const bind = device.createBindGroup({
    layout: pipeline.getBindGroupLayout(0),
    entries: [{ binding: 0, resource: { buffer: src } }, { binding: 1, resource: { buffer: dst } }],
  });
  const query = device.createQuerySet({ type: "timestamp", count: 4 * runs + 4 });
  const groups = Math.ceil(bytes / 16 / 256);
  const x = Math.min(groups, 32768);
  const encoder = device.createCommandEncoder();
  for (let r = 0; r <= runs; r++) {
    const pass = encoder.beginComputePass({
      timestampWrites: {
        querySet: query,
        beginningOfPassWriteIndex: 4 * r,
        endOfPassWriteIndex: 4 * r + 1,
      },
    });
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, bind);
    pass.dispatchWorkgroups(x, Math.ceil(groups / x));
    pass.end();
    // Queue copy bracketed by two empty timed passes.
    encoder.beginComputePass({
      timestampWrites: { querySet: query, endOfPassWriteIndex: 4 * r + 2 },
    }).end();
    encoder.copyBufferToBuffer(src, 0, dst, 0, bytes);
    encoder.beginComputePass({
      timestampWrites: { querySet: query, beginningOfPassWriteIndex: 4 * r + 3 },
    }).end();
  }
  const resolve = device.createBuffer({
    size: (4 * runs + 4) * 8,
    usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC,
  });
  const read = device.createBuffer({
    size: (4 * runs + 4) * 8,
    usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
  });
  encoder.resolveQuerySet(query, 0, 4 * runs + 4, resolve, 0);
  encoder.copyBufferToBuffer(resolve, 0, read, 0, (4 * runs + 4) * 8);
  device.queue.submit([encoder.finish()]);
  await read.mapAsync(GPUMapMode.READ);
  const t = new BigUint64Array(read.getMappedRange().slice(0));
  read.destroy();
  const kernel: number[] = [];
  const queue: number[] = [];
  for (let r = 1; r <= runs; r++) {
    kernel.push(Number(t[4 * r + 1] - t[4 * r]));
    queue.push(Number(t[4 * r + 3] - t[4 * r + 2]));
  }
  for (const b of [src, dst, resolve]) b.destroy();
  query.destroy();
  // Bytes moved: read plus write. A zero time (no timestamps) gives no rate, not Infinity.
  const rate = (ns: number[]) => (median(ns) > 0 ? (2 * bytes) / median(ns) : NaN);
  return { kernel: rate(kernel), queue: rate(queue) };
}

const copy = await copyBandwidth(big * 4);
const copyGBps = Math.max(copy.kernel, copy.queue);
if (!(copyGBps > 0)) {
  console.error("bench: the adapter's timestamps read zero: no time can be measured here.");
  Deno.exit(2);
}
console.error(
  `copy bandwidth: vec4 kernel ${copy.kernel.toFixed(0)} GB/s, queue copy ${
    copy.queue.toFixed(0)
  } GB/s`,
);

// --only REGEX: time only the kernels whose names match (to re-measure a few).
const only = args.includes("--only") ? new RegExp(flag("only", "")) : null;

// Copy bandwidth by bytes moved, measured once per size the benchmarks move.
const sameSizeCopies = new Map<number, number>();
async function sameSizeCopyGBps(bytes: number): Promise<number> {
  // Half read and half written, in whole vec4 workgroups of the copy kernel.
  const half = Math.max(4096, Math.ceil(bytes / 2 / 4096) * 4096);
  if (!sameSizeCopies.has(half)) {
    const measured = await copyBandwidth(half);
    sameSizeCopies.set(half, Math.max(measured.kernel, measured.queue));
  }
  return sameSizeCopies.get(half)!;
}

async function bench(name: string, elements: number, bytes: number, fn: () => gyre.Tensor | void) {
  if (only && !only.test(name)) return;
  let timed;
  try {
    timed = await timeKernel(fn);
  } catch (e) {
    // Record the failure and go on: one broken kernel must not hide the others' figures.
    console.error(
      `${name}: FAILED ${e instanceof Error ? e.message : e}; live ${
        JSON.stringify(rt.stats().gpu)
      }`,
    );
    failures.push(`${name}: ${e instanceof Error ? e.message : e}`);
    return;
  }
  const { us, dispatches, clockMHz } = timed;
  const gbps = bytes / (us * 1000);
  const sameSize = await sameSizeCopyGBps(bytes);
  rows.push({
    name,
    elements,
    bytes,
    dispatches,
    medianUs: us,
    gbps,
    fractionOfCopy: gbps / copyGBps,
    fractionOfSameSizeCopy: gbps / sameSize,
    clockMHz,
  });
  console.error(
    `${progress()} ${name.padEnd(28)} ${us.toFixed(1).padStart(9)} us ${
      gbps.toFixed(0).padStart(6)
    } GB/s ${(100 * gbps / copyGBps).toFixed(0)}%`,
  );
}

// Inputs in each op's domain: positive where a logarithm or root needs it.
const positive = new Set(["log", "log2", "log1p", "sqrt", "rsqrt"]);
const a = gyre.random.uniform([big], { seed: 1, low: -2, high: 2 }).realize();
const b = gyre.random.uniform([big], { seed: 2, low: 0.5, high: 2 }).realize();
const bool = a.greater(0).realize();
const bool2 = b.greater(1).realize();
for (const op of Object.keys(UNARY)) {
  if (INTERNAL_KERNELS.has(`elementwise/${op}`)) continue;
  const x = op === "logicalNot" ? bool : positive.has(op) ? b : a;
  const fn = op === "geluTanh"
    ? (t: gyre.Tensor) => gyre.gelu(t, { approximate: "tanh" })
    : (gyre as unknown as Record<string, (x: gyre.Tensor) => gyre.Tensor>)[op];
  await bench(`${op} f32`, big, 2 * 4 * big, () => fn(x));
}
for (const op of Object.keys(BINARY)) {
  if (INTERNAL_KERNELS.has(`elementwise/${op}`)) continue;
  if (op === "leakyRelu" || op === "elu") {
    // Activations with a parameter: one tensor in, one out.
    await bench(`${op} f32`, big, 2 * 4 * big, () => gyre[op](a, { alpha: 0.2 }));
    continue;
  }
  const logical = op.startsWith("logical");
  const fn =
    (gyre as unknown as Record<string, (x: gyre.Tensor, y: gyre.Tensor) => gyre.Tensor>)[op];
  // Two distinct inputs: the same tensor twice would be read once.
  await bench(`${op} f32`, big, 3 * 4 * big, () => logical ? fn(bool, bool2) : fn(a, b));
}
await bench("where f32", big, 4 * 4 * big, () => gyre.where(bool, a, b));
// Issue 4's fusion case: relu(a * b + c) over 16 Mi as one kernel (three reads, one write).
{
  const [x, y, z] = [a, b, a.neg().realize()].map((t) => t.slice([0, mid]));
  await bench(
    `relu(a*b+c) fused ${mid / Mi}Mi f32`,
    mid,
    4 * 4 * mid,
    () => gyre.relu(x.mul(y).add(z)),
  );
}
await bench("cast f32->int32", big, 2 * 4 * big, () => a.cast("int32"));
// Random numbers: written only. normal's portable logarithm, square root and cosine (about 100
// float operations an element, src/ir/portable_math.ts) against a write of the same bytes.
await bench("random.uniform f32", big, 4 * big, () => gyre.random.uniform([big], { seed: 3 }));
await bench("random.normal f32", big, 4 * big, () => gyre.random.normal([big], { seed: 4 }));
if (caps.shaderF16) {
  const h = a.cast("float16").realize();
  const h2 = b.cast("float16").realize();
  await bench("add f16", big, 3 * 2 * big, () => h.add(h2));
}
const square = Math.sqrt(big) | 0;
const matrix = a.slice([0, square * square]).reshape([square, square]);
const column = gyre.sum(matrix, { axis: 1, keepdims: true }).realize(); // contiguous [M, 1]
// A transposed operand: by the plan, in tiles through workgroup memory (three tile heights), and
// gathered through strides, at the full size and at 1, 2 and 4 Ki a side.
const transposedOperandSchemes: [string, Partial<tuning.ElementwiseChoice> | null][] = [
  ["plan", null],
  ["tiled", { variant: "tiled" }],
  ["tiled, 8 elements per invocation", { variant: "tiled", workgroupSize: 128 }],
  ["tiled, 2 elements per invocation", { variant: "tiled", workgroupSize: 512 }],
  ["strided gather", { variant: "scalar" }],
];
for (const side of [...new Set([square, 1024, 2048, 4096])].filter((side) => side <= square)) {
  const part = side === square ? matrix : a.slice([0, side * side]).reshape([side, side]);
  const label = side === square ? "" : ` ${side}^2`;
  for (const [scheme, override] of transposedOperandSchemes) {
    tuning.setPlanOverride("elementwise", override);
    await bench(
      `add transposed${label} (${scheme})`,
      side * side,
      3 * 4 * side * side,
      () => part.transpose().add(part),
    );
    // A clone of the transposed view: the tiled transposing copy (plan) or the tiled kernel.
    if (scheme === "plan" || scheme.startsWith("tiled")) {
      await bench(
        `clone transposed${label} (${scheme})`,
        side * side,
        2 * 4 * side * side,
        () => part.transpose().clone(),
      );
    }
  }
  tuning.setPlanOverride("elementwise", null);
}
await bench(
  "add row broadcast",
  square * square,
  2 * 4 * square * square,
  () => matrix.add(matrix.slice(0)),
);
for (
  const [op, fn] of [["sum", gyre.sum], ["max", gyre.max], ["min", gyre.min], [
    "prod",
    gyre.prod,
  ]] as const
) {
  await bench(`${op} ${mid / Mi}Mi f32`, mid, 4 * mid, () => fn(a.slice([0, mid])));
  await bench(`${op} ${big / Mi}Mi f32`, big, 4 * big, () => fn(a));
}
// Max and min of 16 Mi holding infinities, which the hardware max orders right: they must not set
// off the NaN probe's exact second pass (src/gpu/_codegen_reduce.ts). The same values with no
// infinity (every 0) are the control.
for (const every of [0, mid, 65536, 1024]) {
  const host = new Float32Array(mid);
  for (let i = 0; i < mid; i++) host[i] = ((i * 7919) % 4001) / 1000 - 2;
  if (every > 0) { for (let i = every >> 1; i < mid; i += every) host[i] = Infinity; }
  const x = gyre.tensor(host, { device: "gpu" }).realize();
  const label = every === 0 ? "no +Inf" : every === mid ? "one +Inf" : `+Inf every ${every}`;
  for (const [op, fn] of [["max", gyre.max], ["min", gyre.min]] as const) {
    await bench(`${op} ${mid / Mi}Mi f32, ${label}`, mid, 4 * mid, () => fn(x));
  }
  x.dispose();
}
// Sum and max of 16 Mi (64 MiB) under several workgroup sizes and chunk counts (the plan's rule
// picks 256 x 512 chunks), combined by the last workgroup; the rule's shape with a second pass.
{
  const x = a.slice([0, mid]);
  for (const [op, fn] of [["sum", gyre.sum], ["max", gyre.max]] as const) {
    for (const workgroupSize of [256, 512, 1024]) {
      for (const chunks of [128, 256, 512, 1024]) {
        tuning.setPlanOverride("reduce", { chunks, workgroupSize });
        await bench(
          `${op} ${mid / Mi}Mi f32, wg ${workgroupSize} x ${chunks} chunks`,
          mid,
          4 * mid,
          () => fn(x),
        );
      }
    }
  }
  // The last workgroup's partials in 64-bit atomic words against tagged pairs of 32-bit words.
  for (let round = 0; round < 2; round++) {
    for (const wideStates of [false, true]) {
      tuning.setPlanOverride("reduce", { wideStates });
      for (const [op, fn] of [["sum", gyre.sum], ["max", gyre.max], ["min", gyre.min]] as const) {
        await bench(
          `${op} ${mid / Mi}Mi f32, partials ${wideStates ? "64" : "32"}-bit #${round}`,
          mid,
          4 * mid,
          () => fn(x),
        );
      }
    }
  }
  tuning.setPlanOverride("reduce", { combineChunks: "second-pass" });
  await bench(`sum ${mid / Mi}Mi f32, second pass`, mid, 4 * mid, () => gyre.sum(x));
  await bench(`sum ${big / Mi}Mi f32, second pass`, big, 4 * big, () => gyre.sum(a));
  tuning.setPlanOverride("reduce", null);
}
for (const [op, fn] of [["argmax", gyre.argmax], ["argmin", gyre.argmin]] as const) {
  await bench(`${op} ${big / Mi}Mi f32`, big, 4 * big, () => fn(a));
  await bench(
    `${op} rows [${square},${square}]`,
    square * square,
    4 * square * square,
    () => fn(matrix, { axis: 1 }),
  );
}
await bench(`any ${big / Mi}Mi bool`, big, 4 * big, () => gyre.any(bool));
await bench(
  `logsumexp rows [${square},${square}]`,
  square * square,
  4 * square * square,
  () => gyre.logsumexp(matrix, { axis: 1 }),
);
await bench(
  `variance rows [${square},${square}]`,
  square * square,
  4 * square * square,
  () => gyre.variance(matrix, { axis: 1 }),
);
await bench(
  "add column broadcast",
  square * square,
  2 * 4 * square * square,
  () => matrix.add(column),
);
await bench(
  `sum rows [${square},${square}] axis 1`,
  square * square,
  4 * square * square,
  () => matrix.sum({ axis: 1 }),
);
await bench(
  `sum cols [${square},${square}] axis 0`,
  square * square,
  4 * square * square,
  () => matrix.sum({ axis: 0 }),
);
await bench(
  "concat 2 x half",
  big,
  2 * 4 * big,
  () => gyre.concat([a.slice([0, big / 2]), a.slice([big / 2])]),
);
{
  // Along the last axis each part is written through the result's strides.
  const halves = [
    a.slice([0, square * square / 2]).reshape([square, square / 2]),
    a.slice([square * square / 2, square * square]).reshape([square, square / 2]),
  ];
  await bench(
    `concat 2 x [${square}, ${square / 2}] axis 1`,
    square * square,
    2 * 4 * square * square,
    () => gyre.concat(halves, 1),
  );
}

// Softmax and the norms: 4096 x 4096 (the issue's target shape) and 8192 x 8192 (256 MiB).
for (const side of scale === "full" ? [4096, 8192] : [512]) {
  const x = a.slice([0, side * side]).reshape([side, side]);
  const bytes = 2 * 4 * side * side;
  const label = `[${side},${side}]`;
  await bench(`softmax ${label}`, side * side, bytes, () => gyre.softmax(x));
  await bench(`logSoftmax ${label}`, side * side, bytes, () => gyre.logSoftmax(x));
  await bench(`layerNorm ${label}`, side * side, bytes, () => gyre.layerNorm(x));
  await bench(`rmsNorm ${label}`, side * side, bytes, () => gyre.rmsNorm(x));
  // The transformer pattern layerNorm(x + residual): the add runs in the row kernel's prologue,
  // so the traffic is two reads and one write.
  const residual = b.slice([0, side * side]).reshape([side, side]);
  await bench(
    `layerNorm(x+r) fused ${label}`,
    side * side,
    3 * 4 * side * side,
    () => gyre.layerNorm(x.add(residual)),
  );
}
// Scans: 16 Mi and 64 Mi (the issue's target), and rows of a matrix.
for (const n of [mid, big]) {
  const x = a.slice([0, n]);
  await bench(`cumsum ${n / Mi}Mi f32`, n, 2 * 4 * n, () => gyre.cumsum(x));
}
await bench(
  `cumsum rows [${square},${square}]`,
  square * square,
  2 * 4 * square * square,
  () => gyre.cumsum(matrix, { axis: 1 }),
);
await bench(`cummax ${big / Mi}Mi f32`, big, 2 * 4 * big, () => gyre.cummax(a));

// Sorting and selection (issue 22's cases, its sizes at full scale): sorts with their indices (a
// bottom-k of all of it: values and int32 indices), the median, top-k of rows, rows of a matrix
// sorted and at a quantile. Bytes: the input read, the outputs written.
{
  const sortWithIndices = (n: number) =>
    bench(`sort ${n / Mi}Mi f32 with indices`, n, 12 * n, () => {
      const [values, indices] = gyre.rankK(a.slice([0, n]), n, { kind: "bottom" });
      indices.dispose();
      return values;
    });
  await sortWithIndices(mid);
  await sortWithIndices(big);
  await bench(`median ${mid / Mi}Mi f32`, mid, 4 * mid, () => gyre.median(a.slice([0, mid])));
  const topCases: [number, number, number][] = scale === "full"
    ? [[8, 65536, 1024], [1024, 4096, 32], [1, 16 * Mi, 100]]
    : [[2, 65536, 1024], [64, 4096, 32], [1, Mi / 4, 100]];
  for (const [rows, cols, k] of topCases) {
    const x = a.slice([0, rows * cols]).reshape([rows, cols]);
    await bench(`topk [${rows},${cols}] k=${k}`, rows * cols, 4 * rows * cols, () => {
      const [values, indices] = gyre.topk(x, k);
      indices.dispose();
      return values;
    });
  }
  const side = scale === "full" ? 4096 : 512;
  const rowsOf = a.slice([0, side * side]).reshape([side, side]);
  await bench(
    `sort rows [${side},${side}]`,
    side * side,
    8 * side * side,
    () => gyre.sort(rowsOf, { axis: 1 }),
  );
  await bench(
    `quantile 0.9 rows [${side},${side}]`,
    side * side,
    4 * side * side,
    () => gyre.quantile(rowsOf, 0.9, { axis: 1 }),
  );
}

// Indexing (issue 23's cases, its sizes at full scale). Bytes: what must move (indices read as
// int32, gathered rows and values read once, outputs written), not the scattered atomics' traffic.
{
  const side = scale === "full" ? 4096 : 512;
  const square = a.slice([0, side * side]).reshape([side, side]);
  const order = gyre.argsort(square, { axis: 1 }).realize();
  await bench(
    `takeAlongAxis [${side},${side}]`,
    side * side,
    12 * side * side,
    () => gyre.takeAlongAxis(square, order, { axis: 1 }),
  );
  if (args.includes("--indexing-forms")) {
    // The "gather" form by output elements an invocation (the plan's choice is above).
    const forms: [string, tuning.PlanOverrides["indexing"]][] = [
      ["gather x1", { variant: "gather", perInvocation: 1 }],
      ["gather x4", { variant: "gather", perInvocation: 4 }],
      ["gather x8", { variant: "gather", perInvocation: 8 }],
      ["gather x16", { variant: "gather", perInvocation: 16 }],
      ["gather-quad x4", { variant: "gather-quad", perInvocation: 4 }],
      ["gather-quad x8", { variant: "gather-quad", perInvocation: 8 }],
      ["gather-quad x16", { variant: "gather-quad", perInvocation: 16 }],
    ];
    for (const [label, form] of forms) {
      tuning.setPlanOverride("indexing", form);
      await bench(
        `takeAlongAxis [${side},${side}] ${label}`,
        side * side,
        12 * side * side,
        () => gyre.takeAlongAxis(square, order, { axis: 1 }),
      );
      tuning.setPlanOverride("indexing", null);
    }
    // The floor of scattered reads: the same 16 Mi reads from one line of 4096 (always in
    // cache: only the indices and the output move), at random and in order.
    const line = square.slice([0, 1]).reshape([side]);
    const randomInLine = order.reshape([side * side]);
    const inOrder = gyre.arange(0, side * side, 1, { dtype: "int32" }).mod(side).realize();
    for (const [label, idx] of [["random", randomInLine], ["in order", inOrder]] as const) {
      await bench(
        `take ${side * side / Mi}Mi from one line of ${side}, ${label}`,
        side * side,
        8 * side * side,
        () => gyre.take(line, idx),
      );
    }
    inOrder.dispose();
    // A gather's elementwise consumer: fused into its kernel (the default), and run as a second
    // kernel over the realized gather.
    await bench(
      `takeAlongAxis [${side},${side}] .mul fused`,
      side * side,
      16 * side * side,
      () => gyre.takeAlongAxis(square, order, { axis: 1 }).mul(square),
    );
    await bench(
      `takeAlongAxis [${side},${side}] then .mul`,
      side * side,
      16 * side * side,
      () => {
        const g = gyre.takeAlongAxis(square, order, { axis: 1 }).realize();
        const product = g.mul(square);
        g.dispose();
        return product;
      },
    );
  }
  const [tableRows, picked] = scale === "full" ? [1_000_000, 65536] : [100_000, 4096];
  const table = gyre.random.uniform([tableRows, 256], { seed: 3 }).realize();
  const rows = gyre.random.uniform([picked], { seed: 4, low: 0, high: tableRows })
    .floor().cast("int32").realize();
  await bench(
    `indexSelect ${picked} rows of [${tableRows},256]`,
    picked * 256,
    8 * picked * 256 + 4 * picked,
    () => gyre.indexSelect(table, rows),
  );
  const x = a.slice([0, mid]);
  const ids = (seed: number, high: number) =>
    gyre.random.uniform([mid], { seed, low: 0, high }).floor().cast("int32").realize();
  const bins = ids(5, mid / 16);
  const zeros = gyre.zeros([mid / 16]).realize();
  await bench(
    `scatterAdd ${mid / Mi}Mi into ${mid / 16 / Mi}Mi bins`,
    mid,
    8 * mid + 4 * (mid / 16),
    () => gyre.scatterAdd(zeros, bins, x, { axis: 0 }),
  );
  const segments = scale === "full" ? 65536 : 4096;
  const sortedIds = gyre.sort(ids(6, segments)).realize();
  await bench(
    `segmentSum ${mid / Mi}Mi sorted ids into ${segments}`,
    mid,
    8 * mid + 4 * segments,
    () => gyre.segmentSum(x, sortedIds, { numSegments: segments, sorted: true }),
  );
  if (args.includes("--indexing-forms")) {
    // Sorted segments by form (the plan's is "scatter-segments"), a segment as long as x, and
    // rows of 64 into 4096 segments.
    for (const variant of ["scatter-segments", "scatter-runs"] as const) {
      tuning.setPlanOverride("indexing", { variant });
      await bench(
        `segmentSum ${mid / Mi}Mi sorted ids into ${segments} ${variant}`,
        mid,
        8 * mid + 4 * segments,
        () => gyre.segmentSum(x, sortedIds, { numSegments: segments, sorted: true }),
      );
      const one = gyre.zeros([mid], { dtype: "int32" }).realize();
      await bench(
        `segmentSum ${mid / Mi}Mi into 1 ${variant}`,
        mid,
        8 * mid,
        () => gyre.segmentSum(x, one, { numSegments: 1, sorted: true }),
      );
      const rows = mid / 64;
      const rowIds = gyre.sort(
        gyre.random.uniform([rows], { seed: 8, low: 0, high: 4096 }).floor().cast("int32"),
      ).realize();
      await bench(
        `segmentSum [${rows},64] into 4096 ${variant}`,
        mid,
        4 * mid + 4 * rows + 4 * 4096 * 64,
        () => gyre.segmentSum(x.reshape([rows, 64]), rowIds, { numSegments: 4096, sorted: true }),
      );
      if (args.includes("--breakdown")) {
        await dispatchBreakdown(
          profiler,
          `segmentSum ${mid / Mi}Mi sorted ids into ${segments} ${variant}`,
          () => gyre.segmentSum(x, sortedIds, { numSegments: segments, sorted: true }),
        );
        await dispatchBreakdown(
          profiler,
          `segmentSum [${rows},64] into 4096 ${variant}`,
          () => gyre.segmentSum(x.reshape([rows, 64]), rowIds, { numSegments: 4096, sorted: true }),
        );
      }
      tuning.setPlanOverride("indexing", null);
      one.dispose();
      rowIds.dispose();
    }
  }
  const small = ids(7, 1024);
  await bench(
    `bincount ${mid / Mi}Mi into 1024 bins`,
    mid,
    4 * mid + 4 * 1024,
    () => gyre.bincount(small, { minlength: 1024 }),
  );
  // Compaction of half of x (the positive half): its size read once here, as PyTorch's
  // masked_select and nonzero find it on the device and synchronise to size the result.
  const positive = x.greater(0).realize();
  const count = (await positive.cast("int32").sum().data())[0];
  await bench(
    `maskedSelect ${mid / Mi}Mi half`,
    mid,
    5 * mid + 4 * count,
    () => gyre.maskedSelect(x, positive, { size: count }),
  );
  await bench(
    `argwhere ${mid / Mi}Mi half`,
    mid,
    4 * mid + 4 * count,
    () => gyre.argwhere(positive, { size: count }),
  );
  if (args.includes("--indexing-forms")) {
    // How the compaction's tiles find their offsets (the plan's choice is above), at two sizes.
    for (const n of [Mi, mid].filter((n) => n <= mid)) {
      const part = positive.slice([0, n]);
      const selected = (await part.cast("int32").sum().data())[0];
      for (const offsets of ["summed", "pass"] as const) {
        tuning.setPlanOverride("indexing", { offsets });
        await bench(
          `argwhere ${n / Mi}Mi half, offsets ${offsets}`,
          n,
          4 * n + 4 * selected,
          () => gyre.argwhere(part, { size: selected }),
        );
        tuning.setPlanOverride("indexing", null);
      }
    }
  }
  if (args.includes("--breakdown")) {
    await dispatchBreakdown(
      profiler,
      `maskedSelect ${mid / Mi}Mi half`,
      () => gyre.maskedSelect(x, positive, { size: count }),
    );
    await dispatchBreakdown(
      profiler,
      `argwhere ${mid / Mi}Mi half`,
      () => gyre.argwhere(positive, { size: count }),
    );
  }
  for (const t of [order, table, rows, bins, zeros, sortedIds, small, positive]) t.dispose();
}

// --rankk: Rank-K of issue 22's cases and more under each variant that allows them (the
// plan's default first), to place the plan's thresholds. Bytes: the input read.
if (args.includes("--rankk")) {
  const settings: [string, tuning.PlanOverrides["sort"] | null][] = [
    ["default", null],
    ["radix-select", { variant: "radix-select" }],
    ["radix-select one-pass", { variant: "radix-select", compaction: "one-pass" }],
    ["radix-ballot", { variant: "radix-ballot" }],
    ["bitonic-tree", { variant: "bitonic-tree" }],
    ["subgroup", { variant: "subgroup" }],
    ["merge", { variant: "merge" }],
    ["subgroup 4096", { variant: "subgroup", tile: 4096 }],
    ["subgroup seg 16Ki", { variant: "subgroup", segment: 16384 }],
    ["subgroup seg 64Ki", { variant: "subgroup", segment: 65536 }],
  ];
  const cases: [number, number, number][] = scale === "full"
    ? [
      [8, 65536, 1024],
      [8, 65536, 256],
      [1024, 4096, 32],
      [1, 16 * Mi, 100],
      [16384, 1024, 8],
      [64, 16384, 256],
      [4096, 4096, 64],
    ]
    : [[2, 65536, 1024], [64, 4096, 32], [1, Mi / 4, 100]];
  for (const [rows, cols, k] of cases) {
    const x = a.slice([0, rows * cols]).reshape([rows, cols]);
    for (const [label, override] of settings) {
      const plan = tuning.planSort(caps, { rows, length: cols, keep: k }, override);
      if (override && plan.variant !== override.variant) continue;
      const form = plan.variant === "radix-select" ? ` ${plan.compaction}` : "";
      const name = `rankk [${rows},${cols}] k=${k} ${label} (${plan.variant} ${plan.tile}${form}${
        plan.segment ? ` seg ${plan.segment}` : ""
      })`;
      tuning.setPlanOverride("sort", override);
      await bench(name, rows * cols, 4 * rows * cols, () => {
        const [values, indices] = gyre.topk(x, k);
        indices.dispose();
        return values;
      });
      tuning.setPlanOverride("sort", null);
    }
  }
  // The ballot radix sort's offsets: one look-back dispatch a pass, or count, scan, scatter.
  const sorts: [number, number][] = scale === "full"
    ? [[1, mid], [1, big], [4096, 4096]]
    : [[1, Mi / 4], [64, 4096]];
  for (const [rows, cols] of sorts) {
    const x = a.slice([0, rows * cols]).reshape([rows, cols]);
    for (const prefix of ["multipass", "lookback"] as const) {
      tuning.setPlanOverride("sort", { variant: "radix-ballot", prefix });
      await bench(
        `rankk sort [${rows},${cols}] with indices, ${prefix}`,
        rows * cols,
        12 * rows * cols,
        () => {
          const [values, indices] = gyre.rankK(x, cols, { kind: "bottom" });
          indices.dispose();
          return values;
        },
      );
      tuning.setPlanOverride("sort", null);
    }
  }
}

// --transpose: the tiled transposing copy (matmul's copy of A into [K, M] order, clones of
// transposed matrices) by form and tile shape, a transposed view cloned under the plan, and the
// same forced through the elementwise kernel (a strided gather).
if (args.includes("--transpose")) {
  const side = scale === "full" ? 4096 : 512;
  for (const dtype of ["float16", "float32"] as const) {
    const x = gyre.zeros([side, side], { device: "gpu", dtype }).realize();
    const shape: TransposeUniforms = {
      rows: side,
      columns: side,
      batches: 1,
      offset: 0,
      rowStride: side,
      columnStride: 1,
      batchStride: 0,
    };
    const bytes = 2 * side * side * (dtype === "float16" ? 2 : 4);
    // Tiles [rows, columns]: 128-wide ones need more than lavapipe's 32 KiB for float32.
    const tiles = [[64, 64], [128, 64], [64, 128], [128, 128], [32, 32]];
    for (const paired of dtype === "float16" ? [true, false] : [false]) {
      for (const [tileRows, tileColumns] of tiles) {
        const spec: TransposeSpec = { dtype, paired, tileRows, tileColumns };
        if (transposeSharedBytes(spec) > caps.limits.maxComputeWorkgroupStorageSize) continue;
        if (paired && (tileRows < 64 || tileColumns < 64)) continue;
        const name = `transpose ${side}^2 ${dtype}${
          paired ? " paired" : ""
        } ${tileRows}x${tileColumns}`;
        await bench(name, side * side, bytes, () => {
          const out = gpu.alloc("transpose", dtype, side * side);
          transposeCopy(
            gpu,
            "transpose",
            (viewOf(x).storage as GpuStorage).buffer,
            out.buffer,
            { ...shape, dtype },
            spec,
          );
          gpu.free(out);
        });
      }
    }
    // A transposed view cloned: under the plan (the tiled copy), and forced through the
    // elementwise kernel's strided gather.
    await bench(
      `transpose ${side}^2 ${dtype} clone`,
      side * side,
      bytes,
      () => x.transpose().clone(),
    );
    for (const workgroupSize of [128, 256]) {
      tuning.setPlanOverride("elementwise", { variant: "tiled", workgroupSize });
      await bench(
        `transpose ${side}^2 ${dtype} tiled elementwise ${workgroupSize}`,
        side * side,
        bytes,
        () => x.transpose().clone(),
      );
    }
    tuning.setPlanOverride("elementwise", { variant: "scalar" });
    await bench(
      `transpose ${side}^2 ${dtype} gather`,
      side * side,
      bytes,
      () => x.transpose().clone(),
    );
    tuning.setPlanOverride("elementwise", null);
    x.dispose();
  }
}

// --sweep: long scans under each scheme, the row variant, and each dispatch of a 64 Mi scan.
if (args.includes("--sweep")) {
  // Each long-row case under both schemes.
  const cases: [string, () => gyre.Tensor][] = [
    [`cumsum ${mid / Mi}Mi f32`, () => gyre.cumsum(a.slice([0, mid]))],
    [`cumsum ${big / Mi}Mi f32`, () => gyre.cumsum(a)],
    [`cumsum rows [${square},${square}]`, () => gyre.cumsum(matrix, { axis: 1 })],
    [`cummax ${big / Mi}Mi f32`, () => gyre.cummax(a)],
    [`cumprod ${big / Mi}Mi f32`, () => gyre.cumprod(a)],
  ];
  for (const variant of ["lookback", "multipass"] as const) {
    tuning.setPlanOverride("scan", { variant });
    for (const [name, fn] of cases) {
      const elements = name.includes(`${mid / Mi}Mi`) ? mid : big;
      await bench(`${name}, ${variant}`, elements, 2 * 4 * elements, fn);
    }
  }
  // Tiles and settings of each long-row scheme.
  const settings: ["lookback" | "multipass", Partial<tuning.ScanChoice>][] = [
    ...[
      { elementsPerThread: 32 },
      { elementsPerThread: 32, workgroupSize: 512 },
      { elementsPerThread: 32, workgroupSize: 1024 },
      { elementsPerThread: 24, workgroupSize: 512 },
      { elementsPerThread: 16, workgroupSize: 1024 },
      { elementsPerThread: 32, workgroupSize: 512, lookbackStates: 2 },
      { elementsPerThread: 32, workgroupSize: 512, lookbackStates: 4 },
      { elementsPerThread: 32, workgroupSize: 512, earlyAggregate: false },
      { elementsPerThread: 32, workgroupSize: 256 },
      { elementsPerThread: 32, workgroupSize: 1024 },
    ].map((tile) => ["lookback", tile] as ["lookback", Partial<tuning.ScanChoice>]),
    ...[
      { superTiles: 1 },
      { superTiles: 4 },
      { superTiles: 8 },
      { superTiles: 32 },
      { descendingFinalPass: false },
      { elementsPerThread: 32 },
      { workgroupSize: 512 },
      { workgroupSize: 128 },
    ].map((tile) => ["multipass", tile] as ["multipass", Partial<tuning.ScanChoice>]),
  ];
  for (const [variant, tile] of settings) {
    tuning.setPlanOverride("scan", { variant, ...tile });
    // The look-back's tiles also at the middle size, where fewer waves of tiles leave a longer tail.
    for (const n of variant === "lookback" ? [big, mid] : [big]) {
      await bench(
        `cumsum ${n / Mi}Mi f32, ${variant} ${JSON.stringify(tile)}`,
        n,
        2 * 4 * n,
        () => gyre.cumsum(a.slice([0, n])),
      );
    }
  }
  tuning.setPlanOverride("scan", {
    variant: "lookback",
    elementsPerThread: 32,
    workgroupSize: 512,
  });
  for (const [name, fn] of cases.filter(([name]) => !name.includes("rows"))) {
    const elements = name.includes(`${mid / Mi}Mi`) ? mid : big;
    await bench(`${name}, lookback 512 x 32`, elements, 2 * 4 * elements, fn);
  }
  // Where the look-back starts to beat two passes: sums from 256 Ki to 4 Mi elements, one row
  // and many.
  for (const variant of [null, "lookback", "multipass"] as const) {
    tuning.setPlanOverride("scan", variant ? { variant } : null);
    for (const n of [Mi / 4, Mi / 2, Mi, 2 * Mi, 4 * Mi].filter((n) => n <= big)) {
      const label = n < Mi ? `${n / 1024}Ki` : `${n / Mi}Mi`;
      await bench(
        `cumsum ${label} f32, ${variant ?? "plan"}`,
        n,
        2 * 4 * n,
        () => gyre.cumsum(a.slice([0, n])),
      );
    }
    for (const rows of [64, 512, 2048]) {
      await bench(
        `cumsum rows [${rows},${big / rows}], ${variant ?? "plan"}`,
        big,
        2 * 4 * big,
        () => gyre.cumsum(a.reshape([rows, big / rows])),
      );
    }
  }
  // Look-back tiles and options with each state in one 64-bit atomic word (where the device has
  // 64-bit atomics), and the plan's tile with two 32-bit words, from 256 Ki to 64 Mi.
  {
    const options: Partial<tuning.ScanChoice>[] = [
      { workgroupSize: 256, elementsPerThread: 32 },
      { workgroupSize: 128, elementsPerThread: 32 },
      { workgroupSize: 256, elementsPerThread: 28 },
      { workgroupSize: 256, elementsPerThread: 24 },
      { workgroupSize: 256, elementsPerThread: 16 },
      { workgroupSize: 512, elementsPerThread: 16 },
      { workgroupSize: 256, elementsPerThread: 32, lookbackStates: 2 },
      { workgroupSize: 256, elementsPerThread: 32, earlyAggregate: true },
      { workgroupSize: 256, elementsPerThread: 32, earlyAggregate: false },
      { workgroupSize: 256, elementsPerThread: 32, wideStates: false },
    ];
    for (const option of options) {
      tuning.setPlanOverride("scan", { variant: "lookback", wideStates: true, ...option });
      for (const n of [big, mid, 4 * Mi, Mi, Mi / 4]) {
        const label = n < Mi ? `${n / 1024}Ki` : `${n / Mi}Mi`;
        await bench(
          `cumsum wide ${label} ${JSON.stringify(option)}`,
          n,
          2 * 4 * n,
          () => gyre.cumsum(a.slice([0, n])),
        );
      }
    }
    tuning.setPlanOverride("scan", { variant: "multipass" });
    for (const n of [Mi, Mi / 4]) {
      const label = n < Mi ? `${n / 1024}Ki` : `${n / Mi}Mi`;
      await bench(
        `cumsum wide ${label} multipass`,
        n,
        2 * 4 * n,
        () => gyre.cumsum(a.slice([0, n])),
      );
    }
    tuning.setPlanOverride("scan", null);
  }
  // 16 Mi cut into rows of fewer tiles each: how much of a long row's time is its look-back walk
  // (a row's first tile needs no predecessor).
  tuning.setPlanOverride("scan", null);
  for (const rows of [1, 16, 256, 1024]) {
    await bench(
      `cumsum walk 16Mi as [${rows},${mid / rows}]`,
      mid,
      2 * 4 * mid,
      () => gyre.cumsum(a.slice([0, mid]).reshape([rows, mid / rows])),
    );
  }
  // Sub-tiles: one look-back per S sub-tiles, each read twice (the second time from L2), so fewer
  // look-backs per byte and fewer values held per invocation.
  for (
    const option of [
      null,
      { workgroupSize: 256, elementsPerThread: 32, subTiles: 2 },
      { workgroupSize: 256, elementsPerThread: 16, subTiles: 2 },
      { workgroupSize: 256, elementsPerThread: 16, subTiles: 4 },
      { workgroupSize: 256, elementsPerThread: 8, subTiles: 4 },
      { workgroupSize: 256, elementsPerThread: 8, subTiles: 8 },
      { workgroupSize: 512, elementsPerThread: 16, subTiles: 2 },
      { workgroupSize: 128, elementsPerThread: 32, subTiles: 2 },
    ]
  ) {
    tuning.setPlanOverride("scan", option && { variant: "lookback", ...option });
    for (const n of [mid, big]) {
      await bench(
        `cumsum subtiles ${n / Mi}Mi ${option ? JSON.stringify(option) : "plan"}`,
        n,
        2 * 4 * n,
        () => gyre.cumsum(a.slice([0, n])),
      );
    }
  }
  tuning.setPlanOverride("scan", null);
  // The look-back's tile by length: 512 x 32 and 256 x 32 from 256 Ki to 64 Mi, one row and rows
  // of 1 Mi.
  for (const workgroupSize of [512, 256]) {
    tuning.setPlanOverride("scan", { variant: "lookback", workgroupSize, elementsPerThread: 32 });
    for (const n of [Mi / 4, Mi, 4 * Mi, mid, 2 * mid, big].filter((n) => n <= big)) {
      const label = n < Mi ? `${n / 1024}Ki` : `${n / Mi}Mi`;
      await bench(
        `cumsum tile ${label} f32, ${workgroupSize} x 32`,
        n,
        2 * 4 * n,
        () => gyre.cumsum(a.slice([0, n])),
      );
    }
    await bench(
      `cumsum tile rows [${big / Mi},${Mi}], ${workgroupSize} x 32`,
      big,
      2 * 4 * big,
      () => gyre.cumsum(a.reshape([big / Mi, Mi])),
    );
  }
  tuning.setPlanOverride("scan", null);
  // Rows that fit one tile (the row variant: no look-back): the tile scan's own throughput, by
  // the plan and with the same tile held by more invocations.
  for (
    const tile of [null, { workgroupSize: 512, elementsPerThread: 8 }, {
      workgroupSize: 1024,
      elementsPerThread: 4,
    }]
  ) {
    tuning.setPlanOverride("scan", tile);
    await bench(
      `cumsum rows [${big / 4096},4096]${tile ? ` ${JSON.stringify(tile)}` : ""}`,
      big,
      2 * 4 * big,
      () => gyre.cumsum(a.reshape([big / 4096, 4096])),
    );
  }
  tuning.setPlanOverride("scan", null);
  // Diagnostics of the look-back in tiles of 512 x 32. Waves: rows of one tile each (every tile
  // its row's first: nothing to wait for), 132 to 792 of them; time steps up where the GPU's
  // resident workgroups run out. Walks: aggregates only, so every tile walks back to its row's
  // start, against the plan's inclusive prefixes.
  const diagnosticTile = {
    variant: "lookback",
    workgroupSize: 512,
    elementsPerThread: 32,
  } as const;
  tuning.setPlanOverride("scan", diagnosticTile);
  for (let tiles = 132; tiles <= 792 && tiles * 16384 <= big; tiles += 66) {
    await bench(
      `cumsum waves [${tiles},16384], lookback 512 x 32`,
      tiles * 16384,
      2 * 4 * tiles * 16384,
      () => gyre.cumsum(a.slice([0, tiles * 16384]).reshape([tiles, 16384])),
    );
  }
  for (const publishPrefixes of [true, false]) {
    tuning.setPlanOverride("scan", { ...diagnosticTile, publishPrefixes });
    for (const [n, rows] of [[big, 1], [mid, 1], [big, 64]]) {
      await bench(
        `cumsum walks [${rows},${n / rows}], ${publishPrefixes ? "prefixes" : "aggregates only"}`,
        n,
        2 * 4 * n,
        () => gyre.cumsum(a.slice([0, n]).reshape([rows, n / rows])),
      );
    }
  }
  // The look-back's options by tiles per row (4096, 64, 8, 2): the aggregate published before
  // the tile's scan or after it.
  for (
    const option of [
      { earlyAggregate: true },
      { earlyAggregate: false },
    ]
  ) {
    tuning.setPlanOverride("scan", { ...diagnosticTile, ...option });
    for (const rows of [1, 64, 512, 2048]) {
      await bench(
        `cumsum options [${rows},${big / rows}], ${JSON.stringify(option)}`,
        big,
        2 * 4 * big,
        () => gyre.cumsum(a.reshape([rows, big / rows])),
      );
    }
    await bench(
      `cumsum options [1,${mid}], ${JSON.stringify(option)}`,
      mid,
      2 * 4 * mid,
      () => gyre.cumsum(a.slice([0, mid])),
    );
  }
  tuning.setPlanOverride("scan", null);
  // Each dispatch of the two long-row schemes timed on its own (medians of 10 runs, in order).
  for (const variant of ["lookback", "multipass"] as const) {
    tuning.setPlanOverride("scan", { variant });
    await dispatchBreakdown(profiler, `cumsum ${big / Mi}Mi ${variant}`, () => gyre.cumsum(a));
  }
  tuning.setPlanOverride("scan", { variant: "multipass", superTiles: 1 });
  await dispatchBreakdown(
    profiler,
    `cumsum ${big / Mi}Mi multipass, three passes`,
    () => gyre.cumsum(a),
  );
  await dispatchBreakdown(profiler, `sum ${mid / Mi}Mi`, () => gyre.sum(a.slice([0, mid])));
  // Host cost: wall clock per cumsum of 1 Mi with work pipelined (20 and 220 in a row, read back
  // once), in two passes and in three.
  const small = a.slice([0, Mi]).realize();
  for (const superTiles of [undefined, 1]) {
    tuning.setPlanOverride("scan", superTiles ? { superTiles } : null);
    const wall = async (count: number) => {
      const times: number[] = [];
      for (let s = 0; s < 7; s++) {
        const t0 = performance.now();
        const out = gyre.tidy(() => {
          let y = gyre.cumsum(small);
          for (let i = 1; i < count; i++) y = gyre.cumsum(small);
          return y;
        });
        await out.data();
        times.push(performance.now() - t0);
        out.dispose();
      }
      return median(times.slice(2));
    };
    const perOp = (await wall(220) - await wall(20)) / 200 * 1000;
    console.error(
      `cumsum 1Mi pipelined, ${superTiles ? "three passes" : "plan"}: ${
        perOp.toFixed(1)
      } us per op`,
    );
  }
  small.dispose();
  tuning.setPlanOverride("scan", null);
}

// Pooling on NCHW images: [32, 64, 224, 224] at full scale.
{
  const [n, c, h] = scale === "full" ? [32, 64, 224] : [2, 8, 64];
  const images = gyre.random.uniform([n, c, h, h], { seed: 5 }).realize();
  const elements = n * c * h * h;
  const out2 = elements / 4;
  await bench(
    "maxPool2d 2x2/2",
    elements,
    4 * (elements + out2),
    () => gyre.maxPool2d(images, { kernelSize: 2 }),
  );
  await bench(
    "maxPool2d 3x3/2 pad 1",
    elements,
    4 * (elements + out2),
    () => gyre.maxPool2d(images, { kernelSize: 3, stride: 2, padding: 1 }),
  );
  await bench(
    "avgPool2d 2x2/2",
    elements,
    4 * (elements + out2),
    () => gyre.avgPool2d(images, { kernelSize: 2 }),
  );
  // Large windows (32 x 32 bins) by the plan (teams of invocations per output where subgroups
  // exist), and forced through the other variants.
  for (const variant of [null, "looped", "team"] as const) {
    tuning.setPlanOverride("pool", variant ? { variant } : null);
    await bench(
      `adaptiveAvgPool2d 7x7${variant ? ` (${variant})` : ""}`,
      elements,
      4 * elements,
      () => gyre.adaptiveAvgPool2d(images, 7),
    );
    await bench(
      `adaptiveMaxPool2d 7x7${variant ? ` (${variant})` : ""}`,
      elements,
      4 * elements,
      () => gyre.adaptiveMaxPool2d(images, 7),
    );
  }
  tuning.setPlanOverride("pool", null);
  images.dispose();
}

// Global average pooling (adaptiveAvgPool2d to 1x1) of a ResNet-50 head and of a wide 56 x 56
// map, under the plan and each variant.
for (
  const shape of scale === "full" ? [[32, 2048, 7, 7], [32, 256, 56, 56]] : [[2, 64, 7, 7]]
) {
  const maps = gyre.random.uniform(shape, { seed: 6 }).realize();
  const elements = shape.reduce((x, y) => x * y, 1);
  const variants: (Partial<tuning.PoolChoice> | null)[] = [
    null,
    { variant: "unrolled" },
    { variant: "looped" },
    { variant: "team" },
    { variant: "team", teamSize: 8 },
    { variant: "team", teamSize: 16 },
  ];
  for (const variant of variants) {
    tuning.setPlanOverride("pool", variant);
    await bench(
      `global average [${shape}]${variant ? ` ${JSON.stringify(variant)}` : ""}`,
      elements,
      4 * (elements + elements / (shape[2] * shape[3])),
      () => gyre.adaptiveAvgPool2d(maps, 1),
    );
  }
  tuning.setPlanOverride("pool", null);
  maps.dispose();
}

// Per-op overhead: chains of small adds, read back once, wall clock.
async function chain(length: number): Promise<number> {
  const x0 = gyre.ones([1024]).realize();
  const times: number[] = [];
  for (let s = 0; s < 9; s++) {
    const t0 = performance.now();
    const out = gyre.tidy(() => {
      let x = x0;
      for (let i = 0; i < length; i++) x = x.add(x0);
      return x;
    });
    await out.data();
    times.push(performance.now() - t0);
    out.dispose();
  }
  x0.dispose();
  return median(times.slice(2));
}
const chain100 = await chain(100);
const chain1100 = await chain(1100);
const perOpUs = ((chain1100 - chain100) / 1000) * 1000;
// The same with fusion off: one kernel per op, the eager cost of an op.
rt.fusion = false;
const eager100 = await chain(100);
const eager1100 = await chain(1100);
rt.fusion = true;
const eagerPerOpUs = ((eager1100 - eager100) / 1000) * 1000;
console.error(
  `unfused: chain 100: ${eager100.toFixed(2)} ms, 1100: ${eager1100.toFixed(2)} ms, per op ${
    eagerPerOpUs.toFixed(2)
  } us`,
);
console.error(
  `chain 100: ${chain100.toFixed(2)} ms, chain 1100: ${chain1100.toFixed(2)} ms, per op ${
    perOpUs.toFixed(2)
  } us`,
);

// mapAsync calls in a read-back of ten tensors.
const original = GPUBuffer.prototype.mapAsync;
let mapCalls = 0;
GPUBuffer.prototype.mapAsync = function (...rest: Parameters<GPUBuffer["mapAsync"]>) {
  mapCalls++;
  return original.apply(this, rest);
};
const ten = Array.from({ length: 10 }, (_, i) => gyre.full([1000 + i], i));
await gyre.readAll(ten);
GPUBuffer.prototype.mapAsync = original;

const result = {
  device: caps.description,
  vendor: caps.vendor,
  features: caps.features,
  date: new Date().toISOString(),
  deno: Deno.version.deno,
  scale,
  runs,
  copyGBps: { vec4Kernel: copy.kernel, queueCopy: copy.queue, yardstick: copyGBps },
  /** Copy bandwidth by bytes read (as many written), for `fractionOfSameSizeCopy`. */
  sameSizeCopyGBps: Object.fromEntries(sameSizeCopies),
  chain: { ops100Ms: chain100, ops1100Ms: chain1100, perOpUs },
  chainUnfused: { ops100Ms: eager100, ops1100Ms: eager1100, perOpUs: eagerPerOpUs },
  mapAsyncCallsForTenTensorReadback: mapCalls,
  kernels: rows,
  failures,
};
const slug = slugOf(caps.description);
await Deno.mkdir(outDir, { recursive: true });
await Deno.writeTextFile(
  `${outDir}/kernels-${slug}-${scale}.json`,
  JSON.stringify(result, null, 2) + "\n",
);
const md = [
  `# Kernel benchmarks on ${caps.description}`,
  "",
  `${result.date}, Deno ${result.deno}, scale ${scale}, median of ${runs} timestamp-timed runs.`,
  `Copy bandwidth (read + write): vec4 kernel ${copy.kernel.toFixed(0)} GB/s, queue copy ${
    copy.queue.toFixed(0)
  } GB/s; fractions below are of ${
    copyGBps.toFixed(0)
  } GB/s, and of a copy moving the same bytes (the better of the two copies at that size).`,
  `Chain of small (1 Ki) adds read back once: 100 ops ${chain100.toFixed(2)} ms, 1100 ops ${
    chain1100.toFixed(2)
  } ms: ${perOpUs.toFixed(2)} us per extra op.`,
  `The same with fusion off (one kernel per op): 100 ops ${eager100.toFixed(2)} ms, 1100 ops ${
    eager1100.toFixed(2)
  } ms: ${eagerPerOpUs.toFixed(2)} us per extra op.`,
  `mapAsync calls for a read-back of ten tensors: ${mapCalls}.`,
  ...(failures.length ? ["", "Failures:", ...failures.map((f) => `- ${f}`)] : []),
  "",
  "| kernel | elements | dispatches | median us | GB/s | of copy | of same-size copy | SM clock after |",
  "|---|---:|---:|---:|---:|---:|---:|---:|",
  ...rows.map((r) =>
    `| ${r.name} | ${r.elements} | ${r.dispatches} | ${r.medianUs.toFixed(1)} | ${
      r.gbps.toFixed(0)
    } | ${(100 * r.fractionOfCopy).toFixed(0)}% | ${
      (100 * r.fractionOfSameSizeCopy).toFixed(0)
    }% | ${r.clockMHz ? `${r.clockMHz} MHz` : "-"} |`
  ),
  "",
].join("\n");
await Deno.writeTextFile(`${outDir}/kernels-${slug}-${scale}.md`, md);
console.log(md);
profiler.destroy();
Deno.exit(0);
