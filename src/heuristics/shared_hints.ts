/**
 * Redis-shared hints (issue 24, part 8): with `REDIS_URL` set, tuning winners and Self-Rewrite's
 * soft rules are shared through a Redis server, keyed by device fingerprint and family; read with
 * a short local cache, written when tuned or rewritten. Without `REDIS_URL` nothing here runs and
 * the client is never imported. Redis down, slow or gone mid-run, or garbage in a key: a warning
 * at most, never an error in the user's computation, and never a local result lost (local results
 * are written first and win over shared ones).
 *
 * Layout (format 1): `gyre:1:<fingerprint>:<family>:winners`, a hash of key text to a tuning
 * entry's JSON; `gyre:1:<fingerprint>:<family>:rules`, a set of SpiralK statements.
 * @module
 */
import type { DeviceFingerprint } from "./fingerprint.ts";
import { TUNE_FAMILIES, type TuneFamilyName } from "./families.ts";
import type { TuningEntry } from "./tuning_cache.ts";
import { envVar as env, messageOf, warnOnce } from "./_env.ts";

/** The Redis client, pinned; imported only when `REDIS_URL` is set. */
const CLIENT = "npm:redis@4.7.1";
/** How long one exchange with the server may take before it is given up (ms). */
const TIMEOUT_MS = 500;
/** How long hints read from the server are reused before it is asked again (ms). */
const CACHE_MS = 30_000;

/** What the server shares for a device, by family. */
export interface SharedHints {
  /** Tuning winners, by family. */
  winners: Partial<Record<TuneFamilyName, TuningEntry[]>>;
  /** SpiralK statements (soft rules), by family. */
  rules: Partial<Record<TuneFamilyName, string[]>>;
}

interface RedisClient {
  on(event: "error", listener: (e: unknown) => void): unknown;
  connect(): Promise<unknown>;
  disconnect(): Promise<unknown>;
  hGetAll(key: string): Promise<Record<string, string>>;
  hSet(key: string, field: string, value: string): Promise<unknown>;
  sMembers(key: string): Promise<string[]>;
  sAdd(key: string, member: string): Promise<unknown>;
}

let loaded = false;
const cache = new Map<string, { at: number; hints: SharedHints }>();
function warn(what: string, why: unknown): void {
  const text = `gyre: Redis-shared hints ${what}: ${messageOf(why)}`;
  warnOnce(text, text);
}

/**
 * Whether hints are shared: `REDIS_URL` is set.
 *
 * @example
 * ```ts
 * import { sharedHintsEnabled } from "@gyre/gyre/tuning";
 * console.log(sharedHintsEnabled()); // false unless REDIS_URL is set
 * ```
 */
export function sharedHintsEnabled(): boolean {
  return env("REDIS_URL") !== undefined;
}

/**
 * Whether the Redis client was imported in this process (only ever where `REDIS_URL` is set).
 *
 * @example
 * ```ts
 * import { redisClientLoaded } from "@gyre/gyre/tuning";
 * console.log(redisClientLoaded()); // false until hints are shared
 * ```
 */
export function redisClientLoaded(): boolean {
  return loaded;
}

/**
 * Forgets the hints read before (the next read asks the server).
 *
 * @example
 * ```ts
 * import { clearSharedHintsCache } from "@gyre/gyre/tuning";
 * clearSharedHintsCache();
 * ```
 */
export function clearSharedHintsCache(): void {
  cache.clear();
}

/** Rejects after `ms`, unless `promise` settles first. */
async function deadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer in ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Runs `fn` on a fresh connection within the deadline; null (and a warning) on any failure. */
async function withClient<T>(what: string, fn: (c: RedisClient) => Promise<T>): Promise<T | null> {
  const url = env("REDIS_URL");
  if (!url) return null;
  let client: RedisClient | null = null;
  try {
    const specifier = CLIENT; // a variable: not part of the module graph unless used
    const module = await import(specifier) as {
      createClient(options: unknown): RedisClient;
    };
    loaded = true;
    client = module.createClient({
      url,
      socket: { connectTimeout: TIMEOUT_MS, reconnectStrategy: false },
    });
    // Errors reach the caller through the commands' promises; the event must not go unheard.
    client.on("error", () => {});
    const c = client;
    return await deadline(c.connect().then(() => fn(c)), TIMEOUT_MS, what);
  } catch (e) {
    warn(`could not be ${what} (${redactUrl(url)})`, e);
    return null;
  } finally {
    if (client) {
      const c = client;
      await deadline(c.disconnect(), TIMEOUT_MS, "disconnect").catch(() => {});
    }
  }
}

