/**
 * The file primitives the heuristics' persistent state shares (rules files, tuning caches): a
 * lock file that serialises writers across processes, and whole-file writes that a reader never
 * sees half done.
 * @module
 */

/** How long a lock older than this is taken as left by a process that died holding it. */
const STALE_LOCK_MS = 10_000;

/**
 * Runs `fn` holding `path + ".lock"` (made exclusively; waits out other holders, removes a stale
 * one), and releases it after, whatever `fn` does.
 */
export async function withFileLock<T>(path: string, fn: () => Promise<T>): Promise<T> {
  const lock = `${path}.lock`;
  for (let wait = 1;; wait = Math.min(wait * 2, 50)) {
    try {
      (await Deno.open(lock, { createNew: true, write: true })).close();
      break;
    } catch (e) {
      if (!(e instanceof Deno.errors.AlreadyExists)) throw e;
    }
    try {
      const age = Date.now() - ((await Deno.stat(lock)).mtime?.getTime() ?? Date.now());
      if (age > STALE_LOCK_MS) await Deno.remove(lock).catch(() => {});
    } catch {
      // Released meanwhile.
    }
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
  try {
    return await fn();
  } finally {
    await Deno.remove(lock).catch(() => {});
  }
}

/** Writes `text` to a temporary file beside `path`, then renames it over `path`. */
export async function writeFileAtomic(path: string, text: string): Promise<void> {
  const temporary = `${path}.${Deno.pid}.${crypto.randomUUID()}.tmp`;
  try {
    await Deno.writeTextFile(temporary, text);
    await Deno.rename(temporary, path);
  } catch (e) {
    await Deno.remove(temporary).catch(() => {});
    throw e;
  }
}

/** A file's text, or null where it does not exist. */
export async function readFileOrNull(path: string): Promise<string | null> {
  try {
    return await Deno.readTextFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw e;
  }
}
