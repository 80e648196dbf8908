/**
 * `CompiledResiduals` (issue 26): a residual function over scalar parameters, traced once into
 * graphs, grouped by topology (one kernel per shape, src/plans/residuals.ts) and prepared on the
 * GPU (WGSL, a Levenberg-Marquardt loop on the device) or the CPU (a WASM tape). Evaluate it,
 * differentiate it, or solve it; `nonlinearLeastSquares` and `lbfgs` (src/scalar/solve.ts) wrap it.
 * @module
 */
import { checkFunction, describe, ValueError } from "../core/errors.ts";
import { checkOptions } from "../core/options.ts";
import type {
  PreparedResiduals,
  ResidualProgram,
  SolveSettings,
  StopReason,
} from "../contract/residuals.ts";
import { chooseAccumulation, chooseResidualDevice } from "../heuristics/residuals.ts";
import { backendFor, gpuBackendOf, runtime } from "../runtime.ts";
import { compileProgram } from "./program.ts";
import { Value } from "./value.ts";

/** Options of {@link CompiledResiduals.compile}. */
export interface CompileOptions {
  /**
   * "gpu" (WGSL kernels), "cpu" (the WASM tape) or "auto" (default): the device a cost model of
   * one Levenberg-Marquardt iteration (src/heuristics/residuals.ts, measured constants) predicts
   * faster; the CPU where there is no GPU.
   */
  backend?: "cpu" | "gpu" | "auto";
  /** GPU solves: iterations recorded between two read-backs of the solver's state (default 8). */
  batchSize?: number;
  /** "auto": fewer residuals than this always run on the CPU (default: the cost model decides). */
  fallbackThreshold?: number;
  /**
   * How the GPU sums J^T r for `valueAndGradient`: "gather" over the Jacobian's columns,
   * "atomic" (float32 atomics, where the device has them) or "auto" (default: measured choice).
   */
  accumulation?: "auto" | "gather" | "atomic";
}

/** Options of {@link CompiledResiduals.solve} and `nonlinearLeastSquares`. */
export interface SolveOptions {
  /** Iterations at most (default 100). */
  maxIterations?: number;
  /** Stop when an accepted step lowers the cost by less than this fraction (default 1e-6). */
  costTolerance?: number;
  /** Stop when max |J^T r| is at most this (default 1e-8). */
  gradientTolerance?: number;
  /** Levenberg-Marquardt's damping to start with (default 1e-3). */
  initialDamping?: number;
  /**
   * Conjugate-gradient iterations per step at most (default 10: on the mesh problem of
   * `deno task mesh` 10, 20 and 40 reach the same cost in as many steps; each costs the GPU three
   * dispatches a step).
   */
  cgIterations?: number;
  /** CG stops once its preconditioned residual is this fraction of its start (default 1e-3). */
  cgTolerance?: number;
}

/** What a solve reports. The solution is written into the parameters' `data`. */
export interface SolveResult {
  /** Iterations run (accepted and rejected steps). */
  iterations: number;
  /** Steps accepted. */
  accepted: number;
  /** 1/2 sum r^2 at the start. */
  initialCost: number;
  /** 1/2 sum r^2 at the end. */
  cost: number;
  /** max |J^T r| at the last evaluation. */
  maxGradient: number;
  /** Why it stopped. */
  reason: StopReason;
  /** It stopped at a tolerance (not at the iteration limit, a damping blow-up or a NaN). */
  converged: boolean;
  /** The device it ran on. */
  backend: "cpu" | "gpu";
  /**
   * How each step's damped normal equations were solved: "cholesky" (dense, exact: the CPU up to
   * 256 parameters) or "pcg" (Jacobi-preconditioned conjugate gradients, `cgIterations` at most).
   */
  linearSolver: "pcg" | "cholesky";
  /** Wall-clock milliseconds of the solve. */
  timeMs: number;
}

/** Milliseconds of each compile step. */
export interface CompileTimings {
  /** Calling the residual function (building the graphs). */
  traceMs: number;
  /** Topology keys, grouping, the program's arrays. */
  planMs: number;
  /** Kernels (WGSL or the WASM tape) and the device's buffers. */
  prepareMs: number;
  /** All of it. */
  totalMs: number;
}

