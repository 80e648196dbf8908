/**
 * Plans: the one place where heuristics pick a GPU kernel variant and its parameters. Each plan is
 * a pure function of the device's caps and the problem's shape returning a plain {@link Choice}
 * record, so an autotuner can later replace the rule with a measured table.
 * @module
 */
import type { DeviceCaps } from "./gpu/device.ts";
import type { ScanOp } from "./gpu/_codegen_scan.ts";
import { ValueError } from "./core/errors.ts";
import type { DType } from "./core/dtype.ts";
import { tiledSharedBytes } from "./gpu/_codegen_matmul.ts";
import { TILED_WORKGROUP_SIZES } from "./gpu/_codegen_elementwise.ts";
import {
  transposePairs,
  type TransposeSpec,
  type TransposeUniforms,
} from "./gpu/_codegen_transpose.ts";

/** The choice for an elementwise kernel. */
export interface ElementwiseChoice {
  kernel: "elementwise";
  /**
   * "vec4": four elements per invocation with vector loads; "scalar": one, through strides;
   * "transpose": a plain copy of a transposed matrix by the tiled transposing copy
   * (src/gpu/_codegen_transpose.ts), whose reads and writes are both coalesced; "tiled": the
   * elementwise kernel over tiles of 32 x 32 outputs, for transposed matrices among the operands
   * (of a computation, or of a plain copy), which it reads through workgroup memory so that
   * every access is coalesced.
   */
  variant: "vec4" | "scalar" | "transpose" | "tiled";
  workgroupSize: number;
}

/** The choice for a reduction. */
export interface ReduceChoice {
  kernel: "reduce";
  /** "workgroup": a workgroup per row chunk; "thread": one invocation per row. */
  variant: "workgroup" | "thread";
  /** Combine within a workgroup through subgroup operations rather than shared memory. */
  subgroups: boolean;
  workgroupSize: number;
  /** Chunks each row is split into (1: one pass; more: partials plus a second pass). */
  chunks: number;
  /** Read contiguous, 4-aligned rows as vec4 (chunk lengths are then multiples of 4). */
  vec4: boolean;
  /**
   * How a row's chunk partials are combined (workgroup variant): "last-workgroup" in the same
   * dispatch, by the row's last workgroup to finish (an atomic ticket); "second-pass" by a
   * second dispatch. The thread variant always takes a second pass.
   */
  combineChunks: "last-workgroup" | "second-pass";
  /**
   * "last-workgroup": the partials and counters as 64-bit atomic words, one atomic per word,
   * where the device has 64-bit atomics; else tagged pairs of 32-bit words. On one H200 (16 Mi):
   * sum 24.1-24.3 us against 24.4-24.5, max 25.2 against 25.4-25.5, min 25.2-25.3 against
   * 25.7-25.9; on another, sum 24.3-24.5 against 24.8, max and min within 0.3 us either way.
   */
  wideStates: boolean;
}

/** Any plan's result. */
export type Choice =
  | ElementwiseChoice
  | ReduceChoice
  | PoolChoice
  | ScanChoice
  | RowsChoice
  | MatmulChoice
  | WasmGemmChoice;

const overrides: {
  elementwise: Partial<ElementwiseChoice> | null;
  reduce: Partial<ReduceChoice> | null;
} = {
  elementwise: null,
  reduce: null,
};

/**
 * Forces fields of a plan's choice (tests use it to cover every variant; an autotuner can use it to
 * measure them). `null` restores the rule.
 *
 * @example
 * ```ts
 * import { setPlanOverride } from "@gyre/gyre";
 * setPlanOverride("reduce", { subgroups: false }); // the shared-memory path
 * setPlanOverride("reduce", null);
 * ```
 */
export function setPlanOverride(
  kernel: "elementwise" | "reduce" | "pool" | "scan" | "rows" | "matmul" | "wasmGemm",
  override:
    | Partial<ElementwiseChoice>
    | Partial<ReduceChoice>
    | Partial<PoolChoice>
    | Partial<ScanChoice>
    | Partial<RowsChoice>
    | Partial<MatmulChoice>
    | Partial<WasmGemmChoice>
    | null,
): void {
  if (kernel === "wasmGemm") wasmGemmOverride = override as Partial<WasmGemmChoice> | null;
  else if (kernel === "matmul") matmulOverride = override as Partial<MatmulChoice> | null;
  else if (kernel === "rows") rowsOverride = override as Partial<RowsChoice> | null;
  else if (kernel === "scan") scanOverride = override as Partial<ScanChoice> | null;
  else if (kernel === "pool") poolOverride = override as Partial<PoolChoice> | null;
  else if (kernel === "elementwise") {
    overrides.elementwise = override as Partial<ElementwiseChoice> | null;
  } else overrides.reduce = override as Partial<ReduceChoice> | null;
}

/**
 * Elements from which an elementwise computation on a hardware GPU reads its transposed operands
 * in tiles through workgroup memory, 256 invocations (4 rows of the tile each) per tile of 32 x 32
 * (H200, `x.transpose().add(x)`: 8192^2 239 us, 81% of copy, against 350 with the operand copied
 * in order first (an option since removed) and 736 gathered through strides; 4096^2 60.0 against
 * 94.5; 2048^2 14.9 against 26.2; 1024^2 7.7 against 12.3 and 13.9. Tiles of 8 rows per invocation: 266 us at 8192^2, of 1
 * row 248. bench/results/kernels-nvidia-h200-transposed-operand.md).
 */
const TRANSPOSED_OPERAND_ELEMENTS = 1 << 20;

/**
 * Elements from which a plain copy of a transposed matrix of 4-byte elements takes the tiled
 * kernel with 8 rows of the tile per invocation (128 per workgroup) rather than the tiled
 * transposing copy (H200, float32: 8192^2 141.9 us, 91% of copy, against 165.0; 4096^2 40.5
 * against 44.5; 2048^2 11.5 against 12.9; at 1024^2 the copy's 7.0 against 8.8 with the clock
 * lowered; float16: 29.1 against the paired copy's 28.4, so 2-byte elements keep the copy).
 */
const TRANSPOSED_CLONE_TILED_ELEMENTS = 1 << 22;

/**
 * Elementwise: vec4 whenever the layout allows it (contiguous or scalar inputs, 4-aligned
 * offsets); 256 invocations per workgroup, which fills an SM's schedulers on NVIDIA and suits
 * llvmpipe's wide SIMD. On a hardware GPU, transposed matrices (both sides at least 32) are read
 * in tiles: a computation with them as operands by the tiled kernel
 * ({@link TRANSPOSED_OPERAND_ELEMENTS}); a plain copy of one (`transposedCopy`) by the tiled
 * kernel for large 4-byte elements ({@link TRANSPOSED_CLONE_TILED_ELEMENTS}), else by the tiled
 * transposing copy (at 4096 x 4096, 44.0 us for float32 and 27.9 for float16 against 123.5 and
 * 112.1 for the strided gather; bench/results/kernels-nvidia-h200-transpose.md). Software adapters
 * keep the gather (llvmpipe at 512 x 512: 0.8 ms against 1.1-2.5 for the tiled copy).
 *
 * @example
 * ```ts
 * import { planElementwise } from "@gyre/gyre";
 * planElementwise(undefined, { elements: 1 << 20, vec4Eligible: true }).variant; // "vec4"
 * ```
 */
export function planElementwise(
  caps: DeviceCaps | undefined,
  problem: {
    elements: number;
    vec4Eligible: boolean;
    transposedCopy?: boolean;
    transposedOperands?: number;
    /** Bytes per element (a plain copy's). */
    elementBytes?: number;
  },
): ElementwiseChoice {
  const hardware = !caps?.isFallbackAdapter;
  const tiledClone = hardware && problem.transposedCopy === true &&
    problem.elementBytes === 4 && problem.elements >= TRANSPOSED_CLONE_TILED_ELEMENTS;
  const choice: ElementwiseChoice = {
    kernel: "elementwise",
    variant: tiledClone
      ? "tiled"
      : problem.transposedCopy && hardware
      ? "transpose"
      : hardware && (problem.transposedOperands ?? 0) > 0 &&
          problem.elements >= TRANSPOSED_OPERAND_ELEMENTS
      ? "tiled"
      : problem.vec4Eligible && problem.elements >= 4
      ? "vec4"
      : "scalar",
    workgroupSize: tiledClone ? 128 : 256,
    ...overrides.elementwise,
  };
  // vec4, the transposing copy and tiles need the problem's permission, whatever an override asks.
  if (choice.variant === "vec4" && !problem.vec4Eligible) choice.variant = "scalar";
  if (
    (choice.variant === "transpose" && !problem.transposedCopy) ||
    (choice.variant === "tiled" && !problem.transposedOperands)
  ) {
    choice.variant = problem.vec4Eligible ? "vec4" : "scalar";
  }
  // A tiled kernel's workgroup holds whole rows of the tile.
  if (
    choice.variant === "tiled" &&
    (!TILED_WORKGROUP_SIZES.includes(choice.workgroupSize) ||
      choice.workgroupSize > (caps?.limits?.maxComputeInvocationsPerWorkgroup ?? 256))
  ) {
    choice.workgroupSize = 256;
  }
  return choice;
}

