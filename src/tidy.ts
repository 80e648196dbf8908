/**
 * `tidy`: run a function and dispose every tensor it made except those it returns.
 * @module
 */
import { closeScope, type Disposable, openScope } from "./_scope.ts";
import { checkFunction, ValueError } from "./core/errors.ts";

function collect(value: unknown, into: Set<Disposable>, seen = new Set<unknown>()): void {
  if (value === null || typeof value !== "object" || seen.has(value)) return;
  seen.add(value);
  if ("dispose" in value && "isDisposed" in value) {
    into.add(value as Disposable);
    return;
  }
  const items = Array.isArray(value)
    ? value
    : value instanceof Map
    ? [...value.values()]
    : Object.values(value);
  for (const item of items) collect(item, into, seen);
}

/**
 * Runs `fn` and disposes every tensor created inside it that is not part of its result (a tensor,
 * or arrays, maps and plain objects holding tensors). Scopes nest. If `fn` throws, everything it
 * made is disposed and the error propagates. `fn` must be synchronous.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.tidy(() => gyre.ones([3]).mul(2).add(1)); // the intermediates are freed
 * ```
 */
export function tidy<T>(fn: () => T): T {
  checkFunction("tidy", "fn", fn, "a synchronous function");
  const scope = openScope();
  let result: T;
  try {
    result = fn();
  } catch (e) {
    closeScope(scope, new Set());
    throw e;
  }
  if (result instanceof Promise) {
    // Tensors made after the first await would escape the scope, and those made before it would
    // be disposed while the function still uses them: no scope can follow an async function.
    closeScope(scope, new Set());
    result.catch(() => {}); // its rejection, if any, is not this error
    throw new ValueError({
      op: "tidy",
      argument: "fn",
      expected: "a synchronous function (tensors made after an await would escape the scope)",
      received: "a function that returned a Promise",
    });
  }
  const kept = new Set<Disposable>();
  collect(result, kept);
  closeScope(scope, kept);
  return result;
}
