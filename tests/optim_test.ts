/**
 * The optimizers against PyTorch's (tests/torch/optim_expected.json: torch.optim in float64 on
 * fixed gradients, six steps each), on both devices, within 2e-6 of 1 + |p|: float32 arithmetic
 * of each step (a few roundings of values near 1) compounded over six steps. Also: the tree is
 * updated in place and the old tensors freed, bad options and gradients are typed errors, and a
 * disposed optimizer refuses steps.
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import { devices, liveCounts, values } from "./_devices.ts";

const DEVICES = await devices();
const expected = JSON.parse(
  await Deno.readTextFile(new URL("./torch/optim_expected.json", import.meta.url)),
) as Record<string, number[][]>;
const N = 5;

type Make = (params: { w: gyre.Tensor }) => gyre.optim.Optimizer<{ w: gyre.Tensor }>;
const CONFIGS: Record<string, Make> = {
  "sgd": (p) => gyre.optim.sgd(p, { lr: 0.1 }),
  "sgd momentum dampening weight decay": (p) =>
    gyre.optim.sgd(p, { lr: 0.05, momentum: 0.9, dampening: 0.3, weightDecay: 0.01 }),
  "sgd nesterov": (p) => gyre.optim.sgd(p, { lr: 0.05, momentum: 0.8, nesterov: true }),
  "sgd maximize": (p) => gyre.optim.sgd(p, { lr: 0.1, momentum: 0.5, maximize: true }),
  "adam": (p) => gyre.optim.adam(p, { lr: 0.01 }),
  "adam weight decay betas": (p) =>
    gyre.optim.adam(p, { lr: 0.02, betas: [0.8, 0.99], eps: 1e-6, weightDecay: 0.1 }),
  "adam maximize": (p) => gyre.optim.adam(p, { lr: 0.01, maximize: true }),
  "adamw": (p) => gyre.optim.adamw(p, { lr: 0.01 }),
  "adamw weight decay": (p) => gyre.optim.adamw(p, { lr: 0.03, weightDecay: 0.2 }),
};

for (const device of DEVICES) {
  for (const [name, make] of Object.entries(CONFIGS)) {
    Deno.test(`optim: ${name} matches torch.optim over six steps [${device}]`, async () => {
      const params = {
        w: gyre.tensor(Array.from({ length: N }, (_, i) => 0.5 - 0.25 * i), { device }),
      };
      const first = params.w;
      const opt = make(params);
      for (let t = 1; t <= 6; t++) {
        const g = gyre.tensor(
          Array.from({ length: N }, (_, i) => Math.sin(1.3 * t + 0.7 * i) + 0.2),
          {
            device,
          },
        );
        const returned = opt.step({ w: g });
        assert.equal(returned, params, "the tree itself is returned, updated in place");
        g.dispose();
        const got = await values(params.w);
        got.forEach((v, i) => {
          const want = expected[name][t - 1][i];
          assert.ok(
            Math.abs(v - want) <= 2e-6 * (1 + Math.abs(want)),
            `step ${t} [${i}]: ${v} vs ${want}`,
          );
        });
      }
      assert.ok(first.isDisposed, "the first parameter tensor was freed");
      assert.equal(opt.steps, 6);
      opt.dispose();
    });
  }

  Deno.test(`optim: bad options and gradients are typed errors; nothing leaks [${device}]`, () => {
    const params = { w: gyre.ones([3], { device }).realize() };
    const ints = gyre.tensor([1], { dtype: "int32", device });
    const before = liveCounts();
    assert.throws(() => gyre.optim.sgd(params, { lr: -1 }), gyre.ValueError);
    assert.throws(() => gyre.optim.sgd(params, { nesterov: true }), gyre.ValueError);
    assert.throws(() => gyre.optim.adam(params, { betas: [0.9, 1] }), gyre.ValueError);
    assert.throws(
      () => gyre.optim.adam(params, { lrr: 1 } as gyre.optim.AdamOptions),
      gyre.ValueError,
    );
    assert.throws(
      () => gyre.optim.adamw({ w: ints }),
      gyre.ValueError,
    );
    assert.deepEqual(liveCounts(), before);
    const opt = gyre.optim.adam(params);
    const wrong = gyre.ones([4], { device });
    assert.throws(() => opt.step({ w: wrong }), gyre.ShapeError);
    assert.throws(() => opt.step({} as { w: gyre.Tensor }), gyre.ValueError);
    opt.dispose();
    assert.ok(params.w.isDisposed);
    assert.throws(() => opt.step({ w: wrong }), gyre.ValueError);
    wrong.dispose();
    ints.dispose();
  });
}
