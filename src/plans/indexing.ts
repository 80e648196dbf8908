/**
 * The indexing family's plan (gathers and scatters on the GPU), and the merging of a job's axes
 * that both devices' kernels iterate over.
 * @module
 */
import type { DType } from "../core/dtype.ts";

/** The GPU indexing kernels' forms (the registry and the coverage test read these lists). */
export const INDEXING_VARIANTS = [
  "gather",
  "gather-vec4",
  "gather-quad",
  "scatter",
  "scatter-runs",
  "scatter-segments",
  "scatter-sorted",
  "scatter-shared",
  "scatter-compact",
] as const;
/** One of {@link INDEXING_VARIANTS}. */
export type IndexingVariant = (typeof INDEXING_VARIANTS)[number];

/** How a scatter combines an update into the output (see {@link IndexingChoice}). */
export const INDEXING_COMBINES = ["store", "atomic", "cas"] as const;
/** One of {@link INDEXING_COMBINES}. */
export type IndexingCombine = (typeof INDEXING_COMBINES)[number];

/** The choice for a gather or a scatter on the GPU (src/gpu/indexing.ts). */
export interface IndexingChoice {
  /** Which plan made this choice (a discriminant). */
  kernel: "indexing";
  /**
   * Gathers: "gather", one invocation an output element (a pair for float16); "gather-vec4",
   * four consecutive outputs from four consecutive elements of x (runs of x copied whole: the
   * indexSelect of rows); "gather-quad", four consecutive outputs from four consecutive indices
   * (read as one vec4, stored as one: takeAlongAxis and take by contiguous indices). (A form
   * loading each line of x into workgroup memory before gathering from it ran takeAlongAxis of
   * [4096, 4096] at 0.46-0.70 ms on an H200, and again at 0.125 ms in a second form, against
   * 0.065 ms for "gather-quad", whose scattered reads within a line hit the caches: removed.)
   * Scatters: "scatter", one invocation an update; "scatter-runs", an invocation a run of
   * RUN_LENGTH updates along the first axis, combining neighbours with equal indices before
   * one combine into the output (one atomic a run instead of one an update; no longer the
   * plan's choice, kept for the tuner: faster on long rows, 1.86 ms on one segment of 16 Mi
   * against 0.084 for "scatter-segments"); "scatter-segments"
   * (sorted ids, the default for them), a segmented reduction in a fixed order without atomics,
   * each output written by one invocation, so float sums are the same from run to run;
   * "scatter-sorted" (unsorted ids of float sums and means on a device without float32
   * atomics), the ids sorted first, the rows gathered in their order, then "scatter-segments";
   * "scatter-shared", outputs of at most SHARED_BINS elements combined in workgroup memory
   * first, one atomic an output element a workgroup (bincount into few bins); "scatter-compact",
   * a compaction's rows written at their counts of selected rows before them (each tile's count,
   * the tiles' offsets, then the writes: the mask read twice, no scan of it stored).
   */
  variant: IndexingVariant;
  /**
   * Scatters: "store" (no reduction) writes; "atomic" combines by one atomic instruction (integer
   * sums, max and min, float32 sums where the device has `wgpu-shader-float32-atomic`, float32
   * max and min on order-preserving integer keys); "cas" by a compare-and-swap loop on the 32-bit
   * word (products, float16, float32 sums elsewhere). The order in which updates meet is the
   * hardware's, so float sums, means and products can differ in their last bits between runs;
   * max, min and integer results cannot. "scatter-segments" reads, combines and writes each
   * output ("store"; "cas" for float16, whose neighbours share a word): its order is fixed.
   */
  combine: IndexingCombine;
  /**
   * "gather" (fused or not) and "gather-quad": the output elements each invocation takes, a
   * workgroup's invocations stepping together over its consecutive run of `workgroupSize *
   * perInvocation` (a multiple of 4 for "gather-quad"; 1 elsewhere).
   */
  perInvocation: number;
  /**
   * "scatter-compact": how a tile finds where its rows go: "summed", every workgroup of the
   * writes sums the tiles' counts itself; "pass", a pass of one workgroup scans them first (past
   * COMPACT_SUMMED_TILES tiles, where the sums grow quadratic).
   */
  offsets?: "summed" | "pass";
  /** Invocations per workgroup. */
  workgroupSize: number;
}

