/**
 * Shape arithmetic shared by every op: validation, broadcasting, strides and axis handling.
 * Internal: the public surface is the Tensor API.
 * @module
 */
import { AxisError, describe, ShapeError, ValueError } from "./errors.ts";

/** A tensor's shape: one non-negative integer per axis. */
export type Shape = readonly number[];

/** Highest rank a tensor may have; kernels carry shapes and strides in fixed-size uniforms. */
export const MAX_RANK = 8;

/** Number of elements of a shape (1 for a scalar). */
export function sizeOf(shape: Shape): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** Row-major strides, in elements, of a contiguous tensor. */
export function contiguousStrides(shape: Shape): number[] {
  const strides = new Array<number>(shape.length);
  let s = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

/**
 * Batch axes (`shape`, `strides`) whose own axes (longer than 1, stride not 0) form one run of
 * `count` matrices `stride` apart (`{ count: 1, stride: 0 }` with none), as a kernel that steps
 * one batch index through them can read; `broadcast` counts the elements of the other axes longer
 * than 1 (stride 0). Null where the own axes do not form one run with a positive stride.
 *
 * @example
 * ```ts
 * batchRun([2, 3], [30, 10]); // { count: 6, stride: 10, broadcast: 1 }
 * batchRun([2, 3], [0, 10]); // { count: 3, stride: 10, broadcast: 2 }
 * batchRun([2, 3], [10, 30]); // null
 * ```
 */
export function batchRun(
  shape: Shape,
  strides: readonly number[],
): { count: number; stride: number; broadcast: number } | null {
  const own = shape.map((_, d) => d).filter((d) => shape[d] > 1 && strides[d] !== 0);
  const broadcast = shape.reduce((total, size, d) => (strides[d] === 0 ? total * size : total), 1);
  for (let i = 0; i + 1 < own.length; i++) {
    if (strides[own[i]] !== strides[own[i + 1]] * shape[own[i + 1]]) return null;
  }
  if (own.length === 0) return { count: 1, stride: 0, broadcast };
  const stride = strides[own[own.length - 1]];
  if (stride <= 0) return null;
  return { count: own.reduce((total, d) => total * shape[d], 1), stride, broadcast };
}

/** True when `strides` lay `shape` out row-major with no gaps (axes of length 1 may have any stride). */
export function isContiguous(shape: Shape, strides: readonly number[]): boolean {
  let s = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    if (shape[i] !== 1 && strides[i] !== s) return false;
    s *= shape[i];
  }
  return true;
}

/** Checks a user-supplied shape and returns it as a plain array. */
export function checkShape(op: string, argument: string, shape: unknown): number[] {
  if (!Array.isArray(shape) && !(ArrayBuffer.isView(shape))) {
    throw new ShapeError({
      op,
      argument,
      expected: "an array of integers",
      received: describe(shape),
    });
  }
  const dims = Array.from(shape as ArrayLike<number>);
  if (dims.length > MAX_RANK) {
    throw new ShapeError({
      op,
      argument,
      expected: `at most ${MAX_RANK} axes`,
      received: `${dims.length} axes`,
    });
  }
  dims.forEach((d, i) => {
    if (typeof d !== "number" || !Number.isInteger(d) || d < 0) {
      throw new ValueError({
        op,
        argument: `${argument}[${i}]`,
        expected: "a non-negative integer",
        received: describe(d),
      });
    }
  });
  return dims;
}

/** NumPy broadcasting of two shapes. */
export function broadcastShapes(op: string, a: Shape, b: Shape, argument = "b"): number[] {
  const rank = Math.max(a.length, b.length);
  const out = new Array<number>(rank);
  for (let i = 0; i < rank; i++) {
    const da = a[a.length - rank + i] ?? 1;
    const db = b[b.length - rank + i] ?? 1;
    if (da !== db && da !== 1 && db !== 1) {
      throw new ShapeError({
        op,
        argument,
        expected: `a shape that broadcasts with ${describe(a)}`,
        received: describe(b),
      });
    }
    out[i] = da === 1 ? db : da;
  }
  return out;
}

/** Normalises one axis (negative counts from the end) and checks its range. */
export function normalizeAxis(op: string, axis: number, rank: number, argument = "axis"): number {
  if (!Number.isInteger(axis) || axis < -rank || axis >= rank) {
    throw new AxisError({
      op,
      argument,
      expected: rank === 0 ? "no axis for a scalar" : `an integer in [${-rank}, ${rank})`,
      received: describe(axis),
    });
  }
  return axis < 0 ? axis + rank : axis;
}

/** Normalises an `axis` option (undefined = all axes), sorted, rejecting repeats. */
export function normalizeAxes(
  op: string,
  axis: number | readonly number[] | undefined,
  rank: number,
  argument = "axis",
): number[] {
  if (axis === undefined || axis === null) return [...Array(rank).keys()];
  if (typeof axis !== "number" && !Array.isArray(axis)) {
    // Array.from would take a symbol, a bigint or an object for no axes at all.
    throw new AxisError({
      op,
      argument,
      expected: "an integer or an array of integers",
      received: describe(axis),
    });
  }
  const list = typeof axis === "number" ? [axis] : Array.from(axis);
  const out = list.map((a) => normalizeAxis(op, a, rank, argument));
  const seen = new Set<number>();
  for (const a of out) {
    if (seen.has(a)) {
      throw new AxisError({ op, argument, expected: "distinct axes", received: describe(list) });
    }
    seen.add(a);
  }
  return out.sort((x, y) => x - y);
}

/** True when two shapes are equal. */
export function sameShape(a: Shape, b: Shape): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

/**
 * A view's axes reordered with `axis` last: the axis order, and the shape and strides in it (the
 * rows a scan or sort walks along `axis`).
 *
 * @example
 * ```ts
 * axisLast([2, 3, 4], [12, 4, 1], 1); // { order: [0, 2, 1], shape: [2, 4, 3], strides: [12, 1, 4] }
 * ```
 */
export function axisLast(
  shape: Shape,
  strides: readonly number[],
  axis: number,
): { order: number[]; shape: number[]; strides: number[] } {
  const order = [...shape.keys()].filter((i) => i !== axis);
  order.push(axis);
  return { order, shape: order.map((i) => shape[i]), strides: order.map((i) => strides[i]) };
}

/**
 * The shape and strides that read contiguous storage laid out as `shape` in axis order `order`
 * (as {@link axisLast} gave) back in the original axis order.
 *
 * @example
 * ```ts
 * fromAxisOrder([0, 2, 1], [2, 4, 3]); // { shape: [2, 3, 4], strides: [12, 1, 3] }
 * ```
 */
export function fromAxisOrder(
  order: readonly number[],
  shape: Shape,
): { shape: number[]; strides: number[] } {
  const laid = contiguousStrides(shape);
  const original = order.map((_, i) => shape[order.indexOf(i)]);
  return { shape: original, strides: original.map((_, i) => laid[order.indexOf(i)]) };
}
