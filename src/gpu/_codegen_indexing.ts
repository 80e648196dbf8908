/**
 * WGSL of the indexing family: the gather, the scatter's combine in each form (store, one atomic
 * instruction, a compare-and-swap loop) and the scatter's finishing passes (float max and min
 * through order-preserving integer keys, means divided by their counts). Every kernel walks its
 * iteration space by decomposing the invocation's index over the job's shape, unrolled for its
 * rank; strides are signed element counts.
 * @module
 */
import type { DType } from "../core/dtype.ts";
import type { ScatterReduce } from "../contract/indexing.ts";
import {
  COMPACT_ROWS,
  type IndexingCombine,
  type IndexingVariant,
  RUN_LENGTH,
  SEGMENT_ROWS,
  SHARED_BINS,
  SHARED_CHUNK,
} from "../plans/indexing.ts";
import { computeType, preludeFor, storageType, storeAs } from "./_wgsl_types.ts";
import { constantNodes, type Expr, exprKey } from "../ir/expr.ts";
import { constantsMember, epilogueFunction } from "./_codegen_elementwise.ts";
import { workgroupInclusiveSum } from "./_codegen_workgroup.ts";

/** One kernel of the family. */
export type IndexingStage =
  | "gather"
  | "scatter"
  | "segments"
  | "segment-carries"
  | "compact-count"
  | "compact-offsets"
  | "compact-write"
  | "keys"
  | "unkeys"
  | "mean";

/** What a kernel's code depends on; {@link indexingKey} of it keys the pipeline cache. */
export interface IndexingSpec {
  stage: IndexingStage;
  /** The axes its iteration space decomposes (1 to 8; finishing passes: 0). */
  rank: number;
  /** The gathered or scattered dtype. */
  dtype: DType;
  /**
   * Gathers: elementwise consumers run on each gathered value before it is stored (input 0 the
   * value, inputs 1... views of the output's `shape` read through their baked strides).
   */
  epilogue?: GatherEpilogueSpec;
  /** Scatters: each update is its position in the iteration space (no updates operand). */
  positions?: boolean;
  /** The form (gathers and scatters), the combine and the reduction (scatters). */
  variant?: IndexingVariant;
  combine?: IndexingCombine;
  reduce?: ScatterReduce;
  /** "gather": output elements an invocation (see IndexingChoice). */
  perInvocation?: number;
  /** "segments" and "segment-carries": invocations a row (see segmentColumns). */
  columns?: number;
  /**
   * "segments", "compact-count" and "compact-write": rows of one column, contiguous and aligned,
   * read four at a time.
   */
  wide?: boolean;
  /**
   * "compact-write": each workgroup sums the tiles' counts itself (no "compact-offsets" pass;
   * few tiles: each reads them all).
   */
  summed?: boolean;
  workgroupSize: number;
}

/** A gather's fused epilogue, as its code depends on it. */
export interface GatherEpilogueSpec {
  expr: Expr;
  /** The output's shape (unmerged) and each extra input's dtype, offset and strides over it. */
  shape: readonly number[];
  inputs: readonly { dtype: DType; offset: number; strides: readonly number[] }[];
}

/** Cache key of a spec. */
export function indexingKey(s: IndexingSpec): string {
  return [
    "indexing",
    s.stage,
    `r${s.rank}`,
    s.dtype,
    s.variant ?? "",
    s.combine ?? "",
    s.reduce ?? "",
    s.perInvocation && s.perInvocation > 1 ? `k${s.perInvocation}` : "",
    s.columns ? `c${s.columns}` : "",
    s.wide ? "wide" : "",
    s.summed ? "summed" : "",
    s.positions ? "positions" : "",
    s.epilogue
      ? `e:${exprKey(s.epilogue.expr)}@[${s.epilogue.shape}]:${
        s.epilogue.inputs.map((i) => `${i.dtype}@${i.offset}/${i.strides}`).join(";")
      }`
      : "",
    `wg${s.workgroupSize}`,
  ].join("|");
}

/**
 * Uniform words: a header of 12 (n, rank, the axis' stride and length, two operand offsets, the
 * negative-index rule, the index check's slot, a compaction's tiles, the pad, a compaction's fill
 * bits, 1 unused), the shape (8), then 8 signed strides for each operand (gather: x, indices;
 * scatter: updates, indices, output).
 */
export function indexingUniforms(
  header: readonly number[],
  shape: readonly number[],
  strides: readonly (readonly number[])[],
): Uint32Array {
  const words = new Uint32Array(52);
  words.set(header.map((v) => v >>> 0));
  words.set(shape, 12);
  strides.forEach((s, k) => words.set(s.map((v) => v >>> 0), 20 + 8 * k));
  return words;
}

/** The Params struct, with `constants` slots (a fused epilogue's) at its end. */
function params(constants = 0): string {
  return [
    "struct Params {",
    "  n: u32, rank: u32, axis_stride: i32, axis_length: i32,",
    "  off0: i32, off1: i32, negative: u32, slot: u32,",
    // `pad` is always 0: the opaque zero a fused epilogue's rounding barrier reads.
    "  tiles: u32, pad: u32, fill: u32, unused: u32,",
    "  shape: array<vec4<u32>, 2>,",
    `  strides: array<array<vec4<i32>, 2>, 4>${constantsMember(constants)}`,
    "}",
  ].join("\n");
}
const PARAMS = params();

/** The index check and the resolution of a raw index (see IndexedAxis). */
const RESOLVE = `
// The raw index made non-negative; -1 to drop the element; -2 when out of range, reported in the
// check's slot for the next read-back's IndexError.
fn resolve(raw: i32) -> i32 {
  var i = raw;
  if (p.negative == 3u) { return select(raw, -1, raw < 0 || raw >= p.axis_length); }
  if (i < 0) {
    if (p.negative == 1u) { return -1; }
    if (p.negative == 0u) { i = i + p.axis_length; }
  }
  if (i < 0 || i >= p.axis_length) {
    atomicMax(&checks[2u * p.slot], 1u);
    atomicStore(&checks[2u * p.slot + 1u], bitcast<u32>(raw));
    return -2;
  }
  return i;
}`;

function main(workgroupSize: number): string[] {
  return [
    `@compute @workgroup_size(${workgroupSize})`,
    "fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {",
    `  let t = gid.x + gid.y * nwg.x * ${workgroupSize}u;`,
  ];
}

/** Code giving each operand's offset (o0, o1, ...) for the iteration index `t`. */
function offsets(rank: number, operands: number, t = "t"): string[] {
  const lines = [`  var rest = ${t};`];
  for (let k = 0; k < operands; k++) lines.push(`  var o${k} = 0;`);
  for (let d = rank - 1; d >= 0; d--) {
    const at = `[${d >> 2}][${d & 3}]`;
    lines.push(
      d > 0
        ? `  let c${d} = i32(rest % p.shape${at}); rest = rest / p.shape${at};`
        : `  let c${d} = i32(rest);`,
    );
    for (let k = 0; k < operands; k++) {
      lines.push(`  o${k} = o${k} + c${d} * p.strides[${k}]${at};`);
    }
  }
  return lines;
}