/** Rows a "scatter-compact" invocation takes (a tile is this many times the workgroup). */
export const COMPACT_ROWS = 16;
/**
 * The most tiles for which "scatter-compact" sums the tiles' counts in every workgroup of its
 * writes instead of a pass of offsets (each workgroup reads them all: quadratic in the tiles).
 * argwhere of 16 Mi (4096 tiles) on an H200: with the pass 83.4 us (the pass 10.5), summed 95.9.
 */
export const COMPACT_SUMMED_TILES = 256;

/** Rows of updates a "scatter-segments" invocation reduces in order. */
export const SEGMENT_ROWS = 16;

/**
 * "scatter-segments": the invocations that share a row (a power of two up to the workgroup, at
 * least the row's length where it can), the workgroup's others spread over rows.
 *
 * @example
 * ```ts
 * import { segmentColumns } from "@gyre/gyre/tuning";
 * segmentColumns(1, 256); // 1: 256 lanes of rows
 * segmentColumns(100, 256); // 128
 * ```
 */
export function segmentColumns(inner: number, workgroupSize: number): number {
  let columns = 1;
  while (columns < inner && columns < workgroupSize) columns *= 2;
  return columns;
}

/** Updates a "scatter-runs" invocation takes. */
export const RUN_LENGTH = 16;
/** The most output elements "scatter-shared" keeps in workgroup memory (16 KiB of words). */
export const SHARED_BINS = 4096;
/** Updates a "scatter-shared" workgroup takes. */
export const SHARED_CHUNK = 256 * 32;

/** What the gather plan looks at: the job after its axes are merged. */
export interface GatherShape {
  /** x's dtype. */
  dtype: DType;
  /** The output's shape (merged axes). */
  shape: readonly number[];
  /** x's strides over the output's axes. */
  xStrides: readonly number[];
  /** The indices' strides over the output's axes. */
  indexStrides: readonly number[];
  /** x's offset, in elements. */
  xOffset: number;
  /** The indices' offset, in elements. */
  indexOffset: number;
  /** The indexed axis' stride in x. */
  axisStride: number;
  /** The indexed axis' length. */
  axisLength: number;
  /** Elementwise consumers run in the kernel (read element by element: no vec4 form). */
  fused?: boolean;
}

/**
 * The gather plan: "gather-vec4" where the innermost axis copies runs of x a multiple of 4 long
 * and aligned, else "gather-quad" where it reads aligned runs of indices a multiple of 4 long,
 * else "gather"; from GATHER_RUN_FROM outputs, 8 an invocation.
 *
 * @example
 * ```ts
 * import { planGather } from "@gyre/gyre/tuning";
 * planGather({
 *   dtype: "float32", shape: [65536, 256], xStrides: [0, 1], indexStrides: [1, 0],
 *   xOffset: 0, indexOffset: 0, axisStride: 256, axisLength: 1000000,
 * }).variant; // "gather-vec4"
 * ```
 */
export function planGather(
  job: GatherShape,
  override?: Readonly<Partial<IndexingChoice>>,
): IndexingChoice {
  const vec4 = gatherVec4(job);
  const quad = gatherQuad(job);
  let variant: IndexingVariant = vec4 ? "gather-vec4" : quad ? "gather-quad" : "gather";
  const forced = override?.variant;
  if (
    forced === "gather" || (forced === "gather-vec4" && vec4) || (forced === "gather-quad" && quad)
  ) {
    variant = forced;
  }
  const forcedRun = override?.perInvocation;
  const n = job.shape.reduce((a, b) => a * b, 1);
  const perInvocation = variant === "gather-quad"
    ? (forcedRun === 4 || forcedRun === 8 || forcedRun === 16
      ? forcedRun
      : n >= GATHER_RUN_FROM
      ? 8
      : 4)
    : variant !== "gather" || (job.dtype === "float16" && !job.fused)
    ? 1
    : forcedRun !== undefined && PER_INVOCATION.includes(forcedRun)
    ? forcedRun
    : n >= GATHER_RUN_FROM
    ? 8
    : 1;
  return {
    kernel: "indexing",
    variant,
    combine: "store",
    perInvocation,
    workgroupSize: 256,
    ...pickSize(override),
  };
}

