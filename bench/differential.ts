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

for (let i = 0; i < count; i++) {
  const seed = first + i;
  const withJit = i % jitEvery === 0;
  const program = generateProgram(seed, { float16, dataSets: withJit ? 3 : 1 });
  steps += program.steps.length;
  for (const s of program.steps) {
    const name = s.p.op ? `${s.op}:${s.p.op}` : s.op;
    ops.set(name, (ops.get(name) ?? 0) + 1);
  }
  const check = (p: Program) => checkProgram(p, { gpu });
  const why = await check(program);
  if (why) await record(why.split(":")[0], seed, program, why, check);
  if (withJit) {
    jitted++;
    for (const d of gpu ? ["wasm", "gpu"] as const : ["wasm"] as const) {
      const jitCheck = (p: Program) => checkJit(p, d);
      const jwhy = await jitCheck(program);
      if (jwhy) await record(`jit ${d}`, seed, program, jwhy, jitCheck);
    }
  }
  if ((i + 1) % 1000 === 0 || i + 1 === count) {
    const s = (performance.now() - started) / 1000;
    const bad = [...failures.values()].reduce((a, b) => a + b, 0);
    console.log(`  ${i + 1}/${count} programs, ${bad} disagreements, ${s.toFixed(0)} s`);
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
