import * as gyre from "../src/mod.ts";
import { GpuProfiler } from "../src/gpu/profiler.ts";
const rt = await gyre.init({ device: "gpu" });
const profiler = new GpuProfiler(rt.gpu!);
const n = Number(Deno.args[0] ?? 1 << 20);
const a = gyre.random.uniform([4 * n], { seed: 1 }).realize();
const x = a.slice([0, n]);
const cases: [string, () => gyre.Tensor][] = [
  ["bottomk all", () => {
    const [v, i] = gyre.rankK(x, n, { kind: "bottom" });
    i.dispose();
    return v;
  }],
  ["median", () => gyre.median(x)],
  ["sort", () => gyre.sort(x)],
];
for (const [name, fn] of cases) {
  const once = () => gyre.tidy(() => fn()).realize().dispose();
  once();
  await gyre.sync();
  for (let r = 0; r < 3; r++) once();
  profiler.startGroups();
  for (let r = 0; r < 5; r++) profiler.group("op", once);
  const g = await profiler.stop();
  profiler.start();
  once();
  const d = await profiler.stop();
  const sum = d.reduce((s, t) => s + t.nanoseconds, 0);
  console.log(
    name,
    "groups us",
    g.map((t) => (t.nanoseconds / 1000).toFixed(0)).join(" "),
    "dispatch sum",
    (sum / 1000).toFixed(0),
    d.length,
  );
}
