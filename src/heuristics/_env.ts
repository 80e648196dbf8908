/**
 * What the heuristics read of the process and how they complain: environment variables (absent
 * where unset, empty or not permitted) and warnings given once, never errors in the user's work.
 * @module
 */

/** An environment variable, or undefined where it is unset, empty or may not be read. */
export function envVar(name: string): string | undefined {
  try {
    return Deno.env.get(name) || undefined;
  } catch {
    return undefined;
  }
}

const warned = new Set<string>();

/** `console.warn(text)` the first time `key` comes (one warning a file, a source, a failure). */
export function warnOnce(key: string, text: string): void {
  if (warned.has(key)) return;
  warned.add(key);
  console.warn(text);
}

/** An error's message, or the thrown value as text. */
export function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
