/**
 * Creating tensors: from JS data, filled, ranges, identity. Generated values (`arange`,
 * `linspace`, `eye`) are computed on the target device from the element index.
 * @module
 */
import type { DeviceName } from "./contract/backend.ts";
import { checkShape, sizeOf } from "./core/shape.ts";
import { checkDType, type DType, hostArray, inferDType } from "./core/dtype.ts";
import { checkNumber, describe, ShapeError, ValueError } from "./core/errors.ts";
import { evaluate, type NestedArray } from "./ops/_dispatch.ts";
import { E, type Expr } from "./ir/expr.ts";
import { backendFor, runtime } from "./runtime.ts";
import { type Tensor, tensorFromStorage } from "./tensor.ts";
import { checkOptions } from "./core/options.ts";

/** The keys of {@link CreationOptions}, checked at run time. */
const CREATION_KEYS = ["dtype", "device"] as const;

/** Where and as what a new tensor is made. */
export interface CreationOptions {
  /** The element type (float32 by default). */
  dtype?: DType;
  /** "gpu" or "wasm"; the runtime's device by default. */
  device?: DeviceName;
}

/** Options of {@link tensor}. */
export interface TensorOptions extends CreationOptions {
  /** Shape for flat data (default: inferred from nesting, or `[length]`). */
  shape?: readonly number[];
}

function deviceOf(op: string, options: CreationOptions): DeviceName {
  const device = options.device ?? runtime().device;
  backendFor(device, op, "options.device");
  return device;
}

function flatten(
  op: string,
  data: NestedArray | ArrayLike<number | boolean>,
): { values: ArrayLike<number | boolean>; shape: number[] } {
  if (typeof data === "number" || typeof data === "boolean") return { values: [data], shape: [] };
  const accepted =
    "a number, a boolean, nested arrays of them, a typed array or an ArrayLike of numbers";
  if (
    data === null || data === undefined || typeof data === "string" || typeof data === "function"
  ) {
    throw new ValueError({ op, argument: "data", expected: accepted, received: describe(data) });
  }
  if (data instanceof BigInt64Array || data instanceof BigUint64Array || data instanceof DataView) {
    throw new ValueError({
      op,
      argument: "data",
      expected:
        `${accepted} (64-bit integers have no dtype here: convert to Int32Array or Float64Array)`,
      received: data.constructor.name,
    });
  }
  if (typeof data !== "object") {
    throw new ValueError({ op, argument: "data", expected: accepted, received: describe(data) });
  }
  if (ArrayBuffer.isView(data)) {
    return {
      values: data as unknown as ArrayLike<number>,
      shape: [(data as unknown as ArrayLike<number>).length],
    };
  }
  const shape: number[] = [];
  let probe: unknown = data;
  while (Array.isArray(probe)) {
    shape.push(probe.length);
    probe = probe[0];
  }
  const values: (number | boolean)[] = [];
  const walk = (node: unknown, axis: number, path: string) => {
    if (axis === shape.length) {
      if (typeof node !== "number" && typeof node !== "boolean") {
        throw new ValueError({
          op,
          argument: `data${path}`,
          expected: "a number or boolean",
          received: describe(node),
        });
      }
      values.push(node);
      return;
    }
    if (!Array.isArray(node) || node.length !== shape[axis]) {
      throw new ShapeError({
        op,
        argument: `data${path}`,
        expected: `an array of length ${shape[axis]} (nested arrays must be rectangular)`,
        received: Array.isArray(node) ? `length ${node.length}` : describe(node),
      });
    }
    node.forEach((child, i) => walk(child, axis + 1, `${path}[${i}]`));
  };
  if (!Array.isArray(data)) {
    const length = (data as ArrayLike<unknown>).length;
    if (typeof length !== "number" || !Number.isInteger(length) || length < 0) {
      throw new ValueError({ op, argument: "data", expected: accepted, received: describe(data) });
    }
    const items = data as ArrayLike<unknown>;
    for (let i = 0; i < length; i++) {
      if (typeof items[i] !== "number" && typeof items[i] !== "boolean") {
        throw new ValueError({
          op,
          argument: `data[${i}]`,
          expected: "a number or boolean",
          received: describe(items[i]),
        });
      }
    }
    return { values: data as ArrayLike<number>, shape: [length] };
  }
  walk(data, 0, "");
  return { values, shape };
}

