import * as gyre from "../src/mod.ts";
import * as tuning from "../src/tuning.ts";
import { GpuProfiler } from "../src/gpu/profiler.ts";
const rt = await gyre.init({ device: "gpu" });
const profiler = new GpuProfiler(rt.gpu!);
const a = gyre.random.uniform([1 << 24], { seed: 1, low: -2, high: 2 }).realize();
// Warm the GPU's clocks.
for (let i = 0; i < 50; i++) gyre.sort(a).realize().dispose();
await gyre.sync();
for (const [rows, cols, k] of [[8, 65536, 1024], [1024, 4096, 32], [1, 1 << 24, 100]]) {
  const x = a.slice([0, rows * cols]).reshape([rows, cols]);
  for (
    const over of [
      null,
      { variant: "bitonic-tree", tile: 512 },
      { variant: "bitonic-tree", tile: 1024 },
      { variant: "bitonic-tree", tile: 2048 },
      { variant: "bitonic-tree", tile: 4096 },
      { variant: "radix-ballot" },
    ] as const
  ) {
    tuning.setPlanOverride("sort", over as any);
    const once = () => {
      const [v, i] = gyre.topk(x, k);
      v.realize().dispose();
      i.realize().dispose();
    };
    once();
    await gyre.sync();
    for (let r = 0; r < 10; r++) once();
    profiler.startGroups();
    for (let r = 0; r < 15; r++) profiler.group("op", once);
    const g = (await profiler.stop()).map((t) => t.nanoseconds / 1000).sort((p, q) => p - q);
    tuning.setPlanOverride("sort", null);
    console.log(
      `topk [${rows},${cols}] k=${k} ${JSON.stringify(over)}: median ${g[7].toFixed(1)} us`,
    );
  }
}
