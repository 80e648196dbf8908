/**
 * Random programs over the op table, for differential tests: a program is data (inputs with
 * several data sets, steps naming an op, its operands and parameters, and outputs), so it can be
 * run on any device, fused or not, eagerly or through `jit`, compared, shrunk, printed as JSON and
 * kept as a regression case.
 *
 * Comparing programs across devices needs a tolerance that follows the computation. Each value
 * carries what the generator knows of it:
 * - `exact`: both devices compute the same bits (IEEE add, sub, mul, max, min, casts, data
 *   movement, every integer op, ... over exact operands). Exact values must agree bit for bit.
 * - `depth`: how many inexact ops (division, transcendental functions, float sums, norms,
 *   products) lie on its longest path; an inexact value agrees within a relative tolerance that
 *   grows with depth, plus an absolute one scaled by the largest finite magnitude among the
 *   values it was computed from (the reference's), which covers cancellation.
 * - `tainted` (cross-device only): the reference met a subnormal on the way to this value (in an
 *   input, a result, or a constant a step made, such as a product's weights). A GPU may flush
 *   subnormals to zero (WGSL allows it), and its functions' error bounds are relative
 *   only for normal results (exp(-105) is 0 there, 1e-46 in float64). Such a value is compared
 *   only where both sides are finite, with the inexact tolerance: a flushed subnormal can turn
 *   into a zero, an infinity or a NaN downstream (sqrt(-1e-44) is NaN, sqrt(-0) is -0; an H200's
 *   matmul took Inf * 1e-41 for Inf * 0 = NaN). Inputs and constants hold subnormals in one
 *   program in four, so most programs are checked in full.
 *   Where the GPU flushes subnormals (a probe decides; an H200 does), a tainted value is compared
 *   by length only: the GPU computed another function of the inputs, subnormals replaced by zeros
 *   (sqrt(1e-40) is 0 there, notEqual(1e-45, 0) false, mod(1e-45, -23.75) 1e-45, not -23.75).
 *   lavapipe keeps subnormals, so there tainted values are compared as above.
 * - `unstable` (cross-device only): computed by an op with a pole or branch point at zero
 *   (reciprocal, division, log, sqrt, pow) from an inexact operand, which may be a rounding error
 *   away from the singularity on one device and not on the other. Only its length is compared
 *   across devices; fused against unfused and jit against eager still compare it bit for bit.
 * - Where the values an inexact value was computed from reach 1e18 (for a product or cumulative
 *   product, where the product of its operand's factors of magnitude 1 and more does), sums and
 *   products taken in another order (a GPU's tree, a product's fused multiply-adds) may overflow
 *   on the way or not: infinities and NaN are accepted there (an H200's matmul gave -Inf where
 *   WASM's gave NaN).
 * - `zeroSign`: computed by a maximum or minimum over axes (max, min, cummax, cummin, max pools)
 *   or from such a value. Where zeros of both signs tie for the extreme, either may come out:
 *   WASM's f32.min takes -0, lavapipe's column reduction gave +0 (NumPy's answer depends on the
 *   order too; gyre leaves it unspecified, and elementwise maximum and minimum alone follow IEEE
 *   754-2019). Such zeros compare equal, and an op with a pole at zero (1 / x) makes the value
 *   `unstable`.
 * Ops that are discontinuous in a float operand (comparisons, floor, round, sign, mod, casts to
 * integers or bool, argmax) only take exact operands, so a rounding difference upstream cannot
 * flip their result.
 * @module
 */
import * as gyre from "../src/mod.ts";
import { setPlanOverride } from "../src/tuning.ts";
import { kernelObservers } from "../src/contract/backend.ts";
import { FULL, hostData, mulberry32, pick, randInt, SPECIALS_F32 } from "./_harness.ts";

type DType = gyre.DType;
type Tensor = gyre.Tensor;

/** One input of a program: its shape, dtype and one data set per run. */
export interface ProgramInput {
  shape: number[];
  dtype: DType;
  /** Data sets (row-major); a jit test runs one call per set, the others use set 0. */
  data: number[][];
}

/** One step: `op` over the values `args` (inputs first, then earlier steps' results). */
export interface Step {
  op: string;
  args: number[];
  /** The result's dtype and shape (as generated). */
  out: DType;
  shape: number[];
  // deno-lint-ignore no-explicit-any
  p: Record<string, any>;
}

/** A program: data that any device can run. */
export interface Program {
  inputs: ProgramInput[];
  steps: Step[];
  /** Values returned. */
  outputs: number[];
  /** How intermediates go: all at the end by `tidy`, or each right after its last use. */
  release: "tidy" | "dispose";
}

/** What the generator knows of a value (see the module doc). */
interface Info {
  shape: number[];
  dtype: DType;
  exact: boolean;
  depth: number;
  tainted: boolean;
  /** Computed through a pole or a branch point from an inexact value (see the module doc). */
  unstable?: boolean;
  /** A zero of either sign may stand for another (see `zeroSign` in the module doc). */
  zeroSign?: boolean;
}

// deno-lint-ignore no-explicit-any
type Params = Record<string, any>;

interface OpSpec {
  /** Relative weight of the op in generation. */
  weight: number;
  /** Operands and parameters for this op over the values so far, or null when none fit. */
  gen(
    rng: () => number,
    vals: readonly Info[],
    ctx: GenContext,
  ): { args: number[]; p: Params } | null;
  run(args: Tensor[], p: Params, device: gyre.DeviceName): Tensor;
  /** Whether the result is computed identically on every device (given exact operands). */
  exact(args: readonly Info[], p: Params, out: DType): boolean;
}

interface GenContext {
  float16: boolean;
  /** The specials floats are drawn with: subnormals in one program in four. */
  specials: readonly number[];
}

const isFloat = (d: DType) => d === "float32" || d === "float16";
const isInt = (d: DType) => d === "int32" || d === "uint32";

/** Indices of values passing `ok`. */
function candidates(vals: readonly Info[], ok: (v: Info) => boolean): number[] {
  const out: number[] = [];
  vals.forEach((v, i) => ok(v) && out.push(i));
  return out;
}

function pickValue(rng: () => number, vals: readonly Info[], ok: (v: Info) => boolean): number {
  const c = candidates(vals, ok);
  // Later values more often: programs grow chains rather than fans.
  if (!c.length) return -1;
  return c[Math.min(c.length - 1, Math.floor(c.length * Math.sqrt(rng())))];
}

const size = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

/** A shape `shape` broadcasts with: itself, a trailing part, or some axes set to 1. */
function broadcastPartner(rng: () => number, shape: readonly number[]): number[] {
  const r = rng();
  if (r < 0.5) return [...shape];
  if (r < 0.75) return shape.slice(randInt(rng, 0, shape.length));
  return shape.map((d) => (rng() < 0.5 ? 1 : d));
}

function broadcastable(a: readonly number[], b: readonly number[]): boolean {
  for (let i = 1; i <= Math.min(a.length, b.length); i++) {
    const x = a[a.length - i], y = b[b.length - i];
    if (x !== y && x !== 1 && y !== 1) return false;
  }
  return true;
}

/** Values for a constant made inside the program (small, with specials for floats). */
function constantData(rng: () => number, dtype: DType, n: number, ctx: GenContext): number[] {
  const domain = { ...FULL, minExp: -8, maxExp: 8, specials: ctx.specials, pSpecial: 0.1 };
  return Array.from(hostData(rng, dtype, n, domain, { lo: -5, hi: 5 }));
}

