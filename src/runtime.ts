/**
 * The runtime: which devices exist, which one new tensors go to, `tidy` scopes, and the
 * allocation statistics of both devices.
 * @module
 */
import type { Backend, DeviceName } from "./contract/backend.ts";
import type { GpuDeviceHandle, WasmDeviceHandle } from "./core/caps.ts";
import { DeviceError, GpuError, ValueError } from "./core/errors.ts";
import { GpuBackend } from "./gpu/backend.ts";
import { acquireDevice, type DeviceCaps } from "./gpu/device.ts";
import type { PoolStats } from "./gpu/buffer_pool.ts";
import type { AllocatorStats } from "./wasm/allocator.ts";
import { WasmBackend } from "./wasm/backend.ts";
import { loadHeuristics } from "./heuristics/startup.ts";
import { provideChooserModule } from "./heuristics/chooser.ts";
import { setTuningMode, type TuningMode, tuningMode } from "./heuristics/consensus.ts";
import { compiledKernels, kernelImports } from "./wasm/module.ts";

// The chooser's table lives in the kernel module: the runtime, which names the devices, hands it
// over (compiled on first use).
provideChooserModule({ module: () => compiledKernels(false), imports: kernelImports });

// The WASM device's thread pool is part of the public surface; the runtime, which makes the
// devices, is the one front-end module that names them.
export type { PoolStats } from "./gpu/buffer_pool.ts";
export type { AllocatorStats } from "./wasm/allocator.ts";
export {
  startWasmThreads,
  stopWasmThreads,
  wasmThreadCapacity,
  wasmThreadCount,
} from "./wasm/threads.ts";
import { materializeAll } from "./tensor.ts";
import { checkOptions } from "./core/options.ts";

/** Which device new tensors go to: "auto" takes the GPU when there is one. */
export type DevicePreference = "auto" | DeviceName;

/** Options of {@link init}. */
export interface InitOptions {
  /** "auto" (default): the GPU when WebGPU offers an adapter, else WASM. */
  device?: DevicePreference;
  /** Passed to `requestAdapter`. */
  powerPreference?: GPUPowerPreference;
}

/** Allocation counters of both devices. */
export interface RuntimeStats {
  /** The GPU buffer pool's counters, or null without a GPU. */
  gpu: PoolStats | null;
  /** The WASM allocator's counters. */
  wasm: AllocatorStats;
}

/**
 * The devices gyre runs on. Get it from {@link init} or {@link runtime}.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const rt = await gyre.init({ device: "auto" });
 * console.log(rt.device, rt.caps?.description);
 * ```
 */
export class Runtime {
  /** The device new tensors go to. */
  device: DeviceName;
  /**
   * Lazy elementwise fusion (default on): elementwise results stay pending until something needs
   * them, and consumers fold pending producers into their own kernel. Off: every op runs at once.
   */
  fusion = true;
  /** What was asked for. */
  readonly preference: DevicePreference;
  /** The WASM device (always present). */
  readonly wasm: WasmDeviceHandle;
  /** The GPU device, or null where WebGPU offered no adapter. */
  readonly gpu: GpuDeviceHandle | null;

  /**
   * A runtime over `gpu` (a device another runtime made, or none) and a new WASM device; use
   * {@link init} rather than this.
   */
  constructor(preference: DevicePreference, gpu: GpuDeviceHandle | null) {
    if (gpu !== null && !(gpu instanceof GpuBackend)) {
      throw new ValueError({
        op: "Runtime",
        argument: "gpu",
        expected: "null or the gpu of a runtime that gyre.init made",
        received: "another object",
      });
    }
    this.preference = preference;
    this.gpu = gpu;
    this.wasm = new WasmBackend();
    this.device = gpu ? "gpu" : "wasm";
    gpu?.device.lost.then(() => {
      // "auto" carries on on the CPU; tensors already on the GPU report the loss when used.
      if (this.preference === "auto") this.device = "wasm";
    });
  }

  /**
   * Whether tuned choices apply (the same setting as `setTuningMode` in `@gyre/gyre/tuning`, for
   * every runtime): "table" (default: the chooser's table, rules and plans), "off" (the
   * hand-written plans), or "online" (as "table", and the first calls of a key this machine has
   * not measured try alternatives, timed by the GPU, then adopt the fastest and record it in the
   * tuning cache). Results during a trial may differ in rounding from call to call, as the
   * alternatives sum in other orders. While online, each GPU job of a tunable family runs in a
   * compute pass of its own with two timestamp writes (to be timed if it is a trial's): set
   * "table" once the shapes that matter have been seen. A ValueError for another value.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const rt = await gyre.init({ device: "auto" });
   * rt.tuning = "online";
   * rt.tuning = "table";
   * ```
   */
  get tuning(): TuningMode {
    return tuningMode();
  }
  set tuning(mode: TuningMode) {
    setTuningMode(mode);
  }

  /** The GPU's capabilities, or null without a GPU. */
  get caps(): DeviceCaps | null {
    return this.gpu?.caps ?? null;
  }

  /** Computes every pending tensor and sends recorded GPU work, without waiting for it. */
  flush(): void {
    materializeAll();
    gpuBackendOf(this)?.flush();
  }

