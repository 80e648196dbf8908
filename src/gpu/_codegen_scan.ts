/**
 * Generates the WGSL of the scan kernels (cumsum, cumprod, cummax, cummin). The input is seen as
 * rows (every axis but the scan axis, read through strides or as contiguous vec4s) of `len`
 * elements. A row is cut into tiles; a tile is scanned by a team of T invocations, each holding
 * E elements as E/4 vec4 registers with straight-line code (naga does not unroll loops, and an
 * indexed register array would spill to local memory).
 *
 * Inside a team, invocations form clusters of `min(T, subgroup size)` lanes. A cluster owns a
 * contiguous segment of the tile and reads it lane-striped (chunk c of lane l is vec4 number
 * `c * width + l` of the segment), so every load and store of a subgroup is one coalesced block.
 * Each chunk is scanned inside its vec4, then across the cluster with subgroup operations
 * (`subgroupInclusiveAdd` for integer sums, a shuffle-up ladder for the others), carrying the running
 * total from chunk to chunk; cluster totals are then scanned across the team in shared memory.
 * Without subgroups a cluster is one invocation.
 *
 * One generator, three uses (the scan plan picks among them):
 * - `prefix: "none"`: the tile is the whole row (the `row` variant; many teams per workgroup);
 * - `prefix: "lookback"`: single-pass decoupled look-back (Merrill and Garland). Tiles go in
 *   launch order (workgroup k takes tile k), publish their aggregate, look back over their
 *   predecessors' published states for an exclusive prefix, and publish their inclusive prefix;
 * - `stage: "reduce"` then `prefix: "offsets"`: the multipass fallback (tile totals, a scan of the
 *   totals, then each tile scanned from its offset);
 * - `stage: "reduce"` with `superTiles` S > 1 then `prefix: "totals"`: the two-pass form of it
 *   (sums and products). A first-pass workgroup reduces S consecutive tiles and writes each
 *   tile's total and their group's; the final pass sums, for its tile, the group totals before
 *   its group and the tile totals before it in its group (a few hundred L2-resident values, read
 *   by the whole workgroup while its tile's loads are in flight), so the totals need no scan of
 *   their own and no dispatch between the passes.
 *
 * Look-back states: each tile's state is a tag, the dispatch's epoch above the tile's status (1:
 * aggregate, 2: inclusive prefix; a tag of another epoch reads as nothing yet), with its value.
 * Where the device has 64-bit atomics (`wideStates`) the state is one `atomic<u64>`, written and
 * read whole: half the atomic operations of the other form, which on an H200 took a 64 Mi cumsum
 * from 164 to 154 us. Elsewhere it is a tagged word (./_codegen_tagged.ts) over two 32-bit atomics:
 * tags only grow and each is written once, so a state read with one tag on both halves is whole.
 * Either way there are no memory barriers (WGSL's atomics are relaxed). Epochs spare a dispatch
 * that clears the words before each scan (cleared once every {@link SCAN_EPOCHS} - 1 scans
 * instead). A predecessor that stays silent for a bounded number of reads is reduced by the
 * reader itself, so the look-back never depends on another workgroup running: tiles need not
 * take ids from an atomic counter to be correct, and launch order (workgroups start in index
 * order on GPUs; a tile still waiting on a later-starting one only loses time) saves a round trip
 * to L2 before each tile's loads.
 *
 * The states are read with `atomicOr(word, 0)`, not `atomicLoad` (see ./_codegen_tagged.ts). On
 * an H200 (NVIDIA 580, through naga and Vulkan), a single `atomicLoad` per tile made after the
 * tile's loads added 53 us to a 64 Mi cumsum (136 -> 189 us), while a plain load there, or an
 * `atomicLoad` issued before the tile's loads, cost next to nothing.
 *
 * Subgroups are assumed to be runs of consecutive `local_invocation_index` (subgroup k holds
 * invocations k * size .. k * size + size - 1), as on NVIDIA, AMD, Intel and lavapipe with 1-d
 * workgroups; the reduce generator assumes the same.
 * @module
 */
import type { DType } from "../core/dtype.ts";
import { taggedWordFunctions } from "./_codegen_tagged.ts";
import { literal, preludeFor, workgroupBuiltins } from "./_wgsl_types.ts";
import type { ScanOp, ScanType } from "../ir/scan.ts";

// The scan operators and register types are the job's (src/contract/scan.ts); src/plans.ts still
// names ScanOp through this module.

/** Everything the generated code depends on. */
export interface ScanSpec {
  op: ScanOp;
  type: ScanType;
  /** Storage dtype of the input (bool: u32 words). */
  inDtype: DType;
  /** Storage dtype of the output (scan stage) or of the tile totals (reduce stage). */
  outDtype: DType;
  /** "scan" writes every output; "reduce" writes one total per tile (multipass, first pass). */
  stage: "scan" | "reduce";
  /** Where a tile's exclusive prefix comes from (scan stage). */
  prefix: "none" | "offsets" | "lookback" | "totals";
  /** "vec4": rows contiguous and 4-aligned, read as vec4s; "strided": through strides. */
  inMode: "vec4" | "strided";
  /** "vec4": contiguous rows; "strided": the scan axis has stride `inner` in the output. */
  outMode: "vec4" | "strided";
  /** Axes that make up a row index (strided input), at most 7. */
  rowRank: number;
  exclusive: boolean;
  reverse: boolean;
  subgroups: boolean;
  workgroupSize: number;
  /** Elements per invocation, a multiple of 4. */
  elementsPerThread: number;
  /** Invocations per tile: a power of two dividing the workgroup (the workgroup for tiled uses). */
  teamSize: number;
  /** Look-back: predecessor states each reading lane reads per round trip. */
  lookbackStates: number;
  /**
   * Row variant with teams of one invocation: walk rows longer than E in chunks of E, carrying
   * the running value (the `columns` layout for inner axes: neighbouring invocations scan
   * neighbouring columns, so every load and store of a subgroup is coalesced).
   */
  columns: boolean;
  /**
   * Look-back: sub-tiles (of T x E elements) per tile. Above 1 the workgroup first reduces its
   * sub-tiles, looks back once for all of them, then reads them again (from L2) to scan and store.
   */
  subTiles: number;
  /**
   * Tiled uses: take tiles from the last one down. The multipass scan's final pass runs so, as
   * its first pass ended reading the last tiles and they are still in L2.
   */
  descending: boolean;
  /**
   * Tiles per group of the two-pass multipass scan (1 elsewhere): the first pass (`stage:
   * "reduce"`) reduces a group per workgroup and also writes the group totals; the final pass
   * (`prefix: "totals"`) reads both. Sums and products with subgroups only.
   */
  superTiles: number;
  /** Look-back: false publishes aggregates only (tests: every look-back walks to the row start). */
  publishPrefixes: boolean;
  /**
   * Look-back, sums and products with subgroups: publish the tile's aggregate from a plain
   * reduction of its registers (one barrier) before scanning it, not from the scan's total.
   */
  earlyAggregate: boolean;
  /** Look-back: each tile's state is one 64-bit atomic word instead of two tagged 32-bit ones. */
  wideStates: boolean;
}

