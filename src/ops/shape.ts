/**
 * Shape and view ops. `reshape` (of a contiguous tensor), `transpose`, `expandDims`, `squeeze`,
 * `slice` and `broadcastTo` return views over the same storage; `concat` and `stack` write each
 * input into its slice of a new tensor.
 * @module
 */
import { taped } from "../_tape.ts";
import type { DeviceName, View } from "../contract/backend.ts";
import {
  broadcastShapes,
  checkShape,
  contiguousStrides,
  isContiguous,
  normalizeAxes,
  normalizeAxis,
  sameShape,
  sizeOf,
} from "../core/shape.ts";
import { promoteTypes } from "../core/dtype.ts";
import { describe, DeviceError, ShapeError, ValueError } from "../core/errors.ts";
import { backendFor } from "../runtime.ts";
import { planOverrides } from "../plans/overrides.ts";
import { Tensor, tensorFromStorage, viewOf } from "../tensor.ts";
import { evaluate } from "./_dispatch.ts";
import { E } from "../ir/expr.ts";
import { readAll } from "./read.ts";

function withView(x: Tensor, op: string, change: Partial<View>): Tensor {
  return new Tensor({ ...viewOf(x, op), ...change });
}

/**
 * A contiguous copy in new storage.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const c = gyre.clone(gyre.tensor([[1, 2], [3, 4]]).transpose());
 * ```
 */
export function clone(x: Tensor): Tensor {
  return taped("clone", [x], {}, () => cloneOf(x));
}

function cloneOf(x: Tensor): Tensor {
  const view = viewOf(x, "clone");
  return evaluate("clone", view.storage.backend.name, E.input(0, view.dtype), [view], view.shape);
}

/**
 * The same elements in a new shape (one axis may be -1). A view when `x` is contiguous.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.arange(6).reshape([2, -1]); // shape [2, 3]
 * ```
 */
export function reshape(x: Tensor, shape: readonly number[]): Tensor {
  return taped("reshape", [x], { shape }, () => reshapeOf(x, shape));
}

function reshapeOf(x: Tensor, shape: readonly number[]): Tensor {
  const op = "reshape";
  const view = viewOf(x, op);
  const dims = Array.from(shape);
  const unknown = dims.indexOf(-1);
  if (unknown >= 0) dims[unknown] = 0;
  checkShape(op, "shape", dims);
  const n = sizeOf(view.shape);
  if (unknown >= 0) {
    const rest = sizeOf(dims.filter((_, i) => i !== unknown));
    if (rest === 0 || n % rest !== 0) {
      throw new ShapeError({
        op,
        argument: "shape",
        expected: `a shape with ${n} elements`,
        received: describe(shape),
      });
    }
    dims[unknown] = n / rest;
  }
  if (sizeOf(dims) !== n) {
    throw new ShapeError({
      op,
      argument: "shape",
      expected: `a shape with ${n} elements`,
      received: describe(shape),
    });
  }
  if (isContiguous(view.shape, view.strides)) {
    return withView(x, op, { shape: dims, strides: contiguousStrides(dims) });
  }
  const copy = clone(x);
  try {
    return reshape(copy, dims);
  } finally {
    copy.dispose();
  }
}

/**
 * Permutes axes (reverses them by default). A view.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const t = gyre.zeros([2, 3, 4]).transpose([2, 0, 1]); // shape [4, 2, 3]
 * ```
 */
export function transpose(x: Tensor, permutation?: readonly number[]): Tensor {
  return taped("transpose", [x], { permutation }, () => transposeOf(x, permutation));
}

function transposeOf(x: Tensor, permutation?: readonly number[]): Tensor {
  const op = "transpose";
  const view = viewOf(x, op);
  const rank = view.shape.length;
  const perm = permutation ? Array.from(permutation) : [...Array(rank).keys()].reverse();
  const normalized = perm.map((a) => normalizeAxis(op, a, rank, "permutation"));
  if (perm.length !== rank || new Set(normalized).size !== rank) {
    throw new ValueError({
      op,
      argument: "permutation",
      expected: `a permutation of ${rank} axes`,
      received: describe(perm),
    });
  }
  return withView(x, op, {
    shape: normalized.map((a) => view.shape[a]),
    strides: normalized.map((a) => view.strides[a]),
  });
}

/**
 * Inserts an axis of length 1 at `axis` (in `[-rank-1, rank]`). A view.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.zeros([3]).expandDims(0); // shape [1, 3]
 * ```
 */
export function expandDims(x: Tensor, axis: number): Tensor {
  return taped("expandDims", [x], { axis }, () => expandDimsOf(x, axis));
}

function expandDimsOf(x: Tensor, axis: number): Tensor {
  const view = viewOf(x, "expandDims");
  const a = normalizeAxis("expandDims", axis, view.shape.length + 1);
  const shape = [...view.shape];
  const strides = [...view.strides];
  shape.splice(a, 0, 1);
  strides.splice(a, 0, 0);
  return withView(x, "expandDims", { shape, strides });
}

