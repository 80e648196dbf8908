/**
 * The tuner (issue 24, parts 2 and 7): it measures every legal candidate by GPU timestamps and
 * runs each as asked, records the winners in the user's cache and loads them into the chooser
 * (and `gyre.init` loads them again), and Self-Rewrite appends a soft rule only for a winner that
 * won its A/B trials. Startup reads the rules file and `GYRE_HEUR_K`, never failing on them.
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import {
  choiceText,
  deviceFingerprint,
  explainChoice,
  familyCandidates,
  loadHeuristics,
  loadUserRows,
  measureKey,
  onPlan,
  parseRuleSections,
  readTuningCache,
  rowsTuneKey,
  setRules,
  sortTuneKey,
  tableChoice,
  tune,
  type TuneChoice,
} from "../src/tuning.ts";
import { devices } from "./_devices.ts";
import { withEnv } from "./_heuristics.ts";

const hasGpu = (await devices()).includes("gpu");
const caps = gyre.runtime().gpu?.caps;
const timed = hasGpu && caps!.timestampQuery;

Deno.test({
  name: "tune: measureKey times every candidate, as forced, fastest first",
  ignore: !timed,
  fn: async () => {
    const key = rowsTuneKey(caps, 64, 4096);
    const candidates = familyCandidates("reduce", caps, key);
    assert.ok(candidates.length >= 2, JSON.stringify(candidates));
    const ran = new Set<string>();
    const stop = onPlan((r) => r.family === "reduce" && ran.add(r.variants[0]));
    const t = await measureKey("reduce", key, { samples: 4, drop: Infinity });
    stop();
    assert.equal(t.candidates.length, candidates.length);
    assert.deepEqual(
      new Set(t.candidates.map((c) => choiceText(c.choice))),
      new Set(candidates.map(choiceText)),
    );
    for (const c of t.candidates) {
      assert.equal(c.samples, 4);
      assert.equal(c.times.length, 4);
      assert.ok(c.times.every((x) => x > 0));
    }
    for (let i = 1; i < t.candidates.length; i++) {
      assert.ok(t.candidates[i - 1].us <= t.candidates[i].us);
    }
    // Each candidate's form ran (the override reached the plan).
    const forms = candidates.map((c) =>
      c.variant === 1 ? "thread" : c.subgroups ? "workgroup-subgroup" : "workgroup-shared"
    );
    for (const form of forms) assert.ok(ran.has(form), `${form} of ${[...ran]}`);
  },
});

Deno.test({
  name: "tune: winners are recorded, loaded into the chooser, and loaded again by init",
  ignore: !timed,
  fn: async () => {
    const dir = await Deno.makeTempDir();
    try {
      await withEnv({ GYRE_TUNING_CACHE: dir }, async () => {
        const keys = [rowsTuneKey(caps, 1, 4096), rowsTuneKey(caps, 256, 64)];
        const seen: number[] = [];
        const report = await tune(["reduce"], {
          shapes: { reduce: keys },
          samples: 3,
          onProgress: (p) => seen.push(p.done),
        });
        assert.deepEqual(seen, [1, 2]);
        assert.equal(report.keys.length, 2);
        const cache = await readTuningCache(deviceFingerprint(caps!));
        assert.deepEqual(cache.families.reduce?.map((e) => e.key), keys);
        const recorded = cache.families.reduce!.map((e) => e.choice);
        // Loaded: the run's cell (one here, spanning both keys) answers with its row's choice,
        // the best on average over both (not always either key's own winner), unless the plan
        // kept up there (then the cell has no row).
        assert.ok((report.rows.reduce?.length ?? 0) <= 1);
        const row = report.rows.reduce?.[0];
        for (const key of keys) {
          if (!row) continue;
          assert.deepEqual(tableChoice("reduce", caps, key), {
            variant: row.variant,
            subgroups: row.subgroups,
          });
        }
        loadUserRows({});
        assert.equal(tableChoice("reduce", { ...caps!, description: "none" }, keys[0]), null);
        // init reads the cache again: each key's own winner (rows around the points).
        await gyre.init({ device: "gpu" });
        keys.forEach((key, i) => assert.deepEqual(tableChoice("reduce", caps, key), recorded[i]));
      });
    } finally {
      loadUserRows({});
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "tune: Self-Rewrite appends a rule only for a winner of its A/B trials",
  ignore: !timed,
  fn: async () => {
    const dir = await Deno.makeTempDir();
    const path = `${dir}/heur.kdsl`;
    try {
      // Rows of 8192: the split radix sort (mk 6) takes about five times the ballot radix sort's
      // time on lavapipe (6.6 against 33.6 ms) and more on GPUs. The rules force it, so the
      // chooser's pick before tuning loses its trials.
      const { key } = sortTuneKey(caps, 4, 8192, 8192);
      setRules("set", "[sort]\nmk: 6;");
      assert.equal(explainChoice("sort", caps, key).choice.mk, 6);
      // Each run's winner, from the tuning cache it records.
      const winnerOf = async (options: { selfRewrite: string }) => {
        const report = await withEnv({ GYRE_TUNING_CACHE: dir }, async () => {
          const r = await tune(["sort"], { shapes: { sort: [key] }, load: false, ...options });
          const cache = await readTuningCache(deviceFingerprint(gyre.runtime().gpu!.caps));
          return { ...r, winner: cache.families.sort![0].choice as TuneChoice };
        });
        await Deno.remove(`${dir}/tuning-${deviceFingerprint(gyre.runtime().gpu!.caps).id}.json`);
        return report;
      };
      const report = await winnerOf({ selfRewrite: path });
      assert.notEqual(report.winner.mk, 6);
      assert.ok(report.rewritten >= 1);
      const text = await Deno.readTextFile(path);
      assert.match(text, /# Self-Rewrite .*won (\d+) of \d+ trials/);
      assert.match(text, /^\[sort\]$/m);
      assert.match(
        text,
        new RegExp(
          `soft\\(mk, ${report.winner.mk}, 0\\.25, r >= 4 && r < 8 && c >= 8192 && c < 16384`,
        ),
      );
      // Tuned again with the same pick before: no rule is appended twice.
      await winnerOf({ selfRewrite: path });
      const rules = parseRuleSections(await Deno.readTextFile(path)).sort!.statements.map((r) =>
        JSON.stringify(r.kind === "soft" ? [r.field, r.value, r.condition] : r)
      );
      assert.equal(new Set(rules).size, rules.length);
      // Where the pick before is the run's winner, no trials and no rule; where a close second
      // won this time, only rules for it.
      setRules("set", `[sort]\nmk: ${report.winner.mk};\ntile: ${report.winner.tile};`);
      const none = await winnerOf({ selfRewrite: `${dir}/other.kdsl` });
      if (choiceText(none.winner) === choiceText(report.winner)) {
        assert.equal(none.rewritten, 0);
        await assert.rejects(() => Deno.stat(`${dir}/other.kdsl`), Deno.errors.NotFound);
      } else if (none.rewritten > 0) {
        const other = await Deno.readTextFile(`${dir}/other.kdsl`);
        assert.match(other, new RegExp(`soft\\(tile, ${none.winner.tile}, `));
      }
    } finally {
      setRules("set", null);
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("tune: bad arguments are typed errors", async () => {
  const cases: [() => Promise<unknown>, RegExp][] = [
    [() => tune("reduce" as never), /families/],
    [() => tune(["reduces" as never]), /families/],
    [() => tune(["reduce"], { bogus: 1 } as never), /bogus/],
    [() => measureKey("reduce", { r: 1 }), /key\.n/],
    [() => measureKey("reduce", { r: 1, n: 2.5, sg: true, al: false }), /key\.n/],
  ];
  for (const [fn, message] of cases) {
    await assert.rejects(
      fn,
      (e: unknown) => e instanceof gyre.ValueError && message.test(e.message),
    );
  }
  if (!hasGpu) {
    await assert.rejects(() => tune(["reduce"]), gyre.ValueError);
  }
});

Deno.test("tune: startup reads the rules file and GYRE_HEUR_K, and never fails on them", async () => {
  const dir = await Deno.makeTempDir();
  const key = rowsTuneKey(caps, 1, 1 << 20);
  const warnings: string[] = [];
  const warn = console.warn;
  console.warn = (m: string) => warnings.push(m);
  try {
    await Deno.writeTextFile(`${dir}/good.kdsl`, "[reduce]\nsoft(variant, 1, 0.5, true);\n");
    await Deno.writeTextFile(`${dir}/bad.kdsl`, "[reduce]\nvariant: 1 +;\n");
    await withEnv(
      { GYRE_HEUR_FILE: `${dir}/good.kdsl`, GYRE_HEUR_K: "[reduce]\nsubgroups: 0;" },
      () => loadHeuristics(null),
    );
    const d = explainChoice("reduce", undefined, key);
    assert.equal(d.decidedBy, "hard");
    assert.deepEqual(d.choice, { variant: 1, subgroups: 0 });
    // A bad file: one warning with the position; nothing of it applies; the variable's rules do.
    await withEnv(
      { GYRE_HEUR_FILE: `${dir}/bad.kdsl`, GYRE_HEUR_K: "[reduce]\nsubgroups: 0;" },
      () => loadHeuristics(null),
    );
    assert.equal(warnings.length, 1);
    assert.match(warnings[0], /bad\.kdsl.*line 2/);
    assert.equal(explainChoice("reduce", undefined, key).choice.variant, 0);
    // No file at all: nothing, silently.
    await withEnv(
      { GYRE_HEUR_FILE: `${dir}/none.kdsl`, GYRE_HEUR_K: "" },
      () => loadHeuristics(null),
    );
    assert.equal(warnings.length, 1);
    assert.equal(explainChoice("reduce", undefined, key).decidedBy, "plan");
  } finally {
    console.warn = warn;
    await loadHeuristics(caps ?? null);
    await Deno.remove(dir, { recursive: true });
  }
});
