/**
 * Generates WGSL 2-D pooling kernels over contiguous NCHW planes: max pooling (values or PyTorch's
 * flat argmax indices), average pooling, and the adaptive variants. One invocation computes
 * `outputsPerInvocation` neighbouring outputs of one output row, so consecutive invocations read
 * consecutive input columns (coalesced along W). Two variants, chosen by `planPool`:
 * - `unrolled`: the window geometry is baked in and the window walk is straight-line code over
 *   named registers (naga does not unroll loops); columns shared by neighbouring outputs are
 *   loaded once; optionally as aligned `vec4` loads and vector stores;
 * - `looped`: sizes come from the uniform block and the window is walked with loops (large or
 *   irregular windows);
 * - `team` (subgroups): a team of `teamSize` neighbouring invocations per output walks the
 *   window's elements together, lane l taking elements l, l + teamSize, ... in row-major order
 *   (a window row of 32 columns is one coalesced read), and the lanes' results are combined with
 *   subgroup shuffles. Large windows, where one invocation per output reads each window row as a
 *   strided trickle.
 * Comparisons follow PyTorch exactly: a value replaces the running maximum when it is greater or
 * NaN, so a window with NaN gives NaN and its index is the last NaN's; padding is never a candidate.
 * @module
 */
import { computeType, literal, loadAs, preludeFor, storageType, storeAs } from "./_wgsl_types.ts";
// Dtypes with a pooling kernel: the job's (src/contract/pool.ts).
import type { PoolDType } from "../contract/pool.ts";

/**
 * How an average is divided (PyTorch's rules).
 *
 * @example
 * ```ts
 * const divisor: PoolDivisor = "padded"; // avgPool2d with countIncludePad
 * ```
 */
export type PoolDivisor =
  /** countIncludePad: the window clipped at the padded border (not the ceil-mode overhang). */
  | "padded"
  /** Only the elements inside the input. */
  | "valid"
  /** A fixed divisor from the uniform block (divisorOverride). */
  | "override"
  /** Adaptive bins: `sum / rows / columns`, two divisions as PyTorch does. */
  | "bins";

/**
 * Everything the generated code depends on.
 *
 * @example
 * ```ts
 * const spec: PoolSpec = {
 *   op: "max", output: "values", dtype: "float32", window: "regular", variant: "unrolled",
 *   kernel: [2, 2], stride: [2, 2], padding: [0, 0], dilation: [1, 1],
 *   outputsPerInvocation: 4, vec4: true, vectorStore: true, divisor: "valid", workgroupSize: 256,
 *   teamSize: 1,
 * };
 * ```
 */
export interface PoolSpec {
  op: "max" | "avg";
  /** What the kernel writes: pooled values or (max only) flat `h * W + w` argmax indices. */
  output: "values" | "indices";
  dtype: PoolDType;
  /** "regular": strided windows with padding and dilation; "adaptive": PyTorch's bins. */
  window: "regular" | "adaptive";
  variant: "unrolled" | "looped" | "team";
  /** Team only: invocations per output, a power of two no larger than the subgroup size. */
  teamSize: number;
  /**
   * Unrolled only: window rows and columns (adaptive: the largest bin), stride, padding and
   * dilation, as [height, width]. The looped variant reads them from the uniform block.
   */
  kernel: readonly [number, number];
  stride: readonly [number, number];
  padding: readonly [number, number];
  dilation: readonly [number, number];
  /** Neighbouring outputs along W per invocation (1 for looped and adaptive). */
  outputsPerInvocation: number;
  /** Read the input as aligned vec4s (regular, unrolled, no column padding or dilation). */
  vec4: boolean;
  /** Write the outputs of an invocation as one vector (output width a multiple of it). */
  vectorStore: boolean;
  /** Average pooling only. */
  divisor: PoolDivisor;
  workgroupSize: number;
}

/**
 * Cache key of a spec (the looped variant's geometry lives in uniforms, not in the key).
 *
 * @example
 * ```ts
 * const spec: PoolSpec = {
 *   op: "max", output: "values", dtype: "float32", window: "regular", variant: "unrolled",
 *   kernel: [2, 2], stride: [2, 2], padding: [0, 0], dilation: [1, 1],
 *   outputsPerInvocation: 4, vec4: true, vectorStore: true, divisor: "valid", workgroupSize: 256,
 *   teamSize: 1,
 * };
 * poolKey(spec); // "pool|max|values|float32|regular|unrolled|k2,2|s2,2|p0,0|d1,1|v4qw||wg256"
 * ```
 */
