/**
 * Generates WGSL row reductions. The input is seen as M rows of R elements (reduced axes last,
 * read through strides). Three variants, chosen by the reduce plan:
 * - `workgroup`: each workgroup reduces one chunk of one row, then combines across the workgroup
 *   through subgroup operations (where the device has them) or a shared-memory tree;
 * - `thread`: one invocation per row, for many short rows;
 * - rows split into C chunks: each row's last workgroup to finish combines the chunks' published
 *   partials in the same dispatch (`lastWorkgroup`), or they are written for a second
 *   `workgroup` pass.
 * The final store can run a fused elementwise consumer (`epilogue`: mean's division, a scale).
 * @module
 */
import type { DType } from "../core/dtype.ts";
import type { ReduceOp } from "../contract/reduce.ts";
import { constantNodes, type Expr, exprKey, readsIndex } from "../ir/expr.ts";
import {
  constantsMember,
  emitBody,
  epilogueFunction,
  withConstants,
} from "./_codegen_elementwise.ts";
import { taggedWordFunctions } from "./_codegen_tagged.ts";
import {
  computeType,
  literal,
  loadAs,
  preludeFor,
  storageType,
  storeAs,
  workgroupBuiltins,
} from "./_wgsl_types.ts";

/** Reductions with a GPU kernel (the backend contract's list). */
export type { ReduceOp };

/**
 * Reductions whose accumulator is a small state vector merged pairwise: logsumexp keeps
 * (running max, sum of exp(x - max)) and reads its input once; moments keeps (count, mean, M2)
 * and merges with Chan et al.'s parallel update (no cancellation-prone sum of squares), writing
 * M2 (the sum of squared deviations).
 */
const STATEFUL: Record<
  string,
  {
    type: string;
    identity: string;
    init: (v: string) => string;
    merge: string;
    final: (a: string) => string;
  }
> = {
  logsumexp: {
    type: "vec2<f32>",
    identity: "vec2<f32>(bitcast<f32>(0xff800000u), 0.0)",
    init: (v) => `vec2<f32>(${v}, 1.0)`,
    merge: "g_lse_merge",
    final: (a) => `g_lse_final(${a})`,
  },
  moments: {
    type: "vec4<f32>",
    identity: "vec4<f32>(0.0)",
    // Centred on the row's first element (see `pivot`). An infinite element makes M2 NaN
    // (x - mean is Inf - Inf), as NumPy and the reference.
    init: (v) => `vec4<f32>(1.0, (${v}) - pivot, g_moments_seed(${v}), 0.0)`,
    merge: "g_moments_merge",
    final: (a) => `${a}.z`,
  },
};

/** The WGSL state type of a stateful reduction (its partials' element type), or undefined. */
export function stateType(op: ReduceOp): string | undefined {
  return STATEFUL[op]?.type;
}

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
  /**
   * An elementwise expression fused in front of the reduction: element i of the reduced tensor is
   * `expr` over input k's element i (input 0 is `src`, of `inDtype`; the others `src1`, ...).
   */
  prologue?: { expr: Expr; inputs: DType[] };
  /** "contiguous": row r is elements [off + r*R, off + r*R + R). "strided": through strides. */
  mode: "contiguous" | "strided";
  outerRank: number;
  innerRank: number;
  variant: "workgroup" | "thread";
  /** Combine across a workgroup with subgroup operations. */
  subgroups: boolean;
  workgroupSize: number;
  /**
   * Workgroup variant over several chunks per row: instead of writing partials for a second
   * pass, each workgroup publishes its partial state and the row's last workgroup to finish
   * (an atomic ticket) combines them and writes the result (see `lastWorkgroupFunctions`).
   */
  lastWorkgroup?: boolean;
  /**
   * With `lastWorkgroup`: the counters and partial words as 64-bit atomics, each word published
   * and read whole (one atomic each), instead of tagged pairs of 32-bit words.
   */
  wideStates?: boolean;
  /** Elementwise work on each result before it is stored (a fused consumer). */
  epilogue?: ReduceEpilogue;
}

/**
 * A fused elementwise consumer of a reduction's result: \`gyre_epilogue(value, index)\` over
 * the result (input 0) and further inputs read at the result's flat index through strides baked
 * into the code, so that \`mean\`'s division or \`sum(x).mul(w).add(b)\` run in the reduction's
 * own store.
 */
export interface ReduceEpilogue {
  /** Part of the pipeline key: equal keys generate equal code. */
  key: string;
  /** Dtypes of the further inputs, bound as \`epilogue_in1\`, ... after the sources. */
  inputs: DType[];
  /** The dtype stored: the expression's, which may differ from the reduction's. */
  dtype: DType;
  /** WGSL of \`gyre_epilogue\`. */
  declarations: string;
  /** The constant slots it reads end before this one (they follow the prologue's). */
  constantSlots: number;
}

