/**
 * Compiled residuals on the CPU (src/contract/residuals.ts): residuals and Jacobian rows from the
 * WASM tape (asm/residuals.ts, float64, one instance of the module and its own memory per
 * program), and the same Levenberg-Marquardt as the GPU's (src/gpu/_codegen_residuals.ts: normal
 * equations gathered over the Jacobian's columns, Jacobi-preconditioned conjugate gradients, the
 * same acceptance and damping rule) in float64 on the host.
 * @module
 */
import type {
  Evaluation,
  PreparedResiduals,
  ResidualProgram,
  SolveOutcome,
  SolveSettings,
  StopReason,
} from "../contract/residuals.ts";
import { opcode } from "../ir/scalar_table.ts";
import { RESIDUALS_WASM_BASE64 } from "./_residuals_bytes.ts";

/** Where the module's own data ends (its stack and statics sit below). */
const HEAP_BASE = 65536;
/**
 * Parameters up to which a step is solved densely (Cholesky of J^T J + lambda D: n^3 / 6
 * multiply-adds, 2.8 million at 256, under a millisecond) rather than by conjugate gradients.
 */
const DENSE_LIMIT = 256;
/** Instances per chunk in asm/residuals.ts. */
const CHUNK = 64;

let compiled: WebAssembly.Module | null = null;

function residualModule(): WebAssembly.Module {
  compiled ??= new WebAssembly.Module(
    Uint8Array.from(atob(RESIDUALS_WASM_BASE64), (c) => c.charCodeAt(0)),
  );
  return compiled;
}

interface GroupAt {
  tape: number;
  len: number;
  literals: number;
  index: number;
  consts: number;
}

/**
 * The program prepared for the CPU.
 *
 * @example
 * ```ts
 * import { compileProgram } from "../scalar/program.ts";
 * import { V } from "../scalar/value.ts";
 * import { prepareResidualsWasm } from "./residuals.ts";
 * const x = [V.W(0), V.W(0)];
 * const prepared = prepareResidualsWasm(compileProgram(x, [V.sub(x[0], 1), V.sub(x[1], 2)]));
 * const { x: solution } = await prepared.solve(new Float64Array([0, 0]), {
 *   maxIterations: 20,
 *   costTolerance: 1e-12,
 *   gradientTolerance: 1e-12,
 *   initialDamping: 1e-3,
 *   cgIterations: 10,
 *   cgTolerance: 1e-6,
 *   iterationsPerRead: 1,
 * });
 * solution; // about [1, 2]
 * ```
 */
export function prepareResidualsWasm(program: ResidualProgram): PreparedResiduals {
  return new WasmResiduals(program);
}

class WasmResiduals implements PreparedResiduals {
  readonly device = "wasm" as const;
  readonly accumulation = "gather" as const;
  #program: ResidualProgram;
  #memory: WebAssembly.Memory;
  #run: (...args: number[]) => void;
  #groups: GroupAt[];
  #x: number;
  #r: number;
  #j: number;
  #vals: number;
  #adj: number;
  /** Tape runs (one per group per evaluation), for tests. */
  dispatches = 0;

