/**
 * The sort family on the GPU: host code for the kernels _codegen_sort.ts generates. Rows are
 * first copied with the axis last and contiguous in a 32-bit compute dtype (float16 widened), or
 * read in place when they already are. The plan (src/plans/sort.ts) picks how each job's window
 * of every row's order is made: the radix passes (long rows; the first reads x, the last writes
 * the window), the bitonic tree (windows within half a segment), or the bitonic network over
 * padded (key, index) pairs and a gather; quantiles select their order statistics by radix
 * passes over the keys or read them off sorted rows. Results equal the WASM reference's bit for
 * bit (the order is a strict total order of (key, index)); outputs go back into the input's axis
 * order.
 * @module
 */
import type { DType } from "../core/dtype.ts";
import { axisLast, contiguousStrides, fromAxisOrder, isContiguous, sizeOf } from "../core/shape.ts";
import type { View } from "../core/view.ts";
import type {
  QuantileJob,
  QuantileResult,
  SearchJob,
  SearchResult,
  SortJob,
  SortResult,
} from "../contract/sort.ts";
import {
  QUANTILE_METHOD_CODE,
  quantileCount,
  SORT_KEY_KIND,
  sortComputeDType,
  TOTAL_ORDER_KIND,
} from "../contract/sort.ts";
import { E } from "../ir/expr.ts";
import type { PlanOverrides } from "../plans/overrides.ts";
import { observePlan } from "../contract/backend.ts";
import { tunedOverride } from "../heuristics/consensus.ts";
import { sortTuneKey } from "../heuristics/families.ts";
import { planSort, type SortChoice } from "../plans/mod.ts";
import type { GpuHost, GpuStorage } from "./host.ts";
import { runScanGpu } from "./scan.ts";
import { NO_OVERRIDES } from "../plans/overrides.ts";
import {
  generateSort,
  RADIX_TILE,
  SELECT_TILE,
  selectHistWords,
  selectStateWords,
  SORT_TILE,
  SORT_WORKGROUP,
  sortKey,
  type SortStage,
} from "./_codegen_sort.ts";

/** Packs uniform words, padded to a multiple of four. */
function words(values: number[]): Uint32Array {
  const out = new Uint32Array(Math.ceil(values.length / 4) * 4);
  out.set(values);
  return out;
}

function run(
  gpu: GpuHost,
  op: string,
  stage: SortStage,
  buffers: GPUBuffer[],
  writable: number,
  uniforms: number[],
  invocations: number,
): void {
  const pipeline = gpu.pipeline(
    sortKey(stage),
    buffers.length,
    () => generateSort(stage),
    writable,
  );
  gpu.dispatch(op, pipeline, buffers, words(uniforms), gpu.grid(invocations, SORT_WORKGROUP));
}

/** A view's rows along `axis`: contiguous, axis last, in the compute dtype. */
interface Rows {
  storage: GpuStorage;
  /** A copy made here (freed by the caller), or the input's own storage. */
  copied: boolean;
  offset: number;
  order: number[];
  shape: number[];
  rows: number;
  length: number;
}

function rowsOf(
  gpu: GpuHost,
  op: string,
  view: View,
  axis: number,
  overrides: Readonly<PlanOverrides>,
): Rows {
  const { order, shape, strides } = axisLast(view.shape, view.strides, axis);
  const length = view.shape[axis];
  const rows = length === 0 ? 0 : sizeOf(shape) / length;
  const compute = sortComputeDType(view.dtype);
  if (view.dtype === compute && isContiguous(shape, strides)) {
    return {
      storage: view.storage as GpuStorage,
      copied: false,
      offset: view.offset,
      order,
      shape,
      rows,
      length,
    };
  }
  const storage = gpu.evaluate({
    op,
    expr: E.cast(E.input(0, view.dtype), compute),
    inputs: [{ ...view, shape, strides }],
    shape,
    overrides,
  }) as GpuStorage;
  return { storage, copied: true, offset: 0, order, shape, rows, length };
}

/** What a sort job wants of each sorted row, for the kernels. */
interface Window {
  descending: boolean;
  /** The key kind (contract/sort.ts SORT_KEY_KIND, or TOTAL_ORDER_KIND). */
  kind: number;
  start: number;
  count: number;
  /** Whether the indices are wanted (else `indices` is not written). */
  indices: boolean;
}

