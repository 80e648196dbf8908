// Probe: does the GPU clock drift between measurements (same keys measured repeatedly, with and
// without a burst of work before each)?
import * as gyre from "../src/mod.ts";
import { choiceText, measureKey } from "../src/tuning.ts";
await gyre.init({ device: "gpu" });
const a = gyre.random.uniform([4096, 4096], { seed: 1 });
const heat = async (ms: number) => {
  const until = performance.now() + ms;
  while (performance.now() < until) await gyre.matmul(a, a).sum().array();
};
await heat(3000);
for (const burst of [0, 200, 0, 200]) {
  for (const key of [{ m: 1787, n: 636, k: 1768 }, { m: 1788, n: 636, k: 1768 }]) {
    if (burst) await heat(burst);
    const t = await measureKey("matmul", key, { samples: 9 });
    const c = t.candidates[0];
    console.log(
      `burst ${burst} ${JSON.stringify(key)} best ${choiceText(c.choice)} ${c.us.toFixed(1)}; ` +
        t.candidates.slice(1, 4).map((x) => `${choiceText(x.choice)} ${x.us.toFixed(1)}`).join(
          ", ",
        ),
    );
  }
}
