/**
 * `gyre.heuristics`: the user's SpiralK rules for the tunable families, and why a choice was
 * made. Rules set here apply after the rules file (`GYRE_HEUR_FILE`, else `~/.gyre/heur.kdsl`)
 * and `GYRE_HEUR_K`, which `gyre.init` reads; a later hard assignment wins, and every soft rule
 * counts. Sections `[family]` hold each family's rules; statements before any are Rank-K's.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * gyre.heuristics.set("mk: sel(sg && (k <= 128), 2, sel(k <= 2048, 1, 0));");
 * gyre.heuristics.explain("rankk", { r: 8, c: 65536, k: 512, sg: true }).decidedBy; // "hard"
 * gyre.heuristics.clear();
 * ```
 * @module
 */
import { explainChoice, setRules } from "./heuristics/consensus.ts";
import type { Decision } from "./heuristics/consensus.ts";
import type { TuneFamilyName, TuneKey } from "./heuristics/families.ts";
import { runtime } from "./runtime.ts";

export type { Decision } from "./heuristics/consensus.ts";
export type { TuneFamilyName, TuneKey } from "./heuristics/families.ts";

/**
 * Installs `source` as the program's rules (replacing those set before). Every section is read
 * and type-checked first: a {@link RuleError} with the line and column of the first error, and
 * then nothing of `source` applies (the rules set before stay).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * gyre.heuristics.set("[scan]\nsoft(variant, 2, 0.25, n > 65536);");
 * gyre.heuristics.clear();
 * ```
 */
export function set(source: string): void {
  setRules("set", source);
}

/**
 * Removes the rules {@link set} installed (the file's and `GYRE_HEUR_K`'s stay).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * gyre.heuristics.clear();
 * ```
 */
export function clear(): void {
  setRules("set", null);
}

/**
 * How the chooser decides `family` at `key` on the runtime's GPU: each layer's proposal (hard
 * rules, SoftLogic, the table, the plan), their scores, and which decided.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const d = gyre.heuristics.explain("scan", { r: 1, n: 1 << 20, sg: false, al: true });
 * console.log(d.decidedBy, d.choice);
 * ```
 */
export function explain(family: TuneFamilyName, key: TuneKey): Decision {
  return explainChoice(family, runtime().gpu?.caps, key);
}
