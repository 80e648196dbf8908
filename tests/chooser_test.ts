/**
 * The chooser (issue 24, parts 3, 5 and 6): the choose table compiled into WASM answers as its
 * JSON says, the user's rows load into the same chooser and come first, rule sections read and
 * fail whole, the consensus's layers decide as documented, and every choice is legal and runs.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import * as gyre from "../src/mod.ts";
import {
  cellInterior,
  cellRows,
  type ChooseRow,
  type ChooseTable,
  explainChoice,
  familyCandidates,
  gridRows,
  legalChoice,
  loadUserRows,
  matmulTuneKey,
  onPlan,
  parseRuleSections,
  replacedTables,
  rowBounds,
  setRules,
  tableChoice,
  tableDevice,
  tableDevices,
  TUNE_FAMILIES,
  TUNE_FAMILY,
  tunedOverride,
  type TuneFamilyName,
  type TuneKey,
} from "../src/tuning.ts";
import { H200 } from "./_caps.ts";
import { devices } from "./_devices.ts";
import { ISSUE_PROGRAM } from "./_heuristics.ts";

await devices();

const tables: ChooseTable[] = [];
for (const name of tableDevices()) {
  tables.push(
    JSON.parse(
      await Deno.readTextFile(new URL(`../src/heuristics/tables/${name}.json`, import.meta.url)),
    ),
  );
}

/** The first row of `rows` covering `key`, read from the JSON (the reference for the WASM). */
function firstRow(family: TuneFamilyName, rows: readonly ChooseRow[], key: TuneKey) {
  const words = TUNE_FAMILY[family].keys.map((k) => Number(key[k.name]));
  for (const row of rows) {
    const { low, high, values } = rowBounds(family, row);
    if (words.every((w, i) => w >= low[i] && w <= high[i])) {
      return Object.fromEntries(TUNE_FAMILY[family].fields.map((f, i) => [f.name, values[i]]));
    }
  }
  return null;
}

/** A random key of `family` (sizes up to 2^24, log-uniform). */
function keyArbitrary(family: TuneFamilyName): fc.Arbitrary<TuneKey> {
  const size = fc.integer({ min: 0, max: 24 * 16 }).map((e) =>
    Math.max(1, Math.round(2 ** (e / 16)))
  );
  return fc.record(
    Object.fromEntries(
      TUNE_FAMILY[family].keys.map((k) => [k.name, k.type === "bool" ? fc.boolean() : size]),
    ),
  ) as fc.Arbitrary<TuneKey>;
}

Deno.test("chooser: the compiled tables answer as their JSON says, for every family", () => {
  assert.ok(tables.length >= 1, "no reference table compiled in");
  for (const [d, table] of tables.entries()) {
    const caps = { ...H200, description: table.device.description };
    assert.equal(tableDevice(caps), d, table.device.name);
    for (const family of TUNE_FAMILIES) {
      const rows = table.families[family] ?? [];
      if (!rows.length) continue;
      let hits = 0;
      fc.assert(
        fc.property(keyArbitrary(family), (key) => {
          const want = firstRow(family, rows, key);
          if (want) hits++;
          assert.deepEqual(tableChoice(family, caps, key), want);
        }),
        { numRuns: 150 },
      );
      // And at the grid's own keys (rows' low ends), where every row answers.
      for (const row of rows.slice(0, 40)) {
        const { low } = rowBounds(family, row);
        const key = Object.fromEntries(
          TUNE_FAMILY[family].keys.map((
            k,
            i,
          ) => [k.name, k.type === "bool" ? low[i] === 1 : low[i]]),
        );
        assert.deepEqual(tableChoice(family, caps, key), firstRow(family, rows, key));
        hits++;
      }
      assert.ok(hits > 0, `${table.device.name} ${family}: no key hit a row`);
    }
  }
  // No device, or one without a table: nothing.
  assert.equal(tableDevice(undefined), -1);
  assert.equal(
    tableChoice("scan", { ...H200, description: "a GPU of nobody's" }, {
      r: 1,
      n: 4096,
      sg: true,
      al: true,
    }),
    null,
  );
});

