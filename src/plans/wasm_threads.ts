/**
 * How many threads share a job of the WASM device that is not a GEMM (elementwise tile programs,
 * reductions, scans, rows, pools): one rule for all of them, so that the threshold is measured
 * once, and each family's weight of an element against it, measured per family.
 * @module
 */
import { ValueError } from "../core/errors.ts";

/** The choice of threads for a job of the WASM device. */
export interface WasmThreadsChoice {
  /** Which plan made this choice (a discriminant). */
  kernel: "wasmThreads";
  /** Threads that share the job: the calling thread plus workers (src/wasm/threads.ts). */
  threads: number;
}

/**
 * Elements from which a job is shared among threads. Handing a share to a worker costs about
 * 0.1-0.2 ms (a postMessage, waking the worker, the completion wake-up). On the 2-core test
 * machine (medians of 9, another process busy at times), relu(x * 2 + 1) took 0.13 ms on one
 * thread and 0.17 on two at 64 Ki elements, 0.62 and 0.32 at 256 Ki, 1.56 and 0.85 at 1 Mi; a
 * memory-bound add broke even at 256 Ki (0.146 and 0.150 ms) and gained at 16 Mi (8.2 and 5.4).
 */
export const WASM_MIN_THREADED_ELEMENTS = 1 << 18;

/**
 * Threads for a WASM job of `elements` elements: every thread `cores` allows from
 * {@link WASM_MIN_THREADED_ELEMENTS}, one below. An override may ask for any positive number
 * (those beyond the ready workers run on fewer).
 *
 * @example
 * ```ts
 * import { planWasmThreads } from "@gyre/gyre/tuning";
 * planWasmThreads({ elements: 1 << 24, cores: 2 }).threads; // 2
 * planWasmThreads({ elements: 1000, cores: 2 }).threads; // 1
 * ```
 */
export function planWasmThreads(
  problem: { elements: number; cores: number },
  override: Partial<WasmThreadsChoice> | null = null,
): WasmThreadsChoice {
  const choice: WasmThreadsChoice = {
    kernel: "wasmThreads",
    threads: problem.elements >= WASM_MIN_THREADED_ELEMENTS ? Math.max(1, problem.cores) : 1,
    ...override,
  };
  if (!Number.isInteger(choice.threads) || choice.threads < 1) {
    throw new ValueError({
      op: "setPlanOverride",
      argument: "wasmThreads.threads",
      expected: "a positive integer",
      received: String(choice.threads),
    });
  }
  return choice;
}

/**
 * A softmax or logSoftmax element counts as 2 elements of `planWasmThreads`'s threshold (2^18),
 * so these are shared among threads from 128 Ki elements, where one thread takes about 0.3 ms,
 * twice what handing a share to a worker costs. On the 2-core test machine (medians of 9-41
 * through the op, other agents busy at times), [R, 1024] softmax took 0.19-0.27 ms on one thread
 * and 0.18-0.26 on two at 64 Ki elements, 0.43 and 0.31-0.39 at 128 Ki, 0.8-0.9 and 0.5-0.66 at
 * 256 Ki, 3.6 and 2.0 at 1 Mi, and 10.0-10.3 and 5.5-5.75 at 4 Mi.
 */
export const WASM_SOFTMAX_WEIGHT = 2;

/**
 * The same for layerNorm, rmsNorm, groupNorm and batchNorm, an eighth (threads from 2 Mi
 * elements): about 1.2 ns an element (f64 passes, no exp), and they stream more memory; they
 * gained nothing measurable below 2 Mi: [R, 1024] layerNorm took 0.5-0.8 ms on one thread and
 * 0.56-0.64 on two at 512 Ki, 1.03 and 1.14-1.37 at 1 Mi, 2.0-3.1 and 1.4-1.9 at 2 Mi, 4.15 and
 * 2.3 at 4 Mi (rmsNorm alike).
 */
export const WASM_NORM_WEIGHT = 1 / 8;

/**
 * Work (input elements plus outputs times window taps, which the one-thread time follows) per
 * element of `planWasmThreads`'s threshold: the vector kernels do about 6 work units a
 * nanosecond, 16 times an elementwise chain's elements. maxPool2d 3x3 stride 2 over
 * [k, 64, 64, 64] float32 on the 2-core test machine, 41 interleaved rounds: the best times cross
 * at k = 4 (2^21.6 work, 0.47 ms on one thread, 0.39 on two), the medians between k = 6 and 12
 * (2^22.2 to 2^23.2); from k = 24 (2^24.2) two threads are 1.6-1.8x faster. So threads from 2^22.
 */
export const WASM_POOL_WORK_PER_ELEMENT = 16;

/**
 * The sort family's work per element against `planWasmThreads`'s threshold (sort, argsort, the
 * Rank-K windows and quantiles: a key pass, up to four radix passes of counting and scattering,
 * a gather), so that rows are shared among threads from 32 Ki elements. On the 2-core test machine
 * (medians of 15, sort of [R, 1024] float32): 16 Ki elements 0.23 ms on one thread and 0.21 on
 * two, 32 Ki 0.44 and 0.33, 128 Ki 1.77 and 1.19, 1 Mi 15.5 and 9.8, 4 Mi 60 and 37.
 */
export const WASM_SORT_WORK_PER_ELEMENT = 8;