/**
 * The epilogue for \`expr\` (input 0: the result, of \`valueDtype\`) with further inputs laid
 * out over the result's shape, or null where it cannot run in the store: another result dtype,
 * negative strides, or an expression that reads the element index. Its constants take the slots
 * from \`constantBase\` on (after a prologue's).
 */
export function reduceEpilogue(
  expr: Expr,
  inputs: readonly {
    dtype: DType;
    offset: number;
    shape: readonly number[];
    strides: readonly number[];
  }[],
  valueDtype: DType,
  constantBase = 0,
): ReduceEpilogue | null {
  if (readsIndex(expr)) return null;
  if (inputs.some((v) => v.strides.some((x) => x < 0))) return null;
  // The flat result index decomposed over each input's (the result's) shape.
  const indexOf = (k: number) => {
    const v = inputs[k];
    const terms = [`${v.offset}u`];
    let inner = 1;
    for (let d = v.shape.length - 1; d >= 0; d--) {
      if (v.shape[d] > 1 && v.strides[d] !== 0) {
        terms.push(`((out_index / ${inner}u) % ${v.shape[d]}u) * ${v.strides[d]}u`);
      }
      inner *= v.shape[d];
    }
    return terms.join(" + ");
  };
  const declarations = epilogueFunction(
    expr,
    valueDtype,
    inputs.map((v) => v.dtype),
    ["out_index"],
    indexOf,
    { constantBase },
  );
  return {
    key: `${exprKey(expr)}@k${constantBase}:${
      inputs.map((v) => `${v.dtype}@${v.offset}/${v.shape.join("x")}/${v.strides.join(",")}`).join(
        ";",
      )
    }`,
    inputs: inputs.map((v) => v.dtype),
    dtype: expr.dtype,
    declarations,
    constantSlots: constantBase + constantNodes(expr).length,
  };
}

/** Cache key of a spec. */
export function reduceKey(s: ReduceSpec): string {
  return `red|${s.op}|${s.inDtype}>${s.outDtype}|${s.valueDtype ?? ""}${s.pairsIn ? "<p" : ""}${
    s.pairsOut ? ">p" : ""
  }|${s.mode}|${s.outerRank}.${s.innerRank}|${s.variant}|${
    s.subgroups ? "sg" : "sh"
  }|wg${s.workgroupSize}${s.vec4 ? "|v4" : ""}${
    s.lastWorkgroup ? (s.wideStates ? "|last64" : "|last") : ""
  }${s.epilogue ? `|epi:${s.epilogue.key}` : ""}${
    s.prologue ? `|pro:${s.prologue.inputs.join(",")}:${exprKey(s.prologue.expr)}` : ""
  }`;
}

/**
 * Uniform words: M, R, C, L, off, pad..., then `dims` vectors: outer shape, outer strides, inner
 * shape, inner strides (input 0), and for each further prologue input its outer and inner strides;
 * then the further inputs' offsets; then the constants (`consts`: the prologue's, then the
 * epilogue's).
 */
function uniformWords(extraInputs: number): number {
  return 8 + 4 * (8 + 4 * extraInputs) + 4 * Math.ceil(extraInputs / 4);
}

/** Strides of one further prologue input, and its offset. */
export interface ExtraInput {
  offset: number;
  outerStrides: readonly number[];
  innerStrides: readonly number[];
}

