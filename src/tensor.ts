/**
 * The Tensor: a strided view of device storage with a shape and a dtype. Storage is shared between
 * views (reshape, transpose, slice, broadcastTo make no copy) and freed when the last view is
 * disposed. Every op is also a method.
 * @module
 */
import type { DeviceName, Storage, View } from "./contract/backend.ts";
import { bind, fusedLabel, type Pending, releasePending } from "./_lazy.ts";
import { track } from "./_scope.ts";
import { contiguousStrides, type Shape, sizeOf } from "./core/shape.ts";
import type { DType, TypedArray } from "./core/dtype.ts";
import { DisposedError } from "./core/errors.ts";
import type * as ew from "./ops/elementwise.ts";
import type * as act from "./ops/activations.ts";
import type * as red from "./ops/reduce.ts";
import type * as pool from "./ops/pool.ts";
import type * as norm from "./ops/rows.ts";
import type * as scan from "./ops/scan.ts";
import type * as mm from "./ops/matmul.ts";
import type * as sh from "./ops/shape.ts";
import type * as read from "./ops/read.ts";
import type { ArgReduceOptions, ReduceOptions, VarianceOptions } from "./ops/reduce.ts";
import type { GeluOptions } from "./ops/activations.ts";
import type { NestedArray, TensorLike } from "./ops/_dispatch.ts";

// Set by the class's static block: see viewOf.
let access: {
  view: (t: Tensor, op: string, argument: string) => View;
  pending: (t: Tensor, op: string, argument: string) => Pending | null;
  meta: (t: Tensor, op: string, argument: string) => TensorMeta;
};

/**
 * An n-dimensional array on the `gpu` or `wasm` device.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const x = gyre.tensor([[1, 2], [3, 4]]);
 * const y = x.add(1).exp().sum({ axis: 1 });
 * console.log(await y.array());
 * y.dispose();
 * ```
 */
export class Tensor {
  #view: View | null = null;
  #pending: Pending | null = null;
  #disposed = false;

  /**
   * Wraps a view (taking a reference on its storage) or a pending elementwise computation (taking
   * references on its inputs' storage). Internal: use the creation functions and ops.
   */
  constructor(source: View | Pending) {
    if ("expr" in source) {
      // The pending node arrives holding one reference, which is this tensor's.
      this.#pending = source;
      pendingTensors.add(this);
    } else {
      this.#view = source;
      source.storage.refs++;
    }
    track(this);
  }

  static {
    // What other modules of the library may see of a tensor's internals: functions of this
    // module (viewOf, pendingOf, metaOf), not methods of the public class.
    access = {
      view: (t, op, argument) => t.#viewFor(op, argument),
      pending: (t, op, argument) => t.#pendingFor(op, argument),
      meta: (t, op, argument) => t.#metaFor(op, argument),
    };
  }

