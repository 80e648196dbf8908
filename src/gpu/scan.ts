/**
 * The scan family on the GPU: host code (layout, plan, buffers, passes) for the kernels that
 * _codegen_scan.ts generates. The rows (every axis but the scan axis) are read through strides
 * and the plan (`planScan`) picks one of three kernels: a workgroup or a team of invocations per
 * row, a single-pass decoupled look-back for long sums on hardware GPUs, or the multipass tile
 * scan for other long rows (and where forward progress between workgroups is not assured, as on
 * software adapters). Inner axes with many rows give each row one invocation walking the axis
 * ("columns", coalesced across neighbouring rows); with few rows, a strided one is first copied
 * with the axis last.
 * @module
 */
import type { DType } from "../core/dtype.ts";

import { isContiguous, type Shape, sizeOf } from "../core/shape.ts";
import type { ScanJob, ScanResult } from "../contract/scan.ts";
import type { ScanOp, ScanType } from "../ir/scan.ts";
import { E } from "../ir/expr.ts";
import { observePlan } from "../contract/backend.ts";
import { tunedOverride } from "../heuristics/consensus.ts";
import { rowsTuneKey } from "../heuristics/families.ts";
import { NO_OVERRIDES } from "../plans/overrides.ts";
import { planScan, type ScanChoice } from "../plans/mod.ts";
import type { GpuHost, GpuStorage } from "./host.ts";
import {
  accumulatorDtype,
  generateScan,
  SCAN_EPOCHS,
  scanKey,
  type ScanParams,
  type ScanSpec,
  scanUniforms,
} from "./_codegen_scan.ts";

/** The GPU path: every scan job, empty ones included (nothing dispatched for those). */
export function runScanGpu(gpu: GpuHost, job: ScanJob): ScanResult {
  const { op, x, outDtype } = job;
  gpu.checkLive(op, [x.dtype, outDtype]);
  const output = sizeOf(x.shape) === 0 ? gpu.alloc(op, outDtype, 0) : gpuScan(gpu, job);
  return { output };
}

/** Where a scan reads its rows. */
interface ScanInput {
  buffer: GPUBuffer;
  dtype: DType;
  /** Rows contiguous, 4-aligned, a multiple of 4 long: read as vec4s. */
  vec4: boolean;
  offset: number;
  /** Stride of the scan axis. */
  step: number;
  /** Shape and strides of the axes that index a row. */
  rowShape: readonly number[];
  rowStrides: readonly number[];
}

/** Where a scan writes: contiguous rows (inner 1) or the scan axis at stride `inner`. */
interface ScanOutput {
  buffer: GPUBuffer;
  dtype: DType;
  inner: number;
}

/**
 * The epoch each backend's last look-back scan tagged its states with (tests set it to reach the
 * wrap-around).
 */
export const _scanEpochs: WeakMap<GpuHost, number> = new WeakMap();

/**
 * The backend's look-back state buffer (two words per tile), grown as needed, and the epoch of the
 * scan about to use it. When the epochs run out the whole buffer is zeroed by a dispatch, so no
 * state left by an earlier round of epochs can pass for one of this scan's.
 */
function stateBuffer(gpu: GpuHost, words: number): { buffer: GPUBuffer; epoch: number } {
  const buffer = gpu.scratch("scan look-back states", words);
  gpu.batch.open();
  let epoch = (_scanEpochs.get(gpu) ?? 0) + 1;
  if (epoch >= SCAN_EPOCHS) {
    gpu.zero("scan-zero", buffer, buffer.size / 4);
    epoch = 1;
  }
  _scanEpochs.set(gpu, epoch);
  return { buffer, epoch };
}

function nextPowerOfTwo(x: number): number {
  return 2 ** Math.ceil(Math.log2(Math.max(1, x)));
}

