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
    wasm.kernel(`reduce_${reduction}_${SUFFIX[compute]}`)(
      out.ptr,
      wasm.pointer(value.view),
      rows,
      rowLength,
    );
  }
  wasm.release(value);
  if (outDtype === written) return out;
  const outShape = [rows];
  return wasm.cast(op, wasm.toValue(out, outShape), outDtype, outShape).view.storage;
}
