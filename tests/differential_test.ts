/**
 * Random programs over the op table (tests/_programs.ts), each run on WASM unfused (the
 * reference), WASM fused, GPU unfused and GPU fused, and through `jit` on both devices with three
 * data sets in a row (a trace, then replays), eager results beside. A disagreement is shrunk to a
 * small program and printed as JSON: add it to REGRESSIONS below.
 *
 * Programs come from seeds: `GYRE_PROGRAM_SEED` (default 1) is the first, `GYRE_PROGRAMS` (default
 * 2000) the count across devices, `GYRE_JIT_PROGRAMS` (default 500) the count through jit. `deno
 * task differential` runs 100,000 and reports counts.
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import { devices } from "./_devices.ts";
import {
  checkJit,
  checkProgram,
  checkPrograms,
  generateProgram,
  type Program,
  programFromJson,
  programToJson,
  shrink,
} from "./_programs.ts";

const DEVICES = await devices();
const hasGpu = DEVICES.includes("gpu");
const float16 = gyre.runtime().gpu?.caps.shaderF16 ?? false;

function envCount(name: string, fallback: number): number {
  const v = Number(Deno.env.get(name) ?? fallback);
  if (!Number.isInteger(v) || v < 0) throw new Error(`${name} must be a whole number`);
  return v;
}

const FIRST = envCount("GYRE_PROGRAM_SEED", 1);
const PROGRAMS = envCount("GYRE_PROGRAMS", 2000);
const JIT_PROGRAMS = envCount("GYRE_JIT_PROGRAMS", 500);
/** Programs per test: each test's time stays short and the runner shows progress. */
const CHUNK = 250;
/** Programs sharing one GPU read-back. */
const GROUP = 50;

async function failWithShrunk(
  seed: number,
  program: Program,
  why: string,
  check: (p: Program) => Promise<string | null>,
): Promise<never> {
  const small = await shrink(program, async (p) => (await check(p)) !== null);
  const smallWhy = await check(small);
  throw new Error(
    `program of seed ${seed} disagrees: ${why}\nshrunk (${small.steps.length} steps): ${smallWhy}\n` +
      `add to REGRESSIONS: ${programToJson(small)}`,
  );
}

for (let start = 0; start < PROGRAMS; start += CHUNK) {
  const first = FIRST + start;
  const last = FIRST + Math.min(PROGRAMS, start + CHUNK) - 1;
  Deno.test(`programs ${first}-${last} agree on WASM fused and unfused, GPU fused and unfused`, async () => {
    const check = (p: Program) => checkProgram(p, { gpu: hasGpu });
    // Checked in groups that share one GPU read-back.
    for (let seed = first; seed <= last; seed += GROUP) {
      const seeds = Array.from({ length: Math.min(GROUP, last - seed + 1) }, (_, i) => seed + i);
      const programs = seeds.map((s) => generateProgram(s, { float16 }));
      const results = await checkPrograms(programs, { gpu: hasGpu });
      const bad = results.findIndex((r) => r !== null);
      if (bad >= 0) await failWithShrunk(seeds[bad], programs[bad], results[bad]!, check);
    }
  });
}

for (let start = 0; start < JIT_PROGRAMS; start += CHUNK) {
  const first = FIRST + start;
  const last = FIRST + Math.min(JIT_PROGRAMS, start + CHUNK) - 1;
  for (const device of DEVICES) {
    Deno.test(`programs ${first}-${last} through jit on ${device} equal their eager runs`, async () => {
      const check = (p: Program) => checkJit(p, device);
      for (let seed = first; seed <= last; seed++) {
        const program = generateProgram(seed, { float16, dataSets: 3 });
        const why = await check(program);
        if (why) await failWithShrunk(seed, program, why, check);
      }
    });
  }
}

/**
 * Shrunk disagreements the random programs found, kept as cases: [what went wrong, program].
 * Each runs every device comparison and jit on both devices.
 */
const REGRESSIONS: [string, string][] = [];

for (const [name, json] of REGRESSIONS) {
  Deno.test(`regression: ${name}`, async () => {
    const program = programFromJson(json);
    assert.equal(await checkProgram(program, { gpu: hasGpu }), null);
    for (const device of DEVICES) assert.equal(await checkJit(program, device), null);
  });
}
