/**
 * Every candidate of a family measured at held-out keys (bench/_held_out.ts), with no tuning and
 * no early drop: the evidence a plan's cost model is fitted to and checked against (fit on one
 * seed's keys, check on another's). The plan's own choice is marked.
 *
 * `deno run -A bench/tune_survey.ts [families...] [--keys N] [--seed S] [--samples N] --out NAME`
 * writes bench/results/tune-survey-NAME.json: for each key, each candidate's median and samples
 * (GPU timestamps of the whole op, interleaved rounds after a warm-up).
 * @module
 */
import * as gyre from "../src/mod.ts";
import { mulberry32 } from "../tests/_random.ts";
import { heldOutKey } from "./_held_out.ts";
import { choiceText, familyCandidates, measureKey, type TuneFamilyName } from "../src/tuning.ts";
import { takeOption, warmGpu } from "./_util.ts";

const args = [...Deno.args];
const keysPerFamily = Number(takeOption(args, "--keys") ?? 48);
const seed = Number(takeOption(args, "--seed") ?? 9001);
const samples = Number(takeOption(args, "--samples") ?? 9);
const outName = takeOption(args, "--out");
const families = args as TuneFamilyName[];
if (!outName || !families.length) {
  console.error("usage: bench/tune_survey.ts families... [--keys N] [--seed S] --out NAME");
  Deno.exit(2);
}

const rt = await gyre.init({ device: "gpu" });
const caps = rt.gpu!.caps;
const random = mulberry32(seed);

if (!caps.isFallbackAdapter) await warmGpu();

const rows: unknown[] = [];
const started = performance.now();
for (const family of families) {
  for (let i = 0; i < keysPerFamily; i++) {
    const key = heldOutKey(family, caps, random);
    const candidates = familyCandidates(family, caps, key);
    const timing = await measureKey(family, key, { choices: candidates, samples, drop: Infinity });
    rows.push({
      family,
      key,
      plan: choiceText(candidates[0]),
      candidates: timing.candidates.map((c) => ({
        choice: choiceText(c.choice),
        us: Number(c.us.toFixed(2)),
        times: c.times.map((t) => Number(t.toFixed(2))),
      })),
    });
    const best = timing.candidates[0];
    console.log(
      `${family} ${i + 1}/${keysPerFamily} (${
        ((performance.now() - started) / 1000).toFixed(0)
      } s) ` +
        `${JSON.stringify(key)}: ${timing.candidates.length} candidates, best ${
          choiceText(best.choice)
        } ${best.us.toFixed(1)} us`,
    );
  }
}
await Deno.writeTextFile(
  `bench/results/tune-survey-${outName}.json`,
  JSON.stringify({ device: caps.description, seed, samples, rows }) + "\n",
);
