/**
 * `deno task tune [families...] [--budget S] [--table NAME] [--no-record] [--self-rewrite]`: tunes
 * the tunable families on this machine's GPU, and the WASM device's on its CPU (a progress bar on
 * a terminal, plain lines otherwise; without a GPU, the WASM device's families only), records the winners in the user's tuning cache and, with `--table NAME`, writes
 * them as the committed reference table `src/heuristics/tables/NAME.json` (then
 * `deno task build` compiles it in); `--self-rewrite` appends soft rules for winners that beat
 * the chooser's pick in A/B trials to the user's rules file.
 * @module
 */
import * as gyre from "../src/mod.ts";
import { takeOption } from "../bench/_util.ts";
import {
  type ChooseTable,
  deviceFingerprint,
  onWasmDevice,
  tune,
  TUNE_FAMILIES,
  type TuneFamilyName,
  type TuneProgress,
} from "../src/tuning.ts";

const args = [...Deno.args];
const option = (name: string) => takeOption(args, name);
const budget = Number(option("--budget") ?? 60);
const table = option("--table");
const record = !args.includes("--no-record");
const selfRewrite = args.includes("--self-rewrite");
const families = args.filter((a) => !a.startsWith("--")) as TuneFamilyName[];
for (const f of families) {
  if (!TUNE_FAMILIES.includes(f)) {
    throw new Error(`unknown family ${f} (${TUNE_FAMILIES.join(", ")})`);
  }
}

const rt = await gyre.init({ device: "auto" });
const caps = rt.gpu?.caps;
const asked = families.length ? families : TUNE_FAMILIES.filter((f) => caps || onWasmDevice(f));
const tty = Deno.stdout.isTerminal();
const encoder = new TextEncoder();
const show = (p: TuneProgress) => {
  const width = 30;
  const filled = Math.round((width * p.done) / p.total);
  const text = `${p.family.padEnd(7)} [${"#".repeat(filled)}${".".repeat(width - filled)}] ` +
    `${p.done}/${p.total} keys, ${p.seconds.toFixed(1)} s`;
  if (tty) Deno.stdout.writeSync(encoder.encode(`\r${text}${p.done === p.total ? "\n" : ""}`));
  else if (p.done === p.total || p.done % 10 === 0) console.log(text);
};
console.log(
  `tuning on ${caps?.description ?? "no GPU"} (fingerprint ${
    deviceFingerprint(caps ?? null).id
  }; the WASM device's ${deviceFingerprint(null).id})`,
);
const report = await tune(asked, {
  budget,
  record,
  selfRewrite,
  onProgress: show,
});
if (tty) Deno.stdout.writeSync(encoder.encode("\n"));
for (const [family, seconds] of Object.entries(report.seconds)) {
  console.log(
    `${family}: ${report.rows[family as TuneFamilyName]?.length} keys in ${seconds.toFixed(1)} s`,
  );
}
if (report.rewritten) console.log(`Self-Rewrite appended ${report.rewritten} soft rules`);
if (report.skipped) console.log(`${report.skipped} keys skipped (budget ${budget} s a family)`);
if (table && caps) {
  const path = new URL(`../src/heuristics/tables/${table}.json`, import.meta.url);
  let old: ChooseTable | null = null;
  try {
    old = JSON.parse(await Deno.readTextFile(path));
  } catch { /* a new table */ }
  const commit = new TextDecoder().decode(
    (await new Deno.Command("git", { args: ["describe", "--always", "--dirty"] }).output()).stdout,
  ).trim();
  const out: ChooseTable = {
    device: old?.device ?? { name: table, match: caps.description, description: caps.description },
    source: `deno task tune at ${commit || "?"}, ${new Date().toISOString().slice(0, 10)}`,
    // A GPU's table holds its own families (the WASM device's are each user's to tune).
    families: {
      ...old?.families,
      ...Object.fromEntries(
        Object.entries(report.rows).filter(([f]) => !onWasmDevice(f as TuneFamilyName)),
      ),
    },
  };
  await Deno.writeTextFile(path, JSON.stringify(out, null, 1) + "\n");
  console.log(`wrote ${path.pathname}; run \`deno task build\` to compile it in`);
}
