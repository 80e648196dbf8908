/**
 * Counter-based random numbers: element i is a hash of (i, seed), so the same seed gives the same
 * numbers, bit for bit, on both devices, in any order of evaluation, with no generator state to
 * carry. The hash and the maps from bits to numbers use only operations that every device rounds
 * alike (integer arithmetic, float32 add, sub and mul; src/ir/portable_math.ts).
 * The hash is PCG's output permutation applied twice with the seed's own hash between.
 * @module
 */
import type { Tensor } from "./tensor.ts";
import { type CreationOptions, generate } from "./creation.ts";
import { checkDType } from "./core/dtype.ts";
import { checkNumber } from "./core/errors.ts";
import { E, type Expr } from "./ir/expr.ts";
import { checkOptions } from "./core/options.ts";
import { cosOfTurnCount, logOfUnitCount, sqrtOfSmall } from "./ir/portable_math.ts";

/** PCG's RXS-M-XS permutation in JS, as `g_pcg` in WGSL and AssemblyScript. */
export function pcgHash(v: number): number {
  checkNumber("random.pcgHash", "v", v, "an integer", Number.isInteger);
  const state = (Math.imul(v >>> 0, 747796405) + 2891336453) >>> 0;
  const word = Math.imul(((state >>> ((state >>> 28) + 4)) ^ state) >>> 0, 277803737) >>> 0;
  return ((word >>> 22) ^ word) >>> 0;
}

/** Options shared by the generators. */
export interface RandomOptions extends CreationOptions {
  /** Any integer; a fresh one per call when omitted. */
  seed?: number;
}

function keyOf(op: string, seed: number | undefined): number {
  if (seed === undefined) return pcgHash(Math.floor(Math.random() * 2 ** 32));
  return pcgHash(checkNumber(op, "options.seed", seed, "an integer", Number.isInteger) >>> 0);
}

/** 32 random bits for counter `counter` (a uint32 expression). */
function bits(counter: Expr, key: number): Expr {
  const first = E.unary("pcgHash", counter);
  return E.unary("pcgHash", E.binary("bitwiseXor", first, E.constant(key, "uint32")));
}

/** The top 24 bits as a float32 in [0, 1) (exact). */
function unit(b: Expr): Expr {
  const top = E.cast(E.binary("shiftRight", b, E.constant(8, "uint32")), "float32");
  return E.binary("mul", top, E.constant(2 ** -24, "float32"));
}

/**
 * Uniform numbers in `[low, high)`.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const u = gyre.random.uniform([2, 3], { seed: 42, low: -1, high: 1 });
 * ```
 */
export function uniform(
  shape: readonly number[],
  options: RandomOptions & { low?: number; high?: number } = {},
): Tensor {
  checkOptions("uniform", options, ["dtype", "device", "seed", "low", "high"]);
  const op = "random.uniform";
  const low = options.low ?? 0;
  const high = options.high ?? 1;
  const dtype = options.dtype ? checkDType(op, "options.dtype", options.dtype) : "float32";
  const u = unit(bits(E.index(), keyOf(op, options.seed)));
  const value = E.binary(
    "add",
    E.binary("mul", u, E.constant(high - low, "float32")),
    E.constant(low, "float32"),
  );
  return generate(op, shape, E.cast(value, dtype), options);
}

/**
 * Normal numbers (Box-Muller over two uniforms per element, its logarithm, square root and
 * cosine evaluated by polynomials within 3 ULP, so that both devices give the same bits).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const z = gyre.random.normal([1000], { seed: 7, mean: 0, std: 1 });
 * ```
 */
export function normal(
  shape: readonly number[],
  options: RandomOptions & { mean?: number; std?: number } = {},
): Tensor {
  checkOptions("normal", options, ["dtype", "device", "seed", "mean", "std"]);
  const op = "random.normal";
  const mean = options.mean ?? 0;
  const std = options.std ?? 1;
  const dtype = options.dtype ? checkDType(op, "options.dtype", options.dtype) : "float32";
  const key = keyOf(op, options.seed);
  const twice = E.binary("mul", E.index(), E.constant(2, "uint32"));
  const top = (counter: Expr) =>
    E.binary("shiftRight", bits(counter, key), E.constant(8, "uint32"));
  // u1 = (top + 1) / 2^24 in (0, 1] keeps the logarithm finite; u2 = top / 2^24 is a turn. Only
  // operations that round the same on every device (src/ir/portable_math.ts): the same bits on
  // the GPU and on WASM.
  const count = E.binary("add", top(twice), E.constant(1, "uint32"));
  const radius = sqrtOfSmall(E.binary("mul", logOfUnitCount(count), E.constant(-2, "float32")));
  const angle = cosOfTurnCount(top(E.binary("add", twice, E.constant(1, "uint32"))));
  const z = E.binary("mul", radius, angle);
  const value = E.binary(
    "add",
    E.binary("mul", z, E.constant(std, "float32")),
    E.constant(mean, "float32"),
  );
  return generate(op, shape, E.cast(value, dtype), options);
}
