/**
 * Shared machinery of the property tests: every GPU kernel is run against its WASM reference on
 * random shapes, layouts and values, and the two results are compared under a tolerance that each
 * test states per op.
 *
 * Replaying: every property of a run uses one seed, printed whenever a property fails. Rerun with
 * `GYRE_SEED=<seed>` to get the same cases; add `GYRE_PATH=<path>` (also printed) together with
 * `--filter "<test name>"` to jump straight to the shrunk counterexample. `GYRE_RUNS=<factor>`
 * scales every property's number of runs (e.g. 10 for a soak).
 *
 * Large inputs are generated from a small PRNG seed drawn by fast-check (see {@link mulberry32})
 * rather than element by element, so a case with a million elements costs little to generate;
 * fast-check still shrinks the shape, layout and dtype of a failing case.
 * @module
 */
import fc from "fast-check";
import * as gyre from "../src/mod.ts";
import * as tuning from "../src/tuning.ts";

/** The runtime every property test uses: both devices, GPU default. */
export const rt: gyre.Runtime = await gyre.init({ device: "gpu" });
if (!rt.gpu) throw new Error("the property tests need a WebGPU adapter");

function envInt(name: string): number | undefined {
  const v = Deno.env.get(name);
  if (v === undefined || v === "") return undefined;
  const n = Number(v);
  if (!Number.isInteger(n)) throw new Error(`${name} must be an integer, got ${v}`);
  return n;
}

/** The seed of this run: `GYRE_SEED` when set, else a fresh one (printed on failure). */
export const SEED: number = envInt("GYRE_SEED") ?? ((Math.random() * 2 ** 31) | 0);
const PATH = Deno.env.get("GYRE_PATH") || undefined;
const RUN_FACTOR = Number(Deno.env.get("GYRE_RUNS") ?? "1");

const registered = new Set<string>();
const knownKernels = new Set(tuning.KERNELS.map((k) => k.id));

/** Options of {@link property}. */
export interface PropertyOptions {
  numRuns?: number;
  /**
   * Named variants ("family/variant", see `FAMILY_VARIANTS` in src/plans/variants.ts) the property
   * must have run on the GPU, counted from what the devices report: the test fails naming any
   * that no run reached (after up to {@link EXTRA_ROUNDS} more rounds of runs with other seeds).
   * Written as an array of string literals: tests/kernel_coverage_test.ts reads them.
   */
  variants?: readonly string[];
}

/** More rounds of runs a property may take to reach every variant it declares. */
const EXTRA_ROUNDS = 4;

/** Overrides a check forced (by {@link forcePlan}); checked against what ran when it ends. */
let forced: { family: string; override: Record<string, unknown> }[] = [];
/** What the devices ran during the current check. */
let ran: tuning.PlanRecord[] = [];

/**
 * Forces fields of a family's plan for the work issued from now on, as `setPlanOverride` does.
 * The current property check then fails if GPU work of that family ran but none of it under the
 * override: the override missed the work (set and cleared before lazy work ran, the defect that
 * once let 148 of 159 forced reductions run the default plan). A check whose family ran no GPU
 * work (empty inputs, errors) passes. The plan may still refuse a forced variant where the device
 * or problem cannot take it (stream-K for int32, one tile for a row longer than a tile), as its
 * own unit tests check; what ran is what the property's `variants` option counts. `null`
 * restores the rule.
 */
export function forcePlan<F extends tuning.PlanFamily>(
  family: F,
  override: tuning.PlanOverrides[F] | null,
): void {
  tuning.setPlanOverride(family, override);
  if (override && family !== "wasmGemm") {
    forced.push({ family, override: override as Record<string, unknown> });
  }
}

/** The plans the GPU ran during the current check (for tests that check more than the variant). */
export function plansRan(family: string): tuning.PlanRecord[] {
  return ran.filter((r) => r.device === "gpu" && r.family === family);
}

function sameOverride(a: unknown, b: Record<string, unknown>): boolean {
  return a !== undefined && JSON.stringify(a) === JSON.stringify({ ...b });
}

/**
 * The forced overrides that missed their work: GPU work of the family ran, none of it under the
 * override. Empty when every override reached its work (or its family ran nothing).
 */