/** The product of the lengths of every axis but the first (a row's elements), in WGSL. */
function innerLength(rank: number): string {
  return Array.from({ length: rank - 1 }, (_, d) => `p.shape[${(d + 1) >> 2}][${(d + 1) & 3}]`)
    .join(" * ") || "1u";
}

/**
 * The start of `main` of a kernel over rows (the first axis) of `inner` elements, by workgroups:
 * `inner`, `rows` and the workgroup's index `group`.
 */
function rowsMain(s: IndexingSpec): string[] {
  return [
    `@compute @workgroup_size(${s.workgroupSize})`,
    "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,",
    "    @builtin(local_invocation_index) lid: u32) {",
    `  let inner = max(${innerLength(s.rank)}, 1u);`,
    "  let rows = p.n / inner;",
    "  let group = wid.x + wid.y * nwg.x;",
  ];
}

/** The half at element e of a u32 array. */
const HALF =
  "fn half_at(words: u32, e: i32) -> u32 { return (words >> (u32(e & 1) * 16u)) & 0xffffu; }";

/** The WGSL of one kernel. Bindings: storage buffers (the last ones writable), then Params. */
export function generateIndexing(s: IndexingSpec): string {
  switch (s.stage) {
    case "gather":
      return gather(s);
    case "scatter":
      return scatter(s);
    case "segments":
    case "segment-carries":
      return segments(s);
    case "compact-count":
    case "compact-offsets":
    case "compact-write":
      return compaction(s);
    default:
      return finish(s);
  }
}

function gather(s: IndexingSpec): string {
  if (s.epilogue) return gatherEpilogue(s, s.epilogue);
  if (s.variant === "gather-quad") return gatherQuad(s, s.perInvocation! / 4);
  const half = s.dtype === "float16";
  const vec4 = s.variant === "gather-vec4";
  // One 32-bit output a step, one step or several an invocation.
  if (!half && !vec4) return gatherRun(s, s.perInvocation ?? 1);
  const body = half
    ? [
      // Two outputs an invocation: one word written whole.
      "  let first = 2u * t;",
      "  if (first >= p.n) { return; }",
      "  var word = 0u;",
      "  for (var h = 0u; h < 2u; h++) {",
      "    let e = first + h;",
      "    if (e >= p.n) { break; }",
      "    let v = element(e);",
      "    word = word | (v << (16u * h));",
      "  }",
      "  out[t] = word;",
      "}",
      "fn element(t: u32) -> u32 {",
      ...offsets(s.rank, 2),
      "  let i = resolve(indices[p.off1 + o1]);",
      "  if (i < 0) { return 0u; }",
      "  let e = p.off0 + o0 + i * p.axis_stride;",
      "  return half_at(x[e >> 1u], e);",
      "}",
    ]
    : [
      // Four consecutive outputs from four consecutive elements of x (offsets multiples of 4).
      "  if (4u * t >= p.n) { return; }",
      ...offsets(s.rank, 2, "4u * t"),
      "  let i = resolve(indices[p.off1 + o1]);",
      "  out[t] = select(vec4<u32>(0u), x[(p.off0 + o0 + max(i, 0) * p.axis_stride) / 4], i >= 0);",
      "}",
    ];
  const word = vec4 ? "vec4<u32>" : "u32";
  return [
    PARAMS,
    `@group(0) @binding(0) var<storage, read> x: array<${word}>;`,
    "@group(0) @binding(1) var<storage, read> indices: array<i32>;",
    "@group(0) @binding(2) var<storage, read_write> checks: array<atomic<u32>>;",
    `@group(0) @binding(3) var<storage, read_write> out: array<${word}>;`,
    "@group(0) @binding(4) var<uniform> p: Params;",
    RESOLVE,
    HALF,
    ...main(s.workgroupSize),
    ...body,
  ].join("\n");
}

/** The bindings of a gather taking `k` steps an invocation, then {@link runMain}. */
function runHead(s: IndexingSpec, indexType: string, outType: string, k: number): string[] {
  return [
    PARAMS,
    "@group(0) @binding(0) var<storage, read> x: array<u32>;",
    `@group(0) @binding(1) var<storage, read> indices: array<${indexType}>;`,
    "@group(0) @binding(2) var<storage, read_write> checks: array<atomic<u32>>;",
    `@group(0) @binding(3) var<storage, read_write> out: array<${outType}>;`,
    "@group(0) @binding(4) var<uniform> p: Params;",
    RESOLVE,
    ...runMain(s, k),
  ];
}

/**
 * `operands(t)` (x's and the indices' offsets of output element t) and the start of `main` of a
 * gather whose workgroups each take `k` steps of consecutive outputs (`first`: the invocation's
 * first).
 */
function runMain(s: IndexingSpec, k: number): string[] {
  const size = s.workgroupSize;
  return [
    "fn operands(t: u32) -> vec2<i32> {",
    ...offsets(s.rank, 2),
    "  return vec2<i32>(o0, o1);",
    "}",
    `@compute @workgroup_size(${size})`,
    "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,",
    "    @builtin(local_invocation_index) lid: u32) {",
    `  let first = (wid.x + wid.y * nwg.x) * ${size * k}u + lid;`,
  ];
}

/**
 * "gather" taking k output elements an invocation: workgroup g covers the consecutive outputs
 * [g * size * k, (g + 1) * size * k), its invocations stepping together, every index read issued
 * before any gathered read (naga keeps loops rolled, so the steps are written out). One workgroup
 * then reads a whole line of x, not 1/k of it: the lines a workgroup's scattered reads touch are
 * fetched into its SM's cache once.
 */
function gatherRun(s: IndexingSpec, k: number): string {
  const size = s.workgroupSize;
  const steps = Array.from({ length: k }, (_, u) => u);
  return [
    ...runHead(s, "i32", "u32", k),
    "  if (first >= p.n) { return; }",
    // Steps past the end repeat the last element's reads and skip the store.
    ...steps.map((u) => `  let t${u} = first + ${u * size}u;`),
    ...steps.map((u) => `  let a${u} = operands(min(t${u}, p.n - 1u));`),
    ...steps.map((u) => `  let i${u} = resolve(indices[p.off1 + a${u}.y]);`),
    ...steps.map((u) =>
      `  let v${u} = select(0u, x[p.off0 + a${u}.x + max(i${u}, 0) * p.axis_stride], i${u} >= 0);`
    ),
    ...steps.map((u) => `  if (t${u} < p.n) { out[t${u}] = v${u}; }`),
    "}",
  ].join("\n");
}

/**
 * "gather-quad": "gather" (see gatherRun) by quads of outputs, k an invocation: each quad reads
 * its four indices as one vec4 and stores its four outputs as one, so the index reads and the
 * stores take a quarter of the instructions.
 */
