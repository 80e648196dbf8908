/**
 * Compiled residuals, GPU against the WASM tape (issue 26), over random expression graphs: random
 * topologies of depth up to 12 (every op of the scalar table, sums, means, shared subgraphs,
 * normalisations of vectors that may have zero length), each compiled for several instances with
 * values from the whole domain (huge, subnormal, +-0, ordinary; constants also +-Inf and NaN).
 *
 * Tolerance: the WASM tape computes in float64 and must agree with a float64 JavaScript
 * evaluation of the same graph to 1e-9 (both NaN, or equal infinities). The GPU computes in float32; its residuals and Jacobian entries must fall inside
 * an envelope of float64 evaluations that emulate float32 work: every op's result (and each
 * chain-rule term) rounded to float32 in one run, perturbed by up to the op's error bound in ULPs
 * (1 for + - *, 3 for / and sqrt, 4 for the table's exp, log, sin, cos, tanh, sigmoid, 16 for pow,
 * tan and atan2) in six random runs, and every subnormal flushed to zero in one more (GPUs may
 * flush). An entry passes when it lies within the envelope widened by twice its width plus 4 ULPs
 * of its largest magnitude; NaN only where some run gave NaN; an infinity only where some run gave
 * that infinity or overflowed float32. Inputs are rounded, never perturbed: a wrong reduction of
 * sin's large arguments, say, cannot hide inside the envelope.
 * @module
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { SCALAR_OPS, type ScalarOp } from "../src/ir/scalar_table.ts";
import { compileProgram } from "../src/scalar/program.ts";
import { postOrder } from "../src/scalar/topology.ts";
import { V, type Value, Vec3 } from "../src/mod.ts";
import { gpuBackendOf, wasmBackendOf } from "../src/runtime.ts";
import { mulberry32 as uniform } from "./_random.ts";
import { devices } from "./_devices.ts";

const DEVICES = await devices();

/** Values from the whole domain of a parameter (finite) or a constant (anything). */
function draw(next: () => number, constant: boolean): number {
  const u = next();
  const special = [0, -0, 1e-40, -3e-42, 1e30, -2e25, 3.3e38, 1e-20];
  if (u < 0.25) return special[Math.floor(next() * special.length)];
  if (constant && u < 0.3) return [Infinity, -Infinity, NaN][Math.floor(next() * 3)];
  return (2 * next() - 1) * 10 ** (4 * next() - 2);
}

const UNARY: ScalarOp[] = [
  "neg",
  "abs",
  "sqrt",
  "exp",
  "log",
  "sin",
  "cos",
  "tan",
  "tanh",
  "sigmoid",
  "relu",
  "square",
];
const BINARY: ScalarOp[] = [
  "add",
  "sub",
  "mul",
  "div",
  "pow",
  "atan2",
  "min",
  "max",
  "less",
  "greater",
];

/**
 * A random graph over `params` (4 per instance): its structure from `shape` (so every instance of
 * one seed has one topology), its leaves' values from `values`.
 */
function randomGraph(
  shape: () => number,
  values: () => number,
  params: Value[],
  depth: number,
): Value {
  const made: Value[] = [];
  const build = (d: number): Value => {
    const u = shape();
    let node: Value;
    // Shared subgraphs; and past a budget of nodes only leaves and shared nodes, so that a deep
    // graph stays small (each case compiles a kernel).
    if (made.length > 2 && (u < 0.1 || made.length >= 40)) {
      return made[Math.floor(shape() * made.length)];
    }
    if (d === 0 || u < 0.2) {
      node = shape() < 0.6 ? params[Math.floor(shape() * params.length)] : V.C(draw(values, true));
    } else if (u < 0.5) {
      node = (V[UNARY[Math.floor(shape() * UNARY.length)] as "neg"])(build(d - 1));
    } else if (u < 0.8) {
      const op = BINARY[Math.floor(shape() * BINARY.length)] as "add";
      node = V[op](build(d - 1), build(d - 1));
    } else if (u < 0.85) node = V.clamp(build(d - 1), build(d - 1), build(d - 1));
    else if (u < 0.9) {
      node = V.where(V.less(build(d - 1), build(d - 1)), build(d - 1), build(d - 1));
    } else if (u < 0.95) {
      const terms = Array.from({ length: 1 + Math.floor(shape() * 4) }, () => build(d - 1));
      node = shape() < 0.5 ? V.sum(terms) : V.mean(terms);
    } else {
      // A normalisation, of a vector that is often zero.
      const a = build(d - 1);
      node = new Vec3(a, V.mul(a, 0), shape() < 0.5 ? V.C(0) : build(d - 1)).normalize().x;
    }
    made.push(node);
    return node;
  };
  return build(depth);
}