const DEFAULTS: Omit<SolveSettings, "iterationsPerRead"> = {
  maxIterations: 100,
  costTolerance: 1e-6,
  gradientTolerance: 1e-8,
  initialDamping: 1e-3,
  cgIterations: 10,
  cgTolerance: 1e-3,
};

/** An optional number option: undefined, or a number passing `test` (else a ValueError). */
export function checkOptionNumber(
  op: string,
  name: string,
  value: unknown,
  test: (v: number) => boolean,
  expected: string,
): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "number" || !test(value)) {
    throw new ValueError({ op, argument: `options.${name}`, expected, received: describe(value) });
  }
  return value;
}

const positiveInteger = (v: number) => Number.isInteger(v) && v >= 1;
const nonNegative = (v: number) => v >= 0 && v < Infinity;

/** The residual function's result, checked: an array of Values. */
export function checkResiduals(op: string, out: unknown, what = "residualFn"): Value[] {
  if (!Array.isArray(out)) {
    throw new ValueError({
      op,
      argument: what,
      expected: "a function returning an array of Values",
      received: `a function returning ${describe(out)}`,
    });
  }
  if (out.length === 0) {
    throw new ValueError({
      op,
      argument: what,
      expected: "at least one residual",
      received: "an empty array",
    });
  }
  out.forEach((r, i) => {
    if (!(r instanceof Value)) {
      throw new ValueError({
        op,
        argument: `${what}()[${i}]`,
        expected: "a Value",
        received: describe(r),
      });
    }
  });
  return out;
}

/** The parameters, checked: a non-empty array (each is checked by the program). */
export function checkParams(op: string, params: unknown): readonly Value[] {
  if (!Array.isArray(params) || params.length === 0) {
    throw new ValueError({
      op,
      argument: "params",
      expected: "a non-empty array of parameters made by V.W",
      received: describe(params),
    });
  }
  return params;
}

/**
 * Residuals compiled for a device. Make one with {@link CompiledResiduals.compile}; `solve` runs
 * Levenberg-Marquardt on the device and writes the solution into the parameters.
 *
 * @example
 * ```ts
 * import { CompiledResiduals, V } from "@gyre/gyre";
 * // A line y = a x + b through three points.
 * const [a, b] = [V.W(0, "a"), V.W(0, "b")];
 * const points = [[0, 1], [1, 3], [2, 5]];
 * const compiled = CompiledResiduals.compile([a, b], ([a, b]) =>
 *   points.map(([x, y]) => V.sub(V.add(V.mul(a, x), b), y)), { backend: "cpu" });
 * const result = await compiled.solve();
 * result.converged; // true: a is 2, b is 1
 * compiled.dispose();
 * ```
 */
export class CompiledResiduals {
  /** The parameters, in the order the residual function receives them. */
  readonly params: readonly Value[];
  /** The device the residuals run on. */
  readonly backend: "cpu" | "gpu";
  /** Residuals the function returned. */
  readonly residualCount: number;
  /** Kernels: one per residual topology. */
  readonly kernelCount: number;
  /** How long compiling took. */
  readonly timings: CompileTimings;
  /** How gradients sum J^T r on this device ("gather" or "atomic"). */
  readonly accumulation: "gather" | "atomic";
  readonly #program: ResidualProgram;
  readonly #prepared: PreparedResiduals;
  readonly #batchSize: number;
  #disposed = false;

  private constructor(
    params: readonly Value[],
    program: ResidualProgram,
    prepared: PreparedResiduals,
    backend: "cpu" | "gpu",
    timings: CompileTimings,
    batchSize: number,
  ) {
    this.params = params;
    this.#program = program;
    this.#prepared = prepared;
    this.backend = backend;
    this.residualCount = program.residuals;
    this.kernelCount = program.groups.length;
    this.timings = timings;
    this.accumulation = prepared.accumulation;
    this.#batchSize = batchSize;
  }