export function missedOverrides(
  forcedOverrides: readonly { family: string; override: Record<string, unknown> }[],
  records: readonly tuning.PlanRecord[],
): string[] {
  const missed: string[] = [];
  for (const { family, override } of forcedOverrides) {
    const gpuWork = records.filter((r) => r.device === "gpu" && r.family === family);
    if (gpuWork.length > 0 && !gpuWork.some((r) => sameOverride(r.override, override))) {
      missed.push(
        `forced ${family} plan ${JSON.stringify(override)} reached none of the ${family} work ` +
          `the GPU ran (${JSON.stringify(gpuWork.map((r) => [r.variants, r.override]))})`,
      );
    }
  }
  return missed;
}

/** Throws unless every override the check forced reached the GPU work of its family. */
function checkForced(): void {
  const missed = missedOverrides(forced, ran);
  if (missed.length > 0) throw new Error(missed.join("\n"));
}

/**
 * Registers one property test covering `kernels` (ids of `tuning.KERNELS`). The first argument must
 * be a string literal or an array of string literals: tests/kernel_coverage_test.ts reads the
 * ids from the source text of tests/property_*_test.ts.
 */
export function property<T>(
  kernels: string | readonly string[],
  name: string,
  arbitrary: fc.Arbitrary<T>,
  check: (value: T) => Promise<void>,
  options: PropertyOptions = {},
): void {
  const ids = typeof kernels === "string" ? [kernels] : [...kernels];
  for (const id of ids) {
    if (!knownKernels.has(id)) throw new Error(`property "${name}": unknown kernel id ${id}`);
    registered.add(id);
  }
  const testName = `${ids.join(", ")}: ${name}`;
  const numRuns = Math.max(1, Math.round((options.numRuns ?? 30) * RUN_FACTOR));
  Deno.test({
    name: testName,
    fn: async () => {
      const seen = new Set<string>();
      const missing = () => (options.variants ?? []).filter((v) => !seen.has(v));
      for (let round = 0; round <= EXTRA_ROUNDS; round++) {
        if (round > 0 && missing().length === 0) break;
        const details = await fc.check(
          fc.asyncProperty(arbitrary, async (value) => {
            forced = [];
            ran = [];
            const stop = tuning.onPlan((r) => ran.push(r));
            try {
              await check(value);
              checkForced();
            } finally {
              stop();
              tuning.setPlanOverride("elementwise", null);
              tuning.setPlanOverride("reduce", null);
              for (const r of ran) {
                if (r.device === "gpu") {
                  for (const v of r.variants) seen.add(`${r.family}/${v}`);
                }
              }
            }
          }),
          {
            seed: SEED + round,
            path: round === 0 ? PATH : undefined,
            numRuns,
            endOnFailure: PATH !== undefined,
          },
        );
        if (details.failed) {
          const cause = details.errorInstance instanceof Error
            ? details.errorInstance.message
            : String(details.errorInstance);
          throw new Error(
            `property failed after ${details.numRuns} run(s), ${details.numShrinks} shrink(s)\n` +
              `  replay: GYRE_SEED=${details.seed} GYRE_PATH=${details.counterexamplePath} ` +
              `deno test -A tests/ --filter "${testName}"\n` +
              `  counterexample: ${fc.stringify(details.counterexample)}\n` +
              `  ${cause}`,
          );
        }
        if (PATH !== undefined) return;
      }
      if (missing().length > 0) {
        throw new Error(
          `declared variants that no run reached in ${EXTRA_ROUNDS + 1} rounds of ${numRuns}: ${
            missing().join(", ")
          } (ran: ${[...seen].sort().join(", ")})`,
        );
      }
    },
  });
}

/** Kernel ids that properties registered at run time (the static check is in kernel_coverage_test.ts). */
export function registeredKernels(): ReadonlySet<string> {
  return registered;
}

// ---------------------------------------------------------------------------------------------
// Deterministic data from a seed.

export { mulberry32 } from "./_random.ts";

/** A random integer in [lo, hi]. */
export function randInt(rng: () => number, lo: number, hi: number): number {
  return lo + Math.floor(rng() * (hi - lo + 1));
}

/** A random element. */
export function pick<T>(rng: () => number, items: readonly T[]): T {
  return items[Math.floor(rng() * items.length)];
}

