/**
 * Matmul benchmark: for each shape, the plan's own choice and several forced variants
 * (`setPlanOverride("matmul", ...)`), each timed with GPU timestamps (`GpuProfiler` groups: all of
 * a product's dispatches in one timed pass): a sustained warm-up first so the clocks are up, then
 * one submit per run so consecutive products cannot overlap (a pass's begin timestamp would then
 * count time spent behind the previous one); the median and best of the runs. Every variant's result is spot-checked against f64 dot products.
 * Prints TFLOP/s per variant and writes JSON and Markdown to `--out`.
 *
 * `--device wasm` times the WASM GEMM instead (wall clock, on one thread and on every thread the
 * pool offers; bench/wasm_gemm.ts compares it with jax-js's wasm backend in the same run).
 *
 * Shapes are written M x N x K (A is M x K, B is K x N).
 *
 * Usage: deno run -A bench/matmul.ts [--scale small|full] [--out bench/results] [--runs N]
 *        [--device gpu|wasm] [--only <substring of a shape label>]
 * @module
 */
import * as gyre from "../src/mod.ts";
import * as tuning from "../src/tuning.ts";
import { GpuProfiler } from "../src/gpu/profiler.ts";
import { kernelObservers } from "../src/contract/backend.ts";
import { dispatchBreakdown, hostData, median, slugOf } from "./_util.ts";

const args = Deno.args;
const flag = (name: string, fallback: string) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const scale = flag("scale", "full");
const outDir = flag("out", "bench/results");
const device = flag("device", "gpu");
const only = flag("only", "");
const full = scale === "full";
const runs = Number(flag("runs", full ? "10" : "3"));
/** Milliseconds of sustained work before each timed set. */
const warmMs = full ? 300 : 20;

/** Rounds to float16 values (the data a float16 tensor holds). */
function toHalf(x: Float32Array): Float32Array {
  return x.map((v) => {
    if (v === 0) return 0;
    const q = 2 ** (Math.max(Math.floor(Math.log2(Math.abs(v))), -14) - 10);
    return Math.round(v / q) * q;
  });
}

interface Shape {
  label: string;
  batch: number;
  m: number;
  n: number;
  k: number;
  dtype: "float32" | "float16";
  accumulate?: "float16";
  /** Call `linear` with bias and gelu instead of matmul (the fused epilogue). */
  linear?: boolean;
  /**
   * A = relu(x * scale) with scale a [K] vector, pending when the product is recorded: the plan
   * (or an override's `prologue`) decides whether the product computes it in its tile loads.
   */
  prologue?: boolean;
  /** A stored [K, M] and read through `transposeA` (vector loads along M, no transposing store). */
  transposeA?: boolean;
  variants: Record<string, Partial<tuning.MatmulChoice>>;
}

const tile = (
  tileM: number,
  tileN: number,
  tileK: number,
  threadM: number,
  threadN: number,
  extra: Partial<tuning.MatmulChoice> = {},
): Partial<tuning.MatmulChoice> => ({
  variant: "tiled",
  tileM,
  tileN,
  tileK,
  threadM,
  threadN,
  laneColumns: 8,
  // Stated, so that a variant does not inherit what the plan's own choice takes.
  doubleBuffer: true,
  productForm: "broadcast",
  transposeAFirst: false,
  ...extra,
});
const SQUARE = {
  "128x128x8 t8x16": tile(128, 128, 8, 8, 16, { laneColumns: 2 }),
  "128x128x16 t8x8": tile(128, 128, 16, 8, 8),
  "64x128x16 t8x8": tile(64, 128, 16, 8, 8),
  "64x64x16 t4x4": tile(64, 64, 16, 4, 4),
  "32x32x16 t4x4": tile(32, 32, 16, 4, 4),
};
const SKINNY = {
  "32x64x16 t4x4": tile(32, 64, 16, 4, 4),
  "64x64x16 t4x4 split2": { ...tile(64, 64, 16, 4, 4), variant: "splitK" as const, splitK: 2 },
  "64x128x16 t8x8 split4": { ...tile(64, 128, 16, 8, 8), variant: "splitK" as const, splitK: 4 },
  "128x128x8 t8x16 split8": {
    ...tile(128, 128, 8, 8, 16, { laneColumns: 2 }),
    variant: "splitK" as const,
    splitK: 8,
  },
};
const VECTOR = {
  "gemv width 2": { gemvWidth: 2 },
  "gemv width 8": { gemvWidth: 8 },
  "gemv width 32": { gemvWidth: 32 },
  "tiled 32x32": tile(32, 32, 16, 4, 4),
};

