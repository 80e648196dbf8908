/**
 * The scan family on WASM: the input is first copied with the scan axis last and contiguous,
 * scanned row by row (asm/scan.ts) and copied back into the input's axis order.
 * @module
 */
import type { DType } from "../core/dtype.ts";

import { axisLast, fromAxisOrder, isContiguous, sizeOf } from "../core/shape.ts";
import type { ScanJob, ScanResult } from "../contract/scan.ts";
import type { ScanType } from "../ir/scan.ts";
import type { Value, WasmHost } from "./host.ts";
import { runRowRanges, runShares, wasmThreads } from "./threads.ts";

/** The WASM path: every scan job, empty ones included (no kernel runs for those). */
export function runScanWasm(wasm: WasmHost, job: ScanJob): ScanResult {
  const { op, x, outDtype } = job;
  const output = sizeOf(x.shape) === 0 ? wasm.alloc(op, outDtype, 0) : wasmScan(wasm, job);
  return { output };
}

const SUFFIX: Record<ScanType, string> = { f32: "f32", i32: "i32", u32: "u32", bool: "bool" };
const COMPUTE: Record<ScanType, DType> = {
  f32: "float32",
  i32: "int32",
  u32: "uint32",
  bool: "bool",
};

function wasmScan(wasm: WasmHost, job: ScanJob) {
  const { op, scan: scanOp, type, x: view, axis, exclusive, reverse, outDtype } = job;
  const rank = view.shape.length;
  const { order, shape, strides } = axisLast(view.shape, view.strides, axis);
  const rowLength = view.shape[axis];
  const rows = sizeOf(shape) / rowLength;
  const compute = COMPUTE[type];
  // Rows contiguous with the scan axis last, in the compute dtype (float16 widened to float32).
  let value: Value = { view: { ...view, shape, strides }, temp: false };
  if (view.dtype !== compute || !isContiguous(shape, value.view.strides)) {
    value = wasm.cast(op, value, compute, shape);
  }
  const out = wasm.alloc(op, compute, sizeOf(shape));
  const name = `scan_${scanOp}_${SUFFIX[type]}`;
  const flags = (exclusive ? 1 : 0) | (reverse ? 2 : 0);
  const x = wasm.pointer(value.view);
  const threads = wasmThreads(wasm, rows * rowLength, job.overrides);
  if (threads > 1 && rows < threads && name === "scan_sum_f32") {
    splitSumRows(wasm, op, out.ptr, x, rows, rowLength, flags, threads);
  } else {
    // Each thread scans a range of whole rows.
    runRowRanges(wasm, name, Math.min(threads, rows), rows, (begin, end) => {
      const at = 4 * begin * rowLength;
      return [out.ptr + at, x + at, end - begin, rowLength, flags];
    });
  }
  wasm.release(value);
  if (axis === rank - 1 && compute === outDtype) return out;
  // Back to the input's axis order (and to float16), as one contiguous copy.
  const back: Value = {
    view: { storage: out, dtype: compute, ...fromAxisOrder(order, shape), offset: 0 },
    temp: true,
  };
  return wasm.cast(op, back, outDtype, view.shape).view.storage;
}

/**
 * Float32 sum scans of rows fewer than the threads (a long 1-D cumsum): each row is cut into one
 * piece per thread; the threads first sum their pieces (f64), then scan them from the sum of the
 * pieces before each in scan order (asm/scan.ts `scan_sum_piece_f32`), which is the one-thread
 * kernel's running sum up to the rounding of those starts.
 */
function splitSumRows(
  wasm: WasmHost,
  op: string,
  out: number,
  x: number,
  rows: number,
  rowLength: number,
  flags: number,
  threads: number,
): void {
  const memory = wasm.allocator.memory;
  const reverse = (flags & 2) !== 0;
  const slots = wasm.alloc(op, "float32", 2 * rows * threads);
  try {
    // Piece t of row r: [bounds(t), bounds(t + 1)) in memory order.
    const bounds = (t: number) => Math.floor((rowLength * t) / threads);
    const sums: number[][] = Array.from({ length: threads }, () => []);
    for (let r = 0; r < rows; r++) {
      for (let t = 0; t < threads; t++) {
        sums[t].push(
          slots.ptr + 8 * (r * threads + t),
          x + 4 * (r * rowLength + bounds(t)),
          bounds(t + 1) - bounds(t),
        );
      }
    }
    const partial = "reduce_sum_partial_f32";
    runShares(memory, partial, wasm.kernel(partial), 3, sums);
    const view = new DataView(memory.buffer);
    const scans: number[][] = Array.from({ length: threads }, () => []);
    for (let r = 0; r < rows; r++) {
      // In scan order the pieces come last to first when reversed.
      const order = Array.from({ length: threads }, (_, i) => (reverse ? threads - 1 - i : i));
      let start = -0;
      order.forEach((t, i) => {
        const at = 4 * (r * rowLength + bounds(t));
        scans[t].push(out + at, x + at, bounds(t + 1) - bounds(t), flags | (i > 0 ? 4 : 0), start);
        start += view.getFloat64(slots.ptr + 8 * (r * threads + t), true);
      });
    }
    const piece = "scan_sum_piece_f32";
    runShares(memory, piece, wasm.kernel(piece), 5, scans);
  } finally {
    wasm.free(slots);
  }
}
