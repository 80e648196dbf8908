// Probe: every candidate's time at a few keys (aligned and not), for the tuner's key design.
import * as gyre from "../src/mod.ts";
import { choiceText, measureKey, type TuneFamilyName, type TuneKey } from "../src/tuning.ts";
await gyre.init({ device: "gpu" });
const a = gyre.random.uniform([4096, 4096], { seed: 1 });
const until = performance.now() + 3000;
while (performance.now() < until) await gyre.matmul(a, a).sum().array();
const probes: [TuneFamilyName, TuneKey][] = JSON.parse(Deno.args[0]);
for (const [family, key] of probes) {
  const t = await measureKey(family, key, { samples: 9 });
  console.log(family, JSON.stringify(key));
  for (const c of t.candidates.slice(0, 6)) {
    console.log(`   ${choiceText(c.choice)}: ${c.us.toFixed(1)} (${c.samples})`);
  }
}
