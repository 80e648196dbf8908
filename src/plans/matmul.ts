/**
 * The matmul plans: tiles, products and split-K or stream-K on the GPU, and the WASM GEMM's
 * threads.
 * @module
 */
import type { DeviceCaps } from "../core/caps.ts";

import { ValueError } from "../core/errors.ts";

/** The matmul kernel schemes (the registry and the coverage test read this list). */
export const MATMUL_VARIANTS = ["tiled", "splitK", "gemv", "streamK"] as const;
/** One of {@link MATMUL_VARIANTS}. */
export type MatmulVariant = (typeof MATMUL_VARIANTS)[number];

/** The choice for a matrix multiply (src/gpu/_codegen_matmul.ts). */
export interface MatmulChoice {
  /** Which plan made this choice (a discriminant). */
  kernel: "matmul";
  /**
   * "tiled": shared-memory tiles, one workgroup per output tile; "splitK": the same kernel over
   * K ranges writing partials (float32; int32 for int32), summed by a second pass that also runs
   * the epilogue; "gemv": M = 1 or N = 1, one
   * workgroup per block of outputs (an override asking for it elsewhere falls back to "tiled");
   * "streamK": whole waves of `streamKGroups` tiles run as "tiled"; the tiles left over are
   * shared out equally by (tile, K step) units among `streamKGroups` workgroups, less than a
   * tile each, and a third pass sums the tiles cut between workgroups and runs the epilogue
   * (float32 accumulation; int32 and float16 accumulation fall back to "tiled"). On an H200
   * (bench/results/history/matmul-nvidia-h200-stream-k.md, -waves.md; float32 with `interiorLoads`):
   * 4096^3 43.7 TFLOP/s against 42.9, 8192^3 44.7 against 43.6, float16 storage 4096^3 40.4
   * against 39.3, 4096 x 4352 x 4096 43.8 against 40.0.
   */
  variant: MatmulVariant;
  /** Output tile of a workgroup, and K per shared-memory step. */
  tileM: number;
  /** Output columns a workgroup computes. */
  tileN: number;
  /** K per shared-memory step. */
  tileK: number;
  /** Outputs per invocation along M and N (4, 8 or 16 each). */
  threadM: number;
  /** Output columns an invocation computes. */
  threadN: number;
  /** Invocation columns in each group of 32 invocations (a warp's footprint; 1 to 32). */
  laneColumns: number;
  /** Two shared buffers: one barrier per K step instead of two. */
  doubleBuffer: boolean;
  /**
   * Shared tile layout. "interleaved": k-major rows of the whole tile. "thread": one padded row
   * per invocation row (A) or column (B) holding exactly the fragments it reads, so the inner
   * loop takes one pointer per K step and reads at constant indices (naga clamps every dynamic
   * index into a fixed-size array; constant ones it leaves alone).
   */
  sharedLayout: "interleaved" | "thread";
  /** Read the next K step's fragments from shared memory before this step's products. */
  prefetch: boolean;
  /**
   * How float16 accumulation writes its products ("thread" layout; other math ignores it). A
   * broadcast operand keeps NVIDIA's driver from pairing float16 multiply-adds
   * (bench/fma_peak.ts on an H200: 62 TFLOP/s with one, 88-90 with whole vectors or pairs).
   * - "broadcast": one A value times four B values, `fma(vec4(a.x), b, acc)`.
   * - "pairedK": multiply-adds over pairs of k, `fma(a.xyxy, b, acc)` with two vectors of two k
   *   each; every output keeps an even-k and an odd-k partial sum, summed at the end. Measured
   *   41.3 TFLOP/s at 128x128x16 with 8x8 (52.2 broadcast) and 49.8 at 128x128x8 with 8x16
   *   (48.9): twice the accumulators cost more than the pairing gains. Kept for devices where
   *   it pays.
   * - "repeatedA": A's values stored twice in shared memory, (a0, a0, a1, a1) per vector, so a
   *   product is `fma(a.xyxy, b, acc)` with one accumulator per output, at the cost of twice A's
   *   shared reads. The rule takes it, with one shared buffer, for float16 accumulation's large
   *   tiles (figures at `MATMUL_HALF_LARGE` in src/plans.ts): 61.0 TFLOP/s at 4096^3 on an H200
   *   with A stored [K, M] and 54.8 with A row-major, against 52-53 broadcast (a large row-major
   *   A is now copied into [K, M] order first: `transposeAFirst`).
   */
  productForm: "broadcast" | "pairedK" | "repeatedA";
  /**
   * Copy A into [K, M] order (M contiguous) by a transposing kernel of its own before the product
   * ("tiled" and "splitK"; A row-major, without a fused prologue, its batch axes one run). The
   * float16 tiles read A faster that way: with float16 accumulation on an H200 (bench/results/
   * history/matmul-nvidia-h200-f16-acc16.md, -a-copied-paired.md, -a-copied-2048.md), copy and product
   * together 60.0-60.6 TFLOP/s at 4096^3 in four runs (the copy 26-28 us of 2.27 ms) against 54.6
   * with A read as stored; 57.3 against 54.6 at 2048^3; 61.6 against 55.0 at 8192^3. float32
   * gains nothing (39.0 copied, 39.1 as stored), so the rule copies for float16 accumulation only.
   */
  transposeAFirst: boolean;
  /**
   * Global loads without bounds tests where every tile is whole and K is a multiple of tileK
   * (the kernel checks nothing then; elsewhere this is ignored). On an H200 at 4096^3 float32
   * (bench/results/history/matmul-nvidia-h200-interior.md): 43.0 TFLOP/s tiled against 39.1 with the
   * tests, 43.6-43.8 with stream-K; but float16 storage with float32 accumulation fell from
   * 39.4 to 34.5, so the rule takes it for float32 only.
   */
  interiorLoads: boolean;
  /** Tile rows walked together so workgroups in flight share operands in L2 (1: row-major). */
  swizzle: number;
  /** vec4 global loads and stores where the layout allows (false forces scalar ones). */
  vectorLoads: boolean;
  /** K ranges ("splitK" only; 1 otherwise). */
  splitK: number;
  /**
   * "streamK": tiles per wave, which is also the number of workgroups sharing the tiles left
   * over: as many as the GPU holds at once for the tile. Fewer leave multiprocessors idle while
   * the shared tiles run; more run them in two waves (at 4096^3 on an H200, 528 measured 39.3
   * TFLOP/s against 39.7 with 264). 0 otherwise.
   */
  streamKGroups: number;
  /** gemv: invocations per workgroup. */
  gemvWorkgroupSize: number;
  /** gemv: invocations per output (K contiguous) or groups of four outputs per workgroup (outputs contiguous). */
  gemvWidth: number;
  /** gemv: reduce through subgroup shuffles (K contiguous form, width within the subgroup size). */
  subgroups: boolean;
  /**
   * Compute a pending elementwise operand inside the tile loads (a fused prologue) rather than
   * in a kernel of its own first (see {@link planMatmulPrologue}).
   */
  prologue: boolean;
}