/**
 * Elements one invocation should accumulate before the workgroup combine. On the H200 a sum of
 * 16 Mi took 24.4 us with 256 invocations x 512 chunks (128 per invocation), 24.5-29.6 us with
 * 128 to 1024 chunks, and no less with 512 or 1024 invocations
 * (bench/results/kernels-nvidia-h200-reduce-sweep.md).
 */
const ELEMENTS_PER_INVOCATION = 128;

/**
 * Reductions: many short rows, or rows adjacent in memory (a reduction over leading axes), get one
 * invocation each (rows split into chunks when few and long); otherwise a workgroup per row, and rows so
 * long that one workgroup would loop more than {@link ELEMENTS_PER_INVOCATION} times are split
 * into chunks, combined by each row's last workgroup in the same dispatch (H200: sum 16 Mi 24.1
 * against 25.1 us with a second pass, 64 Mi 69.6 against 71.4). Subgroup operations where the
 * device has them.
 * Aligned contiguous rows read vec4s, arg and stateful reductions included. Measured on an H200
 * at 64 Mi float32 (bench/results/kernels-nvidia-h200-full*): max 87% of copy, argmax 83-85%,
 * logsumexp 86%, variance 87-88% (45%, 40% and 44% with scalar loads), a column sum over axis 0
 * of [8192, 8192] 86% (52% with one load in flight per invocation).
 *
 * @example
 * ```ts
 * import { planReduce } from "@gyre/gyre";
 * planReduce(undefined, { rows: 1, rowLength: 1 << 24 }).chunks; // 512
 * ```
 */
export function planReduce(
  caps: DeviceCaps | undefined,
  problem: { rows: number; rowLength: number; aligned?: boolean; rowsAdjacent?: boolean },
): ReduceChoice {
  const workgroupSize = 256;
  const subgroups = Boolean(caps?.subgroups) && (caps?.subgroupMinSize ?? 0) >= 4 &&
    (caps?.subgroupMaxSize ?? 0) <= workgroupSize;
  // Rows adjacent in memory (a reduction over leading axes): one invocation per row reads
  // coalesced; enough chunks to keep about 256 Ki invocations busy, each 16 or more elements long.
  const columns = Boolean(problem.rowsAdjacent) && problem.rows >= 256;
  const threadChunks = columns
    ? Math.max(1, Math.min(Math.ceil(262144 / problem.rows), Math.floor(problem.rowLength / 16)))
    : 1;
  const choice: ReduceChoice = columns || (problem.rowLength <= 64 && problem.rows >= 4096)
    ? {
      kernel: "reduce",
      variant: "thread",
      subgroups: false,
      workgroupSize,
      chunks: threadChunks,
      vec4: false,
      combineChunks: "second-pass",
      wideStates: false,
    }
    : {
      kernel: "reduce",
      variant: "workgroup",
      subgroups,
      workgroupSize,
      vec4: Boolean(problem.aligned),
      combineChunks: "last-workgroup",
      wideStates: Boolean(caps?.int64Atomics),
      chunks: Math.min(
        4096,
        Math.max(1, Math.ceil(problem.rowLength / (workgroupSize * ELEMENTS_PER_INVOCATION))),
      ),
    };
  Object.assign(choice, overrides.reduce);
  // Subgroups and 64-bit states only where the device has them; chunks only within a row's
  // length.
  if (!caps?.subgroups) choice.subgroups = false;
  if (!caps?.int64Atomics) choice.wideStates = false;
  choice.chunks = Math.max(1, Math.min(choice.chunks, problem.rowLength));
  // One invocation never walks more than 16 Ki elements: a long serial loop wastes the GPU, and
  // lavapipe stops any shader loop after 65535 iterations.
  if (choice.variant === "thread") {
    choice.chunks = Math.max(choice.chunks, Math.ceil(problem.rowLength / 16384));
  }
  if (!problem.aligned || choice.variant === "thread") choice.vec4 = false;
  if (choice.variant === "thread") choice.combineChunks = "second-pass";
  return choice;
}

/** The choice for a 2-D pooling kernel (src/gpu/_codegen_pool.ts). */
export interface PoolChoice {
  kernel: "pool";
  /**
   * "unrolled": the window walk as straight-line code; "looped": loops over uniform sizes;
   * "team": a team of `teamSize` invocations per output (subgroups).
   */
  variant: "unrolled" | "looped" | "team";
  /** Team only: invocations per output (a power of two, at most the smallest subgroup). */
  teamSize: number;
  /** Neighbouring outputs along W per invocation (unrolled regular windows only). */
  outputsPerInvocation: 1 | 2 | 4;
  /** Aligned vec4 input loads (unrolled regular windows without column padding or dilation). */
  vec4: boolean;
  workgroupSize: number;
}

let poolOverride: Partial<PoolChoice> | null = null;

/** Windows up to 11x11 are unrolled by the rule; an override may unroll up to this many elements. */
const POOL_UNROLL_RULE = 121;
const POOL_UNROLL_LIMIT = 256;

/**
 * Pooling: windows of at most 11x11 elements (121) are unrolled, larger ones are walked by a
 * team of invocations per output (see below), or loop without subgroups. Unrolled
 * regular windows compute several neighbouring outputs per invocation. Where the layout allows
 * aligned vec4 loads (no column padding or dilation, W and the input offset multiples of 4): 4
 * outputs when windows do not overlap along W or the stride is 1, else 2, and always enough that
 * `outputs * strideW` is a multiple of 4, so every invocation starts on a vector. Without vec4: 4
 * outputs at stride 1 (neighbours share most columns), else 2 (4 scalar outputs straddle sectors
 * of unaligned rows). Never more outputs than the row needs.
 * Measured on an H200 (timestamps, float32 unless said; the vec4 copy kernel runs at 3.7 TB/s):
 * maxPool 2x2/2 on [32, 64, 224, 224]: 121 us (4.2 TB/s) with 4 outputs and vec4, 128 with 2 and
 * vec4, 154 with 1, 292 looped; float16: 65 us with 4, 84 with 2; W = 222 (no vec4): 143 us with
 * 2, 190 with 4. 3x3/2 padding 1 on [32, 64, 112, 112]: 39 us with 2, 47 with 1, 58 with 4.
 * 3x3/1 padding 1 on [32, 64, 56, 56]: 30 us with 4, 34 with 2. 11x11/4 on [32, 64, 224, 224]:
 * 225 us unrolled, 705 looped. Workgroups of 128, 256 or 512: within 6%.
 * Past the unrolled range, teams of 32 invocations per output where subgroups exist (the looped
 * variant otherwise): 32 x 32 bins (adaptive pools of [32, 64, 224, 224] to 7x7) average in
 * 119 us (90% of a copy of the same bytes) against 433 looped, their maxima in 151 us against
 * 437; the global average of [32, 256, 56, 56] 35 us against 479 (teams of 16: 43, of 8: 68).
 * Small windows stay unrolled: the global average of [32, 2048, 7, 7] takes 9.6 us unrolled, 34
 * by teams of 32 and 14 by teams of 8, whose lanes mostly idle on 49 elements.
 *
 * @example
 * ```ts
 * import { planPool } from "@gyre/gyre";
 * planPool(undefined, {
 *   window: "regular", kernel: [2, 2], stride: [2, 2], padding: [0, 0], dilation: [1, 1],
 *   inWidth: 224, outWidth: 112, alignedOffset: true,
 * }); // { variant: "unrolled", outputsPerInvocation: 4, vec4: true, ... }
 * ```
 */
