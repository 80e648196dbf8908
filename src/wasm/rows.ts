/**
 * The rows family on WASM: rows made contiguous float32 (normalised axes last), then the kernels
 * of asm/rows.ts, shared among threads by ranges of rows for large jobs, then back to the input's
 * axis order and dtype.
 * @module
 */
import type { View } from "../core/view.ts";
import { contiguousStrides, isContiguous, sizeOf } from "../core/shape.ts";
import type { RowsJob, RowsResult } from "../contract/rows.ts";
import type { Value, WasmHost, WasmStorage } from "./host.ts";
import { runRowRanges, wasmThreads } from "./threads.ts";

/**
 * A softmax or logSoftmax element counts as 2 elements of `planWasmThreads`'s threshold (2^18),
 * so these are shared among threads from 128 Ki elements, where one thread takes about 0.3 ms,
 * twice what handing a share to a worker costs. On the 2-core test machine (medians of 9-41
 * through the op, other agents busy at times), [R, 1024] softmax took 0.19-0.27 ms on one thread
 * and 0.18-0.26 on two at 64 Ki elements, 0.43 and 0.31-0.39 at 128 Ki, 0.8-0.9 and 0.5-0.66 at
 * 256 Ki, 3.6 and 2.0 at 1 Mi, and 10.0-10.3 and 5.5-5.75 at 4 Mi.
 */
const SOFTMAX_WEIGHT = 2;

/**
 * The same for layerNorm, rmsNorm, groupNorm and batchNorm, an eighth (threads from 2 Mi
 * elements): about 1.2 ns an element (f64 passes, no exp), and they stream more memory; they
 * gained nothing measurable below 2 Mi: [R, 1024] layerNorm took 0.5-0.8 ms on one thread and
 * 0.56-0.64 on two at 512 Ki, 1.03 and 1.14-1.37 at 1 Mi, 2.0-3.1 and 1.4-1.9 at 2 Mi, 4.15 and
 * 2.3 at 4 Mi (rmsNorm alike).
 */
const NORM_WEIGHT = 1 / 8;

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
    const weight = softmax ? SOFTMAX_WEIGHT : NORM_WEIGHT;
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
