/**
 * The held-out test of the chooser (issue 24): for each family, tune on the grid (tuneGrid), then
 * draw keys from a seeded random grid the tuner never saw (sizes between the grid's points),
 * measure every legal candidate at each (GPU timestamps, medians), and count the keys where each
 * layer's pick is within 5% of the best: the hand-written plan, the table (C; where no row covers
 * a key the plan runs), SoftLogic (A) and the consensus.
 *
 * `deno run -A bench/tune_quality.ts [families...] [--keys N] [--seed S] [--out NAME]
 * [--table DEVICE] [--no-interiors]` writes bench/results/tune-quality-NAME.md and .json (and
 * with `--table`, the tuned rows into that device's table); `--no-interiors` skips the tuner's
 * check of each row inside its cell; with `--noise-floor`, no tuning: five copies of the plan's
 * choice at each held-out key, judged alike (the most a chooser can score there).
 * @module
 */
import * as gyre from "../src/mod.ts";
import { median, takeOption, warmGpu } from "./_util.ts";
import { mulberry32 } from "../tests/_random.ts";
import { heldOutKey } from "./_held_out.ts";
import {
  choiceText,
  explainChoice,
  familyCandidates,
  loadUserRows,
  measureKey,
  onWasmDevice,
  tableChoice,
  tune,
  TUNE_FAMILIES,
  type TuneChoice,
  type TuneFamilyName,
  type TuneKey,
} from "../src/tuning.ts";

const args = [...Deno.args];
const option = (name: string) => takeOption(args, name);
const perFamily = Number(option("--keys") ?? 24);
const seed = Number(option("--seed") ?? 2411);
const outName = option("--out");
const tableName = option("--table");
const noiseFloor = args.includes("--noise-floor");
// Table rows as cellRows makes them, without the interior check (for an A/B of that check).
const interiors = !args.includes("--no-interiors");
if (!interiors) args.splice(args.indexOf("--no-interiors"), 1);
if (noiseFloor) args.splice(args.indexOf("--noise-floor"), 1);
const families = (args.length ? args : TUNE_FAMILIES) as TuneFamilyName[];

const rt = await gyre.init({ device: "gpu" });
const caps = rt.gpu!.caps;
const soft = caps.isFallbackAdapter;

const random = mulberry32(seed);

/** The WASM device's families decide with no GPU's capabilities. */
const capsOf = (family: TuneFamilyName) => (onWasmDevice(family) ? undefined : caps);

/** The tree measured: `git describe --always --dirty`. */
async function describe(): Promise<string> {
  const out = await new Deno.Command("git", { args: ["describe", "--always", "--dirty"] }).output();
  return new TextDecoder().decode(out.stdout).trim();
}
interface Row {
  family: TuneFamilyName;
  key: TuneKey;
  best: number;
  picks: Record<string, { choice: string; us: number; within: boolean; paired: boolean }>;
}

/**
 * Round 2: `choices` measured together, interleaved, and each judged against the fastest's median
 * (within 5%) and paired (the median, round by round, of its time over the fastest's in the same
 * round, at most 1.05: contention both share cancels). Copies of one choice are kept apart.
 */
async function judge(family: TuneFamilyName, key: TuneKey, choices: readonly TuneChoice[]) {
  const second = await measureKey(family, key, {
    choices,
    samples: soft ? 41 : 15,
    drop: Infinity,
  });
  // measureKey sorts its candidates by median: find each choice's own (copies in order).
  const taken = new Set<number>();
  const of = choices.map((c) => {
    const i = second.candidates.findIndex((t, j) =>
      !taken.has(j) && choiceText(t.choice) === choiceText(c)
    );
    taken.add(i);
    return second.candidates[i];
  });
  const best = second.candidates[0];
  return of.map((t) => ({
    choice: choiceText(t.choice),
    us: t.us,
    within: t.us <= 1.05 * best.us,
    paired: median(t.times.map((x, j) => x / best.times[j])) <= 1.05,
  }));
}

if (!soft) await warmGpu();

