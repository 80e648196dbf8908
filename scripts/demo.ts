/**
 * `deno task demo`: shows the device gyre found and its capabilities, runs one workload on the GPU
 * and on WASM, checks that the two agree, and prints a timing table.
 * @module
 */
import * as gyre from "../src/mod.ts";

const rt = await gyre.init({ device: "auto" });
const caps = rt.caps;
console.log(`gyre 0.1.0 on Deno ${Deno.version.deno}`);
if (caps) {
  console.log(`GPU: ${caps.description}${caps.isFallbackAdapter ? " (software adapter)" : ""}`);
  console.log(`  features: ${caps.features.join(", ")}`);
  console.log(`  subgroup size ${caps.subgroupMinSize}..${caps.subgroupMaxSize}`);
  console.log(
    `  max storage binding ${
      (caps.limits.maxStorageBufferBindingSize / 2 ** 20).toFixed(0)
    } MiB, ` +
      `workgroup storage ${caps.limits.maxComputeWorkgroupStorageSize / 1024} KiB`,
  );
} else {
  console.log("GPU: none (WebGPU offers no adapter); running on WASM only");
}

/** The workload: a small activation-and-statistics pipeline over a 1024 x 1024 matrix. */
function workload(device: gyre.DeviceName): gyre.Tensor[] {
  return gyre.tidy(() => {
    const x = gyre.random.normal([1024, 1024], { seed: 2026, device });
    const w = gyre.random.uniform([1024], { seed: 7, low: -1, high: 1, device });
    const h = x.mul(w).add(0.5).sigmoid().mul(x.tanh());
    const rowSums = h.sum({ axis: 1 });
    const columnMax = h.max({ axis: 0 });
    const total = h.square().mean();
    return [rowSums, columnMax, total];
  });
}

const devices: gyre.DeviceName[] = caps ? ["gpu", "wasm"] : ["wasm"];
const results = new Map<gyre.DeviceName, Float32Array[]>();
const timings: { device: string; firstMs: number; steadyMs: number }[] = [];
for (const device of devices) {
  let t0 = performance.now();
  let outputs = workload(device);
  results.set(device, (await gyre.readAll(outputs)) as Float32Array[]);
  outputs.forEach((t) => t.dispose());
  const firstMs = performance.now() - t0;
  const runs: number[] = [];
  for (let i = 0; i < 5; i++) {
    t0 = performance.now();
    outputs = workload(device);
    await gyre.readAll(outputs);
    runs.push(performance.now() - t0);
    outputs.forEach((t) => t.dispose());
  }
  runs.sort((a, b) => a - b);
  timings.push({ device, firstMs, steadyMs: runs[2] });
}

if (results.size === 2) {
  const [gpu, wasm] = [results.get("gpu")!, results.get("wasm")!];
  let worst = 0;
  gpu.forEach((g, k) => {
    g.forEach((v, i) => {
      const w = wasm[k][i];
      worst = Math.max(worst, Math.abs(v - w) / Math.max(1, Math.abs(w)));
    });
  });
  // sigmoid, tanh and exp on GPUs are accurate to a few ulp; sums of 1024 terms add log2(1024) more.
  const ok = worst < 1e-4;
  console.log(
    `GPU and WASM agree: ${ok ? "yes" : "NO"} (largest relative difference ${
      worst.toExponential(2)
    })`,
  );
  if (!ok) Deno.exitCode = 1;
}
console.log("\n| device | first run (compiles) ms | steady run ms (median of 5) |");
console.log("|---|---:|---:|");
for (const t of timings) {
  console.log(`| ${t.device} | ${t.firstMs.toFixed(1)} | ${t.steadyMs.toFixed(1)} |`);
}
console.log(
  `\nsum of row sums: ${results.get(devices[0])![0].reduce((a, b) => a + b, 0).toFixed(3)}`,
);
Deno.exit(Deno.exitCode ?? 0);
