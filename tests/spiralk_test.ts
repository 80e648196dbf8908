/**
 * SpiralK (issue 24, part 4): the issue's program parses and acts as written; errors are
 * RuleErrors with their line and column; random well-formed programs print back to the same
 * program and evaluate the same; random garbage gives a RuleError, never another exception.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import * as gyre from "../src/mod.ts";
import {
  evaluateRules,
  parseRules,
  printRules,
  type RuleExpr,
  type RuleProgram,
  type RuleType,
} from "../src/tuning.ts";
import { SEED } from "./_harness.ts";
import { ISSUE_PROGRAM } from "./_heuristics.ts";

const RANK_K = { r: "number", c: "number", k: "number", sg: "bool" } as const;

Deno.test("spiralk: the issue's Rank-K program parses and acts as written", () => {
  const rules = parseRules(ISSUE_PROGRAM, RANK_K);
  const at = (key: { r: number; c: number; k: number; sg: boolean }) => evaluateRules(rules, key);
  assert.deepEqual(at({ r: 8, c: 65536, k: 100, sg: true }), {
    assignments: { mk: 2, tile: 2048, ctile: 1024 },
    soft: [
      { field: "mk", value: 2, weight: 0.25, holds: true },
      { field: "tile", value: 2048, weight: 0.2, holds: true },
    ],
  });
  // log2(c) = 13 is not above 13: 512; k above 2048: mk 0; no subgroups: neither soft rule.
  const d = at({ r: 1, c: 8192, k: 4096, sg: false });
  assert.deepEqual(d.assignments, { mk: 0, tile: 512, ctile: 512 });
  assert.deepEqual(d.soft.map((s) => s.holds), [false, false]);
  assert.deepEqual(at({ r: 1, c: 16384, k: 1000, sg: true }).assignments, {
    mk: 1,
    tile: 1024,
    ctile: 512,
  });
  assert.deepEqual(at({ r: 1, c: 100, k: 1000, sg: true }).assignments.tile, 256);
});

Deno.test("spiralk: errors name their line and column; nothing half-read", () => {
  const cases: [string, number, number, RegExp][] = [
    ["mk: 1 +;", 1, 8, /expected an expression, received ";"/],
    ["# a comment\nmk: sel(k, 1, 2);", 2, 9, /a boolean as sel's condition/],
    ["mk: 2;\n  tile: y;", 2, 9, /a variable or an earlier field \(r, c, k, sg, mk\)/],
    ["mk 2;", 1, 4, /":" after the field mk/],
    ["mk: 1 < 2 < 3;", 1, 11, /";" after the assignment of mk/],
    ["soft(mk, 1, true, sg);", 1, 13, /a number as the soft rule's weight/],
    ["mk: 1;\n@", 2, 1, /a number, a name, an operator or a comment/],
    ["mk: (1;", 1, 7, /"\)"/],
    ["k: 3;", 1, 1, /a field name, not a key variable/],
    ["mk: min(1);", 1, 5, /2 arguments to min/],
    ["mk: sel(sg, 1, true);", 1, 16, /a number in both of sel's branches/],
    ["mk: 1;\nsoft(mk, true, 1, sg);", 2, 10, /a number for the field mk/],
    ["mk: 1e999;", 1, 5, /a finite number/],
    ["soft: 1;", 1, 5, /a reserved word/],
    ["sel: 1;", 1, 1, /a field to assign/],
  ];
  for (const [source, line, column, message] of cases) {
    assert.throws(
      () => parseRules(source, RANK_K),
      (e: unknown) =>
        e instanceof gyre.RuleError && e.line === line && e.column === column &&
        message.test(e.message) && e.op === "heuristics",
      source,
    );
  }
  // A key missing a variable, or of the wrong type.
  const rules = parseRules("mk: sel(sg, 2, 1);", RANK_K);
  assert.throws(() => evaluateRules(rules, { r: 1, c: 1, k: 1 }), gyre.RuleError);
  assert.throws(() => evaluateRules(rules, { r: 1, c: 1, k: 1, sg: 1 }), gyre.RuleError);
  assert.throws(() => parseRules(42 as unknown as string, RANK_K), gyre.RuleError);
});

// Random well-formed programs: expressions of a requested type over the Rank-K variables and the
// fields assigned before.
type Scope = { name: string; type: RuleType }[];

function exprArb(type: RuleType, scope: Scope, depth: number): fc.Arbitrary<RuleExpr> {
  const at = { line: 0, column: 0 };
  const names = scope.filter((v) => v.type === type).map((v) => v.name);
  const leaves: fc.Arbitrary<RuleExpr>[] = type === "number"
    ? [
      fc.oneof(
        fc.integer({ min: 0, max: 100000 }),
        fc.double({ min: 0, max: 1e6, noNaN: true }),
        fc.constantFrom(0.25, 0.2, 1e-7, 1e21, 15),
      ).map((value) => ({ kind: "number" as const, value, at })),
    ]
    : [fc.boolean().map((value) => ({ kind: "bool" as const, value, at }))];
  if (names.length > 0) {
    leaves.push(fc.constantFrom(...names).map((name) => ({ kind: "name" as const, name, at })));
  }
  const leaf = fc.oneof(...leaves);
  if (depth === 0) return leaf;
  const sub = (t: RuleType) => exprArb(t, scope, depth - 1);
  const inner: fc.Arbitrary<RuleExpr>[] = [
    fc.tuple(sub("bool"), sub(type), sub(type)).map(([c, a, b]) => ({
      kind: "call" as const,
      fn: "sel" as const,
      args: [c, a, b],
      at,
    })),
  ];
  if (type === "number") {
    inner.push(
      fc.tuple(
        fc.constantFrom("+", "-", "*", "/") as fc.Arbitrary<"+">,
        sub("number"),
        sub("number"),
      )
        .map(([op, a, b]) => ({ kind: "binary" as const, op, a, b, at })),
      sub("number").map((x) => ({ kind: "unary" as const, op: "-" as const, x, at })),
      fc.tuple(fc.constantFrom("min", "max") as fc.Arbitrary<"min">, sub("number"), sub("number"))
        .map(([fn, a, b]) => ({ kind: "call" as const, fn, args: [a, b], at })),
      sub("number").map((x) => ({ kind: "call" as const, fn: "log2" as const, args: [x], at })),
    );
  } else {
    inner.push(
      fc.tuple(fc.constantFrom("&&", "||") as fc.Arbitrary<"&&">, sub("bool"), sub("bool"))
        .map(([op, a, b]) => ({ kind: "binary" as const, op, a, b, at })),
      fc.tuple(
        fc.constantFrom("<", "<=", ">", ">=", "==", "!=") as fc.Arbitrary<"<">,
        sub("number"),
        sub("number"),
      ).map(([op, a, b]) => ({ kind: "binary" as const, op, a, b, at })),
      fc.tuple(fc.constantFrom("==", "!=") as fc.Arbitrary<"==">, sub("bool"), sub("bool"))
        .map(([op, a, b]) => ({ kind: "binary" as const, op, a, b, at })),
      sub("bool").map((x) => ({ kind: "unary" as const, op: "!" as const, x, at })),
    );
  }
  return fc.oneof(
    { weight: 1, arbitrary: leaf },
    ...inner.map((a) => ({ weight: 1, arbitrary: a })),
  );
}

const FIELDS = ["mk", "tile", "ctile", "wg"];

/** Up to six statements, each assignment's field visible to the statements after it. */
const programArb: fc.Arbitrary<RuleProgram> = fc.array(
  fc.record({
    soft: fc.boolean(),
    field: fc.constantFrom(...FIELDS),
    type: fc.constantFrom<RuleType>("number", "number", "bool"),
    seed: fc.integer(),
  }),
  { maxLength: 6 },
).chain((plan) => {
  let scope: Scope = Object.entries(RANK_K).map(([name, type]) => ({ name, type }));
  const parts: fc.Arbitrary<RuleProgram["statements"][number]>[] = [];
  const at = { line: 0, column: 0 };
  const fieldTypes = new Map<string, RuleType>();
  for (const p of plan) {
    const current = [...scope];
    const type = fieldTypes.get(p.field) ?? p.type;
    if (p.soft) {
      parts.push(
        fc.tuple(
          exprArb(type, current, 2),
          exprArb("number", current, 1),
          exprArb("bool", current, 2),
        )
          .map(([value, weight, condition]) => ({
            kind: "soft" as const,
            field: p.field,
            value,
            weight,
            condition,
            at,
          })),
      );
      fieldTypes.set(p.field, type);
    } else {
      parts.push(
        exprArb(type, current, 3).map((value) => ({
          kind: "assign" as const,
          field: p.field,
          value,
          at,
        })),
      );
      fieldTypes.set(p.field, type);
      scope = [...scope.filter((v) => v.name !== p.field), { name: p.field, type }];
    }
  }
  return fc.tuple(...parts).map((statements) => ({ statements, variables: RANK_K }));
});

