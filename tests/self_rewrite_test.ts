/**
 * Self-Rewrite's primitives (issue 24, part 7): the Wilson test of A/B trials, and the append of
 * a soft rule: once, atomic, serialised across concurrent callers in this process and others,
 * never onto a file that does not read as SpiralK.
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import {
  appendSoftRule,
  MIN_TRIALS,
  parseRuleSections,
  wilsonInterval,
  winsTrials,
} from "../src/tuning.ts";

const RANK_K = "rankk" as const;

Deno.test("self-rewrite: the Wilson interval and the adoption test", () => {
  const close = (a: number, b: number) => Math.abs(a - b) < 5e-4;
  const i = wilsonInterval({ wins: 15, trials: 20 });
  assert.ok(close(i.low, 0.5313) && close(i.high, 0.8881), JSON.stringify(i));
  assert.ok(close(wilsonInterval({ wins: 14, trials: 20 }).low, 0.4810));
  assert.deepEqual(wilsonInterval({ wins: 0, trials: 0 }), { low: 0, high: 1 });
  const all = wilsonInterval({ wins: 20, trials: 20 });
  assert.ok(all.high === 1 && all.low > 0.8);
  assert.equal(winsTrials({ wins: 15, trials: 20 }), true);
  assert.equal(winsTrials({ wins: 14, trials: 20 }), false);
  // Too few trials, however clear.
  assert.equal(winsTrials({ wins: MIN_TRIALS - 1, trials: MIN_TRIALS - 1 }), false);
});

Deno.test("self-rewrite: a rule appended once, with its evidence, to a file that still parses", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/heur.kdsl`;
    await Deno.writeTextFile(path, "# mine\nmk: sel(sg, 2, 1);");
    const rule = { field: "mk", value: "2", weight: "0.25", condition: "sg && (k<=128)" };
    assert.equal(await appendSoftRule(path, rule, { wins: 18, trials: 20 }, RANK_K), true);
    // The same rule again, written differently: not appended twice.
    const same = { ...rule, condition: "sg&&k<=128", weight: "0.250" };
    assert.equal(await appendSoftRule(path, same, { wins: 19, trials: 20 }, RANK_K), false);
    const text = await Deno.readTextFile(path);
    assert.match(text, /^# mine\nmk: sel\(sg, 2, 1\);\n# Self-Rewrite .*won 18 of 20 trials/);
    assert.match(text, /soft\(mk, 2, 0\.25, sg && k <= 128\);\n$/);
    assert.equal(parseRuleSections(text).rankk!.statements.length, 2);
    // A rule that does not type-check, or a file that does not parse: a RuleError, file kept.
    await assert.rejects(
      () => appendSoftRule(path, { ...rule, condition: "k" }, { wins: 20, trials: 20 }, RANK_K),
      gyre.RuleError,
    );
    await Deno.writeTextFile(`${dir}/bad.kdsl`, "mk: ;");
    await assert.rejects(
      () => appendSoftRule(`${dir}/bad.kdsl`, rule, { wins: 20, trials: 20 }, RANK_K),
      gyre.RuleError,
    );
    assert.equal(await Deno.readTextFile(`${dir}/bad.kdsl`), "mk: ;");
    assert.equal(await Deno.readTextFile(path), text);
    // Another family's rule goes under its header, once; Rank-K's again under its own.
    const scan = { field: "variant", value: "2", weight: "0.25", condition: "n > 4096 && al" };
    const evidence = { wins: 20, trials: 20 };
    assert.equal(await appendSoftRule(path, scan, evidence, "scan"), true);
    assert.equal(await appendSoftRule(path, { ...scan, value: "1" }, evidence, "scan"), true);
    assert.equal(await appendSoftRule(path, scan, evidence, "scan"), false);
    assert.equal(await appendSoftRule(path, { ...rule, value: "1" }, evidence, RANK_K), true);
    const sectioned = await Deno.readTextFile(path);
    assert.equal(sectioned.match(/^\[scan\]$/gm)?.length, 1, sectioned);
    assert.equal(sectioned.match(/^\[rankk\]$/gm)?.length, 1, sectioned);
    const read = parseRuleSections(sectioned);
    assert.equal(read.scan!.statements.length, 2);
    assert.equal(read.rankk!.statements.length, 3);
    // Scan's rule does not read in Rank-K's section (no such field or variable there).
    await assert.rejects(() => appendSoftRule(path, scan, evidence, RANK_K), gyre.RuleError);
    await Deno.writeTextFile(path, text);
    // No lock or temporary file is left behind.
    const left = [];
    for await (const e of Deno.readDir(dir)) left.push(e.name);
    assert.deepEqual(left.sort(), ["bad.kdsl", "heur.kdsl"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("self-rewrite: concurrent appends, in this process and in others, all land once", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/heur.kdsl`;
    const rule = (n: number) => ({
      field: "tile",
      value: String(256 * (n + 1)),
      weight: "0.2",
      condition: `c > ${1000 * n}`,
    });
    // Eight in this process at once, one of them twice.
    const here = await Promise.all(
      [0, 1, 2, 3, 4, 5, 6, 7, 3].map((n) =>
        appendSoftRule(path, rule(n), { wins: 20, trials: 20 }, RANK_K)
      ),
    );
    assert.equal(here.filter(Boolean).length, 8);
    // Three other processes, four rules each, at once.
    const module = new URL("../src/tuning.ts", import.meta.url).href;
    const children = [0, 1, 2].map((p) => {
      const code = `
        const { appendSoftRule } = await import(${JSON.stringify(module)});
        await Promise.all([0, 1, 2, 3].map((i) => appendSoftRule(${JSON.stringify(path)}, {
          field: "mk", value: String(${p} * 10 + i), weight: "0.1", condition: "sg",
        }, { wins: 20, trials: 20 }, "rankk")));`;
      return new Deno.Command(Deno.execPath(), { args: ["eval", code], stderr: "piped" }).output();
    });
    for (const out of await Promise.all(children)) {
      assert.ok(out.success, new TextDecoder().decode(out.stderr));
    }
    const program = parseRuleSections(await Deno.readTextFile(path)).rankk!;
    assert.equal(program.statements.length, 8 + 12);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
