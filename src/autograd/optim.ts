/**
 * Optimizers over parameter trees with PyTorch's update rules and defaults: `sgd` (momentum,
 * dampening, Nesterov, weight decay), `adam` (L2 weight decay) and `adamw` (decoupled weight
 * decay). An optimizer updates the tree it was given in place, as PyTorch's do: `step(grads)` puts
 * new tensors where the parameters were and disposes the old ones (and its old state). Each
 * parameter's update is one fused elementwise expression per new tensor (the parameter and each
 * moment), computed when the step ends. The updates are not recorded by gradient tapes: to
 * differentiate through training steps, write the step with ops (see `hypergrad`).
 * @module
 */
import { ShapeError, ValueError } from "../core/errors.ts";
import { isFloat } from "../core/dtype.ts";
import { detachScope, openScope } from "../_scope.ts";
import { untaped } from "../_tape.ts";
import type { Tensor } from "../tensor.ts";
import { zeros } from "../creation.ts";
import { add, mul, sub } from "../ops/elementwise.ts";
import { checkOptions } from "../core/options.ts";
import { type AdamOptions, adamOptions, adamUpdate, type OptimizerUpdate, rate } from "./_adam.ts";
import { leaves, replaceLeaves, type Tree } from "./_tree.ts";

export type { AdamOptions };

/** An optimizer of a parameter tree; see {@link sgd}, {@link adam}, {@link adamw}. */
export interface Optimizer<T extends Tree = Tree> {
  /** The parameter tree, updated in place by each step (a bare tensor is replaced). */
  readonly params: T;
  /** Steps taken so far. */
  readonly steps: number;
  /**
   * Applies one update from `grads` (a tree shaped like the parameters, e.g. from `grad`) and
   * returns the parameters. The previous parameter tensors are disposed; `grads` are not.
   */
  step(grads: T): T;
  /** Frees the parameters and the optimizer's state. */
  dispose(): void;
}

/** Options of {@link sgd} (PyTorch's `torch.optim.SGD`). */
export interface SgdOptions {
  /** Learning rate. Default 1e-3. */
  lr?: number;
  /** Momentum factor. Default 0. */
  momentum?: number;
  /** Dampening of the momentum. Default 0. */
  dampening?: number;
  /** L2 penalty added to the gradient. Default 0. */
  weightDecay?: number;
  /** Nesterov momentum (needs momentum > 0 and dampening 0). Default false. */
  nesterov?: boolean;
  /** Maximize the objective instead. Default false. */
  maximize?: boolean;
}

function makeOptimizer<T extends Tree>(
  op: string,
  params: T,
  stateCount: number,
  update: OptimizerUpdate,
): Optimizer<T> {
  let current = params;
  const initial = leaves(params, op, "params");
  for (const p of initial) {
    if (!isFloat(p.dtype)) {
      throw new ValueError({
        op,
        argument: "params",
        expected: "float32 or float16 tensors",
        received: `a ${p.dtype} tensor`,
      });
    }
  }
  // The state lives outside every tidy scope: the optimizer owns it.
  let state: Tensor[][] = owned(() =>
    initial.map((p) =>
      Array.from({ length: stateCount }, () => zeros(p.shape, { dtype: p.dtype, device: p.device }))
    )
  );
  let steps = 0;
  let disposed = false;
  const live = () => {
    if (disposed) {
      throw new ValueError({
        op,
        argument: "optimizer",
        expected: "an optimizer that was not disposed",
        received: "a disposed one",
      });
    }
  };
  return {
    get params() {
      return current;
    },
    get steps() {
      return steps;
    },
    step(grads: T): T {
      live();
      const ps = leaves(current, op, "params");
      const gs = leaves(grads, op, "grads");
      if (gs.length !== ps.length) {
        throw new ValueError({
          op,
          argument: "grads",
          expected: `a tree of ${ps.length} tensors, shaped like the parameters`,
          received: `${gs.length} tensors`,
        });
      }
      gs.forEach((g, i) => {
        const want = ps[i].shape;
        if (g.shape.length !== want.length || g.shape.some((d, k) => d !== want[k])) {
          throw new ShapeError({
            op,
            argument: `grads (tensor ${i})`,
            expected: `shape [${want.join(", ")}], as its parameter`,
            received: `shape [${g.shape.join(", ")}]`,
          });
        }
      });
      const t = steps + 1;
      const results = owned(() =>
        ps.map((p, i) => {
          const [next, nextState] = update(p, gs[i], state[i], t);
          return [next.realize(), nextState.map((s) => s.realize())] as const;
        })
      );
      for (const p of ps) p.dispose();
      for (const list of state) for (const s of list) s.dispose();
      state = results.map(([, s]) => s);
      const next = results.map(([p]) => p);
      steps = t;
      if (!Array.isArray(current) && !isContainer(current)) current = next[0] as unknown as T;
      else replaceLeaves(current, next);
      return current;
    },
    dispose() {
      if (disposed) return;
      disposed = true;
      for (const p of leaves(current, op, "params")) p.dispose();
      for (const list of state) for (const s of list) s.dispose();
    },
  };
}

