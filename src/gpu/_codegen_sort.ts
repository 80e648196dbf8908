/**
 * WGSL of the sort family's GPU kernels (src/gpu/sort.ts runs them), all over rows of 32-bit
 * words:
 * - `keys`: each row's ordered keys (floats with -0 as +0 and NaN largest; descending as the
 *   complement) and indices, padded to a power of two with the largest key, which sorts after
 *   every element (ties are broken by index, and padding's indices come last);
 * - `bitonic`: one compare-exchange step (j, k) of a bitonic sort of every row's (key, index)
 *   pairs, ordered by key then index: a strict total order, so the unstable network gives the
 *   stable order, the same as the WASM reference's radix sort;
 * - `gather`: the window [start, start + count) of each sorted row: values by index, and the
 *   indices;
 * - `quantile`: each row's quantiles from its sorted values, at order statistics and weights the
 *   host computed (the same float64 arithmetic as the WASM reference);
 * - `search`: binary searches of ordered keys in a sorted sequence.
 * @module
 */

/** Invocations per workgroup of every sort kernel. */
export const SORT_WORKGROUP = 256;

/** The kernels of the sort family. */
export type SortStage = "keys" | "bitonic" | "gather" | "quantile" | "search";

/** Cache key of a stage's kernel (its WGSL depends on nothing else). */
export function sortKey(stage: SortStage): string {
  return `sort:${stage}`;
}

/** WGSL: the ordered key of 32-bit words of type `kind` (0 float32, 1 int32, 2 uint32). */
const ORDERED_KEY = [
  "fn ordered_key(b: u32, kind: u32) -> u32 {",
  "  if (kind == 1u) { return b ^ 0x80000000u; }",
  "  if (kind == 2u) { return b; }",
  "  if ((b & 0x7fffffffu) > 0x7f800000u) { return 0xffffffffu; }",
  "  var v = b;",
  "  if (v == 0x80000000u) { v = 0u; }",
  "  if ((v >> 31u) != 0u) { return ~v; }",
  "  return v ^ 0x80000000u;",
  "}",
].join("\n");

/** The flat invocation index over a grid folded into two dimensions. */
const MAIN = [
  `@compute @workgroup_size(${SORT_WORKGROUP})`,
  "fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {",
  `  let t = gid.x + gid.y * nwg.x * ${SORT_WORKGROUP}u;`,
];

