/**
 * Activations with hand-computed values (from the defining formulas in float64), on every device,
 * plus the special values PyTorch defines and the typed errors of their options.
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import { devices, expectClose, expectUlps, expm1Ulps, expUlps, log1pUlps } from "./_devices.ts";

const DEVICES = await devices();
const X = [-3, -1, -0.5, 0, 0.5, 1, 3];

function test(name: string, fn: (device: gyre.DeviceName) => Promise<void> | void): void {
  for (const device of DEVICES) Deno.test(`${name} [${device}]`, () => fn(device));
}

// Expected values: Python's math module in float64, to 9 digits. The tolerance, 2e-6 relative,
// covers float32 rounding (6e-8) plus the few-ulp error of the GPU's exp/erf/tanh.
const EXPECTED: Record<string, [(x: gyre.Tensor) => gyre.Tensor, number[]]> = {
  relu: [gyre.relu, [0, 0, 0, 0, 0.5, 1, 3]],
  gelu: [(x) => gyre.gelu(x), [
    -0.00404969409,
    -0.158655254,
    -0.154268769,
    0,
    0.345731231,
    0.841344746,
    2.99595031,
  ]],
  geluTanh: [(x) => gyre.gelu(x, { approximate: "tanh" }), [
    -0.00363739208,
    -0.158808009,
    -0.15428599,
    0,
    0.34571401,
    0.841191991,
    2.99636261,
  ]],
  silu: [gyre.silu, [
    -0.14227762,
    -0.268941421,
    -0.188770334,
    0,
    0.311229666,
    0.731058579,
    2.85772238,
  ]],
  mish: [gyre.mish, [
    -0.145647461,
    -0.303401461,
    -0.220743775,
    0,
    0.375245211,
    0.865098388,
    2.986535,
  ]],
  hardswish: [gyre.hardswish, [0, -0.333333333, -0.208333333, 0, 0.291666667, 0.666666667, 3]],
  hardsigmoid: [gyre.hardsigmoid, [0, 0.333333333, 0.416666667, 0.5, 0.583333333, 0.666666667, 1]],
  selu: [gyre.selu, [
    -1.67056873,
    -1.11133074,
    -0.691758188,
    0,
    0.525350494,
    1.05070099,
    3.15210296,
  ]],
  softsign: [gyre.softsign, [-0.75, -0.5, -0.333333333, 0, 0.333333333, 0.5, 0.75]],
  leakyRelu: [(x) => gyre.leakyRelu(x, { alpha: 0.1 }), [-0.3, -0.1, -0.05, 0, 0.5, 1, 3]],
  elu: [(x) => gyre.elu(x, { alpha: 0.5 }), [
    -0.475106466,
    -0.316060279,
    -0.19673467,
    0,
    0.5,
    1,
    3,
  ]],
  // beta 2, threshold 1: 2x > 1 switches to the identity at x = 1 and 3.
  softplus: [(x) => gyre.softplus(x, { beta: 2, threshold: 1 }), [
    0.00123784257,
    0.0634640055,
    0.156630844,
    0.34657359,
    0.656630844,
    1,
    3,
  ]],
};

for (const [name, [fn, expected]] of Object.entries(EXPECTED)) {
  test(`activation ${name}: values`, async (device) => {
    const x = gyre.tensor(X, { device });
    await expectClose(fn(x), [7], "float32", expected, 2e-6);
    x.dispose();
  });
}

test("activations: defaults (leakyRelu 0.01, elu 1, softplus beta 1 threshold 20)", async (device) => {
  const x = gyre.tensor([-2, 25], { device });
  await expectClose(gyre.leakyRelu(x), [2], "float32", [-0.02, 25]);
  await expectClose(gyre.elu(x), [2], "float32", [Math.expm1(-2), 25]);
  await expectClose(gyre.softplus(x), [2], "float32", [Math.log1p(Math.exp(-2)), 25]);
  await expectClose(x.relu(), [2], "float32", [0, 25]);
  x.dispose();
});

test("activations: NaN stays NaN, infinities follow the limits", async (device) => {
  const x = gyre.tensor([NaN, Infinity, -Infinity], { device });
  await expectClose(gyre.relu(x), [3], "float32", [NaN, Infinity, 0]);
  await expectClose(gyre.gelu(x), [3], "float32", [NaN, Infinity, NaN]);
  await expectClose(gyre.hardsigmoid(x), [3], "float32", [NaN, 1, 0]);
  await expectClose(gyre.elu(x), [3], "float32", [NaN, Infinity, -1]);
  await expectClose(gyre.softplus(x), [3], "float32", [NaN, Infinity, 0]);
  await expectClose(gyre.leakyRelu(x), [3], "float32", [NaN, Infinity, -Infinity]);
  x.dispose();
});

test("activations: large and tiny arguments keep their precision", async (device) => {
  // silu and mish of -30 are about -2.8e-12: a tanh or sigmoid built from e^x - 1 would give 0 or
  // -9e-7 here.
  const x = gyre.tensor([-30, 1e-6, 80], { device });
  const sp = (v: number) => Math.max(v, 0) + Math.log1p(Math.exp(-Math.abs(v)));
  await expectClose(gyre.silu(x), [3], "float32", [
    -30 / (1 + Math.exp(30)),
    1e-6 / (1 + Math.exp(-1e-6)),
    80,
  ], 1e-5);
  await expectClose(gyre.mish(x), [3], "float32", [
    -30 * Math.tanh(sp(-30)),
    1e-6 * Math.tanh(sp(1e-6)),
    80,
  ], 1e-5);
  x.dispose();
});

/** Inputs near 0 (subnormals included), across the formulas' switch points, and the specials. */
const NEAR_ZERO = [
  ...[1e-7, 1e-20, 1e-38, 1e-40, 0.3, 0.5, 2, 20, 88].flatMap((v) => [v, -v]),
  0,
  Infinity,
  -Infinity,
  NaN,
];

