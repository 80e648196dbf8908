/**
 * Option objects checked at run time: a misspelled key (`{ axes: 0 }` for `{ axis: 0 }`) is an
 * error naming the op, the key and the keys the op accepts, with the nearest one suggested, rather
 * than an option silently left at its default.
 * @module
 */
import { describe, ValueError } from "./errors.ts";

/** Edit distance, for suggesting the accepted key nearest a misspelled one. */
function distance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let previous = row[0];
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const here = row[j];
      row[j] = Math.min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] === b[j - 1] ? 0 : 1));
      previous = here;
    }
  }
  return row[b.length];
}

/** The accepted key a misspelling most likely meant, if one is near enough. */
export function nearestKey(key: string, accepted: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of accepted) {
    const [k, c] = [key.toLowerCase(), candidate.toLowerCase()];
    // Same letters in another case, or one a prefix of the other ("epsilon" for "eps").
    const d = k === c ? 0 : k.startsWith(c) || c.startsWith(k) ? 1 : distance(key, candidate);
    if (d < bestDistance) [best, bestDistance] = [candidate, d];
  }
  return bestDistance <= Math.max(1, Math.floor(key.length / 3)) ? best : undefined;
}

/**
 * Checks that `options` is undefined or a plain object whose keys are all `accepted`; returns it
 * (or `{}`) typed as given. Keys whose value is `undefined` count as absent only if accepted.
 */
export function checkOptions<T extends object>(
  op: string,
  options: T | undefined,
  accepted: readonly string[],
  argument = "options",
): T {
  if (options === undefined) return {} as T;
  if (options === null || typeof options !== "object" || Array.isArray(options)) {
    throw new ValueError({
      op,
      argument,
      expected: `an object with keys among ${accepted.map((k) => `"${k}"`).join(", ")}`,
      received: describe(options),
    });
  }
  for (const key of Object.keys(options)) {
    if (accepted.includes(key)) continue;
    const near = nearestKey(key, accepted);
    throw new ValueError({
      op,
      argument: `${argument}.${key}`,
      expected: (near ? `"${near}" (a misspelling?); ` : "") +
        `an option among ${accepted.map((k) => `"${k}"`).join(", ")}`,
      received: `an unknown option "${key}"`,
    });
  }
  return options;
}

/**
 * Checks that an option is a boolean or absent (undefined): a ValueError naming `op` and
 * `argument` otherwise.
 */
export function checkBooleanOption(op: string, argument: string, value: unknown): void {
  if (value !== undefined && typeof value !== "boolean") {
    throw new ValueError({ op, argument, expected: "a boolean", received: describe(value) });
  }
}
