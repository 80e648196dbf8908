import * as gyre from "./src/mod.ts";
await gyre.init({ device: "gpu" });
const check = async (n: number, segs: number, inner: number[], reduce: "sum"|"max"|"min"|"mean"|"prod", dtype: "float32"|"int32"|"float16" = "float32") => {
  const ids0 = gyre.random.uniform([n], { seed: 5, low: -2, high: segs }).floor().cast("int32");
  const ids = gyre.sort(ids0).realize();
  const data = gyre.random.uniform([n, ...inner], { seed: 6, low: -4, high: 4 }).floor().cast(dtype).realize();
  const fn = { sum: gyre.segmentSum, max: gyre.segmentMax, min: gyre.segmentMin, mean: gyre.segmentMean, prod: gyre.segmentProd }[reduce];
  const g = await fn(data, ids, { numSegments: segs, sorted: true }).data();
  const w = await fn(await data.to("wasm"), await ids.to("wasm"), { numSegments: segs, sorted: true }).data();
  let bad = 0; for (let k = 0; k < w.length; k++) if (!(Math.abs(g[k]-w[k]) <= 1e-3*Math.max(1,Math.abs(w[k])) || (Number.isNaN(g[k]) && Number.isNaN(w[k])))) { if (bad < 3) console.log(k, g[k], w[k]); bad++; }
  console.log(n, segs, inner, reduce, dtype, bad === 0 ? "ok" : `BAD ${bad}`);
};
await check(10, 3, [], "sum");
await check(5000, 40, [], "sum");
await check(100000, 7, [], "sum");
await check(100000, 3000, [], "max");
await check(20000, 100, [3], "mean");
await check(20000, 100, [300], "sum");
await check(3000, 5, [2, 5], "min", "int32");
await check(70000, 1, [], "sum");
await check(9000, 50, [], "sum", "float16");
await check(9000, 50, [3], "prod");
try { await gyre.segmentSum(gyre.ones([4]), gyre.tensor([0, 2, 1, 3], { dtype: "int32" }), { numSegments: 4, sorted: true }).data(); console.log("no error"); } catch (e) { console.log(String(e)); }
console.log(await gyre.segmentSum(gyre.ones([4]), gyre.tensor([0, 1, 1, 3], { dtype: "int32" }), { numSegments: 4, sorted: true }).data());
import * as tuning from "./src/tuning.ts";
const seen: string[] = [];
tuning.onPlan((r) => seen.push(`${r.op}:${r.variants.join("/")}:${r.choice.combine}`));
await check(5000, 40, [], "sum");
try { await gyre.segmentSum(gyre.ones([4]), gyre.tensor([0, 2, 1, 3], { dtype: "int32" }), { numSegments: 4, sorted: true }).data(); console.log("no error"); } catch (e) { console.log(String(e)); }
console.log(seen);