export function planPool(
  caps: DeviceCaps | undefined,
  problem: {
    window: "regular" | "adaptive";
    /** Window rows and columns (adaptive: the largest bin). */
    kernel: readonly [number, number];
    stride: readonly [number, number];
    padding: readonly [number, number];
    dilation: readonly [number, number];
    inWidth: number;
    outWidth: number;
    /** The input's first element is a multiple of 4. */
    alignedOffset: boolean;
  },
): PoolChoice {
  const elements = problem.kernel[0] * problem.kernel[1];
  const regular = problem.window === "regular";
  const sw = problem.stride[1];
  const span = problem.dilation[1] * (problem.kernel[1] - 1) + 1;
  const vec4Layout = regular && problem.padding[1] === 0 && problem.dilation[1] === 1 &&
    problem.inWidth % 4 === 0 && problem.alignedOffset;
  const unrolled = elements <= POOL_UNROLL_RULE;
  // With vec4, an odd stride needs 4 outputs to start every invocation on a vector.
  const vec4Outputs = span <= sw || sw === 1 || sw % 2 !== 0 ? 4 : 2;
  let outputs = vec4Layout ? vec4Outputs : sw === 1 ? 4 : 2;
  while (outputs > 1 && outputs / 2 >= problem.outWidth) outputs /= 2;
  // Teams: as wide as a window row of 32 floats (one coalesced read), within every subgroup.
  const teamLimit = caps?.subgroups ? Math.min(32, caps.subgroupMinSize) : 0;
  const teams = teamLimit >= 4;
  const choice: PoolChoice = {
    kernel: "pool",
    variant: unrolled ? "unrolled" : teams ? "team" : "looped",
    teamSize: Math.max(1, teamLimit),
    outputsPerInvocation: unrolled && regular ? outputs as 1 | 2 | 4 : 1,
    vec4: unrolled && vec4Layout,
    workgroupSize: 256,
    ...poolOverride,
  };
  if (choice.variant === "team") {
    // Subgroups only; a power-of-two team within the smallest subgroup.
    const size = choice.teamSize;
    const power = Number.isInteger(size) && size >= 1 && (size & (size - 1)) === 0;
    if (!teams) choice.variant = unrolled ? "unrolled" : "looped";
    else if (!power || size > teamLimit) choice.teamSize = teamLimit;
  }
  // What the device and the layout allow, whatever an override asks.
  if (![1, 2, 4].includes(choice.outputsPerInvocation)) choice.outputsPerInvocation = 1;
  const maxInvocations = caps?.limits?.maxComputeInvocationsPerWorkgroup ?? 256;
  if (
    !Number.isInteger(choice.workgroupSize) || choice.workgroupSize < 1 ||
    choice.workgroupSize > maxInvocations
  ) choice.workgroupSize = 256;
  if (elements > POOL_UNROLL_LIMIT && choice.variant === "unrolled") {
    choice.variant = teams ? "team" : "looped";
  }
  // A team's whole workgroup is teams.
  if (choice.variant === "team" && choice.workgroupSize % choice.teamSize !== 0) {
    choice.workgroupSize = 256;
  }
  if (choice.variant !== "unrolled" || !regular) choice.outputsPerInvocation = 1;
  if (
    choice.variant !== "unrolled" || !vec4Layout ||
    (choice.outputsPerInvocation * sw) % 4 !== 0
  ) choice.vec4 = false;
  return choice;
}

/** The choice for a scan (cumsum, cumprod, cummax, cummin; src/gpu/_codegen_scan.ts). */
export interface ScanChoice {
  kernel: "scan";
  /**
   * "row": a workgroup (or a team of its threads) per row, for rows that fit in one tile;
   * "lookback": one pass over tiles of long rows, each tile taking its prefix from its
   * predecessors' published aggregates (decoupled look-back; a predecessor silent too long is
   * reduced by its reader, so no forward progress is assumed);
   * "multipass": reduce tiles, scan the tile totals, scan tiles with their offsets.
   */
  variant: "row" | "lookback" | "multipass";
  /** Scan across a workgroup with subgroup operations rather than shared memory alone. */
  subgroups: boolean;
  workgroupSize: number;
  /** Elements each invocation holds in registers (a multiple of 4: whole vec4 chunks). */
  elementsPerThread: number;
  /**
   * Look-back: predecessor states each lane of the reading subgroup reads per round trip, so a
   * window spans subgroup size x this many tiles.
   */
  lookbackStates: number;
  /**
   * Scans over an axis that is not the last: "strided" reads and writes through strides, each row
   * scanned by the variant above; "columns" gives each row (column) one invocation that walks
   * the axis, so neighbouring invocations read neighbouring elements; "transpose" first copies
   * the input with the scan axis last (contiguous, vec4 loads).
   */
  layout: "strided" | "columns" | "transpose";
  /**
   * Look-back: sub-tiles per look-back. Above 1 a workgroup reduces its sub-tiles, looks back once,
   * then reads them again (from L2) to scan: the look-back's latency is paid once per sub-tiles.
   */
  subTiles: number;
  /**
   * Multipass: the final pass takes tiles from the last down, starting on what the first pass
   * read last (still in L2) instead of on what it read first (long evicted).
   */
  descendingFinalPass: boolean;
  /**
   * Look-back, for tests: false has tiles publish their aggregates but never their inclusive
   * prefixes, so every look-back walks window after window back to the row's first tile.
   */
  publishPrefixes: boolean;
  /**
   * Look-back, sums and products with subgroups: publish the tile's aggregate from a plain
   * reduction of its registers before scanning the tile, not from the scan's total.
   */
  earlyAggregate: boolean;
  /**
   * Look-back: each tile's state (status, epoch and value) in one 64-bit atomic word, read and
   * written whole, rather than split over two 32-bit words (devices with 64-bit atomics only).
   * Half the atomic operations: on an H200 a 64 Mi cumsum took 153.7 us against 164.4.
   */
  wideStates: boolean;
  /**
   * Multipass, sums and products with subgroups: tiles per group. Above 1 the first pass reduces
   * a group of tiles per workgroup and writes the totals of tiles and of groups, and the final
   * pass sums those before its tile itself: two dispatches, with no scan of the totals between
   * them. 1 keeps three passes (as max and min always do).
   */
  superTiles: number;
}

/** Workgroups the two-pass scan's first pass should keep busy (132 SMs on an H200). */
const SCAN_FIRST_PASS_GROUPS = 1024;

/**
 * Tiles per group for the two-pass multipass scan: as many as leave the first pass at least
 * {@link SCAN_FIRST_PASS_GROUPS} workgroups, between 2 and 128 (up to 2^29 elements, the largest
 * float32 binding, in groups of at most 1024); 1 (three passes) when a final-pass workgroup would
 * have to sum more than 4 group totals per invocation.
 */
function scanSuperTiles(rows: number, tiles: number, workgroupSize: number): number {
  const wanted = Math.floor(rows * tiles / SCAN_FIRST_PASS_GROUPS);
  const size = Math.min(128, Math.max(2, 2 ** Math.floor(Math.log2(Math.max(1, wanted)))));
  return Math.ceil(tiles / size) > 4 * workgroupSize ? 1 : size;
}

let scanOverride: Partial<ScanChoice> | null = null;

/**
 * The look-back's tile on hardware GPUs, by the format of its states (H200, session 11,
 * bench/results/kernels-nvidia-h200-scan-wide.md). With one 64-bit word per state, 256 x 32: 64 Mi
 * cumsum 153.7 us (84% of copy) against 160.8 in 512 x 32, 162.7 in 128 x 32, 156.4 in 256 x 28;
 * 16 Mi 51.2-52.0 against 55.4. With two 32-bit words, 512 x 32: 162.6 against 163.5 in 256 x 32
 * (16 Mi 55.8 against 54.5, 4 Mi 17.7 against 18.5).
 */
const SCAN_LOOKBACK_TILE = {
  wide: { workgroupSize: 256, elementsPerThread: 32 },
  narrow: { workgroupSize: 512, elementsPerThread: 32 },
} as const;

/**
 * Row length from which the look-back publishes each tile's aggregate before scanning the tile
 * (H200, tiles of 512 x 32: one row of 64 Mi 166.6 us against 174.9; 16 Mi 55.8 against 55.7;
 * rows of 1 Mi 165.9 against 165.6, of 128 Ki 161.6 against 156.6, of 32 Ki 156.2 against 149.6:
 * the extra barrier pays only where tiles wait on many predecessors).
 */
const SCAN_EARLY_AGGREGATE_LENGTH = 1 << 25;

/**
 * Elements from which a sum takes the look-back rather than the two-pass multipass scan (H200,
 * states tagged with epochs, so one dispatch: 256 Ki 10.7 us against 11.4, 1 Mi 12.0 against
 * 12.8, 4 Mi 18.7 against 20.9; sizes below were not measured).
 */
const SCAN_LOOKBACK_ELEMENTS = 1 << 18;

