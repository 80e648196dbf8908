/**
 * The WASM device's thread pool: one worker (src/wasm/_matmul_worker.ts) per extra CPU core, each
 * running the threaded kernel module over the device's shared memory. The backend API is
 * synchronous, so a caller posts each worker its share of kernel calls, runs its own share, and
 * blocks in `Atomics.wait` until the workers have counted themselves finished.
 *
 * The pool is process-wide and starts lazily (`startWasmThreads`, which the GEMM calls on its
 * first large product): starting is asynchronous, and work is only given to workers that have
 * reported ready, so the call that starts the pool runs on one thread. Workers are `unref`ed
 * once ready so they never keep the process alive; `stopWasmThreads` terminates them.
 *
 * Workers come from node:worker_threads rather than the Web `Worker`: Deno's Web workers keep
 * the process alive and offer no public `unref`. Their code is the source of `gemmWorker`
 * (src/wasm/_matmul_worker.ts) as a `data:` module, which needs no file-read permission. Where
 * SharedArrayBuffer with a blocking `Atomics.wait`, or node:worker_threads, is unavailable,
 * everything runs on the calling thread.
 * @module
 */
import type { Worker as NodeWorker } from "node:worker_threads";
import { gemmWorker } from "./_matmul_worker.ts";
import { compiledKernels, compiledRelaxedGemm, type Kernel, threadsSupported } from "./module.ts";
import type { PlanOverrides } from "../plans/overrides.ts";
import { planWasmThreads } from "../plans/wasm_threads.ts";

// Layout of the control words; keep in step with src/wasm/_matmul_worker.ts.
const FINISHED = 0;
const FAILED = 1;
const MESSAGE_BYTE = 64;
const MESSAGE_BYTES = 1024;

/** At most this many workers whatever the core count: each holds an isolate and a workspace. */
const MAX_WORKERS = 15;

interface PoolWorker {
  worker: NodeWorker;
  /** The memory this worker's instance runs over (it is sent again when it changes). */
  memory: WebAssembly.Memory | null;
}

/** Workers that reported ready. */
const workers: PoolWorker[] = [];
let starting: Promise<number> | null = null;
/** Counts stops, so that a start overtaken by a stop drops the workers it made. */
let generation = 0;
/** Set when workers cannot be made here (no node:worker_threads, a worker failed to load). */
let unavailable = !threadsSupported();
/** Tasks posted to workers since the process started (tests check that work was shared). */
let tasksPosted = 0;
const control = typeof SharedArrayBuffer === "function"
  ? new SharedArrayBuffer(MESSAGE_BYTE + MESSAGE_BYTES)
  : null;

/**
 * Threads the WASM device could use here once the pool has started: the calling thread plus one
 * worker per other logical CPU (`navigator.hardwareConcurrency`), or 1 where threads are
 * unavailable.
 *
 * @example
 * ```ts
 * import { wasmThreadCapacity } from "@gyre/gyre";
 * console.log(wasmThreadCapacity()); // 2 on a 2-core machine with Deno
 * ```
 */
export function wasmThreadCapacity(): number {
  if (unavailable) return 1;
  const cores = typeof navigator === "object" ? navigator.hardwareConcurrency ?? 1 : 1;
  return 1 + Math.max(0, Math.min(MAX_WORKERS, cores - 1));
}

/**
 * Threads the WASM device can use now: the calling thread plus the workers that are ready.
 *
 * @example
 * ```ts
 * import { startWasmThreads, wasmThreadCount } from "@gyre/gyre";
 * await startWasmThreads();
 * console.log(wasmThreadCount()); // 2 on a 2-core machine with Deno
 * ```
 */
export function wasmThreadCount(): number {
  return 1 + workers.length;
}

/**
 * Starts the worker pool (once; later calls return the same promise until {@link stopWasmThreads})
 * and resolves with the threads ready. The WASM GEMM starts it by itself on its first large
 * product; call this first to have that product threaded too (benchmarks, tests). Never rejects:
 * where workers cannot start, the pool stays at one thread.
 *
 * @example
 * ```ts
 * import { startWasmThreads } from "@gyre/gyre";
 * console.log(await startWasmThreads()); // 2 on a 2-core machine with Deno
 * ```
 */
export function startWasmThreads(): Promise<number> {
  if (!starting) starting = spawn(wasmThreadCapacity() - 1);
  return starting;
}

async function spawn(count: number): Promise<number> {
  if (count <= 0 || unavailable) return wasmThreadCount();
  const started = generation;
  let NodeWorkerClass: typeof NodeWorker;
  try {
    NodeWorkerClass = (await import("node:worker_threads")).Worker;
  } catch {
    unavailable = true;
    return wasmThreadCount();
  }
  const module = compiledKernels(true);
  const source = `import * as threads from "node:worker_threads";\n(${gemmWorker})(threads);\n`;
  const url = new URL(`data:text/javascript,${encodeURIComponent(source)}`);
  const made = await Promise.all(
    Array.from({ length: count }, () =>
      new Promise<NodeWorker | null>((resolve) => {
        let worker: NodeWorker;
        try {
          worker = new NodeWorkerClass(url, {
            workerData: { module, relaxed: compiledRelaxedGemm(true), control },
          });
        } catch {
          resolve(null);
          return;
        }
        // Held (ref'd) until ready, so that awaiting the start keeps the process alive.
        worker.once("message", () => resolve(worker));
        worker.once("error", () => {
          worker.terminate();
          resolve(null);
        });
      })),
  );
  // A stop during the start: the new workers were not wanted.
  if (generation !== started) {
    await Promise.all(made.map((w) => w?.terminate()));
    return wasmThreadCount();
  }
  for (const worker of made) {
    if (!worker) continue;
    const entry: PoolWorker = { worker, memory: null };
    // A worker that dies (it should not: it catches its tasks' errors) leaves the pool.
    worker.once("exit", () => {
      const at = workers.indexOf(entry);
      if (at >= 0) workers.splice(at, 1);
    });
    worker.unref();
    workers.push(entry);
  }
  stopOnExit();
  if (workers.length === 0) unavailable = true;
  return wasmThreadCount();
}

