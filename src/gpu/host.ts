/**
 * The GPU device: storage in pooled WebGPU buffers, elementwise expressions and reductions compiled
 * to WGSL and cached by key, all dispatches batched into one submission, and read-backs of any
 * number of tensors through one staging buffer and one `mapAsync`.
 * @module
 */
import type { PoolJob, PoolResult } from "../contract/pool.ts";
import type { CaptureSession } from "../contract/capture.ts";
import type { MatmulJob, MatmulResult } from "../contract/matmul.ts";
import type { RowsJob, RowsResult } from "../contract/rows.ts";
import type { ScanJob, ScanResult } from "../contract/scan.ts";
import {
  type Backend,
  type FusedSource,
  kernelObservers,
  type MemoryStats,
  observeKernel,
  observePlan,
  type ReduceOp,
  type Storage,
  type View,
} from "../contract/backend.ts";
import { batchRun, isContiguous, type Shape, sizeOf } from "../core/shape.ts";
import {
  type DType,
  f16BitsToF32,
  f32ToF16Bits,
  hostArray,
  storageBytes,
  type TypedArray,
} from "../core/dtype.ts";
import { DTypeError, GpuError } from "../core/errors.ts";
import { E, type Expr } from "../ir/expr.ts";
import { planElementwise, planReduce, planTranspose } from "../plans/mod.ts";
import { NO_OVERRIDES, type PlanOverrides } from "../plans/overrides.ts";
import {
  generateTranspose,
  TRANSPOSE_THREADS,
  transposeGroups,
  transposeKey,
  type TransposeSpec,
  type TransposeUniforms,
  transposeUniforms,
} from "./_codegen_transpose.ts";
import { CommandBatch, type Kernel, type TimestampSlot } from "./batch.ts";
import {
  constantWords,
  elementwiseKey,
  type ElementwiseSpec,
  elementwiseUniforms,
  generateElementwise,
  type InputMode,
  inputMode,
  TILE_SIDE,
  vec4Layout,
} from "./_codegen_elementwise.ts";
import {
  generateReduce,
  reduceEpilogue,
  reduceKey,
  type ReduceSpec,
  reduceUniforms,
  stateType,
} from "./_codegen_reduce.ts";
import type { AcquiredDevice, DeviceCaps } from "./device.ts";
import { BufferPool } from "./buffer_pool.ts";

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

/** What a trace sees of the GPU backend. */
export interface DispatchRecorder {
  allocated(buffer: GPUBuffer, storage: GpuStorage): void;
  uploaded(buffer: GPUBuffer): void;
  dispatched(d: RecordedDispatch): void;
}

/** Receives the timestamp slot of each dispatch while a benchmark profiles. */
export type DispatchProfiler = (kernel: string) => TimestampSlot | undefined;

/**
 * A target view of `shape` as rows: runs of `length` contiguous elements (its trailing axes, as
 * far as they are contiguous), `stride` apart (the leading axes, spaced evenly); null when it is
 * not. A whole contiguous block is one run (`length` = its size).
 */
function targetRows(
  shape: Shape,
  strides: readonly number[],
): { length: number; stride: number } | null {
  let d = shape.length - 1;
  let length = 1;
  while (d >= 0 && (shape[d] === 1 || strides[d] === length)) length *= shape[d--];
  if (d < 0) return { length, stride: length };
  const stride = strides[d];
  let span = 1;
  while (d >= 0 && (shape[d] === 1 || strides[d] === stride * span)) span *= shape[d--];
  return d < 0 && stride >= length ? { length, stride } : null;
}

/** The GPU device's machinery (buffers, pipelines, dispatch), elementwise and reduce kernels. */
export abstract class GpuHost implements Backend {
  /** Family entries, each implemented beside its kernels (see backend.ts). */
  abstract rows(job: RowsJob): RowsResult | null;
  abstract scan(job: ScanJob): ScanResult;
  abstract pool(job: PoolJob): PoolResult;
  abstract matmul(job: MatmulJob): MatmulResult | null;
  abstract capture(inputs: readonly View[]): CaptureSession | null;
  readonly name = "gpu" as const;
  readonly device: GPUDevice;
  readonly caps: DeviceCaps;
  readonly bufferPool: BufferPool;
  readonly batch: CommandBatch;
  /** Set by `device.lost`; every later call throws. */
  lostReason: string | null = null;
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

