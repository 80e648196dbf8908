/**
 * Both devices against PyTorch's answers (tests/torch/expected.jsonl, computed by
 * tests/torch/expected.py in float64 from the same inputs) for every small case of
 * tests/torch/cases.ts: semantic corners of issue 3's ops and of the elementwise math, with the
 * tolerance per op that expected.py states. No PyTorch needed here; tests/torch/check.ts runs the
 * large cases too where PyTorch is installed.
 * @module
 */
import assert from "node:assert/strict";
import { devices, liveCounts } from "./_devices.ts";
import { runCase } from "./torch/cases.ts";
import { readExpectations, selectCases } from "./torch/check.ts";
import { judge } from "./torch/compare.ts";

const expectations = await readExpectations(new URL("./torch/expected.jsonl", import.meta.url));
const small = selectCases(true);

Deno.test("torch: every small case has PyTorch's answer (regenerate expected.jsonl if not)", () => {
  const missing = small.filter((c) => !expectations.has(c.name)).map((c) => c.name);
  assert.deepEqual(missing, []);
  assert.equal(expectations.size, small.length, "answers for cases that no longer exist");
});

for (const device of await devices()) {
  Deno.test(`torch: ${small.length} cases match PyTorch [${device}]`, async () => {
    const before = liveCounts();
    const failures: string[] = [];
    for (const spec of small) {
      const expectation = expectations.get(spec.name);
      if (!expectation) continue;
      const verdict = judge(await runCase(spec, device), expectation);
      if (verdict.problem) failures.push(`${spec.name}: ${verdict.problem}`);
    }
    assert.deepEqual(failures, []);
    assert.deepEqual(liveCounts(), before, "every input and output released");
  });
}
