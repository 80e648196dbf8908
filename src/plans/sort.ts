/**
 * The sort family's plan (sort, argsort, Rank-K, kthvalue, quantiles on the GPU).
 * @module
 */
import type { DeviceCaps } from "../core/caps.ts";

/** The GPU sort kernels' forms (the registry and the coverage test read this list). */
export const SORT_VARIANTS = [
  "bitonic",
  "bitonic-local",
  "radix",
  "radix-ballot",
  "select",
  "bitonic-tree",
  "radix-select",
  "subgroup",
  "merge",
] as const;
/** One of {@link SORT_VARIANTS}. */
export type SortVariant = (typeof SORT_VARIANTS)[number];

/** The choice for sorting rows on the GPU (src/gpu/sort.ts). */
export interface SortChoice {
  /** Which plan made this choice (a discriminant). */
  kernel: "sort";
  /**
   * "bitonic": every row's (key, index) pairs, padded to a power of two P, through a bitonic
   * network of log2(P)(log2(P) + 1) / 2 compare-exchange dispatches over all rows at once;
   * "bitonic-local": the same network with every step below a tile of 1024 elements done in
   * workgroup memory, one dispatch for all of them per stage (one in all for rows of up to 1024),
   * so rows of P elements take 1 + sum over the stages past the tile of (their global steps + 1)
   * dispatches; "radix": a stable LSD radix sort, four passes of 8-bit digits, each a count of
   * every 1024-element tile's digits, a scan of the counts and a scatter that sorts each tile by
   * the digit in workgroup memory with nine one-bit splits (about 2.5 passes over the pairs
   * each, whatever the row length); "radix-ballot": the same passes over tiles of `tile` pairs,
   * each tile ranked by subgroup ballots of the digit's bits (needs subgroups of 8 lanes or more).
   * Both radix forms read x in their first pass and write the wanted window of values and
   * indices in their last. "select" (quantiles only): no sort, but a radix selection of each
   * row's order statistics, four passes of a histogram of one 8-bit digit of the keys that
   * match each statistic's prefix so far, each followed by a pick of the digit.
   * "bitonic-tree" (windows within the first half tile of each row's order: Rank-K, small
   * sorts): each workgroup sorts a segment of `tile` pairs in workgroup memory and keeps the
   * window's end; the kept pairs are the next stage's rows until one segment is left (one
   * dispatch a stage; rows up to a tile take one in all).
   * "radix-select" (windows whose end `keep` fits a segment): the key of rank keep - 1 found by
   * the selection's four passes, each tile's keys below and equal to it counted, scanned and
   * compacted (ties in index order) into keep candidates a row, which one tree stage sorts.
   * "subgroup" and "merge" (windows whose end leaves a chunk of STREAM_CHUNK free in the
   * buffer): one pass a stage; each workgroup streams a segment of its row in chunks, appends
   * the pairs that beat the running threshold (the pair of rank keep - 1 so far) to a buffer of
   * `tile` pairs in workgroup memory and, when the buffer could overflow, sorts it (a bitonic
   * network) and keeps its first keep; "subgroup" appends by subgroup scans (one atomic a
   * subgroup), "merge" by a workgroup atomic a pair (no subgroups needed). Rows longer than
   * `segment` take more stages over the segments' kept pairs, as the tree does.
   */
  variant: SortVariant;
  /**
   * Pairs a workgroup takes: of the radix passes (256 times the pairs each invocation holds), or
   * of the bitonic tree (a segment it sorts).
   */
  tile: number;
  /** 32-bit words of a ballot mask: 1 for subgroups of up to 32 lanes, else 4. */
  words: number;
  /**
   * The ballot scatter's per-subgroup digit counters: "plain" words (one a digit; needs a
   * subgroup barrier and 1 KiB a subgroup), else "packed" 16-bit halves of atomic words, which
   * fit subgroups of 8 in 32 KiB (lavapipe); plain scattered 5% faster on the H200.
   */
  counters: "plain" | "packed";
  /** The padded row length P (a power of two, at least the row length). */
  padded: number;
  /** The radix scatter's prefix sums by subgroup operations (where the device has them). */
  subgroups: boolean;
  /** The streaming forms' first-stage segment (elements of a row a workgroup takes); else 0. */
  segment: number;
  /**
   * How "radix-select" compacts its candidates: "two-pass" counts each tile's keys below and
   * equal to the threshold, scans the counts along the row and then compacts; "one-pass" takes
   * each tile's offsets by a look-back over its row's tiles' published counts in the compaction
   * itself (a silent predecessor counted by the reader: no forward progress needed).
   */
  compaction: "one-pass" | "two-pass";
  /**
   * Reads of a silent predecessor's state before the one-pass compaction counts that tile
   * itself (the scan's bound); 0 makes every tile count all of its predecessors (tests).
   */
  lookbackSpin: number;
  /**
   * How "radix-ballot" finds each tile's digit offsets: "multipass" counts every tile's digits,
   * scans the counts along the row and then scatters (three steps a pass); "lookback" (onesweep)
   * takes one histogram of all four digits up front and, in each pass's scatter, the digit's
   * count in the row's earlier tiles by a decoupled look-back (one dispatch a pass).
   */
  prefix: "lookback" | "multipass";
}

