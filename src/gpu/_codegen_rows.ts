/**
 * Generates the WGSL row kernels behind softmax, logSoftmax, layerNorm, rmsNorm, groupNorm and
 * batchNorm's training statistics. The input is seen as `rows` rows of `len` elements (the
 * normalised axes), read either as plain contiguous rows or through strides.
 *
 * `threadsPerRow` (T) invocations share a row; a workgroup of W invocations holds W / T rows. Each
 * invocation keeps `registers` (K) values of its row in named registers (vec4 where the layout
 * allows), so the row is read from memory once and written once: register k of lane t holds unit
 * `chunk * T * K + k * T + t` (a unit is one element, or four with vec4), which keeps the T lanes'
 * loads adjacent in memory. Statistics are combined across the T lanes by one of:
 * - `none`: T = 1, a lane owns its row;
 * - `shuffle`: T is at most the subgroup size, a butterfly of `subgroupShuffleXor`;
 * - `subgroup`: T is a multiple of the subgroup size, `subgroupAdd`/`subgroupMax` then one
 *   shared-memory slot per subgroup;
 * - `shared`: a shared-memory tree, for devices without subgroups or sizes in between.
 *
 * Four stages:
 * - `single`: the whole row in registers: statistics, then normalise and write (one pass);
 * - `partial`: a row split into chunks of T * K units writes each chunk's statistics
 *   (softmax: max and sum of exp(x - max); norms: mean and sum of squared deviations);
 * - `combine`: merges a row's chunk statistics (the online-softmax rescale, or Chan's parallel
 *   variance formula) into final per-row statistics (max and sum, or mean and variance);
 * - `apply`: reads a chunk again and normalises it with its row's final statistics.
 * Variances are two-pass (mean, then squared deviations from it, both from registers) within a
 * chunk and Chan-combined across chunks; never sum(x^2) - mean^2.
 * @module
 */
import { literal, preludeFor, storageType } from "./_wgsl_types.ts";
import { constantsMember, withConstants } from "./_codegen_elementwise.ts";

/** What a row kernel computes. rmsNorm is layerNorm with the mean fixed at 0. */
import type { RowKind } from "../contract/rows.ts";

/** Which part of the one-pass or chunked scheme a kernel is. */
export type RowStage = "single" | "partial" | "combine" | "apply";

/** How the lanes of one row combine a statistic. */
export type RowCombine = "none" | "shuffle" | "subgroup" | "shared";

/** Everything the generated code depends on. */
export interface RowSpec {
  kind: RowKind;
  stage: RowStage;
  /** Storage of x and y. Arithmetic is f32 either way. */
  dtype: "float32" | "float16";
  /** false: row r is units [off + r * units, ...) of x and [r * units, ...) of y. */
  strided: boolean;
  /** Axes of the row index and of the unit index within a row (strided only). */
  outerRank: number;
  innerRank: number;
  vec4: boolean;
  threadsPerRow: number;
  workgroupSize: number;
  registers: number;
  combine: RowCombine;
  weight: boolean;
  bias: boolean;
  /**
   * false: weight[j] for element j of a row. true: weight[(row % period) * scale + j / divisor]
   * (groupNorm's per-channel affine, batchNorm's per-row one).
   */
  affineIndexed: boolean;
  /**
   * Elementwise work fused after the row op (the stages that write y): extra read-only inputs,
   * bound before the output, laid out like the output; `apply(y, unit)` is y's replacement.
   */
  epilogue?: RowEpilogue;
  /**
   * Elementwise work fused before the row op (the stages that read x, contiguous rows only):
   * x is input 0 (`src`); extra inputs are laid out like it.
   */
  prologue?: RowEpilogue;
}