/**
 * Sorts every row of `r` and writes the window [start, start + count) of each sorted row into
 * `values` and (where wanted) `indices`, rows of `count`: by the radix passes for long rows,
 * else by the bitonic network over (key, index) pairs and a gather.
 */
function sortRows(
  gpu: GpuHost,
  op: string,
  r: Rows,
  w: Window,
  values: GpuStorage,
  indices: GpuStorage,
  overrides: Readonly<PlanOverrides>,
): void {
  const keep = w.start + w.count;
  const tune = sortTuneKey(gpu.caps, r.rows, r.length, keep);
  const choice = observePlan(
    "gpu",
    "sort",
    op,
    planSort(
      gpu.caps,
      { rows: r.rows, length: r.length, keep },
      tunedOverride(tune.family, gpu.caps, tune.key, overrides.sort),
    ),
    overrides.sort,
  );
  if (choice.variant === "radix" || choice.variant === "radix-ballot") {
    radixSort(gpu, op, r, w, choice, values, indices);
    return;
  }
  if (choice.variant === "bitonic-tree") {
    stagedSort(gpu, op, r, w, { stage: "rank-tile", tile: choice.tile }, values, indices);
    return;
  }
  if (choice.variant === "subgroup" || choice.variant === "merge") {
    const stream = {
      stage: "rank-stream" as const,
      tile: choice.tile,
      segment: choice.segment,
      subgroups: choice.variant === "subgroup",
    };
    stagedSort(gpu, op, r, w, stream, values, indices);
    return;
  }
  if (choice.variant === "radix-select") {
    selectWindow(gpu, op, r, w, choice, values, indices);
    return;
  }
  const { padded } = choice;
  const local = choice.variant === "bitonic-local";
  // Local steps take whole tiles: the pairs are rounded up with rows of padding keys.
  const real = r.rows * padded;
  const total = local ? Math.ceil(real / SORT_TILE) * SORT_TILE : real;
  const keys = gpu.alloc(op, "uint32", total);
  const order = gpu.alloc(op, "uint32", total);
  try {
    run(gpu, op, "keys", [r.storage.buffer, keys.buffer, order.buffer], 2, [
      total,
      r.length,
      padded,
      w.kind,
      w.descending ? 0xffffffff : 0,
      r.offset,
      r.rows,
    ], total);
    const global = (j: number, k: number) =>
      run(
        gpu,
        op,
        "bitonic",
        [keys.buffer, order.buffer],
        2,
        [total / 2, padded / 2, j, k],
        total / 2,
      );
    const tiles = (kLo: number, kHi: number) => {
      const pipeline = gpu.pipeline(
        sortKey("bitonic-local"),
        2,
        () => generateSort("bitonic-local"),
        2,
      );
      const groups = total / SORT_TILE;
      gpu.dispatch(
        op,
        pipeline,
        [keys.buffer, order.buffer],
        words([padded, kLo, kHi]),
        workgroups(gpu, groups),
      );
    };
    if (local) {
      // Every stage up to a tile in one dispatch; then each longer stage's steps down to a
      // tile globally, and the rest of it in tiles.
      tiles(2, Math.min(padded, SORT_TILE));
      for (let k = 2 * SORT_TILE; k <= padded; k *= 2) {
        for (let j = k / 2; j >= SORT_TILE; j /= 2) global(j, k);
        tiles(k, k);
      }
    } else {
      for (let k = 2; k <= padded; k *= 2) {
        for (let j = k / 2; j >= 1; j /= 2) global(j, k);
      }
    }
    const outputs = r.rows * w.count;
    run(gpu, op, "gather", [r.storage.buffer, order.buffer, values.buffer, indices.buffer], 2, [
      outputs,
      r.length,
      padded,
      w.start,
      w.count,
      r.offset,
    ], outputs);
  } finally {
    gpu.free(keys);
    gpu.free(order);
  }
}

/** A form that works in stages over segments of rows, each keeping the window's end. */
interface Stages {
  /**
   * "rank-tile": the bitonic tree (segments of `tile` pairs sorted in workgroup memory);
   * "rank-stream": the streaming forms (segments of `segment` streamed through a buffer of
   * `tile` pairs, candidates appended by subgroup scans where `subgroups`).
   */
  stage: "rank-tile" | "rank-stream";
  tile: number;
  segment?: number;
  subgroups?: boolean;
}

/**
 * The bitonic tree and the streaming forms: each stage reduces segments of every row to their
 * first start + count pairs (in order); the kept pairs are the next stage's rows until one
 * segment is left, whose window the last stage writes.
 */
