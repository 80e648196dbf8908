/**
 * Generates one WGSL compute kernel from an elementwise expression: every node of the expression
 * becomes straight-line code in one invocation, inputs are read through their strides (no copies
 * for broadcasts, transposes or slices), and a vec4 variant serves contiguous inputs.
 * @module
 */
import { isContiguous } from "../core/shape.ts";
import { type DType, f16BitsToF32, f32ToF16Bits } from "../core/dtype.ts";
import type { Expr } from "../ir/expr.ts";
import { constantNodes, exprKey, postOrder } from "../ir/expr.ts";
import { opDef } from "../ir/elementwise_table.ts";

import { computeType, convert, loadAs, preludeFor, storageType, storeAs } from "./_wgsl_types.ts";

/**
 * How an input is laid out relative to the output. Besides contiguous and general strided reads,
 * the common broadcasts get their own addressing: a scalar, a row vector repeated down the rows
 * (`[N]` against `[M, N]`), and a column repeated along each row (`[M, 1]` against `[M, N]`).
 * "transposed" (set by the backend, never by {@link inputMode}, and only in a tiled kernel): a
 * matrix stored with its last two axes swapped, read through a tile of workgroup memory.
 */
export type InputMode = "contiguous" | "scalar" | "row" | "column" | "strided" | "transposed";

/** Classifies an input view already broadcast to the output's shape. */
export function inputMode(shape: readonly number[], strides: readonly number[]): InputMode {
  if (strides.every((s) => s === 0)) return "scalar";
  if (isContiguous(shape, strides)) return "contiguous";
  const last = shape.length - 1;
  if (last >= 0 && shape[last] > 1) {
    const lead = strides.slice(0, last);
    if (strides[last] === 1 && lead.every((s, i) => s === 0 || shape[i] === 1)) return "row";
    if (strides[last] === 0 && isContiguous(shape.slice(0, last), lead)) return "column";
  }
  return "strided";
}

/** Whether vec4 loads can serve these inputs: aligned offsets, rows a multiple of 4 long. */
export function vec4Layout(
  shape: readonly number[],
  inputs: readonly { mode: InputMode; offset: number }[],
): boolean {
  const rowLength = shape[shape.length - 1] ?? 1;
  return inputs.every((i) =>
    i.mode === "scalar" ||
    (i.mode === "contiguous" && i.offset % 4 === 0) ||
    (i.mode === "row" && i.offset % 4 === 0 && rowLength % 4 === 0) ||
    (i.mode === "column" && rowLength % 4 === 0)
  );
}

/** Everything the generated code depends on; `elementwiseKey` of it keys the pipeline cache. */
export interface ElementwiseSpec {
  expr: Expr;
  inputs: { dtype: DType; mode: InputMode }[];
  outDtype: DType;
  /** Rank used to decompose the index for strided inputs. */
  rank: number;
  /**
   * Where element t of the result goes: "fresh", at t (a new buffer); into a target view (concat
   * and stack parts): "block", at offset + t (a part that is one contiguous block of the result);
   * "rows", at offset + (t / L) * S + t % L, with L and S in the output's stride slot (runs of L
   * contiguous elements, S apart: a part along an inner axis); "strided", through its strides.
   * vec4 stores serve all but "strided".
   */
  output: "fresh" | "block" | "rows" | "strided";
  /** Four elements per invocation with vector loads (every input contiguous or scalar, aligned). */
  vec4: boolean;
  /**
   * Tiles of {@link TILE_SIDE} x {@link TILE_SIDE} outputs per workgroup (of one of
   * `TILED_WORKGROUP_SIZES` (src/plans/elementwise.ts)): "transposed" inputs are loaded along their stored rows into
   * workgroup memory and read from there across, so every load and store is coalesced.
   */
  tiled?: boolean;
  workgroupSize: number;
}

/** A tiled kernel's tile side (outputs and transposed inputs: 32 x 32 elements). */
export const TILE_SIDE = 32;