/** Cache key of a spec. */
export function scanKey(s: ScanSpec): string {
  return [
    "scan",
    s.op,
    s.type,
    `${s.inDtype}>${s.outDtype}`,
    s.stage,
    s.prefix,
    s.inMode,
    s.outMode,
    `r${s.rowRank}`,
    s.exclusive ? "ex" : "in",
    s.reverse ? "rev" : "fwd",
    s.subgroups ? "sg" : "sh",
    `wg${s.workgroupSize}`,
    `e${s.elementsPerThread}`,
    `t${s.teamSize}`,
    `lb${s.lookbackStates}`,
    `st${s.subTiles}`,
    s.columns ? "col" : "",
    s.descending ? "desc" : "",
    `g${s.superTiles}`,
    s.publishPrefixes ? "" : "aggregates-only",
    earlyAggregate(s) ? "early" : "",
    s.wideStates ? "wide" : "",
  ].join("|");
}

/** Uniform words: rows, len, inner, tiles, in_off, in_step, total, epoch, row shape, row strides. */
const U_WORDS = 8 + 2 * 8;

/** The per-dispatch parameters. */
export interface ScanParams {
  rows: number;
  len: number;
  /** Output stride of the scan axis (strided output), else 1. */
  inner: number;
  /** Tiles per row. */
  tiles: number;
  /** Input offset and stride along the scan axis, in elements. */
  inOffset: number;
  inStep: number;
  /** Tiles of all rows (tiled uses). */
  total: number;
  /** Shape and input strides of the axes that index a row (strided input). */
  rowShape: readonly number[];
  rowStrides: readonly number[];
  /**
   * Look-back: this dispatch's epoch (1 to {@link SCAN_EPOCHS} - 1), tagged onto every state it
   * publishes, so the state words need no clearing between scans.
   */
  epoch?: number;
}

/**
 * Look-back epochs: a state's tag (16 bits) holds the epoch above its 2-bit status. The words are
 * cleared once every `SCAN_EPOCHS - 1` scans, before an epoch number comes round again.
 */
export const SCAN_EPOCHS = 1 << 14;

/** Packs the uniform block for one dispatch (negative strides wrap, as u32 arithmetic expects). */
export function scanUniforms(p: ScanParams): Uint32Array {
  const u = new Uint32Array(U_WORDS);
  u.set([p.rows, p.len, p.inner, p.tiles, p.inOffset >>> 0, p.inStep >>> 0, p.total, p.epoch ?? 0]);
  p.rowShape.forEach((d, i) => (u[8 + i] = d));
  p.rowStrides.forEach((d, i) => (u[16 + i] = d >>> 0));
  return u;
}

/** Identity of the scan in its register type; `exact` gives -0 for float sums (see below). */
export function scanIdentity(op: ScanOp, type: ScanType): number {
  switch (op) {
    case "sum":
      // -0 is the exact additive identity (-0 + x == x for every x, -0 included); +0 would turn a
      // leading -0 into +0. The exclusive scan's first output is still written as +0.
      return type === "f32" ? -0 : 0;
    case "prod":
      return 1;
    case "max":
      return type === "f32" ? -Infinity : type === "i32" ? -2147483648 : 0;
    case "min":
      return type === "f32"
        ? Infinity
        : type === "i32"
        ? 2147483647
        : type === "u32"
        ? 4294967295
        : 1;
  }
}

/** WGSL register type of a scan type. */
function registerType(type: ScanType): string {
  return type === "bool" ? "u32" : type;
}

/** The dtype a scan type's values are stored as between passes (tile totals, offsets). */
export function accumulatorDtype(type: ScanType): DType {
  return type === "f32" ? "float32" : type === "i32" ? "int32" : "uint32";
}

function storageElement(dtype: DType): string {
  return dtype === "float16"
    ? "f16"
    : dtype === "float32"
    ? "f32"
    : dtype === "int32"
    ? "i32"
    : "u32";
}

/** The combine functions: `a` is the earlier operand (order matters for max/min ties). */
function combineFunctions(op: ScanOp, type: ScanType): string {
  const t = registerType(type);
  const v = `vec4<${t}>`;
  let scalar: string, vector: string;
  if (op === "sum" || op === "prod") {
    const sign = op === "sum" ? "+" : "*";
    scalar = `a ${sign} b`;
    vector = `a ${sign} b`;
  } else if (type === "f32") {
    // PyTorch: the later element wins ties, and a NaN, once seen, stays (the latest NaN wins).
    // NaN is tested on the bits: `x != x` can be folded away by fast-math drivers.
    const cmp = op === "max" ? ">=" : "<=";
    scalar = `select(a, b, g_isnan(b) || (!g_isnan(a) && b ${cmp} a))`;
    vector = `select(a, b, nan4(b) | (!nan4(a) & (b ${cmp} a)))`;
  } else {
    scalar = `${op}(a, b)`;
    vector = `${op}(a, b)`;
  }
  const lines = [
    `fn c1(a: ${t}, b: ${t}) -> ${t} { return ${scalar}; }`,
    `fn c4(a: ${v}, b: ${v}) -> ${v} { return ${vector}; }`,
  ];
  if (type === "f32" && (op === "max" || op === "min")) {
    lines.unshift(
      "fn nan4(x: vec4<f32>) -> vec4<bool> { return (bitcast<vec4<u32>>(x) & vec4(0x7fffffffu)) > vec4(0x7f800000u); }",
    );
  }
  return lines.join("\n");
}