/** A tile configuration the matmul rule chooses among. */
export type MatmulTile =
  & Pick<MatmulChoice, "tileM" | "tileN" | "tileK" | "threadM" | "threadN" | "laneColumns">
  & Partial<Pick<MatmulChoice, "productForm" | "doubleBuffer">>;

/**
 * The rule's tiles, largest first. Measured on an H200 (float32 TFLOP/s, bench/results/matmul-*;
 * before `interiorLoads`, which takes the first to 42.9 at 4096^3, 43.6 at 8192^3 and 41.6 at
 * 2048^3): 128x128x8 with 8x16 per invocation 39.0 at 4096^3, 39.4 at 8192^3, 37.9 at 2048^3 (8x8: 32;
 * 16x8: 37.9; 128x256 or 256x128: 31-32; 128x128x16 with 8x16: 21, past the registers); 64x64 4x4
 * 26.9 at 1024^3 (64x128 8x8: 27.1); 32x32 4x4 11.2 at 512^3, where launch latency dominates.
 * Tile rows walked together (`swizzle`): 4 gave 39.08 at 4096^3 against 38.80 with 8 and 39.01
 * with 16 (39.44 against 38.99 with A stored transposed), so the rule takes 4.
 */
export const MATMUL_TILES: readonly MatmulTile[] = [
  { tileM: 128, tileN: 128, tileK: 8, threadM: 8, threadN: 16, laneColumns: 2 },
  { tileM: 64, tileN: 128, tileK: 16, threadM: 8, threadN: 8, laneColumns: 8 },
  { tileM: 64, tileN: 64, tileK: 16, threadM: 4, threadN: 4, laneColumns: 8 },
  { tileM: 32, tileN: 64, tileK: 16, threadM: 4, threadN: 4, laneColumns: 8 },
  { tileM: 32, tileN: 32, tileK: 16, threadM: 4, threadN: 4, laneColumns: 8 },
];

