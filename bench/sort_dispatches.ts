/**
 * One GPU sort of 16 Mi float32, dispatch by dispatch (GPU timestamps through the profiler), to
 * see which of the sort's kernels (keys, each radix pass's count, scan and scatter, the gather)
 * takes the time. Prints one line per dispatch of the third sort (the first two warm up).
 *
 * Usage: deno run -A bench/sort_dispatches.ts [--length N] [--variant radix-ballot|radix|...]
 *   [--tile 2048|4096] [--indices] (sort with indices, as `argsort` and `topk` take them)
 *   [--k K] (with --indices: the bottom K only) [--compaction one-pass|two-pass]
 *   [--prefix lookback|multipass]
 * @module
 */
import * as gyre from "../src/mod.ts";
import * as tuning from "../src/tuning.ts";
import { GpuProfiler } from "../src/gpu/profiler.ts";

const args = Deno.args;
const flag = (name: string, fallback: string) => {
  const at = args.indexOf(`--${name}`);
  return at >= 0 ? args[at + 1] : fallback;
};
const length = Number(flag("length", String(1 << 24)));
const variant = flag("variant", "radix-ballot") as tuning.SortVariant;
const tile = Number(flag("tile", "0")) || undefined;
const withIndices = args.includes("--indices");
// --k K: the bottom K with indices (Rank-K) instead of the whole sort.
const k = Number(flag("k", "0")) || length;
const rt = await gyre.init({ device: "gpu" });
const profiler = new GpuProfiler(rt.gpu!);
const x = gyre.random.uniform([length], { seed: 1, low: -2, high: 2 }).realize();
// --compaction one-pass|two-pass (radix-select), --prefix lookback|multipass (radix-ballot).
const compaction = flag("compaction", "") as tuning.SortChoice["compaction"] | "";
const prefix = flag("prefix", "") as tuning.SortChoice["prefix"] | "";
tuning.setPlanOverride("sort", {
  variant,
  tile,
  ...(compaction ? { compaction } : {}),
  ...(prefix ? { prefix } : {}),
});
const sortOnce = () => {
  if (!withIndices) return gyre.sort(x).realize().dispose();
  for (const t of gyre.rankK(x, k, { kind: "bottom" })) t.realize().dispose();
};
for (let round = 0; round < 3; round++) {
  sortOnce();
  await gyre.sync();
  profiler.start();
  sortOnce();
  const timings = await profiler.stop();
  if (round < 2) continue;
  let total = 0;
  timings.forEach((t, i) => {
    total += t.nanoseconds;
    console.log(`${String(i).padStart(3)} ${(t.nanoseconds / 1000).toFixed(1).padStart(9)} us`);
  });
  console.log(
    `sort of ${length}${withIndices ? " with indices" : ""} (${variant} ${
      tile ?? ""
    }): ${timings.length} dispatches, ${(total / 1000).toFixed(1)} us`,
  );
}
tuning.setPlanOverride("sort", null);
x.dispose();