/** Bits of a register value as u32, and back. */
function toBits(type: ScanType, x: string): string {
  return type === "f32" || type === "i32" ? `bitcast<u32>(${x})` : x;
}
function fromBits(type: ScanType, x: string): string {
  return type === "f32" ? `bitcast<f32>(${x})` : type === "i32" ? `bitcast<i32>(${x})` : x;
}

/** Converts a loaded storage value (scalar or vec4) to the register type. */
function loadAs(inDtype: DType, type: ScanType, x: string, vector: boolean): string {
  const t = registerType(type);
  const target = vector ? `vec4<${t}>` : t;
  if (storageElement(inDtype) === t) return x;
  return `${target}(${x})`;
}

/** Converts a register value (scalar or vec4) to the output storage type. */
function storeAs(outDtype: DType, type: ScanType, x: string, vector: boolean): string {
  const e = storageElement(outDtype);
  if (e === registerType(type)) return x;
  return vector ? `vec4<${e}>(${x})` : `${e}(${x})`;
}

/** Offset of row `row` in the input: its coordinates over the row axes times their strides. */
function rowOffset(rank: number): string {
  if (rank === 0) return "let row_off = 0u;";
  const lines = ["var row_off = 0u;", "var rest = row;"];
  for (let d = rank - 1; d >= 0; d--) {
    const dim = `p.row_shape[${d >> 2}][${d & 3}]`;
    const stride = `p.row_strides[${d >> 2}][${d & 3}]`;
    lines.push(
      d > 0
        ? `row_off += (rest % ${dim}) * ${stride}; rest = rest / ${dim};`
        : `row_off += rest * ${stride};`,
    );
  }
  return lines.join("\n  ");
}