/**
 * The large float32 tile in waves ("tiled") against stream-K with waves of as many workgroups as
 * an H200 holds at once (264: 132 multiprocessors x 2) and of twice that.
 */
const STREAM_K = {
  "tiled 128x128x8 t8x16": tile(128, 128, 8, 8, 16, { laneColumns: 2 }),
  ...Object.fromEntries(
    [264, 528].map((streamKGroups) => [
      `stream-K ${streamKGroups}`,
      tile(128, 128, 8, 8, 16, { laneColumns: 2, variant: "streamK", streamKGroups }),
    ]),
  ),
};

/** A tile with A's values stored twice (`productForm: "repeatedA"`, float16 accumulation). */
function repeated(...args: Parameters<typeof tile>): Partial<tuning.MatmulChoice> {
  const [m, n, k, tm, tn, extra] = args;
  return tile(m, n, k, tm, tn, { productForm: "repeatedA", ...extra });
}

/** Repeated-A tiles measured under both layouts of A. */
const REPEATED_A = {
  "128x128x16 t8x8 repeated A": repeated(128, 128, 16, 8, 8),
  "128x128x8 t8x16 repeated A": repeated(128, 128, 8, 8, 16, { laneColumns: 2 }),
  "128x128x8 t8x16 repeated A lanes 4": repeated(128, 128, 8, 8, 16, { laneColumns: 4 }),
  "128x128x8 t8x16 repeated A swizzle 8": repeated(128, 128, 8, 8, 16, {
    laneColumns: 2,
    swizzle: 8,
  }),
  "128x256x8 t8x16 repeated A": repeated(128, 256, 8, 8, 16, { laneColumns: 2 }),
};