/** The smallest normal float32; GPUs may flush anything smaller in magnitude to zero. */
export const MIN_NORMAL = 2 ** -126;
/** The largest finite float32. */
export const MAX_F32 = 3.4028234663852886e38;
/** Smallest normal float16. */
export const MIN_NORMAL_F16 = 2 ** -14;

/** Float32 special values: NaN, infinities, signed zeros, subnormals, extremes. */
export const SPECIALS_F32: readonly number[] = [
  NaN,
  Infinity,
  -Infinity,
  0,
  -0,
  1e-40,
  -3e-42,
  1.401298464324817e-45,
  MIN_NORMAL,
  -MIN_NORMAL,
  MAX_F32,
  -MAX_F32,
  1,
  -1,
  0.5,
  -2.5,
  2.5,
  1.5,
];

/** How float values are drawn for one operand. */
export interface FloatDomain {
  /** "log": magnitude 2^u with u uniform in [minExp, maxExp]; "uniform": in [lo, hi]. */
  kind: "log" | "uniform";
  minExp?: number;
  maxExp?: number;
  lo?: number;
  hi?: number;
  /** Sign for "log" draws (default both). */
  sign?: "both" | "pos" | "neg";
  /** Special values mixed in, each element with probability `pSpecial`. */
  specials?: readonly number[];
  pSpecial?: number;
  /** Round draws to integers (e.g. exponents of a negative base). */
  integers?: boolean;
}

/** The default: magnitudes 2^-30..2^30 plus every special. */
export const FULL: FloatDomain = { kind: "log", minExp: -30, maxExp: 30, specials: SPECIALS_F32 };

/** Fills `out` with draws from `domain`. */
export function fillFloat(rng: () => number, out: Float32Array, domain: FloatDomain): Float32Array {
  const specials = domain.specials ?? [];
  const p = specials.length ? (domain.pSpecial ?? 0.08) : 0;
  for (let i = 0; i < out.length; i++) {
    if (p > 0 && rng() < p) {
      out[i] = pick(rng, specials);
      continue;
    }
    let v: number;
    if (domain.kind === "log") {
      const e = (domain.minExp ?? -30) + rng() * ((domain.maxExp ?? 30) - (domain.minExp ?? -30));
      const s = domain.sign === "pos" ? 1 : domain.sign === "neg" ? -1 : rng() < 0.5 ? -1 : 1;
      v = s * 2 ** e;
    } else {
      v = (domain.lo ?? 0) + rng() * ((domain.hi ?? 1) - (domain.lo ?? 0));
    }
    out[i] = domain.integers ? Math.round(v) : v;
  }
  return out;
}

const I32_SPECIALS = [0, 1, -1, 2, -2, 31, 32, -2147483648, 2147483647, 65536, -65536];
const U32_SPECIALS = [0, 1, 2, 31, 32, 0xffffffff, 0x80000000, 0x7fffffff, 65536];

/** Integers: a third full-range, a third small, a third special (wraparound, INT_MIN, 0, -1). */
export function fillInt(
  rng: () => number,
  out: Int32Array | Uint32Array,
  range?: { lo: number; hi: number },
): typeof out {
  const signed = out instanceof Int32Array;
  for (let i = 0; i < out.length; i++) {
    if (range) {
      out[i] = randInt(rng, range.lo, range.hi);
      continue;
    }
    const r = rng();
    if (r < 0.34) out[i] = (rng() * 2 ** 32) >>> 0;
    else if (r < 0.67) out[i] = signed ? randInt(rng, -10, 10) : randInt(rng, 0, 10);
    else out[i] = pick(rng, signed ? I32_SPECIALS : U32_SPECIALS);
  }
  return out;
}

/** Host data for `dtype` with `n` elements. `domain` applies to float dtypes. */
export function hostData(
  rng: () => number,
  dtype: gyre.DType,
  n: number,
  domain: FloatDomain = FULL,
  intRange?: { lo: number; hi: number },
): gyre.TypedArray {
  switch (dtype) {
    case "float32":
    case "float16":
      return fillFloat(rng, new Float32Array(n), domain);
    case "int32":
      return fillInt(rng, new Int32Array(n), intRange);
    case "uint32":
      return fillInt(
        rng,
        new Uint32Array(n),
        intRange && { lo: Math.max(0, intRange.lo), hi: intRange.hi },
      );
    case "bool":
      return Uint8Array.from({ length: n }, () => (rng() < 0.5 ? 1 : 0));
  }
}

