/**
 * Property tests of the remaining GPU kernels against the WASM reference: `cast` between every
 * pair of dtypes, clones of transposed matrices (the tiled transposing copy), `where`, the strided-output "scatter" kernel behind `concat` and `stack`, the
 * counter-based generators `random.uniform` and `random.normal` (which also exercise the internal
 * kernels pcgHash, bitwiseXor and shiftRight), and the creation generators `arange`, `linspace`
 * and `eye` (which exercise floorDiv and mod on uint32).
 * @module
 */
import fc from "fast-check";
import * as gyre from "../src/mod.ts";
import {
  Bag,
  forcePlan,
  FULL,
  halfUlpOf,
  hostData,
  type LayoutKind,
  LAYOUTS,
  makeLayout,
  MIN_NORMAL,
  mulberry32,
  operandOn,
  property,
  shapeArb,
  show,
  sizeOf,
  SPECIALS_F32,
  ulpOf,
  within,
} from "./_harness.ts";

type DType = gyre.DType;
const DTYPES: readonly DType[] = ["float32", "float16", "int32", "uint32", "bool"];
const isFloat = (d: DType) => d === "float32" || d === "float16";

/**
 * Compares GPU and WASM results: floats within `ulp(i)` ULPs (half ULPs for float16) or `atol(i)`,
 * integers and bools within `atol(i)` (exact by default).
 */
function compare(
  label: string,
  dtype: DType,
  got: gyre.TypedArray,
  want: gyre.TypedArray,
  opts: {
    ulp?: (i: number) => number;
    atol?: (i: number) => number;
    signedZero?: boolean;
    ftz?: boolean;
    context?: (i: number) => string;
  } = {},
): void {
  if (got.length !== want.length) {
    throw new Error(`${label}: ${got.length} vs ${want.length} elements`);
  }
  let count = 0;
  const bad: string[] = [];
  for (let i = 0; i < got.length; i++) {
    const ok = isFloat(dtype)
      ? within(got[i], want[i], { ulp: opts.ulp?.(i) ?? 0, atol: opts.atol?.(i) ?? 0 }, {
        half: dtype === "float16",
        signedZero: opts.signedZero,
        ftz: opts.ftz,
      })
      : Math.abs(Number(got[i]) - Number(want[i])) <= (opts.atol?.(i) ?? 0);
    if (ok) continue;
    if (++count <= 5) {
      bad.push(`  [${i}] gpu ${show(got[i])} wasm ${show(want[i])} ${opts.context?.(i) ?? ""}`);
    }
  }
  if (count) throw new Error(`${label}: ${count} of ${got.length} differ\n${bad.join("\n")}`);
}

// ---------------------------------------------------------------------------------------------
// cast

/**
 * Values for casts out of `from`: every float special (float -> int saturates and maps NaN to 0
 * on both devices, gyre's documented semantics, so out-of-range and NaN are in), integers around
 * 2^24 (where int -> float32 starts rounding) and extremes.
 */
const CAST_DOMAIN = {
  ...FULL,
  minExp: -30,
  maxExp: 40,
  specials: [
    ...SPECIALS_F32,
    2147483647,
    2147483648,
    -2147483648,
    -2147483904,
    4294967295,
    4294967296,
    16777217,
    65504,
    65520,
    1e5,
    -0.75,
    0.99,
    6e-8,
  ],
  pSpecial: 0.2,
};

interface CastCase {
  from: DType;
  to: DType;
  shape: number[];
  kind: LayoutKind;
  forceScalar: boolean;
  seed: number;
}