function stagedSort(
  gpu: GpuHost,
  op: string,
  r: Rows,
  w: Window,
  form: Stages,
  values: GpuStorage,
  indices: GpuStorage,
): void {
  const keep = w.start + w.count;
  const { stage, tile } = form;
  const segment = form.segment ?? tile;
  const held: GpuStorage[] = [];
  try {
    let length = r.length;
    let src: GPUBuffer = r.storage.buffer;
    let order: GPUBuffer = r.storage.buffer;
    for (let first = true;; first = false) {
      const tiles = Math.ceil(length / segment);
      const last = tiles === 1;
      const options = form.subgroups
        ? { tile, first, last, subgroups: true }
        : { tile, first, last };
      const kernel = gpu.pipeline(
        sortKey(stage, options),
        5,
        () => generateSort(stage, options),
        2,
      );
      const groups = r.rows * tiles;
      const next = last ? null : [
        gpu.alloc(op, "uint32", r.rows * tiles * keep),
        gpu.alloc(op, "uint32", r.rows * tiles * keep),
      ];
      if (next) held.push(...next);
      gpu.dispatch(
        op,
        kernel,
        [
          src,
          order,
          r.storage.buffer,
          next ? next[0].buffer : values.buffer,
          next ? next[1].buffer : indices.buffer,
        ],
        words([
          length,
          tiles,
          keep,
          w.kind,
          w.descending ? 0xffffffff : 0,
          r.offset,
          r.length,
          r.rows,
          w.start,
          w.count,
          w.indices ? 1 : 0,
          segment,
        ]),
        workgroups(gpu, groups),
      );
      if (!next) return;
      src = next[0].buffer;
      order = next[1].buffer;
      length = tiles * keep;
    }
  } finally {
    for (const storage of held) gpu.free(storage);
  }
}

/** The workgroups for `groups` tiles, folded into two dimensions as the device allows. */
function workgroups(gpu: GpuHost, groups: number): [number, number] {
  return gpu.grid(groups * SORT_WORKGROUP, SORT_WORKGROUP);
}

/**
 * The radix selection's four passes over the rows of `r`: each a histogram of one 8-bit digit
 * of the keys (kind `kind`, complemented by `flip`) among those matching each target's prefix
 * so far (SELECT_TILE keys a workgroup, into a scratch buffer the picks leave cleared), then a
 * pick of the digit per row (one workgroup a row), which leaves each target's key and rank in
 * `state`: quantiles' (the last pick writing them to `out`, from `table`) or, in rank mode
 * (`targets` 1, `pick.rank` set), one rank's, the first pick clearing each row's tiles' words
 * of `out` (the one-pass compaction's look-back states).
 */
function selectionPasses(
  gpu: GpuHost,
  op: string,
  r: Rows,
  s: {
    targets: number;
    kind: number;
    flip: number;
    subgroups: boolean;
    state: GpuStorage;
    stateWords: number;
    table: GPUBuffer;
    out: GPUBuffer;
    pick: { method: number; skip: number; bits: number; rank: number };
  },
): void {
  const n = r.length;
  const tiles = Math.ceil(n / SELECT_TILE);
  const hist = gpu.scratch("sort selection histograms", r.rows * selectHistWords(s.targets));
  const histOptions = { subgroups: s.subgroups, targets: s.targets };
  const histKernel = gpu.pipeline(
    sortKey("select-hist", histOptions),
    3,
    () => generateSort("select-hist", histOptions),
  );
  const pickOptions = s.targets === 1 ? { targets: 1, rank: true } : { targets: s.targets };
  const pick = gpu.pipeline(
    sortKey("select-pick", pickOptions),
    4,
    () => generateSort("select-pick", pickOptions),
    3,
  );
  const { method, skip, bits, rank } = s.pick;
  for (let shift = 24; shift >= 0; shift -= 8) {
    gpu.dispatch(
      op,
      histKernel,
      [r.storage.buffer, s.state.buffer, hist],
      words([n, tiles, shift, r.offset, s.stateWords, r.rows, s.kind, s.flip]),
      workgroups(gpu, r.rows * tiles),
    );
    gpu.dispatch(
      op,
      pick,
      [s.table, hist, s.state.buffer, s.out],
      words([n, r.rows, shift, method, skip, bits, rank, s.targets === 1 ? tiles : 0]),
      workgroups(gpu, r.rows),
    );
  }
}