function shapes(): Shape[] {
  const f32 = (
    label: string,
    m: number,
    n: number,
    k: number,
    variants: Shape["variants"],
    batch = 1,
  ): Shape => ({ label, batch, m, n, k, dtype: "float32", variants });
  if (!full) {
    return [
      f32("64^3", 64, 64, 64, { "32x32x16 t4x4": SQUARE["32x32x16 t4x4"] }),
      f32("128^3", 128, 128, 128, SQUARE),
      f32("256x256x32", 256, 256, 32, { "64x64x16 t4x4": SQUARE["64x64x16 t4x4"] }),
      f32("32x256x1024", 32, 256, 1024, SKINNY),
      f32("1x256x256", 1, 256, 256, VECTOR),
      f32("batched 4 x 64^3", 64, 64, 64, { "32x32x16 t4x4": SQUARE["32x32x16 t4x4"] }, 4),
      { ...f32("128^3 f16", 128, 128, 128, {}), dtype: "float16" },
      { ...f32("128^3 f16 acc16", 128, 128, 128, {}), dtype: "float16", accumulate: "float16" },
      { ...f32("linear 128^3 bias+gelu", 128, 128, 128, {}), linear: true },
      { ...f32("128^3 transposeA", 128, 128, 128, {}), transposeA: true },
      {
        ...f32("relu(a*s) @ b 128^3", 128, 128, 128, {
          "prologue fused": { prologue: true },
          "operand first": { prologue: false },
        }),
        prologue: true,
      },
    ];
  }
  return [
    f32("256^3", 256, 256, 256, { "32x32x16 t4x4": SQUARE["32x32x16 t4x4"], ...SKINNY }),
    f32("512^3", 512, 512, 512, SQUARE),
    f32("1024^3", 1024, 1024, 1024, SQUARE),
    f32("2048^3", 2048, 2048, 2048, SQUARE),
    f32("4096^3", 4096, 4096, 4096, {
      ...SQUARE,
      "128x128x8 t8x16 single buffer": tile(128, 128, 8, 8, 16, {
        laneColumns: 2,
        doubleBuffer: false,
      }),
      "128x128x8 t16x8": tile(128, 128, 8, 16, 8),
      "128x128x16 t8x8 interleaved": tile(128, 128, 16, 8, 8, { sharedLayout: "interleaved" }),
      "128x128x8 t8x16 lanes 1": tile(128, 128, 8, 8, 16, { laneColumns: 1 }),
      "128x128x8 t8x16 lanes 8": tile(128, 128, 8, 8, 16, { laneColumns: 8 }),
      "128x128x4 t8x16": tile(128, 128, 4, 8, 16, { laneColumns: 2 }),
      "128x128x8 t8x16 swizzle 2": tile(128, 128, 8, 8, 16, { laneColumns: 2, swizzle: 2 }),
      "128x128x8 t8x16 no prefetch": tile(128, 128, 8, 8, 16, { laneColumns: 2, prefetch: false }),
      "128x128x8 t8x16 swizzle 4": tile(128, 128, 8, 8, 16, { laneColumns: 2, swizzle: 4 }),
      "128x128x8 t8x16 swizzle 16": tile(128, 128, 8, 8, 16, { laneColumns: 2, swizzle: 16 }),
      "128x128x8 t8x16 lanes 4": tile(128, 128, 8, 8, 16, { laneColumns: 4 }),
      "64x128x8 t8x16": tile(64, 128, 8, 8, 16, { laneColumns: 2 }),
    }),
    // Workgroups of 256 invocations with the same 8 x 16 register block: fewer global loads per
    // multiply-add than 128 x 128 tiles.
    f32("4096^3 wide tiles", 4096, 4096, 4096, {
      "128x128x8 t8x16": SQUARE["128x128x8 t8x16"],
      "128x256x8 t8x16": tile(128, 256, 8, 8, 16, { laneColumns: 2, swizzle: 4 }),
      "256x128x8 t8x16": tile(256, 128, 8, 8, 16, { laneColumns: 2, swizzle: 4 }),
      "128x256x8 t8x16 lanes 4": tile(128, 256, 8, 8, 16, { laneColumns: 4, swizzle: 4 }),
      "256x128x8 t16x8": tile(256, 128, 8, 16, 8, { swizzle: 4 }),
      "128x256x4 t8x16": tile(128, 256, 4, 8, 16, { laneColumns: 2, swizzle: 4 }),
    }),
    // Output tiles against the GPU's slots: 128 x 128 tiles number 992 to 1184 over these N, so
    // a last, partly filled wave of workgroups shows as a dip where the count just passes a
    // multiple of the slots (132 SMs times the workgroups each holds).
    ...[3968, 4096, 4224, 4352, 4608, 4736].map((n) =>
      f32(`4096x${n}x4096 waves`, 4096, n, 4096, {
        "tiled 128x128x8 t8x16": STREAM_K["tiled 128x128x8 t8x16"],
      })
    ),
    // Stream-K against waves of tiles where the rule takes it, and where K is short.
    ...([
      [4096, 4096, 4096],
      [8192, 8192, 8192],
      [2048, 2048, 2048],
      [4096, 4096, 1024],
      [4096, 4096, 256],
      [8192, 8192, 256],
    ] as const).map(([m, n, k]) => f32(`stream-K ${m}x${n}x${k}`, m, n, k, STREAM_K)),
    f32("stream-K batched 32 x 512^3", 512, 512, 512, STREAM_K, 32),
    { ...f32("stream-K 4096^3 f16", 4096, 4096, 4096, STREAM_K), dtype: "float16" },
    // Loads without bounds tests (every tile whole) against the tested ones, by dtype.
    ...([["float32", undefined], ["float16", undefined], ["float16", "float16"]] as const).map((
      [dtype, accumulate],
    ) => ({
      ...f32(`interior loads 4096^3 ${dtype}${accumulate ? " acc16" : ""}`, 4096, 4096, 4096, {
        "tested": { interiorLoads: false },
        "interior": { interiorLoads: true },
      }),
      dtype,
      accumulate,
    })),
    { ...f32("stream-K linear 4096^3 bias+gelu", 4096, 4096, 4096, {}), linear: true },
    f32("8192^3", 8192, 8192, 8192, {
      "128x128x8 t8x16": SQUARE["128x128x8 t8x16"],
      "128x128x16 t8x8": SQUARE["128x128x16 t8x8"],
    }),
    f32("4096x4096x64", 4096, 4096, 64, SQUARE),
    f32("64x4096x4096", 64, 4096, 4096, SKINNY),
    f32("1x4096x4096", 1, 4096, 4096, VECTOR),
    f32("4096x1x4096", 4096, 1, 4096, VECTOR),
    f32("8192x8192x256", 8192, 8192, 256, SQUARE),
    f32("128x128x65536", 128, 128, 65536, {
      "64x64x16 t4x4 split64": { ...SKINNY["64x64x16 t4x4 split2"], splitK: 64 },
      "32x32x16 t4x4 split16": { ...tile(32, 32, 16, 4, 4), variant: "splitK", splitK: 16 },
      "32x32x16 t4x4 no split": tile(32, 32, 16, 4, 4),
    }),
    f32("batched 32 x 512^3", 512, 512, 512, SQUARE, 32),
    {
      ...f32("4096^3 f16", 4096, 4096, 4096, {
        "128x128x8 t8x16": SQUARE["128x128x8 t8x16"],
        "128x128x16 t8x8": SQUARE["128x128x16 t8x8"],
      }),
      dtype: "float16",
    },
    {
      ...f32("4096^3 f16 acc16", 4096, 4096, 4096, {
        "128x128x16 t8x8": SQUARE["128x128x16 t8x8"],
        "128x128x16 t8x8 paired k": tile(128, 128, 16, 8, 8, { productForm: "pairedK" }),
        "128x128x8 t8x16": SQUARE["128x128x8 t8x16"],
        "128x128x8 t8x16 paired k": { ...SQUARE["128x128x8 t8x16"], productForm: "pairedK" },
        ...REPEATED_A,
        "128x128x16 t8x8 repeated A lanes 4": repeated(128, 128, 16, 8, 8, { laneColumns: 4 }),
        "128x128x16 t8x16 repeated A": repeated(128, 128, 16, 8, 16, { laneColumns: 2 }),
        "128x128x16 t16x8 repeated A": repeated(128, 128, 16, 16, 8),
        "128x128x32 t8x8 repeated A": repeated(128, 128, 32, 8, 8),
        "64x128x16 t8x8 repeated A": repeated(64, 128, 16, 8, 8),
        "128x256x16 t8x8 repeated A": repeated(128, 256, 16, 8, 8),
        "128x256x16 t8x8": tile(128, 256, 16, 8, 8),
        "128x128x16 t8x8 interleaved": tile(128, 128, 16, 8, 8, { sharedLayout: "interleaved" }),
        "128x128x32 t8x8": tile(128, 128, 32, 8, 8),
        "128x128x16 t16x8": tile(128, 128, 16, 16, 8),
        "128x128x16 t8x16 lanes 2": tile(128, 128, 16, 8, 16, { laneColumns: 2 }),
        "256x128x16 t16x8": tile(256, 128, 16, 16, 8),
        "256x128x16 t16x16": tile(256, 128, 16, 16, 16, { laneColumns: 4 }),
        "128x256x16 t8x16": tile(128, 256, 16, 8, 16, { laneColumns: 4 }),
        "256x256x16 t16x16": tile(256, 256, 16, 16, 16),
        "128x128x16 t8x8 swizzle 16": tile(128, 128, 16, 8, 8, { swizzle: 16 }),
        "128x128x16 t8x8 lanes 4": tile(128, 128, 16, 8, 8, { laneColumns: 4 }),
        "128x128x16 t8x8 no prefetch": tile(128, 128, 16, 8, 8, { prefetch: false }),
      }),
      dtype: "float16",
      accumulate: "float16",
    },
    {
      // A stored [K, M]: its tile loads are vec4 along M, stored to shared memory whole.
      ...f32("4096^3 f16 acc16 transposeA", 4096, 4096, 4096, {
        "128x128x16 t8x8": SQUARE["128x128x16 t8x8"],
        ...REPEATED_A,
        "128x128x8 t8x16 repeated A no prefetch": repeated(128, 128, 8, 8, 16, {
          laneColumns: 2,
          prefetch: false,
        }),
      }),
      dtype: "float16",
      accumulate: "float16",
      transposeA: true,
    },
    ...[false, true].map((transposeA) => ({
      // One shared buffer against two, with and without A repeated.
      ...f32(`4096^3 f16 acc16 one buffer${transposeA ? " transposeA" : ""}`, 4096, 4096, 4096, {
        "128x128x16 t8x8 two buffers": tile(128, 128, 16, 8, 8),
        "128x128x16 t8x8 one buffer": tile(128, 128, 16, 8, 8, { doubleBuffer: false }),
        "128x128x16 t8x8 repeated A two buffers": repeated(128, 128, 16, 8, 8),
        "128x128x16 t8x8 repeated A one buffer": repeated(128, 128, 16, 8, 8, {
          doubleBuffer: false,
        }),
        "64x128x16 t8x8 repeated A one buffer": repeated(64, 128, 16, 8, 8, {
          doubleBuffer: false,
        }),
        "128x128x8 t8x16 repeated A one buffer": repeated(128, 128, 8, 8, 16, {
          laneColumns: 2,
          doubleBuffer: false,
        }),
      }),
      dtype: "float16" as const,
      accumulate: "float16" as const,
      transposeA,
    })),
    ...[2048, 4096, 8192].map((size) => ({
      // A row-major, copied into [K, M] order by a transposing kernel before the product (two
      // dispatches, timed together) or read as stored.
      ...f32(`${size}^3 f16 acc16 A copied`, size, size, size, {
        "A copied, 128x128x16 t8x8 repeated A one buffer": repeated(128, 128, 16, 8, 8, {
          doubleBuffer: false,
          transposeAFirst: true,
        }),
        "A copied, 64x128x16 t8x8 repeated A one buffer": repeated(64, 128, 16, 8, 8, {
          doubleBuffer: false,
          transposeAFirst: true,
        }),
        ...Object.fromEntries(
          [{ swizzle: 8 }, { swizzle: 16 }, { laneColumns: 4 }, { laneColumns: 16 }].map((x) => [
            `A copied, 128x128x16 t8x8 repeated A one buffer ${JSON.stringify(x)}`,
            repeated(128, 128, 16, 8, 8, { doubleBuffer: false, transposeAFirst: true, ...x }),
          ]),
        ),
        "A as stored, 128x128x8 t8x16 repeated A one buffer": repeated(128, 128, 8, 8, 16, {
          laneColumns: 2,
          doubleBuffer: false,
        }),
      }),
      dtype: "float16" as const,
      accumulate: "float16" as const,
    })),
    f32("4096^3 f32 A copied", 4096, 4096, 4096, {
      "A copied, 128x128x8 t8x16": tile(128, 128, 8, 8, 16, {
        laneColumns: 2,
        transposeAFirst: true,
      }),
      "A as stored, 128x128x8 t8x16": SQUARE["128x128x8 t8x16"],
    }),
    { ...f32("linear 4096^3 bias+gelu", 4096, 4096, 4096, {}), linear: true },
    {
      ...f32("4096^3 transposeA", 4096, 4096, 4096, {
        "128x128x8 t8x16 swizzle 4": tile(128, 128, 8, 8, 16, { laneColumns: 2, swizzle: 4 }),
      }),
      transposeA: true,
    },
    {
      ...f32("relu(a*s) @ b 4096^3", 4096, 4096, 4096, {
        "prologue fused": { prologue: true },
        "operand first": { prologue: false },
      }),
      prologue: true,
    },
  ];
}

