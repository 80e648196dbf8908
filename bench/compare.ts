/**
 * Side-by-side wall-clock comparison of gyre, TensorFlow.js (webgpu) and jax-js on one device,
 * in one run. Each library runs in its own process through the same harness
 * (bench/peers/common.ts); the peers run from single-file bundles made by
 * `deno run -A scripts/bundle_peers.ts DIR`, so the GPU host needs no package registry.
 *
 * Usage: deno run -A bench/compare.ts [--peers DIR] [--scale small|full] [--out bench/results]
 *   [--only case,case] (passed to every library's harness)
 * @module
 */
import { slugOf } from "./_util.ts";

const args = Deno.args;
const flag = (name: string, fallback: string) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const peers = flag("peers", "bench/peers/dist");
const scale = flag("scale", "full");
const outDir = flag("out", "bench/results");
const only = flag("only", "");

interface Report {
  peer: string;
  version: string;
  adapter: string;
  mode?: string;
  cases: { name: string; ms: number | null; note?: string; check?: string }[];
}

async function run(label: string, script: string, extra: string[] = []): Promise<Report | null> {
  console.error(`running ${label}...`);
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", script, "--scale", scale, ...(only ? ["--only", only] : []), ...extra],
    stdout: "piped",
    stderr: "inherit",
  }).output();
  const line = new TextDecoder().decode(out.stdout).trim().split("\n").pop() ?? "";
  try {
    return JSON.parse(line) as Report;
  } catch {
    console.error(`${label} printed no report (exit ${out.code})`);
    return null;
  }
}

const reports = [
  await run("gyre", "bench/peers/gyre.ts"),
  await run("tfjs", `${peers}/tfjs.js`),
  // jax-js eager runs a full sum as one GPU thread (did not finish at 16 Mi on an H200, per
  // shared notes) and builds a 16 GiB temporary for cumsum; its eager grad of a matmul builds
  // the M x K x N product (256 GiB at 4096^3): skipped there, run under --jit.
  await run("jax-js", `${peers}/jax.js`, [
    "--skip",
    "sum_16Mi,cumsum_16Mi,mlp3_train_4096,mlp3_train_4096_in_out",
  ]),
  await run("jax-js jit", `${peers}/jax.js`, ["--jit"]),
].filter((r): r is Report => r !== null);

const names = [...new Set(reports.flatMap((r) => r.cases.map((c) => c.name)))];
const label = (r: Report) => `${r.peer} ${r.version}${r.mode ? ` (${r.mode})` : ""}`;
const gyre = reports.find((r) => r.peer === "gyre");
const lines = [
  `# gyre against TensorFlow.js and jax-js on ${reports[0]?.adapter ?? "?"}`,
  "",
  `${
    new Date().toISOString()
  }, scale ${scale}. Wall clock per op with work pipelined (ops issued back to back,`,
  "then one wait for the GPU), median of 5 samples; chains: total ms for the whole chain and one read-back.",
  "",
  `| case | ${reports.map(label).join(" | ")} | gyre speed-up vs best peer |`,
  `|---|${reports.map(() => "---:").join("|")}|---:|`,
];
for (const name of names) {
  const cells = reports.map((r) => {
    const c = r.cases.find((x) => x.name === name);
    if (!c || c.ms === null) return "n/a";
    return c.check?.startsWith("FAIL") ? `${c.ms.toFixed(3)} (wrong)` : c.ms.toFixed(3);
  });
  const mine = gyre?.cases.find((c) => c.name === name)?.ms ?? null;
  const peerTimes = reports.filter((r) => r !== gyre).map((r) =>
    r.cases.find((c) => c.name === name)
  )
    .filter((c) => c && c.ms !== null && !c.check?.startsWith("FAIL")).map((c) => c!.ms!);
  const speedup = mine !== null && peerTimes.length
    ? `${(Math.min(...peerTimes) / mine).toFixed(1)}x`
    : "";
  lines.push(`| ${name} | ${cells.join(" | ")} | ${speedup} |`);
}
const notes = reports.flatMap((r) =>
  r.cases.filter((c) => c.note).map((c) => `- ${label(r)}, ${c.name}: ${c.note}`)
);
lines.push("", "Notes:", ...notes, "");
const slug = slugOf(reports[0]?.adapter ?? "unknown");
await Deno.mkdir(outDir, { recursive: true });
await Deno.writeTextFile(
  `${outDir}/peers-${slug}-${scale}.json`,
  JSON.stringify(reports, null, 2) + "\n",
);
await Deno.writeTextFile(`${outDir}/peers-${slug}-${scale}.md`, lines.join("\n"));
console.log(lines.join("\n"));
