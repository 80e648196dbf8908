/**
 * The WASM row kernels (asm/rows.ts) against float64 oracles, and shared among threads.
 *
 * softmax and logSoftmax over rows drawn from the whole float32 domain (huge, subnormal, +-0,
 * +-Inf, NaN), of lengths 1 to 1031 and one of 2^20 + 3, within the bounds stated at
 * `softmax_rows_f32` (u = 2^-24): e = exp_f32x4(x - max) is within EXP_ULP (bench/exp_ulp.ts:
 * 0.7723 at most over every float32), 2 EXP_ULP u relative where e is normal, and exactly 1 at
 * the max; the f64 sum S of the e is within that too, weighted by the terms other than the max's
 * (2 EXP_ULP u (S - 1) / S), plus its own roundings (a chain of at most len / 2 + 8 additions,
 * 2^-53 each); the f64 reciprocal and product add 2^-52 and the rounding to float32 u. So softmax
 * is within 2 EXP_ULP u + e(S) + u + 2^-50 relative, about 4.2u, plus (EXP_ULP + 0.5) 2^-149
 * absolute where e is subnormal; logSoftmax, (x - max) - log(S) in f64, within e(S) + u |y|
 * absolute, plus 2^-51 of the f64 terms. Special rows (NaN, +Inf, or nothing but -Inf) are NaN
 * throughout.
 *
 * Rows shared among threads (src/wasm/rows.ts) give the same bits as one thread.
 * @module
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import * as tuning from "../src/tuning.ts";

await gyre.init({ device: "wasm" });

const U = 2 ** -24;
/** exp_f32x4's largest error in ULP, rounded up (bench/exp_ulp.ts measures 0.7723;
 * tests/wasm_vector_math_test.ts holds it to this). */
const EXP_ULP = 0.8;
const TINY = 2 ** -149;
const MAX_F32 = 3.4028234663852886e38;