function gatherQuad(s: IndexingSpec, k: number): string {
  const size = s.workgroupSize;
  const last = s.rank - 1;
  const step = `p.strides[0][${last >> 2}][${last & 3}]`;
  const steps = Array.from({ length: k }, (_, u) => u);
  const lanes = [0, 1, 2, 3];
  return [
    ...runHead(s, "vec4<i32>", "vec4<u32>", k),
    "  let quads = p.n / 4u;",
    "  if (first >= quads) { return; }",
    ...steps.map((u) => `  let q${u} = first + ${u * size}u;`),
    ...steps.map((u) => `  let a${u} = operands(4u * min(q${u}, quads - 1u));`),
    ...steps.map((u) => `  let i${u} = indices[(p.off1 + a${u}.y) / 4];`),
    ...steps.flatMap((u) =>
      lanes.map((c) =>
        `  let r${u}_${c} = resolve(i${u}[${c}]); let v${u}_${c} = select(0u, ` +
        `x[p.off0 + a${u}.x + ${c} * ${step} + max(r${u}_${c}, 0) * p.axis_stride], r${u}_${c} >= 0);`
      )
    ),
    ...steps.map((u) =>
      `  if (q${u} < quads) { out[q${u}] = vec4<u32>(${
        lanes.map((c) => `v${u}_${c}`).join(", ")
      }); }`
    ),
    "}",
  ].join("\n");
}

/**
 * The gather with a fused epilogue: perInvocation output elements an invocation (as gatherRun),
 * each gathered value (in its compute type) passed through `gyre_epilogue` with the extra inputs
 * read at the output's element, and stored in the epilogue's dtype.
 */
function gatherEpilogue(s: IndexingSpec, e: GatherEpilogueSpec): string {
  const half = s.dtype === "float16";
  const read = (at: string) =>
    half
      ? `unpack2x16float(half_at(x[${at} >> 1u], ${at})).x`
      : computeType(s.dtype) === "f32"
      ? `bitcast<f32>(x[${at}])`
      : computeType(s.dtype) === "i32"
      ? `bitcast<i32>(x[${at}])`
      : computeType(s.dtype) === "bool"
      ? `(x[${at}] != 0u)`
      : `x[${at}]`;
  const size = s.workgroupSize;
  const steps = Array.from({ length: s.perInvocation ?? 1 }, (_, u) => u);
  const zero = computeType(s.dtype) === "bool"
    ? "false"
    : computeType(s.dtype) === "f32"
    ? "0.0"
    : computeType(s.dtype) === "i32"
    ? "0"
    : "0u";
  // Each extra input's element at output element t: t's coordinates in the output's shape
  // dotted with its strides (baked: the key names them).
  const inputAt = e.inputs.map((input, k) => {
    // Signed: a view may step backwards.
    const lines = [
      `fn epilogue_at${k + 1}(t: u32) -> u32 {`,
      "  var rest = t;",
      `  var o = ${input.offset};`,
    ];
    for (let d = e.shape.length - 1; d >= 0; d--) {
      lines.push(
        `  o = o + i32(rest % ${e.shape[d]}u) * (${input.strides[d]});`,
        `  rest = rest / ${e.shape[d]}u;`,
      );
    }
    lines.push("  return u32(o);", "}");
    return lines.join("\n");
  });
  const constants = constantNodes(e.expr).length;
  const code = [
    params(constants),
    "@group(0) @binding(0) var<storage, read> x: array<u32>;",
    "@group(0) @binding(1) var<storage, read> indices: array<i32>;",
    ...e.inputs.map((input, k) =>
      `@group(0) @binding(${k + 2}) var<storage, read> epilogue_in${k + 1}: array<${
        storageType(input.dtype)
      }>;`
    ),
    `@group(0) @binding(${
      e.inputs.length + 2
    }) var<storage, read_write> checks: array<atomic<u32>>;`,
    `@group(0) @binding(${e.inputs.length + 3}) var<storage, read_write> out: array<${
      storageType(e.expr.dtype)
    }>;`,
    `@group(0) @binding(${e.inputs.length + 4}) var<uniform> p: Params;`,
    RESOLVE,
    HALF,
    ...inputAt,
    epilogueFunction(
      e.expr,
      s.dtype,
      e.inputs.map((i) => i.dtype),
      ["t"],
      (k) => `epilogue_at${k + 1}(t)`,
      { zero: "p.pad" },
    ),
    // The run layout of gatherRun: every index read, then every gathered read, then the stores.
    ...runMain(s, steps.length),
    "  if (first >= p.n) { return; }",
    ...steps.map((u) => `  let t${u} = first + ${u * size}u;`),
    ...steps.map((u) => `  let a${u} = operands(min(t${u}, p.n - 1u));`),
    ...steps.map((u) => `  let i${u} = resolve(indices[p.off1 + a${u}.y]);`),
    ...steps.map((u) => `  let at${u} = p.off0 + a${u}.x + max(i${u}, 0) * p.axis_stride;`),
    ...steps.map((u) => `  let value${u} = select(${zero}, ${read(`at${u}`)}, i${u} >= 0);`),
    ...steps.map((u) =>
      `  if (t${u} < p.n) { out[t${u}] = ${
        storeAs(e.expr.dtype, `gyre_epilogue(value${u}, t${u})`)
      }; }`
    ),
    "}",
  ].join("\n");
  return `${code}\n${preludeFor(code)}`;
}

/** The element type the scatter's output is bound as. */
function outAtomic(s: IndexingSpec): string {
  if (s.combine !== "atomic") return "u32";
  if (s.dtype === "float32") return s.reduce === "max" || s.reduce === "min" ? "i32" : "f32";
  return s.dtype === "int32" && (s.reduce === "max" || s.reduce === "min") ? "i32" : "u32";
}

/** Order-preserving integer keys of float32 bits (NaN made the largest for max, least for min). */
const KEYS = `
fn to_key(bits: u32, largest_nan: bool) -> i32 {
  var b = bits;
  if ((b & 0x7fffffffu) > 0x7f800000u) { b = select(0xffc00000u, 0x7fc00000u, largest_nan); }
  let k = bitcast<i32>(b);
  return select(k, k ^ 0x7fffffff, k < 0);
}
fn from_key(k: i32) -> u32 {
  return bitcast<u32>(select(k, k ^ 0x7fffffff, k < 0));
}`;

/** The combine of two values' bits in the dtype (a compare-and-swap loop's new word). */
function merged(dtype: DType, reduce: ScatterReduce, a: string, b: string): string {
  if (reduce === "none") return b;
  if (dtype === "float32" && (reduce === "max" || reduce === "min")) {
    // On the order-preserving keys, not WGSL's max and min: an H200 flushed a subnormal winner
    // to -0 (measured).
    const largest = reduce === "max";
    return `select(${a}, ${b}, to_key(${b}, ${largest}) ${
      largest ? ">" : "<"
    } to_key(${a}, ${largest}))`;
  }
  // The reduction of operands x and y in their compute type (max and min by the builtins).
  const combine = (x: string, y: string, maximum: string, minimum: string) =>
    reduce === "max"
      ? `${maximum}(${x}, ${y})`
      : reduce === "min"
      ? `${minimum}(${x}, ${y})`
      : reduce === "prod"
      ? `(${x} * ${y})`
      : `(${x} + ${y})`;
  switch (dtype) {
    case "float32":
      return `bitcast<u32>(${
        combine(`bitcast<f32>(${a})`, `bitcast<f32>(${b})`, "g_max_f32", "g_min_f32")
      })`;
    case "float16": {
      const v = combine(
        `unpack2x16float(${a}).x`,
        `unpack2x16float(${b}).x`,
        "g_max_f32",
        "g_min_f32",
      );
      return `(pack2x16float(vec2<f32>(g_round_f16(${v}), 0.0)) & 0xffffu)`;
    }
    case "int32":
      return `bitcast<u32>(${combine(`bitcast<i32>(${a})`, `bitcast<i32>(${b})`, "max", "min")})`;
    default:
      return combine(a, b, "max", "min");
  }
}

