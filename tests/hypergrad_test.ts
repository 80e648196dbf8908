/**
 * Hypergradients (src/autograd/hypergrad.ts) on ridge regression, whose validation loss has a
 * closed-form derivative in the penalty: the trained weights are u(l) = A^-1 b with
 * A = 2 (X^T X / n + l I), so du/dl = -A^-1 2 u and dL_val/dl = g . du/dl for g = dL_val/dw at u.
 * All three methods
 * against it, on both devices, within 2e-3 of its size: the inner training runs in float32 to a
 * residual far below that, and each method converges on this well-conditioned problem (A's
 * condition number about 10).
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import { devices, liveCounts, values } from "./_devices.ts";
import { prng } from "./_grad_cases.ts";

const DEVICES = await devices();

/** Solves the small dense system a x = b (Gaussian elimination, float64). */
function solve(a: number[][], b: number[]): number[] {
  const n = b.length, m = a.map((row, i) => [...row, b[i]]);
  for (let c = 0; c < n; c++) {
    let p = c;
    for (let r = c + 1; r < n; r++) if (Math.abs(m[r][c]) > Math.abs(m[p][c])) p = r;
    [m[c], m[p]] = [m[p], m[c]];
    for (let r = 0; r < n; r++) {
      if (r === c) continue;
      const f = m[r][c] / m[c][c];
      for (let k = c; k <= n; k++) m[r][k] -= f * m[c][k];
    }
  }
  return m.map((row, i) => row[n] / row[i]);
}

const d = 3, n = 24, nv = 12, lambda = 0.3;
const rand = prng(7);
const X = Array.from({ length: n }, () => Array.from({ length: d }, () => rand() * 2 - 1));
const Xv = Array.from({ length: nv }, () => Array.from({ length: d }, () => rand() * 2 - 1));
const truth = [1, -2, 0.5];
const noisy = (rows: number[][]) =>
  rows.map((r) => r.reduce((s, x, i) => s + x * truth[i], 0) + 0.3 * (rand() - 0.5));
const y = noisy(X), yv = noisy(Xv);

function closedForm(): { w: number[]; dl: number } {
  const A = Array.from(
    { length: d },
    (_, i) =>
      Array.from(
        { length: d },
        (_, j) => 2 * (X.reduce((s, r) => s + r[i] * r[j], 0) / n + (i === j ? lambda : 0)),
      ),
  );
  const b = Array.from({ length: d }, (_, i) => 2 * X.reduce((s, r, k) => s + r[i] * y[k], 0) / n);
  const w = solve(A, b);
  const dw = solve(A, w.map((x) => -2 * x));
  const resid = Xv.map((r, k) => r.reduce((s, x, i) => s + x * w[i], 0) - yv[k]);
  const g = Array.from(
    { length: d },
    (_, i) => 2 * Xv.reduce((s, r, k) => s + r[i] * resid[k], 0) / nv,
  );
  return { w, dl: g.reduce((s, x, i) => s + x * dw[i], 0) };
}

for (const device of DEVICES) {
  for (const method of ["unrolled", "neumann", "cg"] as const) {
    Deno.test(`hypergrad: ridge regression's penalty by ${method} matches the closed form [${device}]`, async () => {
      const want = closedForm();
      const x = gyre.tensor(X, { device }), t = gyre.tensor(y, { device });
      const xv = gyre.tensor(Xv, { device }), tv = gyre.tensor(yv, { device });
      const w0 = gyre.zeros([d], { device }).realize();
      const l = gyre.tensor(lambda, { device });
      const before = liveCounts();
      const r = gyre.hypergrad(w0, l, {
        innerLoss: (w, h) => gyre.matmul(x, w).sub(t).square().mean().add(w.square().sum().mul(h)),
        outerLoss: (w) => gyre.matmul(xv, w).sub(tv).square().mean(),
        steps: 300,
        lr: 0.25,
        method,
        iterations: method === "neumann" ? 120 : 10,
      });
      const [w, g] = [
        await values(r.params as gyre.Tensor),
        await values(r.hypergrad as gyre.Tensor),
      ];
      w.forEach((v, i) =>
        assert.ok(Math.abs(v - want.w[i]) < 1e-4, `w[${i}] ${v} vs ${want.w[i]}`)
      );
      assert.ok(
        Math.abs(g[0] - want.dl) <= 2e-3 * Math.max(1, Math.abs(want.dl)),
        `hypergradient ${g[0]} vs closed form ${want.dl}`,
      );
      for (const v of [r.value, r.params as gyre.Tensor, r.hypergrad as gyre.Tensor]) v.dispose();
      assert.deepEqual(liveCounts(), before);
      for (const v of [x, t, xv, tv, w0, l]) v.dispose();
    });
  }
}

Deno.test("hypergrad: bad options are typed errors", () => {
  const w = gyre.zeros([2], { device: "wasm" }), h = gyre.zeros([], { device: "wasm" });
  const base = {
    innerLoss: (p: gyre.Tensor) => p.sum(),
    outerLoss: (p: gyre.Tensor) => p.sum(),
    steps: 1,
    lr: 0.1,
  };
  assert.throws(() => gyre.hypergrad(w, h, { ...base, method: "newton" as "cg" }), gyre.ValueError);
  assert.throws(() => gyre.hypergrad(w, h, { ...base, steps: -1 }), gyre.ValueError);
  assert.throws(() => gyre.hypergrad(w, h, { ...base, lr: 0 }), gyre.ValueError);
  assert.throws(
    () => gyre.hypergrad(w, h, { ...base, innerLoss: 3 as unknown as () => gyre.Tensor }),
    gyre.ValueError,
  );
  w.dispose();
  h.dispose();
});
