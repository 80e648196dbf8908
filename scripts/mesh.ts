/**
 * `deno task mesh`: icospheres of 12 to 40,962 vertices (and a 5,292-vertex geodesic sphere, the
 * issue's 5,000-vertex case), perturbed, then restored by Levenberg-Marquardt over their vertex
 * positions (scripts/_mesh.ts) with `CompiledResiduals` on each device. Prints per size and
 * device the compile time, the mean time of an iteration over a run of fixed length (wall clock
 * around `solve`, its read-backs included) and the final cost; then the measured GPU/CPU
 * crossover; writes an SVG chart of time against size.
 *
 *   deno task mesh [--devices gpu,cpu] [--iterations 100] [--max-vertices 40962]
 *                  [--out bench/results/mesh-DEVICE.md] [--svg bench/results/mesh-DEVICE.svg]
 * @module
 */
import { takeOption } from "../bench/_util.ts";
import { CompiledResiduals, init } from "../src/mod.ts";
import {
  geodesicSphere,
  meanEdgeLength,
  type Mesh,
  meshParams,
  meshResiduals,
  perturbed,
} from "./_mesh.ts";

const args = [...Deno.args];
const flag = (name: string, fallback: string): string => takeOption(args, `--${name}`) ?? fallback;

const devices = flag("devices", "gpu,cpu").split(",") as ("gpu" | "cpu")[];
const iterations = Number(flag("iterations", "100"));
const maxVertices = Number(flag("max-vertices", "40962"));
const out = flag("out", "");
const svg = flag("svg", "");

/** Frequencies: the icospheres (2^level) and 23 (5,292 vertices). */
const frequencies = [1, 2, 4, 8, 16, 23, 32, 64].filter((f) => 10 * f * f + 2 <= maxVertices);

const rt = await init({ device: devices.includes("gpu") ? "auto" : "wasm" });
const gpuName = rt.gpu ? rt.gpu.caps.description : null;
if (devices.includes("gpu") && !rt.gpu) {
  console.error("no GPU: running the CPU path only");
  devices.splice(devices.indexOf("gpu"), 1);
}

interface Row {
  vertices: number;
  residuals: number;
  kernels: number;
  device: "gpu" | "cpu";
  traceMs: number;
  planMs: number;
  prepareMs: number;
  iterations: number;
  perIterationMs: number;
  /** GPU: ms per iteration of the first solve. */
  firstMs: number;
  initialCost: number;
  cost: number;
}

/**
 * CPU runs are shortened on large meshes (the 2-core CPU takes seconds an iteration there); the
 * mean is over the iterations run.
 */
function iterationsFor(device: "gpu" | "cpu", vertices: number): number {
  if (device === "gpu") return iterations;
  return vertices > 20000
    ? Math.min(iterations, 3)
    : vertices > 4000
    ? Math.min(iterations, 15)
    : iterations;
}

const rows: Row[] = [];
const total = frequencies.length * devices.length;
let step = 0;
const encoder = new TextEncoder();
const progress = (text: string) => Deno.stderr.writeSync(encoder.encode(`\r\x1b[K${text}`));
for (const f of frequencies) {
  const mesh: Mesh = geodesicSphere(f);
  const vertices = mesh.positions.length / 3;
  const target = meanEdgeLength(mesh);
  const start = perturbed(mesh, 0.25);
  for (const device of devices) {
    step++;
    progress(`[${step}/${total}] ${device} ${vertices.toLocaleString("en-US")} vertices`);
    const params = meshParams(start);
    const compiled = CompiledResiduals.compile(params, meshResiduals(mesh, target), {
      backend: device,
    });
    const n = iterationsFor(device, vertices);
    const options = { maxIterations: n, costTolerance: 0, gradientTolerance: 0 };
    let firstMs = NaN;
    if (device === "gpu") {
      const first = await compiled.solve(options);
      firstMs = first.timeMs / Math.max(1, first.iterations);
      params.forEach((p, i) => (p.data = start[i]));
    }
    const result = await compiled.solve(options);
    rows.push({
      vertices,
      residuals: compiled.residualCount,
      kernels: compiled.kernelCount,
      device,
      traceMs: compiled.timings.traceMs,
      planMs: compiled.timings.planMs,
      prepareMs: compiled.timings.prepareMs,
      iterations: result.iterations,
      perIterationMs: result.timeMs / Math.max(1, result.iterations),
      firstMs,
      initialCost: result.initialCost,
      cost: result.cost,
    });
    compiled.dispose();
  }
}
progress("");