/**
 * With float16 accumulation the large tiles store A's values twice (`productForm: "repeatedA"`) in one shared
 * buffer. Measured on an H200 at 4096^3 (bench/results/history/matmul-nvidia-h200-one-buffer.md and
 * earlier runs): with A stored [K, M] (M contiguous), 128x128x16 with 8x8 per invocation 61.0-61.2
 * TFLOP/s in three runs (two buffers: 41-42; A not repeated: 52.7-53.0; 128x128x8 with 8x16:
 * 56.1-56.7); with A row-major, 128x128x8 with 8x16 54.7-54.8 in two runs (two buffers:
 * 54.1-54.3 in three runs and 48.9 in a fourth; the 8x8 tile repeated: 53.7; the best tile
 * without repetition, 128x128x16 with 8x8 and two buffers: 51.9-52.1).
 */
const MATMUL_HALF_LARGE: MatmulTile = {
  ...MATMUL_TILES[0],
  productForm: "repeatedA",
  doubleBuffer: false,
};
const MATMUL_HALF_COLUMNS_LARGE: MatmulTile = {
  tileM: 128,
  tileN: 128,
  tileK: 16,
  threadM: 8,
  threadN: 8,
  laneColumns: 8,
  productForm: "repeatedA",
  doubleBuffer: false,
};

/**
 * Smallest M, N and K at which float16 accumulation copies a row-major A into [K, M] order first:
 * the copy reads and writes M x K elements once, and paid 5% at 2048^3 and 10-12% at 4096^3 and
 * 8192^3 on an H200 (figures at `transposeAFirst`); smaller products were not measured.
 */
const MATMUL_COPY_A_MIN = 2048;

/**
 * Multiprocessors of GPUs known by the adapter's description (WebGPU does not report them).
 * Stream-K needs the number of workgroups the GPU holds at once; elsewhere tiles run in waves.
 */
const KNOWN_MULTIPROCESSORS: readonly (readonly [RegExp, number])[] = [
  [/\bH200\b/, 132],
  [/\bH100\b.*\b(HBM3|SXM\d*|NVL)\b/, 132],
  [/\bH100\b.*\bPCIe\b/, 114],
];

/**
 * Workgroups of the float32 128x128x8 tile (8x16 per invocation) that one multiprocessor holds.
 * Measured on an H200 (bench/results/history/matmul-nvidia-h200-waves.md): at 4096 x N x 4096 the
 * time is flat from 992 to 1056 tiles (3.51-3.53 ms) and steps to 4.39 ms at 1088, so the GPU
 * runs 264 = 132 x 2 at once; 4096^3's 1024 tiles leave its fourth wave 88% full (39.1 TFLOP/s
 * against 40.2 with 1056 tiles). An H100 80GB HBM3 measured the same (bench/README.md, session
 * 7 pass 10).
 */
const MATMUL_LARGE_PER_MULTIPROCESSOR = 2;

/**
 * Stream-K's price on an H200: its K steps run about 2% slower than plain tiles' (1.02), and
 * summing the cut tiles takes 15-18 us. It pays where the K it saves, K times the empty share of
 * the last wave less that 2%, is at least this many elements (one element of K is about 0.2 us
 * of a wave of this tile): at 4096^3, 421 (saves 50-60 us); at 4096 x 4096 x 1024, 105 (about
 * what the sums cost: 0.829 ms against 0.824 tiled).
 */