export function poolKey(s: PoolSpec): string {
  const geometry = s.variant === "unrolled"
    ? `|k${s.kernel}|s${s.stride}|p${s.padding}|d${s.dilation}|v${s.outputsPerInvocation}` +
      `${s.vec4 ? "q" : ""}${s.vectorStore ? "w" : ""}`
    : "";
  return `pool|${s.op}|${s.output}|${s.dtype}|${s.window}|${s.variant}${geometry}|${
    s.op === "avg" ? s.divisor : ""
  }|wg${s.workgroupSize}${s.variant === "team" ? `|t${s.teamSize}` : ""}`;
}

/**
 * The sizes of one dispatch.
 *
 * @example
 * ```ts
 * const g: PoolGeometry = {
 *   planes: 2048, inHeight: 224, inWidth: 224, outHeight: 112, outWidth: 112, offset: 0,
 *   kernel: [2, 2], stride: [2, 2], padding: [0, 0], dilation: [1, 1], divisor: 0,
 * };
 * ```
 */
export interface PoolGeometry {
  planes: number;
  inHeight: number;
  inWidth: number;
  outHeight: number;
  outWidth: number;
  /** First input element (a multiple of 4 for vec4 loads). */
  offset: number;
  kernel: readonly [number, number];
  stride: readonly [number, number];
  padding: readonly [number, number];
  dilation: readonly [number, number];
  /** divisorOverride (0 when unused). */
  divisor: number;
}

/**
 * Invocations of a dispatch: one per `outputsPerInvocation` outputs of each output row.
 *
 * @example
 * ```ts ignore
 * poolInvocations(spec, geometry); // planes * outHeight * ceil(outWidth / 4) for 4 outputs
 * ```
 */
export function poolInvocations(s: PoolSpec, g: PoolGeometry): number {
  return g.planes * g.outHeight * rowInvocations(s, g);
}

/** Invocations per output row: one per `outputsPerInvocation` outputs, or a team per output. */
function rowInvocations(s: PoolSpec, g: PoolGeometry): number {
  return s.variant === "team"
    ? g.outWidth * s.teamSize
    : Math.ceil(g.outWidth / s.outputsPerInvocation);
}

/**
 * Packs the uniform block (16 words; see `Params` in the generated code).
 *
 * @example
 * ```ts ignore
 * backend.dispatch("maxPool2d", pipeline, buffers, poolUniforms(spec, geometry), grid);
 * ```
 */
export function poolUniforms(s: PoolSpec, g: PoolGeometry): Uint32Array {
  const u = new Uint32Array(16);
  const i = new Int32Array(u.buffer);
  u[0] = poolInvocations(s, g);
  u[1] = rowInvocations(s, g);
  i[2] = g.inHeight;
  i[3] = g.inWidth;
  u[4] = g.outHeight;
  u[5] = g.outWidth;
  u[6] = g.offset;
  i[7] = g.divisor;
  i.set(
    [g.kernel[0], g.kernel[1], g.stride[0], g.stride[1], g.padding[0], g.padding[1]],
    8,
  );
  i.set([g.dilation[0], g.dilation[1]], 14);
  return u;
}

/** Code fragments shared by both variants for one spec. */
class Emitter {
  readonly lines: string[] = [];
  readonly t: string;
  readonly pad: string;
  constructor(readonly s: PoolSpec) {
    this.t = computeType(s.dtype);
    // Padding never wins a comparison (max) and adds nothing (avg).
    this.pad = s.op === "avg"
      ? "0.0"
      : literal(s.dtype === "int32" ? -2147483648 : -Infinity, s.dtype);
  }
  push(...l: string[]): void {
    this.lines.push(...l.map((x) => `  ${x}`));
  }
  /** The PyTorch update of a running maximum `m` (and its index `k`) by value `x` at `index`. */
  update(m: string, k: string, x: string, index: () => string): string[] {
    const better = this.s.dtype === "int32" ? `${x} > ${m}` : `(${x} > ${m} || g_isnan(${x}))`;
    if (this.s.op === "avg") return [`${m} = ${m} + ${x};`];
    if (this.s.output === "values") return [`${m} = select(${m}, ${x}, ${better});`];
    return [`if (${better}) { ${m} = ${x}; ${k} = ${index()}; }`];
  }
  load(index: string): string {
    return loadAs(this.s.dtype, `src[${index}]`);
  }
}

