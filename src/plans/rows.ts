/**
 * The rows plan (softmax and the norms): one fused pass per row, or chunk statistics and a
 * normalising pass.
 * @module
 */
import type { DeviceCaps } from "../core/caps.ts";

/** One pass per row, or chunk statistics first (the registry and the coverage test read this list). */
export const ROWS_VARIANTS = ["single", "chunked"] as const;
/** One of {@link ROWS_VARIANTS}. */
export type RowsVariant = (typeof ROWS_VARIANTS)[number];

/** How the invocations sharing a row combine a statistic (the registry and the coverage test read this list). */
export const ROWS_COMBINES = ["none", "shuffle", "subgroup", "shared"] as const;

/** How the invocations sharing a row combine a statistic (see src/gpu/_codegen_rows.ts). */
export type RowsCombine = (typeof ROWS_COMBINES)[number];

/** The choice for the row kernels of softmax and the normalisations (src/gpu/_codegen_rows.ts). */
export interface RowsChoice {
  /** Which plan made this choice (a discriminant). */
  kernel: "rows";
  /**
   * "single": each row is read once into registers, normalised there and written (one pass);
   * "chunked": rows are split into chunks of `threadsPerRow * registers` units; a pass writes each
   * chunk's statistics, a second merges them per row, a third normalises (x is read twice).
   */
  variant: RowsVariant;
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
 * import { rowsCombine } from "@gyre/gyre/tuning";
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

/** Units a lane of a software adapter's single pass keeps (the override limit). */
const ROWS_SOFT_REGISTERS = 32;
/** Lanes of a software adapter's chunks, and units each keeps. */
const ROWS_SOFT_CHUNK_LANES = 64;
const ROWS_SOFT_CHUNK_REGISTERS = 8;

/**
 * A software adapter's row plan: few lanes with many units each, since a workgroup runs on one
 * CPU thread whose vector unit holds a subgroup of lanes, and every lane more a row adds combine
 * steps between them, not bandwidth. Lanes: at least 4, else enough that none keeps more than
 * 32 units; 16 where that would be 8 (8 lanes were not among the measured choices). Rows of
 * more than 128 lanes' worth are chunked, 64 lanes x 8 units a chunk. Measured on lavapipe with
 * 2 threads (bench/results/tune-quality-lavapipe.md, seed 2411): this rule's lanes were the
 * leaders' at 22 of 24 held-out keys and measured within 5% of the leader at a 23rd; the GPU
 * rule's (up to 256 lanes of 4 units) were within 5% at none.
 */
function softwareRowsPlan(
  units: number,
): { variant: RowsChoice["variant"]; threads: number; registers: number } {
  if (units > 128 * ROWS_SOFT_REGISTERS) {
    return {
      variant: "chunked",
      threads: ROWS_SOFT_CHUNK_LANES,
      registers: ROWS_SOFT_CHUNK_REGISTERS,
    };
  }
  let threads = Math.max(4, pow2Ceil(Math.ceil(units / ROWS_SOFT_REGISTERS)));
  if (threads === 8) threads = 16;
  return { variant: "single", threads, registers: pow2Ceil(Math.ceil(units / threads)) };
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
 * transposing copy, which would add a full read and write of the tensor. A software adapter
 * keeps up to 32 units a lane (`softwareRowsPlan`).
 *
 * @example
 * ```ts
 * import { planRows } from "@gyre/gyre/tuning";
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
  override: Partial<RowsChoice> | null = null,
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
  } else if (caps?.isFallbackAdapter) {
    ({ variant, threads, registers } = softwareRowsPlan(units));
  } else {
    // Units per lane: 8 (fewer lanes a row, more rows a workgroup); short rows spread over up
    // to 32 lanes with 1 or 2 units each, which keeps a subgroup's loads contiguous (a lane
    // reading 4 vec4 of its own row strides across 64 bytes per load). On the H200's 200
    // surveyed keys (bench/results/tune-survey-h200-rows-9004.json, GPU timestamps) 8 units
    // a lane picked within 5% of the fastest at 47% against 38% with 4 (float32; 2-byte
    // elements took 8 before too): [2282, 2608] 62 us against 72 with twice the lanes. Up to
    // 1024 lanes; rows longer than that holds are chunked below.
    threads = clampPow2(
      Math.ceil(units / ROWS_SINGLE_REGISTERS),
      Math.min(32, pow2Ceil(units)),
      1024,
    );
    registers = pow2Ceil(Math.ceil(units / threads));
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
    ...override,
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
  if (choice.variant === "single" || override?.combineThreads === undefined) {
    choice.combineThreads = choice.variant === "single" ? 1 : Math.ceil(choice.chunks / 8);
  }
  choice.combineThreads = clampPow2(choice.combineThreads, 1, 256);
  choice.combine = rowsCombine(caps, choice.threadsPerRow, choice.subgroups);
  choice.combineStage = rowsCombine(caps, choice.combineThreads, choice.subgroups);
  return choice;
}

/** Invocations of the one-pass row backward: one workgroup a row. */
export const ROWS_BACKWARD_WORKGROUP = 256;
/** Registers (units) each invocation of the one-pass row backward holds at most. */
export const ROWS_BACKWARD_MAX_REGISTERS = 8;
/**
 * Shortest row (in units) the one-pass backward takes: below it most of a 256-invocation
 * workgroup would idle, and the composed reduce and elementwise kernels, which pack many short
 * rows into a workgroup, do better.
 */
export const ROWS_BACKWARD_MIN_UNITS = 128;

/**
 * The one-pass row backward's registers for rows of `units` units (vec4 or scalar), or null where
 * the rows do not fit it (the backward is then composed from reductions and elementwise kernels).
 *
 * @example
 * ```ts
 * import { planRowsBackward } from "./rows.ts";
 * planRowsBackward(1024); // 4: a [*, 4096] float32 row as vec4, 4 units an invocation
 * planRowsBackward(4096); // null: longer than 8 units an invocation
 * ```
 */
export function planRowsBackward(units: number): number | null {
  const registers = Math.ceil(units / ROWS_BACKWARD_WORKGROUP);
  if (registers > ROWS_BACKWARD_MAX_REGISTERS || units < ROWS_BACKWARD_MIN_UNITS) return null;
  return registers;
}
