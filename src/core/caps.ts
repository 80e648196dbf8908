/**
 * A device's capabilities as plans see them: filled by the GPU device (src/gpu/device.ts) and
 * read by the plans (src/plans/), which must not import a device.
 * @module
 */

/** What the GPU device offers, as plans see it. */
export interface DeviceCaps {
  /** Adapter description, e.g. "NVIDIA H200" or "llvmpipe (LLVM 15.0.6, 256 bits)". */
  description: string;
  /** Vendor id or name as the adapter reports it. */
  vendor: string;
  /** True for a software or fallback adapter (llvmpipe, lavapipe). */
  isFallbackAdapter: boolean;
  /** Subgroup size range reported by the adapter. */
  subgroupMinSize: number;
  /** Largest subgroup size the adapter reports. */
  subgroupMaxSize: number;
  /** Features the device accepted. */
  features: string[];
  /** Convenience flags for the features plans branch on. */
  subgroups: boolean;
  /** The `shader-f16` feature: float16 storage and arithmetic in WGSL. */
  shaderF16: boolean;
  /** The `timestamp-query` feature: GPU timestamps for profiling. */
  timestampQuery: boolean;
  /** Atomic float32 add in storage buffers (`wgpu-shader-float32-atomic`). */
  float32Atomics: boolean;
  /** 64-bit integer atomics (`atomic<u64>`: load, store and read-modify-write). */
  int64Atomics: boolean;
  /** The limits the device was created with. */
  limits: {
    maxStorageBufferBindingSize: number;
    maxBufferSize: number;
    maxComputeWorkgroupStorageSize: number;
    maxComputeInvocationsPerWorkgroup: number;
    maxComputeWorkgroupSizeX: number;
    maxComputeWorkgroupsPerDimension: number;
    maxStorageBuffersPerShaderStage: number;
    minUniformBufferOffsetAlignment: number;
  };
}