const SCALARS = [0, 1, -1, 0.5, 2, 3, -2.5, 1e-7, 1e8, 0.1, NaN, Infinity, -0];

function scalarFor(rng: () => number, dtype: DType): number {
  // A fresh value now and then: every distinct scalar must not cost a kernel.
  const v = rng() < 0.3 ? Math.round(rng() * 1000) / 8 - 60 : pick(rng, SCALARS);
  if (dtype === "bool") return v ? 1 : 0;
  if (isInt(dtype)) return Number.isFinite(v) ? Math.abs(Math.trunc(v)) : 2;
  return v;
}

const UNARY_EXACT = ["neg", "abs", "square", "relu"] as const;
const UNARY_STEP = ["floor", "ceil", "round", "sign"] as const;
const UNARY_INEXACT = [
  "exp",
  "log",
  "sqrt",
  "tanh",
  "sigmoid",
  "expm1",
  "log1p",
  "erf",
  "reciprocal",
  "exp2",
  "log2",
  "rsqrt",
  "softplus",
  "gelu",
  "silu",
  "elu",
  "mish",
  "sin",
  "cos",
] as const;
const BINARY_EXACT = ["add", "sub", "mul", "maximum", "minimum"] as const;
const BINARY_INEXACT = ["div", "pow"] as const;
const COMPARE = ["less", "greaterEqual", "equal", "notEqual"] as const;
const REDUCE = [
  "sum",
  "mean",
  "max",
  "min",
  "prod",
  "logsumexp",
  "variance",
  "std",
  "argmax",
  "argmin",
  "all",
  "any",
] as const;

// deno-lint-ignore no-explicit-any
const call = (name: string, ...a: any[]): Tensor => (gyre as any)[name](...a);

function unaryOps(): Record<string, OpSpec> {
  const out: Record<string, OpSpec> = {};
  for (const name of UNARY_EXACT) {
    out[name] = {
      weight: 1,
      gen: (rng, vals) => {
        const a = pickValue(
          rng,
          vals,
          (v) => v.dtype !== "bool" && (name !== "relu" || isFloat(v.dtype)),
        );
        return a < 0 ? null : { args: [a], p: {} };
      },
      run: ([x]) => call(name, x),
      exact: () => true,
    };
  }
  for (const name of UNARY_STEP) {
    out[name] = {
      weight: 0.6,
      gen: (rng, vals) => {
        const a = pickValue(rng, vals, (v) => v.exact && isFloat(v.dtype));
        return a < 0 ? null : { args: [a], p: {} };
      },
      run: ([x]) => call(name, x),
      exact: () => true,
    };
  }
  for (const name of UNARY_INEXACT) {
    out[name] = {
      weight: 0.5,
      gen: (rng, vals) => {
        const a = pickValue(rng, vals, (v) => isFloat(v.dtype));
        return a < 0 ? null : { args: [a], p: {} };
      },
      run: ([x]) => call(name, x),
      exact: () => false,
    };
  }
  return out;
}

function binaryOps(): Record<string, OpSpec> {
  const out: Record<string, OpSpec> = {};
  const gen =
    (needExact: boolean, floatOnly: boolean) => (rng: () => number, vals: readonly Info[]) => {
      const ok = (v: Info) =>
        v.dtype !== "bool" && (!floatOnly || isFloat(v.dtype)) && (!needExact || v.exact);
      const a = pickValue(rng, vals, ok);
      if (a < 0) return null;
      if (rng() < 0.35) return { args: [a], p: { scalar: scalarFor(rng, vals[a].dtype) } };
      const b = pickValue(rng, vals, (v) => ok(v) && broadcastable(v.shape, vals[a].shape));
      if (b < 0) return null;
      return rng() < 0.5 ? { args: [a, b], p: {} } : { args: [b, a], p: {} };
    };
  const run = (name: string) => (args: Tensor[], p: Params) =>
    args.length === 1 ? call(name, args[0], p.scalar) : call(name, args[0], args[1]);
  for (const name of BINARY_EXACT) {
    out[name] = { weight: 1.5, gen: gen(false, false), run: run(name), exact: () => true };
  }
  for (const name of BINARY_INEXACT) {
    out[name] = {
      weight: 0.6,
      gen: gen(false, name === "pow"),
      run: run(name),
      exact: (_a, _p, dtype) => !isFloat(dtype),
    };
  }
  out.mod = { weight: 0.4, gen: gen(true, false), run: run("mod"), exact: () => true };
  for (const name of COMPARE) {
    out[name] = { weight: 0.5, gen: gen(true, false), run: run(name), exact: () => true };
  }
  return out;
}