const keyArb = fc.record({
  r: fc.integer({ min: 1, max: 1 << 20 }),
  c: fc.integer({ min: 1, max: 1 << 24 }),
  k: fc.integer({ min: 0, max: 1 << 16 }),
  sg: fc.boolean(),
});

/** Equal as SpiralK values (NaN equals NaN: 0/0 is a value a program may compute). */
function sameDecision(a: unknown, b: unknown): boolean {
  return JSON.stringify(a, (_, v) => (Number.isNaN(v) ? "NaN" : v)) ===
    JSON.stringify(b, (_, v) => (Number.isNaN(v) ? "NaN" : v));
}

Deno.test("spiralk: random programs print back to the same program and act the same", () => {
  fc.assert(
    fc.property(programArb, keyArb, (program, key) => {
      const text = printRules(program);
      const parsed = parseRules(text, RANK_K);
      assert.equal(printRules(parsed), text);
      assert.ok(
        sameDecision(evaluateRules(parsed, key), evaluateRules(program, key)),
        `${text} at ${JSON.stringify(key)}`,
      );
    }),
    { seed: SEED, numRuns: 300 },
  );
});

Deno.test("spiralk: random garbage gives a RuleError, never another exception", () => {
  const pieces = [
    "mk",
    "tile",
    "soft",
    "sel",
    "log2",
    "min",
    "(",
    ")",
    ",",
    ";",
    ":",
    "&&",
    "||",
    "!",
    "<=",
    "==",
    "+",
    "-",
    "*",
    "/",
    "1",
    "2.5",
    "1e3",
    "true",
    "k",
    "sg",
    "#x\n",
    "\n",
    " ",
    "@",
    "1e",
    ".",
  ];
  fc.assert(
    fc.property(
      fc.oneof(
        fc.string({ maxLength: 40 }),
        fc.array(fc.constantFrom(...pieces), { maxLength: 30 }).map((p) => p.join("")),
      ),
      (source) => {
        try {
          const rules = parseRules(source, RANK_K);
          // What does parse must print back and evaluate.
          assert.equal(printRules(parseRules(printRules(rules), RANK_K)), printRules(rules));
          evaluateRules(rules, { r: 1, c: 2, k: 3, sg: true });
        } catch (e) {
          if (!(e instanceof gyre.RuleError)) throw e;
          assert.ok(e.line >= 1 && e.column >= 1, e.message);
        }
      },
    ),
    { seed: SEED, numRuns: 2000 },
  );
});
