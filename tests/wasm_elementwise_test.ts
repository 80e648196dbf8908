/**
 * The WASM elementwise forms (src/wasm/elementwise.ts) against the node-by-node reference: tile
 * programs with tiles as short as 4 elements (so that every expression spans many tiles and
 * partial ones), over operands that are contiguous (read in place), broadcast, strided or
 * scalar (gathered), float16 rounding between nodes, and the blocked transposing copy of
 * swapped axes. Every form computes each element with the same operations as the reference, so
 * the bar is bit equality, NaN payloads aside. The differential test (tests/differential_test.ts)
 * covers random programs the same way; this file covers layouts it rarely draws.
 * @module
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import * as gyre from "../src/mod.ts";
import { mulberry32 } from "./_random.ts";
import * as tuning from "../src/tuning.ts";
import { kernelObservers } from "../src/contract/backend.ts";

await gyre.init({ device: "wasm" });

const SPECIALS = [NaN, Infinity, -Infinity, 0, -0, 2 ** -149, 65504, 1e-8, 3.4028234663852886e38];

function values(seed: number, n: number, dtype: gyre.DType): number[] {
  const next = mulberry32(seed);
  return Array.from({ length: n }, () => {
    if (dtype === "bool") return next() < 0.5 ? 1 : 0;
    if (dtype === "int32") return Math.floor((next() - 0.5) * 2 ** 32);
    if (dtype === "uint32") return Math.floor(next() * 2 ** 32);
    if (next() < 0.1) return SPECIALS[Math.floor(next() * SPECIALS.length)];
    return (next() - 0.5) * 2 ** (next() * 60 - 30);
  });
}

/** Kernels launched while `f` runs, and its values. */
async function traced(
  form: "tiles" | "nodes",
  tile: number,
  f: () => gyre.Tensor,
): Promise<{ data: gyre.TypedArray; kernels: string[] }> {
  const kernels: string[] = [];
  const observe = ({ kernel }: { kernel: string }) => void kernels.push(kernel);
  kernelObservers.add(observe);
  tuning.setPlanOverride("wasmElementwise", { form, tile });
  try {
    const t = f();
    t.realize();
    return { data: await t.data(), kernels };
  } finally {
    tuning.setPlanOverride("wasmElementwise", null);
    kernelObservers.delete(observe);
  }
}

function sameBits(want: gyre.TypedArray, got: gyre.TypedArray, what: string): void {
  assert.equal(got.length, want.length, what);
  for (let i = 0; i < want.length; i++) {
    if (Number.isNaN(want[i]) && Number.isNaN(got[i])) continue;
    assert.ok(Object.is(want[i], got[i]), `${what} [${i}]: ${got[i]}, expected ${want[i]}`);
  }
}

Deno.test("tile programs over every operand layout equal the node-by-node reference", async () => {
  const dtypes = ["float32", "float16", "int32", "uint32"] as const;
  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom(...dtypes),
      fc.array(fc.integer({ min: 1, max: 9 }), { minLength: 1, maxLength: 4 }),
      fc.integer({ min: 1, max: 12 }).map((k) => 4 * k),
      fc.nat(),
      fc.nat({ max: 5 }),
      async (dtype, shape, tile, seed, layout) => {
        const n = shape.reduce((a, b) => a * b, 1);
        const make = (s: number) => gyre.tensor(values(s, n, dtype), { shape, dtype });
        const base = make(seed);
        // The second operand: contiguous, reversed axes (strided), a broadcast row, a scalar,
        // a slice with an offset, or the first operand itself.
        const last = shape[shape.length - 1];
        const other = [
          () => make(seed + 1),
          () => make(seed + 1).transpose().clone().transpose(),
          () => gyre.tensor(values(seed + 2, last, dtype), { dtype }),
          () => gyre.tensor(values(seed + 3, 1, dtype)[0], { dtype }),
          () =>
            gyre.tensor(values(seed + 4, n + 3, dtype), { dtype }).slice([3, n + 3])
              .reshape(shape),
          () => base,
        ][layout]();
        const float = dtype === "float32" || dtype === "float16";
        const expression = () => {
          const sum = gyre.add(base, other);
          const mixed = float
            ? gyre.where(gyre.greater(base, other), gyre.exp(gyre.neg(sum)), gyre.mul(sum, 0.5))
            : gyre.where(gyre.less(base, other), gyre.mul(sum, 3), gyre.maximum(base, other));
          return gyre.add(mixed, gyre.cast(gyre.arange(n).reshape(shape), dtype));
        };
        const want = await traced("nodes", tile, expression);
        const got = await traced("tiles", tile, expression);
        const what = `${dtype} ${JSON.stringify(shape)}, layout ${layout}, tile ${tile}`;
        assert.ok(got.kernels.includes("ew_run"), `${what}: no tile program ran`);
        assert.ok(!want.kernels.includes("ew_run"), `${what}: the reference ran a tile program`);
        sameBits(want.data, got.data, what);
        base.dispose();
        other.dispose();
      },
    ),
    { numRuns: 200 },
  );
});