/** Cache key of a spec. */
export function elementwiseKey(s: ElementwiseSpec): string {
  const inputs = s.inputs.map((i) => `${i.dtype}:${i.mode}`).join(",");
  return `ew|${exprKey(s.expr)}|${inputs}|${s.outDtype}${
    s.output === "fresh" ? "" : `:${s.output}`
  }|r${s.rank}|${s.vec4 ? "v4" : s.tiled ? "tiled" : "s"}|wg${s.workgroupSize}`;
}

/**
 * Words of the uniform block: header, offsets, shape, strides per input (a target output takes
 * the slot after the last input); the expression's constants follow (`consts`).
 */
function layout(s: ElementwiseSpec) {
  const slots = s.inputs.length + (s.output === "fresh" ? 0 : 1);
  const offsetVecs = Math.max(1, Math.ceil(slots / 4));
  const shapeBase = 4 + offsetVecs * 4;
  const strideBase = shapeBase + 8;
  return { slots, offsetVecs, shapeBase, strideBase, words: strideBase + 8 * Math.max(1, slots) };
}

/** Packs the uniform block for one dispatch; a target output's offset and strides come last. */
export function elementwiseUniforms(
  s: ElementwiseSpec,
  n: number,
  offsets: readonly number[],
  shape: readonly number[],
  strides: readonly (readonly number[])[],
): Uint32Array {
  const l = layout(s);
  const u = new Uint32Array(l.words);
  u[0] = n;
  u[1] = shape.length;
  offsets.forEach((o, k) => (u[4 + k] = o));
  shape.forEach((d, i) => (u[l.shapeBase + i] = d));
  strides.forEach((st, k) => st.forEach((v, i) => (u[l.strideBase + 8 * k + i] = v)));
  return withConstants(u, constantWords(s.expr));
}

const bitsF32 = new Float32Array(1);
const bitsU32 = new Uint32Array(bitsF32.buffer);

/** The uniform word of a constant of `dtype`: its compute type's bits (bool: 0 or 1). */
function constantWord(value: number, dtype: DType): number {
  switch (computeType(dtype)) {
    case "f32":
      // A float16 constant holds a half-precision value, as it does on WASM.
      bitsF32[0] = dtype === "float16" ? f16BitsToF32(f32ToF16Bits(value)) : value;
      return bitsU32[0];
    case "i32":
      return (value | 0) >>> 0;
    case "u32":
      return value >>> 0;
    case "bool":
      return value ? 1 : 0;
  }
}

/**
 * The uniform words of an expression's constants in slot order (see {@link emitBody}). They are
 * data, not shader text: a new scalar compiles no new kernel. And the compiler cannot fold them:
 * WGSL lets a driver assume that no infinity or NaN occurs, and folding lets it act on that
 * (lavapipe compiles `x / 0.0`, a literal zero, to 0).
 */
export function constantWords(root: Expr): number[] {
  return constantNodes(root).map((e) => constantWord(e.value, e.dtype));
}

/**
 * The last member of a Params struct holding `count` constant slots (`p.consts`), or "" for none.
 * Its packer puts the words at the next 16-byte boundary: {@link withConstants}.
 */
export function constantsMember(count: number): string {
  return count > 0 ? `, consts: array<vec4<u32>, ${Math.ceil(count / 4)}>` : "";
}

/** A uniform block with `constants` appended as the Params struct's trailing `consts` member. */
export function withConstants(u: Uint32Array, constants: readonly number[]): Uint32Array {
  if (!constants.length) return u;
  const at = Math.ceil(u.length / 4) * 4;
  const out = new Uint32Array(at + Math.ceil(constants.length / 4) * 4);
  out.set(u);
  out.set(constants, at);
  return out;
}

/** Reads constant slot `slot` of `p.consts` in the compute type of `dtype`. */
function constantRead(slot: number, dtype: DType): string {
  const word = `p.consts[${slot >> 2}][${slot & 3}]`;
  switch (computeType(dtype)) {
    case "f32":
      return `bitcast<f32>(${word})`;
    case "i32":
      return `bitcast<i32>(${word})`;
    case "u32":
      return word;
    case "bool":
      return `(${word} != 0u)`;
  }
}