const MATMUL_STREAM_K_SLOWER = 1.02;
const MATMUL_STREAM_K_MIN_SAVED_K = 200;

/** Each split of K on a software adapter keeps at least this much of K. */
const MATMUL_SOFT_MIN_SPLIT = 32;
/** A software adapter splits K further only where that shortens the waves by this share. */
const MATMUL_SOFT_SPLIT_GAIN = 0.1;

/**
 * A software adapter's matmul: the largest tile, in as many K splits as fill the last wave of
 * workgroups across its threads. Its threads are CPU cores running one workgroup each at a
 * time, so a workgroup's time is its K, and the product takes ceil(tiles * splits / threads)
 * waves of K / splits each. Splits are powers of two (the tuner's domain); a larger count is
 * taken only where it shortens that by 10%, since each split writes a partial product to sum.
 * Measured on lavapipe with 2 threads (bench/results/tune-quality-lavapipe.md): the 128x128
 * tile led on all 24 held-out products from 65 to 286 on a side, and 2 splits led exactly where
 * the tile count was odd (1 or 3 tiles: one thread idle in the last wave); the earlier rule
 * (smaller tiles until 16 workgroups) ran them 1.3-2.7x slower.
 */
function softwareSplitK(tiles: number, k: number, threads: number): number {
  const waves = (splits: number) => Math.ceil((tiles * splits) / threads) / splits;
  let splitK = 1;
  for (let s = 2; s <= 64 && k / s >= MATMUL_SOFT_MIN_SPLIT; s *= 2) {
    if (waves(s) <= waves(splitK) * (1 - MATMUL_SOFT_SPLIT_GAIN)) splitK = s;
  }
  return splitK;
}

/** Workgroups that keep a large GPU busy (132 SMs, about two each). */
const MATMUL_BUSY = 256;
/** Split K only when each split keeps at least this much of K. */
const MATMUL_MIN_SPLIT = 1024;

/**
 * Matrix multiply: M = 1 or N = 1 goes to "gemv". Otherwise the largest tile (128x128 with 8x16
 * outputs per invocation, down to 32x32 with 4x4) that keeps the device busy, counting K splits:
 * a tile may take up to `K / 1024` splits when that is what it needs to reach enough workgroups
 * (small outputs with a long K: 128x128x65536 runs 64x64 tiles in 64 splits). A software adapter
 * takes the largest tile and splits K to fill its threads' last wave (`softwareSplitK`). Tiles
 * must fit the device's workgroup storage (48 KiB on an H200, 32 KiB on lavapipe) and invocation
 * limit: the rule skips those that do not, and an override that does not is refused with a
 * `ValueError`.
 *
 * `transposeA`: A is stored [K, M] (M contiguous); `transposeB`: B is stored [N, K].
 *
 * @example
 * ```ts
 * import { planMatmul } from "@gyre/gyre/tuning";
 * planMatmul(undefined, { m: 4096, n: 4096, k: 4096, batch: 1, dtype: "float32" }).tileM; // 128
 * planMatmul(undefined, { m: 1, n: 4096, k: 4096, batch: 1, dtype: "float32" }).variant; // "gemv"
 * ```
 */
