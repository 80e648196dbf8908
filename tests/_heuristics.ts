/**
 * Shared pieces of the chooser's tests: the issue's Rank-K program, and environment variables set
 * for the length of a call.
 * @module
 */

/** Issue 24's Rank-K program, which must parse and act as written. */
export const ISSUE_PROGRAM: string = [
  "mk:   sel(sg && (k<=128), 2, sel(k<=2048, 1, 0));",
  "tile: sel(log2(c)>15.0, 2048, sel(log2(c)>13.0, 1024, sel(log2(c)>12.0, 512, 256)));",
  "ctile: sel(tile>=1024, tile/2, tile);",
  "soft(mk, 2, 0.25, sg && (k<=128));",
  "soft(tile, 2048, 0.20, log2(c)>15.0);",
].join("\n");

/** Runs `fn` with environment variables set (undefined: unset), restoring them after. */
export async function withEnv<T>(
  vars: Record<string, string | undefined>,
  fn: () => T | Promise<T>,
): Promise<T> {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, Deno.env.get(k)]));
  const apply = (values: Record<string, string | undefined>) => {
    for (const [k, v] of Object.entries(values)) {
      if (v === undefined) Deno.env.delete(k);
      else Deno.env.set(k, v);
    }
  };
  apply(vars);
  try {
    return await fn();
  } finally {
    apply(saved);
  }
}
