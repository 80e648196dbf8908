/**
 * Judges the chooser offline against a survey (bench/tune_survey.ts): at each surveyed key, the
 * share where the hand-written plan, the compiled table and the consensus pick a candidate whose
 * surveyed median is within 5% of the fastest's. No GPU: the device's capabilities come from
 * tests/_caps.ts by the survey's device, so plan rules can be tried against many more keys than a
 * device session measures (the held-out bench, bench/tune_quality.ts, remains the judgement).
 *
 * `deno run -A bench/tune_offline.ts bench/results/tune-survey-NAME.json... [--misses]`
 * @module
 */
import { H200 } from "../tests/_caps.ts";
import { choiceText, explainChoice, tableChoice, type TuneFamilyName } from "../src/tuning.ts";
import type { DeviceCaps } from "../src/core/caps.ts";

const args = [...Deno.args];
const misses = args.includes("--misses");
const files = args.filter((a) => !a.startsWith("--"));

interface Survey {
  device: string;
  rows: {
    family: TuneFamilyName;
    key: Record<string, number | boolean>;
    candidates: { choice: string; us: number }[];
  }[];
}

const CAPS: Record<string, DeviceCaps> = {
  "NVIDIA H200": H200,
  "NVIDIA H100 80GB HBM3": { ...H200, description: "NVIDIA H100 80GB HBM3" },
};

for (const file of files) {
  const survey: Survey = JSON.parse(await Deno.readTextFile(file));
  const caps = CAPS[survey.device];
  if (!caps) throw new Error(`no capabilities for ${survey.device} in tests/_caps.ts`);
  const counts: Record<string, Record<string, number>> = {};
  for (const row of survey.rows) {
    const us = new Map(row.candidates.map((c) => [c.choice, c.us]));
    const best = Math.min(...us.values());
    const d = explainChoice(row.family, caps, row.key);
    const picks = {
      plan: choiceText(d.plan),
      table: choiceText(tableChoice(row.family, caps, row.key) ?? d.plan),
      consensus: choiceText(d.choice),
    };
    const c = counts[row.family] ??= { keys: 0, plan: 0, table: 0, consensus: 0 };
    c.keys++;
    for (const [layer, pick] of Object.entries(picks)) {
      const t = us.get(pick);
      if (t !== undefined && t <= 1.05 * best) c[layer]++;
    }
    const t = us.get(picks.consensus) ?? NaN;
    if (misses && !(t <= 1.05 * best)) {
      const leader = row.candidates.find((x) => x.us === best)!.choice;
      console.log(
        `  miss ${JSON.stringify(row.key)}: consensus ${picks.consensus} ${
          (t / best).toFixed(2)
        }x (${d.decidedBy}), best ${leader} ${best.toFixed(1)} us`,
      );
    }
  }
  console.log(`${file} (${survey.device})`);
  for (const [family, c] of Object.entries(counts)) {
    const pct = (x: number) => `${(100 * x / c.keys).toFixed(0)}%`;
    console.log(
      `  ${family}: ${c.keys} keys; plan ${pct(c.plan)}, table ${pct(c.table)}, consensus ${
        pct(c.consensus)
      }`,
    );
  }
}
