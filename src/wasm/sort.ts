/**
 * The sort family on WASM: the reference the GPU's sort kernels are checked against. Rows are
 * first copied with the axis last and contiguous in a 32-bit compute dtype (float16 widened),
 * each row's (key, index) pairs sorted stably (asm/sort.ts: ordered keys, an LSD radix sort),
 * then the wanted window gathered by index (so values come out bit for bit as they went in) and
 * copied back into the input's axis order; quantiles are read off each sorted row.
 * @module
 */
import type { DType } from "../core/dtype.ts";
import { axisLast, fromAxisOrder, isContiguous, sizeOf } from "../core/shape.ts";
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
import type { View } from "../core/view.ts";
import type { Value, WasmHost, WasmStorage } from "./host.ts";
import { runRowRanges, runShares, wasmThreads } from "./threads.ts";
import { WASM_SORT_WORK_PER_ELEMENT } from "../plans/wasm_threads.ts";
import type { PlanOverrides } from "../plans/overrides.ts";

/** The key type asm/sort.ts `sort_keys` takes for each compute dtype. */

/** A view with `axis` moved last, its rows contiguous in the compute dtype. */
interface Rows {
  value: Value;
  /** The axes in their order in `value` (axis last). */
  order: number[];
  shape: number[];
  rows: number;
  length: number;
}

function rowsOf(wasm: WasmHost, op: string, view: View, axis: number): Rows {
  const { order, shape, strides } = axisLast(view.shape, view.strides, axis);
  const length = view.shape[axis];
  const compute = sortComputeDType(view.dtype);
  let value: Value = { view: { ...view, shape, strides }, temp: false };
  if (view.dtype !== compute || !isContiguous(shape, value.view.strides)) {
    value = wasm.cast(op, value, compute, shape);
  }
  return { value, order, shape, rows: length === 0 ? 0 : sizeOf(shape) / length, length };
}

/**
 * Each row's indices in stable sorted order (rows of `r.length`), sorted on as many threads as
 * the plan gives; the caller frees the returned storage.
 */
function sortedOrder(
  wasm: WasmHost,
  op: string,
  r: Rows,
  descending: boolean,
  overrides: Readonly<PlanOverrides>,
  totalOrder = false,
): WasmStorage {
  const n = r.rows * r.length;
  const keys = wasm.alloc(op, "uint32", n);
  const order = wasm.alloc(op, "int32", n);
  const scratch: WasmStorage[] = [];
  try {
    const x = wasm.pointer(r.value.view);
    const dtype = r.value.view.dtype;
    const type = totalOrder && dtype === "float32"
      ? TOTAL_ORDER_KIND
      : SORT_KEY_KIND[dtype] as number;
    wasm.kernel("sort_keys")(keys.ptr, x, n, type, descending ? 1 : 0);
    wasm.kernel("sort_iota_rows")(order.ptr, r.rows, r.length);
    const threads = wasmThreads(wasm, n * WASM_SORT_WORK_PER_ELEMENT, overrides);
    if (threads > r.rows && r.length >= SHARED_ROW_LENGTH) {
      for (let row = 0; row < r.rows; row++) {
        const at = 4 * row * r.length;
        sortSharedRow(wasm, op, keys.ptr + at, order.ptr + at, r.length, threads);
      }
      return order;
    }
    // Each thread's scratch: a row of keys, a row of indices and 256 digit counts.
    const shares = Math.min(threads, r.rows);
    for (let t = 0; t < shares; t++) scratch.push(wasm.alloc(op, "uint32", 2 * r.length + 256));
    let t = 0;
    runRowRanges(wasm, "sort_pairs_u32", shares, r.rows, (begin, end) => {
      const s = scratch[t++].ptr;
      const at = 4 * begin * r.length;
      return [
        keys.ptr + at,
        order.ptr + at,
        s,
        s + 4 * r.length,
        s + 8 * r.length,
        end - begin,
        r.length,
      ];
    });
  } catch (e) {
    wasm.free(order);
    throw e;
  } finally {
    wasm.free(keys);
    for (const s of scratch) wasm.free(s);
  }
  return order;
}

/** Rows from which one row alone is shared among threads (fewer rows than threads). */
const SHARED_ROW_LENGTH = 1 << 15;