/** The first in-range coordinate PyTorch starts its index at: `start` stepped past 0 by `step`. */
function firstInRange(start: string, step: string): string {
  return `select(${start}, ${start} + ((-${start} + ${step} - 1) / ${step}) * ${step}, ${start} < 0)`;
}

/** The average of `sum` under the spec's divisor rule, for a window starting at (h0, w0). */
function average(
  s: PoolSpec,
  sum: string,
  h0: string,
  w0: string,
  k: readonly [string, string],
  pad: readonly [string, string],
): string {
  if (s.divisor === "bins") return `${sum} / f32(${k[0]}) / f32(${k[1]})`;
  const hEnd = `min(${h0} + ${k[0]}, p.h + ${pad[0]})`;
  const wEnd = `min(${w0} + ${k[1]}, p.w + ${pad[1]})`;
  const rows = `(min(${hEnd}, p.h) - max(${h0}, 0))`;
  const cols = `(min(${wEnd}, p.w) - max(${w0}, 0))`;
  const divisor = s.divisor === "override"
    ? "p.divisor"
    : s.divisor === "padded"
    ? `(${hEnd} - ${h0}) * (${wEnd} - ${w0})`
    : `${rows} * ${cols}`;
  // A window with nothing inside the input averages to 0, as PyTorch (validated options never
  // make one; kept so both devices agree anyway).
  return `select(0.0, ${sum} / f32(${divisor}), ${rows} > 0 && ${cols} > 0)`;
}

function header(s: PoolSpec): string[] {
  const half = s.dtype === "float16";
  const inElement = storageType(s.dtype);
  const outElement = s.output === "indices" ? "i32" : storageType(s.dtype);
  const v = s.outputsPerInvocation;
  const src = s.vec4 ? `vec4<${inElement}>` : inElement;
  const dst = s.vectorStore ? `vec${v}<${outElement}>` : outElement;
  return [
    ...(half ? ["enable f16;"] : []),
    "struct Params { total: u32, groups: u32, h: i32, w: i32, oh: u32, ow: u32, off: u32, divisor: i32, " +
    "kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32, dh: i32, dw: i32 }",
    `@group(0) @binding(0) var<storage, read> src: array<${src}>;`,
    `@group(0) @binding(1) var<storage, read_write> dst: array<${dst}>;`,
    "@group(0) @binding(2) var<uniform> p: Params;",
    `@compute @workgroup_size(${s.workgroupSize})`,
    "fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {",
    `  let g = gid.x + gid.y * nwg.x * ${s.workgroupSize}u;`,
    // Whole teams leave together (the total is a multiple of the team).
    "  if (g >= p.total) { return; }",
    // row = plane * OH + oh; the invocation's outputs start at column ow0 of that row (a team:
    // the output of invocations ow0 * teamSize .. of the row, `lane` among them).
    "  let row = g / p.groups;",
    ...(s.variant === "team"
      ? [
        `  let ow0 = i32((g - row * p.groups) / ${s.teamSize}u);`,
        `  let lane = (g - row * p.groups) % ${s.teamSize}u;`,
      ]
      : [`  let ow0 = i32((g - row * p.groups) * ${v}u);`]),
    "  let oh = i32(row % p.oh);",
    "  let base = p.off + (row / p.oh) * u32(p.h) * u32(p.w);",
    "  let out_base = row * p.ow + u32(ow0);",
  ];
}

/** Stores the invocation's results `r[v]` (compute type, or i32 indices). */
function store(e: Emitter, results: string[]): void {
  const s = e.s;
  const conv = (x: string) => (s.output === "indices" ? x : storeAs(s.dtype, x));
  const v = results.length;
  if (s.vectorStore) {
    const element = s.output === "indices" ? "i32" : storageType(s.dtype);
    e.push(`dst[out_base / ${v}u] = vec${v}<${element}>(${results.map(conv).join(", ")});`);
    return;
  }
  results.forEach((r, k) => {
    const write = `dst[out_base + ${k}u] = ${conv(r)};`;
    // The first output exists whenever the invocation does; the others may pass the row's end.
    e.push(k === 0 ? write : `if (ow0 + ${k} < i32(p.ow)) { ${write} }`);
  });
}

