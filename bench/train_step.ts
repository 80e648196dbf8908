/**
 * One training step of a three-layer MLP (batch and width N, default 4096; relu, relu, none;
 * mean squared loss; gradients of all weights and biases) through `jit(grad(loss))`, and the same
 * step followed by an Adam update. Reports, on the GPU:
 * - the sum of the step's dispatches under GPU timestamps (each dispatch in its own pass; median
 *   of the runs), with each dispatch's median and its TFLOP/s where it is a product;
 * - the pipelined wall clock: steps issued back to back, one wait at the end (median of batches);
 * - the backward of softmax and layerNorm over [4096, 4096] against the measured copy bandwidth
 *   (bytes: y or x, g and the result, each once).
 * Writes bench/results/train-step-<device>.md.
 *
 * Usage: deno run -A bench/train_step.ts [--n 4096] [--runs 15] [--out bench/results]
 * @module
 */
import * as gyre from "../src/mod.ts";
import { GpuProfiler } from "../src/gpu/profiler.ts";
import { median, slugOf, takeOption, warmGpu } from "./_util.ts";

const args = [...Deno.args];
const n = Number(takeOption(args, "--n") ?? 4096);
const runs = Number(takeOption(args, "--runs") ?? 15);
const outDir = takeOption(args, "--out") ?? "bench/results";

const rt = await gyre.init({ device: "gpu" });
if (!rt.gpu) throw new Error("train_step needs a GPU");
const adapter = rt.gpu.caps.description;
console.error(`[train_step] ${adapter}, N = ${n}, ${runs} runs`);
await warmGpu(2000);

type Params = {
  w1: gyre.Tensor;
  b1: gyre.Tensor;
  w2: gyre.Tensor;
  b2: gyre.Tensor;
  w3: gyre.Tensor;
  b3: gyre.Tensor;
};
const scale = 1 / Math.sqrt(n);
const params: Params = {
  w1: gyre.random.uniform([n, n], { seed: 1, low: -scale, high: scale }),
  b1: gyre.random.uniform([n], { seed: 2, low: -0.1, high: 0.1 }),
  w2: gyre.random.uniform([n, n], { seed: 3, low: -scale, high: scale }),
  b2: gyre.random.uniform([n], { seed: 4, low: -0.1, high: 0.1 }),
  w3: gyre.random.uniform([n, n], { seed: 5, low: -scale, high: scale }),
  b3: gyre.random.uniform([n], { seed: 6, low: -0.1, high: 0.1 }),
};
const x = gyre.random.normal([n, n], { seed: 7 });
const y = gyre.random.normal([n, n], { seed: 8 });

const loss = (p: Params, input: gyre.Tensor, target: gyre.Tensor) => {
  const h1 = gyre.linear(input, p.w1, { bias: p.b1, activation: "relu" });
  const h2 = gyre.linear(h1, p.w2, { bias: p.b2, activation: "relu" });
  return gyre.linear(h2, p.w3, { bias: p.b3 }).sub(target).square().mean();
};
const names = ["w1", "b1", "w2", "b2", "w3", "b3"] as const;
const gradients = gyre.grad(loss);
const step = gyre.jit((input: gyre.Tensor, target: gyre.Tensor, ...flat: gyre.Tensor[]) => {
  const p = Object.fromEntries(names.map((k, i) => [k, flat[i]])) as Params;
  const g = gradients(p, input, target) as Params;
  return names.map((k) => g[k]);
});
const runStep = () => step(x, y, ...names.map((k) => params[k])) as gyre.Tensor[];

const profiler = new GpuProfiler(rt.gpu);

/** Each dispatch's median (us) over `runs` runs of `fn`, and the runs' summed medians. */
async function profile(
  fn: () => gyre.Tensor[],
): Promise<{ kernels: [string, number][]; totalUs: number }> {
  for (const t of fn()) t.realize().dispose();
  await gyre.sync();
  const totals: number[] = [];
  let perDispatch: { kernel: string; us: number[] }[] = [];
  for (let r = 0; r < runs; r++) {
    profiler.start();
    for (const t of fn()) t.realize().dispose();
    const timings = await profiler.stop();
    totals.push(timings.reduce((a, t) => a + t.nanoseconds / 1000, 0));
    if (r === 0) perDispatch = timings.map((t) => ({ kernel: t.kernel, us: [] }));
    timings.forEach((t, i) => perDispatch[i]?.us.push(t.nanoseconds / 1000));
  }
  return { kernels: perDispatch.map((d) => [d.kernel, median(d.us)]), totalUs: median(totals) };
}

/** Pipelined wall clock of one call of `fn`: batches of `reps` calls, one wait each, median. */
async function pipelined(fn: () => gyre.Tensor[], reps = 20): Promise<number> {
  const batch = async () => {
    let last: gyre.Tensor[] = [];
    const t0 = performance.now();
    for (let i = 0; i < reps; i++) {
      const out = fn();
      for (const t of out) t.realize();
      for (const t of last) t.dispose();
      last = out;
    }
    await gyre.sync();
    const ms = (performance.now() - t0) / reps;
    for (const t of last) t.dispose();
    return ms;
  };
  await batch();
  const times: number[] = [];
  for (let s = 0; s < 5; s++) times.push(await batch());
  return median(times);
}