/**
 * Sorts one long row of `n` (key, index) pairs in place among `threads` threads: four stable
 * passes of 8-bit digits, each counting the digits of every thread's contiguous share, then
 * giving each share its slots (shares in order within each digit, so the pass stays stable) and
 * scattering; a pass whose digit is the same everywhere is skipped.
 */
function sortSharedRow(
  wasm: WasmHost,
  op: string,
  keys: number,
  indices: number,
  n: number,
  threads: number,
): void {
  const tmpKeys = wasm.alloc(op, "uint32", n);
  const tmpIndices = wasm.alloc(op, "uint32", n);
  const counts = wasm.alloc(op, "uint32", 256 * threads);
  try {
    const memory = wasm.allocator.memory;
    const bounds = (t: number) => Math.floor((n * t) / threads);
    let [k, v, tk, tv] = [keys, indices, tmpKeys.ptr, tmpIndices.ptr];
    for (let shift = 0; shift < 32; shift += 8) {
      const count = Array.from({ length: threads }, (_, t) => [
        k + 4 * bounds(t),
        bounds(t + 1) - bounds(t),
        shift,
        counts.ptr + 1024 * t,
      ]);
      runShares(memory, "sort_digit_counts", wasm.kernel("sort_digit_counts"), 4, count);
      const c = new Uint32Array(memory.buffer, counts.ptr, 256 * threads);
      // The pass would move nothing where one digit holds the whole row.
      let skip = false;
      for (let d = 0; d < 256 && !skip; d++) {
        let total = 0;
        for (let t = 0; t < threads; t++) total += c[256 * t + d];
        if (total === n) skip = true;
        else if (total > 0) break;
      }
      if (skip) continue;
      // Slots: digit by digit, share by share.
      let slot = 0;
      for (let d = 0; d < 256; d++) {
        for (let t = 0; t < threads; t++) {
          const m = c[256 * t + d];
          c[256 * t + d] = slot;
          slot += m;
        }
      }
      const scatter = Array.from({ length: threads }, (_, t) => [
        k + 4 * bounds(t),
        v + 4 * bounds(t),
        bounds(t + 1) - bounds(t),
        shift,
        counts.ptr + 1024 * t,
        tk,
        tv,
      ]);
      runShares(memory, "sort_digit_scatter", wasm.kernel("sort_digit_scatter"), 7, scatter);
      [k, v, tk, tv] = [tk, tv, k, v];
    }
    // An odd number of passes left the row in the scratch: copy it home.
    if (k !== keys) {
      const bytes = new Uint8Array(memory.buffer);
      bytes.copyWithin(keys, k, k + 4 * n);
      bytes.copyWithin(indices, v, v + 4 * n);
    }
  } finally {
    wasm.free(tmpKeys);
    wasm.free(tmpIndices);
    wasm.free(counts);
  }
}

/** Storage laid out as `shape` in the axis order `order` back in the input's order, as dtype. */
function backToInput(
  wasm: WasmHost,
  op: string,
  storage: WasmStorage,
  order: number[],
  shape: number[],
  dtype: DType,
): WasmStorage {
  const rank = order.length;
  if (order[rank - 1] === rank - 1 && storage.dtype === dtype) return storage;
  const back = fromAxisOrder(order, shape);
  const value: Value = { view: { storage, dtype: storage.dtype, ...back, offset: 0 }, temp: true };
  return wasm.cast(op, value, dtype, back.shape).view.storage as WasmStorage;
}

/** The WASM path of a sort job. */
export function runSortWasm(wasm: WasmHost, job: SortJob): SortResult {
  const { op, x: view, axis, start, count } = job;
  const r = rowsOf(wasm, op, view, axis);
  const outShape = [...r.shape.slice(0, -1), count];
  const total = r.rows * count;
  const compute = r.value.view.dtype;
  const values = wasm.alloc(op, compute, total);
  let indices: WasmStorage | null = job.indices ? wasm.alloc(op, "int32", total) : null;
  try {
    if (total > 0) {
      const order = sortedOrder(wasm, op, r, job.descending, job.overrides, job.totalOrder);
      try {
        wasm.kernel("sort_gather_window")(
          values.ptr,
          indices?.ptr ?? 0,
          wasm.pointer(r.value.view),
          order.ptr,
          r.rows,
          r.length,
          start,
          count,
        );
      } finally {
        wasm.free(order);
      }
    }
  } catch (e) {
    wasm.free(values);
    if (indices) wasm.free(indices);
    throw e;
  } finally {
    wasm.release(r.value);
  }
  const result = backToInput(wasm, op, values, r.order, outShape, view.dtype);
  if (indices) indices = backToInput(wasm, op, indices, r.order, outShape, "int32");
  return { values: result, indices };
}

