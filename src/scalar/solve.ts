/**
 * Solvers over compiled scalar graphs (issue 26): `nonlinearLeastSquares` (Levenberg-Marquardt,
 * on the device: src/scalar/compiled.ts) and `lbfgs` for smooth objectives written as sums of
 * terms, on the same compiled gradients.
 * @module
 */
import { checkFunction } from "../core/errors.ts";
import {
  checkCompileOptions,
  checkOptionNumber,
  checkParams,
  checkResiduals,
  checkSolveOptions,
  COMPILE_KEYS,
  CompiledResiduals,
  type CompileOptions,
  SOLVE_KEYS,
  type SolveOptions,
  type SolveResult,
} from "./compiled.ts";
import { Value } from "./value.ts";

/**
 * Minimises 1/2 sum r^2 over `params` by Levenberg-Marquardt: compiles `residualFn` (see
 * {@link CompiledResiduals.compile}), solves on the chosen device, writes the solution into the
 * parameters' `data` and frees the device's buffers.
 *
 * @example
 * ```ts
 * import { nonlinearLeastSquares, V } from "@gyre/gyre";
 * // The circle through three points: centre (cx, cy), radius rad.
 * const [cx, cy, rad] = [V.W(0.5), V.W(0.5), V.W(1)];
 * const points = [[1, 0], [0, 1], [-1, 0]];
 * const result = await nonlinearLeastSquares([cx, cy, rad], ([a, b, r]) =>
 *   points.map(([x, y]) => V.sub(V.sqrt(V.add(V.square(V.sub(x, a)), V.square(V.sub(y, b)))), r)),
 *   { backend: "cpu" });
 * result.converged; // true: centre (0, 0), radius 1
 * ```
 */
export async function nonlinearLeastSquares(
  params: readonly Value[],
  residualFn: (params: readonly Value[]) => readonly Value[],
  options: SolveOptions & CompileOptions = {},
): Promise<SolveResult> {
  const op = "nonlinearLeastSquares";
  checkParams(op, params);
  checkFunction(op, "residualFn", residualFn, "a function of the parameters");
  // Both sets of keys are checked before anything compiles.
  checkCompileOptions(op, options, [...COMPILE_KEYS, ...SOLVE_KEYS]);
  checkSolveOptions(op, options, 1, [...COMPILE_KEYS, ...SOLVE_KEYS]);
  const { backend, batchSize, fallbackThreshold, accumulation, ...solve } = options;
  const compileOptions: CompileOptions = {
    ...(backend === undefined ? {} : { backend }),
    ...(batchSize === undefined ? {} : { batchSize }),
    ...(fallbackThreshold === undefined ? {} : { fallbackThreshold }),
    ...(accumulation === undefined ? {} : { accumulation }),
  };
  const compiled = CompiledResiduals._compileFor(op, params, residualFn, compileOptions);
  try {
    return await compiled.solve(solve);
  } finally {
    compiled.dispose();
  }
}

/** Options of {@link lbfgs}. */
export interface LbfgsOptions extends CompileOptions {
  /** Iterations at most (default 100). */
  maxIterations?: number;
  /** Correction pairs kept (default 10). */
  memory?: number;
  /** Stop when max |gradient| is at most this (default 1e-6). */
  gradientTolerance?: number;
  /** Stop when a step changes the objective by at most this times max(|f|, 1) (default 1e-12). */
  costTolerance?: number;
}

/** What `lbfgs` reports. The minimiser is written into the parameters' `data`. */
export interface LbfgsResult {
  /** Iterations run. */
  iterations: number;
  /** Objective evaluations (each with its gradient). */
  evaluations: number;
  /** The objective at the start. */
  initialValue: number;
  /** The objective at the end. */
  value: number;
  /** max |gradient| at the end. */
  maxGradient: number;
  /** Why it stopped ("lineSearch": no step of 40 halvings lowered the objective). */
  reason: "gradientTolerance" | "costTolerance" | "maxIterations" | "lineSearch" | "nonFinite";
  /** It stopped at a tolerance. */
  converged: boolean;
  /** The device the gradients ran on. */
  backend: "cpu" | "gpu";
  /** Wall-clock milliseconds, compiling included. */
  timeMs: number;
}

/** The objective's terms: its array, or the terms of a root `V.sum`, or the one Value. */
function termsOf(op: string, out: unknown): Value[] {
  if (out instanceof Value) return out.op === "sum" ? [...out.inputs] : [out];
  return checkResiduals(op, out, "objectiveFn");
}

const LBFGS_KEYS = ["maxIterations", "memory", "gradientTolerance", "costTolerance"];

/**
 * Minimises a smooth objective, the sum of the terms `objectiveFn(params)` returns (an array of
 * Values, or one Value; a root `V.sum` is split into its terms so that terms of one shape share a
 * kernel), by L-BFGS with a backtracking (Armijo) line search. Gradients come from the compiled
 * terms; the iteration runs on the host, so on the GPU each evaluation costs a read-back (about
 * 11 ms in Deno): prefer `nonlinearLeastSquares` there where the objective is a sum of squares.
 *
 * @example
 * ```ts
 * import { lbfgs, V } from "@gyre/gyre";
 * // Rosenbrock's function, minimum 0 at (1, 1).
 * const [x, y] = [V.W(-1.2), V.W(1)];
 * const result = await lbfgs([x, y], ([a, b]) => [
 *   V.square(V.sub(1, a)),
 *   V.mul(100, V.square(V.sub(b, V.square(a)))),
 * ], { backend: "cpu", maxIterations: 200 });
 * result.converged; // true
 * ```
 */