/** Generates the WGSL source of a spec. */
export function generateScan(s: ScanSpec): string {
  const t = registerType(s.type);
  const wg = s.workgroupSize;
  const T = s.teamSize;
  const id = literal(scanIdentity(s.op, s.type), accumulatorDtype(s.type));
  // The exclusive scan's first output: the identity, but +0 rather than the internal -0.
  const firstOut = s.op === "sum" && s.type === "f32" ? "0.0" : null;
  const half = s.inDtype === "float16" || s.outDtype === "float16";
  const lookback = s.prefix === "lookback";
  const tiled = T === wg && s.prefix !== "none";
  const inElem = storageElement(s.inDtype);
  const outElem = storageElement(s.outDtype);
  const lines: string[] = [];
  if (half) lines.push("enable f16;");
  lines.push(
    "struct Params { rows: u32, len: u32, inner: u32, tiles: u32, in_off: u32, in_step: u32, total: u32, epoch: u32, row_shape: array<vec4<u32>, 2>, row_strides: array<vec4<u32>, 2> }",
    `@group(0) @binding(0) var<storage, read> src: array<${
      s.inMode === "vec4" ? `vec4<${inElem}>` : inElem
    }>;`,
  );
  let binding = 1;
  if (s.prefix === "offsets" && s.stage === "scan") {
    lines.push(
      `@group(0) @binding(${binding++}) var<storage, read> offsets: array<${t}>;`,
    );
  }
  const grouped = s.superTiles > 1;
  if (s.prefix === "totals" && s.stage === "scan") {
    lines.push(
      `@group(0) @binding(${binding++}) var<storage, read> totals: array<${t}>;`,
      `@group(0) @binding(${binding++}) var<storage, read> group_totals: array<${t}>;`,
    );
  }
  if (lookback) {
    lines.push(
      `@group(0) @binding(${binding++}) var<storage, read_write> flags: array<atomic<${
        s.wideStates ? "u64" : "u32"
      }>>;`,
    );
  }
  const dstElem = s.stage === "reduce" ? t : s.outMode === "vec4" ? `vec4<${outElem}>` : outElem;
  lines.push(
    `@group(0) @binding(${binding++}) var<storage, read_write> dst: array<${dstElem}>;`,
  );
  if (s.stage === "reduce" && grouped) {
    lines.push(
      `@group(0) @binding(${binding++}) var<storage, read_write> group_dst: array<${t}>;`,
    );
  }
  lines.push(
    `@group(0) @binding(${binding}) var<uniform> p: Params;`,
    `var<workgroup> sh: array<${t}, ${wg}>;`,
    combineFunctions(s.op, s.type),
    loadFunction(s),
  );
  if (lookback) {
    lines.push(
      `var<workgroup> tile_prefix: ${t};`,
      ...(earlyAggregate(s) ? [`var<workgroup> early_parts: array<${t}, ${wg}>;`] : []),
      taggedWordFunctions("flags", s.wideStates),
      "// Status (1 aggregate, 2 inclusive prefix) and value of tile v; status 0 until it is whole",
      "// and carries this dispatch's epoch (states left by earlier scans read as nothing yet).",
      "fn read_state(v: u32) -> vec2<u32> {",
      `  let word = tagged_read(${s.wideStates ? "v" : "2u * v"});`,
      "  return vec2(select(0u, word.x & 3u, (word.x >> 2u) == p.epoch), word.y);",
      "}",
      `fn publish(v: u32, status: u32, value: ${t}) {`,
      `  tagged_store(${s.wideStates ? "v" : "2u * v"}, (p.epoch << 2u) | status, ${
        toBits(s.type, "value")
      });`,
      "}",
    );
  }
  // Subgroup add built-ins may start from +0 (lavapipe's do), turning a sum of -0 values into +0
  // where the scan's identity is -0. A float sum is -0 exactly when every term is -0, so a ballot
  // of the terms that are not restores the sign (explicit shuffles and adds instead cost 3 us of
  // 205 on a 64 Mi cumsum on an H200, and half the look-back's speed).
  const exactZeros = s.op === "sum" && s.type === "f32";
  if (s.subgroups && (s.op === "sum" || s.op === "prod")) {
    lines.push(
      `fn subgroup_total(v: ${t}, sg_size: u32) -> ${t} {`,
      ...(exactZeros
        ? [
          "  let all_negative_zero = subgroupAll(bitcast<u32>(v) == 0x80000000u);",
          "  return select(subgroupAdd(v), bitcast<f32>(0x80000000u), all_negative_zero);",
        ]
        : [`  return ${s.op === "sum" ? "subgroupAdd" : "subgroupMul"}(v);`]),
      "}",
    );
  }
  if (s.subgroups) {
    // Inclusive scan within clusters of `width` lanes (a power of two dividing the subgroup).
    const ladder = [
      "  var s = v;",
      "  for (var d = 1u; d < width; d = d << 1u) {",
      "    let up = subgroupShuffleUp(s, d);",
      "    s = select(s, c1(up, s), (lane & (width - 1u)) >= d);",
      "  }",
      "  return s;",
    ];
    lines.push(
      `fn cluster_scan(v: ${t}, lane: u32, width: u32, sg_size: u32) -> ${t} {`,
      ...(s.op === "sum" && !exactZeros
        ? ["  if (width == sg_size) { return subgroupInclusiveAdd(v); }"]
        : exactZeros
        ? [
          "  if (width == sg_size) {",
          // Lanes up to this one holding anything but -0 (subgroups of at most 64).
          "    let terms = subgroupBallot(bitcast<u32>(v) != 0x80000000u);",
          "    let low = select(terms.x, terms.x & (0xffffffffu >> (31u - lane)), lane < 32u);",
          "    let high = select(0u, terms.y & (0xffffffffu >> (63u - lane)), lane >= 32u);",
          "    return select(bitcast<f32>(0x80000000u), subgroupInclusiveAdd(v), (low | high) != 0u);",
          "  }",
        ]
        : []),
      ...ladder,
      "}",
    );
    if (lookback) {
      // Reduction over the whole subgroup in lane order: a higher lane is an earlier tile.
      lines.push(
        `fn ordered_reduce(v: ${t}, lane: u32, sg_size: u32) -> ${t} {`,
        ...(s.op === "sum" || s.op === "prod" ? ["  return subgroup_total(v, sg_size);"] : [
          "  var r = v;",
          "  for (var m = 1u; m < sg_size; m = m << 1u) {",
          "    let other = subgroupShuffleXor(r, m);",
          "    r = select(c1(other, r), c1(r, other), (lane & m) != 0u);",
          "  }",
          "  return r;",
        ]),
        "}",
      );
    }
  }

  const builtins = workgroupBuiltins(s.subgroups);
  const body: string[] = [];
  const emit = (...xs: string[]) => body.push(...xs.map((x) => `  ${x}`));
  // The module: declarations, the entry point around `body`, and the prelude helpers it calls.
  const finish = () => {
    const main = [
      ...lines,
      `@compute @workgroup_size(${wg})`,
      `fn main(${builtins.join(", ")}) {`,
      ...body,
    ].join("\n");
    return `${main}\n${preludeFor(main)}\n`;
  };
  emit("let g = wid.x + wid.y * nwg.x;");
  if (lookback) {
    emit(
      "let v = g;",
      // Extra workgroups of a folded grid have ids past the end and leave together.
      "if (v >= p.total) { return; }",
      "let row = v / p.tiles;",
      "let tile = v % p.tiles;",
      "let row_ok = true;",
      "let tl = lid;",
    );
  } else if (tiled && s.stage === "reduce" && grouped) {
    emit(
      "if (g >= p.total) { return; }",
      `let groups_per_row = (p.tiles + ${s.superTiles - 1}u) / ${s.superTiles}u;`,
      "let row = g / groups_per_row;",
      "let group = g % groups_per_row;",
      "let row_ok = true;",
      "let tl = lid;",
    );
  } else if (tiled) {
    emit(
      "if (g >= p.total) { return; }",
      `let order = ${s.descending ? "p.total - 1u - g" : "g"};`,
      "let row = order / p.tiles;",
      "let tile = order % p.tiles;",
      "let row_ok = true;",
      "let tl = lid;",
    );
  } else {
    // Teams of T invocations, one row each; spare teams of the last workgroup still take part in
    // the barriers.
    emit(
      `let row = g * ${wg / T}u + lid / ${T}u;`,
      "let tile = 0u;",
      "let row_ok = row < p.rows;",
      `let tl = lid % ${T}u;`,
    );
  }
  if (s.subgroups) {
    emit(`let width = min(${T}u, sg_size);`, "let lane = sg_lane;");
  } else {
    emit("let width = 1u;", "let lane = 0u;");
  }
  emit(
    "let lic = tl % width;",
    "let q = tl / width;",
    "let cid = lid / width;",
    `let cpt = ${T}u / width;`,
    `let clusters = ${wg}u / width;`,
  );
  // Row bases.
  if (s.inMode === "vec4") emit("let ibase = p.in_off + row * p.len;");
  else emit(rowOffset(s.rowRank), "let ibase = p.in_off + row_off;");
  if (s.stage === "scan") {
    if (s.outMode === "vec4") emit("let obase = row * p.len;");
    else emit("let obase = (row / p.inner) * p.len * p.inner + row % p.inner;");
  }
  if (s.columns) {
    body.push(
      ...[
        `var run = ${id};`,
        `for (var chunk = 0u; chunk < (p.len + ${
          s.elementsPerThread - 1
        }u) / ${s.elementsPerThread}u; chunk++) {`,
        "  workgroupBarrier();",
        ...tileBlock(s, "chunk").map((x) => `  ${x}`),
        "  let left = c1(run, cluster_prefix);",
        ...outputBlock(s, firstOut).map((x) => `  ${x}`),
        "  run = c1(run, team_total);",
        "}",
      ].map((x) => `  ${x}`),
      "}",
    );
    return finish();
  }
  if (lookback && s.subTiles > 1) {
    body.push(...subTiledLookback(s, firstOut).map((x) => `  ${x}`), "}");
    return finish();
  }
  if (s.stage === "reduce" && s.subgroups && (s.op === "sum" || s.op === "prod")) {
    const block = grouped ? groupTotalBlock(s) : tileTotalBlock(s);
    body.push(...block.map((x) => `  ${x}`), "}");
    return finish();
  }
  if (grouped && s.prefix === "totals") body.push(...groupPrefixLoads(s).map((x) => `  ${x}`));
  const early = lookback && earlyAggregate(s);
  body.push(...tileBlock(s, "tile", early ? earlyAggregateBlock(s) : []).map((x) => `  ${x}`));
  if (s.stage === "reduce") {
    emit("if (lid == 0u) { dst[row * p.tiles + tile] = team_total; }");
  } else {
    if (s.prefix === "none") emit("let left = cluster_prefix;");
    else if (s.prefix === "offsets") {
      emit(
        `let tile_prefix = select(offsets[row * p.tiles + tile], ${id}, tile == 0u);`,
        "let left = c1(tile_prefix, cluster_prefix);",
      );
    } else if (s.prefix === "totals") {
      body.push(...groupPrefixSum(s).map((x) => `  ${x}`));
      emit("let left = c1(tile_prefix, cluster_prefix);");
    } else {
      body.push(
        ...lookbackBlock(s, early ? "early_total" : "team_total", !early).map((x) => `  ${x}`),
      );
      emit(
        foldPrefix(s)
          ? "let left = workgroupUniformLoad(&tile_prefix);"
          : "let left = c1(workgroupUniformLoad(&tile_prefix), cluster_prefix);",
      );
    }
    body.push(...outputBlock(s, firstOut).map((x) => `  ${x}`));
  }
  body.push("}");
  return finish();
}

