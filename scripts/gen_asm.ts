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
import { TILE_OPS, TILE_STORAGES, TILE_TYPES } from "../src/wasm/tile_ops.ts";

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

/** An op table code template (operands already in the compute type). */
type Template = (a: string, b: string) => string;

function storageOf(ct: ComputeType): Storage {
  return ct;
}

/** Generates the whole module text. */
export function generateAsm(): string {
  const parts: string[] = [
    "// GENERATED by scripts/gen_asm.ts from src/ir/elementwise_table.ts. Do not edit.",
    "// @ts-nocheck: AssemblyScript, compiled by asc, not by Deno.",
    'import { f16_to_f32, f32_to_f16, g_elu64, g_erf64, g_floordiv_f32, g_floordiv_i32, g_floordiv_u32, g_gelu64, g_gelu_tanh64, g_hardsigmoid64, g_hardswish64, g_leaky_relu64, g_mish64, g_mod_f32, g_mod_i32, g_mod_u32, g_pcg, g_pow_f32, g_pow_i32, g_pow_u32, g_relu64, g_rsqrt64, g_selu64, g_sigmoid64, g_sign_f32, g_sign_i32, g_silu64, g_softplus64, g_softsign64 } from "./math";',
    'import { exp_f32, exp_f32x4, sigmoid_f32, sigmoid_f32x4, tanh_f32, tanh_f32x4 } from "./vector_math";',
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
  parts.push(tiles());
  return parts.join("\n\n") + "\n";
}

/** Reductions with SIMD forms (the others keep the scalar loop of `reductions`). */
const SIMD_REDUCTIONS = new Set([
  "sum_f32",
  "sum_i32",
  "sum_u32",
  "max_f32",
  "max_i32",
  "max_u32",
  "min_f32",
  "min_i32",
  "min_u32",
]);

/**
 * SIMD row reductions: four independent vector accumulators (so that each add or max waits on
 * its own chain, not the last one), 16 elements per step. float32 sums accumulate in f64 lanes
 * (each f32 exact in f64; only the order differs from a sequential f64 sum). Integer sums wrap
 * and maxima and minima (WASM's f32x4.max is f32.max lane by lane: NaN wins, +0 above -0) give
 * the same result in any order. `*_partial_*` entries reduce a range of one row into an f64 (sum)
 * or a word of the row's type, for rows shared among threads.
 */
function simdReductions(): string {
  const lines: string[] = [
    "function sum_row_f32(p: usize, n: i32): f64 {",
    "  let a0 = f64x2.splat(0);",
    "  let a1 = f64x2.splat(0);",
    "  let a2 = f64x2.splat(0);",
    "  let a3 = f64x2.splat(0);",
    "  let j = 0;",
    "  for (; j + 8 <= n; j += 8) {",
    "    const v = v128.load(p + (<usize>j << 2));",
    "    const w = v128.load(p + (<usize>j << 2), 16);",
    "    a0 = f64x2.add(a0, f64x2.promote_low_f32x4(v));",
    "    a1 = f64x2.add(a1, f64x2.promote_low_f32x4(i64x2.shuffle(v, v, 1, 0)));",
    "    a2 = f64x2.add(a2, f64x2.promote_low_f32x4(w));",
    "    a3 = f64x2.add(a3, f64x2.promote_low_f32x4(i64x2.shuffle(w, w, 1, 0)));",
    "  }",
    "  const a = f64x2.add(f64x2.add(a0, a1), f64x2.add(a2, a3));",
    "  let total = f64x2.extract_lane(a, 0) + f64x2.extract_lane(a, 1);",
    "  for (; j < n; j++) total += <f64>load<f32>(p + (<usize>j << 2));",
    "  return total;",
    "}",
    "",
    "export function reduce_sum_f32(out: usize, x: usize, outer: i32, inner: i32): void {",
    "  for (let r = 0; r < outer; r++) {",
    "    store<f32>(out + (<usize>r << 2), <f32>sum_row_f32(x + (<usize>r * <usize>inner << 2), inner));",
    "  }",
    "}",
    "",
    "export function reduce_sum_partial_f32(out: usize, x: usize, n: i32): void {",
    "  store<f64>(out, sum_row_f32(x, n));",
    "}",
  ];
  const kinds = [
    { op: "sum", ct: "i32", v: "i32x4.add", s: (a: string, b: string) => `${a} + ${b}`, init: "0" },
    { op: "sum", ct: "u32", v: "i32x4.add", s: (a: string, b: string) => `${a} + ${b}`, init: "0" },
    {
      op: "max",
      ct: "f32",
      v: "f32x4.max",
      s: (a: string, b: string) => `max<f32>(${a}, ${b})`,
      init: "-Infinity",
    },
    {
      op: "max",
      ct: "i32",
      v: "i32x4.max_s",
      s: (a: string, b: string) => `max<i32>(${a}, ${b})`,
      init: "i32.MIN_VALUE",
    },
    {
      op: "max",
      ct: "u32",
      v: "i32x4.max_u",
      s: (a: string, b: string) => `max<u32>(${a}, ${b})`,
      init: "0",
    },
    {
      op: "min",
      ct: "f32",
      v: "f32x4.min",
      s: (a: string, b: string) => `min<f32>(${a}, ${b})`,
      init: "Infinity",
    },
    {
      op: "min",
      ct: "i32",
      v: "i32x4.min_s",
      s: (a: string, b: string) => `min<i32>(${a}, ${b})`,
      init: "i32.MAX_VALUE",
    },
    {
      op: "min",
      ct: "u32",
      v: "i32x4.min_u",
      s: (a: string, b: string) => `min<u32>(${a}, ${b})`,
      init: "u32.MAX_VALUE",
    },
  ];
  for (const k of kinds) {
    const lane = k.ct === "f32" ? "f32x4" : "i32x4";
    // f32x4.max costs several instructions on x86 (its NaN and zero rules); pmax is one (maxps).
    // NaN is tracked apart (a lane compares unequal to itself), so the result is f32.max's except
    // where zeros of both signs tie for the extreme: which one comes out is unspecified.
    const pseudo = k.ct === "f32";
    const step = (a: string, v: string) =>
      pseudo ? `${k.op === "max" ? "f32x4.pmax" : "f32x4.pmin"}(${a}, ${v})` : `${k.v}(${a}, ${v})`;
    const splat = `${lane}.splat(<${k.ct}>${k.init})`;
    lines.push(
      "",
      `function ${k.op}_row_${k.ct}(p: usize, n: i32): ${k.ct} {`,
      `  let a0 = ${splat};`,
      `  let a1 = ${splat};`,
      `  let a2 = ${splat};`,
      `  let a3 = ${splat};`,
      "  let j = 0;",
      "  let nan = v128.splat<i32>(0);",
      "  for (; j + 16 <= n; j += 16) {",
      "    const q = p + (<usize>j << 2);",
      "    const v0 = v128.load(q);",
      "    const v1 = v128.load(q, 16);",
      "    const v2 = v128.load(q, 32);",
      "    const v3 = v128.load(q, 48);",
      `    a0 = ${step("a0", "v0")};`,
      `    a1 = ${step("a1", "v1")};`,
      `    a2 = ${step("a2", "v2")};`,
      `    a3 = ${step("a3", "v3")};`,
      ...(pseudo
        ? [
          "    nan = v128.or(nan, v128.or(f32x4.ne(v0, v0), f32x4.ne(v1, v1)));",
          "    nan = v128.or(nan, v128.or(f32x4.ne(v2, v2), f32x4.ne(v3, v3)));",
        ]
        : []),
      "  }",
      ...(pseudo ? ["  if (v128.any_true(nan)) return NaN;"] : []),
      `  const a = ${k.v}(${k.v}(a0, a1), ${k.v}(a2, a3));`,
      `  let acc = ${k.s(`${lane}.extract_lane(a, 0)`, `${lane}.extract_lane(a, 1)`)};`,
      `  acc = ${k.s("acc", k.s(`${lane}.extract_lane(a, 2)`, `${lane}.extract_lane(a, 3)`))};`,
      `  for (; j < n; j++) acc = ${k.s("acc", `load<${k.ct}>(p + (<usize>j << 2))`)};`,
      `  return <${k.ct}>acc;`,
      "}",
      "",
      `export function reduce_${k.op}_${k.ct}(out: usize, x: usize, outer: i32, inner: i32): void {`,
      "  for (let r = 0; r < outer; r++) {",
      `    store<${k.ct}>(out + (<usize>r << 2), ${k.op}_row_${k.ct}(x + (<usize>r * <usize>inner << 2), inner));`,
      "  }",
      "}",
      "",
      `export function reduce_${k.op}_partial_${k.ct}(out: usize, x: usize, n: i32): void {`,
      `  store<${k.ct}>(out, ${k.op}_row_${k.ct}(x, n));`,
      "}",
    );
  }
  return lines.join("\n");
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
    if (SIMD_REDUCTIONS.has(`${d.op}_${d.ct}`)) continue;
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
  out.push(simdReductions());
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

/**
 * SIMD forms of tile kernels, each bit-identical to its scalar template (WASM's f32x4.min/max are
 * the scalar f32.min/max lane by lane; comparisons give 0/1 words as the scalar bools stored).
 */
function tileSimd(
  kind: string,
  op: string,
  ct: ComputeType,
): ((v: string[]) => string) | undefined {
  const one = "i32x4.splat(1)";
  if (kind === "unary") {
    if (ct === "f32" && SIMD_F32[op]) return (v) => `${SIMD_F32[op]}(${v[0]})`;
    // g_relu64 lane by lane: pmax(v, 0) is `v < 0 ? 0 : v` (one instruction; f32x4.max takes
    // V8 several), which keeps NaN and -0; adding +0 turns -0 into +0, as max(-0, 0) does.
    if (ct === "f32" && op === "relu") {
      return (v) => `f32x4.add(f32x4.pmax(${v[0]}, f32x4.splat(0)), f32x4.splat(0))`;
    }
    if (ct === "f32" && op === "exp") return (v) => `exp_f32x4(${v[0]})`;
    if (ct === "f32" && op === "sigmoid") return (v) => `sigmoid_f32x4(${v[0]})`;
    if (ct === "f32" && op === "tanh") return (v) => `tanh_f32x4(${v[0]})`;
    if (op === "square") {
      return (v) => `${ct === "f32" ? "f32x4" : "i32x4"}.mul(${v[0]}, ${v[0]})`;
    }
    if (ct === "i32" && op === "neg") return (v) => `i32x4.neg(${v[0]})`;
    if (ct === "bool" && op === "logicalNot") return (v) => `v128.xor(${v[0]}, ${one})`;
    return undefined;
  }
  if (ct === "f32" && SIMD_F32[op]) return (v) => `${SIMD_F32[op]}(${v[0]}, ${v[1]})`;
  if ((ct === "i32" || ct === "u32") && SIMD_I32[op]) {
    return (v) => `${SIMD_I32[op]}(${v[0]}, ${v[1]})`;
  }
  const lane = ct === "f32" ? "f32x4" : "i32x4";
  const signed = ct === "f32" ? "" : ct === "i32" ? "_s" : "_u";
  const compare: Record<string, string> = {
    equal: "eq",
    notEqual: "ne",
    less: `lt${signed}`,
    lessEqual: `le${signed}`,
    greater: `gt${signed}`,
    greaterEqual: `ge${signed}`,
  };
  if (compare[op] && ct !== "bool") {
    return (v) => `v128.and(${lane}.${compare[op]}(${v[0]}, ${v[1]}), ${one})`;
  }
  if (ct === "bool" && (op === "logicalAnd" || op === "equal")) {
    return op === "logicalAnd"
      ? (v) => `v128.and(${v[0]}, ${v[1]})`
      : (v) => `v128.and(i32x4.eq(${v[0]}, ${v[1]}), ${one})`;
  }
  if (ct === "bool" && op === "logicalOr") return (v) => `v128.or(${v[0]}, ${v[1]})`;
  return undefined;
}

/** A tile kernel: `n` contiguous 32-bit words per operand, SIMD over whole vectors when it has one. */
function tileKernel(
  name: string,
  inputs: Storage[],
  out: Storage,
  body: (values: string[]) => string,
  simd?: (v: string[]) => string,
  scalarLast = false,
): string {
  const args = inputs.map((_, k) => `a${k}: usize`).join(", ");
  const lines = [`function t_${name}(d: usize, ${args}, n: i32): void {`, `  let i = 0;`];
  // A constant last operand (every word equal) is read once, into a vector and a scalar.
  const last = inputs.length - 1;
  if (scalarLast) {
    lines.push(`  const s${last} = ${LOAD[inputs[last]](`a${last}`)};`);
    if (simd) lines.push(`  const v${last} = v128.load(a${last});`);
  }
  const vector = (k: number, at: string) =>
    scalarLast && k === last ? `v${last}` : `v128.load(a${k} + (<usize>i << 2)${at})`;
  if (simd) {
    // Four vectors per iteration: a quarter of the loop's counting and branching.
    lines.push(`  for (; i + 16 <= n; i += 16) {`);
    for (const at of [0, 16, 32, 48]) {
      const vs = inputs.map((_, k) => vector(k, `, ${at}`));
      lines.push(`    v128.store(d + (<usize>i << 2), ${simd(vs)}, ${at});`);
    }
    lines.push(`  }`);
    lines.push(`  for (; i + 4 <= n; i += 4) {`);
    const vs = inputs.map((_, k) => vector(k, ""));
    lines.push(`    v128.store(d + (<usize>i << 2), ${simd(vs)});`, `  }`);
  }
  const vals = inputs.map((s, k) =>
    scalarLast && k === last ? `s${last}` : LOAD[s](`a${k} + (<usize>i << 2)`)
  );
  lines.push(`  for (; i < n; i++) ${store(out, "d + (<usize>i << 2)", body(vals))};`, `}`);
  return lines.join("\n");
}

/** The word a storage type's element becomes in a tile. */
function tileWord(s: (typeof TILE_STORAGES)[number], p: string): string {
  switch (s) {
    case "bool":
      return `<u32>(load<u32>(${p}) != 0)`;
    case "f16":
      return `f16_to_f32(load<u16>(${p}))`;
    default:
      return `load<${s}>(${p})`;
  }
}

/**
 * The tile programs' kernels and their interpreter `ew_run` (see src/wasm/tile_ops.ts): each
 * instruction runs one contiguous kernel over a tile, so a fused expression reads its inputs
 * and writes its output once while its intermediates stay in the L1 cache.
 */
function tiles(): string {
  const parts: string[] = [];
  const compute: Record<ComputeType, Storage> = {
    f32: "f32",
    i32: "i32",
    u32: "u32",
    bool: "bool",
  };
  for (const [op, def] of Object.entries(UNARY)) {
    for (const [ct, template] of Object.entries(def.asm) as [ComputeType, Template][]) {
      const out: Storage = def.result === "bool" ? "bool" : compute[ct];
      parts.push(
        tileKernel(
          `unary_${op}_${ct}`,
          [compute[ct]],
          out,
          ([a]) => template(a, ""),
          tileSimd("unary", op, ct),
        ),
      );
    }
  }
  for (const [op, def] of Object.entries(BINARY)) {
    for (const [ct, template] of Object.entries(def.asm) as [ComputeType, Template][]) {
      const out: Storage = def.result === "bool" ? "bool" : compute[ct];
      for (const scalar of [false, true]) {
        parts.push(tileKernel(
          `binary_${op}_${ct}${scalar ? "_rs" : ""}`,
          [compute[ct], compute[ct]],
          out,
          ([a, b]) => template(a, b),
          tileSimd("binary", op, ct),
          scalar,
        ));
      }
    }
  }
  for (const ct of TILE_TYPES) {
    parts.push(tileKernel(
      `where_${ct}`,
      ["u32", compute[ct], compute[ct]],
      compute[ct],
      ([c, a, b]) => `(${c} != 0 ? ${a} : ${b})`,
      (v) => `v128.bitselect(${v[1]}, ${v[2]}, i32x4.ne(${v[0]}, i32x4.splat(0)))`,
    ));
  }
  for (const from of TILE_TYPES) {
    for (const to of TILE_TYPES) {
      parts.push(tileKernel(
        `cast_${from}_${to}`,
        [compute[from]],
        compute[to],
        ([x]) => convert(compute[from], compute[to], x),
        from === to ? (v) => v[0] : undefined,
      ));
    }
  }
  parts.push(tileKernel("round_f16", ["f32"], "f32", ([x]) => `f16_to_f32(f32_to_f16(${x}))`));
  for (const s of TILE_STORAGES) {
    const size = SIZE[s];
    const at = (offset: string) => `base + (<usize>(${offset}) << ${Math.log2(size)})`;
    const word = s === "f16" ? "f32" : s === "bool" ? "u32" : s;
    parts.push([
      `function t_gather_${s}(d: usize, base: usize, desc: usize, s: i32, n: i32): void {`,
      `  const rank = load<i32>(desc);`,
      `  if (rank == 0) {`,
      `    const v = ${tileWord(s, "base")};`,
      `    for (let i = 0; i < n; i++) store<${word}>(d + (<usize>i << 2), v);`,
      `    return;`,
      `  }`,
      `  const shape = desc + 4;`,
      `  const strides = shape + (<usize>rank << 2);`,
      `  const inner = load<i32>(shape + (<usize>(rank - 1) << 2));`,
      `  const step = load<i32>(strides + (<usize>(rank - 1) << 2));`,
      `  let flat = s;`,
      `  let i = 0;`,
      `  while (i < n) {`,
      `    let rest = flat / inner;`,
      `    const j = flat - rest * inner;`,
      `    let off = j * step;`,
      `    for (let k = rank - 2; k >= 0; k--) {`,
      `      const dim = load<i32>(shape + (<usize>k << 2));`,
      `      const c = rest % dim;`,
      `      rest /= dim;`,
      `      off += c * load<i32>(strides + (<usize>k << 2));`,
      `    }`,
      `    const run = min(inner - j, n - i);`,
      `    if (step == 0) {`,
      `      const v = ${tileWord(s, at("off"))};`,
      `      for (let k = 0; k < run; k++) store<${word}>(d + (<usize>(i + k) << 2), v);`,
      `    } else {`,
      `      for (let k = 0; k < run; k++) {`,
      `        store<${word}>(d + (<usize>(i + k) << 2), ${tileWord(s, at("off + k * step"))});`,
      `      }`,
      `    }`,
      `    i += run;`,
      `    flat += run;`,
      `  }`,
      `}`,
    ].join("\n"));
  }
  parts.push([
    "function t_store_f16(out: usize, a: usize, n: i32): void {",
    "  for (let i = 0; i < n; i++) store<u16>(out + (<usize>i << 1), f32_to_f16(load<f32>(a + (<usize>i << 2))));",
    "}",
    "",
    "function t_splat(d: usize, word: i32, n: i32): void {",
    "  const v = i32x4.splat(word);",
    "  let i = 0;",
    "  for (; i + 4 <= n; i += 4) v128.store(d + (<usize>i << 2), v);",
    "  for (; i < n; i++) store<i32>(d + (<usize>i << 2), word);",
    "}",
    "",
    "function t_iota(d: usize, s: i32, n: i32): void {",
    "  for (let i = 0; i < n; i++) store<u32>(d + (<usize>i << 2), <u32>(s + i));",
    "}",
  ].join("\n"));
  // The interpreter: one switch case per opcode, in TILE_OPS order.
  const cases = TILE_OPS.map((op, code) => {
    const reg = (k: number) => `R(t, ${"abcd"[k]})`;
    const word = (k: number) => `<usize>${"abcd"[k]}`;
    let call: string;
    if (op.name.startsWith("gather_")) {
      call = `t_${op.name}(${reg(0)}, ${word(1)}, ${word(2)}, s, n)`;
    } else if (op.name === "store_f16") {
      call = `t_store_f16(${word(0)} + (<usize>s << 1), ${reg(1)}, n)`;
    } else if (op.name === "splat") call = `t_splat(${reg(0)}, b, n)`;
    else if (op.name === "iota") call = `t_iota(${reg(0)}, s, n)`;
    else call = `t_${op.name}(${op.operands.map((_, k) => reg(k)).join(", ")}, n)`;
    return `    case ${code}: ${call}; break;`;
  });
  parts.push([
    "/** The address register `r` holds for the current tile (a table of addresses in scratch). */",
    "@inline function R(t: usize, r: i32): usize {",
    "  return load<usize>(t + (<usize>r << 2));",
    "}",
    "",
    "function ew_step(w: usize, t: usize, s: i32, n: i32): void {",
    "  const a = load<i32>(w, 4);",
    "  const b = load<i32>(w, 8);",
    "  const c = load<i32>(w, 12);",
    "  const d = load<i32>(w, 16);",
    "  switch (load<i32>(w)) {",
    ...cases,
    "    default: unreachable();",
    "  }",
    "}",
    "",
    "/**",
    " * Runs the tile program at `prog` over elements [start, end) (src/wasm/tile_ops.ts has its",
    " * layout). `scratch` holds this thread's register table and scratch tiles: threads running",
    " * the same program over other ranges pass their own.",
    " */",
    "export function ew_run(prog: usize, start: i32, end: i32, scratch: usize): void {",
    "  const tile = load<i32>(prog);",
    "  const registers = load<i32>(prog, 4);",
    "  const prologue = load<i32>(prog, 8);",
    "  const body = load<i32>(prog, 12);",
    "  const kinds = prog + 16;",
    "  const code = kinds + (<usize>registers << 3);",
    "  const t = scratch;",
    "  let free = (scratch + (<usize>registers << 2) + 15) & ~15;",
    "  for (let r = 0; r < registers; r++) {",
    "    if (load<i32>(kinds + (<usize>r << 3)) == 0) {",
    "      store<usize>(t + (<usize>r << 2), free);",
    "      free += <usize>tile << 2;",
    "    }",
    "  }",
    "  for (let i = 0; i < prologue; i++) ew_step(code + <usize>i * 20, t, 0, tile);",
    "  const first = code + <usize>prologue * 20;",
    "  for (let s = start; s < end; s += tile) {",
    "    const n = min(tile, end - s);",
    "    for (let r = 0; r < registers; r++) {",
    "      const kind = kinds + (<usize>r << 3);",
    "      if (load<i32>(kind) == 1) store<usize>(t + (<usize>r << 2), load<usize>(kind, 4) + (<usize>s << 2));",
    "    }",
    "    for (let i = 0; i < body; i++) ew_step(first + <usize>i * 20, t, s, n);",
    "  }",
    "}",
  ].join("\n"));
  return parts.join("\n\n");
}

if (import.meta.main) {
  await Deno.writeTextFile(new URL("../asm/_generated.ts", import.meta.url), generateAsm());
}