/**
 * Padded row lengths past which the radix sort takes over: beyond four tiles the bitonic network
 * needs more dispatches over all the pairs (1 + 3 + 4 + 5 + ... ) than the radix passes' ten
 * (by counting passes; not yet measured).
 */
const RADIX_FROM = 4096;

/** Workgroup memory and invocations the local forms need (tiles of 1024 elements). */
const LOCAL_BYTES = 8192;
/** Workgroup memory of the radix scatter: keys, indices and digits of a tile, and its sums. */
const RADIX_BYTES = 14336;
/** Invocations per workgroup of every GPU sort kernel. */
export const SORT_WORKGROUP = 256;

/**
 * Workgroup words the ballot scatter shares between a tile's staged pairs and its subgroups'
 * digit counters (two a word when `packed`; subgroups of at least `minSubgroup` lanes).
 */
export function ballotPoolWords(tile: number, minSubgroup: number, packed: boolean): number {
  return Math.max(2 * tile, (SORT_WORKGROUP / minSubgroup) * (packed ? 128 : 256));
}

/** Workgroup bytes of the ballot scatter: its pool, the digits' starts and offsets, sums. */
function ballotBytes(tile: number, minSubgroup: number, packed: boolean): number {
  return 4 * (ballotPoolWords(tile, minSubgroup, packed) + 512 + SORT_WORKGROUP / minSubgroup);
}

/** Tiles of the split scatter (fixed: 4 pairs an invocation). */
const SPLIT_TILE = 1024;
/**
 * Tiles of the ballot scatter in order of preference (the first that workgroup memory holds is
 * taken): on the H200, tiles of 2048 scattered 16 Mi pairs in 0.31-0.36 ms a pass, tiles of
 * 4096 (twice the registers) in 0.49-0.51 and of 1024 in 0.39 (bench/sort_dispatches.ts, GPU
 * timestamps, before loads were made branch-free; 2048 then took 0.19-0.21).
 */
const BALLOT_TILES = [2048, 4096, 1024];
/**
 * Row lengths from which the ballot radix sort takes over where the device allows it: on the
 * H200 it took the rows of [4096, 4096] and top-k of [8, 65536] and [1024, 4096] (0.08 and 0.25
 * ms) faster than the bitonic forms (2.4 ms for the rows by bitonic-local; 0.29 and 0.30 ms by
 * the tree at its best segments).
 */