/** ULPs of float32 each op's GPU code may be off by (the bound the envelope perturbs with). */
const ULPS: Record<string, number> = {
  add: 1,
  sub: 1,
  mul: 1,
  neg: 0,
  abs: 0,
  square: 1,
  div: 3,
  sqrt: 3,
  exp: 4,
  log: 4,
  sin: 4,
  cos: 4,
  tanh: 4,
  sigmoid: 4,
  tan: 16,
  pow: 16,
  atan2: 16,
  relu: 0,
  min: 0,
  max: 0,
  less: 0,
  greater: 0,
  clamp: 0,
  where: 0,
  sum: 1,
  mean: 3,
};
const U = 2 ** -24;

type Mode =
  | { kind: "wasm" }
  | { kind: "exact" }
  | { kind: "f32" }
  | { kind: "ftz" }
  | { kind: "noise"; next: () => number };

/** Residual and gradient (by parameter) of `root` in float64, emulating float32 work by `mode`. */
function evaluate(root: Value, params: Value[], mode: Mode): { r: number; grad: number[] } {
  const nodes = postOrder(root, []);
  const ftz = (v: number) => (mode.kind === "ftz" && Math.abs(v) < 2 ** -126 ? v * 0 : v);
  const round = (v: number, ulps: number) => {
    if (mode.kind === "f32") return Math.fround(v);
    if (mode.kind === "noise") return v * (1 + (2 * mode.next() - 1) * ulps * U);
    return ftz(v);
  };
  const val = new Float64Array(nodes.length);
  nodes.forEach((node, k) => {
    if (node.inputs.length === 0) {
      // Inputs as the GPU reads them (float32), but as given for the WASM tape (float64).
      val[k] = mode.kind === "wasm" ? node.data : ftz(Math.fround(node.data));
      return;
    }
    const ins = node.inputs.map((i) => val[i._id]);
    let y: number;
    if (node.op === "sum" || node.op === "mean") {
      y = ins.reduce((s, v) => round(s + v, 1), 0);
      if (node.op === "mean") y = round(y / ins.length, 3);
    } else {
      y = round(
        SCALAR_OPS[node.op as ScalarOp].js(ins[0], ins[1] ?? 0, ins[2] ?? 0),
        ULPS[node.op],
      );
    }
    val[k] = y;
  });
  const adj = new Float64Array(nodes.length);
  adj[nodes.length - 1] = 1;
  for (let k = nodes.length - 1; k >= 0; k--) {
    const node = nodes[k];
    if (adj[k] === 0 || node.inputs.length === 0) continue;
    const ins = node.inputs.map((i) => val[i._id]);
    const local = node.op === "sum"
      ? ins.map(() => 1)
      : node.op === "mean"
      ? ins.map(() => 1 / ins.length)
      : SCALAR_OPS[node.op as ScalarOp].jsD(ins[0], ins[1] ?? 0, ins[2] ?? 0, val[k]);
    node.inputs.forEach((input, s) => {
      const l = round(local[s], ULPS[node.op] + 1);
      if (l !== 0) adj[input._id] = round(adj[input._id] + round(adj[k] * l, 1), 1);
    });
  }
  return {
    r: val[nodes.length - 1],
    grad: params.map((p) => (p._mark === root._mark ? adj[p._id] : 0)),
  };
}