/** A job's quantiles as numbers: a view's float32 values read now, -0 as +0. */
function quantileValues(wasm: WasmHost, op: string, q: readonly number[] | View): number[] {
  if (Array.isArray(q)) return q as number[];
  const n = quantileCount(q);
  const value = wasm.cast(op, { view: q as View, temp: false }, "float32", [n]);
  try {
    const f = new Float32Array(wasm.allocator.memory.buffer, wasm.pointer(value.view), n);
    return Array.from(f, (v) => (v === 0 ? 0 : v));
  } finally {
    wasm.release(value);
  }
}

/** The WASM path of a quantile job (float rows; integers are converted to float32 first). */
export function runQuantileWasm(wasm: WasmHost, job: QuantileJob): QuantileResult {
  const { op, axis } = job;
  let view = job.x;
  let converted: Value | null = null;
  if (view.dtype !== "float32" && view.dtype !== "float16") {
    converted = wasm.cast(op, { view, temp: false }, "float32", view.shape);
    view = converted.view;
  }
  try {
    const r = rowsOf(wasm, op, view, axis);
    const qn = quantileCount(job.q);
    const all = sizeOf(view.shape.filter((_, i) => i !== axis));
    const out = wasm.alloc(op, "float32", all * qn);
    // Empty rows: NaN, as NumPy.
    if (r.length === 0) new Float32Array(wasm.allocator.memory.buffer, out.ptr, all * qn).fill(NaN);
    const sorted = wasm.alloc(op, "float32", r.rows * r.length);
    const q = wasm.alloc(op, "float32", 2 * qn);
    try {
      if (r.rows > 0 && qn > 0) {
        const order = sortedOrder(wasm, op, r, false, job.overrides, true);
        try {
          wasm.kernel("sort_gather_window")(
            sorted.ptr,
            0,
            wasm.pointer(r.value.view),
            order.ptr,
            r.rows,
            r.length,
            0,
            r.length,
          );
        } finally {
          wasm.free(order);
        }
        new Float64Array(wasm.allocator.memory.buffer, q.ptr, qn).set(
          quantileValues(wasm, op, job.q),
        );
        wasm.kernel("sort_quantile_rows")(
          out.ptr,
          sorted.ptr,
          r.rows,
          r.length,
          q.ptr,
          qn,
          QUANTILE_METHOD_CODE[job.method],
          job.skipNaN ? 1 : 0,
        );
      }
    } catch (e) {
      wasm.free(out);
      throw e;
    } finally {
      wasm.free(sorted);
      wasm.free(q);
      wasm.release(r.value);
    }
    return { values: out };
  } finally {
    if (converted) wasm.release(converted);
  }
}

/** The WASM path of a search job: ordered keys of both, then binary searches. */
export function runSearchWasm(wasm: WasmHost, job: SearchJob): SearchResult {
  const { op } = job;
  const n = job.sorted.shape[0];
  const m = sizeOf(job.values.shape);
  const out = wasm.alloc(op, "int32", m);
  const compute = sortComputeDType(job.sorted.dtype);
  const sorted = wasm.cast(op, { view: job.sorted, temp: false }, compute, [n]);
  const values = wasm.cast(op, { view: job.values, temp: false }, compute, job.values.shape);
  const sortedKeys = wasm.alloc(op, "uint32", n);
  const valueKeys = wasm.alloc(op, "uint32", m);
  try {
    const type = SORT_KEY_KIND[compute] as number;
    wasm.kernel("sort_keys")(sortedKeys.ptr, wasm.pointer(sorted.view), n, type, 0);
    wasm.kernel("sort_keys")(valueKeys.ptr, wasm.pointer(values.view), m, type, 0);
    wasm.kernel("sort_search")(out.ptr, sortedKeys.ptr, n, valueKeys.ptr, m, job.right ? 1 : 0);
  } catch (e) {
    wasm.free(out);
    throw e;
  } finally {
    wasm.free(sortedKeys);
    wasm.free(valueKeys);
    wasm.release(sorted);
    wasm.release(values);
  }
  return { indices: out };
}