  /**
   * Traces `residualFn(params)` once and compiles its residuals: graphs of equal topology share
   * one kernel, and constants that differ between them become data. Parameters must be made by
   * `V.W`, listed once, with finite values; every parameter a residual uses must be listed.
   *
   * @example
   * ```ts
   * import { CompiledResiduals, V } from "@gyre/gyre";
   * const x = [V.W(3), V.W(4)];
   * const compiled = CompiledResiduals.compile(x, ([p, q]) => [V.sub(p, 1), V.sub(q, 1)]);
   * compiled.kernelCount; // 1
   * compiled.dispose();
   * ```
   */
  static compile(
    params: readonly Value[],
    residualFn: (params: readonly Value[]) => readonly Value[],
    options: CompileOptions = {},
  ): CompiledResiduals {
    return CompiledResiduals.#compile("CompiledResiduals.compile", params, residualFn, options);
  }

  /** Internal: `compile` for the solvers, whose errors name them. */
  static _compileFor(
    op: string,
    params: readonly Value[],
    residualFn: (params: readonly Value[]) => readonly Value[],
    options: CompileOptions,
  ): CompiledResiduals {
    return CompiledResiduals.#compile(op, params, residualFn, options);
  }

  static #compile(
    op: string,
    params: readonly Value[],
    residualFn: (params: readonly Value[]) => readonly Value[],
    options: CompileOptions,
  ): CompiledResiduals {
    const started = performance.now();
    checkParams(op, params);
    checkFunction(op, "residualFn", residualFn, "a function of the parameters");
    const opts = checkCompileOptions(op, options);
    const residuals = checkResiduals(op, residualFn(params));
    const traced = performance.now();
    const program = compileProgram(params, residuals, op);
    const planned = performance.now();
    const instructions = program.groups.reduce((s, g) => s + g.tape.length * g.count, 0);
    const gpu = gpuBackendOf(runtime());
    let device: "cpu" | "gpu" = opts.backend === "auto"
      ? chooseResidualDevice(
        {
          residuals: program.residuals,
          parameters: program.parameters,
          entries: program.entries,
          instructions,
          cgIterations: DEFAULTS.cgIterations,
        },
        gpu !== null && gpu.lostReason === null,
        opts.fallbackThreshold,
      )
      : opts.backend;
    if (opts.backend === "auto" && device === "gpu" && !gpu) device = "cpu";
    const backend = backendFor(device === "gpu" ? "gpu" : "wasm", op, "options.backend");
    const accumulation = opts.accumulation === "auto" ? chooseAccumulation() : opts.accumulation;
    const prepared = backend.prepareResiduals(program, accumulation);
    const done = performance.now();
    return new CompiledResiduals(params, program, prepared, device, {
      traceMs: traced - started,
      planMs: planned - traced,
      prepareMs: done - planned,
      totalMs: done - started,
    }, opts.batchSize);
  }

  #check(op: string): Float64Array {
    if (this.#disposed) {
      throw new ValueError({
        op,
        argument: "this",
        expected: "compiled residuals not yet disposed",
        received: "disposed residuals",
      });
    }
    const x = new Float64Array(this.params.length);
    this.params.forEach((p, i) => {
      if (!Number.isFinite(p.data)) {
        throw new ValueError({
          op,
          argument: `params[${i}].data`,
          expected: "a finite value",
          received: String(p.data),
        });
      }
      x[i] = p.data;
    });
    return x;
  }

  /**
   * The residuals (in the order the function returned them) and the cost 1/2 sum r^2, at the
   * parameters' current values. On the GPU: float32, and one read-back (about 11 ms in Deno).
   *
   * @example
   * ```ts
   * import { CompiledResiduals, V } from "@gyre/gyre";
   * const x = V.W(3);
   * const compiled = CompiledResiduals.compile([x], ([p]) => [V.sub(p, 1)], { backend: "cpu" });
   * (await compiled.evaluate()).cost; // 2
   * compiled.dispose();
   * ```
   */
  async evaluate(): Promise<{ residuals: Float64Array; cost: number }> {
    const x = this.#check("CompiledResiduals.evaluate");
    const ev = await this.#prepared.evaluate(x);
    const residuals = new Float64Array(this.residualCount);
    let cost = 0;
    for (let r = 0; r < residuals.length; r++) {
      residuals[r] = ev.residuals[this.#program.rowOf[r]];
      cost += 0.5 * residuals[r] * residuals[r];
    }
    return { residuals, cost };
  }

  /**
   * The Jacobian at the parameters' current values, as coordinates: entry k is
   * d residual[rows[k]] / d params[cols[k]].
   *
   * @example
   * ```ts
   * import { CompiledResiduals, V } from "@gyre/gyre";
   * const [x, y] = [V.W(2), V.W(3)];
   * const compiled = CompiledResiduals.compile([x, y], ([p, q]) => [V.mul(p, q)], { backend: "cpu" });
   * const { values } = await compiled.jacobian(); // [3, 2]
   * compiled.dispose();
   * ```
   */
  async jacobian(): Promise<{ rows: Int32Array; cols: Int32Array; values: Float64Array }> {
    const x = this.#check("CompiledResiduals.jacobian");
    const ev = await this.#prepared.evaluate(x);
    const p = this.#program;
    const rowToResidual = new Int32Array(p.residuals);
    p.rowOf.forEach((row, r) => (rowToResidual[row] = r));
    const rows = new Int32Array(p.entries), cols = new Int32Array(p.entries);
    const values = new Float64Array(p.entries);
    let k = 0;
    for (const g of p.groups) {
      for (let i = 0; i < g.count; i++) {
        for (let s = 0; s < g.paramSlots; s++) {
          const e = g.entryBase + s * g.count + i;
          rows[k] = rowToResidual[g.firstRow + i];
          cols[k] = g.paramIndex[s * g.count + i];
          values[k++] = ev.jacobian[e];
        }
      }
    }
    return { rows, cols, values };
  }

  /**
   * A value and its gradient at the parameters' current values: of the sum of squared
   * residuals (`of` "squares", the default: sum r^2 and 2 J^T r) or of the sum of the residuals
   * taken as terms (`of` "sum": sum r and J^T 1).
   *
   * @example
   * ```ts
   * import { CompiledResiduals, V } from "@gyre/gyre";
   * const x = V.W(3);
   * const compiled = CompiledResiduals.compile([x], ([p]) => [V.sub(p, 1)], { backend: "cpu" });
   * const { value, gradient } = await compiled.valueAndGradient(); // 4, [4]
   * compiled.dispose();
   * ```
   */
  valueAndGradient(
    of: "squares" | "sum" = "squares",
  ): Promise<{ value: number; gradient: Float64Array }> {
    const op = "CompiledResiduals.valueAndGradient";
    const x = this.#check(op);
    if (of !== "squares" && of !== "sum") {
      throw new ValueError({
        op,
        argument: "of",
        expected: '"squares" or "sum"',
        received: describe(of),
      });
    }
    return this.#prepared.valueAndGradient(x, of);
  }

  /**
   * Levenberg-Marquardt from the parameters' current values: the damped normal equations
   * (J^T J + lambda diag(J^T J)) dx = -J^T r solved by Jacobi-preconditioned conjugate gradients,
   * a step accepted when it lowers the cost (damping then shrinks by Nielsen's rule), else the
   * damping grows. On the GPU all of it runs on the device, and the state is read back every
   * `batchSize` iterations. The solution is written into the parameters' `data`.
   *
   * @example
   * ```ts
   * import { CompiledResiduals, V } from "@gyre/gyre";
   * const x = V.W(10);
   * const compiled = CompiledResiduals.compile([x], ([p]) => [V.sub(V.square(p), 4)], { backend: "cpu" });
   * await compiled.solve({ maxIterations: 50 });
   * x.data; // about 2
   * compiled.dispose();
   * ```
   */
  async solve(options: SolveOptions = {}): Promise<SolveResult> {
    const op = "CompiledResiduals.solve";
    const x = this.#check(op);
    const settings = checkSolveOptions(op, options, this.#batchSize);
    const started = performance.now();
    const out = await this.#prepared.solve(x, settings);
    const timeMs = performance.now() - started;
    this.params.forEach((p, i) => (p.data = out.x[i]));
    return {
      iterations: out.iterations,
      accepted: out.accepted,
      initialCost: out.initialCost,
      cost: out.cost,
      maxGradient: out.maxGradient,
      reason: out.reason,
      converged: out.reason === "costTolerance" || out.reason === "gradientTolerance",
      backend: this.backend,
      linearSolver: out.linearSolver,
      timeMs,
    };
  }

  /**
   * Frees the device's buffers; later calls throw. Idempotent.
   *
   * @example
   * ```ts
   * import { CompiledResiduals, V } from "@gyre/gyre";
   * const compiled = CompiledResiduals.compile([V.W(1)], ([p]) => [p], { backend: "cpu" });
   * compiled.dispose();
   * ```
   */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#prepared.dispose();
  }
}