Deno.test("chooser: the user's rows load into the WASM chooser, come first, and fail whole", () => {
  const key = { r: 1, n: 5000, sg: true, al: true };
  const mine = { r: 1, n_min: 4096, n_max: 8191, sg: true, al: true, variant: 2, wg: 256, ept: 16 };
  try {
    loadUserRows({ scan: [mine] });
    assert.deepEqual(tableChoice("scan", H200, key), { variant: 2, wg: 256, ept: 16 });
    assert.deepEqual(tableChoice("scan", undefined, key), { variant: 2, wg: 256, ept: 16 });
    assert.equal(tableChoice("scan", undefined, { ...key, n: 9000 }), null);
    assert.equal(tableChoice("reduce", undefined, key), null);
    // A malformed row: a ValueError, and the rows loaded before stay.
    for (const bad of [{ ...mine, wg: undefined }, { ...mine, n_max: -1 }, { ...mine, ept: 1.5 }]) {
      assert.throws(() => loadUserRows({ scan: [mine, bad as ChooseRow] }), gyre.ValueError);
      assert.deepEqual(tableChoice("scan", undefined, key), { variant: 2, wg: 256, ept: 16 });
    }
    // Many rows: the memory grows.
    const many = Array.from({ length: 6000 }, (_, i) => ({ ...mine, r: i + 2, variant: 1 }));
    loadUserRows({ scan: [...many, mine] });
    assert.deepEqual(tableChoice("scan", undefined, key), { variant: 2, wg: 256, ept: 16 });
    assert.deepEqual(tableChoice("scan", undefined, { ...key, r: 5000 }), {
      variant: 1,
      wg: 256,
      ept: 16,
    });
  } finally {
    loadUserRows({});
  }
  assert.equal(tableChoice("scan", undefined, key), null);
});

Deno.test("chooser: a family tuned over its whole grid sets its compiled table aside", () => {
  // A key the H200's compiled matmul table answers.
  const sizes = [100, 300, 1000, 3000, 10000];
  const key = sizes.flatMap((m) => sizes.map((n) => matmulTuneKey(m, n, 777)))
    .find((k) => tableChoice("matmul", H200, k) !== null)!;
  assert.ok(key, "the compiled H200 table has matmul rows");
  const scanKey = [1, 10, 100, 1000].flatMap((r) =>
    sizes.map((n) => ({ r, n, sg: true, al: true }))
  )
    .find((k) => tableChoice("scan", H200, k) !== null)!;
  const scanBefore = tableChoice("scan", H200, scanKey);
  assert.notEqual(scanBefore, null);
  try {
    loadUserRows({ matmul: [] }, { replacing: ["matmul"] });
    assert.deepEqual(replacedTables(), ["matmul"]);
    assert.equal(tableChoice("matmul", H200, key), null, "the plan decides");
    assert.deepEqual(tableChoice("scan", H200, scanKey), scanBefore, "other families keep theirs");
    // Still replaced while the rows hold the family; a reset brings the compiled table back.
    loadUserRows({ matmul: [] });
    assert.equal(tableChoice("matmul", H200, key), null);
    assert.throws(
      () => loadUserRows({}, { replacing: ["matmull" as "matmul"] }),
      /loadUserRows.*options\.replacing/s,
    );
    assert.deepEqual(replacedTables(), ["matmul"], "a failing call changes nothing");
  } finally {
    loadUserRows({});
  }
  assert.deepEqual(replacedTables(), []);
  assert.notEqual(tableChoice("matmul", H200, key), null);
});

