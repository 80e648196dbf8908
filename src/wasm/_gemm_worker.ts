/**
 * A worker of the WASM thread pool (src/wasm/threads.ts): it instantiates the threaded kernel
 * module over the WASM device's shared memory and runs the kernel calls the main thread posts
 * (its share of a GEMM's blocks), then counts itself finished in the pool's control words and
 * wakes the main thread, which waits in `Atomics.wait`.
 *
 * No imports but node:worker_threads, so that starting it compiles and type-checks little.
 * @module
 */
import { parentPort, workerData } from "node:worker_threads";

/** What the pool passes at start: the compiled module and the control words. */
interface Start {
  module: WebAssembly.Module;
  control: SharedArrayBuffer;
}

/** One task: `calls` holds `width` arguments per call of `kernel`. */
interface Task {
  kernel: string;
  width: number;
  calls: number[];
  /** The memory to instantiate over, sent when it differs from the last one this worker saw. */
  memory?: WebAssembly.Memory;
}

// Layout of the control words; keep in step with src/wasm/threads.ts.
const FINISHED = 0;
const FAILED = 1;
const MESSAGE_BYTE = 64;
const MESSAGE_BYTES = 1024;

const { module, control } = workerData as Start;
const words = new Int32Array(control);
let kernels: Record<string, (...args: number[]) => void> | null = null;

function fail(error: unknown): void {
  // The first failure's text, for the main thread's error; later ones only count.
  if (Atomics.add(words, FAILED, 1) !== 0) return;
  const text = new TextEncoder().encode(String(error instanceof Error ? error.stack : error));
  const bytes = new Uint8Array(control, MESSAGE_BYTE, MESSAGE_BYTES);
  const n = Math.min(text.length, MESSAGE_BYTES - 4);
  new DataView(control).setInt32(MESSAGE_BYTE - 4, n, true);
  for (let i = 0; i < n; i++) bytes[i] = text[i];
}

parentPort!.on("message", (task: Task) => {
  try {
    if (task.memory) {
      const instance = new WebAssembly.Instance(module, {
        env: {
          memory: task.memory,
          abort: (_message: number, _file: number, line: number, column: number) => {
            throw new Error(`internal: WASM kernel aborted at ${line}:${column}`);
          },
        },
      });
      kernels = instance.exports as unknown as Record<string, (...args: number[]) => void>;
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
parentPort!.postMessage("ready");
