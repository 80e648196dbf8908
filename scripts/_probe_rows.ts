/**
 * The row kernels' candidates at the benchmarks' shapes (GPU timestamps, median of 15), with the
 * plan's own choice named: a check that a rule fitted to held-out keys keeps the benchmarks fast.
 * `deno run -A scripts/_probe_rows.ts`
 * @module
 */
import * as gyre from "../src/mod.ts";
import { choiceText, familyCandidates, measureKey, rowsKernelTuneKey } from "../src/tuning.ts";
const rt = await gyre.init({ device: "gpu" });
for (const [r, n] of [[4096, 4096], [4096, 8192], [16384, 1024], [1024, 16384]]) {
  const key = rowsKernelTuneKey(rt.gpu!.caps, r, n, true);
  const t = await measureKey("rows", key, { samples: 15, drop: Infinity });
  console.log(
    JSON.stringify(key),
    "plan",
    choiceText(familyCandidates("rows", rt.gpu!.caps, key)[0]),
    t.candidates.slice(0, 5).map((c) =>
      `${Object.entries(c.choice).map(([k, v]) => `${k}=${v}`).join(" ")} ${c.us.toFixed(1)}`
    ).join(" | "),
  );
}
