/**
 * Generates `asm/_generated.ts`, the WASM reference kernels, from the elementwise op table in
 * `src/ir/elementwise_table.ts`. One loop template, parameterised by op and compute type,
 * instead of hand-written near-copies.
 *
 * Kernel ABI (all pointers are byte offsets into the imported memory):
 * - `unary_OP_CT(out, x, desc, contiguous)`, `binary_OP_CT(out, a, b, desc, contiguous)`,
 *   `where_CT(out, cond, a, b, desc, contiguous)`, `cast_FROM_TO(out, x, desc, contiguous)`:
 *   `desc` points at i32 words `[rank, shape[rank], strides of input 0[rank], ...]`, strides in
 *   elements; the output is contiguous. `contiguous` = 1 when every input is contiguous with the
 *   output's shape, which takes a flat loop.
 * - `reduce_OP_CT(out, x, outer, inner)`: reduces each of `outer` contiguous rows of `inner`.
 * @module
 */
import { BINARY, type ComputeType, UNARY } from "../src/ir/elementwise_table.ts";

/** Storage types on the WASM device: bool is a u32 word, float16 a u16 of half bits. */
type Storage = "f32" | "i32" | "u32" | "bool" | "f16";

const LOAD: Record<Storage, (p: string) => string> = {
  f32: (p) => `load<f32>(${p})`,
  i32: (p) => `load<i32>(${p})`,
  u32: (p) => `load<u32>(${p})`,
  bool: (p) => `(load<u32>(${p}) != 0)`,
  f16: (p) => `f16_to_f32(load<u16>(${p}))`,
};
const SIZE: Record<Storage, number> = { f32: 4, i32: 4, u32: 4, bool: 4, f16: 2 };
/** Value type in AS for each storage type's loaded value. */
const VALUE: Record<Storage, string> = {
  f32: "f32",
  i32: "i32",
  u32: "u32",
  bool: "bool",
  f16: "f32",
};

function store(storage: Storage, ptr: string, value: string): string {
  switch (storage) {
    case "bool":
      return `store<u32>(${ptr}, <u32>(${value}))`;
    case "f16":
      return `store<u16>(${ptr}, f32_to_f16(${value}))`;
    default:
      return `store<${storage}>(${ptr}, ${value})`;
  }
}

/** Converts a loaded value of storage type `from` to the value type of `to`. */
function convert(from: Storage, to: Storage, v: string): string {
  const f = VALUE[from], t = VALUE[to];
  if (f === t) return v;
  if (t === "bool") return f === "f32" ? `(${v} != <f32>0)` : `(${v} != 0)`;
  if (f === "bool") return `<${t}>(${v} ? 1 : 0)`;
  if (f === "f32" && t === "i32") return `<i32>(${v})`;
  if (f === "f32" && t === "u32") return `<u32>(${v})`;
  return `<${t}>(${v})`;
}

/**
 * The strided loop: the output is written in order; each input's element offset is rebuilt once
 * per innermost row from the row number, then advanced by that input's last-axis stride.
 */