/**
 * Scans: a row that fits one workgroup's tile (up to 1024 invocations x 16 elements) is scanned by
 * one workgroup, or by a team of as few invocations as hold it, many rows per dispatch. Longer
 * rows: sums of {@link SCAN_LOOKBACK_ELEMENTS} elements or more on a hardware GPU with subgroups
 * take the single-pass decoupled look-back in tiles of {@link SCAN_LOOKBACK_TILE}; the others the
 * multipass scan, sums and products in two passes (totals of tiles and of groups of tiles, then
 * each tile from them: the same GPU time as three, one dispatch fewer, so 1 Mi pipelined 22.1 us
 * per op against 26.3 on an H200), max and min in three (tile totals, their scan, then each tile
 * from its offset). Inner axes (`inner`: elements after the scan axis, 1 for the last axis) with
 * at least 4096 rows use "columns", one invocation per row walking the axis, so a subgroup reads
 * 32 neighbouring columns at once; with fewer rows there are too few invocations for that, and
 * rows read with a stride of 8 or more are first copied with the axis last ("transpose").
 *
 * Measured on an H200 (float32, bench/results/kernels-nvidia-h200-scan*): cumsum of 64 Mi 154 us by
 * look-back (84% of copy; 178 before the aggregate went out ahead of the tile's scan and the
 * cluster totals were combined after one barrier, 167 before the in-tile prefixes were folded into
 * the registers as they are known, 162 before states took one 64-bit word), 205 us by multipass in
 * two passes (74 + 134 us; groups of 4, 8 or 32 tiles 206-209; three passes 206: 70 + 10 + 130 us;
 * 212 with the final pass in ascending order, which starts on tiles long evicted from L2; running
 * both passes over chunks of 1 to 8 Mi elements, to find each chunk in L2 again, 305 to 1249 us:
 * each large dispatch costs about 6 us to fill and drain the GPU; a first pass without barriers, or
 * a final pass loading its tile before the group totals, no faster). The look-back's cost is its
 * wait for predecessors' prefixes: without looking back the same kernel takes 140 us, and rows of
 * 32 Ki or 128 Ki elements, whose tiles find their row's first tile within a window, 154 and 161 us
 * (83% and 80% of copy); a single `atomicLoad` per tile after its loads cost 55 us by itself, so
 * states are read with `atomicOr` (other read-modify-writes the same, compare-exchange 186), every
 * read a whole window, tiles in launch order: tiles of 256 x 16 then took 210 us and 512 x 32 178;
 * sub-tiles read twice 247-270 us (on an H100 254-304 against the plan's 193), and workgroups that
 * each walk many tiles, loading the next one before looking back, 236-842 us (the next tile's
 * aggregate comes out later); group states that let a read reach 32 tiles per lane, 194-1216 us;
 * windows of 2 or 4 states per lane 200 and 355 us; a register-only delay between a lane's reads of
 * a missing state (16 to 256 rounds of arithmetic) 226-266 us; `atomicLoad` for every read 233 us;
 * tiles staged through workgroup memory (to hold fewer values in registers) 350-421 us; the first
 * window read before the tile's scan 273 us (191 in tiles of 512 x 28). Not a loss of resident
 * tiles: the driver holds every variant to 64 registers (2 workgroups of 512 per SM) and spills the
 * excess to workgroup memory (7 values in the kernel as planned;
 * bench/results/sass-nvidia-h200.md). cumprod 243 against 206 by multipass and cummax 343 against
 * 293, so they stay multipass; rows of 8192 as one 512-wide workgroup each 137 us (93%); [256,
 * 262144] over axis 0 took 156 us as columns, 891 us strided and 2323 us transposed. For scale,
 * CUB's own look-back scan on the same GPU (CUDA events) took 54.3 us at 16 Mi (67% of a copy of
 * the same bytes; the look-back here 69%) and 181.8 us at 64 Mi (72%; here 84%):
 * bench/results/cuda-reference-nvidia-h200.md. On an H100
 * (bench/results/kernels-nvidia-h100-full.md) the same look-back reaches 80% of a same-size copy
 * at 16 Mi (60.4 us) and 93% at 64 Mi (193.3 us): with 30% less bandwidth to keep busy, the same
 * waits for predecessors weigh less.
 *
 * @example
 * ```ts
 * import { planScan } from "@gyre/gyre";
 * planScan(undefined, { rows: 1, rowLength: 1 << 26 }).variant; // "multipass" (no GPU known)
 * planScan(undefined, { rows: 65536, rowLength: 1000, inner: 256 }).layout; // "columns"
 * ```
 */
export function planScan(
  caps: DeviceCaps | undefined,
  problem: { rows: number; rowLength: number; inner?: number; op?: ScanOp },
): ScanChoice {
  const workgroupSize = 256;
  const subgroups = Boolean(caps?.subgroups) && (caps?.subgroupMinSize ?? 0) >= 4 &&
    (caps?.subgroupMaxSize ?? 0) <= 64;
  const elementsPerThread = 16;
  // A row that fits the widest workgroup (1024 invocations where the device allows) is scanned
  // by one workgroup, with no look-back or second pass.
  const widest = Math.min(1024, caps?.limits.maxComputeInvocationsPerWorkgroup ?? workgroupSize);
  const fits = problem.rowLength <= widest * elementsPerThread;
  const rowWorkgroup = Math.max(
    workgroupSize,
    2 ** Math.ceil(Math.log2(Math.max(1, Math.ceil(problem.rowLength / elementsPerThread)))),
  );
  // Long sums on a hardware GPU: the look-back (one pass over the data).
  const longSum = problem.op === "sum" && subgroups && !caps?.isFallbackAdapter &&
    problem.rows * problem.rowLength >= SCAN_LOOKBACK_ELEMENTS;
  const variant = scanOverride?.variant ?? (fits ? "row" : longSum ? "lookback" : "multipass");
  // The look-back's own tile where the device has workgroups that wide; states in one 64-bit
  // word where it has 64-bit atomics.
  const wideStates = Boolean(caps?.int64Atomics);
  const tile = SCAN_LOOKBACK_TILE[wideStates ? "wide" : "narrow"];
  const lookbackTile = variant === "lookback" && widest >= tile.workgroupSize;
  const choice: ScanChoice = {
    kernel: "scan",
    variant,
    subgroups,
    workgroupSize: lookbackTile
      ? tile.workgroupSize
      : fits
      ? Math.min(widest, rowWorkgroup)
      : workgroupSize,
    elementsPerThread: lookbackTile ? tile.elementsPerThread : elementsPerThread,
    layout: (problem.inner ?? 1) <= 1
      ? "strided"
      : problem.rows >= 4096
      ? "columns"
      : (problem.inner ?? 1) >= 8
      ? "transpose"
      : "strided",
    lookbackStates: 1,
    subTiles: 1,
    descendingFinalPass: true,
    publishPrefixes: true,
    earlyAggregate: problem.rowLength >= SCAN_EARLY_AGGREGATE_LENGTH,
    wideStates,
    superTiles: scanSuperTiles(
      problem.rows,
      Math.ceil(problem.rowLength / (workgroupSize * elementsPerThread)),
      workgroupSize,
    ),
    ...scanOverride,
  };
  // What the device and the problem allow, whatever an override asks.
  if (!subgroups) choice.subgroups = false;
  if (!wideStates) choice.wideStates = false;
  const sizes = [32, 64, 128, 256, 512, 1024];
  if (!sizes.includes(choice.workgroupSize)) choice.workgroupSize = workgroupSize;
  if (caps && choice.workgroupSize > caps.limits.maxComputeInvocationsPerWorkgroup) {
    choice.workgroupSize = workgroupSize;
  }
  if (choice.subgroups && choice.workgroupSize < (caps?.subgroupMaxSize ?? 0)) {
    choice.subgroups = false;
  }
  const perThread = choice.elementsPerThread;
  if (!Number.isInteger(perThread) || perThread % 4 !== 0 || perThread < 4 || perThread > 32) {
    choice.elementsPerThread = elementsPerThread;
  }
  if (![1, 2, 4, 8, 16].includes(choice.lookbackStates)) choice.lookbackStates = 1;
  if (![1, 2, 3, 4, 6, 8].includes(choice.subTiles)) choice.subTiles = 1;
  const groupSizes = [1, 2, 4, 8, 16, 32, 64, 128];
  if (!groupSizes.includes(choice.superTiles) || choice.superTiles > choice.workgroupSize) {
    choice.superTiles = 1;
  }
  if (!choice.subgroups) choice.superTiles = 1;
  if (
    choice.variant === "row" && problem.rowLength > choice.workgroupSize * choice.elementsPerThread
  ) {
    choice.variant = "multipass";
  }
  return choice;
}

/** How the invocations sharing a row combine a statistic (see src/gpu/_codegen_rows.ts). */
export type RowsCombine = "none" | "shuffle" | "subgroup" | "shared";

