/**
 * The one-pass backward of a row op (softmax, logSoftmax, layerNorm, rmsNorm over the last axis):
 * the job `Backend.rowsBackward` runs where a device has the routine. Internal to gyre: the
 * gradient rules (src/autograd/rows.ts) call it, and compose the backward from other ops where it
 * returns null.
 * @module
 */
import type { RowKind } from "../contract/rows.ts";
import { isContiguous, sizeOf } from "../core/shape.ts";
import { backendFor } from "../runtime.ts";
import { type Tensor, tensorFromStorage, viewOf } from "../tensor.ts";

/**
 * The backward of `kind` from `a` (softmax's and logSoftmax's output, the norms' input) and the
 * cotangent `g` (same shape), in one kernel, or null where the device has no such kernel or the
 * rows do not suit it.
 */
export function fusedRowBackward(
  kind: RowKind,
  a: Tensor,
  g: Tensor,
  weight: Tensor | null,
  eps: number,
): Tensor | null {
  const op = `${kind}.backward`;
  const backend = backendFor(a.device, op);
  if (!backend.rowsBackward || g.device !== a.device || a.rank === 0) return null;
  const shape = a.shape;
  if (g.shape.length !== shape.length || g.shape.some((d, i) => d !== shape[i])) return null;
  const av = viewOf(a, op, "a"), gv = viewOf(g, op, "g");
  const wv = weight ? viewOf(weight, op, "weight") : null;
  const len = shape[shape.length - 1];
  if (![av, gv].every((v) => isContiguous(v.shape, v.strides))) return null;
  if (wv && (wv.shape.length !== 1 || wv.shape[0] !== len || wv.strides[0] !== 1)) return null;
  const storage = backend.rowsBackward({
    op,
    kind,
    a: av,
    g: gv,
    weight: wv,
    rows: sizeOf(shape) / len,
    len,
    eps,
  });
  return storage ? tensorFromStorage(storage, av.dtype, shape) : null;
}
