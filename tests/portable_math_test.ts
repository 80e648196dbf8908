/**
 * src/ir/portable_math.ts: its functions over every argument the random generators give them (all
 * 2^24 for the logarithm and the cosine; 4 Mi spread evenly in exponent for the square root), on
 * every device: the same bits everywhere, and within the stated ULP of float64's answer.
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import { generate } from "../src/creation.ts";
import { E, type Expr } from "../src/ir/expr.ts";
import { cosOfTurnCount, logOfUnitCount, sqrtOfSmall } from "../src/ir/portable_math.ts";
import { evaluate } from "../src/ops/_dispatch.ts";
import { viewOf } from "../src/tensor.ts";
import { devices } from "./_devices.ts";

const DEVICES = await devices();
const ALL = 1 << 24;

/** One unit in the last place of float32 at |v| (the spacing above a power of two). */
function ulpOf(v: number): number {
  const a = Math.abs(Math.fround(v));
  if (a < 2 ** -126) return 2 ** -149;
  return 2 ** (Math.floor(Math.log2(a)) - 23);
}

/**
 * Evaluates `build(input)` on every device, asserts the results are the same bits, and returns the
 * largest error in ULP against `exact` (and the largest absolute error where |exact| < `tiny`).
 */
async function measure(
  name: string,
  n: number,
  build: (index: Expr) => Expr,
  exact: (i: number) => number,
  tiny = 0,
): Promise<{ ulp: number; abs: number }> {
  const results: Float32Array[] = [];
  for (const device of DEVICES) {
    const t = generate(name, [n], build(E.index()), { device });
    results.push((await t.data()) as Float32Array);
    t.dispose();
  }
  for (const [k, r] of results.entries()) {
    const bits = new Uint32Array(r.buffer, r.byteOffset, n);
    const first = new Uint32Array(results[0].buffer, results[0].byteOffset, n);
    const differ = bits.findIndex((b, i) => b !== first[i]);
    assert.equal(differ, -1, `${name}: ${DEVICES[k]} differs from ${DEVICES[0]} at ${differ}`);
  }
  let ulp = 0, abs = 0;
  const got = results[0];
  for (let i = 0; i < n; i++) {
    const want = exact(i);
    const err = Math.abs(got[i] - want);
    if (Math.abs(want) < tiny) abs = Math.max(abs, err);
    else ulp = Math.max(ulp, err / ulpOf(want));
  }
  return { ulp, abs };
}

Deno.test("portable math: ln(m / 2^24) for every m in [1, 2^24], within 2.4 ULP", async () => {
  const { ulp } = await measure(
    "logOfUnitCount",
    ALL,
    (i) => logOfUnitCount(E.binary("add", i, E.constant(1, "uint32"))),
    (i) => Math.log((i + 1) / ALL),
  );
  assert.ok(ulp <= 2.4, `${ulp} ULP`);
});

Deno.test("portable math: cos(2 pi t / 2^24) for every t in [0, 2^24), within 1.9 ULP", async () => {
  const { ulp, abs } = await measure(
    "cosOfTurnCount",
    ALL,
    cosOfTurnCount,
    (i) => Math.cos((2 * Math.PI * i) / ALL),
    2 ** -20,
  );
  assert.ok(ulp <= 1.93, `${ulp} ULP`);
  assert.ok(abs <= 2 ** -44, `${abs} absolute near the zeros`);
});

Deno.test("portable math: sqrt over [2^-24, 64) and 0, within 2.7 ULP", async () => {
  const n = 1 << 22;
  const args = new Float32Array(n + 1);
  for (let i = 0; i < n; i++) args[i] = 2 ** (-24 + (30 * i) / n);
  args[n] = 0;
  const results: Float32Array[] = [];
  for (const device of DEVICES) {
    const x = gyre.tensor(args, { device });
    const t = evaluate("sqrtOfSmall", device, sqrtOfSmall(E.input(0, "float32")), [viewOf(x)], [
      n + 1,
    ]);
    results.push((await t.data()) as Float32Array);
    t.dispose();
    x.dispose();
  }
  for (const r of results.slice(1)) {
    assert.deepEqual(r, results[0], "the same bits on every device");
  }
  let worst = 0;
  for (let i = 0; i < n; i++) {
    const want = Math.sqrt(args[i]);
    worst = Math.max(worst, Math.abs(results[0][i] - want) / ulpOf(want));
  }
  assert.ok(worst <= 2.7, `${worst} ULP`);
  assert.equal(results[0][n], 0);
});