const OPS: Record<string, OpSpec> = {
  ...unaryOps(),
  ...binaryOps(),
  where: {
    weight: 0.8,
    gen: (rng, vals) => {
      const c = pickValue(rng, vals, (v) => v.dtype === "bool");
      if (c < 0) return null;
      const a = pickValue(
        rng,
        vals,
        (v) => v.dtype !== "bool" && broadcastable(v.shape, vals[c].shape),
      );
      if (a < 0) return null;
      return { args: [c, a], p: { scalar: scalarFor(rng, vals[a].dtype), swap: rng() < 0.5 } };
    },
    run: ([c, a], p) => (p.swap ? gyre.where(c, p.scalar, a) : gyre.where(c, a, p.scalar)),
    exact: () => true,
  },
  logical: {
    weight: 0.3,
    gen: (rng, vals) => {
      const a = pickValue(rng, vals, (v) => v.dtype === "bool");
      const b = a < 0
        ? -1
        : pickValue(rng, vals, (v) => v.dtype === "bool" && broadcastable(v.shape, vals[a].shape));
      return b < 0 ? null : { args: [a, b], p: { op: pick(rng, ["logicalAnd", "logicalOr"]) } };
    },
    run: ([a, b], p) => call(p.op, a, b),
    exact: () => true,
  },
  cast: {
    weight: 1,
    gen: (rng, vals, ctx) => {
      const dtypes: DType[] = ["float32", "int32", "uint32", "bool"];
      if (ctx.float16) dtypes.push("float16");
      const to = pick(rng, dtypes);
      // Casts to integers and bool are discontinuous: exact operands only.
      const a = pickValue(
        rng,
        vals,
        (v) => v.exact || !(isInt(to) || to === "bool") || !isFloat(v.dtype),
      );
      return a < 0 ? null : { args: [a], p: { dtype: to } };
    },
    run: ([x], p) => gyre.cast(x, p.dtype),
    exact: () => true,
  },
  clip: {
    weight: 0.4,
    gen: (rng, vals) => {
      const a = pickValue(rng, vals, (v) => isFloat(v.dtype));
      if (a < 0) return null;
      const lo = rng() < 0.8 ? -randInt(rng, 0, 4) / 2 : null;
      const hi = lo === null || rng() < 0.8 ? randInt(rng, 0, 4) / 2 : null;
      return { args: [a], p: { lo, hi } };
    },
    run: ([x], p) => gyre.clip(x, p.lo, p.hi),
    exact: () => true,
  },
  reduce: {
    weight: 1.5,
    gen: (rng, vals) => {
      const op = pick(rng, REDUCE);
      const discontinuous = op === "argmax" || op === "argmin" || op === "all" || op === "any";
      const a = pickValue(
        rng,
        vals,
        (v) =>
          (op === "all" || op === "any" || v.dtype !== "bool") && (!discontinuous || v.exact) &&
          (!["mean", "logsumexp", "variance", "std"].includes(op) || isFloat(v.dtype)),
      );
      if (a < 0) return null;
      const rank = vals[a].shape.length;
      const p: Params = { op };
      const r = rng();
      if (op === "argmax" || op === "argmin") {
        if (rank > 0 && r < 0.7) p.axis = randInt(rng, -rank, rank - 1);
      } else if (rank > 0 && r < 0.5) p.axis = randInt(rng, -rank, rank - 1);
      else if (rank > 1 && r < 0.7) p.axis = [0, rank - 1];
      else if (r < 0.75) p.axis = [];
      if (rng() < 0.3) p.keepdims = true;
      if ((op === "variance" || op === "std") && rng() < 0.3) p.ddof = 1;
      return { args: [a], p };
    },
    run: ([x], p) => {
      const { op, ...options } = p;
      return call(op, x, options);
    },
    exact: (args, p, out) =>
      ["max", "min", "argmax", "argmin", "all", "any"].includes(p.op) ||
      ((p.op === "sum" || p.op === "prod") && !isFloat(out)) ||
      // Over no axis, or one element, most reductions are the identity (or 0, for variance).
      (size(args[0].shape) <= 1 && ["sum", "mean", "prod", "variance", "std"].includes(p.op)),
  },
  rows: {
    weight: 1,
    gen: (rng, vals) => {
      const a = pickValue(rng, vals, (v) => isFloat(v.dtype) && v.shape.length > 0);
      if (a < 0) return null;
      const op = pick(rng, ["softmax", "logSoftmax", "layerNorm", "rmsNorm"]);
      const rank = vals[a].shape.length;
      const p: Params = { op };
      if (op.endsWith("oftmax") && rng() < 0.5) p.axis = randInt(rng, -rank, rank - 1);
      return { args: [a], p };
    },
    run: ([x], p) => {
      const { op, ...options } = p;
      return call(op, x, options);
    },
    exact: () => false,
  },
  scan: {
    weight: 1,
    gen: (rng, vals) => {
      const a = pickValue(rng, vals, (v) => v.dtype !== "bool" && v.shape.length > 0);
      if (a < 0) return null;
      const rank = vals[a].shape.length;
      return {
        args: [a],
        p: {
          op: pick(rng, ["cumsum", "cumprod", "cummax", "cummin"]),
          axis: randInt(rng, -rank, rank - 1),
          exclusive: rng() < 0.3,
          reverse: rng() < 0.3,
        },
      };
    },
    run: ([x], p) => {
      const { op, ...options } = p;
      return call(op, x, options);
    },
    exact: (_args, p, out) => p.op === "cummax" || p.op === "cummin" || !isFloat(out),
  },
  pool: {
    weight: 0.8,
    gen: (rng, vals) => {
      const a = pickValue(
        rng,
        vals,
        (v) => isFloat(v.dtype) && v.shape.length >= 2 && v.shape.every((d) => d > 0),
      );
      if (a < 0) return null;
      // Ranks 2 and 3 are read as one image of one channel, or channels of one image.
      const [h, w] = vals[a].shape.slice(-2);
      const op = pick(rng, ["maxPool2d", "avgPool2d", "adaptiveAvgPool2d", "adaptiveMaxPool2d"]);
      if (op.startsWith("adaptive")) {
        return { args: [a], p: { op, outputSize: [randInt(rng, 1, h), randInt(rng, 1, w)] } };
      }
      const k = randInt(rng, 1, Math.min(3, h, w));
      return {
        args: [a],
        p: {
          op,
          kernelSize: k,
          stride: randInt(rng, 1, k),
          padding: randInt(rng, 0, Math.floor(k / 2)),
        },
      };
    },
    run: ([value], p) => {
      const { op, outputSize, ...options } = p;
      const lead = [1, 1].slice(0, Math.max(0, 4 - value.shape.length));
      const x = gyre.reshape(value, [...lead, ...value.shape.slice(-4)]);
      return op.startsWith("adaptive") ? call(op, x, outputSize) : call(op, x, options);
    },
    exact: (_a, p) => p.op === "maxPool2d" || p.op === "adaptiveMaxPool2d",
  },
  matmul: {
    weight: 1,
    gen: (rng, vals, ctx) => {
      const a = pickValue(
        rng,
        vals,
        (v) => (isFloat(v.dtype) || v.dtype === "int32") && v.shape.length >= 1,
      );
      if (a < 0) return null;
      const k = vals[a].shape[vals[a].shape.length - 1];
      const n = randInt(rng, 1, 6);
      const dtype = vals[a].dtype;
      const weight = constantData(rng, dtype, k * n, ctx);
      const linear = vals[a].shape.length >= 2 && rng() < 0.4;
      const p: Params = { n, weight, linear };
      if (linear) {
        if (rng() < 0.6) p.bias = constantData(rng, dtype, n, ctx);
        p.activation = pick(rng, ["none", "relu", "gelu", "silu", "tanh", "sigmoid"]);
      }
      return { args: [a], p };
    },
    run: ([x], p, device) => {
      const k = x.shape[x.shape.length - 1];
      const dtype = x.dtype;
      if (!p.linear) {
        return gyre.matmul(x, gyre.tensor(p.weight, { dtype, device }).reshape([k, p.n]));
      }
      const w = gyre.tensor(p.weight, { dtype, device }).reshape([p.n, k]);
      const bias = p.bias ? gyre.tensor(p.bias, { dtype, device }) : undefined;
      return gyre.linear(x, w, { bias, activation: p.activation });
    },
    exact: (_a, p, out) =>
      !isFloat(out) && (!p.linear || p.activation === "none" || p.activation === "relu"),
  },
  transpose: {
    weight: 0.8,
    gen: (rng, vals) => {
      const a = pickValue(rng, vals, (v) => v.shape.length >= 2);
      if (a < 0) return null;
      const perm = [...vals[a].shape.keys()].sort(() => rng() - 0.5);
      return { args: [a], p: { perm } };
    },
    run: ([x], p) => gyre.transpose(x, p.perm),
    exact: () => true,
  },
  slice: {
    weight: 0.8,
    gen: (rng, vals) => {
      const a = pickValue(rng, vals, (v) => v.shape.length >= 1);
      if (a < 0) return null;
      const ranges = vals[a].shape.map((d) => {
        const step = pick(rng, [1, 1, 2, -1, -2]);
        const lo = randInt(rng, 0, Math.max(0, d - 1));
        const hi = randInt(rng, lo, d);
        return step > 0
          ? [lo, hi, step]
          : [hi - 1 < 0 ? null : hi - 1, lo > 0 ? lo - 1 : null, step];
      });
      return { args: [a], p: { ranges } };
    },
    run: ([x], p) => gyre.slice(x, ...p.ranges),
    exact: () => true,
  },
  reshape: {
    weight: 0.6,
    gen: (rng, vals) => {
      const a = pickValue(rng, vals, () => true);
      if (a < 0) return null;
      const n = size(vals[a].shape);
      const r = rng();
      let shape: number[];
      if (r < 0.3) shape = [n];
      else if (r < 0.6 && n > 0) {
        const divisors = [...Array(n).keys()].map((i) => i + 1).filter((d) => n % d === 0);
        const d = pick(rng, divisors);
        shape = [d, -1];
      } else if (n > 0 && n % 4 === 0) shape = [1, 2, n / 4, 2];
      else shape = [...vals[a].shape].reverse();
      return { args: [a], p: { shape } };
    },
    run: ([x], p) => gyre.reshape(x, p.shape),
    exact: () => true,
  },
  broadcast: {
    weight: 0.5,
    gen: (rng, vals) => {
      const a = pickValue(rng, vals, (v) => v.shape.length <= 3);
      if (a < 0) return null;
      const shape = [
        randInt(rng, 1, 3),
        ...vals[a].shape.map((d) => (d === 1 ? randInt(rng, 1, 3) : d)),
      ];
      return { args: [a], p: { shape } };
    },
    run: ([x], p) => gyre.broadcastTo(x, p.shape),
    exact: () => true,
  },
  expandSqueeze: {
    weight: 0.4,
    gen: (rng, vals) => {
      const a = pickValue(rng, vals, (v) => v.shape.length <= 3);
      if (a < 0) return null;
      const squeezable = vals[a].shape.some((d) => d === 1);
      if (squeezable && rng() < 0.5) return { args: [a], p: { squeeze: true } };
      return { args: [a], p: { axis: randInt(rng, 0, vals[a].shape.length) } };
    },
    run: ([x], p) => (p.squeeze ? gyre.squeeze(x) : gyre.expandDims(x, p.axis)),
    exact: () => true,
  },
  concat: {
    weight: 0.6,
    gen: (rng, vals) => {
      const a = pickValue(rng, vals, (v) => v.shape.length >= 1);
      if (a < 0) return null;
      const b = pickValue(
        rng,
        vals,
        (v) => v.dtype === vals[a].dtype && v.shape.join() === vals[a].shape.join(),
      );
      const rank = vals[a].shape.length;
      return { args: [a, b], p: { stack: rng() < 0.3, axis: randInt(rng, 0, rank - 1) } };
    },
    run: ([a, b], p) => (p.stack ? gyre.stack([a, b], p.axis) : gyre.concat([a, b], p.axis)),
    exact: () => true,
  },
  // Integer-array indexing: data movement (exact). Index data is drawn here and made a tensor on
  // the device when the step runs.
  gather: {
    weight: 0.6,
    gen: (rng, vals) => {
      const a = pickValue(rng, vals, (v) => v.shape.length >= 1 && v.shape.every((d) => d > 0));
      if (a < 0) return null;
      const shape = vals[a].shape;
      const axis = randInt(rng, 0, shape.length - 1);
      const n = shape[axis];
      const op = pick(rng, ["takeAlongAxis", "indexSelect", "take"]);
      const count = randInt(rng, 1, 5);
      const indexShape = op === "takeAlongAxis"
        ? shape.map((d, k) => (k === axis ? count : rng() < 0.3 ? 1 : d))
        : [count];
      const data = Array.from({ length: size(indexShape) }, () => randInt(rng, -n, n - 1));
      return { args: [a], p: { op, axis, indexShape, data } };
    },
    run: ([x], p, device) => {
      const indices = gyre.tensor(p.data, { dtype: "int32", device }).reshape(p.indexShape);
      return call(p.op, x, indices, { axis: p.axis });
    },
    exact: () => true,
  },
  // Scatters whose result does not depend on the order updates meet: stores to distinct places,
  // max and min, integer sums and products (float sums may differ between runs on a GPU).
  scatter: {
    weight: 0.5,
    gen: (rng, vals, ctx) => {
      const a = pickValue(rng, vals, (v) => v.shape.length >= 1 && v.shape.every((d) => d > 0));
      if (a < 0) return null;
      const { shape, dtype } = vals[a];
      const axis = randInt(rng, 0, shape.length - 1);
      const n = shape[axis];
      const reduces = dtype === "bool"
        ? ["none", "max", "min"]
        : isFloat(dtype)
        ? ["none", "max", "min"]
        : ["none", "sum", "prod", "max", "min", "mean"];
      const reduce = pick(rng, reduces);
      // Plain stores: distinct indices along the axis in every line (a prefix of a permutation).
      const count = reduce === "none" ? randInt(rng, 1, n) : randInt(rng, 1, 5);
      const indexShape = shape.map((d, k) => (k === axis ? count : randInt(rng, 1, d)));
      const lines = size(indexShape) / count;
      const stride = size(indexShape.slice(axis + 1));
      const data = new Array<number>(size(indexShape)).fill(0);
      for (let line = 0; line < lines; line++) {
        const perm = [...Array(n).keys()].sort(() => rng() - 0.5);
        const outer = Math.floor(line / stride);
        const inner = line % stride;
        for (let k = 0; k < count; k++) {
          data[(outer * count + k) * stride + inner] = reduce === "none"
            ? perm[k] - (rng() < 0.3 ? n : 0)
            : randInt(rng, -n, n - 1);
        }
      }
      const updates = constantData(
        rng,
        dtype === "float16" ? "float32" : dtype,
        size(indexShape),
        ctx,
      );
      return { args: [a], p: { axis, reduce, indexShape, data, updates } };
    },
    run: ([x], p, device) => {
      const indices = gyre.tensor(p.data, { dtype: "int32", device }).reshape(p.indexShape);
      const updates = gyre.tensor(p.updates, { dtype: x.dtype, device }).reshape(p.indexShape);
      return gyre.scatter(x, indices, updates, { axis: p.axis, reduce: p.reduce });
    },
    exact: () => true,
  },
  constant: {
    weight: 0.7,
    gen: (rng, vals, ctx) => {
      // A tensor made inside the program, combined with a value at once (else it is dead code).
      const a = pickValue(rng, vals, (v) => v.dtype !== "bool");
      if (a < 0) return null;
      const shape = broadcastPartner(rng, vals[a].shape);
      const kind = pick(rng, ["tensor", "full", "arange", "uniform", "eye"]);
      const dtype = vals[a].dtype === "float16" && !ctx.float16 ? "float32" : vals[a].dtype;
      const p: Params = { kind, shape, op: pick(rng, ["add", "mul", "maximum", "sub"]) };
      if (kind === "tensor") p.data = constantData(rng, dtype, size(shape), ctx);
      if (kind === "full") p.value = scalarFor(rng, dtype);
      if (kind === "uniform") p.seed = randInt(rng, 0, 1000);
      return { args: [a], p };
    },
    run: ([x], p, device) => {
      const { dtype } = x;
      const n = size(p.shape);
      let c: Tensor;
      switch (p.kind) {
        case "tensor":
          c = gyre.tensor(p.data, { dtype, device }).reshape(p.shape);
          break;
        case "full":
          c = gyre.full(p.shape, p.value, { dtype, device });
          break;
        case "arange":
          c = gyre.arange(n, undefined, undefined, { dtype, device }).reshape(p.shape);
          break;
        case "uniform":
          c = gyre.cast(
            gyre.random.uniform(p.shape, { seed: p.seed, device, low: -2, high: 2 }),
            dtype,
          );
          break;
        default: {
          const rows = p.shape.length ? p.shape[p.shape.length - 1] : 1;
          c = gyre.eye(rows, rows, { dtype, device }).slice(0).broadcastTo(
            p.shape.length ? p.shape : [],
          );
        }
      }
      return call(p.op, x, c);
    },
    exact: (_a, p, out) => p.kind !== "uniform" || !isFloat(out),
  },
};

