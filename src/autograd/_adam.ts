/**
 * Adam's update, shared by `adam` and `adamw` (src/autograd/optim.ts): the fused kernel where the
 * device has one (src/ops/_optim.ts), else composed of elementwise ops (`composedAdam`, also the
 * fused kernel's reference in tests/property_optim_test.ts).
 * @module
 */
import { checkNumber, describe, ValueError } from "../core/errors.ts";
import { checkOptions } from "../core/options.ts";
import type { Tensor } from "../tensor.ts";
import { add, div, mul, sqrt, sub } from "../ops/elementwise.ts";
import { fusedAdam } from "../ops/_optim.ts";

/** Options of Adam and AdamW (PyTorch's `Adam` and `AdamW`). */
export interface AdamOptions {
  /** Learning rate. Default 1e-3. */
  lr?: number;
  /** Decay rates of the first and second moment estimates. Default [0.9, 0.999]. */
  betas?: readonly [number, number];
  /** Added to the denominator. Default 1e-8. */
  eps?: number;
  /** Weight decay: L2 in the gradient for adam (default 0), decoupled for adamw (default 1e-2). */
  weightDecay?: number;
  /** Maximize the objective instead. Default false. */
  maximize?: boolean;
}

/** One parameter's update: the new parameter and state from the old, the gradient and step t. */
export type OptimizerUpdate = (
  p: Tensor,
  g: Tensor,
  state: Tensor[],
  t: number,
) => [Tensor, Tensor[]];

/** A rate checked to be finite, >= 0 and below `max`. */
export function rate(
  op: string,
  name: string,
  value: unknown,
  fallback: number,
  max = Infinity,
): number {
  return checkNumber(
    op,
    `options.${name}`,
    value ?? fallback,
    max === Infinity ? "a finite number >= 0" : `a number in [0, ${max})`,
    (v) => v >= 0 && v < max && Number.isFinite(v),
  );
}

/** Adam's options, checked, with PyTorch's defaults. */
export function adamOptions(op: string, options: AdamOptions, decay: number) {
  checkOptions(op, options, ["lr", "betas", "eps", "weightDecay", "maximize"]);
  const betas = options.betas ?? [0.9, 0.999];
  if (!Array.isArray(betas) || betas.length !== 2) {
    throw new ValueError({
      op,
      argument: "options.betas",
      expected: "two numbers in [0, 1)",
      received: describe(betas),
    });
  }
  return {
    lr: rate(op, "lr", options.lr, 1e-3),
    beta1: rate(op, "betas[0]", betas[0], 0, 1),
    beta2: rate(op, "betas[1]", betas[1], 0, 1),
    eps: rate(op, "eps", options.eps, 1e-8),
    weightDecay: rate(op, "weightDecay", options.weightDecay, decay),
    maximize: options.maximize ?? false,
  };
}

/** The update of `adam` and `adamw`: fused where the device can, else composed. */
export function adamUpdate(o: ReturnType<typeof adamOptions>, decoupled: boolean): OptimizerUpdate {
  return (p, grad, [m, v], t) => {
    // One kernel where the device has it: every tensor read once, the three written once.
    const fused = fusedAdam(p, grad, m, v, {
      lr: o.lr,
      beta1: o.beta1,
      beta2: o.beta2,
      eps: o.eps,
      l2: decoupled ? 0 : o.weightDecay,
      decay: decoupled && o.weightDecay ? 1 - o.lr * o.weightDecay : 1,
      step: t,
      maximize: o.maximize,
    });
    if (fused) return [fused[0], [fused[1], fused[2]]];
    return composedAdam(o, decoupled, p, grad, m, v, t);
  };
}

/** One Adam step composed of elementwise ops (the reference of the fused kernel). */
export function composedAdam(
  o: ReturnType<typeof adamOptions>,
  decoupled: boolean,
  p: Tensor,
  grad: Tensor,
  m: Tensor,
  v: Tensor,
  t: number,
): [Tensor, Tensor[]] {
  let g = o.maximize ? mul(grad, -1) : grad;
  let base = p;
  if (o.weightDecay && decoupled) base = mul(p, 1 - o.lr * o.weightDecay);
  else if (o.weightDecay) g = add(g, mul(p, o.weightDecay));
  const m2 = add(mul(m, o.beta1), mul(g, 1 - o.beta1));
  const v2 = add(mul(v, o.beta2), mul(mul(g, g), 1 - o.beta2));
  // PyTorch's arrangement: step = lr / (1 - b1^t); denom = sqrt(v) / sqrt(1 - b2^t) + eps.
  const stepSize = o.lr / (1 - o.beta1 ** t);
  const denom = add(div(sqrt(v2), Math.sqrt(1 - o.beta2 ** t)), o.eps);
  return [sub(base, mul(div(m2, denom), stepSize)), [m2, v2]];
}