/**
 * A tensor from JS data: a number, nested arrays, an ArrayLike or a typed array. The dtype is
 * inferred (bool for booleans, int32/uint32 for those typed arrays, else float32) unless given.
 * Numbers given as bool are true where non-zero, NaN included (NumPy).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const a = gyre.tensor([[1, 2], [3, 4]]);
 * const b = gyre.tensor(new Float32Array(6), { shape: [2, 3], device: "wasm" });
 * ```
 */
export function tensor(
  data: NestedArray | ArrayLike<number | boolean>,
  options: TensorOptions = {},
): Tensor {
  checkOptions("tensor", options, ["dtype", "device", "shape"]);
  const op = "tensor";
  const { values, shape: inferred } = flatten(op, data);
  const dtype = options.dtype
    ? checkDType(op, "options.dtype", options.dtype)
    : inferDType(ArrayBuffer.isView(data) ? data : values[0]);
  let shape = inferred;
  if (options.shape) {
    shape = checkShape(op, "options.shape", options.shape);
    if (sizeOf(shape) !== values.length) {
      throw new ShapeError({
        op,
        argument: "options.shape",
        expected: `a shape with ${values.length} elements`,
        received: describe(options.shape),
      });
    }
  }
  const host = hostArray(dtype, values.length);
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (typeof v === "number") checkIntegral(op, `data[${i}]`, dtype, v);
    // To bool, any non-zero number is true, NaN included (NumPy; NaN is falsy in JS).
    host[i] = typeof v === "boolean" ? (v ? 1 : 0) : dtype === "bool" ? (v !== 0 ? 1 : 0) : v;
  }
  const backend = backendFor(deviceOf(op, options), op);
  return tensorFromStorage(backend.upload(dtype, host), dtype, shape);
}

/** Evaluates a generator expression (of the index only) over a new tensor. */
export function generate(
  op: string,
  shape: readonly number[],
  expr: Expr,
  options: CreationOptions,
): Tensor {
  const dims = checkShape(op, "shape", shape);
  return evaluate(op, deviceOf(op, options), expr, [], dims);
}

/**
 * A tensor of `value` (float32 by default; bool for a boolean). As bool, any non-zero value is
 * true, NaN included (NumPy).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const t = gyre.full([2, 2], 7, { dtype: "int32" });
 * ```
 */
export function full(
  shape: readonly number[],
  value: number | boolean,
  options: CreationOptions = {},
): Tensor {
  checkOptions("full", options, CREATION_KEYS);
  return filled("full", shape, value, options);
}

/** Int32 and uint32 ranges: what an integer dtype can hold once a fraction is truncated. */
const INTEGER_RANGE: Partial<Record<DType, [number, number]>> = {
  int32: [-(2 ** 31), 2 ** 31 - 1],
  uint32: [0, 2 ** 32 - 1],
};

/**
 * Throws unless `value` fits the integer `dtype`: NaN, infinities and out-of-range values are
 * errors (as in NumPy 2); fractions truncate toward zero (as NumPy's conversion does).
 */
function checkIntegral(op: string, argument: string, dtype: DType, value: number): void {
  const range = INTEGER_RANGE[dtype];
  if (!range) return;
  const t = Math.trunc(value);
  if (!(t >= range[0] && t <= range[1])) {
    throw new ValueError({
      op,
      argument,
      expected: `a finite number in [${range[0]}, ${range[1]}] for ${dtype} ` +
        "(fractions truncate toward zero)",
      received: describe(value),
    });
  }
}

/** `full` under the name of the API function called (errors from `zeros` name "zeros"). */
function filled(
  op: string,
  shape: readonly number[],
  value: number | boolean,
  options: CreationOptions,
): Tensor {
  if (typeof value !== "number" && typeof value !== "boolean") {
    throw new ValueError({
      op,
      argument: "value",
      expected: "a number or a boolean",
      received: describe(value),
    });
  }
  const dtype = options.dtype
    ? checkDType(op, "options.dtype", options.dtype)
    : typeof value === "boolean"
    ? "bool"
    : "float32";
  if (typeof value === "number") checkIntegral(op, "value", dtype, value);
  return generate(
    op,
    shape,
    E.constant(typeof value === "boolean" ? (value ? 1 : 0) : value, dtype),
    options,
  );
}

/**
 * A tensor of zeros.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const z = gyre.zeros([2, 3]);
 * ```
 */
export function zeros(shape: readonly number[], options: CreationOptions = {}): Tensor {
  checkOptions("zeros", options, CREATION_KEYS);
  return filled("zeros", shape, 0, { dtype: "float32", ...options });
}