/** The names of every op the generator draws from. */
export const OP_NAMES: readonly string[] = Object.keys(OPS);

/** Options of {@link generateProgram}. */
export interface GenerateOptions {
  /** Steps at most (default 8). */
  maxSteps?: number;
  /** Data sets per input (default 1). */
  dataSets?: number;
  /** Whether float16 may appear (the GPU needs shader-f16). */
  float16?: boolean;
}

function inputShape(rng: () => number): number[] {
  const rank = pick(rng, [0, 1, 1, 2, 2, 2, 3, 4]);
  return Array.from({ length: rank }, () => (rng() < 0.04 ? 0 : pick(rng, [1, 2, 3, 4, 5, 7, 8])));
}

function infoOf(t: Tensor, exact: boolean, depth: number, tainted: boolean): Info {
  return { shape: [...t.shape], dtype: t.dtype, exact, depth, tainted };
}

const isSubnormal = (v: number) => v !== 0 && Math.abs(v) < 2 ** -126;

/**
 * A random program from `seed`. Each step is checked as it is drawn by recording it lazily on
 * WASM (shapes and dtypes come from there; a draw an op refuses is drawn again).
 */
export function generateProgram(seed: number, options: GenerateOptions = {}): Program {
  const rng = mulberry32(seed);
  const inputs: ProgramInput[] = [];
  const base = inputShape(rng);
  const nInputs = randInt(rng, 1, 3);
  // Subnormal inputs and constants in one program in four (see `tainted` in the module doc).
  const specials = rng() < 0.25
    ? SPECIALS_F32
    : SPECIALS_F32.filter((v) => v === 0 || Math.abs(v) >= 2 ** -126);
  const ctx: GenContext = { float16: options.float16 ?? false, specials };
  for (let i = 0; i < nInputs; i++) {
    const shape = i === 0 || rng() < 0.3
      ? (i === 0 ? base : inputShape(rng))
      : broadcastPartner(rng, base);
    const dtypes: DType[] = ["float32", "float32", "float32", "int32", "uint32", "bool"];
    if (ctx.float16) dtypes.push("float16");
    const dtype = pick(rng, dtypes);
    const sets = Array.from({ length: options.dataSets ?? 1 }, () => {
      const domain = { ...FULL, minExp: -20, maxExp: 20, specials, pSpecial: 0.1 };
      return Array.from(
        hostData(rng, dtype, size(shape), domain, rng() < 0.5 ? { lo: -9, hi: 9 } : undefined),
      );
    });
    inputs.push({ shape, dtype, data: sets });
  }
  const program: Program = {
    inputs,
    steps: [],
    outputs: [],
    release: rng() < 0.5 ? "tidy" : "dispose",
  };
  const names = Object.keys(OPS);
  const weights = names.map((n) => OPS[n].weight);
  const total = weights.reduce((a, b) => a + b, 0);
  const maxSteps = options.maxSteps ?? 8;
  const steps = randInt(rng, 1, maxSteps);
  const saved = gyre.runtime().fusion;
  gyre.runtime().fusion = true;
  try {
    gyre.tidy(() => {
      const tensors = inputs.map((inp) =>
        gyre.tensor(inp.data[0], { dtype: inp.dtype, device: "wasm" }).reshape(inp.shape)
      );
      const vals: Info[] = inputs.map((inp, i) =>
        infoOf(tensors[i], true, 0, inp.data.some((set) => set.some(isSubnormal)))
      );
      for (let s = 0, tries = 0; s < steps && tries < 60; tries++) {
        let r = rng() * total;
        let k = 0;
        while ((r -= weights[k]) > 0) k++;
        const spec = OPS[names[k]];
        const drawn = spec.gen(rng, vals, ctx);
        if (!drawn) continue;
        let t: Tensor;
        try {
          t = spec.run(drawn.args.map((a) => tensors[a]), drawn.p, "wasm");
        } catch {
          continue;
        }
        if (size(t.shape) > 4096 || (!ctx.float16 && t.dtype === "float16")) continue;
        const args = drawn.args.map((a) => vals[a]);
        const exact = args.every((a) => a.exact) && spec.exact(args, drawn.p, t.dtype);
        const depth = Math.max(0, ...args.map((a) => a.depth)) + (exact ? 0 : 1);
        vals.push(infoOf(t, exact, depth, args.some((a) => a.tainted)));
        tensors.push(t);
        program.steps.push({ op: names[k], ...drawn, out: t.dtype, shape: [...t.shape] });
        s++;
      }
    });
  } finally {
    gyre.runtime().fusion = saved;
  }
  const last = inputs.length + program.steps.length - 1;
  program.outputs = [last];
  if (rng() < 0.4 && last > 0) program.outputs.push(randInt(rng, 0, last - 1));
  return program;
}