/**
 * `load4(ibase, j)`: logical elements j..j+3 of the row at `ibase` (the identity past its end),
 * read as one vec4 or through the stride, mirrored for reverse scans.
 */
function loadFunction(s: ScanSpec): string {
  const t = registerType(s.type);
  const id = literal(scanIdentity(s.op, s.type), accumulatorDtype(s.type));
  const out = [`fn load4(ibase: u32, j: u32) -> vec4<${t}> {`, `  var x = vec4<${t}>(${id});`];
  if (s.inMode === "vec4") {
    const index = s.reverse ? "(ibase + p.len - 4u - j) / 4u" : "(ibase + j) / 4u";
    const loaded = loadAs(s.inDtype, s.type, `src[${index}]`, true);
    out.push(`  if (j < p.len) { x = ${loaded}${s.reverse ? ".wzyx" : ""}; }`);
  } else {
    for (let k = 0; k < 4; k++) {
      const pos = s.reverse ? `(p.len - 1u - (j + ${k}u))` : `(j + ${k}u)`;
      const loaded = loadAs(s.inDtype, s.type, `src[ibase + ${pos} * p.in_step]`, false);
      out.push(`  if (j + ${k}u < p.len) { x[${k}] = ${loaded}; }`);
    }
  }
  out.push("  return x;", "}");
  return out.join("\n");
}

/**
 * A tile's total for the multipass scan's first pass, without scanning it: sums and products
 * fold each invocation's chunks, then the subgroup (`subgroup_total`), then the
 * subgroups' partials in shared memory. Reading the tile costs the same as in `tileBlock`, but
 * the scan's ladders and barriers go (on an H200 this pass took 76 us for 64 Mi as a scan).
 * Max and min keep the scan's order, which decides ties between -0 and +0 and between NaNs.
 */
function tileTotalBlock(s: ScanSpec, tile = "tile", alsoTotal: string[] = []): string[] {
  const id = literal(scanIdentity(s.op, s.type), accumulatorDtype(s.type));
  const { gather, fold } = registerTotal(s, "sh", "total");
  return [
    ...tileLoads(s, tile),
    ...gather,
    "if (lid == 0u) {",
    `  var total = ${id};`,
    `  ${fold}`,
    `  dst[row * p.tiles + ${tile}] = total;`,
    ...alsoTotal,
    "}",
  ];
}

/**
 * A sum or product of the invocations' registers `x{c}`: `gather` folds each invocation's chunks,
 * totals each subgroup into `parts` (workgroup memory, a slot per subgroup) and waits on a
 * barrier; `fold` (for invocation 0) then combines the subgroup totals in order into `total`.
 */
function registerTotal(
  s: ScanSpec,
  parts: string,
  total: string,
): { gather: string[]; fold: string } {
  const C = s.elementsPerThread / 4;
  const sign = foldSign(s);
  const folded = Array.from({ length: C }, (_, c) => `x${c}`).join(` ${sign} `);
  return {
    gather: [
      `let ${total}_folded = ${folded};`,
      `let ${total}_part = subgroup_total((${total}_folded.x ${sign} ${total}_folded.y) ${sign} ` +
      `(${total}_folded.z ${sign} ${total}_folded.w), sg_size);`,
      `if (sg_lane == 0u) { ${parts}[lid / sg_size] = ${total}_part; }`,
      "workgroupBarrier();",
    ],
    fold:
      `for (var k = 0u; k < ${s.workgroupSize}u / sg_size; k++) { ${total} = ${total} ${sign} ${parts}[k]; }`,
  };
}

/** The sign of a sum or a product, the only ops with the two-pass multipass scan. */
function foldSign(s: ScanSpec): string {
  if (s.op !== "sum" && s.op !== "prod") throw new Error(`grouped scan of ${s.op}`);
  return s.op === "sum" ? "+" : "*";
}

/**
 * The two-pass scan's first pass: a workgroup reduces the S tiles of its group one after the
 * other (`tileTotalBlock`), writing each tile's total and then the group's.
 */
function groupTotalBlock(s: ScanSpec): string[] {
  const S = s.superTiles;
  const id = literal(scanIdentity(s.op, s.type), accumulatorDtype(s.type));
  const sign = foldSign(s);
  return [
    `var group_total = ${id};`,
    `for (var sub = 0u; sub < ${S}u; sub++) {`,
    `  let tile = group * ${S}u + sub;`,
    "  if (tile >= p.tiles) { break; }",
    // The previous tile's reads of `sh` come before this one's writes.
    "  workgroupBarrier();",
    ...tileTotalBlock(s, "tile", [`  group_total = group_total ${sign} total;`]).map((x) =>
      `  ${x}`
    ),
    "}",
    "if (lid == 0u) { group_dst[row * groups_per_row + group] = group_total; }",
  ];
}