Deno.test("copies of swapped axes take the blocked transpose and equal the reference", async () => {
  const dtypes = ["float32", "int32", "uint32", "bool"] as const;
  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom(...dtypes),
      fc.integer({ min: 1, max: 3 }),
      fc.integer({ min: 16, max: 90 }),
      fc.integer({ min: 16, max: 90 }),
      fc.constantFrom([0, 2, 1], [1, 0, 2], [2, 1, 0], [1, 2, 0]),
      fc.boolean(),
      fc.nat(),
      async (dtype, batch, rows, cols, permutation, sliced, seed) => {
        const shape = [batch, rows, cols + (sliced ? 5 : 0)];
        const n = shape.reduce((a, b) => a * b, 1);
        let x = gyre.tensor(values(seed, n, dtype), { shape, dtype });
        if (sliced) x = x.slice(null, null, [2, cols + 2]);
        const copy = () => x.transpose(permutation).clone();
        const want = await traced("nodes", 1024, copy);
        const got = await traced("tiles", 1024, copy);
        const what = `${dtype} ${JSON.stringify(shape)} permuted ${permutation}`;
        // A contiguous axis moved second last, under a strided last one of 16 or more, is a
        // blocked transpose (shorter ones gather).
        const out = permutation.map((p) => [batch, rows, cols][p]);
        const swapped = permutation[1] === 2 && out[2] >= 16 && out[1] >= 16;
        assert.equal(got.kernels.includes("transpose_copy_32"), swapped, what);
        sameBits(want.data, got.data, what);
        x.dispose();
      },
    ),
    { numRuns: 120 },
  );
});

Deno.test("SIMD unary tile kernels equal their scalar templates on special values", async () => {
  // relu's vector form is pmax(v, 0) + 0: -0 must come out +0 and NaN stay NaN, as
  // g_relu64 gives; the others' vector forms are their scalar templates lane by lane.
  const specials = [-0, 0, NaN, -NaN, Infinity, -Infinity, -1, 1, 2 ** -149, -(2 ** -149), -3e38];
  const data = [...specials, ...values(7, 64, "float32")];
  const x = gyre.tensor(data, { dtype: "float32" });
  const ops = ["relu", "neg", "abs", "square", "sqrt", "exp", "sigmoid", "tanh"] as const;
  for (const op of ops) {
    const f = () => gyre[op](x);
    const want = await traced("nodes", 16, f);
    const got = await traced("tiles", 16, f);
    assert.ok(got.kernels.includes("ew_run"), `${op}: no tile program ran`);
    sameBits(want.data, got.data, op);
  }
  // +0 exactly where the input is -0 (Object.is tells the zeros apart).
  const relu = await gyre.relu(x).data();
  assert.ok(Object.is(relu[0], 0) && Object.is(relu[1], 0), "relu(-0) and relu(+0) are +0");
  x.dispose();
});
