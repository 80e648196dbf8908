/**
 * Reverse- and forward-mode differentiation of functions of tensors: `grad`, `valueAndGrad`,
 * `vjp`, `jvp`, `stopGradient`. The function runs normally (lazily, fused, on its tensors' device)
 * while a tape (src/_tape.ts) records the ops that depend on the differentiated inputs; the
 * backward pass then applies each op's rule (./_rules.ts) in reverse order. Rules are written with
 * the public ops, so the backward pass fuses like forward work, and under an outer tape it is
 * itself recorded: `grad(grad(f))`, Hessian-vector products and `jit(grad(f))` need nothing more.
 * Forward mode (`jvp`) transposes the reverse pass, as JAX's `linear_transpose` does: it
 * differentiates the (linear) pullback once more.
 * @module
 */
import { checkFunction, describe, DTypeError, ShapeError, ValueError } from "../core/errors.ts";
import { isFloat } from "../core/dtype.ts";
import { checkOptions } from "../core/options.ts";
import { closeTape, holds, openTape, type Tape, taped, type TapeNode, untaped } from "../_tape.ts";
import { detachScope, type Disposable, openScope } from "../_scope.ts";
import { Tensor, viewOf } from "../tensor.ts";
import { tidy } from "../tidy.ts";
import { ones, zeros } from "../creation.ts";
import { add, cast } from "../ops/elementwise.ts";
import { clone } from "../ops/shape.ts";
import { defineRule, isFloatTensor, ruleFor, sumTo } from "./_rules.ts";
import { leaves, rebuild, type Tree } from "./_tree.ts";
import "./elementwise.ts";
import "./reduce.ts";
import "./shape.ts";
import "./matmul.ts";
import "./rows.ts";
import "./scan.ts";
import "./indexing.ts";
import "./sort.ts";
import "./pool.ts";

/** Options of {@link grad} and {@link valueAndGrad}. */
export interface GradOptions {
  /**
   * Which arguments to differentiate with respect to: an index (default 0; the gradient has that
   * argument's structure) or an array of indices (an array of gradients, one per index).
   */
  argnums?: number | readonly number[];
  /**
   * `f` returns `[value, aux]`: only `value` is differentiated, and `aux` (anything, tensors
   * included) is passed through.
   */
  hasAux?: boolean;
}

/** A cotangent brought to its input's shape (summing broadcast axes) and dtype. */
function fitTo(g: Tensor, x: Tensor): Tensor {
  let out = sumTo(g, x.shape);
  if (out.dtype !== x.dtype) out = cast(out, x.dtype);
  return out;
}

/**
 * A new tensor sharing `x`'s storage: each differentiated argument gets its own identity, so an
 * argument passed twice gets two gradients (as JAX), and an argument an outer tape follows stays
 * followed through it (the alias is an op, recorded there, whose gradient passes through).
 */
function alias(x: Tensor, transform: string): Tensor {
  return taped("alias", [x], {}, () => new Tensor(viewOf(x, transform, "args")));
}

defineRule("alias", (c) => [c.cts[0]]);

/** `tree` with each of its tensors `list` replaced by an alias; the aliases, in order. */
function aliased(transform: string, tree: unknown, list: Tensor[]): [Tree, Tensor[]] {
  const aliases = list.map((t) => alias(t, transform));
  return [rebuild<Tree>(tree, aliases), aliases];
}

/**
 * Reverse accumulation over `tape`'s nodes from `seeds` (a tensor and its cotangent): the
 * cotangent of every tensor the tape follows that a seed depends on.
 */
