/**
 * The optimizers' fused Adam step as a job (`Backend.adam`): internal to gyre, called by
 * src/autograd/optim.ts, which composes the update from elementwise ops where this returns null.
 * @module
 */
import type { AdamJob } from "../contract/optim.ts";
import { isContiguous } from "../core/shape.ts";
import { backendFor } from "../runtime.ts";
import { type Tensor, tensorFromStorage, viewOf } from "../tensor.ts";

/** Adam's hyperparameters for one step, as the job takes them. */
export type AdamStep = Omit<AdamJob, "op" | "p" | "g" | "m" | "v">;

/**
 * One Adam step of `p` in one kernel: the new parameter, first and second moments, or null where
 * the device has no such kernel or the tensors do not suit it (one shape, contiguous).
 */
export function fusedAdam(
  p: Tensor,
  g: Tensor,
  m: Tensor,
  v: Tensor,
  step: AdamStep,
): [Tensor, Tensor, Tensor] | null {
  const op = "adam";
  const backend = backendFor(p.device, op);
  const tensors = [p, g, m, v];
  if (!backend.adam || tensors.some((t) => t.device !== p.device)) return null;
  const shape = p.shape;
  if (
    tensors.some((t) => t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i]))
  ) {
    return null;
  }
  const [pv, gv, mv, vv] = tensors.map((t) => viewOf(t, op));
  if (![pv, gv, mv, vv].every((x) => isContiguous(x.shape, x.strides))) return null;
  const result = backend.adam({ op, p: pv, g: gv, m: mv, v: vv, ...step });
  if (!result) return null;
  return [result.p, result.m, result.v].map((s) => tensorFromStorage(s, pv.dtype, shape)) as [
    Tensor,
    Tensor,
    Tensor,
  ];
}
