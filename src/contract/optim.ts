/**
 * The optimizers' fused update (src/autograd/optim.ts): one Adam or AdamW step of a parameter in
 * one kernel that reads the parameter, its gradient and both moments once and writes the three
 * new tensors, the fewest bytes the update can move. A device routine: where a device has none,
 * the optimizer composes the update from elementwise ops (the reference it is tested against).
 * @module
 */
import type { Storage, View } from "../core/view.ts";

/** One parameter's Adam step (PyTorch's arrangement of the update). */
export interface AdamJob {
  op: string;
  /** Parameter, gradient, first and second moments: contiguous, one shape and float dtype. */
  p: View;
  g: View;
  m: View;
  v: View;
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  /** L2 weight decay added to the gradient (Adam), or 0. */
  l2: number;
  /** Decoupled decay: the parameter is first multiplied by this (AdamW: 1 - lr wd), else 1. */
  decay: number;
  /** Step t (from 1): the bias corrections 1 - beta^t. */
  step: number;
  maximize: boolean;
}

/** The new parameter and moments. */
export interface AdamResult {
  p: Storage;
  m: Storage;
  v: Storage;
}