/** A deterministic stream of uniform numbers in [0, 1) (mulberry32). */
function uniform(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Row generators over the whole float32 domain: each gives element j of a row. */
const KINDS: Record<string, (next: () => number) => number> = {
  // Spread over e^x's whole range below the max: many subnormal and zero results.
  wide: (next) => (next() * 2 - 1) * 120,
  narrow: (next) => (next() * 2 - 1) * 10,
  huge: (next) => (next() < 0.5 ? -1 : 1) * MAX_F32 * (0.5 + next() / 2),
  subnormal: (next) => (next() * 2 - 1) * 2 ** -130,
  zeros: (next) => (next() < 0.5 ? -0 : 0),
  bits: (next) => {
    // Any finite float32, from its bits.
    const f = new Float32Array(new Uint32Array([Math.floor(next() * 2 ** 32)]).buffer)[0];
    return Number.isFinite(f) ? f : 1;
  },
  "some -inf": (next) => (next() < 0.3 ? -Infinity : (next() * 2 - 1) * 50),
  "one NaN": (next) => (next() < 0.05 ? NaN : next()),
  "one +inf": (next) => (next() < 0.05 ? Infinity : next()),
  "all -inf": () => -Infinity,
  mixed: (next) => {
    const s = [0, -0, NaN, Infinity, -Infinity, TINY, -TINY, MAX_F32, -MAX_F32];
    return next() < 0.1 ? s[Math.floor(next() * s.length)] : (next() * 2 - 1) * 100;
  },
};

/**
 * The oracle of one row: softmax or logSoftmax of `xs` (NaN rows as PyTorch), with the sum of the
 * exponentials compensated (Neumaier), so that log(sum) is right where the sum is within a few
 * f64 ULP of 1 and logSoftmax of the max is tiny.
 */
function oracle(xs: Float32Array, log: boolean): { y: Float64Array; s: number } {
  const y = new Float64Array(xs.length);
  let m = -Infinity;
  let nan = false;
  for (const x of xs) {
    if (Number.isNaN(x)) nan = true;
    else m = Math.max(m, x);
  }
  if (nan || m === Infinity || m === -Infinity) return { y: y.fill(NaN), s: NaN };
  let s = 0;
  let c = 0;
  for (const x of xs) {
    const e = Math.exp(x - m);
    const t = s + e;
    c += Math.abs(s) >= e ? (s - t) + e : (e - t) + s;
    s = t;
  }
  const logS = Math.log(s) + c / s;
  s += c;
  for (let j = 0; j < xs.length; j++) {
    y[j] = log ? xs[j] - m - logS : Math.exp(xs[j] - m) / s;
  }
  return { y, s };
}

function check(xs: Float32Array, got: ArrayLike<number>, log: boolean, what: string): number {
  const { y, s } = oracle(xs, log);
  let worst = 0;
  for (let j = 0; j < xs.length; j++) {
    const want = y[j];
    const g = got[j];
    const at = () => `${what}: element ${j} of ${xs.length}, x ${xs[j]}: ${g} for ${want}`;
    if (Number.isNaN(want)) {
      assert.ok(Number.isNaN(g), at());
      continue;
    }
    if (!Number.isFinite(Math.fround(want))) {
      // Beyond float32 (logSoftmax of huge spans): the rounded oracle.
      assert.equal(g, Math.fround(want), at());
      continue;
    }
    // The kernel's f64 sum: at most len / 2 + 8 additions in a chain, 2^-53 relative each.
    const sum = 2 * EXP_ULP * U * ((s - 1) / s) + (xs.length / 2 + 8) * 2 ** -53;
    const tol = log
      ? sum + U * Math.abs(want) + 2 ** -51 * (Math.abs(want) + Math.abs(Math.log(s)))
      : (2 * EXP_ULP * U + sum + U + 2 ** -50) * want + (EXP_ULP + 0.5) * TINY;
    const err = Math.abs(g - want);
    assert.ok(err <= tol, `${at()} (error ${err}, tolerance ${tol})`);
    // Relative to the tolerance, for the report.
    if (tol > 0) worst = Math.max(worst, err / tol);
  }
  return worst;
}

/** softmax or logSoftmax of `rows` rows of `len` on WASM. */
async function run(data: Float32Array, rows: number, len: number, log: boolean) {
  const x = gyre.tensor(data, { shape: [rows, len], device: "wasm" });
  const y = log ? gyre.logSoftmax(x, { axis: -1 }) : gyre.softmax(x, { axis: -1 });
  const out = await y.data();
  x.dispose();
  y.dispose();
  return out;
}

const LENGTHS = [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 100, 1000, 1031];

for (const log of [false, true]) {
  const name = log ? "logSoftmax" : "softmax";
  Deno.test(`WASM ${name} against a float64 oracle over the float32 domain`, async () => {
    const next = uniform(log ? 2 : 1);
    for (const [kind, draw] of Object.entries(KINDS)) {
      for (const len of LENGTHS) {
        const rows = 3;
        const data = Float32Array.from({ length: rows * len }, () => draw(next));
        const got = await run(data, rows, len, log);
        for (let r = 0; r < rows; r++) {
          const row = data.subarray(r * len, (r + 1) * len);
          check(row, got.subarray(r * len, (r + 1) * len), log, `${name} ${kind} row ${r}`);
        }
      }
    }
  });

  Deno.test(`WASM ${name} of a row of 2^20 + 3 elements against a float64 oracle`, async () => {
    const next = uniform(3);
    const len = (1 << 20) + 3;
    const data = Float32Array.from({ length: len }, () => (next() * 2 - 1) * 20);
    check(data, await run(data, 1, len, log), log, `${name} long row`);
  });
}

Deno.test("WASM softmax: exact special cases", async () => {
  // A row of one: 1 (log: 0), whatever the value, unless special.
  const ones = new Float32Array([5, -0, MAX_F32, -MAX_F32, TINY, -Infinity, NaN, Infinity]);
  const soft = await run(ones, ones.length, 1, false);
  const logs = await run(ones, ones.length, 1, true);
  assert.deepEqual([...soft], [1, 1, 1, 1, 1, NaN, NaN, NaN]);
  assert.deepEqual([...logs], [0, 0, 0, 0, 0, NaN, NaN, NaN]);
  // Equal values: 1 / n exactly where n is a power of two.
  const equal = new Float32Array(64).fill(-3.5);
  assert.ok((await run(equal, 1, 64, false)).every((v) => v === 1 / 64));
});

// ---------------------------------------------------------------------------------------------

/** `f` forced onto `threads` threads, then its values. */
async function threaded(threads: number, f: () => gyre.Tensor): Promise<gyre.TypedArray> {
  tuning.setPlanOverride("wasmThreads", { threads });
  try {
    const t = f();
    const data = await t.data();
    t.dispose();
    return data;
  } finally {
    tuning.setPlanOverride("wasmThreads", null);
  }
}

function sameBits(a: gyre.TypedArray, b: gyre.TypedArray, what: string): void {
  assert.equal(a.length, b.length, what);
  for (let i = 0; i < a.length; i++) {
    assert.ok(Object.is(a[i], b[i]), `${what}: element ${i}: ${a[i]} vs ${b[i]}`);
  }
}

/**
 * layerNorm's float64 oracle of one row: the mean and the variance from deviations, each summed
 * with compensation (Neumaier), then (x - mean) / sqrt(var + eps); NaN throughout for rows with
 * NaN or an infinity (as the kernel's arithmetic gives).
 */
function normOracle(xs: Float32Array, eps: number): { y: Float64Array; mean: number } {
  const y = new Float64Array(xs.length);
  if (xs.some((x) => !Number.isFinite(x))) return { y: y.fill(NaN), mean: NaN };
  const compensated = (terms: number[]) => {
    let sum = 0;
    let c = 0;
    for (const t of terms) {
      const next = sum + t;
      c += Math.abs(sum) >= Math.abs(t) ? (sum - next) + t : (t - next) + sum;
      sum = next;
    }
    return sum + c;
  };
  const mean = compensated([...xs]) / xs.length;
  const variance = compensated([...xs].map((x) => (x - mean) ** 2)) / xs.length;
  const rstd = 1 / Math.sqrt(variance + eps);
  for (let j = 0; j < xs.length; j++) y[j] = (xs[j] - mean) * rstd;
  return { y, mean };
}

/** Row generators of layerNorm: centred, offset far (two passes) and near (one), and specials. */
const NORM_KINDS: Record<string, (next: () => number) => number> = {
  centred: (next) => (next() * 2 - 1) * 3,
  // mean / sd = 20: mean^2 / var = 400 < 1024, one pass.
  "offset 20 sd": (next) => 20 * Math.sqrt(3) + (next() * 2 - 1) * Math.sqrt(3),
  // mean / sd near 1e4: the two passes (one pass would lose 2^27 of its accuracy).
  "offset 1e4 sd": (next) => 1e4 + (next() * 2 - 1),
  "offset 1e6 sd": (next) => 3e6 + (next() * 2 - 1) * 3,
  huge: (next) => (next() < 0.5 ? -1 : 1) * MAX_F32 * (0.5 + next() / 2),
  subnormal: (next) => (next() * 2 - 1) * 2 ** -130,
  zeros: (next) => (next() < 0.5 ? -0 : 0),
  constant: () => 7.25,
  bits: KINDS.bits,
  mixed: KINDS.mixed,
};

Deno.test("WASM layerNorm against a float64 oracle, one pass and two", async () => {
  // Each result is computed in f64 and rounded to f32 once: within half an f32 ULP plus the
  // f64 errors: the mean's (a chain of len / 8 + 8 additions, 2^-53 of the sum of |x| each)
  // times rstd, and the variance's (below 2^-31 relative either way: asm/rows.ts
  // ONE_PASS_CANCELLATION), half of it in rstd.
  const next = uniform(5);
  const eps = 1e-5;
  for (const [kind, draw] of Object.entries(NORM_KINDS)) {
    for (const len of [1, 2, 3, 5, 8, 9, 16, 17, 100, 1031, 4096]) {
      const rows = 3;
      const data = Float32Array.from({ length: rows * len }, () => draw(next));
      const x = gyre.tensor(data, { shape: [rows, len], device: "wasm" });
      const y = gyre.layerNorm(x, { axis: -1, eps });
      const got = await y.data();
      x.dispose();
      y.dispose();
      for (let r = 0; r < rows; r++) {
        const row = data.subarray(r * len, (r + 1) * len);
        const { y: want, mean } = normOracle(row, eps);
        const absMean = row.reduce((a, v) => a + Math.abs(v), 0) / len;
        for (let j = 0; j < len; j++) {
          const g = got[r * len + j];
          const w = want[j];
          const at = `layerNorm ${kind} len ${len} row ${r} element ${j}: ${g} for ${w}`;
          if (Number.isNaN(w)) {
            assert.ok(Number.isNaN(g), at);
            continue;
          }
          const rstd = Math.abs(row[j] - mean) > 0
            ? Math.abs(w / (row[j] - mean))
            : 1 / Math.sqrt(eps);
          const half = Math.abs(w) >= 2 ** -126
            ? 2 ** (Math.floor(Math.log2(Math.abs(w))) - 24)
            : TINY / 2;
          const tol = half * 1.001 + Math.abs(w) * 2 ** -30 +
            (len / 8 + 8) * 2 ** -53 * absMean * rstd;
          assert.ok(Math.abs(g - w) <= tol, `${at} (error ${Math.abs(g - w)}, tolerance ${tol})`);
        }
      }
    }
  }
});

Deno.test({
  name: "WASM rows shared among threads give the bits of one thread",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const threads = await gyre.startWasmThreads();
    const next = uniform(4);
    const shape = [37, 3, 129];
    const n = 37 * 3 * 129;
    const data = Float32Array.from({ length: n }, () => (next() * 2 - 1) * 30);
    data[5] = NaN;
    data[1000] = Infinity;
    const x = gyre.tensor(data, { shape, device: "wasm" });
    const w = gyre.tensor(Float32Array.from({ length: 129 }, () => next() * 2), { device: "wasm" });
    const b = gyre.tensor(Float32Array.from({ length: 129 }, () => next()), { device: "wasm" });
    const cw = gyre.tensor(Float32Array.from({ length: 3 }, () => next() * 2), { device: "wasm" });
    const cb = gyre.tensor(Float32Array.from({ length: 3 }, () => next()), { device: "wasm" });
    const cases: [string, () => gyre.Tensor][] = [
      ["softmax", () => gyre.softmax(x, { axis: -1 })],
      ["logSoftmax", () => gyre.logSoftmax(x, { axis: -1 })],
      ["softmax axis 0", () => gyre.softmax(x, { axis: 0 })],
      ["layerNorm", () => gyre.layerNorm(x, { axis: -1, weight: w, bias: b })],
      ["rmsNorm", () => gyre.rmsNorm(x, { axis: -1, weight: w })],
      ["groupNorm", () => gyre.groupNorm(x, { groups: 3, weight: cw, bias: cb })],
    ];
    for (const [what, f] of cases) {
      const one = await threaded(1, f);
      for (let t = 2; t <= Math.max(2, threads); t++) sameBits(one, await threaded(t, f), what);
    }
    // batchNorm training: the statistics of each channel's row land in place too.
    const train = () => {
      const r = gyre.batchNorm(x, { training: true, weight: cw, bias: cb });
      r.mean.dispose();
      r.unbiasedVariance.dispose();
      r.variance.dispose();
      return r.output;
    };
    sameBits(await threaded(1, train), await threaded(2, train), "batchNorm training");
    const stats = async (threadCount: number) => {
      tuning.setPlanOverride("wasmThreads", { threads: threadCount });
      try {
        const r = gyre.batchNorm(x, { training: true });
        const values = [await r.mean.data(), await r.variance.data()];
        for (const t of Object.values(r)) (t as gyre.Tensor | undefined)?.dispose();
        return values;
      } finally {
        tuning.setPlanOverride("wasmThreads", null);
      }
    };
    const [m1, v1] = await stats(1);
    const [m2, v2] = await stats(2);
    sameBits(m1, m2, "batchNorm mean");
    sameBits(v1, v2, "batchNorm variance");
    for (const t of [x, w, b, cw, cb]) t.dispose();
  },
});