/** WGSL `apply(o, v)`: combines the value bits v into output element o by the spec's combine. */
function applyFunction(s: IndexingSpec): string {
  const half = s.dtype === "float16";
  const reduce = s.reduce ?? "none";
  const type = outAtomic(s);
  const lines = ["fn apply(o: i32, v: u32) {"];
  if (s.combine === "store" && !half) {
    // A plain store (atomicStore ran the compaction's scatter at half of copy speed): which of
    // duplicates lands is unspecified anyway.
    lines.push("  out[o] = v;");
  } else if (s.combine === "atomic") {
    const op = reduce === "max" ? "atomicMax" : reduce === "min" ? "atomicMin" : "atomicAdd";
    const value = type === "f32"
      ? "bitcast<f32>(v)"
      : s.dtype === "float32"
      ? `to_key(v, ${reduce === "max"})`
      : type === "i32"
      ? "bitcast<i32>(v)"
      : "v";
    lines.push(`  ${op}(&out[o], ${value});`);
  } else {
    // A compare-and-swap loop on the word holding the element: each failure means another
    // invocation's update landed, so the loop ends.
    const next = half
      ? `(old & ~(0xffffu << shift)) | (${
        merged(s.dtype, reduce, "half_at(old, o)", "v")
      } << shift)`
      : merged(s.dtype, reduce, "old", "v");
    lines.push(
      `  let w = ${half ? "o >> 1u" : "o"};`,
      "  let shift = u32(o & 1) * 16u;",
      "  var old = atomicLoad(&out[w]);",
      "  loop {",
      `    let next = ${next};`,
      "    let r = atomicCompareExchangeWeak(&out[w], old, next);",
      "    if (r.exchanged) { break; }",
      "    old = r.old_value;",
      "  }",
    );
  }
  lines.push("}");
  return lines.join("\n");
}

/** The value bits of the update at offset `at` (a float16 from its half of a word). */
function updateAt(half: boolean, at: string): string {
  return half ? `half_at(updates[(${at}) >> 1u], ${at})` : `updates[${at}]`;
}

function scatter(s: IndexingSpec): string {
  const half = s.dtype === "float16";
  const reduce = s.reduce ?? "none";
  const mean = reduce === "mean";
  let lines: string[];
  let shared: string[] = [];
  if (s.variant === "scatter-runs") {
    // Rows [r0, r0 + RUN_LENGTH) of axis 0 at one position of the inner axes: neighbours with
    // equal indices combine in registers, each run once into the output.
    const inner = innerLength(s.rank);
    lines = [
      `  let inner = ${inner};`,
      "  let rows = p.n / max(inner, 1u);",
      `  let r0 = (t / max(inner, 1u)) * ${RUN_LENGTH}u;`,
      "  if (r0 >= rows) { return; }",
      ...offsets(s.rank, 3, "r0 * inner + t % max(inner, 1u)"),
      "  var current = -1;",
      "  var acc = 0u;",
      "  var count = 0u;",
      `  let end = min(r0 + ${RUN_LENGTH}u, rows);`,
      "  for (var r = r0; r < end; r++) {",
      "    let i = resolve(indices[p.off1 + o1]);",
      "    let v = " + updateAt(half, "p.off0 + o0") + ";",
      "    o0 = o0 + p.strides[0][0][0];",
      "    o1 = o1 + p.strides[1][0][0];",
      "    if (i < 0) { continue; }",
      "    if (i == current) {",
      `      acc = ${merged(s.dtype, reduce === "mean" ? "sum" : reduce, "acc", "v")};`,
      "      count = count + 1u;",
      "      continue;",
      "    }",
      "    if (current >= 0) { flush(o2 + current * p.axis_stride, acc, count); }",
      "    current = i;",
      "    acc = v;",
      "    count = 1u;",
      "  }",
      "  if (current >= 0) { flush(o2 + current * p.axis_stride, acc, count); }",
      "}",
      "fn flush(o: i32, v: u32, count: u32) {",
      mean ? "  atomicAdd(&counts[o], count);" : "",
      "  apply(o, v);",
      "}",
    ];
  } else if (s.variant === "scatter-shared") {
    // Integer atomics into at most SHARED_BINS outputs: each workgroup combines a chunk of
    // updates in workgroup memory, then adds its bins that changed to the output.
    const signed = s.dtype === "int32";
    const type = signed ? "i32" : "u32";
    const identity = reduce === "max"
      ? (signed ? "-2147483647 - 1" : "0u")
      : reduce === "min"
      ? (signed ? "2147483647" : "0xffffffffu")
      : (signed ? "0" : "0u");
    const op = reduce === "max" ? "atomicMax" : reduce === "min" ? "atomicMin" : "atomicAdd";
    const size = s.workgroupSize;
    shared = [`var<workgroup> bins: array<atomic<${type}>, ${SHARED_BINS}>;`];
    lines = [
      `@compute @workgroup_size(${size})`,
      "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,",
      "    @builtin(local_invocation_index) lid: u32) {",
      "  let group = wid.x + wid.y * nwg.x;",
      // Bins past the output stay at the identity: none of them is written back.
      `  let outputs = min(arrayLength(&out), ${SHARED_BINS}u);`,
      `  for (var o = lid; o < outputs; o += ${size}u) { atomicStore(&bins[o], ${identity}); }`,
      "  workgroupBarrier();",
      `  let first = group * ${SHARED_CHUNK}u;`,
      `  for (var k = 0u; k < ${SHARED_CHUNK / size}u; k++) {`,
      `    let t = first + k * ${size}u + lid;`,
      "    if (t < p.n) {",
      ...offsets(s.rank, 3).map((l) => `    ${l}`),
      "      let i = resolve(indices[p.off1 + o1]);",
      "      if (i >= 0) {",
      `        ${op}(&bins[o2 + i * p.axis_stride], bitcast<${type}>(${
        updateAt(false, "p.off0 + o0")
      }));`,
      "      }",
      "    }",
      "  }",
      "  workgroupBarrier();",
      `  for (var o = lid; o < outputs; o += ${size}u) {`,
      "    let v = atomicLoad(&bins[o]);",
      `    if (v != ${identity}) { apply(i32(o), bitcast<u32>(v)); }`,
      "  }",
      "}",
    ];
  } else {
    lines = [
      "  if (t >= p.n) { return; }",
      ...offsets(s.rank, 3),
      // Both loads issued before the first branch: one memory latency per invocation, not two
      // in a row.
      "  let raw = indices[p.off1 + o1];",
      `  let v = ${s.positions ? "t" : updateAt(half, "p.off0 + o0")};`,
      "  let i = resolve(raw);",
      "  if (i < 0) { return; }",
      "  let o = o2 + i * p.axis_stride;",
      mean ? "  atomicAdd(&counts[o], 1u);" : "",
      "  apply(o, v);",
      "}",
    ];
  }
  const code = [
    PARAMS,
    "@group(0) @binding(0) var<storage, read> updates: array<u32>;",
    "@group(0) @binding(1) var<storage, read> indices: array<i32>;",
    "@group(0) @binding(2) var<storage, read_write> checks: array<atomic<u32>>;",
    "@group(0) @binding(3) var<storage, read_write> counts: array<atomic<u32>>;",
    `@group(0) @binding(4) var<storage, read_write> out: array<${
      s.combine === "store" && !half ? "u32" : `atomic<${outAtomic(s)}>`
    }>;`,
    "@group(0) @binding(5) var<uniform> p: Params;",
    ...shared,
    RESOLVE,
    HALF,
    KEYS,
    applyFunction(s),
    ...(s.variant === "scatter-shared" ? [] : main(s.workgroupSize)),
    ...lines.filter((l) => l !== ""),
  ].join("\n");
  return `${code}\n${preludeFor(code)}`;
}

