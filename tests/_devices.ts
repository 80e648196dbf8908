/**
 * Shared helpers of the unit tests: the devices to run each semantic test on, small assertions
 * over tensors and allocation counters, and a read-back of a runtime's internal GPU buffer.
 * @module
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";

/**
 * Starts an "auto" runtime and returns the devices to test: `["wasm", "gpu"]` when WebGPU offers
 * an adapter, else `["wasm"]`.
 */
export async function devices(): Promise<gyre.DeviceName[]> {
  const rt = await gyre.init({ device: "auto" });
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
