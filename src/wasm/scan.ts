/**
 * The scan family on WASM: the input is first copied with the scan axis last and contiguous,
 * scanned row by row (asm/scan.ts) and copied back into the input's axis order.
 * @module
 */
import type { DType } from "../core/dtype.ts";

import { contiguousStrides, isContiguous, sizeOf } from "../core/shape.ts";
import type { ScanJob, ScanResult } from "../contract/scan.ts";
import type { ScanType } from "../ir/scan.ts";
import type { Value, WasmHost } from "./host.ts";

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
  const order = [...view.shape.keys()].filter((i) => i !== axis);
  order.push(axis);
  const shape = order.map((i) => view.shape[i]);
  const rowLength = view.shape[axis];
  const rows = sizeOf(shape) / rowLength;
  const compute = COMPUTE[type];
  // Rows contiguous with the scan axis last, in the compute dtype (float16 widened to float32).
  let value: Value = {
    view: { ...view, shape, strides: order.map((i) => view.strides[i]) },
    temp: false,
  };
  if (view.dtype !== compute || !isContiguous(shape, value.view.strides)) {
    value = wasm.cast(op, value, compute, shape);
  }
  const out = wasm.alloc(op, compute, sizeOf(shape));
  wasm.kernel(`scan_${scanOp}_${SUFFIX[type]}`)(
    out.ptr,
    wasm.pointer(value.view),
    rows,
    rowLength,
    (exclusive ? 1 : 0) | (reverse ? 2 : 0),
  );
  wasm.release(value);
  if (axis === rank - 1 && compute === outDtype) return out;
  // Back to the input's axis order (and to float16), as one contiguous copy.
  const scanned = contiguousStrides(shape);
  const strides = view.shape.map((_, i) => scanned[order.indexOf(i)]);
  const back: Value = {
    view: { storage: out, dtype: compute, shape: view.shape, strides, offset: 0 },
    temp: true,
  };
  return wasm.cast(op, back, outDtype, view.shape).view.storage;
}