const BALLOT_FROM = 1024;
/**
 * Rows the bitonic tree takes by default: those that fit one segment of up to 1024 pairs that
 * also holds twice the window (one dispatch, where bitonic-local takes three). On the H200 top-k
 * of [16384, 1024] k = 8 took 0.86 ms so (radix 1.41); with k = 1024 (segments of 2048, half
 * padding) 2.05 against bitonic-local's 1.10; longer rows and more stages lost to the radix sort
 * and selection: [8, 65536] k = 1024 0.195 ms against 0.077, [1024, 4096] k = 32 0.248 against
 * the selection's 0.163 (bench/results/sort-nvidia-h200.md).
 */
const TREE_UP_TO = 1024;

/**
 * How much longer than the window's end a row must be for Rank-K to select rather than sort (and
 * rows at least a selection tile long). On the H200 at 370157d (GPU timestamps, median of 15)
 * the selection took top-k of [8, 65536] k = 1024 (64 times) in 0.066 ms (radix sort 0.076),
 * k = 256 0.058 (0.076), [64, 16384] k = 256 0.061 (0.097), [4096, 4096] k = 64 0.38 (0.84),
 * [1, 1 Mi] k = 4096 (256 times, where the candidates' segment sort is long) 0.118 (0.121). Before
 * its histogram and compaction were made cheaper (366d498) it lost at 64 times (0.092 against
 * 0.077) and won from 128. It wins from 8 times now: on the H200's held-out keys (bench/results/
 * tune-quality-h200-no-interiors.json, seed 2711) [1330, 1263] k = 70 (18 times) in 142 us
 * against the ballot radix sort's 171, [191, 11850] k = 452 (26 times) 79 against 178, [2008,
 * 6621] k = 341 (19 times, seed 2411) 272 against 852; on lavapipe [7, 2537] k = 242 (10 times)
 * in 6.9 ms against 10.7.
 */
const SELECT_RATIO = 8;
/** Keys a workgroup of the selection's passes and compaction takes (16 an invocation). */
export const SELECT_TILE = 4096;
/**
 * The shortest rows Rank-K selects in: a quarter of a selection tile (lavapipe: half a tile;
 * its rows of 1081-1395 with k = 23-30 took the radix sort 8-16% faster).
 */
const SELECT_ROW_FROM = SELECT_TILE / 4;
const SELECT_ROW_FROM_SOFT = SELECT_TILE / 2;

/**
 * Few long rows, where Rank-K's bitonic tree in segments of twice the window beats the
 * selection: fewer than 64 rows of at most 48 Ki keys, 512 Ki keys in all, on a GPU (on
 * lavapipe the selection led at every held-out key). On the H200 (bench/results/tune-quality-
 * h200-a.json and h200-no-interiors.json, seeds 2411 and 2711, GPU timestamps) the tree in
 * segments of 512 led at 16 of the 18 held-out keys so placed, 1.1-2.5x faster than the rule
 * before (top-k of [6, 2402] k = 79: 23 us against 58 by the radix sort; [23, 10703] k = 11: 31
 * against 50 by the selection); the selection kept [33, 34408] k = 106 and the longer rows.
 */
function fewLongRows(
  caps: DeviceCaps | undefined,
  problem: { rows: number; length: number },
): boolean {
  return !caps?.isFallbackAdapter && problem.rows < 64 && problem.length <= 48 * 1024 &&
    problem.rows * problem.length <= 512 * 1024;
}

/**
 * Where a GPU's Rank-K streams rows through the merge form rather than selecting: rows of at
 * least `MERGE_ROW_FROM` keys with at least `MERGE_KEYS_PER_WINDOW` keys in all for each element
 * of the window (long rows, many keys, a small window: the merge reads each key once and keeps
 * few, where the selection's histogram passes read them again). Fitted on the H200 to every
 * candidate measured at 160 held-out keys (bench/results/tune-survey-h200-rankk-9005.json, GPU
 * timestamps): the rule with it picks within 5% of the fastest at 82% of them, 73% without
 * (top-k of [105, 127962] k = 55: merge 160 us, selection 198; [20, 739855] k = 133: 198 against
 * 228). Shorter rows kept the selection ([1130, 7309] k = 10: 172 us against the merge's 230),
 * and so did larger windows over fewer keys ([427, 28672] k = 111: 182 against 229).
 */
