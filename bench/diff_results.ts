/**
 * Compares benchmark results of one commit against another measured on the same machine: kernel
 * tables (`kernels.ts` JSON, median microseconds per kernel) or peer tables (`compare.ts` JSON,
 * gyre's milliseconds per case). Given the baseline first and one or more runs of the change, it
 * prints, per row, the baseline, each run, the change of the runs' median against the baseline,
 * and the spread between the runs themselves (run-to-run noise), then a summary: what moved by
 * more than the noise.
 *
 *   deno run -A bench/diff_results.ts --title "..." base.json head1.json [head2.json ...] > out.md
 * @module
 */
import { median } from "./_util.ts";

interface Row {
  name: string;
  value: number;
  /** GPU dispatches per run (kernel tables only). */
  dispatches?: number;
}

function rowsOf(path: string): { rows: Row[]; unit: string; device: string } {
  const data = JSON.parse(Deno.readTextFileSync(path));
  if (Array.isArray(data)) {
    const gyre = data.find((p: { peer: string }) => p.peer === "gyre");
    return {
      rows: gyre.cases.map((c: { name: string; ms: number }) => ({ name: c.name, value: c.ms })),
      unit: "ms",
      device: gyre.adapter,
    };
  }
  return {
    rows: data.kernels.map((k: { name: string; medianUs: number; dispatches: number }) => ({
      name: k.name,
      value: k.medianUs,
      dispatches: k.dispatches,
    })),
    unit: "us",
    device: data.device,
  };
}

const args = [...Deno.args];
const titleAt = args.indexOf("--title");
const title = titleAt >= 0 ? args.splice(titleAt, 2)[1] : "Before and after";
const [basePath, ...headPaths] = args;
if (!basePath || headPaths.length === 0) {
  console.error("usage: diff_results.ts [--title T] base.json head.json [head.json ...]");
  Deno.exit(2);
}
const base = rowsOf(basePath);
const heads = headPaths.map(rowsOf);
const byName = (rows: Row[]) => new Map(rows.map((r) => [r.name, r.value]));
const headMaps = heads.map((h) => byName(h.rows));
const pct = (x: number) => `${x >= 0 ? "+" : ""}${(100 * x).toFixed(1)}%`;

const lines: string[] = [];
const changes: { name: string; change: number; spread: number }[] = [];
lines.push(`# ${title}`, "");
lines.push(
  `Device: ${base.device}. Baseline: \`${basePath}\`; runs of the change: ${
    headPaths.map((p) => `\`${p}\``).join(", ")
  }. Change: the runs' median against the baseline; spread: (max - min) / min over the runs of ` +
    `the change (run-to-run noise). Units: ${base.unit}.`,
  "",
);
lines.push(
  `| case | baseline | ${headPaths.map((_, i) => `run ${i + 1}`).join(" | ")} | change | spread |`,
);
lines.push(`|---|---:|${headPaths.map(() => "---:").join("|")}|---:|---:|`);
for (const { name, value } of base.rows) {
  const values = headMaps.map((m) => m.get(name));
  if (values.some((v) => v === undefined)) continue;
  const vs = values as number[];
  const m = median(vs);
  const change = m / value - 1;
  const spread = (Math.max(...vs) - Math.min(...vs)) / Math.min(...vs);
  changes.push({ name, change, spread });
  lines.push(
    `| ${name} | ${value.toFixed(3)} | ${vs.map((v) => v.toFixed(3)).join(" | ")} | ${
      pct(change)
    } | ${pct(spread)} |`,
  );
}
// Kernel tables: every run must dispatch as many kernels per row as the baseline.
const dispatchChanges = base.rows.filter((r) =>
  r.dispatches !== undefined &&
  heads.some((h) => h.rows.find((x) => x.name === r.name)?.dispatches !== r.dispatches)
);
const abs = changes.map((c) => Math.abs(c.change)).sort((a, b) => a - b);
const spreads = changes.map((c) => c.spread).sort((a, b) => a - b);
// With one run of the change there is no spread to compare against: list what moved over 2%.
const oneRun = headPaths.length === 1;
const beyond = changes.filter((c) =>
  Math.abs(c.change) > 0.02 && (oneRun || Math.abs(c.change) > 2 * c.spread)
);
lines.push(
  "",
  `Summary: ${changes.length} rows; |change| median ${pct(median(abs))}, largest ${
    pct(abs[abs.length - 1] ?? 0)
  }; ${
    oneRun
      ? "one run of the change, so no run-to-run spread here"
      : `spread between runs median ${pct(median(spreads))}, largest ${
        pct(spreads[spreads.length - 1] ?? 0)
      }`
  }. Rows that moved by more than 2%${oneRun ? "" : " and more than twice their spread"}: ${
    beyond.length === 0
      ? "none"
      : beyond.map((c) => `${c.name} (${pct(c.change)}, spread ${pct(c.spread)})`).join("; ")
  }.`,
);
if (base.rows.some((r) => r.dispatches !== undefined)) {
  lines.push(
    "",
    `Dispatches per row: ${
      dispatchChanges.length === 0
        ? "the same in every run as in the baseline"
        : `changed in ${dispatchChanges.map((r) => r.name).join(", ")}`
    }.`,
  );
}
console.log(lines.join("\n"));
