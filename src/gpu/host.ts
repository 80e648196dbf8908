/**
 * The GPU device's machinery, which every kernel family's host code uses: storage in pooled
 * WebGPU buffers, kernels compiled from WGSL and cached by key, all dispatches batched into one
 * submission, and read-backs of any number of tensors through one staging buffer and one
 * `mapAsync`. The families themselves (elementwise.ts, reduce.ts, rows.ts, ...) are wired to the
 * contract in backend.ts.
 * @module
 */

import type { ElementwiseJob } from "../contract/elementwise.ts";

import {
  kernelObservers,
  type MemoryStats,
  observeKernel,
  type Storage,
  type View,
} from "../contract/backend.ts";
import { isContiguous, sizeOf } from "../core/shape.ts";
import {
  type DType,
  f16BitsToF32,
  f32ToF16Bits,
  hostArray,
  storageBytes,
  type TypedArray,
} from "../core/dtype.ts";
import { DTypeError, GpuError, IndexError } from "../core/errors.ts";
import { E } from "../ir/expr.ts";

import { NO_OVERRIDES } from "../plans/overrides.ts";

import { CommandBatch, type Kernel, type TimestampSlot } from "./batch.ts";

import type { AcquiredDevice, DeviceCaps } from "./device.ts";
import { BufferPool } from "./buffer_pool.ts";

/** WGSL: zeroes p.n u32 words (GpuHost.zero). */
const ZERO_WGSL = [
  "struct Params { n: u32 }",
  "@group(0) @binding(0) var<storage, read_write> words: array<u32>;",
  "@group(0) @binding(1) var<uniform> p: Params;",
  "@compute @workgroup_size(256)",
  "fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {",
  "  let i = gid.x + gid.y * nwg.x * 256u;",
  "  if (i < p.n) { words[i] = 0u; }",
  "}",
].join("\n");

/** Index checks one read-back reports (see `GpuHost.indexCheck`). */
export const INDEX_CHECK_SLOTS = 1024;

/** GPU storage: one pooled buffer. */
export class GpuStorage implements Storage {
  refs = 0;
  constructor(
    readonly backend: GpuHost,
    readonly buffer: GPUBuffer,
    readonly length: number,
    readonly dtype: DType,
  ) {}
}

/** One recorded dispatch: enough to issue it again over other buffers. */
export interface RecordedDispatch {
  label: string;
  kernel: Kernel;
  buffers: GPUBuffer[];
  uniforms: Uint32Array;
  grid: [number, number];
}

/** An index check a kernel reports into (see `GpuHost.indexCheck`). */
export interface IndexCheck {
  op: string;
  argument: string;
  expected: string;
  /** What a report of code 2 means: the ids were out of the order the op was promised. */
  order?: string;
}

/**
 * The uniform word where a dispatch binding the "index-checks" scratch carries its slot (a
 * replay gives each run its own slot).
 */
export const INDEX_CHECK_SLOT_WORD = 7;

/** What a trace sees of the GPU backend. */
export interface DispatchRecorder {
  allocated(buffer: GPUBuffer, storage: GpuStorage): void;
  uploaded(buffer: GPUBuffer): void;
  dispatched(d: RecordedDispatch): void;
  /** An index check was taken for the next dispatch that binds the checks' buffer. */
  indexChecked?(check: IndexCheck): void;
}

/** Receives the timestamp slot of each dispatch while a benchmark profiles. */
export type DispatchProfiler = (kernel: string) => TimestampSlot | undefined;

/** The GPU device's machinery (buffers, pipelines, dispatch, read-back); families in backend.ts. */
export abstract class GpuHost {
  /** Elementwise evaluation, which the machinery itself needs (read-backs, casts). */
  abstract evaluate(job: ElementwiseJob): Storage;
  readonly name = "gpu" as const;
  readonly device: GPUDevice;
  readonly caps: DeviceCaps;
  readonly bufferPool: BufferPool;
  readonly batch: CommandBatch;
  /** Set by `device.lost`; every later call throws. */
  lostReason: string | null = null;
  /** Set when `init` replaced this device's runtime (src/core/view.ts). */
  retired = false;
  /** Benchmarks set this to wrap dispatches in timestamp writes. */
  profiler: DispatchProfiler | null = null;
  /** `jit` sets this while tracing to record allocations, uploads and dispatches. */
  recorder: DispatchRecorder | null = null;
  /** The live storage over each pool buffer handed out (for `jit`'s captured constants). */
  #owners = new WeakMap<GPUBuffer, GpuStorage>();