const MERGE_ROW_FROM = 8192;
const MERGE_KEYS_PER_WINDOW = 131072;

/** Whether a GPU's Rank-K merges rather than selects (see `MERGE_ROW_FROM`). */
function mergesLongRows(
  caps: DeviceCaps | undefined,
  problem: { rows: number; length: number },
  keep: number,
): boolean {
  return !caps?.isFallbackAdapter && problem.length >= MERGE_ROW_FROM &&
    problem.rows * problem.length >= MERGE_KEYS_PER_WINDOW * keep;
}

/** Segments of the bitonic tree, largest first (keys and indices: 8 bytes a pair). */
const TREE_TILES = [4096, 2048, 1024, 512];

/** Elements the streaming forms load a round (4 an invocation). */
export const STREAM_CHUNK = 1024;
/** The streaming forms' buffers, smallest first (fewer candidates to sort at the end). */
const STREAM_TILES = [2048, 4096];
/** The streaming forms' shortest segment (four chunks). */
const STREAM_SEGMENT = 4096;
/**
 * Workgroups past which the streaming forms' segments grow (longer segments, fewer stages). On
 * the H200 (bench/kernels.ts --rankk, GPU timestamps) top-k of [1, 16 Mi] k = 100 took 0.25 ms
 * in segments of 64 Ki (256 workgroups, two stages) against 0.39 in segments of 16 Ki (1024,
 * three stages); [64, 16384] k = 256 0.084 ms in segments of 4096 (256) against 0.090 in one.
 */
const STREAM_GROUPS = 256;

/**
 * Tiles a row may have for Rank-K to compact in one pass by default (see
 * SortChoice.compaction): on the H200 (bench/kernels.ts --rankk, GPU timestamps, medians) the
 * one pass took top-k of [8, 65536] k = 1024 (16 tiles a row) in 0.059 ms (two passes 0.066),
 * [1024, 4096] k = 32 0.108 (0.122), [4096, 4096] k = 64 0.345 (0.385), [64, 16384] k = 256
 * 0.055 (0.061); but one row of 16 Mi (4096 tiles) 0.31 against 0.26 (its compaction 132 us
 * against 99 for count, scan and compact: the look-back's walks are long there;
 * bench/sort_dispatches.ts). Between 16 and 4096 tiles it is not measured.
 */
const ONE_PASS_TILES = 64;
/**
 * The ballot radix sort's digit offsets by default (see SortChoice.prefix): the multipass form.
 * On the H200 at a21cbf1 (GPU timestamps, medians) onesweep took 16 Mi with indices in 1.51 ms
 * against 1.00, 64 Mi in 5.88 against 3.87 and rows of [4096, 4096] in 0.93 against 0.87: its
 * histogram of all four digits took 129 us (shared-memory atomics of every key's four digits),
 * each pass 337-352 us against the multipass form's 192 + 54 + 15 (scatter, count, scan;
 * bench/sort_dispatches.ts): the look-back's walks, one state an invocation a step, are long.
 */
const PREFIX: SortChoice["prefix"] = "multipass";
/** Tiles a row of the onesweep sort may have on a software adapter (see SortChoice.prefix). */
const LOOKBACK_SOFT_TILES = 16;
/** Reads of a silent predecessor's look-back state before counting its tile (as the scan). */
const LOOKBACK_SPIN = 128;

/** Order statistics a row the selection finds at once (two a quantile; more sort instead). */
export const MAX_SELECT_TARGETS = 8;
/**
 * Row lengths from which quantiles select rather than sort: where the sort would take the radix
 * passes (12 dispatches over pairs), the selection's 8 dispatches read the row 4 times.
 */