/**
 * The ballot radix sort in one dispatch a pass (onesweep): the rows' histograms of all four
 * digits in one read of x (after a dispatch that zeroes them; it also clears the tiles'
 * look-back states), then four passes of the ballot scatter, each tile's digit offsets by a
 * look-back over the row's earlier tiles.
 */
function onesweepSort(
  gpu: GpuHost,
  op: string,
  r: Rows,
  w: Window,
  choice: SortChoice,
  values: GpuStorage,
  indices: GpuStorage,
): void {
  const n = r.length;
  const tile = choice.tile;
  const perInvocation = tile / SORT_WORKGROUP;
  const tiles = Math.ceil(n / tile);
  const grid = workgroups(gpu, r.rows * tiles);
  const x = r.storage.buffer;
  const hist = gpu.alloc(op, "uint32", r.rows * 1024);
  const states = gpu.alloc(op, "uint32", r.rows * tiles * 256);
  try {
    gpu.zero(op, hist.buffer, r.rows * 1024);
    const histOptions = { subgroups: true, perInvocation };
    const histKernel = gpu.pipeline(
      sortKey("radix-hist", histOptions),
      3,
      () => generateSort("radix-hist", histOptions),
      2,
    );
    const histUniforms = radixUniforms(r, w, tiles, 0, choice.lookbackSpin);
    gpu.dispatch(op, histKernel, [x, hist.buffer, states.buffer], histUniforms, grid);
    radixPasses(gpu, op, r, w, tiles, choice.lookbackSpin, (pass) => {
      const { first, last } = pass;
      const options = {
        perInvocation,
        words: choice.words,
        packed: choice.counters === "packed",
        minSubgroup: gpu.caps.subgroupMinSize,
        first,
        last,
        lookback: true,
      };
      const scatter = gpu.pipeline(
        sortKey("radix-ballot", options),
        7,
        () => generateSort("radix-ballot", options),
        3,
      );
      gpu.dispatch(
        op,
        scatter,
        [
          pass.keys,
          pass.order,
          hist.buffer,
          x,
          last ? values.buffer : pass.outKeys,
          last ? indices.buffer : pass.outOrder,
          states.buffer,
        ],
        pass.uniforms,
        grid,
      );
    });
  } finally {
    gpu.free(hist);
    gpu.free(states);
  }
}

/** One of the radix sort's four passes, as `radixPasses` hands it out. */
interface RadixPass {
  first: boolean;
  last: boolean;
  /** The pass's Params (RADIX_PARAMS, and the look-back's reads where given). */
  uniforms: Uint32Array;
  /** The pass's source keys and indices (x in the first pass). */
  keys: GPUBuffer;
  order: GPUBuffer;
  /** Where the pass writes its pairs (unless the last pass writes the window). */
  outKeys: GPUBuffer;
  outOrder: GPUBuffer;
}

/** The radix passes' Params (RADIX_PARAMS; `spin` the onesweep look-back's reads). */
function radixUniforms(r: Rows, w: Window, tiles: number, shift: number, spin = 0) {
  return words([
    r.length,
    tiles,
    shift,
    w.indices ? 1 : 0,
    w.kind,
    w.descending ? 0xffffffff : 0,
    r.offset,
    w.start,
    w.count,
    r.rows,
    spin,
  ]);
}

/**
 * Runs `pass` for the four 8-bit digits, low first, over two pairs of (keys, indices) buffers
 * that the passes write in turn (freed after the last).
 */
function radixPasses(
  gpu: GpuHost,
  op: string,
  r: Rows,
  w: Window,
  tiles: number,
  spin: number,
  pass: (p: RadixPass) => void,
): void {
  const total = r.rows * r.length;
  const x = r.storage.buffer;
  let keys = gpu.alloc(op, "uint32", total);
  let order = gpu.alloc(op, "uint32", total);
  let spareKeys = gpu.alloc(op, "uint32", total);
  let spareOrder = gpu.alloc(op, "uint32", total);
  try {
    for (let shift = 0; shift < 32; shift += 8) {
      const first = shift === 0;
      pass({
        first,
        last: shift === 24,
        uniforms: radixUniforms(r, w, tiles, shift, spin),
        keys: first ? x : keys.buffer,
        order: first ? x : order.buffer,
        outKeys: spareKeys.buffer,
        outOrder: spareOrder.buffer,
      });
      [keys, spareKeys] = [spareKeys, keys];
      [order, spareOrder] = [spareOrder, order];
    }
  } finally {
    for (const storage of [keys, order, spareKeys, spareOrder]) gpu.free(storage);
  }
}

