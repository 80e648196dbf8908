/**
 * The elementwise family on WASM: an expression evaluated node by node with the precompiled
 * kernels the op table generates (asm/_generated.ts), into new storage or through a target's
 * strides (the scatter kernel).
 * @module
 */
import { isContiguous, sizeOf } from "../core/shape.ts";
import type { Storage } from "../core/view.ts";
import type { ElementwiseJob } from "../contract/elementwise.ts";
import { SUFFIX, type WasmHost } from "./host.ts";

/** Evaluates an elementwise job (see `Backend.evaluate`). */
export function runElementwiseWasm(wasm: WasmHost, job: ElementwiseJob): Storage {
  // No plan on this device: every expression runs node by node, so overrides do not apply.
  const { op, expr, inputs, shape, out: target } = job;
  let v = wasm.evaluateNodes(op, expr, inputs, shape);
  if (target) {
    if (v.view.dtype !== target.dtype) v = wasm.cast(op, v, target.dtype, shape);
    if (sizeOf(shape) > 0) {
      const contiguous = wasm.describeOperands(shape, [v.view, target]);
      wasm.kernel(`scatter_${SUFFIX[target.dtype]}`)(
        wasm.pointer(target),
        wasm.pointer(v.view),
        0,
        contiguous,
      );
    }
    wasm.release(v);
    return target.storage;
  }
  if (!v.temp || !isContiguous(shape, v.view.strides) || v.view.dtype !== expr.dtype) {
    v = wasm.cast(op, v, expr.dtype, shape);
  }
  return v.view.storage;
}
