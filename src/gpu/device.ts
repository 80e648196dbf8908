/**
 * WebGPU adapter and device acquisition. Probes wgpu's optional features one by one (Deno's
 * `adapter.features` omits several that `requestDevice` accepts), raises the limits to the
 * adapter's, and describes the result as a {@link DeviceCaps} record that plans choose from.
 * @module
 */

import type { DeviceCaps } from "../core/caps.ts";

export type { DeviceCaps };

/** Optional features to probe, in the order tried. */
export const OPTIONAL_FEATURES = [
  "timestamp-query",
  "subgroups",
  "shader-f16",
  "wgpu-timestamp-query-inside-passes",
  "wgpu-shader-float32-atomic",
  "wgpu-subgroup-barrier",
  "wgpu-shader-int64",
  "wgpu-shader-int64-atomic-all-ops",
] as const;

const LIMIT_NAMES = [
  "maxStorageBufferBindingSize",
  "maxBufferSize",
  "maxComputeWorkgroupStorageSize",
  "maxComputeInvocationsPerWorkgroup",
  "maxComputeWorkgroupSizeX",
  "maxComputeWorkgroupsPerDimension",
  "maxStorageBuffersPerShaderStage",
] as const;

/** A device plus what it can do. */
export interface AcquiredDevice {
  adapter: GPUAdapter;
  device: GPUDevice;
  caps: DeviceCaps;
}

/** Tries at acquiring a device, and the pause before the next (times the tries so far). */
const ACQUIRE_TRIES = 3;
const ACQUIRE_PAUSE_MS = 100;

/**
 * Requests an adapter and a device with every optional feature the adapter accepts.
 * Returns null when there is no WebGPU or no adapter. A request that throws is made again with
 * a fresh adapter, up to 3 tries, 100 and 200 ms apart ("Parent device is lost" was thrown on
 * an H200 shared by 4 test processes, just after a device of the process was destroyed).
 */
export async function acquireDevice(
  options: { powerPreference?: GPUPowerPreference } = {},
): Promise<AcquiredDevice | null> {
  for (let attempt = 1;; attempt++) {
    try {
      return await acquireOnce(options);
    } catch (e) {
      if (attempt >= ACQUIRE_TRIES) throw e;
    }
    await new Promise((done) => setTimeout(done, ACQUIRE_PAUSE_MS * attempt));
  }
}

async function acquireOnce(
  options: { powerPreference?: GPUPowerPreference },
): Promise<AcquiredDevice | null> {
  const gpu = (globalThis.navigator as { gpu?: GPU } | undefined)?.gpu;
  if (!gpu) return null;
  const adapter = await gpu.requestAdapter({
    powerPreference: options.powerPreference ?? "high-performance",
  });
  if (!adapter) return null;
  const requiredLimits: Record<string, number> = {};
  for (const name of LIMIT_NAMES) requiredLimits[name] = adapter.limits[name];
  // A throw-away device per feature: requestDevice rejects the whole request on one refusal.
  const accepted: string[] = [];
  for (const feature of OPTIONAL_FEATURES) {
    try {
      const probe = await adapter.requestDevice({
        requiredFeatures: [feature as GPUFeatureName],
      });
      probe.destroy();
      accepted.push(feature);
    } catch {
      // Not offered by this adapter.
    }
  }
  const device = await adapter.requestDevice({
    requiredFeatures: accepted as GPUFeatureName[],
    requiredLimits,
  });
  const info = adapter.info as GPUAdapterInfo & {
    subgroupMinSize?: number;
    subgroupMaxSize?: number;
    isFallbackAdapter?: boolean;
  };
  const caps: DeviceCaps = {
    description: info.description || info.device || "unknown adapter",
    vendor: info.vendor,
    architecture: info.architecture ?? "",
    isFallbackAdapter: Boolean(info.isFallbackAdapter),
    ...(info.isFallbackAdapter ? { softwareThreads: softwareThreads() } : {}),
    subgroupMinSize: info.subgroupMinSize ?? 0,
    subgroupMaxSize: info.subgroupMaxSize ?? 0,
    features: accepted,
    subgroups: accepted.includes("subgroups"),
    shaderF16: accepted.includes("shader-f16"),
    timestampQuery: accepted.includes("timestamp-query"),
    float32Atomics: accepted.includes("wgpu-shader-float32-atomic"),
    int64Atomics: accepted.includes("wgpu-shader-int64") &&
      accepted.includes("wgpu-shader-int64-atomic-all-ops"),
    limits: {
      maxStorageBufferBindingSize: device.limits.maxStorageBufferBindingSize,
      maxBufferSize: device.limits.maxBufferSize,
      maxComputeWorkgroupStorageSize: device.limits.maxComputeWorkgroupStorageSize,
      maxComputeInvocationsPerWorkgroup: device.limits.maxComputeInvocationsPerWorkgroup,
      maxComputeWorkgroupSizeX: device.limits.maxComputeWorkgroupSizeX,
      maxComputeWorkgroupsPerDimension: device.limits.maxComputeWorkgroupsPerDimension,
      maxStorageBuffersPerShaderStage: device.limits.maxStorageBuffersPerShaderStage,
      minUniformBufferOffsetAlignment: device.limits.minUniformBufferOffsetAlignment,
    },
  };
  return { adapter, device, caps };
}

/**
 * Threads lavapipe runs workgroups on: `LP_NUM_THREADS` where the process may read it, else one
 * a core (llvmpipe's own default), at most 32 (its cap).
 */
function softwareThreads(): number {
  let threads = navigator.hardwareConcurrency || 1;
  try {
    const query = { name: "env", variable: "LP_NUM_THREADS" } as const;
    if (Deno.permissions.querySync(query).state === "granted") {
      const set = Number(Deno.env.get("LP_NUM_THREADS"));
      if (Number.isInteger(set) && set >= 1) threads = set;
    }
  } catch {
    // No permission API (another runtime): the core count stands.
  }
  return Math.min(32, threads);
}
