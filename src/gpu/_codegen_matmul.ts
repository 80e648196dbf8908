/**
 * Generates the WGSL of every matrix-multiply kernel: one parameterised generator, four kernel
 * kinds.
 *
 * - `tiled`: C[b] = A[b] @ B[b] by output tiles of tileM x tileN per workgroup, K walked in steps
 *   of tileK through shared memory. Each invocation owns threadM x threadN outputs held in named
 *   `vec4` registers (`acc_<row>_<column group>`), and the inner product over a K step is emitted
 *   as straight-line code: naga does not unroll loops, and an array indexed in a loop would live
 *   in local memory (see ../shared/notes/webgpu-on-deno.md). Shared tiles are k-major (A is stored
 *   transposed) so that every register load is one conflict-free `vec4` read; an invocation's rows
 *   and columns are spread as groups of four `threadsM * 4` (`threadsN * 4`) apart, so neighbouring
 *   invocations read neighbouring vectors. Global loads are `vec4` along whichever axis is
 *   contiguous when the layout allows it, else scalar through strides; tiles at the edges are
 *   padded with zeros, so the inner loop has no bounds checks (and where every tile is whole,
 *   `interior`, the loads have none either). Loads for the next K step are issued
 *   before the current one is computed (register prefetch); with `doubleBuffer` they land in a
 *   second shared buffer, one barrier per step instead of two. A split-K launch writes float32
 *   partials of a K range each, which the `splitReduce` kernel sums. An operand may be an
 *   elementwise expression of other inputs (`OperandPrologue`, a fused prologue): each element is
 *   computed between its global loads and the shared-memory store, edge padding staying zero.
 * - `gemv`: M = 1 or N = 1, a matrix W (`outputs x K`) times a vector. "dot": K contiguous, a group
 *   of `threadsPerOutput` invocations reads one row with `vec4` loads and reduces through subgroup
 *   shuffles or shared memory. "column": outputs contiguous, each invocation owns four adjacent
 *   outputs and a slice of K, reduced across slices in shared memory.
 * - `splitReduce`: sums split-K partials and applies the epilogue.
 * - `streamKFixup`: stream-K's last pass. The tiled kind with `streamK` has its workgroups share
 *   the (tile, K step) units of the tiles left over after whole waves; this kind sums the parts
 *   of each tile cut between them and applies the epilogue.
 *
 * Every kind ends in the same epilogue hook: a WGSL expression of the f32 value and its output
 * row and column (bias, activation; later, fused elementwise ops), written with the output.
 * @module
 */
import type { DType } from "../core/dtype.ts";
import type { MatmulDType } from "../contract/matmul.ts";
import { constantNodes, type Expr, exprKey, postOrder } from "../ir/expr.ts";
import { aVectorsPerK, formOf, type MatmulChoice, repeats, threadRow } from "../plans/matmul.ts";
import { constantsMember, emitBody, withConstants } from "./_codegen_elementwise.ts";
import { computeType, loadAs, preludeFor, storageType } from "./_wgsl_types.ts";

/**
 * Code applied to each output element before it is stored. `apply` receives WGSL expressions of
 * the accumulated value (f32, or i32 for int32), the output row and the output column (u32), and
 * returns the value to store (same type). Extra read-only inputs (a bias) are bound after A and B
 * as `array<type>` named `name`; `p.e_off` holds the offset the caller put in the uniforms.
 */
export interface MatmulEpilogue {
  /** Part of the pipeline cache key: equal keys must generate equal code. */
  key: string;
  /** Extra read-only storage bindings, bound after A and B in this order. */
  bindings: readonly { name: string; type: string }[];
  apply(value: string, row: string, col: string): string;
  /** Module-scope WGSL the expression needs (helper functions), emitted after the bindings. */
  declarations?: string;
  /**
   * The constant slots (`p.consts`) it reads end before this one (its own follow the prologues';
   * 0 or absent: none).
   */
  constantSlots?: number;
}

/**
 * An operand computed from an elementwise expression as its elements are loaded (a fused
 * prologue: `matmul(x.mul(s).relu(), w)` reads x and s, not a buffer of their product). Each
 * input is bound in place of the operand's buffer and read at the same (batch, outer, k) through
 * its own offset and strides, which travel in the uniforms (`p.prologue`).
 */
export interface OperandPrologue {
  /** Over inputs x0, x1, ... in their compute types; its dtype is the product's. */
  expr: Expr;
  /**
   * Each input's dtype and, with vec4 loads, whether it holds one value along the load axis
   * (stride 0: read once and used for all four lanes) rather than four consecutive ones.
   */
  inputs: readonly { dtype: DType; splat: boolean }[];
}

/** How one operand tile is fetched from global memory. */
export interface OperandLoad {
  /** The axis along which consecutive invocations read consecutive elements. */
  along: "k" | "outer";
  /** Aligned `vec4` loads along that axis (its stride 1, the other strides and offset multiples of 4, its length a multiple of 4). */
  vec4: boolean;
  /** Computed from these inputs as it is loaded, instead of read from one buffer. */
  prologue?: OperandPrologue;
}

function loadKey(x: string, l: OperandLoad): string {
  const pro = l.prologue
    ? `{${l.prologue.inputs.map((i) => `${i.dtype}${i.splat ? "s" : "v"}`).join(",")}:${
      exprKey(l.prologue.expr)
    }}`
    : "";
  return `${x}${l.along}${l.vec4 ? 4 : 1}${pro}`;
}

/**
 * A tiled kernel: the plan's tile parameters (documented on `MatmulChoice`) plus what the
 * operands' layouts and the epilogue decide.
 */
export interface TiledSpec extends
  Pick<
    MatmulChoice,
    | "tileM"
    | "tileN"
    | "tileK"
    | "threadM"
    | "threadN"
    | "laneColumns"
    | "doubleBuffer"
    | "sharedLayout"
    | "prefetch"
    | "swizzle"
    | "productForm"
  > {
  kind: "tiled";
  dtype: MatmulDType;
  /** Register type of the inner product: f32, f16 (float16 accumulation) or i32. */
  math: "f32" | "f16" | "i32";
  a: OperandLoad;
  b: OperandLoad;
  /** `vec4` output stores (N a multiple of 4). */
  vectorStore: boolean;
  /** Batch axes decomposed in the kernel (0: one matrix; 1: a flat batch; up to 6). */
  batchRank: number;
  /** Write float32 partials of a K range per split (the epilogue then runs in `splitReduce`). */
  split: boolean;
  /**
   * Stream-K (f32 math only, not with `split`): `p.splits` workgroups share the (tile, K step)
   * units of the tiles from `p.k_chunk` on equally, mostly less than a tile each, so that the tiles
   * left over after whole waves do not run as a part-empty last wave. A tile within one
   * workgroup's share gets its epilogue there; the parts of a tile cut between workgroups go to
   * `sk_partials` (binding after C), two slots per workgroup, and the `streamKFixup` kernel sums
   * them and runs the epilogue.
   */
  streamK: boolean;
  /**
   * Every tile whole and K a multiple of tileK: global loads without bounds tests (about 16 of
   * the 1,200 instructions of a float32 128x128x8 K step).
   */
  interior: boolean;
  epilogue: MatmulEpilogue | null;
}

/** A matrix-vector kernel. */
export interface GemvSpec {
  kind: "gemv";
  dtype: MatmulDType;
  /** "dot": the matrix's K axis is contiguous; "column": its output axis is. */
  form: "dot" | "column";
  /** `vec4` matrix loads along the contiguous axis (and, for "dot", of the vector). */
  vec4: boolean;
  workgroupSize: number;
  /** "dot": invocations per output (a power of two); "column": output groups per workgroup. */
  width: number;
  /** "dot": reduce with subgroup shuffles (width at most the subgroup size). */
  subgroups: boolean;
  /** Which output coordinate the matrix's outputs are: N (M = 1) or M (N = 1). */
  outputs: "n" | "m";
  batchRank: number;
  epilogue: MatmulEpilogue | null;
}

/** The pass that sums split-K partials. */
export interface SplitReduceSpec {
  kind: "splitReduce";
  dtype: MatmulDType;
  /** Four outputs per invocation (N a multiple of 4). */
  vec4: boolean;
  workgroupSize: number;
  epilogue: MatmulEpilogue | null;
}

/** Stream-K's second pass over the tiles cut between workgroups (see `TiledSpec.streamK`). */
export interface StreamKFixupSpec {
  kind: "streamKFixup";
  /** The stream-K tile kernel whose parts it sums. */
  tiled: TiledSpec;
  epilogue: MatmulEpilogue | null;
}