Deno.test("chooser: rows from a grid cover the space between its points", () => {
  const a = { variant: 1, wg: 256, ept: 32 }, b = { variant: 2, wg: 256, ept: 16 };
  const keys = [1024, 4096, 16384].map((n) => ({ r: 4, n, sg: true, al: true }));
  // Nearest point: the geometric midpoints split the ranges.
  const rows = gridRows("scan", keys, [a, b, a]);
  assert.deepEqual(rows.map((r) => [r.n_min, r.n_max]), [[0, 2047], [2048, 8191], [
    8192,
    2147483647,
  ]]);
  assert.deepEqual(rows.map((r) => [r.r_min, r.r_max]), [[4, 7], [4, 7], [4, 7]]);
  // Unaligned keys beside aligned ones: each kind between its own points.
  const mixed = gridRows(
    "scan",
    [1024, 1025, 4096, 4097].map((n) => ({ r: 4, n, sg: true, al: n % 4 === 0 })),
    [a, b, a, b],
  );
  assert.deepEqual(mixed.map((r) => [r.al, r.n_min, r.n_max]), [
    [true, 0, 2047],
    [false, 0, 2049],
    [true, 2048, 2147483647],
    [false, 2050, 2147483647],
  ]);
  // Cells: the choice best on average over a cell's corners, per combination of the flags.
  const measured = keys.map((key, i) => ({
    key,
    timings: [{ choice: a, us: [10, 30, 20][i] }, { choice: b, us: [12, 20, 30][i] }],
  }));
  measured.push({ key: { r: 4, n: 4097, sg: true, al: false }, timings: [{ choice: a, us: 1 }] });
  const cells = cellRows("scan", measured);
  assert.deepEqual(cells.map((r) => [r.al, r.n_min, r.n_max, r.variant]), [
    [true, 0, 4095, 2], // a: 1 + 1.5, b: 1.2 + 1
    [true, 4096, 2147483647, 1], // a: 1.5 + 1, b: 1 + 1.5: the first of equals
    [false, 4096, 8191, 1], // one point: its power-of-two bucket
  ]);
  // Where the measurements name the plan's own choice, a cell it keeps up in (within 3% of the
  // best on average) gets no row; one it loses clearly does.
  const withPlan = (plan: typeof a) => measured.map((m) => ({ ...m, plan }));
  assert.deepEqual(cellRows("scan", withPlan(b)).map((r) => [r.al, r.n_min, r.variant]), [
    // The first cell's winner is the plan's; the second's ties it (2.5 each); the plan was not
    // measured at the unaligned key, where the row stays.
    [false, 4096, 1],
  ]);
  const close = keys.map((key, i) => ({
    key,
    plan: b,
    timings: [{ choice: a, us: 100 }, { choice: b, us: [102, 103, 101][i] }],
  }));
  assert.deepEqual(cellRows("scan", close), []);
  // Where the plan's samples spread wider than its loss, the plan keeps the cell too.
  const noisy = close.map((m) => ({ ...m, timings: [m.timings[0], { choice: b, us: 110 }] }));
  assert.deepEqual(cellRows("scan", noisy.map((m) => ({ ...m, noise: 0.15 }))), []);
  const far = close.map((m) => ({ ...m, timings: [m.timings[0], { choice: b, us: 110 }] }));
  // (Both cells' rows, merged where they meet.)
  assert.deepEqual(cellRows("scan", far).map((r) => [r.n_min, r.n_max, r.variant]), [
    [0, 2147483647, 1],
  ]);
});

Deno.test("chooser: rule sections read whole, each against its family, and fail with positions", () => {
  const issue = ISSUE_PROGRAM;
  const sections = parseRuleSections(
    `${issue}\n[scan]  # sums\nsoft(variant, 2, 0.3, n > 4096);\n`,
  );
  assert.deepEqual(Object.keys(sections), ["rankk", "scan"]);
  assert.equal(sections.rankk!.statements.length, 5);
  const fails: [string, number, number][] = [
    ["[sorting]\nmk: 1;", 1, 1], // no such family
    ["mk: 1;\n[scan]\nsoft(mk, 1, 0.5, true);", 3, 1], // mk is not scan's
    ["[scan]\n\nvariant: c;", 3, 10], // c is not scan's variable
    ["[matmul]\ntile: 1;\n[rankk]\nmk: (1;", 4, 7], // a parse error in a later section
  ];
  for (const [source, line, column] of fails) {
    const e = (() => {
      try {
        parseRuleSections(source);
      } catch (e) {
        return e;
      }
    })();
    assert.ok(e instanceof gyre.RuleError, `${source}: ${e}`);
    assert.deepEqual([e.line, e.column], [line, column], `${source}: ${e.message}`);
  }
  // A failing set applies nothing: the rules before stay.
  try {
    setRules("set", "[scan]\nvariant: 2;");
    const key = { r: 1, n: 1 << 20, sg: false, al: true };
    assert.equal(explainChoice("scan", undefined, key).decidedBy, "hard");
    assert.throws(
      () => setRules("set", "[scan]\nvariant: 0;\n[reduce]\nvariant: ;"),
      gyre.RuleError,
    );
    assert.deepEqual(explainChoice("scan", undefined, key).choice.variant, 2);
    assert.throws(() => gyre.heuristics.set(42 as unknown as string), gyre.RuleError);
  } finally {
    setRules("set", null);
  }
});