// ---------------------------------------------------------------------------------------------
// Shapes and layouts.

/** Lengths around workgroup multiples, primes, 0 and 1. */
export const SPECIAL_LENGTHS: readonly number[] = [
  0,
  1,
  2,
  3,
  4,
  5,
  7,
  13,
  31,
  64,
  127,
  255,
  256,
  257,
  1021,
  1023,
  1024,
  1025,
  4099,
];

/** A shape of rank 0..maxRank: one axis of a special length, the others short (1..3). */
export function shapeArb(maxRank = 4, lengths = SPECIAL_LENGTHS): fc.Arbitrary<number[]> {
  return fc
    .record({
      rank: fc.integer({ min: 0, max: maxRank }),
      long: fc.constantFrom(...lengths),
      short: fc.array(fc.integer({ min: 1, max: 3 }), { minLength: maxRank, maxLength: maxRank }),
      at: fc.nat(),
    })
    .map(({ rank, long, short, at }) => {
      if (rank === 0) return [];
      const shape = short.slice(0, rank);
      shape[at % rank] = long;
      return shape;
    });
}

/** How an operand is laid out in memory relative to the output it feeds. */
export type LayoutKind =
  | "contiguous"
  | "broadcast"
  | "transposed"
  | "sliced"
  | "zeroD"
  | "scalar";

export const LAYOUTS: readonly LayoutKind[] = [
  "contiguous",
  "broadcast",
  "transposed",
  "sliced",
  "zeroD",
  "scalar",
];

/** A concrete layout: a base tensor's shape and the view ops that turn it into the operand. */
export interface Layout {
  kind: LayoutKind;
  baseShape: number[];
  view: (t: gyre.Tensor) => gyre.Tensor;
  describe: string;
}

/** Elements a sliced layout's parent may hold (32 MiB of float32). */
const SLICE_BASE_LIMIT = 1 << 23;

/** Draws the details of a layout of kind `kind` producing (or broadcasting to) `shape`. */
export function makeLayout(rng: () => number, kind: LayoutKind, shape: readonly number[]): Layout {
  const rank = shape.length;
  const id = (t: gyre.Tensor) => t;
  if (rank === 0 && kind !== "scalar") kind = "contiguous";
  switch (kind) {
    case "contiguous":
      return { kind, baseShape: [...shape], view: id, describe: "contiguous" };
    case "zeroD":
      return { kind, baseShape: [], view: id, describe: "0-d" };
    case "scalar":
      return { kind, baseShape: [], view: id, describe: "JS scalar" };
    case "broadcast": {
      // Drop some leading axes and shrink some others to 1.
      const drop = randInt(rng, 0, rank - 1);
      const base = shape.slice(drop).map((d) => (rng() < 0.5 ? 1 : d));
      return { kind, baseShape: base, view: id, describe: `broadcast from [${base}]` };
    }
    case "transposed": {
      const perm = [...Array(rank).keys()];
      for (let i = rank - 1; i > 0; i--) {
        const j = randInt(rng, 0, i);
        [perm[i], perm[j]] = [perm[j], perm[i]];
      }
      if (rank > 1 && perm.every((p, i) => p === i)) perm.reverse();
      const base = new Array<number>(rank);
      perm.forEach((p, i) => (base[p] = shape[i]));
      return {
        kind,
        baseShape: base,
        view: (t) => t.transpose(perm),
        describe: `transpose [${perm}] of [${base}]`,
      };
    }
    case "sliced": {
      const steps: number[] = shape.map(() => pick(rng, [1, 2, -1, -2, 3]));
      const extras = shape.map(() => randInt(rng, 0, 1));
      const baseOf = () =>
        shape.map((
          d,
          i,
        ) => (d === 0 ? 1 + extras[i] : Math.abs(steps[i]) * (d - 1) + 1 + extras[i]));
      // Steps multiply the parent's size; past SLICE_BASE_LIMIT elements (a software adapter binds
      // at most 128 MiB) the longest strided axes step by one instead.
      while (sizeOf(baseOf()) > SLICE_BASE_LIMIT) {
        // The strided axis (a step other than +-1) with the most elements.
        let widest = -1;
        steps.forEach((step, i) => {
          if (Math.abs(step) > 1 && (widest < 0 || shape[i] > shape[widest])) widest = i;
        });
        if (widest < 0) break;
        steps[widest] = Math.sign(steps[widest]);
      }
      if (!steps.some((s) => s !== 1)) steps[rank - 1] = -1;
      const base = baseOf();
      const ranges: gyre.SliceRange[] = shape.map((d, i) => {
        if (d === 0) return [0, 0, 1];
        const s = steps[i];
        return s > 0
          ? [extras[i], extras[i] + s * (d - 1) + 1, s]
          : [base[i] - 1 - extras[i], null, s];
      });
      return {
        kind,
        baseShape: base,
        view: (t) => t.slice(...ranges),
        describe: `slice ${JSON.stringify(ranges)} of [${base}]`,
      };
    }
  }
}

