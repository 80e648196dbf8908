/**
 * What `gyre.init` loads for the chooser: the user's SpiralK rules (the rules file and
 * `GYRE_HEUR_K`) and the user's tuning results for the device's fingerprint. Never throws: an
 * unreadable or invalid source is ignored with one warning, and nothing of it applies.
 * @module
 */
import type { DeviceCaps } from "../core/caps.ts";
import { readFileOrNull } from "./_files.ts";
import { gridRows } from "./choose_table.ts";
import { loadUserRows } from "./chooser.ts";
import { parseRuleSections, setRules } from "./consensus.ts";
import { readSharedHints } from "./shared_hints.ts";
import { TUNE_FAMILIES, type TuneChoice, type TuneFamilyName, type TuneKey } from "./families.ts";
import { deviceFingerprint } from "./fingerprint.ts";
import { readTuningCache } from "./tuning_cache.ts";
import { envVar as env, messageOf, warnOnce } from "./_env.ts";

/**
 * The rules file: `GYRE_HEUR_FILE`, else `~/.gyre/heur.kdsl`.
 *
 * @example
 * ```ts
 * import { rulesFilePath } from "@gyre/gyre/tuning";
 * rulesFilePath().endsWith(".kdsl"); // true unless GYRE_HEUR_FILE says otherwise
 * ```
 */
export function rulesFilePath(): string {
  return env("GYRE_HEUR_FILE") ?? `${env("HOME") ?? "."}/.gyre/heur.kdsl`;
}

function warn(what: string, why: unknown): void {
  const text = `gyre: ignoring ${what}: ${messageOf(why)}`;
  warnOnce(text, text);
}

/**
 * Loads the rules file, `GYRE_HEUR_K` and (with a device) the user's tuning results and, with
 * `REDIS_URL`, the hints shared for the device, into the chooser. Called by `gyre.init`.
 *
 * @example
 * ```ts
 * import { loadHeuristics } from "@gyre/gyre/tuning";
 * await loadHeuristics(null); // rules only: no device, no tuning results
 * ```
 */
export async function loadHeuristics(caps: DeviceCaps | null): Promise<void> {
  const path = rulesFilePath();
  try {
    setRules("file", await readFileOrNull(path));
  } catch (e) {
    setRules("file", null);
    warn(`the rules file ${path}`, e);
  }
  try {
    setRules("env", env("GYRE_HEUR_K") ?? null);
  } catch (e) {
    setRules("env", null);
    warn("GYRE_HEUR_K", e);
  }
  if (!caps) return;
  const fingerprint = deviceFingerprint(caps);
  // Shared hints (with REDIS_URL; never throws): their winners under the local ones, their
  // rules, each read alone, as the lowest layer.
  const shared = await readSharedHints(fingerprint);
  const statements: string[] = [];
  for (const family of TUNE_FAMILIES) {
    for (const text of shared.rules[family] ?? []) {
      try {
        parseRuleSections(`[${family}]\n${text}`);
        statements.push(`[${family}]`, text);
      } catch (e) {
        warn(`a shared rule of ${family} (${JSON.stringify(text.slice(0, 80))})`, e);
      }
    }
  }
  setRules("shared", statements.length ? statements.join("\n") : null);
  try {
    const cache = await readTuningCache(fingerprint);
    const rows: Partial<Record<TuneFamilyName, ReturnType<typeof gridRows>>> = {};
    for (const family of TUNE_FAMILIES) {
      const local = cache.families[family] ?? [];
      const seen = new Set(local.map((e) => JSON.stringify(e.key)));
      const entries = [
        ...local,
        ...(shared.winners[family] ?? []).filter((e) => !seen.has(JSON.stringify(e.key))),
      ];
      if (!entries.length) continue;
      rows[family] = gridRows(
        family,
        entries.map((e) => e.key as TuneKey),
        entries.map((e) => e.choice as TuneChoice),
      );
    }
    loadUserRows(rows);
  } catch (e) {
    loadUserRows({});
    warn("the tuning cache", e);
  }
}