/**
 * An f32 value passed through the kernel's uniform word `zero`, which is always 0: the same
 * value, but the compiler cannot see through it. WGSL does not make float arithmetic exact, so
 * without it drivers rewrite across ops as if floats were reals ((a + b) - a to b, exp(log(x))
 * to x, -y + y to 0, a * b + c to an fma); behind it each op rounds as its own kernel would.
 */
export function opaqueF32(v: string, zero: string): string {
  return `bitcast<f32>(bitcast<u32>(${v}) ^ ${zero})`;
}

/**
 * A value of compute type `type` passed through `zero` as {@link opaqueF32} does; integers too:
 * an H200 computed a fused min(b, i32(0u - x)) as if the cast of the negation were i32(x)
 * (-1810558113 for -3), right op by op. Bools pass as they are.
 */
function opaque(v: string, type: string, zero: string): string {
  if (type === "f32") return opaqueF32(v, zero);
  if (type === "i32") return `bitcast<i32>(bitcast<u32>(${v}) ^ ${zero})`;
  return type === "u32" ? `(${v} ^ ${zero})` : v;
}

/** Where {@link emitBody} finds a kernel's zero word and its constants. */
export interface BodyOptions {
  /** The kernel's uniform word that is always 0 (default `p.pad0`). */
  zero?: string;
  /** The expression's first constant slot in `p.consts` (default 0). */
  constantBase?: number;
}

/**
 * WGSL of `gyre_epilogue(result, ...indexParams)`, a fused elementwise consumer of a kernel's
 * result (matmul, reductions): input 0 is the result, rounded to float16 as its unfused store
 * would round it; input k >= 1 is read from `epilogue_in{k}` at `indexOf(k - 1)`, an expression
 * of the index parameters. `options` name the kernel's zero word and the first constant slot.
 */
export function epilogueFunction(
  expr: Expr,
  valueDtype: DType,
  inputDtypes: readonly DType[],
  indexParams: readonly string[],
  indexOf: (input: number) => string,
  options: BodyOptions = {},
): string {
  const params = [`result: ${computeType(valueDtype)}`, ...indexParams.map((n) => `${n}: u32`)];
  const value = valueDtype === "float16" ? "g_round_f16(result)" : "result";
  // Stored and read back when unfused: nothing of the producer's arithmetic may merge with ours.
  const x0 = opaque(value, computeType(valueDtype), options.zero ?? "p.pad0");
  return [
    `fn gyre_epilogue(${params.join(", ")}) -> ${computeType(expr.dtype)} {`,
    `  let x0 = ${x0};`,
    ...inputDtypes.map((dtype, k) =>
      `  let x${k + 1} = ${loadAs(dtype, `epilogue_in${k + 1}[${indexOf(k)}]`)};`
    ),
    emitBody(expr, options),
    "}",
  ].join("\n");
}

/**
 * Emits the body of `f`: one `let` per distinct inner node in post-order (shared subexpressions
 * are computed once), then the result. `x{k}` are inputs in compute type, `idx` the linear index.
 * Constants are read from the uniforms (`p.consts`, from slot `options.constantBase` on, in the
 * order of {@link constantNodes}), and every float and integer node's value goes through
 * {@link opaqueF32} (or its integer form), so a fused kernel rounds exactly as the op-by-op kernels
 * do.
 */