// --noise-floor: five copies of the plan's own choice judged as round 2 judges finalists, at the
// same held-out keys; equal choices should all count, so the share that does bounds what any
// chooser can score where candidates are this close.
if (noiseFloor) {
  const lines = [
    `# Noise floor of the held-out judgement: ${caps.description}`,
    "",
    `bench/tune_quality.ts --noise-floor at ${await describe()}, seed ${seed}: five copies of ` +
    "the plan's choice at each held-out key, judged as round 2 judges the finalists.",
    "",
    "| family | copies | within 5% of the fastest's median | paired |",
    "|---|---:|---:|---:|",
  ];
  for (const family of families) {
    const judged: Awaited<ReturnType<typeof judge>> = [];
    for (let i = 0; i < perFamily; i++) {
      const key = heldOutKey(family, caps, random);
      const plan = familyCandidates(family, capsOf(family), key)[0];
      judged.push(...await judge(family, key, [plan, plan, plan, plan, plan]));
    }
    const pctOf = (f: (j: { within: boolean; paired: boolean }) => boolean) =>
      `${(100 * judged.filter(f).length / judged.length).toFixed(0)}%`;
    lines.push(
      `| ${family} | ${judged.length} | ${pctOf((j) => j.within)} | ${pctOf((j) => j.paired)} |`,
    );
  }
  const text = lines.join("\n") + "\n";
  console.log(text);
  if (outName) await Deno.writeTextFile(`bench/results/tune-quality-${outName}.md`, text);
  Deno.exit(0);
}

const rows: Row[] = [];
const tableRows: Record<string, unknown> = {};
const tuneSeconds: Record<string, number> = {};
const tuneKeys: Record<string, number> = {};
for (const family of families) {
  loadUserRows({});
  console.log(`${family}: tuning on the grid`);
  const report = await tune([family], { record: false, budget: 600, interiors });
  tuneSeconds[family] = report.seconds[family] ?? 0;
  tuneKeys[family] = report.rows[family]?.length ?? 0;
  // A GPU's table holds its own families (the WASM device's are the user's to tune).
  if (capsOf(family)) tableRows[family] = report.rows[family];
  const keys = Array.from({ length: perFamily }, () => heldOutKey(family, caps, random));
  for (const [i, key] of keys.entries()) {
    const candidates = familyCandidates(family, capsOf(family), key);
    // Round 1 finds the best candidate; round 2 measures it again with every layer's pick,
    // interleaved, and judges the picks there (the fastest of a noisy round is biased low).
    const first = await measureKey(family, key, { choices: candidates, samples: soft ? 15 : 7 });
    const leader = first.candidates.find((c) => c.samples >= 7) ?? first.candidates[0];
    const d = explainChoice(family, capsOf(family), key);
    const table: TuneChoice = tableChoice(family, capsOf(family), key) ?? d.plan;
    const named = { plan: d.plan, table, soft: d.soft.choice!, consensus: d.choice };
    const finalists = new Map<string, TuneChoice>([[choiceText(leader.choice), leader.choice]]);
    for (const c of Object.values(named)) finalists.set(choiceText(c), c);
    const judged = new Map(
      (await judge(family, key, [...finalists.values()])).map((j) => [j.choice, j]),
    );
    rows.push({
      family,
      key,
      best: Math.min(...[...judged.values()].map((j) => j.us)),
      picks: Object.fromEntries(
        Object.entries({ leader: leader.choice, ...named }).map((
          [n, c],
        ) => [n, judged.get(choiceText(c))!]),
      ),
    });
    console.log(
      `  ${i + 1}/${keys.length} ${JSON.stringify(key)}: best ${
        rows.at(-1)!.best.toFixed(1)
      } us; plan ${rows.at(-1)!.picks.plan.us.toFixed(1)}, consensus ${
        rows.at(-1)!.picks.consensus.us.toFixed(1)
      } (${d.decidedBy})`,
    );
  }
}

const layers = ["plan", "table", "soft", "consensus"] as const;
const share = (rs: Row[], layer: string, paired = false) =>
  rs.length
    ? rs.filter((r) => (paired ? r.picks[layer].paired : r.picks[layer].within)).length / rs.length
    : 0;