/** Straight-line code for a regular window: rows, shared columns and outputs all unrolled. */
function unrolledRegular(e: Emitter): void {
  const s = e.s;
  const [kh, kw] = s.kernel;
  const [sh, sw] = s.stride;
  const [ph, pw] = s.padding;
  const [dh, dw] = s.dilation;
  const v = s.outputsPerInvocation;
  const indices = s.output === "indices";
  e.push(`let h0 = oh * ${sh} - ${ph};`, `let w0 = ow0 * ${sw} - ${pw};`);
  // Column offsets from w0 that some output's window touches, each loaded once per row.
  const offsets = new Set<number>();
  for (let o = 0; o < v; o++) for (let j = 0; j < kw; j++) offsets.add(o * sw + j * dw);
  const columns = [...offsets].sort((a, b) => a - b);
  if (!s.vec4) {
    for (const c of columns) {
      e.push(`let c${c} = w0 + ${c};`);
      e.push(`let cv${c} = ${pw > 0 ? `c${c} >= 0 && ` : ""}c${c} < p.w;`);
    }
  }
  const acc = (o: number) => `m${o}`;
  for (let o = 0; o < v; o++) {
    e.push(`var ${acc(o)}: ${e.t} = ${e.pad};`);
    if (indices) {
      // PyTorch starts the index at the first in-range element of the window.
      e.push(
        `var k${o}: i32 = ${firstInRange("h0", `${dh}`)} * p.w + ${
          firstInRange(`(w0 + ${o * sw})`, `${dw}`)
        };`,
      );
    }
  }
  const vectors = Math.ceil((columns[columns.length - 1] + 1) / 4);
  for (let i = 0; i < kh; i++) {
    const r = `r${i}`;
    e.push(`let ${r} = h0 + ${i * dh};`);
    e.push(`let rv${i} = ${ph > 0 ? `${r} >= 0 && ` : ""}${r} < p.h;`);
    e.push(`let ro${i} = base + u32(${r} * p.w);`);
    const x = (c: number) => `x${i}_${c}`;
    if (s.vec4) {
      // w0 and the row start are multiples of 4 and so is W: a vector is all in or all out.
      const vt = `vec4<${e.t}>`;
      for (let q = 0; q < vectors; q++) {
        e.push(
          `var q${i}_${q} = ${vt}(${e.pad});`,
          `if (rv${i} && w0 + ${4 * q} < p.w) { q${i}_${q} = ${
            s.dtype === "float16"
              ? `${vt}(src[(ro${i} + u32(w0)) / 4u + ${q}u])`
              : `src[(ro${i} + u32(w0)) / 4u + ${q}u]`
          }; }`,
        );
      }
      for (const c of columns) e.push(`let ${x(c)} = q${i}_${c >> 2}.${"xyzw"[c & 3]};`);
    } else {
      for (const c of columns) {
        e.push(`var ${x(c)}: ${e.t} = ${e.pad};`);
        e.push(`if (rv${i} && cv${c}) { ${x(c)} = ${e.load(`ro${i} + u32(c${c})`)}; }`);
      }
    }
    for (let o = 0; o < v; o++) {
      for (let j = 0; j < kw; j++) {
        const c = o * sw + j * dw;
        e.push(...e.update(acc(o), `k${o}`, x(c), () => `${r} * p.w + w0 + ${c}`));
      }
    }
  }
  const results: string[] = [];
  for (let o = 0; o < v; o++) {
    if (s.op === "avg") {
      results.push(
        average(s, acc(o), "h0", `(w0 + ${o * sw})`, [`${kh}`, `${kw}`], [`${ph}`, `${pw}`]),
      );
    } else results.push(indices ? `k${o}` : acc(o));
  }
  store(e, results);
}

