/**
 * The pooling family on WASM: the reference loops of asm/pool.ts over contiguous f32 or i32
 * planes (float16 widened, strided views copied first).
 * @module
 */
import type { DType } from "../core/dtype.ts";
import { isContiguous } from "../core/shape.ts";
import type { PoolJob, PoolResult } from "../contract/pool.ts";
import type { Value, WasmHost, WasmStorage } from "./host.ts";

/** The WASM path: the values and, when asked, the indices. */
export function runPoolWasm(backend: WasmHost, job: PoolJob): PoolResult {
  const { op, problem: p, indices } = job;
  const outputs = p.planes * p.outHeight * p.outWidth;
  const view = job.x;
  const compute: DType = p.dtype === "int32" ? "int32" : "float32";
  // The kernels read contiguous f32 or i32 planes: widen float16, copy strided views.
  let input: Value = { view, temp: false };
  if (outputs > 0 && (view.dtype !== compute || !isContiguous(view.shape, view.strides))) {
    input = backend.cast(op, input, compute, view.shape);
  }
  const values = backend.alloc(op, compute, outputs);
  const index: WasmStorage | null = indices ? backend.alloc(op, "int32", outputs) : null;
  if (outputs > 0) {
    const src = backend.pointer(input.view);
    const sizes = [p.planes, p.inHeight, p.inWidth, p.outHeight, p.outWidth];
    const suffix = compute === "int32" ? "i32" : "f32";
    if (p.op === "max" && p.adaptive) {
      backend.kernel(`pool_adaptive_max_${suffix}`)(values.ptr, index?.ptr ?? 0, src, ...sizes);
    } else if (p.op === "max") {
      backend.kernel(`pool_max_${suffix}`)(
        values.ptr,
        index?.ptr ?? 0,
        src,
        ...sizes,
        ...p.kernel,
        ...p.stride,
        ...p.padding,
        ...p.dilation,
      );
    } else if (p.adaptive) {
      backend.kernel("pool_adaptive_avg_f32")(values.ptr, src, ...sizes);
    } else {
      backend.kernel("pool_avg_f32")(
        values.ptr,
        src,
        ...sizes,
        ...p.kernel,
        ...p.stride,
        ...p.padding,
        p.countIncludePad ? 1 : 0,
        p.divisor,
      );
    }
  }
  backend.release(input);
  let result: WasmStorage = values;
  if (p.dtype !== compute) {
    result = backend.cast(op, backend.toValue(values, p.outShape), p.dtype, p.outShape).view
      .storage as WasmStorage;
  }
  return { values: result, indices: index };
}
