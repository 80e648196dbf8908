/**
 * The reduction plan: invocations per row, chunks, combine.
 * @module
 */
import type { DeviceCaps } from "../core/caps.ts";

/** Invocations per row: a workgroup, or one thread (the registry and the coverage test read this list). */
export const REDUCE_VARIANTS = ["workgroup", "thread"] as const;
/** One of {@link REDUCE_VARIANTS}. */
export type ReduceVariant = (typeof REDUCE_VARIANTS)[number];

/** How the chunks of a row combine (the registry and the coverage test read this list). */
export const REDUCE_COMBINES = ["last-workgroup", "second-pass"] as const;
/** One of {@link REDUCE_COMBINES}. */
export type ReduceCombine = (typeof REDUCE_COMBINES)[number];

/** The choice for a reduction. */
export interface ReduceChoice {
  /** Which plan made this choice (a discriminant). */
  kernel: "reduce";
  /** "workgroup": a workgroup per row chunk; "thread": one invocation per row. */
  variant: ReduceVariant;
  /** Combine within a workgroup through subgroup operations rather than shared memory. */
  subgroups: boolean;
  /** Invocations per workgroup. */
  workgroupSize: number;
  /** Chunks each row is split into (1: one pass; more: partials plus a second pass). */
  chunks: number;
  /** Read contiguous, 4-aligned rows as vec4 (chunk lengths are then multiples of 4). */
  vec4: boolean;
  /**
   * How a row's chunk partials are combined (workgroup variant): "last-workgroup" in the same
   * dispatch, by the row's last workgroup to finish (an atomic ticket); "second-pass" by a
   * second dispatch. The thread variant always takes a second pass.
   */
  combineChunks: ReduceCombine;
  /**
   * "last-workgroup": the partials and counters as 64-bit atomic words, one atomic per word,
   * where the device has 64-bit atomics; else tagged pairs of 32-bit words. On one H200 (16 Mi):
   * sum 24.1-24.3 us against 24.4-24.5, max 25.2 against 25.4-25.5, min 25.2-25.3 against
   * 25.7-25.9; on another, sum 24.3-24.5 against 24.8, max and min within 0.3 us either way.
   */
  wideStates: boolean;
}

/**
 * Elements one invocation should accumulate before the workgroup combine. On the H200 a sum of
 * 16 Mi took 24.4 us with 256 invocations x 512 chunks (128 per invocation), 24.5-29.6 us with
 * 128 to 1024 chunks, and no less with 512 or 1024 invocations
 * (bench/results/history/kernels-nvidia-h200-reduce-sweep.md).
 */
const ELEMENTS_PER_INVOCATION = 128;

/**
 * Where contiguous rows take one invocation each on a GPU: rows of at most
 * `REDUCE_THREAD_ROW_MAX` elements, at least `REDUCE_THREAD_ROWS_PER_ELEMENT` rows for each
 * element of a row (few rows leave the GPU idle; longer rows a longer serial loop). Fitted on an
 * H100 80GB HBM3 to every candidate measured at 400 held-out keys (bench/results/
 * tune-survey-h100-reduce-9006.json, GPU timestamps): the plan within 5% of the fastest at 96.5%
 * of them, 95.3% with the rule before (rows of at most 64, 4096 rows or more), which lost
 * [12184, 73] (one invocation a row 0.52x the workgroup's time) and [11662, 112] (0.82x) and
 * kept the workgroups' [3798, 93] (thread 1.10x). On the H200, [4233, 115] (fewer than 48 rows
 * an element) took 34.9 us by workgroups against 45.1 by invocations (bench/results/
 * tune-quality-h200-s27-a.json). A software adapter keeps the rule before (its table decides).
 */
const REDUCE_THREAD_ROW_MAX = 128;
const REDUCE_THREAD_ROWS_PER_ELEMENT = 48;