/** Packs the uniform block for one dispatch. */
export function reduceUniforms(
  rows: number,
  rowLength: number,
  chunks: number,
  chunkLength: number,
  offset: number,
  outer: { shape: readonly number[]; strides: readonly number[] },
  inner: { shape: readonly number[]; strides: readonly number[] },
  extra: readonly ExtraInput[] = [],
  constants: readonly number[] = [],
): Uint32Array {
  const u = new Uint32Array(uniformWords(extra.length));
  u.set([rows, rowLength, chunks, chunkLength, offset]);
  outer.shape.forEach((d, i) => (u[8 + i] = d));
  outer.strides.forEach((d, i) => (u[16 + i] = d));
  inner.shape.forEach((d, i) => (u[24 + i] = d));
  inner.strides.forEach((d, i) => (u[32 + i] = d));
  const offsets = 8 + 4 * (8 + 4 * extra.length);
  extra.forEach((x, k) => {
    const base = 8 + 4 * (8 + 4 * k);
    x.outerStrides.forEach((d, i) => (u[base + i] = d));
    x.innerStrides.forEach((d, i) => (u[base + 8 + i] = d));
    u[offsets + k] = x.offset;
  });
  return withConstants(u, constants);
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
    default:
      return 0; // stateful reductions start from their own identity vector
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
  const state = STATEFUL[s.op];
  if (state) return statefulAccumulator(s, state);
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
    /** Folds the element whose value is `v` (see `elementValue`) at row position `j`. */
    feed(v: string, j: string): string {
      if (!arg) return `acc = ${c("acc", v)};`;
      if (s.pairsIn) {
        return `{ let pair = ${v}; ${take(`bitcast<${t}>(pair.x)`, "pair.y", ["acc", "acc_i"])} }`;
      }
      return `{ let v = ${v}; ${take("v", j, ["acc", "acc_i"])} }`;
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
      if (!arg) return `dst[${to}] = ${storeAs(storedDtype(s), epilogueOf(s, "acc", to))};`;
      if (s.pairsOut) return `dst[${to}] = vec2<u32>(bitcast<u32>(acc), acc_i);`;
      if (!s.epilogue) return `dst[${to}] = i32(acc_i);`;
      return `dst[${to}] = ${storeAs(storedDtype(s), epilogueOf(s, "i32(acc_i)", to))};`;
    },
    better: arg ? betterFunction(s.op as "argmax" | "argmin", t) : "",
    /** The accumulator as 32-bit words, for a partial published to the last workgroup. */
    words: arg ? [valueBits(t, "acc"), "acc_i"] : [valueBits(t, "acc")],
    /** Folds a partial given as words (`words`' layout) into the accumulator. */
    mergeWords: (w: readonly string[]) =>
      arg
        ? take(bitsValue(t, w[0]), w[1], ["acc", "acc_i"])
        : `acc = ${c("acc", bitsValue(t, w[0]))};`,
  };
}

/** The dtype of the final store: the epilogue's, else the reduction's. */
function storedDtype(s: ReduceSpec): DType {
  return s.epilogue && !s.pairsOut ? s.epilogue.dtype : s.outDtype;
}

/** The stored result at flat index `to`: `value`, through the fused epilogue if any. */
function epilogueOf(s: ReduceSpec, value: string, to: string): string {
  return s.epilogue && !s.pairsOut ? `gyre_epilogue(${value}, ${to})` : value;
}

/** A value of compute type `t` as u32 bits. */
function valueBits(t: string, x: string): string {
  return t === "bool" ? `select(0u, 1u, ${x})` : `bitcast<u32>(${x})`;
}

/** The inverse of `valueBits`. */
function bitsValue(t: string, w: string): string {
  return t === "bool" ? `(${w} != 0u)` : `bitcast<${t}>(${w})`;
}