const SELECT_FROM = RADIX_FROM;

/**
 * What the sort family's plans read of a device, in one place (the GPU host takes the tiles
 * from the plans' choices): the invocations a workgroup of its kernels takes (SORT_WORKGROUP,
 * or 0 where the device allows fewer: then only the global bitonic network runs), workgroup
 * memory, subgroups, and the tiles its sweeps and compactions take.
 *
 * @example
 * ```ts
 * import { sortDevice } from "@gyre/gyre/tuning";
 * sortDevice(undefined).workgroupBytes; // 16384: WebGPU's default where no device is known
 * ```
 */
export function sortDevice(caps: DeviceCaps | undefined): {
  /** Invocations of a workgroup: SORT_WORKGROUP where the device allows it, else 0. */
  workgroupSize: number;
  /** Workgroup memory in bytes. */
  workgroupBytes: number;
  /** Subgroup operations. */
  subgroups: boolean;
  /** The smallest subgroup the device may run (0 when unknown). */
  minSubgroup: number;
  /** A subgroup barrier (`wgpu-subgroup-barrier`). */
  subgroupBarrier: boolean;
  /** Keys a workgroup of the selection's histogram passes sweeps. */
  sweepTile: number;
  /** Keys a workgroup of the selection's compaction takes. */
  compactionTile: number;
  /** Keys a round of the streaming forms loads. */
  streamChunk: number;
} {
  const invocations = caps?.limits?.maxComputeInvocationsPerWorkgroup ?? 256;
  return {
    workgroupSize: invocations >= SORT_WORKGROUP ? SORT_WORKGROUP : 0,
    workgroupBytes: caps?.limits?.maxComputeWorkgroupStorageSize ?? 16384,
    subgroups: caps?.subgroups ?? false,
    minSubgroup: caps?.subgroupMinSize ?? 0,
    subgroupBarrier: caps?.features?.includes("wgpu-subgroup-barrier") ?? false,
    sweepTile: SELECT_TILE,
    compactionTile: SELECT_TILE,
    streamChunk: STREAM_CHUNK,
  };
}

/**
 * Whether Rank-K's staged forms (the tree, the streaming forms) pay for splitting rows into
 * segments that a second stage merges, rather than giving each row one workgroup: where the
 * rows alone fill fewer than STREAM_GROUPS workgroups and a row holds more than one shortest
 * segment (on the H200 top-k of [8, 65536] k = 1024 took 0.42 ms in two stages against 1.8 in
 * one; [1024, 4096] k = 32 is one stage either way).
 *
 * @example
 * ```ts
 * import { twoStagesPay } from "@gyre/gyre/tuning";
 * twoStagesPay(undefined, { rows: 8, cols: 65536, keep: 1024 }); // true
 * twoStagesPay(undefined, { rows: 4096, cols: 4096, keep: 64 }); // false
 * ```
 */
export function twoStagesPay(
  caps: DeviceCaps | undefined,
  problem: { rows: number; cols: number; keep: number },
): boolean {
  const { rows, cols, keep } = problem;
  return sortDevice(caps).workgroupSize > 0 && rows < STREAM_GROUPS &&
    cols > Math.max(STREAM_SEGMENT, 8 * keep);
}

/**
 * Sorting rows on the GPU: rows longer than RADIX_FROM by the radix sort, ranked by subgroup
 * ballots where subgroups of 8 lanes or more and the workgroup memory of a tile exist
 * ("radix-ballot": 16 Mi float32 with indices in 1.04-1.09 ms on the H200, against 3.96 for
 * "radix", whose one-bit splits need neither), shorter ones by the bitonic network with its
 * steps below a tile in workgroup memory ("bitonic-local"), where the device gives 8 KiB of it
 * and 256 invocations a workgroup (every WebGPU device by default), else all steps global
 * ("bitonic"). Every form is correct on every adapter that allows it (none needs forward
 * progress between workgroups) and sorts many rows in one dispatch per step; an override may
 * force any allowed form.
 *
 * @example
 * ```ts
 * import { planSort } from "@gyre/gyre/tuning";
 * planSort(undefined, { rows: 8, length: 1000 }).variant; // "bitonic-local"
 * planSort(undefined, { rows: 8, length: 100 }).variant; // "bitonic-tree"
 * ```
 */