/** Any matmul kernel. */
export type MatmulSpec = TiledSpec | GemvSpec | SplitReduceSpec | StreamKFixupSpec;

/** Cache key of a spec. */
export function matmulKey(s: MatmulSpec): string {
  const epi = s.epilogue ? `|e:${s.epilogue.key}` : "";
  switch (s.kind) {
    case "tiled":
      return `mm|${s.dtype}|${s.math}|${s.tileM}x${s.tileN}x${s.tileK}|${s.threadM}x${s.threadN}|l${s.laneColumns}|${
        s.doubleBuffer ? "db" : "sb"
      }|${s.sharedLayout}${s.prefetch ? "|pf" : ""}${pairs(s) ? "|pk" : ""}${
        repeats(s) ? "|ra" : ""
      }|sw${s.swizzle}|${loadKey("a", s.a)}|${loadKey("b", s.b)}|${
        s.vectorStore ? "vs" : "ss"
      }|br${s.batchRank}${s.split ? "|split" : ""}${s.streamK ? "|sk" : ""}${
        s.interior ? "|in" : ""
      }${epi}`;
    case "gemv":
      return `mv|${s.dtype}|${s.form}|${s.vec4 ? 4 : 1}|wg${s.workgroupSize}|w${s.width}|${
        s.subgroups ? "sg" : "sh"
      }|${s.outputs}|br${s.batchRank}${epi}`;
    case "splitReduce":
      return `mr|${s.dtype}|${s.vec4 ? 4 : 1}|wg${s.workgroupSize}${epi}`;
    case "streamKFixup":
      return `skf|${matmulKey(s.tiled)}`;
  }
}

/**
 * Uniform words: 16 scalars, then batch shape, A batch strides and B batch strides (8 each); then
 * per prologue input (A's, then B's) offset, outer stride, K stride, a spare word and 8 batch
 * strides; then the constants (`consts`: A's prologue's, B's, the epilogue's).
 */
const U_WORDS = 16 + 3 * 8;
const PROLOGUE_WORDS = 12;

/** Where one prologue input's element (batch, outer, k) is, in elements. */
export interface PrologueInputLayout {
  offset: number;
  outerStride: number;
  kStride: number;
  batchStrides: readonly number[];
}

/** The uniform block's scalar fields. */
export interface MatmulUniforms {
  m: number;
  n: number;
  k: number;
  batches: number;
  /** tiled: output tiles along M and N. gemv: workgroups per matrix in `tilesM`. */
  tilesM: number;
  tilesN: number;
  splits: number;
  /**
   * K elements per split (a multiple of tileK). Stream-K: the first tile (over the batch's tiles
   * in order) that its workgroups share.
   */
  kChunk: number;
  /** Offsets and strides in elements. gemv: A is the matrix (outer = output axis), B the vector. */
  aOffset: number;
  bOffset: number;
  aOuterStride: number;
  aKStride: number;
  bKStride: number;
  bOuterStride: number;
  /** First element of the epilogue's extra inputs (`p.e_off`), e.g. a bias view's offset. */
  epilogueOffset: number;
  batchShape: readonly number[];
  aBatchStrides: readonly number[];
  bBatchStrides: readonly number[];
  /** Prologue inputs of A, then of B (tiled kernels only). */
  prologueInputs?: readonly PrologueInputLayout[];
  /**
   * Constant slots' words: A's prologue's, B's, then the epilogue's. They follow the prologue
   * inputs, so a kernel that declares none (splitReduce) gets uniforms without them.
   */
  constants?: readonly number[];
}

/** Packs the uniform block for one dispatch. */
export function matmulUniforms(u: MatmulUniforms): Uint32Array {
  const inputs = u.prologueInputs ?? [];
  const w = new Uint32Array(U_WORDS + PROLOGUE_WORDS * inputs.length);
  w.set([
    u.m,
    u.n,
    u.k,
    u.batches,
    u.tilesM,
    u.tilesN,
    u.splits,
    u.kChunk,
    u.aOffset,
    u.bOffset,
    u.aOuterStride,
    u.aKStride,
    u.bKStride,
    u.bOuterStride,
    u.epilogueOffset,
  ]);
  u.batchShape.forEach((d, i) => (w[16 + i] = d));
  u.aBatchStrides.forEach((d, i) => (w[24 + i] = d));
  u.bBatchStrides.forEach((d, i) => (w[32 + i] = d));
  inputs.forEach((input, j) => {
    const at = U_WORDS + PROLOGUE_WORDS * j;
    w.set([input.offset, input.outerStride, input.kStride], at);
    input.batchStrides.forEach((d, i) => (w[at + 4 + i] = d));
  });
  return withConstants(w, u.constants ?? []);
}

/**
 * The uniform struct, with room for `prologueInputs` inputs' layouts (`p.prologue`) and
 * `constants` constant slots (`p.consts`).
 */
function params(prologueInputs = 0, constants = 0): string {
  return "struct Params { m: u32, n: u32, k: u32, batches: u32, tiles_m: u32, tiles_n: u32, " +
    "splits: u32, k_chunk: u32, a_off: u32, b_off: u32, a_so: u32, a_sk: u32, b_sk: u32, " +
    "b_so: u32, e_off: u32, pad: u32, dims: array<vec4<u32>, 6>" +
    (prologueInputs
      ? `, prologue: array<vec4<u32>, ${(PROLOGUE_WORDS / 4) * prologueInputs}>`
      : "") +
    constantsMember(constants) +
    " }";
}

/** Constant slots of a prologue's expression (none without one). */
function prologueConstants(l: OperandLoad): number {
  return l.prologue ? constantNodes(l.prologue.expr).length : 0;
}

/** Constant slots a tiled kernel's uniforms hold: its prologues' and its epilogue's. */
function tiledConstants(s: TiledSpec): number {
  return Math.max(
    prologueConstants(s.a) + prologueConstants(s.b),
    s.epilogue?.constantSlots ?? 0,
  );
}

/** Uniform words of prologue input `j` (numbered over A's inputs, then B's). */
function prologueWord(j: number, field: "offset" | "outer" | "k"): string {
  return `p.prologue[${(PROLOGUE_WORDS / 4) * j}].${{ offset: "x", outer: "y", k: "z" }[field]}`;
}
function prologueBatchStride(j: number, d: number): string {
  return `p.prologue[${(PROLOGUE_WORDS / 4) * j + 1 + (d >> 2)}][${d & 3}]`;
}

function dim(word: number): string {
  return `p.dims[${word >> 2}][${word & 3}]`;
}

/** A variable holding an offset into one input for each batch, and its batch axes' strides. */
interface BatchTarget {
  name: string;
  stride: (axis: number) => string;
}

const OPERAND_BATCHES: readonly BatchTarget[] = [
  { name: "a_batch", stride: (d) => dim(8 + d) },
  { name: "b_batch", stride: (d) => dim(16 + d) },
];

/** Offsets of batch `batch` into each target (A and B by default), from the batch axes' strides. */
function batchOffsets(
  rank: number,
  batch: string,
  targets: readonly BatchTarget[] = OPERAND_BATCHES,
): string[] {
  if (rank === 0) return targets.map((t) => `let ${t.name} = 0u;`);
  if (rank === 1) return targets.map((t) => `let ${t.name} = ${batch} * ${t.stride(0)};`);
  const lines = [...targets.map((t) => `var ${t.name} = 0u;`), `var batch_rest = ${batch};`];
  for (let d = rank - 1; d >= 0; d--) {
    const index = d > 0 ? `batch_rest % ${dim(d)}` : "batch_rest";
    lines.push(
      `{ let i = ${index};${targets.map((t) => ` ${t.name} += i * ${t.stride(d)};`).join("")}` +
        (d > 0 ? ` batch_rest = batch_rest / ${dim(d)}; }` : " }"),
    );
  }
  return lines;
}

function epilogueBindings(e: MatmulEpilogue | null, first: number): string[] {
  return (e?.bindings ?? []).map((b, i) =>
    `@group(0) @binding(${first + i}) var<storage, read> ${b.name}: array<${b.type}>;`
  ).concat(e?.declarations ? [e.declarations] : []);
}

function apply(e: MatmulEpilogue | null, value: string, row: string, col: string): string {
  return e ? e.apply(value, row, col) : value;
}

