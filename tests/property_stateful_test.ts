/**
 * Property tests of the one-pass stateful reductions (src/gpu/_codegen_reduce.ts): logsumexp,
 * which keeps (running max, sum of exp(x - max)), and moments, which merges (count, mean, M2)
 * with Chan et al.'s update and backs `variance` and `std`. GPU against the WASM reference (two
 * passes in f64), over random shapes, axes, layouts and every forced plan variant.
 *
 * Tolerances, with k the longest chain of merges from an input to the result under the plan
 * (serial count per invocation plus the workgroup combine, per pass; the whole row for a thread
 * per row) and u = 2^-24:
 * - logsumexp: each merge rescales by one exp (WGSL: 3 + 2|x| ULP, tiny |x| here since the
 *   argument is a difference from the running max, and large differences only scale terms
 *   that no longer matter) and adds once, so the sum's relative error is under 6 k u, which is
 *   the absolute error of its logarithm; log itself adds 2^-21 absolute near 1 or 3 ULP; the
 *   reference rounds once (half a ULP). Infinities and NaN must match exactly.
 * - variance: Chan's update is stable (no cancellation): the relative error of M2 is under
 *   4 k u plus the rounding of the mean, u |mean| per element, squared into M2 as
 *   n (u |mean|)^2; then one division (2.5 ULP) and the reference's rounding.
 * float16 inputs compute in f32 and round the result to half precision, as the reference does:
 * the two roundings can land a half ULP either side, so one float16 ULP more (under 2^-10 |w|),
 * plus 2^-24 for float16 subnormals.
 */
import fc from "fast-check";
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import * as tuning from "../src/tuning.ts";
import { Bag, forcePlan, makeLayout, mulberry32, property, rt, ulpOf } from "./_harness.ts";

const U = 2 ** -24;

interface Case {
  op: "logsumexp" | "variance";
  dtype: "float32" | "float16";
  shape: number[];
  axis: number[] | null;
  keepdims: boolean;
  kind: "contiguous" | "transposed";
  override: Partial<tuning.ReduceChoice> | null;
  /** Values around `shift` with spread 1..4: a large shift tests variance's stability. */
  shift: number;
  special: boolean;
  seed: number;
}

const caseArb: fc.Arbitrary<Case> = fc.record({
  op: fc.constantFrom("logsumexp" as const, "variance" as const),
  dtype: fc.constantFrom("float32" as const, "float16" as const),
  shape: fc.constantFrom([1], [7], [256], [257], [3, 1021], [1031, 3], [4, 5, 6], [2, 70000], [
    8,
    0,
  ], [64, 4096]),
  axis: fc.option(fc.constantFrom([0], [1], [-1], [0, 1]), { freq: 3 }),
  keepdims: fc.boolean(),
  kind: fc.constantFrom("contiguous" as const, "transposed" as const),
  override: fc.constantFrom(
    null,
    { variant: "workgroup" as const, subgroups: true, chunks: 1 },
    { variant: "workgroup" as const, subgroups: false, chunks: 1 },
    { variant: "workgroup" as const, subgroups: false, chunks: 7 },
    { variant: "workgroup" as const, subgroups: true, chunks: 33 },
    {
      variant: "workgroup" as const,
      subgroups: false,
      chunks: 6,
      combineChunks: "second-pass" as const,
    },
    {
      variant: "workgroup" as const,
      subgroups: true,
      chunks: 9,
      combineChunks: "second-pass" as const,
    },
    { variant: "thread" as const, chunks: 1 },
    { variant: "thread" as const, chunks: 5 },
  ),
  shift: fc.constantFrom(0, 0, 100, 3000),
  special: fc.boolean(),
  seed: fc.integer(),
});

function chainDepth(choice: tuning.ReduceChoice, rowLength: number): number {
  if (choice.variant === "thread") return rowLength + choice.chunks;
  const combine = choice.subgroups
    ? 32 + choice.workgroupSize / 4
    : Math.log2(choice.workgroupSize);
  const pass = (n: number) => Math.ceil(n / choice.workgroupSize) + combine;
  return pass(Math.ceil(rowLength / choice.chunks)) + (choice.chunks > 1 ? pass(choice.chunks) : 0);
}