const pct = (x: number) => `${(100 * x).toFixed(0)}%`;
const lines = [
  `# Chooser quality on held-out keys: ${caps.description}`,
  "",
  `bench/tune_quality.ts at ${await describe()}, ${
    new Date().toISOString().slice(0, 10)
  }; seed ${seed}, ${perFamily} keys a family drawn ` +
  "log-uniformly between the tuning grid's points (no power of two). Every legal candidate " +
  "measured at each key (GPU timestamps of the whole op, median of 7 (15 on a software " +
  "adapter) after a warm-up, " +
  "candidates over 1.3x the leader after 3 samples dropped); then the leader and every " +
  "layer's pick measured again together (median of 15, 41 on a software adapter, " +
  "interleaved), and a pick counts when " +
  "its median there is within 5% of the fastest's (a second round, because the fastest of one " +
  "noisy round is biased low). The table is the tuner's rows (each cell between grid points " +
  "takes the candidate best on average over its measured corners; no row where the plan came " +
  "within 3% of it on average, or within its samples' spread, nor where the plan came within " +
  "that of the row's choice measured again at a key inside the cell); the device's compiled " +
  "table is set aside for a tuned family, so where no row covers a key the plan runs. SoftLogic has no user rules here: its pick is the plan's " +
  "unless the tile metric disagrees.",
  "",
  "The last two columns judge the same round paired: a pick counts when the median, over the " +
  "interleaved rounds, of its time over the fastest finalist's in the same round is at most " +
  "1.05 (contention both share cancels).",
  "",
  "| family | keys | tuned keys | tuning s | plan | table | SoftLogic | consensus | plan, paired | consensus, paired |",
  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
];
for (const family of families) {
  const rs = rows.filter((r) => r.family === family);
  lines.push(
    `| ${family} | ${rs.length} | ${tuneKeys[family]} | ${tuneSeconds[family].toFixed(1)} | ${
      layers.map((l) => pct(share(rs, l))).join(" | ")
    } | ${pct(share(rs, "plan", true))} | ${pct(share(rs, "consensus", true))} |`,
  );
}
lines.push(
  `| all | ${rows.length} | | | ${layers.map((l) => pct(share(rows, l))).join(" | ")} | ${
    pct(share(rows, "plan", true))
  } | ${pct(share(rows, "consensus", true))} |`,
  "",
  "Keys where the consensus missed (us: best, consensus, plan):",
  "",
);
for (const r of rows.filter((r) => !r.picks.consensus.within)) {
  lines.push(
    `- ${r.family} ${JSON.stringify(r.key)}: ${r.best.toFixed(1)}, ${
      r.picks.consensus.us.toFixed(1)
    } (${r.picks.consensus.choice}), ${r.picks.plan.us.toFixed(1)} (${r.picks.plan.choice})`,
  );
}
const text = lines.join("\n") + "\n";
console.log(text);
if (outName) {
  await Deno.writeTextFile(`bench/results/tune-quality-${outName}.md`, text);
  await Deno.writeTextFile(
    `bench/results/tune-quality-${outName}.json`,
    JSON.stringify({ device: caps.description, seed, tuneSeconds, rows }, null, 1) + "\n",
  );
}
if (tableName) {
  // The grid's winners as a reference table (src/heuristics/tables/; `deno task build` compiles it).
  const path = `src/heuristics/tables/${tableName}.json`;
  await Deno.mkdir("src/heuristics/tables", { recursive: true });
  let old: { device?: unknown; families?: Record<string, unknown> } = {};
  try {
    old = JSON.parse(await Deno.readTextFile(path));
  } catch { /* a new table */ }
  const table = {
    device: old.device ??
      { name: tableName, match: caps.description, description: caps.description },
    source: `bench/tune_quality.ts, ${new Date().toISOString().slice(0, 10)}`,
    families: { ...old.families, ...tableRows },
  };
  await Deno.writeTextFile(path, JSON.stringify(table, null, 1) + "\n");
}
