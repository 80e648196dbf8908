/**
 * Property test of the fused Adam step (src/gpu/optim.ts) against its reference, the update
 * composed of elementwise ops on WASM (`composedAdam`), over sizes around the vec4 width and
 * offsets off it, float32 and float16, Adam and AdamW with and without weight decay, maximize,
 * steps from 1 to 10^4, and values from the whole float domain: magnitudes 2^-30..2^30 with NaN,
 * infinities, signed zeros and subnormals mixed in (the second moment v drawn non-negative: it is
 * a running mean of squares, and no step makes it negative). Each case asserts the fused kernel
 * ran (its dispatch label).
 *
 * Tolerance, per element, u = 2^-24: each of the update's operations rounds once on both sides
 * (WGSL's sqrt and division within 2.5 ULP): m' within 8u (|b1 m| + |(1 - b1) g|), v' within
 * 8u (|b2 v| + |(1 - b2) g^2|) (g after the L2 term, itself within 2u (|g| + |l2 p|)), and the
 * parameter within 8u (|base| + |p'|) + lr_t (dm / d + |m'| dd / d^2) for the denominator
 * d = sqrt(v') / sqrt(1 - b2^t) + eps and its error dd = 8u sqrt(v') / sqrt(1 - b2^t) +
 * dv / (2 sqrt(v') sqrt(1 - b2^t)). Results below 2^-126 compare as zero (a GPU may flush
 * subnormals, inputs and intermediates alike), so an element may instead match the update of its
 * inputs flushed to zero, or, where m' or the step is subnormal, no step at all (a subnormal m'
 * over eps is a normal step, lr m' / eps); float16 tensors add their one final rounding (2^-11 relative), the reference
 * computing in float32 from the same rounded inputs, as the kernel does.
 * @module
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import * as gyre from "../src/mod.ts";
import { adamOptions, composedAdam } from "../src/autograd/_adam.ts";
import { fusedAdam } from "../src/ops/_optim.ts";
import { fillFloat, FULL, halfUlpOf, MIN_NORMAL, mulberry32, property } from "./_harness.ts";

const U = 2 ** -24;

interface Case {
  n: number;
  offset: number;
  dtype: "float32" | "float16";
  decoupled: boolean;
  weightDecay: number;
  maximize: boolean;
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  step: number;
  seed: number;
}

const arb: fc.Arbitrary<Case> = fc.record({
  n: fc.constantFrom(1, 3, 4, 7, 64, 1023, 1024, 4099),
  offset: fc.constantFrom(0, 0, 1, 4),
  dtype: fc.constantFrom<"float32" | "float16">("float32", "float32", "float16"),
  decoupled: fc.boolean(),
  weightDecay: fc.constantFrom(0, 0.01, 0.3),
  maximize: fc.boolean(),
  lr: fc.constantFrom(1e-4, 1e-3, 0.1),
  beta1: fc.constantFrom(0, 0.5, 0.9),
  beta2: fc.constantFrom(0.9, 0.999, 0.9999),
  eps: fc.constantFrom(1e-10, 1e-8, 1e-3),
  step: fc.constantFrom(1, 2, 10, 1000, 10000),
  seed: fc.integer({ min: 0, max: 2 ** 30 }),
});

function draw(c: Case, salt: number, nonNegative = false): Float32Array {
  const out = fillFloat(mulberry32(c.seed * 7 + salt), new Float32Array(c.n + c.offset), FULL);
  if (nonNegative) out.forEach((x, i) => (out[i] = Number.isNaN(x) ? x : Math.abs(x)));
  return out;
}

property(
  "optim/adam",
  "the fused Adam step against the composed update on WASM",
  arb,
  async (c) => {
    const host = [draw(c, 1), draw(c, 2), draw(c, 3), draw(c, 4, true)];
    const on = (device: gyre.DeviceName) =>
      host.map((d) => {
        const t = gyre.tensor(d, { device, dtype: c.dtype });
        return gyre.tidy(() => t.slice([c.offset, c.offset + c.n]).reshape([c.n]));
      });
    const gpu = on("gpu"), wasm = on("wasm");
    const o = adamOptions("test", {
      lr: c.lr,
      betas: [c.beta1, c.beta2],
      eps: c.eps,
      weightDecay: c.weightDecay,
      maximize: c.maximize,
    }, 0);
    const { kernels, outputs } = gyre.explain(() => {
      const r = fusedAdam(gpu[0], gpu[1], gpu[2], gpu[3], {
        lr: o.lr,
        beta1: o.beta1,
        beta2: o.beta2,
        eps: o.eps,
        l2: c.decoupled ? 0 : o.weightDecay,
        decay: c.decoupled && o.weightDecay ? 1 - o.lr * o.weightDecay : 1,
        step: c.step,
        maximize: c.maximize,
      });
      if (!r) throw new Error("no fused Adam kernel");
      return r;
    }, { print: false });
    assert.deepEqual(kernels.map((k) => k.kernel), ["adam"]);
    // The reference in float32 from the inputs as stored.
    const inputs = gyre.tidy(() => wasm.map((t) => t.cast("float32")));
    const [p2, [m2, v2]] = gyre.tidy(() =>
      composedAdam(o, c.decoupled, inputs[0], inputs[1], inputs[2], inputs[3], c.step)
    );
    // A GPU may flush subnormal inputs to (signed) zero, and the update can scale what a
    // subnormal gradient contributes by lr / eps into the normal range: the reference over
    // flushed inputs is a second answer such an element may give.
    const flushed = gyre.tidy(() =>
      inputs.map((t) => gyre.where(t.abs().less(MIN_NORMAL), t.mul(0), t))
    );
    const [p3, [m3, v3]] = gyre.tidy(() =>
      composedAdam(o, c.decoupled, flushed[0], flushed[1], flushed[2], flushed[3], c.step)
    );
    const read = await gyre.readAll([
      ...gyre.tidy(() => outputs.map((t) => t.cast("float32"))),
      p2,
      m2,
      v2,
      ...inputs,
      p3,
      m3,
      v3,
    ]);
    const [gp, gm, gv, rp, rm, rv, p, g0, m, v, fp, fm, fv] = read.map((a) => Array.from(a));
    const subnormalInput = (i: number) =>
      [p[i], g0[i], m[i], v[i]].some((x) => x !== 0 && Math.abs(x) < MIN_NORMAL);
    const half = c.dtype === "float16";
    const l2 = c.decoupled ? 0 : o.weightDecay;
    const sbc2 = Math.sqrt(1 - o.beta2 ** c.step);
    const lrT = o.lr / (1 - o.beta1 ** c.step);
    const check = (
      got: number,
      exact: number,
      tol: number,
      what: string,
      i: number,
      alternatives: number[] = [],
    ) => {
      for (const alternative of alternatives) {
        try {
          return check(got, exact, tol, what, i);
        } catch {
          exact = alternative;
          what = `${what} (flushed)`;
        }
      }
      // A float16 tensor holds the reference rounded once (within its tolerance of a tie, either
      // neighbour: one more half-precision spacing).
      const want = half ? Math.f16round(exact) : exact;
      const spacing = half && Number.isFinite(want) ? halfUlpOf(want) : 0;
      if (half && Number.isFinite(exact) && !Number.isFinite(want)) {
        // Past float16's range: the kernel rounds to the same infinity, or stays at the largest.
        return assert.ok(
          Math.abs(got) >= 65504 && Math.sign(got) === Math.sign(want),
          `${what}[${i}]`,
        );
      }
      if (Number.isNaN(want)) {
        return assert.ok(Number.isNaN(got), `${what}[${i}] gpu ${got}, wasm NaN`);
      }
      if (!Number.isFinite(want)) return assert.equal(got, want, `${what}[${i}]`);
      const flush = (x: number) => (Math.abs(x) < MIN_NORMAL ? 0 : x);
      const d = Math.abs(flush(got) - flush(want));
      assert.ok(
        d <= tol + spacing + MIN_NORMAL,
        `${what}[${i}] gpu ${got}, wasm ${want}, tolerance ${tol}`,
      );
    };
    for (let i = 0; i < c.n; i++) {
      const g = (c.maximize ? -g0[i] : g0[i]) + l2 * p[i];
      const gAbs = Math.abs(g0[i]) + Math.abs(l2 * p[i]);
      const dm = 8 * U * (Math.abs(o.beta1 * m[i]) + (1 - o.beta1) * gAbs);
      const dv = 8 * U * (Math.abs(o.beta2 * v[i]) + (1 - o.beta2) * gAbs * gAbs);
      const s = Math.sqrt(Math.abs(rv[i]));
      const d = s / sbc2 + o.eps;
      const dd = 8 * U * s / sbc2 + dv / (2 * Math.max(s, 1e-30) * sbc2);
      const base = c.decoupled && o.weightDecay ? p[i] * (1 - o.lr * o.weightDecay) : p[i];
      // An infinite denominator makes the step 0 (its error too); an infinite m or v with a
      // finite result leaves no bound to state (NaN): any value of the right class passes.
      let stepError = d === Infinity ? 0 : lrT * (dm / d + Math.abs(rm[i]) * dd / (d * d));
      if (Number.isNaN(stepError)) stepError = Infinity;
      const dp = 8 * U * (Math.abs(base) + Math.abs(rp[i])) + stepError;
      // Flushed answers: of the inputs (where one is subnormal), and, where m' or the step itself
      // is subnormal, no step at all (the parameter stays at its base).
      const flushedInputs = subnormalInput(i);
      const flushedStep = Number.isFinite(base) &&
        (Math.abs(rm[i]) < MIN_NORMAL || Math.abs(rp[i] - base) < 2 * MIN_NORMAL);
      check(gm[i], rm[i], Number.isNaN(dm) ? Infinity : dm, "m", i, flushedInputs ? [fm[i]] : []);
      check(gv[i], rv[i], Number.isNaN(dv) ? Infinity : dv, "v", i, flushedInputs ? [fv[i]] : []);
      check(gp[i], rp[i], dp, "p", i, [
        ...(flushedInputs ? [fp[i]] : []),
        ...(flushedStep ? [Math.fround(base)] : []),
      ]);
      void g;
    }
    gyre.tidy(() =>
      [...gpu, ...wasm, ...outputs, ...inputs, ...flushed, p2, m2, v2, p3, m3, v3].forEach((t) =>
        t.dispose()
      )
    );
  },
  { numRuns: 60 },
);
