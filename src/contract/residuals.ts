/**
 * Compiled residuals (issue 26): the program a device runs — residual graphs grouped by topology,
 * each group a tape of lowered scalar instructions and its instances' data in
 * structure-of-arrays form, with the Jacobian's sparsity both ways — and the routine each device
 * implements over it: evaluation of residuals and Jacobian rows, gradients of sums of squares
 * or of sums, and Levenberg-Marquardt. Built by src/plans/residuals.ts from the front end's
 * traced graphs (src/scalar/).
 * @module
 */

export type { Instruction, ResidualGroup, ResidualProgram } from "../plans/residuals.ts";

/** Options of a Levenberg-Marquardt solve (defaults in src/scalar/solve.ts). */
export interface SolveSettings {
  maxIterations: number;
  /** Stop when an accepted step lowers the cost by less than this fraction of it. */
  costTolerance: number;
  /** Stop when max |J^T r| is at most this. */
  gradientTolerance: number;
  /** The damping lambda to start with. */
  initialDamping: number;
  /** Conjugate-gradient iterations per step at most. */
  cgIterations: number;
  /** CG stops when its preconditioned residual falls below this fraction of its start. */
  cgTolerance: number;
  /** GPU: iterations recorded per submission (the cost is read back after each). */
  iterationsPerRead: number;
}

/** Why a solve stopped. */
export type StopReason =
  | "gradientTolerance"
  | "costTolerance"
  | "maxIterations"
  | "damping"
  | "nonFinite";

/** What a device's solve reports (parameters are returned, not yet written back). */
export interface SolveOutcome {
  x: Float64Array;
  iterations: number;
  accepted: number;
  initialCost: number;
  cost: number;
  maxGradient: number;
  reason: StopReason;
  /** Device work recorded (GPU dispatches; WASM tape runs), for tests and the bench. */
  dispatches: number;
  /** How the damped normal equations were solved. */
  linearSolver: "pcg" | "cholesky";
}

/** Residuals and Jacobian entries at some parameters (float64 on every device). */
export interface Evaluation {
  /** By row (see `ResidualProgram.rowOf`). */
  residuals: Float64Array;
  /** Entry e of group g's slot s, instance i at g.entryBase + s * g.count + i. */
  jacobian: Float64Array;
}

/** A program prepared on a device: its data uploaded, its kernels compiled. */
export interface PreparedResiduals {
  readonly device: "gpu" | "wasm";
  /** Which way J^T v is summed: "gather" (over columns) or "atomic" (float32 atomics). */
  readonly accumulation: "gather" | "atomic";
  /** Residuals and Jacobian at `x`. */
  evaluate(x: Float64Array): Promise<Evaluation>;
  /**
   * `weight` "squares": sum r^2 and its gradient 2 J^T r; "sum": sum r and J^T 1. The value and
   * the gradient, at `x`.
   */
  valueAndGradient(
    x: Float64Array,
    weight: "squares" | "sum",
  ): Promise<{ value: number; gradient: Float64Array }>;
  /** Levenberg-Marquardt from `x`. */
  solve(x: Float64Array, settings: SolveSettings): Promise<SolveOutcome>;
  /** Frees the device's buffers. */
  dispose(): void;
}
