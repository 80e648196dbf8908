/**
 * GPU timestamps per dispatch, for benchmarks (and, later, the autotuner). While a profiler is
 * recording, each dispatch runs in its own compute pass with begin and end timestamp writes;
 * `stop()` resolves the queries with one read-back.
 * @module
 */
import type { GpuDeviceHandle } from "../core/caps.ts";
import { ValueError } from "../core/errors.ts";
import { GpuHost } from "./host.ts";

export type { GpuDeviceHandle } from "../core/caps.ts";

/** One timed dispatch. */
export interface DispatchTiming {
  /** The op that dispatched it. */
  kernel: string;
  /** GPU time between the pass's begin and end timestamps, in nanoseconds. */
  nanoseconds: number;
}

/**
 * Records GPU timestamps around every dispatch between `start()` and `stop()`.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * import { GpuProfiler } from "@gyre/gyre/profiler";
 * const rt = await gyre.init({ device: "gpu" });
 * const profiler = new GpuProfiler(rt.gpu!);
 * profiler.start();
 * gyre.ones([1 << 20]).add(1);
 * console.log(await profiler.stop());
 * ```
 */
export class GpuProfiler {
  #backend: GpuHost;
  #capacity: number;
  #querySet: GPUQuerySet;
  #kernels: string[] = [];

  /**
   * `gpu`: a runtime's `gpu`; `capacity`: the most dispatches one recording can time (WebGPU
   * allows 4096 queries a set).
   */
  constructor(gpu: GpuDeviceHandle, capacity = 2048) {
    if (!(gpu instanceof GpuHost)) {
      throw new ValueError({
        op: "GpuProfiler",
        argument: "gpu",
        expected: "the gpu of a runtime (gyre.runtime().gpu)",
        received: gpu === null ? "null" : typeof gpu,
      });
    }
    const backend = gpu;
    capacity = Math.min(capacity, 2048);
    if (!backend.caps.timestampQuery) {
      throw new Error("GpuProfiler needs the timestamp-query feature, which this device lacks");
    }
    this.#backend = backend;
    this.#capacity = capacity;
    this.#querySet = backend.device.createQuerySet({ type: "timestamp", count: 2 * capacity });
  }

  /** Starts timing every dispatch (flushing work recorded before). */
  start(): void {
    this.#backend.flush();
    this.#kernels = [];
    this.#backend.profiler = (kernel) => {
      const i = this.#kernels.length;
      if (i >= this.#capacity) return undefined;
      this.#kernels.push(kernel);
      return { querySet: this.#querySet, begin: 2 * i, end: 2 * i + 1 };
    };
  }

  /**
   * Times `fn`'s dispatches as one group (one pass, one pair of timestamps): the GPU time of a
   * whole op, however many kernels it launches. Use between `start` and `stop`; `fn` must make
   * its work run (realize its results).
   */
  group<T>(label: string, fn: () => T): T {
    const i = this.#kernels.length;
    if (i >= this.#capacity) return fn();
    this.#kernels.push(label);
    const saved = this.#backend.profiler;
    this.#backend.profiler = null;
    this.#backend.batch.beginTimedGroup({ querySet: this.#querySet, begin: 2 * i, end: 2 * i + 1 });
    const before = this.#backend.batch.totalDispatches;
    let result: T;
    try {
      result = fn();
    } finally {
      this.#backend.batch.endTimedGroup();
      this.#backend.profiler = saved;
      // An empty group's queries are never written, and resolving them waits forever on Vulkan
      // (an H200 hung there): give its slot back, whether `fn` returned or threw.
      if (this.#backend.batch.totalDispatches === before) this.#kernels.pop();
    }
    // A lazy result that was not realized is the usual cause.
    if (this.#backend.batch.totalDispatches === before) {
      throw new Error(`profiler group '${label}' ran no dispatch: realize its results`);
    }
    return result;
  }

  /** Starts recording without timing each dispatch (for `group`). */
  startGroups(): void {
    this.#backend.flush();
    this.#kernels = [];
  }

  /** Stops timing and returns each timed dispatch (or group) in order. */
  async stop(): Promise<DispatchTiming[]> {
    this.#backend.profiler = null;
    const count = this.#kernels.length;
    if (count === 0) return [];
    const device = this.#backend.device;
    const bytes = 2 * count * 8;
    const resolved = device.createBuffer({
      label: "gyre timestamps",
      size: bytes,
      usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC,
    });
    const staging = device.createBuffer({
      size: bytes,
      usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
    const encoder = this.#backend.batch.encoderForCopies();
    encoder.resolveQuerySet(this.#querySet, 0, 2 * count, resolved, 0);
    encoder.copyBufferToBuffer(resolved, 0, staging, 0, bytes);
    this.#backend.batch.submit();
    await staging.mapAsync(GPUMapMode.READ);
    const stamps = new BigUint64Array(staging.getMappedRange().slice(0));
    staging.destroy();
    resolved.destroy();
    await this.#backend.batch.checkErrors("profiler");
    return this.#kernels.map((kernel, i) => ({
      kernel,
      nanoseconds: Number(stamps[2 * i + 1] - stamps[2 * i]),
    }));
  }

  /** Frees the query set. */
  destroy(): void {
    this.#querySet.destroy();
  }
}