function backprop(
  transform: string,
  tape: Tape,
  seeds: readonly (readonly [Tensor, Tensor])[],
): Map<object, Tensor> {
  const cts = new Map<object, Tensor>();
  for (const [t, ct] of seeds) {
    if (!tape.followed.has(t)) continue;
    const prev = cts.get(t);
    cts.set(t, prev ? add(prev, ct) : ct);
  }
  for (let i = tape.nodes.length - 1; i >= 0; i--) {
    const node: TapeNode = tape.nodes[i];
    const outCts = node.outputs.map((o) => cts.get(o) ?? null);
    if (outCts.every((c) => c === null)) continue;
    const needs = node.inputs.map((x) => isFloatTensor(x) && tape.followed.has(x));
    const inCts = ruleFor(node.op, transform)({
      inputs: node.inputs,
      outputs: node.outputs as Tensor[],
      attrs: node.attrs,
      cts: outCts,
      needs,
    });
    node.inputs.forEach((x, k) => {
      const g = inCts[k];
      if (!g || !needs[k]) return;
      const fitted = fitTo(g, x as Tensor);
      const prev = cts.get(x as Tensor);
      cts.set(x as Tensor, prev ? add(prev, fitted) : fitted);
    });
  }
  return cts;
}

function zerosLike(t: Tensor): Tensor {
  return zeros(t.shape, { dtype: t.dtype, device: t.device });
}

/** `t`, or a copy where `t` was already handed out (each returned gradient is its own tensor). */
function distinct(t: Tensor, given: Set<Tensor>): Tensor {
  const out = given.has(t) ? clone(t) : t;
  given.add(out);
  return out;
}

function argnumsOf(transform: string, argnums: unknown, count: number): number[] {
  const list = Array.isArray(argnums) ? argnums : [argnums ?? 0];
  if (list.length === 0) {
    throw new ValueError({
      op: transform,
      argument: "options.argnums",
      expected: "an argument index or a non-empty array of them",
      received: "[]",
    });
  }
  for (const n of list) {
    if (typeof n !== "number" || !Number.isInteger(n) || n < 0 || n >= count) {
      throw new ValueError({
        op: transform,
        argument: "options.argnums",
        expected: `argument indices from 0 to ${count - 1} (the function got ${count} arguments)`,
        received: describe(n),
      });
    }
  }
  return list as number[];
}

/** The float tensors of a tree of differentiated inputs (integer ones are refused). */
function floatLeaves(transform: string, tree: unknown, argument: string): Tensor[] {
  const out = leaves(tree, transform, argument);
  for (const t of out) {
    if (!isFloat(t.dtype)) {
      throw new DTypeError({
        op: transform,
        argument,
        expected: "float32 or float16 tensors (only they have gradients)",
        received: `a ${t.dtype} tensor`,
      });
    }
  }
  return out;
}

/** The scalar a gradient is taken of: one float element. */
function checkScalarValue(transform: string, value: unknown): Tensor {
  if (!(value instanceof Tensor)) {
    throw new ValueError({
      op: transform,
      argument: "f",
      expected: "a function returning a Tensor (or [value, aux] with hasAux)",
      received: `one returning ${describe(value)}`,
    });
  }
  if (value.size !== 1) {
    throw new ShapeError({
      op: transform,
      argument: "f",
      expected: "a function returning one element (a scalar loss); use vjp for other shapes",
      received: `one returning shape [${value.shape.join(", ")}]`,
    });
  }
  if (!isFloat(value.dtype)) {
    throw new DTypeError({
      op: transform,
      argument: "f",
      expected: "a function returning a float32 or float16 tensor",
      received: `one returning ${value.dtype}`,
    });
  }
  return value;
}

/**
 * `valueAndGrad(f)` returns a function computing both `f(...args)` and its gradient with respect to
 * the arguments `argnums` selects (each a tensor or a tree of tensors: arrays and plain objects),
 * as `[value, grads]` (`[[value, aux], grads]` with `hasAux`). `f` must return one float element.
 * The gradient has the structure of the argument (an array of them when `argnums` is an array);
 * tensors `f` does not depend on get zeros. Intermediate tensors are disposed before it returns.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const loss = (w: gyre.Tensor) => w.mul(w).sum();
 * const [value, g] = gyre.valueAndGrad(loss)(gyre.tensor([1, 2, 3])) as gyre.Tensor[];
 * console.log(await value.data(), await g.data()); // 14, [2, 4, 6]
 * ```
 */