  /** The storage a buffer currently backs, if it is live. */
  storageOf(buffer: GPUBuffer): GpuStorage | undefined {
    const s = this.#owners.get(buffer);
    return s && s.refs > 0 ? s : undefined;
  }
  /** Compiled kernels by key, least recently used first (a Map keeps insertion order). */
  #pipelines = new Map<string, Kernel>();
  /**
   * The most compiled kernels kept; past it the least recently used is dropped (and compiled
   * again if it is needed again). A jit plan holds its kernels itself, so it is not affected.
   */
  pipelineLimit = 512;

  constructor(acquired: AcquiredDevice) {
    this.device = acquired.device;
    this.caps = acquired.caps;
    this.bufferPool = new BufferPool(this.device, this.caps.limits.maxStorageBufferBindingSize);
    this.batch = new CommandBatch(this.device, this.bufferPool);
    this.device.lost.then((info) => {
      this.lostReason = info.message || info.reason || "unknown";
    });
  }

  /** Compiled pipelines, by key (for tests). */
  get pipelineCount(): number {
    return this.#pipelines.size;
  }

  /** Kernels compiled since the backend started, recompiles after eviction included (for tests). */
  pipelinesCompiled = 0;

  /** Throws when the device is lost or a dtype is unsupported. For the family modules. */
  checkLive(op: string, dtypes: DType[]): void {
    if (this.lostReason !== null) {
      throw new GpuError(
        "device-lost",
        op,
        "device",
        "a live GPU device",
        `lost (${this.lostReason})`,
      );
    }
    if (!this.caps.shaderF16 && dtypes.includes("float16")) {
      throw new DTypeError({
        op,
        argument: "dtype",
        expected: "a dtype this GPU supports (float16 needs the shader-f16 feature)",
        received: "float16",
      });
    }
  }

