/**
 * Scans along one axis: `cumsum`, `cumprod`, `cummax`, `cummin`, with NumPy/PyTorch semantics plus
 * `exclusive` (output i combines the elements before i; output 0 is the identity) and `reverse`
 * (scan from the end of the axis).
 *
 * On the GPU the rows (every axis but the scan axis) are read through strides and the plan
 * (`planScan`) picks one of three kernels from src/gpu/_codegen_scan.ts: a workgroup or a team of
 * invocations per row, a single-pass decoupled look-back for long sums on hardware GPUs, or the
 * multipass tile scan for other long rows (and where forward progress between workgroups is not
 * assured, as on software adapters). Inner axes with many rows give each row one invocation
 * walking the axis ("columns", coalesced across neighbouring rows); with few rows, a strided one
 * is first copied with the axis last. On WASM the input is
 * first copied with the scan axis last and contiguous, scanned row by row (asm/scan.ts) and
 * copied back into the input's axis order.
 * @module
 */
import { computeType } from "../gpu/_wgsl_types.ts";
import type { View } from "../contract/backend.ts";
import {
  contiguousStrides,
  isContiguous,
  normalizeAxis,
  type Shape,
  sizeOf,
} from "../core/shape.ts";
import type { DType } from "../core/dtype.ts";
import { describe, ValueError } from "../core/errors.ts";
import type { GpuHost, GpuStorage } from "../gpu/host.ts";
import {
  accumulatorDtype,
  generateScan,
  generateZero,
  SCAN_EPOCHS,
  scanKey,
  type ScanOp,
  type ScanParams,
  type ScanSpec,
  type ScanType,
  scanUniforms,
} from "../gpu/_codegen_scan.ts";
import { planScan, type ScanChoice } from "../plans/mod.ts";
import { runtime } from "../runtime.ts";
import { Tensor } from "../tensor.ts";
import type { Value, WasmHost } from "../wasm/host.ts";
import { runElementwise, type TensorLike } from "./_dispatch.ts";
import { E } from "../ir/expr.ts";

/** Options of every scan. */
export interface ScanOptions {
  /** The axis to scan along (negative counts from the end). Default -1, the last. */
  axis?: number;
  /** Output i combines the elements before i (output 0 is the identity). Default false. */
  exclusive?: boolean;
  /** Scan from the end of the axis towards its start. Default false. */
  reverse?: boolean;
}

/** A scan's parameters after validation. */
interface Resolved {
  axis: number;
  exclusive: boolean;
  reverse: boolean;
}

function resolveOptions(op: string, options: unknown, rank: number): Resolved {
  if (options === undefined || options === null) {
    return { axis: rank === 0 ? 0 : rank - 1, exclusive: false, reverse: false };
  }
  if (typeof options !== "object" || Array.isArray(options)) {
    throw new ValueError({
      op,
      argument: "options",
      expected: "an object { axis?, exclusive?, reverse? }",
      received: describe(options),
    });
  }
  const o = options as Record<string, unknown>;
  for (const name of ["exclusive", "reverse"]) {
    if (o[name] !== undefined && typeof o[name] !== "boolean") {
      throw new ValueError({
        op,
        argument: `options.${name}`,
        expected: "a boolean",
        received: describe(o[name]),
      });
    }
  }
  // A 0-d tensor scans as one element: axis 0 or -1.
  const axis = normalizeAxis(op, (o.axis ?? -1) as number, Math.max(rank, 1), "options.axis");
  return { axis, exclusive: o.exclusive === true, reverse: o.reverse === true };
}

/** The register type of a scan over `dtype`: floats in f32, bools counted in i32 by sums. */
function scanType(op: ScanOp, dtype: DType): ScanType {
  if (dtype === "bool" && (op === "sum" || op === "prod")) return "i32";
  return computeType(dtype) as ScanType;
}