/** An elementwise epilogue of a row kernel (see `RowSpec.epilogue`). */
export interface RowEpilogue {
  /** Part of the pipeline key: equal keys must generate equal code. */
  key: string;
  /** Element types of the extra inputs (bound as `epilogue_in1`, ... in this order). */
  inputs: readonly string[];
  /** Module-scope WGSL the epilogue needs (prelude helpers are added once by the generator). */
  declarations: string;
  /** The epilogue of value `y` (f32, or vec4<f32> with vec4 units) at output unit `unit`. */
  apply(y: string, unit: string): string;
  /** The constant slots (`p.consts`) it reads end before this one (0 or absent: none). */
  constantSlots?: number;
}

/**
 * Cache key of a spec.
 *
 * @example
 * ```ts
 * import { rowKey, type RowSpec } from "./_codegen_rows.ts";
 * const spec: RowSpec = {
 *   kind: "softmax", stage: "single", dtype: "float32", strided: false, outerRank: 0,
 *   innerRank: 0, vec4: true, threadsPerRow: 256, workgroupSize: 256, registers: 4,
 *   combine: "subgroup", weight: false, bias: false, affineIndexed: false,
 * };
 * rowKey(spec); // "rows|softmax|single|float32|ct|v4|t256|wg256|k4|subgroup|||el"
 * ```
 */
export function rowKey(s: RowSpec): string {
  return [
    "rows",
    s.kind,
    s.stage,
    s.dtype,
    s.strided ? `st${s.outerRank}.${s.innerRank}` : "ct",
    s.vec4 ? "v4" : "s",
    `t${s.threadsPerRow}`,
    `wg${s.workgroupSize}`,
    `k${s.registers}`,
    s.combine,
    s.weight ? "w" : "",
    s.bias ? "b" : "",
    s.affineIndexed ? "ix" : "el",
    ...(s.epilogue && (s.stage === "single" || s.stage === "apply")
      ? [`epi:${s.epilogue.key}`]
      : []),
    ...(s.prologue && s.stage !== "combine" && !s.strided ? [`pro:${s.prologue.key}`] : []),
  ].join("|");
}

/** Axes in units: shape, input strides, output strides. */
export interface UnitAxes {
  shape: readonly number[];
  inStrides: readonly number[];
  outStrides: readonly number[];
}

/** Values of the uniform block of one dispatch. */
export interface RowUniforms {
  rows: number;
  /** Units per row (elements / 4 with vec4). */
  units: number;
  chunks: number;
  /** Units per chunk (T * K when chunked). */
  chunkUnits: number;
  /** Input offset, in units. */
  inOffset: number;
  eps: number;
  period: number;
  scale: number;
  divisor: number;
  /** Elements per row. */
  len: number;
  /** Elements per chunk (chunkUnits times the unit width of the partial pass). */
  chunkLen: number;
  outer: UnitAxes;
  inner: UnitAxes;
  /** The fused prologue's constants, then the epilogue's (`p.consts`). */
  constants?: readonly number[];
}

/**
 * Words: 16 scalars, then 12 vec4 of axes (outer shape, in, out strides; inner likewise); then
 * the constants, if any.
 */
const U_WORDS = 16 + 48;

/**
 * Packs the uniform block (256 bytes, one uniform slot, when no fused work has constants).
 *
 * @example
 * ```ts
 * import { rowUniforms } from "./_codegen_rows.ts";
 * const none = { shape: [], inStrides: [], outStrides: [] };
 * const words = rowUniforms({
 *   rows: 4096, units: 1024, chunks: 1, chunkUnits: 1024, inOffset: 0, eps: 0, period: 1,
 *   scale: 0, divisor: 1, len: 4096, chunkLen: 4096, outer: none, inner: none,
 * });
 * words.byteLength; // 256
 * ```
 */
export function rowUniforms(u: RowUniforms): Uint32Array {
  const words = new Uint32Array(U_WORDS);
  words.set([u.rows, u.units, u.chunks, u.chunkUnits, u.inOffset]);
  new Float32Array(words.buffer, 5 * 4, 1)[0] = u.eps;
  words.set([u.period, u.scale, u.divisor, u.len, u.chunkLen], 6);
  const put = (base: number, values: readonly number[]) =>
    values.forEach((v, i) => (words[16 + base + i] = v >>> 0));
  put(0, u.outer.shape);
  put(8, u.outer.inStrides);
  put(16, u.outer.outStrides);
  put(24, u.inner.shape);
  put(32, u.inner.inStrides);
  put(40, u.inner.outStrides);
  return withConstants(words, u.constants ?? []);
}

