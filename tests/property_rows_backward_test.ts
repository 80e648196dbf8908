/**
 * Property test of the one-pass row backward kernels (src/gpu/_codegen_rows_backward.ts) against
 * their reference, the composed backward (`composedRowBackward`: row sums and elementwise ops) on
 * WASM, over rows of 512 to 8192 elements (vec4 and scalar layouts, offsets from slicing),
 * float32 and float16, with and without a weight, on values from the whole float domain:
 * magnitudes 2^-20..2^20 and, in a quarter of the cases, NaN, infinities, signed zeros and
 * subnormals mixed in (not the largest finite values, which the rest of this bound excludes). (Magnitudes stop at 2^20 so that squares and row sums of 8192 stay finite:
 * past that a sum's overflow depends on its order, and the two sides may honestly disagree
 * between Inf and a finite value.) Each case asserts the one-pass kernel ran (its dispatch label).
 *
 * Tolerance, per element, with u = 2^-24 and H = 64 (the additions any term of a row sum passes
 * through: 8 registers, 8 shuffle or tree levels, 32 subgroup slots, and the reference's own
 * order, doubled): the composed formula's error bound with every sum S replaced by H u sum|terms|:
 * - softmax: |a| H u sum|g a| + 4u |dx|;
 * - logSoftmax: e^a H u sum|g| + 4u (|g| + e^a |sum g| + |dx|);
 * - layerNorm / rmsNorm: rstd (|gw| + mean|gw| + |xhat| mean|gw xhat|) times (H u + 4u) plus
 *   rstd |dx| times the error of rstd itself (H u relative on the variance, and the mean's error
 *   H u mean|x| times rstd). Results below 2^-126 compare as zero (a GPU may flush subnormals).
 * float16 rows add one half-precision rounding of the result (2^-11 relative).
 * @module
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import * as gyre from "../src/mod.ts";
import { composedRowBackward } from "../src/autograd/rows.ts";
import { fusedRowBackward } from "../src/ops/_rows_backward.ts";
import {
  fillFloat,
  FULL,
  halfUlpOf,
  MIN_NORMAL,
  mulberry32,
  property,
  SPECIALS_F32,
} from "./_harness.ts";

const U = 2 ** -24;
/** Whether the GPU flushes subnormals to zero (an NVIDIA GPU does; lavapipe does not). */
const FLUSHES = await (async () => {
  const t = gyre.tensor([1e-45], { device: "gpu" });
  const ne = gyre.tidy(() => t.notEqual(0));
  const [v] = await gyre.readAll([ne]);
  t.dispose();
  ne.dispose();
  return v[0] === 0;
})();
const H = 64;
type Kind = "softmax" | "logSoftmax" | "layerNorm" | "rmsNorm";

interface Case {
  kind: Kind;
  rows: number;
  len: number;
  offset: number;
  dtype: "float32" | "float16";
  weight: boolean;
  specials: boolean;
  seed: number;
}

const arb: fc.Arbitrary<Case> = fc.record({
  kind: fc.constantFrom<Kind>("softmax", "logSoftmax", "layerNorm", "rmsNorm"),
  rows: fc.integer({ min: 1, max: 5 }),
  len: fc.constantFrom(512, 513, 1020, 1024, 2047, 2048, 4096, 8192),
  offset: fc.constantFrom(0, 0, 1, 4),
  dtype: fc.constantFrom<"float32" | "float16">("float32", "float32", "float16"),
  weight: fc.boolean(),
  specials: fc.constantFrom(false, false, false, true),
  seed: fc.integer({ min: 0, max: 2 ** 30 }),
}).map((c) => ({
  // An offset off 4 reads scalars: at most 2048 of them a row (8 registers of 256).
  ...c,
  offset: c.len > 2048 && c.offset % 4 !== 0 ? 0 : c.offset,
}));

/** Host values of the case: `count` draws, with specials where the case asks for them. */
function draw(c: Case, count: number, salt: number): Float32Array {
  // Specials without the largest finite values: their sums overflow or not by order.
  const specials = SPECIALS_F32.filter((v) => !Number.isFinite(v) || Math.abs(v) <= 2.5);
  const domain = c.specials
    ? { ...FULL, minExp: -20, maxExp: 20, pSpecial: 0.01, specials }
    : { kind: "log" as const, minExp: -20, maxExp: 20 };
  return fillFloat(mulberry32(c.seed + salt), new Float32Array(count), domain);
}

/** The case's tensors on `device`: a, g (sliced at `offset`) and the weight. */
function tensors(
  c: Case,
  device: gyre.DeviceName,
  a: Float32Array,
  g: Float32Array,
  w: Float32Array,
) {
  const n = c.rows * c.len;
  const make = (data: Float32Array) => {
    const t = gyre.tensor(data, { shape: [data.length], device, dtype: c.dtype });
    return gyre.tidy(() => t.slice([c.offset, c.offset + n]).reshape([c.rows, c.len]));
  };
  return {
    a: make(a),
    g: make(g),
    w: c.weight ? gyre.tensor(w, { device, dtype: c.dtype }) : null,
  };
}