/** The choice for the row kernels of softmax and the normalisations (src/gpu/_codegen_rows.ts). */
export interface RowsChoice {
  kernel: "rows";
  /**
   * "single": each row is read once into registers, normalised there and written (one pass);
   * "chunked": rows are split into chunks of `threadsPerRow * registers` units; a pass writes each
   * chunk's statistics, a second merges them per row, a third normalises (x is read twice).
   */
  variant: "single" | "chunked";
  /** Units of four elements with vector loads (only where the layout allows). */
  vec4: boolean;
  /**
   * Invocations sharing a row (a power of two, 1..1024). 1 gives adjacent invocations adjacent
   * rows: coalesced when the normalised axis is not the innermost in memory but a kept one is.
   */
  threadsPerRow: number;
  /** Invocations per workgroup (a multiple of `threadsPerRow`; the rest hold other rows). */
  workgroupSize: number;
  /** Units each invocation keeps in named registers (single: derived from the row length). */
  registers: number;
  /** Combine through subgroup operations where the device has them (false: shared memory). */
  subgroups: boolean;
  /** Derived: how a row's invocations combine. */
  combine: RowsCombine;
  /** Derived: chunks per row (1 for "single"). */
  chunks: number;
  /** Invocations per row in the merging pass of "chunked". */
  combineThreads: number;
  /** Derived: how the merging pass combines. */
  combineStage: RowsCombine;
}

let rowsOverride: Partial<RowsChoice> | null = null;

/** Registers of one invocation: single passes stop at 8 units by rule, 32 by override. */
const ROWS_SINGLE_REGISTERS = 8;
const ROWS_MAX_REGISTERS = 32;

function pow2Ceil(n: number): number {
  return 2 ** Math.ceil(Math.log2(Math.max(1, n)));
}

function clampPow2(n: number, lo: number, hi: number): number {
  return Math.min(hi, Math.max(lo, pow2Ceil(Number.isFinite(n) ? n : lo)));
}

/**
 * The lane combine for `threads` invocations per row: a butterfly of shuffles inside one subgroup
 * when the row's lanes fit in the smallest subgroup, subgroup reductions when every subgroup lies
 * inside one row, otherwise (or without subgroups) a shared-memory tree.
 *
 * @example
 * ```ts
 * import { rowsCombine } from "@gyre/gyre";
 * rowsCombine(undefined, 256, true); // "shared" (no device, no subgroups)
 * ```
 */
export function rowsCombine(
  caps: DeviceCaps | undefined,
  threads: number,
  subgroups: boolean,
): RowsCombine {
  if (threads <= 1) return "none";
  const min = caps?.subgroupMinSize ?? 0;
  const max = caps?.subgroupMaxSize ?? 0;
  if (subgroups && caps?.subgroups && min >= 4 && max <= 128) {
    if (threads <= min) return "shuffle";
    if (threads >= max) return "subgroup";
  }
  return "shared";
}

/**
 * Row kernels (softmax, logSoftmax, layerNorm, rmsNorm, groupNorm, batchNorm statistics). A row
 * of up to 8 units per invocation (units: vec4 where the layout allows) is done in one pass: its
 * invocations load it once into named registers, combine max/sums through subgroups and shared
 * memory, and write it, so x is read once and y written once. Lanes per row: one per unit up to
 * 32 (short rows; 16-element rows take 4 lanes of one vec4 each, so a subgroup's loads are
 * contiguous), then as many as keep 4 units each (8 for float16) up to 256 (a 4096-wide float32
 * row: 256 lanes x 4 vec4, 0.040 ms for 4096 x 4096 on an H200, 81% of its copy bandwidth), then
 * 8 units each up to 1024 lanes (32768 floats). Short rows share a 256-invocation workgroup.
 * Longer rows, rows whose statistics are wanted (batchNorm training), and few long rows that would
 * occupy fewer than 64 workgroups are chunked (256 lanes x 4 units per chunk) for parallelism.
 * When `acrossRows` (the normalised axis is strided and a kept axis is the innermost in memory)
 * and there are at least 64 rows, each invocation takes a whole row (chunks of 32 elements), so
 * adjacent invocations read adjacent addresses; reading through strides in place beats a
 * transposing copy, which would add a full read and write of the tensor.
 *
 * @example
 * ```ts
 * import { planRows } from "@gyre/gyre";
 * planRows(undefined, { rows: 4096, rowLength: 4096, vec4: true });
 * // { variant: "single", threadsPerRow: 256, registers: 4, vec4: true, ... }
 * ```
 */
export function planRows(
  caps: DeviceCaps | undefined,
  problem: {
    rows: number;
    rowLength: number;
    /** The layout allows vec4 units. */
    vec4?: boolean;
    /** Adjacent rows are adjacent in memory and a row's elements are not. */
    acrossRows?: boolean;
    /** Per-row statistics are an output (forces "chunked", whose merge pass writes them). */
    stats?: boolean;
    /** Bytes per element (4 by default; 2 for float16). */
    elementBytes?: number;
  },
): RowsChoice {
  const rows = Math.max(1, problem.rows);
  const layoutVec4 = Boolean(problem.vec4);
  const unitsOf = (vec4: boolean) => Math.max(1, Math.ceil(problem.rowLength / (vec4 ? 4 : 1)));
  let units = unitsOf(layoutVec4);
  let variant: RowsChoice["variant"] = "single";
  let threads: number;
  let registers: number;
  if (problem.acrossRows && rows >= 64) {
    threads = 1;
    registers = pow2Ceil(units);
    if (units > 32) {
      variant = "chunked";
      registers = layoutVec4 ? 8 : 32;
    }
  } else {
    // Units per lane: 4, or 8 for 2-byte elements (the same bytes in flight per lane); short
    // rows spread over up to 32 lanes with 1 or 2 units each, which keeps a subgroup's loads
    // contiguous (a lane reading 4 vec4 of its own row strides across 64 bytes per load).
    const perLane = (problem.elementBytes ?? 4) < 4 ? 8 : 4;
    threads = clampPow2(Math.ceil(units / perLane), Math.min(32, pow2Ceil(units)), 256);
    registers = pow2Ceil(Math.ceil(units / threads));
    if (registers > perLane) {
      threads = clampPow2(Math.ceil(units / ROWS_SINGLE_REGISTERS), 1, 1024);
      registers = pow2Ceil(Math.ceil(units / threads));
    }
    const workgroups = Math.ceil((rows * threads) / Math.max(256, threads));
    if (registers > ROWS_SINGLE_REGISTERS || (workgroups < 64 && units > 2048)) {
      variant = "chunked";
      threads = 256;
      registers = 4;
    }
  }
  if (problem.stats) variant = "chunked";
  const subgroups = Boolean(caps?.subgroups);
  const choice: RowsChoice = {
    kernel: "rows",
    variant,
    vec4: layoutVec4,
    threadsPerRow: threads,
    workgroupSize: Math.max(256, threads),
    registers,
    subgroups,
    combine: "none",
    chunks: 1,
    combineThreads: 1,
    combineStage: "none",
    ...rowsOverride,
  };
  // What the layout and the device allow, whatever an override asks; derived fields last.
  const maxInvocations = Math.min(1024, caps?.limits.maxComputeInvocationsPerWorkgroup ?? 1024);
  choice.vec4 = choice.vec4 && layoutVec4;
  units = unitsOf(choice.vec4);
  choice.threadsPerRow = clampPow2(choice.threadsPerRow, 1, maxInvocations);
  choice.workgroupSize = clampPow2(choice.workgroupSize, choice.threadsPerRow, maxInvocations);
  choice.subgroups = choice.subgroups && subgroups;
  if (choice.variant === "single") {
    choice.registers = pow2Ceil(Math.ceil(units / choice.threadsPerRow));
    if (choice.registers > ROWS_MAX_REGISTERS || problem.stats) {
      choice.variant = "chunked";
      choice.registers = 4;
    }
  }
  choice.registers = clampPow2(choice.registers, 1, ROWS_MAX_REGISTERS);
  choice.chunks = choice.variant === "single"
    ? 1
    : Math.ceil(units / (choice.threadsPerRow * choice.registers));
  if (choice.variant === "single" || rowsOverride?.combineThreads === undefined) {
    choice.combineThreads = choice.variant === "single" ? 1 : Math.ceil(choice.chunks / 8);
  }
  choice.combineThreads = clampPow2(choice.combineThreads, 1, 256);
  choice.combine = rowsCombine(caps, choice.threadsPerRow, choice.subgroups);
  choice.combineStage = rowsCombine(caps, choice.combineThreads, choice.subgroups);
  return choice;
}