const fmt = (v: number, d = 2) => v.toFixed(d);
const lines = [
  `# Mesh restoration by Levenberg-Marquardt (${gpuName ?? "no GPU"}; CPU: WASM tape, one thread)`,
  "",
  `Measured by \`deno task mesh\` on ${new Date().toISOString().slice(0, 10)}. Per-iteration time:`,
  "wall clock around `solve` over a run of fixed length (tolerances 0), divided by its",
  "iterations, read-backs included; compile in three parts: trace (the residual function's own",
  "run), plan (topology keys, grouping, the program's arrays), kernels and buffers (on the GPU the",
  "driver's pipeline compilation, cold, dominates: bench/results/residual-compile-*.md). 10 CG iterations a",
  "step. Cost: 1/2 sum r^2 at the start and after the run. GPU: the run is the second solve of",
  "the compiled problem from the same start (the first, in the column before, pays one-time costs",
  "of a new problem's first submissions).",
  "",
  "| vertices | residuals | kernels | device | trace ms | plan ms | kernels and buffers ms | iterations | first solve ms / iteration | ms / iteration | start cost | final cost |",
  "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
  ...rows.map((r) =>
    [
      r.vertices.toLocaleString("en-US"),
      r.residuals.toLocaleString("en-US"),
      r.kernels,
      r.device,
      fmt(r.traceMs, 1),
      fmt(r.planMs, 1),
      fmt(r.prepareMs, 1),
      r.iterations,
      Number.isNaN(r.firstMs) ? "" : fmt(r.firstMs, 3),
      fmt(r.perIterationMs, 3),
      r.initialCost.toExponential(3),
      r.cost.toExponential(3),
    ].join(" | ").replace(/^/, "| ").replace(/$/, " |")
  ),
];
const sizes = [...new Set(rows.map((r) => r.vertices))];
const time = (v: number, d: string) => rows.find((r) => r.vertices === v && r.device === d);
if (devices.length === 2) {
  const faster = sizes.find((v) => time(v, "gpu")!.perIterationMs < time(v, "cpu")!.perIterationMs);
  lines.push(
    "",
    faster === undefined
      ? "Crossover: the CPU was faster at every size measured."
      : `Crossover: the GPU is faster from ${faster.toLocaleString("en-US")} vertices (${
        time(faster, "gpu")!.residuals.toLocaleString("en-US")
      } residuals) up${
        sizes.indexOf(faster) > 0
          ? `; the CPU below (${
            time(sizes[sizes.indexOf(faster) - 1], "gpu")!.residuals.toLocaleString("en-US")
          } residuals)`
          : ""
      }.`,
  );
}
const report = lines.join("\n") + "\n";
console.log(report);
if (out) await Deno.writeTextFile(out, report);
if (svg) await Deno.writeTextFile(svg, chart(rows));

/** Time per iteration against vertices, log-log, a line per device. */
function chart(data: Row[]): string {
  const W = 640, H = 400, L = 70, R = 20, T = 40, B = 50;
  const xs = data.map((r) => Math.log10(r.vertices));
  const ys = data.map((r) => Math.log10(r.perIterationMs));
  const [x0, x1] = [Math.floor(Math.min(...xs)), Math.ceil(Math.max(...xs))];
  const [y0, y1] = [Math.floor(Math.min(...ys)), Math.ceil(Math.max(...ys))];
  const px = (v: number) => L + ((Math.log10(v) - x0) / (x1 - x0)) * (W - L - R);
  const py = (v: number) => H - B - ((Math.log10(v) - y0) / (y1 - y0)) * (H - T - B);
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${
      W / 2
    }" y="20" text-anchor="middle" font-size="14">Levenberg-Marquardt iteration, mesh restoration (${
      gpuName ?? "CPU"
    })</text>`,
  ];
  for (let e = x0; e <= x1; e++) {
    const x = px(10 ** e);
    parts.push(
      `<line x1="${x}" y1="${T}" x2="${x}" y2="${H - B}" stroke="#ddd"/>`,
      `<text x="${x}" y="${H - B + 16}" text-anchor="middle">${
        (10 ** e).toLocaleString("en-US")
      }</text>`,
    );
  }
  for (let e = y0; e <= y1; e++) {
    const y = py(10 ** e);
    parts.push(
      `<line x1="${L}" y1="${y}" x2="${W - R}" y2="${y}" stroke="#ddd"/>`,
      `<text x="${L - 6}" y="${y + 4}" text-anchor="end">${10 ** e} ms</text>`,
    );
  }
  parts.push(
    `<text x="${W / 2}" y="${H - 12}" text-anchor="middle">vertices</text>`,
    `<text x="16" y="${H / 2}" text-anchor="middle" transform="rotate(-90 16 ${
      H / 2
    })">ms per iteration</text>`,
  );
  const colors = { gpu: "#1f77b4", cpu: "#d62728" } as const;
  (["gpu", "cpu"] as const).forEach((d, k) => {
    const pts = data.filter((r) => r.device === d);
    if (!pts.length) return;
    parts.push(
      `<polyline fill="none" stroke="${colors[d]}" stroke-width="2" points="${
        pts.map((r) => `${px(r.vertices)},${py(r.perIterationMs)}`).join(" ")
      }"/>`,
      ...pts.map((r) =>
        `<circle cx="${px(r.vertices)}" cy="${py(r.perIterationMs)}" r="3" fill="${colors[d]}"/>`
      ),
      `<text x="${L + 10}" y="${T + 16 + 16 * k}" fill="${colors[d]}">${
        d === "gpu" ? `GPU (${gpuName})` : "CPU (WASM tape)"
      }</text>`,
    );
  });
  parts.push("</svg>", "");
  return parts.join("\n");
}
