/**
 * How a tunable family's choice is made at a key: the user's SpiralK rules (hard assignments B
 * and soft rules), SoftLogic's best candidate by soft rules and metrics (A), the choose table
 * (C), and the hand-written plan (the safe default), combined by a two-layer consensus. Every
 * choice is legal: candidates are what the plan itself makes when asked (src/heuristics/families.ts).
 * @module
 */
import type { DeviceCaps } from "../core/caps.ts";
import { RuleError, ValueError } from "../core/errors.ts";
import { onlineChoice } from "./online.ts";
import { chooseTableVersion, tableChoice } from "./chooser.ts";
import {
  checkTuneKey,
  choiceText,
  familyCandidates,
  familyVariables,
  legalChoice,
  TUNE_FAMILIES,
  TUNE_FAMILY,
  type TuneChoice,
  type TuneFamilyName,
  type TuneKey,
} from "./families.ts";
import { evaluateRules, parseRules, type RuleProgram } from "./spiralk.ts";
import { envVar } from "./_env.ts";

/**
 * Where a rules source came from, in the order they apply (later hard assignments win): rules
 * shared through Redis, the rules file, `GYRE_HEUR_K`, the program's own.
 */
export type RulesOrigin = "shared" | "file" | "env" | "set";

/** A rules source read into programs, one per family it has a section for. */
export type RuleSections = Partial<Record<TuneFamilyName, RuleProgram>>;

const layers: Record<RulesOrigin, RuleSections> = { shared: {}, file: {}, env: {}, set: {} };
let rulesVersion = 0;

/**
 * Reads a rules source with sections: a line `[family]` starts the rules of that family (its key
 * variables, src/heuristics/families.ts); statements before any header are Rank-K's, so the
 * issue's program reads as written. Every section is typed against its family, a field assigned
 * must be the family's or a helper later statements read, and a soft rule must name one of the
 * family's fields. A RuleError (with the line and column in `source`) for the first error.
 *
 * @example
 * ```ts
 * import { parseRuleSections } from "@gyre/gyre/tuning";
 * const sections = parseRuleSections("mk: 1;\n[scan]\nsoft(variant, 2, 0.3, n > 4096);");
 * Object.keys(sections); // ["rankk", "scan"]
 * ```
 */
