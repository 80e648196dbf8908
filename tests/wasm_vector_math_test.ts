/**
 * exp_f32x4 (asm/vector_math.ts), the vector e^x of the WASM kernels, against float64 `Math.exp`:
 * within 0.8 ULP of the float32 result (its ULP; 2^-149 for subnormals), the bound asm/rows.ts's
 * softmax error analysis takes, over arguments drawn from every float32 bit pattern and, densely,
 * from [-104, 89] where e^x is neither 0 nor +Inf, and the special arguments exactly.
 * bench/exp_ulp.ts sweeps every float32 of [-104, 89]: max 0.7723 ULP (at -87.692, a subnormal
 * result), 0.6933 where e^x is normal.
 * @module
 */
import assert from "node:assert/strict";
import { instantiateKernels } from "../src/wasm/module.ts";

const { memory, kernels } = instantiateKernels({ threads: false });
const N = 1 << 21;
/** The largest error allowed, in ULP. */
const BOUND = 0.8;
const base = memory.buffer.byteLength;
memory.grow((8 * N) / 65536 + 1);

/** The test entry `name` (exp_f32x4_array, sigmoid_f32x4_array) over `xs` (at most N values). */
function apply(name: string, xs: Float32Array): Float32Array {
  new Float32Array(memory.buffer, base, xs.length).set(xs);
  kernels[name](base + 4 * N, base, xs.length);
  return new Float32Array(memory.buffer, base + 4 * N, xs.length).slice();
}

const expOf = (xs: Float32Array) => apply("exp_f32x4_array", xs);

/** A deterministic stream of 32-bit words (mulberry32). */
function words(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}

/** Error of `y` in ULP of the float32 nearest e^x (0 or Infinity where that is +Inf). */
function ulpError(x: number, y: number): number {
  const exact = Math.exp(x);
  if (Number.isNaN(x)) return Number.isNaN(y) ? 0 : Infinity;
  if (Math.fround(exact) === Infinity) return y === Infinity ? 0 : Infinity;
  const ulp = exact < 2 ** -126 ? 2 ** -149 : 2 ** (Math.floor(Math.log2(exact)) - 23);
  return Math.abs(y - exact) / ulp;
}

function worst(xs: Float32Array): { ulp: number; at: number } {
  const ys = expOf(xs);
  let ulp = 0;
  let at = 0;
  for (let i = 0; i < xs.length; i++) {
    const e = ulpError(xs[i], ys[i]);
    if (!(e <= ulp)) {
      ulp = e;
      at = xs[i];
    }
  }
  return { ulp, at };
}

Deno.test("exp_f32x4: within 0.8 ULP over random float32 bit patterns", () => {
  const next = words(1);
  const bits = new Uint32Array(N);
  for (let i = 0; i < N; i++) bits[i] = next();
  const { ulp, at } = worst(new Float32Array(bits.buffer));
  assert.ok(ulp <= BOUND, `${ulp} ULP at ${at}`);
});

Deno.test("exp_f32x4: within 0.8 ULP densely over [-104, 89] (subnormal to overflow)", () => {
  const next = words(2);
  const xs = new Float32Array(N);
  for (let i = 0; i < N; i++) xs[i] = -104 + 193 * (next() / 2 ** 32);
  const { ulp, at } = worst(xs);
  assert.ok(ulp <= BOUND, `${ulp} ULP at ${at}`);
  // Every float32 around the ends of the range and around 0.
  const ends = new Float32Array(N);
  const from = (v: number) => new Uint32Array(new Float32Array([v]).buffer)[0];
  const view = new Uint32Array(ends.buffer);
  const quarter = N / 4;
  for (let i = 0; i < quarter; i++) {
    view[i] = from(88.7) + i; // up to past the overflow threshold
    view[quarter + i] = from(-87.3) + i; // -87.3 down: normal to subnormal results
    view[2 * quarter + i] = from(-103.9) + i; // the last subnormals down to 0
    view[3 * quarter + i] = i % 2 ? i : 0x80000000 + i; // tiny arguments of both signs
  }
  const end = worst(ends);
  assert.ok(end.ulp <= BOUND, `${end.ulp} ULP at ${end.at}`);
});

Deno.test("exp_f32x4: special arguments", () => {
  const cases: [number, number][] = [
    [NaN, NaN],
    [Infinity, Infinity],
    [-Infinity, 0],
    [0, 1],
    [-0, 1],
    [1, Math.fround(Math.E)],
    [88.72283935546875, Math.fround(Math.exp(88.72283935546875))],
    [88.72284, Infinity],
    [3.4028234663852886e38, Infinity],
    [-3.4028234663852886e38, 0],
    [-103.97207641601562, 2 ** -149],
    [-104, 0],
    [2 ** -149, 1],
    [-(2 ** -149), 1],
  ];
  // Each case at every lane of a vector and in the scalar tail (lengths 1 to 7).
  for (const [x, want] of cases) {
    for (let n = 1; n <= 7; n++) {
      const got = expOf(new Float32Array(n).fill(x));
      for (let i = 0; i < n; i++) assert.ok(Object.is(got[i], want), `exp(${x}) = ${got[i]}`);
    }
  }
});