/**
 * The exclusive scan of `counts` ([rows, width], contiguous) along each row, by the scan
 * family's kernels: each tile's offsets. The caller frees the result.
 */
function scanCounts(
  gpu: GpuHost,
  op: string,
  counts: GpuStorage,
  rows: number,
  width: number,
): GpuStorage {
  const { output } = runScanGpu(gpu, {
    overrides: NO_OVERRIDES,
    op,
    scan: "sum",
    type: "u32",
    x: { storage: counts, dtype: "uint32", shape: [rows, width], strides: [width, 1], offset: 0 },
    axis: 1,
    exclusive: true,
    reverse: false,
    outDtype: "uint32",
  });
  return output as GpuStorage;
}

/**
 * Rank-K by radix selection: the key of rank keep - 1 of each row (keep = start + count) by the
 * selection's passes (histograms of one digit among the keys matching the prefix so far, and a
 * pick each), then each tile's keys below and equal to it counted, the counts scanned along the
 * row, and the keys below and the first ties (by index) compacted into keep candidates a row,
 * which one stage of the bitonic tree sorts, writing the window.
 */
function selectWindow(
  gpu: GpuHost,
  op: string,
  r: Rows,
  w: Window,
  choice: SortChoice,
  values: GpuStorage,
  indices: GpuStorage,
): void {
  const keep = w.start + w.count;
  const n = r.length;
  const tiles = Math.ceil(n / SELECT_TILE);
  const groups = r.rows * tiles;
  const grid = workgroups(gpu, groups);
  const stateWords = selectStateWords(1, 0);
  const flip = w.descending ? 0xffffffff : 0;
  const state = gpu.alloc(op, "uint32", r.rows * stateWords);
  const counts = gpu.alloc(op, "uint32", 2 * r.rows * tiles);
  const keys = gpu.alloc(op, "uint32", r.rows * keep);
  const order = gpu.alloc(op, "uint32", r.rows * keep);
  const subgroups = choice.subgroups;
  try {
    // No table in rank mode (x stands in) and no quantiles written (counts stand in).
    selectionPasses(gpu, op, r, {
      targets: 1,
      kind: w.kind,
      flip,
      subgroups,
      state,
      stateWords,
      table: r.storage.buffer,
      out: counts.buffer,
      pick: { method: 0, skip: 0, bits: 0, rank: keep - 1 },
    });
    const uniforms = words([
      n,
      tiles,
      r.offset,
      w.kind,
      flip,
      r.rows,
      stateWords,
      keep,
      choice.lookbackSpin,
    ]);
    const compaction = (lookback: boolean, offsets: GPUBuffer) => {
      const options = { subgroups, lookback };
      const compact = gpu.pipeline(
        sortKey("rank-compact", options),
        5,
        () => generateSort("rank-compact", options),
        lookback ? 3 : 2,
      );
      gpu.dispatch(
        op,
        compact,
        [r.storage.buffer, state.buffer, offsets, keys.buffer, order.buffer],
        uniforms,
        grid,
      );
    };
    if (choice.compaction === "one-pass") {
      // Offsets by a look-back over the row's tiles (their states cleared by the first pick).
      compaction(true, counts.buffer);
    } else {
      const count = gpu.pipeline(sortKey("rank-count"), 3, () => generateSort("rank-count"));
      gpu.dispatch(op, count, [r.storage.buffer, state.buffer, counts.buffer], uniforms, grid);
      const offsets = scanCounts(gpu, op, counts, 2 * r.rows, tiles);
      try {
        compaction(false, offsets.buffer);
      } finally {
        gpu.free(offsets);
      }
    }
    // The candidates' sort: one segment, the window written.
    const options = { tile: choice.tile, first: false, last: true };
    const sortKernel = gpu.pipeline(
      sortKey("rank-tile", options),
      5,
      () => generateSort("rank-tile", options),
      2,
    );
    gpu.dispatch(
      op,
      sortKernel,
      [keys.buffer, order.buffer, r.storage.buffer, values.buffer, indices.buffer],
      words([
        keep,
        1,
        keep,
        w.kind,
        flip,
        r.offset,
        r.length,
        r.rows,
        w.start,
        w.count,
        w.indices ? 1 : 0,
      ]),
      workgroups(gpu, r.rows),
    );
  } finally {
    gpu.free(state);
    gpu.free(counts);
    gpu.free(keys);
    gpu.free(order);
  }
}

