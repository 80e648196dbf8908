/**
 * The reduce family on WASM: rows made contiguous (reduced axes last, float16 widened), then the
 * reduction kernels of asm/_generated.ts; a fused prologue is computed first.
 * @module
 */
import type { DType } from "../core/dtype.ts";
import { contiguousStrides, isContiguous, sizeOf } from "../core/shape.ts";
import type { Storage, View } from "../core/view.ts";
import type { ReduceJob } from "../contract/reduce.ts";
import { COMPUTE, SUFFIX, type Value, type WasmHost, type WasmStorage } from "./host.ts";
import { runRowRanges, runShares, wasmThreads } from "./threads.ts";

/** Runs a reduction job (see `Backend.reduce`); null for a fused epilogue. */
export function runReduceWasm(wasm: WasmHost, job: ReduceJob): Storage | null {
  // No fused epilogues on this device: the caller runs them apart.
  if (job.epilogue) return null;
  const { op, reduction, input: source, axes, outDtype } = job;
  if ("expr" in source) {
    // No fusion on this device: compute the prologue, then reduce it.
    const shape = source.inputs[0]?.shape ?? [];
    const temp = wasm.evaluate({
      op,
      expr: source.expr,
      inputs: source.inputs,
      shape,
      overrides: job.overrides,
    }) as WasmStorage;
    const view: View = {
      storage: temp,
      dtype: source.dtype,
      shape,
      strides: contiguousStrides(shape),
      offset: 0,
    };
    try {
      return runReduceWasm(wasm, { ...job, input: view });
    } finally {
      wasm.free(temp);
    }
  }
  const input = source;
  const kept = input.shape.map((_, i) => i).filter((i) => !axes.includes(i));
  const order = [...kept, ...axes];
  const shape = order.map((i) => input.shape[i]);
  const rows = sizeOf(kept.map((i) => input.shape[i]));
  const rowLength = sizeOf(axes.map((i) => input.shape[i]));
  // Rows must be contiguous in memory, reduced axes last; widen float16 on the way.
  const permuted: View = { ...input, shape, strides: order.map((i) => input.strides[i]) };
  const compute = COMPUTE[input.dtype];
  let value: Value = { view: permuted, temp: false };
  if (compute !== input.dtype || !isContiguous(shape, permuted.strides)) {
    value = wasm.cast(op, value, compute, shape);
  }
  // Arg reductions write int32 indices; the others write the compute dtype.
  const written: DType = reduction === "argmax" || reduction === "argmin" ? "int32" : compute;
  const out = wasm.alloc(op, written, rows);
  if (rows > 0) {
    const threads = wasmThreads(wasm, rows * rowLength, job.overrides);
    const x = wasm.pointer(value.view);
    const key = `${reduction}_${SUFFIX[compute]}`;
    if (threads > 1 && rows < threads && COMBINE[key]) {
      splitRows(wasm, op, key, out, x, rows, rowLength, threads);
    } else {
      // Each thread reduces a range of whole rows.
      runRowRanges(wasm, `reduce_${key}`, Math.min(threads, rows), rows, (begin, end) => [
        out.ptr + 4 * begin,
        x + 4 * begin * rowLength,
        end - begin,
        rowLength,
      ]);
    }
  }
  wasm.release(value);
  if (outDtype === written) return out;
  const outShape = [rows];
  return wasm.cast(op, wasm.toValue(out, outShape), outDtype, outShape).view.storage;
}

/**
 * How the partial results of pieces of one row combine, for the reductions with `*_partial_*`
 * kernels (asm/_generated.ts): float32 sums come as f64 partials, added in order and rounded once,
 * as the one-thread kernel rounds its f64 total; maxima and minima take NaN from any piece.
 */
const COMBINE: Record<string, (parts: number[]) => number> = {
  sum_f32: (p) => Math.fround(p.reduce((a, b) => a + b, 0)),
  sum_i32: (p) => p.reduce((a, b) => (a + b) | 0, 0),
  sum_u32: (p) => p.reduce((a, b) => (a + b) >>> 0, 0),
  max_f32: (p) => (p.some(Number.isNaN) ? NaN : Math.max(...p)),
  min_f32: (p) => (p.some(Number.isNaN) ? NaN : Math.min(...p)),
  max_i32: (p) => Math.max(...p),
  min_i32: (p) => Math.min(...p),
  max_u32: (p) => Math.max(...p),
  min_u32: (p) => Math.min(...p),
};

/**
 * Reduces rows fewer than the threads (a whole-array sum) by splitting each row into one piece
 * per thread, each reduced into an 8-byte slot, then combined here.
 */
function splitRows(
  wasm: WasmHost,
  op: string,
  key: string,
  out: WasmStorage,
  x: number,
  rows: number,
  rowLength: number,
  threads: number,
): void {
  const [reduction, ct] = key.split("_");
  const name = `reduce_${reduction}_partial_${ct}`;
  const slots = wasm.alloc(op, "float32", 2 * rows * threads);
  try {
    const shares: number[][] = Array.from({ length: threads }, () => []);
    for (let r = 0; r < rows; r++) {
      for (let t = 0; t < threads; t++) {
        const first = Math.floor((rowLength * t) / threads);
        const end = Math.floor((rowLength * (t + 1)) / threads);
        shares[t].push(
          slots.ptr + 8 * (r * threads + t),
          x + 4 * (r * rowLength + first),
          end - first,
        );
      }
    }
    runShares(wasm.allocator.memory, name, wasm.kernel(name), 3, shares);
    const buffer = wasm.allocator.memory.buffer;
    const view = new DataView(buffer);
    const results = ct === "f32"
      ? new Float32Array(buffer, out.ptr, rows)
      : ct === "i32"
      ? new Int32Array(buffer, out.ptr, rows)
      : new Uint32Array(buffer, out.ptr, rows);
    for (let r = 0; r < rows; r++) {
      const parts = Array.from({ length: threads }, (_, t) => {
        const at = slots.ptr + 8 * (r * threads + t);
        if (key === "sum_f32") return view.getFloat64(at, true);
        if (ct === "f32") return view.getFloat32(at, true);
        return ct === "i32" ? view.getInt32(at, true) : view.getUint32(at, true);
      });
      results[r] = COMBINE[key](parts);
    }
  } finally {
    wasm.free(slots);
  }
}