property(
  "elementwise/cast",
  "cast between every pair of dtypes matches WASM",
  fc.record({
    from: fc.constantFrom(...DTYPES),
    to: fc.constantFrom(...DTYPES),
    shape: shapeArb(),
    kind: fc.constantFrom<LayoutKind>("contiguous", "transposed", "sliced", "broadcast", "zeroD"),
    forceScalar: fc.boolean(),
    seed: fc.integer(),
  }),
  async (c: CastCase) => {
    const bag = new Bag();
    try {
      const rng = mulberry32(c.seed);
      const layout = makeLayout(rng, c.kind, c.shape);
      const data = hostData(rng, c.from, sizeOf(layout.baseShape), CAST_DOMAIN);
      const x = (device: gyre.DeviceName) =>
        operandOn(bag, device, layout, c.from, data) as gyre.Tensor;
      if (c.forceScalar) forcePlan("elementwise", { variant: "scalar" });
      const xg = x("gpu");
      const gpu = bag.add(gyre.cast(xg, c.to));
      forcePlan("elementwise", null);
      const xw = x("wasm");
      const ref = bag.add(gyre.cast(xw, c.to));
      // The reference on flushed inputs: a GPU may flush subnormals (cast to bool then gives false).
      const flushed = data instanceof Float32Array
        ? data.map((v) => (Math.abs(v) < MIN_NORMAL ? 0 : v))
        : data;
      const alt = bag.add(
        gyre.cast(operandOn(bag, "wasm", layout, c.from, flushed) as gyre.Tensor, c.to),
      );
      const [got, want, wantFlushed, input] = await gyre.readAll([
        gpu,
        ref,
        alt,
        bag.add(gyre.cast(xw, "float32")),
      ]);
      const label = `cast ${c.from} -> ${c.to} [${c.shape}] ${layout.describe}${
        c.forceScalar ? " [scalar plan]" : ""
      }`;
      if (gpu.dtype !== c.to || ref.dtype !== c.to) {
        throw new Error(`${label}: dtype ${gpu.dtype} / ${ref.dtype}`);
      }
      compare(
        label,
        c.to,
        got,
        want.map((w, i) => (got[i] === wantFlushed[i] ? got[i] : w)) as gyre.TypedArray,
        {
          // Float -> float and int -> float casts round once, correctly, on both devices: exact.
          // ±0 must survive every float -> float cast.
          signedZero: isFloat(c.from) && isFloat(c.to),
          ftz: true,
          context: (i) => `input ${show(input[i])}`,
        },
      );
    } finally {
      bag.dispose();
    }
  },
  { numRuns: 60 },
);

// ---------------------------------------------------------------------------------------------
// clones of transposed matrices

interface TransposedCase {
  dtype: DType;
  rows: number;
  columns: number;
  batch: number[];
  /** The batch axes broadcast from one matrix. */
  broadcast: boolean;
  /** The stored matrix is a slice of a wider one (an odd offset and row stride). */
  sliced: boolean;
  /**
   * How the transposed matrices are read: "gathered", a clone by the tiled transposing copy and
   * computations through strides; "tiled", both by the tiled kernel's workgroup memory.
   */
  operands: "gathered" | "tiled";
  /** The tiled kernel's workgroup: 4, 2 or 1 rows of the tile per invocation. */
  workgroupSize: number;
  seed: number;
}

