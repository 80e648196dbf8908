/**
 * Hypergradients of a bilevel problem: inner parameters w trained by `steps` of gradient descent on
 * an inner loss L_in(w, h), an outer loss L_out(w, h) on the result, and its gradient with respect
 * to the hyperparameters h. Three methods:
 * - "unrolled": backpropagate through every inner step (exact for the truncated training; memory
 *   grows with the steps);
 * - "neumann": implicit differentiation at the trained w, with (I - J)^-1 (J = I - lr H, the
 *   inner step's Jacobian, H the inner Hessian) as a truncated Neumann series of
 *   Hessian-vector products;
 * - "cg": implicit, solving (I - J) v = dL_out/dw by conjugate gradients.
 * Both implicit methods assume the training converged (dL_in/dw = 0). All loops stay on the device:
 * no step reads a value back.
 * @module
 */
import { checkFunction, checkNumber, describe, ValueError } from "../core/errors.ts";
import { checkOptions } from "../core/options.ts";
import type { Tensor } from "../tensor.ts";
import { tidy } from "../tidy.ts";
import { add, div, greater, mul, sub, where } from "../ops/elementwise.ts";
import { sum } from "../ops/reduce.ts";
import { grad, valueAndGrad } from "./grad.ts";
import { leaves, rebuild, type Tree } from "./_tree.ts";

/** Options of {@link hypergrad}. */
export interface HypergradOptions<P extends Tree, H extends Tree> {
  /** The inner loss L_in(params, hyper): one float element. */
  innerLoss: (params: P, hyper: H) => Tensor;
  /** The outer loss L_out(params, hyper): one float element. */
  outerLoss: (params: P, hyper: H) => Tensor;
  /** Inner gradient-descent steps from the initial parameters. */
  steps: number;
  /** The inner step size. */
  lr: number;
  /** "unrolled", "neumann" or "cg" (default). */
  method?: "unrolled" | "neumann" | "cg";
  /** Neumann terms or conjugate-gradient iterations (default 50). */
  iterations?: number;
}

/** What {@link hypergrad} returns. */
export interface HypergradResult<P extends Tree, H extends Tree> {
  /** The outer loss at the trained parameters. */
  value: Tensor;
  /** d L_out / d hyper, shaped like `hyper`. */
  hypergrad: H;
  /** The trained inner parameters, shaped like the initial ones. */
  params: P;
}

function dot(a: Tensor[], b: Tensor[]): Tensor {
  return a.map((x, i) => sum(mul(x, b[i]))).reduce((s, t) => add(s, t));
}

const axpy = (alpha: Tensor | number, x: Tensor[], y: Tensor[]) =>
  y.map((yi, i) => add(yi, mul(x[i], alpha)));

/**
 * The hypergradient of a bilevel problem (see the module doc for the methods). `params` are the
 * initial inner parameters and `hyper` the hyperparameters (tensors or trees of them).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * // Ridge regression: the validation loss's gradient in the penalty lambda.
 * const x = gyre.tensor([[1, 0.5], [0.2, 1], [1, 1]]), y = gyre.tensor([1, 0, 1]);
 * const { hypergrad } = gyre.hypergrad(gyre.zeros([2]), gyre.tensor(0.1), {
 *   innerLoss: (w, lambda) => gyre.matmul(x, w).sub(y).square().mean().add(w.square().sum().mul(lambda)),
 *   outerLoss: (w) => gyre.matmul(x, w).sub(gyre.tensor([1, 0.1, 0.8])).square().mean(),
 *   steps: 200,
 *   lr: 0.3,
 *   method: "cg",
 * });
 * ```
 */