/**
 * The segmented reduction of sorted ids ("scatter-segments"), deterministic and without
 * atomics. The update rows (axis 0; the inner axes are the row's `inner` columns) are cut into
 * tiles of SEGMENT_ROWS * lanes rows; invocation (lane, c) of a workgroup reduces column c of its
 * lane's SEGMENT_ROWS rows in order. Each segment lying inside one lane is complete; those
 * crossing lanes meet through a segmented scan over the lanes in workgroup memory. A complete
 * segment combines into its output element, which no other invocation writes: ids are sorted,
 * so a segment's rows are consecutive. A segment crossing into the next tile leaves its partial
 * there as the tile's tail carry; the tile where it ends leaves its last partial as the head
 * carry, and "segment-carries" (one workgroup a head) combines the tails before it, a tree over
 * the lanes, with the head. The order of every combination is fixed by the shape alone, so a
 * float sum is the same from run to run.
 *
 * Carries: values[tile * inner + j] (tails), values[(tiles + tile) * inner + j] (heads), the
 * same for counts (means); ids[3 * tile] = the id of the tile's last row (sorted across tiles),
 * ids[3 * tile + 1] = the id of its head carry, or -1 for none, ids[3 * tile + 2] = 1 where its
 * tail's segment begins in it (written with the tail). Rows of one column are first copied into
 * workgroup memory with coalesced reads, since a lane's rows lie SEGMENT_ROWS words apart from
 * the next lane's. Raw ids out of ascending order
 * report code 2 in the check's slot.
 */