property(
  "elementwise/transposedCopy",
  "clones of transposed matrices (the tiled transposing copy or the tiled kernel), and maximum with them as operands (gathered or tiled), match WASM exactly",
  fc.record({
    dtype: fc.constantFrom(...DTYPES),
    rows: fc.constantFrom(32, 33, 63, 64, 65, 100, 129),
    columns: fc.constantFrom(32, 33, 63, 64, 65, 100, 129),
    batch: fc.constantFrom<number[]>([], [2], [3, 2], [2, 1, 3]),
    broadcast: fc.boolean(),
    sliced: fc.boolean(),
    operands: fc.constantFrom<TransposedCase["operands"]>("gathered", "tiled"),
    workgroupSize: fc.constantFrom(128, 256, 512),
    seed: fc.integer(),
  }),
  async (c: TransposedCase) => {
    const bag = new Bag();
    try {
      const rng = mulberry32(c.seed);
      // Stored [..., columns, rows (+ 2 when sliced)]; the view is its transpose.
      const own = c.broadcast ? [] : c.batch;
      const width = c.sliced ? c.rows + 2 : c.rows;
      const stored = [...own, c.columns, width];
      const data = hostData(rng, c.dtype, sizeOf(stored), FULL);
      const view = (device: gyre.DeviceName) => {
        let t = bag.add(gyre.tensor(data, { shape: stored, dtype: c.dtype, device }));
        if (c.sliced) t = bag.add(t.slice(...own.map(() => null), null, [1, c.rows + 1]));
        t = bag.add(t.transpose([...own.keys(), own.length + 1, own.length]));
        return c.broadcast ? bag.add(t.broadcastTo([...c.batch, c.rows, c.columns])) : t;
      };
      // A contiguous operand of the view's shape for a computation with it.
      const shape = [...c.batch, c.rows, c.columns];
      const otherData = hostData(rng, c.dtype, sizeOf(shape), FULL);
      const other = (device: gyre.DeviceName) =>
        bag.add(gyre.tensor(otherData, { shape, dtype: c.dtype, device }));
      // A row broadcast down every matrix: another addressing mode beside the tiles.
      const rowData = hostData(rng, c.dtype, c.columns, FULL);
      const row = (device: gyre.DeviceName) =>
        bag.add(gyre.tensor(rowData, { shape: [c.columns], dtype: c.dtype, device }));
      const computations = (device: gyre.DeviceName) => [
        bag.add(gyre.maximum(view(device), other(device))),
        // The same transposed operand twice: two copies, or two tiles.
        bag.add(gyre.maximum(view(device), view(device))),
        bag.add(gyre.maximum(view(device), row(device))),
        // A strided operand (columns reversed) beside the tiles.
        bag.add(gyre.maximum(
          view(device),
          bag.add(other(device).slice(...c.batch.map(() => null), null, [c.columns - 1, null, -1])),
        )),
      ];
      const results = (device: gyre.DeviceName) => [
        bag.add(view(device).clone()),
        ...computations(device),
      ];
      // Forced: software adapters (CI) would otherwise take the strided gather.
      let gpu: gyre.Tensor[];
      try {
        // Clones by the tiled transposing copy, or by the tiled kernel.
        const tiled = { variant: "tiled", workgroupSize: c.workgroupSize } as const;
        forcePlan(
          "elementwise",
          c.operands === "tiled" ? tiled : { variant: "transpose" },
        );
        const clone = bag.add(view("gpu").clone()).realize();
        forcePlan(
          "elementwise",
          c.operands === "tiled" ? tiled : { variant: "scalar" },
        );
        gpu = [clone, ...computations("gpu").map((t) => t.realize())];
      } finally {
        forcePlan("elementwise", null);
      }
      const got = await gyre.readAll(gpu);
      const want = await gyre.readAll(results("wasm"));
      const label = `[${c.batch}, ${c.rows}, ${c.columns}] ${c.dtype} transposed${
        c.broadcast ? ", broadcast" : ""
      }${c.sliced ? ", sliced" : ""}, operands ${c.operands} (workgroup ${c.workgroupSize})`;
      // As in the elementwise property tests, maximum(-0, +0) may be either zero and subnormals
      // may flush to zero (WGSL leaves both to the driver; NVIDIA flushes); the clone keeps
      // every bit.
      [
        "clone",
        "maximum with a contiguous operand",
        "maximum with itself",
        "maximum with a row",
        "maximum with a reversed operand",
      ].forEach((what, k) =>
        compare(`${what} of ${label}`, c.dtype, got[k], want[k], {
          signedZero: k === 0,
          ftz: k > 0,
        })
      );
    } finally {
      bag.dispose();
    }
  },
  { numRuns: 40, variants: ["elementwise/tiled", "elementwise/transpose"] },
);

// ---------------------------------------------------------------------------------------------
// where

