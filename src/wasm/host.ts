/**
 * The WASM device's machinery, which every kernel family's host code uses: the CPU fallback and
 * the reference every GPU kernel is checked against. Its memory and allocator, the kernel module,
 * and the node-by-node evaluation of expressions with precompiled AssemblyScript kernels (float16
 * widened to f32 around each node and rounded back, matching the GPU's float16 storage with f32
 * arithmetic) that every family uses for its casts. The families (elementwise.ts, reduce.ts,
 * rows.ts, ...) are wired to the contract in backend.ts.
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
import { contiguousStrides, isContiguous, type Shape, sizeOf } from "../core/shape.ts";
import {
  type DType,
  f32ToF16Bits,
  hostArray,
  storageBytes,
  type TypedArray,
} from "../core/dtype.ts";
import { children, type Expr, postOrder } from "../ir/expr.ts";
import { opDef } from "../ir/elementwise_table.ts";
import { WasmAllocator } from "./allocator.ts";
import { instantiateKernels, type InstantiateOptions, type Kernel } from "./module.ts";

/** WASM storage: one block of linear memory. */
export class WasmStorage implements Storage {
  refs = 0;
  constructor(
    readonly backend: WasmHost,
    readonly ptr: number,
    readonly length: number,
    readonly dtype: DType,
  ) {}
}

/** Kernel-name suffix of each dtype's storage. */
export const SUFFIX: Record<DType, string> = {
  float32: "f32",
  float16: "f16",
  int32: "i32",
  uint32: "u32",
  bool: "bool",
};
/** The dtype a node computes in on this device (float16 widens to float32). */
export const COMPUTE: Record<DType, DType> = {
  float32: "float32",
  float16: "float32",
  int32: "int32",
  uint32: "uint32",
  bool: "bool",
};

/** An intermediate value while evaluating an expression. */
export interface Value {
  view: View;
  /** Storage made during this evaluation, freed once used. */
  temp: boolean;
}

/** The WASM device's machinery (memory, kernels, casts, read-back); families in backend.ts. */
export abstract class WasmHost {
  /** Elementwise evaluation, which the machinery itself needs (read-backs, casts). */
  abstract evaluate(job: ElementwiseJob): Storage;
  readonly name = "wasm" as const;
  readonly allocator: WasmAllocator;
  readonly kernels: Record<string, Kernel>;
  /** The memory is shared (threaded build): the GEMM may split work with workers. */
  readonly shared: boolean;
  /** Set when `init` replaced this device's runtime (src/core/view.ts). */
  retired = false;

  constructor(options: InstantiateOptions = {}) {
    const { memory, kernels, shared } = instantiateKernels(options);
    this.allocator = new WasmAllocator(memory);
    this.kernels = kernels;
    this.shared = shared;
  }

  alloc(op: string, dtype: DType, length: number): WasmStorage {
    const ptr = this.allocator.alloc(length * storageBytes(dtype), op);
    return new WasmStorage(this, ptr, length, dtype);
  }

  kernel(name: string): Kernel {
    if (kernelObservers.size) observeKernel("wasm", name);
    const k = this.kernels[name];
    if (!k) throw new Error(`internal: no WASM kernel ${name}`);
    return k;
  }

  pointer(view: View): number {
    return (view.storage as WasmStorage).ptr + view.offset * storageBytes(view.dtype);
  }

  /** Writes a kernel descriptor (rank, shape, each operand's strides) at address 0. */
  describeOperands(shape: Shape, operands: readonly View[]): number {
    const words = new Int32Array(
      this.allocator.memory.buffer,
      0,
      1 + shape.length * (1 + operands.length),
    );
    words[0] = shape.length;
    words.set(shape, 1);
    operands.forEach((v, k) => words.set(v.strides, 1 + shape.length * (k + 1)));
    return operands.every((v) => isContiguous(shape, v.strides)) ? 1 : 0;
  }

  /** Runs an elementwise kernel over `shape` into new contiguous storage of `dtype`. */
  runKernel(op: string, name: string, inputs: View[], shape: Shape, dtype: DType): WasmStorage {
    const n = sizeOf(shape);
    const out = this.alloc(op, dtype, n);
    if (n === 0) return out;
    const contiguous = this.describeOperands(shape, inputs);
    this.kernel(name)(out.ptr, ...inputs.map((v) => this.pointer(v)), 0, contiguous);
    return out;
  }

  toValue(storage: WasmStorage, shape: Shape): Value {
    return {
      view: { storage, dtype: storage.dtype, shape, strides: contiguousStrides(shape), offset: 0 },
      temp: true,
    };
  }

  release(v: Value): void {
    if (v.temp) this.free(v.view.storage);
  }

  /** Casts a value to `dtype` (a copy when already of it), contiguous. */
  cast(op: string, v: Value, dtype: DType, shape: Shape): Value {
    const out = this.runKernel(
      op,
      `cast_${SUFFIX[v.view.dtype]}_${SUFFIX[dtype]}`,
      [v.view],
      shape,
      dtype,
    );
    this.release(v);
    return this.toValue(out, shape);
  }

  widen(op: string, v: Value, shape: Shape): Value {
    return v.view.dtype === "float16" ? this.cast(op, v, "float32", shape) : v;
  }