export function valueAndGrad<A extends unknown[], G = Tree>(
  f: (...args: A) => unknown,
  options: GradOptions = {},
): (...args: A) => [unknown, G] {
  const transform = "valueAndGrad";
  checkFunction(transform, "f", f, "a function of tensors");
  checkOptions(transform, options, ["argnums", "hasAux"]);
  const hasAux = options.hasAux ?? false;
  if (typeof hasAux !== "boolean") {
    throw new ValueError({
      op: transform,
      argument: "options.hasAux",
      expected: "a boolean",
      received: describe(hasAux),
    });
  }
  return (...args: A) =>
    tidy(() => {
      const nums = argnumsOf(transform, options.argnums, args.length);
      const trees = nums.map((n) => args[n]);
      const wrt: Tensor[][] = [];
      const called = [...args] as A;
      nums.forEach((n, i) => {
        const [tree, aliases] = aliased(
          transform,
          trees[i],
          floatLeaves(transform, trees[i], `args[${n}]`),
        );
        called[n] = tree;
        wrt.push(aliases);
      });
      const tape = openTape(wrt.flat());
      let out: unknown;
      try {
        out = f(...called);
      } finally {
        closeTape(tape);
      }
      if (hasAux && (!Array.isArray(out) || out.length !== 2)) {
        throw new ValueError({
          op: transform,
          argument: "f",
          expected: "a function returning [value, aux] (options.hasAux is true)",
          received: `one returning ${describe(out)}`,
        });
      }
      const value = checkScalarValue(transform, hasAux ? (out as unknown[])[0] : out);
      const seed = untaped(() => ones(value.shape, { dtype: value.dtype, device: value.device }));
      const cts = backprop(transform, tape, [[value, seed]]);
      const given = new Set<Tensor>([value]);
      const grads = wrt.map((list, i) =>
        rebuild<Tree>(trees[i], list.map((w) => distinct(cts.get(w) ?? zerosLike(w), given)))
      );
      const g = (Array.isArray(options.argnums) ? grads : grads[0]) as G;
      return [hasAux ? out : value, g] as [unknown, G];
    });
}

/**
 * `grad(f)` returns a function computing the gradient of `f` (which returns one float element)
 * with respect to the arguments `argnums` selects (default the first): see {@link valueAndGrad}.
 * Composes with itself (`grad(grad(f))`), with {@link jvp} and with `jit`.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const f = (x: gyre.Tensor) => x.sin().sum();
 * const df = gyre.grad(f); // cos
 * const d2f = gyre.grad((x: gyre.Tensor) => (df(x) as gyre.Tensor).sum()); // -sin
 * console.log(await (d2f(gyre.tensor([0, 1])) as gyre.Tensor).data());
 * ```
 */
export function grad<A extends unknown[], G = Tree>(
  f: (...args: A) => unknown,
  options: GradOptions = {},
): (...args: A) => G {
  const withValue = valueAndGrad<A, G>(f, options);
  return (...args: A) => {
    const [value, g] = withValue(...args);
    // The value (and aux) are not returned: dispose what the call made, unless an outer tape
    // reads it (an enclosing grad disposes it then).
    const kept = new Set<unknown>([...args, ...leavesOf(g)]);
    for (const t of leavesOf(value)) if (!kept.has(t) && !holds(t)) t.dispose();
    return g;
  };
}

function leavesOf(tree: unknown): Tensor[] {
  const out: Tensor[] = [];
  const walk = (n: unknown) => {
    if (n instanceof Tensor) out.push(n);
    else if (Array.isArray(n)) n.forEach(walk);
    else if (n !== null && typeof n === "object") Object.values(n).forEach(walk);
  };
  walk(tree);
  return out;
}