interface Row {
  shape: string;
  variant: string;
  choice: string;
  dispatches: number;
  medianMs: number;
  bestMs: number;
  tflops: number;
  bestTflops: number;
  maxError: number;
}

/** `x` ([rows, cols] row-major) transposed to [cols, rows]. */
function transposeHost(x: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(x.length);
  for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) out[j * rows + i] = x[i * cols + j];
  return out;
}

function describeChoice(c: tuning.MatmulChoice): string {
  if (c.variant === "gemv") return `gemv width ${c.gemvWidth}${c.subgroups ? " subgroups" : ""}`;
  return `${c.variant} ${c.tileM}x${c.tileN}x${c.tileK} t${c.threadM}x${c.threadN}` +
    `${c.splitK > 1 ? ` split${c.splitK}` : ""}${c.doubleBuffer ? "" : " single"}` +
    `${c.variant === "streamK" ? ` ${c.streamKGroups} groups` : ""}` +
    `${c.sharedLayout === "interleaved" ? " interleaved" : ""}` +
    `${c.productForm === "broadcast" ? "" : ` ${c.productForm}`}` +
    `${c.transposeAFirst ? " A copied" : ""}`;
}

if (device === "wasm") {
  await benchWasm();
  Deno.exit(0);
}

const rt = await gyre.init({ device: "gpu" });
const gpu = rt.gpu!;
const caps = rt.caps!;
const profiler = new GpuProfiler(gpu);
const rows: Row[] = [];
const failures: string[] = [];

