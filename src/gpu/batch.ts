/**
 * Records many dispatches into one command encoder and one open compute pass, and submits them
 * together: one `queue.submit` per batch instead of one per op. Per-dispatch parameters go into
 * a CPU-side uniform arena written with one `writeBuffer` just before the submit.
 * Every GPU call in a batch runs inside WebGPU error scopes; their results are checked at the
 * next read-back, where a failure becomes a typed {@link GpuError}.
 * @module
 */
import { GpuError, OutOfMemoryError } from "../core/errors.ts";
import type { BufferPool } from "./buffer_pool.ts";

/** Uniform slots are aligned to this many bytes (WebGPU's minimum uniform offset alignment). */
const UNIFORM_ALIGN = 256;
/** One uniform arena chunk: 4096 slots of 256 bytes. */
const CHUNK_BYTES = 1 << 20;
/**
 * Every uniform binding spans this many bytes from its slot, whatever its Params struct needs:
 * wgpu checks a binding's size against the Params size of the pipeline set before it in the
 * same pass when both share a layout, so a 96-byte elementwise block after a 160-byte reduce
 * block failed validation, and so did a 256-byte slot after a 304-byte reduce (3 fused prologue
 * inputs). Every Params struct is far smaller (a few hundred bytes; `#uniformSlot` checks), and
 * each chunk's buffer extends this far past its last slot.
 */
const UNIFORM_BINDING_BYTES = 4096;
/**
 * Submit when a batch holds this many dispatches (the default of `Batch.submitEvery`): early
 * enough that the GPU starts on a long stream of ops while the host records the rest (with
 * one submit at the end, recording and execution would not overlap), rarely enough that the
 * submit's own cost (tens of microseconds in Deno) stays small per dispatch.
 */
const SUBMIT_EVERY = 64;
/** ...or when this many bytes of released buffers wait on it. */
const MAX_DEFERRED_BYTES = 256 << 20;

interface UniformChunk {
  gpu: GPUBuffer;
  cpu: Uint8Array<ArrayBuffer>;
  used: number;
}

/** A compiled kernel and the bind group layout its dispatches use. */
export interface Kernel {
  pipeline: GPUComputePipeline;
  layout: GPUBindGroupLayout;
}

/** Timestamp writes for one dispatch, used by benchmarks. */
export interface TimestampSlot {
  querySet: GPUQuerySet;
  begin: number;
  end: number;
}

/** The open batch of one device. */
export class CommandBatch {
  #device: GPUDevice;
  #pool: BufferPool;
  #encoder: GPUCommandEncoder | null = null;
  #pass: GPUComputePassEncoder | null = null;
  #chunks: UniformChunk[] = [];
  #chunk = 0;
  #dispatches = 0;
  #pendingErrors: Promise<GPUError | null>[] = [];
  /** Explicit layouts by storage-binding count: read-only inputs, one output, a dynamic uniform. */
  #layouts = new Map<number, { bindGroup: GPUBindGroupLayout; pipeline: GPUPipelineLayout }>();
  /**
   * Bind groups by the identity of their buffers. With the uniform bound at a dynamic offset,
   * repeated work over pooled buffers (loops, benchmarks, training steps) reuses them:
   * creating one costs several microseconds in Deno, more than recording the dispatch.
   */
  #bindGroups = new Map<string, GPUBindGroup>();
  #bufferIds = new WeakMap<GPUBuffer, number>();
  #nextBufferId = 0;
  /** Dispatches recorded since the batch was created (for tests and the explain tool). */
  totalDispatches = 0;
  /** Submits made (for tests). */
  totalSubmits = 0;
  /**
   * Dispatches after which a batch is submitted without waiting for a read-back or a flush
   * (benchmarks vary it: `runtime().gpu!.batch.submitEvery = 2048`).
   */
  submitEvery: number = SUBMIT_EVERY;

  constructor(device: GPUDevice, pool: BufferPool) {
    this.#device = device;
    this.#pool = pool;
  }

  /** Opens the batch (encoder and error scopes) if it is not open. */
  open(): GPUCommandEncoder {
    if (!this.#encoder) {
      this.#device.pushErrorScope("out-of-memory");
      this.#device.pushErrorScope("validation");
      this.#encoder = this.#device.createCommandEncoder();
    }
    return this.#encoder;
  }