  /** Throws when the device is lost or a dtype is unsupported. For op modules. */
  _check(op: string, dtypes: DType[]): void {
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
   * state), then a uniform. For op modules.
   */
  _pipeline(key: string, storageCount: number, source: () => string, writable = 1): Kernel {
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
  _adopt(buffer: GPUBuffer, length: number, dtype: DType): GpuStorage {
    const storage = new GpuStorage(this, buffer, length, dtype);
    this.#owners.set(buffer, storage);
    return storage;
  }

  /** New pooled storage. For op modules. */
  _alloc(op: string, dtype: DType, length: number, kernelOutput = true): GpuStorage {
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
   * caller clears it before each use. For op modules.
   */
  _scratch(purpose: string, words: number): GPUBuffer {
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

  /** Workgroup grid for `invocations`, folded into two dimensions past the per-dimension limit. */
  _grid(invocations: number, workgroupSize: number): [number, number] {
    const groups = Math.max(1, Math.ceil(invocations / workgroupSize));
    const maxX = Math.min(this.caps.limits.maxComputeWorkgroupsPerDimension, 32768);
    const x = Math.min(groups, maxX);
    return [x, Math.ceil(groups / x)];
  }

  /** Records a dispatch (timed when a profiler is recording). For op modules. */
  _dispatch(
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

  upload(dtype: DType, data: TypedArray): Storage {
    this._check("tensor", [dtype]);
    // Written by the queue before the pending batch runs: never a buffer that batch still reads.
    const storage = this._alloc("tensor", dtype, data.length, false);
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
    this._check(op, [dtype]);
    this.bufferPool.check(length * storageBytes(dtype), op);
  }

  allocate(op: string, dtype: DType, length: number): Storage {
    this._check(op, [dtype]);
    return this._alloc(op, dtype, length);
  }

  evaluate(
    op: string,
    expr: Expr,
    inputs: readonly View[],
    shape: Shape,
    target?: View,
    overrides: Readonly<PlanOverrides> = NO_OVERRIDES,
  ): Storage {
    this._check(op, [expr.dtype, ...inputs.map((v) => v.dtype)]);
    const n = sizeOf(shape);
    const out = (target?.storage as GpuStorage | undefined) ?? this._alloc(op, expr.dtype, n);
    if (n === 0) return out;
    // Transposed matrices among the operands: the tiled kernel reads them through workgroup memory
    // where the plan takes it.
    const transposedViews = inputs.map(transposedCopy);
    const transposedOperands = transposedViews.filter((c) => c !== null).length;
    const modes: InputMode[] = inputs.map((v) => inputMode(shape, v.strides));
    // A target made of rows (a concat part: runs of contiguous elements at a fixed distance) is
    // written by rows, or contiguously where it is one block; by vec4 stores where every run
    // starts and ends on a vector. Other targets go through their strides.
    const runs = target ? targetRows(shape, target.strides) : null;
    const blockTarget = runs !== null && runs.length === n;
    const vec4Target = !target ||
      (runs !== null && [target.offset, runs.length, runs.stride].every((x) => x % 4 === 0));
    const vec4Eligible = vec4Target &&
      vec4Layout(shape, inputs.map((v, k) => ({ mode: modes[k], offset: v.offset })));
    // A plain copy of a transposed matrix (a clone of `x.transpose()`).
    const copy = !target && expr.kind === "input" && inputs[0].dtype === expr.dtype
      ? transposedCopy(inputs[0])
      : null;
    const choice = observePlan(
      "gpu",
      "elementwise",
      op,
      planElementwise(
        this.caps,
        {
          elements: n,
          vec4Eligible,
          transposedCopy: copy !== null,
          transposedOperands: target ? 0 : transposedOperands,
          elementBytes: storageBytes(expr.dtype),
        },
        overrides.elementwise,
      ),
      overrides.elementwise,
    );
    if (choice.variant === "transpose" && copy) {
      this._transposeCopy(op, (inputs[0].storage as GpuStorage).buffer, out.buffer, copy);
      return out;
    }
    const tiled = choice.variant === "tiled";
    const spec: ElementwiseSpec = {
      expr,
      inputs: inputs.map((v, k) => ({
        dtype: v.dtype,
        mode: tiled && transposedViews[k] ? "transposed" : modes[k],
      })),
      outDtype: expr.dtype,
      rank: shape.length,
      output: !target ? "fresh" : runs === null ? "strided" : blockTarget ? "block" : "rows",
      vec4: choice.variant === "vec4",
      tiled,
      workgroupSize: choice.workgroupSize,
    };
    const pipeline = this._pipeline(
      elementwiseKey(spec),
      inputs.length + 1,
      () => generateElementwise(spec),
    );
    const operands = target ? [...inputs, target] : inputs;
    const uniforms = elementwiseUniforms(
      spec,
      n,
      operands.map((v) => v.offset),
      shape,
      // A rows target's stride slot holds its run length and distance.
      operands.map((
        v,
      ) => (v === target && runs && spec.output === "rows"
        ? [runs.length, runs.stride]
        : v.strides)
      ),
    );
    // A tiled kernel: a workgroup per tile of each matrix.
    const [rows, columns] = [shape[shape.length - 2], shape[shape.length - 1]];
    const invocations = tiled
      ? (n / (rows * columns)) * Math.ceil(rows / TILE_SIDE) * Math.ceil(columns / TILE_SIDE) *
        spec.workgroupSize
      : spec.vec4
      ? Math.ceil(n / 4)
      : n;
    this._dispatch(
      op,
      pipeline,
      [...inputs.map((v) => (v.storage as GpuStorage).buffer), out.buffer],
      uniforms,
      this._grid(invocations, spec.workgroupSize),
    );
    return out;
  }

  /**
   * Records the tiled transposing copy (./_codegen_transpose.ts) of `copy`'s matrices of the
   * source's dtype from `source` into `target` (at least `batches * rows * columns` elements) as
   * kernel `label`, in the plan's form and tile unless `spec` says otherwise. For op modules.
   */
  _transposeCopy(
    label: string,
    source: GPUBuffer,
    target: GPUBuffer,
    copy: TransposeUniforms & { dtype: DType },
    spec: TransposeSpec = planTranspose(copy.dtype, copy),
  ): void {
    const pipeline = this._pipeline(transposeKey(spec), 2, () => generateTranspose(spec));
    this._dispatch(
      label,
      pipeline,
      [source, target],
      transposeUniforms(spec, copy),
      this._grid(transposeGroups(spec, copy) * TRANSPOSE_THREADS, TRANSPOSE_THREADS),
    );
  }

  reduce(
    op: string,
    reduction: ReduceOp,
    source: View | FusedSource,
    axes: readonly number[],
    outDtype: DType,
    overrides: Readonly<PlanOverrides> = NO_OVERRIDES,
  ): Storage {
    return this.#reduce(op, reduction, source, axes, outDtype, undefined, overrides)!;
  }

  reduceFused(
    op: string,
    reduction: ReduceOp,
    source: View | FusedSource,
    axes: readonly number[],
    outDtype: DType,
    epilogue: { expr: Expr; inputs: View[] },
    overrides: Readonly<PlanOverrides> = NO_OVERRIDES,
  ): Storage | null {
    return this.#reduce(op, reduction, source, axes, outDtype, epilogue, overrides);
  }

  /** Both reductions: null where the epilogue cannot run in the kernel (see `reduceEpilogue`). */
  #reduce(
    op: string,
    reduction: ReduceOp,
    source: View | FusedSource,
    axes: readonly number[],
    outDtype: DType,
    fused: { expr: Expr; inputs: View[] } | undefined,
    overrides: Readonly<PlanOverrides>,
  ): GpuStorage | null {
    // Constant slots: the prologue's, then the epilogue's; every pass carries them all.
    const prologueConstants = "expr" in source ? constantWords(source.expr) : [];
    const constants = fused
      ? [...prologueConstants, ...constantWords(fused.expr)]
      : prologueConstants;
    const epilogue = fused
      ? reduceEpilogue(fused.expr, fused.inputs, outDtype, prologueConstants.length)
      : undefined;
    if (epilogue === null) return null;
    // The kernel stores the epilogue's dtype (a cast may end it) or the reduction's.
    const storedDtype = epilogue?.dtype ?? outDtype;
    const epilogueBuffers = (fused?.inputs ?? []).map((v) => (v.storage as GpuStorage).buffer);
    // A fused source is an elementwise expression over views of one shape: its first view plays
    // the plain input's part (shape, layout), the others ride along with their own strides.
    const views = "expr" in source ? source.inputs : [source];
    const input = views[0];
    const prologue = "expr" in source
      ? { expr: source.expr, inputs: views.map((v) => v.dtype) }
      : undefined;
    const valueDtype = prologue ? source.dtype : input.dtype;
    this._check(op, [
      ...views.map((v) => v.dtype),
      outDtype,
      storedDtype,
      ...(fused?.inputs ?? []).map((v) => v.dtype),
    ]);
    const kept = input.shape.map((_, i) => i).filter((i) => !axes.includes(i));
    const split = (v: View) => ({
      outerStrides: kept.map((i) => v.strides[i]),
      innerStrides: axes.map((i) => v.strides[i]),
    });
    const outer = { shape: kept.map((i) => input.shape[i]), strides: split(input).outerStrides };
    const inner = { shape: axes.map((i) => input.shape[i]), strides: split(input).innerStrides };
    const rows = sizeOf(outer.shape);
    const rowLength = sizeOf(inner.shape);
    const out = this._alloc(op, storedDtype, rows);
    if (rows === 0) return out;
    // Rows of contiguous inputs with the reduced axes last are plain ranges.
    const lastAxes = axes.every((a, i) => a === input.shape.length - axes.length + i);
    const contiguous = lastAxes && views.every((v) => isContiguous(v.shape, v.strides));
    const aligned = contiguous && rowLength % 4 === 0 && views.every((v) => v.offset % 4 === 0);
    // Rows adjacent in memory: the innermost kept axis has stride 1 in every input.
    const rowsAdjacent = kept.length > 0 && !lastAxes &&
      views.every((v) => v.strides[kept[kept.length - 1]] === 1);
    const choice = observePlan(
      "gpu",
      "reduce",
      op,
      planReduce(this.caps, { rows, rowLength, aligned, rowsAdjacent }, overrides.reduce),
      overrides.reduce,
    );
    // Arg reductions pass (value bits, index) pairs between their two passes, stateful ones their
    // state vectors: `words` 32-bit words per partial.
    const arg = reduction === "argmax" || reduction === "argmin";
    const state = stateType(reduction);
    const carried = arg || state !== undefined;
    const words = state === "vec4<f32>" ? 4 : carried ? 2 : 1;
    const accDtype: DType = arg
      ? "uint32"
      : state
      ? "float32"
      : outDtype === "float16"
      ? "float32"
      : outDtype;
    const run = (
      spec: ReduceSpec,
      buffers: GPUBuffer[],
      chunks: number,
      uniforms: Uint32Array,
    ) => {
      // The last-workgroup variant also writes its scratch states (bound before the output).
      const writable = spec.lastWorkgroup ? 2 : 1;
      const pipeline = this._pipeline(
        reduceKey(spec),
        buffers.length,
        () => generateReduce(spec),
        writable,
      );
      const invocations = spec.variant === "thread"
        ? rows * chunks
        : rows * chunks * spec.workgroupSize;
      this._dispatch(op, pipeline, buffers, uniforms, this._grid(invocations, spec.workgroupSize));
    };
    const first: ReduceSpec = {
      op: reduction,
      inDtype: input.dtype,
      outDtype: choice.chunks > 1 && !carried ? accDtype : outDtype,
      valueDtype: arg ? valueDtype : undefined,
      pairsOut: carried && choice.chunks > 1,
      vec4: choice.vec4 && !(arg && valueDtype === "bool"),
      prologue,
      mode: contiguous ? "contiguous" : "strided",
      outerRank: outer.shape.length,
      innerRank: inner.shape.length,
      variant: choice.variant,
      subgroups: choice.subgroups,
      workgroupSize: choice.workgroupSize,
    };
    // vec4 chunks start on vector boundaries.
    const chunkLength = choice.vec4
      ? Math.ceil(rowLength / choice.chunks / 4) * 4
      : Math.ceil(rowLength / choice.chunks);
    const sources = views.map((v) => (v.storage as GpuStorage).buffer);
    const extra = views.slice(1).map((v) => ({ offset: v.offset, ...split(v) }));
    const firstUniforms = (chunks: number) =>
      reduceUniforms(
        rows,
        rowLength,
        chunks,
        chunkLength,
        input.offset,
        outer,
        inner,
        extra,
        constants,
      );
    const lastWorkgroup = choice.chunks > 1 && choice.combineChunks === "last-workgroup" &&
      choice.variant === "workgroup";
    const bindings = sources.length + epilogueBuffers.length + (lastWorkgroup ? 2 : 1);
    if (epilogue && bindings > this.caps.limits.maxStorageBuffersPerShaderStage) {
      this.free(out);
      return null;
    }
    if (choice.chunks === 1) {
      run(
        { ...first, epilogue },
        [...sources, ...epilogueBuffers, out.buffer],
        1,
        firstUniforms(1),
      );
      return out;
    }
    if (lastWorkgroup) {
      // One dispatch: the row's last workgroup combines the published partials (a counter per
      // row, then a tagged word per partial word: 64-bit atomics where the choice takes them,
      // else pairs of 32-bit ones; see the reduce generator). Sizes are in 32-bit words.
      const wideStates = choice.wideStates;
      const states = this._scratch(
        "reduce partials",
        (wideStates ? 2 : 1) * rows + rows * choice.chunks * words * 2,
      );
      run(
        { ...first, outDtype, pairsOut: false, lastWorkgroup: true, wideStates, epilogue },
        [...sources, ...epilogueBuffers, states, out.buffer],
        choice.chunks,
        firstUniforms(choice.chunks),
      );
      return out;
    }
    const partials = this._alloc(op, accDtype, rows * choice.chunks * words);
    run(first, [...sources, partials.buffer], choice.chunks, firstUniforms(choice.chunks));
    const second: ReduceSpec = {
      ...first,
      inDtype: accDtype,
      outDtype,
      valueDtype: arg ? (valueDtype === "float16" ? "float32" : valueDtype) : undefined,
      pairsIn: carried,
      pairsOut: false,
      vec4: false,
      prologue: undefined,
      mode: "contiguous",
      outerRank: 1,
      innerRank: 1,
    };
    const flat = { shape: [rows], strides: [choice.chunks] };
    run(
      { ...second, epilogue },
      [partials.buffer, ...epilogueBuffers, out.buffer],
      1,
      reduceUniforms(
        rows,
        choice.chunks,
        1,
        choice.chunks,
        0,
        flat,
        { shape: [choice.chunks], strides: [1] },
        [],
        constants,
      ),
    );
    this.free(partials);
    return out;
  }

  async read(views: readonly View[]): Promise<TypedArray[]> {
    this._check("read", []);
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
        temp = storage = this.evaluate(
          "read",
          E.input(0, view.dtype),
          [view],
          view.shape,
        ) as GpuStorage;
        offset = 0;
      }
      const bytes = Math.ceil((n * elementBytes) / 4) * 4;
      regions.push({ buffer: storage.buffer, byteOffset: offset * elementBytes, bytes, temp });
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
      return views.map((view, k) => toHost(view.dtype, mapped, starts[k], sizeOf(view.shape)));
    } finally {
      staging.destroy();
    }
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

/**
 * The copy of a view whose last two axes read a contiguous matrix transposed (stride 1 down its
 * rows, a stride of 2 or more along them), both at least a tile's side (32), with batch axes that
 * form one run (or are all broadcast), as the tiled transposing copy's parameters: the source's
 * rows are the view's columns. Null for any other view.
 */
function transposedCopy(view: View): (TransposeUniforms & { dtype: DType }) | null {
  const rank = view.shape.length;
  if (rank < 2) return null;
  const [rows, columns] = [view.shape[rank - 2], view.shape[rank - 1]];
  const [rowStride, columnStride] = [view.strides[rank - 2], view.strides[rank - 1]];
  if (rowStride !== 1 || columnStride < 2 || Math.min(rows, columns) < 32) return null;
  // Every output matrix is written: batch axes all broadcast, or none (one run).
  const run = batchRun(view.shape.slice(0, -2), view.strides.slice(0, -2));
  if (!run || (run.count > 1 && run.broadcast > 1)) return null;
  return {
    dtype: view.dtype,
    rows: columns,
    columns: rows,
    batches: run.count * run.broadcast,
    offset: view.offset,
    rowStride: columnStride,
    columnStride: 1,
    batchStride: run.stride,
  };
}