function halfNeeded(s: MatmulSpec): boolean {
  if (s.kind === "streamKFixup") return s.tiled.dtype === "float16";
  if (s.dtype === "float16") return true;
  if (s.kind !== "tiled") return false;
  const prologueHalf = (l: OperandLoad) =>
    Boolean(l.prologue) && (l.prologue!.inputs.some((i) => i.dtype === "float16") ||
      postOrder(l.prologue!.expr).some((e) => e.dtype === "float16"));
  return s.math === "f16" || prologueHalf(s.a) || prologueHalf(s.b);
}

function finish(lines: string[]): string {
  const main = lines.join("\n");
  return `${main}\n${preludeFor(main)}\n`;
}

/** Generates the WGSL source of a spec. */
export function generateMatmul(s: MatmulSpec): string {
  switch (s.kind) {
    case "tiled":
      return generateTiled(s);
    case "gemv":
      return generateGemv(s);
    case "splitReduce":
      return generateSplitReduce(s);
    case "streamKFixup":
      return generateStreamKFixup(s.tiled);
  }
}

/** Invocations of a tiled spec's workgroup. */
export function tiledThreads(
  s: Pick<TiledSpec, "tileM" | "tileN" | "threadM" | "threadN">,
): number {
  return (s.tileM / s.threadM) * (s.tileN / s.threadN);
}

/** Whether a tiled spec multiplies pairs of k (see {@link formOf}). */
function pairs(s: Parameters<typeof formOf>[0]): boolean {
  return formOf(s) === "pairedK";
}

/**
 * Pair forms ("pairedK", "repeatedA"): the fragment reads of A at sub-step `step`, two vectors
 * `a<step>_<group>_<half>` per group of four rows, and the operand of row `row` (0-3) of group
 * `group`: its pair `.xyxy` (rows 0, 1) or `.zwzw` (rows 2, 3) of the half holding it.
 */
function pairRowLoads(step: number, groupsM: number): string[] {
  const lines: string[] = [];
  for (let c = 0; c < groupsM; c++) {
    for (let h = 0; h < 2; h++) {
      lines.push(`let a${step}_${c}_${h} = (*a_frag)[${(step * groupsM + c) * 2 + h}];`);
    }
  }
  return lines;
}

function pairRowOperand(step: number, group: number, row: number): string {
  return `a${step}_${group}_${row >> 1}.${row % 2 ? "zwzw" : "xyxy"}`;
}

// ---------------------------------------------------------------------------------------------
// Tiled

interface OperandNames {
  /** "a" or "b". */
  x: string;
  /** Global buffer. */
  buffer: string;
  /** Shared array. */
  shared: string;
  /** Tile extent along the outer axis (M for A, N for B). */
  tile: number;
  /** Uniform bound of the outer axis. */
  bound: string;
  /** Uniform stride of the outer axis and of K. */
  outerStride: string;
  kStride: string;
  /** First outer coordinate of the workgroup's tile. */
  origin: string;
  load: OperandLoad;
  /** The number of the prologue's first input among all prologue inputs (in `p.prologue`). */
  firstInput: number;
  /** Invocations along the outer axis, and outputs each owns along it. */
  threads: number;
  thread: number;
}

/**
 * An operand's storage bindings from `first` on: its buffer, or its prologue's inputs (`a_input0`,
 * ...), followed by the prologue's function `a_prologue` (its constants from slot `constantBase`).
 */
function operandBindings(
  l: OperandLoad,
  x: string,
  first: number,
  store: string,
  constantBase: number,
): string[] {
  if (!l.prologue) {
    return [
      `@group(0) @binding(${first}) var<storage, read> ${x}_src: array<${
        l.vec4 ? `vec4<${store}>` : store
      }>;`,
    ];
  }
  const pro = l.prologue;
  const lines = pro.inputs.map((input, j) => {
    const element = storageType(input.dtype);
    const type = l.vec4 && !input.splat ? `vec4<${element}>` : element;
    return `@group(0) @binding(${first + j}) var<storage, read> ${x}_input${j}: array<${type}>;`;
  });
  const args = pro.inputs.map((input, j) => `x${j}: ${computeType(input.dtype)}`);
  lines.push(
    `fn ${x}_prologue(${args.join(", ")}) -> ${computeType(pro.expr.dtype)} {`,
    // The matrix kernels' uniforms call their zero word `pad`.
    emitBody(pro.expr, { zero: "p.pad", constantBase }),
    "}",
  );
  return lines;
}

/** The per-batch offsets an operand needs: its buffer's, or each prologue input's. */
function operandBatches(
  l: OperandLoad,
  x: string,
  firstInput: number,
  plain: BatchTarget,
): BatchTarget[] {
  if (!l.prologue) return [plain];
  return l.prologue.inputs.map((_, j) => ({
    name: `${x}_batch${j}`,
    stride: (d: number) => prologueBatchStride(firstInput + j, d),
  }));
}

/**
 * An invocation's output registers `acc_<row>_<column group>` (vec4s), in the order the stream-K
 * slots store them.
 */
function outputRegisters(s: TiledSpec): string[] {
  const names: string[] = [];
  for (let r = 0; r < s.threadM; r++) {
    for (let d = 0; d < s.threadN / 4; d++) names.push(`acc_${r}_${d}`);
  }
  return names;
}

/**
 * Invocation coordinates (tx, ty) in the tile's grid of invocations: groups of 32 consecutive
 * invocations cover laneColumns x (32 / laneColumns) of it, the warp's footprint in the shared
 * tiles.
 */
function invocationCoordinates(s: TiledSpec): string[] {
  const threads = tiledThreads(s);
  const threadsM = s.tileM / s.threadM;
  const threadsN = s.tileN / s.threadN;
  const lanes = Math.min(32, threads);
  const laneColumns = Math.min(s.laneColumns, threadsN, lanes);
  if (
    threads % 32 === 0 && lanes % laneColumns === 0 && threadsN % laneColumns === 0 &&
    threadsM % (lanes / laneColumns) === 0 && laneColumns !== threadsN
  ) {
    const warpsN = threadsN / laneColumns;
    return [
      "let lane = lid % 32u;",
      "let warp = lid / 32u;",
      `let tx = (warp % ${warpsN}u) * ${laneColumns}u + lane % ${laneColumns}u;`,
      `let ty = (warp / ${warpsN}u) * ${32 / laneColumns}u + lane / ${laneColumns}u;`,
    ];
  }
  return [`let tx = lid % ${threadsN}u;`, `let ty = lid / ${threadsN}u;`];
}

/**
 * Where tile `t` of matrix `batch` lies (m0, n0) and its operands' batch offsets. Grouped tile
 * order: `swizzle` tile rows are walked column by column, so the workgroups in flight share A
 * rows and B columns in L2.
 */
function tileOrigin(s: TiledSpec): string[] {
  const aInputs = s.a.prologue?.inputs.length ?? 0;
  return [
    ...(s.swizzle > 1
      ? [
        `let group_size = ${s.swizzle}u * p.tiles_n;`,
        `let first_m = (t / group_size) * ${s.swizzle}u;`,
        `let rows_in_group = min(p.tiles_m - first_m, ${s.swizzle}u);`,
        "let tile_m = first_m + (t % group_size) % rows_in_group;",
        "let tile_n = (t % group_size) / rows_in_group;",
      ]
      : ["let tile_m = t / p.tiles_n;", "let tile_n = t % p.tiles_n;"]),
    `let m0 = tile_m * ${s.tileM}u;`,
    `let n0 = tile_n * ${s.tileN}u;`,
    ...batchOffsets(s.batchRank, "batch", [
      ...operandBatches(s.a, "a", 0, OPERAND_BATCHES[0]),
      ...operandBatches(s.b, "b", aInputs, OPERAND_BATCHES[1]),
    ]),
  ];
}

/**
 * Stream-K's units: the (tile, K step) pairs of the tiles from `p.k_chunk` on, in order, shared
 * by `p.splits` workgroups; workgroup w's share starts at `units_offset + w * share + min(w,
 * extra)`.
 */
function streamKShares(tileK: number): string[] {
  return [
    `let k_steps = (p.k + ${tileK - 1}u) / ${tileK}u;`,
    "let units_offset = p.k_chunk * k_steps;",
    "let units = p.batches * tiles * k_steps - units_offset;",
    "let share = units / p.splits;",
    "let extra = units % p.splits;",
  ];
}