function kernel(
  name: string,
  inputs: Storage[],
  out: Storage,
  body: (values: string[]) => string,
  simd?: { load: string; op: (v: string[]) => string },
  stridedOut = false,
): string {
  const args = inputs.map((_, k) => `in${k}: usize`).join(", ");
  const sizes = inputs.map((s) => SIZE[s]);
  // A strided output reads its strides after the inputs' and is addressed like one more input.
  const slots = inputs.length + (stridedOut ? 1 : 0);
  const lines: string[] = [];
  lines.push(`export function ${name}(out: usize, ${args}, desc: usize, contiguous: i32): void {`);
  lines.push(`  const rank = load<i32>(desc);`);
  lines.push(`  let n: i32 = 1;`);
  lines.push(`  for (let d = 0; d < rank; d++) n *= load<i32>(desc + 4 + (<usize>d << 2));`);
  lines.push(`  if (contiguous) {`);
  let start = "0";
  if (simd) {
    lines.push(`    const n4 = n & ~3;`);
    lines.push(`    for (let i = 0; i < n4; i += 4) {`);
    const vs = inputs.map((_, k) => `v128.load(in${k} + (<usize>i << 2))`);
    lines.push(`      v128.store(out + (<usize>i << 2), ${simd.op(vs)});`);
    lines.push(`    }`);
    start = "n4";
  }
  lines.push(`    for (let i = ${start}; i < n; i++) {`);
  const vals = inputs.map((s, k) => LOAD[s](`in${k} + (<usize>i << ${Math.log2(sizes[k])})`));
  lines.push(`      ${store(out, `out + (<usize>i << ${Math.log2(SIZE[out])})`, body(vals))};`);
  lines.push(`    }`);
  lines.push(`    return;`);
  lines.push(`  }`);
  lines.push(`  if (n == 0) return;`);
  lines.push(`  const shape = desc + 4;`);
  lines.push(`  const inner = load<i32>(shape + (<usize>(rank - 1) << 2));`);
  for (let k = 0; k < slots; k++) {
    lines.push(`  const strides${k} = shape + (<usize>(rank * ${k + 1}) << 2);`);
    lines.push(`  const step${k} = load<i32>(strides${k} + (<usize>(rank - 1) << 2));`);
  }
  lines.push(`  const rows = n / inner;`);
  lines.push(`  let o: usize = out;`);
  lines.push(`  for (let row = 0; row < rows; row++) {`);
  for (let k = 0; k < slots; k++) lines.push(`    let off${k}: i32 = 0;`);
  lines.push(`    let rest = row;`);
  lines.push(`    for (let d = rank - 2; d >= 0; d--) {`);
  lines.push(`      const dim = load<i32>(shape + (<usize>d << 2));`);
  lines.push(`      const c = rest % dim;`);
  lines.push(`      rest /= dim;`);
  for (let k = 0; k < slots; k++) {
    lines.push(`      off${k} += c * load<i32>(strides${k} + (<usize>d << 2));`);
  }
  lines.push(`    }`);
  lines.push(`    for (let j = 0; j < inner; j++) {`);
  const svals = inputs.map((s, k) =>
    LOAD[s](`in${k} + (<usize>(off${k} + j * step${k}) << ${Math.log2(sizes[k])})`)
  );
  if (stridedOut) {
    const k = inputs.length;
    lines.push(
      `      ${
        store(
          out,
          `out + (<usize>(off${k} + j * step${k}) << ${Math.log2(SIZE[out])})`,
          body(svals),
        )
      };`,
    );
  } else {
    lines.push(`      ${store(out, "o", body(svals))};`);
    lines.push(`      o += ${SIZE[out]};`);
  }
  lines.push(`    }`);
  lines.push(`  }`);
  lines.push(`}`);
  return lines.join("\n");
}

const SIMD_F32: Record<string, string> = {
  add: "f32x4.add",
  sub: "f32x4.sub",
  mul: "f32x4.mul",
  div: "f32x4.div",
  maximum: "f32x4.max",
  minimum: "f32x4.min",
  neg: "f32x4.neg",
  abs: "f32x4.abs",
  sqrt: "f32x4.sqrt",
  floor: "f32x4.floor",
  ceil: "f32x4.ceil",
  round: "f32x4.nearest",
};
const SIMD_I32: Record<string, string> = { add: "i32x4.add", sub: "i32x4.sub", mul: "i32x4.mul" };

function storageOf(ct: ComputeType): Storage {
  return ct;
}