/**
 * A tensor of ones.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const o = gyre.ones([3], { dtype: "int32" });
 * ```
 */
export function ones(shape: readonly number[], options: CreationOptions = {}): Tensor {
  checkOptions("ones", options, CREATION_KEYS);
  return filled("ones", shape, 1, { dtype: "float32", ...options });
}

/**
 * Values from `start` up to (not including) `stop` by `step`, as NumPy. `arange(n)` is 0..n-1.
 * int32 when every argument is an integer, else float32.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const a = gyre.arange(5); // [0, 1, 2, 3, 4]
 * const b = gyre.arange(0, 1, 0.25); // [0, 0.25, 0.5, 0.75]
 * ```
 */
export function arange(
  start: number,
  stop?: number,
  step = 1,
  options: CreationOptions = {},
): Tensor {
  checkOptions("arange", options, CREATION_KEYS);
  const op = "arange";
  if (stop === undefined) [start, stop] = [0, start];
  for (const [name, v] of [["start", start], ["stop", stop], ["step", step]] as const) {
    if (!Number.isFinite(v)) {
      throw new ValueError({
        op,
        argument: name,
        expected: "a finite number",
        received: describe(v),
      });
    }
  }
  if (step === 0) {
    throw new ValueError({ op, argument: "step", expected: "a non-zero step", received: "0" });
  }
  const integral = [start, stop, step].every(Number.isInteger);
  const dtype = options.dtype
    ? checkDType(op, "options.dtype", options.dtype)
    : integral
    ? "int32"
    : "float32";
  const n = Math.max(0, Math.ceil((stop - start) / step));
  // Integer ranges stay exact in int32; float ranges compute start + i * step in float32.
  const ct: DType = integral && dtype !== "float16" && dtype !== "float32" ? "int32" : "float32";
  const value = E.binary(
    "add",
    E.binary("mul", E.cast(E.index(), ct), E.constant(step, ct)),
    E.constant(start, ct),
  );
  return generate(op, [n], E.cast(value, dtype), options);
}

/**
 * `num` evenly spaced values from `start` to `stop` (included unless `endpoint` is false).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const x = gyre.linspace(0, 1, 5); // [0, 0.25, 0.5, 0.75, 1]
 * ```
 */
export function linspace(
  start: number,
  stop: number,
  num: number,
  options: CreationOptions & { endpoint?: boolean } = {},
): Tensor {
  checkOptions("linspace", options, [...CREATION_KEYS, "endpoint"]);
  const op = "linspace";
  checkNumber(op, "start", start, "a number", () => true);
  checkNumber(op, "stop", stop, "a number", () => true);
  if (!Number.isInteger(num) || num < 0) {
    throw new ValueError({
      op,
      argument: "num",
      expected: "a non-negative integer",
      received: describe(num),
    });
  }
  const endpoint = options.endpoint ?? true;
  const dtype = options.dtype ? checkDType(op, "options.dtype", options.dtype) : "float32";
  const divisions = endpoint ? num - 1 : num;
  const step = divisions > 0 ? (stop - start) / divisions : 0;
  const i = E.cast(E.index(), "float32");
  let value = E.binary(
    "add",
    E.binary("mul", i, E.constant(step, "float32")),
    E.constant(start, "float32"),
  );
  // The last value is exactly `stop`, as NumPy makes it.
  if (endpoint && num > 1) {
    value = E.where(
      E.binary("equal", E.index(), E.constant(num - 1, "uint32"), "bool"),
      E.constant(stop, "float32"),
      value,
    );
  }
  return generate(op, [num], E.cast(value, dtype), options);
}

/**
 * An `n` x `m` matrix with ones on the diagonal.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const i3 = gyre.eye(3);
 * ```
 */
export function eye(n: number, m: number = n, options: CreationOptions = {}): Tensor {
  checkOptions("eye", options, CREATION_KEYS);
  const op = "eye";
  const dims = checkShape(op, "shape", [n, m]);
  const dtype = options.dtype ? checkDType(op, "options.dtype", options.dtype) : "float32";
  const columns = E.constant(Math.max(dims[1], 1), "uint32");
  const onDiagonal = E.binary(
    "equal",
    E.binary("floorDiv", E.index(), columns),
    E.binary("mod", E.index(), columns),
    "bool",
  );
  return generate(op, dims, E.cast(onDiagonal, dtype), options);
}