  /** Sends recorded GPU work and waits until the GPU has finished it; throws its errors. */
  async sync(): Promise<void> {
    const gpu = gpuBackendOf(this);
    if (!gpu || gpu.lostReason !== null) return;
    this.flush();
    await gpu.device.queue.onSubmittedWorkDone();
    await gpu.batch.checkErrors("sync");
  }

  /** Allocation counters of both devices. */
  stats(): RuntimeStats {
    return {
      gpu: gpuBackendOf(this)?.bufferPool.stats() ?? null,
      wasm: wasmBackendOf(this).allocator.stats(),
    };
  }
}

let current: Runtime | null = null;

// The backends behind a runtime's public handles, for the front end, tests and benchmarks (not
// re-exported by mod.ts). The constructor admits only a GpuBackend, and makes the WasmBackend.

/** The GPU backend of `rt` (the current runtime by default), or null without a GPU. */
export function gpuBackendOf(rt: Runtime = runtime()): GpuBackend | null {
  return rt.gpu as GpuBackend | null;
}

/** The WASM backend of `rt` (the current runtime by default). */
export function wasmBackendOf(rt: Runtime = runtime()): WasmBackend {
  return rt.wasm as WasmBackend;
}

/**
 * The backend of device `name` in the current runtime; `op` and `argument` name the call in the
 * error when that device is missing or lost.
 */
export function backendFor(name: DeviceName, op = "to", argument = "device"): Backend {
  const rt = runtime();
  if (name === "wasm") return wasmBackendOf(rt);
  if (name === "gpu") {
    const gpu = gpuBackendOf(rt);
    if (!gpu) {
      throw new DeviceError({
        op,
        argument,
        expected: "a WebGPU adapter (call gyre.init first)",
        received: "no GPU in this runtime",
      });
    }
    if (gpu.lostReason !== null) {
      throw new GpuError(
        "device-lost",
        op,
        argument,
        "a live GPU device",
        `lost (${gpu.lostReason})`,
      );
    }
    return gpu;
  }
  throw new DeviceError({
    op,
    argument,
    expected: '"gpu" or "wasm"',
    received: String(name),
  });
}

/**
 * Starts (or restarts) the runtime. With `device: "gpu"` it throws a {@link DeviceError} when
 * WebGPU has no adapter; with "auto" it falls back to WASM.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const rt = await gyre.init({ device: "wasm" });
 * console.log(rt.device); // "wasm"
 * ```
 */
export async function init(options: InitOptions = {}): Promise<Runtime> {
  checkOptions("init", options, ["device", "powerPreference"]);
  const preference = options.device ?? "auto";
  if (!["auto", "gpu", "wasm"].includes(preference)) {
    throw new DeviceError({
      op: "init",
      argument: "options.device",
      expected: '"auto", "gpu" or "wasm"',
      received: String(preference),
    });
  }
  let gpu: GpuBackend | null = null;
  if (preference !== "wasm") {
    let acquired = null;
    try {
      acquired = await acquireDevice({ powerPreference: options.powerPreference });
    } catch (e) {
      if (preference === "gpu") {
        throw new DeviceError({
          op: "init",
          argument: "device",
          expected: "a WebGPU device",
          received: String(e),
        });
      }
    }
    if (!acquired && preference === "gpu") {
      throw new DeviceError({
        op: "init",
        argument: "device",
        expected: "a WebGPU adapter",
        received: "none",
      });
    }
    if (acquired) gpu = new GpuBackend(acquired);
  }
  // Tensors of the runtime being replaced live in its devices' memory, which the new runtime's
  // kernels cannot read: using one is a DeviceError (src/tensor.ts), not garbage.
  if (current) {
    wasmBackendOf(current).retired = true;
    const old = gpuBackendOf(current);
    if (old) old.retired = true;
  }
  current = new Runtime(preference, gpu);
  if (gpu) destroyDeviceOnExit();
  // The user's rules and tuning results (warnings at most: never an error here).
  await loadHeuristics(gpu ? gpu.caps : null);
  return current;
}

let destroyOnExitRegistered = false;

/**
 * Destroys the current GPU device when the process unloads, so that the driver's threads stop
 * before the process's exit handlers run. (The abort at exit once blamed on a live device was
 * libEGL's; see bench/README.md, "An abort at exit on lavapipe".)
 */
function destroyDeviceOnExit(): void {
  if (destroyOnExitRegistered || typeof globalThis.addEventListener !== "function") return;
  destroyOnExitRegistered = true;
  globalThis.addEventListener("unload", () => current?.gpu?.device.destroy());
}

/**
 * The current runtime; a WASM-only one is made on first use if {@link init} was not called.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * console.log(gyre.runtime().device);
 * ```
 */
export function runtime(): Runtime {
  if (!current) current = new Runtime("wasm", null);
  return current;
}

/**
 * Sends all recorded GPU work to the device now, without waiting for it.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * gyre.flush();
 * ```
 */
export function flush(): void {
  current?.flush();
}

/**
 * Sends all recorded GPU work and waits for the GPU to finish it (no read-back). Costs one
 * device round trip (about 11 ms in Deno): use it for timing, not in a loop.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * gyre.ones([1024]).add(1);
 * await gyre.sync();
 * ```
 */
export async function sync(): Promise<void> {
  await current?.sync();
}