property(
  "elementwise/where",
  "where(condition, a, b) matches WASM bit for bit, with broadcasting and promotion",
  fc.record({
    shape: shapeArb(),
    dtypes: fc.tuple(
      fc.constantFrom(...DTYPES),
      fc.constantFrom(...DTYPES),
      fc.constantFrom(...DTYPES),
    ),
    kinds: fc.tuple(
      fc.constantFrom<LayoutKind>(...LAYOUTS),
      fc.constantFrom<LayoutKind>(...LAYOUTS),
      fc.constantFrom<LayoutKind>(...LAYOUTS),
    ),
    forceScalar: fc.boolean(),
    seed: fc.integer(),
  }),
  async ({ shape, dtypes, kinds, forceScalar, seed }) => {
    const bag = new Bag();
    try {
      const rng = mulberry32(seed);
      const ks = [...kinds];
      if (!ks.some((k) => k !== "scalar")) ks[1] = "contiguous";
      const layouts = ks.map((k) => makeLayout(rng, k, shape));
      // A JS scalar takes its dtype from the tensors beside it (bool conditions read as truth).
      const ds = dtypes.map((
        d,
        k,
      ) => (ks[k] === "scalar" ? (k === 0 ? "bool" : dtypes[3 - k]) : d)) as DType[];
      const bases = layouts.map((l, k) =>
        hostData(rng, ds[k], l.kind === "scalar" ? 1 : sizeOf(l.baseShape), FULL)
      );
      const run = (device: gyre.DeviceName) => {
        const [c, a, b] = layouts.map((l, k) => operandOn(bag, device, l, ds[k], bases[k]));
        return bag.add(gyre.where(c, a, b));
      };
      if (forceScalar) forcePlan("elementwise", { variant: "scalar" });
      const gpu = run("gpu");
      forcePlan("elementwise", null);
      const ref = run("wasm");
      // A subnormal float condition may read as false on a GPU that flushes subnormals.
      const flushedCondition = bases[0] instanceof Float32Array
        ? bases[0].map((v) => (Math.abs(v) < MIN_NORMAL ? 0 : v))
        : bases[0];
      const [c, a, b] = layouts.map((l, k) =>
        operandOn(bag, "wasm", l, ds[k], k === 0 ? flushedCondition : bases[k])
      );
      const alt = bag.add(gyre.where(c, a, b));
      const [got, want, wantFlushed] = await gyre.readAll([gpu, ref, alt]);
      const label = `where(${ds.join(", ")}) [${shape}] ${
        layouts.map((l) => l.describe).join(" | ")
      }`;
      if (gpu.dtype !== ref.dtype || gpu.shape.join() !== ref.shape.join()) {
        throw new Error(`${label}: ${gpu.dtype} [${gpu.shape}] vs ${ref.dtype} [${ref.shape}]`);
      }
      // A selection copies values: exact, signed zeros, NaN and subnormals included.
      const same = (x: number, y: number) =>
        Object.is(x, y) || (Number.isNaN(x) && Number.isNaN(y));
      compare(
        label,
        gpu.dtype,
        got,
        want.map((w, i) => (same(got[i], wantFlushed[i]) ? got[i] : w)) as gyre.TypedArray,
        {
          signedZero: true,
        },
      );
    } finally {
      bag.dispose();
    }
  },
  { numRuns: 50 },
);

// ---------------------------------------------------------------------------------------------
// concat and stack: the strided-output ("scatter") kernel

