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
import { describe, DeviceError, DisposedError, ValueError } from "./core/errors.ts";
import type * as ew from "./ops/elementwise.ts";
import type * as act from "./ops/activations.ts";
import type * as red from "./ops/reduce.ts";
import type * as pool from "./ops/pool.ts";
import type * as norm from "./ops/rows.ts";
import type * as scan from "./ops/scan.ts";
import type * as sort from "./ops/sort.ts";
import type * as idx from "./ops/indexing.ts";
import type * as mm from "./ops/matmul.ts";
import type * as sh from "./ops/shape.ts";
import type * as read from "./ops/read.ts";
import type { ArgReduceOptions, ReduceOptions, VarianceOptions } from "./ops/reduce.ts";
import type { GeluOptions } from "./ops/activations.ts";
import type { NestedArray, TensorLike } from "./ops/_dispatch.ts";

// Set by the class's static block: see viewOf.
let access: {
  view: (t: Tensor, op: string, argument: string) => View;
  retired: (t: Tensor) => boolean;
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
      view: (t, op, argument) => Tensor.#checked(t, op, argument).#viewFor(op, argument),
      pending: (t, op, argument) => Tensor.#checked(t, op, argument).#pendingFor(op, argument),
      meta: (t, op, argument) => Tensor.#checked(t, op, argument).#metaFor(op, argument),
      retired: (t) => (t.#view?.storage.backend ?? t.#pending?.backend)?.retired ?? false,
    };
  }

  /** `t` when it is a Tensor: a JS value where one is expected is a ValueError, not a TypeError. */
  static #checked(t: unknown, op: string, argument: string): Tensor {
    if (typeof t === "object" && t !== null && #view in t) return t as Tensor;
    throw new ValueError({ op, argument, expected: "a Tensor", received: describe(t) });
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
    const owner = this.#view?.storage.backend ?? this.#pending?.backend;
    if (owner?.retired) {
      throw new DeviceError({
        op,
        argument,
        expected: "a tensor of the current runtime",
        received: `a ${owner.name} tensor made before gyre.init replaced its runtime`,
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
  /**
   * The method form of `gyre.add(this, ...)`: see `add` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).add(2);
   * ```
   */
  add(b: TensorLike): Tensor {
    return ops.ew.add(this, b);
  }
  /**
   * The method form of `gyre.sub(this, ...)`: see `sub` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).sub(2);
   * ```
   */
  sub(b: TensorLike): Tensor {
    return ops.ew.sub(this, b);
  }
  /**
   * The method form of `gyre.mul(this, ...)`: see `mul` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).mul(2);
   * ```
   */
  mul(b: TensorLike): Tensor {
    return ops.ew.mul(this, b);
  }
  /**
   * The method form of `gyre.div(this, ...)`: see `div` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).div(2);
   * ```
   */
  div(b: TensorLike): Tensor {
    return ops.ew.div(this, b);
  }
  /**
   * The method form of `gyre.pow(this, ...)`: see `pow` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).pow(2);
   * ```
   */
  pow(b: TensorLike): Tensor {
    return ops.ew.pow(this, b);
  }
  /**
   * The method form of `gyre.maximum(this, ...)`: see `maximum` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).maximum(2);
   * ```
   */
  maximum(b: TensorLike): Tensor {
    return ops.ew.maximum(this, b);
  }
  /**
   * The method form of `gyre.minimum(this, ...)`: see `minimum` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).minimum(2);
   * ```
   */
  minimum(b: TensorLike): Tensor {
    return ops.ew.minimum(this, b);
  }
  /**
   * The method form of `gyre.mod(this, ...)`: see `mod` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).mod(2);
   * ```
   */
  mod(b: TensorLike): Tensor {
    return ops.ew.mod(this, b);
  }
  /**
   * The method form of `gyre.equal(this, ...)`: see `equal` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).equal(2);
   * ```
   */
  equal(b: TensorLike): Tensor {
    return ops.ew.equal(this, b);
  }
  /**
   * The method form of `gyre.notEqual(this, ...)`: see `notEqual` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).notEqual(2);
   * ```
   */
  notEqual(b: TensorLike): Tensor {
    return ops.ew.notEqual(this, b);
  }
  /**
   * The method form of `gyre.less(this, ...)`: see `less` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).less(2);
   * ```
   */
  less(b: TensorLike): Tensor {
    return ops.ew.less(this, b);
  }
  /**
   * The method form of `gyre.lessEqual(this, ...)`: see `lessEqual` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).lessEqual(2);
   * ```
   */
  lessEqual(b: TensorLike): Tensor {
    return ops.ew.lessEqual(this, b);
  }
  /**
   * The method form of `gyre.greater(this, ...)`: see `greater` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).greater(2);
   * ```
   */
  greater(b: TensorLike): Tensor {
    return ops.ew.greater(this, b);
  }
  /**
   * The method form of `gyre.greaterEqual(this, ...)`: see `greaterEqual` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).greaterEqual(2);
   * ```
   */
  greaterEqual(b: TensorLike): Tensor {
    return ops.ew.greaterEqual(this, b);
  }
  /**
   * The method form of `gyre.logicalAnd(this, ...)`: see `logicalAnd` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([true, false]).logicalAnd(true);
   * ```
   */
  logicalAnd(b: TensorLike): Tensor {
    return ops.ew.logicalAnd(this, b);
  }
  /**
   * The method form of `gyre.logicalOr(this, ...)`: see `logicalOr` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([true, false]).logicalOr(false);
   * ```
   */
  logicalOr(b: TensorLike): Tensor {
    return ops.ew.logicalOr(this, b);
  }
  /**
   * The method form of `gyre.logicalNot(this, ...)`: see `logicalNot` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([true, false]).logicalNot();
   * ```
   */
  logicalNot(): Tensor {
    return ops.ew.logicalNot(this);
  }
  /**
   * The method form of `gyre.neg(this, ...)`: see `neg` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).neg();
   * ```
   */
  neg(): Tensor {
    return ops.ew.neg(this);
  }
  /**
   * The method form of `gyre.abs(this, ...)`: see `abs` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).abs();
   * ```
   */
  abs(): Tensor {
    return ops.ew.abs(this);
  }
  /**
   * The method form of `gyre.sign(this, ...)`: see `sign` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).sign();
   * ```
   */
  sign(): Tensor {
    return ops.ew.sign(this);
  }
  /**
   * The method form of `gyre.exp(this, ...)`: see `exp` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).exp();
   * ```
   */
  exp(): Tensor {
    return ops.ew.exp(this);
  }
  /**
   * The method form of `gyre.exp2(this, ...)`: see `exp2` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).exp2();
   * ```
   */
  exp2(): Tensor {
    return ops.ew.exp2(this);
  }
  /**
   * The method form of `gyre.log(this, ...)`: see `log` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).log();
   * ```
   */
  log(): Tensor {
    return ops.ew.log(this);
  }
  /**
   * The method form of `gyre.log2(this, ...)`: see `log2` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).log2();
   * ```
   */
  log2(): Tensor {
    return ops.ew.log2(this);
  }
  /**
   * The method form of `gyre.log1p(this, ...)`: see `log1p` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).log1p();
   * ```
   */
  log1p(): Tensor {
    return ops.ew.log1p(this);
  }
  /**
   * The method form of `gyre.expm1(this, ...)`: see `expm1` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).expm1();
   * ```
   */
  expm1(): Tensor {
    return ops.ew.expm1(this);
  }
  /**
   * The method form of `gyre.sqrt(this, ...)`: see `sqrt` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).sqrt();
   * ```
   */
  sqrt(): Tensor {
    return ops.ew.sqrt(this);
  }
  /**
   * The method form of `gyre.rsqrt(this, ...)`: see `rsqrt` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).rsqrt();
   * ```
   */
  rsqrt(): Tensor {
    return ops.ew.rsqrt(this);
  }
  /**
   * The method form of `gyre.square(this, ...)`: see `square` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).square();
   * ```
   */
  square(): Tensor {
    return ops.ew.square(this);
  }
  /**
   * The method form of `gyre.reciprocal(this, ...)`: see `reciprocal` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).reciprocal();
   * ```
   */
  reciprocal(): Tensor {
    return ops.ew.reciprocal(this);
  }
  /**
   * The method form of `gyre.sin(this, ...)`: see `sin` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).sin();
   * ```
   */
  sin(): Tensor {
    return ops.ew.sin(this);
  }
  /**
   * The method form of `gyre.cos(this, ...)`: see `cos` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).cos();
   * ```
   */
  cos(): Tensor {
    return ops.ew.cos(this);
  }
  /**
   * The method form of `gyre.tan(this, ...)`: see `tan` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).tan();
   * ```
   */
  tan(): Tensor {
    return ops.ew.tan(this);
  }
  /**
   * The method form of `gyre.tanh(this, ...)`: see `tanh` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).tanh();
   * ```
   */
  tanh(): Tensor {
    return ops.ew.tanh(this);
  }
  /**
   * The method form of `gyre.sigmoid(this, ...)`: see `sigmoid` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).sigmoid();
   * ```
   */
  sigmoid(): Tensor {
    return ops.ew.sigmoid(this);
  }
  /**
   * The method form of `gyre.erf(this, ...)`: see `erf` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).erf();
   * ```
   */
  erf(): Tensor {
    return ops.ew.erf(this);
  }
  /**
   * The method form of `gyre.floor(this, ...)`: see `floor` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).floor();
   * ```
   */
  floor(): Tensor {
    return ops.ew.floor(this);
  }
  /**
   * The method form of `gyre.ceil(this, ...)`: see `ceil` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).ceil();
   * ```
   */
  ceil(): Tensor {
    return ops.ew.ceil(this);
  }
  /**
   * The method form of `gyre.round(this, ...)`: see `round` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).round();
   * ```
   */
  round(): Tensor {
    return ops.ew.round(this);
  }
  /**
   * The method form of `gyre.clip(this, ...)`: see `clip` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).clip(0, 1);
   * ```
   */
  clip(min?: number | null, max?: number | null): Tensor {
    return ops.ew.clip(this, min, max);
  }
  /**
   * The method form of `gyre.cast(this, ...)`: see `cast` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).where(gyre.tensor([true, false, true]), 0);
   * ```
   */
  where(condition: TensorLike, other: TensorLike): Tensor {
    return ops.ew.where(condition, this, other);
  }
  /**
   * The method form of `gyre.cast(this, ...)`: see `cast` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).cast("int32");
   * ```
   */
  cast(dtype: DType): Tensor {
    return ops.ew.cast(this, dtype);
  }

  // Reductions.
  /**
   * The method form of `gyre.sum(this, ...)`: see `sum` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([[1, 2], [3, 4]]).sum({ axis: 0 });
   * ```
   */
  sum(options?: ReduceOptions): Tensor {
    return ops.red.sum(this, options);
  }
  /**
   * The method form of `gyre.max(this, ...)`: see `max` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([[1, 2], [3, 4]]).max({ axis: 1, keepdims: true });
   * ```
   */
  max(options?: ReduceOptions): Tensor {
    return ops.red.max(this, options);
  }
  /**
   * The method form of `gyre.min(this, ...)`: see `min` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([[1, 2], [3, 4]]).min();
   * ```
   */
  min(options?: ReduceOptions): Tensor {
    return ops.red.min(this, options);
  }
  /**
   * The method form of `gyre.prod(this, ...)`: see `prod` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([[1, 2], [3, 4]]).prod();
   * ```
   */
  prod(options?: ReduceOptions): Tensor {
    return ops.red.prod(this, options);
  }
  /**
   * The method form of `gyre.mean(this, ...)`: see `mean` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([[1, 2], [3, 4]]).mean({ axis: 0 });
   * ```
   */
  mean(options?: ReduceOptions): Tensor {
    return ops.red.mean(this, options);
  }

  /**
   * The method form of `gyre.argmax(this, ...)`: see `argmax` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([[1, 2], [3, 4]]).argmax({ axis: 1 });
   * ```
   */
  argmax(options?: ArgReduceOptions): Tensor {
    return ops.red.argmax(this, options);
  }
  /**
   * The method form of `gyre.argmin(this, ...)`: see `argmin` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([[1, 2], [3, 4]]).argmin();
   * ```
   */
  argmin(options?: ArgReduceOptions): Tensor {
    return ops.red.argmin(this, options);
  }
  /**
   * The method form of `gyre.all(this, ...)`: see `all` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([true, false]).all();
   * ```
   */
  all(options?: ReduceOptions): Tensor {
    return ops.red.all(this, options);
  }
  /**
   * The method form of `gyre.any(this, ...)`: see `any` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([true, false]).any();
   * ```
   */
  any(options?: ReduceOptions): Tensor {
    return ops.red.any(this, options);
  }
  /**
   * The method form of `gyre.logsumexp(this, ...)`: see `logsumexp` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([[1, 2], [3, 4]]).logsumexp({ axis: 1 });
   * ```
   */
  logsumexp(options?: ReduceOptions): Tensor {
    return ops.red.logsumexp(this, options);
  }
  /**
   * The method form of `gyre.variance(this, ...)`: see `variance` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([[1, 2], [3, 4]]).variance({ ddof: 1 });
   * ```
   */
  variance(options?: VarianceOptions): Tensor {
    return ops.red.variance(this, options);
  }
  /**
   * The method form of `gyre.std(this, ...)`: see `std` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([[1, 2], [3, 4]]).std();
   * ```
   */
  std(options?: VarianceOptions): Tensor {
    return ops.red.std(this, options);
  }

  // Activations.
  /**
   * The method form of `gyre.relu(this, ...)`: see `relu` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).relu();
   * ```
   */
  relu(): Tensor {
    return ops.act.relu(this);
  }
  /**
   * The method form of `gyre.gelu(this, ...)`: see `gelu` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).gelu({ approximate: "tanh" });
   * ```
   */
  gelu(options?: GeluOptions): Tensor {
    return ops.act.gelu(this, options);
  }
  /**
   * The method form of `gyre.silu(this, ...)`: see `silu` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).silu();
   * ```
   */
  silu(): Tensor {
    return ops.act.silu(this);
  }
  /**
   * The method form of `gyre.mish(this, ...)`: see `mish` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).mish();
   * ```
   */
  mish(): Tensor {
    return ops.act.mish(this);
  }
  /**
   * The method form of `gyre.hardswish(this, ...)`: see `hardswish` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).hardswish();
   * ```
   */
  hardswish(): Tensor {
    return ops.act.hardswish(this);
  }
  /**
   * The method form of `gyre.hardsigmoid(this, ...)`: see `hardsigmoid` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).hardsigmoid();
   * ```
   */
  hardsigmoid(): Tensor {
    return ops.act.hardsigmoid(this);
  }
  /**
   * The method form of `gyre.leakyRelu(this, ...)`: see `leakyRelu` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).leakyRelu({ alpha: 0.1 });
   * ```
   */
  leakyRelu(options?: { alpha?: number }): Tensor {
    return ops.act.leakyRelu(this, options);
  }
  /**
   * The method form of `gyre.elu(this, ...)`: see `elu` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).elu({ alpha: 1 });
   * ```
   */
  elu(options?: { alpha?: number }): Tensor {
    return ops.act.elu(this, options);
  }
  /**
   * The method form of `gyre.selu(this, ...)`: see `selu` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).selu();
   * ```
   */
  selu(): Tensor {
    return ops.act.selu(this);
  }
  /**
   * The method form of `gyre.softplus(this, ...)`: see `softplus` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).softplus({ beta: 1 });
   * ```
   */
  softplus(options?: { beta?: number; threshold?: number }): Tensor {
    return ops.act.softplus(this, options);
  }
  /**
   * The method form of `gyre.softsign(this, ...)`: see `softsign` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([0.5, 1, 2]).softsign();
   * ```
   */
  softsign(): Tensor {
    return ops.act.softsign(this);
  }

  // Softmax and normalisation.
  /**
   * The method form of `gyre.softmax(this, ...)`: see `softmax` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([[1, 2], [3, 4]]).softmax({ axis: -1 });
   * ```
   */
  softmax(options?: norm.SoftmaxOptions): Tensor {
    return ops.norm.softmax(this, options);
  }
  /**
   * The method form of `gyre.logSoftmax(this, ...)`: see `logSoftmax` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([[1, 2], [3, 4]]).logSoftmax();
   * ```
   */
  logSoftmax(options?: norm.SoftmaxOptions): Tensor {
    return ops.norm.logSoftmax(this, options);
  }
  /**
   * The method form of `gyre.layerNorm(this, ...)`: see `layerNorm` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([[1, 2], [3, 4]]).layerNorm();
   * ```
   */
  layerNorm(options?: norm.LayerNormOptions): Tensor {
    return ops.norm.layerNorm(this, options);
  }
  /**
   * The method form of `gyre.rmsNorm(this, ...)`: see `rmsNorm` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([[1, 2], [3, 4]]).rmsNorm();
   * ```
   */
  rmsNorm(options?: norm.RmsNormOptions): Tensor {
    return ops.norm.rmsNorm(this, options);
  }
  /**
   * The method form of `gyre.groupNorm(this, ...)`: see `groupNorm` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.ones([1, 2, 4, 4]).groupNorm({ groups: 2 });
   * ```
   */
  groupNorm(options: norm.GroupNormOptions): Tensor {
    return ops.norm.groupNorm(this, options);
  }
  /**
   * The method form of `gyre.batchNorm(this, ...)`: see `batchNorm` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.ones([1, 2, 4, 4]).batchNorm({ training: true }).output;
   * ```
   */
  batchNorm(options: norm.BatchNormOptions & { training: true }): norm.BatchNormTrainingResult;
  /**
   * The method form of `gyre.batchNorm(this, ...)`: see `batchNorm` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.ones([1, 2, 4, 4]).batchNorm({ training: true }).output;
   * ```
   */
  batchNorm(options?: norm.BatchNormOptions & { training?: false }): Tensor;
  /**
   * The method form of `gyre.batchNorm(this, ...)`: see `batchNorm` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.ones([1, 2, 4, 4]).batchNorm({ training: true }).output;
   * ```
   */
  batchNorm(options: norm.BatchNormOptions = {}): Tensor | norm.BatchNormTrainingResult {
    return ops.norm.batchNorm(this, options);
  }

  // Scans.
  /**
   * The method form of `gyre.cumsum(this, ...)`: see `cumsum` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([[1, 2], [3, 4]]).cumsum({ axis: 1 });
   * ```
   */
  cumsum(options?: scan.ScanOptions): Tensor {
    return ops.scan.cumsum(this, options);
  }
  /**
   * The method form of `gyre.cumprod(this, ...)`: see `cumprod` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([[1, 2], [3, 4]]).cumprod();
   * ```
   */
  cumprod(options?: scan.ScanOptions): Tensor {
    return ops.scan.cumprod(this, options);
  }
  /**
   * The method form of `gyre.cummax(this, ...)`: see `cummax` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([[1, 2], [3, 4]]).cummax();
   * ```
   */
  cummax(options?: scan.ScanOptions): Tensor {
    return ops.scan.cummax(this, options);
  }
  /**
   * The method form of `gyre.cummin(this, ...)`: see `cummin` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([[1, 2], [3, 4]]).cummin({ reverse: true });
   * ```
   */
  cummin(options?: scan.ScanOptions): Tensor {
    return ops.scan.cummin(this, options);
  }

  // Sorting and order statistics.
  /**
   * The method form of `gyre.sort(this, options)`: see `sort` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * gyre.tensor([3, 1, 2]).sort(); // [1, 2, 3]
   * ```
   */
  sort(options?: sort.SortOptions): Tensor {
    return ops.sort.sort(this, options);
  }
  /**
   * The method form of `gyre.argsort(this, options)`: see `argsort` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * gyre.tensor([3, 1, 2]).argsort(); // [1, 2, 0]
   * ```
   */
  argsort(options?: sort.SortOptions): Tensor {
    return ops.sort.argsort(this, options);
  }
  /**
   * The method form of `gyre.rankK(this, k, options)`: see `rankK` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const [values, indices] = gyre.tensor([5, 1, 4]).rankK(2, { kind: "bottom" }); // [1, 4]
   * ```
   */
  rankK(k: number, options?: sort.RankKOptions): [Tensor, Tensor] {
    return ops.sort.rankK(this, k, options);
  }
  /**
   * The method form of `gyre.topk(this, k, options)`: see `topk` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const [values, indices] = gyre.tensor([5, 1, 4]).topk(2); // [5, 4] at [0, 2]
   * ```
   */
  topk(k: number, options?: Omit<sort.RankKOptions, "kind">): [Tensor, Tensor] {
    return ops.sort.topk(this, k, options);
  }
  /**
   * The method form of `gyre.bottomk(this, k, options)`: see `bottomk` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const [values, indices] = gyre.tensor([5, 1, 4]).bottomk(1); // [1] at [1]
   * ```
   */
  bottomk(k: number, options?: Omit<sort.RankKOptions, "kind">): [Tensor, Tensor] {
    return ops.sort.bottomk(this, k, options);
  }
  /**
   * The method form of `gyre.midk(this, k, options)`: see `midk` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const [values, indices] = gyre.tensor([5, 1, 4]).midk(1); // [4] at [2]
   * ```
   */
  midk(k: number, options?: Omit<sort.RankKOptions, "kind">): [Tensor, Tensor] {
    return ops.sort.midk(this, k, options);
  }
  /**
   * The method form of `gyre.kthvalue(this, k, options)`: see `kthvalue` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const [value, index] = gyre.tensor([5, 1, 4]).kthvalue(2); // 4 at 2
   * ```
   */
  kthvalue(k: number, options?: sort.OrderStatisticOptions): [Tensor, Tensor] {
    return ops.sort.kthvalue(this, k, options);
  }
  /**
   * The method form of `gyre.median(this, options)`: see `median` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const m = gyre.tensor([5, 1, 4, 2]).median(); // 3
   * ```
   */
  median(options?: sort.OrderStatisticOptions): Tensor {
    return ops.sort.median(this, options);
  }
  /**
   * The method form of `gyre.nanmedian(this, options)`: see `nanmedian` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const m = gyre.tensor([5, NaN, 4], { device: "wasm" }).nanmedian(); // 4.5
   * ```
   */
  nanmedian(options?: sort.OrderStatisticOptions): Tensor {
    return ops.sort.nanmedian(this, options);
  }
  /**
   * The method form of `gyre.quantile(this, q, options)`: see `quantile` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const q = gyre.tensor([1, 2, 3, 4]).quantile([0.25, 0.5]); // [1.75, 2.5]
   * ```
   */
  quantile(q: number | readonly number[] | Tensor, options?: sort.QuantileOptions): Tensor {
    return ops.sort.quantile(this, q, options);
  }
  /**
   * The method form of `gyre.nanquantile(this, q, options)`: see `nanquantile` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const q = gyre.tensor([1, NaN, 3], { device: "wasm" }).nanquantile(0.5); // 2
   * ```
   */
  nanquantile(q: number | readonly number[] | Tensor, options?: sort.QuantileOptions): Tensor {
    return ops.sort.nanquantile(this, q, options);
  }
  /**
   * The method form of `gyre.searchsorted(this, values, options)`: see `searchsorted` (this tensor is the sorted sequence) for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const i = gyre.tensor([1, 2, 3]).searchsorted(gyre.tensor([2.5])); // [2]
   * ```
   */
  searchsorted(values: Tensor, options?: sort.SearchSortedOptions): Tensor {
    return ops.sort.searchsorted(this, values, options);
  }

  // Integer-array indexing.
  /**
   * The method form of `gyre.at(this, ...ranges)`: NumPy indexing with one int32 index tensor
   * among basic ranges; see `at`.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const rows = gyre.arange(6).reshape([3, 2]).at(gyre.tensor([2, 0], { dtype: "int32" })); // [[4, 5], [0, 1]]
   * ```
   */
  at(...ranges: idx.AtRange[]): Tensor {
    return ops.idx.at(this, ...ranges);
  }
  /**
   * The method form of `gyre.gather(this, indices, options)` (PyTorch's gather); see `gather`.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const g = gyre.tensor([[1, 2], [3, 4]]).gather(gyre.tensor([[1], [0]], { dtype: "int32" })); // [[2], [3]]
   * ```
   */
  gather(indices: Tensor, options?: idx.AxisOption): Tensor {
    return ops.idx.gather(this, indices, options);
  }
  /**
   * The method form of `gyre.takeAlongAxis(this, indices, options)` (NumPy's); see `takeAlongAxis`.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const x = gyre.tensor([3, 1, 2]);
   * const sorted = x.takeAlongAxis(x.argsort()); // [1, 2, 3]
   * ```
   */
  takeAlongAxis(indices: Tensor, options?: idx.AxisOption): Tensor {
    return ops.idx.takeAlongAxis(this, indices, options);
  }
  /**
   * The method form of `gyre.take(this, indices, options)` (NumPy's); see `take`.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const t = gyre.tensor([5, 6, 7]).take(gyre.tensor([-1, 0], { dtype: "int32" })); // [7, 5]
   * ```
   */
  take(indices: Tensor, options?: idx.TakeOptions): Tensor {
    return ops.idx.take(this, indices, options);
  }
  /**
   * The method form of `gyre.indexSelect(this, indices, options)` (PyTorch's index_select); see
   * `indexSelect`.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const r = gyre.eye(3).indexSelect(gyre.tensor([2], { dtype: "int32" })); // [[0, 0, 1]]
   * ```
   */
  indexSelect(indices: Tensor, options?: idx.TakeOptions): Tensor {
    return ops.idx.indexSelect(this, indices, options);
  }
  /**
   * The method form of `gyre.scatter(this, indices, updates, options)`; see `scatter`.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.zeros([3]).scatter(gyre.tensor([2], { dtype: "int32" }), 9); // [0, 0, 9]
   * ```
   */
  scatter(indices: Tensor, updates: Tensor | number, options?: idx.ScatterOptions): Tensor {
    return ops.idx.scatter(this, indices, updates, options);
  }
  /**
   * The method form of `gyre.scatterAdd(this, indices, updates, options)`; see `scatterAdd`.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.zeros([2]).scatterAdd(gyre.tensor([1, 1], { dtype: "int32" }), 1); // [0, 2]
   * ```
   */
  scatterAdd(indices: Tensor, updates: Tensor | number, options?: idx.AxisOption): Tensor {
    return ops.idx.scatterAdd(this, indices, updates, options);
  }

  // Matrix products.
  /**
   * The method form of `gyre.matmul(this, ...)`: see `matmul` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([[1, 2], [3, 4]]).matmul(gyre.tensor([[1], [0]]));
   * ```
   */
  matmul(b: Tensor, options?: mm.MatmulOptions): Tensor {
    return ops.mm.matmul(this, b, options);
  }
  /**
   * The method form of `gyre.linear(this, ...)`: see `linear` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([[1, 2], [3, 4]]).linear(gyre.ones([3, 2]), { activation: "relu" });
   * ```
   */
  linear(weight: Tensor, options?: mm.LinearOptions): Tensor {
    return ops.mm.linear(this, weight, options);
  }

  // Pooling (NCHW or CHW).
  /**
   * The method form of `gyre.maxPool2d(this, ...)`: see `maxPool2d` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.ones([1, 2, 4, 4]).maxPool2d({ kernelSize: 2 });
   * ```
   */
  maxPool2d(options: pool.MaxPool2dOptions & { returnIndices: true }): pool.PoolWithIndices;
  /**
   * The method form of `gyre.maxPool2d(this, ...)`: see `maxPool2d` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.ones([1, 2, 4, 4]).maxPool2d({ kernelSize: 2 });
   * ```
   */
  maxPool2d(options: pool.MaxPool2dOptions & { returnIndices?: false }): Tensor;
  /**
   * The method form of `gyre.maxPool2d(this, ...)`: see `maxPool2d` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.ones([1, 2, 4, 4]).maxPool2d({ kernelSize: 2 });
   * ```
   */
  maxPool2d(options: pool.MaxPool2dOptions): Tensor | pool.PoolWithIndices {
    return ops.pool.maxPool2d(this, options);
  }
  /**
   * The method form of `gyre.avgPool2d(this, ...)`: see `avgPool2d` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.ones([1, 2, 4, 4]).avgPool2d({ kernelSize: 2 });
   * ```
   */
  avgPool2d(options: pool.AvgPool2dOptions): Tensor {
    return ops.pool.avgPool2d(this, options);
  }
  /**
   * The method form of `gyre.adaptiveAvgPool2d(this, ...)`: see `adaptiveAvgPool2d` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.ones([1, 2, 4, 4]).adaptiveAvgPool2d(1);
   * ```
   */
  adaptiveAvgPool2d(outputSize: pool.AdaptiveSize): Tensor {
    return ops.pool.adaptiveAvgPool2d(this, outputSize);
  }
  /**
   * The method form of `gyre.adaptiveMaxPool2d(this, ...)`: see `adaptiveMaxPool2d` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.ones([1, 2, 4, 4]).adaptiveMaxPool2d([2, 2]);
   * ```
   */
  adaptiveMaxPool2d(
    outputSize: pool.AdaptiveSize,
    options: pool.AdaptiveMaxPool2dOptions & { returnIndices: true },
  ): pool.PoolWithIndices;
  /**
   * The method form of `gyre.adaptiveMaxPool2d(this, ...)`: see `adaptiveMaxPool2d` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.ones([1, 2, 4, 4]).adaptiveMaxPool2d([2, 2]);
   * ```
   */
  adaptiveMaxPool2d(
    outputSize: pool.AdaptiveSize,
    options?: pool.AdaptiveMaxPool2dOptions & { returnIndices?: false },
  ): Tensor;
  /**
   * The method form of `gyre.adaptiveMaxPool2d(this, ...)`: see `adaptiveMaxPool2d` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.ones([1, 2, 4, 4]).adaptiveMaxPool2d([2, 2]);
   * ```
   */
  adaptiveMaxPool2d(
    outputSize: pool.AdaptiveSize,
    options: pool.AdaptiveMaxPool2dOptions = {},
  ): Tensor | pool.PoolWithIndices {
    return ops.pool.adaptiveMaxPool2d(this, outputSize, options);
  }

  // Shapes and views.
  /**
   * The method form of `gyre.reshape(this, ...)`: see `reshape` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([[1, 2], [3, 4]]).reshape([4]);
   * ```
   */
  reshape(shape: readonly number[]): Tensor {
    return ops.sh.reshape(this, shape);
  }
  /**
   * The method form of `gyre.transpose(this, ...)`: see `transpose` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([[1, 2], [3, 4]]).transpose();
   * ```
   */
  transpose(permutation?: readonly number[]): Tensor {
    return ops.sh.transpose(this, permutation);
  }
  /**
   * The method form of `gyre.expandDims(this, ...)`: see `expandDims` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([[1, 2], [3, 4]]).expandDims(0);
   * ```
   */
  expandDims(axis: number): Tensor {
    return ops.sh.expandDims(this, axis);
  }
  /**
   * The method form of `gyre.squeeze(this, ...)`: see `squeeze` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.ones([1, 3]).squeeze();
   * ```
   */
  squeeze(axis?: number | readonly number[]): Tensor {
    return ops.sh.squeeze(this, axis);
  }
  /**
   * The method form of `gyre.slice(this, ...)`: see `slice` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([[1, 2], [3, 4]]).slice([0, 1]);
   * ```
   */
  slice(...ranges: sh.SliceRange[]): Tensor {
    return ops.sh.slice(this, ...ranges);
  }
  /**
   * The method form of `gyre.broadcastTo(this, ...)`: see `broadcastTo` for the semantics and options.
   *
   * @example
   * ```ts
   * import * as gyre from "@gyre/gyre";
   * const y = gyre.tensor([1, 2]).broadcastTo([3, 2]);
   * ```
   */
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
  sort: typeof sort;
  idx: typeof idx;
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

/**
 * A tensor over fresh storage, contiguous unless `strides` say otherwise. For the library's
 * modules.
 */
export function tensorFromStorage(
  storage: Storage,
  dtype: DType,
  shape: Shape,
  strides?: readonly number[],
): Tensor {
  return new Tensor({
    storage,
    dtype,
    shape: [...shape],
    strides: strides ? [...strides] : contiguousStrides(shape),
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
  // Those of a replaced runtime cannot run any more; they stay pending until disposed.
  for (const t of [...pendingTensors]) {
    if (!access.retired(t)) viewOf(t, "flush");
  }
}
