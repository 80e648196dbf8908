/**
 * The Tensor: a strided view of device storage with a shape and a dtype. Storage is shared between
 * views (reshape, transpose, slice, broadcastTo make no copy) and freed when the last view is
 * disposed. Every op is also a method.
 * @module
 */
import type { DeviceName, Storage, View } from "./_backend.ts";
import { bind, fusedLabel, type Pending, releasePending } from "./_lazy.ts";
import { track } from "./_scope.ts";
import { contiguousStrides, type Shape, sizeOf } from "./_shape.ts";
import type { DType, TypedArray } from "./dtype.ts";
import { DisposedError } from "./errors.ts";
import * as ew from "./ops/elementwise.ts";
import * as act from "./ops/activations.ts";
import * as red from "./ops/reduce.ts";
import * as pool from "./ops/pool.ts";
import * as norm from "./ops/norm.ts";
import * as scan from "./ops/scan.ts";
import * as mm from "./ops/matmul.ts";
import * as sh from "./ops/shape.ts";
import { readAll, toNested } from "./ops/read.ts";
import type { ArgReduceOptions, ReduceOptions, VarianceOptions } from "./ops/reduce.ts";
import type { GeluOptions } from "./ops/activations.ts";
import type { NestedArray, TensorLike } from "./ops/_dispatch.ts";

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

  /** Makes a tensor over fresh contiguous storage. Internal. */
  static _fromStorage(storage: Storage, dtype: DType, shape: Shape): Tensor {
    return new Tensor({
      storage,
      dtype,
      shape: [...shape],
      strides: contiguousStrides(shape),
      offset: 0,
    });
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

  /**
   * The view, computing a pending tensor first; throws {@link DisposedError} after `dispose()`.
   * Internal.
   */
  _view(op = "use", argument = "tensor"): View {
    this.#live(op, argument);
    if (this.#pending) this.#materialize();
    return this.#view!;
  }

  /** The pending computation, if this tensor has not been computed yet. Internal (fusion). */
  _pending(op = "use", argument = "tensor"): Pending | null {
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
          storage = p.backend.evaluate(label, expr, [tempView, ...inputs], p.shape);
        } finally {
          p.backend.free(temp);
        }
      }
    } else {
      const { expr, inputs } = bind(p.expr);
      storage = p.backend.evaluate(label, expr, inputs, p.shape);
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

  /** Shape, dtype and device without computing a pending tensor. Internal. */
  _meta(what: string, argument = "tensor"): { shape: Shape; dtype: DType; device: DeviceName } {
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
    return [...this._meta("shape").shape];
  }
  /** Element type. */
  get dtype(): DType {
    return this._meta("dtype").dtype;
  }
  /** "gpu" or "wasm". */
  get device(): DeviceName {
    return this._meta("device").device;
  }
  /** Number of axes. */
  get rank(): number {
    return this._meta("rank").shape.length;
  }
  /** Number of elements. */
  get size(): number {
    return sizeOf(this._meta("size").shape);
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
    this._view("realize");
    return this;
  }

  /** `using t = ...` disposes at the end of the block. */
  [Symbol.dispose](): void {
    this.dispose();
  }

  /** The elements as a flat typed array (Float32Array for float16, Uint8Array for bool). */
  async data(): Promise<TypedArray> {
    this._view("data");
    return (await readAll([this]))[0];
  }

  /** The elements as nested JS arrays (booleans for bool). */
  async array(): Promise<NestedArray> {
    const data = await this.data();
    return toNested(data, this.shape, this.dtype === "bool");
  }

  /** A copy on another device (a read-back when leaving the GPU). */
  to(device: DeviceName): Promise<Tensor> {
    return sh.to(this, device);
  }

  /** A human-readable summary, e.g. `Tensor(float32 [2, 3] gpu)`. */
  toString(): string {
    return this.#view
      ? `Tensor(${this.dtype} [${this.shape.join(", ")}] ${this.device})`
      : "Tensor(disposed)";
  }

  // Elementwise (see ops/elementwise.ts for semantics).
  add(b: TensorLike): Tensor {
    return ew.add(this, b);
  }
  sub(b: TensorLike): Tensor {
    return ew.sub(this, b);
  }
  mul(b: TensorLike): Tensor {
    return ew.mul(this, b);
  }
  div(b: TensorLike): Tensor {
    return ew.div(this, b);
  }
  pow(b: TensorLike): Tensor {
    return ew.pow(this, b);
  }
  maximum(b: TensorLike): Tensor {
    return ew.maximum(this, b);
  }
  minimum(b: TensorLike): Tensor {
    return ew.minimum(this, b);
  }
  mod(b: TensorLike): Tensor {
    return ew.mod(this, b);
  }
  equal(b: TensorLike): Tensor {
    return ew.equal(this, b);
  }
  notEqual(b: TensorLike): Tensor {
    return ew.notEqual(this, b);
  }
  less(b: TensorLike): Tensor {
    return ew.less(this, b);
  }
  lessEqual(b: TensorLike): Tensor {
    return ew.lessEqual(this, b);
  }
  greater(b: TensorLike): Tensor {
    return ew.greater(this, b);
  }
  greaterEqual(b: TensorLike): Tensor {
    return ew.greaterEqual(this, b);
  }
  logicalAnd(b: TensorLike): Tensor {
    return ew.logicalAnd(this, b);
  }
  logicalOr(b: TensorLike): Tensor {
    return ew.logicalOr(this, b);
  }
  logicalNot(): Tensor {
    return ew.logicalNot(this);
  }
  neg(): Tensor {
    return ew.neg(this);
  }
  abs(): Tensor {
    return ew.abs(this);
  }
  sign(): Tensor {
    return ew.sign(this);
  }
  exp(): Tensor {
    return ew.exp(this);
  }
  exp2(): Tensor {
    return ew.exp2(this);
  }
  log(): Tensor {
    return ew.log(this);
  }
  log2(): Tensor {
    return ew.log2(this);
  }
  log1p(): Tensor {
    return ew.log1p(this);
  }
  expm1(): Tensor {
    return ew.expm1(this);
  }
  sqrt(): Tensor {
    return ew.sqrt(this);
  }
  rsqrt(): Tensor {
    return ew.rsqrt(this);
  }
  square(): Tensor {
    return ew.square(this);
  }
  reciprocal(): Tensor {
    return ew.reciprocal(this);
  }
  sin(): Tensor {
    return ew.sin(this);
  }
  cos(): Tensor {
    return ew.cos(this);
  }
  tan(): Tensor {
    return ew.tan(this);
  }
  tanh(): Tensor {
    return ew.tanh(this);
  }
  sigmoid(): Tensor {
    return ew.sigmoid(this);
  }
  erf(): Tensor {
    return ew.erf(this);
  }
  floor(): Tensor {
    return ew.floor(this);
  }
  ceil(): Tensor {
    return ew.ceil(this);
  }
  round(): Tensor {
    return ew.round(this);
  }
  clip(min?: number | null, max?: number | null): Tensor {
    return ew.clip(this, min, max);
  }
  where(condition: TensorLike, other: TensorLike): Tensor {
    return ew.where(condition, this, other);
  }
  cast(dtype: DType): Tensor {
    return ew.cast(this, dtype);
  }

  // Reductions.
  sum(options?: ReduceOptions): Tensor {
    return red.sum(this, options);
  }
  max(options?: ReduceOptions): Tensor {
    return red.max(this, options);
  }
  min(options?: ReduceOptions): Tensor {
    return red.min(this, options);
  }
  prod(options?: ReduceOptions): Tensor {
    return red.prod(this, options);
  }
  mean(options?: ReduceOptions): Tensor {
    return red.mean(this, options);
  }

  argmax(options?: ArgReduceOptions): Tensor {
    return red.argmax(this, options);
  }
  argmin(options?: ArgReduceOptions): Tensor {
    return red.argmin(this, options);
  }
  all(options?: ReduceOptions): Tensor {
    return red.all(this, options);
  }
  any(options?: ReduceOptions): Tensor {
    return red.any(this, options);
  }
  logsumexp(options?: ReduceOptions): Tensor {
    return red.logsumexp(this, options);
  }
  variance(options?: VarianceOptions): Tensor {
    return red.variance(this, options);
  }
  std(options?: VarianceOptions): Tensor {
    return red.std(this, options);
  }

  // Activations.
  relu(): Tensor {
    return act.relu(this);
  }
  gelu(options?: GeluOptions): Tensor {
    return act.gelu(this, options);
  }
  silu(): Tensor {
    return act.silu(this);
  }
  mish(): Tensor {
    return act.mish(this);
  }
  hardswish(): Tensor {
    return act.hardswish(this);
  }
  hardsigmoid(): Tensor {
    return act.hardsigmoid(this);
  }
  leakyRelu(options?: { alpha?: number }): Tensor {
    return act.leakyRelu(this, options);
  }
  elu(options?: { alpha?: number }): Tensor {
    return act.elu(this, options);
  }
  selu(): Tensor {
    return act.selu(this);
  }
  softplus(options?: { beta?: number; threshold?: number }): Tensor {
    return act.softplus(this, options);
  }
  softsign(): Tensor {
    return act.softsign(this);
  }

  // Softmax and normalisation.
  softmax(options?: norm.SoftmaxOptions): Tensor {
    return norm.softmax(this, options);
  }
  logSoftmax(options?: norm.SoftmaxOptions): Tensor {
    return norm.logSoftmax(this, options);
  }
  layerNorm(options?: norm.LayerNormOptions): Tensor {
    return norm.layerNorm(this, options);
  }
  rmsNorm(options?: norm.RmsNormOptions): Tensor {
    return norm.rmsNorm(this, options);
  }
  groupNorm(options: norm.GroupNormOptions): Tensor {
    return norm.groupNorm(this, options);
  }
  batchNorm(options: norm.BatchNormOptions & { training: true }): norm.BatchNormTrainingResult;
  batchNorm(options?: norm.BatchNormOptions & { training?: false }): Tensor;
  batchNorm(options: norm.BatchNormOptions = {}): Tensor | norm.BatchNormTrainingResult {
    return norm.batchNorm(this, options);
  }

  // Scans.
  cumsum(options?: scan.ScanOptions): Tensor {
    return scan.cumsum(this, options);
  }
  cumprod(options?: scan.ScanOptions): Tensor {
    return scan.cumprod(this, options);
  }
  cummax(options?: scan.ScanOptions): Tensor {
    return scan.cummax(this, options);
  }
  cummin(options?: scan.ScanOptions): Tensor {
    return scan.cummin(this, options);
  }

  // Matrix products.
  matmul(b: Tensor, options?: mm.MatmulOptions): Tensor {
    return mm.matmul(this, b, options);
  }
  linear(weight: Tensor, options?: mm.LinearOptions): Tensor {
    return mm.linear(this, weight, options);
  }

  // Pooling (NCHW or CHW).
  maxPool2d(options: pool.MaxPool2dOptions & { returnIndices: true }): pool.PoolWithIndices;
  maxPool2d(options: pool.MaxPool2dOptions & { returnIndices?: false }): Tensor;
  maxPool2d(options: pool.MaxPool2dOptions): Tensor | pool.PoolWithIndices {
    return pool.maxPool2d(this, options);
  }
  avgPool2d(options: pool.AvgPool2dOptions): Tensor {
    return pool.avgPool2d(this, options);
  }
  adaptiveAvgPool2d(outputSize: pool.AdaptiveSize): Tensor {
    return pool.adaptiveAvgPool2d(this, outputSize);
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
    return pool.adaptiveMaxPool2d(this, outputSize, options);
  }

  // Shapes and views.
  reshape(shape: readonly number[]): Tensor {
    return sh.reshape(this, shape);
  }
  transpose(permutation?: readonly number[]): Tensor {
    return sh.transpose(this, permutation);
  }
  expandDims(axis: number): Tensor {
    return sh.expandDims(this, axis);
  }
  squeeze(axis?: number | readonly number[]): Tensor {
    return sh.squeeze(this, axis);
  }
  slice(...ranges: sh.SliceRange[]): Tensor {
    return sh.slice(this, ...ranges);
  }
  broadcastTo(shape: readonly number[]): Tensor {
    return sh.broadcastTo(this, shape);
  }
  /** A contiguous copy (a new storage even when already contiguous). */
  clone(): Tensor {
    return sh.clone(this);
  }
}

/** Tensors whose computation is pending; `flush()` computes them all. */
const pendingTensors = new Set<Tensor>();

/**
 * Computes every pending tensor now (one kernel each), recording the dispatches into the open
 * batch. Internal: `gyre.flush()` calls it before submitting.
 */
export function materializeAll(): void {
  for (const t of [...pendingTensors]) t._view("flush");
}