/**
 * Times `fn` (one product) `runs` times. The warm-up keeps the GPU busy: each wait for the GPU
 * costs the host at least 11 ms, during which an idle GPU drops its clock (an H200 idles at 345 MHz
 * and ramps to 1980 MHz only under sustained load), so enough products go out per wait to cover
 * about 30 ms at 20 TFLOP/s.
 */
async function timeProduct(
  fn: () => gyre.Tensor,
  flops: number,
  minimumWarmMs = warmMs,
): Promise<{ times: number[]; dispatches: number }> {
  // At least as many products per wait as the timed runs have in flight, so that the buffer
  // pool already holds as many outputs: fresh allocations made the first variant of a shape run
  // slow in its timed runs.
  const perWait = Math.max(runs, Math.min(1000, Math.ceil((0.03 * 20e12) / flops)));
  const start = performance.now();
  // Until warmMs have passed and the last three batches took the same time within 5%: after the
  // host has spent seconds preparing a shape, the clock takes longer than warmMs to come back
  // (the first variant of a shape measured 4-6 times slow with a fixed warm-up), capped at 5 s.
  const batches: number[] = [];
  const steady = () => {
    const last = batches.slice(-3);
    return last.length === 3 && Math.max(...last) <= 1.05 * Math.min(...last);
  };
  do {
    const batchStart = performance.now();
    for (let i = 0; i < perWait; i++) {
      // Products are lazy: realize() records the dispatch (a discarded pending one never runs).
      gyre.tidy(() => fn()).realize().dispose();
      gyre.flush();
    }
    await gyre.sync();
    batches.push(performance.now() - batchStart);
  } while (
    performance.now() - start < 5000 && (performance.now() - start < minimumWarmMs || !steady())
  );
  // Each run's dispatches (two for split K) share one timed pass, as they run unprofiled; one
  // submit per run.
  let dispatches = 0;
  const count = () => dispatches++;
  kernelObservers.add(count);
  profiler.startGroups();
  for (let r = 0; r < runs; r++) {
    profiler.group("matmul", () => gyre.tidy(() => fn()).realize().dispose());
    gyre.flush();
  }
  kernelObservers.delete(count);
  const times = (await profiler.stop()).map((t) => t.nanoseconds / 1e6);
  return { times, dispatches: dispatches / runs };
}

