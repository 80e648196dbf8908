/**
 * Generates the one-pass backward kernels of the row ops (see `RowsBackwardJob`): one workgroup
 * of 256 invocations per row; each invocation keeps `registers` units of the row (vec4 where the
 * layout allows) of both inputs in named registers, so the row is read once and written once
 * (the bytes a backward must move: two rows in, one out). The row's sums are combined by
 * `subgroupAdd` and one shared slot per subgroup, or by a shared-memory tree without subgroups;
 * each sum's order is fixed, so results repeat exactly.
 * @module
 */
import type { RowKind } from "../contract/rows.ts";
import { ROWS_BACKWARD_WORKGROUP } from "../plans/rows.ts";

/** What a generated kernel depends on. */
export interface RowsBackwardSpec {
  kind: RowKind;
  dtype: "float32" | "float16";
  vec4: boolean;
  /** Units of the row each invocation holds (unrolled). */
  registers: number;
  weight: boolean;
  subgroups: boolean;
}

/**
 * The pipeline key of a spec.
 *
 * @example
 * ```ts
 * import { rowsBackwardKey } from "./_codegen_rows_backward.ts";
 * rowsBackwardKey({ kind: "softmax", dtype: "float32", vec4: true, registers: 4, weight: false, subgroups: true });
 * // "rowsBackward|softmax|float32|v4|k4||sg"
 * ```
 */
export function rowsBackwardKey(s: RowsBackwardSpec): string {
  return [
    "rowsBackward",
    s.kind,
    s.dtype,
    s.vec4 ? "v4" : "s",
    `k${s.registers}`,
    s.weight ? "w" : "",
    s.subgroups ? "sg" : "tree",
  ].join("|");
}

/**
 * The uniform words: rows, units a row, the offsets (in units) of a, g and weight, and eps.
 *
 * @example
 * ```ts
 * import { rowsBackwardUniforms } from "./_codegen_rows_backward.ts";
 * const u = rowsBackwardUniforms(4096, 1024, [0, 0, 0], 1e-5);
 * ```
 */
export function rowsBackwardUniforms(
  rows: number,
  units: number,
  offsets: readonly [number, number, number],
  eps: number,
): Uint32Array {
  const words = new Uint32Array(8);
  words.set([rows, units, ...offsets]);
  new Float32Array(words.buffer, 5 * 4, 1)[0] = eps;
  return words;
}

/**
 * The WGSL of a spec.
 *
 * @example
 * ```ts
 * import { generateRowsBackward } from "./_codegen_rows_backward.ts";
 * const wgsl = generateRowsBackward({
 *   kind: "layerNorm", dtype: "float32", vec4: true, registers: 4, weight: true, subgroups: false,
 * });
 * ```
 */