const NEG_INF = literal(-Infinity, "float32");

/** A function returning the offset of index `i` decomposed over `rank` axes (uniform vec4 `base`). */
function offsetFunction(name: string, rank: number, shapeVec: number, strideVec: number): string {
  const dim = (d: number) => `p.dims[${shapeVec + (d >> 2)}][${d & 3}]`;
  const stride = (d: number) => `p.dims[${strideVec + (d >> 2)}][${d & 3}]`;
  if (rank === 0) return `fn ${name}(i: u32) -> u32 { return 0u; }`;
  if (rank === 1) return `fn ${name}(i: u32) -> u32 { return i * ${stride(0)}; }`;
  const lines = [`fn ${name}(i: u32) -> u32 {`, "  var o = 0u;", "  var rest = i;"];
  for (let d = rank - 1; d > 0; d--) {
    lines.push(`  o += (rest % ${dim(d)}) * ${stride(d)};`, `  rest = rest / ${dim(d)};`);
  }
  lines.push(`  return o + rest * ${stride(0)};`, "}");
  return lines.join("\n");
}

/**
 * Emits combine function `combine_<id>` over the T lanes of a row, with its own shared array
 * (a call site per array, so no barrier is needed before the next combine reuses memory).
 */
function combineFunction(
  id: number,
  op: "max" | "add",
  mode: RowCombine,
  t: number,
  wg: number,
): { decl: string; call: (v: string) => string } {
  const join = (a: string, b: string) => (op === "max" ? `max(${a}, ${b})` : `(${a} + ${b})`);
  const name = `combine_${id}`;
  switch (mode) {
    case "none":
      return { decl: "", call: (v) => v };
    case "shuffle": {
      const lines = [`fn ${name}(v: f32) -> f32 {`, "  var a = v;"];
      for (let mask = t >> 1; mask > 0; mask >>= 1) {
        lines.push(`  a = ${join("a", `subgroupShuffleXor(a, ${mask}u)`)};`);
      }
      lines.push("  return a;", "}");
      return { decl: lines.join("\n"), call: (v) => `${name}(${v})` };
    }
    case "subgroup": {
      // Subgroups of 4 or more lanes (the plan checks the device's minimum): W / 4 slots.
      const decl = [
        `var<workgroup> red_${id}: array<f32, ${Math.max(1, wg >> 2)}>;`,
        `fn ${name}(v: f32, lid: u32, sg_size: u32, sg_lane: u32) -> f32 {`,
        `  let s = ${op === "max" ? "subgroupMax" : "subgroupAdd"}(v);`,
        `  if (sg_lane == 0u) { red_${id}[lid / sg_size] = s; }`,
        "  workgroupBarrier();",
        `  let per_row = ${t}u / sg_size;`,
        `  let first = (lid / ${t}u) * per_row;`,
        `  var total = red_${id}[first];`,
        `  for (var k = 1u; k < per_row; k++) { total = ${
          join("total", `red_${id}[first + k]`)
        }; }`,
        "  return total;",
        "}",
      ].join("\n");
      return { decl, call: (v) => `${name}(${v}, lid, sg_size, sg_lane)` };
    }
    case "shared": {
      const lines = [
        `var<workgroup> red_${id}: array<f32, ${wg}>;`,
        `fn ${name}(v: f32, lid: u32) -> f32 {`,
        `  red_${id}[lid] = v;`,
        "  workgroupBarrier();",
      ];
      for (let width = t >> 1; width > 0; width >>= 1) {
        lines.push(
          `  if ((lid & ${t - 1}u) < ${width}u) { red_${id}[lid] = ${
            join(`red_${id}[lid]`, `red_${id}[lid + ${width}u]`)
          }; }`,
          "  workgroupBarrier();",
        );
      }
      lines.push(`  return red_${id}[lid & ${~(t - 1) >>> 0}u];`, "}");
      return { decl: lines.join("\n"), call: (v) => `${name}(${v}, lid)` };
    }
  }
}