  /**
   * The compiled kernel for `key`, generating its WGSL on first use. Its bindings are
   * `storageCount` storage buffers, of which the last `writable` are read-write (outputs, scratch
   * state), then a uniform. For the family modules.
   */
  pipeline(key: string, storageCount: number, source: () => string, writable = 1): Kernel {
    let kernel = this.#pipelines.get(key);
    if (kernel) {
      if (key !== this.#lastKey) {
        // Moved to the most recently used end.
        this.#pipelines.delete(key);
        this.#pipelines.set(key, kernel);
        this.#lastKey = key;
      }
      return kernel;
    }
    kernel = this.batch.compile(withHalfEnabled(source()), storageCount, writable);
    this.pipelinesCompiled++;
    this.#pipelines.set(key, kernel);
    this.#lastKey = key;
    for (const old of this.#pipelines.keys()) {
      if (this.#pipelines.size <= Math.max(1, this.pipelineLimit)) break;
      this.#pipelines.delete(old);
    }
    return kernel;
  }
  /** The key used last (already at the most recently used end). */
  #lastKey = "";

  /** Destroys pooled (unused) buffers. */
  trim(): void {
    this.batch.submit();
    this.batch.forgetBindGroups();
    this.bufferPool.trim();
  }

  /** Storage over a pool buffer acquired elsewhere (a `jit` replay's output). */
  adopt(buffer: GPUBuffer, length: number, dtype: DType): GpuStorage {
    const storage = new GpuStorage(this, buffer, length, dtype);
    this.#owners.set(buffer, storage);
    return storage;
  }

  /** New pooled storage. For the family modules. */
  alloc(op: string, dtype: DType, length: number, kernelOutput = true): GpuStorage {
    this.batch.open();
    const buffer = this.bufferPool.acquire(length * storageBytes(dtype), op, kernelOutput);
    const storage = new GpuStorage(this, buffer, length, dtype);
    this.#owners.set(buffer, storage);
    this.recorder?.allocated(buffer, storage);
    return storage;
  }

  /**
   * A persistent storage buffer of at least `words` 32-bit words for `purpose` (one per purpose,
   * replaced by a larger one when too small; WebGPU zeroes new buffers). Kernels that keep
   * cross-workgroup state there (tickets, published partials) leave it as they found it, or the
   * caller clears it before each use. For the family modules.
   */
  scratch(purpose: string, words: number): GPUBuffer {
    let buffer = this.#scratch.get(purpose);
    if (!buffer || buffer.size < words * 4) {
      // The old buffer is dropped, not destroyed: commands already recorded may still use it.
      const size = Math.max(words * 4, 2 * (buffer?.size ?? 0), 4096);
      buffer = this.device.createBuffer({
        label: `gyre ${purpose}`,
        size: Math.ceil(size / 16) * 16,
        usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC,
      });
      this.#scratch.set(purpose, buffer);
    }
    return buffer;
  }
  #scratch = new Map<string, GPUBuffer>();

  /** The purpose a scratch buffer serves, if it is one (for `jit`'s capture). */
  scratchPurpose(buffer: GPUBuffer): string | undefined {
    for (const [purpose, b] of this.#scratch) if (b === buffer) return purpose;
    return undefined;
  }

  /**
   * A slot where a kernel reports an index outside its axis (words 2k and 2k + 1 of the
   * "index-checks" scratch: a flag and the index), read with the next read-back, which throws an
   * IndexError naming `op` if the flag is set (flag 2: ids out of the order `order` names). Past {@link INDEX_CHECK_SLOTS} checks between two
   * reads the last slot is shared. For the family modules.
   */
  indexCheck(
    op: string,
    argument: string,
    expected: string,
    order?: string,
  ): { buffer: GPUBuffer; slot: number } {
    const buffer = this.scratch("index-checks", 2 * INDEX_CHECK_SLOTS);
    const check: IndexCheck = { op, argument, expected, ...(order ? { order } : {}) };
    this.recorder?.indexChecked?.(check);
    if (this.#indexChecks.length < INDEX_CHECK_SLOTS) {
      this.#indexChecks.push(check);
    } else this.#indexChecks[INDEX_CHECK_SLOTS - 1].op += ` (or ${op})`;
    return { buffer, slot: Math.min(this.#indexChecks.length, INDEX_CHECK_SLOTS) - 1 };
  }
  #indexChecks: IndexCheck[] = [];

  /** Workgroup grid for `invocations`, folded into two dimensions past the per-dimension limit. */
  grid(invocations: number, workgroupSize: number): [number, number] {
    const groups = Math.max(1, Math.ceil(invocations / workgroupSize));
    const maxX = Math.min(this.caps.limits.maxComputeWorkgroupsPerDimension, 32768);
    const x = Math.min(groups, maxX);
    return [x, Math.ceil(groups / x)];
  }

  /** Records a dispatch (timed when a profiler is recording). For the family modules. */
  dispatch(
    kernel: string,
    pipeline: Kernel,
    buffers: GPUBuffer[],
    uniforms: Uint32Array,
    grid: [number, number],
  ): void {
    if (kernelObservers.size) observeKernel("gpu", kernel);
    this.recorder?.dispatched({ label: kernel, kernel: pipeline, buffers, uniforms, grid });
    this.batch.dispatch(pipeline, buffers, uniforms, grid, this.profiler?.(kernel));
  }

  /**
   * Records a dispatch that zeroes the first `words` u32 words of `buffer` (look-back states,
   * histograms: scratch a family's kernels read before they write it). For the family modules.
   */
  zero(kernel: string, buffer: GPUBuffer, words: number): void {
    const pipeline = this.pipeline("zero", 1, () => ZERO_WGSL);
    this.dispatch(
      kernel,
      pipeline,
      [buffer],
      Uint32Array.of(words, 0, 0, 0),
      this.grid(words, 256),
    );
  }

  upload(dtype: DType, data: TypedArray): Storage {
    this.checkLive("tensor", [dtype]);
    // Written by the queue before the pending batch runs: never a buffer that batch still reads.
    const storage = this.alloc("tensor", dtype, data.length, false);
    this.recorder?.uploaded(storage.buffer);
    if (data.length === 0) return storage;
    let bytes: ArrayBufferView;
    if (dtype === "float16") {
      const half = new Uint16Array(data.length + (data.length & 1));
      for (let i = 0; i < data.length; i++) half[i] = f32ToF16Bits(data[i]);
      bytes = half;
    } else if (dtype === "bool") {
      bytes = Uint32Array.from(data as Uint8Array, (v) => (v ? 1 : 0));
    } else bytes = data;
    this.device.queue.writeBuffer(storage.buffer, 0, bytes as BufferSource);
    return storage;
  }

  checkAllocation(op: string, dtype: DType, length: number): void {
    this.checkLive(op, [dtype]);
    this.bufferPool.check(length * storageBytes(dtype), op);
  }

  allocate(op: string, dtype: DType, length: number): Storage {
    this.checkLive(op, [dtype]);
    return this.alloc(op, dtype, length);
  }

  async read(views: readonly View[]): Promise<TypedArray[]> {
    this.checkLive("read", []);
    const regions: { buffer: GPUBuffer; byteOffset: number; bytes: number; temp?: GpuStorage }[] =
      [];
    let total = 0;
    for (const view of views) {
      const n = sizeOf(view.shape);
      const elementBytes = storageBytes(view.dtype);
      let storage = view.storage as GpuStorage;
      let offset = view.offset;
      let temp: GpuStorage | undefined;
      if (n > 0 && (!isContiguous(view.shape, view.strides) || (offset * elementBytes) % 4 !== 0)) {
        temp = storage = this.evaluate({
          op: "read",
          expr: E.input(0, view.dtype),
          inputs: [view],
          shape: view.shape,
          overrides: NO_OVERRIDES,
        }) as GpuStorage;
        offset = 0;
      }
      const bytes = Math.ceil((n * elementBytes) / 4) * 4;
      regions.push({ buffer: storage.buffer, byteOffset: offset * elementBytes, bytes, temp });
      total += Math.ceil(bytes / 16) * 16;
    }
    // The index checks of the work since the last read ride along (see `indexCheck`).
    const checks = this.#indexChecks;
    this.#indexChecks = [];
    if (checks.length) {
      const bytes = 8 * checks.length;
      regions.push({ buffer: this.scratch("index-checks", 0), byteOffset: 0, bytes });
      total += Math.ceil(bytes / 16) * 16;
    }
    if (total === 0) {
      this.flush();
      await this.batch.checkErrors("read");
      return views.map((v) => hostArray(v.dtype, 0));
    }
    const staging = this.device.createBuffer({
      label: "gyre read-back",
      size: total,
      usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
    const encoder = this.batch.encoderForCopies();
    let at = 0;
    const starts: number[] = [];
    for (const r of regions) {
      starts.push(at);
      if (r.bytes) encoder.copyBufferToBuffer(r.buffer, r.byteOffset, staging, at, r.bytes);
      at += Math.ceil(r.bytes / 16) * 16;
    }
    for (const r of regions) if (r.temp) this.free(r.temp);
    this.batch.submit();
    try {
      await staging.mapAsync(GPUMapMode.READ);
      await this.batch.checkErrors("read");
      const mapped = staging.getMappedRange();
      if (checks.length) this.#throwIndexErrors(checks, mapped, starts[views.length]);
      return views.map((view, k) => toHost(view.dtype, mapped, starts[k], sizeOf(view.shape)));
    } finally {
      staging.destroy();
    }
  }

  /** Clears the reported slots and throws for the first one set. */
  #throwIndexErrors(
    checks: IndexCheck[],
    mapped: ArrayBuffer,
    byteOffset: number,
  ): void {
    const words = new Int32Array(mapped, byteOffset, 2 * checks.length);
    const bad = checks.findIndex((_, k) => words[2 * k] !== 0);
    if (bad < 0) return;
    // Written before any later work runs (the queue orders it before the next submission).
    this.device.queue.writeBuffer(
      this.scratch("index-checks", 0),
      0,
      new Uint32Array(2 * checks.length),
    );
    const { op, argument, expected, order } = checks[bad];
    const raw = words[2 * bad + 1];
    throw words[2 * bad] === 2 && order
      ? new IndexError({ op, argument, expected: order, received: `${raw} after a larger id` })
      : new IndexError({ op, argument, expected, received: `index ${raw}` });
  }

  free(storage: Storage): void {
    this.bufferPool.release((storage as GpuStorage).buffer);
  }

  flush(): void {
    this.batch.submit();
  }

  stats(): MemoryStats {
    const s = this.bufferPool.stats();
    return { liveBuffers: s.liveBuffers, liveBytes: s.liveBytes };
  }
}

/**
 * The source with `enable f16;` first where its code (comments aside) names the f16 type: a fused
 * expression can round to float16 inside a kernel whose inputs and output are not float16 (a
 * cast to float16 and back in a reduction's prologue), which a family's own test misses.
 */
function withHalfEnabled(source: string): string {
  if (source.includes("enable f16;")) return source;
  return /\bf16\b/.test(source.replace(/\/\/.*$/gm, "")) ? `enable f16;\n${source}` : source;
}

/** Copies mapped bytes into the host array `data()` returns (float16 widened, bool narrowed). */
function toHost(dtype: DType, mapped: ArrayBuffer, byteOffset: number, n: number): TypedArray {
  const out = hostArray(dtype, n);
  switch (dtype) {
    case "float16": {
      const half = new Uint16Array(mapped, byteOffset, n);
      for (let i = 0; i < n; i++) out[i] = f16BitsToF32(half[i]);
      break;
    }
    case "bool": {
      const words = new Uint32Array(mapped, byteOffset, n);
      for (let i = 0; i < n; i++) out[i] = words[i] ? 1 : 0;
      break;
    }
    default:
      out.set(new (out.constructor as Float32ArrayConstructor)(mapped, byteOffset, n));
  }
  return out;
}