Deno.test("chooser: the issue's Rank-K program acts as written, and the GPU runs it", async () => {
  const program = ISSUE_PROGRAM;
  gyre.heuristics.set(program);
  try {
    // sg, k <= 128, c = 2^16: the subgroup stream in buffers of 2048.
    const d = explainChoice("rankk", H200, { r: 8, c: 65536, k: 64, sg: true });
    assert.equal(d.decidedBy, "hard");
    assert.deepEqual(d.choice, { mk: 2, tile: 2048 });
    // No subgroups, k <= 2048: the selection. Its candidates' segment follows the window (512),
    // not the rules' 2048: the tile is let go, the merge kind holds.
    const s = explainChoice("rankk", { ...H200, subgroups: false }, {
      r: 8,
      c: 65536,
      k: 512,
      sg: false,
    });
    assert.equal(s.decidedBy, "hard");
    assert.deepEqual(s.choice, { mk: 1, tile: 512 });
    // k > 2048, c = 2^12: radix-ballot in tiles of 256, which it has not: its own tile.
    const big = explainChoice("rankk", H200, { r: 8, c: 4096, k: 3000, sg: true });
    assert.equal(big.decidedBy, "hard");
    assert.equal(big.choice.mk, 0);
    assert.ok(legalChoice("rankk", H200, big.key, big.choice));
    // A merge kind the device cannot run (the subgroup stream without subgroups) decides nothing.
    gyre.heuristics.set("mk: 2;");
    const noSubgroups = { ...H200, subgroups: false, features: [] };
    const none = explainChoice("rankk", noSubgroups, { r: 8, c: 65536, k: 64, sg: false });
    assert.notEqual(none.decidedBy, "hard");
    gyre.heuristics.set(program);
    // On this device: the forms the rules name run.
    const rt = gyre.runtime();
    if (rt.gpu) {
      const caps = rt.gpu.caps;
      const key = { r: 4, c: 65536, k: 64, sg: caps.subgroups };
      const want = explainChoice("rankk", caps, key).choice;
      const seen: string[] = [];
      const stop = onPlan((r) => r.family === "sort" && seen.push(...r.variants));
      const x = gyre.random.uniform([4, 65536], { seed: 3, device: "gpu" });
      const [values] = gyre.topk(x, 64);
      const gpu = await values.data();
      stop();
      const onWasm = await x.to("wasm");
      const [reference] = gyre.topk(onWasm, 64);
      assert.deepEqual([...gpu], [...(await reference.data())]);
      assert.ok(seen.includes(TUNE_FAMILY.rankk.fields[0].labels![want.mk]), `${seen}`);
      for (const t of [x, values, onWasm, reference]) t.dispose();
    }
  } finally {
    gyre.heuristics.clear();
  }
});

Deno.test("chooser: the consensus's layers decide as documented", () => {
  const key = { r: 1, n: 1 << 20, sg: true, al: true };
  const caps = { ...H200, description: "a GPU with no table" };
  // Nothing speaks: the plan.
  const plain = explainChoice("scan", caps, key);
  assert.equal(plain.decidedBy, "plan");
  assert.deepEqual(plain.choice, plain.plan);
  assert.equal(tunedOverride("scan", caps, key, undefined), null);
  const other = familyCandidates("scan", caps, key).find((c) => c.variant !== plain.plan.variant)!;
  try {
    // The table over the plan (its prior beats the plan's).
    const row = { r: 1, n_min: 0, sg: true, al: true, ...other } as ChooseRow;
    loadUserRows({ scan: [row] });
    const t = explainChoice("scan", caps, key);
    assert.equal(t.decidedBy, "table");
    assert.deepEqual(t.choice, other);
    assert.deepEqual(tunedOverride("scan", caps, key, undefined), TUNE_FAMILY.scan.override(other));
    // An explicit override (a test's, the tuner's) always wins.
    assert.deepEqual(tunedOverride("scan", caps, key, { variant: "multipass" }), {
      variant: "multipass",
    });
    // A soft rule for the plan's variant outweighs the table's prior.
    setRules("set", `[scan]\nsoft(variant, ${plain.plan.variant}, 0.3, r == 1);`);
    const s = explainChoice("scan", caps, key);
    assert.equal(s.choice.variant, plain.plan.variant);
    assert.ok(s.soft.score > s.table.score);
    // A lighter one does not.
    setRules("set", `[scan]\nsoft(variant, ${plain.plan.variant}, 0.01, true);`);
    assert.equal(explainChoice("scan", caps, key).decidedBy, "table");
    // A hard assignment over everything.
    setRules("set", `[scan]\nvariant: ${plain.plan.variant};\nept: ${other.ept};`);
    const h = explainChoice("scan", caps, key);
    assert.equal(h.decidedBy, "hard");
    assert.equal(h.choice.variant, plain.plan.variant);
    assert.equal(h.choice.ept, other.ept);
    // A table row the device cannot run proposes the nearest legal choice: its first fields
    // kept, the one that cannot hold at its nearest legal value (the largest workgroup).
    setRules("set", null);
    loadUserRows({ scan: [{ ...row, wg: 4096 }] });
    const near = explainChoice("scan", caps, key).table.choice!;
    assert.ok(legalChoice("scan", caps, key, near));
    assert.deepEqual(near, { ...other, wg: 512 });
  } finally {
    setRules("set", null);
    loadUserRows({});
  }
  // Decisions are kept per device, not per description: the same name with other caps decides
  // again (no subgroups: no subgroup stream).
  try {
    setRules("set", "mk: 2;");
    const rankKey = { r: 8, c: 65536, k: 64, sg: true };
    assert.equal(explainChoice("rankk", H200, rankKey).decidedBy, "hard");
    const same = { ...H200, subgroups: false, features: [] };
    assert.notEqual(explainChoice("rankk", same, rankKey).decidedBy, "hard");
  } finally {
    setRules("set", null);
  }
  assert.throws(() => explainChoice("scans" as TuneFamilyName, caps, key), gyre.ValueError);
  assert.throws(() => explainChoice("scan", caps, { r: 1, n: 5 }), /key\.sg/);
  assert.throws(() => explainChoice("scan", caps, { ...key, n: -1 }), /key\.n/);
});

