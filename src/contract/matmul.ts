/**
 * The matmul family's job: one validated matrix product (`matmul`, `linear`) over operand views
 * broadcast to `[...batch, M, K]` and `[...batch, K, N]`, with optional fused prologues (operands
 * computed as they are loaded) and an epilogue (bias, activation, or fused elementwise consumers).
 * Ops build it (src/ops/matmul.ts); each device runs it (src/gpu/matmul.ts, src/wasm/matmul.ts).
 * @module
 */
import type { PlanOverrides } from "../plans/overrides.ts";
import type { DType } from "../core/dtype.ts";
import type { Storage, View } from "../core/view.ts";
import type { Expr } from "../ir/expr.ts";

/** Storage dtypes with a matmul kernel. */
export type MatmulDType = "float32" | "float16" | "int32";

/** Activations a product's epilogue can apply. */
export type MatmulActivation = "relu" | "gelu" | "silu" | "tanh" | "sigmoid";

/** A validated product: operand views broadcast to `[...batch, M, K]` and `[...batch, K, N]`. */
export interface MatmulProblem {
  dtype: MatmulDType;
  m: number;
  n: number;
  k: number;
  batch: number[];
  outShape: number[];
  halfAccumulate: boolean;
}

/**
 * An operand computed inside the product's kernel as it is loaded: an elementwise expression
 * over `inputs`, views of the operand's `[...batch, rows, cols]` matrix view each.
 */
export interface MatmulPrologue {
  expr: Expr;
  inputs: View[];
  /** The ops folded in (for profiles and explain). */
  label: string;
}

/**
 * One non-empty product with K > 0: what `Backend.matmul` runs. An operand with a prologue has
 * no buffer of its own: its view is then the prologue input whose layout decides how tiles are
 * loaded (the first that varies along both matrix axes).
 */
export interface MatmulJob {
  op: string;
  /** The plan overrides in force when the op was issued. */
  overrides: Readonly<PlanOverrides>;
  problem: MatmulProblem;
  /** A as a view of `[...batch, M, K]` (no negative strides). */
  a: View;
  /** B as a view of `[...batch, K, N]` (no negative strides). */
  b: View;
  /** GPU only. */
  aPrologue: MatmulPrologue | null;
  /** GPU only. */
  bPrologue: MatmulPrologue | null;
  /**
   * Epilogue (GPU only): a bias added to every row (a contiguous view of [N]), then an
   * activation. The WASM device runs neither; the caller applies them to its result.
   */
  bias: View | null;
  activation: MatmulActivation | null;
  /**
   * A fused elementwise epilogue (GPU only; input 0: the product's value; inputs 1...: views of
   * the output's shape). The GPU path returns null when it cannot run it in the kernel.
   */
  epilogue?: { expr: Expr; inputs: View[] };
}

/** What a product makes: `[...batch, M, N]` contiguous storage of `dtype`. */
export interface MatmulResult {
  output: Storage;
  /**
   * The storage's dtype: the job's on the GPU; on WASM the compute dtype (float32 for float16,
   * which the caller casts back).
   */
  dtype: DType;
}

/** The views an operand reads: its prologue's inputs, or itself. */
export function operandInputs(view: View, prologue: MatmulPrologue | null): View[] {
  return prologue ? prologue.inputs : [view];
}