export function emitBody(root: Expr, options: BodyOptions = {}): string {
  const zero = options.zero ?? "p.pad0";
  let slot = options.constantBase ?? 0;
  const names = new Map<Expr, string>();
  const lines: string[] = [];
  const ref = (e: Expr): string => names.get(e)!;
  for (const e of postOrder(root)) {
    let code: string;
    switch (e.kind) {
      case "input":
        names.set(e, `x${e.index}`);
        continue;
      case "view":
      case "producer":
        throw new Error("internal: a pending expression reached the code generator unbound");
      case "const":
        names.set(e, constantRead(slot++, e.dtype));
        continue;
      case "index":
        names.set(e, "idx");
        continue;
      case "cast":
        code = convert(e.x.dtype, e.dtype, ref(e.x));
        break;
      case "where":
        code = `select(${ref(e.b)}, ${ref(e.a)}, ${ref(e.cond)})`;
        break;
      case "unary": {
        const t = opDef(e.op).wgsl[computeType(e.x.dtype)];
        if (!t) throw new Error(`internal: ${e.op} has no WGSL for ${e.x.dtype}`);
        code = roundIfHalf(e.dtype, t(ref(e.x), ""));
        break;
      }
      case "binary": {
        const t = opDef(e.op).wgsl[computeType(e.a.dtype)];
        if (!t) throw new Error(`internal: ${e.op} has no WGSL for ${e.a.dtype}`);
        // One value on both sides (x - x, x / x): the compiler would fold the op away (Inf - Inf
        // is NaN, not 0), so the second operand goes through a differently derived zero.
        const b = ref(e.a) === ref(e.b) && computeType(e.b.dtype) === "f32"
          ? opaqueF32(ref(e.b), `(${zero} >> 1u)`)
          : ref(e.b);
        code = roundIfHalf(e.dtype, t(ref(e.a), b));
        break;
      }
    }
    const type = computeType(e.dtype);
    const name = `t${lines.length}`;
    // Each node's own zero (the word times an odd number): two nodes computing the same value
    // (x.exp() twice) stay two values, which the compiler cannot subtract to 0.
    const own = lines.length ? `(${zero} * ${2 * lines.length + 1}u)` : zero;
    lines.push(`  let ${name}: ${type} = ${opaque(code, type, own)};`);
    names.set(e, name);
  }
  return `${lines.join("\n")}\n  return ${ref(root)};`;
}

/**
 * A float16 node's value is rounded to half precision, as its storage would be: by bit
 * arithmetic, because a driver may fold f32(f16(x)) back to x (NVIDIA's did), which a fused
 * kernel would then compute on unrounded, and f16() of a value past float16's range is
 * indeterminate (the WASM reference rounds it to infinity).
 */
function roundIfHalf(dtype: DType, code: string): string {
  return dtype === "float16" ? `g_round_f16(${code})` : code;
}

function usesHalf(s: ElementwiseSpec): boolean {
  return s.outDtype === "float16" || s.inputs.some((i) => i.dtype === "float16") ||
    postOrder(s.expr).some((e) => e.dtype === "float16");
}

const off = (k: number) => `p.off[${k >> 2}][${k & 3}]`;
const dim = (d: number) => `p.shape[${d >> 2}][${d & 3}]`;
const stride = (k: number, d: number) => `p.strides[${2 * k + (d >> 2)}][${d & 3}]`;

/**
 * Lines that set `o{k}{suffix}`, input k's element for output element `index`, and `o_out`
 * where the output is strided ("transposed" inputs are read elsewhere).
 */
function operandOffsets(s: ElementwiseSpec, index: string, suffix: string): string[] {
  const lines: string[] = [];
  const K = s.inputs.length;
  const rowLength = dim(Math.max(0, s.rank - 1));
  const strided = s.output === "strided";
  if (strided) lines.push(`  var o_out = ${off(K)};`);
  s.inputs.forEach((input, k) => {
    const o = `o${k}${suffix}`;
    if (input.mode === "contiguous") lines.push(`  let ${o} = ${off(k)} + ${index};`);
    else if (input.mode === "scalar") lines.push(`  let ${o} = ${off(k)};`);
    else if (input.mode === "row") lines.push(`  let ${o} = ${off(k)} + ${index} % ${rowLength};`);
    else if (input.mode === "column") {
      lines.push(`  let ${o} = ${off(k)} + ${index} / ${rowLength};`);
    } else if (input.mode === "strided") lines.push(`  var ${o} = ${off(k)};`);
  });
  if (strided || s.inputs.some((i) => i.mode === "strided")) {
    lines.push(`  var rest${suffix} = ${index};`);
    for (let d = s.rank - 1; d >= 0; d--) {
      lines.push(
        d > 0
          ? `  let c${d}${suffix} = rest${suffix} % ${dim(d)}; rest${suffix} = rest${suffix} / ${
            dim(d)
          };`
          : `  let c0${suffix} = rest${suffix};`,
      );
      s.inputs.forEach((input, k) => {
        if (input.mode === "strided") {
          lines.push(`  o${k}${suffix} += c${d}${suffix} * ${stride(k, d)};`);
        }
      });
      if (strided) lines.push(`  o_out += c${d}${suffix} * ${stride(K, d)};`);
    }
  }
  return lines;
}