/**
 * The two-pass scan's final pass, before its tile: each invocation folds its share of what
 * precedes the tile (the totals of earlier groups, strided over the workgroup, and of the earlier
 * tiles of its group, one each), issued before the tile's own loads so both are in flight at once.
 */
function groupPrefixLoads(s: ScanSpec): string[] {
  const S = s.superTiles;
  if (S > s.workgroupSize) throw new Error(`grouped scan: ${S} tiles per group > workgroup`);
  const id = literal(scanIdentity(s.op, s.type), accumulatorDtype(s.type));
  const sign = foldSign(s);
  return [
    `let groups_per_row = (p.tiles + ${S - 1}u) / ${S}u;`,
    `let my_group = tile / ${S}u;`,
    `var part = ${id};`,
    `for (var j = lid; j < my_group; j += ${s.workgroupSize}u) {`,
    `  part = part ${sign} group_totals[row * groups_per_row + j];`,
    "}",
    `if (lid < tile % ${S}u) { part = part ${sign} totals[row * p.tiles + my_group * ${S}u + lid]; }`,
  ];
}

/** ... then, after the tile's scan, the workgroup's fold of `part`: `tile_prefix`. */
function groupPrefixSum(s: ScanSpec): string[] {
  const id = literal(scanIdentity(s.op, s.type), accumulatorDtype(s.type));
  const sign = foldSign(s);
  return [
    // The tile scan's reads of `sh` come before these writes.
    "workgroupBarrier();",
    "let part_total = subgroup_total(part, sg_size);",
    "if (sg_lane == 0u) { sh[lid / sg_size] = part_total; }",
    "workgroupBarrier();",
    `var tile_prefix = ${id};`,
    `for (var k = 0u; k < ${s.workgroupSize}u / sg_size; k++) { tile_prefix = tile_prefix ${sign} sh[k]; }`,
  ];
}

/**
 * This invocation's chunks of tile `tile`: positions `j{c}` (lane-striped within the cluster,
 * see the module comment) and their vec4s `x{c}` (the identity past the row's end).
 */
function tileLoads(s: ScanSpec, tile: string): string[] {
  const E = s.elementsPerThread;
  const t = registerType(s.type);
  const id = literal(scanIdentity(s.op, s.type), accumulatorDtype(s.type));
  const out = [`let j_base = ${tile} * ${s.teamSize * E}u + q * width * ${E}u + lic * 4u;`];
  for (let c = 0; c < E / 4; c++) {
    out.push(
      `let j${c} = j_base + ${c * 4}u * width;`,
      `var x${c} = vec4<${t}>(${id});`,
      `if (row_ok) { x${c} = load4(ibase, j${c}); }`,
    );
  }
  return out;
}

/**
 * Loads this invocation's chunks of the tile and scans them: per invocation `x{c}` (each vec4
 * scanned), `pre{c}` (chunk c's exclusive prefix within the cluster), then `cluster_prefix` (the
 * cluster's exclusive prefix within the team) and `team_total`. Where {@link foldPrefix} holds,
 * both prefixes are already added into `x{c}`.
 */
function tileBlock(s: ScanSpec, tile = "tile", afterLoads: string[] = []): string[] {
  const C = s.elementsPerThread / 4;
  const id = literal(scanIdentity(s.op, s.type), accumulatorDtype(s.type));
  const out = [...tileLoads(s, tile), ...afterLoads];
  // Scan inside each vec4, then across the cluster, carrying chunk totals.
  for (let c = 0; c < C; c++) {
    out.push(
      `x${c}.y = c1(x${c}.x, x${c}.y);`,
      `x${c}.z = c1(x${c}.y, x${c}.z);`,
      `x${c}.w = c1(x${c}.z, x${c}.w);`,
    );
  }
  for (let c = 0; c < C; c++) {
    if (s.subgroups) {
      out.push(
        `let inc${c} = cluster_scan(x${c}.w, lane, width, sg_size);`,
        `let exc${c} = select(subgroupShuffleUp(inc${c}, 1u), ${id}, lic == 0u);`,
        `let tot${c} = subgroupShuffle(inc${c}, lane | (width - 1u));`,
      );
    } else {
      out.push(`let exc${c} = ${id};`, `let tot${c} = x${c}.w;`);
    }
    if (c === 0) out.push("let pre0 = exc0;", "var carry = tot0;");
    else out.push(`let pre${c} = c1(carry, exc${c});`, `carry = c1(carry, tot${c});`);
    if (foldPrefix(s)) out.push(`x${c} = c4(vec4(pre${c}), x${c});`);
  }
  out.push("if (lic == width - 1u) { sh[cid] = carry; }", "workgroupBarrier();");
  if (s.subgroups && s.prefix === "lookback") {
    // Look-back tiles: the cluster totals (team / subgroup size: 16 in a tile of 512 on NVIDIA),
    // combined by every invocation in order from shared memory after one barrier, where each
    // round of a parallel scan takes two (H200, 64 Mi cumsum: 167.7 us against 171.6; the row
    // and multipass variants, with fewer elements per invocation to amortize the reads, measured
    // slower so: rows of 4096 in 512 x 8 150.1 against 139.5, cummax in three passes 310 against
    // 293).
    out.push(
      `var cluster_prefix = ${id};`,
      `var team_total = ${id};`,
      "let team_base = cid - q;",
      "for (var k = 0u; k < cpt; k++) {",
      "  let cluster_total = sh[team_base + k];",
      "  if (k < q) { cluster_prefix = c1(cluster_prefix, cluster_total); }",
      "  team_total = c1(team_total, cluster_total);",
      "}",
    );
    if (foldPrefix(s)) {
      for (let c = 0; c < C; c++) {
        out.push(`x${c} = c4(vec4(cluster_prefix), x${c});`);
      }
    }
    return out;
  }
  // Elsewhere the cluster totals are scanned across the team in shared memory (Hillis-Steele).
  out.push(
    "for (var d = 1u; d < cpt; d = d << 1u) {",
    "  let in_team = lid < clusters && (lid % cpt) >= d;",
    `  var value = ${id};`,
    "  if (in_team) { value = c1(sh[lid - d], sh[lid]); }",
    "  workgroupBarrier();",
    "  if (in_team) { sh[lid] = value; }",
    "  workgroupBarrier();",
    "}",
    `let cluster_prefix = select(${id}, sh[max(cid, 1u) - 1u], q > 0u);`,
    "let team_total = sh[(cid / cpt) * cpt + cpt - 1u];",
  );
  return out;
}