export async function lbfgs(
  params: readonly Value[],
  objectiveFn: (params: readonly Value[]) => Value | readonly Value[],
  options: LbfgsOptions = {},
): Promise<LbfgsResult> {
  const op = "lbfgs";
  checkParams(op, params);
  checkFunction(op, "objectiveFn", objectiveFn, "a function of the parameters");
  checkCompileOptions(op, options, [...COMPILE_KEYS, ...LBFGS_KEYS]);
  const integer = (v: number) => Number.isInteger(v) && v >= 1;
  const tolerance = (v: number) => v >= 0 && v < Infinity;
  const [positive, finite] = ["an integer of at least 1", "a finite number of at least 0"];
  const o = options;
  const maxIterations =
    checkOptionNumber(op, "maxIterations", o.maxIterations, integer, positive) ??
      100;
  const memory = checkOptionNumber(op, "memory", o.memory, integer, positive) ?? 10;
  const gtol = checkOptionNumber(op, "gradientTolerance", o.gradientTolerance, tolerance, finite) ??
    1e-6;
  const ftol = checkOptionNumber(op, "costTolerance", o.costTolerance, tolerance, finite) ?? 1e-12;
  const { backend, batchSize, fallbackThreshold, accumulation } = options;
  const started = performance.now();
  const terms = termsOf(op, objectiveFn(params));
  const compiled = CompiledResiduals._compileFor(op, params, () => terms, {
    ...(backend === undefined ? {} : { backend }),
    ...(batchSize === undefined ? {} : { batchSize }),
    ...(fallbackThreshold === undefined ? {} : { fallbackThreshold }),
    ...(accumulation === undefined ? {} : { accumulation }),
  });
  try {
    const n = params.length;
    let evaluations = 0;
    const at = async (x: Float64Array) => {
      params.forEach((p, i) => (p.data = x[i]));
      evaluations++;
      return await compiled.valueAndGradient("sum");
    };
    const x = Float64Array.from(params, (p) => p.data);
    let { value: f, gradient: g } = await at(x);
    const initialValue = f;
    const s: Float64Array[] = [], y: Float64Array[] = [], rho: number[] = [];
    const dot = (a: Float64Array, b: Float64Array) => a.reduce((sum, v, i) => sum + v * b[i], 0);
    const maxAbs = (a: Float64Array) => a.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    let reason: LbfgsResult["reason"] = "maxIterations";
    let iterations = 0;
    if (!Number.isFinite(f)) reason = "nonFinite";
    while (reason === "maxIterations" && iterations < maxIterations) {
      if (maxAbs(g) <= gtol) {
        reason = "gradientTolerance";
        break;
      }
      // Two-loop recursion: d = -H g.
      const d = Float64Array.from(g, (v) => -v);
      const alpha: number[] = [];
      for (let k = s.length - 1; k >= 0; k--) {
        alpha[k] = rho[k] * dot(s[k], d);
        for (let i = 0; i < n; i++) d[i] -= alpha[k] * y[k][i];
      }
      if (s.length) {
        const last = s.length - 1;
        const gamma = dot(s[last], y[last]) / dot(y[last], y[last]);
        for (let i = 0; i < n; i++) d[i] *= gamma;
      }
      for (let k = 0; k < s.length; k++) {
        const beta = rho[k] * dot(y[k], d);
        for (let i = 0; i < n; i++) d[i] += s[k][i] * (alpha[k] - beta);
      }
      let slope = dot(g, d);
      if (!(slope < 0)) {
        // Not a descent direction (curvature lost to rounding): steepest descent, history reset.
        for (let i = 0; i < n; i++) d[i] = -g[i];
        slope = -dot(g, g);
        s.length = y.length = rho.length = 0;
      }
      let t = s.length ? 1 : Math.min(1, 1 / maxAbs(g));
      const xn = new Float64Array(n);
      let next: { value: number; gradient: Float64Array } | null = null;
      for (let tries = 0; tries < 40; tries++) {
        for (let i = 0; i < n; i++) xn[i] = x[i] + t * d[i];
        const trial = await at(xn);
        if (Number.isFinite(trial.value) && trial.value <= f + 1e-4 * t * slope) {
          next = trial;
          break;
        }
        t *= 0.5;
      }
      iterations++;
      if (!next) {
        reason = "lineSearch";
        break;
      }
      const sk = new Float64Array(n), yk = new Float64Array(n);
      for (let i = 0; i < n; i++) {
        sk[i] = xn[i] - x[i];
        yk[i] = next.gradient[i] - g[i];
      }
      const sy = dot(sk, yk);
      if (sy > 1e-12 * dot(yk, yk)) {
        s.push(sk), y.push(yk), rho.push(1 / sy);
        if (s.length > memory) s.shift(), y.shift(), rho.shift();
      }
      const change = Math.abs(f - next.value);
      x.set(xn);
      f = next.value;
      g = next.gradient;
      if (change <= ftol * Math.max(Math.abs(f), 1)) reason = "costTolerance";
    }
    params.forEach((p, i) => (p.data = x[i]));
    return {
      iterations,
      evaluations,
      initialValue,
      value: f,
      maxGradient: maxAbs(g),
      reason,
      converged: reason === "gradientTolerance" || reason === "costTolerance",
      backend: compiled.backend,
      timeMs: performance.now() - started,
    };
  } finally {
    compiled.dispose();
  }
}