Deno.test("exp_f32x4: the scalar tail computes the same as the vector body", () => {
  const next = words(3);
  const xs = new Float32Array(4099);
  for (let i = 0; i < xs.length; i++) xs[i] = -110 + 200 * (next() / 2 ** 32);
  const whole = expOf(xs);
  for (let start = 0; start < 8; start++) {
    const part = expOf(xs.subarray(start));
    for (let i = 0; i < part.length; i++) assert.ok(Object.is(part[i], whole[start + i]));
  }
});

// ---------------------------------------------------------------------------------------------

/** sigmoid in float64, without cancellation or overflow. */
function sigmoid(x: number): number {
  if (x >= 0) return 1 / (1 + Math.exp(-x));
  const e = Math.exp(x);
  return e / (1 + e);
}

/**
 * sigmoid_f32x4's error allowed, in ULP: its first-order bound is 4.3u relative
 * (asm/vector_math.ts), up to 4.3 ULP where the result sits at the bottom of its binade; these
 * samples reach 2.23.
 */
const SIGMOID_BOUND = 2.5;

/** The largest error of sigmoid_f32x4 over `xs`, in ULP of the float32 result. */
function sigmoidWorst(xs: Float32Array): { ulp: number; at: number } {
  const ys = apply("sigmoid_f32x4_array", xs);
  let ulp = 0;
  let at = 0;
  for (let i = 0; i < xs.length; i++) {
    const want = sigmoid(xs[i]);
    let e: number;
    if (Number.isNaN(xs[i])) e = Number.isNaN(ys[i]) ? 0 : Infinity;
    else {
      const size = want < 2 ** -126 ? 2 ** -149 : 2 ** (Math.floor(Math.log2(want)) - 23);
      e = Math.abs(ys[i] - want) / size;
    }
    if (!(e <= ulp)) {
      ulp = e;
      at = xs[i];
    }
  }
  return { ulp, at };
}

Deno.test("sigmoid_f32x4: within 2.5 ULP (random bits; dense on [-110, 20])", () => {
  const next = words(4);
  const bits = new Uint32Array(N);
  for (let i = 0; i < N; i++) bits[i] = next();
  const any = sigmoidWorst(new Float32Array(bits.buffer));
  assert.ok(any.ulp <= SIGMOID_BOUND, `${any.ulp} ULP at ${any.at}`);
  const xs = new Float32Array(N);
  for (let i = 0; i < N; i++) xs[i] = -110 + 130 * (next() / 2 ** 32);
  const dense = sigmoidWorst(xs);
  assert.ok(dense.ulp <= SIGMOID_BOUND, `${dense.ulp} ULP at ${dense.at}`);
  const cases: [number, number][] = [
    [NaN, NaN],
    [Infinity, 1],
    [-Infinity, 0],
    [0, 0.5],
    [
      -0,
      0.5,
    ],
    [-100, Math.fround(sigmoid(-100))],
    [-104, 0],
    [20, 1],
  ];
  for (const [x, want] of cases) {
    for (let n = 1; n <= 7; n++) {
      const got = apply("sigmoid_f32x4_array", new Float32Array(n).fill(x));
      for (let i = 0; i < n; i++) assert.ok(Object.is(got[i], want), `sigmoid(${x}) = ${got[i]}`);
    }
  }
});

Deno.test("tanh on WASM: within its stated bound of float64 tanh (random bits; dense on [-20, 20])", async () => {
  // Through the op (tiles, asm/vector_math.ts tanh_f32x4): the bound is wasmTanhUlps of
  // tests/property_elementwise_test.ts, 2 ULP below |x| = 0.125, else 1.6 * 2e / (1 - e^2) + 2.5
  // with e = e^-2|x|.
  const gyre = await import("../src/mod.ts");
  await gyre.init({ device: "wasm" });
  const next = words(11);
  const xs = new Float32Array(1 << 18);
  const bits = new Uint32Array(xs.buffer);
  for (let i = 0; i < xs.length; i++) {
    if (i % 2 === 0) bits[i] = next();
    else xs[i] = (next() / 2 ** 32 - 0.5) * 40;
  }
  xs.set([NaN, Infinity, -Infinity, 0, -0, 2 ** -149, -(2 ** -130), 0.125, -0.125, 15, 20, 3e38]);
  const t = gyre.tanh(gyre.tensor(xs));
  const ys = await t.data();
  t.dispose();
  for (let i = 0; i < xs.length; i++) {
    const x = xs[i], y = ys[i];
    if (Number.isNaN(x)) {
      assert.ok(Number.isNaN(y), `tanh(NaN) = ${y}`);
      continue;
    }
    const exact = Math.tanh(x);
    const z = Math.abs(x);
    const e = Math.exp(-2 * Math.min(z, 15));
    const bound = z < 0.125 ? 2 : (2 * 0.8 * 2 * e) / (1 - e * e) + 2.5;
    const ulp = 2 ** (Math.floor(Math.log2(Math.max(Math.abs(exact), 2 ** -126))) - 23);
    const sub = Math.abs(exact) < 2 ** -126 ? 2 ** -149 : 0;
    assert.ok(
      Math.abs(y - exact) <= bound * ulp + sub && (y === 0 || Math.sign(y) === Math.sign(x)),
      `tanh(${x}) = ${y}, exact ${exact}: ${Math.abs(y - exact) / ulp} ULP, bound ${bound}`,
    );
  }
});