/**
 * Whether a look-back tile adds its in-tile prefixes (each chunk's within the cluster, then the
 * cluster's within the tile) into its registers as soon as they are known, leaving only the tile's
 * prefix to add at the store. Fewer values then live across the look-back, where the kernel is
 * at the driver's cap of 64 registers (2 workgroups of 512 per SM on an H200; the rest spills to
 * workgroup memory, see bench/sass.ts): a 64 Mi cumsum went from 167.6 to 161.8-162.7 us.
 * Inclusive scans only: an exclusive one needs each chunk's prefix alone for its first element.
 */
function foldPrefix(s: ScanSpec): boolean {
  return s.prefix === "lookback" && s.subTiles === 1 && s.subgroups && !s.exclusive &&
    s.stage === "scan";
}

/** Whether the look-back publishes its aggregate before scanning the tile (see ScanSpec). */
function earlyAggregate(s: ScanSpec): boolean {
  return s.earlyAggregate && s.prefix === "lookback" && s.subTiles === 1 && s.subgroups &&
    (s.op === "sum" || s.op === "prod");
}

/**
 * The tile's aggregate from its registers, published by invocation 0 (which keeps it in
 * `early_total` for its inclusive prefix) as soon as the loads land: each invocation folds its
 * chunks, each subgroup totals them, invocation 0 combines the subgroup totals in order. Its
 * successors wait on this, not on the scan's rounds and barriers. The sum is in another order
 * than the scan's own total: float sums may differ by rounding.
 */
function earlyAggregateBlock(s: ScanSpec): string[] {
  const id = literal(scanIdentity(s.op, s.type), accumulatorDtype(s.type));
  const { gather, fold } = registerTotal(s, "early_parts", "early_total");
  return [
    ...gather,
    `var early_total = ${id};`,
    "if (lid == 0u) {",
    `  ${fold}`,
    "  publish(v, select(1u, 2u, tile == 0u), early_total);",
    "}",
  ];
}

/** Reads of a silent predecessor's state before the readers reduce that tile themselves. */
const SPIN_LIMIT = 128;

/**
 * The decoupled look-back, run by the readers: the first subgroup (a window of subgroup size x
 * `lookbackStates` predecessors per round trip, lane l reading the states at distances
 * l * W .. l * W + W - 1) or, without subgroups, invocation 0 (one at a time). They combine
 * published states back to the nearest inclusive prefix. A predecessor still silent
 * after {@link SPIN_LIMIT} reads is reduced by the readers from its input (the "decoupled
 * fallback" of Smith, Levien and Owens), so no workgroup waits on one that may not be running:
 * correct without forward progress, and on lavapipe, which silently ends an invocation's loops
 * after 65535 iterations in all (measured), so a long spin would stop with a wrong prefix.
 * The fallback runs without barriers: lane l reduces one contiguous segment of the tile in order.
 */
function lookbackBlock(s: ScanSpec, total = "team_total", publishAggregate = true): string[] {
  const id = literal(scanIdentity(s.op, s.type), accumulatorDtype(s.type));
  const value = (bits: string) => fromBits(s.type, bits);
  const tileSize = s.teamSize * s.elementsPerThread * s.subTiles;
  const out: string[] = [
    // The aggregate (a row's first tile: its inclusive prefix) goes out before looking back.
    ...(publishAggregate
      ? [`if (lid == 0u) { publish(v, select(1u, 2u, tile == 0u), ${total}); }`]
      : []),
    "let first = v - tile;",
  ];
  if (s.subgroups) {
    // Lane l reads the W states at distances l * W + i (i < W) behind the tile: tile
    // `base - 1 - distance`. Distances order the window: a larger one is an earlier tile.
    const W = s.lookbackStates;
    const reads: string[] = [];
    const found: string[] = [];
    for (let i = 0; i < W; i++) {
      reads.push(
        `      if (st${i}.x == 0u) { st${i} = read_state(u32(want${i})); }`,
      );
      found.push(
        `      if (st${i}.x == 2u) { my_prefix = min(my_prefix, lane * ${W}u + ${i}u); }`,
        `      if (st${i}.x == 0u) { my_missing = min(my_missing, lane * ${W}u + ${i}u); }`,
      );
    }
    const combineMine: string[] = [];
    for (let i = W - 1; i >= 0; i--) {
      combineMine.push(
        `    if (i32(lane * ${W}u + ${i}u) <= upto) { mine = c1(mine, ${value(`st${i}.y`)}); }`,
      );
    }
    out.push(
      "if (tile > 0u && lid < sg_size) {",
      `  var acc = ${id};`,
      "  var base = v;",
      "  let none = 0xffffffffu;",
      // Every read covers a whole window. Reading the nearest predecessor alone first cost a
      // second round trip whenever it had no inclusive prefix yet: on an H200, a 64 Mi cumsum
      // in tiles of 512 x 32 took 255 us that way against 185.
      `  let reach = sg_size * ${W}u - 1u;`,
      "  loop {",
      // A state past the row's first tile reads as an inclusive prefix of the identity; the
      // others start missing and are read until published (a read state only advances, and an
      // aggregate stays valid, so only missing ones are read again: waiting lanes load the L2 as
      // little as possible).
      ...Array.from({ length: W }, (_, i) => [
        `    let want${i} = i32(base) - 1 - i32(lane * ${W}u + ${i}u);`,
        `    var st${i} = select(vec2(0u), vec2(2u, ${
          toBits(s.type, id)
        }), want${i} < i32(first));`,
      ]).flat(),
      "    var nearest_prefix = none;",
      "    var nearest_missing = none;",
      `    for (var k = 0u; k < ${SPIN_LIMIT}u; k++) {`,
      ...reads,
      "      var my_prefix = none;",
      "      var my_missing = none;",
      ...found,
      "      nearest_prefix = subgroupMin(my_prefix);",
      "      nearest_missing = subgroupMin(my_missing);",
      "      if (nearest_missing >= nearest_prefix) { break; }",
      "    }",
      // Usable states: through the nearest prefix when no gap precedes it, else up to the gap.
      "    let ready = nearest_missing >= nearest_prefix;",
      "    let whole = select(i32(reach), i32(nearest_prefix), nearest_prefix != none);",
      "    let upto = select(i32(nearest_missing) - 1, whole, ready);",
      `    var mine = ${id};`,
      ...combineMine,
      "    acc = c1(ordered_reduce(mine, lane, sg_size), acc);",
      "    if (ready && nearest_prefix != none) { break; }",
      "    if (ready) { base = base - reach - 1u; continue; }",
      // Reduce the silent tile: lane l takes segment sg_size - 1 - l (a higher lane is earlier).
      "    let silent = base - 1u - nearest_missing;",
      `    let segment = ${tileSize}u / sg_size;`,
      `    let start = (silent - first) * ${tileSize}u + (sg_size - 1u - lane) * segment;`,
      `    var part = ${id};`,
      "    for (var k = 0u; k < segment; k += 4u) {",
      "      let c = load4(ibase, start + k);",
      "      part = c1(c1(c1(c1(part, c.x), c.y), c.z), c.w);",
      "    }",
      "    acc = c1(ordered_reduce(part, lane, sg_size), acc);",
      "    base = silent;",
      "  }",
      "  if (lane == 0u) {",
      ...(s.publishPrefixes ? [`    publish(v, 2u, c1(acc, ${total}));`] : []),
      "    tile_prefix = acc;",
      "  }",
      "}",
    );
  } else {
    out.push(
      "if (tile > 0u && lid == 0u) {",
      `  var acc = ${id};`,
      "  var j = v - 1u;",
      "  loop {",
      "    var state = vec2(0u);",
      `    for (var k = 0u; k < ${SPIN_LIMIT}u && state.x == 0u; k++) { state = read_state(j); }`,
      "    if (state.x == 0u) {",
      `      var part = ${id};`,
      `      for (var k = 0u; k < ${tileSize}u; k += 4u) {`,
      `        let c = load4(ibase, (j - first) * ${tileSize}u + k);`,
      "        part = c1(c1(c1(c1(part, c.x), c.y), c.z), c.w);",
      "      }",
      // The row's first tile reduced is its inclusive prefix: the walk stops there (reading on
      // would wrap below the row, as a lavapipe run did when tile 0 was still silent).
      "      state = vec2(select(1u, 2u, j == first), " + toBits(s.type, "part") + ");",
      "    }",
      `    acc = c1(${value("state.y")}, acc);`,
      "    if (state.x == 2u) { break; }",
      "    j = j - 1u;",
      "  }",
      ...(s.publishPrefixes ? [`  publish(v, 2u, c1(acc, ${total}));`] : []),
      "  tile_prefix = acc;",
      "}",
    );
  }
  out.push(`if (tile == 0u && lid == 0u) { tile_prefix = ${id}; }`);
  return out;
}

