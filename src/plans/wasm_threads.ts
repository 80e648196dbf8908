/**
 * How many threads share a job of the WASM device that is not a GEMM (elementwise tile programs,
 * reductions): one rule for all of them, so that the threshold is measured once.
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
