/**
 * Typed errors thrown by gyre. Each names the op, the argument, what was expected and what came,
 * so a user can fix the call without reading gyre's source.
 * @module
 */

/** Fields every {@link GyreError} carries. */
export interface GyreErrorDetails {
  /** The op or API function that refused the input, e.g. `"add"`. */
  op: string;
  /** The argument at fault, e.g. `"b"` or `"options.axis"`. */
  argument: string;
  /** What the op needed. */
  expected: string;
  /** What it got. */
  received: string;
}

/**
 * Base class of every error gyre throws on purpose.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * try { gyre.zeros([2]).add(gyre.zeros([3])); } catch (e) {
 *   if (e instanceof gyre.GyreError) console.log(e.op, e.argument);
 * }
 * ```
 */
export class GyreError extends Error implements GyreErrorDetails {
  op: string;
  argument: string;
  expected: string;
  received: string;
  /** An error from its details (the message is built from them). */
  constructor(details: GyreErrorDetails) {
    super(
      `${details.op}: argument '${details.argument}' expected ${details.expected}, received ${details.received}`,
    );
    this.name = new.target.name;
    this.op = details.op;
    this.argument = details.argument;
    this.expected = details.expected;
    this.received = details.received;
  }
}

/**
 * Shapes that do not broadcast, do not match, or are not valid shapes.
 *
 * @example
 * ```ts
 * import { ShapeError } from "@gyre/gyre";
 * const e = new ShapeError({ op: "add", argument: "b", expected: "[2]", received: "[3]" });
 * ```
 */
export class ShapeError extends GyreError {}

/**
 * An axis out of range or repeated.
 *
 * @example
 * ```ts
 * import { AxisError } from "@gyre/gyre";
 * const e = new AxisError({ op: "sum", argument: "axis", expected: "in [-2, 2)", received: "5" });
 * ```
 */
export class AxisError extends GyreError {}

/**
 * A dtype the op does not accept.
 *
 * @example
 * ```ts
 * import { DTypeError } from "@gyre/gyre";
 * const e = new DTypeError({ op: "mod", argument: "a", expected: "numeric", received: "bool" });
 * ```
 */
export class DTypeError extends GyreError {}

/**
 * A bad value for an option or a datum (not an integer, negative, wrong length).
 *
 * @example
 * ```ts
 * import { ValueError } from "@gyre/gyre";
 * const e = new ValueError({ op: "zeros", argument: "shape[0]", expected: "a non-negative integer", received: "-1" });
 * ```
 */
export class ValueError extends GyreError {}

/**
 * An index outside its axis: a gather's, a scatter's or a segment id. The WASM device throws it
 * when the op runs; the GPU finds it while the kernel runs and throws it from the next read of
 * any result (as a CUDA device assert does), naming the op; the results of that op are then
 * unspecified, and the runtime stays usable.
 *
 * @example
 * ```ts
 * import { IndexError } from "@gyre/gyre";
 * const e = new IndexError({ op: "take", argument: "indices", expected: "indices in [-3, 3)", received: "5" });
 * ```
 */
export class IndexError extends GyreError {}

/**
 * Use of a tensor after `dispose()`.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const t = gyre.zeros([2]); t.dispose();
 * try { t.add(1); } catch (e) { console.log(e instanceof gyre.DisposedError); }
 * ```
 */
export class DisposedError extends GyreError {}

/**
 * An error reported by WebGPU: a validation error, an internal error, or a lost device. `kind`
 * says which.
 *
 * @example
 * ```ts
 * import { GpuError } from "@gyre/gyre";
 * const e = new GpuError("validation", "matmul", "gpu work", "valid GPU commands", "an error");
 * console.log(e.kind);
 * ```
 */
export class GpuError extends GyreError {
  /** `"validation"`, `"internal"` or `"device-lost"` (running out of memory is an OutOfMemoryError). */
  kind: "validation" | "internal" | "device-lost";
  /** An error of `kind` from the op, argument, expectation and what came. */
  constructor(
    kind: GpuError["kind"],
    op: string,
    argument: string,
    expected: string,
    received: string,
  ) {
    super({ op, argument, expected, received });
    this.kind = kind;
  }
}

/**
 * A device's memory is exhausted, on either device; `device` says which. On WASM: a tensor larger
 * than the 4 GiB a 32-bit WebAssembly memory addresses, or no room left in it. On the GPU: a buffer
 * larger than the device binds (`maxStorageBufferBindingSize`), or WebGPU's out-of-memory error
 * for submitted work (reported at the next sync or read-back). The runtime stays usable: dispose
 * tensors and try again.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * try {
 *   gyre.zeros([1e6, 1e6], { device: "wasm" });
 * } catch (e) {
 *   if (e instanceof gyre.OutOfMemoryError) console.log(e.device); // "wasm"
 * }
 * ```
 */
export class OutOfMemoryError extends GyreError {
  /** The device whose memory ran out. */
  readonly device: "gpu" | "wasm";
  /** An error of `device` from the op, argument, expectation and what came. */
  constructor(device: "gpu" | "wasm", details: GyreErrorDetails) {
    super({ ...details, expected: `${details.expected} (${device} device)` });
    this.device = device;
  }
}

/**
 * A device that is not available (no WebGPU adapter when `device: "gpu"` was asked for).
 *
 * @example
 * ```ts
 * import { DeviceError } from "@gyre/gyre";
 * const e = new DeviceError({ op: "init", argument: "device", expected: "a WebGPU adapter", received: "none" });
 * ```
 */
export class DeviceError extends GyreError {}

/**
 * A SpiralK rule program that does not read or type-check (or a key that misses one of its
 * variables): `line` and `column` (from 1; 0 where no place in the source is at fault) say
 * where, and no part of the program is used.
 *
 * @example
 * ```ts
 * import { RuleError } from "@gyre/gyre";
 * const e = new RuleError({
 *   op: "heuristics", argument: "rules", expected: '";"', received: '"tile" at line 2, column 1',
 *   line: 2, column: 1,
 * });
 * ```
 */
export class RuleError extends GyreError {
  /** The line at fault (from 1; 0: none). */
  line: number;
  /** The column at fault (from 1; 0: none). */
  column: number;
  /** An error from its details and place. */
  constructor(details: GyreErrorDetails & { line: number; column: number }) {
    super(details);
    this.line = details.line;
    this.column = details.column;
  }
}

/** Formats a value for an error message: shapes as `[2, 3]`, strings quoted. */
export function describe(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(describe).join(", ")}]`;
  if (typeof value === "string") return JSON.stringify(value);
  if (value === null) return "null";
  if (typeof value === "object") return value.constructor?.name ?? "object";
  return String(value);
}

/**
 * `value` when it is a function, else a ValueError naming `op`, `argument` and `expected`
 * (internal: the one check of every function argument).
 */
export function checkFunction<F>(op: string, argument: string, value: F, expected: string): F {
  if (typeof value !== "function") {
    throw new ValueError({ op, argument, expected, received: describe(value) });
  }
  return value;
}

/**
 * `value` when it is a number that `accepts` takes, else a typed error naming `op`, `argument`
 * and `expected` (internal: the one check of every numeric option).
 */
export function checkNumber(
  op: string,
  argument: string,
  value: unknown,
  expected: string,
  accepts: (v: number) => boolean = (v) => !Number.isNaN(v),
): number {
  if (typeof value !== "number" || !accepts(value)) {
    throw new ValueError({ op, argument, expected, received: describe(value) });
  }
  return value;
}