  #live(op: string, argument: string): void {
    if (this.#disposed) {
      throw new DisposedError({
        op,
        argument,
        expected: "a live tensor",
        received: "a disposed tensor",
      });
    }
  }

  #viewFor(op: string, argument: string): View {
    this.#live(op, argument);
    if (this.#pending) this.#materialize();
    return this.#view!;
  }

  #pendingFor(op: string, argument: string): Pending | null {
    this.#live(op, argument);
    return this.#pending;
  }

  #materialize(): void {
    const p = this.#pending!;
    // Named after every op folded in, so profiles and `explain` show what one kernel does.
    const label = fusedLabel(p);
    let storage: Storage | null = null;
    if (p.producer) {
      // The producer kernel runs with the rest of the expression as its epilogue, or, where it
      // cannot take that epilogue, alone into a temporary the expression then reads.
      const { expr, inputs } = bind(p.expr, true);
      const plain = expr.kind === "input" && expr.index === 0 && expr.dtype === p.producer.dtype;
      storage = p.producer.run(label, plain ? null : expr, inputs);
      if (!storage) {
        const temp = p.producer.run(p.producer.op, null, [])!;
        const tempView: View = {
          storage: temp,
          dtype: p.producer.dtype,
          shape: p.shape,
          strides: contiguousStrides(p.shape),
          offset: 0,
        };
        try {
          storage = p.backend.evaluate({
            op: label,
            expr,
            inputs: [tempView, ...inputs],
            shape: p.shape,
            overrides: p.overrides,
          });
        } finally {
          p.backend.free(temp);
        }
      }
    } else {
      const { expr, inputs } = bind(p.expr);
      storage = p.backend.evaluate({
        op: label,
        expr,
        inputs,
        shape: p.shape,
        overrides: p.overrides,
      });
    }
    this.#pending = null;
    pendingTensors.delete(this);
    releasePending(p);
    this.#view = {
      storage,
      dtype: p.dtype,
      shape: [...p.shape],
      strides: contiguousStrides(p.shape),
      offset: 0,
    };
    storage.refs++;
  }

  #metaFor(what: string, argument: string): TensorMeta {
    this.#live(what, argument);
    if (this.#pending) {
      return {
        shape: this.#pending.shape,
        dtype: this.#pending.dtype,
        device: this.#pending.backend.name,
      };
    }
    const v = this.#view!;
    return { shape: v.shape, dtype: v.dtype, device: v.storage.backend.name };
  }

  /** Axis lengths. */
  get shape(): number[] {
    return [...this.#metaFor("shape", "tensor").shape];
  }
  /** Element type. */
  get dtype(): DType {
    return this.#metaFor("dtype", "tensor").dtype;
  }
  /** "gpu" or "wasm". */
  get device(): DeviceName {
    return this.#metaFor("device", "tensor").device;
  }
  /** Number of axes. */
  get rank(): number {
    return this.#metaFor("rank", "tensor").shape.length;
  }
  /** Number of elements. */
  get size(): number {
    return sizeOf(this.#metaFor("size", "tensor").shape);
  }
  /** True once disposed. */
  get isDisposed(): boolean {
    return this.#disposed;
  }

  /** Frees this tensor; its storage goes when no tensor holds it. Disposing twice is harmless. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    if (this.#pending) {
      // Never computed, never will be: only the inputs' references go.
      pendingTensors.delete(this);
      releasePending(this.#pending);
      this.#pending = null;
      return;
    }
    const view = this.#view!;
    this.#view = null;
    if (--view.storage.refs === 0) view.storage.backend.free(view.storage);
  }

  /**
   * Computes a pending (lazy) tensor now: its kernel is recorded into the open GPU batch, which is
   * sent with the next flush or read; nothing waits. Returns the tensor itself. Use it to stop
   * fusion at a point, or to make a benchmark's every op run.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.ones([4]).mul(2).realize(); // one kernel, recorded now
   * ```
   */
  realize(): this {
    this.#viewFor("realize", "tensor");
    return this;
  }

  /** `using t = ...` disposes at the end of the block. */
  [Symbol.dispose](): void {
    this.dispose();
  }

  /** The elements as a flat typed array (Float32Array for float16, Uint8Array for bool). */
  async data(): Promise<TypedArray> {
    this.#viewFor("data", "tensor");
    return (await ops.read.readAll([this]))[0];
  }

  /** The elements as nested JS arrays (booleans for bool). */
  async array(): Promise<NestedArray> {
    const data = await this.data();
    return ops.read.toNested(data, this.shape, this.dtype === "bool");
  }

  /** A copy on another device (a read-back when leaving the GPU). */
  to(device: DeviceName): Promise<Tensor> {
    return ops.sh.to(this, device);
  }

  /** A human-readable summary, e.g. `Tensor(float32 [2, 3] gpu)`. */
  toString(): string {
    return this.#view
      ? `Tensor(${this.dtype} [${this.shape.join(", ")}] ${this.device})`
      : "Tensor(disposed)";
  }

  // Elementwise (see ops/elementwise.ts for semantics).
  add(b: TensorLike): Tensor {
    return ops.ew.add(this, b);
  }
  sub(b: TensorLike): Tensor {
    return ops.ew.sub(this, b);
  }
  mul(b: TensorLike): Tensor {
    return ops.ew.mul(this, b);
  }
  div(b: TensorLike): Tensor {
    return ops.ew.div(this, b);
  }
  pow(b: TensorLike): Tensor {
    return ops.ew.pow(this, b);
  }
  maximum(b: TensorLike): Tensor {
    return ops.ew.maximum(this, b);
  }
  minimum(b: TensorLike): Tensor {
    return ops.ew.minimum(this, b);
  }
  mod(b: TensorLike): Tensor {
    return ops.ew.mod(this, b);
  }
  equal(b: TensorLike): Tensor {
    return ops.ew.equal(this, b);
  }
  notEqual(b: TensorLike): Tensor {
    return ops.ew.notEqual(this, b);
  }
  less(b: TensorLike): Tensor {
    return ops.ew.less(this, b);
  }
  lessEqual(b: TensorLike): Tensor {
    return ops.ew.lessEqual(this, b);
  }
  greater(b: TensorLike): Tensor {
    return ops.ew.greater(this, b);
  }
  greaterEqual(b: TensorLike): Tensor {
    return ops.ew.greaterEqual(this, b);
  }
  logicalAnd(b: TensorLike): Tensor {
    return ops.ew.logicalAnd(this, b);
  }
  logicalOr(b: TensorLike): Tensor {
    return ops.ew.logicalOr(this, b);
  }
  logicalNot(): Tensor {
    return ops.ew.logicalNot(this);
  }
  neg(): Tensor {
    return ops.ew.neg(this);
  }
  abs(): Tensor {
    return ops.ew.abs(this);
  }
  sign(): Tensor {
    return ops.ew.sign(this);
  }
  exp(): Tensor {
    return ops.ew.exp(this);
  }
  exp2(): Tensor {
    return ops.ew.exp2(this);
  }
  log(): Tensor {
    return ops.ew.log(this);
  }
  log2(): Tensor {
    return ops.ew.log2(this);
  }
  log1p(): Tensor {
    return ops.ew.log1p(this);
  }
  expm1(): Tensor {
    return ops.ew.expm1(this);
  }
  sqrt(): Tensor {
    return ops.ew.sqrt(this);
  }
  rsqrt(): Tensor {
    return ops.ew.rsqrt(this);
  }
  square(): Tensor {
    return ops.ew.square(this);
  }
  reciprocal(): Tensor {
    return ops.ew.reciprocal(this);
  }
  sin(): Tensor {
    return ops.ew.sin(this);
  }
  cos(): Tensor {
    return ops.ew.cos(this);
  }
  tan(): Tensor {
    return ops.ew.tan(this);
  }
  tanh(): Tensor {
    return ops.ew.tanh(this);
  }
  sigmoid(): Tensor {
    return ops.ew.sigmoid(this);
  }
  erf(): Tensor {
    return ops.ew.erf(this);
  }
  floor(): Tensor {
    return ops.ew.floor(this);
  }
  ceil(): Tensor {
    return ops.ew.ceil(this);
  }
  round(): Tensor {
    return ops.ew.round(this);
  }
  clip(min?: number | null, max?: number | null): Tensor {
    return ops.ew.clip(this, min, max);
  }
  where(condition: TensorLike, other: TensorLike): Tensor {
    return ops.ew.where(condition, this, other);
  }
  cast(dtype: DType): Tensor {
    return ops.ew.cast(this, dtype);
  }

  // Reductions.
  sum(options?: ReduceOptions): Tensor {
    return ops.red.sum(this, options);
  }
  max(options?: ReduceOptions): Tensor {
    return ops.red.max(this, options);
  }
  min(options?: ReduceOptions): Tensor {
    return ops.red.min(this, options);
  }
  prod(options?: ReduceOptions): Tensor {
    return ops.red.prod(this, options);
  }
  mean(options?: ReduceOptions): Tensor {
    return ops.red.mean(this, options);
  }

  argmax(options?: ArgReduceOptions): Tensor {
    return ops.red.argmax(this, options);
  }
  argmin(options?: ArgReduceOptions): Tensor {
    return ops.red.argmin(this, options);
  }
  all(options?: ReduceOptions): Tensor {
    return ops.red.all(this, options);
  }
  any(options?: ReduceOptions): Tensor {
    return ops.red.any(this, options);
  }
  logsumexp(options?: ReduceOptions): Tensor {
    return ops.red.logsumexp(this, options);
  }
  variance(options?: VarianceOptions): Tensor {
    return ops.red.variance(this, options);
  }
  std(options?: VarianceOptions): Tensor {
    return ops.red.std(this, options);
  }

  // Activations.
  relu(): Tensor {
    return ops.act.relu(this);
  }
  gelu(options?: GeluOptions): Tensor {
    return ops.act.gelu(this, options);
  }
  silu(): Tensor {
    return ops.act.silu(this);
  }
  mish(): Tensor {
    return ops.act.mish(this);
  }
  hardswish(): Tensor {
    return ops.act.hardswish(this);
  }
  hardsigmoid(): Tensor {
    return ops.act.hardsigmoid(this);
  }
  leakyRelu(options?: { alpha?: number }): Tensor {
    return ops.act.leakyRelu(this, options);
  }
  elu(options?: { alpha?: number }): Tensor {
    return ops.act.elu(this, options);
  }
  selu(): Tensor {
    return ops.act.selu(this);
  }
  softplus(options?: { beta?: number; threshold?: number }): Tensor {
    return ops.act.softplus(this, options);
  }
  softsign(): Tensor {
    return ops.act.softsign(this);
  }

  // Softmax and normalisation.
  softmax(options?: norm.SoftmaxOptions): Tensor {
    return ops.norm.softmax(this, options);
  }
  logSoftmax(options?: norm.SoftmaxOptions): Tensor {
    return ops.norm.logSoftmax(this, options);
  }
  layerNorm(options?: norm.LayerNormOptions): Tensor {
    return ops.norm.layerNorm(this, options);
  }
  rmsNorm(options?: norm.RmsNormOptions): Tensor {
    return ops.norm.rmsNorm(this, options);
  }
  groupNorm(options: norm.GroupNormOptions): Tensor {
    return ops.norm.groupNorm(this, options);
  }
  batchNorm(options: norm.BatchNormOptions & { training: true }): norm.BatchNormTrainingResult;
  batchNorm(options?: norm.BatchNormOptions & { training?: false }): Tensor;
  batchNorm(options: norm.BatchNormOptions = {}): Tensor | norm.BatchNormTrainingResult {
    return ops.norm.batchNorm(this, options);
  }

  // Scans.
  cumsum(options?: scan.ScanOptions): Tensor {
    return ops.scan.cumsum(this, options);
  }
  cumprod(options?: scan.ScanOptions): Tensor {
    return ops.scan.cumprod(this, options);
  }
  cummax(options?: scan.ScanOptions): Tensor {
    return ops.scan.cummax(this, options);
  }
  cummin(options?: scan.ScanOptions): Tensor {
    return ops.scan.cummin(this, options);
  }

  // Matrix products.
  matmul(b: Tensor, options?: mm.MatmulOptions): Tensor {
    return ops.mm.matmul(this, b, options);
  }
  linear(weight: Tensor, options?: mm.LinearOptions): Tensor {
    return ops.mm.linear(this, weight, options);
  }

  // Pooling (NCHW or CHW).
  maxPool2d(options: pool.MaxPool2dOptions & { returnIndices: true }): pool.PoolWithIndices;
  maxPool2d(options: pool.MaxPool2dOptions & { returnIndices?: false }): Tensor;
  maxPool2d(options: pool.MaxPool2dOptions): Tensor | pool.PoolWithIndices {
    return ops.pool.maxPool2d(this, options);
  }
  avgPool2d(options: pool.AvgPool2dOptions): Tensor {
    return ops.pool.avgPool2d(this, options);
  }
  adaptiveAvgPool2d(outputSize: pool.AdaptiveSize): Tensor {
    return ops.pool.adaptiveAvgPool2d(this, outputSize);
  }
  adaptiveMaxPool2d(
    outputSize: pool.AdaptiveSize,
    options: pool.AdaptiveMaxPool2dOptions & { returnIndices: true },
  ): pool.PoolWithIndices;
  adaptiveMaxPool2d(
    outputSize: pool.AdaptiveSize,
    options?: pool.AdaptiveMaxPool2dOptions & { returnIndices?: false },
  ): Tensor;
  adaptiveMaxPool2d(
    outputSize: pool.AdaptiveSize,
    options: pool.AdaptiveMaxPool2dOptions = {},
  ): Tensor | pool.PoolWithIndices {
    return ops.pool.adaptiveMaxPool2d(this, outputSize, options);
  }

  // Shapes and views.
  reshape(shape: readonly number[]): Tensor {
    return ops.sh.reshape(this, shape);
  }
  transpose(permutation?: readonly number[]): Tensor {
    return ops.sh.transpose(this, permutation);
  }
  expandDims(axis: number): Tensor {
    return ops.sh.expandDims(this, axis);
  }
  squeeze(axis?: number | readonly number[]): Tensor {
    return ops.sh.squeeze(this, axis);
  }
  slice(...ranges: sh.SliceRange[]): Tensor {
    return ops.sh.slice(this, ...ranges);
  }
  broadcastTo(shape: readonly number[]): Tensor {
    return ops.sh.broadcastTo(this, shape);
  }
  /** A contiguous copy (a new storage even when already contiguous). */
  clone(): Tensor {
    return ops.sh.clone(this);
  }
}

/**
 * The op modules the methods call. The Tensor module imports them as types only, so that ops can
 * import the Tensor class without an import circle; `src/ops/mod.ts` installs them.
 */
export interface TensorOps {
  ew: typeof ew;
  act: typeof act;
  red: typeof red;
  pool: typeof pool;
  norm: typeof norm;
  scan: typeof scan;
  mm: typeof mm;
  sh: typeof sh;
  read: typeof read;
}

const ops = {} as TensorOps;

/** Gives the Tensor methods their op modules. Internal: called once by `src/ops/mod.ts`. */
export function installTensorOps(modules: TensorOps): void {
  Object.assign(ops, modules);
}

/** Shape, dtype and device of a tensor, as {@link metaOf} reports them. */
export interface TensorMeta {
  shape: Shape;
  dtype: DType;
  device: DeviceName;
}

/**
 * A tensor's view, computing it first if it is pending; throws {@link DisposedError} (naming
 * `op` and `argument`) after `dispose()`. For the library's modules, not the public API.
 */
export function viewOf(t: Tensor, op = "use", argument = "tensor"): View {
  return access.view(t, op, argument);
}

/** A tensor's pending computation, or null once computed (fusion). For the library's modules. */
export function pendingOf(t: Tensor, op = "use", argument = "tensor"): Pending | null {
  return access.pending(t, op, argument);
}

/** Shape, dtype and device without computing a pending tensor. For the library's modules. */
export function metaOf(t: Tensor, op: string, argument = "tensor"): TensorMeta {
  return access.meta(t, op, argument);
}

/** A tensor over fresh contiguous storage. For the library's modules. */
export function tensorFromStorage(storage: Storage, dtype: DType, shape: Shape): Tensor {
  return new Tensor({
    storage,
    dtype,
    shape: [...shape],
    strides: contiguousStrides(shape),
    offset: 0,
  });
}

/** Tensors whose computation is pending; `flush()` computes them all. */
const pendingTensors = new Set<Tensor>();

/**
 * Computes every pending tensor now (one kernel each), recording the dispatches into the open
 * batch. Internal: `gyre.flush()` calls it before submitting.
 */
export function materializeAll(): void {
  for (const t of [...pendingTensors]) viewOf(t, "flush");
}