function manyShortRows(
  caps: DeviceCaps | undefined,
  problem: { rows: number; rowLength: number },
): boolean {
  if (caps?.isFallbackAdapter) return problem.rowLength <= 64 && problem.rows >= 4096;
  return problem.rowLength <= REDUCE_THREAD_ROW_MAX &&
    problem.rows >= REDUCE_THREAD_ROWS_PER_ELEMENT * problem.rowLength;
}

/**
 * Reductions: many short rows, or rows adjacent in memory (a reduction over leading axes), get one
 * invocation each (rows split into chunks when few and long); otherwise a workgroup per row, and rows so
 * long that one workgroup would loop more than {@link ELEMENTS_PER_INVOCATION} times are split
 * into chunks, combined by each row's last workgroup in the same dispatch (H200: sum 16 Mi 24.1
 * against 25.1 us with a second pass, 64 Mi 69.6 against 71.4). Subgroup operations where the
 * device has them.
 * Aligned contiguous rows read vec4s, arg and stateful reductions included. Measured on an H200
 * at 64 Mi float32 (bench/results/kernels-nvidia-h200-full*): max 87% of copy, argmax 83-85%,
 * logsumexp 86%, variance 87-88% (45%, 40% and 44% with scalar loads), a column sum over axis 0
 * of [8192, 8192] 86% (52% with one load in flight per invocation).
 *
 * @example
 * ```ts
 * import { planReduce } from "@gyre/gyre/tuning";
 * planReduce(undefined, { rows: 1, rowLength: 1 << 24 }).chunks; // 512
 * ```
 */
export function planReduce(
  caps: DeviceCaps | undefined,
  problem: { rows: number; rowLength: number; aligned?: boolean; rowsAdjacent?: boolean },
  override: Partial<ReduceChoice> | null = null,
): ReduceChoice {
  const workgroupSize = 256;
  const subgroups = Boolean(caps?.subgroups) && (caps?.subgroupMinSize ?? 0) >= 4 &&
    (caps?.subgroupMaxSize ?? 0) <= workgroupSize;
  // Rows adjacent in memory (a reduction over leading axes): one invocation per row reads
  // coalesced; enough chunks to keep about 256 Ki invocations busy, each 16 or more elements long.
  const columns = Boolean(problem.rowsAdjacent) && problem.rows >= 256;
  const threadChunks = columns
    ? Math.max(1, Math.min(Math.ceil(262144 / problem.rows), Math.floor(problem.rowLength / 16)))
    : 1;
  const choice: ReduceChoice = columns || manyShortRows(caps, problem)
    ? {
      kernel: "reduce",
      variant: "thread",
      subgroups: false,
      workgroupSize,
      chunks: threadChunks,
      vec4: false,
      combineChunks: "second-pass",
      wideStates: false,
    }
    : {
      kernel: "reduce",
      variant: "workgroup",
      subgroups,
      workgroupSize,
      vec4: Boolean(problem.aligned),
      combineChunks: "last-workgroup",
      wideStates: Boolean(caps?.int64Atomics),
      chunks: Math.min(
        4096,
        Math.max(1, Math.ceil(problem.rowLength / (workgroupSize * ELEMENTS_PER_INVOCATION))),
      ),
    };
  Object.assign(choice, override);
  // Subgroups and 64-bit states only where the device has them; chunks only within a row's
  // length.
  if (!caps?.subgroups) choice.subgroups = false;
  if (!caps?.int64Atomics) choice.wideStates = false;
  choice.chunks = Math.max(1, Math.min(choice.chunks, problem.rowLength));
  // One invocation never walks more than 16 Ki elements: a long serial loop wastes the GPU, and
  // lavapipe stops any shader loop after 65535 iterations.
  if (choice.variant === "thread") {
    choice.chunks = Math.max(choice.chunks, Math.ceil(problem.rowLength / 16384));
  }
  if (!problem.aligned || choice.variant === "thread") choice.vec4 = false;
  if (choice.variant === "thread") choice.combineChunks = "second-pass";
  return choice;
}
