/**
 * Data types, their storage on each device, and the promotion rule that binary ops follow.
 * @module
 */
import { DTypeError } from "./errors.ts";

/** The element types a tensor can hold. */
export type DType = "float32" | "float16" | "int32" | "uint32" | "bool";

/** Every dtype, in promotion order from lowest to highest. */
export const DTYPES: readonly DType[] = ["bool", "uint32", "int32", "float16", "float32"];

/** The typed array `data()` returns for each dtype (float16 reads back as Float32Array). */
export type DataFor<D extends DType> = D extends "float32" | "float16" ? Float32Array
  : D extends "int32" ? Int32Array
  : D extends "uint32" ? Uint32Array
  : Uint8Array;

/** Any typed array `data()` may return. */
export type TypedArray = Float32Array | Int32Array | Uint32Array | Uint8Array;

/**
 * Bytes one element takes in device storage. bool is stored as a 32-bit word on both devices:
 * WGSL cannot address bytes, and one layout keeps the two devices interchangeable.
 */
export function storageBytes(dtype: DType): number {
  return dtype === "float16" ? 2 : 4;
}

/** True for float32 and float16. */
export function isFloat(dtype: DType): boolean {
  return dtype === "float32" || dtype === "float16";
}

/** True for int32 and uint32. */
export function isInteger(dtype: DType): boolean {
  return dtype === "int32" || dtype === "uint32";
}

/**
 * The dtype two operands promote to: bool < uint32 < int32 < float16 < float32, with
 * int32 and uint32 meeting at int32 (there is no int64 here; JAX without x64 does the same).
 *
 * @example
 * ```ts
 * import { promoteTypes } from "@gyre/gyre";
 * promoteTypes("int32", "float16"); // "float16"
 * ```
 */
export function promoteTypes(a: DType, b: DType): DType {
  const i = DTYPES.indexOf(a);
  const j = DTYPES.indexOf(b);
  if (i < 0) checkDType("promoteTypes", "a", a);
  if (j < 0) checkDType("promoteTypes", "b", b);
  return i >= j ? a : b;
}

/**
 * The dtype a JS number takes next to a tensor of dtype `other` (JAX's weak typing): it adopts
 * the tensor's dtype unless it is fractional or non-finite and the tensor holds integers or bools.
 */
export function weakScalarType(value: number | boolean, other: DType): DType {
  if (typeof value === "boolean") return other;
  if (isFloat(other)) return other;
  if (Number.isInteger(value)) return other === "bool" ? "int32" : other;
  return "float32";
}

/** The dtype inferred for JS data with no dtype given: bool for booleans, else float32. */
export function inferDType(sample: unknown): DType {
  if (typeof sample === "boolean") return "bool";
  if (sample instanceof Int32Array) return "int32";
  if (sample instanceof Uint32Array) return "uint32";
  if (sample instanceof Uint8Array) return "bool";
  return "float32";
}

/** Checks a user-supplied dtype name. */
export function checkDType(op: string, argument: string, dtype: unknown): DType {
  if (typeof dtype === "string" && (DTYPES as readonly string[]).includes(dtype)) {
    return dtype as DType;
  }
  throw new DTypeError({
    op,
    argument,
    expected: `one of ${DTYPES.join(", ")}`,
    received: String(dtype),
  });
}

/** Allocates the host typed array for `n` elements of `dtype`. */
export function hostArray(dtype: DType, n: number): TypedArray {
  switch (dtype) {
    case "float32":
    case "float16":
      return new Float32Array(n);
    case "int32":
      return new Int32Array(n);
    case "uint32":
      return new Uint32Array(n);
    case "bool":
      return new Uint8Array(n);
  }
}

/** Converts a float32 to IEEE half bits, rounding to nearest even. */
export function f32ToF16Bits(value: number): number {
  const f32 = new Float32Array(1);
  const u32 = new Uint32Array(f32.buffer);
  f32[0] = value;
  const x = u32[0];
  const sign = (x >>> 16) & 0x8000;
  const exponent = (x >>> 23) & 0xff;
  let mantissa = x & 0x7fffff;
  if (exponent === 0xff) return sign | 0x7c00 | (mantissa ? 0x200 : 0);
  const e = exponent - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mantissa |= 0x800000;
    const shift = 14 - e;
    const half = mantissa >>> shift;
    const rest = mantissa & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    return sign | (half + (rest > halfway || (rest === halfway && (half & 1)) ? 1 : 0));
  }
  const rest = mantissa & 0x1fff;
  let half = (e << 10) | (mantissa >>> 13);
  if (rest > 0x1000 || (rest === 0x1000 && (half & 1))) half++;
  return sign | half;
}

/** Converts IEEE half bits to a number. */
export function f16BitsToF32(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >>> 10) & 0x1f;
  const mantissa = bits & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 0x1f) return mantissa ? NaN : sign * Infinity;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}