function scan(op: string, scanOp: ScanOp, x: TensorLike, options?: ScanOptions): Tensor {
  if (!(x instanceof Tensor)) {
    // Validated before the scalar becomes a tensor, which a throw would leak.
    resolveOptions(op, options, 0);
    const t = runElementwise(op, [x], ["x"], ([leaf]) => leaf);
    try {
      return scan(op, scanOp, t, options);
    } finally {
      t.dispose();
    }
  }
  // Everything is checked before a pending input is computed or anything is allocated.
  const meta = x._meta(op, "x");
  const { axis, exclusive, reverse } = resolveOptions(op, options, meta.shape.length);
  const outDtype: DType = meta.dtype === "bool" && (scanOp === "sum" || scanOp === "prod")
    ? "int32"
    : meta.dtype;
  const type = scanType(scanOp, meta.dtype);
  const backend = runtime().backend(meta.device, op);
  if (backend.name === "gpu") (backend as GpuHost)._check(op, [meta.dtype, outDtype]);
  const view = x._view(op, "x");
  // A 0-d tensor scans as a one-element axis.
  const seen: View = view.shape.length === 0 ? { ...view, shape: [1], strides: [1] } : view;
  const n = sizeOf(seen.shape);
  let storage;
  if (backend.name === "gpu") {
    const gpu = backend as GpuHost;
    storage = n === 0
      ? gpu._alloc(op, outDtype, 0)
      : gpuScan(gpu, op, scanOp, type, seen, axis, exclusive, reverse, outDtype);
  } else {
    const wasm = backend as WasmHost;
    storage = n === 0
      ? wasm._alloc(op, outDtype, 0)
      : wasmScan(wasm, op, scanOp, type, seen, axis, exclusive, reverse, outDtype);
  }
  return Tensor._fromStorage(storage, outDtype, view.shape);
}

// ---------------------------------------------------------------------------------------------
// WASM

const SUFFIX: Record<ScanType, string> = { f32: "f32", i32: "i32", u32: "u32", bool: "bool" };
const COMPUTE: Record<ScanType, DType> = {
  f32: "float32",
  i32: "int32",
  u32: "uint32",
  bool: "bool",
};

function wasmScan(
  wasm: WasmHost,
  op: string,
  scanOp: ScanOp,
  type: ScanType,
  view: View,
  axis: number,
  exclusive: boolean,
  reverse: boolean,
  outDtype: DType,
) {
  const rank = view.shape.length;
  const order = [...view.shape.keys()].filter((i) => i !== axis);
  order.push(axis);
  const shape = order.map((i) => view.shape[i]);
  const rowLength = view.shape[axis];
  const rows = sizeOf(shape) / rowLength;
  const compute = COMPUTE[type];
  // Rows contiguous with the scan axis last, in the compute dtype (float16 widened to float32).
  let value: Value = {
    view: { ...view, shape, strides: order.map((i) => view.strides[i]) },
    temp: false,
  };
  if (view.dtype !== compute || !isContiguous(shape, value.view.strides)) {
    value = wasm._cast(op, value, compute, shape);
  }
  const out = wasm._alloc(op, compute, sizeOf(shape));
  wasm._kernel(`scan_${scanOp}_${SUFFIX[type]}`)(
    out.ptr,
    wasm._pointer(value.view),
    rows,
    rowLength,
    (exclusive ? 1 : 0) | (reverse ? 2 : 0),
  );
  wasm._release(value);
  if (axis === rank - 1 && compute === outDtype) return out;
  // Back to the input's axis order (and to float16), as one contiguous copy.
  const scanned = contiguousStrides(shape);
  const strides = view.shape.map((_, i) => scanned[order.indexOf(i)]);
  const back: Value = {
    view: { storage: out, dtype: compute, shape: view.shape, strides, offset: 0 },
    temp: true,
  };
  return wasm._cast(op, back, outDtype, view.shape).view.storage;
}

