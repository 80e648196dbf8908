/**
 * Dispatches the tiled transposing copy (src/gpu/_codegen_transpose.ts): matrices read through
 * strides land contiguous and transposed in another buffer. Matmul copies A into [K, M] order
 * with it (`MatmulChoice.transposeAFirst`).
 * @module
 */
import type { GpuBackend } from "../gpu/backend.ts";
import {
  generateTranspose,
  TRANSPOSE_THREADS,
  transposeGroups,
  transposeKey,
  type TransposeSpec,
  type TransposeUniforms,
  transposeUniforms,
} from "../gpu/_codegen_transpose.ts";

/**
 * Records the copy of `copy`'s matrices from `source` into `target` (at least
 * `batches * rows * columns` elements) as kernel `op`.
 *
 * @example
 * ```ts ignore
 * transposeCopy(gpu, "matmul", { dtype: "float32", paired: false, tileRows: 32, tileColumns: 32 },
 *   a.buffer, out.buffer, { rows: 4, columns: 3, batches: 1, offset: 0, rowStride: 3,
 *   columnStride: 1, batchStride: 0 });
 * ```
 */
export function transposeCopy(
  backend: GpuBackend,
  op: string,
  spec: TransposeSpec,
  source: GPUBuffer,
  target: GPUBuffer,
  copy: TransposeUniforms,
): void {
  const pipeline = backend._pipeline(transposeKey(spec), 2, () => generateTranspose(spec));
  backend._dispatch(
    op,
    pipeline,
    [source, target],
    transposeUniforms(spec, copy),
    backend._grid(transposeGroups(spec, copy) * TRANSPOSE_THREADS, TRANSPOSE_THREADS),
  );
}
