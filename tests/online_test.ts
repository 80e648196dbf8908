/**
 * Online tuning (issue 24, part 2): under `runtime.tuning = "online"` the first calls of a key
 * this machine has not measured run the user's work with the consensus's choice and its
 * neighbours, each timed by GPU timestamps read back without waiting; the fastest is then used,
 * loaded into the chooser and recorded in the tuning cache. Results stay right throughout; `jit`
 * traces and profiled work are never trials.
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import {
  choiceText,
  clearOnlineTrials,
  deviceFingerprint,
  explainChoice,
  loadUserRows,
  ONLINE_SAMPLES,
  onlineChoice,
  onlineSettled,
  onlineTrials,
  onPlan,
  readTuningCache,
  recordOnlineSample,
  rowsTuneKey,
  setOnlineSampling,
  takeOnlineSample,
  tuningMode,
} from "../src/tuning.ts";
import { devices } from "./_devices.ts";
import { withEnv } from "./_heuristics.ts";
import { H200 } from "./_caps.ts";

const hasGpu = (await devices()).includes("gpu");
const caps = gyre.runtime().gpu?.caps;
const timed = hasGpu && caps!.timestampQuery;

/**
 * Runs `fn` with online tuning on, a fresh tuning cache folder and no user rows (inputs made
 * before: making them is elementwise work a trial would begin on).
 */
async function online<T>(fn: (folder: string) => Promise<T>): Promise<T> {
  const folder = await Deno.makeTempDir();
  const rt = gyre.runtime();
  try {
    return await withEnv({ GYRE_TUNING_CACHE: folder }, async () => {
      loadUserRows({});
      clearOnlineTrials();
      rt.tuning = "online";
      return await fn(folder);
    });
  } finally {
    rt.tuning = "table";
    await onlineSettled();
    clearOnlineTrials();
    loadUserRows({});
    await Deno.remove(folder, { recursive: true });
  }
}

Deno.test({
  name: "online: a new key's calls try alternatives, then use the fastest, recorded",
  ignore: !timed,
  fn: async () => {
    const [rows, length] = [48, 3000];
    const x = gyre.random.uniform([rows, length], { seed: 5, device: "gpu" }).realize();
    await online(async () => {
      const key = rowsTuneKey(caps, rows, length);
      const decided = explainChoice("reduce", caps, key).choice;
      const want = await gyre.sum(await x.to("wasm"), { axis: -1 }).array() as number[];
      const ran: string[] = [];
      const stop = onPlan((r) => r.family === "reduce" && ran.push(r.variants[0]));
      let calls = 0;
      try {
        // Each call is the user's work: right whichever alternative runs.
        while (!reduceTrial()?.winner && calls < 80) {
          const y = gyre.sum(x, { axis: -1 });
          const got = await y.array() as number[];
          y.dispose();
          calls++;
          got.forEach((v, i) =>
            assert.ok(Math.abs(v - want[i]) <= 1e-3 * Math.abs(want[i]) + 1e-3)
          );
        }
      } finally {
        stop();
      }
      const trial = reduceTrial()!;
      assert.ok(trial?.winner, `no winner after ${calls} calls: ${JSON.stringify(trial)}`);
      assert.equal(onlineTrials().length, 1, "a trial of other work");
      // The trial began at the consensus's choice and tried others, each with real timings.
      assert.deepEqual(trial.candidates[0], decided);
      assert.ok(trial.candidates.length >= 2);
      assert.ok(new Set(ran).size >= 2, `only ${[...new Set(ran)]} ran`);
      const medians = trial.times.map((t) => [...t].sort((a, b) => a - b)[t.length >> 1]);
      trial.live.forEach((live, i) => {
        if (live) assert.ok(trial.times[i].length >= ONLINE_SAMPLES, JSON.stringify(trial.times));
        assert.ok(trial.times[i].every((t) => t > 0));
      });
      const best = trial.live.map((l, i) => (l ? medians[i] : Infinity));
      assert.equal(
        choiceText(trial.winner!),
        choiceText(trial.candidates[best.indexOf(Math.min(...best))]),
      );
      // From now on the winner runs, and the chooser's table names it.
      const d = explainChoice("reduce", caps, key);
      assert.equal(d.decidedBy === "table" || d.decidedBy === "plan", true);
      assert.equal(choiceText(d.choice), choiceText(trial.winner!));
      ran.length = 0;
      const again = onPlan((r) => r.family === "reduce" && ran.push(r.variants[0]));
      const y = gyre.sum(x, { axis: -1 });
      await y.array();
      again();
      y.dispose();
      const form = trial.winner!.variant === 1
        ? "thread"
        : trial.winner!.subgroups
        ? "workgroup-subgroup"
        : "workgroup-shared";
      assert.deepEqual(ran, [form]);
      // The winner reaches the tuning cache (written without blocking the work).
      let entries: unknown[] = [];
      for (let i = 0; i < 50 && !entries.length; i++) {
        const cache = await readTuningCache(deviceFingerprint(caps!));
        entries = cache.families.reduce ?? [];
        if (!entries.length) await new Promise((r) => setTimeout(r, 20));
      }
      assert.equal(entries.length, 1);
    });
    x.dispose();
  },
});