property(
  "elementwise/scatter",
  "concat and stack of strided views match WASM exactly",
  fc.record({
    shape: shapeArb(3, [0, 1, 2, 3, 5, 31, 64, 255, 256, 257, 1025]),
    parts: fc.array(
      fc.record({
        length: fc.constantFrom(0, 1, 2, 3, 7, 256, 257),
        dtype: fc.constantFrom(...DTYPES),
        kind: fc.constantFrom<LayoutKind>("contiguous", "transposed", "sliced", "broadcast"),
      }),
      { minLength: 1, maxLength: 4 },
    ),
    axis: fc.nat(),
    stack: fc.boolean(),
    seed: fc.integer(),
  }),
  async ({ shape, parts, axis, stack, seed }) => {
    const bag = new Bag();
    try {
      const rng = mulberry32(seed);
      const base = shape.length ? shape : [1];
      const rank = base.length;
      const a = axis % (stack ? rank + 1 : rank);
      const shapes = parts.map((
        p,
      ) => (stack ? base : base.map((d, i) => (i === a ? p.length : d))));
      const layouts = parts.map((p, k) => makeLayout(rng, p.kind, shapes[k]));
      const bases = parts.map((p, k) => hostData(rng, p.dtype, sizeOf(layouts[k].baseShape), FULL));
      const run = (device: gyre.DeviceName) => {
        const ts = layouts.map((l, k) => {
          const t = operandOn(bag, device, l, parts[k].dtype, bases[k]) as gyre.Tensor;
          // A broadcast layout needs materialising to the part's shape as a (stride-0) view.
          return l.kind === "broadcast" ? bag.add(gyre.broadcastTo(t, shapes[k])) : t;
        });
        return bag.add(stack ? gyre.stack(ts, a) : gyre.concat(ts, a));
      };
      const gpu = run("gpu");
      const ref = run("wasm");
      const [got, want] = await gyre.readAll([gpu, ref]);
      const label = `${stack ? "stack" : "concat"} axis ${a} of ${
        parts.map((p, k) => `${p.dtype} ${layouts[k].describe}`).join(" | ")
      }`;
      if (gpu.dtype !== ref.dtype || gpu.shape.join() !== ref.shape.join()) {
        throw new Error(`${label}: ${gpu.dtype} [${gpu.shape}] vs ${ref.dtype} [${ref.shape}]`);
      }
      const expected = stack
        ? [...base.slice(0, a), parts.length, ...base.slice(a)]
        : base.map((d, i) => (i === a ? parts.reduce((s, p) => s + p.length, 0) : d));
      if (gpu.shape.join() !== expected.join()) {
        throw new Error(`${label}: shape [${gpu.shape}], expected [${expected}]`);
      }
      // A copy (with promotion casts that are exact or correctly rounded on both devices).
      compare(label, gpu.dtype, got, want, { signedZero: true });
    } finally {
      bag.dispose();
    }
  },
  { numRuns: 50 },
);

// ---------------------------------------------------------------------------------------------
// random

const SHAPES_RANDOM = fc.oneof(
  { weight: 12, arbitrary: shapeArb(3) },
  { weight: 1, arbitrary: fc.constant([(1 << 20) + 5]) },
);

/** The host's model of uniform's bits: pcg(pcg(i) ^ key) as src/random.ts documents. */
function uniformBits(i: number, key: number): number {
  return gyre.random.pcgHash((gyre.random.pcgHash(i) ^ key) >>> 0);
}

property(
  [
    "elementwise/pcgHash",
    "elementwise/bitwiseXor",
    "elementwise/shiftRight",
    "elementwise/cast",
    "elementwise/mul",
    "elementwise/add",
  ],
  "random.uniform gives the same numbers on both devices (and as the host model)",
  fc.record({
    shape: SHAPES_RANDOM,
    seed: fc.integer(),
    range: fc.option(
      fc.tuple(
        fc.double({ min: -1e3, max: 1e3, noNaN: true }),
        fc.double({ min: 0.5, max: 1e3, noNaN: true }),
      ),
    ),
    dtype: fc.constantFrom<DType>("float32", "float16"),
  }),
  async ({ shape, seed, range, dtype }) => {
    const bag = new Bag();
    try {
      const options = {
        seed,
        dtype,
        ...(range ? { low: range[0], high: range[0] + range[1] } : {}),
      };
      const gpu = bag.add(gyre.random.uniform(shape, { ...options, device: "gpu" }));
      const ref = bag.add(gyre.random.uniform(shape, { ...options, device: "wasm" }));
      const [got, want] = await gyre.readAll([gpu, ref]);
      const label = `uniform(${JSON.stringify(options)}) [${shape}]`;
      // Bit-exact, with or without low/high: (bits >> 8) converts exactly, * 2^-24 is exact, and
      // u * (high - low) + low is a multiply and an add, each correctly rounded on both devices
      // (the GPU code generator keeps a compiler from contracting them into an fma).
      compare(label, dtype, got, want, { signedZero: true });
      if (!range) {
        // Both devices run the documented hash: check the first few against the host model.
        const key = gyre.random.pcgHash(seed >>> 0);
        for (let i = 0; dtype === "float32" && i < Math.min(64, want.length); i++) {
          const expect = (uniformBits(i, key) >>> 8) * 2 ** -24;
          if (want[i] !== expect) {
            throw new Error(`${label}: [${i}] WASM ${want[i]} but the host model gives ${expect}`);
          }
        }
      }
      // Sanity: within [low, high], up to the rounding of the result to the dtype.
      const [lo, hi] = range ? [range[0], range[0] + range[1]] : [0, 1];
      const slack = (v: number) => (dtype === "float16" ? halfUlpOf(v) : ulpOf(v));
      for (const v of want) {
        if (!(v >= lo - slack(lo) && v <= hi + slack(hi))) {
          throw new Error(`${label}: value ${v} out of range`);
        }
      }
    } finally {
      bag.dispose();
    }
  },
  { numRuns: 25 },
);

