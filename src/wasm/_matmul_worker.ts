/**
 * The body of a worker of the WASM thread pool (src/wasm/threads.ts): it instantiates the threaded
 * kernel module over the WASM device's shared memory and runs the kernel calls the main thread
 * posts (its share of a GEMM's blocks), then counts itself finished in the pool's control words
 * and wakes the main thread, which waits in `Atomics.wait`.
 *
 * The pool starts workers from this function's source text as a `data:` module, so that starting
 * them needs no file-read permission: the function must therefore be self-contained (no imports,
 * no module-level names; node:worker_threads comes in as its argument).
 * @module
 */

/**
 * Runs a pool worker: `threads` is node:worker_threads as the worker sees it; its `workerData`
 * holds the compiled module and the control words' SharedArrayBuffer.
 *
 * @example
 * ```ts
 * import { gemmWorker } from "./_matmul_worker.ts";
 * const source = `import * as t from "node:worker_threads"; (${gemmWorker})(t);`;
 * ```
 */
export function gemmWorker(threads: typeof import("node:worker_threads")): void {
  // Layout of the control words; keep in step with src/wasm/threads.ts.
  const FINISHED = 0;
  const FAILED = 1;
  const MESSAGE_BYTE = 64;
  const MESSAGE_BYTES = 1024;

  /** One task: `calls` holds `width` arguments per call of `kernel`. */
  interface Task {
    kernel: string;
    width: number;
    calls: number[];
    /** The memory to instantiate over, sent when it differs from the last one this worker saw. */
    memory?: WebAssembly.Memory;
  }

  const { module, relaxed, control } = threads.workerData as {
    module: WebAssembly.Module;
    /** The relaxed-SIMD GEMM, whose exports replace the module's (src/wasm/module.ts). */
    relaxed: WebAssembly.Module | null;
    control: SharedArrayBuffer;
  };
  const words = new Int32Array(control);
  let kernels: Record<string, (...args: number[]) => void> | null = null;

  const fail = (error: unknown) => {
    // The first failure's text, for the main thread's error; later ones only count.
    if (Atomics.add(words, FAILED, 1) !== 0) return;
    const text = new TextEncoder().encode(String(error instanceof Error ? error.stack : error));
    const bytes = new Uint8Array(control, MESSAGE_BYTE, MESSAGE_BYTES);
    const n = Math.min(text.length, MESSAGE_BYTES - 4);
    new DataView(control).setInt32(MESSAGE_BYTE - 4, n, true);
    for (let i = 0; i < n; i++) bytes[i] = text[i];
  };

  threads.parentPort!.on("message", (task: Task) => {
    try {
      if (task.memory) {
        const imports = {
          env: {
            memory: task.memory,
            abort: (_message: number, _file: number, line: number, column: number) => {
              throw new Error(`internal: WASM kernel aborted at ${line}:${column}`);
            },
          },
        };
        type Exports = Record<string, (...args: number[]) => void>;
        kernels = { ...new WebAssembly.Instance(module, imports).exports } as Exports;
        if (relaxed) {
          // Keep in step with RELAXED_EXPORTS in src/wasm/module.ts.
          const gemm = new WebAssembly.Instance(relaxed, imports).exports as Exports;
          for (const name of ["gemm_f32", "gemm_i32", "gemm_workspace"]) kernels[name] = gemm[name];
        }
      }
      const kernel = kernels?.[task.kernel];
      if (!kernel) throw new Error(`internal: no WASM kernel ${task.kernel} in the worker`);
      const { calls, width } = task;
      for (let i = 0; i < calls.length; i += width) kernel(...calls.slice(i, i + width));
    } catch (error) {
      fail(error);
    } finally {
      Atomics.add(words, FINISHED, 1);
      Atomics.notify(words, FINISHED);
    }
  });
  threads.parentPort!.postMessage("ready");
}
