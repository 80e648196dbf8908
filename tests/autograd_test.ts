/**
 * Every gradient rule (tests/_grad_cases.ts) three ways:
 * - against central finite differences of the loss sum(f(x) * w) on WASM in float32, with step
 *   h = 2e-3 and tolerance 5e-3 * (1 + |fd|): float32 rounding of a loss of size ~10 contributes
 *   about 6e-8 * 10 / h = 3e-4, the truncation h^2 f''' / 6 under 1e-5, so a correct rule lands far
 *   inside while a wrong factor (the usual defect: a missing 2, a sign, a transposed operand) lands
 *   far outside;
 * - the GPU's gradients against WASM's, within 1e-4 * (1 + |x|) (both run the same rules; their
 *   ops agree within a few float32 ULPs);
 * - the transposition test <vjp(u), v> = <u, jvp(v)> for random u and v, within 1e-4 of the
 *   products' scale: jvp transposes the pullback, so every rule's own ops must be differentiable.
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import { devices } from "./_devices.ts";
import {
  CASES,
  type GradCase,
  make,
  prng,
  type Problem,
  problem,
  seedOf,
  useDevice,
} from "./_grad_cases.ts";

const DEVICES = await devices();

function lossOf(c: GradCase, p: Problem, device: gyre.DeviceName) {
  const weights = gyre.tensor(p.w, { shape: p.outShape, device });
  return { weights, loss: (...a: gyre.Tensor[]) => c.f(...a).mul(weights).sum() };
}

/** The analytic gradients of sum(f(x) * w) with respect to every input, read back once. */
async function analytic(c: GradCase, p: Problem, device: gyre.DeviceName): Promise<number[][]> {
  useDevice(device);
  const xs = make(c, p.xs, device);
  const { weights, loss } = lossOf(c, p, device);
  const grads = gyre.grad(loss, { argnums: xs.map((_, i) => i) })(...xs) as gyre.Tensor[];
  const data = await gyre.readAll(grads);
  for (const t of [...xs, weights, ...grads]) t.dispose();
  return data.map((d) => Array.from(d));
}

async function lossAt(c: GradCase, p: Problem, xs: number[][]): Promise<number> {
  useDevice("wasm");
  const inputs = make(c, xs, "wasm");
  const { weights, loss } = lossOf(c, p, "wasm");
  const value = gyre.tidy(() => loss(...inputs));
  const [data] = await gyre.readAll([value]);
  for (const t of [...inputs, weights, value]) t.dispose();
  return data[0];
}

const H = 2e-3;

for (const c of CASES) {
  Deno.test(`autograd: ${c.name} matches central differences [wasm]`, async () => {
    const p = problem(c);
    const got = await analytic(c, p, "wasm");
    for (let i = 0; i < p.xs.length; i++) {
      for (let k = 0; k < p.xs[i].length; k++) {
        const plus = p.xs.map((v) => [...v]), minus = p.xs.map((v) => [...v]);
        plus[i][k] += H;
        minus[i][k] -= H;
        const fd = ((await lossAt(c, p, plus)) - (await lossAt(c, p, minus))) / (2 * H);
        const an = got[i][k];
        assert.ok(
          Math.abs(an - fd) <= 5e-3 * (1 + Math.abs(fd)),
          `input ${i} element ${k}: analytic ${an}, finite difference ${fd}`,
        );
      }
    }
  });

  if (DEVICES.includes("gpu")) {
    Deno.test(`autograd: ${c.name} on the GPU matches WASM [gpu]`, async () => {
      const p = problem(c);
      const want = await analytic(c, p, "wasm");
      const got = await analytic(c, p, "gpu");
      want.forEach((list, i) =>
        list.forEach((w, k) => {
          const g = got[i][k];
          assert.ok(
            Math.abs(g - w) <= 1e-4 * (1 + Math.abs(w)),
            `input ${i} element ${k}: gpu ${g}, wasm ${w}`,
          );
        })
      );
    });
  }

  if (!c.noTranspose) {
    Deno.test(`autograd: ${c.name} vjp and jvp are transposes [wasm]`, () => {
      useDevice("wasm");
      const p = problem(c);
      const rand = prng(seedOf(c.name) ^ 0x9e3779b9);
      const u = p.w.map(() => rand() * 2 - 1);
      const v = p.xs.map((list) => list.map(() => rand() * 2 - 1));
      const xs = make(c, p.xs, "wasm");
      const [, pullback] = gyre.vjp(c.f, ...xs);
      const pulled = pullback(gyre.tensor(u, { shape: p.outShape, device: "wasm" }));
      const [, pushed] = gyre.jvp(c.f, xs, make(c, v, "wasm"));
      pullback.dispose();
      return (async () => {
        const left = await gyre.readAll(pulled as gyre.Tensor[]);
        const [right] = await gyre.readAll([pushed as gyre.Tensor]);
        let lhs = 0, rhs = 0, scale = 0;
        left.forEach((g, i) =>
          g.forEach((x, k) => {
            lhs += x * v[i][k];
            scale += Math.abs(x * v[i][k]);
          })
        );
        right.forEach((x, k) => {
          rhs += u[k] * x;
          scale += Math.abs(u[k] * x);
        });
        assert.ok(
          Math.abs(lhs - rhs) <= 1e-4 * (1 + scale),
          `<vjp(u), v> ${lhs}, <u, jvp(v)> ${rhs}`,
        );
      })();
    });
  }
}
