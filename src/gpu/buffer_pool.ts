/**
 * A pool of GPU storage buffers in size classes. Freed buffers wait until the batch that last
 * used them is submitted (a later `queue.writeBuffer` would otherwise run before commands that
 * are recorded but not yet submitted), then become reusable.
 * @module
 */
import { OutOfMemoryError } from "../core/errors.ts";
import { sizeClass } from "../core/size_class.ts";

/** Counts that tests use to prove nothing leaks. */
export interface PoolStats {
  /** Buffers handed out and not yet released. */
  liveBuffers: number;
  /** Bytes (by size class) handed out and not yet released. */
  liveBytes: number;
  /** Released buffers kept for reuse. */
  pooledBuffers: number;
  /** Bytes of the released buffers kept for reuse. */
  pooledBytes: number;
  /** Buffers ever created. */
  created: number;
}

const STORAGE_USAGE = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;

/** The buffer pool of one device. */
export class BufferPool {
  #device: GPUDevice;
  #maxBytes: number;
  #free = new Map<number, GPUBuffer[]>();
  #deferred: GPUBuffer[] = [];
  #deferredBytes = 0;
  #stats: PoolStats = {
    liveBuffers: 0,
    liveBytes: 0,
    pooledBuffers: 0,
    pooledBytes: 0,
    created: 0,
  };

  constructor(device: GPUDevice, maxBytes: number) {
    this.#device = device;
    this.#maxBytes = maxBytes;
  }

  /** Throws the GpuError `acquire` would for a request this large. */
  check(bytes: number, op = "allocate"): void {
    const size = sizeClass(bytes);
    if (size > this.#maxBytes) {
      throw new OutOfMemoryError("gpu", {
        op,
        argument: "size",
        expected: `at most ${this.#maxBytes} bytes in one GPU buffer (the device's binding limit)`,
        received: `${bytes} bytes`,
      });
    }
  }

  /** A buffer of at least `bytes` bytes, reused when one of its class is free. */
  /**
   * A buffer of at least `bytes` bytes. `kernelOutput`: the caller only writes it from kernels
   * recorded after this call, which the GPU runs after every earlier recorded reader, so a buffer
   * released into the pending batch may serve (the memory planner's reuse); uploads through
   * `queue.writeBuffer` run before the batch and must not take one.
   */
  acquire(bytes: number, op = "allocate", kernelOutput = false): GPUBuffer {
    this.check(bytes, op);
    const size = sizeClass(bytes);
    if (kernelOutput) {
      const i = this.#deferred.findLastIndex((b) => b.size === size);
      if (i >= 0) {
        const [buffer] = this.#deferred.splice(i, 1);
        this.#deferredBytes -= size;
        this.#stats.liveBuffers++;
        this.#stats.liveBytes += size;
        return buffer;
      }
    }
    const list = this.#free.get(size);
    let buffer = list?.pop();
    if (buffer) {
      this.#stats.pooledBuffers--;
      this.#stats.pooledBytes -= size;
    } else {
      buffer = this.#device.createBuffer({
        label: `gyre pool ${size}`,
        size,
        usage: STORAGE_USAGE,
      });
      this.#stats.created++;
    }
    this.#stats.liveBuffers++;
    this.#stats.liveBytes += size;
    return buffer;
  }

  /** Releases a buffer; it becomes reusable after the pending batch is submitted. */
  release(buffer: GPUBuffer): void {
    this.#stats.liveBuffers--;
    this.#stats.liveBytes -= buffer.size;
    this.#deferred.push(buffer);
    this.#deferredBytes += buffer.size;
  }

  /** Bytes released since the last submit (the batch flushes when this grows large). */
  get deferredBytes(): number {
    return this.#deferredBytes;
  }

  /** Called after a submit: buffers released before it may now be reused. */
  recycle(): void {
    for (const buffer of this.#deferred) {
      const list = this.#free.get(buffer.size) ?? [];
      list.push(buffer);
      this.#free.set(buffer.size, list);
      this.#stats.pooledBuffers++;
      this.#stats.pooledBytes += buffer.size;
    }
    this.#deferred = [];
    this.#deferredBytes = 0;
  }

  /** Destroys every pooled buffer (live ones are untouched). */
  trim(): void {
    for (const list of this.#free.values()) for (const b of list) b.destroy();
    this.#free.clear();
    this.#stats.pooledBuffers = 0;
    this.#stats.pooledBytes = 0;
  }

  /** A snapshot of the counters. */
  stats(): PoolStats {
    return { ...this.#stats };
  }
}