for (const s of shapes()) {
  if (only && !s.label.includes(only)) continue;
  const aHost = hostData(s.batch * s.m * s.k, 1);
  const bHost = hostData(s.batch * s.k * s.n, 2);
  const biasHost = hostData(s.n, 3);
  const batchShape = s.batch > 1 ? [s.batch] : [];
  // With transposeA the same A is stored [K, M]: the host copy is transposed to match.
  const aStored = s.transposeA ? transposeHost(aHost, s.m, s.k) : aHost;
  const a = s.transposeA
    ? gyre.tensor(aStored, { shape: [s.k, s.m], dtype: s.dtype })
    : gyre.tensor(aHost, { shape: [...batchShape, s.m, s.k], dtype: s.dtype });
  // linear takes the weight as [N, K]: the same B, stored transposed.
  const b = s.linear
    ? gyre.tensor(bHost, { shape: [s.k, s.n], dtype: s.dtype }).transpose().clone()
    : gyre.tensor(bHost, { shape: [...batchShape, s.k, s.n], dtype: s.dtype });
  const bias = gyre.tensor(biasHost, { dtype: s.dtype });
  const [aRaw, bData] = s.dtype === "float16" ? [toHalf(aHost), toHalf(bHost)] : [aHost, bHost];
  const scaleHost = hostData(s.k, 4);
  const scale = gyre.tensor(scaleHost, { dtype: s.dtype });
  // The A the product sees (its prologue applied on the host, for the spot check).
  const aData = s.prologue
    ? aRaw.map((v, i) => Math.max(0, Math.fround(v * scaleHost[i % s.k])))
    : aRaw;
  const options = s.accumulate ? { accumulate: s.accumulate } : {};
  const operand = () => (s.prologue ? a.mul(scale).relu() : a);
  const product = () =>
    s.linear
      ? gyre.linear(a, b, { ...options, bias, activation: "gelu" })
      : gyre.matmul(operand(), b, { ...options, transposeA: Boolean(s.transposeA) });
  const flops = 2 * s.batch * s.m * s.n * s.k;
  const variants: [string, Partial<tuning.MatmulChoice> | null][] = [
    ["plan", null],
    ...Object.entries(s.variants),
  ];
  for (const [name, override] of variants) {
    tuning.setPlanOverride("matmul", override);
    try {
      const choice = tuning.planMatmul(caps, {
        m: s.m,
        n: s.n,
        k: s.k,
        batch: s.batch,
        dtype: s.dtype,
        transposeA: Boolean(s.transposeA),
        transposeB: Boolean(s.linear),
        halfAccumulate: Boolean(s.accumulate),
      });
      // A shape's first variant warms for two seconds: while the host prepared the shape the GPU
      // idled down to its lowest clock, and short products (2048^3: 0.3 ms) can agree three
      // batches in a row while it climbs back (the first variants measured 15-51 TFLOP/s against
      // 57 once warm, even after five seconds of products before the shape).
      const first = name === variants[0][0];
      const { times, dispatches } = await timeProduct(
        product,
        flops,
        first && full ? 2000 : warmMs,
      );
      if (dispatches > 1) await dispatchBreakdown(profiler, `${s.label} ${name}`, product);
      const c = product();
      const maxError = await spotCheck(c, s, aData, bData, biasHost);
      c.dispose();
      const med = median(times);
      const best = Math.min(...times);
      const row: Row = {
        shape: s.label,
        variant: name,
        choice: describeChoice(choice),
        dispatches,
        medianMs: med,
        bestMs: best,
        tflops: flops / med / 1e9,
        bestTflops: flops / best / 1e9,
        maxError,
      };
      rows.push(row);
      console.error(
        `${s.label.padEnd(28)} ${name.padEnd(30)} ${row.choice.padEnd(36)} ${
          med.toFixed(3).padStart(9)
        } ms ${row.tflops.toFixed(2).padStart(7)} TFLOP/s (best ${row.bestTflops.toFixed(2)}) err ${
          maxError.toExponential(1)
        }`,
      );
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      console.error(`${s.label} ${name}: FAILED ${message}`);
      failures.push(`${s.label} ${name}: ${message}`);
    } finally {
      tuning.setPlanOverride("matmul", null);
    }
  }
  a.dispose();
  b.dispose();
  bias.dispose();
  scale.dispose();
}