/** The choice for a matrix multiply (src/gpu/_codegen_matmul.ts). */
export interface MatmulChoice {
  kernel: "matmul";
  /**
   * "tiled": shared-memory tiles, one workgroup per output tile; "splitK": the same kernel over
   * K ranges writing partials (float32; int32 for int32), summed by a second pass that also runs
   * the epilogue; "gemv": M = 1 or N = 1, one
   * workgroup per block of outputs (an override asking for it elsewhere falls back to "tiled");
   * "streamK": whole waves of `streamKGroups` tiles run as "tiled"; the tiles left over are
   * shared out equally by (tile, K step) units among `streamKGroups` workgroups, less than a
   * tile each, and a third pass sums the tiles cut between workgroups and runs the epilogue
   * (float32 accumulation; int32 and float16 accumulation fall back to "tiled"). On an H200
   * (bench/results/matmul-nvidia-h200-stream-k.md, -waves.md; float32 with `interiorLoads`):
   * 4096^3 43.7 TFLOP/s against 42.9, 8192^3 44.7 against 43.6, float16 storage 4096^3 40.4
   * against 39.3, 4096 x 4352 x 4096 43.8 against 40.0.
   */
  variant: "tiled" | "splitK" | "gemv" | "streamK";
  /** Output tile of a workgroup, and K per shared-memory step. */
  tileM: number;
  tileN: number;
  tileK: number;
  /** Outputs per invocation along M and N (4, 8 or 16 each). */
  threadM: number;
  threadN: number;
  /** Invocation columns in each group of 32 invocations (a warp's footprint; 1 to 32). */
  laneColumns: number;
  /** Two shared buffers: one barrier per K step instead of two. */
  doubleBuffer: boolean;
  /**
   * Shared tile layout. "interleaved": k-major rows of the whole tile. "thread": one padded row
   * per invocation row (A) or column (B) holding exactly the fragments it reads, so the inner
   * loop takes one pointer per K step and reads at constant indices (naga clamps every dynamic
   * index into a fixed-size array; constant ones it leaves alone).
   */
  sharedLayout: "interleaved" | "thread";
  /** Read the next K step's fragments from shared memory before this step's products. */
  prefetch: boolean;
  /**
   * How float16 accumulation writes its products ("thread" layout; other math ignores it). A
   * broadcast operand keeps NVIDIA's driver from pairing float16 multiply-adds
   * (bench/fma_peak.ts on an H200: 62 TFLOP/s with one, 88-90 with whole vectors or pairs).
   * - "broadcast": one A value times four B values, `fma(vec4(a.x), b, acc)`.
   * - "pairedK": multiply-adds over pairs of k, `fma(a.xyxy, b, acc)` with two vectors of two k
   *   each; every output keeps an even-k and an odd-k partial sum, summed at the end. Measured
   *   41.3 TFLOP/s at 128x128x16 with 8x8 (52.2 broadcast) and 49.8 at 128x128x8 with 8x16
   *   (48.9): twice the accumulators cost more than the pairing gains. Kept for devices where
   *   it pays.
   * - "repeatedA": A's values stored twice in shared memory, (a0, a0, a1, a1) per vector, so a
   *   product is `fma(a.xyxy, b, acc)` with one accumulator per output, at the cost of twice A's
   *   shared reads. The rule takes it, with one shared buffer, for float16 accumulation's large
   *   tiles (figures at `MATMUL_HALF_LARGE` in src/plans.ts): 61.0 TFLOP/s at 4096^3 on an H200
   *   with A stored [K, M] and 54.8 with A row-major, against 52-53 broadcast (a large row-major
   *   A is now copied into [K, M] order first: `transposeAFirst`).
   */
  productForm: "broadcast" | "pairedK" | "repeatedA";
  /**
   * Copy A into [K, M] order (M contiguous) by a transposing kernel of its own before the product
   * ("tiled" and "splitK"; A row-major, without a fused prologue, its batch axes one run). The
   * float16 tiles read A faster that way: with float16 accumulation on an H200 (bench/results/
   * matmul-nvidia-h200-f16-acc16.md, -a-copied-paired.md, -a-copied-2048.md), copy and product
   * together 60.0-60.6 TFLOP/s at 4096^3 in four runs (the copy 26-28 us of 2.27 ms) against 54.6
   * with A read as stored; 57.3 against 54.6 at 2048^3; 61.6 against 55.0 at 8192^3. float32
   * gains nothing (39.0 copied, 39.1 as stored), so the rule copies for float16 accumulation only.
   */
  transposeAFirst: boolean;
  /**
   * Global loads without bounds tests where every tile is whole and K is a multiple of tileK
   * (the kernel checks nothing then; elsewhere this is ignored). On an H200 at 4096^3 float32
   * (bench/results/matmul-nvidia-h200-interior.md): 43.0 TFLOP/s tiled against 39.1 with the
   * tests, 43.6-43.8 with stream-K; but float16 storage with float32 accumulation fell from
   * 39.4 to 34.5, so the rule takes it for float32 only.
   */
  interiorLoads: boolean;
  /** Tile rows walked together so workgroups in flight share operands in L2 (1: row-major). */
  swizzle: number;
  /** vec4 global loads and stores where the layout allows (false forces scalar ones). */
  vectorLoads: boolean;
  /** K ranges ("splitK" only; 1 otherwise). */
  splitK: number;
  /**
   * "streamK": tiles per wave, which is also the number of workgroups sharing the tiles left
   * over: as many as the GPU holds at once for the tile. Fewer leave multiprocessors idle while
   * the shared tiles run; more run them in two waves (at 4096^3 on an H200, 528 measured 39.3
   * TFLOP/s against 39.7 with 264). 0 otherwise.
   */
  streamKGroups: number;
  /** gemv: invocations per workgroup. */
  gemvWorkgroupSize: number;
  /** gemv: invocations per output (K contiguous) or groups of four outputs per workgroup (outputs contiguous). */
  gemvWidth: number;
  /** gemv: reduce through subgroup shuffles (K contiguous form, width within the subgroup size). */
  subgroups: boolean;
  /**
   * Compute a pending elementwise operand inside the tile loads (a fused prologue) rather than
   * in a kernel of its own first (see {@link planMatmulPrologue}).
   */
  prologue: boolean;
}

let matmulOverride: Partial<MatmulChoice> | null = null;

/** A tile configuration the matmul rule chooses among. */
type MatmulTile =
  & Pick<MatmulChoice, "tileM" | "tileN" | "tileK" | "threadM" | "threadN" | "laneColumns">
  & Partial<Pick<MatmulChoice, "productForm" | "doubleBuffer">>;

/**
 * The rule's tiles, largest first. Measured on an H200 (float32 TFLOP/s, bench/results/matmul-*;
 * before `interiorLoads`, which takes the first to 42.9 at 4096^3, 43.6 at 8192^3 and 41.6 at
 * 2048^3): 128x128x8 with 8x16 per invocation 39.0 at 4096^3, 39.4 at 8192^3, 37.9 at 2048^3 (8x8: 32;
 * 16x8: 37.9; 128x256 or 256x128: 31-32; 128x128x16 with 8x16: 21, past the registers); 64x64 4x4
 * 26.9 at 1024^3 (64x128 8x8: 27.1); 32x32 4x4 11.2 at 512^3, where launch latency dominates.
 * Tile rows walked together (`swizzle`): 4 gave 39.08 at 4096^3 against 38.80 with 8 and 39.01
 * with 16 (39.44 against 38.99 with A stored transposed), so the rule takes 4.
 */
const MATMUL_TILES: readonly MatmulTile[] = [
  { tileM: 128, tileN: 128, tileK: 8, threadM: 8, threadN: 16, laneColumns: 2 },
  { tileM: 64, tileN: 128, tileK: 16, threadM: 8, threadN: 8, laneColumns: 8 },
  { tileM: 64, tileN: 64, tileK: 16, threadM: 4, threadN: 4, laneColumns: 8 },
  { tileM: 32, tileN: 64, tileK: 16, threadM: 4, threadN: 4, laneColumns: 8 },
  { tileM: 32, tileN: 32, tileK: 16, threadM: 4, threadN: 4, laneColumns: 8 },
];

/**
 * With float16 accumulation the large tiles store A's values twice (`productForm: "repeatedA"`) in one shared
 * buffer. Measured on an H200 at 4096^3 (bench/results/matmul-nvidia-h200-one-buffer.md and
 * earlier runs): with A stored [K, M] (M contiguous), 128x128x16 with 8x8 per invocation 61.0-61.2
 * TFLOP/s in three runs (two buffers: 41-42; A not repeated: 52.7-53.0; 128x128x8 with 8x16:
 * 56.1-56.7); with A row-major, 128x128x8 with 8x16 54.7-54.8 in two runs (two buffers:
 * 54.1-54.3 in three runs and 48.9 in a fourth; the 8x8 tile repeated: 53.7; the best tile
 * without repetition, 128x128x16 with 8x8 and two buffers: 51.9-52.1).
 */
const MATMUL_HALF_LARGE: MatmulTile = {
  ...MATMUL_TILES[0],
  productForm: "repeatedA",
  doubleBuffer: false,
};
const MATMUL_HALF_COLUMNS_LARGE: MatmulTile = {
  tileM: 128,
  tileN: 128,
  tileK: 16,
  threadM: 8,
  threadN: 8,
  laneColumns: 8,
  productForm: "repeatedA",
  doubleBuffer: false,
};