/**
 * Generates the WGSL source of a spec.
 *
 * @example
 * ```ts
 * import { generateRows, type RowSpec } from "./_codegen_rows.ts";
 * const spec: RowSpec = {
 *   kind: "softmax", stage: "single", dtype: "float32", strided: false, outerRank: 0,
 *   innerRank: 0, vec4: true, threadsPerRow: 256, workgroupSize: 256, registers: 4,
 *   combine: "subgroup", weight: false, bias: false, affineIndexed: false,
 * };
 * const wgsl = generateRows(spec); // one pass: 256 lanes x 4 vec4 registers per row
 * ```
 */
export function generateRows(s: RowSpec): string {
  const T = s.threadsPerRow;
  const W = s.workgroupSize;
  const K = s.registers;
  const V = s.vec4 ? 4 : 1;
  const vt = V === 4 ? "vec4<f32>" : "f32";
  const half = s.dtype === "float16";
  const st = storageType(s.dtype);
  const xt = V === 4 ? `vec4<${st}>` : st;
  const softmaxLike = s.kind === "softmax" || s.kind === "logSoftmax";
  const centered = s.kind === "layerNorm";
  const readsX = s.stage !== "combine";
  const writesY = s.stage === "single" || s.stage === "apply";
  const affine = writesY && !softmaxLike;
  const weight = affine && s.weight;
  const bias = affine && s.bias;
  const wt = s.affineIndexed || V === 1 ? "f32" : "vec4<f32>";

  const prologue = readsX && !s.strided ? s.prologue : undefined;
  const epilogue = writesY ? s.epilogue : undefined;
  const constants = Math.max(prologue?.constantSlots ?? 0, epilogue?.constantSlots ?? 0);
  const decls: string[] = [];
  if (half) decls.push("enable f16;");
  decls.push(
    "struct Params { rows: u32, units: u32, chunks: u32, chunk_units: u32, in_off: u32, eps: f32, " +
      "period: u32, scale: u32, divisor: u32, len: u32, chunk_len: u32, pad1: u32, pad2: u32, pad3: u32, " +
      `pad4: u32, pad5: u32, dims: array<vec4<u32>, 12>${constantsMember(constants)} }`,
  );
  let binding = 0;
  const bind = (access: "read" | "read_write", name: string, type: string) =>
    decls.push(
      `@group(0) @binding(${binding++}) var<storage, ${access}> ${name}: array<${type}>;`,
    );
  if (readsX) bind("read", "src", xt);
  prologue?.inputs.forEach((type, i) => bind("read", `prologue_in${i + 1}`, type));
  if (weight) bind("read", "weight", wt);
  if (bias) bind("read", "bias", wt);
  if (s.stage === "combine") bind("read", "part", "vec2<f32>");
  if (s.stage === "apply") bind("read", "stats", "f32");
  epilogue?.inputs.forEach((type, i) => bind("read", `epilogue_in${i + 1}`, type));
  if (writesY) bind("read_write", "dst", xt);
  if (s.stage === "partial") bind("read_write", "part", "vec2<f32>");
  if (s.stage === "combine") bind("read_write", "stats", "f32");
  decls.push(`@group(0) @binding(${binding}) var<uniform> p: Params;`);
  if (epilogue) decls.push(epilogue.declarations);
  if (prologue) decls.push(prologue.declarations);
  // Helpers both fused expressions call are declared once.
  const helpers = preludeFor(`${epilogue?.declarations ?? ""}\n${prologue?.declarations ?? ""}`);
  if (helpers) decls.push(helpers);
  decls.push(
    "fn is_neg_inf(x: f32) -> bool { return bitcast<u32>(x) == 0xff800000u; }",
    "fn non_finite(x: f32) -> bool { return (bitcast<u32>(x) & 0x7f800000u) == 0x7f800000u; }",
  );
  if (s.strided && readsX) {
    decls.push(
      offsetFunction("outer_in", s.outerRank, 0, 2),
      offsetFunction("outer_out", s.outerRank, 0, 4),
      offsetFunction("inner_in", s.innerRank, 6, 8),
      offsetFunction("inner_out", s.innerRank, 6, 10),
    );
  }

  // Combine call sites, each with its own shared array.
  let sites = 0;
  const combine = (op: "max" | "add", v: string) => {
    const c = combineFunction(sites++, op, s.combine, T, W);
    if (c.decl) decls.push(c.decl);
    return c.call(v);
  };

  const body: string[] = [];
  const line = (text: string) => body.push(`  ${text}`);
  line("let g = wid.x + wid.y * nwg.x;");
  line(T === W ? "let item = g;" : `let item = g * ${W / T}u + lid / ${T}u;`);
  line(T === 1 ? "let t = 0u;" : `let t = lid & ${T - 1}u;`);
  if (s.stage === "combine") line("let live = item < p.rows;");
  else line("let live = item < p.rows * p.chunks;");
  line("let row = item % p.rows;");
  line("let chunk = item / p.rows;");

  // Horizontal sum and max of a vec4 (through a temporary, so that `v` is evaluated once).
  const horizontal = (name: string, v: string, op: "sum" | "max") => {
    if (V === 1) return line(`let ${name} = ${v};`);
    line(`let ${name}_v = ${v};`);
    const [x, y, z, w] = ["x", "y", "z", "w"].map((c) => `${name}_v.${c}`);
    line(
      `let ${name} = ${
        op === "sum" ? `(${x} + ${y}) + (${z} + ${w})` : `max(max(${x}, ${y}), max(${z}, ${w}))`
      };`,
    );
  };
  /** Straight-line fold of registers r0..r(K-1) through `expr(k)`. */
  const fold = (expr: (k: number) => string, join: (a: string, b: string) => string) => {
    let acc = expr(0);
    for (let k = 1; k < K; k++) acc = join(acc, expr(k));
    return acc;
  };
  const regs = [...Array(K).keys()];

  if (s.stage === "combine") {
    if (softmaxLike) {
      // Online-softmax merge: (m, s) pairs rescaled to a common maximum. A part whose maximum is
      // -inf (nothing but -inf) contributes 0; NaN travels in the sums.
      decls.push(
        `fn term(s: f32, m: f32, top: f32) -> f32 { return s * exp(m - select(top, 0.0, is_neg_inf(top))); }`,
      );
      line(`var mx = ${NEG_INF};`);
      line("var sm = 0.0;");
      line("if (live) {");
      line(`  for (var c = t; c < p.chunks; c += ${T}u) {`);
      line("    let q = part[c * p.rows + row];");
      line("    let top = max(mx, q.x);");
      line("    sm = term(sm, mx, top) + term(q.y, q.x, top);");
      line("    mx = top;");
      line("  }");
      line("}");
      line(`let m = ${combine("max", "mx")};`);
      line(`let total = ${combine("add", "term(sm, mx, m)")};`);
      line("if (live && t == 0u) { stats[row] = m; stats[p.rows + row] = total; }");
    } else {
      // Chan's parallel variance: mean = sum(n_c mean_c) / n,
      // M2 = sum(M2_c + n_c (mean_c - mean)^2). rmsNorm's parts have mean 0.
      const count = "f32(min(p.chunk_len, p.len - c * p.chunk_len))";
      line("var a = 0.0;");
      line("if (live) {");
      line(
        `  for (var c = t; c < p.chunks; c += ${T}u) { a += ${count} * part[c * p.rows + row].x; }`,
      );
      line("}");
      line(`let mean = ${combine("add", "a")} / f32(p.len);`);
      line("var b = 0.0;");
      line("if (live) {");
      line(`  for (var c = t; c < p.chunks; c += ${T}u) {`);
      line("    let q = part[c * p.rows + row];");
      line("    let d = q.x - mean;");
      line(`    b += q.y + ${count} * d * d;`);
      line("  }");
      line("}");
      line(`let m2 = ${combine("add", "b")};`);
      line("if (live && t == 0u) { stats[row] = mean; stats[p.rows + row] = m2 / f32(p.len); }");
    }
  } else {
    // Load this lane's registers; units past the row (or of an idle item) hold the fill value.
    const fill = softmaxLike ? NEG_INF : "0.0";
    const zero = V === 4 ? `${vt}(${fill})` : fill;
    line(`let units = p.units;`);
    line(`let first = chunk * p.chunk_units + t;`);
    if (s.strided) {
      line("let in_base = p.in_off + outer_in(row);");
      if (writesY) line("let out_base = outer_out(row);");
    } else {
      line("let in_base = p.in_off + row * units;");
      if (writesY) line("let out_base = row * units;");
    }
    const inIndex = (k: number) => (s.strided ? `in_base + inner_in(u${k})` : `in_base + u${k}`);
    const outIndex = (
      k: number,
    ) => (s.strided ? `out_base + inner_out(u${k})` : `out_base + u${k}`);
    const load = (i: string) => (half ? `${vt}(src[${i}])` : `src[${i}]`);
    for (const k of regs) {
      line(`let u${k} = first + ${k * T}u;`);
      line(`let ok${k} = live && u${k} < units;`);
      line(`var r${k} = ${zero};`);
      // With a prologue, extra inputs are read at the same unit of their own arrays.
      const value = prologue
        ? prologue.apply(load(inIndex(k)), `in_base - p.in_off + u${k}`)
        : load(inIndex(k));
      line(`if (ok${k}) { r${k} = ${value}; }`);
    }

    // Statistics and the values to write, y_k.
    const ys: string[] = [];
    if (s.stage === "apply") {
      line("let s0 = stats[row];");
      line("let s1 = stats[p.rows + row];");
    }
    if (softmaxLike) {
      // A maximum that is +inf or NaN, or -inf for a whole row, makes the row NaN (as PyTorch:
      // inf - inf, or -inf - -inf). Tested on the bits and stored as a NaN constant, because
      // compilers may fold x - max(x) to 0 when the maximum is one register.
      const nan = literal(NaN, "float32");
      const guard = (y: string) => `select(${y}, ${vt}(${nan}), bad)`;
      if (s.stage === "apply") {
        line("let bad = non_finite(s0);");
        if (s.kind === "softmax") {
          line("let inv = 1.0 / s1;");
          for (const k of regs) ys.push(guard(`exp(r${k} - s0) * inv`));
        } else {
          line("let ls = log(s1);");
          for (const k of regs) ys.push(guard(`(r${k} - s0) - ls`));
        }
      } else {
        horizontal("m_local", fold((k) => `r${k}`, (a, b) => `max(${a}, ${b})`), "max");
        line(`let m = ${combine("max", "m_local")};`);
        // A chunk of nothing but -inf shifts by 0, so that its sum is 0 and it adds nothing when
        // merged with the row's other chunks.
        line(
          s.stage === "partial" ? "let shift = select(m, 0.0, is_neg_inf(m));" : "let shift = m;",
        );
        if (s.kind === "softmax" || s.stage === "partial") {
          for (const k of regs) line(`let e${k} = exp(r${k} - shift);`);
        } else {
          for (const k of regs) line(`let d${k} = r${k} - shift;`);
          for (const k of regs) line(`let e${k} = exp(d${k});`);
        }
        horizontal("s_local", fold((k) => `e${k}`, (a, b) => `${a} + ${b}`), "sum");
        line(`let total = ${combine("add", "s_local")};`);
        if (s.stage === "partial") {
          line(`let part_sum = select(total, ${nan}, non_finite(m) && !is_neg_inf(m));`);
          line("if (live && t == 0u) { part[chunk * p.rows + row] = vec2<f32>(m, part_sum); }");
        } else {
          line("let bad = non_finite(m);");
          if (s.kind === "softmax") {
            line("let inv = 1.0 / total;");
            for (const k of regs) ys.push(guard(`e${k} * inv`));
          } else {
            line("let ls = log(total);");
            for (const k of regs) ys.push(guard(`d${k} - ls`));
          }
        }
      }
    } else {
      // layerNorm and rmsNorm: deviations d_k from the mean (0 for rmsNorm), then rstd.
      if (s.stage === "apply") {
        line("let rstd = inverseSqrt(s1 + p.eps);");
        for (const k of regs) line(`let d${k} = r${k} - s0;`);
      } else {
        if (centered) {
          horizontal("sum_local", fold((k) => `r${k}`, (a, b) => `${a} + ${b}`), "sum");
          line(`let total = ${combine("add", "sum_local")};`);
          if (s.stage === "partial") {
            line(
              "let n = f32(min(p.chunk_len, p.len - min(p.len, chunk * p.chunk_len)));",
            );
            line("let mean = total / n;");
          } else line("let mean = total / f32(p.len);");
          for (const k of regs) line(`let d${k} = select(${zero}, r${k} - mean, ok${k});`);
        } else {
          line("let mean = 0.0;");
          for (const k of regs) line(`let d${k} = r${k};`);
        }
        horizontal("q_local", fold((k) => `d${k} * d${k}`, (a, b) => `${a} + ${b}`), "sum");
        line(`let m2 = ${combine("add", "q_local")};`);
        if (s.stage === "partial") {
          line("if (live && t == 0u) { part[chunk * p.rows + row] = vec2<f32>(mean, m2); }");
        } else line("let rstd = inverseSqrt(m2 / f32(p.len) + p.eps);");
      }
      if (writesY) {
        if (s.affineIndexed && (weight || bias)) {
          line("let channel_base = (row % p.period) * p.scale;");
        }
        for (const k of regs) {
          let y = `d${k} * rstd`;
          const at = (name: string) =>
            s.affineIndexed
              ? `${name}[channel_base + (u${k} * ${V}u) / p.divisor]`
              : `${name}[u${k}]`;
          // Loaded only for units inside the row: idle lanes must not index past the arrays.
          if (weight) {
            line(`var w${k} = ${vt}(0.0);`);
            line(`if (ok${k}) { w${k} = ${vt}(${at("weight")}); }`);
            y = `(${y}) * w${k}`;
          }
          if (bias) {
            line(`var b${k} = ${vt}(0.0);`);
            line(`if (ok${k}) { b${k} = ${vt}(${at("bias")}); }`);
            y = `${y} + b${k}`;
          }
          ys.push(y);
        }
      }
    }
    if (writesY) {
      regs.forEach((k) => {
        const y = epilogue ? epilogue.apply(ys[k], outIndex(k)) : ys[k];
        const value = half ? `${xt}(${y})` : y;
        line(`if (ok${k}) { dst[${outIndex(k)}] = ${value}; }`);
      });
    }
  }

  const builtins = [
    "@builtin(workgroup_id) wid: vec3<u32>",
    "@builtin(num_workgroups) nwg: vec3<u32>",
    "@builtin(local_invocation_index) lid: u32",
  ];
  if (s.combine === "subgroup") {
    builtins.push(
      "@builtin(subgroup_size) sg_size: u32",
      "@builtin(subgroup_invocation_id) sg_lane: u32",
    );
  }
  return [
    ...decls,
    `@compute @workgroup_size(${W})`,
    `fn main(${builtins.join(", ")}) {`,
    ...body,
    "}",
    "",
  ].join("\n");
}