  /**
   * Evaluates an expression node by node in post-order. A node's value is kept until its last
   * user has run (fused expressions share subexpressions), then freed.
   */
  evaluateNodes(op: string, root: Expr, inputs: readonly View[], shape: Shape): Value {
    const order = postOrder(root);
    const uses = new Map<Expr, number>();
    for (const e of order) for (const c of children(e)) uses.set(c, (uses.get(c) ?? 0) + 1);
    const values = new Map<Expr, Value>();
    // Users borrow a value: the kernels' helpers free only what is marked temporary.
    const borrow = (x: Expr): Value => ({ view: values.get(x)!.view, temp: false });
    const used = (x: Expr) => {
      const left = uses.get(x)! - 1;
      uses.set(x, left);
      if (left === 0) {
        this.release(values.get(x)!);
        values.delete(x);
      }
    };
    for (const e of order) {
      values.set(e, this.#node(op, e, borrow, inputs, shape));
      for (const c of children(e)) used(c);
    }
    return values.get(root)!;
  }

  #node(
    op: string,
    e: Expr,
    borrow: (x: Expr) => Value,
    inputs: readonly View[],
    shape: Shape,
  ): Value {
    switch (e.kind) {
      case "input":
        return { view: inputs[e.index], temp: false };
      case "view":
      case "producer":
        throw new Error("internal: a pending expression reached the WASM backend unbound");
      case "const": {
        const storage = this.alloc(op, e.dtype, 1);
        const host = hostArray(e.dtype, 1);
        host[0] = e.value;
        this.#write(storage, host);
        return {
          view: { storage, dtype: e.dtype, shape, strides: shape.map(() => 0), offset: 0 },
          temp: true,
        };
      }
      case "index": {
        const n = sizeOf(shape);
        const out = this.alloc(op, "uint32", n);
        this.kernel("iota_u32")(out.ptr, n);
        return this.toValue(out, shape);
      }
      case "cast":
        return this.cast(op, borrow(e.x), e.dtype, shape);
      case "unary":
      case "binary":
      case "where": {
        const values = children(e).map((x) => this.widen(op, borrow(x), shape));
        const typed = values[values.length - 1].view.dtype;
        let name: string;
        let result: DType;
        if (e.kind === "where") {
          name = `where_${SUFFIX[typed]}`;
          result = typed;
        } else {
          name = `${e.kind}_${e.op}_${SUFFIX[values[0].view.dtype]}`;
          result = opDef(e.op).result === "bool" ? "bool" : COMPUTE[values[0].view.dtype];
        }
        const out = this.runKernel(op, name, values.map((v) => v.view), shape, result);
        values.forEach((v) => this.release(v));
        const value = this.toValue(out, shape);
        return e.dtype === result ? value : this.cast(op, value, e.dtype, shape);
      }
    }
  }

  #write(storage: WasmStorage, data: TypedArray): void {
    const memory = this.allocator.memory.buffer;
    const n = data.length;
    switch (storage.dtype) {
      case "float16": {
        const half = new Uint16Array(memory, storage.ptr, n);
        for (let i = 0; i < n; i++) half[i] = f32ToF16Bits(data[i]);
        break;
      }
      case "bool": {
        const words = new Uint32Array(memory, storage.ptr, n);
        for (let i = 0; i < n; i++) words[i] = data[i] ? 1 : 0;
        break;
      }
      default:
        new (data.constructor as Float32ArrayConstructor)(memory, storage.ptr, n).set(
          data as Float32Array,
        );
    }
  }

  upload(dtype: DType, data: TypedArray): Storage {
    const storage = this.alloc("tensor", dtype, data.length);
    this.#write(storage, data);
    return storage;
  }

  checkAllocation(op: string, dtype: DType, length: number): void {
    this.allocator.check(length * storageBytes(dtype), op);
  }

  allocate(op: string, dtype: DType, length: number): Storage {
    return this.alloc(op, dtype, length);
  }

  read(views: readonly View[]): Promise<TypedArray[]> {
    return Promise.resolve(views.map((view) => {
      const n = sizeOf(view.shape);
      let v: Value = { view, temp: false };
      if (view.dtype === "float16") v = this.cast("read", v, "float32", view.shape);
      else if (!isContiguous(view.shape, view.strides)) {
        v = this.cast("read", v, view.dtype, view.shape);
      }
      const out = hostArray(view.dtype, n);
      const memory = this.allocator.memory.buffer;
      const ptr = this.pointer(v.view);
      if (view.dtype === "bool") {
        const words = new Uint32Array(memory, ptr, n);
        for (let i = 0; i < n; i++) out[i] = words[i] ? 1 : 0;
      } else {
        out.set(new (out.constructor as Float32ArrayConstructor)(memory, ptr, n));
      }
      this.release(v);
      return out;
    }));
  }

  free(storage: Storage): void {
    this.allocator.free((storage as WasmStorage).ptr);
  }

  flush(): void {}

  stats(): MemoryStats {
    const s = this.allocator.stats();
    return { liveBuffers: s.liveBlocks, liveBytes: s.liveBytes };
  }
}