const flops = 2 * n * n * n;
const lines: string[] = [];
const say = (s = "") => {
  console.log(s);
  lines.push(s);
};
say(`# Training step of a three-layer MLP on ${adapter}`);
say();
say(`N = ${n} (batch and width), float32, weights [out, in] (linear), relu, relu, none; loss`);
say(
  `mean((out - y)^2); gradients of the 3 weights and 3 biases; \`jit(grad(loss))\`. GPU timestamps:`,
);
say(
  `each dispatch in its own pass, median of ${runs} runs; pipelined: 20 steps back to back, one wait,`,
);
say(`median of 5 batches. Date ${new Date().toISOString().slice(0, 10)}.`);
say();

const plain = await profile(runStep);
const wall = await pipelined(runStep);
say(`| measure | ms |`);
say(`|---|---:|`);
say(`| step, sum of dispatch medians (GPU timestamps) | ${(plain.totalUs / 1000).toFixed(2)} |`);
say(`| step, pipelined wall clock | ${wall.toFixed(2)} |`);

// Adam: the same step, then one update of every parameter.
const adam = gyre.optim.adam(params, { lr: 1e-4 });
const adamStep = () => {
  const g = runStep();
  const grads = Object.fromEntries(names.map((k, i) => [k, g[i]])) as Params;
  adam.step(grads); // updates params in place (its new tensors are computed now)
  for (const t of g) t.dispose();
  return [];
};
const withAdam = await profile(adamStep);
const wallAdam = await pipelined(adamStep);
say(`| step + Adam update, sum of dispatch medians | ${(withAdam.totalUs / 1000).toFixed(2)} |`);
say(`| step + Adam update, pipelined wall clock | ${wallAdam.toFixed(2)} |`);
say(
  `| Adam's addition (dispatch sums) | ${((withAdam.totalUs - plain.totalUs) / 1000).toFixed(2)} |`,
);
say();
// The step's eight N^3 products (three forward, five backward: the input's gradient is not
// asked for) against the dispatches of the kernels that compute them.
const productUs = plain.kernels.filter(([k]) => /matmul|linear/.test(k)).reduce(
  (a, [, us]) => a + us,
  0,
);
say(
  `Products: 8 of ${n}^3 in ${(productUs / 1000).toFixed(2)} ms of dispatches, ` +
    `${(8 * flops / productUs / 1e6).toFixed(1)} TFLOP/s on average; everything else ` +
    `${((plain.totalUs - productUs) / 1000).toFixed(2)} ms.`,
);
say();
say(`Dispatches of the step (median us; a product may take several: stream-K's waves, its`);
say(`shared tiles and their fix-up):`);
say();
say(`| # | kernel | us |`);
say(`|---:|---|---:|`);
plain.kernels.forEach(([kernel, us], i) => say(`| ${i} | ${kernel} | ${us.toFixed(1)} |`));
say();

// Row backward: bytes against the copy bandwidth.
const rows = gyre.random.normal([4096, 4096], { seed: 11 });
const ct = gyre.random.normal([4096, 4096], { seed: 12 });
const copyUs = (await profile(() => [gyre.clone(rows)])).totalUs;
const bytes = 4 * 4096 * 4096;
const copyGBs = (2 * bytes) / copyUs / 1000;
say(
  `Row backward over [4096, 4096] float32 (copy: ${
    copyGBs.toFixed(0)
  } GB/s, a clone timed the same way):`,
);
say();
say(`| op | dispatches | us | GB/s (3 x 64 MiB) | of copy |`);
say(`|---|---:|---:|---:|---:|`);
for (
  const [name, f] of [
    ["softmax", (t: gyre.Tensor) => gyre.softmax(t)],
    ["logSoftmax", (t: gyre.Tensor) => gyre.logSoftmax(t)],
    ["layerNorm", (t: gyre.Tensor) => gyre.layerNorm(t)],
  ] as const
) {
  const [out, pullback] = gyre.vjp(f, rows);
  (out as gyre.Tensor).realize();
  const r = await profile(() => pullback(ct) as gyre.Tensor[]);
  const gbs = (3 * bytes) / r.totalUs / 1000;
  say(
    `| ${name} | ${r.kernels.length} | ${r.totalUs.toFixed(1)} | ${gbs.toFixed(0)} | ${
      (100 * gbs / copyGBs).toFixed(0)
    }% |`,
  );
  pullback.dispose();
  (out as gyre.Tensor).dispose();
}
await Deno.mkdir(outDir, { recursive: true });
const file = `${outDir}/train-step-${slugOf(adapter)}.md`;
await Deno.writeTextFile(file, lines.join("\n") + "\n");
console.error(`[train_step] wrote ${file}`);
