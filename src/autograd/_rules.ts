/**
 * Gradient rules: for each recorded op, the cotangents of its inputs from those of its outputs
 * (a vector-Jacobian product), written with the public ops so the backward pass is lazy, fuses like
 * any other work, and is itself differentiable (higher order). The rule modules of this folder
 * (one per kernel family) register here; `backprop` (grad.ts) looks them up by op name.
 * @module
 */
import { isFloat } from "../core/dtype.ts";
import { normalizeAxes, type Shape } from "../core/shape.ts";
import { ValueError } from "../core/errors.ts";
import { Tensor } from "../tensor.ts";
import { broadcastTo, reshape, type SliceRange } from "../ops/shape.ts";
import { sum } from "../ops/reduce.ts";
import { scatterAdd } from "../ops/indexing.ts";
import { arange, zeros } from "../creation.ts";
import { untaped } from "../_tape.ts";

/** What a rule receives. */
export interface RuleContext {
  /** The op's operands as recorded (tensors, numbers, null or undefined for absent ones). */
  inputs: readonly unknown[];
  /** The op's tensor results. */
  outputs: readonly Tensor[];
  /** The op's options as recorded. */
  attrs: Readonly<Record<string, unknown>>;
  /** One cotangent per output; null where no gradient reached it (never all null). */
  cts: readonly (Tensor | null)[];
  /** Which inputs need a cotangent (the others may get null, and should, to save work). */
  needs: readonly boolean[];
}

/**
 * A rule: one cotangent per input (null for none: integers, indices, constants). A cotangent may
 * have a shape that broadcasts to the input's or a wider float dtype: backprop sums and casts it.
 */
export type Rule = (c: RuleContext) => readonly (Tensor | null | undefined)[];

const rules = new Map<string, Rule>();

/** Registers `rule` for each op named. */
export function defineRule(ops: string | readonly string[], rule: Rule): void {
  for (const op of typeof ops === "string" ? [ops] : ops) rules.set(op, rule);
}

/** Registers ops whose gradient is zero almost everywhere (floor, sign, ...): no cotangent flows. */
export function defineZeroRule(ops: readonly string[]): void {
  defineRule(ops, (c) => c.inputs.map(() => null));
}

/** The rule of `op`, or a ValueError naming the op that has none. */
export function ruleFor(op: string, transform: string): Rule {
  const rule = rules.get(op);
  if (rule) return rule;
  throw new ValueError({
    op: transform,
    argument: "f",
    expected: "a function of ops with gradient rules",
    received: `a function using ${op}, which has none (the README lists the ops with rules)`,
  });
}

/** True when `op` has a rule (for tests of coverage). */
export function hasRule(op: string): boolean {
  return rules.has(op);
}

/** True for a float tensor: only they carry gradients. */
export function isFloatTensor(x: unknown): x is Tensor {
  return x instanceof Tensor && !x.isDisposed && isFloat(x.dtype);
}

/**
 * `g` summed down to `shape` (the inverse of broadcasting: leading axes and stretched length-1
 * axes summed), then reshaped to it.
 */
export function sumTo(g: Tensor, shape: Shape): Tensor {
  const gs = g.shape;
  if (gs.length === shape.length && gs.every((d, i) => d === shape[i])) return g;
  const lead = gs.length - shape.length;
  const axes: number[] = [];
  for (let i = 0; i < gs.length; i++) {
    if (i < lead || (shape[i - lead] === 1 && gs[i] !== 1)) axes.push(i);
  }
  const reduced = axes.length ? sum(g, { axis: axes, keepdims: true }) : g;
  return reshape(reduced, shape);
}

/**
 * The cotangent `g` of a reduction of `x` over `axis` (as recorded) brought back to x's shape:
 * the reduced axes reinserted and broadcast (a stride-0 view, fused by consumers).
 */
export function unreduce(g: Tensor, x: Tensor, axis: unknown, keepdims: unknown): Tensor {
  const shape = x.shape;
  const axes = reducedAxes(x, axis);
  const kept = keepdims ? g : reshape(g, shape.map((d, i) => (axes.includes(i) ? 1 : d)));
  return broadcastTo(kept, shape);
}

/** The axes a reduction over `axis` (as recorded; all when undefined) covers in x. */
export function reducedAxes(x: Tensor, axis: unknown): number[] {
  return normalizeAxes("grad", axis as number | number[] | undefined, x.rank, "options.axis");
}

/** x's flat positions as an int32 tensor shaped like x, on its device, made without a tape. */
export function positionsOf(x: Tensor): Tensor {
  return untaped(() =>
    reshape(arange(0, x.size, 1, { dtype: "int32", device: x.device }), x.shape)
  );
}

/**
 * `g` summed into zeros shaped like x at the flat `positions` (any shape, g's size): the cotangent
 * of an op that read x at those positions (a slice, `at`, a flat take). Repeats accumulate.
 */
export function scatterToPositions(g: Tensor, x: Tensor, positions: Tensor): Tensor {
  if (positions.size === 0) return zeros(x.shape, { dtype: g.dtype, device: g.device });
  const flat = zeros([x.size], { dtype: g.dtype, device: g.device });
  return reshape(
    scatterAdd(flat, reshape(positions, [-1]), reshape(g, [-1]), { axis: 0 }),
    x.shape,
  );
}

/** Slice ranges selecting `range` along `axis` and all of every axis before it. */
export function along(axis: number, range: SliceRange): SliceRange[] {
  const ranges: SliceRange[] = new Array(axis).fill(null);
  ranges.push(range);
  return ranges;
}
