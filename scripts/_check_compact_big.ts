// One-off check (not part of the suite): a compaction over more tiles than one round of the
// offsets pass (16384 tiles), GPU against WASM.
import * as gyre from "../src/mod.ts";
await gyre.init({ device: "gpu" });
const n = 64 * 1024 * 1024 + 123;
const x = gyre.random.uniform([n], { seed: 9, low: -1, high: 1, device: "gpu" }).realize();
const m = x.greater(0.3).realize();
const size = Math.floor(n * 0.4);
const g = await gyre.argwhere(m, { size, fillValue: -1 }).data();
const mw = await (await m.to("wasm")).data();
let k = 0, bad = 0;
for (let i = 0; i < n; i++) {
  if (mw[i]) {
    if (k < size && g[k] !== i) bad++;
    k++;
  }
}
for (let j = k; j < size; j++) if (g[j] !== -1) bad++;
console.log(`argwhere of ${n} (${k} selected, size ${size}): ${bad} wrong`);