/**
 * The LSD radix sort of every row: four passes of 8-bit digits, each counting every tile's
 * digits, scanning the counts along each row (digit-major, the scan family's kernels), then
 * scattering each tile's pairs, ranked by the digit in workgroup memory, to their digit's
 * offsets. The first pass reads x (keys made on the fly, indices their positions); the last
 * writes the window's values (keys turned back into x's words) and indices.
 */
function radixSort(
  gpu: GpuHost,
  op: string,
  r: Rows,
  w: Window,
  choice: SortChoice,
  values: GpuStorage,
  indices: GpuStorage,
): void {
  const n = r.length;
  const ballot = choice.variant === "radix-ballot";
  const tile = ballot ? choice.tile : RADIX_TILE;
  const perInvocation = tile / SORT_WORKGROUP;
  const tiles = Math.ceil(n / tile);
  const groups = r.rows * tiles;
  const grid = workgroups(gpu, groups);
  const subgroups = choice.subgroups;
  const packed = choice.counters === "packed";
  const stage = ballot ? "radix-ballot" : "radix-scatter";
  if (ballot && choice.prefix === "lookback") {
    onesweepSort(gpu, op, r, w, choice, values, indices);
    return;
  }
  const pipelines = (first: boolean, last: boolean) => {
    const countOptions = { subgroups, perInvocation, first };
    const scatterOptions = ballot
      ? {
        perInvocation,
        words: choice.words,
        packed,
        minSubgroup: gpu.caps.subgroupMinSize,
        first,
        last,
      }
      : { subgroups, first, last };
    return {
      count: gpu.pipeline(
        sortKey("radix-count", countOptions),
        2,
        () => generateSort("radix-count", countOptions),
      ),
      scatter: gpu.pipeline(
        sortKey(stage, scatterOptions),
        6,
        () => generateSort(stage, scatterOptions),
        2,
      ),
    };
  };
  const x = r.storage.buffer;
  const counts = gpu.alloc(op, "uint32", r.rows * 256 * tiles);
  try {
    radixPasses(gpu, op, r, w, tiles, 0, (pass) => {
      const { count, scatter } = pipelines(pass.first, pass.last);
      gpu.dispatch(op, count, [pass.keys, counts.buffer], pass.uniforms, grid);
      const offsets = scanCounts(gpu, op, counts, r.rows, 256 * tiles);
      try {
        gpu.dispatch(
          op,
          scatter,
          [
            pass.keys,
            pass.order,
            offsets.buffer,
            x,
            pass.last ? values.buffer : pass.outKeys,
            pass.last ? indices.buffer : pass.outOrder,
          ],
          pass.uniforms,
          grid,
        );
      } finally {
        gpu.free(offsets);
      }
    });
  } finally {
    gpu.free(counts);
  }
}

/** Contiguous storage of `shape` in axis order `order`, copied back into the input's order. */
function backToInput(
  gpu: GpuHost,
  op: string,
  storage: GpuStorage,
  order: number[],
  shape: number[],
  dtype: DType,
  overrides: Readonly<PlanOverrides>,
): GpuStorage {
  const rank = order.length;
  if (order[rank - 1] === rank - 1 && storage.dtype === dtype) return storage;
  const back = fromAxisOrder(order, shape);
  try {
    return gpu.evaluate({
      op,
      expr: E.cast(E.input(0, storage.dtype), dtype),
      inputs: [{ storage, dtype: storage.dtype, ...back, offset: 0 }],
      shape: back.shape,
      overrides,
    }) as GpuStorage;
  } finally {
    gpu.free(storage);
  }
}