/** A pullback from {@link vjp}: cotangents of the outputs in, those of the primals out. */
export interface Pullback {
  /** The cotangents of the primals (one tree per primal) for `cotangents` of f's result. */
  (cotangents: Tree): Tree[];
  /** Frees the forward pass's tensors the pullback keeps; calling it afterwards throws. */
  dispose(): void;
  /** Same as `dispose`, for `using`. */
  [Symbol.dispose](): void;
}

/**
 * Runs `f(...primals)` and returns `[out, pullback]`, where `pullback(cotangents)` computes the
 * vector-Jacobian product: for cotangents shaped like `out` (a tensor or tree), the cotangents of
 * the primals. The pullback may be called many times; it keeps the forward pass's tensors until
 * its `dispose()`.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const x = gyre.tensor([1, 2, 3]);
 * const [y, pullback] = gyre.vjp((x: gyre.Tensor) => x.mul(x), x);
 * const [gx] = pullback(gyre.ones([3])); // 2x: [2, 4, 6]
 * pullback.dispose();
 * ```
 */
export function vjp<A extends Tree[]>(
  f: (...primals: A) => Tree,
  ...primals: A
): [Tree, Pullback] {
  const transform = "vjp";
  checkFunction(transform, "f", f, "a function of tensors");
  const lists = primals.map((p, i) => floatLeaves(transform, p, `primals[${i}]`));
  const scope = openScope();
  const wrt: Tensor[][] = [];
  const called = primals.map((p, i) => {
    const [tree, aliases] = aliased(transform, p, lists[i]);
    wrt.push(aliases);
    return tree;
  }) as A;
  const tape = openTape(wrt.flat());
  let out: Tree;
  let saved: Disposable[];
  try {
    out = f(...called);
    closeTape(tape);
    // Kept: what the recorded ops read or made; f's other temporaries go now.
    saved = [];
    for (const t of detachScope(scope, new Set(leaves(out, transform, "f's result")))) {
      if (tape.held.has(t)) saved.push(t);
      else t.dispose();
    }
  } catch (e) {
    closeTape(tape);
    for (const t of detachScope(scope, new Set())) t.dispose();
    throw e;
  }
  const outs = leaves(out, transform, "f's result");
  let disposed = false;
  const pullback = (cotangents: Tree): Tree[] => {
    if (disposed) {
      throw new ValueError({
        op: transform,
        argument: "pullback",
        expected: "a pullback that was not disposed",
        received: "a disposed one",
      });
    }
    return tidy(() => {
      const cts = cotangentsFor(transform, outs, cotangents);
      const map = backprop(transform, tape, outs.map((o, i) => [o, cts[i]] as const));
      const given = new Set<Tensor>(cts);
      return wrt.map((list, i) =>
        rebuild<Tree>(primals[i], list.map((w) => distinct(map.get(w) ?? zerosLike(w), given)))
      );
    });
  };
  const dispose = () => {
    if (disposed) return;
    disposed = true;
    tape.nodes.length = 0;
    for (const t of saved) t.dispose();
  };
  return [
    out,
    Object.assign(pullback, { dispose, [Symbol.dispose]: dispose }) as Pullback,
  ];
}

/** `cotangents` as a list matching `outs` in shape (a mismatch is a ShapeError). */
function cotangentsFor(transform: string, outs: Tensor[], cotangents: unknown): Tensor[] {
  const cts = leaves(cotangents, transform, "cotangents");
  if (cts.length !== outs.length) {
    throw new ValueError({
      op: transform,
      argument: "cotangents",
      expected: `${outs.length} tensors, shaped like f's result`,
      received: `${cts.length}`,
    });
  }
  cts.forEach((c, i) => {
    const want = outs[i].shape;
    if (c.shape.length !== want.length || c.shape.some((d, k) => d !== want[k])) {
      throw new ShapeError({
        op: transform,
        argument: "cotangents",
        expected: `shape [${want.join(", ")}] (f's result ${i})`,
        received: `shape [${c.shape.join(", ")}]`,
      });
    }
  });
  return cts;
}