/**
 * Removes axes of length 1 (all of them, or those named, which must have length 1). A view.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.zeros([1, 3, 1]).squeeze(); // shape [3]
 * ```
 */
export function squeeze(x: Tensor, axis?: number | readonly number[]): Tensor {
  return taped("squeeze", [x], { axis }, () => squeezeOf(x, axis));
}

function squeezeOf(x: Tensor, axis?: number | readonly number[]): Tensor {
  const op = "squeeze";
  const view = viewOf(x, op);
  const axes = axis === undefined
    ? view.shape.flatMap((d, i) => (d === 1 ? [i] : []))
    : normalizeAxes(op, axis, view.shape.length);
  for (const a of axes) {
    if (view.shape[a] !== 1) {
      throw new ShapeError({
        op,
        argument: "axis",
        expected: `axis ${a} of length 1`,
        received: `length ${view.shape[a]}`,
      });
    }
  }
  return withView(x, op, {
    shape: view.shape.filter((_, i) => !axes.includes(i)),
    strides: view.strides.filter((_, i) => !axes.includes(i)),
  });
}

/** One axis of a slice: an index (drops the axis), null (all of it) or `[start, end, step]`. */
export type SliceRange =
  | number
  | null
  | undefined
  | readonly [number?, number?, number?]
  | readonly (number | null)[];

/**
 * NumPy basic indexing as a view: `x.slice(0, [1, 3], null, [null, null, -1])` is
 * `x[0, 1:3, :, ::-1]`. Missing trailing ranges take whole axes; bounds clamp as in NumPy.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.arange(10).slice([2, 8, 2]); // [2, 4, 6]
 * ```
 */
export function slice(x: Tensor, ...ranges: SliceRange[]): Tensor {
  return taped("slice", [x], { ranges }, () => sliceOf(x, ...ranges));
}

function sliceOf(x: Tensor, ...ranges: SliceRange[]): Tensor {
  const op = "slice";
  const view = viewOf(x, op);
  const rank = view.shape.length;
  if (ranges.length > rank) {
    throw new ValueError({
      op,
      argument: "ranges",
      expected: `at most ${rank} ranges`,
      received: `${ranges.length}`,
    });
  }
  let offset = view.offset;
  const shape: number[] = [];
  const strides: number[] = [];
  for (let axis = 0; axis < rank; axis++) {
    const r = ranges[axis];
    const dim = view.shape[axis];
    const stride = view.strides[axis];
    if (typeof r === "number") {
      if (!Number.isInteger(r) || r < -dim || r >= dim) {
        throw new ValueError({
          op,
          argument: `ranges[${axis}]`,
          expected: `an integer index in [${-dim}, ${dim})`,
          received: describe(r),
        });
      }
      offset += (r < 0 ? r + dim : r) * stride;
      continue;
    }
    if (r !== null && r !== undefined && !Array.isArray(r)) {
      throw new ValueError({
        op,
        argument: `ranges[${axis}]`,
        expected: "an index, a [start, end, step] array, or null",
        received: describe(r),
      });
    }
    const [startArg, endArg, stepArg] = (r ?? []) as readonly (number | null | undefined)[];
    const step = stepArg ?? 1;
    if (!Number.isInteger(step) || step === 0) {
      throw new ValueError({
        op,
        argument: `ranges[${axis}][2]`,
        expected: "a non-zero integer step",
        received: describe(step),
      });
    }
    const clampIndex = (
      v: number | null | undefined,
      fallback: number,
      low: number,
      high: number,
    ) => {
      if (v === null || v === undefined) return fallback;
      if (!Number.isInteger(v)) {
        throw new ValueError({
          op,
          argument: `ranges[${axis}]`,
          expected: "integer bounds",
          received: describe(v),
        });
      }
      const i = v < 0 ? v + dim : v;
      return Math.min(Math.max(i, low), high);
    };
    const start = step > 0
      ? clampIndex(startArg, 0, 0, dim)
      : clampIndex(startArg, dim - 1, -1, dim - 1);
    const end = step > 0 ? clampIndex(endArg, dim, 0, dim) : clampIndex(endArg, -1, -1, dim - 1);
    const length = Math.max(0, Math.ceil((end - start) / step));
    if (length > 0) offset += start * stride;
    shape.push(length);
    strides.push(stride * step);
  }
  return withView(x, op, { shape, strides, offset });
}

/**
 * A view of `x` broadcast to `shape` (stride 0 along stretched axes).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.tensor([1, 2, 3]).broadcastTo([2, 3]);
 * ```
 */
export function broadcastTo(x: Tensor, shape: readonly number[]): Tensor {
  return taped("broadcastTo", [x], { shape }, () => broadcastToOf(x, shape));
}

