/**
 * The elementwise family's job: one expression of the IR (src/ir/expr.ts) over views broadcast
 * to one shape. Ops and lazy fusion build it (src/ops/, src/tensor.ts); each device runs it
 * (src/gpu/elementwise.ts, src/wasm/elementwise.ts).
 * @module
 */
import type { Shape } from "../core/shape.ts";
import type { View } from "../core/view.ts";
import type { Expr } from "../ir/expr.ts";
import type { PlanOverrides } from "../plans/overrides.ts";

/** One elementwise evaluation: what `Backend.evaluate` runs. */
export interface ElementwiseJob {
  /** The op (label) it was issued as: fused kernels name every op folded in, joined by "+". */
  op: string;
  expr: Expr;
  /** `inputs[k]` is read by the expression's input leaf k, already broadcast to `shape`. */
  inputs: readonly View[];
  shape: Shape;
  /** Writes through this view's strides (of `shape` and `expr.dtype`) rather than new storage. */
  out?: View;
  /** The plan overrides in force when the op was issued. */
  overrides: Readonly<PlanOverrides>;
}