function generateTiled(s: TiledSpec): string {
  const threads = tiledThreads(s);
  const threadsM = s.tileM / s.threadM;
  const threadsN = s.tileN / s.threadN;
  const T = s.math;
  const store = storageType(s.dtype);
  // Split-K partials are kept in the accumulator's precision (f32, or i32 for int32).
  const partType = T === "i32" ? "i32" : "f32";
  const outType = s.split ? partType : store;
  const zero = T === "i32" ? "0" : T === "f16" ? "0.0h" : "0.0";
  const lines: string[] = [];
  if (halfNeeded(s)) lines.push("enable f16;");
  const extra = s.split ? 0 : s.epilogue?.bindings.length ?? 0;
  const aInputs = s.a.prologue?.inputs.length ?? 0;
  const bInputs = s.b.prologue?.inputs.length ?? 0;
  // Bindings: A (its buffer, or its prologue's inputs), B likewise, the epilogue's, C, uniforms.
  const first = Math.max(1, aInputs) + Math.max(1, bInputs);
  lines.push(
    params(aInputs + bInputs, tiledConstants(s)),
    ...operandBindings(s.a, "a", 0, store, 0),
    ...operandBindings(s.b, "b", Math.max(1, aInputs), store, prologueConstants(s.a)),
    ...epilogueBindings(s.split ? null : s.epilogue, first),
    `@group(0) @binding(${first + extra}) var<storage, read_write> c_dst: array<${
      s.vectorStore ? `vec4<${outType}>` : outType
    }>;`,
    ...(s.streamK
      ? [
        `@group(0) @binding(${
          first + extra + 1
        }) var<storage, read_write> sk_partials: array<vec4<f32>>;`,
        `@group(0) @binding(${first + extra + 2}) var<uniform> p: Params;`,
      ]
      : [`@group(0) @binding(${first + extra + 1}) var<uniform> p: Params;`]),
  );
  const buffers = s.doubleBuffer ? 2 : 1;
  const aWords = (s.tileK * s.tileM) / 4;
  const bWords = (s.tileK * s.tileN) / 4;
  lines.push(
    ...(s.sharedLayout === "thread"
      ? [
        `var<workgroup> a_tile: array<array<vec4<${T}>, ${
          threadRow(s.tileK * aVectorsPerK(s), threadsM)
        }>, ${threadsM * buffers}>;`,
        `var<workgroup> b_tile: array<array<vec4<${T}>, ${
          threadRow(s.tileK * (s.threadN / 4), threadsN)
        }>, ${threadsN * buffers}>;`,
      ]
      : [
        `var<workgroup> a_tile: array<vec4<${T}>, ${aWords * buffers}>;`,
        `var<workgroup> b_tile: array<vec4<${T}>, ${bWords * buffers}>;`,
      ]),
    `@compute @workgroup_size(${threads})`,
    "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, " +
      "@builtin(local_invocation_index) lid: u32) {",
    "  let g = wid.x + wid.y * nwg.x;",
    "  let tiles = p.tiles_m * p.tiles_n;",
  );
  const origin = tileOrigin(s);
  if (s.streamK) {
    // Workgroup g's units are [units_begin, units_end) of the (tile, K step) units in order.
    lines.push(
      "  if (g >= p.splits) { return; }",
      ...streamKShares(s.tileK).map((l) => `  ${l}`),
      "  let units_begin = units_offset + g * share + min(g, extra);",
      "  let units_end = units_begin + share + select(0u, 1u, g < extra);",
    );
  } else {
    lines.push(
      "  let per_matrix = tiles * p.splits;",
      "  let batch = g / per_matrix;",
      // The whole workgroup leaves together, so the barriers below stay in uniform control flow.
      "  if (batch >= p.batches) { return; }",
      "  let in_matrix = g % per_matrix;",
      "  let split = in_matrix / tiles;",
      "  let t = in_matrix % tiles;",
      ...origin.map((l) => `  ${l}`),
      "  let k_begin = split * p.k_chunk;",
      "  let k_end = min(k_begin + p.k_chunk, p.k);",
      `  let k_tiles = select(0u, (k_end - k_begin + ${
        s.tileK - 1
      }u) / ${s.tileK}u, k_end > k_begin);`,
    );
  }
  lines.push(...invocationCoordinates(s).map((l) => `  ${l}`));
  const a: OperandNames = {
    x: "a",
    buffer: "a_src",
    shared: "a_tile",
    tile: s.tileM,
    bound: "p.m",
    outerStride: "p.a_so",
    kStride: "p.a_sk",
    origin: "m0",
    load: s.a,
    firstInput: 0,
    threads: threadsM,
    thread: s.threadM,
  };
  const b: OperandNames = {
    x: "b",
    buffer: "b_src",
    shared: "b_tile",
    tile: s.tileN,
    bound: "p.n",
    outerStride: "p.b_so",
    kStride: "p.b_sk",
    origin: "n0",
    load: s.b,
    firstInput: aInputs,
    threads: threadsN,
    thread: s.threadN,
  };
  const aLoads = operandLoads(s, a, threads);
  const bLoads = operandLoads(s, b, threads);
  const paired = pairs(s);
  // Paired k: two accumulators of two outputs' even-k and odd-k partial sums each.
  const accumulators = outputRegisters(s).flatMap((acc) =>
    paired ? [`${acc}_0`, `${acc}_1`] : [acc]
  );
  const loadAll = (k0: string) => [...aLoads.fetch(k0), ...bLoads.fetch(k0)];
  const storeAll = (
    buffer: string,
  ) => [...aLoads.put(buffer, aWords), ...bLoads.put(buffer, bWords)];
  const compute = computeStep(s, threadsM, threadsN, aWords, bWords);
  // One tile's K range [k_begin, k_end) in k_tiles steps, into the accumulators.
  const product = [
    "if (k_tiles > 0u) {",
    ...loadAll("k_begin").map((l) => `  ${l}`),
    ...storeAll("0u").map((l) => `  ${l}`),
    "}",
    "workgroupBarrier();",
    "var buffer = 0u;",
    "for (var kt = 0u; kt < k_tiles; kt++) {",
    "  let more = kt + 1u < k_tiles;",
    // Next step's global loads go out before this step's arithmetic.
    `  if (more) {`,
    ...loadAll(`k_begin + (kt + 1u) * ${s.tileK}u`).map((l) => `    ${l}`),
    "  }",
    ...compute.map((l) => `  ${l}`),
  ];
  if (s.doubleBuffer) {
    product.push(
      "  buffer = 1u - buffer;",
      "  if (more) {",
      ...storeAll("buffer").map((l) => `    ${l}`),
      "  }",
      "  workgroupBarrier();",
    );
  } else {
    product.push(
      "  workgroupBarrier();",
      "  if (more) {",
      ...storeAll("0u").map((l) => `    ${l}`),
      "  }",
      "  workgroupBarrier();",
    );
  }
  product.push("}");
  if (paired) {
    for (let r = 0; r < s.threadM; r++) {
      for (let d = 0; d < s.threadN / 4; d++) {
        const [lo, hi] = [`acc_${r}_${d}_0`, `acc_${r}_${d}_1`];
        product.push(
          `let acc_${r}_${d} = vec4<${T}>(${lo}.x + ${lo}.y, ${lo}.z + ${lo}.w, ${hi}.x + ${hi}.y, ${hi}.z + ${hi}.w);`,
        );
      }
    }
  }
  const epilogue = tiledEpilogue(s, threadsM, threadsN).map((l) => l.slice(2));
  if (!s.streamK) {
    lines.push(
      ...aLoads.setup,
      ...bLoads.setup,
      ...accumulators.map((x) => `  var ${x} = vec4<${T}>(${zero});`),
      ...product.map((l) => `  ${l}`),
      ...epilogue.map((l) => `  ${l}`),
      "}",
    );
    return finish(lines);
  }
  // Segments last first: the head of the tile the share ends in, then (a share is mostly less
  // than a tile: the tiles before `p.k_chunk` run in whole waves as plain tiles) the tail of
  // the tile before, and any whole tiles between. A loop rather than straight-line segments:
  // two copies of the K loop made it 16% slower on an H200.
  const segment = [
    "let gt = (seg_end - 1u) / k_steps;",
    "let tile_first = gt * k_steps;",
    "let seg_begin = max(units_begin, tile_first);",
    "let batch = gt / tiles;",
    "let t = gt % tiles;",
    ...origin,
    `let k_begin = (seg_begin - tile_first) * ${s.tileK}u;`,
    `let k_end = min((seg_end - tile_first) * ${s.tileK}u, p.k);`,
    "let k_tiles = seg_end - seg_begin;",
    ...aLoads.setup.map((l) => l.slice(2)),
    ...bLoads.setup.map((l) => l.slice(2)),
    ...accumulators.map((x) => `${x} = vec4<${T}>(${zero});`),
    ...product,
    "if (seg_begin == tile_first && seg_end == tile_first + k_steps) {",
    ...epilogue.map((l) => `  ${l}`),
    "} else {",
    // Slot 0: the part that starts the workgroup's share; slot 1: the part that ends it.
    `  let part = (g * 2u + select(1u, 0u, seg_begin == units_begin)) * ${
      (s.tileM * s.tileN) / 4
    }u + lid;`,
    ...outputRegisters(s).map((acc, i) => `  sk_partials[part + ${i * threads}u] = ${acc};`),
    "}",
    "seg_end = seg_begin;",
  ];
  lines.push(
    ...accumulators.map((x) => `  var ${x}: vec4<${T}>;`),
    "  var seg_end = units_end;",
    "  loop {",
    "    if (seg_end <= units_begin) { break; }",
    ...segment.map((l) => `    ${l}`),
    "  }",
    "}",
  );
  return finish(lines);
}