function broadcastToOf(x: Tensor, shape: readonly number[]): Tensor {
  const op = "broadcastTo";
  const view = viewOf(x, op);
  const target = checkShape(op, "shape", shape);
  if (!sameShape(broadcastShapes(op, target, view.shape, "x"), target)) {
    throw new ShapeError({
      op,
      argument: "shape",
      expected: `a shape that ${describe(view.shape)} broadcasts to`,
      received: describe(shape),
    });
  }
  const lead = target.length - view.shape.length;
  const strides = target.map((d, i) => {
    const j = i - lead;
    return j < 0 || (view.shape[j] === 1 && d !== 1) ? 0 : view.strides[j];
  });
  return withView(x, op, { shape: target, strides });
}

/**
 * Joins tensors along an existing axis; dtypes promote. All must be on one device.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.concat([gyre.zeros([2, 1]), gyre.ones([2, 2])], 1); // shape [2, 3]
 * ```
 */
export function concat(tensors: readonly Tensor[], axis = 0): Tensor {
  return taped(
    "concat",
    [...(Array.isArray(tensors) ? tensors : [])],
    { axis },
    () => concatOf(tensors, axis),
  );
}

function concatOf(tensors: readonly Tensor[], axis = 0): Tensor {
  const op = "concat";
  if (!Array.isArray(tensors as unknown) || tensors.length === 0) {
    throw new ValueError({
      op,
      argument: "tensors",
      expected: "a non-empty array of tensors",
      received: describe(tensors),
    });
  }
  const views = tensors.map((t) => viewOf(t, op));
  const first = views[0];
  const a = normalizeAxis(op, axis, first.shape.length);
  const device: DeviceName = first.storage.backend.name;
  let dtype = first.dtype;
  views.forEach((v, i) => {
    dtype = promoteTypes(dtype, v.dtype);
    if (v.storage.backend.name !== device) {
      throw new DeviceError({
        op,
        argument: `tensors[${i}]`,
        expected: `a tensor on "${device}"`,
        received: `one on "${v.storage.backend.name}"`,
      });
    }
    if (
      v.shape.length !== first.shape.length ||
      v.shape.some((d, k) => k !== a && d !== first.shape[k])
    ) {
      throw new ShapeError({
        op,
        argument: `tensors[${i}]`,
        expected: `shape ${describe(first.shape.map((d, k) => (k === a ? "*" : d)))}`,
        received: describe(v.shape),
      });
    }
  });
  const shape = [...first.shape];
  shape[a] = views.reduce((s, v) => s + v.shape[a], 0);
  const backend = backendFor(device, op);
  const storage = backend.allocate(op, dtype, sizeOf(shape));
  const strides = contiguousStrides(shape);
  let start = 0;
  for (const v of views) {
    if (sizeOf(v.shape) > 0) {
      const target: View = { storage, dtype, shape: v.shape, strides, offset: start * strides[a] };
      backend.evaluate({
        op,
        expr: E.cast(E.input(0, v.dtype), dtype),
        inputs: [v],
        shape: v.shape,
        out: target,
        overrides: planOverrides(),
      });
    }
    start += v.shape[a];
  }
  return tensorFromStorage(storage, dtype, shape);
}

/**
 * Joins tensors of one shape along a new axis.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.stack([gyre.zeros([3]), gyre.ones([3])], 0); // shape [2, 3]
 * ```
 */
export function stack(tensors: readonly Tensor[], axis = 0): Tensor {
  return taped(
    "stack",
    [...(Array.isArray(tensors) ? tensors : [])],
    { axis },
    () => stackOf(tensors, axis),
  );
}

function stackOf(tensors: readonly Tensor[], axis = 0): Tensor {
  const op = "stack";
  if (!Array.isArray(tensors as unknown) || tensors.length === 0) {
    throw new ValueError({
      op,
      argument: "tensors",
      expected: "a non-empty array of tensors",
      received: describe(tensors),
    });
  }
  const rank = viewOf(tensors[0], op).shape.length;
  const a = normalizeAxis(op, axis, rank + 1);
  tensors.forEach((t, i) => {
    if (!sameShape(viewOf(t, op).shape, tensors[0].shape)) {
      throw new ShapeError({
        op,
        argument: `tensors[${i}]`,
        expected: describe(tensors[0].shape),
        received: describe(t.shape),
      });
    }
  });
  const expanded = tensors.map((t) => expandDims(t, a));
  try {
    return concat(expanded, a);
  } finally {
    expanded.forEach((t) => t.dispose());
  }
}

/**
 * A copy on `device` (a new view of the same storage when already there).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const onCpu = await gyre.ones([4]).to("wasm");
 * ```
 */
export async function to(x: Tensor, device: DeviceName): Promise<Tensor> {
  const view = viewOf(x, "to");
  const backend = backendFor(device, "to");
  if (view.storage.backend === backend) return new Tensor(view);
  const [data] = await readAll([x]);
  return tensorFromStorage(backend.upload(view.dtype, data), view.dtype, view.shape);
}
