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
  /** The adapter's architecture (e.g. "hopper"), where it reports one. */
  architecture?: string;
  /** True for a software or fallback adapter (llvmpipe, lavapipe). */
  isFallbackAdapter: boolean;
  /**
   * CPU threads a software adapter runs workgroups on (lavapipe: one a core, or
   * `LP_NUM_THREADS`); absent on a GPU. Plans size their work in waves of this many workgroups.
   */
  softwareThreads?: number;
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

/**
 * What a {@link Runtime} shows of its GPU: the WebGPU device gyre's kernels run on, for interop
 * (your own buffers and pipelines on the same device), its capabilities, and whether it was lost.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const rt = await gyre.init({ device: "auto" });
 * if (rt.gpu) console.log(rt.gpu.caps.description, rt.gpu.device.limits.maxBufferSize);
 * ```
 */
export interface GpuDeviceHandle {
  /** The WebGPU device. */
  readonly device: GPUDevice;
  /** Its capabilities, as gyre read them at `init`. */
  readonly caps: DeviceCaps;
  /** Why the device was lost, or null while it is alive. */
  readonly lostReason: string | null;
}

/**
 * What a {@link Runtime} shows of its WASM device.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * console.log(gyre.runtime().wasm.shared ? "threaded build" : "one thread");
 * ```
 */
export interface WasmDeviceHandle {
  /** The memory is shared (the threaded build): matmul may split its work across workers. */
  readonly shared: boolean;
}