/** Runs `program` on tensors `inputs` (one per program input); returns its outputs. */
export function interpret(
  program: Program,
  inputs: readonly Tensor[],
  device: gyre.DeviceName,
): Tensor[] {
  return gyre.tidy(() => {
    const values: Tensor[] = [...inputs];
    const lastUse = new Map<number, number>();
    program.steps.forEach((s, i) => s.args.forEach((a) => lastUse.set(a, i)));
    const keep = new Set([...program.outputs, ...inputs.keys()]);
    program.steps.forEach((s, i) => {
      values.push(OPS[s.op].run(s.args.map((a) => values[a]), s.p, device));
      if (program.release !== "dispose") return;
      for (const a of new Set(s.args)) {
        if (lastUse.get(a) === i && !keep.has(a)) values[a].dispose();
      }
    });
    return program.outputs.map((o) => values[o]);
  });
}

/** The program's input tensors on `device` for data set `set`. */
export function programInputs(program: Program, device: gyre.DeviceName, set = 0): Tensor[] {
  return gyre.tidy(() =>
    program.inputs.map((inp) =>
      gyre.tensor(inp.data[set % inp.data.length], { dtype: inp.dtype, device }).reshape(inp.shape)
    )
  );
}

/** Values the generator knows of each of the program's values (for tolerances). */
export function programInfo(program: Program): Info[] {
  const vals: Info[] = program.inputs.map((inp) => ({
    shape: inp.shape,
    dtype: inp.dtype,
    exact: true,
    depth: 0,
    tainted: inp.data.some((set) => set.some(isSubnormal)),
  }));
  for (const s of program.steps) {
    const args = s.args.map((a) => vals[a]);
    const out = s.out;
    const exact = args.every((a) => a.exact) && OPS[s.op].exact(args, s.p, out);
    const singular = SINGULAR_AT_ZERO.has(s.op) &&
      args.some((a) => !a.exact || a.zeroSign);
    vals.push({
      shape: s.shape,
      dtype: out,
      exact,
      depth: Math.max(0, ...args.map((a) => a.depth)) + (exact ? 0 : 1),
      tainted: args.some((a) => a.tainted),
      unstable: singular || args.some((a) => a.unstable),
      zeroSign: ZERO_SIGN_UNSPECIFIED.has(s.p.op) || args.some((a) => a.zeroSign),
    });
  }
  return vals;
}

/**
 * Ops with a pole or a branch point at 0 (or -1): an inexact operand near it turns a rounding
 * difference into any difference at all (1 / 1e-15 against 1 / 0, sqrt(-1e-30) against
 * sqrt(0)).
 */
const SINGULAR_AT_ZERO = new Set([
  "reciprocal",
  "rsqrt",
  "log",
  "log2",
  "log1p",
  "sqrt",
  "div",
  "pow",
]);

