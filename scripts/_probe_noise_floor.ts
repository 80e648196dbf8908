// Probe: the noise floor of bench/tune_quality.ts's judgement on this device. At the same held-out
// keys (seed 2411), five copies of the plan's own choice are measured as round 2 measures the
// finalists (interleaved, median of 41 on a software adapter, 15 otherwise); a copy counts when its
// median is within 5% of the fastest copy's. Equal candidates should all count: the share that
// does is the best a perfect chooser can score where candidates are this close.
import * as gyre from "../src/mod.ts";
import {
  familyCandidates,
  matmulTuneKey,
  measureKey,
  rowsTuneKey,
  type TuneFamilyName,
  type TuneKey,
} from "../src/tuning.ts";
const rt = await gyre.init({ device: "gpu" });
const caps = rt.gpu!.caps;
const soft = caps.isFallbackAdapter;
const most = soft ? 1 << 18 : 1 << 24;
let s = 2411;
const random = () => {
  s = (s + 0x6d2b79f5) | 0;
  let t = Math.imul(s ^ (s >>> 15), 1 | s);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const size = (low: number, high: number) => {
  for (;;) {
    const v = Math.round(Math.exp(Math.log(low) + random() * (Math.log(high) - Math.log(low))));
    if ((v & (v - 1)) !== 0) return v;
  }
};
const families = (Deno.args.length ? Deno.args : ["scan", "reduce", "matmul"]) as TuneFamilyName[];
for (const family of families) {
  let within = 0, total = 0;
  for (let i = 0; i < 24; i++) {
    let key: TuneKey;
    for (;;) {
      if (family === "matmul") {
        key = matmulTuneKey(size(64, 4096), size(64, 4096), size(64, 16384));
        const [m, n, k] = [key.m as number, key.n as number, key.k as number];
        if (m * n * k <= most * (soft ? 16 : 4096) && m * k <= most && k * n <= most) break;
      } else {
        key = rowsTuneKey(caps, size(1, 16384), size(64, 1 << 24));
        const e = (key.r as number) * (key.n as number);
        if (e >= 4096 && e <= most) break;
      }
    }
    const plan = familyCandidates(family, caps, key)[0];
    const t = await measureKey(family, key, {
      choices: [plan, plan, plan, plan, plan],
      samples: soft ? 41 : 15,
      drop: Infinity,
    });
    const best = Math.min(...t.candidates.map((c) => c.us));
    within += t.candidates.filter((c) => c.us <= 1.05 * best).length;
    total += t.candidates.length;
  }
  console.log(
    `${family}: ${
      (100 * within / total).toFixed(0)
    }% of equal copies within 5% of the fastest copy (${total} copies at 24 keys)`,
  );
}
