/**
 * The long differential run (issues 28 and 31):
 * `deno task differential [count] [first seed] [--jobs N] [--seconds S]` generates `count` random
 * programs (default 100,000) from tests/_programs.ts, checks each on WASM unfused (the reference),
 * WASM fused, GPU unfused and GPU fused, and every tenth through `jit` on both devices; prints
 * progress and, at the end, the counts: programs, steps by op, disagreements by run. `--jobs N`
 * splits the seeds into N contiguous ranges, each checked by a process of its own (the work is
 * mostly single-threaded: shader compilation and the WASM reference), and adds up their counts.
 * `--seconds S` starts no new group of programs after S seconds (the counts then say how many
 * ran). Each disagreement is shrunk and written as JSON to
 * bench/results/differential-<device>-<first seed>.jsonl, ready for tests/differential_test.ts's
 * REGRESSIONS; the counts go to bench/results/differential-<device>-<first seed>.md (named by the
 * seeds, so that a short run does not overwrite a long one's report). `--replay FILE` checks again
 * the shrunk programs of such a file (on every device, and through jit) and says which still
 * disagree.
 */
import * as gyre from "../src/mod.ts";
import {
  checkJit,
  checkProgram,
  checkPrograms,
  generateProgram,
  type Program,
  programFromJson,
  programToJson,
  shrink,
} from "../tests/_programs.ts";

/** What one range of seeds found; ranges add up. */
interface Tally {
  programs: number;
  steps: number;
  jitted: number;
  ops: Record<string, number>;
  failures: Record<string, number>;
  /** Shrunk disagreements, one JSON line each. */
  lines: string[];
}

/** Arguments that are neither a flag nor a flag's value. */
const positional = Deno.args.filter((a, i) =>
  !a.startsWith("--") &&
  !["--jobs", "--run-first", "--seconds", "--replay"].includes(Deno.args[i - 1])
);
const flag = (name: string) => {
  const i = Deno.args.indexOf(name);
  return i >= 0 ? Deno.args[i + 1] : undefined;
};
const count = Number(positional[0] ?? 100_000);
const first = Number(positional[1] ?? 1_000_000);
const jobs = Number(flag("--jobs") ?? 1);
/** A time budget: past it no new group of programs starts, and the counts say how many ran. */
const budget = Number(flag("--seconds") ?? Infinity);
const worker = Deno.args.includes("--worker");
const jitEvery = Number(Deno.env.get("GYRE_JIT_EVERY") ?? 10);
const numbers = [["count", count], ["first seed", first], ["--jobs", jobs]] as const;
for (const [name, v] of numbers) {
  if (!Number.isInteger(v) || v < (name === "count" ? 0 : 1)) {
    throw new Error(`differential: ${name} must be a whole number, got ${v}`);
  }
}

/**
 * Checks seeds `from` .. `from + n - 1`, every `jitEvery`th counted from `origin` (the whole run's
 * first seed) through jit too; progress goes to stderr every 1,000 programs.
 */
async function checkRange(from: number, n: number, gpu: boolean, origin = from): Promise<Tally> {
  const float16 = gyre.runtime().gpu?.caps.shaderF16 ?? false;
  const tally: Tally = { programs: 0, steps: 0, jitted: 0, ops: {}, failures: {}, lines: [] };
  const started = performance.now();
  const record = async (
    kind: string,
    seed: number,
    program: Program,
    why: string,
    check: (p: Program) => Promise<string | null>,
  ) => {
    tally.failures[kind] = (tally.failures[kind] ?? 0) + 1;
    const small = await shrink(program, async (p) => (await check(p)) !== null);
    tally.lines.push(JSON.stringify({ kind, seed, why, shrunk: programToJson(small) }));
    console.error(`  seed ${seed}: ${kind}: ${why.slice(0, 300)}`);
  };
  const GROUP = 100;
  for (let i = 0; i < n && performance.now() - started < budget * 1000; i += GROUP) {
    const seeds = Array.from({ length: Math.min(GROUP, n - i) }, (_, k) => from + i + k);
    const jitted = (seed: number) => (seed - origin) % jitEvery === 0;
    const programs = seeds.map((seed) =>
      generateProgram(seed, { float16, dataSets: jitted(seed) ? 3 : 1 })
    );
    for (const program of programs) {
      tally.steps += program.steps.length;
      for (const s of program.steps) {
        const name = s.p.op ? `${s.op}:${s.p.op}` : s.op;
        tally.ops[name] = (tally.ops[name] ?? 0) + 1;
      }
    }
    const check = (p: Program) => checkProgram(p, { gpu });
    const results = await checkPrograms(programs, { gpu });
    for (let k = 0; k < programs.length; k++) {
      const why = results[k];
      if (why) await record(why.split(":")[0], seeds[k], programs[k], why, check);
      if (!jitted(seeds[k])) continue;
      tally.jitted++;
      for (const d of devices) {
        const jitCheck = (p: Program) => checkJit(p, d);
        const jwhy = await jitCheck(programs[k]);
        if (jwhy) await record(`jit ${d}`, seeds[k], programs[k], jwhy, jitCheck);
      }
    }
    tally.programs += programs.length;
    if (tally.programs % 1000 === 0 || tally.programs === n) {
      const s = (performance.now() - started) / 1000;
      const bad = Object.values(tally.failures).reduce((a, b) => a + b, 0);
      console.error(
        `  seeds ${from}+: ${tally.programs}/${n} programs, ${bad} disagreements, ${
          s.toFixed(0)
        } s`,
      );
    }
  }
  return tally;
}

