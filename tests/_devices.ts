/**
 * Shared helpers of the unit tests: the devices to run each semantic test on, small assertions
 * over tensors and allocation counters, and a read-back of a runtime's internal GPU buffer.
 * @module
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";

/**
 * Starts an "auto" runtime and returns the devices to test: `["wasm", "gpu"]` when WebGPU offers
 * an adapter, else `["wasm"]`. With `GYRE_REQUIRE_GPU=1` (CI, GPU hosts) a runtime without a GPU
 * is an error, so a file's GPU tests cannot vanish unnoticed.
 */
export async function devices(): Promise<gyre.DeviceName[]> {
  const rt = await gyre.init({ device: "auto" });
  if (!rt.gpu && Deno.env.get("GYRE_REQUIRE_GPU") === "1") {
    throw new Error("GYRE_REQUIRE_GPU=1, but gyre.init found no GPU: the GPU tests would not run");
  }
  return rt.gpu ? ["wasm", "gpu"] : ["wasm"];
}

/** The elements of a tensor as a plain array (disposes nothing). */
export async function values(t: gyre.Tensor): Promise<number[]> {
  return Array.from(await t.data());
}

/** Asserts shape, dtype and exact elements of a tensor, then disposes it. */
export async function expectTensor(
  t: gyre.Tensor,
  shape: number[],
  dtype: gyre.DType,
  expected: number[],
): Promise<void> {
  try {
    assert.deepEqual(t.shape, shape, "shape");
    assert.equal(t.dtype, dtype, "dtype");
    assert.deepEqual(await values(t), expected);
  } finally {
    t.dispose();
  }
}

/** Asserts elements within `tol` (relative to max(1, |expected|)); NaN must match NaN. */
export async function expectClose(
  t: gyre.Tensor,
  shape: number[],
  dtype: gyre.DType,
  expected: number[],
  tol = 1e-6,
): Promise<void> {
  try {
    assert.deepEqual(t.shape, shape, "shape");
    assert.equal(t.dtype, dtype, "dtype");
    const got = await values(t);
    assert.equal(got.length, expected.length, "length");
    got.forEach((g, i) => {
      const e = expected[i];
      if (Number.isNaN(e)) assert.ok(Number.isNaN(g), `[${i}]: expected NaN, got ${g}`);
      else if (!Number.isFinite(e)) assert.equal(g, e, `[${i}]`);
      else assert.ok(Math.abs(g - e) <= tol * Math.max(1, Math.abs(e)), `[${i}]: ${g} vs ${e}`);
    });
  } finally {
    t.dispose();
  }
}

/** The smallest normal float32: WGSL lets a GPU flush anything smaller in magnitude to zero. */
const MIN_NORMAL_F32 = 2 ** -126;

/** The spacing of float32 values at `x` (2^-149 among the subnormals). */
export function f32Ulp(x: number): number {
  const a = Math.abs(Math.fround(x));
  if (a < MIN_NORMAL_F32) return 2 ** -149;
  return 2 ** (Math.floor(Math.log2(a)) - 23);
}

/**
 * Asserts that each element of the float32 tensor `t` lies within `bound(x)` float32 ULPs of
 * `exact(x)` (float64, unrounded) for its input `x` (rounded to float32, as stored), then disposes
 * `t`. NaN must match NaN, and infinities and zeros (with their sign, where `signedZero`) match
 * exactly. With `flush`, an element whose input or exact value is subnormal may also come out as
 * a zero: WGSL lets a GPU flush subnormal inputs and results (lavapipe flushes exp's subnormal
 * results but keeps subnormal inputs).
 */