export function planSort(
  caps: DeviceCaps | undefined,
  problem: { rows: number; length: number; select?: number; keep?: number },
  override: Partial<SortChoice> | null = null,
): SortChoice {
  let padded = 1;
  while (padded < problem.length) padded *= 2;
  const device = sortDevice(caps);
  const storage = device.workgroupBytes;
  const wide = device.workgroupSize === SORT_WORKGROUP;
  const subgroups = device.subgroups && override?.subgroups !== false;
  const minSubgroup = device.minSubgroup;
  const barrier = device.subgroupBarrier;
  // The ballot forms that fit: tiles in order of preference, plain counters first.
  const fits = (tile: number, counters: SortChoice["counters"]) =>
    minSubgroup >= 8 && (counters === "packed" || barrier) &&
    ballotBytes(tile, minSubgroup, counters === "packed") <= storage;
  const forms = BALLOT_TILES.flatMap((tile) =>
    (["plain", "packed"] as const).filter((c) => fits(tile, c)).map((counters) => ({
      tile,
      counters,
    }))
  );
  const allowed: Record<SortVariant, boolean> = {
    bitonic: true,
    "bitonic-local": wide && storage >= LOCAL_BYTES,
    radix: wide && storage >= RADIX_BYTES,
    "radix-ballot": wide && subgroups && forms.length > 0,
    select: wide && problem.select !== undefined && problem.select <= MAX_SELECT_TARGETS,
    "bitonic-tree": false,
    "radix-select": false,
    subgroup: false,
    merge: false,
  };
  // The tree keeps the window's end of each segment: at most half a tile of it.
  const keep = problem.keep ?? problem.length;
  const trees = TREE_TILES.filter((t) => 8 * t <= storage && 2 * keep <= t);
  allowed["bitonic-tree"] = wide && problem.select === undefined && trees.length > 0;
  // The selection's candidates are sorted by one segment: the window's end must fit one.
  const segments = TREE_TILES.filter((t) => 8 * t <= storage && keep <= t);
  allowed["radix-select"] = wide && problem.select === undefined && segments.length > 0;
  // The streaming forms: a buffer that holds the window's end and a chunk of candidates.
  const buffers = STREAM_TILES.filter((t) => 8 * t + 16 <= storage && keep + STREAM_CHUNK <= t);
  const streams = wide && problem.select === undefined && buffers.length > 0;
  allowed.subgroup = streams && subgroups;
  allowed.merge = streams;
  let variant: SortVariant = allowed["bitonic-local"] ? "bitonic-local" : "bitonic";
  if (padded > BALLOT_FROM && allowed["radix-ballot"]) variant = "radix-ballot";
  else if (padded > RADIX_FROM && allowed.radix) variant = "radix";
  if (allowed.select && problem.length >= SELECT_FROM) variant = "select";
  const segmentedTree = allowed["bitonic-tree"] && keep < problem.length &&
    fewLongRows(caps, problem);
  // The tree in one stage: rows of up to TREE_UP_TO in one dispatch.
  if (
    allowed["bitonic-tree"] && problem.length <= TREE_UP_TO &&
    trees.some((t) => t >= problem.length && t <= TREE_UP_TO)
  ) variant = "bitonic-tree";
  else if (segmentedTree) variant = "bitonic-tree";
  else if (
    allowed["radix-select"] && problem.length >= SELECT_RATIO * keep &&
    problem.length >= (caps?.isFallbackAdapter ? SELECT_ROW_FROM_SOFT : SELECT_ROW_FROM)
  ) {
    variant = allowed.merge && mergesLongRows(caps, problem, keep) ? "merge" : "radix-select";
  }
  if (override?.variant && allowed[override.variant]) variant = override.variant;
  // The padding follows the row; the variant, the ballot tile and counters (among the forms
  // that fit) and (off) subgroups can be forced.
  const form = forms.find((f) =>
    (override?.tile === undefined || f.tile === override.tile) &&
    (override?.counters === undefined || f.counters === override.counters)
  ) ?? forms[0] ?? { tile: SPLIT_TILE, counters: "packed" as const };
  const ballot = variant === "radix-ballot";
  let tile = ballot ? form.tile : SPLIT_TILE;
  if (variant === "radix-select") {
    // The segment that sorts the candidates: the smallest that holds them.
    tile = [...segments].reverse().find((t) => t >= keep) ?? segments[0];
  }
  if (variant === "bitonic-tree") {
    // The smallest segment that holds the row, else the largest (fewest stages); few long rows
    // take the smallest that holds twice the window (most segments: workgroups to fill the
    // GPU); or as forced.
    tile = [...trees].reverse().find((t) => t >= problem.length) ?? trees[0];
    if (segmentedTree && problem.length > TREE_UP_TO) {
      tile = [...trees].reverse().find((t) => t >= 2 * keep) ?? tile;
    }
    if (override?.tile && trees.includes(override.tile)) tile = override.tile;
  }
  let segment = 0;
  if (variant === "subgroup" || variant === "merge") {
    tile = override?.tile && buffers.includes(override.tile) ? override.tile : buffers[0];
    segment = streamSegment(caps, problem.rows, problem.length, keep, override?.segment);
  }
  const counters = ballot ? form.counters : "packed";
  const words = (caps?.subgroupMaxSize ?? 32) <= 32 ? 1 : 4;
  const compaction = override?.compaction ??
    (Math.ceil(problem.length / SELECT_TILE) <= ONE_PASS_TILES ? "one-pass" : "two-pass");
  const lookbackSpin = override?.lookbackSpin ?? LOOKBACK_SPIN;
  // The look-back's counts hold 28 bits; on a software adapter (lavapipe ends an invocation's
  // loops after 65535 iterations in all) a walk may count at most LOOKBACK_SOFT_TILES silent
  // tiles itself.
  const lookbackFits = problem.rows * problem.length < 2 ** 28 &&
    (!caps?.isFallbackAdapter || Math.ceil(problem.length / form.tile) <= LOOKBACK_SOFT_TILES);
  const prefix = lookbackFits ? override?.prefix ?? PREFIX : "multipass";
  return {
    kernel: "sort",
    variant,
    padded,
    subgroups,
    tile,
    words,
    counters,
    segment,
    compaction,
    lookbackSpin,
    prefix,
  };
}