export function hypergrad<P extends Tree, H extends Tree>(
  params: P,
  hyper: H,
  options: HypergradOptions<P, H>,
): HypergradResult<P, H> {
  const op = "hypergrad";
  checkOptions(op, options, ["innerLoss", "outerLoss", "steps", "lr", "method", "iterations"]);
  checkFunction(op, "options.innerLoss", options.innerLoss, "a function (params, hyper) => loss");
  checkFunction(op, "options.outerLoss", options.outerLoss, "a function (params, hyper) => loss");
  const steps = checkNumber(
    op,
    "options.steps",
    options.steps,
    "a non-negative integer",
    (v) => Number.isInteger(v) && v >= 0,
  );
  const lr = checkNumber(
    op,
    "options.lr",
    options.lr,
    "a positive number",
    (v) => v > 0 && v < Infinity,
  );
  const iterations = checkNumber(
    op,
    "options.iterations",
    options.iterations ?? 50,
    "a positive integer",
    (v) => Number.isInteger(v) && v > 0,
  );
  const method = options.method ?? "cg";
  if (method !== "unrolled" && method !== "neumann" && method !== "cg") {
    throw new ValueError({
      op,
      argument: "options.method",
      expected: '"unrolled", "neumann" or "cg"',
      received: describe(method),
    });
  }
  const w0 = leaves(params, op, "params");
  const h0 = leaves(hyper, op, "hyper");
  const asP = (list: Tensor[]) => rebuild<P>(params, list);
  const asH = (list: Tensor[]) => rebuild<H>(hyper, list);
  const innerGrad = (w: Tensor[], h: Tensor[]) =>
    leaves(grad((p: P) => options.innerLoss(p, asH(h)))(asP(w)), op, "inner gradient");
  const train = (w: Tensor[], h: Tensor[]) => {
    for (let t = 0; t < steps; t++) w = axpy(-lr, innerGrad(w, h), w);
    return w;
  };

  return tidy(() => {
    if (method === "unrolled") {
      const [[value, trained], g] = valueAndGrad(
        (hl: Tensor[]) => {
          const w = train(w0, hl);
          return [options.outerLoss(asP(w), asH(hl)), w];
        },
        { hasAux: true },
      )(h0) as [[Tensor, Tensor[]], Tensor[]];
      return { value, hypergrad: asH(g), params: asP(trained) };
    }
    // Implicit: train without a tape (each step's temporaries freed), then solve at w*.
    let w = w0;
    for (let t = 0; t < steps; t++) {
      const prev = w;
      w = tidy(() => axpy(-lr, innerGrad(prev, h0), prev));
      if (prev !== w0) { for (const t of prev) t.dispose(); }
    }
    const [value, [gw, gh]] = valueAndGrad(
      (p: Tensor[], h: Tensor[]) => options.outerLoss(asP(p), asH(h)),
      { argnums: [0, 1] },
    )(w, h0) as [Tensor, [Tensor[], Tensor[]]];
    // (I - J) u = lr H u, with H u the gradient of <dL_in/dw, u>.
    const step = (u: Tensor[]) =>
      leaves(grad((p: Tensor[]) => dot(innerGrad(p, h0), u))(w), op, "Hessian-vector product")
        .map((x) => mul(x, lr));
    let v: Tensor[];
    if (method === "neumann") {
      // v = sum_k J^k g, J u = u - lr H u.
      let term = gw;
      v = gw;
      for (let k = 0; k < iterations; k++) {
        const prev = term, hv = step(prev);
        term = prev.map((x, i) => sub(x, hv[i]));
        v = v.map((x, i) => add(x, term[i]));
      }
    } else {
      v = gw.map((x) => mul(x, 0));
      let r = gw, p = gw, rr = dot(r, r);
      for (let k = 0; k < iterations; k++) {
        const ap = step(p);
        const pap = dot(p, ap);
        // Converged exactly: no division by zero, the step is 0.
        const alpha = where(greater(pap, 0), div(rr, pap), 0);
        v = axpy(alpha, p, v);
        r = axpy(mul(alpha, -1), ap, r);
        const rrNext = dot(r, r);
        const beta = where(greater(rr, 0), div(rrNext, rr), 0);
        p = axpy(beta, p, r);
        rr = rrNext;
      }
    }
    // d/dh of L_out(w*(h), h) = dL_out/dh + (dPhi/dh)^T v, Phi(w, h) = w - lr dL_in/dw.
    const mixed = leaves(
      grad((h: Tensor[]) => dot(innerGrad(w, h), v))(h0),
      op,
      "mixed second derivative",
    );
    const g = gh.map((x, i) => sub(x, mul(mixed[i], lr)));
    return { value, hypergrad: asH(g), params: asP(w) };
  });
}