export async function expectUlps(
  t: gyre.Tensor,
  inputs: readonly number[],
  exact: (x: number) => number,
  bound: (x: number) => number,
  options: { flush?: boolean; signedZero?: boolean } = {},
): Promise<void> {
  try {
    assert.equal(t.dtype, "float32", "dtype");
    const got = await values(t);
    assert.equal(got.length, inputs.length, "length");
    got.forEach((g, i) => {
      const x = Math.fround(inputs[i]), want = exact(x);
      const at = `at x = ${x}: got ${g}, want ${want}`;
      if (Number.isNaN(want)) return assert.ok(Number.isNaN(g), at);
      const tiny = Math.abs(x) < MIN_NORMAL_F32 || Math.abs(Math.fround(want)) < MIN_NORMAL_F32;
      if (options.flush && tiny && g === 0) return;
      if (!Number.isFinite(want) || want === 0) {
        return assert.ok(options.signedZero ? Object.is(g, want) : g === want, at);
      }
      const ulps = Math.abs(g - want) / f32Ulp(want);
      assert.ok(ulps <= bound(x), `${at} (${ulps.toFixed(2)} ULP, bound ${bound(x)})`);
    });
  } finally {
    t.dispose();
  }
}

/** WGSL's bound on exp(x), in ULP of e^x. */
export const expUlps = (x: number) => 3 + 2 * Math.abs(x);

/**
 * The GPU's bound on expm1(x) in ULP of the exact value (wgsl/prelude.wgsl). Below ln 2, a Taylor
 * polynomial to x^10 in f32 (truncation 2^-30, about ten roundings that shrink with |x|; 1.8 ULP
 * measured on lavapipe over 2^20 points): 3. Above, exp(x) - 1: exp's bound, at most doubled in
 * ULP of the result by the subtraction (e^x / |e^x - 1| <= 2 there), plus its rounding.
 */
export const expm1Ulps = (x: number) => Math.abs(x) < Math.LN2 ? 3 : 2 * expUlps(x) + 1;

/**
 * The GPU's bound on log1p(x) in ULP of the exact value. On [-0.5, 2), 2 atanh(x / (2 + x)) by its
 * series: WGSL's 2.5-ULP division and 2 + x's rounding carry into the result, plus the series'
 * roundings (2.1 ULP measured): 5. Elsewhere log(1 + x): WGSL's 3 ULP for log outside [0.5, 2],
 * plus 1 + x's rounding: 4.
 */
export const log1pUlps = (x: number) => x >= -0.5 && x < 2 ? 5 : 4;

/** The live-allocation counters of both devices (what must not change across a failed call). */
export function liveCounts(): {
  gpuBuffers: number;
  gpuBytes: number;
  wasmBlocks: number;
  wasmBytes: number;
} {
  const s = gyre.runtime().stats();
  return {
    gpuBuffers: s.gpu?.liveBuffers ?? 0,
    gpuBytes: s.gpu?.liveBytes ?? 0,
    wasmBlocks: s.wasm.liveBlocks,
    wasmBytes: s.wasm.liveBytes,
  };
}

/**
 * The first `bytes` of one of the GPU runtime's own buffers (look-back states, reduction
 * partials) as 32-bit words, after the work already submitted: for tests of what kernels leave
 * there.
 */
export async function bufferWords(buffer: GPUBuffer, bytes = buffer.size): Promise<Uint32Array> {
  const device = gyre.runtime().gpu!.device;
  const read = device.createBuffer({
    size: bytes,
    usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.MAP_READ,
  });
  const encoder = device.createCommandEncoder();
  encoder.copyBufferToBuffer(buffer, 0, read, 0, bytes);
  device.queue.submit([encoder.finish()]);
  await read.mapAsync(GPUMapMode.READ);
  const words = new Uint32Array(read.getMappedRange().slice(0));
  read.unmap();
  read.destroy();
  return words;
}

/**
 * A test registered once per device in `deviceNames` (named "name [device]"), without Deno's op
 * and resource sanitizers (GPU work outlives a test's promises).
 */
export function testOn(
  deviceNames: readonly gyre.DeviceName[],
): (name: string, fn: (device: gyre.DeviceName) => Promise<void> | void) => void {
  return (name, fn) => {
    for (const device of deviceNames) {
      Deno.test({
        name: `${name} [${device}]`,
        sanitizeOps: false,
        sanitizeResources: false,
        fn: () => fn(device),
      });
    }
  };
}
