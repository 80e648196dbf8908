/**
 * Where compiled residuals run when asked for "auto" (src/scalar/compiled.ts): a cost model of
 * one Levenberg-Marquardt iteration on each device, with constants measured by `deno task mesh`
 * (bench/results/mesh-*.md), and the choice of how the GPU sums J^T r.
 * @module
 */

/** The size of a compiled problem, as the cost model sees it. */
export interface ResidualProblemSize {
  residuals: number;
  parameters: number;
  /** Jacobian entries (structural nonzeros). */
  entries: number;
  /** Tape instructions summed over all residuals. */
  instructions: number;
  /** Conjugate-gradient iterations per step. */
  cgIterations: number;
}

/**
 * Measured constants (`deno task mesh` and bench/residuals.ts on an NVIDIA H200 and its host's
 * CPU, one thread; bench/results/mesh-nvidia-h200.md). GPU: the cost of one recorded dispatch as
 * a step's wall time shows it on small problems (host recording, launch, the read-backs' latency
 * spread over a run), and of one Jacobian entry in one pass (J p, J^T t). CPU: nanoseconds per
 * tape instruction per instance (forward and reverse) and per Jacobian entry per pass. The
 * crossover they predict, some 1,500 residuals, is the measured one's order (between 288 and
 * 1,128 on the H200's host).
 */
export const RESIDUAL_COSTS = {
  gpuPerDispatchUs: 20,
  gpuPerEntryPassNs: 0.015,
  cpuPerInstructionNs: 5,
  cpuPerEntryPassNs: 2.5,
};

/** Predicted microseconds of one Levenberg-Marquardt iteration on each device. */
export function iterationCost(size: ResidualProblemSize): { gpu: number; cpu: number } {
  const c = RESIDUAL_COSTS;
  // Passes over the Jacobian: J^T r and diag once, J p and J^T t per CG iteration.
  const passes = 1 + 2 * size.cgIterations;
  const dispatches = 5 + 3 * size.cgIterations;
  const gpu = dispatches * c.gpuPerDispatchUs + (passes * size.entries * c.gpuPerEntryPassNs) / 1e3;
  // The tape runs forward and backward at x, forward at the trial point.
  const cpu = (2.5 * size.instructions * c.cpuPerInstructionNs +
    passes * size.entries * c.cpuPerEntryPassNs) / 1e3;
  return { gpu, cpu };
}

/**
 * "gpu" or "cpu" for a problem of `size`: the faster by {@link iterationCost}, but the CPU below
 * `fallbackThreshold` residuals when one is given.
 *
 * @example
 * ```ts
 * import { chooseResidualDevice } from "./residuals.ts";
 * const size = { residuals: 100, parameters: 30, entries: 300, instructions: 1500, cgIterations: 20 };
 * chooseResidualDevice(size, true); // "cpu": too small for the GPU's fixed costs
 * ```
 */
export function chooseResidualDevice(
  size: ResidualProblemSize,
  gpuAvailable: boolean,
  fallbackThreshold?: number,
): "gpu" | "cpu" {
  if (!gpuAvailable) return "cpu";
  if (fallbackThreshold !== undefined && size.residuals < fallbackThreshold) return "cpu";
  const { gpu, cpu } = iterationCost(size);
  return gpu < cpu ? "gpu" : "cpu";
}

/**
 * How the GPU sums J^T r for gradients: "gather" (over the Jacobian's columns, deterministic) or
 * "atomic" (float32 atomic adds as residuals are evaluated: one dispatch instead of two). Gather
 * measured faster on the H200 (bench/results/residuals-nvidia-h200.md: 0.016 against 0.022 ms
 * for the 40,962-vertex edge energy's gradient, GPU timestamps): the atomics contend on shared
 * vertices. So "atomic" only when asked for.
 *
 * @example
 * ```ts
 * import { chooseAccumulation } from "./residuals.ts";
 * chooseAccumulation(); // "gather"
 * ```
 */
export function chooseAccumulation(): "gather" | "atomic" {
  return "gather";
}