/** The accumulator of a stateful reduction: one state vector, merged by its op's function. */
function statefulAccumulator(s: ReduceSpec, state: (typeof STATEFUL)[string]) {
  const t = state.type;
  const lanes = ["x", "y", "z", "w"].slice(0, Number(/vec(\d)/.exec(t)![1]));
  const c = (a: string, b: string) => `${state.merge}(${a}, ${b})`;
  return {
    arg: false,
    type: t,
    declare: `var acc: ${t} = ${state.identity};`,
    feed: (v: string, _j: string) => `acc = ${c("acc", s.pairsIn ? v : state.init(v))};`,
    shuffle: `acc = ${c("acc", "subgroupShuffleXor(acc, mask)")};`,
    shared: `var<workgroup> shared_acc: array<${t}, ${s.workgroupSize}>;`,
    put: (k: string) => `shared_acc[${k}] = acc;`,
    fold: (into: string, k: string) =>
      `shared_acc[${into}] = ${c(`shared_acc[${into}]`, `shared_acc[${k}]`)};`,
    get: (k: string) => `acc = shared_acc[${k}];`,
    store: (
      to: string,
    ) => (s.pairsOut
      ? `dst[${to}] = acc;`
      : `dst[${to}] = ${storeAs(storedDtype(s), epilogueOf(s, state.final("acc"), to))};`),
    better: "",
    words: lanes.map((l) => `bitcast<u32>(acc.${l})`),
    mergeWords: (w: readonly string[]) =>
      `acc = ${c("acc", `${t}(${w.map((x) => `bitcast<f32>(${x})`).join(", ")})`)};`,
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
 * folded into the accumulator, then a tail of single vectors. Plain reductions fold lane-wise
 * into a vec4 (float max and min by the hardware's, with a NaN probe and an exact second pass
 * where it fires); arg reductions keep a best value and index per lane; logsumexp and moments fold
 * each 16-element step as one block (one rescale or one Chan merge per block instead of one
 * per element, which is what kept them compute-bound).
 */
function vectorLoop(s: ReduceSpec, a: ReturnType<typeof accumulator>, t: string): string[] {
  const wg = s.workgroupSize;
  const valueDtype = s.valueDtype ?? s.outDtype;
  const id = literal(
    identity(s.op, valueDtype),
    valueDtype === "float16" ? "float32" : valueDtype,
  );
  const fold = (x: string, y: string) =>
    s.op === "sum"
      ? `${x} + ${y}`
      : s.op === "prod"
      ? `${x} * ${y}`
      : `vec4(${
        ["x", "y", "z", "w"].map((c) => combine(s.op, t, `${x}.${c}`, `${y}.${c}`)).join(", ")
      })`;
  // Vector i of every input: four lanes of the prologue, or the converted vector itself.
  const load = (i: string) => {
    if (!s.prologue) return s.inDtype === "float16" ? `vec4<f32>(src[${i}])` : `src[${i}]`;
    const names = s.prologue.inputs.map((_, k) => (k === 0 ? "src" : `src${k}`));
    // Input k's vectors sit at its own offset: shift the index by the offsets' difference.
    const at = (k: number) => (k === 0 ? i : `${i} + shift${k}`);
    const lanes = ["x", "y", "z", "w"].map((c) =>
      `f(${names.map((n, k) => v(`${n}[${at(k)}].${c}`, k)).join(", ")}, 0u)`
    );
    return `vec4<${t}>(${lanes.join(", ")})`;
  };
  const v = (x: string, k = 0) => loadAs(s.prologue ? s.prologue.inputs[k] : s.inDtype, x);
  const lanes = ["x", "y", "z", "w"];
  // Feeds the four lanes of `r` (vector j of the row) through the scalar accumulator.
  const feedLanes = (r: string, j: string) =>
    lanes.map((c, k) => a.feed(`${r}.${c}`, `4u * ${j} + ${k}u`)).join(" ");
  const head = [
    "  let base4 = base / 4u;",
    "  let start4 = start / 4u;",
    "  let stop4 = stop / 4u;",
    `  var j = start4 + lid;`,
  ];
  const loads = [
    `    let r0 = ${load("base4 + j")};`,
    `    let r1 = ${load(`base4 + j + ${wg}u`)};`,
    `    let r2 = ${load(`base4 + j + ${2 * wg}u`)};`,
    `    let r3 = ${load(`base4 + j + ${3 * wg}u`)};`,
  ];
  const step = (body: string[]) => [
    `  for (; j + ${3 * wg}u < stop4; j += ${4 * wg}u) {`,
    ...loads,
    ...body,
    "  }",
  ];
  const scalarTail = [
    `  for (; j < stop4; j += ${wg}u) { let r = ${load("base4 + j")}; ${feedLanes("r", "j")} }`,
  ];
  if (s.op === "argmax" || s.op === "argmin") {
    // Lane-wise (best, index); each lane sees its positions in increasing order, so a strict
    // comparison keeps the first occurrence; the first NaN wins; an empty lane takes anything.
    const beats = s.op === "argmax" ? ">" : "<";
    const nan = t === "f32" ? ` | (g_isnan4(r) & !g_isnan4(best4))` : "";
    const take = (r: string, j: string) =>
      `{ let r = ${r}; let b = (r ${beats} best4)${nan} | (best_i4 == vec4<u32>(0xffffffffu)); ` +
      `best4 = select(best4, r, b); best_i4 = select(best_i4, vec4<u32>(4u * (${j})) + vec4<u32>(0u, 1u, 2u, 3u), b); }`;
    return [
      `  var best4 = vec4<${t}>(${id});`,
      "  var best_i4 = vec4<u32>(0xffffffffu);",
      ...head,
      ...step([
        `    ${take("r0", "j")}`,
        `    ${take("r1", `j + ${wg}u`)}`,
        `    ${take("r2", `j + ${2 * wg}u`)}`,
        `    ${take("r3", `j + ${3 * wg}u`)}`,
      ]),
      `  for (; j < stop4; j += ${wg}u) { ${take(load("base4 + j"), "j")} }`,
      ...lanes.map((c) => `  ${a.feed(`best4.${c}`, `best_i4.${c}`)}`),
    ];
  }
  if (s.op === "logsumexp") {
    // A block of 16 finite values joins a finite (or empty) state with one rescale; anything
    // else (NaN, infinities) goes through the exact per-element merge.
    const finite = ["r0", "r1", "r2", "r3"].map((r) => `all(g_isfinite4(${r}))`).join(" && ");
    return [
      ...head,
      ...step([
        // The state is finite, or empty (-Inf, 0): bit tests, which fast-math cannot fold.
        `    if (${finite} && ((bitcast<u32>(acc.x) & 0x7fffffffu) < 0x7f800000u || bitcast<u32>(acc.x) == 0xff800000u)) {`,
        "      let top4 = max(max(r0, r1), max(r2, r3));",
        "      let m = max(max(max(top4.x, top4.y), max(top4.z, top4.w)), acc.x);",
        "      let e4 = (exp(r0 - m) + exp(r1 - m)) + (exp(r2 - m) + exp(r3 - m));",
        "      acc = vec2<f32>(m, acc.y * exp(acc.x - m) + ((e4.x + e4.y) + (e4.z + e4.w)));",
        "    } else {",
        `      ${feedLanes("r0", "j")}`,
        `      ${feedLanes("r1", "j")}`,
        `      ${feedLanes("r2", "j")}`,
        `      ${feedLanes("r3", "j")}`,
        "    }",
      ]),
      ...scalarTail,
    ];
  }
  if (s.op === "moments") {
    // The block's own (16, mean, M2) from its centred values, then one Chan merge. The mean
    // sums values pre-scaled by 1/16 (exact) so that finite values cannot overflow it.
    return [
      // Centred on the row's first element, as the scalar loop (see \`pivot\` below).
      `  let pivot = (${load("base / 4u")}).x;`,
      ...head,
      ...step([
        "    let d0 = r0 - pivot; let d1 = r1 - pivot; let d2 = r2 - pivot; let d3 = r3 - pivot;",
        "    let s4 = (d0 * 0.0625 + d1 * 0.0625) + (d2 * 0.0625 + d3 * 0.0625);",
        "    let mean = (s4.x + s4.y) + (s4.z + s4.w);",
        "    let e0 = d0 - mean; let e1 = d1 - mean; let e2 = d2 - mean; let e3 = d3 - mean;",
        "    let q4 = (e0 * e0 + e1 * e1) + (e2 * e2 + e3 * e3);",
        "    acc = g_moments_merge(acc, vec4<f32>(16.0, mean, (q4.x + q4.y) + (q4.z + q4.w), 0.0));",
      ]),
      ...scalarTail,
    ];
  }
  // The lane-wise exact combine (float max and min: NaN-exact, see g_max_f32).
  const exact = [
    `  var acc4 = vec4<${t}>(${id});`,
    ...head,
    ...step([
      `    acc4 = ${fold("acc4", `(${fold("r0", "r1")})`)};`,
      `    acc4 = ${fold("acc4", `(${fold("r2", "r3")})`)};`,
    ]),
    `  for (; j < stop4; j += ${wg}u) { acc4 = ${fold("acc4", load("base4 + j"))}; }`,
    `  acc = ${
      combine(s.op, t, combine(s.op, t, "acc4.x", "acc4.y"), combine(s.op, t, "acc4.z", "acc4.w"))
    };`,
  ];
  if ((s.op === "max" || s.op === "min") && t === "f32") {
    // Float maxima and minima by the hardware max (min), whose NaN handling is the driver's, with
    // a probe beside it: the running sum of the blocks' sums, NaN once any element was NaN (or
    // the range held both infinities, or its sum overflowed both ways). Only then is the range
    // reduced again by the NaN-exact combine. Infinities alone need no second pass, as the
    // hardware max orders them right: that pass is one invocation re-reading its range step by
    // step, and the workgroup waits on it (H200, 16 Mi with one +Inf: 28.0 us against 24.9 when
    // the probe was each block's sum times a uniform zero, NaN for infinities too; 25.6 now).
    // Two operations per element where the exact combine takes seven: at 16 Mi the loop is bound
    // by issuing them (H200: max 24.7-24.9 us against 25.6, min 24.7-24.8 against 25.8-25.9;
    // 64 Mi 70.1-70.3 against 71.6-72.0). A NaN test on each element's magnitude bits beside the
    // hardware max (three operations) measured slower, 26.1-26.4: it needed more than the 32
    // registers the driver gives these workgroups, and spilled (bench/sass.ts).
    const op = s.op;
    return [
      `  var acc4 = vec4<f32>(${id});`,
      "  var probe = 0.0;",
      ...head,
      ...step([
        `    acc4 = ${op}(acc4, ${op}(${op}(r0, r1), ${op}(r2, r3)));`,
        "    let s4 = (r0 + r1) + (r2 + r3);",
        "    probe = probe + ((s4.x + s4.y) + (s4.z + s4.w));",
      ]),
      `  for (; j < stop4; j += ${wg}u) { let r = ${load("base4 + j")}; acc4 = ${op}(acc4, r); ` +
      "probe = probe + ((r.x + r.y) + (r.z + r.w)); }",
      `  acc = ${op}(${op}(acc4.x, acc4.y), ${op}(acc4.z, acc4.w));`,
      "  if (g_isnan(probe)) {",
      ...exact.map((x) => `  ${x}`),
      "  }",
    ];
  }
  return exact;
}

/** Generates the WGSL source of a spec. */
export function generateReduce(s: ReduceSpec): string {
  const wg = s.workgroupSize;
  const a = accumulator(s);
  const half = s.inDtype === "float16" || s.outDtype === "float16" ||
    storedDtype(s) === "float16";
  const vector = Boolean(s.vec4) && !s.pairsIn && s.mode === "contiguous" &&
    s.variant === "workgroup";
  const state = stateType(s.op);
  const srcType = s.pairsIn
    ? state ?? "vec2<u32>"
    : vector
    ? `vec4<${storageType(s.inDtype)}>`
    : storageType(s.inDtype);
  const dstType = s.pairsOut
    ? state ?? "vec2<u32>"
    : a.arg && !s.epilogue
    ? "i32"
    : storageType(storedDtype(s));
  const lines: string[] = [];
  const inputs = s.prologue?.inputs ?? [s.inDtype];
  const extra = inputs.length - 1;
  if (half || inputs.includes("float16")) lines.push("enable f16;");
  const offsField = extra ? `, offs: array<vec4<u32>, ${Math.ceil(extra / 4)}>` : "";
  // A fused consumer's inputs follow the sources (pairs for a second pass never carry one).
  const epilogue = s.pairsOut ? undefined : s.epilogue;
  const constants = Math.max(
    s.prologue ? constantNodes(s.prologue.expr).length : 0,
    epilogue?.constantSlots ?? 0,
  );
  lines.push(
    `struct Params { rows: u32, len: u32, chunks: u32, chunk_len: u32, off: u32, pad0: u32, pad1: u32, pad2: u32, dims: array<vec4<u32>, ${
      8 + 4 * extra
    }>${offsField}${constantsMember(constants)} }`,
  );
  inputs.forEach((dtype, k) => {
    const type = k === 0 ? srcType : vector ? `vec4<${storageType(dtype)}>` : storageType(dtype);
    lines.push(
      `@group(0) @binding(${k}) var<storage, read> ${k === 0 ? "src" : `src${k}`}: array<${type}>;`,
    );
  });
  epilogue?.inputs.forEach((dtype, k) => {
    lines.push(
      `@group(0) @binding(${inputs.length + k}) var<storage, read> epilogue_in${k + 1}: array<${
        storageType(dtype)
      }>;`,
    );
  });
  if (epilogue) lines.push(epilogue.declarations);
  const sourceBindings = inputs.length + (epilogue?.inputs.length ?? 0);
  const last = Boolean(s.lastWorkgroup) && s.variant === "workgroup";
  if (last) {
    lines.push(
      `@group(0) @binding(${sourceBindings}) var<storage, read_write> states: array<atomic<${
        s.wideStates ? "u64" : "u32"
      }>>;`,
      "var<workgroup> last_ticket: u32;",
      lastWorkgroupFunctions(Boolean(s.wideStates)),
    );
  }
  const dstBinding = sourceBindings + (last ? 1 : 0);
  lines.push(
    `@group(0) @binding(${dstBinding}) var<storage, read_write> dst: array<${dstType}>;`,
    `@group(0) @binding(${dstBinding + 1}) var<uniform> p: Params;`,
  );
  if (a.better) lines.push(a.better);
  if (s.prologue) {
    const params = inputs.map((d, k) => `x${k}: ${computeType(d)}`).concat("idx: u32");
    const valueType = computeType(s.prologue.expr.dtype);
    lines.push(`fn f(${params.join(", ")}) -> ${valueType} {\n${emitBody(s.prologue.expr)}\n}`);
  }
  // Per-input offsets (input 0's is p.off), and in vec4 mode each input's shift from input 0.
  const offsets: string[] = [];
  for (let k = 1; k <= extra; k++) {
    offsets.push(`let p_off${k} = p.offs[${(k - 1) >> 2}][${(k - 1) & 3}];`);
    if (vector) offsets.push(`let shift${k} = p_off${k} / 4u - p.off / 4u;`);
  }
  const offsetLines = offsets.length ? `${offsets.join("\n  ")}\n  ` : "";
  const rowBase = offsetLines + (s.mode === "contiguous" ? "let base = p.off + row * p.len;" : [
    decompose("outer_off", "row", s.outerRank, 0, 2),
    "let base = p.off + outer_off;",
    ...Array.from({ length: extra }, (_, i) => {
      const k = i + 1;
      return `${
        decompose(`outer_off${k}`, "row", s.outerRank, 0, 8 + 4 * i)
      }\n  let base${k} = p_off${k} + outer_off${k};`;
    }),
  ].join("\n  "));
  /**
   * The inner offsets of row position `j` (an expression) into variables suffixed `u`, so that
   * several positions can be decoded side by side.
   */
  const innerOffsets = (u = "", j = "j") =>
    s.mode === "contiguous" ? "" : [
      decompose(`inner_off${u}`, j, s.innerRank, 4, 6),
      ...Array.from(
        { length: extra },
        (_, i) => decompose(`inner_off${i + 1}${u}`, j, s.innerRank, 4, 10 + 4 * i),
      ),
    ].join("\n  ");
  const innerOff = innerOffsets();
  /**
   * moments subtract the row's first element from every element (variance does not change):
   * with the data centred near 0, the f32 running mean no longer carries the rounding error of
   * a large offset into M2.
   */
  const pivot = () =>
    s.op === "moments" && !s.pairsIn
      ? `  var pivot: f32;\n  { let j = 0u;\n  ${innerOff}\n    pivot = ${elementValue()}; }`
      : "";
  /** The value of the element at row position j: a load, or the prologue over every input. */
  const elementValue = (u = "", j = "j"): string => {
    const at = (k: number) =>
      s.mode === "contiguous"
        ? (k === 0 ? `base + ${j}` : `p_off${k} + row * p.len + ${j}`)
        : (k === 0 ? `base + inner_off${u}` : `base${k} + inner_off${k}${u}`);
    if (s.pairsIn) return `src[${at(0)}]`;
    if (!s.prologue) return loadAs(s.inDtype, `src[${at(0)}]`);
    const xs = inputs.map((d, k) => loadAs(d, `${k === 0 ? "src" : `src${k}`}[${at(k)}]`));
    return `f(${xs.join(", ")}, 0u)`;
  };
  if (s.variant === "thread") {
    lines.push(
      `@compute @workgroup_size(${wg})`,
      "fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {",
      // Neighbouring invocations take neighbouring rows, so when rows are adjacent in memory
      // (a reduction over a leading axis) their loads coalesce; chunks split long rows.
      `  let g = gid.x + gid.y * nwg.x * ${wg}u;`,
      "  if (g >= p.rows * p.chunks) { return; }",
      "  let row = g % p.rows;",
      "  let chunk = g / p.rows;",
      "  let start = chunk * p.chunk_len;",
      "  let stop = min(p.len, start + p.chunk_len);",
      `  ${rowBase}`,
      `  ${a.declare}`,
      pivot(),
      // Four positions per step, all loaded before any is folded: four loads in flight per
      // invocation (a column sum with one in flight ran at 52% of copy on an H200).
      "  var j = start;",
      "  for (; j + 3u < stop; j += 4u) {",
      ...[0, 1, 2, 3].map((n) => `  ${innerOffsets(`_u${n}`, `(j + ${n}u)`)}`),
      ...[0, 1, 2, 3].map((n) => `    let value${n} = ${elementValue(`_u${n}`, `(j + ${n}u)`)};`),
      ...[0, 1, 2, 3].map((n) => `    ${a.feed(`value${n}`, `(j + ${n}u)`)}`),
      "  }",
      "  for (; j < stop; j++) {",
      `  ${innerOff}`,
      `    ${a.feed(elementValue(), "j")}`,
      "  }",
      `  ${a.store("row * p.chunks + chunk")}`,
      "}",
    );
  } else {
    lines.push(a.shared);
    const builtins = workgroupBuiltins(s.subgroups);
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
      vector ? "" : pivot(),
      ...(vector ? vectorLoop(s, a, STATEFUL[s.op] ? "f32" : a.type) : [
        `  for (var j = start + lid; j < stop; j += ${wg}u) {`,
        `  ${innerOff}`,
        `    ${a.feed(elementValue(), "j")}`,
        "  }",
      ]),
    );
    /** Combines the invocations' accumulators; lane 0 then holds the total and runs `final`. */
    const combineLines = (final: readonly string[]): string[] =>
      s.subgroups
        ? [
          // subgroupAdd is the hardware path for sums, subgroupMax and subgroupMin for maxima
          // and minima (float ones with NaN restored by subgroupAny: which of a NaN and a number
          // the hardware keeps is undefined); other ops (and argmax's pairs) use a butterfly with
          // the op's own combine, which keeps NaN propagation exact. H200, max of 16 Mi float32:
          // 25.4 us against 26.2 with the butterfly (the last workgroup runs it twice).
          ...subgroupCombine(s.op, a.type, a.shuffle),
          `  if (sg_lane == 0u) { ${a.put("lid / sg_size")} }`,
          "  workgroupBarrier();",
          "  if (lid == 0u) {",
          `    for (var k = 1u; k < ${wg}u / sg_size; k++) { ${a.fold("0u", "k")} }`,
          `    ${a.get("0u")}`,
          ...final.map((x) => `    ${x}`),
          "  }",
        ]
        : [
          `  ${a.put("lid")}`,
          "  workgroupBarrier();",
          `  for (var width = ${wg >> 1}u; width > 0u; width = width >> 1u) {`,
          `    if (lid < width) { ${a.fold("lid", "lid + width")} }`,
          "    workgroupBarrier();",
          "  }",
          "  if (lid == 0u) {",
          `    ${a.get("0u")}`,
          ...final.map((x) => `    ${x}`),
          "  }",
        ];
    if (!s.lastWorkgroup) lines.push(...combineLines([a.store("g")]));
    else lines.push(...lastWorkgroupLines(s, a, combineLines));
    lines.push("}");
  }
  const main = lines.join("\n");
  return `${main}\n${preludeFor(main)}\n`;
}

/** The subgroup step of `combineLines`: `acc` becomes the subgroup's total in every lane. */
function subgroupCombine(op: ReduceOp, type: string, shuffle: string): string[] {
  if (op === "sum") return ["  acc = subgroupAdd(acc);"];
  if (op === "max" || op === "min") {
    const hardware = `${op === "max" ? "subgroupMax" : "subgroupMin"}(acc)`;
    return type === "f32"
      ? [`  acc = select(${hardware}, bitcast<f32>(0x7fc00000u), subgroupAny(g_isnan(acc)));`]
      : [`  acc = ${hardware};`];
  }
  return [
    "  for (var mask = sg_size >> 1u; mask > 0u; mask = mask >> 1u) {",
    `    ${shuffle}`,
    "  }",
  ];
}

/**
 * Single-pass combine of a row's chunks. Each workgroup publishes its partial state as 32-bit
 * words, each a tagged word (./_codegen_tagged.ts, tag 1: one 64-bit atomic where the device has
 * them, else two 32-bit ones), then takes a ticket from the row's counter. The workgroup that
 * draws the last ticket reads every partial of the row, waiting on a word only until its tag
 * shows: its writer stored it before taking a ticket, so the wait needs no other workgroup to make
 * progress, and no ordering between WGSL's relaxed atomics is assumed. The reader then clears the
 * words and the counter, leaving the scratch buffer zeroed for the next dispatch. Layout of
 * `states`: one counter per row, then one tagged word per partial word.
 */
function lastWorkgroupFunctions(wide: boolean): string {
  return `${taggedWordFunctions("states", wide, "atomicLoad")}
// The word at \`at\`, given its first reading: read again until it is tagged, then cleared.
fn settle_word(at: u32, first: vec2<u32>) -> u32 {
  var word = first;
  loop {
    if (word.x == 1u) { break; }
    word = tagged_read(at);
  }
  tagged_clear(at);
  return word.y;
}`;
}

/**
 * The workgroup variant's ending with `lastWorkgroup`: publish the partial, take a ticket, and
 * in the last workgroup of the row fold every partial (four per invocation per step, their
 * first reads issued together) and store the result.
 */
function lastWorkgroupLines(
  s: ReduceSpec,
  a: ReturnType<typeof accumulator>,
  combineLines: (final: readonly string[]) => string[],
): string[] {
  const wg = s.workgroupSize;
  const words = a.words.length;
  const wide = Boolean(s.wideStates);
  // Atomic elements per partial word: one 64-bit word, or a tagged pair of 32-bit ones.
  const per = wide ? 1 : 2;
  const at = (chunk: string, w: number) =>
    `p.rows + (row * p.chunks + ${chunk}) * ${per * words}u + ${per * w}u`;
  const reset = a.declare.replace(/var (\w+): [^=]+=/g, "$1 =");
  const step = [0, 1, 2, 3];
  return [
    ...combineLines([
      ...a.words.map((x, w) => `tagged_store(${at("(g % p.chunks)", w)}, 1u, ${x});`),
      wide
        ? "last_ticket = u32(atomicAdd(&states[row], 1lu));"
        : "last_ticket = atomicAdd(&states[row], 1u);",
    ]),
    "  if (workgroupUniformLoad(&last_ticket) != p.chunks - 1u) { return; }",
    `  ${reset}`,
    `  for (var k = lid; k < p.chunks; k += ${4 * wg}u) {`,
    ...step.flatMap((u) => [
      `    let k${u} = k + ${u * wg}u;`,
      ...Array.from({ length: words }, (_, w) => [
        `    var st${u}_${w} = vec2(0u);`,
        `    if (k${u} < p.chunks) { st${u}_${w} = tagged_read(${at(`k${u}`, w)}); }`,
      ]).flat(),
    ]),
    // Each word settled once (settling clears it), then merged.
    ...step.map((u) => {
      const settled = Array.from(
        { length: words },
        (_, w) => `let w${u}_${w} = settle_word(${at(`k${u}`, w)}, st${u}_${w});`,
      );
      const merged = a.mergeWords(Array.from({ length: words }, (_, w) => `w${u}_${w}`));
      return `    if (k${u} < p.chunks) { ${settled.join(" ")} ${merged} }`;
    }),
    "  }",
    ...combineLines([
      a.store("row"),
      wide ? "atomicStore(&states[row], 0lu);" : "atomicStore(&states[row], 0u);",
    ]),
  ];
}
