/**
 * Where compiling residuals (issue 26) spends its time on this GPU: the program's own kernel
 * (straight-line code per topology) and the solver's shared kernels, each timed cold (the first
 * compile of its code in this process) as WGSL parsing (`createShaderModule`) and the driver's
 * pipeline compilation (`createComputePipeline`), against a one-line kernel (the driver's floor).
 *
 *   deno run -A bench/residual_compile.ts
 * @module
 */
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
const params = meshParams(perturbed(mesh, 0.25));
const t0 = performance.now();
const program = compileProgram(params, meshResiduals(mesh, meanEdgeLength(mesh))(params));
const planMs = performance.now() - t0;
const lines = [
  `# Compiling the 5,292-vertex mesh problem, ${gpu.caps.description}`,
  "",
  `Measured by \`bench/residual_compile.ts\` on ${
    new Date().toISOString().slice(0, 10)
  }; cold (each kernel's first compile in the process).`,
  `Tracing and grouping (the program, CPU): ${
    planMs.toFixed(1)
  } ms including the residual function's run.`,
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
console.log(lines.join("\n") + "\n");
