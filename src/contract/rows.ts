/**
 * The rows family's job: softmax, logSoftmax, layerNorm and rmsNorm over any set of axes (the
 * normalised axes of each kept index form one row). Ops build it (src/ops/rows.ts); each device
 * runs it (src/gpu/rows.ts, src/wasm/rows.ts).
 * @module
 */
import type { Storage, View } from "../core/view.ts";
import type { Expr } from "../ir/expr.ts";
import type { PlanOverrides } from "../plans/overrides.ts";

/** The row operations. */
export type RowKind = "softmax" | "logSoftmax" | "layerNorm" | "rmsNorm";

/** One row operation over the `axes` of `x`: what `Backend.rows` runs. */
export interface RowsJob {
  op: string;
  /** The plan overrides in force when the op was issued. */
  overrides: Readonly<PlanOverrides>;
  kind: RowKind;
  x: View;
  /** Normalised axes, sorted. */
  axes: readonly number[];
  eps: number;
  weight: View | null;
  bias: View | null;
  /** Affine index (row % period) * scale + j / divisor; null for element j of the row. */
  indexed: { period: number; scale: number; divisor: number } | null;
  /** Also return per-row statistics (mean at [r], variance at [rows + r], float32). */
  stats: boolean;
  /**
   * A fused elementwise epilogue (input 0: the op's value; inputs 1...: views of the output's
   * shape). The GPU path returns null when it cannot run it in the row kernel.
   */
  epilogue?: { expr: Expr; inputs: View[] };
  /**
   * A fused elementwise prologue (GPU only; input 0: the value read from x; inputs 1...:
   * contiguous views of x's shape). See `rowSource` in src/ops/rows.ts.
   */
  prologue?: { expr: Expr; inputs: View[] };
}

/** What a row job makes. */
export interface RowsResult {
  output: Storage;
  stats: Storage | null;
}

/**
 * The backward pass of a row op over contiguous rows along the last axis, in one pass that reads
 * each row once (a device routine; where a device has none the gradient rule composes ops):
 * - softmax: dx = y (g - sum(g y)), from the output `a` = y;
 * - logSoftmax: dx = g - exp(y) sum(g), from the output `a` = y;
 * - layerNorm: dx = rstd (gw - mean(gw) - xhat mean(gw xhat)), from the input `a` = x;
 * - rmsNorm: dx = r (gw - xhat mean(gw xhat)), from the input `a` = x.
 */
export interface RowsBackwardJob {
  op: string;
  kind: RowKind;
  /** The op's output (softmax, logSoftmax) or input (the norms): rows of `len`. */
  a: View;
  /** The cotangent, laid out as `a`. */
  g: View;
  /** The norms' weight ([len]) or null. */
  weight: View | null;
  rows: number;
  len: number;
  eps: number;
}
