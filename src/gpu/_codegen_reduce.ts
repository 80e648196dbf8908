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
export type ReduceOp = "sum" | "prod" | "max" | "min";

/** Everything the generated code depends on. */
export interface ReduceSpec {
  op: ReduceOp;
  inDtype: DType;
  outDtype: DType;
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
  return `red|${s.op}|${s.inDtype}>${s.outDtype}|${s.mode}|${s.outerRank}.${s.innerRank}|${s.variant}|${
    s.subgroups ? "sg" : "sh"
  }|wg${s.workgroupSize}`;
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
      return t === "f32" ? -Infinity : t === "i32" ? -2147483648 : 0;
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

/** Generates the WGSL source of a spec. */
export function generateReduce(s: ReduceSpec): string {
  const acc = computeType(s.outDtype === "float16" ? "float32" : s.outDtype);
  const wg = s.workgroupSize;
  const half = s.inDtype === "float16" || s.outDtype === "float16";
  const outStorage = s.outDtype;
  const id = literal(identity(s.op, s.outDtype), s.outDtype === "float16" ? "float32" : s.outDtype);
  const c = (a: string, b: string) => combine(s.op, acc, a, b);
  const lines: string[] = [];
  if (half) lines.push("enable f16;");
  lines.push(
    "struct Params { rows: u32, len: u32, chunks: u32, chunk_len: u32, off: u32, pad0: u32, pad1: u32, pad2: u32, dims: array<vec4<u32>, 8> }",
    `@group(0) @binding(0) var<storage, read> src: array<${storageType(s.inDtype)}>;`,
    `@group(0) @binding(1) var<storage, read_write> dst: array<${storageType(outStorage)}>;`,
    "@group(0) @binding(2) var<uniform> p: Params;",
  );
  const rowBase = s.mode === "contiguous"
    ? "let base = p.off + row * p.len;"
    : `${decompose("outer_off", "row", s.outerRank, 0, 2)}\n  let base = p.off + outer_off;`;
  const element = s.mode === "contiguous" ? "base + j" : "base + inner_off";
  const innerOff = s.mode === "contiguous" ? "" : decompose("inner_off", "j", s.innerRank, 4, 6);
  const load = (i: string) => loadAs(s.inDtype, `src[${i}]`);
  if (s.variant === "thread") {
    lines.push(
      `@compute @workgroup_size(${wg})`,
      "fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {",
      `  let row = gid.x + gid.y * nwg.x * ${wg}u;`,
      "  if (row >= p.rows) { return; }",
      `  ${rowBase}`,
      `  var acc: ${acc} = ${id};`,
      "  for (var j = 0u; j < p.len; j++) {",
      `  ${innerOff}`,
      `    acc = ${c("acc", load(element))};`,
      "  }",
      `  dst[row] = ${storeAs(outStorage, "acc")};`,
      "}",
    );
  } else {
    lines.push(`var<workgroup> shared_acc: array<${acc}, ${wg}>;`);
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
      `  var acc: ${acc} = ${id};`,
      `  for (var j = start + lid; j < stop; j += ${wg}u) {`,
      `  ${innerOff}`,
      `    acc = ${c("acc", load(element))};`,
      "  }",
    );
    if (s.subgroups) {
      if (s.op === "sum") lines.push("  acc = subgroupAdd(acc);");
      else {
        // A butterfly with the op's own combine keeps NaN propagation exact.
        lines.push(
          "  for (var mask = sg_size >> 1u; mask > 0u; mask = mask >> 1u) {",
          `    acc = ${c("acc", "subgroupShuffleXor(acc, mask)")};`,
          "  }",
        );
      }
      lines.push(
        "  if (sg_lane == 0u) { shared_acc[lid / sg_size] = acc; }",
        "  workgroupBarrier();",
        "  if (lid == 0u) {",
        "    var total = shared_acc[0];",
        `    for (var k = 1u; k < ${wg}u / sg_size; k++) { total = ${
          c("total", "shared_acc[k]")
        }; }`,
        `    dst[g] = ${storeAs(outStorage, "total")};`,
        "  }",
      );
    } else {
      lines.push("  shared_acc[lid] = acc;", "  workgroupBarrier();");
      lines.push(
        `  for (var width = ${wg >> 1}u; width > 0u; width = width >> 1u) {`,
        `    if (lid < width) { shared_acc[lid] = ${
          c("shared_acc[lid]", "shared_acc[lid + width]")
        }; }`,
        "    workgroupBarrier();",
        "  }",
        `  if (lid == 0u) { dst[g] = ${storeAs(outStorage, "shared_acc[0]")}; }`,
      );
    }
    lines.push("}");
  }
  const main = lines.join("\n");
  return `${main}\n${preludeFor(main)}\n`;
}