Deno.test("chooser: every decision is legal, whatever the rules say (property)", () => {
  const devices = [H200, { ...H200, description: "a GPU with no table" }, undefined];
  for (const family of TUNE_FAMILIES) {
    const fields = TUNE_FAMILY[family].fields;
    const rule = fc.tuple(
      fc.constantFrom(...fields),
      fc.integer({ min: 0, max: 4 }),
      fc.boolean(),
      fc.double({ min: 0, max: 1, noNaN: true }),
    ).map(([field, i, hard, w]) => {
      const value = field.values[i % field.values.length];
      return hard
        ? `${field.name}: ${value};`
        : `soft(${field.name}, ${value}, ${w.toFixed(2)}, true);`;
    });
    fc.assert(
      fc.property(
        keyArbitrary(family),
        fc.array(rule, { maxLength: 3 }),
        fc.constantFrom(...devices),
        (key, rules, caps) => {
          if (family === "rankk" && (key.k as number) > (key.c as number)) return;
          setRules("set", `[${family}]\n${rules.join("\n")}`);
          const d = explainChoice(family, caps, key);
          assert.ok(legalChoice(family, caps, key, d.choice), `${JSON.stringify(d)}`);
          // Assigned fields, the last assignment of each, in the family's order.
          const assigned = new Map(
            rules.filter((r) => !r.startsWith("soft")).map((r) => r.split(":")).map((
              [f, v],
            ) => [f, Number(v.replace(";", ""))]),
          );
          const first = fields.map((f) => f.name).find((n) => assigned.has(n));
          const reachable = first !== undefined &&
            familyCandidates(family, caps, key).some((c) => c[first] === assigned.get(first));
          // Hard exactly where some candidate has the first assigned field, which then holds.
          assert.equal(d.decidedBy === "hard", reachable, JSON.stringify(d));
          if (reachable) assert.equal(d.choice[first!], assigned.get(first!));
        },
      ),
      { numRuns: 60 },
    );
  }
  setRules("set", null);
});

Deno.test("cellInterior: a key between a cell's bounds, no power of two, aligned as the row", () => {
  const row = { m_min: 64, m_max: 127, n_min: 128, n_max: 255, k_min: 64, k_max: 127, al: false };
  const grid = [64, 128, 256].map((v) => ({ key: { m: v, n: v, k: v, al: false }, timings: [] }));
  assert.deepEqual(cellInterior("matmul", row, grid), { m: 91, n: 181, k: 91, al: false });
  assert.deepEqual(cellInterior("matmul", { ...row, al: true }, grid), {
    m: 92,
    n: 184,
    k: 92,
    al: true,
  });
  // A quarter of the way on a log scale.
  assert.deepEqual(cellInterior("matmul", row, grid, 0.25), { m: 77, n: 153, k: 77, al: false });
  // The table's edges stand at the smallest and largest sizes measured; a cell too narrow has
  // no interior.
  assert.equal(cellInterior("matmul", { ...row, m_min: 0 }, grid)?.m, 91);
  assert.equal(
    cellInterior("matmul", { ...row, m_min: 256, m_max: 2 ** 31 - 1 }, grid)?.m,
    257,
  );
  assert.equal(cellInterior("matmul", { ...row, al: true, m_min: 4, m_max: 7 }, grid), null);
  // A size the grid never varied keeps its one value (the WASM device's threads).
  const wasm = [32, 64].map((v) => ({ key: { m: v, n: v, k: v, t: 2 }, timings: [] }));
  const wasmRow = {
    m_min: 32,
    m_max: 63,
    n_min: 32,
    n_max: 63,
    k_min: 32,
    k_max: 63,
    t_min: 2,
    t_max: 3,
  };
  assert.equal(cellInterior("wasmGemm", wasmRow, wasm)?.t, 2);
});