/**
 * Forward mode: `[f(...primals), J v]`, the Jacobian-vector product of `f` at `primals` with
 * `tangents` (one tree per primal, shaped like it). Computed by transposing the reverse pass (a
 * vjp of the vjp), so it costs about two backward passes and works wherever `grad` does.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const [y, dy] = gyre.jvp((x: gyre.Tensor) => x.exp(), [gyre.tensor([0, 1])], [gyre.ones([2])]);
 * console.log(await (dy as gyre.Tensor).data()); // e^x: [1, 2.718]
 * ```
 */
export function jvp<A extends Tree[]>(
  f: (...primals: A) => Tree,
  primals: A,
  tangents: readonly Tree[],
): [Tree, Tree] {
  const transform = "jvp";
  checkFunction(transform, "f", f, "a function of tensors");
  if (!Array.isArray(primals) || !Array.isArray(tangents) || primals.length !== tangents.length) {
    throw new ValueError({
      op: transform,
      argument: "tangents",
      expected: "an array of tangents, one per primal (primals is an array too)",
      received: `${describe(primals)} and ${describe(tangents)}`,
    });
  }
  const wrt = primals.map((p, i) => floatLeaves(transform, p, `primals[${i}]`));
  const tans = tangents.map((t, i) => leaves(t, transform, `tangents[${i}]`));
  wrt.forEach((list, i) => {
    if (tans[i].length !== list.length) {
      throw new ValueError({
        op: transform,
        argument: `tangents[${i}]`,
        expected: `${list.length} tensors, shaped like primals[${i}]`,
        received: `${tans[i].length}`,
      });
    }
    cotangentsFor(transform, list, tans[i]);
  });
  return tidy(() => {
    const called = primals.map((p, i) => {
      const [tree, aliases] = aliased(transform, p, wrt[i]);
      wrt[i] = aliases;
      return tree;
    }) as A;
    const forward = openTape(wrt.flat());
    let out: Tree;
    try {
      out = f(...called);
    } finally {
      closeTape(forward);
    }
    const outs = leaves(out, transform, "f's result");
    // The pullback is linear in its cotangents `u`: differentiating it by `u` transposes it.
    const u = outs.map((o) => untaped(() => zerosLike(o)));
    const transpose = openTape(u);
    let pulled: Map<object, Tensor>;
    try {
      pulled = backprop(transform, forward, outs.map((o, i) => [o, u[i]] as const));
    } finally {
      closeTape(transpose);
    }
    const seeds: [Tensor, Tensor][] = [];
    const flatTangents = tans.flat();
    wrt.flat().forEach((w, i) => {
      const g = pulled.get(w);
      if (g) seeds.push([g, flatTangents[i]]);
    });
    const pushed = backprop(transform, transpose, seeds);
    const given = new Set<Tensor>(outs);
    const tangentsOut = u.map((ui, i) => distinct(pushed.get(ui) ?? zerosLike(outs[i]), given));
    return [out, rebuild<Tree>(out, tangentsOut)] as [Tree, Tree];
  });
}

/**
 * `x` with no gradient flowing through it: the same values, treated as a constant by `grad`,
 * `vjp` and `jvp` (JAX's `stop_gradient`, PyTorch's `detach`).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const g = gyre.grad((x: gyre.Tensor) => x.mul(gyre.stopGradient(x)).sum())(gyre.tensor([3]));
 * // [3], not [6]
 * ```
 */
export function stopGradient(x: Tensor): Tensor {
  if (!(x instanceof Tensor)) {
    throw new ValueError({
      op: "stopGradient",
      argument: "x",
      expected: "a Tensor",
      received: describe(x),
    });
  }
  return untaped(() => cast(x, x.dtype));
}