  /** Compiles a kernel whose bindings are `storageCount - 1` inputs, an output and a uniform. */
  compile(code: string, storageCount: number, writable = 1): Kernel {
    const layoutKey = storageCount * 16 + writable;
    let layouts = this.#layouts.get(layoutKey);
    if (!layouts) {
      const entries: GPUBindGroupLayoutEntry[] = [];
      for (let b = 0; b < storageCount; b++) {
        entries.push({
          binding: b,
          visibility: GPUShaderStage.COMPUTE,
          buffer: { type: b >= storageCount - writable ? "storage" : "read-only-storage" },
        });
      }
      entries.push({
        binding: storageCount,
        visibility: GPUShaderStage.COMPUTE,
        buffer: { type: "uniform", hasDynamicOffset: true },
      });
      const bindGroup = this.#device.createBindGroupLayout({ entries });
      layouts = {
        bindGroup,
        pipeline: this.#device.createPipelineLayout({ bindGroupLayouts: [bindGroup] }),
      };
      this.#layouts.set(layoutKey, layouts);
    }
    const module = this.#device.createShaderModule({ code });
    const pipeline = this.#device.createComputePipeline({
      layout: layouts.pipeline,
      compute: { module, entryPoint: "main" },
    });
    return { pipeline, layout: layouts.bindGroup };
  }

  #layoutIds = new WeakMap<GPUBindGroupLayout, number>();
  #layoutId(layout: GPUBindGroupLayout): number {
    let id = this.#layoutIds.get(layout);
    if (id === undefined) this.#layoutIds.set(layout, id = this.#nextBufferId++);
    return id;
  }

  #id(buffer: GPUBuffer): number {
    let id = this.#bufferIds.get(buffer);
    if (id === undefined) this.#bufferIds.set(buffer, id = this.#nextBufferId++);
    return id;
  }

  /** Forgets cached bind groups (call before destroying buffers they may hold). */
  forgetBindGroups(): void {
    this.#bindGroups.clear();
  }

  /** Records one dispatch. `uniforms` is copied into the arena. */
  dispatch(
    kernel: Kernel,
    buffers: GPUBuffer[],
    uniforms: Uint32Array,
    groups: readonly [number, number],
    timestamp?: TimestampSlot,
  ): void {
    const encoder = this.open();
    const slot = this.#uniformSlot(uniforms);
    // The layout is part of the key: one set of buffers can be bound under several layouts.
    let key = `${this.#layoutId(kernel.layout)}:${this.#id(slot.buffer)}`;
    for (const b of buffers) key += `,${this.#id(b)}`;
    let bindGroup = this.#bindGroups.get(key);
    if (!bindGroup) {
      const entries: GPUBindGroupEntry[] = buffers.map((buffer, binding) => ({
        binding,
        resource: { buffer },
      }));
      entries.push({
        binding: buffers.length,
        resource: { buffer: slot.buffer, offset: 0, size: UNIFORM_BINDING_BYTES },
      });
      bindGroup = this.#device.createBindGroup({ layout: kernel.layout, entries });
      if (this.#bindGroups.size >= 16384) this.#bindGroups.clear();
      this.#bindGroups.set(key, bindGroup);
    }
    const pipeline = kernel.pipeline;
    let pass = this.#pass;
    if (this.#group && !pass) {
      // The first dispatch of a timed group opens the pass its timestamps bracket.
      pass = this.#pass = encoder.beginComputePass({
        timestampWrites: {
          querySet: this.#group.querySet,
          beginningOfPassWriteIndex: this.#group.begin,
          endOfPassWriteIndex: this.#group.end,
        },
      });
    } else if (timestamp) {
      pass?.end();
      this.#pass = null;
      pass = encoder.beginComputePass({
        timestampWrites: {
          querySet: timestamp.querySet,
          beginningOfPassWriteIndex: timestamp.begin,
          endOfPassWriteIndex: timestamp.end,
        },
      });
    } else if (!pass) {
      pass = this.#pass = encoder.beginComputePass();
    }
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, bindGroup, [slot.offset]);
    pass.dispatchWorkgroups(groups[0], groups[1]);
    if (timestamp) pass.end();
    this.#dispatches++;
    this.totalDispatches++;
    if (
      !this.#group &&
      (this.#dispatches >= this.submitEvery || this.#pool.deferredBytes >= MAX_DEFERRED_BYTES)
    ) {
      this.submit();
    }
  }

  #group: TimestampSlot | null = null;
  #afterSubmit: (() => void)[] = [];

  /** Whether a timed group is open. */
  get inTimedGroup(): boolean {
    return this.#group !== null;
  }

  /**
   * Runs `fn` once the work recorded so far is submitted (to map a buffer that work writes: a
   * buffer may be mapped only after the commands using it are submitted).
   */
  afterSubmit(fn: () => void): void {
    this.#afterSubmit.push(fn);
  }

  /**
   * Times a group of dispatches as one: every dispatch until `endTimedGroup` runs in one compute
   * pass whose begin and end timestamps go to `slot` (as the dispatches of one op run when not
   * profiled, with the GPU's own barriers between them).
   */
  beginTimedGroup(slot: TimestampSlot): void {
    this.open();
    this.#pass?.end();
    this.#pass = null;
    this.#group = slot;
  }

  /** Closes the timed group's pass. */
  endTimedGroup(): void {
    this.#pass?.end();
    this.#pass = null;
    this.#group = null;
  }

  /** An encoder with no pass open, for copies and query resolves. */
  encoderForCopies(): GPUCommandEncoder {
    const encoder = this.open();
    this.#pass?.end();
    this.#pass = null;
    return encoder;
  }

  /** Submits whatever is recorded; a no-op for an empty batch. */
  submit(): void {
    if (!this.#encoder) {
      // Nothing recorded: buffers released since the last submit are used by no pending command,
      // so they are reusable now (they used to wait for the next non-empty batch).
      this.#pool.recycle();
      return;
    }
    this.#pass?.end();
    this.#pass = null;
    for (let i = 0; i <= this.#chunk && i < this.#chunks.length; i++) {
      const c = this.#chunks[i];
      if (c.used) this.#device.queue.writeBuffer(c.gpu, 0, c.cpu, 0, c.used);
      c.used = 0;
    }
    this.#chunk = 0;
    this.#device.queue.submit([this.#encoder.finish()]);
    this.#encoder = null;
    this.#dispatches = 0;
    this.totalSubmits++;
    const after = this.#afterSubmit;
    this.#afterSubmit = [];
    for (const fn of after) fn();
    this.#pendingErrors.push(this.#device.popErrorScope(), this.#device.popErrorScope());
    this.#pool.recycle();
  }

  /** Awaits the error scopes of submitted batches and throws the first error as a GpuError. */
  async checkErrors(op: string): Promise<void> {
    const pending = this.#pendingErrors;
    this.#pendingErrors = [];
    const errors = (await Promise.all(pending)).filter((e): e is GPUError => e !== null);
    if (errors.length) {
      // An out-of-memory error is the cause of the validation errors that follow it.
      const e = errors.find((x) => x instanceof GPUOutOfMemoryError) ?? errors[0];
      if (e instanceof GPUOutOfMemoryError) {
        throw new OutOfMemoryError("gpu", {
          op,
          argument: "gpu work",
          expected: "GPU memory for the submitted work",
          received: e.message,
        });
      }
      throw new GpuError("validation", op, "gpu work", "valid GPU commands", e.message);
    }
  }

  #uniformSlot(data: Uint32Array): { buffer: GPUBuffer; offset: number } {
    if (data.byteLength > UNIFORM_BINDING_BYTES) {
      throw new Error(`internal: a ${data.byteLength}-byte uniform block exceeds its binding`);
    }
    const bytes = Math.ceil(data.byteLength / UNIFORM_ALIGN) * UNIFORM_ALIGN;
    let chunk = this.#chunks[this.#chunk];
    if (chunk && chunk.used + bytes > CHUNK_BYTES) {
      this.#chunk++;
      chunk = this.#chunks[this.#chunk];
    }
    if (!chunk) {
      chunk = {
        gpu: this.#device.createBuffer({
          label: "gyre uniforms",
          size: CHUNK_BYTES + UNIFORM_BINDING_BYTES,
          usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST,
        }),
        cpu: new Uint8Array(CHUNK_BYTES),
        used: 0,
      };
      this.#chunks[this.#chunk] = chunk;
    }
    const offset = chunk.used;
    chunk.cpu.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), offset);
    chunk.used += bytes;
    return { buffer: chunk.gpu, offset };
  }
}
