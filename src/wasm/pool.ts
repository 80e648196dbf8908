/**
 * The pooling family on WASM: asm/pool.ts over contiguous f32 or i32 planes (float16 widened,
 * strided views copied first). Max and average pooling run the vector entries (`pool_*_fast_*`,
 * four output columns per v128, the scalar loops' results bit for bit), shared between threads
 * (threads.ts) by ranges of output rows when the problem is large enough; channels-last input
 * (NHWC memory) runs the channels-last entries (`pool_*_cl_*`, four channels per v128) in place
 * into a channels-last result; adaptive pooling runs the scalar loops. The scalar entries stay callable as the reference (`planWasmPool`).
 * @module
 */
import type { DType } from "../core/dtype.ts";
import { isContiguous } from "../core/shape.ts";
import type { PoolJob, PoolProblem, PoolResult } from "../contract/pool.ts";
import type { Value, WasmHost, WasmStorage } from "./host.ts";
import { runShares, wasmThreads } from "./threads.ts";
import { planWasmPool } from "../plans/pool.ts";
import { WASM_POOL_WORK_PER_ELEMENT } from "../plans/wasm_threads.ts";
import type { PlanOverrides } from "../plans/overrides.ts";

/** The WASM path: the values and, when asked, the indices. */
export function runPoolWasm(backend: WasmHost, job: PoolJob): PoolResult {
  const { op, problem: p, indices } = job;
  const outputs = p.planes * p.outHeight * p.outWidth;
  const view = job.x;
  const compute: DType = p.dtype === "int32" ? "int32" : "float32";
  const channels = view.shape.at(-3) ?? 1;
  const channelsLast = !p.adaptive && !indices && view.dtype === compute &&
    isChannelsLast(view.shape, view.strides);
  const form = p.adaptive
    ? "reference"
    : planWasmPool(job.overrides.wasmPool, { channelsLast, channels }).form;
  // The other kernels read contiguous f32 or i32 planes: widen float16, copy strided views.
  let input: Value = { view, temp: false };
  if (
    outputs > 0 && form !== "channels-last" &&
    (view.dtype !== compute || !isContiguous(view.shape, view.strides))
  ) {
    input = backend.cast(op, input, compute, view.shape);
  }
  const values = backend.alloc(op, compute, outputs);
  const index: WasmStorage | null = indices ? backend.alloc(op, "int32", outputs) : null;
  try {
    if (outputs > 0) {
      const src = backend.pointer(input.view);
      const suffix = compute === "int32" ? "i32" : "f32";
      if (form === "reference") {
        runReference(backend, p, suffix, values.ptr, index?.ptr ?? 0, src);
      } else if (form === "channels-last") {
        runChannelsLast(backend, p, channels, suffix, values.ptr, src, job.overrides);
      } else runFast(backend, op, p, suffix, values.ptr, index?.ptr ?? 0, src, job.overrides);
    }
  } catch (e) {
    backend.free(values);
    if (index) backend.free(index);
    throw e;
  } finally {
    backend.release(input);
  }
  let result: WasmStorage = values;
  if (p.dtype !== compute) {
    result = backend.cast(op, backend.toValue(values, p.outShape), p.dtype, p.outShape).view
      .storage as WasmStorage;
  }
  return { values: result, indices: index, channelsLast: form === "channels-last" };
}

/**
 * Whether a [N, C, H, W] or [C, H, W] view lies channels-last in memory (NHWC: channel stride 1,
 * pixels C apart, rows W * C apart, images H * W * C apart), so that the channels-last kernels
 * read it in place. Axes of length 1 may have any stride.
 */
function isChannelsLast(shape: readonly number[], strides: readonly number[]): boolean {
  if (shape.length !== 3 && shape.length !== 4) return false;
  const [c, h, w] = shape.slice(-3);
  const want = [h * w * c, 1, w * c, c].slice(4 - shape.length);
  return shape.every((d, i) => d === 1 || strides[i] === want[i]);
}