/**
 * Terminates the pool's workers (the WASM device then runs on the calling thread until the pool
 * starts again). Workers never keep the process alive, so this is only needed to free their
 * memory early or to test a clean shutdown.
 *
 * @example
 * ```ts
 * import { startWasmThreads, stopWasmThreads, wasmThreadCount } from "@gyre/gyre";
 * await startWasmThreads();
 * await stopWasmThreads();
 * console.log(wasmThreadCount()); // 1
 * ```
 */
export async function stopWasmThreads(): Promise<void> {
  const pending = starting;
  starting = null;
  generation++;
  await pending;
  const stopping = workers.splice(0);
  await Promise.all(stopping.map((w) => w.worker.terminate()));
}

let stopOnExitRegistered = false;

/**
 * Terminates the workers when the process unloads, so that no worker is mid-task as the process
 * exits. (The abort at exit once blamed on them was libEGL's; see bench/README.md, "An abort at
 * exit on lavapipe".)
 */
function stopOnExit(): void {
  if (stopOnExitRegistered || typeof globalThis.addEventListener !== "function") return;
  stopOnExitRegistered = true;
  globalThis.addEventListener("unload", () => {
    for (const { worker } of workers.splice(0)) worker.terminate();
  });
}

/** Tasks posted to workers so far (for tests: a count that grows shows that work was shared). */
export function postedTasks(): number {
  return tasksPosted;
}

/**
 * Runs `shares[t]` on thread t (0: the calling thread, through `kernel`; t > 0: worker t - 1
 * instantiated over `memory`): each share is a flat list of calls of `width` arguments to the
 * kernel export `name`. Returns when every thread has finished; rethrows a worker's failure.
 * `shares.length` must not exceed {@link wasmThreadCount}; empty shares post nothing.
 */
export function runShares(
  memory: WebAssembly.Memory,
  name: string,
  kernel: Kernel,
  width: number,
  shares: readonly number[][],
): void {
  if (shares.length - 1 > workers.length || !control) {
    throw new Error(`internal: ${shares.length} shares for ${wasmThreadCount()} threads`);
  }
  const words = new Int32Array(control);
  Atomics.store(words, FINISHED, 0);
  Atomics.store(words, FAILED, 0);
  let posted = 0;
  for (let t = 1; t < shares.length; t++) {
    if (shares[t].length === 0) continue;
    const w = workers[t - 1];
    const task: { kernel: string; width: number; calls: number[]; memory?: WebAssembly.Memory } = {
      kernel: name,
      width,
      calls: shares[t],
    };
    if (w.memory !== memory) task.memory = w.memory = memory;
    w.worker.postMessage(task);
    posted++;
    tasksPosted++;
  }
  try {
    const own = shares[0];
    for (let i = 0; i < own.length; i += width) kernel(...own.slice(i, i + width));
  } finally {
    // Workers write into memory that the caller may free once this returns: always wait.
    let done: number;
    while ((done = Atomics.load(words, FINISHED)) < posted) Atomics.wait(words, FINISHED, done);
  }
  if (Atomics.load(words, FAILED) > 0) {
    const n = new DataView(control).getInt32(MESSAGE_BYTE - 4, true);
    const text = new TextDecoder().decode(new Uint8Array(control, MESSAGE_BYTE, n).slice());
    throw new Error(`internal: a WASM worker failed: ${text}`);
  }
}

/**
 * The threads a job of `elements` elements runs on now (`planWasmThreads` with the job's
 * override, limited to the threads ready): 1 unless the memory is shared. A job that asks for
 * more starts the pool, so later ones get them.
 */
export function wasmThreads(
  backend: { shared: boolean },
  elements: number,
  overrides: Readonly<PlanOverrides>,
): number {
  if (!backend.shared) return 1;
  const { threads } = planWasmThreads(
    { elements, cores: wasmThreadCapacity() },
    overrides.wasmThreads,
  );
  if (threads <= 1) return 1;
  void startWasmThreads();
  return Math.max(1, Math.min(threads, wasmThreadCount()));
}

/**
 * Runs kernel `name` of `backend` over rows [0, rows) split evenly among `threads` threads (one
 * call each; on this thread alone when `threads` is 1): `args(begin, end)` gives a call's
 * arguments for rows [begin, end).
 */
export function runRowRanges(
  backend: { kernel(name: string): Kernel; allocator: { memory: WebAssembly.Memory } },
  name: string,
  threads: number,
  rows: number,
  args: (begin: number, end: number) => number[],
): void {
  const kernel = backend.kernel(name);
  if (threads <= 1) {
    kernel(...args(0, rows));
    return;
  }
  const shares: number[][] = [];
  for (let t = 0; t < threads; t++) {
    shares.push(args(Math.floor((t * rows) / threads), Math.floor(((t + 1) * rows) / threads)));
  }
  runShares(backend.allocator.memory, name, kernel, shares[0].length, shares);
}
