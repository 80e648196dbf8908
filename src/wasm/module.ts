/**
 * Instantiates the AssemblyScript kernel module (built into `_kernels_bytes.ts` by
 * `deno task build`) over a memory that JS owns, so that the allocator and the kernels share it.
 * @module
 */
import { KERNELS_WASM_BASE64 } from "./_kernels_bytes.ts";

/** A kernel export: every argument is an i32 (pointers are byte offsets). */
export type Kernel = (...args: number[]) => void;

/** The instantiated module. */
export interface KernelModule {
  memory: WebAssembly.Memory;
  kernels: Record<string, Kernel>;
}

let cachedModule: WebAssembly.Module | null = null;

/** Compiles (once) and instantiates the kernels; synchronous, so no `await` is needed before use. */
export function instantiateKernels(): KernelModule {
  if (!cachedModule) {
    const bytes = Uint8Array.from(atob(KERNELS_WASM_BASE64), (c) => c.charCodeAt(0));
    cachedModule = new WebAssembly.Module(bytes);
  }
  const memory = new WebAssembly.Memory({ initial: 2 });
  const instance = new WebAssembly.Instance(cachedModule, {
    env: {
      memory,
      abort: (_message: number, _file: number, line: number, column: number) => {
        throw new Error(`internal: WASM kernel aborted at ${line}:${column}`);
      },
    },
  });
  return { memory, kernels: instance.exports as unknown as Record<string, Kernel> };
}
