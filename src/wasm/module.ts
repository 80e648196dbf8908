/**
 * Instantiates the AssemblyScript kernel module (built into `_kernels_bytes.ts` by
 * `deno task build`) over a memory that JS owns, so that the allocator and the kernels share it.
 *
 * Where threads are possible (SharedArrayBuffer, and this thread may block in `Atomics.wait`) the
 * module built for threads (`_kernels_threads_bytes.ts`) is used instead, over a shared memory, so
 * that workers (src/wasm/threads.ts) can run kernels on the same tensors.
 * @module
 */
import { KERNELS_WASM_BASE64 } from "./_kernels_bytes.ts";
import { KERNELS_THREADS_WASM_BASE64 } from "./_kernels_threads_bytes.ts";
import {
  GEMM_RELAXED_THREADS_WASM_BASE64,
  GEMM_RELAXED_WASM_BASE64,
} from "./_gemm_relaxed_bytes.ts";

/** A kernel export: every argument is an i32 (pointers are byte offsets). */
export type Kernel = (...args: number[]) => void;

/** The instantiated module. */
export interface KernelModule {
  memory: WebAssembly.Memory;
  kernels: Record<string, Kernel>;
  /** The memory is shared (the threaded build): workers may instantiate over it. */
  shared: boolean;
  /** The GEMM is the relaxed-SIMD build's (fused multiply-adds). */
  relaxed: boolean;
}

/** Options of {@link instantiateKernels}. */
export interface InstantiateOptions {
  /**
   * Use the threaded build over a shared memory: `undefined` (default) where {@link threadsSupported};
   * `false` never; `true` where supported (a request elsewhere falls back, as the default does).
   */
  threads?: boolean;
}

/**
 * Pages (64 KiB) a shared memory may grow to: its maximum must be declared up front, and 65536
 * (4 GiB, all that wasm32 addresses) instantiates in Deno. Must equal `SHARED_MEMORY_PAGES` in
 * scripts/build.ts, which the threaded build declares.
 */
export const SHARED_MEMORY_PAGES = 65536;

const compiled: { plain: WebAssembly.Module | null; threads: WebAssembly.Module | null } = {
  plain: null,
  threads: null,
};

/**
 * The compiled module (compiled once per build): the threaded build when `threads`. Workers get it
 * through `postMessage`, which shares the compiled code rather than compiling again.
 */
export function compiledKernels(threads: boolean): WebAssembly.Module {
  const key = threads ? "threads" : "plain";
  let module = compiled[key];
  if (!module) {
    const base64 = threads ? KERNELS_THREADS_WASM_BASE64 : KERNELS_WASM_BASE64;
    module = new WebAssembly.Module(Uint8Array.from(atob(base64), (c) => c.charCodeAt(0)));
    compiled[key] = module;
  }
  return module;
}

const relaxedCompiled: {
  plain: WebAssembly.Module | null | undefined;
  threads: WebAssembly.Module | null | undefined;
} = { plain: undefined, threads: undefined };

/**
 * The GEMM built with relaxed SIMD (asm/matmul.ts; its fused multiply-adds are about 17% faster
 * than a product and a sum on the 2-core test machine, 1024^3 on one thread: 53 against 64 ms
 * with another process busy), or null where this engine does not validate relaxed SIMD.
 */
export function compiledRelaxedGemm(threads: boolean): WebAssembly.Module | null {
  const key = threads ? "threads" : "plain";
  let module = relaxedCompiled[key];
  if (module === undefined) {
    const base64 = threads ? GEMM_RELAXED_THREADS_WASM_BASE64 : GEMM_RELAXED_WASM_BASE64;
    const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
    module = WebAssembly.validate(bytes) ? new WebAssembly.Module(bytes) : null;
    relaxedCompiled[key] = module;
  }
  return module;
}

/** The GEMM exports the relaxed build replaces. */
export const RELAXED_EXPORTS: readonly string[] = ["gemm_f32", "gemm_i32", "gemm_workspace"];

/**
 * Instantiates `module` (and the relaxed GEMM over the same memory, when given) and returns the
 * exports, the GEMM's taken from the relaxed instance.
 */
export function instantiateWith(
  module: WebAssembly.Module,
  relaxed: WebAssembly.Module | null,
  memory: WebAssembly.Memory,
): Record<string, Kernel> {
  const imports = kernelImports(memory);
  const kernels = { ...new WebAssembly.Instance(module, imports).exports } as Record<
    string,
    Kernel
  >;
  if (relaxed) {
    const gemm = new WebAssembly.Instance(relaxed, imports).exports as Record<string, Kernel>;
    for (const name of RELAXED_EXPORTS) kernels[name] = gemm[name];
  }
  return kernels;
}

let supported: boolean | null = null;

/**
 * Whether this thread can run the threaded build: SharedArrayBuffer exists, shared WASM memories
 * can be made, and `Atomics.wait` may block here (browsers refuse it on the main thread; Deno
 * allows it), which the synchronous backend needs to wait for its workers.
 *
 * @example
 * ```ts
 * import { threadsSupported } from "./module.ts";
 * console.log(threadsSupported()); // true in Deno
 * ```
 */
export function threadsSupported(): boolean {
  if (supported !== null) return supported;
  supported = false;
  if (typeof SharedArrayBuffer === "function" && typeof Atomics?.wait === "function") {
    try {
      // "not-equal" at once where waiting is allowed; a TypeError where it is not.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 1, 0);
      new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true });
      supported = true;
    } catch {
      // Stays single-threaded.
    }
  }
  return supported;
}

/** The imports of the kernel module over `memory` (workers instantiate with the same). */
export function kernelImports(memory: WebAssembly.Memory): WebAssembly.Imports {
  return {
    env: {
      memory,
      abort: (_message: number, _file: number, line: number, column: number) => {
        throw new Error(`internal: WASM kernel aborted at ${line}:${column}`);
      },
    },
  };
}

/**
 * Compiles (once) and instantiates the kernels; synchronous, so no `await` is needed before use.
 *
 * @example
 * ```ts
 * import { instantiateKernels } from "./module.ts";
 * const { memory, shared } = instantiateKernels({ threads: false });
 * console.log(shared, memory.buffer instanceof ArrayBuffer); // false true
 * ```
 */
export function instantiateKernels(options: InstantiateOptions = {}): KernelModule {
  if (options.threads !== false && threadsSupported()) {
    let memory: WebAssembly.Memory | null = null;
    try {
      memory = new WebAssembly.Memory({ initial: 2, maximum: SHARED_MEMORY_PAGES, shared: true });
    } catch {
      // No room for a 4 GiB reservation (a 32-bit host, a capped address space): unshared.
    }
    if (memory) {
      const relaxed = compiledRelaxedGemm(true);
      const kernels = instantiateWith(compiledKernels(true), relaxed, memory);
      return { memory, kernels, shared: true, relaxed: relaxed !== null };
    }
  }
  const memory = new WebAssembly.Memory({ initial: 2 });
  const relaxed = compiledRelaxedGemm(false);
  const kernels = instantiateWith(compiledKernels(false), relaxed, memory);
  return { memory, kernels, shared: false, relaxed: relaxed !== null };
}