/** The "gather" form's choices of output elements an invocation. */
const PER_INVOCATION = [1, 4, 8, 16];
/**
 * Outputs from which "gather" and "gather-quad" take 8 an invocation (below, 1 and 4: more
 * workgroups to spread). takeAlongAxis of [4096, 4096] by a random permutation of each row on
 * an H200: "gather" 110 us at 1, 78 at 4, 76 at 8, 104 at 16; "gather-quad" 75 at 4, 64.5 at 8,
 * 64.3 at 16 (bench/results/indexing-nvidia-h200.md).
 */
export const GATHER_RUN_FROM = 1 << 20;

/**
 * Whether four consecutive outputs read four consecutive indices, aligned (their offsets and
 * strides multiples of 4), so they load as one vec4 and store as one.
 */
function gatherQuad(job: GatherShape): boolean {
  const last = job.shape.length - 1;
  return !job.fused && job.dtype !== "float16" && last >= 0 && job.shape[last] % 4 === 0 &&
    job.indexStrides[last] === 1 && job.indexOffset % 4 === 0 &&
    job.indexStrides.every((s, d) => d === last || s % 4 === 0);
}

/** Whether the innermost axis copies aligned runs of x, 4 elements at a time. */
function gatherVec4(job: GatherShape): boolean {
  const last = job.shape.length - 1;
  return !job.fused && job.dtype !== "float16" && last >= 0 && job.shape[last] % 4 === 0 &&
    job.xStrides[last] === 1 && job.indexStrides[last] === 0 && job.xOffset % 4 === 0 &&
    job.axisStride % 4 === 0 && job.xStrides.every((s, d) => d === last || s % 4 === 0);
}

/** What the scatter plan looks at: the job after its axes are merged. */
export interface ScatterShape {
  /** The output's dtype. */
  dtype: DType;
  /** The reduction. */
  reduce: "none" | "sum" | "prod" | "max" | "min" | "mean";
  /** The updates' iteration space (merged axes). */
  shape: readonly number[];
  /** The indices' strides over it. */
  indexStrides: readonly number[];
  /** The output's strides over it. */
  outStrides: readonly number[];
  /** Output elements. */
  outLength: number;
  /** The indices are declared sorted (segment ops' `sorted`). */
  sorted: boolean;
  /** A compaction (see ScatterJob.compact): "scatter-compact" only. */
  compact?: boolean;
}

/**
 * The scatter plan. The combine: "store" without a reduction, else one atomic instruction where
 * one exists for the dtype and reduction, else a compare-and-swap loop. The form:
 * "scatter-segments" for sorted ids (no atomics), "scatter-sorted" for float32 sums and means
 * of runs where the device cannot add floats atomically, "scatter-shared" for integer atomics into few outputs from many updates, else
 * "scatter". An override applies where it can run ("cas" always can; "atomic" not for products or
 * float16; "scatter-runs" and "scatter-sorted" wherever the index is constant across the inner
 * axes, and "scatter-segments" there for sorted ids;
 * "scatter-shared" only for integer atomics into at most SHARED_BINS outputs).
 *
 * @example
 * ```ts
 * import { planScatter } from "@gyre/gyre/tuning";
 * planScatter({ float32Atomics: true }, {
 *   dtype: "float32", reduce: "sum", shape: [1024], indexStrides: [1], outStrides: [0],
 *   outLength: 16, sorted: false,
 * }).combine; // "atomic"
 * ```
 */