/**
 * The tiled kernel's body: workgroup g takes the output tile at (row0, col0) of matrix b. Each
 * "transposed" input's tile is loaded along its stored rows (lane x reads matrix row row0 + x, so a
 * row of lanes reads 32 neighbouring words) into workgroup memory, padded to 33 columns so that
 * the reads across it hit 32 banks. Every other input's loads go out before the barrier too; the
 * outputs are then written along their rows. Invocations past the edge load in-range elements
 * (clamped) and store nothing.
 */
function tiledBody(s: ElementwiseSpec): string[] {
  const R = dim(s.rank - 2), C = dim(s.rank - 1);
  const tileRows = s.workgroupSize / TILE_SIDE;
  const per = TILE_SIDE / tileRows;
  const lines = [
    "  let g = wid.x + wid.y * nwg.x;",
    `  let tiles_c = (${C} + ${TILE_SIDE - 1}u) / ${TILE_SIDE}u;`,
    `  let tiles = ((${R} + ${TILE_SIDE - 1}u) / ${TILE_SIDE}u) * tiles_c;`,
    `  let matrix = ${R} * ${C};`,
    "  let b = g / tiles;",
    // Whole workgroups past the last tile (a folded grid) leave together: the barrier stays uniform.
    "  if (b * matrix >= p.n) { return; }",
    `  let row0 = ((g % tiles) / tiles_c) * ${TILE_SIDE}u;`,
    `  let col0 = (g % tiles_c) * ${TILE_SIDE}u;`,
    `  let x = lid % ${TILE_SIDE}u;`,
    `  let y = lid / ${TILE_SIDE}u;`,
  ];
  s.inputs.forEach((input, k) => {
    if (input.mode !== "transposed") return;
    // The matrix's start: the batch index through the leading axes' strides.
    lines.push(`  var base${k} = ${off(k)};`, `  var rest_b${k} = b;`);
    for (let d = s.rank - 3; d >= 0; d--) {
      lines.push(
        `  base${k} += (rest_b${k} % ${dim(d)}) * ${stride(k, d)}; rest_b${k} = rest_b${k} / ${
          dim(d)
        };`,
      );
    }
    for (let i = 0; i < per; i++) {
      const c = `(col0 + y + ${i * tileRows}u)`;
      lines.push(
        `  tile${k}[(y + ${i * tileRows}u) * ${
          TILE_SIDE + 1
        }u + x] = in${k}[base${k} + min(row0 + x, ${R} - 1u) * ${
          stride(k, s.rank - 2)
        } + min(${c}, ${C} - 1u) * ${stride(k, s.rank - 1)}];`,
      );
    }
  });
  for (let i = 0; i < per; i++) {
    lines.push(
      `  let r${i} = row0 + y + ${i * tileRows}u;`,
      `  let ok${i} = r${i} < ${R} && col0 + x < ${C};`,
      `  let t${i} = select(0u, b * matrix + r${i} * ${C} + col0 + x, ok${i});`,
      ...operandOffsets(s, `t${i}`, `_${i}`),
    );
    s.inputs.forEach((input, k) => {
      if (input.mode !== "transposed") lines.push(`  let v${k}_${i} = in${k}[o${k}_${i}];`);
    });
  }
  lines.push("  workgroupBarrier();");
  for (let i = 0; i < per; i++) {
    const args = s.inputs.map((input, k) =>
      loadAs(
        input.dtype,
        input.mode === "transposed"
          ? `tile${k}[x * ${TILE_SIDE + 1}u + y + ${i * tileRows}u]`
          : `v${k}_${i}`,
      )
    ).concat(`t${i}`);
    lines.push(`  if (ok${i}) { out[t${i}] = ${storeAs(s.outDtype, `f(${args.join(", ")})`)}; }`);
  }
  return lines;
}

/** Where element `t` goes in a "fresh", "block" or "rows" output (see `ElementwiseSpec.output`). */
function outputIndex(s: ElementwiseSpec, t: string): string {
  const K = s.inputs.length;
  if (s.output === "block") return `(${off(K)} + ${t})`;
  if (s.output === "rows") {
    return `(${off(K)} + (${t} / ${stride(K, 0)}) * ${stride(K, 1)} + (${t}) % ${stride(K, 0)})`;
  }
  return t;
}