/** Generates the whole module text. */
export function generateAsm(): string {
  const parts: string[] = [
    "// GENERATED by scripts/gen_asm.ts from src/ir/elementwise_table.ts. Do not edit.",
    "// @ts-nocheck: AssemblyScript, compiled by asc, not by Deno.",
    'import { f16_to_f32, f32_to_f16, g_elu64, g_erf64, g_floordiv_f32, g_floordiv_i32, g_floordiv_u32, g_gelu64, g_gelu_tanh64, g_hardsigmoid64, g_hardswish64, g_leaky_relu64, g_mish64, g_mod_f32, g_mod_i32, g_mod_u32, g_pcg, g_pow_f32, g_pow_i32, g_pow_u32, g_relu64, g_rsqrt64, g_selu64, g_sigmoid64, g_sign_f32, g_sign_i32, g_silu64, g_softplus64, g_softsign64 } from "./math";',
    "",
  ];
  for (const [op, def] of Object.entries(UNARY)) {
    for (
      const [ct, template] of Object.entries(def.asm) as [
        ComputeType,
        (a: string, b: string) => string,
      ][]
    ) {
      const s = storageOf(ct);
      const out: Storage = def.result === "bool" ? "bool" : s;
      const simdOp = ct === "f32"
        ? SIMD_F32[op]
        : ct === "i32" && op === "neg"
        ? "i32x4.neg"
        : undefined;
      parts.push(kernel(
        `unary_${op}_${ct}`,
        [s],
        out,
        ([a]) => template(a, ""),
        simdOp ? { load: "v128", op: (v) => `${simdOp}(${v[0]})` } : undefined,
      ));
    }
  }
  for (const [op, def] of Object.entries(BINARY)) {
    for (
      const [ct, template] of Object.entries(def.asm) as [
        ComputeType,
        (a: string, b: string) => string,
      ][]
    ) {
      const s = storageOf(ct);
      const out: Storage = def.result === "bool" ? "bool" : s;
      const simdOp = ct === "f32"
        ? SIMD_F32[op]
        : ct === "i32" || ct === "u32"
        ? SIMD_I32[op]
        : undefined;
      parts.push(kernel(
        `binary_${op}_${ct}`,
        [s, s],
        out,
        ([a, b]) => template(a, b),
        simdOp ? { load: "v128", op: (v) => `${simdOp}(${v[0]}, ${v[1]})` } : undefined,
      ));
    }
  }
  for (const ct of ["f32", "i32", "u32", "bool"] as const) {
    const s = storageOf(ct);
    parts.push(kernel(`where_${ct}`, ["bool", s, s], s, ([c, a, b]) => `(${c} ? ${a} : ${b})`));
  }
  const storages: Storage[] = ["f32", "i32", "u32", "bool", "f16"];
  for (const from of storages) {
    for (const to of storages) {
      parts.push(kernel(`cast_${from}_${to}`, [from], to, ([x]) => convert(from, to, x)));
    }
  }
  // Copies through a strided output (concat and stack write into slices of their result).
  for (const st of storages) {
    parts.push(kernel(`scatter_${st}`, [st], st, ([x]) => convert(st, st, x), undefined, true));
  }
  parts.push(reductions());
  return parts.join("\n\n") + "\n";
}

