/**
 * Device capabilities of the reference GPUs as their adapters report them, for tests of plans and
 * of the chooser that need a device they do not run on.
 * @module
 */
import type { DeviceCaps } from "../src/tuning.ts";

/** An NVIDIA H200 as Deno's WebGPU (Vulkan) reports it. */
export const H200: DeviceCaps = {
  description: "NVIDIA H200",
  vendor: "nvidia",
  architecture: "hopper",
  isFallbackAdapter: false,
  subgroupMinSize: 32,
  subgroupMaxSize: 32,
  features: ["subgroups", "shader-f16", "timestamp-query"],
  subgroups: true,
  shaderF16: true,
  timestampQuery: true,
  float32Atomics: true,
  int64Atomics: true,
  limits: {
    maxStorageBufferBindingSize: 2 ** 31,
    maxBufferSize: 2 ** 32,
    maxComputeWorkgroupStorageSize: 49152,
    maxComputeInvocationsPerWorkgroup: 1024,
    maxComputeWorkgroupSizeX: 1024,
    maxComputeWorkgroupsPerDimension: 65535,
    maxStorageBuffersPerShaderStage: 10,
    minUniformBufferOffsetAlignment: 256,
  },
};