/**
 * Largest error of 16 random outputs against f64 dot products, relative to sum |a_i b_i|
 * (linear: after bias and gelu, relative to the same scale plus |bias|).
 */
async function spotCheck(
  c: gyre.Tensor,
  s: Shape,
  a: Float32Array,
  b: Float32Array,
  bias: Float32Array,
): Promise<number> {
  const picks = Array.from({ length: 16 }, (_, t) => ({
    batch: (t * 7) % s.batch,
    i: Math.floor(((t * 0.618034) % 1) * s.m),
    j: Math.floor(((t * 0.414214) % 1) * s.n),
  }));
  const views = picks.map(({ batch, i, j }) => {
    const flat = c.reshape([s.batch * s.m, s.n]);
    const v = flat.slice([batch * s.m + i, batch * s.m + i + 1], [j, j + 1]);
    flat.dispose();
    return v;
  });
  const got = await gyre.readAll(views);
  views.forEach((v) => v.dispose());
  let worst = 0;
  picks.forEach(({ batch, i, j }, t) => {
    let sum = 0, scale = 0;
    for (let p = 0; p < s.k; p++) {
      const x = a[(batch * s.m + i) * s.k + p] * b[(batch * s.k + p) * s.n + j];
      sum += x;
      scale += Math.abs(x);
    }
    let want = sum;
    if (s.linear) {
      const z = sum + bias[j];
      want = 0.5 * z * (1 + erf(z / Math.SQRT2));
      scale += Math.abs(bias[j]);
    }
    worst = Math.max(worst, Math.abs(got[t][0] - want) / Math.max(scale, 1e-30));
  });
  return worst;
}

/** erf to ~1e-7 (Abramowitz and Stegun 7.1.26 is too coarse for the check; this is a series/fraction). */
function erf(x: number): number {
  const z = Math.abs(x);
  let r: number;
  if (z < 2) {
    let term = z, sum = z;
    for (let n = 1; n < 60; n++) {
      term *= -z * z / n;
      sum += term / (2 * n + 1);
    }
    r = (2 / Math.sqrt(Math.PI)) * sum;
  } else {
    // Continued fraction for erfc.
    let f = 0;
    for (let n = 60; n >= 1; n--) f = n / 2 / (z + f);
    r = 1 - Math.exp(-z * z) / Math.sqrt(Math.PI) / (z + f);
  }
  return x < 0 ? -r : r;
}

const clocks = await gpuClocks();
const result = {
  device: caps.description,
  date: new Date().toISOString(),
  deno: Deno.version.deno,
  scale,
  runs,
  notation: "M x N x K: A is M x K, B is K x N; TFLOP/s counts 2 M N K per product",
  gpuClocks: clocks,
  rows,
  failures,
};
const slug = slugOf(caps.description);
await Deno.mkdir(outDir, { recursive: true });
await Deno.writeTextFile(
  `${outDir}/matmul-${slug}-${scale}.json`,
  JSON.stringify(result, null, 2) + "\n",
);
const md = [
  `# Matmul on ${caps.description}`,
  "",
  `${result.date}, Deno ${result.deno}, scale ${scale}. Each variant: a warm-up of at least ${warmMs} ms (a shape's first: ${
    full ? 2000 : warmMs
  } ms), until three batches take the same time, then ` +
  `${runs} runs timed with GPU timestamps, one submit each; median (best). Shapes M x N x K. ` +
  `"plan" is the rule's own choice. Error: largest of 16 outputs against f64, relative to ` +
  `sum |a b|.`,
  ...(clocks ? ["", `GPU after the run: ${clocks}`] : []),
  ...(failures.length ? ["", "Failures:", ...failures.map((f) => `- ${f}`)] : []),
  "",
  "| shape | variant | kernel | dispatches | median ms | TFLOP/s | best TFLOP/s | error |",
  "|---|---|---|---:|---:|---:|---:|---:|",
  ...rows.map((r) =>
    `| ${r.shape} | ${r.variant} | ${r.choice} | ${r.dispatches} | ${r.medianMs.toFixed(3)} | ${
      r.tflops.toFixed(2)
    } | ${r.bestTflops.toFixed(2)} | ${r.maxError.toExponential(1)} |`
  ),
  "",
].join("\n");
await Deno.writeTextFile(`${outDir}/matmul-${slug}-${scale}.md`, md);
console.log(md);
profiler.destroy();
Deno.exit(0);