/** Generates the WGSL source of a spec. */
export function generateElementwise(s: ElementwiseSpec): string {
  const l = layout(s);
  const wg = s.workgroupSize;
  const lines: string[] = [];
  if (usesHalf(s)) lines.push("enable f16;");
  lines.push(
    `struct Params { n: u32, rank: u32, pad0: u32, pad1: u32, off: array<vec4<u32>, ${l.offsetVecs}>, shape: array<vec4<u32>, 2>, strides: array<vec4<u32>, ${
      Math.max(2, 2 * l.slots)
    }>${constantsMember(constantNodes(s.expr).length)} }`,
  );
  s.inputs.forEach((input, k) => {
    const elem = storageType(input.dtype);
    const vector = s.vec4 && (input.mode === "contiguous" || input.mode === "row");
    const type = vector ? `vec4<${elem}>` : elem;
    lines.push(`@group(0) @binding(${k}) var<storage, read> in${k}: array<${type}>;`);
  });
  const outElem = storageType(s.outDtype);
  lines.push(
    `@group(0) @binding(${s.inputs.length}) var<storage, read_write> out: array<${
      s.vec4 ? `vec4<${outElem}>` : outElem
    }>;`,
  );
  lines.push(`@group(0) @binding(${s.inputs.length + 1}) var<uniform> p: Params;`);
  const params = s.inputs.map((i, k) => `x${k}: ${computeType(i.dtype)}`).concat("idx: u32");
  lines.push(`fn f(${params.join(", ")}) -> ${computeType(s.outDtype)} {\n${emitBody(s.expr)}\n}`);
  const rowLength = dim(Math.max(0, s.rank - 1));
  s.inputs.forEach((input, k) => {
    if (input.mode !== "transposed") return;
    const words = TILE_SIDE * (TILE_SIDE + 1);
    lines.push(`var<workgroup> tile${k}: array<${storageType(input.dtype)}, ${words}>;`);
  });
  lines.push(`@compute @workgroup_size(${wg})`);
  lines.push(
    "fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {",
  );
  lines.push(`  let t = gid.x + gid.y * nwg.x * ${wg}u;`);
  if (s.vec4) {
    lines.push("  if (t * 4u >= p.n) { return; }");
    s.inputs.forEach((input, k) => {
      const load = {
        contiguous: `in${k}[${off(k)} / 4u + t]`,
        row: `in${k}[(${off(k)} + (t * 4u) % ${rowLength}) / 4u]`,
        // A row length that is a multiple of 4 keeps all four lanes in one row.
        column: `vec4(in${k}[${off(k)} + (t * 4u) / ${rowLength}])`,
        scalar: `vec4(in${k}[${off(k)}])`,
        strided: "",
        transposed: "",
      }[input.mode];
      lines.push(`  let v${k} = ${load};`);
    });
    const lane = (c: string, li: number) =>
      storeAs(
        s.outDtype,
        `f(${
          s.inputs.map((i, k) => loadAs(i.dtype, `v${k}.${c}`)).concat(`t * 4u + ${li}u`).join(", ")
        })`,
      );
    const at = s.output === "fresh" ? "t" : `${outputIndex(s, "t * 4u")} / 4u`;
    lines.push(`  out[${at}] = vec4(${["x", "y", "z", "w"].map(lane).join(", ")});`);
  } else if (s.tiled) {
    lines.push(...tiledBody(s));
  } else {
    lines.push("  if (t >= p.n) { return; }");
    lines.push(...operandOffsets(s, "t", ""));
    const args = s.inputs.map((i, k) => loadAs(i.dtype, `in${k}[o${k}]`)).concat("t");
    const at = s.output === "strided" ? "o_out" : outputIndex(s, "t");
    lines.push(`  out[${at}] = ${storeAs(s.outDtype, `f(${args.join(", ")})`)};`);
  }
  lines.push("}");
  const main = lines.join("\n");
  return `${main}\n${preludeFor(main)}\n`;
}
