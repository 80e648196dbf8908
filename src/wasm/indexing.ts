/**
 * The indexing family on WASM: gathers and scatters by the kernels of asm/indexing.ts, the
 * reference the GPU's are tested against. An index out of range throws an IndexError as the op
 * runs, and nothing is left allocated.
 * @module
 */
import { sizeOf } from "../core/shape.ts";
import { type DType, hostArray, storageBytes } from "../core/dtype.ts";
import { IndexError } from "../core/errors.ts";
import {
  type GatherJob,
  type GatherResult,
  type IndexedAxis,
  INDEXING_DTYPE_CODE,
  indexRange,
  NEGATIVE_INDEX_CODE,
  SCATTER_REDUCE_CODE,
  scatterIdentity,
  type ScatterJob,
  type ScatterResult,
  SORTED_IDS,
} from "../contract/indexing.ts";
import type { WasmHost, WasmStorage } from "./host.ts";

/** Where a failing kernel leaves the index at fault (asm/indexing.ts's BAD_INDEX). */
const BAD_INDEX = 1020;

/** Writes the iteration descriptor at address 0: rank, shape, each operand's strides. */
function describe(
  wasm: WasmHost,
  shape: readonly number[],
  strides: readonly (readonly number[])[],
) {
  const words = new Int32Array(
    wasm.allocator.memory.buffer,
    0,
    1 + shape.length * (1 + strides.length),
  );
  words[0] = shape.length;
  words.set(shape, 1);
  strides.forEach((s, k) => words.set(s, 1 + shape.length * (k + 1)));
}

/** A kernel that returns 1 for an index out of range. */
function checked(wasm: WasmHost, name: string): (...args: number[]) => number {
  return wasm.kernel(name) as unknown as (...args: number[]) => number;
}

function indexError(
  wasm: WasmHost,
  op: string,
  axis: IndexedAxis,
  argument = "indices",
): IndexError {
  const bad = new Int32Array(wasm.allocator.memory.buffer, BAD_INDEX, 1)[0];
  return new IndexError({
    op,
    argument,
    expected: indexRange(axis),
    received: `index ${bad}`,
  });
}

/** Runs a gather job (see `Backend.gather`). */
export function runGatherWasm(wasm: WasmHost, job: GatherJob): GatherResult {
  const { op, x, indices, shape, axis } = job;
  const n = sizeOf(shape);
  const out = wasm.alloc(op, x.dtype, n);
  if (n === 0) return { output: out };
  describe(wasm, shape, [job.xStrides, job.indexStrides]);
  const failed = checked(wasm, "indexing_gather")(
    out.ptr,
    wasm.pointer(x),
    wasm.pointer(indices),
    axis.stride,
    axis.length,
    NEGATIVE_INDEX_CODE[axis.negative],
    storageBytes(x.dtype),
    n,
  );
  if (failed) {
    wasm.free(out);
    throw indexError(wasm, op, axis);
  }
  return { output: out };
}

/** Runs a scatter job (see `Backend.scatter`). */
export function runScatterWasm(wasm: WasmHost, job: ScatterJob): ScatterResult {
  const { op, dtype, reduce, axis } = job;
  const length = sizeOf(job.outShape);
  const out = startingValues(wasm, job);
  const n = sizeOf(job.shape);
  if (n === 0 && reduce !== "mean") return { output: out };
  if (job.sorted && n > 0) {
    try {
      checkSorted(wasm, job);
    } catch (e) {
      wasm.free(out);
      throw e;
    }
  }
  const float = dtype === "float32" || dtype === "float16";
  const viaAcc = float && (reduce === "sum" || reduce === "mean" || reduce === "prod");
  const kind = INDEXING_DTYPE_CODE[dtype];
  const acc = viaAcc ? wasm.alloc(op, "float32", 2 * length) : null;
  const counts = reduce === "mean"
    ? wasm.upload("int32", new Int32Array(length)) as WasmStorage
    : null;
  let positions: WasmStorage | null = null;
  try {
    if (acc) wasm.kernel("indexing_acc_init")(acc.ptr, out.ptr, length, kind);
    if (n > 0) {
      // A compaction: each row's index is the count of selected rows before it (computed here),
      // its bool word the kernel's mask.
      if (job.compact) positions = compactPositions(wasm, job);
      const strides = [
        job.updateStrides,
        positions ? job.shape.map((_, d) => (d === 0 ? 1 : 0)) : job.indexStrides,
        job.outStrides,
      ];
      if (positions) strides.push(job.indexStrides);
      describe(wasm, job.shape, strides);
      const failed = checked(wasm, "indexing_scatter")(
        out.ptr,
        acc?.ptr ?? 0,
        counts?.ptr ?? 0,
        job.updates ? wasm.pointer(job.updates) : 0,
        positions ? positions.ptr : wasm.pointer(job.indices),
        positions ? wasm.pointer(job.indices) : 0,
        axis.stride,
        axis.length,
        NEGATIVE_INDEX_CODE[axis.negative],
        kind,
        SCATTER_REDUCE_CODE[reduce],
        n,
      );
      if (failed) throw indexError(wasm, op, axis, job.indexName);
    }
    if (acc || counts) {
      wasm.kernel("indexing_finish")(
        out.ptr,
        acc?.ptr ?? 0,
        counts?.ptr ?? 0,
        length,
        kind,
        SCATTER_REDUCE_CODE[reduce],
        job.base ? 1 : 0,
      );
    }
  } catch (e) {
    wasm.free(out);
    throw e;
  } finally {
    if (acc) wasm.free(acc);
    if (counts) wasm.free(counts);
    if (positions) wasm.free(positions);
  }
  return { output: out };
}

/** Each row's count of selected rows before it (the rows' bool words are the job's indices). */
function compactPositions(wasm: WasmHost, job: ScatterJob): WasmStorage {
  const rows = job.shape[0];
  const step = job.indexStrides[0];
  const first = wasm.pointer(job.indices) / 4;
  const words = new Uint32Array(wasm.allocator.memory.buffer);
  const positions = new Int32Array(rows);
  for (let r = 0, count = 0; r < rows; r++) {
    positions[r] = count;
    if (words[first + r * step] !== 0) count++;
  }
  return wasm.upload("int32", positions) as WasmStorage;
}

/** Throws for ids declared sorted that are not ascending along the first axis (as the GPU). */
function checkSorted(wasm: WasmHost, job: ScatterJob): void {
  const rows = job.shape[0];
  const step = job.indexStrides[0];
  const first = wasm.pointer(job.indices) / 4;
  const ids = new Int32Array(wasm.allocator.memory.buffer);
  for (let r = 1, previous = ids[first]; r < rows; r++) {
    const id = ids[first + r * step];
    if (id < previous) {
      throw new IndexError({
        op: job.op,
        argument: job.indexName ?? "indices",
        expected: SORTED_IDS,
        received: `${id} after a larger id`,
      });
    }
    previous = id;
  }
}

/** A contiguous copy of the job's base, or its reduction's identity everywhere. */
function startingValues(wasm: WasmHost, job: ScatterJob): WasmStorage {
  const { op, dtype, outShape, base } = job;
  if (base) {
    return wasm.cast(op, { view: base, temp: false }, dtype, outShape).view.storage as WasmStorage;
  }
  const values = hostArray(dtype as DType, sizeOf(outShape));
  values.fill(job.fill ?? scatterIdentity(job.reduce, dtype));
  return wasm.upload(dtype, values) as WasmStorage;
}
