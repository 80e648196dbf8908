/**
 * The rows family on WASM: rows made contiguous float32 (normalised axes last), then the kernels
 * of asm/rows.ts, shared among threads by ranges of rows for large jobs, then back to the input's
 * axis order and dtype.
 * @module
 */
import type { View } from "../core/view.ts";
import { contiguousStrides, isContiguous, sizeOf } from "../core/shape.ts";
import type { RowsJob, RowsResult } from "../contract/rows.ts";
import { WASM_NORM_WEIGHT, WASM_SOFTMAX_WEIGHT } from "../plans/wasm_threads.ts";
import type { Value, WasmHost, WasmStorage } from "./host.ts";
import { runRowRanges, wasmThreads } from "./threads.ts";

/** The WASM path: rows made contiguous float32 (normalised axes last), then asm/rows.ts. */
export function runRowsWasm(backend: WasmHost, job: RowsJob): RowsResult {
  const { op, x, axes } = job;
  const kept = x.shape.map((_, i) => i).filter((i) => !axes.includes(i));
  const order = [...kept, ...axes];
  const shape = order.map((i) => x.shape[i]);
  const rows = sizeOf(kept.map((i) => x.shape[i]));
  const len = sizeOf(axes.map((i) => x.shape[i]));
  const n = rows * len;
  let value: Value = {
    view: { ...x, shape, strides: order.map((i) => x.strides[i]) },
    temp: false,
  };
  if (x.dtype !== "float32" || !isContiguous(shape, value.view.strides)) {
    value = backend.cast(op, value, "float32", shape);
  }
  const out = backend.alloc(op, "float32", n);
  const stats = job.stats ? backend.alloc(op, "float32", 2 * rows) : null;
  const pointer = (v: View | null) => (v ? backend.pointer(v) : 0);
  if (n > 0) {
    const input = backend.pointer(value.view);
    const softmax = job.kind === "softmax" || job.kind === "logSoftmax";
    const weight = softmax ? WASM_SOFTMAX_WEIGHT : WASM_NORM_WEIGHT;
    const threads = Math.min(wasmThreads(backend, n * weight, job.overrides), rows);
    if (softmax) {
      const log = job.kind === "logSoftmax" ? 1 : 0;
      runRowRanges(backend, "softmax_rows_f32", threads, rows, (begin, end) => [
        out.ptr + begin * len * 4,
        input + begin * len * 4,
        end - begin,
        len,
        log,
      ]);
    } else {
      const fixed = [
        out.ptr,
        input,
        rows,
        len,
        job.eps,
        pointer(job.weight),
        pointer(job.bias),
        job.indexed?.period ?? 1,
        job.indexed?.scale ?? 0,
        job.indexed?.divisor ?? 1,
        stats ? stats.ptr : 0,
        job.kind === "layerNorm" ? 1 : 0,
      ];
      runRowRanges(backend, "layer_norm_rows_f32", threads, rows, (begin, end) => [
        ...fixed,
        begin,
        end,
      ]);
    }
  }
  backend.release(value);
  // Back to x's axis order and dtype.
  const permuted = contiguousStrides(shape);
  const strides = new Array<number>(x.shape.length);
  order.forEach((axis, k) => (strides[axis] = permuted[k]));
  if (x.dtype === "float32" && isContiguous(x.shape, strides)) return { output: out, stats };
  const logical: Value = {
    view: { storage: out, dtype: "float32", shape: x.shape, strides, offset: 0 },
    temp: true,
  };
  return {
    output: backend.cast(op, logical, x.dtype, x.shape).view.storage as WasmStorage,
    stats,
  };
}