function segments(s: IndexingSpec): string {
  const half = s.dtype === "float16";
  const reduce = s.reduce ?? "sum";
  const mean = reduce === "mean";
  const partial = mean ? "sum" : reduce;
  const size = s.workgroupSize;
  const columns = s.columns!;
  const lanes = size / columns;
  const combine = (a: string, b: string) => merged(s.dtype, partial, a, b);
  const rows = Array.from({ length: SEGMENT_ROWS }, (_, u) => u);
  // Contiguous rows of one column, aligned: read as vec4 (pass 1).
  const wide = s.wide === true && s.stage === "segments";
  const quads = Array.from({ length: SEGMENT_ROWS / 4 }, (_, q) => q);
  const common = [
    `const COLUMNS = ${columns}u;`,
    `const LANES = ${lanes}u;`,
    `const TILE = ${lanes * SEGMENT_ROWS}u;`,
    wide
      ? "fn raw_at(r: u32) -> i32 { let e = p.off1 + i32(r); return indices[e >> 2u][e & 3]; }"
      : "fn raw_at(r: u32) -> i32 { return indices[p.off1 + i32(r) * p.strides[1][0][0]]; }",
    "fn id_at(r: u32) -> i32 { return resolve(raw_at(r)); }",
    // Combines a complete segment's partial into its output element (its only writer).
    "fn write(seg: i32, o2: i32, v: u32, count: u32) {",
    "  if (seg < 0) { return; }",
    "  let o = o2 + seg * p.axis_stride;",
    half ? "  apply(o, v);" : `  out[o] = ${combine("out[o]", "v")};`,
    mean ? "  counts[o] = counts[o] + count;" : "",
    "}",
  ];
  const head = [
    ...rowsMain(s),
    "  let blocks = (inner + COLUMNS - 1u) / COLUMNS;",
    "  let tile = group / blocks;",
    "  let tiles = (rows + TILE - 1u) / TILE;",
    // Uniform across the workgroup: every barrier is reached by all or none.
    "  if (tile >= tiles) { return; }",
    "  let lane = lid / COLUMNS;",
    "  let j = (group % blocks) * COLUMNS + lid % COLUMNS;",
    "  let column = j < inner;",
  ];
  let body: string[];
  if (s.stage === "segments") {
    body = [
      ...head,
      "  let tile_start = tile * TILE;",
      "  let tile_end = min(tile_start + TILE, rows);",
      `  let r0 = tile_start + lane * ${SEGMENT_ROWS}u;`,
      `  let r1 = min(r0 + ${SEGMENT_ROWS}u, tile_end);`,
      ...offsets(s.rank, 3, "min(r0, rows - 1u) * inner + min(j, inner - 1u)"),
      // The lane's rows in order: its first segment kept aside (it may have begun before the
      // lane), the ones after it complete when the next begins, the last one kept.
      "  let checker = lid % COLUMNS == 0u;",
      // Every load issued first (naga keeps loops rolled: a rolled loop waits out each load in
      // turn): the lane's rows, rows past its end repeating its last, and its two neighbours.
      "  let last = select(0u, r1 - r0 - 1u, r1 > r0);",
      "  let before = raw_at(max(r0, 1u) - 1u);",
      "  let after = raw_at(min(r1, rows - 1u));",
      ...rows.map((u) => `  let k${u} = i32(min(${u}u, last));`),
      ...(wide
        ? [
          // Four vec4 loads a lane, not sixteen words SEGMENT_ROWS apart from the next lane's.
          ...quads.map((q) => `  let ids${q} = indices[(p.off1 + i32(r0)) / 4 + ${q}];`),
          ...quads.map((q) => `  let values${q} = updates[(p.off0 + i32(r0)) / 4 + ${q}];`),
          ...rows.map((u) => `  let raw${u} = ids${u >> 2}[${u & 3}];`),
          ...rows.map((u) => `  let v${u} = values${u >> 2}[${u & 3}];`),
        ]
        : [
          ...rows.map((u) => `  let raw${u} = indices[p.off1 + o1 + k${u} * p.strides[1][0][0]];`),
          ...rows.map((u) =>
            `  let v${u} = ${updateAt(half, `p.off0 + o0 + k${u} * p.strides[0][0][0]`)};`
          ),
        ]),
      "  var previous = select(raw0, before, r0 > 0u);",
      "  var first_id = -2; var first_v = 0u; var first_count = 0u; var has_first = false;",
      "  var current = -2; var acc = 0u; var count = 0u;",
      // The lane's rows in order: its first segment kept aside (it may have begun before the
      // lane), the ones after it complete when the next begins, the last one kept.
      ...rows.flatMap((u) => [
        `  if (r0 + ${u}u < r1) {`,
        `    if (checker && raw${u} < previous) {`,
        "      atomicMax(&checks[2u * p.slot], 2u);",
        `      atomicStore(&checks[2u * p.slot + 1u], bitcast<u32>(raw${u}));`,
        "    }",
        `    previous = raw${u};`,
        `    let i = resolve(raw${u});`,
        ...(u === 0 ? ["    current = i; acc = v0; count = 1u;"] : [
          "    if (i == current) {",
          `      acc = ${combine("acc", `v${u}`)};`,
          "      count = count + 1u;",
          "    } else {",
          "      if (has_first) { if (column) { write(current, o2, acc, count); } }",
          "      else { has_first = true; first_id = current; first_v = acc; first_count = count; }",
          `      current = i; acc = v${u}; count = 1u;`,
          "    }",
        ]),
        "  }",
      ]),
      "  let rows_here = r0 < r1;",
      "  let single = !has_first;",
      "  if (single) { first_id = current; first_v = acc; first_count = count; }",
      "  let crosses_in = rows_here && r0 > 0u && resolve(before) == first_id;",
      "  let crosses_out = rows_here && r1 < rows && resolve(after) == current;",
      // The segmented scan over the lanes of the last segments' partials (flag: the segment
      // begins in that lane), column by column.
      "  var flag = select(1u, 0u, single && crosses_in);",
      "  var value = acc;",
      "  var number = count;",
      "  let e = lid;",
      "  scan_flag[e] = flag; scan_value[e] = value; scan_count[e] = number;",
      "  workgroupBarrier();",
      "  for (var d = 1u; d < LANES; d = d << 1u) {",
      "    var f = flag; var v = value; var k = number;",
      "    if (lane >= d && flag == 0u) {",
      "      let b = e - d * COLUMNS;",
      `      f = scan_flag[b]; v = ${
        combine("scan_value[b]", "value")
      }; k = scan_count[b] + number;`,
      "    }",
      "    workgroupBarrier();",
      "    flag = f; value = v; number = k;",
      "    scan_flag[e] = flag; scan_value[e] = value; scan_count[e] = number;",
      "    workgroupBarrier();",
      "  }",
      "  if (!rows_here) { return; }",
      "  if (lane == 0u && lid % COLUMNS == 0u && group % blocks == 0u) {",
      "    let last_id = id_at(tile_end - 1u);",
      "    let whole = first_id == last_id && tile_end < rows && id_at(tile_end) == last_id;",
      "    carry_ids[3u * tile] = last_id;",
      "    carry_ids[3u * tile + 1u] = select(-1, first_id, crosses_in && !whole);",
      "  }",
      "  if (!column) { return; }",
      "  if (!single || !crosses_out) {",
      // The lane's first segment ends here.
      "    if (!crosses_in) {",
      "      write(first_id, o2, first_v, first_count);",
      "    } else {",
      "      var total = first_v; var total_count = first_count; var begun = 0u;",
      "      if (lane > 0u) {",
      "        let b = e - COLUMNS;",
      `        total = ${combine("scan_value[b]", "first_v")};`,
      "        total_count = scan_count[b] + first_count;",
      "        begun = scan_flag[b];",
      "      }",
      "      if (begun == 1u) { write(first_id, o2, total, total_count); }",
      "      else {",
      "        carry_values[(tiles + tile) * inner + j] = total;",
      mean ? "        carry_counts[(tiles + tile) * inner + j] = total_count;" : "",
      "      }",
      "    }",
      "  }",
      "  if (!single && !crosses_out) { write(current, o2, acc, count); }",
      "  if (crosses_out && r1 == tile_end) {",
      "    carry_values[tile * inner + j] = value;",
      "    if (lid % COLUMNS == 0u && group % blocks == 0u) { carry_ids[3u * tile + 2u] = i32(flag); }",
      mean ? "    carry_counts[tile * inner + j] = number;" : "",
      "  }",
      "}",
    ];
  } else {
    body = [
      ...head,
      // The head's segment and the first tile whose tail is that segment's (the tile before, if
      // its tail begun there; else a search: ids[3t] ascend with t), read through workgroup
      // memory: the barriers below need the branches on them to be uniform.
      "  if (lid == 0u) {",
      "    let seg = carry_ids[3u * tile + 1u];",
      "    var low = tile - 1u;",
      "    if (seg >= 0 && carry_ids[3u * low + 2u] == 0) {",
      "      low = 0u; var high = tile;",
      "      loop {",
      "        if (low >= high) { break; }",
      "        let mid = (low + high) / 2u;",
      "        if (carry_ids[3u * mid] < seg) { low = mid + 1u; } else { high = mid; }",
      "      }",
      "    }",
      "    head = vec2<i32>(seg, i32(low));",
      "  }",
      "  let found = workgroupUniformLoad(&head);",
      "  let seg = found.x;",
      "  if (seg < 0) { return; }",
      "  let low = u32(found.y);",
      "  let at = (tiles + tile) * inner + j;",
      "  if (low + 1u == tile) {",
      // One tail before the head: no tree.
      "    if (lane != 0u || !column) { return; }",
      ...offsets(s.rank, 3, "j").map((l) => `  ${l}`),
      "    let t = carry_values[low * inner + j];",
      `    write(seg, o2, ${combine("t", "carry_values[at]")}, ${
        mean ? "carry_counts[low * inner + j] + carry_counts[at]" : "0u"
      });`,
      "    return;",
      "  }",
      "  var have = false; var value = 0u; var number = 0u;",
      "  for (var k = low + lane; k < tile; k += LANES) {",
      "    let v = carry_values[k * inner + min(j, inner - 1u)];",
      `    value = select(v, ${combine("value", "v")}, have);`,
      mean ? "    number = number + carry_counts[k * inner + min(j, inner - 1u)];" : "",
      "    have = true;",
      "  }",
      "  let e = lid;",
      "  scan_flag[e] = select(0u, 1u, have); scan_value[e] = value; scan_count[e] = number;",
      "  workgroupBarrier();",
      "  for (var d = LANES / 2u; d > 0u; d = d >> 1u) {",
      "    if (lane < d) {",
      "      let b = e + d * COLUMNS;",
      "      if (scan_flag[b] == 1u) {",
      `        value = select(scan_value[b], ${combine("value", "scan_value[b]")}, have);`,
      "        number = number + scan_count[b];",
      "        have = true;",
      "      }",
      "    }",
      "    workgroupBarrier();",
      "    scan_flag[e] = select(0u, 1u, have); scan_value[e] = value; scan_count[e] = number;",
      "    workgroupBarrier();",
      "  }",
      "  if (lane != 0u || !column) { return; }",
      ...offsets(s.rank, 3, "j"),
      "  let h = carry_values[at];",
      mean ? "  number = number + carry_counts[at];" : "",
      `  write(seg, o2, select(h, ${combine("value", "h")}, have), number);`,
      "}",
    ];
  }
  const code = [
    PARAMS,
    `@group(0) @binding(0) var<storage, read> updates: array<${wide ? "vec4<u32>" : "u32"}>;`,
    `@group(0) @binding(1) var<storage, read> indices: array<${wide ? "vec4<i32>" : "i32"}>;`,
    "@group(0) @binding(2) var<storage, read_write> checks: array<atomic<u32>>;",
    `@group(0) @binding(3) var<storage, read_write> counts: array<u32>;`,
    `@group(0) @binding(4) var<storage, read_write> out: array<${half ? "atomic<u32>" : "u32"}>;`,
    "@group(0) @binding(5) var<storage, read_write> carry_values: array<u32>;",
    "@group(0) @binding(6) var<storage, read_write> carry_counts: array<u32>;",
    "@group(0) @binding(7) var<storage, read_write> carry_ids: array<i32>;",
    "@group(0) @binding(8) var<uniform> p: Params;",
    `var<workgroup> scan_flag: array<u32, ${size}>;`,
    `var<workgroup> scan_value: array<u32, ${size}>;`,
    `var<workgroup> scan_count: array<u32, ${size}>;`,
    "var<workgroup> head: vec2<i32>;",
    RESOLVE,
    HALF,
    KEYS,
    half ? applyFunction({ ...s, combine: "cas", reduce: partial }) : "",
    ...common,
    ...body,
  ].filter((l) => l !== "").join("\n");
  return `${code}\n${preludeFor(code)}`;
}