/** Adaptive bin bounds of output (oh, ow0): rows [hs, he), columns [ws, we). */
function adaptiveBounds(e: Emitter): void {
  e.push(
    "let hs = i32((u32(oh) * u32(p.h)) / p.oh);",
    "let he = i32((u32(oh + 1) * u32(p.h) + p.oh - 1u) / p.oh);",
    "let ws = i32((u32(ow0) * u32(p.w)) / p.ow);",
    "let we = i32((u32(ow0 + 1) * u32(p.w) + p.ow - 1u) / p.ow);",
  );
}

/** Straight-line code for an adaptive bin, masked to the largest bin's size. */
function unrolledAdaptive(e: Emitter): void {
  const s = e.s;
  const [kh, kw] = s.kernel;
  adaptiveBounds(e);
  e.push(`var m0: ${e.t} = ${e.pad};`);
  if (s.output === "indices") e.push("var k0: i32 = hs * p.w + ws;");
  for (let j = 0; j < kw; j++) e.push(`let cv${j} = ws + ${j} < we;`);
  for (let i = 0; i < kh; i++) {
    e.push(`let rv${i} = hs + ${i} < he;`, `let ro${i} = base + u32((hs + ${i}) * p.w + ws);`);
    for (let j = 0; j < kw; j++) {
      const x = `x${i}_${j}`;
      e.push(`var ${x}: ${e.t} = ${e.pad};`);
      e.push(`if (rv${i} && cv${j}) { ${x} = ${e.load(`ro${i} + ${j}u`)}; }`);
      e.push(...e.update("m0", "k0", x, () => `(hs + ${i}) * p.w + ws + ${j}`));
    }
  }
  store(e, [
    s.op === "avg" ? `m0 / f32(he - hs) / f32(we - ws)` : s.output === "indices" ? "k0" : "m0",
  ]);
}

/**
 * The window of output (oh, ow0) clipped to the input, with sizes from the uniform block: rows
 * [hs, he) stepping by dh, columns [ws, we) stepping by dw (regular windows also `h0`, `w0`).
 */
function windowBounds(e: Emitter): void {
  const s = e.s;
  if (s.window === "adaptive") {
    adaptiveBounds(e);
    e.push("let dh = 1;", "let dw = 1;");
  } else {
    e.push(
      "let h0 = oh * p.sh - p.ph;",
      "let w0 = ow0 * p.sw - p.pw;",
      "let dh = p.dh;",
      "let dw = p.dw;",
      // PyTorch's clipped window: first in-range row stepping by the dilation, end at the input.
      `let hs = ${firstInRange("h0", "dh")};`,
      `let ws = ${firstInRange("w0", "dw")};`,
      "let he = min(h0 + (p.kh - 1) * dh + 1, p.h);",
      "let we = min(w0 + (p.kw - 1) * dw + 1, p.w);",
    );
  }
}

/**
 * What the looped and team variants store from the window's `m0` (sum or maximum) and `k0`
 * (index): the average, the index or the maximum.
 */
function windowResult(s: PoolSpec): string {
  if (s.op === "max") return s.output === "indices" ? "k0" : "m0";
  return s.window === "adaptive"
    ? "m0 / f32(he - hs) / f32(we - ws)"
    : average(s, "m0", "h0", "w0", ["p.kh", "p.kw"], ["p.ph", "p.pw"]);
}

/** Loops over the window with sizes from the uniform block. */
function looped(e: Emitter): void {
  const s = e.s;
  windowBounds(e);
  e.push(`var m0: ${e.t} = ${e.pad};`);
  if (s.output === "indices") e.push("var k0: i32 = hs * p.w + ws;");
  e.push(
    "for (var r = hs; r < he; r += dh) {",
    "  let ro = base + u32(r * p.w);",
    "  for (var c = ws; c < we; c += dw) {",
    `    let x = ${e.load("ro + u32(c)")};`,
    ...e.update("m0", "k0", "x", () => "r * p.w + c").map((l) => `    ${l}`),
    "  }",
    "}",
  );
  store(e, [windowResult(s)]);
}