export function planMatmul(
  caps: DeviceCaps | undefined,
  problem: {
    m: number;
    n: number;
    k: number;
    batch: number;
    dtype: "float32" | "float16" | "int32";
    transposeA?: boolean;
    transposeB?: boolean;
    /** float16 accumulation (f16 registers and shared tiles). */
    halfAccumulate?: boolean;
    /** Whether A may be copied into [K, M] order first (see `transposeAFirst`); default true. */
    aCopyable?: boolean;
  },
  override: Partial<MatmulChoice> | null = null,
): MatmulChoice {
  const { m, n, k, batch } = problem;
  const half = Boolean(problem.halfAccumulate);
  const aCopyable = !problem.transposeA && problem.aCopyable !== false;
  const transposeAFirst = half && aCopyable && Math.min(m, n, k) >= MATMUL_COPY_A_MIN;
  const defaults = {
    doubleBuffer: true,
    sharedLayout: "thread" as const,
    prefetch: true,
    swizzle: 4,
    productForm: "broadcast" as const,
    vectorLoads: true,
  };
  const columns = problem.transposeA ||
    (aCopyable && (override?.transposeAFirst ?? transposeAFirst));
  const halfLarge = columns ? MATMUL_HALF_COLUMNS_LARGE : MATMUL_HALF_LARGE;
  const tiles = half ? [halfLarge, ...MATMUL_TILES.slice(1)] : MATMUL_TILES;
  const fits = (t: MatmulTile) => matmulFits(caps, { ...defaults, ...t }, half);
  const usable = tiles.filter(fits);
  const candidates = usable.length ? usable : [tiles[tiles.length - 1]];
  const tileGroups = (t: MatmulTile) => batch * Math.ceil(m / t.tileM) * Math.ceil(n / t.tileN);
  let best: { tile: MatmulTile; splitK: number; groups: number };
  if (caps?.isFallbackAdapter) {
    const groups = tileGroups(candidates[0]);
    const splitK = softwareSplitK(groups, k, caps.softwareThreads ?? 1);
    best = { tile: candidates[0], splitK, groups: groups * splitK };
  } else {
    const maxSplits = k >= 2 * MATMUL_MIN_SPLIT
      ? Math.min(64, Math.floor(k / MATMUL_MIN_SPLIT))
      : 1;
    const plans = candidates.map((t) => {
      const groups = tileGroups(t);
      const splitK = groups >= MATMUL_BUSY
        ? 1
        : Math.max(1, Math.min(maxSplits, Math.floor(MATMUL_BUSY / groups)));
      return { tile: t, splitK, groups: groups * splitK };
    });
    best = plans.find((x) => x.groups >= MATMUL_BUSY) ?? plans[plans.length - 1];
  }
  // Stream-K: the large float32 tile, where whole waves would leave the last one part-empty
  // for long enough (the whole waves still run as plain tiles; see `variant`).
  const multiprocessors = caps?.isFallbackAdapter
    ? undefined
    : KNOWN_MULTIPROCESSORS.find(([name]) => name.test(caps?.description ?? ""))?.[1];
  const slots = (multiprocessors ?? 0) * MATMUL_LARGE_PER_MULTIPROCESSOR;
  const leftover = slots > 0 ? best.groups % slots : 0;
  const streamK = !half && problem.dtype !== "int32" && best.tile === MATMUL_TILES[0] &&
    best.splitK === 1 && leftover > 0 &&
    k * (1 - (MATMUL_STREAM_K_SLOWER * leftover) / slots) >= MATMUL_STREAM_K_MIN_SAVED_K;
  // gemv: the matrix's contiguous axis decides the form; the vector side of M = 1 is A.
  const matrixKContiguous = m === 1 ? Boolean(problem.transposeB) : !problem.transposeA;
  const choice: MatmulChoice = {
    kernel: "matmul",
    variant: m === 1 || n === 1
      ? "gemv"
      : best.splitK > 1
      ? "splitK"
      : streamK
      ? "streamK"
      : "tiled",
    ...defaults,
    ...best.tile,
    splitK: best.splitK,
    // An override asking for stream-K without a count gets the slots, or what keeps it busy.
    streamKGroups: slots || (caps?.isFallbackAdapter ? caps.softwareThreads ?? 16 : MATMUL_BUSY),
    gemvWorkgroupSize: 256,
    gemvWidth: matrixKContiguous ? 32 : 4,
    subgroups: false,
    prologue: planMatmulPrologue(problem),
    interiorLoads: problem.dtype === "float32",
    transposeAFirst,
    ...override,
  };
  // Shuffles reach only within a subgroup: the width must fit the smallest one.
  const shuffles = Boolean(caps?.subgroups) && choice.gemvWidth <= (caps?.subgroupMinSize ?? 0);
  choice.subgroups = shuffles && (override?.subgroups ?? true);
  // What the problem allows, whatever an override asks.
  if (choice.variant === "gemv" && m !== 1 && n !== 1) choice.variant = "tiled";
  if (choice.variant !== "splitK") choice.splitK = 1;
  // Stream-K publishes float32 partials; other accumulators run the tiles in waves.
  if (choice.variant === "streamK" && (half || problem.dtype === "int32")) choice.variant = "tiled";
  if (choice.variant !== "streamK") choice.streamKGroups = 0;
  if (choice.variant === "gemv" || !aCopyable) choice.transposeAFirst = false;
  checkMatmulChoice(caps, choice, half);
  return choice;
}

