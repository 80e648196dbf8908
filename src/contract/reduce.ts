/**
 * The reduce family's job: a reduction over a set of axes of a view or of a fused elementwise
 * prologue, with an optional fused elementwise epilogue. Ops build it (src/ops/reduce.ts); each
 * device runs it (src/gpu/reduce.ts, src/wasm/reduce.ts).
 * @module
 */
import type { DType } from "../core/dtype.ts";
import type { View } from "../core/view.ts";
import type { Expr } from "../ir/expr.ts";
import type { PlanOverrides } from "../plans/overrides.ts";

/** Reductions every backend implements. */
export type ReduceOp =
  | "sum"
  | "prod"
  | "max"
  | "min"
  | "argmax"
  | "argmin"
  /** log(sum(exp(x))) in one pass, float32 in and out. */
  | "logsumexp"
  /** The sum of squared deviations from the mean (M2), one pass, float32 in and out. */
  | "moments";

/**
 * An elementwise expression standing in for a tensor (a fused prologue): `inputs[k]` are views
 * of one shape read by the expression's input leaf k; its value has dtype `dtype`.
 */
export interface FusedSource {
  expr: Expr;
  inputs: View[];
  dtype: DType;
}

/** One reduction: what `Backend.reduce` runs. */
export interface ReduceJob {
  op: string;
  reduction: ReduceOp;
  input: View | FusedSource;
  /** Reduced axes, sorted and distinct. */
  axes: readonly number[];
  /** The result's dtype; float16 input accumulates in float32. */
  outDtype: DType;
  /**
   * A fused elementwise consumer run on each result before it is stored (input 0: the result;
   * `inputs`: views over the result's shape). A device that cannot fuse it returns null.
   */
  epilogue?: { expr: Expr; inputs: View[] };
  /** The plan overrides in force when the op was issued. */
  overrides: Readonly<PlanOverrides>;
}