/**
 * Stream-K's second pass: one workgroup per boundary w between two workgroups' shares (w = 1 ..
 * p.splits - 1). A boundary inside a tile, the first in that tile, sums the tile's parts: the
 * previous workgroup's (slot 1, or slot 0 where its share starts at the tile) and then slot 0 of
 * each later workgroup whose share starts inside the tile, in that order (results repeat run to
 * run); then the tile's epilogue. Same invocation layout as the tile kernel.
 */
function generateStreamKFixup(s: TiledSpec): string {
  const threads = tiledThreads(s);
  const store = storageType(s.dtype);
  const aInputs = s.a.prologue?.inputs.length ?? 0;
  const bInputs = s.b.prologue?.inputs.length ?? 0;
  const extra = s.epilogue?.bindings.length ?? 0;
  const slot = (s.tileM * s.tileN) / 4;
  const lines: string[] = [];
  if (halfNeeded(s)) lines.push("enable f16;");
  const accumulators = outputRegisters(s);
  const add = (part: string) =>
    accumulators.map((acc, i) => `${acc} += sk_partials[${part} + ${i * threads}u];`);
  lines.push(
    params(aInputs + bInputs, tiledConstants(s)),
    "@group(0) @binding(0) var<storage, read> sk_partials: array<vec4<f32>>;",
    ...epilogueBindings(s.epilogue, 1),
    `@group(0) @binding(${1 + extra}) var<storage, read_write> c_dst: array<${
      s.vectorStore ? `vec4<${store}>` : store
    }>;`,
    `@group(0) @binding(${2 + extra}) var<uniform> p: Params;`,
    `@compute @workgroup_size(${threads})`,
    "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, " +
      "@builtin(local_invocation_index) lid: u32) {",
    "  let w = wid.x + wid.y * nwg.x + 1u;",
    "  if (w >= p.splits) { return; }",
    "  let tiles = p.tiles_m * p.tiles_n;",
    ...streamKShares(s.tileK).map((l) => `  ${l}`),
    "  let boundary = units_offset + w * share + min(w, extra);",
    "  let gt = boundary / k_steps;",
    "  let tile_first = gt * k_steps;",
    "  let before = units_offset + (w - 1u) * share + min(w - 1u, extra);",
    "  if (boundary == tile_first || before > tile_first) { return; }",
    "  let batch = gt / tiles;",
    "  let t = gt % tiles;",
    ...tileOrigin(s).map((l) => `  ${l}`),
    ...invocationCoordinates(s).map((l) => `  ${l}`),
    ...accumulators.map((acc) => `  var ${acc} = vec4<f32>(0.0);`),
    `  let first_part = ((w - 1u) * 2u + select(1u, 0u, before == tile_first)) * ${slot}u + lid;`,
    ...add("first_part").map((l) => `  ${l}`),
    "  var j = w;",
    "  loop {",
    "    if (j >= p.splits || units_offset + j * share + min(j, extra) >= tile_first + k_steps) {",
    "      break;",
    "    }",
    `    let part = j * 2u * ${slot}u + lid;`,
    ...add("part").map((l) => `    ${l}`),
    "    j += 1u;",
    "  }",
    ...tiledEpilogue(s, s.tileM / s.threadM, s.tileN / s.threadN),
    "}",
  );
  return finish(lines);
}

/**
 * The global loads of one operand's tile: `setup` runs once (per-invocation offsets and bounds),
 * `fetch(k0)` loads the tile at K offset `k0` into registers, `put(buffer)` writes them to shared
 * memory (k-major: element (k, o) at vec4 `k * tile/4 + o/4`, lane `o % 4`).
 */