/**
 * The host's model of normal's element i, in float64: Box-Muller over the two uniform draws of
 * counters 2i and 2i + 1, u1 = (top + 1) / 2^24 in (0, 1] and u2 = top / 2^24 a turn.
 */
function normalModel(i: number, key: number): number {
  const u1 = ((uniformBits(2 * i, key) >>> 8) + 1) / 2 ** 24;
  const u2 = (uniformBits(2 * i + 1, key) >>> 8) / 2 ** 24;
  return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
}

property(
  [
    "elementwise/pcgHash",
    "elementwise/bitwiseXor",
    "elementwise/bitwiseAnd",
    "elementwise/shiftRight",
    "elementwise/cast",
    "elementwise/mul",
    "elementwise/add",
    "elementwise/sub",
    "elementwise/neg",
    "elementwise/less",
    "elementwise/greaterEqual",
    "elementwise/equal",
    "elementwise/where",
  ],
  "random.normal gives the same bits on both devices, within 8 ULP of float64 Box-Muller",
  fc.record({
    shape: SHAPES_RANDOM,
    seed: fc.integer(),
    scale: fc.option(
      fc.tuple(
        fc.double({ min: -1e3, max: 1e3, noNaN: true }),
        fc.double({ min: 1e-3, max: 1e3, noNaN: true }),
      ),
    ),
    dtype: fc.constantFrom<DType>("float32", "float16"),
  }),
  async ({ shape, seed, scale, dtype }) => {
    const bag = new Bag();
    try {
      const options = { seed, dtype, ...(scale ? { mean: scale[0], std: scale[1] } : {}) };
      const gpu = bag.add(gyre.random.normal(shape, { ...options, device: "gpu" }));
      const ref = bag.add(gyre.random.normal(shape, { ...options, device: "wasm" }));
      const [got, want] = await gyre.readAll([gpu, ref]);
      const label = `normal(${JSON.stringify(options)}) [${shape}]`;
      // Every step is an integer op, an exact cast, or a float32 add, sub or mul
      // (src/ir/portable_math.ts): the same bits on both devices, with no tolerance.
      compare(label, dtype, got, want, { signedZero: true });
      if (scale || dtype !== "float32") return;
      // Accuracy against float64 from the same bits: log 2.4, sqrt 2.7 and cos 1.9 ULP
      // (tests/portable_math_test.ts), with the product's roundings, stay under 8 ULP of the
      // result; near cos's zeros its absolute error (2^-44) times the radius (< 5.8) stays
      // under 2^-41.
      const key = gyre.random.pcgHash(seed >>> 0);
      for (let i = 0; i < Math.min(4096, want.length); i++) {
        const exact = normalModel(i, key);
        const err = Math.abs(want[i] - exact);
        if (err > 8 * ulpOf(exact) && err > 2 ** -41) {
          throw new Error(`${label}: [${i}] ${want[i]} but Box-Muller in float64 gives ${exact}`);
        }
      }
    } finally {
      bag.dispose();
    }
  },
  { numRuns: 25 },
);

// ---------------------------------------------------------------------------------------------
// Creation generators