/** Row reductions over contiguous [outer, inner] data. Float sums accumulate in f64. */
function reductions(): string {
  const out: string[] = [];
  const defs: {
    op: string;
    ct: "f32" | "i32" | "u32";
    acc: string;
    init: string;
    step: string;
    fin: string;
  }[] = [];
  for (const ct of ["f32", "i32", "u32"] as const) {
    const acc = ct === "f32" ? "f64" : ct;
    defs.push({
      op: "sum",
      ct,
      acc,
      init: "0",
      step: ct === "f32" ? "acc += <f64>v" : "acc += v",
      fin: `<${ct}>acc`,
    });
    defs.push({
      op: "prod",
      ct,
      acc,
      init: "1",
      step: ct === "f32" ? "acc *= <f64>v" : "acc *= v",
      fin: `<${ct}>acc`,
    });
    const isF = ct === "f32";
    // f32.max/min propagate NaN, as NumPy's max does.
    defs.push({
      op: "max",
      ct,
      acc: ct,
      init: isF ? "-Infinity" : ct === "i32" ? "i32.MIN_VALUE" : "0",
      step: `acc = max<${ct}>(acc, v)`,
      fin: "acc",
    });
    defs.push({
      op: "min",
      ct,
      acc: ct,
      init: isF ? "Infinity" : ct === "i32" ? "i32.MAX_VALUE" : "u32.MAX_VALUE",
      step: `acc = min<${ct}>(acc, v)`,
      fin: "acc",
    });
  }
  for (const d of defs) {
    out.push(
      [
        `export function reduce_${d.op}_${d.ct}(out: usize, x: usize, outer: i32, inner: i32): void {`,
        `  for (let r = 0; r < outer; r++) {`,
        `    let acc: ${d.acc} = ${d.init};`,
        `    const base = x + (<usize>r * <usize>inner << 2);`,
        `    for (let j = 0; j < inner; j++) {`,
        `      const v = load<${d.ct}>(base + (<usize>j << 2));`,
        `      ${d.step};`,
        `    }`,
        `    store<${d.ct}>(out + (<usize>r << 2), ${d.fin});`,
        `  }`,
        `}`,
      ].join("\n"),
    );
  }
  // logsumexp and moments (M2, the sum of squared deviations), in f64 with two passes each.
  out.push(
    [
      "export function reduce_logsumexp_f32(out: usize, x: usize, outer: i32, inner: i32): void {",
      "  for (let r = 0; r < outer; r++) {",
      "    const base = x + (<usize>r * <usize>inner << 2);",
      "    let m: f64 = -Infinity;",
      "    for (let j = 0; j < inner; j++) {",
      "      const v = <f64>load<f32>(base + (<usize>j << 2));",
      "      if (v != v) { m = v; break; }",
      "      if (v > m) m = v;",
      "    }",
      "    let result = m;",
      "    if (m == m && m != Infinity && m != -Infinity) {",
      "      let s: f64 = 0;",
      "      for (let j = 0; j < inner; j++) s += Math.exp(<f64>load<f32>(base + (<usize>j << 2)) - m);",
      "      result = m + Math.log(s);",
      "    }",
      "    store<f32>(out + (<usize>r << 2), <f32>result);",
      "  }",
      "}",
      "",
      "export function reduce_moments_f32(out: usize, x: usize, outer: i32, inner: i32): void {",
      "  for (let r = 0; r < outer; r++) {",
      "    const base = x + (<usize>r * <usize>inner << 2);",
      "    let s: f64 = 0;",
      "    for (let j = 0; j < inner; j++) s += <f64>load<f32>(base + (<usize>j << 2));",
      "    const mean = inner > 0 ? s / <f64>inner : 0;",
      "    let m2: f64 = 0;",
      "    for (let j = 0; j < inner; j++) {",
      "      const d = <f64>load<f32>(base + (<usize>j << 2)) - mean;",
      "      m2 += d * d;",
      "    }",
      "    store<f32>(out + (<usize>r << 2), <f32>m2);",
      "  }",
      "}",
    ].join("\n"),
  );
  // argmax/argmin: the first index of the extreme value; the first NaN wins (NumPy).
  for (const [op, cmp] of [["argmax", ">"], ["argmin", "<"]] as const) {
    for (const ct of ["f32", "i32", "u32"] as const) {
      const nan = ct === "f32" ? "      if (v != v) { best = j; break; }\n" : "";
      out.push(
        [
          `export function reduce_${op}_${ct}(out: usize, x: usize, outer: i32, inner: i32): void {`,
          `  for (let r = 0; r < outer; r++) {`,
          `    const base = x + (<usize>r * <usize>inner << 2);`,
          `    let best: i32 = 0;`,
          `    let value = load<${ct}>(base);`,
          `    for (let j = 0; j < inner; j++) {`,
          `      const v = load<${ct}>(base + (<usize>j << 2));`,
          nan + `      if (v ${cmp} value) { value = v; best = j; }`,
          `    }`,
          `    store<i32>(out + (<usize>r << 2), best);`,
          `  }`,
          `}`,
        ].join("\n"),
      );
    }
  }
  out.push(
    [
      "/** Writes 0, 1, 2, ... n-1 (the `index` leaf of an expression). */",
      "export function iota_u32(out: usize, n: i32): void {",
      "  for (let i = 0; i < n; i++) store<u32>(out + (<usize>i << 2), <u32>i);",
      "}",
    ].join("\n"),
  );
  return out.join("\n\n");
}

if (import.meta.main) {
  await Deno.writeTextFile(new URL("../asm/_generated.ts", import.meta.url), generateAsm());
}
