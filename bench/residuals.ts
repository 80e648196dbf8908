/**
 * Compiled residuals on the GPU (issue 26): the edge-length energy sum (|p_a - p_b| - L)^2 of a
 * 40,962-vertex icosphere and its gradient, per evaluation, both ways of summing J^T r ("gather"
 * over the Jacobian's columns, "atomic" float32 adds), measured two ways: GPU timestamps around
 * R evaluations recorded back to back (median of 5 runs / R), and pipelined wall clock (R
 * evaluations and one read-back, median of 5 / R). Also the 5,292-vertex Levenberg-Marquardt
 * iteration's dispatches timed by the GPU.
 *
 *   deno run -A bench/residuals.ts [--level 6] [--repeats 200]
 * @module
 */
import { median, takeOption, warmGpu } from "./_util.ts";
import { gpuBackendOf, init } from "../src/runtime.ts";
import { compileProgram } from "../src/scalar/program.ts";
import { prepareResidualsGpu } from "../src/gpu/residuals.ts";
import {
  edgeResiduals,
  geodesicSphere,
  icosphere,
  meanEdgeLength,
  meshParams,
  meshResiduals,
  perturbed,
} from "../scripts/_mesh.ts";

const args = [...Deno.args];
const flag = (name: string, fallback: string): string => takeOption(args, `--${name}`) ?? fallback;
const level = Number(flag("level", "6"));
const repeats = Number(flag("repeats", "200"));

await init({ device: "gpu" });
const gpu = gpuBackendOf()!;
// An idle GPU runs at a low clock (bench/README.md, session 24): warm it before timing.
await warmGpu();
const mesh = icosphere(level);
const vertices = mesh.positions.length / 3;
const start = perturbed(mesh, 0.25);
const params = meshParams(start);
const program = compileProgram(params, edgeResiduals(mesh, meanEdgeLength(mesh))(params));
const device = gpu.device;
const lines = [
  `# Edge-length energy and gradient, icosphere of ${vertices.toLocaleString("en-US")} vertices (${
    mesh.edges.length.toLocaleString("en-US")
  } edges), ${gpu.caps.description}`,
  "",
  `Measured by \`bench/residuals.ts\` on ${
    new Date().toISOString().slice(0, 10)
  }; ${repeats} evaluations a run, median of 5 runs.`,
  "",
  "| J^T r summed by | GPU timestamps, ms / evaluation | pipelined wall clock, ms / evaluation |",
  "|---|---:|---:|",
];
for (const accumulation of ["gather", "atomic"] as const) {
  if (accumulation === "atomic" && !gpu.caps.float32Atomics) continue;
  const prepared = prepareResidualsGpu(gpu, program, accumulation) as
    & ReturnType<
      typeof prepareResidualsGpu
    >
    & {
      recordValueAndGradient(e: GPUCommandEncoder, w: "squares" | "sum", n: number): void;
    };
  const x = Float64Array.from(params, (p) => p.data);
  const check = await prepared.valueAndGradient(x, "squares");
  const querySet = device.createQuerySet({ type: "timestamp", count: 2 });
  const resolve = device.createBuffer({
    size: 16,
    usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC,
  });
  const gpuMs: number[] = [], wallMs: number[] = [];
  for (let run = 0; run < 6; run++) {
    const encoder = device.createCommandEncoder();
    encoder.beginComputePass({
      timestampWrites: { querySet, beginningOfPassWriteIndex: 0 },
    }).end();
    const t0 = performance.now();
    prepared.recordValueAndGradient(encoder, "squares", repeats);
    encoder.beginComputePass({ timestampWrites: { querySet, endOfPassWriteIndex: 1 } }).end();
    encoder.resolveQuerySet(querySet, 0, 2, resolve, 0);
    const staging = device.createBuffer({
      size: 16,
      usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
    encoder.copyBufferToBuffer(resolve, 0, staging, 0, 16);
    device.queue.submit([encoder.finish()]);
    await staging.mapAsync(GPUMapMode.READ);
    const wall = performance.now() - t0;
    const [a, b] = new BigUint64Array(staging.getMappedRange());
    staging.destroy();
    if (run === 0) continue; // warm-up
    gpuMs.push(Number(b - a) / 1e6 / repeats);
    wallMs.push(wall / repeats);
  }
  lines.push(
    `| ${accumulation} | ${median(gpuMs).toFixed(4)} | ${median(wallMs).toFixed(4)} |`,
  );
  console.error(
    `${accumulation}: energy ${check.value.toExponential(6)}, |g|max ${
      Math.max(...check.gradient.map(Math.abs)).toExponential(4)
    }`,
  );
  prepared.dispose();
}
// Levenberg-Marquardt iterations of the mesh problem (scripts/_mesh.ts), 100 a run, tolerances 0.
lines.push(
  "",
  "Levenberg-Marquardt on the mesh problem (edges, umbrella, unit sphere; 10 CG iterations a step),",
  "100 iterations a run (tolerances 0; a run that converges stops early by damping), median of 3 runs:",
  "GPU time is the sum of the batches' timestamped passes; wall clock is around `solve`.",
  "",
  "| vertices | residuals | dispatches / iteration | GPU ms / iteration | wall ms / iteration | first solve's wall ms / iteration | iterations |",
  "|---:|---:|---:|---:|---:|---:|---:|",
);
for (const f of [23, 32, 64]) {
  const sphere = geodesicSphere(f);
  const p = meshParams(perturbed(sphere, 0.25));
  const prog = compileProgram(p, meshResiduals(sphere, meanEdgeLength(sphere))(p));
  const prepared = prepareResidualsGpu(gpu, prog, "gather") as
    & ReturnType<
      typeof prepareResidualsGpu
    >
    & { profile: boolean; lastGpuMs: number };
  prepared.profile = true;
  const x = Float64Array.from(p, (v) => v.data);
  const gpuMs: number[] = [], wallMs: number[] = [];
  let its = 0, dispatches = 0, firstMs = 0;
  for (let run = 0; run < 4; run++) {
    const t0 = performance.now();
    const out = await prepared.solve(x, {
      maxIterations: 100,
      costTolerance: 0,
      gradientTolerance: 0,
      initialDamping: 1e-3,
      cgIterations: 10,
      cgTolerance: 1e-3,
      iterationsPerRead: 8,
    });
    const wall = performance.now() - t0;
    if (run === 0) {
      firstMs = wall / out.iterations;
      continue;
    }
    its = out.iterations;
    dispatches = out.dispatches;
    gpuMs.push(prepared.lastGpuMs / out.iterations);
    wallMs.push(wall / out.iterations);
  }
  lines.push(
    `| ${(sphere.positions.length / 3).toLocaleString("en-US")} | ${
      prog.residuals.toLocaleString("en-US")
    } | ${(dispatches / 100).toFixed(0)} | ${median(gpuMs).toFixed(3)} | ${
      median(wallMs).toFixed(3)
    } | ${firstMs.toFixed(3)} | ${its} |`,
  );
  prepared.dispose();
}
const report = lines.join("\n") + "\n";
console.log(report);