/**
 * The look-back over tiles of S sub-tiles: the sub-tiles are scanned once for their totals (their
 * data leaves registers), the look-back runs once for the whole tile, then each sub-tile is read
 * again (from L2, where it just was) and scanned from the running prefix. The look-back's latency
 * is paid once per S sub-tiles without holding S sub-tiles in registers.
 */
function subTiledLookback(s: ScanSpec, firstOut: string | null): string[] {
  const S = s.subTiles;
  const id = literal(scanIdentity(s.op, s.type), accumulatorDtype(s.type));
  const indent = (xs: string[]) => xs.map((x) => `  ${x}`);
  return [
    `var tile_total = ${id};`,
    `for (var sub = 0u; sub < ${S}u; sub++) {`,
    // The previous sub-tile's reads of `sh` come before this one's writes.
    "  workgroupBarrier();",
    ...indent(tileBlock(s, `(tile * ${S}u + sub)`)),
    "  tile_total = c1(tile_total, team_total);",
    "}",
    ...lookbackBlock(s, "tile_total"),
    "var run = workgroupUniformLoad(&tile_prefix);",
    `for (var sub = 0u; sub < ${S}u; sub++) {`,
    "  workgroupBarrier();",
    ...indent(tileBlock(s, `(tile * ${S}u + sub)`)),
    "  let left = c1(run, cluster_prefix);",
    ...indent(outputBlock(s, firstOut)),
    "  run = c1(run, team_total);",
    "}",
  ];
}

/** Combines each chunk with the invocation's prefix and stores it. */
function outputBlock(s: ScanSpec, firstOut: string | null): string[] {
  const C = s.elementsPerThread / 4;
  const id = literal(scanIdentity(s.op, s.type), accumulatorDtype(s.type));
  const out: string[] = [];
  const folded = foldPrefix(s);
  for (let c = 0; c < C; c++) {
    if (!folded) out.push(`let lp${c} = c1(left, pre${c});`);
    let value: string;
    if (folded) {
      value = `c4(vec4(left), x${c})`;
    } else if (s.exclusive) {
      out.push(
        `var y${c} = c4(vec4(lp${c}), vec4(${id}, x${c}.x, x${c}.y, x${c}.z));`,
        `y${c}.x = lp${c};`,
      );
      if (firstOut) out.push(`if (j${c} == 0u) { y${c}.x = ${firstOut}; }`);
      value = `y${c}`;
    } else {
      value = `c4(vec4(lp${c}), x${c})`;
    }
    if (s.outMode === "vec4") {
      const index = s.reverse ? `(obase + p.len - 4u - j${c}) / 4u` : `(obase + j${c}) / 4u`;
      const stored = storeAs(s.outDtype, s.type, `${value}${s.reverse ? ".wzyx" : ""}`, true);
      out.push(`if (row_ok && j${c} < p.len) { dst[${index}] = ${stored}; }`);
    } else {
      out.push(`let z${c} = ${value};`);
      for (let k = 0; k < 4; k++) {
        const pos = s.reverse ? `(p.len - 1u - (j${c} + ${k}u))` : `(j${c} + ${k}u)`;
        const stored = storeAs(s.outDtype, s.type, `z${c}[${k}]`, false);
        out.push(
          `if (row_ok && j${c} + ${k}u < p.len) { dst[obase + ${pos} * p.inner] = ${stored}; }`,
        );
      }
    }
  }
  return out;
}