/** Scans `rows` rows of `len` elements from `input` into `output` with the plan's `choice`. */
function scanRows(
  gpu: GpuHost,
  op: string,
  scanOp: ScanOp,
  type: ScanType,
  input: ScanInput,
  output: ScanOutput,
  rows: number,
  len: number,
  exclusive: boolean,
  reverse: boolean,
  choice: ScanChoice,
  override: Partial<ScanChoice> | undefined,
): void {
  const wg = choice.workgroupSize;
  const perThread = choice.elementsPerThread;
  const subTiles = choice.variant === "lookback" ? choice.subTiles : 1;
  const tileSize = wg * perThread * subTiles;
  const tiles = Math.ceil(len / tileSize);
  const variant = choice.variant === "row" || len <= wg * perThread ? "row" : choice.variant;
  const spec: ScanSpec = {
    op: scanOp,
    type,
    inDtype: input.dtype,
    outDtype: output.dtype,
    stage: "scan",
    prefix: "none",
    inMode: input.vec4 ? "vec4" : "strided",
    outMode: output.inner === 1 && len % 4 === 0 ? "vec4" : "strided",
    rowRank: input.vec4 ? 0 : input.rowShape.length,
    exclusive,
    reverse,
    subgroups: choice.subgroups,
    workgroupSize: wg,
    elementsPerThread: perThread,
    teamSize: wg,
    lookbackStates: 1,
    subTiles: 1,
    columns: false,
    descending: false,
    superTiles: 1,
    publishPrefixes: true,
    earlyAggregate: false,
    wideStates: false,
  };
  const params: ScanParams = {
    rows,
    len,
    inner: output.inner,
    tiles,
    inOffset: input.offset,
    inStep: input.step,
    total: rows * tiles,
    rowShape: input.rowShape,
    rowStrides: input.rowStrides,
  };
  const standard = (
    s: ScanSpec,
    buffers: GPUBuffer[],
    uniforms: ScanParams,
    groups: number,
    writable = 1,
  ) => {
    const pipeline = gpu.pipeline(scanKey(s), buffers.length, () => generateScan(s), writable);
    gpu.dispatch(op, pipeline, buffers, scanUniforms(uniforms), gpu.grid(groups * wg, wg));
  };
  if (output.inner > 1 && choice.layout === "columns") {
    // One invocation per column, walking the axis in chunks.
    const s = { ...spec, teamSize: 1, columns: len > perThread };
    standard(s, [input.buffer, output.buffer], { ...params, tiles: 1 }, Math.ceil(rows / wg));
    return;
  }
  if (variant === "row") {
    // The smallest power-of-two team that holds a row; many teams (rows) per workgroup.
    const team = Math.min(wg, nextPowerOfTwo(Math.ceil(len / perThread)));
    const s = { ...spec, teamSize: team };
    standard(
      s,
      [input.buffer, output.buffer],
      { ...params, tiles: 1 },
      Math.ceil(rows * team / wg),
    );
    return;
  }
  if (variant === "lookback") {
    const s: ScanSpec = {
      ...spec,
      prefix: "lookback",
      lookbackStates: choice.lookbackStates,
      subTiles,
      publishPrefixes: choice.publishPrefixes,
      earlyAggregate: choice.earlyAggregate,
      wideStates: choice.wideStates,
    };
    const { buffer: states, epoch } = stateBuffer(gpu, 2 * rows * tiles);
    // The states and the output are both written.
    const pipeline = gpu.pipeline(scanKey(s), 3, () => generateScan(s), 2);
    gpu.dispatch(
      op,
      pipeline,
      [input.buffer, states, output.buffer],
      scanUniforms({ ...params, epoch }),
      gpu.grid(rows * tiles * wg, wg),
    );
    return;
  }
  const accDtype = accumulatorDtype(type);
  // Only sums and products have the grouped first pass (with subgroups: `tileTotalBlock`).
  const groupSize = (scanOp === "sum" || scanOp === "prod") && choice.subgroups
    ? choice.superTiles
    : 1;
  if (groupSize > 1) {
    // Two passes: totals of tiles and of groups of tiles, then each tile from them.
    const groups = Math.ceil(tiles / groupSize);
    const totals = gpu.alloc(op, accDtype, rows * tiles);
    const groupTotals = gpu.alloc(op, accDtype, rows * groups);
    const grouped = { ...spec, superTiles: groupSize };
    standard(
      { ...grouped, stage: "reduce", prefix: "totals", outDtype: accDtype, outMode: "vec4" },
      [input.buffer, totals.buffer, groupTotals.buffer],
      { ...params, total: rows * groups },
      rows * groups,
      2,
    );
    standard(
      { ...grouped, prefix: "totals", descending: choice.descendingFinalPass },
      [input.buffer, totals.buffer, groupTotals.buffer, output.buffer],
      params,
      rows * tiles,
    );
    gpu.free(totals);
    gpu.free(groupTotals);
    return;
  }
  // Multipass: tile totals, their exclusive scan (recursively planned), then the tiles again.
  const totals = gpu.alloc(op, accDtype, rows * tiles);
  const offsets = gpu.alloc(op, accDtype, rows * tiles);
  const reduceSpec: ScanSpec = {
    ...spec,
    stage: "reduce",
    prefix: "offsets",
    outDtype: accDtype,
    outMode: "vec4",
    exclusive: false,
  };
  standard(reduceSpec, [input.buffer, totals.buffer], params, rows * tiles);
  scanRows(
    gpu,
    op,
    scanOp,
    type,
    {
      buffer: totals.buffer,
      dtype: accDtype,
      vec4: tiles % 4 === 0,
      offset: 0,
      step: 1,
      rowShape: [rows],
      rowStrides: [tiles],
    },
    { buffer: offsets.buffer, dtype: accDtype, inner: 1 },
    rows,
    tiles,
    true,
    false,
    observePlan(
      "gpu",
      "scan",
      op,
      planScan(gpu.caps, { rows, rowLength: tiles }, override),
      override,
    ),
    override,
  );
  standard(
    { ...spec, prefix: "offsets", descending: choice.descendingFinalPass },
    [input.buffer, offsets.buffer, output.buffer],
    params,
    rows * tiles,
  );
  gpu.free(totals);
  gpu.free(offsets);
}