/** Whether the GPU's `got` fits the envelope of `runs` (see the module comment). */
function fits(got: number, runs: number[]): boolean {
  if (Number.isNaN(got)) return runs.some(Number.isNaN);
  const finite = runs.filter(Number.isFinite);
  if (!Number.isFinite(got)) {
    return runs.includes(got) || finite.some((v) => Math.abs(v) > 3.4e38) ||
      (finite.length === 0 && runs.some(Number.isNaN));
  }
  if (finite.length === 0) return false;
  const lo = Math.min(...finite), hi = Math.max(...finite);
  const big = Math.max(Math.abs(lo), Math.abs(hi));
  const slack = 2 * (hi - lo) + 4 * U * big + 2 ** -120;
  return got >= lo - slack && got <= hi + slack;
}

if (DEVICES.includes("gpu")) {
  Deno.test("property residuals: GPU against the WASM tape over random graphs of the whole domain", async () => {
    const gpu = gpuBackendOf()!;
    let checked = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 2 ** 31 - 1 }),
        fc.integer({ min: 1, max: 12 }),
        fc.integer({ min: 1, max: 3 }),
        async (seed, depth, count) => {
          const values = uniform(seed ^ 0x5bd1e995);
          const params: Value[] = [];
          const roots: Value[] = [];
          for (let i = 0; i < count; i++) {
            const own = Array.from({ length: 4 }, () => V.W(draw(values, false)));
            params.push(...own);
            // One topology for every instance, another for the last.
            roots.push(randomGraph(uniform(seed + (i === 2 ? 1 : 0)), values, own, depth));
          }
          const program = compileProgram(params, roots);
          const x = Float64Array.from(params, (p) => p.data);
          const onGpu = gpu.prepareResiduals(program, "gather");
          const onCpu = wasmBackendOf().prepareResiduals(program);
          try {
            assert.equal(onGpu.device, "gpu");
            const [g, c] = [await onGpu.evaluate(x), await onCpu.evaluate(x)];
            roots.forEach((root, r) => {
              const row = program.rowOf[r];
              const group = program.groups.find((gr) =>
                row >= gr.firstRow && row < gr.firstRow + gr.count
              )!;
              const inst = row - group.firstRow;
              const exact = evaluate(root, params, { kind: "exact" });
              const wasm = evaluate(root, params, { kind: "wasm" });
              const runs = [
                exact,
                evaluate(root, params, { kind: "f32" }),
                evaluate(root, params, { kind: "ftz" }),
                ...Array.from(
                  { length: 6 },
                  (_, k) => evaluate(root, params, { kind: "noise", next: uniform(seed + 7 * k) }),
                ),
              ];
              const same = (a: number, b: number) =>
                Object.is(a, b) || (Number.isNaN(a) && Number.isNaN(b)) ||
                Math.abs(a - b) <= 1e-9 * Math.max(Math.abs(a), Math.abs(b));
              // WASM: float64, as the JavaScript evaluation.
              assert.ok(
                same(c.residuals[row], wasm.r),
                `wasm residual ${c.residuals[row]} vs ${wasm.r}`,
              );
              assert.ok(
                fits(g.residuals[row], runs.map((e) => e.r)),
                `gpu residual ${g.residuals[row]} outside ${
                  runs.map((e) => e.r)
                } (seed ${seed}, depth ${depth})`,
              );
              for (let s = 0; s < group.paramSlots; s++) {
                const e = group.entryBase + s * group.count + inst;
                const p = group.paramIndex[s * group.count + inst];
                assert.ok(
                  same(c.jacobian[e], wasm.grad[p]),
                  `wasm d/dp${p} ${c.jacobian[e]} vs ${wasm.grad[p]}`,
                );
                assert.ok(
                  fits(g.jacobian[e], runs.map((e) => e.grad[p])),
                  `gpu d r${r}/d p${p} ${g.jacobian[e]} outside ${
                    runs.map((e) => e.grad[p])
                  } (seed ${seed}, depth ${depth})`,
                );
                checked++;
              }
            });
          } finally {
            onGpu.dispose();
            onCpu.dispose();
          }
        },
      ),
      { numRuns: 40 },
    );
    assert.ok(checked > 100, `only ${checked} Jacobian entries checked`);
  });
}