/** The GPU path of a sort job. */
export function runSortGpu(gpu: GpuHost, job: SortJob): SortResult {
  const { op, x: view, axis, start, count } = job;
  gpu.checkLive(op, [view.dtype]);
  const compute = sortComputeDType(view.dtype);
  const r = rowsOf(gpu, op, view, axis, job.overrides);
  const total = r.rows * count;
  const outShape = [...r.shape.slice(0, -1), count];
  const values = gpu.alloc(op, compute, total);
  const indices = gpu.alloc(op, "int32", total);
  try {
    if (total > 0) {
      sortRows(
        gpu,
        op,
        r,
        {
          descending: job.descending,
          kind: job.totalOrder && compute === "float32"
            ? TOTAL_ORDER_KIND
            : SORT_KEY_KIND[compute] as number,
          start,
          count,
          indices: job.indices,
        },
        values,
        indices,
        job.overrides,
      );
    }
  } catch (e) {
    gpu.free(values);
    gpu.free(indices);
    throw e;
  } finally {
    if (r.copied) gpu.free(r.storage);
  }
  const result = backToInput(gpu, op, values, r.order, outShape, view.dtype, job.overrides);
  if (!job.indices) {
    gpu.free(indices);
    return { values: result, indices: null };
  }
  return {
    values: result,
    indices: backToInput(gpu, op, indices, r.order, outShape, "int32", job.overrides),
  };
}

/**
 * The GPU path of a quantile job. The order statistics and weights of each q depend only on the
 * row length, so the host computes them (as the WASM reference does, in float64); NaN-skipping
 * rows count their values in the kernel and compute the same exactly in integers.
 */
export function runQuantileGpu(gpu: GpuHost, job: QuantileJob): QuantileResult {
  const { op, axis } = job;
  gpu.checkLive(op, [job.x.dtype]);
  // The kernel reads float32 rows: float16 widened; integers ordered and interpolated as
  // float32 (NumPy gives float64).
  let view = job.x;
  let converted: GpuStorage | null = null;
  if (view.dtype !== "float32") {
    converted = gpu.evaluate({
      op,
      expr: E.cast(E.input(0, view.dtype), "float32"),
      inputs: [view],
      shape: view.shape,
      overrides: job.overrides,
    }) as GpuStorage;
    view = {
      storage: converted,
      dtype: "float32",
      shape: view.shape,
      strides: contiguousStrides(view.shape),
      offset: 0,
    };
  }
  const qn = quantileCount(job.q);
  const n = view.shape[axis];
  const rows = sizeOf(view.shape.filter((_, i) => i !== axis));
  const choice = observePlan(
    "gpu",
    "sort",
    op,
    planSort(gpu.caps, { rows, length: n, select: 2 * qn }, job.overrides.sort),
    job.overrides.sort,
  );
  try {
    if (choice.variant === "select" && n > 0 && rows * qn > 0) {
      return { values: selectQuantiles(gpu, job, view, qn, choice) };
    }
    // Sorted rows, axis last (a sort's values keep the input's axis order, so it sorts a view
    // with the axis moved last).
    const last = axisLast(view.shape, view.strides, axis);
    const { values: sorted } = runSortGpu(gpu, {
      overrides: job.overrides,
      op,
      x: { ...view, shape: last.shape, strides: last.strides },
      axis: last.shape.length - 1,
      descending: false,
      start: 0,
      count: view.shape[axis],
      indices: false,
      totalOrder: true,
    });
    if (n === 0) {
      // Empty rows: NaN, as NumPy (and the WASM reference).
      gpu.free(sorted as GpuStorage);
      return {
        values: gpu.evaluate({
          op,
          expr: E.constant(NaN, "float32"),
          inputs: [],
          shape: [rows * qn],
          overrides: job.overrides,
        }),
      };
    }
    const out = gpu.alloc(op, "float32", rows * qn);
    try {
      if (rows * qn > 0) {
        const { table: t, bits } = quantileTable(gpu, job, n, qn);
        try {
          run(gpu, op, "quantile", [(sorted as GpuStorage).buffer, t.buffer, out.buffer], 1, [
            rows * qn,
            n,
            qn,
            QUANTILE_METHOD_CODE[job.method],
            job.skipNaN ? 1 : 0,
            bits ? 1 : 0,
          ], rows * qn);
        } finally {
          gpu.free(t);
        }
      }
    } catch (e) {
      gpu.free(out);
      throw e;
    } finally {
      gpu.free(sorted as GpuStorage);
    }
    return { values: out };
  } finally {
    if (converted) gpu.free(converted);
  }
}

/**
 * A quantile job's table for the kernels: without NaN-skipping and with q as numbers, each q's
 * order statistics and weight (`bits` false), as the WASM reference computes them in float64
 * from the row length n; else q's float32 bits (`bits` true; each row computes those exactly
 * from its count of values, as NaN-skipping rows must and a tensor's q are known only on the
 * device). The caller frees the table.
 */
