/**
 * The optimizers' fused update on the GPU (see src/contract/optim.ts): one elementwise kernel with
 * three outputs, vec4 where the layout allows, its constants in uniforms (one pipeline serves
 * every step and every hyperparameter).
 * @module
 */
import type { AdamJob, AdamResult } from "../contract/optim.ts";
import type { GpuHost, GpuStorage } from "./host.ts";

const WORKGROUP = 256;

/**
 * The WGSL of one Adam step over `dtype` storage, vec4 or scalar.
 *
 * @example
 * ```ts
 * import { generateAdam } from "./optim.ts";
 * const wgsl = generateAdam("float32", true);
 * ```
 */
export function generateAdam(dtype: "float32" | "float16", vec4: boolean): string {
  const st = dtype === "float16" ? "f16" : "f32";
  const xt = vec4 ? `vec4<${st}>` : st;
  const vt = vec4 ? "vec4<f32>" : "f32";
  const names = ["p", "g", "m", "v"];
  return [
    ...(dtype === "float16" ? ["enable f16;"] : []),
    "struct Params { n: u32, off_p: u32, off_g: u32, off_m: u32, off_v: u32, maximize: u32,",
    "  lr_t: f32, b1: f32, b2: f32, eps: f32, l2: f32, decay: f32, sqrt_bc2: f32, c1: f32,",
    "  c2: f32, pad0: u32, pad1: u32, pad2: u32 }",
    ...names.map((n, i) => `@group(0) @binding(${i}) var<storage, read> in_${n}: array<${xt}>;`),
    ...["p", "m", "v"].map((n, i) =>
      `@group(0) @binding(${4 + i}) var<storage, read_write> out_${n}: array<${xt}>;`
    ),
    "@group(0) @binding(7) var<uniform> u: Params;",
    `@compute @workgroup_size(${WORKGROUP})`,
    "fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {",
    `  let i = gid.x + gid.y * nwg.x * ${WORKGROUP}u;`,
    "  if (i >= u.n) { return; }",
    `  let p = ${vt}(in_p[u.off_p + i]);`,
    `  var g = ${vt}(in_g[u.off_g + i]);`,
    "  if (u.maximize != 0u) { g = -g; }",
    // The same arithmetic, in the same order, as the composed update (src/autograd/optim.ts).
    "  if (u.l2 != 0.0) { g = g + p * u.l2; }",
    "  let base = select(p * u.decay, p, u.decay == 1.0);",
    `  let m = ${vt}(in_m[u.off_m + i]) * u.b1 + g * u.c1;`,
    `  let v = ${vt}(in_v[u.off_v + i]) * u.b2 + (g * g) * u.c2;`,
    "  let denom = sqrt(v) / u.sqrt_bc2 + u.eps;",
    `  out_p[i] = ${xt}(base - (m / denom) * u.lr_t);`,
    `  out_m[i] = ${xt}(m);`,
    `  out_v[i] = ${xt}(v);`,
    "}",
    "",
  ].join("\n");
}

/** One Adam step of a parameter in one kernel, or null for a layout it does not take. */
export function runAdamGpu(backend: GpuHost, job: AdamJob): AdamResult | null {
  const views = [job.p, job.g, job.m, job.v];
  const dtype = job.p.dtype;
  if ((dtype !== "float32" && dtype !== "float16") || views.some((x) => x.dtype !== dtype)) {
    return null;
  }
  backend.checkLive(job.op, [dtype]);
  const n = views[0].shape.reduce((a, b) => a * b, 1);
  const vec4 = n % 4 === 0 && views.every((x) => x.offset % 4 === 0);
  const w = vec4 ? 4 : 1;
  const out = [0, 1, 2].map(() => backend.alloc(job.op, dtype, n));
  const [p, m, v] = out;
  if (n === 0) return { p, m, v };
  const words = new Uint32Array(20);
  words.set([n / w, ...views.map((x) => x.offset / w), job.maximize ? 1 : 0]);
  // Every constant computed in float64 and rounded once, as the composed update's constants are.
  new Float32Array(words.buffer, 6 * 4, 9).set([
    job.lr / (1 - job.beta1 ** job.step),
    job.beta1,
    job.beta2,
    job.eps,
    job.l2,
    job.decay,
    Math.sqrt(1 - job.beta2 ** job.step),
    1 - job.beta1,
    1 - job.beta2,
  ]);
  const pipeline = backend.pipeline(
    `adam|${dtype}|${vec4 ? "v4" : "s"}`,
    7,
    () => generateAdam(dtype, vec4),
    3,
  );
  backend.dispatch(
    job.op,
    pipeline,
    [...views.map((x) => (x.storage as GpuStorage).buffer), ...out.map((s) => s.buffer)],
    words,
    backend.grid(n / w, WORKGROUP),
  );
  return { p, m, v };
}
