/**
 * The scan plan (cumsum, cumprod, cummax, cummin): one pass per row, multipass, or a decoupled
 * look-back.
 * @module
 */
import type { DeviceCaps } from "../core/caps.ts";

import type { ScanOp } from "../ir/scan.ts";

/** The scan schemes (the registry and the coverage test read this list). */
export const SCAN_VARIANTS = ["row", "lookback", "multipass"] as const;
/** One of {@link SCAN_VARIANTS}. */
export type ScanVariant = (typeof SCAN_VARIANTS)[number];

/** How a scan over a non-last axis reads its rows (the registry and the coverage test read this list). */
export const SCAN_LAYOUTS = ["strided", "columns", "transpose"] as const;
/** One of {@link SCAN_LAYOUTS}. */
export type ScanLayout = (typeof SCAN_LAYOUTS)[number];

/** The choice for a scan (cumsum, cumprod, cummax, cummin; src/gpu/_codegen_scan.ts). */
export interface ScanChoice {
  /** Which plan made this choice (a discriminant). */
  kernel: "scan";
  /**
   * "row": a workgroup (or a team of its threads) per row, for rows that fit in one tile;
   * "lookback": one pass over tiles of long rows, each tile taking its prefix from its
   * predecessors' published aggregates (decoupled look-back; a predecessor silent too long is
   * reduced by its reader, so no forward progress is assumed);
   * "multipass": reduce tiles, scan the tile totals, scan tiles with their offsets.
   */
  variant: ScanVariant;
  /** Scan across a workgroup with subgroup operations rather than shared memory alone. */
  subgroups: boolean;
  /** Invocations per workgroup. */
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
  layout: ScanLayout;
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

/**
 * The look-back's tile on hardware GPUs, by the format of its states (H200, session 11,
 * bench/results/history/kernels-nvidia-h200-scan-wide.md). With one 64-bit word per state, 256 x 32: 64 Mi
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
 * A software adapter's elements an invocation, and the rows (at most this long, at least this
 * many) it scans in tiles of many rows (multipass) instead of a workgroup a row: its workgroups
 * run as loops on a CPU thread, where fewer, longer invocations cost less, and a row of 76 in a
 * workgroup of 256 leaves most of it idle. On lavapipe (bench/results/tune-quality-lavapipe.json
 * and -lavapipe-six.json, seeds 2411 and 2711) 32 elements led at 39 of the 48 held-out keys
 * ([28, 2508]: 736 us against 16 elements' 1019); rows of 68-114 by the thousand ran 17-23%
 * faster in multipass tiles ([2273, 68]: 1259 us against 1553).
 */
const SCAN_SOFT_PER_THREAD = 32;
const SCAN_SOFT_SHORT_ROW = 256;

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
 * import { planScan } from "@gyre/gyre/tuning";
 * planScan(undefined, { rows: 1, rowLength: 1 << 26 }).variant; // "multipass" (no GPU known)
 * planScan(undefined, { rows: 65536, rowLength: 1000, inner: 256 }).layout; // "columns"
 * ```
 */
export function planScan(
  caps: DeviceCaps | undefined,
  problem: { rows: number; rowLength: number; inner?: number; op?: ScanOp },
  override: Partial<ScanChoice> | null = null,
): ScanChoice {
  const workgroupSize = 256;
  const subgroups = Boolean(caps?.subgroups) && (caps?.subgroupMinSize ?? 0) >= 4 &&
    (caps?.subgroupMaxSize ?? 0) <= 64;
  const soft = Boolean(caps?.isFallbackAdapter);
  const elementsPerThread = soft ? SCAN_SOFT_PER_THREAD : 16;
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
  const shortRows = soft && problem.rowLength <= SCAN_SOFT_SHORT_ROW &&
    problem.rows >= SCAN_SOFT_SHORT_ROW;
  const variant = override?.variant ??
    (fits && !shortRows ? "row" : longSum ? "lookback" : "multipass");
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
    ...override,
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