/**
 * Pooling by teams (see the module comment): lane l starts at element l of the clipped window in
 * row-major order and steps by the team size, carrying its (row, column) by whole rows and a
 * remainder instead of dividing per element, four elements (four loads in flight) per step.
 * Averages: the lanes' sums are added by a butterfly of shuffles (any order: the tolerance of
 * averages does not depend on it). Maxima: each lane keeps PyTorch's running maximum and its
 * position (visiting its elements in order, it keeps its first maximum and its last NaN), and the
 * butterfly keeps the best pair of two lanes by the same rule: a NaN over a number and the later
 * of two NaNs, else the greater value and, between equal ones (-0 and +0), the earlier. That is the
 * serial walk's result, bit for bit and index for index. Lane 0 stores.
 */
function team(e: Emitter): void {
  const s = e.s;
  const T = s.teamSize;
  const max = s.op === "max";
  const float = s.dtype !== "int32";
  // No position yet: a window whose every element equals the padding value keeps PyTorch's
  // starting index, the first in-range element.
  const none = "2147483647";
  windowBounds(e);
  e.push(
    "let rows = select(0, (he - hs + dh - 1) / dh, he > hs);",
    "let cols = max(select(0, (we - ws + dw - 1) / dw, we > ws), 1);",
    `let row_step = ${T} / cols;`,
    `let col_step = ${T} % cols;`,
    "var r = i32(lane) / cols;",
    "var c = i32(lane) % cols;",
    "let count = rows * cols;",
    `var m0: ${e.t} = ${e.pad};`,
    ...(max ? [`var k0: i32 = ${none};`] : []),
    `for (var k = i32(lane); k < count; k += ${4 * T}) {`,
  );
  for (let u = 0; u < 4; u++) {
    e.push(
      `  let a${u} = (hs + r * dh) * p.w + ws + c * dw;`,
      `  var x${u}: ${e.t} = ${e.pad};`,
      `  if (k + ${u * T} < count) { x${u} = ${e.load(`base + u32(a${u})`)}; }`,
      "  c += col_step;",
      "  r += row_step;",
      "  if (c >= cols) { c -= cols; r += 1; }",
    );
  }
  if (!max) e.push("  m0 = m0 + ((x0 + x1) + (x2 + x3));", "}");
  else {
    for (let u = 0; u < 4; u++) {
      const better = float ? `x${u} > m0 || g_isnan(x${u})` : `x${u} > m0`;
      e.push(`  if (${better}) { m0 = x${u}; k0 = a${u}; }`);
    }
    e.push("}");
  }
  for (let mask = T / 2; mask >= 1; mask /= 2) {
    if (!max) {
      e.push(`m0 = m0 + subgroupShuffleXor(m0, ${mask}u);`);
      continue;
    }
    const nan = (x: string) => (float ? `g_isnan(${x})` : "false");
    e.push(
      "{",
      `  let om = subgroupShuffleXor(m0, ${mask}u);`,
      `  let ok = subgroupShuffleXor(k0, ${mask}u);`,
      `  let om_nan = ${nan("om")};`,
      `  let m_nan = ${nan("m0")};`,
      "  let greater = (om_nan && !m_nan) || (!m_nan && (om > m0 || (om == m0 && ok < k0)));",
      "  let other = select(greater, ok > k0, om_nan && m_nan);",
      "  if (other) { m0 = om; k0 = ok; }",
      "}",
    );
  }
  e.push("if (lane == 0u) {");
  if (max) e.push(`if (k0 == ${none}) { k0 = hs * p.w + ws; }`);
  store(e, [windowResult(s)]);
  e.push("}");
}

/**
 * Generates the WGSL source of a spec.
 *
 * @example
 * ```ts
 * const spec: PoolSpec = {
 *   op: "max", output: "values", dtype: "float32", window: "regular", variant: "unrolled",
 *   kernel: [2, 2], stride: [2, 2], padding: [0, 0], dilation: [1, 1],
 *   outputsPerInvocation: 4, vec4: true, vectorStore: true, divisor: "valid", workgroupSize: 256,
 *   teamSize: 1,
 * };
 * const wgsl = generatePool(spec); // straight-line code, two vec4 loads per window row
 * ```
 */
export function generatePool(s: PoolSpec): string {
  const e = new Emitter(s);
  if (s.variant === "team") team(e);
  else if (s.variant === "looped") looped(e);
  else if (s.window === "adaptive") unrolledAdaptive(e);
  else unrolledRegular(e);
  const main = [...header(s), ...e.lines, "}"].join("\n");
  return `${main}\n${preludeFor(main)}\n`;
}
