/**
 * The stack of `tidy` scopes. Every tensor made while a scope is open is recorded in the innermost
 * one, so `tidy` can dispose what its function did not return.
 * @module
 */

/** Anything a scope can dispose. */
export interface Disposable {
  dispose(): void;
  readonly isDisposed: boolean;
}

import { holds } from "./_tape.ts";

const scopes: Set<Disposable>[] = [];

/** Records a new tensor in the innermost scope, if any. */
export function track(t: Disposable): void {
  scopes[scopes.length - 1]?.add(t);
}

/** Opens a scope. */
export function openScope(): Set<Disposable> {
  const scope = new Set<Disposable>();
  scopes.push(scope);
  return scope;
}

/**
 * Closes the innermost scope, moving `kept` to the enclosing scope. Tensors an open gradient tape
 * still needs move there too (they are disposed when that scope closes).
 */
export function closeScope(scope: Set<Disposable>, kept: Set<Disposable>): void {
  if (scopes.pop() !== scope) throw new Error("internal: tidy scopes closed out of order");
  for (const t of scope) {
    if (kept.has(t) || (!t.isDisposed && holds(t))) track(t);
    else if (!t.isDisposed) t.dispose();
  }
}

/**
 * Closes the innermost scope without disposing anything: `kept` moves to the enclosing scope and
 * the other tensors are returned, owned by the caller from now on (a pullback's saved tensors).
 */
export function detachScope(scope: Set<Disposable>, kept: Set<Disposable>): Disposable[] {
  if (scopes.pop() !== scope) throw new Error("internal: tidy scopes closed out of order");
  const rest: Disposable[] = [];
  for (const t of scope) {
    if (kept.has(t)) track(t);
    else if (!t.isDisposed) rest.push(t);
  }
  return rest;
}