/** The WGSL of one stage. Bindings: storage buffers in order, the last ones writable, then Params. */
export function generateSort(stage: SortStage): string {
  switch (stage) {
    case "keys":
      return [
        "struct Params { total: u32, len: u32, padded: u32, kind: u32, flip: u32, off: u32 }",
        "@group(0) @binding(0) var<storage, read> x: array<u32>;",
        "@group(0) @binding(1) var<storage, read_write> keys: array<u32>;",
        "@group(0) @binding(2) var<storage, read_write> order: array<u32>;",
        "@group(0) @binding(3) var<uniform> p: Params;",
        ORDERED_KEY,
        ...MAIN,
        "  if (t >= p.total) { return; }",
        "  let row = t / p.padded;",
        "  let i = t - row * p.padded;",
        "  order[t] = i;",
        "  if (i >= p.len) { keys[t] = 0xffffffffu; return; }",
        "  keys[t] = ordered_key(x[p.off + row * p.len + i], p.kind) ^ p.flip;",
        "}",
      ].join("\n");
    case "bitonic":
      return [
        "struct Params { total: u32, half: u32, j: u32, k: u32 }",
        "@group(0) @binding(0) var<storage, read_write> keys: array<u32>;",
        "@group(0) @binding(1) var<storage, read_write> order: array<u32>;",
        "@group(0) @binding(2) var<uniform> p: Params;",
        ...MAIN,
        "  if (t >= p.total) { return; }",
        // Pair t of its row: i with the bit of j cleared, and i + j.
        "  let row = t / p.half;",
        "  let q = t - row * p.half;",
        "  let i = (q / p.j) * 2u * p.j + q % p.j;",
        "  let a = row * p.half * 2u + i;",
        "  let b = a + p.j;",
        "  let ka = keys[a];",
        "  let kb = keys[b];",
        "  let ia = order[a];",
        "  let ib = order[b];",
        "  let greater = ka > kb || (ka == kb && ia > ib);",
        // Ascending runs where bit k of i is clear, descending where it is set.
        "  if (greater == ((i & p.k) == 0u)) {",
        "    keys[a] = kb;",
        "    keys[b] = ka;",
        "    order[a] = ib;",
        "    order[b] = ia;",
        "  }",
        "}",
      ].join("\n");
    case "gather":
      return [
        "struct Params { total: u32, len: u32, padded: u32, start: u32, count: u32, off: u32 }",
        "@group(0) @binding(0) var<storage, read> x: array<u32>;",
        "@group(0) @binding(1) var<storage, read> order: array<u32>;",
        "@group(0) @binding(2) var<storage, read_write> values: array<u32>;",
        "@group(0) @binding(3) var<storage, read_write> indices: array<u32>;",
        "@group(0) @binding(4) var<uniform> p: Params;",
        ...MAIN,
        "  if (t >= p.total) { return; }",
        "  let row = t / p.count;",
        "  let c = t - row * p.count;",
        "  let i = order[row * p.padded + p.start + c];",
        "  values[t] = x[p.off + row * p.len + i];",
        "  indices[t] = i;",
        "}",
      ].join("\n");
    case "quantile":
      // table[3 j .. 3 j + 2]: the lower order statistic, the upper one and the weight's bits
      // (method codes as asm/sort.ts `sort_quantile_rows`).
      return [
        "struct Params { total: u32, len: u32, qn: u32, method: u32 }",
        "@group(0) @binding(0) var<storage, read> sorted: array<f32>;",
        "@group(0) @binding(1) var<storage, read> table: array<u32>;",
        "@group(0) @binding(2) var<storage, read_write> out: array<f32>;",
        "@group(0) @binding(3) var<uniform> p: Params;",
        ...MAIN,
        "  if (t >= p.total) { return; }",
        "  let row = t / p.qn;",
        "  let j = t - row * p.qn;",
        "  let base = row * p.len;",
        "  let last = bitcast<u32>(sorted[base + p.len - 1u]);",
        "  if ((last & 0x7fffffffu) > 0x7f800000u) { out[t] = bitcast<f32>(0x7fc00000u); return; }",
        "  let lo = table[3u * j];",
        "  let hi = table[3u * j + 1u];",
        "  let g = bitcast<f32>(table[3u * j + 2u]);",
        "  let a = sorted[base + lo];",
        "  let b = sorted[base + hi];",
        "  var y = a;",
        "  if (p.method == 2u) { y = select(a, b, g > 0.0); }",
        "  else if (p.method == 3u) { y = select(a, b, g > 0.5 || (g == 0.5 && (lo & 1u) == 1u)); }",
        "  else if (p.method == 5u) { y = select(a, (a + b) / 2.0, g > 0.0); }",
        "  else if (p.method != 1u) {",
        "    var w = g;",
        "    if (p.method == 4u) { w = select(0.0, 0.5, g > 0.0); }",
        "    let diff = b - a;",
        "    y = select(a + diff * w, b - diff * (1.0 - w), w >= 0.5);",
        "  }",
        "  out[t] = y;",
        "}",
      ].join("\n");
    case "search":
      return [
        "struct Params { total: u32, n: u32, kind: u32, right: u32, soff: u32, voff: u32 }",
        "@group(0) @binding(0) var<storage, read> sorted: array<u32>;",
        "@group(0) @binding(1) var<storage, read> values: array<u32>;",
        "@group(0) @binding(2) var<storage, read_write> out: array<i32>;",
        "@group(0) @binding(3) var<uniform> p: Params;",
        ORDERED_KEY,
        ...MAIN,
        "  if (t >= p.total) { return; }",
        "  let key = ordered_key(values[p.voff + t], p.kind);",
        "  var lo = 0u;",
        "  var hi = p.n;",
        // At most 32 halvings: bounded without relying on the data.
        "  for (var step = 0u; step < 33u && lo < hi; step++) {",
        "    let mid = (lo + hi) / 2u;",
        "    let k = ordered_key(sorted[p.soff + mid], p.kind);",
        "    if (select(k < key, k <= key, p.right == 1u)) { lo = mid + 1u; } else { hi = mid; }",
        "  }",
        "  out[t] = i32(lo);",
        "}",
      ].join("\n");
  }
}