export function generateRowsBackward(s: RowsBackwardSpec): string {
  const W = ROWS_BACKWARD_WORKGROUP;
  const K = s.registers;
  const vt = s.vec4 ? "vec4<f32>" : "f32";
  const st = s.dtype === "float16" ? "f16" : "f32";
  const xt = s.vec4 ? `vec4<${st}>` : st;
  const zero = `${vt}(0.0)`;
  const total = (v: string) => (s.vec4 && v !== "0.0" ? `dot(${v}, vec4<f32>(1.0))` : v);
  const lines: string[] = [];
  if (s.dtype === "float16") lines.push("enable f16;");
  lines.push(
    "struct Params { rows: u32, units: u32, a_off: u32, g_off: u32, w_off: u32, eps: f32, pad0: u32, pad1: u32 }",
  );
  let binding = 0;
  const bind = (access: string, name: string, type: string) =>
    lines.push(`@group(0) @binding(${binding++}) var<storage, ${access}> ${name}: array<${type}>;`);
  bind("read", "a", xt);
  bind("read", "g", xt);
  if (s.weight) bind("read", "weight", xt);
  bind("read_write", "dst", xt);
  lines.push(`@group(0) @binding(${binding}) var<uniform> p: Params;`);
  const slots = s.subgroups ? W / 4 : W;
  lines.push(`var<workgroup> red: array<vec2<f32>, ${slots}>;`);
  // Sums of a vec2 over the workgroup; every invocation gets the total. Called in uniform flow.
  if (s.subgroups) {
    lines.push(
      "fn row_sum(v: vec2<f32>, lid: u32, sg_size: u32, sg_lane: u32) -> vec2<f32> {",
      "  let s = subgroupAdd(v);",
      "  if (sg_lane == 0u) { red[lid / sg_size] = s; }",
      "  workgroupBarrier();",
      "  var t = vec2<f32>(0.0);",
      `  for (var i = 0u; i < ${W}u / sg_size; i++) { t += red[i]; }`,
      "  workgroupBarrier();",
      "  return t;",
      "}",
    );
  } else {
    lines.push(
      "fn row_sum(v: vec2<f32>, lid: u32, sg_size: u32, sg_lane: u32) -> vec2<f32> {",
      "  red[lid] = v;",
      "  workgroupBarrier();",
      `  for (var step = ${W / 2}u; step > 0u; step >>= 1u) {`,
      "    if (lid < step) { red[lid] += red[lid + step]; }",
      "    workgroupBarrier();",
      "  }",
      "  let t = red[0];",
      "  workgroupBarrier();",
      "  return t;",
      "}",
    );
  }
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
  lines.push(`@compute @workgroup_size(${W})`, `fn main(${builtins.join(", ")}) {`);
  const body = (l: string) => lines.push(`  ${l}`);
  if (!s.subgroups) body("let sg_size = 0u; let sg_lane = 0u;");
  body("let row = wid.x + wid.y * nwg.x;");
  // Uniform across the workgroup: the whole group leaves together, before any barrier.
  body("if (row >= p.rows) { return; }");
  body("let base = row * p.units;");
  body(`let n = f32(p.units * ${s.vec4 ? 4 : 1}u);`);
  const ks = Array.from({ length: K }, (_, k) => k);
  for (const k of ks) {
    body(`let u${k} = lid + ${k * W}u;`);
    body(`let ok${k} = u${k} < p.units;`);
    body(`var a${k} = ${zero}; var g${k} = ${zero};`);
    body(
      `if (ok${k}) { a${k} = ${vt}(a[p.a_off + base + u${k}]); g${k} = ${vt}(g[p.g_off + base + u${k}]); }`,
    );
  }
  const sum = (name: string, terms: (k: number) => [string, string]) => {
    const parts = ks.map((k) => terms(k));
    body(
      `let ${name} = row_sum(vec2<f32>(${parts.map((t) => total(t[0])).join(" + ")}, ${
        parts.map((t) => total(t[1])).join(" + ")
      }), lid, sg_size, sg_lane);`,
    );
  };
  const store = (k: number, value: string) =>
    body(`if (ok${k}) { dst[base + u${k}] = ${xt}(${value}); }`);
  switch (s.kind) {
    case "softmax":
      sum("s", (k) => [`g${k} * a${k}`, "0.0"]);
      for (const k of ks) store(k, `a${k} * (g${k} - s.x)`);
      break;
    case "logSoftmax":
      sum("s", (k) => [`g${k}`, "0.0"]);
      for (const k of ks) store(k, `g${k} - exp(a${k}) * s.x`);
      break;
    case "layerNorm":
    case "rmsNorm": {
      const layer = s.kind === "layerNorm";
      if (layer) {
        sum("m", (k) => [`a${k}`, "0.0"]);
        body("let mean = m.x / n;");
        // Two-pass variance from the registers; padding lanes contribute nothing.
        for (const k of ks) body(`let d${k} = select(${zero}, a${k} - mean, ok${k});`);
        sum("q", (k) => [`d${k} * d${k}`, "0.0"]);
        body("let rstd = 1.0 / sqrt(q.x / n + p.eps);");
      } else {
        for (const k of ks) body(`let d${k} = a${k};`);
        sum("q", (k) => [`a${k} * a${k}`, "0.0"]);
        body("let rstd = 1.0 / sqrt(q.x / n + p.eps);");
      }
      for (const k of ks) {
        body(`let h${k} = d${k} * rstd;`);
        body(
          s.weight
            ? `var w${k} = ${zero}; if (ok${k}) { w${k} = ${vt}(weight[p.w_off + u${k}]); }`
            : `let w${k} = ${vt}(1.0);`,
        );
        body(`let gw${k} = g${k} * w${k};`);
      }
      sum("t", (k) => [layer ? `gw${k}` : "0.0", `gw${k} * h${k}`]);
      for (const k of ks) {
        store(
          k,
          layer
            ? `rstd * (gw${k} - t.x / n - h${k} * (t.y / n))`
            : `rstd * (gw${k} - h${k} * (t.y / n))`,
        );
      }
      break;
    }
  }
  lines.push("}", "");
  return lines.join("\n");
}
