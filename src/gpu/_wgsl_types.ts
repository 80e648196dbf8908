/**
 * How each dtype is stored in WGSL buffers and computed in WGSL registers, and exact literals.
 * Shared by the elementwise and reduction code generators.
 * @module
 */
import type { DType } from "../core/dtype.ts";
import type { ComputeType } from "../ir/elementwise_table.ts";
import { WGSL } from "./_wgsl_bundle.ts";

/** Register type an element is computed in. */
export function computeType(dtype: DType): ComputeType {
  switch (dtype) {
    case "float32":
    case "float16":
      return "f32";
    case "int32":
      return "i32";
    case "uint32":
      return "u32";
    case "bool":
      return "bool";
  }
}

/** WGSL element type of a storage buffer holding `dtype`. */
export function storageType(dtype: DType): string {
  return dtype === "float16" ? "f16" : dtype === "bool" ? "u32" : computeType(dtype);
}

/** Converts a loaded storage value to its compute type. */
export function loadAs(dtype: DType, v: string): string {
  if (dtype === "float16") return `f32(${v})`;
  if (dtype === "bool") return `(${v} != 0u)`;
  return v;
}

/** Converts a compute value to its storage type. */
export function storeAs(dtype: DType, v: string): string {
  if (dtype === "float16") return `f16(${v})`;
  if (dtype === "bool") return `select(0u, 1u, ${v})`;
  return v;
}

/** Converts a compute value between dtypes' compute types (NumPy cast semantics, saturating). */
export function convert(from: DType, to: DType, v: string): string {
  const f = computeType(from), t = computeType(to);
  let out = v;
  if (f !== t) {
    if (t === "bool") {
      out = f === "f32" ? `g_f32_to_bool(${v})` : f === "i32" ? `(${v} != 0)` : `(${v} != 0u)`;
    } else if (f === "bool") out = `select(${zero(t)}, ${one(t)}, ${v})`;
    else if (f === "f32" && t !== "f32") out = `g_f32_to_${t}(${v})`; // saturating, as WASM
    else out = `${t}(${v})`;
  }
  // A cast to float16 rounds to half precision, though arithmetic stays in f32.
  if (to === "float16" && from !== "float16") out = `g_round_f16(${out})`;
  return out;
}

function zero(t: ComputeType): string {
  return t === "f32" ? "0.0" : t === "i32" ? "0" : "0u";
}
function one(t: ComputeType): string {
  return t === "f32" ? "1.0" : t === "i32" ? "1" : "1u";
}

const f32View = new Float32Array(1);
const u32View = new Uint32Array(f32View.buffer);

/** An exact WGSL literal of a value in a dtype's compute type (NaN, infinities and -0 included). */
export function literal(value: number, dtype: DType): string {
  switch (computeType(dtype)) {
    case "f32":
      f32View[0] = value;
      return `bitcast<f32>(${u32View[0]}u)`;
    case "i32":
      return `bitcast<i32>(${(value | 0) >>> 0}u)`;
    case "u32":
      return `${value >>> 0}u`;
    case "bool":
      // Non-zero is true, NaN included (NaN is falsy in JS).
      return value !== 0 ? "true" : "false";
  }
}

/** The prelude functions (wgsl/prelude.wgsl) that `code` calls, with their own dependencies. */
export function preludeFor(code: string): string {
  const functions = WGSL.prelude.split(/\n(?=fn )/).slice(1);
  const needed = new Set<string>();
  const scan = (text: string) => {
    for (const m of text.matchAll(/\b(g_\w+)\(/g)) {
      if (needed.has(m[1])) continue;
      needed.add(m[1]);
      const f = functions.find((fn) => fn.startsWith(`fn ${m[1]}(`));
      if (f) scan(f.slice(f.indexOf("{")));
    }
  };
  scan(code);
  return functions.filter((f) => needed.has(f.slice(3, f.indexOf("(")))).join("\n");
}

/** Entry-point parameters of a workgroup kernel: ids, and the subgroup size and lane if used. */
export function workgroupBuiltins(subgroups: boolean): string[] {
  const builtins = [
    "@builtin(workgroup_id) wid: vec3<u32>",
    "@builtin(num_workgroups) nwg: vec3<u32>",
    "@builtin(local_invocation_index) lid: u32",
  ];
  if (subgroups) {
    builtins.push(
      "@builtin(subgroup_size) sg_size: u32",
      "@builtin(subgroup_invocation_id) sg_lane: u32",
    );
  }
  return builtins;
}