/**
 * The transposing copy's form and tile (src/gpu/_codegen_transpose.ts): two-byte elements in words
 * of two (`paired`) wherever the layout allows. Measured on an H200 copying 4096 x 4096 (bench/results/
 * kernels-nvidia-h200-transpose.md): paired float16 64x64 27.9 us, 57% of copy (128x64 35.0,
 * 64x128 39.2, 128x128 72.3); element by element 32x32 is best, float32 44.0 us, 73% (64x64 52.6,
 * 128-wide 70), float16 36.8 (64x64 48.6); a strided gather (the elementwise kernel) 112-124 us.
 * Smaller tiles won every comparison; several tiles per workgroup, each tile's stores overlapping
 * the next one's loads, did not help (40-66 us).
 */
export function _planTranspose(dtype: DType, copy: TransposeUniforms): TransposeSpec {
  const paired = transposePairs(dtype, copy);
  const side = paired ? 64 : 32;
  return { dtype, paired, tileRows: side, tileColumns: side };
}

/**
 * Smallest M, N and K at which float16 accumulation copies a row-major A into [K, M] order first:
 * the copy reads and writes M x K elements once, and paid 5% at 2048^3 and 10-12% at 4096^3 and
 * 8192^3 on an H200 (figures at `transposeAFirst`); smaller products were not measured.
 */
const MATMUL_COPY_A_MIN = 2048;

/**
 * Multiprocessors of GPUs known by the adapter's description (WebGPU does not report them).
 * Stream-K needs the number of workgroups the GPU holds at once; elsewhere tiles run in waves.
 */
const KNOWN_MULTIPROCESSORS: readonly (readonly [RegExp, number])[] = [
  [/\bH200\b/, 132],
  [/\bH100\b.*\b(HBM3|SXM\d*|NVL)\b/, 132],
  [/\bH100\b.*\bPCIe\b/, 114],
];

/**
 * Workgroups of the float32 128x128x8 tile (8x16 per invocation) that one multiprocessor holds.
 * Measured on an H200 (bench/results/matmul-nvidia-h200-waves.md): at 4096 x N x 4096 the
 * time is flat from 992 to 1056 tiles (3.51-3.53 ms) and steps to 4.39 ms at 1088, so the GPU
 * runs 264 = 132 x 2 at once; 4096^3's 1024 tiles leave its fourth wave 88% full (39.1 TFLOP/s
 * against 40.2 with 1056 tiles). An H100 80GB HBM3 measured the same (bench/README.md, session
 * 7 pass 10).
 */
const MATMUL_LARGE_PER_MULTIPROCESSOR = 2;

/**
 * Stream-K's price on an H200: its K steps run about 2% slower than plain tiles' (1.02), and
 * summing the cut tiles takes 15-18 us. It pays where the K it saves, K times the empty share of
 * the last wave less that 2%, is at least this many elements (one element of K is about 0.2 us
 * of a wave of this tile): at 4096^3, 421 (saves 50-60 us); at 4096 x 4096 x 1024, 105 (about
 * what the sums cost: 0.829 ms against 0.824 tiled).
 */
const MATMUL_STREAM_K_SLOWER = 1.02;
const MATMUL_STREAM_K_MIN_SAVED_K = 200;

/** Workgroups that keep a large GPU busy (132 SMs, about two each); software adapters need few. */
const MATMUL_BUSY = 256;
/** Split K only when each split keeps at least this much of K. */
const MATMUL_MIN_SPLIT = 1024;

/**
 * Matrix multiply: M = 1 or N = 1 goes to "gemv". Otherwise the largest tile (128x128 with 8x16
 * outputs per invocation, down to 32x32 with 4x4) that keeps the device busy, counting K splits:
 * a tile may take up to `K / 1024` splits when that is what it needs to reach enough workgroups
 * (small outputs with a long K: 128x128x65536 runs 64x64 tiles in 64 splits). Tiles must fit the
 * device's workgroup storage (48 KiB on an H200, 32 KiB on lavapipe) and invocation limit: the
 * rule skips those that do not, and an override that does not is refused with a `ValueError`.
 *
 * `transposeA`: A is stored [K, M] (M contiguous); `transposeB`: B is stored [N, K].
 *
 * @example
 * ```ts
 * import { planMatmul } from "@gyre/gyre";
 * planMatmul(undefined, { m: 4096, n: 4096, k: 4096, batch: 1, dtype: "float32" }).tileM; // 128
 * planMatmul(undefined, { m: 1, n: 4096, k: 4096, batch: 1, dtype: "float32" }).variant; // "gemv"
 * ```
 */
export function planMatmul(
  caps: DeviceCaps | undefined,
  problem: {
    m: number;
    n: number;
    k: number;
    batch: number;
    dtype: "float32" | "float16" | "int32";
    transposeA?: boolean;
    transposeB?: boolean;
    /** float16 accumulation (f16 registers and shared tiles). */
    halfAccumulate?: boolean;
    /** Whether A may be copied into [K, M] order first (see `transposeAFirst`); default true. */
    aCopyable?: boolean;
  },
): MatmulChoice {
  const { m, n, k, batch } = problem;
  const half = Boolean(problem.halfAccumulate);
  const aCopyable = !problem.transposeA && problem.aCopyable !== false;
  const transposeAFirst = half && aCopyable && Math.min(m, n, k) >= MATMUL_COPY_A_MIN;
  const busy = caps?.isFallbackAdapter ? 16 : MATMUL_BUSY;
  const defaults = {
    doubleBuffer: true,
    sharedLayout: "thread" as const,
    prefetch: true,
    swizzle: 4,
    productForm: "broadcast" as const,
    vectorLoads: true,
  };
  const columns = problem.transposeA ||
    (aCopyable && (matmulOverride?.transposeAFirst ?? transposeAFirst));
  const halfLarge = columns ? MATMUL_HALF_COLUMNS_LARGE : MATMUL_HALF_LARGE;
  const tiles = half ? [halfLarge, ...MATMUL_TILES.slice(1)] : MATMUL_TILES;
  const fits = (t: MatmulTile) => matmulFits(caps, { ...defaults, ...t }, half);
  const usable = tiles.filter(fits);
  const candidates = usable.length ? usable : [tiles[tiles.length - 1]];
  const maxSplits = k >= 2 * MATMUL_MIN_SPLIT ? Math.min(64, Math.floor(k / MATMUL_MIN_SPLIT)) : 1;
  const plans = candidates.map((t) => {
    const groups = batch * Math.ceil(m / t.tileM) * Math.ceil(n / t.tileN);
    const splitK = groups >= busy ? 1 : Math.max(1, Math.min(maxSplits, Math.floor(busy / groups)));
    return { tile: t, splitK, groups: groups * splitK };
  });
  const best = plans.find((x) => x.groups >= busy) ?? plans[plans.length - 1];
  // Stream-K: the large float32 tile, where whole waves would leave the last one part-empty
  // for long enough (the whole waves still run as plain tiles; see `variant`).
  const multiprocessors = caps?.isFallbackAdapter
    ? undefined
    : KNOWN_MULTIPROCESSORS.find(([name]) => name.test(caps?.description ?? ""))?.[1];
  const slots = (multiprocessors ?? 0) * MATMUL_LARGE_PER_MULTIPROCESSOR;
  const leftover = slots > 0 ? best.groups % slots : 0;
  const streamK = !half && problem.dtype !== "int32" && best.tile === MATMUL_TILES[0] &&
    best.splitK === 1 && leftover > 0 &&
    k * (1 - (MATMUL_STREAM_K_SLOWER * leftover) / slots) >= MATMUL_STREAM_K_MIN_SAVED_K;
  // gemv: the matrix's contiguous axis decides the form; the vector side of M = 1 is A.
  const matrixKContiguous = m === 1 ? Boolean(problem.transposeB) : !problem.transposeA;
  const choice: MatmulChoice = {
    kernel: "matmul",
    variant: m === 1 || n === 1
      ? "gemv"
      : best.splitK > 1
      ? "splitK"
      : streamK
      ? "streamK"
      : "tiled",
    ...defaults,
    ...best.tile,
    splitK: best.splitK,
    // An override asking for stream-K without a count gets the slots, or what keeps it busy.
    streamKGroups: slots || busy,
    gemvWorkgroupSize: 256,
    gemvWidth: matrixKContiguous ? 32 : 4,
    subgroups: false,
    prologue: planMatmulPrologue(problem),
    interiorLoads: problem.dtype === "float32",
    transposeAFirst,
    ...matmulOverride,
  };
  // Shuffles reach only within a subgroup: the width must fit the smallest one.
  const shuffles = Boolean(caps?.subgroups) && choice.gemvWidth <= (caps?.subgroupMinSize ?? 0);
  choice.subgroups = shuffles && (matmulOverride?.subgroups ?? true);
  // What the problem allows, whatever an override asks.
  if (choice.variant === "gemv" && m !== 1 && n !== 1) choice.variant = "tiled";
  if (choice.variant !== "splitK") choice.splitK = 1;
  // Stream-K publishes float32 partials; other accumulators run the tiles in waves.
  if (choice.variant === "streamK" && (half || problem.dtype === "int32")) choice.variant = "tiled";
  if (choice.variant !== "streamK") choice.streamKGroups = 0;
  if (choice.variant === "gemv" || !aCopyable) choice.transposeAFirst = false;
  checkMatmulChoice(caps, choice, half);
  return choice;
}