/** Products up to this many flops take a pending elementwise operand as a fused prologue. */
const MATMUL_PROLOGUE_MAX_FLOPS = 2 ** 30;

/**
 * Whether a matmul computes a pending elementwise operand as it loads its tiles (a prologue)
 * instead of in a kernel of its own first: for products up to 2^30 flops, where the saved
 * dispatch and round trip through memory weigh more than the product's slower K steps. Measured
 * on an H200 (float32 4096^3, A = relu(x * s) with s a [K] vector): 4.29 ms fused (32.0
 * TFLOP/s) against 3.56 ms (38.6) with the operand computed first: the prologue's extra loads
 * and registers slow every K step, while computing A first is one pass over it. An override's
 * `prologue` decides instead.
 *
 * @example
 * ```ts
 * import { planMatmulPrologue } from "@gyre/gyre/tuning";
 * planMatmulPrologue({ m: 256, n: 256, k: 256, batch: 1 }); // true
 * planMatmulPrologue({ m: 4096, n: 4096, k: 4096, batch: 1 }); // false
 * ```
 */
export function planMatmulPrologue(
  problem: { m: number; n: number; k: number; batch: number },
  override: Partial<MatmulChoice> | null = null,
): boolean {
  return override?.prologue ??
    2 * problem.batch * problem.m * problem.n * problem.k <= MATMUL_PROLOGUE_MAX_FLOPS;
}

/** Whether a tile fits the device's invocation and workgroup storage limits. */
function matmulFits(
  caps: DeviceCaps | undefined,
  t: MatmulTile & { doubleBuffer: boolean; sharedLayout: "thread" | "interleaved" },
  half: boolean,
): boolean {
  const threads = (t.tileM / t.threadM) * (t.tileN / t.threadN);
  const bytes = tiledSharedBytes({ ...t, math: half ? "f16" : "f32" });
  return threads <= (caps?.limits?.maxComputeInvocationsPerWorkgroup ?? 256) &&
    bytes <= (caps?.limits.maxComputeWorkgroupStorageSize ?? 16384);
}

