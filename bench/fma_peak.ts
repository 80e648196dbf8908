/**
 * The multiply-add rate a WGSL kernel reaches on this GPU: the ceiling matmul is measured against.
 * Each invocation updates independent `vec4` accumulators in a loop, in the two forms the matmul
 * generator could use: "splat" (`fma(vec4(a.x), b, acc)`, one A value times four B values, as in
 * src/gpu/_codegen_matmul.ts) and "vector" (`fma(a, b, acc)`). float32 and float16 (packed
 * two-wide multiply-adds exist for float16 on NVIDIA; whether the driver emits them from WGSL is
 * what this shows). Timed with GPU timestamps, median of 9 runs after a warm-up.
 *
 * Usage: deno run -A bench/fma_peak.ts [--workgroups N]
 * @module
 */
import { median } from "./_util.ts";

/**
 * How one product is written: "splat" `fma(vec4(a.x), b, acc)`, "scale" `fma(b, vec4(a.x), acc)`,
 * "mul-add" `acc + b * a.x` (vector times scalar), "vector" `fma(a, b, acc)`, "pair"
 * `fma(a.xyxy, b, acc)` (a pair of values repeated), "vec2" `fma(a.xy, b.xy, acc2)` (two-wide
 * accumulators, twice as many), "scalar" `acc = fma(a.x, b.y, acc)` (scalar accumulators, four
 * times as many).
 */
type Form = "splat" | "scale" | "mul-add" | "vector" | "pair" | "vec2" | "scalar";

/** A kernel of `accumulators` vec4 accumulators, `iterations` loop trips, in type `t`. */
function kernel(t: "f32" | "f16", form: Form, accumulators: number): string {
  const lines = [
    ...(t === "f16" ? ["enable f16;"] : []),
    `@group(0) @binding(0) var<storage, read_write> out: array<vec4<${t}>>;`,
    "@group(0) @binding(1) var<uniform> u: vec4<f32>;",
    "@compute @workgroup_size(256)",
    "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {",
    `  let a = vec4<${t}>(vec4<f32>(f32(gid.x) * 1e-9, u.x, u.x * 0.5, u.x * 0.25));`,
    `  let b = vec4<${t}>(vec4<f32>(u.x, u.x * 0.75, u.x * 0.125, u.x * 0.0625));`,
  ];
  const vec2 = form === "vec2";
  const scalar = form === "scalar";
  // vec2 and scalar: two and four times the accumulators, as much narrower (the same registers
  // and products).
  const count = vec2 ? 2 * accumulators : scalar ? 4 * accumulators : accumulators;
  for (let i = 0; i < count; i++) {
    const init = vec2 ? `vec2<${t}>(a.xy)` : scalar ? "a.x" : `vec4<${t}>(a.x)`;
    lines.push(`  var acc${i} = ${init};`);
  }
  // a and b change every trip (as matmul fragments do), so no splat can leave the loop.
  lines.push(
    "  let iterations = u32(u.y);",
    `  var x = a;`,
    `  var y = b;`,
    "  for (var i = 0u; i < iterations; i++) {",
  );
  for (let i = 0; i < count; i++) {
    const s = `x[${i % 4}]`;
    const acc = `acc${i}`;
    const half = i % 2 ? "zw" : "xy";
    lines.push(
      scalar
        ? `    ${acc} = fma(x[${i % 4}], y[${(i >> 2) % 4}], ${acc});`
        : form === "pair"
        ? `    ${acc} = fma(x.${half}${half}, y, ${acc});`
        : vec2
        ? `    ${acc} = fma(x.${half}, y.${i % 4 < 2 ? "xy" : "zw"}, ${acc});`
        : form === "splat"
        ? `    ${acc} = fma(vec4<${t}>(${s}), y, ${acc});`
        : form === "scale"
        ? `    ${acc} = fma(y, vec4<${t}>(${s}), ${acc});`
        : form === "mul-add"
        ? `    ${acc} = ${acc} + y * ${s};`
        : `    ${acc} = fma(x, y, ${acc});`,
    );
  }
  lines.push("    x = x.yzwx;", "    y = y.wxyz;", "  }");
  const sum = Array.from({ length: count }, (_, i) => `acc${i}`).join(" + ");
  const total = vec2 ? `vec4<${t}>(${sum}, ${sum})` : scalar ? `vec4<${t}>(${sum})` : sum;
  lines.push(`  out[gid.x] = ${total};`, "}");
  return lines.join("\n");
}