/** Collects tensors to dispose at the end of a case. */
export class Bag {
  #items: gyre.Tensor[] = [];
  add<T extends gyre.TensorLike>(t: T): T {
    if (t instanceof gyre.Tensor) this.#items.push(t);
    return t;
  }
  dispose(): void {
    for (const t of this.#items) t.dispose();
    this.#items = [];
  }
}

/**
 * Materialises an operand on `device` from base data laid out by `layout` (a JS number for
 * "scalar"). Tensors go into `bag`.
 */
export function operandOn(
  bag: Bag,
  device: gyre.DeviceName,
  layout: Layout,
  dtype: gyre.DType,
  base: gyre.TypedArray,
): gyre.TensorLike {
  if (layout.kind === "scalar") {
    const v = base[0];
    return dtype === "bool" ? v !== 0 : v;
  }
  const t = bag.add(gyre.tensor(base, { shape: layout.baseShape, dtype, device }));
  return bag.add(layout.view(t));
}

/** Number of elements of a shape. */
export function sizeOf(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

// ---------------------------------------------------------------------------------------------
// Comparison.

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** Float32 bits as an integer ordered like the floats (-0 and +0 adjacent, +Inf after MAX). */
export function orderedF32(x: number): number {
  f32[0] = x;
  const b = u32[0];
  return b & 0x80000000 ? -(b & 0x7fffffff) - 1 : b;
}

/** Distance in float32 units in the last place (0 for equal values; ±0 are 1 apart). */
export function ulpDistance(a: number, b: number): number {
  return Math.abs(orderedF32(a) - orderedF32(b));
}

/** Float32 to float16 bits, round to nearest even (for comparing in half precision). */
export function f16Bits(x: number): number {
  f32[0] = x;
  const b = u32[0];
  const sign = (b >>> 16) & 0x8000;
  const exp = (b >>> 23) & 0xff;
  let mant = b & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    const half = mant >>> shift;
    const rest = mant & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    return sign | (half + (rest > halfway || (rest === halfway && (half & 1)) ? 1 : 0));
  }
  const rest = mant & 0x1fff;
  let half = (e << 10) | (mant >>> 13);
  if (rest > 0x1000 || (rest === 0x1000 && (half & 1))) half++;
  return sign | half;
}

/** Distance in float16 units in the last place. */
export function halfUlpDistance(a: number, b: number): number {
  const o = (h: number) => (h & 0x8000 ? -(h & 0x7fff) - 1 : h);
  return Math.abs(o(f16Bits(a)) - o(f16Bits(b)));
}

/** The spacing of float32 values at `x` (ulp(x)). */
export function ulpOf(x: number): number {
  const a = Math.abs(x);
  if (!Number.isFinite(a)) return Infinity;
  if (a < MIN_NORMAL) return 2 ** -149;
  return 2 ** (Math.floor(Math.log2(a)) - 23);
}

/** The spacing of float16 values at `x`. */
export function halfUlpOf(x: number): number {
  const a = Math.abs(x);
  if (!Number.isFinite(a)) return Infinity;
  if (a < MIN_NORMAL_F16) return 2 ** -24;
  return 2 ** (Math.floor(Math.log2(a)) - 10);
}

/** A per-element tolerance: pass when within `ulp` units OR within `atol + rtol * |want|`. */
export interface Tol {
  ulp?: number;
  atol?: number;
  rtol?: number;
}

/** Exact equality (ulp 0), ±0 distinguished only when `signedZero`. */
export const EXACT: Tol = { ulp: 0 };

/** Replaces |x| < threshold by a zero of the same sign (a GPU's flush of subnormals). */
export function flush(x: number, threshold = MIN_NORMAL): number {
  return Math.abs(x) < threshold ? (Object.is(x, -0) || x < 0 ? -0 : 0) : x;
}

/**
 * Is `got` within `tol` of `want` (NaN only matches NaN)? With `ftz`, values below the smallest
 * normal may also compare as zeros of their sign (a GPU may flush subnormals).
 */
export function within(
  got: number,
  want: number,
  tol: Tol,
  opts: { half?: boolean; signedZero?: boolean; ftz?: boolean } = {},
): boolean {
  if (Number.isNaN(got) || Number.isNaN(want)) return Number.isNaN(got) && Number.isNaN(want);
  if (close(got, want, tol, opts)) return true;
  if (!opts.ftz) return false;
  const threshold = opts.half ? MIN_NORMAL_F16 : MIN_NORMAL;
  return close(flush(got, threshold), flush(want, threshold), tol, { ...opts, signedZero: false });
}

function close(
  got: number,
  want: number,
  tol: Tol,
  opts: { half?: boolean; signedZero?: boolean },
): boolean {
  if (got === want) return opts.signedZero ? Object.is(got, want) : true;
  // No bound at all (tan at a pole, where cos may round to 0): any value, infinities included.
  if (tol.atol === Infinity) return true;
  const ulp = tol.ulp ?? 0;
  const approx = ulp > 0 || (tol.atol ?? 0) > 0 || (tol.rtol ?? 0) > 0;
  if (!Number.isFinite(got) || !Number.isFinite(want)) {
    // An infinity matches only itself, or the largest finite value within the ULP budget (an
    // overflow one rounding away); absolute and relative bounds do not apply.
    return opts.half
      ? halfUlpDistance(got, want) <= (approx ? 1 : 0)
      : ulpDistance(got, want) <= ulp;
  }
  if (opts.half) {
    // Both values are float16: the f32 tolerance, plus one half-precision rounding of the f32
    // result whenever the op is not exact.
    const halfUlps = approx ? 1 + Math.ceil(ulp / 8192) : 0;
    if (halfUlpDistance(got, want) <= halfUlps) return true;
    if (!approx) return false;
    return Math.abs(got - want) <=
      (tol.atol ?? 0) + (tol.rtol ?? 0) * Math.abs(want) + ulp * ulpOf(want) + halfUlpOf(want);
  }
  if (ulpDistance(got, want) <= ulp) return true;
  const bound = (tol.atol ?? 0) + (tol.rtol ?? 0) * Math.abs(want);
  return bound > 0 && Math.abs(got - want) <= bound;
}

/** Formats a float with its bits, for messages. */
export function show(x: number): string {
  if (Object.is(x, -0)) return "-0";
  f32[0] = x;
  return `${x} (0x${u32[0].toString(16).padStart(8, "0")})`;
}

/**
 * Compares two results element by element; throws an AssertionError-like Error naming the first
 * few mismatches with `context(i)` (the inputs of element i).
 */
export function expectClose(
  label: string,
  got: ArrayLike<number>,
  want: ArrayLike<number>,
  ok: (i: number) => boolean,
  context: (i: number) => string = () => "",
): void {
  if (got.length !== want.length) {
    throw new Error(`${label}: length ${got.length} on the GPU, ${want.length} on WASM`);
  }
  const bad: string[] = [];
  let count = 0;
  for (let i = 0; i < got.length; i++) {
    if (ok(i)) continue;
    count++;
    if (bad.length < 5) {
      bad.push(`  [${i}] gpu ${show(got[i])} wasm ${show(want[i])} ${context(i)}`);
    }
  }
  if (count) {
    throw new Error(`${label}: ${count} of ${got.length} element(s) differ\n${bad.join("\n")}`);
  }
}

/** Exact equality of integer or bool results. */
export function expectExact(
  label: string,
  got: ArrayLike<number>,
  want: ArrayLike<number>,
  context?: (i: number) => string,
): void {
  expectClose(label, got, want, (i) => got[i] === want[i], context);
}
