// Gathers and scatters (src/contract/indexing.ts): the WASM reference of the GPU indexing kernels
// and the CPU fallback. Both walk an iteration space whose descriptor sits at address 0:
// [rank, shape[rank], then rank strides for each operand] (in elements, signed), keeping one
// offset per operand as an odometer, so no element costs a division.
//
// An index outside its axis stops the kernel: it returns 1 and leaves the index at BAD_INDEX for
// the host's IndexError. Negative indices: 0 wraps from the end, 1 drops the element, 2 is an
// error.
//
// Float sums, means and products accumulate in f64 (`acc`, one word per output element) and round
// once: the reference is then (nearly) the exactly rounded result, which the GPU's atomics, in
// whatever order the updates meet, are compared against. Integers wrap as the GPU's atomics do;
// max and min are f32.max and f32.min (NaN wins; +0 above -0), exact on both devices.

// @ts-nocheck: AssemblyScript, compiled by asc, not by Deno.

import { f16_to_f32, f32_to_f16 } from "./math";

const F32: i32 = 0;
const F16: i32 = 1;
const I32: i32 = 2;
const U32: i32 = 3;

const NONE: i32 = 0;
const SUM: i32 = 1;
const PROD: i32 = 2;
const MAX: i32 = 3;
const MIN: i32 = 4;
const MEAN: i32 = 5;

/** Where a failing kernel leaves the index at fault. */
const BAD_INDEX: usize = 1020;
/** The odometer's coordinates (below BAD_INDEX, above the largest descriptor). */
const COORDS: usize = 960;

@inline function rank(): i32 {
  return load<i32>(0);
}
@inline function dim(d: i32): i32 {
  return load<i32>(4 + (<usize>d << 2));
}
@inline function stride(operand: i32, d: i32): i32 {
  const r = rank();
  return load<i32>(4 + (<usize>(r * (1 + operand) + d) << 2));
}

/**
 * The index at `at`, made non-negative; -1 to drop the element, -2 when out of range (then left
 * at BAD_INDEX).
 */
@inline function resolve(at: usize, length: i32, negative: i32): i32 {
  let i = load<i32>(at);
  if (negative == 3) return i < 0 || i >= length ? -1 : i;
  if (i < 0) {
    if (negative == 1) return -1;
    if (negative == 0) i += length;
  }
  if (i < 0 || i >= length) {
    store<i32>(BAD_INDEX, load<i32>(at));
    return -2;
  }
  return i;
}

/** Zeroes the odometer's coordinates. */
@inline function clearCoords(): void {
  const r = rank();
  for (let d = 0; d < r; d++) store<i32>(COORDS + (<usize>d << 2), 0);
}

/**
 * out[t] = x[xOffset + index * axisStride] for the n output elements t (operand 0: x, operand 1:
 * the indices), elements of `width` bytes (2 or 4). Returns 0, or 1 for an index out of range.
 */
export function indexing_gather(
  out: usize, x: usize, indices: usize, axisStride: i32, axisLength: i32, negative: i32,
  width: i32, n: i32,
): i32 {
  const r = rank();
  clearCoords();
  let xo: i32 = 0;
  let io: i32 = 0;
  for (let t = 0; t < n; t++) {
    const i = resolve(indices + (<usize>io << 2), axisLength, negative);
    if (i == -2) return 1;
    const src = xo + i * axisStride;
    if (width == 4) store<u32>(out + (<usize>t << 2), load<u32>(x + (<usize>src << 2)));
    else store<u16>(out + (<usize>t << 1), load<u16>(x + (<usize>src << 1)));
    for (let d = r - 1; d >= 0; d--) {
      const at = COORDS + (<usize>d << 2);
      const c = load<i32>(at) + 1;
      if (c < dim(d)) {
        store<i32>(at, c);
        xo += stride(0, d);
        io += stride(1, d);
        break;
      }
      store<i32>(at, 0);
      xo -= stride(0, d) * (dim(d) - 1);
      io -= stride(1, d) * (dim(d) - 1);
    }
  }
  return 0;
}

/** Loads element o of `out` (of dtype `kind`) as f64 (integers by their value). */
@inline function loadAs64(out: usize, o: i32, kind: i32): f64 {
  if (kind == F16) return <f64>f16_to_f32(load<u16>(out + (<usize>o << 1)));
  if (kind == I32) return <f64>load<i32>(out + (<usize>o << 2));
  if (kind == U32) return <f64>load<u32>(out + (<usize>o << 2));
  return <f64>load<f32>(out + (<usize>o << 2));
}

/** Starts f64 accumulators from the output's values (float sums, means and products). */
export function indexing_acc_init(acc: usize, out: usize, n: i32, kind: i32): void {
  for (let o = 0; o < n; o++) store<f64>(acc + (<usize>o << 3), loadAs64(out, o, kind));
}