function operandLoads(s: TiledSpec, o: OperandNames, threads: number) {
  const T = s.math;
  const store = storageType(s.dtype);
  const convert = (v: string, vector: boolean) =>
    T === store ? v : vector ? `vec4<${T}>(${v})` : `${T}(${v})`;
  const zero = T === "i32" ? "0" : T === "f16" ? "0.0h" : "0.0";
  const tk = s.tileK;
  const words = o.load.vec4 ? (o.tile * tk) / 4 : o.tile * tk;
  const count = Math.ceil(words / threads);
  const lastActive = words - (count - 1) * threads;
  const setup: string[] = [];
  const fetch: (k0: string) => string[] = (k0) => {
    const out: string[] = [];
    for (let i = 0; i < count; i++) {
      const guard = i === count - 1 && lastActive < threads ? `lid < ${lastActive}u && ` : "";
      const v = `${o.x}_reg${i}`;
      const kIndex = `${k0} + ${o.x}_k${i}`;
      const inK = `${kIndex} < k_end`;
      // From a base in elements (or vec4s when `vector`), K step k0 on: along k a vec4 step is
      // k0 / 4 vectors, along the outer axis k0 rows of kStride / 4 vectors.
      const address = (base: string, kStride: string, vector: boolean) =>
        vector
          ? `${base} + ${o.load.along === "k" ? `(${k0}) / 4u` : `(${k0}) * (${kStride} / 4u)`}`
          : `${base} + (${k0}) * ${kStride}`;
      const pro = o.load.prologue;
      // Interior tiles: every load is in bounds.
      const always = s.interior && !guard;
      if (!always) out.push(`${v} = ${o.load.vec4 ? `vec4<${T}>(${zero})` : zero};`);
      const when = (body: string) =>
        always ? `{ ${body} }` : `if (${guard}${o.x}_in${i} && ${inK}) { ${body} }`;
      if (!pro) {
        out.push(
          when(
            `${v} = ${
              convert(
                `${o.buffer}[${address(`${o.x}_base${i}`, o.kStride, o.load.vec4)}]`,
                o.load.vec4,
              )
            };`,
          ),
        );
        continue;
      }
      // The prologue's value, rounded to the operand's storage type (float16 values are f32
      // registers holding half-precision numbers), then widened to the registers' type.
      const toRegister = (value: string) => (T === "f16" ? `f16(${value})` : value);
      const loads = pro.inputs.map((input, j) => {
        const vector = o.load.vec4 && !input.splat;
        const kStride = prologueWord(o.firstInput + j, "k");
        return `let ${o.x}_value${j} = ${o.x}_input${j}[${
          address(`${o.x}_base${i}_${j}`, kStride, vector)
        }];`;
      });
      const call = (lane: string) =>
        toRegister(
          `${o.x}_prologue(${
            pro.inputs.map((input, j) =>
              loadAs(
                input.dtype,
                o.load.vec4 && !input.splat ? `${o.x}_value${j}.${lane}` : `${o.x}_value${j}`,
              )
            ).join(", ")
          })`,
        );
      const value = o.load.vec4
        ? `vec4<${T}>(${["x", "y", "z", "w"].map(call).join(", ")})`
        : call("");
      out.push(when(`${loads.join(" ")} ${v} = ${value};`));
    }
    return out;
  };
  const thread = s.sharedLayout === "thread";
  const paired = pairs(s);
  const repeated = o.x === "a" && repeats(s);
  const groups = o.thread / 4;
  // Vectors per k in an invocation's row ("thread" layout).
  const perK = o.x === "a" ? aVectorsPerK(s) : groups;
  // Repeated A loaded along k: an invocation's loads 2j and 2j + 1 take rows 2r and 2r + 1 at
  // the same k, so each k's vector (a0, a0, a1, a1) is stored whole rather than lane by lane
  // (on an H200 at 4096^3: 39 TFLOP/s with the lane stores, 49-54 with whole ones).
  const rowPairs = repeated && o.load.along === "k" && count % 2 === 0 && lastActive === threads;
  const put = (buffer: string, sharedWords: number) => {
    const out: string[] = [];
    // "interleaved": one flat array, buffers `sharedWords` apart; "thread": rows, buffers
    // `threads` rows apart, and the vectors of k + 1 `groups` further along a row.
    const base = buffer === "0u" ? "" : `${buffer} * ${sharedWords}u + `;
    const row = buffer === "0u" ? `${o.x}_owner` : `${buffer} * ${o.threads}u + ${o.x}_owner`;
    // The vector `offset` vectors past load i's slot, and the one of k row j of load i.
    const vectorAt = (i: number, offset: number) => {
      const slot = `${o.x}_slot${i}${offset ? ` + ${offset}u` : ""}`;
      return thread ? `${o.shared}[${row}${i}][${slot}]` : `${o.shared}[${base}${slot}]`;
    };
    const at = (i: number, j: number) => vectorAt(i, j * (thread ? perK : o.tile / 4));
    for (let i = 0; i < count; i++) {
      const guard = i === count - 1 && lastActive < threads ? `if (lid < ${lastActive}u) ` : "";
      const v = `${o.x}_reg${i}`;
      if (paired) {
        // Element j of a vec4 along k: k + j, at slot + (j / 2) pairs on, lane + j % 2; along
        // the outer axis: outer + j, at slot + j / 2, lane + (j % 2) * 2.
        const alongK = o.load.along === "k";
        const place = (j: number) => {
          const vector = vectorAt(i, j < 2 ? 0 : alongK ? 2 * groups : 1);
          const lane = j % 2 ? (alongK ? " + 1u" : " + 2u") : "";
          return `${vector}[${o.x}_lane${i}${lane}]`;
        };
        const writes = o.load.vec4
          ? [0, 1, 2, 3].map((j) => `${place(j)} = ${v}[${j}];`)
          : [`${at(i, 0)}[${o.x}_lane${i}] = ${v};`];
        out.push(`${guard}{ ${writes.join(" ")} }`);
      } else if (repeated) {
        // Each value in two lanes: a vec4 along the outer axis (four rows at one k) fills two
        // vectors whole; otherwise lanes `lane` and `lane + 1` of its pair's vector.
        const twice = (target: string, value: string) =>
          `${target}[${o.x}_lane${i}] = ${value}; ${target}[${o.x}_lane${i} + 1u] = ${value};`;
        const pair = `${o.x}_reg${i + 1}`;
        const whole = (j: number) => {
          const [x, y] = o.load.vec4 ? [`${v}[${j}]`, `${pair}[${j}]`] : [v, pair];
          return `${at(i, j)} = vec4<${T}>(${x}, ${x}, ${y}, ${y});`;
        };
        if (rowPairs && i % 2) continue;
        const writes = rowPairs
          ? (o.load.vec4 ? [0, 1, 2, 3] : [0]).map(whole)
          : !o.load.vec4
          ? [twice(at(i, 0), v)]
          : o.load.along === "outer"
          ? [`${vectorAt(i, 0)} = ${v}.xxyy;`, `${vectorAt(i, 1)} = ${v}.zzww;`]
          : [0, 1, 2, 3].map((j) => twice(at(i, j), `${v}[${j}]`));
        out.push(`${guard}{ ${writes.join(" ")} }`);
      } else if (o.load.vec4 && o.load.along === "outer") {
        out.push(`${guard}{ ${at(i, 0)} = ${v}; }`);
      } else if (o.load.vec4) {
        // Four consecutive k of one outer index: four scalar writes, one per k row.
        const writes = [0, 1, 2, 3].map((j) => `${at(i, j)}[${o.x}_lane${i}] = ${v}[${j}];`);
        out.push(`${guard}{ ${writes.join(" ")} }`);
      } else {
        out.push(`${guard}{ ${at(i, 0)}[${o.x}_lane${i}] = ${v}; }`);
      }
    }
    return out;
  };
  for (let i = 0; i < count; i++) {
    const idx = `lid + ${(rowPairs ? i >> 1 : i) * threads}u`;
    let outer: string, k: string;
    if (o.load.along === "k") {
      // Consecutive invocations walk K (the contiguous axis) first.
      const perRow = o.load.vec4 ? tk / 4 : tk;
      outer = rowPairs ? `2u * ((${idx}) / ${perRow}u) + ${i % 2}u` : `(${idx}) / ${perRow}u`;
      k = o.load.vec4 ? `((${idx}) % ${perRow}u) * 4u` : `(${idx}) % ${perRow}u`;
    } else {
      const perRow = o.load.vec4 ? o.tile / 4 : o.tile;
      k = `(${idx}) / ${perRow}u`;
      outer = o.load.vec4 ? `((${idx}) % ${perRow}u) * 4u` : `(${idx}) % ${perRow}u`;
    }
    setup.push(
      `  let ${o.x}_o${i} = ${outer};`,
      `  let ${o.x}_k${i} = ${k};`,
      `  let ${o.x}_in${i} = ${o.origin} + ${o.x}_o${i} < ${o.bound};`,
      `  var ${o.x}_reg${i}: ${o.load.vec4 ? `vec4<${T}>` : T};`,
    );
    const start = (offset: string, batch: string, outerStride: string, kStride: string) =>
      `${offset} + ${batch} + (${o.origin} + ${o.x}_o${i}) * ${outerStride} + ${o.x}_k${i} * ${kStride}`;
    // vec4 bases are in vec4 units; every term is a multiple of 4 by the layout's eligibility.
    const base = (name: string, at: string, vector: boolean) =>
      `  let ${name} = ${vector ? `(${at}) / 4u` : at};`;
    if (o.load.prologue) {
      o.load.prologue.inputs.forEach((input, j) => {
        const word = (field: "offset" | "outer" | "k") => prologueWord(o.firstInput + j, field);
        const at = start(word("offset"), `${o.x}_batch${j}`, word("outer"), word("k"));
        setup.push(base(`${o.x}_base${i}_${j}`, at, o.load.vec4 && !input.splat));
      });
    } else {
      const at = start(`p.${o.x}_off`, `${o.x}_batch`, o.outerStride, o.kStride);
      setup.push(base(`${o.x}_base${i}`, at, o.load.vec4));
    }
    // Where element (k, outer) of this K step goes: "interleaved", vec4 `k * tile/4 + outer/4`;
    // "thread", the row of the invocation owning vector outer/4 (vectors are dealt round-robin),
    // at fragment `k * groups + outer/4 / threads`. Then lane outer % 4.
    if (paired || repeated) {
      // Pair forms: rows 4g .. 4g + 3 of group g sit in two vectors of the owner's row (rows 4g,
      // 4g + 1 in the first), perK vectors on per k (repeated A: each value in lanes
      // (row % 2) * 2 and the next) or 2 perK per pair of k (paired: lane (row % 2) * 2 + k % 2).
      // A vec4 along the outer axis starts at outer % 4 == 0, along k at an even k.
      const o4 = `${o.x}_o${i}`;
      const k = `${o.x}_k${i}`;
      const vectorOuter = o.load.vec4 && o.load.along === "outer";
      const kVectors = paired ? `(${k} / 2u) * ${2 * perK}u` : `${k} * ${perK}u`;
      const lane = vectorOuter
        ? (paired ? `${k} % 2u` : "")
        : `(${o4} % 2u) * 2u${paired && !o.load.vec4 ? ` + ${k} % 2u` : ""}`;
      setup.push(
        `  let ${o.x}_owner${i} = (${o4} / 4u) % ${o.threads}u;`,
        `  let ${o.x}_slot${i} = ${kVectors} + ((${o4} / 4u) / ${o.threads}u) * 2u${
          vectorOuter ? "" : ` + (${o4} % 4u) / 2u`
        };`,
        ...(lane ? [`  let ${o.x}_lane${i} = ${lane};`] : []),
      );
    } else if (thread) {
      setup.push(
        `  let ${o.x}_owner${i} = (${o.x}_o${i} / 4u) % ${o.threads}u;`,
        `  let ${o.x}_slot${i} = ${o.x}_k${i} * ${groups}u + (${o.x}_o${i} / 4u) / ${o.threads}u;`,
      );
    } else {
      setup.push(`  let ${o.x}_slot${i} = ${o.x}_k${i} * ${o.tile / 4}u + ${o.x}_o${i} / 4u;`);
    }
    if (!paired && !repeated && !(o.load.vec4 && o.load.along === "outer")) {
      setup.push(`  let ${o.x}_lane${i} = ${o.x}_o${i} % 4u;`);
    }
  }
  return { setup, fetch, put };
}