/** SM clock, temperature and throttle reasons from nvidia-smi, when there is one. */
async function gpuClocks(): Promise<string | null> {
  try {
    const out = await new Deno.Command("nvidia-smi", {
      args: [
        "--query-gpu=clocks.sm,clocks.max.sm,temperature.gpu,power.draw,clocks_throttle_reasons.active",
        "--format=csv,noheader",
      ],
    }).output();
    return out.success ? new TextDecoder().decode(out.stdout).trim() : null;
  } catch {
    return null;
  }
}

/** Wall-clock times of the WASM GEMM (one thread, then every thread), best of several runs. */
async function benchWasm(): Promise<void> {
  await gyre.init({ device: "wasm" });
  const threads = await gyre.startWasmThreads();
  // Warm-up on every thread count: V8 compiles the optimised GEMM in the background after the
  // first calls, competing for the cores with the timed runs of the first size otherwise.
  for (const count of [1, threads]) {
    tuning.setPlanOverride("wasmGemm", { threads: count });
    const w = gyre.ones([512, 512]);
    for (let i = 0; i < 4; i++) await gyre.matmul(w, w).data();
    w.dispose();
    tuning.setPlanOverride("wasmGemm", null);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const sizes = full ? [256, 512, 1024, 2048] : [128, 256, 512, 1024];
  const wasmRows: {
    shape: string;
    threads: number;
    bestMs: number;
    medianMs: number;
    gflops: number;
  }[] = [];
  for (const n of sizes) {
    for (const transpose of [false, true]) {
      for (const count of threads > 1 ? [1, threads] : [1]) {
        tuning.setPlanOverride("wasmGemm", { threads: count });
        const a = gyre.tensor(hostData(n * n, 1), { shape: [n, n] });
        const b = gyre.tensor(hostData(n * n, 2), { shape: [n, n] });
        const times: number[] = [];
        const runs = n <= 512 ? 9 : 5;
        for (let r = 0; r < runs; r++) {
          const t0 = performance.now();
          const c = gyre.matmul(a, b, { transposeB: transpose });
          await c.data();
          times.push(performance.now() - t0);
          c.dispose();
        }
        a.dispose();
        b.dispose();
        tuning.setPlanOverride("wasmGemm", null);
        const best = Math.min(...times.slice(1));
        const label = `${n}^3${transpose ? " (B transposed)" : ""}`;
        wasmRows.push({
          shape: label,
          threads: count,
          bestMs: best,
          medianMs: median(times.slice(1)),
          gflops: (2 * n ** 3) / best / 1e6,
        });
        console.error(
          `wasm ${label}, ${count} thread(s): best ${best.toFixed(1)} ms, ${
            (2 * n ** 3 / best / 1e6).toFixed(1)
          } GFLOP/s`,
        );
      }
    }
  }
  const md = [
    "# WASM GEMM (wall clock including the read-back)",
    "",
    `${new Date().toISOString()}, Deno ${Deno.version.deno}, ${navigator.hardwareConcurrency} ` +
    `logical CPUs, ${Deno.build.arch}; best (median) of several runs after one warm-up; one ` +
    `thread, then ${threads} (the calling thread and the pool's workers, shared memory).`,
    "",
    "| shape | threads | best ms | median ms | GFLOP/s |",
    "|---|---:|---:|---:|---:|",
    ...wasmRows.map((r) =>
      `| ${r.shape} | ${r.threads} | ${r.bestMs.toFixed(1)} | ${r.medianMs.toFixed(1)} | ${
        r.gflops.toFixed(1)
      } |`
    ),
    "",
  ].join("\n");
  await Deno.mkdir(outDir, { recursive: true });
  await Deno.writeTextFile(`${outDir}/matmul-wasm-${scale}.md`, md);
  await Deno.writeTextFile(
    `${outDir}/matmul-wasm-${scale}.json`,
    JSON.stringify({ date: new Date().toISOString(), rows: wasmRows }, null, 2) + "\n",
  );
  console.log(md);
}