/** Products up to this many flops take a pending elementwise operand as a fused prologue. */
const MATMUL_PROLOGUE_MAX_FLOPS = 2 ** 30;

/**
 * Whether a matmul computes a pending elementwise operand as it loads its tiles (a prologue)
 * instead of in a kernel of its own first: for products up to 2^30 flops, where the saved
 * dispatch and round trip through memory weigh more than the product's slower K steps. Measured
 * on an H200 (float32 4096^3, A = relu(x * s) with s a [K] vector): 4.29 ms fused (32.0
 * TFLOP/s) against 3.56 ms (38.6) with the operand computed first: the prologue's extra loads
 * and registers slow every K step, while computing A first is one pass over it. An override's
 * `prologue` decides instead.
 *
 * @example
 * ```ts
 * import { planMatmulPrologue } from "@gyre/gyre";
 * planMatmulPrologue({ m: 256, n: 256, k: 256, batch: 1 }); // true
 * planMatmulPrologue({ m: 4096, n: 4096, k: 4096, batch: 1 }); // false
 * ```
 */
export function planMatmulPrologue(
  problem: { m: number; n: number; k: number; batch: number },
): boolean {
  return matmulOverride?.prologue ??
    2 * problem.batch * problem.m * problem.n * problem.k <= MATMUL_PROLOGUE_MAX_FLOPS;
}

/** Whether a tile fits the device's invocation and workgroup storage limits. */
function matmulFits(
  caps: DeviceCaps | undefined,
  t: MatmulTile & { doubleBuffer: boolean; sharedLayout: "thread" | "interleaved" },
  half: boolean,
): boolean {
  const threads = (t.tileM / t.threadM) * (t.tileN / t.threadN);
  const bytes = tiledSharedBytes({ ...t, math: half ? "f16" : "f32" });
  return threads <= (caps?.limits?.maxComputeInvocationsPerWorkgroup ?? 256) &&
    bytes <= (caps?.limits.maxComputeWorkgroupStorageSize ?? 16384);
}

function checkMatmulChoice(caps: DeviceCaps | undefined, c: MatmulChoice, half: boolean): void {
  const fail = (field: string, expected: string, received: unknown) => {
    throw new ValueError({
      op: "setPlanOverride",
      argument: `matmul.${field}`,
      expected,
      received: String(received),
    });
  };
  const pow2 = (v: number) => Number.isInteger(v) && v > 0 && (v & (v - 1)) === 0;
  if (![4, 8, 16].includes(c.threadM)) fail("threadM", "4, 8 or 16", c.threadM);
  if (![4, 8, 16].includes(c.threadN)) fail("threadN", "4, 8 or 16", c.threadN);
  if (!pow2(c.tileM) || c.tileM < c.threadM) fail("tileM", "a power of two >= threadM", c.tileM);
  if (!pow2(c.tileN) || c.tileN < c.threadN) fail("tileN", "a power of two >= threadN", c.tileN);
  if (!pow2(c.tileK) || c.tileK < 4 || c.tileK > 64) fail("tileK", "4, 8, 16, 32 or 64", c.tileK);
  if (!pow2(c.laneColumns) || c.laneColumns > 32) {
    fail("laneColumns", "a power of two <= 32", c.laneColumns);
  }
  if (!Number.isInteger(c.swizzle) || c.swizzle < 1) fail("swizzle", "an integer >= 1", c.swizzle);
  if (!Number.isInteger(c.splitK) || c.splitK < 1 || c.splitK > 256) {
    fail("splitK", "an integer in [1, 256]", c.splitK);
  }
  if (
    c.variant === "streamK" &&
    (!Number.isInteger(c.streamKGroups) || c.streamKGroups < 1 || c.streamKGroups > 65535)
  ) {
    fail("streamKGroups", "an integer in [1, 65535] with variant streamK", c.streamKGroups);
  }
  const maxThreads = caps?.limits?.maxComputeInvocationsPerWorkgroup ?? 256;
  const threads = (c.tileM / c.threadM) * (c.tileN / c.threadN);
  if (c.variant !== "gemv" && threads > maxThreads) {
    fail("tileM", `tiles of at most ${maxThreads} invocations on this device`, `${threads}`);
  }
  const storage = caps?.limits.maxComputeWorkgroupStorageSize ?? 16384;
  const shared = tiledSharedBytes({ ...c, math: half ? "f16" : "f32" });
  if (c.variant !== "gemv" && shared > storage) {
    fail("tileK", `tiles within ${storage} bytes of workgroup storage`, `${shared} bytes`);
  }
  if (!["broadcast", "pairedK", "repeatedA"].includes(c.productForm)) {
    fail("productForm", '"broadcast", "pairedK" or "repeatedA"', c.productForm);
  }
  if (c.sharedLayout !== "thread" && c.sharedLayout !== "interleaved") {
    fail("sharedLayout", '"thread" or "interleaved"', c.sharedLayout);
  }
  if (!pow2(c.gemvWorkgroupSize) || c.gemvWorkgroupSize > maxThreads) {
    fail("gemvWorkgroupSize", `a power of two <= ${maxThreads}`, c.gemvWorkgroupSize);
  }
  if (!pow2(c.gemvWidth) || c.gemvWidth > c.gemvWorkgroupSize) {
    fail("gemvWidth", "a power of two <= gemvWorkgroupSize", c.gemvWidth);
  }
}

/** The choice for the WASM GEMM (asm/matmul.ts): how many threads share it, and how. */
export interface WasmGemmChoice {
  kernel: "wasmGemm";
  /** Threads that compute blocks of C: the calling thread plus workers (src/wasm/threads.ts). */
  threads: number;
  /**
   * "rows": each thread computes a range of C's rows (batch matrices laid end to end), packing
   * its own A panels while all read B; "columns": ranges of C's columns, each thread packing its
   * own B panels. Either way each element's sum is computed exactly as on one thread.
   */
  split: "rows" | "columns";
}

let wasmGemmOverride: Partial<WasmGemmChoice> | null = null;

/**
 * Below this many floating-point operations (2 M N K over the batch) the WASM GEMM stays on one
 * thread. Handing a share to a worker costs about 60 us (a postMessage, waking the worker, the
 * completion wake-up); on the 2-core test machine one thread won up to 128^3 (4.2e6 FLOPs: 94 us
 * against 114 us), two won from 160^3 (8.2e6: 178 us against 164 us; 1024^3: 46 ms against 24 ms).
 */
export const WASM_GEMM_MIN_FLOPS = 1e7;

/**
 * WASM GEMM: every thread `cores` allows (the calling thread plus the pool's workers) from
 * {@link WASM_GEMM_MIN_FLOPS} up, one below; split along C's longer side (rows when M >= N), so
 * that each thread's share is a wide block. An override may ask for any positive number of
 * threads; those beyond the ready workers run on fewer.
 *
 * @example
 * ```ts
 * import { planWasmGemm } from "@gyre/gyre";
 * planWasmGemm({ m: 1024, n: 1024, k: 1024, batch: 1, cores: 2 }); // 2 threads, rows
 * planWasmGemm({ m: 64, n: 64, k: 64, batch: 1, cores: 2 }).threads; // 1
 * ```
 */
export function planWasmGemm(
  problem: { m: number; n: number; k: number; batch: number; cores: number },
): WasmGemmChoice {
  const { m, n, k, batch, cores } = problem;
  const flops = 2 * batch * m * n * k;
  const choice: WasmGemmChoice = {
    kernel: "wasmGemm",
    threads: flops >= WASM_GEMM_MIN_FLOPS ? Math.max(1, cores) : 1,
    split: m >= n ? "rows" : "columns",
    ...wasmGemmOverride,
  };
  const fail = (field: string, expected: string, received: unknown) => {
    throw new ValueError({
      op: "setPlanOverride",
      argument: `wasmGemm.${field}`,
      expected,
      received: String(received),
    });
  };
  if (!Number.isInteger(choice.threads) || choice.threads < 1) {
    fail("threads", "a positive integer", choice.threads);
  }
  if (choice.split !== "rows" && choice.split !== "columns") {
    fail("split", '"rows" or "columns"', choice.split);
  }
  return choice;
}
