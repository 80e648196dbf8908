/**
 * The tuner's results on disk (issue 24, part 2): one JSON file per device fingerprint in the
 * user's cache folder (`$XDG_CACHE_HOME/gyre`, else `~/.cache/gyre`; `GYRE_TUNING_CACHE` names
 * another folder), versioned, written whole and atomically under a lock, so concurrent tuners do
 * not lose each other's rows. A file that does not read, is of another format version or of
 * another fingerprint is ignored with one warning: a cache never breaks a computation.
 * @module
 */
import type { DeviceFingerprint } from "./fingerprint.ts";
import { readFileOrNull, withFileLock, writeFileAtomic } from "./_files.ts";
import { envVar as env, messageOf, warnOnce } from "./_env.ts";

/** The cache files' format version; files of any other are ignored (and rewritten). */
export const TUNING_CACHE_VERSION = 1;

/** A key's fields and a choice's: numbers, booleans and strings. */
export type TuningFields = Readonly<Record<string, number | boolean | string>>;

/** One measured key of a family: the winning choice and its time. */
export interface TuningEntry {
  /** The family's key (its fields, sizes in power-of-two buckets). */
  key: TuningFields;
  /** The choice that measured fastest. */
  choice: TuningFields;
  /** Its median time, in microseconds. */
  us: number;
  /** When it was measured (ISO 8601). */
  measured: string;
}

/** A cache file's content. */
export interface TuningCache {
  /** The format version, {@link TUNING_CACHE_VERSION}. */
  version: number;
  /** The fingerprint id the results belong to. */
  fingerprint: string;
  /** Entries by family, one per key. */
  families: Record<string, TuningEntry[]>;
}

/**
 * The cache file of a fingerprint.
 *
 * @example
 * ```ts
 * import { deviceFingerprint, tuningCachePath } from "@gyre/gyre/tuning";
 * tuningCachePath(deviceFingerprint(null)); // e.g. "/home/me/.cache/gyre/tuning-....json"
 * ```
 */
export function tuningCachePath(fingerprint: Pick<DeviceFingerprint, "id">): string {
  const cacheHome = env("XDG_CACHE_HOME");
  const folder = env("GYRE_TUNING_CACHE") ??
    (cacheHome ? `${cacheHome}/gyre` : `${env("HOME") ?? "."}/.cache/gyre`);
  return `${folder}/tuning-${fingerprint.id}.json`;
}

/** One warning a file, however often it is read. */
function warnIgnored(path: string, why: string): void {
  warnOnce(path, `gyre: ignoring the tuning cache ${path}: ${why}`);
}

/** The entries of a parsed file, or a reason to ignore it. */
function validate(data: unknown, fingerprint: string): TuningCache | string {
  if (typeof data !== "object" || data === null) return "not a JSON object";
  const c = data as Partial<TuningCache>;
  if (c.version !== TUNING_CACHE_VERSION) {
    return `format version ${JSON.stringify(c.version)}, not ${TUNING_CACHE_VERSION}`;
  }
  if (c.fingerprint !== fingerprint) return `fingerprint ${JSON.stringify(c.fingerprint)}`;
  if (typeof c.families !== "object" || c.families === null) return "no families";
  for (const [family, entries] of Object.entries(c.families)) {
    const ok = Array.isArray(entries) &&
      entries.every((e) =>
        typeof e === "object" && e !== null && typeof e.key === "object" && e.key !== null &&
        typeof e.choice === "object" && e.choice !== null && typeof e.us === "number" &&
        Number.isFinite(e.us) && typeof e.measured === "string"
      );
    if (!ok) return `a malformed entry of ${family}`;
  }
  return c as TuningCache;
}

/**
 * The tuning results of a fingerprint: empty where there are none, or where the file is unusable
 * (then one warning names it and why).
 *
 * @example
 * ```ts
 * import { deviceFingerprint, readTuningCache } from "@gyre/gyre/tuning";
 * const cache = await readTuningCache(deviceFingerprint(null));
 * Object.keys(cache.families); // the families tuned on this device
 * ```
 */
export async function readTuningCache(
  fingerprint: Pick<DeviceFingerprint, "id">,
  path: string = tuningCachePath(fingerprint),
): Promise<TuningCache> {
  const empty: TuningCache = {
    version: TUNING_CACHE_VERSION,
    fingerprint: fingerprint.id,
    families: {},
  };
  let text: string | null;
  try {
    text = await readFileOrNull(path);
  } catch (e) {
    warnIgnored(path, messageOf(e));
    return empty;
  }
  if (text === null) return empty;
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    warnIgnored(path, "not JSON");
    return empty;
  }
  const cache = validate(data, fingerprint.id);
  if (typeof cache === "string") {
    warnIgnored(path, cache);
    return empty;
  }
  return cache;
}

/**
 * Records measured entries of a family (a key measured again replaces its row), merging them
 * under the file's lock with what other tuners wrote meanwhile; an unusable file is replaced.
 *
 * @example
 * ```ts
 * import { deviceFingerprint, readTuningCache, recordTuning } from "@gyre/gyre/tuning";
 * const path = await Deno.makeTempFile({ suffix: ".json" });
 * const fp = deviceFingerprint(null);
 * await recordTuning(fp, "sort", [
 *   { key: { rows: 8, cols: 65536, k: 1024 }, choice: { variant: "radix-select" }, us: 60, measured: new Date().toISOString() },
 * ], path);
 * (await readTuningCache(fp, path)).families.sort.length; // 1
 * await Deno.remove(path);
 * ```
 */
export async function recordTuning(
  fingerprint: Pick<DeviceFingerprint, "id">,
  family: string,
  entries: readonly TuningEntry[],
  path: string = tuningCachePath(fingerprint),
): Promise<void> {
  await Deno.mkdir(path.slice(0, Math.max(0, path.lastIndexOf("/"))) || ".", { recursive: true });
  await withFileLock(path, async () => {
    const cache = await readTuningCache(fingerprint, path);
    const rows = new Map(
      (cache.families[family] ?? []).map((e) => [keyText(e.key), e] as const),
    );
    for (const e of entries) rows.set(keyText(e.key), e);
    cache.families[family] = [...rows.values()];
    await writeFileAtomic(path, JSON.stringify(cache, null, 1) + "\n");
  });
}

/** A key's canonical text (fields sorted), to compare keys. */
function keyText(key: TuningFields): string {
  return JSON.stringify(Object.entries(key).sort(([a], [b]) => (a < b ? -1 : 1)));
}
