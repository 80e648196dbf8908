/**
 * Reading tensors back to JS: many tensors per device in one synchronisation.
 * @module
 */
import { type Backend, backendOf, type View } from "../contract/backend.ts";
import type { Shape } from "../core/shape.ts";
import type { TypedArray } from "../core/dtype.ts";
import { type Tensor, viewOf } from "../tensor.ts";
import type { NestedArray } from "./_dispatch.ts";
import { describe, ValueError } from "../core/errors.ts";

/**
 * Reads many tensors at once: on the GPU, one staging buffer and one `mapAsync` for all of them.
 * Returns flat typed arrays (Float32Array for float16, Uint8Array for bool) in argument order.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const [a, b] = await gyre.readAll([gyre.ones([2]), gyre.zeros([3])]);
 * ```
 */
export async function readAll(tensors: readonly Tensor[]): Promise<TypedArray[]> {
  if (!Array.isArray(tensors)) {
    throw new ValueError({
      op: "readAll",
      argument: "tensors",
      expected: "an array of tensors",
      received: describe(tensors),
    });
  }
  const groups = new Map<Backend, { views: View[]; slots: number[] }>();
  tensors.forEach((t, i) => {
    const view = viewOf(t, "readAll", `tensors[${i}]`);
    const backend = backendOf(view);
    const group = groups.get(backend) ?? { views: [], slots: [] };
    group.views.push(view);
    group.slots.push(i);
    groups.set(backend, group);
  });
  const out = new Array<TypedArray>(tensors.length);
  await Promise.all(
    [...groups].map(async ([backend, group]) => {
      const arrays = await backend.read(group.views);
      group.slots.forEach((slot, k) => (out[slot] = arrays[k]));
    }),
  );
  return out;
}

/** Nests a flat array by `shape` (booleans for bool tensors). */
export function toNested(data: TypedArray, shape: Shape, asBool: boolean): NestedArray {
  const value = (i: number) => (asBool ? data[i] !== 0 : data[i]);
  if (shape.length === 0) return value(0);
  const build = (axis: number, start: number): NestedArray[] => {
    const n = shape[axis];
    const out: NestedArray[] = new Array(n);
    if (axis === shape.length - 1) {
      for (let i = 0; i < n; i++) out[i] = value(start + i);
      return out;
    }
    let stride = 1;
    for (let a = axis + 1; a < shape.length; a++) stride *= shape[a];
    for (let i = 0; i < n; i++) out[i] = build(axis + 1, start + i * stride);
    return out;
  };
  return build(0, 0);
}