/**
 * Ops whose result may be a zero of either sign where zeros of both signs tie for it: maxima and
 * minima over axes, cumulative ones, max pools (see `zeroSign` in the module doc).
 */
const ZERO_SIGN_UNSPECIFIED = new Set([
  "max",
  "min",
  "cummax",
  "cummin",
  "maxPool2d",
  "adaptiveMaxPool2d",
]);

/** One output's comparison rule. */
export interface Tolerance {
  /** Bit for bit (NaN equals NaN; ±0 differ unless `zeroSign`). */
  exact: boolean;
  /** +0 and -0 are equal (see `zeroSign` in the module doc). */
  zeroSign: boolean;
  rtol: number;
  /** Absolute slack: rtol times the largest finite magnitude the value was computed from. */
  atol: number;
  /** A subnormal may come back as a zero of either sign (a flushing GPU). */
  flush: boolean;
  /** Only finite pairs are compared (see `tainted` in the module doc). */
  loose: boolean;
  /** The largest finite magnitude the value was computed from. */
  scale: number;
}

/**
 * The tolerance for output `o` of a program run against the reference, given the generator's
 * knowledge and `scale`, the largest finite magnitude among the reference's values it depends on.
 * `sameDevice`: both runs execute the same kernels on one device (fused against unfused, eager
 * against jit), so only a different summation order (a fused reduction's other plan) may differ.
 */
