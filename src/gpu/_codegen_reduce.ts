/**
 * Generates WGSL row reductions. The input is seen as M rows of R elements (reduced axes last,
 * read through strides). Three variants, chosen by the reduce plan:
 * - `workgroup`: each workgroup reduces one chunk of one row, then combines across the workgroup
 *   through subgroup operations (where the device has them) or a shared-memory tree;
 * - `thread`: one invocation per row, for many short rows;
 * - rows split into C chunks write partials that a second `workgroup` pass reduces.
 * @module
 */
import type { DType } from "../dtype.ts";
import { computeType, literal, loadAs, preludeFor, storageType, storeAs } from "./_wgsl_types.ts";

/** Reductions with a GPU kernel. */
export type ReduceOp = "sum" | "prod" | "max" | "min" | "argmax" | "argmin";

/** Everything the generated code depends on. */
export interface ReduceSpec {
  op: ReduceOp;
  inDtype: DType;
  outDtype: DType;
  /** argmax/argmin: the dtype of the values compared (the input's, or the partials'). */
  valueDtype?: DType;
  /** argmax/argmin: the input holds (value bits, index) pairs from a first pass. */
  pairsIn?: boolean;
  /** argmax/argmin: write (value bits, index) pairs for a second pass instead of indices. */
  pairsOut?: boolean;
  /**
   * Contiguous rows read as vec4, four independent loads in flight per loop step (needs the
   * offset, the row length and the chunk length to be multiples of 4; not for arg reductions).
   */
  vec4?: boolean;
  /** "contiguous": row r is elements [off + r*R, off + r*R + R). "strided": through strides. */
  mode: "contiguous" | "strided";
  outerRank: number;
  innerRank: number;
  variant: "workgroup" | "thread";
  /** Combine across a workgroup with subgroup operations. */
  subgroups: boolean;
  workgroupSize: number;
}

/** Cache key of a spec. */
export function reduceKey(s: ReduceSpec): string {
  return `red|${s.op}|${s.inDtype}>${s.outDtype}|${s.valueDtype ?? ""}${s.pairsIn ? "<p" : ""}${
    s.pairsOut ? ">p" : ""
  }|${s.mode}|${s.outerRank}.${s.innerRank}|${s.variant}|${
    s.subgroups ? "sg" : "sh"
  }|wg${s.workgroupSize}${s.vec4 ? "|v4" : ""}`;
}

/** Uniform words: M, R, C, L, off, pad..., outer shape, outer strides, inner shape, inner strides. */
const U_WORDS = 8 + 4 * 8;

/** Packs the uniform block for one dispatch. */
export function reduceUniforms(
  rows: number,
  rowLength: number,
  chunks: number,
  chunkLength: number,
  offset: number,
  outer: { shape: readonly number[]; strides: readonly number[] },
  inner: { shape: readonly number[]; strides: readonly number[] },
): Uint32Array {
  const u = new Uint32Array(U_WORDS);
  u.set([rows, rowLength, chunks, chunkLength, offset]);
  outer.shape.forEach((d, i) => (u[8 + i] = d));
  outer.strides.forEach((d, i) => (u[16 + i] = d));
  inner.shape.forEach((d, i) => (u[24 + i] = d));
  inner.strides.forEach((d, i) => (u[32 + i] = d));
  return u;
}

function combine(op: ReduceOp, t: string, a: string, b: string): string {
  switch (op) {
    case "sum":
      return `(${a} + ${b})`;
    case "prod":
      return `(${a} * ${b})`;
    case "max":
      return t === "f32" ? `g_max_f32(${a}, ${b})` : `max(${a}, ${b})`;
    case "min":
      return t === "f32" ? `g_min_f32(${a}, ${b})` : `min(${a}, ${b})`;
    default:
      throw new Error(`internal: ${op} has no plain combine`);
  }
}

/** The identity element of a reduction in its accumulator type. */
export function identity(op: ReduceOp, dtype: DType): number {
  const t = computeType(dtype);
  switch (op) {
    case "sum":
      return 0;
    case "prod":
      return 1;
    case "max":
    case "argmax":
      return t === "f32" ? -Infinity : t === "i32" ? -2147483648 : 0;
    case "argmin":
    case "min":
      return t === "f32" ? Infinity : t === "i32" ? 2147483647 : 4294967295;
  }
}