function merge(tallies: Tally[]): Tally {
  const out: Tally = { programs: 0, steps: 0, jitted: 0, ops: {}, failures: {}, lines: [] };
  for (const t of tallies) {
    out.programs += t.programs;
    out.steps += t.steps;
    out.jitted += t.jitted;
    for (const [k, v] of Object.entries(t.ops)) out.ops[k] = (out.ops[k] ?? 0) + v;
    for (const [k, v] of Object.entries(t.failures)) out.failures[k] = (out.failures[k] ?? 0) + v;
    out.lines.push(...t.lines);
  }
  return out;
}

/** Runs `jobs` processes over contiguous ranges; their progress lines pass through. */
async function checkInProcesses(): Promise<Tally> {
  const per = Math.ceil(count / jobs);
  const children = [];
  for (let j = 0; j < jobs && j * per < count; j++) {
    const n = Math.min(per, count - j * per);
    // --no-lock: the parent has resolved the modules already (and a GPU host runs offline).
    const script = new URL(import.meta.url).pathname;
    const range = [String(n), String(first + j * per)];
    // Each child picks jit seeds counted from the run's first seed, as one process would.
    const worker = ["--worker", "--run-first", String(first), "--seconds", String(budget)];
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--no-lock", script, ...range, ...worker],
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    children.push(child.output());
  }
  const tallies: Tally[] = [];
  for (const output of await Promise.all(children)) {
    const text = new TextDecoder().decode(output.stdout).trim().split("\n").pop() ?? "";
    if (!output.success || !text.startsWith("{")) {
      throw new Error(`differential: a worker failed (exit ${output.code})`);
    }
    tallies.push(JSON.parse(text));
  }
  return merge(tallies);
}

const rt = await gyre.init({ device: "auto" });
const gpu = rt.gpu !== null;
/** The devices each program goes through jit on. */
const devices: gyre.DeviceName[] = gpu ? ["wasm", "gpu"] : ["wasm"];
const device = rt.gpu?.caps.description ?? "no GPU";
const replay = flag("--replay");
if (replay) {
  // Re-checks the shrunk programs of an earlier run (its .jsonl), each on every device and
  // through jit: what a fix must turn to "agrees".
  let still = 0, lines = 0;
  for (const line of (await Deno.readTextFile(replay)).split("\n").filter((l) => l.trim())) {
    const { kind, seed, shrunk } = JSON.parse(line);
    const program = programFromJson(shrunk);
    let why = await checkProgram(program, { gpu });
    for (const d of devices) why ??= await checkJit(program, d);
    lines++;
    if (why) still++;
    console.log(
      `seed ${seed} (${kind}): ${why ? `still disagrees: ${why.slice(0, 200)}` : "agrees"}`,
    );
  }
  console.log(`${lines} programs replayed on ${device}, ${still} still disagree`);
  Deno.exit(still ? 1 : 0);
}
if (worker) {
  const tally = await checkRange(first, count, gpu, Number(flag("--run-first") ?? first));
  console.log(JSON.stringify(tally));
  Deno.exit(0);
}

console.error(
  `differential: ${count} programs from seed ${first} on ${device}, ${jobs} process(es)`,
);
const started = performance.now();
const tally = jobs > 1 ? await checkInProcesses() : await checkRange(first, count, gpu);
const seconds = (performance.now() - started) / 1000;
const disagreements = Object.values(tally.failures).reduce((a, b) => a + b, 0);
const ops = Object.entries(tally.ops).sort((a, b) => b[1] - a[1]);
console.log(
  `\n${tally.programs} programs (${tally.steps} steps, ${tally.jitted} also through jit) ` +
    `in ${seconds.toFixed(0)} s`,
);
console.log("disagreements:", disagreements ? tally.failures : "none");
console.log("steps by op:", Object.fromEntries(ops));

const slug = device.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "");
const results = new URL("./results/", import.meta.url);
const report = [
  `# Differential run on ${device}`,
  "",
  `\`deno task differential ${Deno.args.filter((a) => a !== "--worker").join(" ")}\` ` +
  `(${new Date().toISOString()}):`,
  `${tally.programs} random programs (seeds from ${first}, ${count} asked for), ` +
  `${tally.steps} steps, each checked on WASM fused against WASM unfused` +
  (gpu ? ", GPU unfused against WASM unfused and GPU fused against GPU unfused" : "") +
  `; ${tally.jitted} of them (every ${jitEvery}th seed) also through jit with three data sets on ` +
  `${gpu ? "both devices" : "WASM"}. ${seconds.toFixed(0)} s wall clock.`,
  "",
  `Disagreements: ${disagreements ? JSON.stringify(tally.failures) : "none"}.`,
  "",
  "| op | steps |",
  "| --- | ---: |",
  ...ops.map(([op, n]) => `| ${op} | ${n} |`),
  "",
].join("\n");
await Deno.writeTextFile(new URL(`differential-${slug}-${first}.md`, results), report);
if (tally.lines.length) {
  const out = new URL(`differential-${slug}-${first}.jsonl`, results);
  await Deno.writeTextFile(out, tally.lines.join("\n") + "\n");
  console.log(`shrunk programs: ${out.pathname}`);
}
if (disagreements) Deno.exitCode = 1;