/** The channels-last kernels over ranges of output rows (N * OH), one range per thread. */
function runChannelsLast(
  backend: WasmHost,
  p: PoolProblem,
  channels: number,
  suffix: string,
  out: number,
  src: number,
  overrides: Readonly<PlanOverrides>,
): void {
  const rows = p.planes / channels * p.outHeight;
  const threads = Math.min(
    wasmThreads(backend, poolWork(p) / WASM_POOL_WORK_PER_ELEMENT, overrides),
    rows,
  );
  const max = p.op === "max";
  const name = max ? `pool_max_cl_${suffix}` : "pool_avg_cl_f32";
  const kernel = backend.kernel(name);
  const window = [...p.kernel, ...p.stride, ...p.padding];
  const tail = max ? p.dilation : [p.countIncludePad ? 1 : 0, p.divisor];
  const shares = rowShares(rows, threads).map(([first, count]) => [
    out,
    src,
    first,
    count,
    p.inHeight,
    p.inWidth,
    channels,
    p.outHeight,
    p.outWidth,
    ...window,
    ...tail,
  ]);
  if (threads === 1) kernel(...shares[0]);
  else runShares(backend.allocator.memory, name, kernel, shares[0].length, shares);
}

/** Input elements plus window taps: the work measure the thread threshold weighs. */
function poolWork(p: PoolProblem): number {
  const rows = p.planes * p.outHeight;
  return p.planes * p.inHeight * p.inWidth + rows * p.outWidth * p.kernel[0] * p.kernel[1];
}

/** [first, count] of `rows` split evenly into `threads` ranges. */
function rowShares(rows: number, threads: number): [number, number][] {
  const shares: [number, number][] = [];
  for (let t = 0; t < threads; t++) {
    const first = Math.round((rows * t) / threads);
    shares.push([first, Math.round((rows * (t + 1)) / threads) - first]);
  }
  return shares;
}

/** The scalar loops of asm/pool.ts, on this thread (adaptive pooling, and the reference). */
function runReference(
  backend: WasmHost,
  p: PoolProblem,
  suffix: string,
  out: number,
  indices: number,
  src: number,
): void {
  const sizes = [p.planes, p.inHeight, p.inWidth, p.outHeight, p.outWidth];
  if (p.op === "max" && p.adaptive) {
    backend.kernel(`pool_adaptive_max_${suffix}`)(out, indices, src, ...sizes);
  } else if (p.op === "max") {
    backend.kernel(`pool_max_${suffix}`)(
      out,
      indices,
      src,
      ...sizes,
      ...p.kernel,
      ...p.stride,
      ...p.padding,
      ...p.dilation,
    );
  } else if (p.adaptive) {
    backend.kernel("pool_adaptive_avg_f32")(out, src, ...sizes);
  } else {
    backend.kernel("pool_avg_f32")(
      out,
      src,
      ...sizes,
      ...p.kernel,
      ...p.stride,
      ...p.padding,
      p.countIncludePad ? 1 : 0,
      p.divisor,
    );
  }
}

/**
 * The vector entries over ranges of output rows (all planes' rows end to end), one range per
 * thread. Max pooling without indices gives each thread a workspace of its own.
 */
function runFast(
  backend: WasmHost,
  op: string,
  p: PoolProblem,
  suffix: string,
  out: number,
  indices: number,
  src: number,
  overrides: Readonly<PlanOverrides>,
): void {
  const rows = p.planes * p.outHeight;
  const threads = Math.min(
    wasmThreads(backend, poolWork(p) / WASM_POOL_WORK_PER_ELEMENT, overrides),
    rows,
  );
  const sizes = [p.inHeight, p.inWidth, p.outHeight, p.outWidth];
  const window = [...p.kernel, ...p.stride, ...p.padding];
  const max = p.op === "max";
  const name = max ? `pool_max_fast_${suffix}` : "pool_avg_fast_f32";
  const kernel = backend.kernel(name);
  const workspaces: WasmStorage[] = [];
  try {
    let bytes = 0;
    if (max && !indices) {
      const size = backend.kernel("pool_max_fast_workspace") as unknown as (
        ...args: number[]
      ) => number;
      bytes = size(p.kernel[0], p.dilation[0], p.outWidth);
    }
    const shares: number[][] = [];
    for (const [first, count] of rowShares(rows, threads)) {
      if (max) {
        let workspace = 0;
        if (bytes > 0) {
          const w = backend.alloc(op, "float32", Math.ceil(bytes / 4));
          workspaces.push(w);
          workspace = w.ptr;
        }
        shares.push([
          out,
          indices,
          src,
          first,
          count,
          ...sizes,
          ...window,
          ...p.dilation,
          workspace,
        ]);
      } else {
        shares.push([
          out,
          src,
          first,
          count,
          ...sizes,
          ...window,
          p.countIncludePad ? 1 : 0,
          p.divisor,
        ]);
      }
    }
    if (threads === 1) kernel(...shares[0]);
    else runShares(backend.allocator.memory, name, kernel, shares[0].length, shares);
  } finally {
    for (const w of workspaces) backend.free(w);
  }
}
