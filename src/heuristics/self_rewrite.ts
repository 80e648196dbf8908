/**
 * Self-Rewrite's two primitives (issue 24, part 7): the statistical test that a choice won its
 * A/B trials (a Wilson score interval whose lower bound is above one half, after enough trials),
 * and the append of the matching soft rule to a SpiralK rules file: atomic (a whole new file
 * renamed over the old), serialised between processes by a lock file, never twice the same rule,
 * and never onto a file that does not read as SpiralK.
 * @module
 */
import { printRules } from "./spiralk.ts";
import { parseRuleSections } from "./consensus.ts";
import type { TuneFamilyName } from "./families.ts";
import { readFileOrNull, withFileLock, writeFileAtomic } from "./_files.ts";

/** The fewest A/B trials after which a win can be adopted. */
export const MIN_TRIALS = 20;

/** The normal quantile of a two-sided 95% interval. */
const Z95 = 1.959963984540054;

/** A choice's record against the alternative it was tried beside. */
export interface TrialEvidence {
  /** Trials the choice won (measured faster). */
  wins: number;
  /** Trials in all. */
  trials: number;
}

/**
 * The Wilson score interval of a win rate (95% by default): unlike the normal approximation it
 * stays inside [0, 1] and is honest for few trials.
 *
 * @example
 * ```ts
 * import { wilsonInterval } from "@gyre/gyre/tuning";
 * wilsonInterval({ wins: 15, trials: 20 }).low; // about 0.531
 * ```
 */
export function wilsonInterval(
  evidence: TrialEvidence,
  z: number = Z95,
): { low: number; high: number } {
  const { wins, trials } = evidence;
  if (!(trials > 0) || wins < 0 || wins > trials) return { low: 0, high: 1 };
  const p = wins / trials;
  const z2 = z * z;
  const scale = 1 + z2 / trials;
  const center = (p + z2 / (2 * trials)) / scale;
  const half = (z * Math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials))) / scale;
  return { low: Math.max(0, center - half), high: Math.min(1, center + half) };
}

/**
 * Whether trials show a choice winning: at least {@link MIN_TRIALS} of them, and the Wilson
 * interval's lower bound above 0.5.
 *
 * @example
 * ```ts
 * import { winsTrials } from "@gyre/gyre/tuning";
 * winsTrials({ wins: 15, trials: 20 }); // true
 * winsTrials({ wins: 14, trials: 20 }); // false
 * ```
 */
export function winsTrials(evidence: TrialEvidence): boolean {
  return evidence.trials >= MIN_TRIALS && wilsonInterval(evidence).low > 0.5;
}

/** A soft rule to append: SpiralK source of its parts. */
export interface SoftRuleText {
  /** The field, e.g. "mk". */
  field: string;
  /** The value favoured, e.g. "2". */
  value: string;
  /** Its weight, e.g. "0.25". */
  weight: string;
  /** When it holds, e.g. "sg && k <= 128". */
  condition: string;
}

/**
 * Appends `soft(field, value, weight, condition);` to `family`'s rules in the rules file at
 * `path` (made if missing; a `[family]` header added where the file does not end in that
 * family's section), under a comment giving the evidence, unless the section already holds that
 * rule (compared in canonical form). The file is read first: if it, or it with the rule, does not
 * read as SpiralK sections (src/heuristics/consensus.ts), a RuleError is thrown and the file is
 * left as it was. Returns whether the rule was written. Concurrent callers, in this process or
 * others, take turns through `path + ".lock"`; the new content is written to a temporary file
 * and renamed over the old, so a reader never sees half a file.
 *
 * @example
 * ```ts
 * import { appendSoftRule } from "@gyre/gyre/tuning";
 * const path = await Deno.makeTempFile({ suffix: ".kdsl" });
 * await appendSoftRule(path, { field: "mk", value: "2", weight: "0.25", condition: "sg" }, {
 *   wins: 18,
 *   trials: 20,
 * }, "rankk"); // true
 * await Deno.remove(path);
 * ```
 */
export async function appendSoftRule(
  path: string,
  rule: SoftRuleText,
  evidence: TrialEvidence,
  family: TuneFamilyName = "rankk",
): Promise<boolean> {
  const text = `soft(${rule.field}, ${rule.value}, ${rule.weight}, ${rule.condition});`;
  return await withFileLock(path, async () => {
    const old = (await readFileOrNull(path)) ?? "";
    const separator = old.endsWith("\n") || old === "" ? "" : "\n";
    const before = parseRuleSections(old);
    // The section the file ends in: its last header's, else Rank-K's.
    const headers = [...old.matchAll(/^\s*\[\s*([A-Za-z_][A-Za-z0-9_]*)\s*\]/gm)];
    const header = (headers.at(-1)?.[1] ?? "rankk") === family ? "" : `[${family}]\n`;
    // The rule must read in the file's context (its section's fields and variables).
    const after = parseRuleSections(`${old}${separator}${header}${text}\n`)[family]!;
    const added = printRules({ ...after, statements: after.statements.slice(-1) });
    const section = before[family];
    const existing = new Set(
      (section?.statements ?? []).filter((s) => s.kind === "soft").map((s) =>
        printRules({ ...section!, statements: [s] })
      ),
    );
    if (existing.has(added)) return false;
    const { low } = wilsonInterval(evidence);
    const comment = `# Self-Rewrite ${new Date().toISOString()}: won ${evidence.wins} of ` +
      `${evidence.trials} trials (95% Wilson lower bound ${low.toFixed(3)})\n`;
    await writeFileAtomic(path, `${old}${separator}${header}${comment}${added}`);
    return true;
  });
}
