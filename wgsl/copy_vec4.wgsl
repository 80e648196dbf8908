// The bandwidth yardstick for benchmarks: a plain vec4 copy, one vector per invocation.
// Achieved GB/s of every kernel is reported as a fraction of what this kernel (or the queue's
// buffer copy, whichever is faster) measures on the same device.
@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i < arrayLength(&src)) {
    dst[i] = src[i];
  }
}