/** Offset of coordinate `index` within a group of axes starting at uniform word `base`. */
function decompose(name: string, index: string, rank: number, shapeVec: number, strideVec: number) {
  const lines = [`var ${name} = 0u;`, `var ${name}_rest = ${index};`];
  for (let d = rank - 1; d >= 0; d--) {
    const dim = `p.dims[${shapeVec + (d >> 2)}][${d & 3}]`;
    const stride = `p.dims[${strideVec + (d >> 2)}][${d & 3}]`;
    if (d > 0) {
      lines.push(
        `${name} += (${name}_rest % ${dim}) * ${stride}; ${name}_rest = ${name}_rest / ${dim};`,
      );
    } else lines.push(`${name} += ${name}_rest * ${stride};`);
  }
  return lines.join("\n  ");
}

/** How a spec's accumulator is declared, fed, combined and stored. */
function accumulator(s: ReduceSpec) {
  const arg = s.op === "argmax" || s.op === "argmin";
  // Arg reductions carry (value, index); the value type comes from the input (or the partials).
  const valueDtype: DType = arg ? (s.valueDtype ?? "float32") : s.outDtype;
  const t = computeType(valueDtype === "float16" ? "float32" : valueDtype);
  const id = literal(identity(s.op, valueDtype), valueDtype === "float16" ? "float32" : valueDtype);
  const c = (a: string, b: string) => combine(s.op, t, a, b);
  const take = (v: string, i: string, target: [string, string]) =>
    `if (g_arg_better(${v}, ${i}, ${target[0]}, ${target[1]})) { ${target[0]} = ${v}; ${
      target[1]
    } = ${i}; }`;
  return {
    arg,
    type: t,
    declare: arg
      ? `var acc: ${t} = ${id};\n  var acc_i: u32 = 0xffffffffu;`
      : `var acc: ${t} = ${id};`,
    /** Folds element `e` (an index into src) at row position `j`. */
    feed(e: string, j: string): string {
      if (!arg) return `acc = ${c("acc", loadAs(s.inDtype, `src[${e}]`))};`;
      if (s.pairsIn) {
        return `{ let pair = src[${e}]; ${
          take(`bitcast<${t}>(pair.x)`, "pair.y", ["acc", "acc_i"])
        } }`;
      }
      return `{ let v = ${loadAs(s.inDtype, `src[${e}]`)}; ${take("v", j, ["acc", "acc_i"])} }`;
    },
    shuffle: arg
      ? `{ let v = subgroupShuffleXor(acc, mask); let i = subgroupShuffleXor(acc_i, mask); ${
        take("v", "i", ["acc", "acc_i"])
      } }`
      : `acc = ${c("acc", "subgroupShuffleXor(acc, mask)")};`,
    shared: arg
      ? `var<workgroup> shared_acc: array<${t}, ${s.workgroupSize}>;\nvar<workgroup> shared_idx: array<u32, ${s.workgroupSize}>;`
      : `var<workgroup> shared_acc: array<${t}, ${s.workgroupSize}>;`,
    /** Copies the accumulator into shared slot `k`. */
    put: (
      k: string,
    ) => (arg ? `shared_acc[${k}] = acc; shared_idx[${k}] = acc_i;` : `shared_acc[${k}] = acc;`),
    /** Folds shared slot `k` into shared slot `into` (tree step). */
    fold: (into: string, k: string) =>
      arg
        ? `{ let v = shared_acc[${k}]; let i = shared_idx[${k}]; var w = shared_acc[${into}]; var q = shared_idx[${into}]; ${
          take("v", "i", ["w", "q"])
        } shared_acc[${into}] = w; shared_idx[${into}] = q; }`
        : `shared_acc[${into}] = ${c(`shared_acc[${into}]`, `shared_acc[${k}]`)};`,
    /** Loads shared slot `k` into the accumulator. */
    get: (
      k: string,
    ) => (arg ? `acc = shared_acc[${k}]; acc_i = shared_idx[${k}];` : `acc = shared_acc[${k}];`),
    store(to: string): string {
      if (!arg) return `dst[${to}] = ${storeAs(s.outDtype, "acc")};`;
      if (s.pairsOut) return `dst[${to}] = vec2<u32>(bitcast<u32>(acc), acc_i);`;
      return `dst[${to}] = i32(acc_i);`;
    },
    better: arg ? betterFunction(s.op as "argmax" | "argmin", t) : "",
  };
}