/** The per-element tolerance of the module doc, from the reference's own inputs (float64). */
function tolerances(c: Case, a: number[], g: number[], w: number[] | null, dx: number[]): number[] {
  const out: number[] = [];
  for (let r = 0; r < c.rows; r++) {
    const row = (v: number[], j: number) => v[r * c.len + j];
    const idx = Array.from({ length: c.len }, (_, j) => j);
    if (c.kind === "softmax") {
      const s = idx.reduce((t, j) => t + Math.abs(row(g, j) * row(a, j)), 0);
      for (const j of idx) out.push(Math.abs(row(a, j)) * H * U * s + 4 * U * Math.abs(row(dx, j)));
    } else if (c.kind === "logSoftmax") {
      const s = idx.reduce((t, j) => t + Math.abs(row(g, j)), 0);
      const sum = idx.reduce((t, j) => t + row(g, j), 0);
      for (const j of idx) {
        const e = Math.exp(row(a, j));
        out.push(
          e * H * U * s + 4 * U * (Math.abs(row(g, j)) + e * Math.abs(sum) + Math.abs(row(dx, j))),
        );
      }
    } else {
      const layer = c.kind === "layerNorm";
      const mean = layer ? idx.reduce((t, j) => t + row(a, j), 0) / c.len : 0;
      const meanAbs = idx.reduce((t, j) => t + Math.abs(row(a, j)), 0) / c.len;
      const v = idx.reduce((t, j) => t + (row(a, j) - mean) ** 2, 0) / c.len;
      const eps = layer ? 1e-5 : 1e-6;
      const rstd = 1 / Math.sqrt(v + eps);
      const gw = idx.map((j) => row(g, j) * (w ? w[j] : 1));
      const xhat = idx.map((j) => (row(a, j) - mean) * rstd);
      const mgw = gw.reduce((t, x) => t + Math.abs(x), 0) / c.len;
      const mgx = gw.reduce((t, x, j) => t + Math.abs(x * xhat[j]), 0) / c.len;
      const rstdError = H * U + H * U * meanAbs * rstd;
      for (const j of idx) {
        out.push(
          rstd * (Math.abs(gw[j]) + mgw + Math.abs(xhat[j]) * mgx) * (H * U + 4 * U) +
            Math.abs(row(dx, j)) * rstdError * (1 + Math.abs(xhat[j])),
        );
      }
    }
  }
  return out;
}

property(
  [
    "rows/softmax.backward",
    "rows/logSoftmax.backward",
    "rows/layerNorm.backward",
    "rows/rmsNorm.backward",
  ],
  "the one-pass row backward against the composed backward on WASM",
  arb,
  async (c) => {
    const n = c.rows * c.len + c.offset;
    // Softmax's a is its output: draws in (0, 1] keep the case one a softmax could give.
    const aHost = draw(c, n, 1);
    if (c.kind === "softmax") {
      aHost.forEach((
        v,
        i,
      ) => (aHost[i] = Number.isFinite(v) ? Math.min(1, Math.abs(v) / 2 ** 20) : v));
    }
    if (c.kind === "logSoftmax") {
      aHost.forEach((v, i) => (aHost[i] = Number.isFinite(v) ? -Math.abs(v) / 2 ** 16 : v));
    }
    const gHost = draw(c, n, 2), wHost = draw(c, c.len, 3);
    const eps = c.kind === "layerNorm" ? 1e-5 : c.kind === "rmsNorm" ? 1e-6 : 0;
    const gpu = tensors(c, "gpu", aHost, gHost, wHost);
    const wasm = tensors(c, "wasm", aHost, gHost, wHost);
    const { kernels, outputs } = gyre.explain(() => {
      const t = fusedRowBackward(c.kind, gpu.a, gpu.g, gpu.w, eps);
      if (!t) throw new Error(`no one-pass kernel for ${JSON.stringify(c)}`);
      return t;
    }, { print: false });
    assert.deepEqual(kernels.map((k) => k.kernel), [`${c.kind}.backward`]);
    // The reference in float32 from the inputs as stored (float16 rounds them once), as the
    // kernel computes: a float16 result may then differ by its one final rounding.
    const inputs = gyre.tidy(() =>
      [wasm.a, wasm.g, ...(wasm.w ? [wasm.w] : [])].map((t) => t.cast("float32"))
    );
    const want = gyre.tidy(() =>
      composedRowBackward(c.kind, inputs[0], inputs[1], inputs[2] ?? null, eps, [1])
    );
    const [got, ref, a, g, w] = await gyre.readAll([
      gyre.tidy(() => outputs[0].cast("float32")),
      want,
      ...inputs,
    ]);
    const tol = tolerances(
      c,
      Array.from(a),
      Array.from(g),
      w ? Array.from(w) : null,
      Array.from(ref),
    );
    const half = c.dtype === "float16";
    ref.forEach((exact, i) => {
      const x = got[i];
      // A float16 result is the reference rounded once (either neighbour near a tie).
      const r = half ? Math.f16round(exact) : exact;
      const spacing = half && Number.isFinite(r) ? halfUlpOf(r) : 0;
      if (half && Number.isFinite(exact) && !Number.isFinite(r)) {
        return assert.ok(Math.abs(x) >= 65504 && Math.sign(x) === Math.sign(r), `[${i}]`);
      }
      // A GPU that flushes subnormals (inputs and intermediates) to zero turns 1e-40 * Inf = Inf
      // into 0 * Inf = NaN: where the reference is infinite, such a device may give NaN.
      if (!Number.isFinite(r) && FLUSHES && Number.isNaN(x)) return;
      if (Number.isNaN(r)) return assert.ok(Number.isNaN(x), `[${i}] gpu ${x}, wasm NaN`);
      if (!Number.isFinite(r)) return assert.equal(x, r, `[${i}]`);
      const flush = (v: number) => (Math.abs(v) < MIN_NORMAL ? 0 : v);
      const d = Math.abs(flush(x) - flush(r));
      assert.ok(
        d <= tol[i] + spacing + MIN_NORMAL,
        `[${i}] gpu ${x}, wasm ${r}, tolerance ${tol[i]}`,
      );
    });
    for (const t of [outputs[0], want, ...inputs, gpu.a, gpu.g, wasm.a, wasm.g]) t.dispose();
    gpu.w?.dispose();
    wasm.w?.dispose();
  },
  { numRuns: 40 },
);