/**
 * The streaming forms' first-stage segment: a power of two of at least STREAM_SEGMENT and 8
 * times the window's end (so each stage shrinks the rows eightfold), doubled while the rows'
 * segments exceed STREAM_GROUPS workgroups; or as forced, where it is at least twice the window's
 * end (each stage at least halves the rows).
 */
function streamSegment(
  caps: DeviceCaps | undefined,
  rows: number,
  length: number,
  keep: number,
  forced?: number,
): number {
  if (forced !== undefined && forced >= 2 * keep && forced >= 1) return forced;
  if (!twoStagesPay(caps, { rows, cols: length, keep })) return Math.max(length, 1);
  let segment = STREAM_SEGMENT;
  while (segment < 8 * keep) segment *= 2;
  while (rows * Math.ceil(length / segment) > STREAM_GROUPS && segment < length) segment *= 2;
  return segment;
}

/** Rank-K's choice, as issue 22 names its parts (the sort plan's decision for the window). */
export interface RankKChoice {
  /** Which plan made this choice (a discriminant). */
  kernel: "rankK";
  /**
   * The merge kind: "tree" (segments sorted in workgroup memory, each keeping the window's end,
   * merged stage by stage), "select" (the threshold key by radix selection, the keys up to it
   * compacted tile by tile, then sorted in one segment), "radix" (each row radix-sorted, the
   * window written by the last pass) or "bitonic" (each row through a bitonic network, the
   * window gathered), "subgroup" or "merge" (each segment of a row streamed through a buffer in
   * workgroup memory, candidates that beat the running threshold appended by subgroup scans or
   * by workgroup atomics, the buffer sorted when full; later stages over the segments' kept
   * pairs).
   */
  mk: "tree" | "radix" | "bitonic" | "select" | "subgroup" | "merge";
  /** Its sub-strategy: the sort plan's variant. */
  mkd: SortVariant;
  /** Pairs a workgroup takes (a tree's or the candidates' segment, a radix tile). */
  tile: number;
  /**
   * The compaction tile: of "select" (keys a workgroup counts and compacts), of the streaming
   * forms (the keys a workgroup filters and appends a round); else 0.
   */
  ctile: number;
  /** Whether candidates are found per tile and merged in later passes (a tree of stages). */
  twoStage: boolean;
  /** The tree's stages; 2 for "select" (compaction, then the candidates' sort); else 1. */
  stages: number;
}