/** `g_arg_better(v, i, w, k)`: does (v, i) beat (w, k)? NaN wins (NumPy); ties go to the lower index. */
function betterFunction(op: "argmax" | "argmin", t: string): string {
  const beats = op === "argmax" ? "v > w" : "v < w";
  const nan = t === "f32"
    ? "  let vn = g_isnan(v);\n  let wn = g_isnan(w);\n  if (vn || wn) { return vn && (!wn || i < k); }\n"
    : "";
  return `fn g_arg_better(v: ${t}, i: u32, w: ${t}, k: u32) -> bool {\n${nan}  return ${beats} || (v == w && i < k);\n}`;
}

/**
 * The vec4 loop: four vec4 loads per step into named registers (naga does not unroll loops),
 * folded into a vec4 accumulator, then into the scalar one.
 */
function vectorLoop(s: ReduceSpec, t: string): string[] {
  const wg = s.workgroupSize;
  const v = (x: string) => loadAs(s.inDtype, x);
  const id = literal(identity(s.op, s.outDtype), s.outDtype === "float16" ? "float32" : s.outDtype);
  const fold = (a: string, b: string) =>
    s.op === "sum"
      ? `${a} + ${b}`
      : s.op === "prod"
      ? `${a} * ${b}`
      : `vec4(${
        ["x", "y", "z", "w"].map((c) => combine(s.op, t, `${a}.${c}`, `${b}.${c}`)).join(", ")
      })`;
  const load = (i: string) => s.inDtype === "float16" ? `vec4<f32>(src[${i}])` : `src[${i}]`;
  void v;
  return [
    `  var acc4 = vec4<${t}>(${id});`,
    "  let base4 = base / 4u;",
    "  let start4 = start / 4u;",
    "  let stop4 = stop / 4u;",
    `  var j = start4 + lid;`,
    `  for (; j + ${3 * wg}u < stop4; j += ${4 * wg}u) {`,
    `    let r0 = ${load("base4 + j")};`,
    `    let r1 = ${load(`base4 + j + ${wg}u`)};`,
    `    let r2 = ${load(`base4 + j + ${2 * wg}u`)};`,
    `    let r3 = ${load(`base4 + j + ${3 * wg}u`)};`,
    `    acc4 = ${fold("acc4", `(${fold("r0", "r1")})`)};`,
    `    acc4 = ${fold("acc4", `(${fold("r2", "r3")})`)};`,
    "  }",
    `  for (; j < stop4; j += ${wg}u) { acc4 = ${fold("acc4", load("base4 + j"))}; }`,
    `  acc = ${
      combine(s.op, t, combine(s.op, t, "acc4.x", "acc4.y"), combine(s.op, t, "acc4.z", "acc4.w"))
    };`,
  ];
}