export function tolerance(info: Info, scale: number, sameDevice: boolean): Tolerance {
  const exact = info.exact && (sameDevice || !info.tainted);
  const half = info.dtype === "float16";
  let rtol = Math.min(0.05, 1e-4 * 4 ** info.depth);
  if (half) rtol = Math.max(rtol, 2e-3 * (1 + info.depth));
  if (sameDevice) rtol = Math.min(rtol, 1e-5 * 4 ** info.depth);
  return {
    exact,
    zeroSign: info.zeroSign ?? false,
    rtol,
    atol: rtol * scale,
    flush: info.tainted || half,
    loose: info.tainted,
    scale,
  };
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
const bitsOf = (v: number) => ((f32[0] = v), u32[0]);

/** Why `got` differs from `want` under `tol`, or null when they agree. */
export function disagreement(
  want: ArrayLike<number>,
  got: ArrayLike<number>,
  tol: Tolerance,
  dtype: DType,
): string | null {
  if (want.length !== got.length) return `length ${got.length}, expected ${want.length}`;
  const tiny = tol.flush ? (dtype === "float16" ? 2 ** -14 : 2 ** -126) : 0;
  for (let i = 0; i < want.length; i++) {
    const w = want[i], g = got[i];
    if (tol.loose && !(Number.isFinite(w) && Number.isFinite(g))) continue;
    if (Number.isNaN(w) || Number.isNaN(g)) {
      if (Number.isNaN(w) && Number.isNaN(g)) continue;
      // Overflow in another order: Inf - Inf or Inf * 0 on one side only (see the module doc).
      if (!tol.exact && tol.scale >= 1e18) continue;
      return `[${i}] ${g}, expected ${w}`;
    }
    if (tol.exact && !isFloat(dtype)) {
      if (w !== g) return `[${i}] ${g}, expected ${w} exactly`;
      continue;
    }
    if (tol.exact && !tol.flush) {
      if (tol.zeroSign && w === 0 && g === 0) continue;
      if (bitsOf(w) !== bitsOf(g)) return `[${i}] ${g}, expected ${w} bit for bit`;
      continue;
    }
    if (tiny && Math.abs(w) < tiny && Math.abs(g) < tiny) continue;
    if (w === g) continue;
    if (!Number.isFinite(w) || !Number.isFinite(g)) {
      // Only inexact values near the ends of the range may land on the other side of overflow;
      // and where the values it came from reach 1e18 (their products overflow), a sum or product
      // taken in another order may overflow on the way (Inf, or Inf * 0 = NaN) or not.
      if (
        !tol.exact && (Math.abs(w) > 1e37 || Math.abs(g) > 1e37) && Math.sign(w) === Math.sign(g)
      ) continue;
      if (!tol.exact && tol.scale >= 1e18) continue;
      return `[${i}] ${g}, expected ${w}`;
    }
    if (tol.exact) return `[${i}] ${g}, expected ${w}`;
    if (Math.abs(g - w) > tol.rtol * Math.abs(w) + tol.atol) {
      return `[${i}] ${g}, expected ${w} (rtol ${tol.rtol.toExponential(1)}, atol ${
        tol.atol.toExponential(1)
      })`;
    }
  }
  return null;
}

/** The largest finite magnitude of each value and of everything it was computed from. */
export function scales(program: Program, values: readonly ArrayLike<number>[]): number[] {
  const own = values.map(largest);
  // A step's own constants (a product's weights) count as values it was computed from.
  program.steps.forEach((s, i) => {
    const k = program.inputs.length + i;
    for (const c of [s.p.weight, s.p.bias, s.p.data, [s.p.value]]) {
      if (Array.isArray(c)) own[k] = Math.max(own[k] ?? 0, largest(c));
    }
  });
  const out = own.slice(0, program.inputs.length);
  program.steps.forEach((s, i) => {
    const k = program.inputs.length + i;
    // A product's partial products, in some order, reach the product of its large factors.
    const product = s.p.op === "prod" || s.p.op === "cumprod" ? largeProduct(values[s.args[0]]) : 0;
    out.push(Math.max(own[k] ?? 0, product, productScale(s, out), ...s.args.map((a) => out[a])));
  });
  return out;
}

/**
 * A product's scale: its factors' scales multiplied, since an error in one factor comes out
 * times the other (an H100's layerNorm of a row holding -3.4e38 gave 0 where WASM's float64
 * gave 0.7, and a matmul by 3.4e38 made that 2.4e38). Sums of K products count K of them.
 */
function productScale(s: Step, out: readonly number[]): number {
  const [a, b] = s.args.map((i) => out[i]);
  const most = (c: unknown) => (Array.isArray(c) ? largest(c) : 0);
  if (s.op === "square") return a * a;
  if (s.op === "mul") return s.args.length === 2 ? a * b : a * Math.abs(s.p.scalar || 0);
  if (s.op === "constant" && s.p.op === "mul") {
    const n = s.shape.reduce((x: number, y: number) => x * y, 1);
    const c = { tensor: most(s.p.data), full: Math.abs(s.p.value), arange: n, uniform: 2, eye: 1 };
    return a * (c[s.p.kind as keyof typeof c] || 0);
  }
  if (s.op === "matmul") return a * most(s.p.weight) * (s.p.weight.length / s.p.n) + most(s.p.bias);
  return 0;
}

/** The largest finite magnitude among the numbers of `v` (0 for none). */
function largest(v: ArrayLike<unknown>): number {
  let m = 0;
  for (let i = 0; i < v.length; i++) {
    const x = v[i];
    if (typeof x === "number" && Number.isFinite(x)) m = Math.max(m, Math.abs(x));
  }
  return m;
}

/** The product of the finite magnitudes of at least 1 in `v` (Infinity past the f64 range). */
function largeProduct(v: ArrayLike<number> | undefined): number {
  let p = 1;
  for (let i = 0; v && i < v.length; i++) {
    if (Number.isFinite(v[i]) && Math.abs(v[i]) >= 1) p *= Math.abs(v[i]);
  }
  return p;
}

/** Every value of a program run on WASM without fusion: the reference, intermediates included. */
export async function referenceValues(program: Program, set = 0): Promise<gyre.TypedArray[]> {
  const rt = gyre.runtime();
  const saved = rt.fusion;
  rt.fusion = false;
  // The reference evaluates elementwise work node by node with the op table's kernels; the runs
  // it is compared with take the WASM plan's tile programs (`wasmKernelLaunches` shows which ran).
  setPlanOverride("wasmElementwise", { form: "nodes" });
  try {
    const all = {
      ...program,
      outputs: [...Array(program.inputs.length + program.steps.length).keys()],
      release: "tidy" as const,
    };
    const inputs = programInputs(program, "wasm", set);
    const outs = interpret(all, inputs, "wasm");
    setPlanOverride("wasmElementwise", null);
    const values = await gyre.readAll(outs);
    for (const t of [...outs, ...inputs]) t.dispose();
    return values;
  } finally {
    setPlanOverride("wasmElementwise", null);
    rt.fusion = saved;
  }
}

/** WASM kernel launches by name since the module loaded (tests check which forms ran). */
export const wasmKernelLaunches: Map<string, number> = new Map();
kernelObservers.add(({ device, kernel }) => {
  if (device === "wasm") wasmKernelLaunches.set(kernel, (wasmKernelLaunches.get(kernel) ?? 0) + 1);
});

/** The outputs of `program` on `device`, fused or not, for data set `set`. */
export async function runProgram(
  program: Program,
  device: gyre.DeviceName,
  fusion: boolean,
  set = 0,
): Promise<gyre.TypedArray[]> {
  const rt = gyre.runtime();
  const saved = rt.fusion;
  rt.fusion = fusion;
  const inputs = programInputs(program, device, set);
  try {
    const outs = interpret(program, inputs, device);
    rt.fusion = saved;
    const values = await gyre.readAll(outs);
    for (const t of outs) t.dispose();
    return values;
  } finally {
    rt.fusion = saved;
    for (const t of inputs) t.dispose();
  }
}

/**
 * Compares `got` (outputs of a run) with the reference of data set `set` and returns the first
 * disagreement, or null.
 */
export function compareOutputs(
  program: Program,
  reference: readonly ArrayLike<number>[],
  got: readonly ArrayLike<number>[],
  options: {
    sameDevice: boolean;
    against?: readonly ArrayLike<number>[];
    /** The other device flushes subnormals (see `tainted` in the module doc). */
    flushes?: boolean;
  },
): string | null {
  const info = programInfo(program);
  const scale = scales(program, reference);
  const subnormal = met(program, reference, (v) => v !== 0 && Math.abs(v) < 2 ** -126);
  for (let k = 0; k < program.outputs.length; k++) {
    const o = program.outputs[k];
    const want = options.against ? options.against[k] : reference[o];
    const tainted = !options.sameDevice && subnormal[o];
    // Across devices an unstable value, and a tainted one where the GPU flushes subnormals, is
    // only checked for its length (see the module doc).
    if (!options.sameDevice && (info[o].unstable || (options.flushes && tainted))) {
      if (want.length !== got[k].length) return `output ${k}: length ${got[k].length}`;
      continue;
    }
    const tol = tolerance({ ...info[o], tainted }, scale[o], options.sameDevice);
    const why = disagreement(want, got[k], tol, info[o].dtype);
    if (why) return `output ${k} (value ${o}, ${info[o].dtype}): ${why}`;
  }
  return null;
}

/**
 * Whether each value, or anything it was computed from (the constants a step makes included: a
 * product's weights, a constant's data), holds an element passing `test`.
 */
function met(
  program: Program,
  values: readonly ArrayLike<number>[],
  test: (v: number) => boolean,
): boolean[] {
  const own = values.map((v) => Array.prototype.some.call(v, test as (x: unknown) => boolean));
  const out = own.slice(0, program.inputs.length);
  program.steps.forEach((s, i) => {
    const constants = [s.p.weight, s.p.bias, s.p.data, [s.p.value]].some((c) =>
      Array.isArray(c) && c.some((v) => typeof v === "number" && test(v))
    );
    out.push(own[program.inputs.length + i] || constants || s.args.some((a) => out[a]));
  });
  return out;
}

/** The values a program computes that its outputs need (for shrinking). */
function live(program: Program): Set<number> {
  const need = new Set(program.outputs);
  for (let i = program.steps.length - 1; i >= 0; i--) {
    if (need.has(program.inputs.length + i)) { for (const a of program.steps[i].args) need.add(a); }
  }
  return need;
}

/** The program without dead steps and unused inputs, values renumbered. */
export function prune(program: Program): Program {
  const need = live(program);
  const map = new Map<number, number>();
  const inputs: ProgramInput[] = [];
  program.inputs.forEach((inp, i) => {
    if (need.has(i)) map.set(i, inputs.push(inp) - 1);
  });
  const steps: Step[] = [];
  program.steps.forEach((s, i) => {
    const k = program.inputs.length + i;
    if (!need.has(k)) return;
    steps.push({ ...s, args: s.args.map((a) => map.get(a)!) });
    map.set(k, inputs.length + steps.length - 1);
  });
  return { ...program, inputs, steps, outputs: program.outputs.map((o) => map.get(o)!) };
}

/**
 * Shrinks a failing program: keeps one output, then cuts each step's result into an input holding
 * the reference's values (dropping what fed it) while `fails` still holds.
 */
export async function shrink(
  program: Program,
  fails: (p: Program) => Promise<boolean>,
): Promise<Program> {
  let best = prune(program);
  for (const o of best.outputs) {
    const one = prune({ ...best, outputs: [o] });
    if (await fails(one)) {
      best = one;
      break;
    }
  }
  for (let changed = true; changed;) {
    changed = false;
    const reference = await referenceValues(best);
    for (let i = best.steps.length - 1; i >= 0; i--) {
      const s = best.steps[i];
      // Cut operand a of step i: it becomes an input with the reference's values.
      for (const a of s.args) {
        if (a < best.inputs.length) continue;
        const shapeOf = best.steps[a - best.inputs.length].shape;
        const candidate = cutValue(best, a, shapeOf, Array.from(reference[a]));
        if (await fails(candidate)) {
          best = candidate;
          changed = true;
          break;
        }
      }
      if (changed) break;
    }
  }
  return best;
}

function cutValue(program: Program, value: number, shape: number[], data: number[]): Program {
  const info = programInfo(program)[value];
  const n = program.inputs.length;
  // The new input goes last among the inputs: every step's operand index past n moves by one.
  const shift = (a: number) => (a === value ? n : a >= n ? a + 1 : a);
  const inputs = [...program.inputs, { shape, dtype: info.dtype, data: [data] }];
  const steps = program.steps.map((s) => ({ ...s, args: s.args.map(shift) }));
  return prune({ ...program, inputs, steps, outputs: program.outputs.map(shift) });
}

/** A program as one line of JSON (NaN and infinities spelled out), for a regression case. */
export function programToJson(program: Program): string {
  return JSON.stringify(
    program,
    (_k, v) =>
      typeof v === "number" && !Number.isFinite(v) ? String(v) : Object.is(v, -0) ? "-0" : v,
  );
}

/** The inverse of {@link programToJson}. */
export function programFromJson(json: string): Program {
  return JSON.parse(
    json,
    (_k, v) =>
      v === "NaN"
        ? NaN
        : v === "Infinity"
        ? Infinity
        : v === "-Infinity"
        ? -Infinity
        : v === "-0"
        ? -0
        : v,
  );
}

/** Which runs {@link checkProgram} compares with the reference. */
export interface CheckOptions {
  /** Run the GPU configurations too (unfused, and fused against unfused). */
  gpu: boolean;
}

/**
 * Runs `program` on WASM unfused (the reference), WASM fused, and where asked GPU unfused and GPU
 * fused; returns the first disagreement (naming the run), or null. WASM fused must equal the
 * reference bit for bit where the generator calls the value exact; GPU unfused must agree with
 * the reference under the cross-device tolerance; GPU fused must equal GPU unfused as a run on
 * one device does.
 */
export async function checkProgram(
  program: Program,
  options: CheckOptions,
): Promise<string | null> {
  return (await checkPrograms([program], options))[0];
}

/**
 * {@link checkProgram} for many programs, with one GPU read-back for all of them (a read-back
 * costs a device synchronisation, which dominates small programs). Where that read-back fails
 * (one program's kernel broke the batch), each program is checked alone.
 */
export async function checkPrograms(
  programs: readonly Program[],
  options: CheckOptions,
): Promise<(string | null)[]> {
  const results: (string | null)[] = [];
  const references: gyre.TypedArray[][] = [];
  for (const program of programs) {
    let why: string | null = null;
    try {
      references.push(await referenceValues(program));
      const fused = await runProgram(program, "wasm", true);
      why = compareOutputs(program, references[references.length - 1], fused, {
        sameDevice: true,
      });
      if (why) why = `wasm fused against the reference: ${why}`;
    } catch (e) {
      references.push([]);
      why = `wasm threw ${(e as Error).message.slice(0, 400)}`;
    }
    results.push(why);
  }
  if (!options.gpu) return results;
  const flushes = await gpuFlushesSubnormals();
  const rt = gyre.runtime();
  const saved = rt.fusion;
  const made: Tensor[] = [];
  const runs: { index: number; unfused: Tensor[]; fused: Tensor[] }[] = [];
  try {
    programs.forEach((program, index) => {
      if (results[index] !== null) return;
      try {
        const inputs = programInputs(program, "gpu");
        made.push(...inputs);
        rt.fusion = false;
        const unfused = interpret(program, inputs, "gpu");
        made.push(...unfused);
        rt.fusion = true;
        const fused = interpret(program, inputs, "gpu");
        made.push(...fused);
        runs.push({ index, unfused, fused });
      } catch (e) {
        results[index] = `gpu threw ${(e as Error).message.slice(0, 400)}`;
      } finally {
        rt.fusion = saved;
      }
    });
    let values: gyre.TypedArray[];
    try {
      values = await gyre.readAll(runs.flatMap((r) => [...r.unfused, ...r.fused]));
    } catch (e) {
      if (programs.length === 1) {
        results[runs[0].index] = `gpu threw ${(e as Error).message.slice(0, 400)}`;
        return results;
      }
      for (const r of runs) results[r.index] = await checkProgram(programs[r.index], options);
      return results;
    }
    let at = 0;
    for (const r of runs) {
      const program = programs[r.index];
      const n = program.outputs.length;
      const unfused = values.slice(at, at + n);
      const fused = values.slice(at + n, at + 2 * n);
      at += 2 * n;
      const reference = references[r.index];
      let why = compareOutputs(program, reference, unfused, { sameDevice: false, flushes });
      if (why) why = `gpu unfused against the reference: ${why}`;
      else {
        why = compareOutputs(program, reference, fused, { sameDevice: true, against: unfused });
        if (why) why = `gpu fused against gpu unfused: ${why}`;
      }
      results[r.index] = why;
    }
    return results;
  } finally {
    rt.fusion = saved;
    for (const t of made) t.dispose();
  }
}

let flushProbe: Promise<boolean> | null = null;

/** Whether the GPU compares the smallest subnormal equal to zero (it flushes; an H200 does). */
function gpuFlushesSubnormals(): Promise<boolean> {
  flushProbe ??= (async () => {
    const x = gyre.tensor([2 ** -149], { device: "gpu" });
    const t = gyre.notEqual(x, 0);
    const [v] = await gyre.readAll([t]);
    x.dispose();
    t.dispose();
    return v[0] === 0;
  })();
  return flushProbe;
}

/** Bit-for-bit equality of two runs' outputs (NaN equals NaN), or why not. */
function identical(
  a: readonly ArrayLike<number>[],
  b: readonly ArrayLike<number>[],
): string | null {
  for (let k = 0; k < a.length; k++) {
    if (a[k].length !== b[k].length) {
      return `output ${k}: length ${b[k].length}, expected ${a[k].length}`;
    }
    for (let i = 0; i < a[k].length; i++) {
      const x = a[k][i], y = b[k][i];
      if (Number.isNaN(x) && Number.isNaN(y)) continue;
      if (!Object.is(x, y)) return `output ${k} [${i}]: ${y}, expected ${x}`;
    }
  }
  return null;
}

/**
 * Runs `program` through `jit` on `device` once per data set (the first call traces, the others
 * replay), some calls inside `tidy`, and eagerly on the same inputs; reads everything back in one
 * read-back in reverse order (interleaved with the calls that made them), and returns the first
 * difference from the eager results (which must be bit for bit: the same kernels run), or null.
 * Disposing the jitted function must leave the device's memory as it found it.
 */
export async function checkJit(program: Program, device: gyre.DeviceName): Promise<string | null> {
  const rt = gyre.runtime();
  rt.flush();
  const stats = () => {
    const s = rt.stats();
    return device === "gpu" ? `${s.gpu?.liveBuffers}/${s.gpu?.liveBytes}` : `${s.wasm.liveBlocks}`;
  };
  const before = stats();
  const sets = Math.max(...program.inputs.map((i) => i.data.length), 1);
  const f = gyre.jit((...xs: Tensor[]) => interpret(program, xs, device));
  const made: Tensor[] = [];
  const jitted: Tensor[][] = [];
  const eager: Tensor[][] = [];
  try {
    for (let s = 0; s < sets; s++) {
      const inputs = programInputs(program, device, s);
      made.push(...inputs);
      const out = s % 2 ? gyre.tidy(() => f(...inputs)) : f(...inputs);
      jitted.push(out as Tensor[]);
    }
    for (let s = 0; s < sets; s++) {
      eager.push(
        interpret(
          program,
          made.slice(s * program.inputs.length, (s + 1) * program.inputs.length),
          device,
        ),
      );
    }
    const all = [...jitted, ...eager].reverse().flat();
    const values = await gyre.readAll(all);
    const per = program.outputs.length;
    const n = jitted.length;
    // Reversed: eager set n-1 first, ..., jitted set 0 last.
    for (let s = 0; s < sets; s++) {
      const e = values.slice((n - 1 - s) * per, (n - s) * per);
      const j = values.slice((2 * n - 1 - s) * per, (2 * n - s) * per);
      const why = identical(e, j);
      if (why) {
        return `jit on ${device}, data set ${s} (${s === 0 ? "the trace" : "a replay"}): ${why}`;
      }
    }
  } catch (e) {
    return `jit on ${device} threw ${(e as Error).message.slice(0, 400)}`;
  } finally {
    for (const t of [...made, ...jitted.flat(), ...eager.flat()]) t.dispose();
    f.dispose();
  }
  rt.flush();
  const after = stats();
  return after === before ? null : `jit on ${device}: live memory ${before} before, ${after} after`;
}