/** One K step's inner products, fully unrolled over tileK, threadM and threadN / 4. */
function computeStep(
  s: TiledSpec,
  threadsM: number,
  threadsN: number,
  aWords: number,
  bWords: number,
): string[] {
  const T = s.math;
  const thread = s.sharedLayout === "thread";
  const out: string[] = thread
    ? [
      `let a_frag = &a_tile[buffer * ${threadsM}u + ty];`,
      `let b_frag = &b_tile[buffer * ${threadsN}u + tx];`,
    ]
    : [`let a_read = buffer * ${aWords}u + ty;`, `let b_read = buffer * ${bWords}u + tx;`];
  const groupsM = s.threadM / 4;
  const groupsN = s.threadN / 4;
  const repeated = repeats(s);
  // Fragment registers of step kk are named a<kk>_<c> (repeated A: a<kk>_<c>_<half>) and
  // b<kk>_<d>.
  const loads = (kk: number) => {
    const lines = repeated ? pairRowLoads(kk, groupsM) : [];
    for (let c = 0; c < (repeated ? 0 : groupsM); c++) {
      lines.push(
        thread
          ? `let a${kk}_${c} = (*a_frag)[${kk * groupsM + c}];`
          : `let a${kk}_${c} = a_tile[a_read + ${kk * (s.tileM / 4) + c * threadsM}u];`,
      );
    }
    for (let d = 0; d < groupsN; d++) {
      lines.push(
        thread
          ? `let b${kk}_${d} = (*b_frag)[${kk * groupsN + d}];`
          : `let b${kk}_${d} = b_tile[b_read + ${kk * (s.tileN / 4) + d * threadsN}u];`,
      );
    }
    return lines;
  };
  const products = (kk: number) => {
    const lines: string[] = [];
    for (let c = 0; c < groupsM; c++) {
      for (let i = 0; i < 4; i++) {
        for (let d = 0; d < groupsN; d++) {
          const acc = `acc_${c * 4 + i}_${d}`;
          const lane = `a${kk}_${c}[${i}]`;
          lines.push(
            T === "i32"
              ? `${acc} = ${acc} + vec4<i32>(${lane}) * b${kk}_${d};`
              : repeated
              ? `${acc} = fma(${pairRowOperand(kk, c, i)}, b${kk}_${d}, ${acc});`
              : `${acc} = fma(vec4<${T}>(${lane}), b${kk}_${d}, ${acc});`,
          );
        }
      }
    }
    return lines;
  };
  const inner = pairs(s) ? pairedStep(s) : { steps: s.tileK, loads, products };
  // With `prefetch`, step j + 1's fragments are read before step j's products, so shared memory
  // latency overlaps arithmetic within one invocation.
  if (s.prefetch) out.push(...inner.loads(0));
  for (let j = 0; j < inner.steps; j++) {
    if (s.prefetch) {
      if (j + 1 < inner.steps) out.push(...inner.loads(j + 1));
      out.push(inner.products(j).join(" "));
    } else out.push([...inner.loads(j), ...inner.products(j)].join(" "));
  }
  return out;
}

/** One K step's fragment reads and products, in `steps` sub-steps (each k, or pairs of k). */
interface InnerSteps {
  steps: number;
  loads(step: number): string[];
  products(step: number): string[];
}

/**
 * The paired-k inner products of one K step: for each pair of k, fragments `a<pair>_<group>_<half>`
 * (rows 2 half, 2 half + 1 of a group of four, at k and k + 1) and likewise for B, then one
 * two-wide multiply-add per vector: row (half * 2 + ra)'s pair `.xyxy` or `.zwzw` times B's
 * vector of two columns by two k.
 */
function pairedStep(s: TiledSpec): InnerSteps {
  const groupsM = s.threadM / 4;
  const groupsN = s.threadN / 4;
  const loads = (kp: number) => {
    const lines = pairRowLoads(kp, groupsM);
    for (let d = 0; d < groupsN; d++) {
      for (let h = 0; h < 2; h++) {
        lines.push(`let b${kp}_${d}_${h} = (*b_frag)[${(kp * groupsN + d) * 2 + h}];`);
      }
    }
    return lines;
  };
  const products = (kp: number) => {
    const lines: string[] = [];
    for (let c = 0; c < groupsM; c++) {
      for (let i = 0; i < 4; i++) {
        const a = pairRowOperand(kp, c, i);
        for (let d = 0; d < groupsN; d++) {
          for (let h = 0; h < 2; h++) {
            const acc = `acc_${c * 4 + i}_${d}_${h}`;
            lines.push(`${acc} = fma(${a}, b${kp}_${d}_${h}, ${acc});`);
          }
        }
      }
    }
    return lines;
  };
  return { steps: s.tileK / 2, loads, products };
}