/**
 * The compaction ("scatter-compact"): rows (the first axis; p.axis_stride = `inner` elements a
 * row) whose mask word (the indices operand) is non-zero are written, in order, to the output's
 * first rows, and the rows past their total up to p.axis_length are filled with p.fill. Tiles of
 * COMPACT_ROWS rows an invocation:
 * - "compact-count": each tile's selected rows (its rows read in coalesced stripes), into
 *   offsets[tile];
 * - "compact-offsets": one workgroup turns the p.tiles counts into exclusive offsets, the total at
 *   offsets[p.tiles];
 * - "compact-write": each invocation counts its COMPACT_ROWS consecutive rows, a scan over the
 *   workgroup places them after the tile's offset, and it writes its selected rows there; then
 *   the workgroups fill the rows past the total in stripes.
 * Float16 words hold two rows' halves: those stores are compare-and-swap loops.
 */
function compaction(s: IndexingSpec): string {
  const size = s.workgroupSize;
  const half = s.dtype === "float16";
  const wide = s.wide === true;
  const rows = Array.from({ length: COMPACT_ROWS }, (_, u) => u);
  const quads = Array.from({ length: COMPACT_ROWS / 4 }, (_, q) => q);
  const maskAt = (row: string) => `mask_word(${row})`;
  // A thread's COMPACT_ROWS consecutive mask words, as `selected{u}` (rows past the end: 0).
  const ownRows = wide
    ? [
      ...quads.map((q) => `  let words${q} = indices[(p.off1 + i32(r0)) / 4 + ${q}];`),
      ...rows.map((u) =>
        `  let selected${u} = r0 + ${u}u < rows && words${u >> 2}[${u & 3}] != 0;`
      ),
    ]
    : rows.map((u) =>
      `  let selected${u} = r0 + ${u}u < rows && ${maskAt(`min(r0 + ${u}u, rows - 1u)`)} != 0;`
    );
  const head = [...rowsMain(s), "  let tile = group;"];
  let body: string[];
  if (s.stage === "compact-count") {
    body = [
      ...head,
      "  if (tile >= p.tiles) { return; }",
      `  let first = tile * TILE;`,
      "  var count = 0u;",
      ...(wide
        ? [
          // Stripes of vec4: four words a load.
          ...quads.map((q) => `  let q${q} = first / 4u + ${q * size}u + lid;`),
          ...quads.map((q) =>
            `  let w${q} = indices[(p.off1 + i32(min(q${q}, (rows - 1u) / 4u) * 4u)) / 4];`
          ),
          ...quads.flatMap((q) =>
            [0, 1, 2, 3].map((c) =>
              `  if (4u * q${q} + ${c}u < rows && w${q}[${c}] != 0u) { count = count + 1u; }`
            )
          ),
        ]
        : [
          ...rows.map((u) => `  let r${u} = first + ${u * size}u + lid;`),
          ...rows.map((u) =>
            `  if (r${u} < rows && ${maskAt(`min(r${u}, rows - 1u)`)} != 0) { count = count + 1u; }`
          ),
        ]),
      "  if (lid == 0u) { atomicStore(&total, 0u); }",
      "  workgroupBarrier();",
      "  atomicAdd(&total, count);",
      "  workgroupBarrier();",
      "  if (lid == 0u) { offsets[tile] = atomicLoad(&total); }",
      "}",
    ];
  } else if (s.stage === "compact-offsets") {
    body = [
      ...head,
      "  if (tile > 0u) { return; }",
      "  var carry = 0u;",
      `  for (var start = 0u; start < p.tiles; start += ${size * COMPACT_ROWS}u) {`,
      `    let first = start + lid * ${COMPACT_ROWS}u;`,
      ...rows.map((u) =>
        `    let c${u} = select(0u, offsets[min(first + ${u}u, p.tiles - 1u)], first + ${u}u < p.tiles);`
      ),
      `    let mine = ${rows.map((u) => `c${u}`).join(" + ")};`,
      "    let before = carry + exclusive_scan(mine, lid);",
      "    var running = before;",
      ...rows.map((u) =>
        `    if (first + ${u}u < p.tiles) { offsets[first + ${u}u] = running; } running = running + c${u};`
      ),
      // The last thread's running total is the round's; every thread reads it after a barrier.
      `    if (lid == ${size - 1}u) { round_total = running; }`,
      "    carry = workgroupUniformLoad(&round_total);",
      "  }",
      "  if (lid == 0u) { offsets[p.tiles] = carry; }",
      "}",
    ];
  } else {
    // Row r's element whose column's offsets are `o`.
    const value = (r: string, o: string) =>
      s.positions ? r : updateAt(half, `p.off0 + ${o}.x + i32(${r}) * p.strides[0][0][0]`);
    const copies = [0, 1, 2, 3];
    body = [
      ...head,
      "  if (tile >= p.tiles) { return; }",
      `  let r0 = tile * TILE + lid * ${COMPACT_ROWS}u;`,
      ...ownRows,
      `  let mine = ${rows.map((u) => `select(0u, 1u, selected${u})`).join(" + ")};`,
      // The tile's selected rows, in order, into workgroup memory, then copied out in stripes
      // (stores from each invocation's own rows scattered a word per sector).
      "  var k = exclusive_scan(mine, lid);",
      `  if (lid == ${size - 1}u) { round_total = k + mine; }`,
      ...rows.map((u) => `  if (selected${u}) { staged[k] = r0 + ${u}u; k = k + 1u; }`),
      "  let count = workgroupUniformLoad(&round_total);",
      ...(s.summed
        ? [
          // The tiles' counts (unscanned) summed here: those before this tile, and all.
          "  var before = 0u;",
          "  var all = 0u;",
          `  for (var t = lid; t < p.tiles; t += ${size}u) {`,
          "    let c = offsets[t];",
          "    all = all + c;",
          "    if (t < tile) { before = before + c; }",
          "  }",
          "  atomicAdd(&sum_before, before);",
          "  atomicAdd(&sum_all, all);",
          "  let base = workgroupUniformLoad(&sum_before);",
          "  let total = workgroupUniformLoad(&sum_all);",
        ]
        : ["  let base = offsets[tile];", "  let total = offsets[p.tiles];"]),
      "  let size = u32(p.axis_length);",
      "  let elements = count * inner;",
      `  for (var e0 = lid; e0 < elements; e0 += ${4 * size}u) {`,
      ...copies.map((q) => `    let e${q} = e0 + ${q * size}u;`),
      ...copies.map((q) => `    let i${q} = min(e${q}, elements - 1u) / inner;`),
      ...copies.map((q) => `    let row${q} = staged[i${q}];`),
      ...copies.map((q) => `    let o${q} = operands(min(e${q}, elements - 1u) % inner);`),
      ...copies.map((q) => `    let v${q} = ${value(`row${q}`, `o${q}`)};`),
      ...copies.map((q) =>
        `    if (e${q} < elements && base + i${q} < size) { ` +
        `store(o${q}.z + i32(base + i${q}) * p.axis_stride, v${q}); }`
      ),
      "  }",
      // The rows past the total, in stripes of the workgroups.
      "  let past = size - min(total, size);",
      `  for (var q = tile * ${size}u + lid; q < past * inner; q += p.tiles * ${size}u) {`,
      "    let row = total + q / inner;",
      "    let o = operands(q % inner);",
      "    store(o.z + i32(row) * p.axis_stride, p.fill);",
      "  }",
      "}",
    ];
  }
  const scan = [
    // An exclusive sum over the workgroup (Hillis-Steele in workgroup memory).
    "fn exclusive_scan(v: u32, lid: u32) -> u32 {",
    "  scan_values[lid] = v;",
    "  workgroupBarrier();",
    ...workgroupInclusiveSum("scan_values", "lid", size, "  "),
    "  return scan_values[lid] - v;",
    "}",
  ];
  const code = [
    PARAMS,
    "@group(0) @binding(0) var<storage, read> updates: array<u32>;",
    `@group(0) @binding(1) var<storage, read> indices: array<${wide ? "vec4<u32>" : "u32"}>;`,
    "@group(0) @binding(2) var<storage, read_write> offsets: array<u32>;",
    `@group(0) @binding(3) var<storage, read_write> out: array<${half ? "atomic<u32>" : "u32"}>;`,
    "@group(0) @binding(4) var<uniform> p: Params;",
    `const TILE = ${size * COMPACT_ROWS}u;`,
    `var<workgroup> scan_values: array<u32, ${size}>;`,
    "var<workgroup> total: atomic<u32>;",
    "var<workgroup> round_total: u32;",
    ...(s.stage === "compact-write" ? ["var<workgroup> staged: array<u32, TILE>;"] : []),
    ...(s.summed
      ? ["var<workgroup> sum_before: atomic<u32>;", "var<workgroup> sum_all: atomic<u32>;"]
      : []),
    HALF,
    wide
      ? "fn mask_word(r: u32) -> u32 { let e = p.off1 + i32(r); return indices[e >> 2u][e & 3]; }"
      : "fn mask_word(r: u32) -> u32 { return indices[p.off1 + i32(r) * p.strides[1][0][0]]; }",
    // The updates', the mask's and the output's offsets of element c of row 0.
    "fn operands(c: u32) -> vec3<i32> {",
    ...offsets(s.rank, 3, "c"),
    "  return vec3<i32>(o0, o1, o2);",
    "}",
    half
      ? [
        "fn store(o: i32, v: u32) {",
        "  let w = o >> 1u;",
        "  let shift = u32(o & 1) * 16u;",
        "  var old = atomicLoad(&out[w]);",
        "  loop {",
        "    let next = (old & ~(0xffffu << shift)) | ((v & 0xffffu) << shift);",
        "    let r = atomicCompareExchangeWeak(&out[w], old, next);",
        "    if (r.exchanged) { break; }",
        "    old = r.old_value;",
        "  }",
        "}",
      ].join("\n")
      : "fn store(o: i32, v: u32) { out[o] = v; }",
    ...scan,
    ...body,
  ].join("\n");
  return `${code}\n${preludeFor(code)}`;
}

