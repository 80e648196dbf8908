/**
 * Command line for the PyTorch check. On a machine with PyTorch (a GPU host, say):
 *
 * ```sh
 * deno run -A tests/torch/check.ts --write-cases /tmp/cases.jsonl          # every case's inputs
 * python3 tests/torch/expected.py /tmp/cases.jsonl /tmp/expected.jsonl     # PyTorch's answers
 * deno run -A tests/torch/check.ts --check /tmp/expected.jsonl --report r.md   # gyre judged
 * ```
 *
 * `--small` keeps the cases of at most 5000 input elements: the set whose answers are committed
 * as `tests/torch/expected.jsonl` for `tests/torch_semantics_test.ts` (regenerate it with
 * `--write-cases --small` and `expected.py` after changing a case).
 * @module
 */
import * as gyre from "../../src/mod.ts";
import { cases, type CaseSpec, inputElements, runCase } from "./cases.ts";
import { type Expectation, judge } from "./compare.ts";

/** Input elements up to which a case is small enough for the unit tests. */
export const SMALL_CASE_ELEMENTS = 5000;

/** The cases to run: all, or the small ones. */
export function selectCases(small: boolean): CaseSpec[] {
  return small ? cases.filter((c) => inputElements(c) <= SMALL_CASE_ELEMENTS) : cases;
}

/** Reads an expectations file (JSON lines after a header line) into a map by case name. */
export async function readExpectations(path: string | URL): Promise<Map<string, Expectation>> {
  const lines = (await Deno.readTextFile(path)).split("\n").filter((line) => line.length > 0);
  const map = new Map<string, Expectation>();
  for (const line of lines.slice(1)) {
    const expectation = JSON.parse(line) as Expectation;
    map.set(expectation.name, expectation);
  }
  return map;
}

async function writeLines(path: string, lines: Iterable<unknown>): Promise<void> {
  const file = await Deno.open(path, { write: true, create: true, truncate: true });
  const encoder = new TextEncoder();
  for (const value of lines) {
    const bytes = encoder.encode(JSON.stringify(value) + "\n");
    for (let written = 0; written < bytes.length;) {
      written += await file.write(bytes.subarray(written));
    }
  }
  file.close();
}

async function main(args: string[]): Promise<number> {
  const flag = (name: string) => {
    const index = args.indexOf(name);
    return index >= 0 ? args[index + 1] : undefined;
  };
  const selected = selectCases(args.includes("--small"));
  const casesPath = flag("--write-cases");
  if (casesPath) {
    await writeLines(casesPath, [{ cases: selected.length }, ...selected]);
    console.log(`${selected.length} cases written to ${casesPath}`);
    return 0;
  }
  const expectedPath = flag("--check");
  if (!expectedPath) {
    console.error("usage: check.ts --write-cases FILE [--small] | --check EXPECTED [--report MD]");
    return 2;
  }
  const runtime = await gyre.init({ device: "auto" });
  const devices: gyre.DeviceName[] = runtime.gpu ? ["wasm", "gpu"] : ["wasm"];
  const expectations = await readExpectations(expectedPath);
  const failures: string[] = [];
  const byOp = new Map<string, { cases: number; mismatches: number; worst: number }>();
  for (const spec of selected) {
    const expectation = expectations.get(spec.name);
    for (const device of devices) {
      const key = `${spec.op} | ${device}`;
      const stats = byOp.get(key) ?? { cases: 0, mismatches: 0, worst: 0 };
      byOp.set(key, stats);
      stats.cases++;
      const verdict = expectation
        ? judge(await runCase(spec, device), expectation)
        : { problem: "no expectation (regenerate the expectations)", worst: 0 };
      stats.worst = Math.max(stats.worst, verdict.worst);
      if (verdict.problem) {
        stats.mismatches++;
        failures.push(`- ${device} \`${spec.name}\`: ${verdict.problem}`);
      }
    }
  }
  const lines = [
    `gyre on ${runtime.caps?.description ?? "no GPU"} and WASM against PyTorch's answers in ` +
    `${expectedPath}: ${selected.length} cases`,
    "",
    "| op | device | cases | mismatches | worst error / tolerance |",
    "|---|---|---:|---:|---:|",
    ...[...byOp.entries()].sort(([a], [b]) => a.localeCompare(b)).map((
      [key, s],
    ) =>
      `| ${key} | ${s.cases} | ${s.mismatches} | ${s.worst === 0 ? "exact" : s.worst.toFixed(3)} |`
    ),
    "",
    `${failures.length} mismatches${failures.length ? ":" : "."}`,
    ...failures,
  ];
  const report = lines.join("\n");
  console.log(report);
  const reportPath = flag("--report");
  if (reportPath) await Deno.writeTextFile(reportPath, report + "\n");
  return failures.length ? 1 : 0;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