function checkMatmulChoice(caps: DeviceCaps | undefined, c: MatmulChoice, half: boolean): void {
  const fail = (field: string, expected: string, received: unknown) => {
    throw new ValueError({
      op: "setPlanOverride",
      argument: `matmul.${field}`,
      expected,
      received: String(received),
    });
  };
  const pow2 = (v: number) => Number.isInteger(v) && v > 0 && (v & (v - 1)) === 0;
  if (![4, 8, 16].includes(c.threadM)) fail("threadM", "4, 8 or 16", c.threadM);
  if (![4, 8, 16].includes(c.threadN)) fail("threadN", "4, 8 or 16", c.threadN);
  if (!pow2(c.tileM) || c.tileM < c.threadM) fail("tileM", "a power of two >= threadM", c.tileM);
  if (!pow2(c.tileN) || c.tileN < c.threadN) fail("tileN", "a power of two >= threadN", c.tileN);
  if (!pow2(c.tileK) || c.tileK < 4 || c.tileK > 64) fail("tileK", "4, 8, 16, 32 or 64", c.tileK);
  if (!pow2(c.laneColumns) || c.laneColumns > 32) {
    fail("laneColumns", "a power of two <= 32", c.laneColumns);
  }
  if (!Number.isInteger(c.swizzle) || c.swizzle < 1) fail("swizzle", "an integer >= 1", c.swizzle);
  if (!Number.isInteger(c.splitK) || c.splitK < 1 || c.splitK > 256) {
    fail("splitK", "an integer in [1, 256]", c.splitK);
  }
  if (
    c.variant === "streamK" &&
    (!Number.isInteger(c.streamKGroups) || c.streamKGroups < 1 || c.streamKGroups > 65535)
  ) {
    fail("streamKGroups", "an integer in [1, 65535] with variant streamK", c.streamKGroups);
  }
  const maxThreads = caps?.limits?.maxComputeInvocationsPerWorkgroup ?? 256;
  const threads = (c.tileM / c.threadM) * (c.tileN / c.threadN);
  if (c.variant !== "gemv" && threads > maxThreads) {
    fail("tileM", `tiles of at most ${maxThreads} invocations on this device`, `${threads}`);
  }
  const storage = caps?.limits.maxComputeWorkgroupStorageSize ?? 16384;
  const shared = tiledSharedBytes({ ...c, math: half ? "f16" : "f32" });
  if (c.variant !== "gemv" && shared > storage) {
    fail("tileK", `tiles within ${storage} bytes of workgroup storage`, `${shared} bytes`);
  }
  if (!["broadcast", "pairedK", "repeatedA"].includes(c.productForm)) {
    fail("productForm", '"broadcast", "pairedK" or "repeatedA"', c.productForm);
  }
  if (c.sharedLayout !== "thread" && c.sharedLayout !== "interleaved") {
    fail("sharedLayout", '"thread" or "interleaved"', c.sharedLayout);
  }
  if (!pow2(c.gemvWorkgroupSize) || c.gemvWorkgroupSize > maxThreads) {
    fail("gemvWorkgroupSize", `a power of two <= ${maxThreads}`, c.gemvWorkgroupSize);
  }
  if (!pow2(c.gemvWidth) || c.gemvWidth > c.gemvWorkgroupSize) {
    fail("gemvWidth", "a power of two <= gemvWorkgroupSize", c.gemvWidth);
  }
}

/** The choice for the WASM GEMM (asm/matmul.ts): how many threads share it, and how. */
export interface WasmGemmChoice {
  /** Which plan made this choice (a discriminant). */
  kernel: "wasmGemm";
  /** Threads that compute blocks of C: the calling thread plus workers (src/wasm/threads.ts). */
  threads: number;
  /**
   * "rows": each thread computes a range of C's rows (batch matrices laid end to end), packing
   * its own A panels while all read B; "columns": ranges of C's columns, each thread packing its
   * own B panels. Either way each element's sum is computed exactly as on one thread.
   */
  split: "rows" | "columns";
}

/**
 * Below this many floating-point operations (2 M N K over the batch) the WASM GEMM stays on one
 * thread. Handing a share to a worker costs about 60 us (a postMessage, waking the worker, the
 * completion wake-up); on the 2-core test machine one thread won up to 128^3 (4.2e6 FLOPs: 94 us
 * against 114 us), two won from 160^3 (8.2e6: 178 us against 164 us; 1024^3: 46 ms against 24 ms).
 */
export const WASM_GEMM_MIN_FLOPS = 1e7;

/**
 * WASM GEMM: every thread `cores` allows (the calling thread plus the pool's workers) from
 * {@link WASM_GEMM_MIN_FLOPS} up, one below; split along C's longer side (rows when M >= N), so
 * that each thread's share is a wide block. An override may ask for any positive number of
 * threads; those beyond the ready workers run on fewer.
 *
 * @example
 * ```ts
 * import { planWasmGemm } from "@gyre/gyre/tuning";
 * planWasmGemm({ m: 1024, n: 1024, k: 1024, batch: 1, cores: 2 }); // 2 threads, rows
 * planWasmGemm({ m: 64, n: 64, k: 64, batch: 1, cores: 2 }).threads; // 1
 * ```
 */
