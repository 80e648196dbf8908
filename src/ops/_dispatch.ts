/**
 * Shared machinery of the op functions: turning operands (tensors or JS scalars) into expression
 * leaves with NumPy broadcasting and JAX-style weak scalar typing, checking devices, and running an
 * expression on the operands' backend.
 * @module
 */
import type { DeviceName, View } from "../_backend.ts";
import { broadcastShapes, type Shape } from "../_shape.ts";
import { type DType, promoteTypes, weakScalarType } from "../dtype.ts";
import { describe, DeviceError, ValueError } from "../errors.ts";
import { runtime } from "../runtime.ts";
import { Tensor } from "../tensor.ts";
import { E, type Expr } from "./_expr.ts";

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
      const dtype = a._view(op, names[i]).dtype;
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
  return args.map((a) => {
    if (a instanceof Tensor) {
      const view = a._view(op);
      return { tensor: a, scalar: 0, dtype: view.dtype, shape: view.shape };
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
  const inputs: View[] = [];
  const leaves = ops.map((o) => {
    if (!o.tensor) return E.constant(o.scalar, o.dtype);
    inputs.push(broadcastView(o.tensor._view(op), shape));
    return E.input(inputs.length - 1, o.dtype);
  });
  const expr = build(leaves, ops.map((o) => o.dtype));
  return evaluate(op, device, expr, inputs, shape);
}

/** Evaluates an expression on a device into a new tensor. */
export function evaluate(
  op: string,
  device: DeviceName,
  expr: Expr,
  inputs: View[],
  shape: Shape,
): Tensor {
  const backend = runtime().backend(device, op);
  const storage = backend.evaluate(op, expr, inputs, shape);
  return Tensor._fromStorage(storage, expr.dtype, shape);
}