async function check(c: Case): Promise<void> {
  const bag = new Bag();
  try {
    const rank = c.shape.length;
    const axis = c.axis?.filter((a) => (a < 0 ? a + rank : a) < rank) ?? null;
    const rng = mulberry32(c.seed);
    const layout = makeLayout(rng, c.kind, c.shape);
    const n = layout.baseShape.reduce((a, b) => a * b, 1);
    const data = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      data[i] = c.shift + (rng() * 2 - 1) * (1 + 3 * rng());
      if (c.special && rng() < 0.01) data[i] = [NaN, Infinity, -Infinity][Math.floor(rng() * 3)];
    }
    const make = (device: gyre.DeviceName) =>
      bag.add(
        layout.view(
          bag.add(gyre.tensor(data, { shape: layout.baseShape, dtype: c.dtype, device })),
        ),
      );
    const options = {
      axis: axis === null || axis.length === 0 ? undefined : axis,
      keepdims: c.keepdims,
    };
    const run = (x: gyre.Tensor) =>
      bag.add(c.op === "logsumexp" ? gyre.logsumexp(x, options) : gyre.variance(x, options));
    forcePlan("reduce", c.override);
    let gpu: gyre.Tensor;
    try {
      gpu = run(make("gpu")).realize();
    } finally {
      forcePlan("reduce", null);
    }
    const ref = run(make("wasm"));
    const reduced = (options.axis ?? [...Array(rank).keys()]).map((a) => (a < 0 ? a + rank : a));
    const rowLength = reduced.reduce((p, a) => p * c.shape[a], 1);
    const rows = c.shape.reduce((p, d) => p * d, 1) / Math.max(rowLength, 1);
    const choice = tuning.planReduce(
      rt.caps ?? undefined,
      { rows, rowLength, ...(c.override ?? {}) } as never,
    );
    const k = Math.max(
      chainDepth({ ...choice, ...(c.override ?? {}) } as tuning.ReduceChoice, rowLength),
      rowLength > 0 ? 2 : 1,
    );
    assert.deepEqual(gpu.shape, ref.shape);
    const [g, w] = await gyre.readAll([gpu, ref]);
    // Both results are rounded to float16 (see the module doc).
    const half = c.dtype === "float16" ? 2 ** -10 : 0;
    const halfSubnormal = c.dtype === "float16" ? 2 ** -24 : 0;
    for (let i = 0; i < w.length; i++) {
      const label = `${c.op} ${c.dtype} [${c.shape}] axis ${
        JSON.stringify(options.axis)
      } ${layout.describe} ${JSON.stringify(c.override)} [${i}]: gpu ${g[i]} wasm ${w[i]} (k ${k})`;
      if (Number.isNaN(w[i]) || !Number.isFinite(w[i])) {
        assert.ok(Object.is(g[i], w[i]) || (Number.isNaN(g[i]) && Number.isNaN(w[i])), label);
        continue;
      }
      const tol = c.op === "logsumexp"
        ? 6 * k * U + 2 ** -20 + 4 * ulpOf(w[i]) + half * Math.abs(w[i]) + halfSubnormal
        : (4 * k * U + 3 * U + half) * Math.abs(w[i]) +
          rowLength * (U * (Math.abs(c.shift) + 4)) ** 2 * 4 + 4 * ulpOf(w[i]) + halfSubnormal;
      assert.ok(Math.abs(g[i] - w[i]) <= tol, `${label}, tolerance ${tol}`);
    }
  } finally {
    bag.dispose();
  }
}

property(
  ["reduce/logsumexp", "reduce/moments"],
  "one-pass logsumexp and variance match the two-pass f64 reference",
  caseArb,
  check,
  { numRuns: 40 },
);