const adapter = await navigator.gpu.requestAdapter({ powerPreference: "high-performance" });
if (!adapter) throw new Error("no GPU adapter");
const device = await adapter.requestDevice({
  requiredFeatures: ["timestamp-query", "shader-f16"] as GPUFeatureName[],
});
const info = adapter.info;
const flagAt = Deno.args.indexOf("--workgroups");
/** Enough workgroups to fill a 132-SM GPU many times over (fewer on a software adapter). */
const workgroups = flagAt >= 0 ? Number(Deno.args[flagAt + 1]) : 132 * 64;
const threads = workgroups * 256;
const iterations = 4096;
const out = device.createBuffer({ size: threads * 16, usage: GPUBufferUsage.STORAGE });
const uniforms = device.createBuffer({
  size: 16,
  usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST,
});
device.queue.writeBuffer(uniforms, 0, Float32Array.of(1e-3, iterations, 0, 0));
const queries = device.createQuerySet({ type: "timestamp", count: 2 });
const resolved = device.createBuffer({
  size: 16,
  usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC,
});
const readback = device.createBuffer({
  size: 16,
  usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
});

/** GPU nanoseconds of one dispatch of `pipeline`. */
async function time(pipeline: GPUComputePipeline, group: GPUBindGroup): Promise<number> {
  const encoder = device.createCommandEncoder();
  const pass = encoder.beginComputePass({
    timestampWrites: { querySet: queries, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 },
  });
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, group);
  pass.dispatchWorkgroups(workgroups);
  pass.end();
  encoder.resolveQuerySet(queries, 0, 2, resolved, 0);
  encoder.copyBufferToBuffer(resolved, 0, readback, 0, 16);
  device.queue.submit([encoder.finish()]);
  await readback.mapAsync(GPUMapMode.READ);
  const [begin, end] = new BigUint64Array(readback.getMappedRange().slice(0));
  readback.unmap();
  return Number(end - begin);
}

console.log(`# WGSL multiply-add rate on ${info.vendor} ${info.architecture} ${info.device}\n`);
console.log(
  `${threads} invocations x ${iterations} trips; median of 9 runs (GPU timestamps).\n`,
);
console.log("| type | form | vec4 accumulators | median us | TFLOP/s |");
console.log("|---|---|---:|---:|---:|");
for (const t of ["f32", "f16"] as const) {
  for (const form of ["splat", "scale", "mul-add", "vector", "pair", "vec2", "scalar"] as const) {
    for (const accumulators of [32]) {
      const module = device.createShaderModule({ code: kernel(t, form, accumulators) });
      const pipeline = device.createComputePipeline({
        layout: "auto",
        compute: { module, entryPoint: "main" },
      });
      const group = device.createBindGroup({
        layout: pipeline.getBindGroupLayout(0),
        entries: [{ binding: 0, resource: { buffer: out } }, {
          binding: 1,
          resource: { buffer: uniforms },
        }],
      });
      for (let w = 0; w < 3; w++) await time(pipeline, group);
      const runs: number[] = [];
      for (let r = 0; r < 9; r++) runs.push(await time(pipeline, group));
      const ns = median(runs);
      const flops = threads * iterations * accumulators * 4 * 2;
      console.log(
        `| ${t} | ${form} | ${accumulators} | ${(ns / 1000).toFixed(1)} | ${
          (flops / ns / 1000).toFixed(1)
        } |`,
      );
    }
  }
}
device.destroy();