// ---------------------------------------------------------------------------------------------
// GPU

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
  const buffer = gpu._scratch("scan look-back states", words);
  gpu.batch.open();
  let epoch = (_scanEpochs.get(gpu) ?? 0) + 1;
  if (epoch >= SCAN_EPOCHS) {
    const all = buffer.size / 4;
    const zero = gpu._pipeline("scan-zero", 1, generateZero);
    gpu._dispatch("scan-zero", zero, [buffer], Uint32Array.of(all), gpu._grid(all, 256));
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
    const pipeline = gpu._pipeline(scanKey(s), buffers.length, () => generateScan(s), writable);
    gpu._dispatch(op, pipeline, buffers, scanUniforms(uniforms), gpu._grid(groups * wg, wg));
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
    const pipeline = gpu._pipeline(scanKey(s), 3, () => generateScan(s), 2);
    gpu._dispatch(
      op,
      pipeline,
      [input.buffer, states, output.buffer],
      scanUniforms({ ...params, epoch }),
      gpu._grid(rows * tiles * wg, wg),
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
    const totals = gpu._alloc(op, accDtype, rows * tiles);
    const groupTotals = gpu._alloc(op, accDtype, rows * groups);
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
  const totals = gpu._alloc(op, accDtype, rows * tiles);
  const offsets = gpu._alloc(op, accDtype, rows * tiles);
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
    planScan(gpu.caps, { rows, rowLength: tiles }),
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

function gpuScan(
  gpu: GpuHost,
  op: string,
  scanOp: ScanOp,
  type: ScanType,
  view: View,
  axis: number,
  exclusive: boolean,
  reverse: boolean,
  outDtype: DType,
): GpuStorage {
  const shape = view.shape;
  const len = shape[axis];
  const n = sizeOf(shape);
  const rows = n / len;
  const inner = sizeOf(shape.slice(axis + 1));
  const rowAxes = [...shape.keys()].filter((i) => i !== axis);
  const choice = planScan(gpu.caps, { rows, rowLength: len, inner, op: scanOp });
  const out = gpu._alloc(op, outDtype, n);
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
    temp = gpu.evaluate(op, E.input(0, view.dtype), [
      { ...view, shape: permuted, strides: order.map((i) => view.strides[i]) },
    ], permuted) as GpuStorage;
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
  );
  if (temp) gpu.free(temp);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Public ops

/**
 * Cumulative sum along `axis` (default the last). Bools count as int32; integer sums wrap.
 * Float sums add in float32 on the GPU (in tiles, so not in sequence) and in float64 on WASM.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * await gyre.cumsum(gyre.tensor([1, 2, 3])).array(); // [1, 3, 6]
 * await gyre.cumsum(gyre.tensor([1, 2, 3]), { exclusive: true }).array(); // [0, 1, 3]
 * await gyre.cumsum(gyre.tensor([1, 2, 3]), { reverse: true }).array(); // [6, 5, 3]
 * ```
 */
export function cumsum(x: TensorLike, options?: ScanOptions): Tensor {
  return scan("cumsum", "sum", x, options);
}

/**
 * Cumulative product along `axis`. Bools multiply as int32; integer products wrap.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * await gyre.cumprod(gyre.tensor([1, 2, 3, 4])).array(); // [1, 2, 6, 24]
 * ```
 */
export function cumprod(x: TensorLike, options?: ScanOptions): Tensor {
  return scan("cumprod", "prod", x, options);
}

/**
 * Running maximum along `axis`, as PyTorch's `cummax` values: once a NaN appears it stays.
 * The exclusive identity is -Infinity, the int32 minimum, 0 (uint32) or false.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * await gyre.cummax(gyre.tensor([1, 3, 2, 5])).array(); // [1, 3, 3, 5]
 * ```
 */
export function cummax(x: TensorLike, options?: ScanOptions): Tensor {
  return scan("cummax", "max", x, options);
}

/**
 * Running minimum along `axis`: once a NaN appears it stays. The exclusive identity is
 * +Infinity, the int32 maximum, the uint32 maximum or true.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * await gyre.cummin(gyre.tensor([[3, 1], [2, 4]]), { axis: 0 }).array(); // [[3, 1], [2, 1]]
 * ```
 */
export function cummin(x: TensorLike, options?: ScanOptions): Tensor {
  return scan("cummin", "min", x, options);
}