const softplusExact = (x: number) => Math.max(x, 0) + Math.log1p(Math.exp(-Math.abs(x)));
const mishExact = (x: number) => x * Math.tanh(softplusExact(x));
const SELU_SCALE = 1.0507009873554805, SELU_ALPHA = 1.6732632423543772;

// GPU bounds in ULP of the exact value, from WGSL's bounds on the builtins (tests/_devices.ts):
// an error of k ULP in an intermediate is at most 2k ULP of a result in another binade, and each
// f32 rounding (a constant, a multiply, an add) adds 1.
/** selu: lambda x (two roundings); below 0, lambda alpha expm1(x) (four roundings). */
const seluUlps = (x: number) => x > 0 ? 2 : 2 * expm1Ulps(x) + 4;
/**
 * softplus = max(x, 0) + log1p(e), e = e^-|x|: exp's error passes through log1p with a gain of at
 * most 1, plus log1p's own, scaled by log1p's share of the result when x > 0, plus the add.
 */
const softplusUlps = (x: number) => {
  const a = Math.abs(x), l = Math.log1p(Math.exp(-a));
  const share = x > 0 ? l / (x + l) : 1;
  return 2 * share * (2 * expUlps(a) + log1pUlps(Math.exp(-a))) + 1;
};
/**
 * mish = x tanh(s), s = softplus(x): tanh passes s's relative error with a gain of at most 1, plus
 * its own: below 0.125 a series (3 roundings); above, (1 - e) / (1 + e) with e = exp(-2s), whose
 * error grows by 2e / (1 - e^2), plus four roundings. Below -80, x e^(x + 64 ln 2) 2^-64: exp's
 * bound, plus x + 64 ln 2's rounding (half an ULP of a number below 64, 2^-19: 32 ULP) and that of
 * the constant (32), plus two multiplies.
 */
const mishUlps = (x: number) => {
  if (x < -80) return 2 * expUlps(x + 44.3614195558365) + 66;
  const s = softplusExact(x), e = Math.exp(-2 * Math.min(s, 15));
  const tanhUlps = s < 0.125 ? 3 : 4 * expUlps(2 * s) * e / (1 - e * e) + 4;
  return 2 * softplusUlps(x) + tanhUlps + 1;
};

test("elu, selu, softplus and mish keep their relative precision near 0, alone and fused", async (device) => {
  // elu and selu take expm1 below 0, softplus log1p(e^x), mish both through softplus: each was
  // off near 0 on the GPU when those helpers' cancellation tricks were folded away
  // (softplus(-20) = 0 in a fused kernel, true 2.06e-9). The WASM reference rounds a float64
  // result once: 1 ULP.
  const gpu = device === "gpu";
  const x = gyre.tensor(NEAR_ZERO, { device });
  const bound = (ulps: (x: number) => number) => gpu ? ulps : () => 1;
  for (const fused of [false, true]) {
    // x * 1 is pending: the activation is inlined into the multiply's fused kernel.
    const a = fused ? x.mul(1) : x;
    const cases: [gyre.Tensor, (x: number) => number, (x: number) => number][] = [
      [gyre.elu(a), (v) => (v > 0 ? v : Math.expm1(v)), (v) => (v > 0 ? 0 : expm1Ulps(v))],
      [
        gyre.selu(a),
        (v) => SELU_SCALE * (v > 0 ? v : SELU_ALPHA * Math.expm1(v)),
        seluUlps,
      ],
      [gyre.softplus(a), (v) => (v > 20 ? v : softplusExact(v)), softplusUlps],
      [gyre.mish(a), mishExact, mishUlps],
    ];
    for (const [y, exact, ulps] of cases) {
      await expectUlps(y, NEAR_ZERO, exact, bound(ulps), { flush: gpu });
    }
    if (fused) a.dispose();
  }
  x.dispose();
});

test("activations: integers compute in float32, float16 stays float16", async (device) => {
  const i = gyre.tensor([-1, 2], { device, dtype: "int32" });
  await expectClose(gyre.silu(i), [2], "float32", [-1 / (1 + Math.E), 2 / (1 + Math.exp(-2))]);
  i.dispose();
  if (device === "gpu" && !gyre.runtime().caps?.shaderF16) return;
  const h = gyre.tensor([-1, 2], { device, dtype: "float16" });
  await expectClose(gyre.relu(h), [2], "float16", [0, 2]);
  h.dispose();
});

Deno.test("activations: bad options are typed errors", () => {
  const x = gyre.tensor([1]);
  assert.throws(() => gyre.gelu(x, { approximate: "fast" as "tanh" }), (e: gyre.ValueError) => {
    assert.ok(e instanceof gyre.ValueError);
    assert.equal(e.op, "gelu");
    assert.equal(e.argument, "options.approximate");
    return true;
  });
  assert.throws(() => gyre.softplus(x, { beta: 0 }), gyre.ValueError);
  assert.throws(() => gyre.elu(x, { alpha: NaN }), gyre.ValueError);
  x.dispose();
});
