/**
 * The long differential run (issues 28 and 31): `deno task differential [count] [first seed]`
 * generates `count` random programs (default 100,000) from tests/_programs.ts, checks each on WASM
 * unfused (the reference), WASM fused, GPU unfused and GPU fused, and every tenth through `jit` on
 * both devices; prints progress and, at the end, the counts: programs, steps by op, disagreements
 * by run. Each disagreement is shrunk and written as JSON to bench/results/differential-*.jsonl,
 * ready for tests/differential_test.ts's REGRESSIONS.
 */
import * as gyre from "../src/mod.ts";
import {
  checkJit,
  checkProgram,
  checkPrograms,
  generateProgram,
  type Program,
  programToJson,
  shrink,
} from "../tests/_programs.ts";

const count = Number(Deno.args[0] ?? 100_000);
const first = Number(Deno.args[1] ?? 1_000_000);
const jitEvery = Number(Deno.env.get("GYRE_JIT_EVERY") ?? 10);
const rt = await gyre.init({ device: "auto" });
const gpu = rt.gpu !== null;
const float16 = rt.gpu?.caps.shaderF16 ?? false;
const device = rt.gpu?.caps.description ?? "no GPU";
const slug = device.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "");
const out = new URL(`./results/differential-${slug}.jsonl`, import.meta.url);
console.log(`differential: ${count} programs from seed ${first} on ${device}`);

const ops = new Map<string, number>();
const failures = new Map<string, number>();
let steps = 0;
let jitted = 0;
const started = performance.now();
const lines: string[] = [];

async function record(
  kind: string,
  seed: number,
  program: Program,
  why: string,
  check: (p: Program) => Promise<string | null>,
) {
  failures.set(kind, (failures.get(kind) ?? 0) + 1);
  const small = await shrink(program, async (p) => (await check(p)) !== null);
  const line = JSON.stringify({ kind, seed, why, shrunk: programToJson(small) });
  lines.push(line);
  console.log(`  seed ${seed}: ${kind}: ${why.slice(0, 300)}`);
}

const GROUP = 100;
for (let i = 0; i < count; i += GROUP) {
  const seeds = Array.from({ length: Math.min(GROUP, count - i) }, (_, k) => first + i + k);
  const programs = seeds.map((seed) =>
    generateProgram(seed, { float16, dataSets: (seed - first) % jitEvery === 0 ? 3 : 1 })
  );
  for (const program of programs) {
    steps += program.steps.length;
    for (const s of program.steps) {
      const name = s.p.op ? `${s.op}:${s.p.op}` : s.op;
      ops.set(name, (ops.get(name) ?? 0) + 1);
    }
  }
  const check = (p: Program) => checkProgram(p, { gpu });
  const results = await checkPrograms(programs, { gpu });
  for (let k = 0; k < programs.length; k++) {
    const why = results[k];
    if (why) await record(why.split(":")[0], seeds[k], programs[k], why, check);
    if ((seeds[k] - first) % jitEvery !== 0) continue;
    jitted++;
    for (const d of gpu ? ["wasm", "gpu"] as const : ["wasm"] as const) {
      const jitCheck = (p: Program) => checkJit(p, d);
      const jwhy = await jitCheck(programs[k]);
      if (jwhy) await record(`jit ${d}`, seeds[k], programs[k], jwhy, jitCheck);
    }
  }
  const done = i + programs.length;
  if (done % 1000 === 0 || done === count) {
    const s = (performance.now() - started) / 1000;
    const bad = [...failures.values()].reduce((a, b) => a + b, 0);
    console.log(`  ${done}/${count} programs, ${bad} disagreements, ${s.toFixed(0)} s`);
  }
}

const seconds = (performance.now() - started) / 1000;
console.log(
  `\n${count} programs (${steps} steps, ${jitted} also through jit) in ${seconds.toFixed(0)} s`,
);
console.log("disagreements:", failures.size ? Object.fromEntries(failures) : "none");
console.log("steps by op:", Object.fromEntries([...ops].sort((a, b) => b[1] - a[1])));
if (lines.length) {
  await Deno.writeTextFile(out, lines.join("\n") + "\n");
  console.log(`shrunk programs: ${out.pathname}`);
}
if (failures.size) Deno.exitCode = 1;