property(
  [
    "elementwise/floorDiv",
    "elementwise/mod",
    "elementwise/equal",
    "elementwise/where",
    "elementwise/cast",
  ],
  "arange, linspace and eye match WASM",
  fc.oneof(
    fc.record({
      kind: fc.constant("arange" as const),
      start: fc.integer({ min: -2000, max: 2000 }),
      count: fc.constantFrom(0, 1, 2, 255, 256, 257, 1023, 1024, 1025, 4099, (1 << 20) + 1),
      step: fc.constantFrom(1, 2, -1, -3, 0.5, -0.25, 0.1, 7.3),
      dtype: fc.option(fc.constantFrom<DType>("float32", "float16", "int32", "uint32")),
    }),
    fc.record({
      kind: fc.constant("linspace" as const),
      start: fc.integer({ min: -2000, max: 2000 }),
      count: fc.constantFrom(0, 1, 2, 3, 255, 256, 257, 1025, 4099),
      step: fc.double({ min: -1e3, max: 1e3, noNaN: true }),
      dtype: fc.option(fc.constantFrom<DType>("float32", "float16")),
      endpoint: fc.boolean(),
    }),
    fc.record({
      kind: fc.constant("eye" as const),
      start: fc.constantFrom(0, 1, 2, 3, 17, 64, 255, 257),
      count: fc.constantFrom(0, 1, 2, 5, 64, 256, 257, 1025),
      step: fc.constant(0),
      dtype: fc.option(fc.constantFrom<DType>("float32", "float16", "int32", "uint32", "bool")),
    }),
  ),
  async (c) => {
    const bag = new Bag();
    try {
      const make = (device: gyre.DeviceName): gyre.Tensor => {
        const opts = { device, ...(c.dtype ? { dtype: c.dtype } : {}) };
        switch (c.kind) {
          case "arange": {
            // Stops whose integer-step dtype would wrap are avoided: uint32 needs start >= 0.
            const start = c.dtype === "uint32" ? Math.abs(c.start) : c.start;
            const stop = start + c.count * c.step;
            if (c.dtype === "uint32" && (stop < 0 || c.step < 0)) {
              return gyre.arange(start, start + c.count, 1, opts);
            }
            return gyre.arange(start, stop, c.step, opts);
          }
          case "linspace":
            return gyre.linspace(c.start, c.start + c.step, c.count, {
              ...opts,
              endpoint: "endpoint" in c ? c.endpoint : true,
            });
          case "eye":
            return gyre.eye(c.start, c.count, opts);
        }
      };
      const gpu = bag.add(make("gpu"));
      const ref = bag.add(make("wasm"));
      const [got, want] = await gyre.readAll([gpu, ref]);
      const label = `${c.kind} ${JSON.stringify(c)} -> ${gpu.dtype} [${gpu.shape}]`;
      if (gpu.dtype !== ref.dtype || gpu.shape.join() !== ref.shape.join()) {
        throw new Error(`${label}: ${gpu.dtype} [${gpu.shape}] vs ${ref.dtype} [${ref.shape}]`);
      }
      // Integer ranges and eye are exact. Float ranges compute i * step + start, a multiply and
      // an add a GPU compiler may fuse into one fma (NVIDIA's does): the product's rounding,
      // up to half an ULP of i * step (about want - start), which cancellation can make several
      // ULPs of the result (-14 + 3 * 7.3: 2 ULPs on an H200), then 1 ULP for the sum.
      // An integer dtype with a fractional step truncates that float, so the same half ULP can
      // move it by one (2 + 574562 * 7.3 as uint32: 4194304 fused, 4194305 in two roundings,
      // on an H200, seed 275422022; the fused value is the nearer one).
      const floatRange = c.kind !== "eye" &&
        !(Number.isInteger(c.step) && c.dtype !== "float32" && c.dtype !== "float16");
      const floatOut = gpu.dtype === "float32" || gpu.dtype === "float16";
      compare(label, gpu.dtype, got, want, {
        ulp: () => (floatRange ? 1 : 0),
        atol: (i) => (floatRange ? (floatOut ? ulpOf(Math.abs(want[i] - c.start)) : 1) : 0),
      });
      if (c.kind === "eye") {
        // And the identity pattern itself.
        for (let i = 0; i < want.length; i++) {
          const expect = Math.floor(i / c.count) === i % c.count ? 1 : 0;
          if (want[i] !== expect) throw new Error(`${label}: [${i}] is ${want[i]}`);
        }
      }
    } finally {
      bag.dispose();
    }
  },
  { numRuns: 40 },
);