/**
 * The finishing passes over the output's p.n elements: float32 bits to keys ("keys", before a
 * max or min) and back ("unkeys"); a mean's sums divided by their counts plus p.negative (1 with
 * a base), a slot with neither being 0 ("mean"; floor division for int32).
 */
function finish(s: IndexingSpec): string {
  const half = s.dtype === "float16";
  let body: string[];
  if (s.stage === "keys") {
    body = [`  out[t] = bitcast<u32>(to_key(out[t], ${s.reduce === "max"}));`];
  } else if (s.stage === "unkeys") {
    body = ["  out[t] = from_key(bitcast<i32>(out[t]));"];
  } else {
    const divide = (sum: string, c: string): string => {
      switch (s.dtype) {
        case "int32":
          return `bitcast<u32>(g_floordiv_i32(bitcast<i32>(${sum}), i32(${c})))`;
        case "uint32":
        case "bool":
          return `${sum} / ${c}`;
        case "float16":
          return `(pack2x16float(vec2<f32>(g_round_f16(unpack2x16float(${sum}).x / f32(${c})), 0.0)) & 0xffffu)`;
        default:
          return `bitcast<u32>(bitcast<f32>(${sum}) / f32(${c}))`;
      }
    };
    const one = (e: string, sum: string) => [
      `  let c${e} = counts[${e}] + p.negative;`,
      `  let m${e} = select(0u, ${divide(sum, `c${e}`)}, c${e} > 0u);`,
    ];
    body = half
      ? [
        "  let e0 = 2u * t;",
        "  let e1 = e0 + 1u;",
        ...one("e0", "(out[t] & 0xffffu)"),
        "  var word = me0;",
        "  if (e1 < p.n) {",
        ...one("e1", "(out[t] >> 16u)").map((l) => `  ${l}`),
        "    word = word | (me1 << 16u);",
        "  }",
        "  out[t] = word;",
      ]
      : [...one("t", "out[t]"), "  out[t] = mt;"];
  }
  const code = [
    PARAMS,
    "@group(0) @binding(0) var<storage, read> counts: array<u32>;",
    "@group(0) @binding(1) var<storage, read_write> out: array<u32>;",
    "@group(0) @binding(2) var<uniform> p: Params;",
    KEYS,
    ...main(s.workgroupSize),
    `  if (t >= ${half ? "(p.n + 1u) / 2u" : "p.n"}) { return; }`,
    ...body,
    "}",
  ].join("\n");
  return `${code}\n${preludeFor(code)}`;
}