/** The keys of {@link CompileOptions}. */
export const COMPILE_KEYS: readonly string[] = [
  "backend",
  "batchSize",
  "fallbackThreshold",
  "accumulation",
];
/** The keys of {@link SolveOptions}. */
export const SOLVE_KEYS: readonly string[] = [
  "maxIterations",
  "costTolerance",
  "gradientTolerance",
  "initialDamping",
  "cgIterations",
  "cgTolerance",
];

interface CheckedCompile {
  backend: "cpu" | "gpu" | "auto";
  batchSize: number;
  fallbackThreshold?: number;
  accumulation: "auto" | "gather" | "atomic";
}

/** Compile options checked, with their defaults. */
export function checkCompileOptions(
  op: string,
  options: unknown,
  accepted: readonly string[] = COMPILE_KEYS,
): CheckedCompile {
  const o = checkOptions(op, options as CompileOptions | undefined, accepted);
  const backend = o.backend ?? "auto";
  if (backend !== "cpu" && backend !== "gpu" && backend !== "auto") {
    throw new ValueError({
      op,
      argument: "options.backend",
      expected: '"cpu", "gpu" or "auto"',
      received: describe(backend),
    });
  }
  const accumulation = o.accumulation ?? "auto";
  if (accumulation !== "auto" && accumulation !== "gather" && accumulation !== "atomic") {
    throw new ValueError({
      op,
      argument: "options.accumulation",
      expected: '"auto", "gather" or "atomic"',
      received: describe(accumulation),
    });
  }
  const batchSize = checkOptionNumber(
    op,
    "batchSize",
    o.batchSize,
    positiveInteger,
    "an integer of at least 1",
  ) ?? 8;
  const fallbackThreshold = checkOptionNumber(
    op,
    "fallbackThreshold",
    o.fallbackThreshold,
    nonNegative,
    "a finite number of at least 0",
  );
  return {
    backend,
    batchSize,
    accumulation,
    ...(fallbackThreshold === undefined ? {} : { fallbackThreshold }),
  };
}

