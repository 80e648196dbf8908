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

/** Closes the innermost scope, moving `kept` to the enclosing scope. */
export function closeScope(scope: Set<Disposable>, kept: Set<Disposable>): void {
  if (scopes.pop() !== scope) throw new Error("internal: tidy scopes closed out of order");
  for (const t of scope) {
    if (kept.has(t)) track(t);
    else if (!t.isDisposed) t.dispose();
  }
}
