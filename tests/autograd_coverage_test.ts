/**
 * Every op reports itself to the gradient tape or is one whose results carry no gradient, and every
 * op that reports itself has a rule (or returns only integers or bools). Static checks over the
 * op modules' source, so an op added without either fails here instead of silently cutting a
 * gradient: `grad` follows only ops that call `taped`.
 */
import assert from "node:assert/strict";
import "../src/mod.ts";
import { hasRule } from "../src/autograd/_rules.ts";
import { BINARY, UNARY } from "../src/ir/elementwise_table.ts";

const dir = new URL("../src/ops/", import.meta.url);
const sources = [...Deno.readDirSync(dir)]
  .filter((e) => e.isFile && e.name.endsWith(".ts") && !e.name.startsWith("_"))
  .map((e) => ({ name: e.name, text: Deno.readTextFileSync(new URL(e.name, dir)) }));

/** Exported ops whose results hold no gradient: indices, counts, bools, device moves, builders. */
const NO_GRADIENT = new Set([
  "argmax",
  "argmin",
  "all",
  "any", // indices and bools
  "argsort",
  "searchsorted",
  "bincount",
  "histogram",
  "oneHot",
  "argwhere",
  "nonzero",
  "unique",
  // Asynchronous: they cannot run inside a differentiated function, which must be synchronous.
  "bincountAsync",
  "whereAsync",
  "argwhereAsync",
  "nonzeroAsync",
  "maskedSelectAsync",
  "uniqueAsync",
  "where", // indexing's: its three-argument form is elementwise's (taped), the other gives indices
  "to",
  "readAll",
  "toNested", // reads and device copies
  "unaryOp",
  "binaryOp", // builders: the functions they return are taped
]);
/** Ops that return integers or bools whatever their inputs: no cotangent ever reaches them. */
const INTEGER_RESULTS = new Set([
  "logicalNot",
  "isnan",
  "pcgHash",
  "floorDiv",
  "bitwiseXor",
  "bitwiseAnd",
  "bitwiseOr",
  "shiftRight",
  "equal",
  "notEqual",
  "less",
  "lessEqual",
  "greater",
  "greaterEqual",
  "logicalAnd",
  "logicalOr",
]);

Deno.test("autograd coverage: every exported op is taped or holds no gradient", () => {
  const untaped: string[] = [];
  for (const { name, text } of sources) {
    for (const m of text.matchAll(/^export (?:async )?function (\w+)\(/gm)) {
      const op = m[1];
      if (NO_GRADIENT.has(op)) continue;
      // The implementation: from its last signature to the next top-level declaration.
      const starts = [...text.matchAll(new RegExp(`^export (?:async )?function ${op}\\(`, "gm"))];
      const from = starts[starts.length - 1].index!;
      const rest = text.slice(from + 1);
      const end = rest.search(/^(?:export )?(?:async )?(?:function|const|interface|type) /m);
      const body = end < 0 ? rest : rest.slice(0, end);
      if (!body.includes("taped(")) untaped.push(`${name}: ${op}`);
    }
  }
  assert.deepEqual(untaped, []);
});

Deno.test("autograd coverage: every taped op has a rule or returns integers or bools", () => {
  const names = new Set<string>([...Object.keys(UNARY), ...Object.keys(BINARY)]);
  for (const { text } of sources) {
    for (const m of text.matchAll(/taped\(\s*"([\w.]+)"/g)) names.add(m[1]);
  }
  const missing = [...names].filter((n) => !hasRule(n) && !INTEGER_RESULTS.has(n));
  assert.deepEqual(missing, []);
  assert.ok(names.size > 100, `${names.size} ops`);
});