function quantileTable(
  gpu: GpuHost,
  job: QuantileJob,
  n: number,
  qn: number,
): { table: GpuStorage; bits: boolean } {
  const bits = job.skipNaN || !Array.isArray(job.q);
  if (!Array.isArray(job.q)) {
    const table = gpu.evaluate({
      op: job.op,
      expr: E.cast(E.input(0, (job.q as View).dtype), "float32"),
      inputs: [job.q as View],
      shape: [qn],
      overrides: job.overrides,
    }) as GpuStorage;
    return { table, bits };
  }
  const f = new Float32Array(1);
  const bitsOf = (v: number) => {
    f[0] = v;
    return new Uint32Array(f.buffer)[0];
  };
  const table = new Uint32Array(bits ? Math.max(qn, 1) : 3 * qn);
  (job.q as number[]).forEach((q, j) => {
    if (bits) {
      table[j] = bitsOf(q);
      return;
    }
    const h = (n - 1) * q;
    const lo = Math.floor(h);
    table[3 * j] = lo;
    table[3 * j + 1] = Math.min(lo + 1, n - 1);
    table[3 * j + 2] = bitsOf(h - lo);
  });
  return { table: gpu.upload("uint32", table) as GpuStorage, bits };
}

/**
 * Quantiles by radix selection (the plan's "select"): four passes over each row's keys in total
 * order, each a histogram of one 8-bit digit among the keys matching each order statistic's
 * prefix so far (SELECT_TILE keys a workgroup; the histograms live in a scratch buffer the picks
 * leave cleared) and a pick of the digit; the last pick writes the quantiles. Returns float32
 * [rows, qn].
 */
function selectQuantiles(
  gpu: GpuHost,
  job: QuantileJob,
  view: View,
  qn: number,
  choice: SortChoice,
): GpuStorage {
  const { op } = job;
  const r = rowsOf(gpu, op, view, job.axis, job.overrides);
  const targets = 2 * qn;
  const n = r.length;
  const stateWords = selectStateWords(targets, qn);
  const out = gpu.alloc(op, "float32", r.rows * qn);
  const state = gpu.alloc(op, "uint32", r.rows * stateWords);
  const { table, bits } = quantileTable(gpu, job, n, qn);
  try {
    selectionPasses(gpu, op, r, {
      targets,
      kind: TOTAL_ORDER_KIND,
      flip: 0,
      subgroups: choice.subgroups,
      state,
      stateWords,
      table: table.buffer,
      out: out.buffer,
      pick: {
        method: QUANTILE_METHOD_CODE[job.method],
        skip: job.skipNaN ? 1 : 0,
        bits: bits ? 1 : 0,
        rank: 0,
      },
    });
  } catch (e) {
    gpu.free(out);
    throw e;
  } finally {
    gpu.free(state);
    gpu.free(table);
    if (r.copied) gpu.free(r.storage);
  }
  return out;
}

/** The GPU path of a search job. */
export function runSearchGpu(gpu: GpuHost, job: SearchJob): SearchResult {
  const { op } = job;
  gpu.checkLive(op, [job.sorted.dtype]);
  const n = job.sorted.shape[0];
  const m = sizeOf(job.values.shape);
  const compute = sortComputeDType(job.sorted.dtype);
  const out = gpu.alloc(op, "int32", m);
  if (m === 0) return { indices: out };
  const contiguous = (v: View): { storage: GpuStorage; copied: boolean } => {
    if (v.dtype === compute && isContiguous(v.shape, v.strides)) {
      return { storage: v.storage as GpuStorage, copied: false };
    }
    const storage = gpu.evaluate({
      op,
      expr: E.cast(E.input(0, v.dtype), compute),
      inputs: [v],
      shape: v.shape,
      overrides: job.overrides,
    }) as GpuStorage;
    return { storage, copied: true };
  };
  const s = contiguous(job.sorted);
  const v = contiguous(job.values);
  try {
    run(gpu, op, "search", [s.storage.buffer, v.storage.buffer, out.buffer], 1, [
      m,
      n,
      SORT_KEY_KIND[compute] as number,
      job.right ? 1 : 0,
      s.copied ? 0 : job.sorted.offset,
      v.copied ? 0 : job.values.offset,
    ], m);
  } catch (e) {
    gpu.free(out);
    throw e;
  } finally {
    if (s.copied) gpu.free(s.storage);
    if (v.copied) gpu.free(v.storage);
  }
  return { indices: out };
}