/** Solve options checked, with their defaults. */
export function checkSolveOptions(
  op: string,
  options: unknown,
  batchSize: number,
  accepted: readonly string[] = SOLVE_KEYS,
): SolveSettings {
  const o = checkOptions(op, options as SolveOptions | undefined, accepted);
  const positive = "an integer of at least 1";
  const tolerance = "a finite number of at least 0";
  return {
    maxIterations:
      checkOptionNumber(op, "maxIterations", o.maxIterations, positiveInteger, positive) ??
        DEFAULTS.maxIterations,
    costTolerance:
      checkOptionNumber(op, "costTolerance", o.costTolerance, nonNegative, tolerance) ??
        DEFAULTS.costTolerance,
    gradientTolerance:
      checkOptionNumber(op, "gradientTolerance", o.gradientTolerance, nonNegative, tolerance) ??
        DEFAULTS.gradientTolerance,
    initialDamping: checkOptionNumber(
      op,
      "initialDamping",
      o.initialDamping,
      (v) => v > 0 && v < Infinity,
      "a finite number above 0",
    ) ?? DEFAULTS.initialDamping,
    cgIterations:
      checkOptionNumber(op, "cgIterations", o.cgIterations, positiveInteger, positive) ??
        DEFAULTS.cgIterations,
    cgTolerance: checkOptionNumber(op, "cgTolerance", o.cgTolerance, nonNegative, tolerance) ??
      DEFAULTS.cgTolerance,
    iterationsPerRead: batchSize,
  };
}