export function planScatter(
  caps: { float32Atomics: boolean },
  job: ScatterShape,
  override?: Readonly<Partial<IndexingChoice>>,
): IndexingChoice {
  const { dtype, reduce } = job;
  const canAtomic = dtype !== "float16" && reduce !== "prod" && reduce !== "none" &&
    !(dtype === "float32" && (reduce === "sum" || reduce === "mean") && !caps.float32Atomics);
  let combine: IndexingCombine = reduce === "none" ? "store" : canAtomic ? "atomic" : "cas";
  const forcedCombine = override?.combine;
  if (reduce !== "none" && (forcedCombine === "cas" || (forcedCombine === "atomic" && canAtomic))) {
    combine = forcedCombine;
  }
  if (job.compact) {
    const workgroupSize = pickSize(override).workgroupSize ?? 256;
    const tiles = Math.ceil((job.shape[0] ?? 0) / (workgroupSize * COMPACT_ROWS));
    const forcedOffsets = override?.offsets;
    return {
      kernel: "indexing",
      variant: "scatter-compact",
      combine: "store",
      perInvocation: 1,
      offsets: forcedOffsets === "summed" || forcedOffsets === "pass"
        ? forcedOffsets
        : tiles <= COMPACT_SUMMED_TILES
        ? "summed"
        : "pass",
      workgroupSize,
    };
  }
  const runs = reduce !== "none" && scatterRuns(job);
  const shared = combine === "atomic" && dtype !== "float32" && reduce !== "mean" &&
    job.outLength <= SHARED_BINS;
  const n = job.shape.reduce((a, b) => a * b, 1);
  // Float sums where no atomic instruction adds floats: sorted, then reduced in order.
  const sortFirst = runs && !job.sorted && dtype === "float32" && !caps.float32Atomics &&
    (reduce === "sum" || reduce === "mean");
  let variant: IndexingVariant = runs && job.sorted
    ? "scatter-segments"
    : sortFirst
    ? "scatter-sorted"
    : shared && n >= 16 * job.outLength
    ? "scatter-shared"
    : "scatter";
  const forced = override?.variant;
  if (
    forced === "scatter" || (forced === "scatter-runs" && runs) ||
    (forced === "scatter-segments" && runs && job.sorted) ||
    (forced === "scatter-sorted" && runs) || (forced === "scatter-shared" && shared)
  ) variant = forced;
  // A segment's output has one writer: a read, a combine and a write (a word-wide
  // compare-and-swap for float16, whose neighbours share the word).
  if (variant === "scatter-segments" || variant === "scatter-sorted") {
    combine = dtype === "float16" ? "cas" : "store";
  }
  return {
    kernel: "indexing",
    variant,
    combine,
    perInvocation: 1,
    workgroupSize: 256,
    ...pickSize(override),
  };
}

/** Whether the index is constant across every axis but the first (runs along the first). */
function scatterRuns(job: ScatterShape): boolean {
  return job.shape.length >= 1 && job.outStrides[0] === 0 &&
    job.indexStrides.every((s, d) => d === 0 || s === 0);
}

function pickSize(override?: Readonly<Partial<IndexingChoice>>): { workgroupSize?: number } {
  const size = override?.workgroupSize;
  return size !== undefined && [64, 128, 256].includes(size) ? { workgroupSize: size } : {};
}

/**
 * Merges neighbouring axes that every stride list steps over as one (the inner's stride times
 * its length is the outer's), and drops axes of length 1, so kernels decompose fewer
 * coordinates; an empty shape stays empty, and a 0-d one becomes [1].
 *
 * @example
 * ```ts
 * import { mergeAxes } from "@gyre/gyre/tuning";
 * mergeAxes([2, 3, 4], [[12, 4, 1], [0, 0, 0]]); // { shape: [24], strides: [[1], [0]] }
 * ```
 */
export function mergeAxes(
  shape: readonly number[],
  strides: readonly (readonly number[])[],
): { shape: number[]; strides: number[][] } {
  if (shape.some((d) => d === 0)) return { shape: [0], strides: strides.map(() => [0]) };
  const outShape: number[] = [];
  const outStrides: number[][] = strides.map(() => []);
  for (let d = 0; d < shape.length; d++) {
    if (shape[d] === 1) continue;
    const last = outShape.length - 1;
    if (
      last >= 0 &&
      strides.every((s, k) => outStrides[k][last] === s[d] * shape[d])
    ) {
      outShape[last] *= shape[d];
      strides.forEach((s, k) => (outStrides[k][last] = s[d]));
      continue;
    }
    outShape.push(shape[d]);
    strides.forEach((s, k) => outStrides[k].push(s[d]));
  }
  if (outShape.length === 0) return { shape: [1], strides: strides.map(() => [0]) };
  return { shape: outShape, strides: outStrides };
}