function gpuScan(gpu: GpuHost, job: ScanJob): GpuStorage {
  const { op, scan: scanOp, type, x: view, axis, exclusive, reverse, outDtype } = job;
  const override = job.overrides.scan;
  const shape = view.shape;
  const len = shape[axis];
  const n = sizeOf(shape);
  const rows = n / len;
  const inner = sizeOf(shape.slice(axis + 1));
  const rowAxes = [...shape.keys()].filter((i) => i !== axis);
  const choice = observePlan(
    "gpu",
    "scan",
    op,
    planScan(
      gpu.caps,
      { rows, rowLength: len, inner, op: scanOp },
      // Sums along the last axis are the tuned family's (what the tuner measured).
      inner === 1 && scanOp === "sum"
        ? tunedOverride("scan", gpu.caps, rowsTuneKey(gpu.caps, rows, len), override)
        : override,
    ),
    override,
    { acrossAxis: inner > 1 },
  );
  const out = gpu.alloc(op, outDtype, n);
  let temp: GpuStorage | null = null;
  let input: ScanInput = {
    buffer: (view.storage as GpuStorage).buffer,
    dtype: view.dtype,
    vec4: inner === 1 && isContiguous(shape, view.strides) && view.offset % 4 === 0 &&
      len % 4 === 0,
    offset: view.offset,
    step: view.strides[axis],
    rowShape: rowAxes.map((i) => shape[i]),
    rowStrides: rowAxes.map((i) => view.strides[i]),
  };
  if (inner > 1 && choice.layout === "transpose") {
    // A contiguous copy with the scan axis last: the scan then reads whole vec4 rows.
    const order = [...rowAxes, axis];
    const permuted: Shape = order.map((i) => shape[i]);
    temp = gpu.evaluate({
      op,
      expr: E.input(0, view.dtype),
      inputs: [{ ...view, shape: permuted, strides: order.map((i) => view.strides[i]) }],
      shape: permuted,
      overrides: NO_OVERRIDES,
    }) as GpuStorage;
    input = {
      buffer: temp.buffer,
      dtype: view.dtype,
      vec4: len % 4 === 0,
      offset: 0,
      step: 1,
      rowShape: [rows],
      rowStrides: [len],
    };
  }
  scanRows(
    gpu,
    op,
    scanOp,
    type,
    input,
    { buffer: out.buffer, dtype: outDtype, inner },
    rows,
    len,
    exclusive,
    reverse,
    choice,
    override,
  );
  if (temp) gpu.free(temp);
  return out;
}