export function planWasmGemm(
  problem: { m: number; n: number; k: number; batch: number; cores: number },
  override: Partial<WasmGemmChoice> | null = null,
): WasmGemmChoice {
  const { m, n, k, batch, cores } = problem;
  const flops = 2 * batch * m * n * k;
  const choice: WasmGemmChoice = {
    kernel: "wasmGemm",
    threads: flops >= WASM_GEMM_MIN_FLOPS ? Math.max(1, cores) : 1,
    split: m >= n ? "rows" : "columns",
    ...override,
  };
  const fail = (field: string, expected: string, received: unknown) => {
    throw new ValueError({
      op: "setPlanOverride",
      argument: `wasmGemm.${field}`,
      expected,
      received: String(received),
    });
  };
  if (!Number.isInteger(choice.threads) || choice.threads < 1) {
    fail("threads", "a positive integer", choice.threads);
  }
  if (choice.split !== "rows" && choice.split !== "columns") {
    fail("split", '"rows" or "columns"', choice.split);
  }
  return choice;
}

// ---------------------------------------------------------------------------------------------
// Tile footprints: what the plan checks against the device's limits and the WGSL generator
// (src/gpu/_codegen_matmul.ts) lays out, kept here so that plans import no generator.

/** The register type of a tile's inner product (float16 accumulation: "f16"). */
export interface TileMath {
  /** The register type of the inner product. */
  math: "f32" | "f16" | "i32";
}

/** Shared memory bytes a tiled spec uses (checked against the device limit by the plan). */
export function tiledSharedBytes(
  s:
    & TileMath
    & Pick<
      MatmulChoice,
      "tileM" | "tileN" | "tileK" | "threadM" | "threadN" | "doubleBuffer" | "sharedLayout"
    >
    & Partial<Pick<MatmulChoice, "productForm">>,
): number {
  const element = s.math === "f16" ? 2 : 4;
  const buffers = s.doubleBuffer ? 2 : 1;
  if (s.sharedLayout === "interleaved") {
    return (s.tileM + s.tileN) * s.tileK * element * buffers;
  }
  const rows = (tile: number, thread: number, perK: number) =>
    (tile / thread) * threadRow(s.tileK * perK, tile / thread);
  return (rows(s.tileM, s.threadM, aVectorsPerK(s)) + rows(s.tileN, s.threadN, s.threadN / 4)) * 4 *
    element * buffers;
}

/**
 * vec4s in one invocation's row of a "thread" layout tile: its fragments for every k, plus one of
 * padding when several rows exist, so that rows start in different banks (an odd count of 16-byte
 * vectors puts eight consecutive rows in eight different 16-byte bank groups).
 */
export function threadRow(fragments: number, rows: number): number {
  return rows > 1 && fragments % 2 === 0 ? fragments + 1 : fragments;
}

/**
 * The product form a tiled spec generates: `productForm` with float16 accumulation and the
 * "thread" layout, "broadcast" otherwise.
 * - "pairedK": shared vectors hold two outer indices by two k each: (o, k), (o, k + 1),
 *   (o + 1, k), (o + 1, k + 1), so that a product is `fma(a.xyxy, b, acc)` over whole registers.
 * - "repeatedA": A's shared vectors hold two rows at one k as (a0, a0, a1, a1), so that a product
 *   is `fma(a.xyxy, b, acc)` (or `.zwzw`) over whole registers, one output per lane as broadcast.
 */
export function formOf(
  s: TileMath & Pick<MatmulChoice, "sharedLayout"> & Partial<Pick<MatmulChoice, "productForm">>,
): MatmulChoice["productForm"] {
  return s.math === "f16" && s.sharedLayout === "thread"
    ? s.productForm ?? "broadcast"
    : "broadcast";
}

/** Whether a tiled spec stores each A value twice (see {@link formOf}). */
export function repeats(s: Parameters<typeof formOf>[0]): boolean {
  return formOf(s) === "repeatedA";
}

/**
 * Shared vectors per k in an invocation's row of A ("thread" layout): one per group of four
 * rows, two when A is repeated.
 */
export function aVectorsPerK(
  s: Parameters<typeof formOf>[0] & Pick<MatmulChoice, "threadM">,
): number {
  return (s.threadM / 4) * (repeats(s) ? 2 : 1);
}
