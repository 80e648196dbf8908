/**
 * gyre's gradients against PyTorch's (tests/torch/grad_expected.jsonl: torch.autograd in float64
 * on the CPU, from the inputs of tests/_grad_cases.ts; regenerate with tests/torch/grad_check.ts
 * and grad_expected.py), on both devices, within 1e-4 * (1 + |torch|): gyre computes in float32,
 * a few roundings of each value (1e-6 relative) over sums of a handful of terms.
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import { devices } from "./_devices.ts";
import { CASES, make, problem, useDevice } from "./_grad_cases.ts";

const DEVICES = await devices();
const lines = (await Deno.readTextFile(new URL("./torch/grad_expected.jsonl", import.meta.url)))
  .split("\n").filter((l) => l.length > 0);
const expected = new Map(
  lines.slice(1).map((l) => JSON.parse(l) as { name: string; grads: number[][] }).map((
    e,
  ) => [e.name, e.grads]),
);

Deno.test("torch gradients: the committed answers cover every case but the one documented", () => {
  const missing = CASES.filter((c) => !expected.has(c.name)).map((c) => c.name);
  assert.deepEqual(missing, ["quantile nearest"]);
});

for (const device of DEVICES) {
  for (const c of CASES) {
    const want = expected.get(c.name);
    if (!want) continue;
    Deno.test(`torch gradients: ${c.name} [${device}]`, async () => {
      const p = problem(c);
      useDevice(device);
      const xs = make(c, p.xs, device);
      const weights = gyre.tensor(p.w, { shape: p.outShape, device });
      const grads = gyre.grad((...a: gyre.Tensor[]) => c.f(...a).mul(weights).sum(), {
        argnums: xs.map((_, i) => i),
      })(...xs) as gyre.Tensor[];
      const got = await gyre.readAll(grads);
      for (const t of [...xs, weights, ...grads]) t.dispose();
      want.forEach((list, i) =>
        list.forEach((w, k) => {
          const g = got[i][k];
          assert.ok(
            Math.abs(g - w) <= 1e-4 * (1 + Math.abs(w)),
            `input ${i} element ${k}: gyre ${g}, torch ${w}`,
          );
        })
      );
    });
  }
}