export function parseRuleSections(source: string): RuleSections {
  // Not text: parseRules' own RuleError.
  if (typeof source !== "string") parseRules(source, {});
  const lines = source.split("\n");
  const owner: TuneFamilyName[] = [];
  let family: TuneFamilyName = "rankk";
  const seen = new Set<TuneFamilyName>();
  lines.forEach((line, i) => {
    const header = /^\s*\[\s*([A-Za-z_][A-Za-z0-9_]*)?\s*\]\s*(#.*)?$/.exec(line);
    if (header) {
      const name = header[1] as TuneFamilyName;
      if (!TUNE_FAMILIES.includes(name)) {
        throw new RuleError({
          op: "heuristics",
          argument: "rules",
          expected: `a section of a family (${TUNE_FAMILIES.join(", ")})`,
          received: line.trim(),
          line: i + 1,
          column: line.indexOf("[") + 1,
        });
      }
      family = name;
    }
    owner.push(header ? "rankk" : family);
    if (!header && line.trim() && !line.trim().startsWith("#")) seen.add(family);
  });
  const sections: RuleSections = {};
  for (const f of TUNE_FAMILIES) {
    if (!seen.has(f)) continue;
    // Lines of other sections blanked: positions stay those of the whole source.
    const text = lines.map((l, i) => (owner[i] === f && !/^\s*\[/.test(l) ? l : "")).join("\n");
    const program = parseRules(text, familyVariables(f));
    const fields = TUNE_FAMILY[f].fields.map((x) => x.name);
    for (const s of program.statements) {
      if (s.kind === "soft" && !fields.includes(s.field)) {
        throw new RuleError({
          op: "heuristics",
          argument: "rules",
          expected: `a soft rule on a field of ${f} (${fields.join(", ")})`,
          received: s.field,
          line: s.at.line,
          column: s.at.column,
        });
      }
    }
    sections[f] = program;
  }
  return sections;
}

/**
 * Installs rules from one origin (replacing that origin's earlier rules); `null` removes them.
 * Every section is read first: on a RuleError nothing changes.
 *
 * @example
 * ```ts
 * import { setRules } from "@gyre/gyre/tuning";
 * setRules("set", "[reduce]\nsubgroups: 0;");
 * setRules("set", null);
 * ```
 */
export function setRules(origin: RulesOrigin, source: string | null): void {
  layers[origin] = source === null ? {} : parseRuleSections(source);
  rulesVersion++;
  decisions = new WeakMap();
}

/**
 * The rules installed now, by origin.
 *
 * @example
 * ```ts
 * import { installedRules } from "@gyre/gyre/tuning";
 * console.log(Object.keys(installedRules().set)); // families with rules set by the program
 * ```
 */
export function installedRules(): Readonly<Record<RulesOrigin, RuleSections>> {
  return layers;
}

/** Weight of the metrics (tile fit) in a candidate's score. */
export const METRIC_WEIGHT = 0.05;
/** Prior of the hand-written plan's own choice (above the metrics' spread: it breaks ties). */
export const PLAN_PRIOR = 0.06;
/** The table's prior over SoftLogic, unless `GYRE_HEUR_GEN_WEIGHT` says otherwise. */
export const TABLE_PRIOR = 0.10;

function tablePrior(): number {
  const v = Number(envVar("GYRE_HEUR_GEN_WEIGHT"));
  return envVar("GYRE_HEUR_GEN_WEIGHT") !== undefined && Number.isFinite(v) ? v : TABLE_PRIOR;
}

/** One layer's proposal and its score. */
export interface Proposal {
  /** The choice (legal), or null where the layer proposes nothing. */
  choice: TuneChoice | null;
  /** Its score (soft rules satisfied, metrics, priors); 0 where there is no choice. */
  score: number;
}

/** A decision with what each layer proposed (see {@link explainChoice}). */
export interface Decision {
  /** The family. */
  family: TuneFamilyName;
  /** The key. */
  key: TuneKey;
  /** The choice made (legal on the device). */
  choice: TuneChoice;
  /** Which layer decided. */
  decidedBy: "hard" | "soft" | "table" | "plan";
  /** The hard assignments' choice (B), completed from the candidates; null without them. */
  hard: TuneChoice | null;
  /** SoftLogic's best candidate (A). */
  soft: Proposal;
  /** The table's choice (C), with the table's prior in its score. */
  table: Proposal;
  /** The hand-written plan's choice. */
  plan: TuneChoice;
  /** Legal candidates considered. */
  candidates: number;
}

/** Decisions by device (its caps object: the same for all its work) and then family and key. */
let decisions = new WeakMap<object, Map<string, Decision>>();
/** The key of decisions made with no device known. */
const NO_DEVICE = {};
let decisionsVersion = "";

/**
 * Decides `family`'s choice at `key` on a device, and says how: the hard assignments (B) when the
 * rules make any (completed by the best-scoring candidate that agrees with them; where none
 * agrees with all, the fields last in the family's order are let go one by one; ignored where no
 * legal candidate has even the first); otherwise SoftLogic's best (A) against the table's choice
 * (C), scored by the same soft rules and metrics, C with its prior; the plan's own choice where
 * neither speaks.
 *
 * @example
 * ```ts
 * import { explainChoice, setRules } from "@gyre/gyre/tuning";
 * setRules("set", "[scan]\nsoft(variant, 2, 0.5, n >= 4096);");
 * explainChoice("scan", undefined, { r: 1, n: 1 << 20, sg: false, al: true }).decidedBy; // "soft"
 * setRules("set", null);
 * ```
 */
export function explainChoice(
  family: TuneFamilyName,
  caps: DeviceCaps | undefined,
  key: TuneKey,
): Decision {
  checkTuneKey("explainChoice", family, key);
  const version = `${rulesVersion}:${chooseTableVersion()}`;
  if (version !== decisionsVersion) {
    decisions = new WeakMap();
    decisionsVersion = version;
  }
  let byKey = decisions.get(caps ?? NO_DEVICE);
  if (!byKey) decisions.set(caps ?? NO_DEVICE, byKey = new Map());
  const id = `${family}|${JSON.stringify(key)}`;
  const known = byKey.get(id);
  if (known) return known;
  const f = TUNE_FAMILY[family];
  const candidates = familyCandidates(family, caps, key);
  const plan = candidates[0] ?? f.realize(caps, key, null)!;
  const programs = (["shared", "file", "env", "set"] as const).flatMap((o) =>
    layers[o][family] ?? []
  );
  const fields = new Set(f.fields.map((x) => x.name));
  const assigned: Record<string, number> = {};
  const soft: { field: string; value: number; weight: number }[] = [];
  for (const program of programs) {
    const d = evaluateRules(program, key);
    for (const [name, v] of Object.entries(d.assignments)) {
      if (fields.has(name)) assigned[name] = Number(v);
    }
    for (const h of d.soft) {
      if (h.holds) soft.push({ field: h.field, value: Number(h.value), weight: h.weight });
    }
  }
  const score = (c: TuneChoice) =>
    soft.reduce((s, h) => s + (c[h.field] === h.value ? h.weight : 0), 0) +
    METRIC_WEIGHT * f.fit(caps, key, c) + (choiceText(c) === choiceText(plan) ? PLAN_PRIOR : 0);
  const best = (cs: readonly TuneChoice[]) =>
    cs.reduce<TuneChoice | null>((b, c) => (b === null || score(c) > score(b) ? c : b), null);
  const soft_ = best(candidates)!;
  const softProposal: Proposal = { choice: soft_, score: score(soft_) };
  // The fields in the family's order that `wanted` gives; where no candidate meets them all, the
  // last are let go one by one, so the first ones the device can run hold. The fields let go are
  // filled from the best-scoring candidate, or (`close`) the one nearest in them (log distance).
  const nearest = (wanted: Readonly<Record<string, number>>, close = false) => {
    const order = f.fields.map((x) => x.name).filter((n) => n in wanted);
    const distance = (c: TuneChoice) =>
      order.reduce((d, n) => d + Math.abs(Math.log2((c[n] + 1) / (wanted[n] + 1))), 0);
    for (let kept = order.length; kept > 0; kept--) {
      const met = candidates.filter((c) => order.slice(0, kept).every((n) => c[n] === wanted[n]));
      if (!met.length) continue;
      if (!close) return best(met);
      const d = Math.min(...met.map(distance));
      return best(met.filter((c) => distance(c) === d));
    }
    return null;
  };
  // A table's cell may span keys where its choice does not fit (a single pass's lanes too few
  // for a longer row): the nearest legal choice stands for it.
  let table = tableChoice(family, caps, key);
  if (table && !legalChoice(family, caps, key, table)) table = nearest(table, true);
  const tableProposal: Proposal = table
    ? { choice: table, score: score(table) + tablePrior() }
    : { choice: null, score: 0 };
  const hard = nearest(assigned);
  let decidedBy: Decision["decidedBy"];
  let choice: TuneChoice;
  if (hard) {
    choice = hard;
    decidedBy = "hard";
  } else if (table && tableProposal.score >= softProposal.score) {
    choice = table;
    decidedBy = "table";
  } else {
    choice = soft_;
    decidedBy = choiceText(soft_) === choiceText(plan) ? "plan" : "soft";
  }
  const decision: Decision = {
    family,
    key,
    choice,
    decidedBy,
    hard,
    soft: softProposal,
    table: tableProposal,
    plan,
    candidates: candidates.length,
  };
  if (byKey.size > 4096) byKey.clear();
  byKey.set(id, decision);
  return decision;
}

/**
 * Whether tuned choices apply: "table" (default), "off" (hand-written plans only) or "online"
 * (as "table", and keys this machine has not measured first try alternatives on the user's own
 * calls, timed by the GPU, and adopt the fastest: src/heuristics/online.ts).
 */
export type TuningMode = "table" | "off" | "online";
let mode: TuningMode = "table";

/**
 * Sets whether tuned choices apply ("off": the hand-written plans, as tests of a plan's own
 * structure want; "online": tuned, and unmeasured keys tried on the user's calls, see
 * {@link TuningMode}). Read when a device plans work (unlike plan overrides, which work captures when
 * it is issued): lazy work computed after the mode changes takes the new mode. A ValueError for
 * another value.
 *
 * @example
 * ```ts
 * import { setTuningMode } from "@gyre/gyre/tuning";
 * setTuningMode("off");
 * setTuningMode("table");
 * ```
 */
export function setTuningMode(next: TuningMode): void {
  if (next !== "table" && next !== "off" && next !== "online") {
    throw new ValueError({
      op: "setTuningMode",
      argument: "mode",
      expected: '"table", "off" or "online"',
      received: String(next),
    });
  }
  mode = next;
}

/**
 * Whether tuned choices apply now.
 *
 * @example
 * ```ts
 * import { tuningMode } from "@gyre/gyre/tuning";
 * tuningMode(); // "table" unless set otherwise
 * ```
 */
export function tuningMode(): TuningMode {
  return mode;
}

/**
 * The plan override a device passes to `family`'s plan at `key`: an explicit override (a test's,
 * a tuner's) as it is; else, with tuning on, the consensus's choice where it differs from the
 * plan's own; else null.
 *
 * @example
 * ```ts
 * import { tunedOverride } from "@gyre/gyre/tuning";
 * tunedOverride("reduce", undefined, { r: 1, n: 64, sg: false, al: true }, undefined); // null
 * ```
 */
export function tunedOverride<T extends object>(
  family: TuneFamilyName,
  caps: DeviceCaps | undefined,
  key: TuneKey,
  explicit: T | undefined,
): T | null {
  if (explicit) return explicit;
  if (mode === "off") return null;
  const d = explainChoice(family, caps, key);
  const choice = mode === "online" ? onlineChoice(family, caps, key, d.choice) : d.choice;
  if (choiceText(choice) === choiceText(d.plan)) return null;
  return TUNE_FAMILY[family].override(choice) as T;
}