  constructor(program: ResidualProgram) {
    this.#program = program;
    let at = HEAP_BASE;
    const take = (bytes: number) => {
      const start = at;
      at += Math.ceil(bytes / 16) * 16;
      return start;
    };
    const n = program.parameters, m = program.residuals;
    this.#x = take(8 * n);
    this.#r = take(8 * m);
    this.#j = take(8 * program.entries);
    let longest = 1;
    this.#groups = program.groups.map((g) => {
      longest = Math.max(longest, g.tape.length);
      return {
        tape: take(20 * g.tape.length),
        len: g.tape.length,
        literals: take(8 * g.tape.length),
        index: take(4 * g.paramIndex.length),
        consts: take(8 * g.constants.length),
      };
    });
    this.#vals = take(8 * longest * CHUNK);
    this.#adj = take(8 * longest * CHUNK);
    this.#memory = new WebAssembly.Memory({ initial: Math.ceil(at / 65536) + 1 });
    const instance = new WebAssembly.Instance(residualModule(), {
      env: {
        memory: this.#memory,
        abort: () => {
          throw new Error("internal: the residual tape aborted");
        },
      },
    });
    this.#run = instance.exports.residual_group as (...args: number[]) => void;
    const buffer = this.#memory.buffer;
    program.groups.forEach((g, k) => {
      const p = this.#groups[k];
      const words = new Int32Array(buffer, p.tape, 5 * g.tape.length);
      const literals = new Float64Array(buffer, p.literals, g.tape.length);
      g.tape.forEach((ins, i) => {
        words.set(
          [opcode(ins.op), ins.args[0] ?? 0, ins.args[1] ?? 0, ins.args[2] ?? 0, ins.slot],
          5 * i,
        );
        literals[i] = ins.value;
      });
      new Int32Array(buffer, p.index, g.paramIndex.length).set(g.paramIndex);
      new Float64Array(buffer, p.consts, g.constants.length).set(g.constants);
    });
  }

  /** Residuals (and the Jacobian when `jacobian`) at `x`, as views of the module's memory. */
  #evaluate(x: Float64Array, jacobian: boolean): { r: Float64Array; j: Float64Array } {
    const buffer = this.#memory.buffer;
    new Float64Array(buffer, this.#x, x.length).set(x);
    this.#program.groups.forEach((g, k) => {
      const p = this.#groups[k];
      this.#run(
        p.tape,
        p.len,
        p.literals,
        g.count,
        p.index,
        p.consts,
        this.#x,
        this.#r + 8 * g.firstRow,
        jacobian ? this.#j + 8 * g.entryBase : 0,
        this.#vals,
        this.#adj,
      );
      this.dispatches++;
    });
    return {
      r: new Float64Array(buffer, this.#r, this.#program.residuals),
      j: new Float64Array(buffer, this.#j, this.#program.entries),
    };
  }

  evaluate(x: Float64Array): Promise<Evaluation> {
    const { r, j } = this.#evaluate(x, true);
    return Promise.resolve({ residuals: r.slice(), jacobian: j.slice() });
  }

  /** out[j] = sum over column j of J[e] * v[row(e)]; and the column's sum of squares in sq. */
  #transposed(jac: Float64Array, v: Float64Array | null, out: Float64Array, sq?: Float64Array) {
    const { colStart, colEntry, colRow } = this.#program;
    for (let c = 0; c < out.length; c++) {
      let dot = 0, s = 0;
      for (let k = colStart[c]; k < colStart[c + 1]; k++) {
        const e = jac[colEntry[k]];
        dot += v ? e * v[colRow[k]] : e;
        s += e * e;
      }
      out[c] = dot;
      if (sq) sq[c] = s;
    }
  }

  /** t = J p. */
  #product(jac: Float64Array, p: Float64Array, t: Float64Array): void {
    for (const g of this.#program.groups) {
      for (let i = 0; i < g.count; i++) {
        let s = 0;
        for (let k = 0; k < g.paramSlots; k++) {
          s += jac[g.entryBase + k * g.count + i] * p[g.paramIndex[k * g.count + i]];
        }
        t[g.firstRow + i] = s;
      }
    }
  }

  /** dx solving (J^T J + lambda D) dx = -g densely; J^T J from each row's entries. */
  #denseStep(
    jac: Float64Array,
    d: Float64Array,
    g: Float64Array,
    lambda: number,
    dx: Float64Array,
  ): void {
    const n = g.length;
    const a = new Float64Array(n * n);
    for (const gr of this.#program.groups) {
      for (let i = 0; i < gr.count; i++) {
        for (let s = 0; s < gr.paramSlots; s++) {
          const js = gr.paramIndex[s * gr.count + i], vs = jac[gr.entryBase + s * gr.count + i];
          for (let t = 0; t < gr.paramSlots; t++) {
            a[js * n + gr.paramIndex[t * gr.count + i]] += vs *
              jac[gr.entryBase + t * gr.count + i];
          }
        }
      }
    }
    for (let c = 0; c < n; c++) a[c * n + c] += lambda * d[c];
    // In place: the lower triangle becomes L with L L^T = A (A is positive definite: D > 0).
    for (let j = 0; j < n; j++) {
      let diag = a[j * n + j];
      for (let k = 0; k < j; k++) diag -= a[j * n + k] * a[j * n + k];
      const l = Math.sqrt(Math.max(diag, 1e-300));
      a[j * n + j] = l;
      for (let i = j + 1; i < n; i++) {
        let v = a[i * n + j];
        for (let k = 0; k < j; k++) v -= a[i * n + k] * a[j * n + k];
        a[i * n + j] = v / l;
      }
    }
    for (let i = 0; i < n; i++) {
      let v = -g[i];
      for (let k = 0; k < i; k++) v -= a[i * n + k] * dx[k];
      dx[i] = v / a[i * n + i];
    }
    for (let i = n - 1; i >= 0; i--) {
      let v = dx[i];
      for (let k = i + 1; k < n; k++) v -= a[k * n + i] * dx[k];
      dx[i] = v / a[i * n + i];
    }
  }

  valueAndGradient(
    x: Float64Array,
    weight: "squares" | "sum",
  ): Promise<{ value: number; gradient: Float64Array }> {
    const { r, j } = this.#evaluate(x, true);
    const gradient = new Float64Array(this.#program.parameters);
    let value = 0;
    if (weight === "sum") {
      for (const v of r) value += v;
      this.#transposed(j, null, gradient);
    } else {
      for (const v of r) value += v * v;
      this.#transposed(j, r, gradient);
      for (let c = 0; c < gradient.length; c++) gradient[c] *= 2;
    }
    return Promise.resolve({ value, gradient });
  }

  solve(x0: Float64Array, s: SolveSettings): Promise<SolveOutcome> {
    const n = this.#program.parameters, m = this.#program.residuals;
    const start = this.dispatches;
    const x = Float64Array.from(x0);
    const [g, d, dx, cr, z, p, q, xt] = Array.from({ length: 8 }, () => new Float64Array(n));
    const r = new Float64Array(m), t = new Float64Array(m);
    let lambda = s.initialDamping, nu = 2;
    let iterations = 0, accepted = 0, initialCost = NaN, cost = NaN, maxGradient = 0;
    let reason: StopReason = "maxIterations";
    const dot = (a: Float64Array, b: Float64Array) => {
      let sum = 0;
      for (let i = 0; i < a.length; i++) sum += a[i] * b[i];
      return sum;
    };
    while (iterations < s.maxIterations) {
      const ev = this.#evaluate(x, true);
      r.set(ev.r);
      const jac = ev.j;
      cost = 0.5 * dot(r, r);
      if (iterations === 0) initialCost = cost;
      if (!Number.isFinite(cost)) {
        reason = "nonFinite";
        break;
      }
      this.#transposed(jac, r, g, d);
      maxGradient = 0;
      for (let c = 0; c < n; c++) {
        d[c] = Math.min(Math.max(d[c], 1e-6), 1e30);
        maxGradient = Math.max(maxGradient, Math.abs(g[c]));
      }
      if (maxGradient <= s.gradientTolerance) {
        reason = "gradientTolerance";
        break;
      }
      if (n <= DENSE_LIMIT) {
        // Small problems: J^T J + lambda D assembled densely and solved exactly (Cholesky).
        this.#denseStep(jac, d, g, lambda, dx);
      } else {
        // Jacobi-preconditioned CG on (J^T J + lambda D) dx = -g, from dx = 0.
        const precondition = (c: number) => d[c] * (1 + lambda);
        for (let c = 0; c < n; c++) {
          dx[c] = 0;
          cr[c] = -g[c];
          z[c] = cr[c] / precondition(c);
          p[c] = z[c];
        }
        let rz = dot(cr, z), before = 0;
        const rz0 = rz;
        for (let k = 0; k < s.cgIterations; k++) {
          if (k > 0) {
            const beta = before > 0 && rz > 0 ? rz / before : 0;
            for (let c = 0; c < n; c++) p[c] = z[c] + beta * p[c];
          }
          this.#product(jac, p, t);
          this.#transposed(jac, t, q);
          for (let c = 0; c < n; c++) q[c] += lambda * d[c] * p[c];
          const pq = dot(p, q);
          const go = pq > 0 && rz > s.cgTolerance * s.cgTolerance * rz0;
          const alpha = go ? rz / pq : 0;
          for (let c = 0; c < n; c++) {
            dx[c] += alpha * p[c];
            cr[c] -= alpha * q[c];
            z[c] = go ? cr[c] / precondition(c) : 0;
          }
          before = rz;
          rz = dot(cr, z);
        }
      }
      let predicted = 0;
      for (let c = 0; c < n; c++) {
        xt[c] = x[c] + dx[c];
        predicted += 0.5 * dx[c] * (lambda * d[c] * dx[c] - g[c]);
      }
      const rt = this.#evaluate(xt, false).r;
      let trialCost = 0, reduction = 0;
      for (let i = 0; i < m; i++) {
        trialCost += 0.5 * rt[i] * rt[i];
        reduction += 0.5 * (r[i] - rt[i]) * (r[i] + rt[i]);
      }
      iterations++;
      if (predicted > 0 && reduction > 0 && Number.isFinite(trialCost)) {
        const rho = reduction / predicted;
        lambda *= Math.max(1 / 3, 1 - (2 * rho - 1) ** 3);
        nu = 2;
        x.set(xt);
        accepted++;
        const stop = reduction <= s.costTolerance * cost;
        cost = trialCost;
        if (stop) {
          reason = "costTolerance";
          break;
        }
      } else {
        lambda *= nu;
        nu *= 2;
        // The same rule as the GPU's (src/gpu/_codegen_residuals.ts, "accept").
        if (predicted <= s.costTolerance * cost) {
          reason = "costTolerance";
          break;
        }
        if (lambda > 1e30) {
          reason = "damping";
          break;
        }
      }
    }
    return Promise.resolve({
      x,
      iterations,
      accepted,
      initialCost,
      cost,
      maxGradient,
      reason,
      dispatches: this.dispatches - start,
      linearSolver: n <= DENSE_LIMIT ? "cholesky" : "pcg",
    });
  }

  dispose(): void {}
}