/** Generates the WGSL source of a spec. */
export function generateReduce(s: ReduceSpec): string {
  const wg = s.workgroupSize;
  const a = accumulator(s);
  const half = s.inDtype === "float16" || s.outDtype === "float16";
  const vector = Boolean(s.vec4) && !a.arg && s.mode === "contiguous" && s.variant === "workgroup";
  const srcType = s.pairsIn
    ? "vec2<u32>"
    : vector
    ? `vec4<${storageType(s.inDtype)}>`
    : storageType(s.inDtype);
  const dstType = s.pairsOut ? "vec2<u32>" : a.arg ? "i32" : storageType(s.outDtype);
  const lines: string[] = [];
  if (half) lines.push("enable f16;");
  lines.push(
    "struct Params { rows: u32, len: u32, chunks: u32, chunk_len: u32, off: u32, pad0: u32, pad1: u32, pad2: u32, dims: array<vec4<u32>, 8> }",
    `@group(0) @binding(0) var<storage, read> src: array<${srcType}>;`,
    `@group(0) @binding(1) var<storage, read_write> dst: array<${dstType}>;`,
    "@group(0) @binding(2) var<uniform> p: Params;",
  );
  if (a.better) lines.push(a.better);
  const rowBase = s.mode === "contiguous"
    ? "let base = p.off + row * p.len;"
    : `${decompose("outer_off", "row", s.outerRank, 0, 2)}\n  let base = p.off + outer_off;`;
  const element = s.mode === "contiguous" ? "base + j" : "base + inner_off";
  const innerOff = s.mode === "contiguous" ? "" : decompose("inner_off", "j", s.innerRank, 4, 6);
  if (s.variant === "thread") {
    lines.push(
      `@compute @workgroup_size(${wg})`,
      "fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {",
      `  let row = gid.x + gid.y * nwg.x * ${wg}u;`,
      "  if (row >= p.rows) { return; }",
      `  ${rowBase}`,
      `  ${a.declare}`,
      "  for (var j = 0u; j < p.len; j++) {",
      `  ${innerOff}`,
      `    ${a.feed(element, "j")}`,
      "  }",
      `  ${a.store("row")}`,
      "}",
    );
  } else {
    lines.push(a.shared);
    const builtins = [
      "@builtin(workgroup_id) wid: vec3<u32>",
      "@builtin(num_workgroups) nwg: vec3<u32>",
      "@builtin(local_invocation_index) lid: u32",
    ];
    if (s.subgroups) {
      builtins.push(
        "@builtin(subgroup_size) sg_size: u32",
        "@builtin(subgroup_invocation_id) sg_lane: u32",
      );
    }
    lines.push(
      `@compute @workgroup_size(${wg})`,
      `fn main(${builtins.join(", ")}) {`,
      "  let g = wid.x + wid.y * nwg.x;",
      // The whole workgroup leaves together, so the barriers below stay in uniform control flow.
      "  if (g >= p.rows * p.chunks) { return; }",
      "  let row = g / p.chunks;",
      "  let start = (g % p.chunks) * p.chunk_len;",
      "  let stop = min(p.len, start + p.chunk_len);",
      `  ${rowBase}`,
      `  ${a.declare}`,
      ...(vector ? vectorLoop(s, a.type) : [
        `  for (var j = start + lid; j < stop; j += ${wg}u) {`,
        `  ${innerOff}`,
        `    ${a.feed(element, "j")}`,
        "  }",
      ]),
    );
    if (s.subgroups) {
      // subgroupAdd is the hardware path for sums; other ops (and argmax's pairs) use a
      // butterfly with the op's own combine, which keeps NaN propagation exact.
      if (s.op === "sum") lines.push("  acc = subgroupAdd(acc);");
      else {
        lines.push(
          "  for (var mask = sg_size >> 1u; mask > 0u; mask = mask >> 1u) {",
          `    ${a.shuffle}`,
          "  }",
        );
      }
      lines.push(
        `  if (sg_lane == 0u) { ${a.put("lid / sg_size")} }`,
        "  workgroupBarrier();",
        "  if (lid == 0u) {",
        `    for (var k = 1u; k < ${wg}u / sg_size; k++) { ${a.fold("0u", "k")} }`,
        `    ${a.get("0u")}`,
        `    ${a.store("g")}`,
        "  }",
      );
    } else {
      lines.push(`  ${a.put("lid")}`, "  workgroupBarrier();");
      lines.push(
        `  for (var width = ${wg >> 1}u; width > 0u; width = width >> 1u) {`,
        `    if (lid < width) { ${a.fold("lid", "lid + width")} }`,
        "    workgroupBarrier();",
        "  }",
        `  if (lid == 0u) { ${a.get("0u")} ${a.store("g")} }`,
      );
    }
    lines.push("}");
  }
  const main = lines.join("\n");
  return `${main}\n${preludeFor(main)}\n`;
}
