/**
 * A block allocator over the WASM module's linear memory: size classes with free lists, a bump
 * pointer above them, and `memory.grow` when the bump pointer runs out. Tensors on the `wasm`
 * device live in blocks it hands out.
 * @module
 */
import { OutOfMemoryError } from "../core/errors.ts";
import { sizeClass } from "../core/size_class.ts";

/**
 * Tensors start at the second page. Bytes [0, 1024) hold kernel descriptors (shape and stride
 * words); asc puts its static data (math tables) from 1024 up, within the first page, which the
 * module's memory import declares (minimum 1 page).
 */
export const HEAP_BASE = 65536;
const PAGE = 65536;
/** wasm32 addresses 4 GiB; leave one page of headroom. */
const MAX_BYTES = 4 * 1024 * 1024 * 1024 - PAGE;

/** Allocation counters. */
export interface AllocatorStats {
  /** Blocks in use. */
  liveBlocks: number;
  /** Bytes of the blocks in use. */
  liveBytes: number;
  /** Freed blocks kept for reuse. */
  pooledBlocks: number;
  /** Bytes of the freed blocks kept for reuse. */
  pooledBytes: number;
  /** Current size of the linear memory. */
  memoryBytes: number;
}

/** The allocator of one WASM memory. */
export class WasmAllocator {
  readonly memory: WebAssembly.Memory;
  #top = HEAP_BASE;
  #free = new Map<number, number[]>();
  #sizes = new Map<number, number>();
  #stats = { liveBlocks: 0, liveBytes: 0, pooledBlocks: 0, pooledBytes: 0 };

  constructor(memory: WebAssembly.Memory) {
    this.memory = memory;
  }

  /** Throws the error `alloc` would for a block this large even with every free block reused. */
  check(bytes: number, op = "allocate"): void {
    if (sizeClass(bytes) > MAX_BYTES - HEAP_BASE) {
      throw new OutOfMemoryError("wasm", {
        op,
        argument: "size",
        expected: `at most ${MAX_BYTES - HEAP_BASE} bytes of WASM memory`,
        received: `${bytes} bytes`,
      });
    }
  }

  /** Address of a 16-byte-aligned block of at least `bytes` bytes. */
  alloc(bytes: number, op = "allocate"): number {
    const size = sizeClass(bytes);
    let ptr = this.#free.get(size)?.pop();
    if (ptr !== undefined) {
      this.#stats.pooledBlocks--;
      this.#stats.pooledBytes -= size;
    } else {
      ptr = this.#top;
      const end = ptr + size;
      if (end > MAX_BYTES) {
        throw new OutOfMemoryError("wasm", {
          op,
          argument: "size",
          expected: `at most ${MAX_BYTES - this.#top} more bytes of WASM memory`,
          received: `${bytes} bytes`,
        });
      }
      const have = this.memory.buffer.byteLength;
      if (end > have) this.memory.grow(Math.ceil((end - have) / PAGE));
      this.#top = end;
    }
    this.#sizes.set(ptr, size);
    this.#stats.liveBlocks++;
    this.#stats.liveBytes += size;
    return ptr;
  }

  /** Returns a block to its size class's free list. */
  free(ptr: number): void {
    const size = this.#sizes.get(ptr);
    if (size === undefined) throw new Error(`internal: double free of WASM block ${ptr}`);
    this.#sizes.delete(ptr);
    const list = this.#free.get(size) ?? [];
    list.push(ptr);
    this.#free.set(size, list);
    this.#stats.liveBlocks--;
    this.#stats.liveBytes -= size;
    this.#stats.pooledBlocks++;
    this.#stats.pooledBytes += size;
  }

  /** A snapshot of the counters. */
  stats(): AllocatorStats {
    return { ...this.#stats, memoryBytes: this.memory.buffer.byteLength };
  }
}