/**
 * The plan of Rank-K (top, bottom or mid k of rows of `cols`): the sort plan's decision for the
 * window the kind takes (top and bottom the first k of a descending or ascending order, mid the
 * k from floor((cols - k) / 2)), which the GPU executes, seen as merge kind, tile and stages.
 *
 * @example
 * ```ts
 * import { planRankK } from "@gyre/gyre/tuning";
 * planRankK(undefined, { kind: "top", rows: 8, cols: 65536, k: 1024 }).mk; // "select"
 * ```
 */
export function planRankK(
  caps: DeviceCaps | undefined,
  problem: { kind: "top" | "mid" | "bottom"; rows: number; cols: number; k: number },
  override: Partial<SortChoice> | null = null,
): RankKChoice {
  const { kind, rows, cols, k } = problem;
  const keep = kind === "mid" ? Math.floor((cols - k) / 2) + k : k;
  const choice = planSort(caps, { rows, length: cols, keep }, override);
  let stages = 1;
  if (choice.variant === "bitonic-tree") {
    for (let length = cols; length > choice.tile; length = Math.ceil(length / choice.tile) * keep) {
      stages++;
    }
  }
  // The selection: its passes and compaction over tiles, then one sort of the candidates.
  const selecting = choice.variant === "radix-select";
  if (selecting) stages = 2;
  const streaming = choice.variant === "subgroup" || choice.variant === "merge";
  if (streaming) stages = streamStages(cols, choice.segment, keep);
  const mk = choice.variant === "bitonic-tree"
    ? "tree"
    : selecting
    ? "select"
    : streaming
    ? choice.variant as "subgroup" | "merge"
    : choice.variant.startsWith("radix")
    ? "radix"
    : "bitonic";
  return {
    kernel: "rankK",
    mk,
    mkd: choice.variant,
    tile: choice.tile,
    ctile: selecting ? SELECT_TILE : streaming ? STREAM_CHUNK : 0,
    twoStage: stages > 1,
    stages,
  };
}

/**
 * Stages of the streaming forms over rows of `length`: one a pass over `segment`-long segments
 * of the last stage's rows (each keeping `keep` pairs) until one segment is a row.
 */
function streamStages(length: number, segment: number, keep: number): number {
  let stages = 1;
  for (; length > segment; length = Math.ceil(length / segment) * keep) stages++;
  return stages;
}