function tiledEpilogue(s: TiledSpec, threadsM: number, threadsN: number): string[] {
  const out: string[] = [];
  const store = storageType(s.dtype);
  const toValue = (v: string) => (s.math === "f16" ? `f32(${v})` : v);
  const toStore = (v: string) => (s.split ? v : store === "f16" ? `f16(${v})` : v);
  const epilogue = s.split ? null : s.epilogue;
  // Partials of split s live at s * batches * M * N.
  out.push(
    s.split
      ? "  let c_base = (split * p.batches + batch) * p.m * p.n;"
      : "  let c_base = batch * p.m * p.n;",
  );
  for (let c = 0; c < s.threadM / 4; c++) {
    for (let i = 0; i < 4; i++) {
      const r = c * 4 + i;
      out.push(`  { let row = m0 + ${c * threadsM * 4 + i}u + ty * 4u;`, "    if (row < p.m) {");
      for (let d = 0; d < s.threadN / 4; d++) {
        const acc = `acc_${r}_${d}`;
        out.push(`      { let col = n0 + ${d * threadsN * 4}u + tx * 4u;`);
        const value = (j: number) =>
          toStore(apply(epilogue, toValue(`${acc}[${j}]`), "row", j ? `(col + ${j}u)` : "col"));
        if (s.vectorStore) {
          const type = s.split ? (s.math === "i32" ? "i32" : "f32") : store;
          out.push(
            `        if (col < p.n) { c_dst[(c_base + row * p.n + col) / 4u] = vec4<${type}>(${
              [0, 1, 2, 3].map(value).join(", ")
            }); }`,
          );
        } else {
          for (let j = 0; j < 4; j++) {
            out.push(
              `        if (col + ${j}u < p.n) { c_dst[c_base + row * p.n + col + ${j}u] = ${
                value(j)
              }; }`,
            );
          }
        }
        out.push("      }");
      }
      out.push("    }", "  }");
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Matrix-vector

/** Independent matrix loads per invocation per loop step: memory-level parallelism. */
const GEMV_UNROLL = 4;

function generateGemv(s: GemvSpec): string {
  const store = storageType(s.dtype);
  const T = s.dtype === "int32" ? "i32" : "f32";
  const zero = T === "i32" ? "0" : "0.0";
  const wg = s.workgroupSize;
  const extra = s.epilogue?.bindings.length ?? 0;
  const widen = (v: string, vector: boolean) =>
    store === T ? v : vector ? `vec4<${T}>(${v})` : `${T}(${v})`;
  const vectorVec4 = s.form === "dot" && s.vec4;
  const outVec4 = s.form === "column" && s.vec4;
  const lines: string[] = [];
  if (halfNeeded(s)) lines.push("enable f16;");
  lines.push(
    params(0, s.epilogue?.constantSlots ?? 0),
    `@group(0) @binding(0) var<storage, read> w_src: array<${s.vec4 ? `vec4<${store}>` : store}>;`,
    `@group(0) @binding(1) var<storage, read> v_src: array<${
      vectorVec4 ? `vec4<${store}>` : store
    }>;`,
    ...epilogueBindings(s.epilogue, 2),
    `@group(0) @binding(${2 + extra}) var<storage, read_write> c_dst: array<${
      outVec4 ? `vec4<${store}>` : store
    }>;`,
    `@group(0) @binding(${3 + extra}) var<uniform> p: Params;`,
    `var<workgroup> partial: array<${s.form === "column" ? `vec4<${T}>` : T}, ${wg}>;`,
  );
  const builtins = [
    "@builtin(workgroup_id) wid: vec3<u32>",
    "@builtin(num_workgroups) nwg: vec3<u32>",
    "@builtin(local_invocation_index) lid: u32",
  ];
  lines.push(
    `@compute @workgroup_size(${wg})`,
    `fn main(${builtins.join(", ")}) {`,
    "  let g = wid.x + wid.y * nwg.x;",
    "  let batch = g / p.tiles_m;",
    "  if (batch >= p.batches) { return; }",
    "  let group = g % p.tiles_m;",
    ...batchOffsets(s.batchRank, "batch").map((l) => `  ${l}`),
    // The matrix's output axis is A's outer axis in the uniforms; the vector is B.
    `  let outputs = ${s.outputs === "n" ? "p.n" : "p.m"};`,
    "  let w_base = p.a_off + a_batch;",
    "  let v_base = p.b_off + b_batch;",
  );
  const position = (o: string) => (s.outputs === "n" ? ["0u", o] : [o, "0u"]);
  if (s.form === "dot") {
    const width = s.width;
    lines.push(
      `  let lane = lid % ${width}u;`,
      `  let o = group * ${wg / width}u + lid / ${width}u;`,
      `  var sum: ${T} = ${zero};`,
      "  if (o < outputs) {",
      "    let row = w_base + o * p.a_so;",
    );
    if (s.vec4) {
      // Four vec4 loads of each operand in flight per step (GEMV_UNROLL), then the rest.
      const steps = [...Array(GEMV_UNROLL).keys()];
      lines.push(
        "    let k4 = p.k / 4u;",
        "    let row4 = row / 4u;",
        "    let v4 = v_base / 4u;",
        `    var k = lane;`,
        `    for (; k + ${(GEMV_UNROLL - 1) * width}u < k4; k += ${GEMV_UNROLL * width}u) {`,
        ...steps.map((j) => `      let w${j} = ${widen(`w_src[row4 + k + ${j * width}u]`, true)};`),
        ...steps.map((j) => `      let x${j} = ${widen(`v_src[v4 + k + ${j * width}u]`, true)};`),
        `      sum += ${steps.map((j) => `dot(w${j}, x${j})`).join(" + ")};`,
        "    }",
        `    for (; k < k4; k += ${width}u) { sum += dot(${widen("w_src[row4 + k]", true)}, ${
          widen("v_src[v4 + k]", true)
        }); }`,
      );
    } else {
      lines.push(
        `    for (var k = lane; k < p.k; k += ${width}u) {`,
        `      sum += ${widen("w_src[row + k * p.a_sk]", false)} * ${
          widen("v_src[v_base + k * p.b_sk]", false)
        };`,
        "    }",
      );
    }
    lines.push("  }");
    if (s.subgroups) {
      for (let mask = width >> 1; mask > 0; mask >>= 1) {
        lines.push(`  sum += subgroupShuffleXor(sum, ${mask}u);`);
      }
    } else {
      lines.push("  partial[lid] = sum;", "  workgroupBarrier();");
      for (let half = width >> 1; half > 0; half >>= 1) {
        lines.push(
          `  if (lane < ${half}u) { partial[lid] = partial[lid] + partial[lid + ${half}u]; }`,
          "  workgroupBarrier();",
        );
      }
      lines.push("  sum = partial[lid];");
    }
    const [row, col] = position("o");
    const value = apply(s.epilogue, "sum", row, col);
    lines.push(
      `  if (lane == 0u && o < outputs) { c_dst[batch * outputs + o] = ${
        store === "f16" ? `f16(${value})` : value
      }; }`,
      "}",
    );
    return finish(lines);
  }
  // Column form: `width` groups of four outputs per workgroup, wg / width slices of K.
  const width = s.width;
  const slices = wg / width;
  lines.push(
    `  let slice = lid / ${width}u;`,
    `  let o = (group * ${width}u + lid % ${width}u) * 4u;`,
    `  var sum = vec4<${T}>(${zero});`,
    "  if (o < outputs) {",
  );
  if (s.vec4) {
    lines.push(
      "    let col4 = (w_base + o) / 4u;",
      "    let step4 = p.a_sk / 4u;",
      `    var k = slice;`,
      `    for (; k + ${(GEMV_UNROLL - 1) * slices}u < p.k; k += ${GEMV_UNROLL * slices}u) {`,
      ...[...Array(GEMV_UNROLL).keys()].map((j) =>
        `      let w${j} = ${widen(`w_src[col4 + (k + ${j * slices}u) * step4]`, true)};`
      ),
      ...[...Array(GEMV_UNROLL).keys()].map((j) =>
        `      sum += w${j} * ${widen(`v_src[v_base + (k + ${j * slices}u) * p.b_sk]`, false)};`
      ),
      "    }",
      `    for (; k < p.k; k += ${slices}u) { sum += ${widen("w_src[col4 + k * step4]", true)} * ${
        widen("v_src[v_base + k * p.b_sk]", false)
      }; }`,
    );
  } else {
    lines.push(
      `    for (var k = slice; k < p.k; k += ${slices}u) {`,
      "      let x = " + widen("v_src[v_base + k * p.b_sk]", false) + ";",
      "      let at = w_base + k * p.a_sk + o * p.a_so;",
      ...[0, 1, 2, 3].map((j) =>
        `      if (o + ${j}u < outputs) { sum[${j}] += ${
          widen(`w_src[at + ${j}u * p.a_so]`, false)
        } * x; }`
      ),
      "    }",
    );
  }
  lines.push(
    "  }",
    "  partial[lid] = sum;",
    "  workgroupBarrier();",
  );
  for (let half = slices >> 1; half > 0; half >>= 1) {
    lines.push(
      `  if (slice < ${half}u) { partial[lid] = partial[lid] + partial[lid + ${half * width}u]; }`,
      "  workgroupBarrier();",
    );
  }
  const value = (j: number) => {
    const [row, col] = position(j ? `(o + ${j}u)` : "o");
    const v = apply(s.epilogue, `total[${j}]`, row, col);
    return store === "f16" ? `f16(${v})` : v;
  };
  lines.push("  if (slice == 0u && o < outputs) {", "    let total = partial[lid];");
  if (outVec4) {
    lines.push(
      `    c_dst[(batch * outputs + o) / 4u] = vec4<${store}>(${
        [0, 1, 2, 3].map(value).join(", ")
      });`,
    );
  } else {
    for (let j = 0; j < 4; j++) {
      lines.push(
        `    if (o + ${j}u < outputs) { c_dst[batch * outputs + o + ${j}u] = ${value(j)}; }`,
      );
    }
  }
  lines.push("  }", "}");
  return finish(lines);
}

// ---------------------------------------------------------------------------------------------
// Split-K reduction

function generateSplitReduce(s: SplitReduceSpec): string {
  const store = storageType(s.dtype);
  const extra = s.epilogue?.bindings.length ?? 0;
  const partType = s.dtype === "int32" ? "i32" : "f32";
  const lines: string[] = [];
  if (halfNeeded(s)) lines.push("enable f16;");
  lines.push(
    params(0, s.epilogue?.constantSlots ?? 0),
    `@group(0) @binding(0) var<storage, read> part: array<${
      s.vec4 ? `vec4<${partType}>` : partType
    }>;`,
    ...epilogueBindings(s.epilogue, 1),
    `@group(0) @binding(${1 + extra}) var<storage, read_write> c_dst: array<${
      s.vec4 ? `vec4<${store}>` : store
    }>;`,
    `@group(0) @binding(${2 + extra}) var<uniform> p: Params;`,
    `@compute @workgroup_size(${s.workgroupSize})`,
    "fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {",
    `  let i = gid.x + gid.y * nwg.x * ${s.workgroupSize}u;`,
    `  let total = p.batches * p.m * p.n${s.vec4 ? " / 4u" : ""};`,
    "  if (i >= total) { return; }",
    "  var sum = part[i];",
    "  for (var split = 1u; split < p.splits; split++) { sum += part[split * total + i]; }",
    `  let e = i${s.vec4 ? " * 4u" : ""} % (p.m * p.n);`,
    "  let row = e / p.n;",
    "  let col = e % p.n;",
  );
  const value = (v: string, j: number) => {
    const out = apply(s.epilogue, v, "row", j ? `(col + ${j}u)` : "col");
    return store === "f16" ? `f16(${out})` : out;
  };
  if (s.vec4) {
    lines.push(
      `  c_dst[i] = vec4<${store}>(${[0, 1, 2, 3].map((j) => value(`sum[${j}]`, j)).join(", ")});`,
    );
  } else {
    lines.push(`  c_dst[i] = ${value("sum", 0)};`);
  }
  lines.push("}");
  return finish(lines);
}
