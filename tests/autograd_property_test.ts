/**
 * Gradients on the GPU against gradients on WASM over random shapes (fast-check): compositions of
 * a broadcast binary op, a unary op, a reduction over random axes, a product, and a row op over
 * rows from 1 to 1030 long (the one-pass row backward takes rows of 512 and more); the loss is
 * sum(f(x, y) * w) for fixed random weights. Values are drawn from +-[0.25, 2] (the ops' smooth
 * region: tests/_grad_cases.ts says why finite differences need it; here it keeps log, sqrt and
 * division away from their poles, so both devices compute the same finite quantities).
 *
 * Tolerance 2e-4 * (1 + |wasm|) per element (1e-3 through a norm, whose backward multiplies its
 * input's rounding by up to 1 / std, about 10 for rows of 8 or more of these values), plus
 * 16 u F^2 for an input broadcast F-fold
 * (u = 2^-24): both devices run the same rules and their kernels agree within a few float32 ULPs
 * per op (transcendentals within WGSL's bounds); a broadcast input's gradient sums F terms (each
 * below 4 here) in a device-dependent order, within F u sum|terms| <= 4 u F^2 of each other,
 * doubled for each device, and the terms themselves may cancel to a tiny result (layerNorm's output
 * barely moves with a common factor), so that bound, not the result's size, is what they share.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import * as gyre from "../src/mod.ts";
import { devices } from "./_devices.ts";
import { mulberry32 } from "./_random.ts";

const DEVICES = await devices();

const UNARY: [string, (t: gyre.Tensor) => gyre.Tensor][] = [
  ["exp", (t) => t.mul(0.3).exp()],
  ["tanh", gyre.tanh],
  ["log abs", (t) => t.abs().log()],
  ["sigmoid", gyre.sigmoid],
  ["gelu", (t) => gyre.gelu(t)],
  ["square", gyre.square],
];
const BINARY: [string, (a: gyre.Tensor, b: gyre.Tensor) => gyre.Tensor][] = [
  ["add", gyre.add],
  ["mul", gyre.mul],
  ["div", (a, b) => a.div(b.abs().add(0.5))],
  ["maximum", (a, b) => gyre.maximum(a, b.add(0.013))],
];
const ROW: [string, (t: gyre.Tensor) => gyre.Tensor][] = [
  ["softmax", (t) => gyre.softmax(t)],
  ["logSoftmax", (t) => gyre.logSoftmax(t)],
  ["layerNorm", (t) => gyre.layerNorm(t)],
  ["rmsNorm", (t) => gyre.rmsNorm(t)],
  ["none", (t) => t],
];

interface Case {
  shape: number[];
  /** Which axes of y are 1 (broadcast). */
  broadcast: boolean[];
  unary: number;
  binary: number;
  row: number;
  reduceAxis: number;
  product: boolean;
  seed: number;
}

const arb: fc.Arbitrary<Case> = fc.record({
  shape: fc.array(fc.oneof(fc.integer({ min: 1, max: 6 }), fc.constantFrom(513, 1030)), {
    minLength: 1,
    maxLength: 3,
  }).filter((s) => s.reduce((a, b) => a * b, 1) <= 2100),
  broadcast: fc.array(fc.boolean(), { minLength: 3, maxLength: 3 }),
  unary: fc.integer({ min: 0, max: UNARY.length - 1 }),
  binary: fc.integer({ min: 0, max: BINARY.length - 1 }),
  row: fc.integer({ min: 0, max: ROW.length - 1 }),
  reduceAxis: fc.integer({ min: -1, max: 2 }),
  product: fc.boolean(),
  seed: fc.integer({ min: 0, max: 2 ** 30 }),
});

function data(n: number, seed: number): Float32Array {
  const rand = mulberry32(seed);
  return Float32Array.from({ length: n }, () => (rand() < 0.5 ? -1 : 1) * (0.25 + 1.75 * rand()));
}

/** The case's function of x and y, its output a tensor of any shape. */
function build(c: Case) {
  return (x: gyre.Tensor, y: gyre.Tensor) => {
    let t = BINARY[c.binary][1](x, y);
    t = UNARY[c.unary][1](t);
    // Row ops on rows of 8 or more: the norms' backward scales rounding by 1 / std, and three
    // random values near each other make that large (a conditioning, not a defect, question).
    if (t.rank >= 1 && t.shape[t.rank - 1] >= 8) t = ROW[c.row][1](t);
    if (c.product && t.rank >= 1) {
      const k = t.shape[t.rank - 1];
      const m = gyre.tensor(data(k * 3, 99), { shape: [k, 3], device: t.device });
      t = gyre.matmul(t, m);
    }
    if (c.reduceAxis >= 0 && c.reduceAxis < t.rank) t = t.sum({ axis: c.reduceAxis });
    return t;
  };
}

async function gradients(c: Case, device: gyre.DeviceName): Promise<number[][]> {
  const n = c.shape.reduce((a, b) => a * b, 1);
  const yShape = c.shape.map((d, i) => (c.broadcast[i] ? 1 : d));
  const x = gyre.tensor(data(n, c.seed), { shape: c.shape, device });
  const y = gyre.tensor(data(yShape.reduce((a, b) => a * b, 1), c.seed + 1), {
    shape: yShape,
    device,
  });
  const f = build(c);
  const outShape = gyre.tidy(() => f(x, y).shape);
  const w = gyre.tensor(data(outShape.reduce((a, b) => a * b, 1), c.seed + 2), {
    shape: outShape,
    device,
  });
  const grads = gyre.grad((a: gyre.Tensor, b: gyre.Tensor) => f(a, b).mul(w).sum(), {
    argnums: [0, 1],
  })(x, y) as gyre.Tensor[];
  const out = await gyre.readAll(grads);
  for (const t of [x, y, w, ...grads]) t.dispose();
  return out.map((a) => Array.from(a));
}

if (DEVICES.includes("gpu")) {
  Deno.test("autograd property: GPU gradients match WASM's over random shapes and compositions", async () => {
    await fc.assert(
      fc.asyncProperty(arb, async (c) => {
        const want = await gradients(c, "wasm");
        const got = await gradients(c, "gpu");
        const n = c.shape.reduce((a, b) => a * b, 1);
        const norm = ROW[c.row][0].endsWith("Norm") && c.shape[c.shape.length - 1] >= 8;
        const rtol = norm ? 1e-3 : 2e-4;
        want.forEach((list, i) =>
          list.forEach((v, k) => {
            const g = got[i][k];
            const fanIn = n / list.length;
            assert.ok(
              Math.abs(g - v) <= rtol * (1 + Math.abs(v)) + 16 * 2 ** -24 * fanIn * fanIn,
              `input ${i} element ${k}: gpu ${g}, wasm ${v} (${JSON.stringify(c)})`,
            );
          })
        );
      }),
      { numRuns: 30 },
    );
  });
}
