/**
 * Shared machinery of the op functions: turning operands (tensors or JS scalars) into expression
 * leaves with NumPy broadcasting and JAX-style weak scalar typing, checking devices, and running an
 * expression on the operands' backend.
 * @module
 */
import type { DeviceName, View } from "../contract/backend.ts";
import { broadcastShapes, sameShape, type Shape, sizeOf } from "../core/shape.ts";
import { type DType, promoteTypes, weakScalarType } from "../core/dtype.ts";
import { describe, DeviceError, ValueError } from "../core/errors.ts";
import { backendFor, runtime } from "../runtime.ts";
import { metaOf, pendingOf, Tensor, viewOf } from "../tensor.ts";
import { E, type Expr, substitute } from "../ir/expr.ts";
import { makePending, type Pending, remapViews } from "../_lazy.ts";

/** A tensor or a JS scalar standing for one. */
export type TensorLike = Tensor | number | boolean;

/** Nested JS arrays, as `array()` returns and `tensor()` takes. */
export type NestedArray = number | boolean | NestedArray[];

/** One operand after inspection. */
export interface Operand {
  tensor: Tensor | null;
  scalar: number;
  dtype: DType;
  shape: Shape;
}

/**
 * Inspects operands: tensors keep their dtype; a JS scalar takes the dtype of the tensors it meets
 * (weak typing), or float32 (bool for a boolean) when it meets none.
 */
export function operands(
  op: string,
  args: readonly TensorLike[],
  names: readonly string[],
): Operand[] {
  let strong: DType | null = null;
  args.forEach((a, i) => {
    if (a instanceof Tensor) {
      const dtype = metaOf(a, op, names[i]).dtype;
      strong = strong ? promoteTypes(strong, dtype) : dtype;
    } else if (typeof a !== "number" && typeof a !== "boolean") {
      throw new ValueError({
        op,
        argument: names[i],
        expected: "a Tensor, number or boolean",
        received: describe(a),
      });
    }
  });
  return args.map((a, i) => {
    if (a instanceof Tensor) {
      const meta = metaOf(a, op, names[i]);
      return { tensor: a, scalar: 0, dtype: meta.dtype, shape: meta.shape };
    }
    const value = typeof a === "boolean" ? (a ? 1 : 0) : (a as number);
    const dtype = strong
      ? weakScalarType(a as number | boolean, strong)
      : typeof a === "boolean"
      ? "bool"
      : "float32";
    return { tensor: null, scalar: value, dtype, shape: [] };
  });
}

/** The device all tensor operands share (the default device when there are none). */
export function commonDevice(
  op: string,
  ops: readonly Operand[],
  names: readonly string[],
): DeviceName {
  let device: DeviceName | null = null;
  ops.forEach((o, i) => {
    if (!o.tensor) return;
    const d = o.tensor.device;
    if (device && d !== device) {
      throw new DeviceError({
        op,
        argument: names[i],
        expected: `a tensor on the same device as the others ("${device}"); use .to()`,
        received: `a tensor on "${d}"`,
      });
    }
    device = d;
  });
  return device ?? runtime().device;
}

/** A view of `view` broadcast to `shape` (stride 0 along new and stretched axes). */
export function broadcastView(view: View, shape: Shape): View {
  const lead = shape.length - view.shape.length;
  const strides = shape.map((d, i) => {
    const j = i - lead;
    if (j < 0) return 0;
    return view.shape[j] === 1 && d !== 1 ? 0 : view.strides[j];
  });
  return { ...view, shape: [...shape], strides };
}

/**
 * Runs an elementwise expression over operands: tensors become inputs (broadcast to the common
 * shape), scalars become constants. `build` receives one leaf per operand.
 */
export function runElementwise(
  op: string,
  args: readonly TensorLike[],
  names: readonly string[],
  build: (leaves: Expr[], dtypes: DType[]) => Expr,
): Tensor {
  const ops = operands(op, args, names);
  const device = commonDevice(op, ops, names);
  let shape: Shape = [];
  ops.forEach((o, i) => (shape = broadcastShapes(op, shape, o.shape, names[i])));
  const fusion = runtime().fusion;
  const views: View[] = [];
  const children: Pending[] = [];
  let producer: Pending["producer"] = null;
  const leaves = ops.map((o, i) => {
    if (!o.tensor) return E.constant(o.scalar, o.dtype);
    let pending = fusion ? pendingOf(o.tensor, op, names[i]) : null;
    // One producer kernel (a matrix product) per fused expression, and only at its own shape:
    // another is computed first.
    if (pending?.producer) {
      if (!sameShape(pending.shape, shape) || (producer && producer !== pending.producer)) {
        pending = null;
      } else producer = pending.producer;
    }
    if (pending && sameShape(pending.shape, shape)) {
      // Fold the producer in: its expression becomes part of ours, as it is.
      children.push(pending);
      return pending.expr;
    }
    if (pending && !pending.readsIndex) {
      // A broadcast producer: the same expression over its views broadcast to our shape.
      const remapped = remapViews(pending.expr, (v) => broadcastView(v, shape));
      views.push(...remapped.views);
      return remapped.expr;
    }
    const view = broadcastView(viewOf(o.tensor, op, names[i]), shape);
    views.push(view);
    return E.view(view, o.dtype);
  });
  return evaluateLazy(op, device, build(leaves, ops.map((o) => o.dtype)), views, shape, children);
}

/**
 * A tensor for an expression whose `input` leaves index `inputs` (views broadcast to `shape`);
 * lazy like every elementwise result.
 */
export function evaluate(
  op: string,
  device: DeviceName,
  expr: Expr,
  inputs: View[],
  shape: Shape,
): Tensor {
  const withViews = substitute(
    expr,
    (leaf) => (leaf.kind === "input" ? E.view(inputs[leaf.index], leaf.dtype) : leaf),
  );
  return evaluateLazy(op, device, withViews, [...inputs], shape);
}

/** Largest fused expression (nodes): past it a kernel's compile time outweighs the gain. */
export const MAX_FUSED_NODES = 96;
/** Most inputs one fused kernel reads (storage bindings; WebGPU guarantees 8 per stage). */
export const MAX_FUSED_INPUTS = 7;

/**
 * A tensor for an expression over `views` (leaves of kind "view", already broadcast to `shape`)
 * and folded pending `children`: pending while fusion is on and the kernel stays small enough
 * (so consumers can fold it in), else computed now.
 */
export function evaluateLazy(
  op: string,
  device: DeviceName,
  expr: Expr,
  views: View[],
  shape: Shape,
  children: Pending[] = [],
): Tensor {
  const backend = backendFor(device, op);
  backend.checkAllocation(op, expr.dtype, sizeOf(shape));
  const pending = makePending(op, backend, expr, shape, views, children);
  const tensor = new Tensor(pending);
  // Too big to grow further (or fusion off): computed now, as one kernel.
  if (!runtime().fusion || pending.inputs > MAX_FUSED_INPUTS || pending.nodes > MAX_FUSED_NODES) {
    tensor.realize();
  }
  return tensor;
}