/**
 * Combines the n updates (operand 0: updates, 1: indices, 2: the output, 3: the mask where
 * `mask` is not 0, whose false words drop their update) into `out`, or into the f64
 * accumulators `acc` where acc is not 0; counts each in `counts` (mean) where not 0. With
 * `updates` 0, each update is its position t (int32 plain stores).
 */
export function indexing_scatter(
  out: usize, acc: usize, counts: usize, updates: usize, indices: usize, mask: usize,
  axisStride: i32, axisLength: i32, negative: i32, kind: i32, reduce: i32, n: i32,
): i32 {
  const r = rank();
  clearCoords();
  let uo: i32 = 0;
  let io: i32 = 0;
  let oo: i32 = 0;
  let mo: i32 = 0;
  for (let t = 0; t < n; t++) {
    const selected = mask == 0 || load<u32>(mask + (<usize>mo << 2)) != 0;
    const i = selected ? resolve(indices + (<usize>io << 2), axisLength, negative) : -1;
    if (i == -2) return 1;
    if (i >= 0) {
      const o = oo + i * axisStride;
      if (counts != 0) store<i32>(counts + (<usize>o << 2), load<i32>(counts + (<usize>o << 2)) + 1);
      if (updates == 0) store<i32>(out + (<usize>o << 2), t);
      else if (acc != 0) {
        const a = acc + (<usize>o << 3);
        const u = loadAs64(updates + (<usize>uo << (kind == F16 ? 1 : 2)), 0, kind);
        store<f64>(a, reduce == PROD ? load<f64>(a) * u : load<f64>(a) + u);
      } else combine(out, o, updates, uo, kind, reduce);
    }
    for (let d = r - 1; d >= 0; d--) {
      const at = COORDS + (<usize>d << 2);
      const c = load<i32>(at) + 1;
      if (c < dim(d)) {
        store<i32>(at, c);
        uo += stride(0, d);
        io += stride(1, d);
        oo += stride(2, d);
        if (mask != 0) mo += stride(3, d);
        break;
      }
      store<i32>(at, 0);
      uo -= stride(0, d) * (dim(d) - 1);
      io -= stride(1, d) * (dim(d) - 1);
      oo -= stride(2, d) * (dim(d) - 1);
      if (mask != 0) mo -= stride(3, d) * (dim(d) - 1);
    }
  }
  return 0;
}

/** out[o] combined with updates[u] in the dtype itself (stores, max, min, integer sums). */
@inline function combine(out: usize, o: i32, updates: usize, u: i32, kind: i32, reduce: i32): void {
  if (kind == F16) {
    const p = out + (<usize>o << 1);
    const v = load<u16>(updates + (<usize>u << 1));
    if (reduce == NONE) { store<u16>(p, v); return; }
    const a = f16_to_f32(load<u16>(p));
    const b = f16_to_f32(v);
    store<u16>(p, f32_to_f16(reduce == MAX ? max<f32>(a, b) : min<f32>(a, b)));
    return;
  }
  const p = out + (<usize>o << 2);
  const q = updates + (<usize>u << 2);
  if (reduce == NONE) { store<u32>(p, load<u32>(q)); return; }
  if (kind == F32) {
    const a = load<f32>(p);
    const b = load<f32>(q);
    store<f32>(p, reduce == MAX ? max<f32>(a, b) : min<f32>(a, b));
  } else if (kind == I32) {
    const a = load<i32>(p);
    const b = load<i32>(q);
    store<i32>(p, reduce == MAX ? max<i32>(a, b) : reduce == MIN ? min<i32>(a, b) : reduce == PROD ? a * b : a + b);
  } else {
    const a = load<u32>(p);
    const b = load<u32>(q);
    store<u32>(p, reduce == MAX ? max<u32>(a, b) : reduce == MIN ? min<u32>(a, b) : reduce == PROD ? a * b : a + b);
  }
}

/**
 * Finishes a scatter: float accumulators rounded into `out` (a mean divided by its count, plus one
 * for the base where `withBase`), integer means divided (floor) by theirs; a mean's slot that
 * nothing reached and no base started is 0.
 */
export function indexing_finish(
  out: usize, acc: usize, counts: usize, n: i32, kind: i32, reduce: i32, withBase: i32,
): void {
  for (let o = 0; o < n; o++) {
    const c: i32 = counts != 0 ? load<i32>(counts + (<usize>o << 2)) + withBase : 1;
    if (acc != 0) {
      let v = load<f64>(acc + (<usize>o << 3));
      if (reduce == MEAN) v = c == 0 ? 0 : v / <f64>c;
      if (kind == F16) store<u16>(out + (<usize>o << 1), f32_to_f16(<f32>v));
      else store<f32>(out + (<usize>o << 2), <f32>v);
    } else if (reduce == MEAN) {
      const p = out + (<usize>o << 2);
      if (c == 0) store<i32>(p, 0);
      else if (kind == I32) {
        const s = load<i32>(p);
        const q = s / c;
        store<i32>(p, (s % c != 0 && s < 0) ? q - 1 : q);
      } else store<u32>(p, load<u32>(p) / <u32>c);
    }
  }
}
