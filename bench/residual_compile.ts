/**
 * Where compiling residuals (issue 26) spends its time on this GPU. `CompiledResiduals.compile` of
 * the 5,292-vertex mesh problem in its parts (trace, plan, kernels and buffers): the process's
 * first compile, then the median of three more of fresh graphs. And each kernel's first compile
 * in the process, WGSL parsing (`createShaderModule`) and the driver's pipeline compilation
 * (`createComputePipeline`) apart, against a one-line kernel (the driver's floor). The NVIDIA
 * driver keeps compiled shaders on disk (~/.cache/nvidia) across processes: remove it for a cold
 * measurement.
 *
 *   deno run -A bench/residual_compile.ts [--compile-first]
 * @module
 */
import { CompiledResiduals } from "../src/mod.ts";
import { median } from "./_util.ts";
import { gpuBackendOf, init } from "../src/runtime.ts";
import { compileProgram } from "../src/scalar/program.ts";
import {
  generateJacobianProduct,
  generateParameterKernel,
  generateResidualKernel,
} from "../src/gpu/_codegen_residuals.ts";
import {
  geodesicSphere,
  meanEdgeLength,
  meshParams,
  meshResiduals,
  perturbed,
} from "../scripts/_mesh.ts";

await init({ device: "gpu" });
const gpu = gpuBackendOf()!;
const device = gpu.device;
const mesh = geodesicSphere(23);
const compileFirst = Deno.args.includes("--compile-first");

function compiles(): string[] {
  const timings = [0, 1, 2, 3].map(() => {
    const p = meshParams(perturbed(mesh, 0.25));
    const compiled = CompiledResiduals.compile(p, meshResiduals(mesh, meanEdgeLength(mesh)), {
      backend: "gpu",
    });
    compiled.dispose();
    return compiled.timings;
  });
  const row = (name: string, t: { traceMs: number; planMs: number; prepareMs: number }) =>
    `| ${name} | ${t.traceMs.toFixed(1)} | ${t.planMs.toFixed(1)} | ${t.prepareMs.toFixed(1)} | ${
      (t.planMs + t.prepareMs).toFixed(1)
    } |`;
  const later = timings.slice(1);
  return [
    "`CompiledResiduals.compile`, ms (run " + (compileFirst ? "before" : "after") +
    " the per-kernel table):",
    "",
    "| compile | trace | plan | kernels and buffers | plan + kernels and buffers |",
    "|---|---:|---:|---:|---:|",
    row("the process's first", timings[0]),
    row("three more, median", {
      traceMs: median(later.map((c) => c.traceMs)),
      planMs: median(later.map((c) => c.planMs)),
      prepareMs: median(later.map((c) => c.prepareMs)),
    }),
    "",
  ];
}

function kernels(): string[] {
  const params = meshParams(perturbed(mesh, 0.25));
  const program = compileProgram(params, meshResiduals(mesh, meanEdgeLength(mesh))(params));
  const lines = [
    "Each kernel's first compile in the process:",
    "",
    "| kernel | WGSL chars | createShaderModule ms | createComputePipeline ms |",
    "|---|---:|---:|---:|",
  ];
  const time = (name: string, code: string) => {
    const a = performance.now();
    const module = device.createShaderModule({ code });
    const b = performance.now();
    device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "main" } });
    const c = performance.now();
    lines.push(`| ${name} | ${code.length} | ${(b - a).toFixed(1)} | ${(c - b).toFixed(1)} |`);
  };
  time(
    "one line (the floor)",
    "@group(0) @binding(0) var<storage, read_write> w: array<f32>;\n@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) i: vec3<u32>) { w[i.x] = 1.0; }\n",
  );
  time("residual (this program's 4 topologies)", generateResidualKernel(program.groups, false));
  time("product (shared)", generateJacobianProduct());
  for (const name of ["normal", "cg", "cgUpdate", "trial", "accept", "gradient"] as const) {
    time(`${name} (shared)`, generateParameterKernel(name));
  }
  return [...lines, ""];
}

const header = [
  `# Compiling the 5,292-vertex mesh problem, ${gpu.caps.description}`,
  "",
  `Measured by \`bench/residual_compile.ts${compileFirst ? " --compile-first" : ""}\` on ${
    new Date().toISOString().slice(0, 10)
  }.`,
  "",
];
const body = compileFirst ? [...compiles(), ...kernels()] : [...kernels(), ...compiles()];
console.log([...header, ...body].join("\n"));
