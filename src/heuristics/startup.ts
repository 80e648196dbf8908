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
import {
  onWasmDevice,
  TUNE_FAMILIES,
  type TuneChoice,
  type TuneFamilyName,
  type TuneKey,
} from "./families.ts";
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
 * Loads the rules file, `GYRE_HEUR_K`, the user's tuning results (the GPU's, with a GPU, and the
 * WASM device's) and, with `REDIS_URL`, the hints shared for each device, into the chooser.
 * Called by `gyre.init`.
 *
 * @example
 * ```ts
 * import { loadHeuristics } from "@gyre/gyre/tuning";
 * await loadHeuristics(null); // rules and the WASM device's results: no GPU
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
  // Each device's families read its own fingerprint's results: the GPU's (with a GPU) and the
  // WASM device's (always).
  const devices: [DeviceCaps | null, TuneFamilyName[]][] = [
    ...(caps
      ? [[caps, TUNE_FAMILIES.filter((f) => !onWasmDevice(f))] as [DeviceCaps, TuneFamilyName[]]]
      : []),
    [null, TUNE_FAMILIES.filter(onWasmDevice)],
  ];
  const statements: string[] = [];
  const rows: Partial<Record<TuneFamilyName, ReturnType<typeof gridRows>>> = {};
  let failed = false;
  for (const [device, families] of devices) {
    const fingerprint = deviceFingerprint(device);
    // Shared hints (with REDIS_URL; never throws): their winners under the local ones, their
    // rules, each read alone, as the lowest layer.
    const shared = await readSharedHints(fingerprint);
    for (const family of families) {
      for (const text of shared.rules[family] ?? []) {
        try {
          parseRuleSections(`[${family}]\n${text}`);
          statements.push(`[${family}]`, text);
        } catch (e) {
          warn(`a shared rule of ${family} (${JSON.stringify(text.slice(0, 80))})`, e);
        }
      }
    }
    try {
      const cache = await readTuningCache(fingerprint);
      for (const family of families) {
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
    } catch (e) {
      failed = true;
      warn("the tuning cache", e);
    }
  }
  setRules("shared", statements.length ? statements.join("\n") : null);
  loadUserRows(failed ? {} : rows);
}