/** The reduce family's trial, if one began. */
function reduceTrial() {
  return onlineTrials().find((t) => t.family === "reduce");
}

Deno.test({
  name: "online: jit traces and a key the user's rows cover are never trials",
  ignore: !timed,
  fn: async () => {
    const x = gyre.random.uniform([40, 5000], { seed: 6, device: "gpu" }).realize();
    await online(async () => {
      const f = gyre.jit((a: gyre.Tensor) => gyre.sum(a, { axis: -1 }));
      for (let i = 0; i < 3; i++) {
        const y = f(x) as gyre.Tensor;
        await y.array();
        y.dispose();
      }
      assert.equal(onlineTrials().length, 0, "a trial began inside a jit trace");
      // A covered key: the user's row decides, no trial.
      const key = rowsTuneKey(caps, 40, 5000);
      const choice = explainChoice("reduce", caps, key).choice;
      loadUserRows({
        reduce: [{
          r_min: 32,
          r_max: 63,
          n_min: 4096,
          n_max: 8191,
          sg: key.sg,
          al: key.al,
          ...choice,
        }],
      });
      const y = gyre.sum(x, { axis: -1 });
      await y.array();
      y.dispose();
      assert.equal(onlineTrials().length, 0, "a trial began on a covered key");
    });
    x.dispose();
  },
});

Deno.test("online: the bookkeeping (no device): windows, turns, drops and the winner", async () => {
  await online(async () => {
    const key = { r: 64, n: 4096, sg: true, al: true };
    const decided = explainChoice("reduce", H200, key).choice;
    // No window open: the consensus's choice, no trial.
    assert.deepEqual(onlineChoice("reduce", H200, key, decided), decided);
    assert.equal(onlineTrials().length, 0);
    const call = () => {
      setOnlineSampling(true);
      const c = onlineChoice("reduce", H200, key, decided);
      // A second key in the same job gets no timing of its own.
      const other = { ...key, r: 4 };
      assert.deepEqual(onlineChoice("reduce", H200, other, decided), decided);
      setOnlineSampling(false);
      return { c, sample: takeOnlineSample()! };
    };
    const first = call();
    assert.deepEqual(first.c, decided);
    const trial = onlineTrials()[0];
    assert.ok(trial.candidates.length >= 2 && trial.candidates.length <= 6);
    // Alternatives take turns; the slowest (3x) is dropped after a round.
    const speed = trial.candidates.map((_, i) => (i === 1 ? 30 : 10 - i));
    recordOnlineSample(first.sample, speed[0]);
    for (let n = 0; n < 40 && !onlineTrials()[0].winner; n++) {
      const { c, sample } = call();
      assert.equal(choiceText(c), choiceText(trial.candidates[sample.index]));
      recordOnlineSample(sample, speed[sample.index]);
    }
    const done = onlineTrials()[0];
    assert.ok(done.winner);
    assert.equal(done.live[1], false);
    assert.ok(done.times[1].length < ONLINE_SAMPLES);
    const fastest = speed.indexOf(Math.min(...speed));
    assert.equal(choiceText(done.winner!), choiceText(trial.candidates[fastest]));
    // Concluded: every call gets the winner, in a window or not.
    assert.deepEqual(onlineChoice("reduce", H200, key, decided), done.winner);
    assert.equal(tuningMode(), "online");
    await Promise.resolve();
  });
  assert.throws(() => (gyre.runtime().tuning = "fast" as "table"), gyre.ValueError);
  assert.equal(gyre.runtime().tuning, "table");
});