function isContainer(x: unknown): boolean {
  return x !== null && typeof x === "object" && !("dispose" in x);
}

/**
 * Runs `fn` (no tape records it) and returns its result owned by the caller alone: the tensors it
 * returns leave every tidy scope; its temporaries are disposed.
 */
function owned<R>(fn: () => R): R {
  const scope = openScope();
  let result: R;
  try {
    result = untaped(fn);
  } catch (e) {
    for (const t of detachScope(scope, new Set())) t.dispose();
    throw e;
  }
  const keep = new Set<unknown>(flatTensors(result));
  for (const t of detachScope(scope, new Set())) if (!keep.has(t)) t.dispose();
  return result;
}

function flatTensors(x: unknown): unknown[] {
  if (Array.isArray(x)) return x.flatMap(flatTensors);
  return x !== null && typeof x === "object" ? [x] : [];
}

/**
 * Stochastic gradient descent with PyTorch's rule: `g += weightDecay * p`; with momentum,
 * `b = momentum * b + (1 - dampening) * g` (b = g at the first step) and `g = nesterov ?
 * g + momentum * b : b`; then `p -= lr * g`.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const params = { w: gyre.tensor([1, -2]) };
 * const opt = gyre.optim.sgd(params, { lr: 0.1, momentum: 0.9 });
 * const loss = (p: { w: gyre.Tensor }) => p.w.square().sum();
 * for (let i = 0; i < 3; i++) {
 *   const g = gyre.grad(loss)(params) as { w: gyre.Tensor };
 *   opt.step(g);
 *   g.w.dispose();
 * }
 * console.log(await params.w.data()); // moving toward 0
 * ```
 */
export function sgd<T extends Tree>(params: T, options: SgdOptions = {}): Optimizer<T> {
  const op = "optim.sgd";
  checkOptions(op, options, ["lr", "momentum", "dampening", "weightDecay", "nesterov", "maximize"]);
  const lr = rate(op, "lr", options.lr, 1e-3);
  const momentum = rate(op, "momentum", options.momentum, 0);
  const dampening = rate(op, "dampening", options.dampening, 0);
  const weightDecay = rate(op, "weightDecay", options.weightDecay, 0);
  const nesterov = options.nesterov ?? false;
  const maximize = options.maximize ?? false;
  if (nesterov && (momentum <= 0 || dampening !== 0)) {
    throw new ValueError({
      op,
      argument: "options.nesterov",
      expected: "momentum > 0 and dampening 0 (as PyTorch)",
      received: `momentum ${momentum}, dampening ${dampening}`,
    });
  }
  return makeOptimizer(op, params, momentum > 0 ? 1 : 0, (p, grad, state, t) => {
    let g = maximize ? mul(grad, -1) : grad;
    if (weightDecay) g = add(g, mul(p, weightDecay));
    if (momentum === 0) return [sub(p, mul(g, lr)), []];
    const b = t === 1 ? g : add(mul(state[0], momentum), mul(g, 1 - dampening));
    const d = nesterov ? add(g, mul(b, momentum)) : b;
    return [sub(p, mul(d, lr)), [b === grad ? mul(b, 1) : b]];
  });
}

/**
 * Adam (PyTorch's `torch.optim.Adam`, defaults lr 1e-3, betas [0.9, 0.999], eps 1e-8, L2 weight
 * decay 0).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const params = [gyre.tensor([3, -1])];
 * const opt = gyre.optim.adam(params, { lr: 0.1 });
 * const g = gyre.grad((p: gyre.Tensor[]) => p[0].square().sum())(params) as gyre.Tensor[];
 * opt.step(g); // params[0] is now [2.9, -0.9]
 * ```
 */
export function adam<T extends Tree>(params: T, options: AdamOptions = {}): Optimizer<T> {
  const o = adamOptions("optim.adam", options, 0);
  return makeOptimizer("optim.adam", params, 2, adamUpdate(o, false));
}

/**
 * AdamW (PyTorch's `torch.optim.AdamW`: decoupled weight decay, default 1e-2; otherwise Adam).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const params = { w: gyre.tensor([3, -1]) };
 * const opt = gyre.optim.adamw(params, { lr: 0.1, weightDecay: 0.1 });
 * const g = gyre.grad((p: { w: gyre.Tensor }) => p.w.square().sum())(params) as { w: gyre.Tensor };
 * opt.step(g);
 * ```
 */
export function adamw<T extends Tree>(params: T, options: AdamOptions = {}): Optimizer<T> {
  const o = adamOptions("optim.adamw", options, 1e-2);
  return makeOptimizer("optim.adamw", params, 2, adamUpdate(o, true));
}