/** The URL without its password, for warnings. */
function redactUrl(url: string): string {
  return url.replace(/\/\/([^:@/]*):[^@/]*@/, "//$1:***@");
}

const keyOf = (fingerprint: string, family: TuneFamilyName, what: "winners" | "rules") =>
  `gyre:1:${fingerprint}:${family}:${what}`;

/** A tuning entry read from the server, or null for garbage. */
function entryOf(text: string): TuningEntry | null {
  try {
    const e = JSON.parse(text);
    const fields = (o: unknown) =>
      typeof o === "object" && o !== null && !Array.isArray(o) &&
      Object.values(o).every((v) => ["number", "boolean", "string"].includes(typeof v));
    if (
      fields(e.key) && fields(e.choice) && typeof e.us === "number" && Number.isFinite(e.us) &&
      typeof e.measured === "string"
    ) {
      return { key: e.key, choice: e.choice, us: e.us, measured: e.measured };
    }
  } catch { /* garbage */ }
  return null;
}

/**
 * The hints shared for a device (every family's winners and rules), from the server or, within
 * CACHE_MS of the last read, from memory. Garbage entries are left out with a warning; where the
 * server cannot be read, empty hints and a warning. Never throws.
 *
 * @example
 * ```ts
 * import { deviceFingerprint, readSharedHints } from "@gyre/gyre/tuning";
 * const hints = await readSharedHints(deviceFingerprint(null)); // empty without REDIS_URL
 * console.log(Object.keys(hints.winners));
 * ```
 */
export async function readSharedHints(
  fingerprint: Pick<DeviceFingerprint, "id">,
): Promise<SharedHints> {
  const empty: SharedHints = { winners: {}, rules: {} };
  if (!sharedHintsEnabled()) return empty;
  const known = cache.get(fingerprint.id);
  if (known && performance.now() - known.at < CACHE_MS) return known.hints;
  const hints = await withClient("read", async (c) => {
    const out: SharedHints = { winners: {}, rules: {} };
    let garbage = 0;
    for (const family of TUNE_FAMILIES) {
      const [winners, rules] = await Promise.all([
        c.hGetAll(keyOf(fingerprint.id, family, "winners")),
        c.sMembers(keyOf(fingerprint.id, family, "rules")),
      ]);
      const entries = Object.values(winners).map(entryOf);
      garbage += entries.filter((e) => e === null).length;
      if (entries.some((e) => e)) out.winners[family] = entries.filter((e) => e !== null);
      const texts = rules.filter((r) => typeof r === "string" && r.length < 4096);
      if (texts.length) out.rules[family] = texts;
    }
    if (garbage) warn("had garbage", `${garbage} entries that are not tuning results, ignored`);
    return out;
  });
  if (!hints) return empty;
  cache.set(fingerprint.id, { at: performance.now(), hints });
  return hints;
}

/**
 * Shares tuning winners of a family (after they are recorded locally). Returns whether the server
 * took them; a warning otherwise.
 *
 * @example
 * ```ts
 * import { deviceFingerprint, shareWinners } from "@gyre/gyre/tuning";
 * await shareWinners(deviceFingerprint(null), "scan", []); // false without REDIS_URL
 * ```
 */
export async function shareWinners(
  fingerprint: Pick<DeviceFingerprint, "id">,
  family: TuneFamilyName,
  entries: readonly TuningEntry[],
): Promise<boolean> {
  if (!entries.length || !sharedHintsEnabled()) return false;
  cache.delete(fingerprint.id);
  const done = await withClient("written", async (c) => {
    for (const e of entries) {
      const field = JSON.stringify(Object.keys(e.key).sort().map((k) => [k, e.key[k]]));
      await c.hSet(keyOf(fingerprint.id, family, "winners"), field, JSON.stringify(e));
    }
    return true;
  });
  return done === true;
}

/**
 * Shares a soft rule Self-Rewrite appended (its SpiralK statement). Returns whether the server
 * took it; a warning otherwise.
 *
 * @example
 * ```ts
 * import { deviceFingerprint, shareRule } from "@gyre/gyre/tuning";
 * await shareRule(deviceFingerprint(null), "scan", "soft(variant, 2, 0.25, al);"); // false
 * ```
 */
export async function shareRule(
  fingerprint: Pick<DeviceFingerprint, "id">,
  family: TuneFamilyName,
  statement: string,
): Promise<boolean> {
  if (!sharedHintsEnabled()) return false;
  cache.delete(fingerprint.id);
  const done = await withClient("written", async (c) => {
    await c.sAdd(keyOf(fingerprint.id, family, "rules"), statement);
    return true;
  });
  return done === true;
}
