/**
 * WGSL for compiled residuals (src/gpu/residuals.ts): per topology group, straight-line code
 * computing each instance's residual and, in reverse mode, its Jacobian row; and the generic
 * kernels of the Levenberg-Marquardt loop (normal equations by gathers over the Jacobian's
 * columns, Jacobi-preconditioned conjugate gradients, step acceptance), all over one float
 * workspace whose regions the uniform names.
 *
 * Every kernel binds `st` (u32: the group table, parameter indices, the column structure), `cs`
 * (f32: per-instance constants), `ws` (f32, read-write: parameters, residuals, Jacobian, vectors,
 * partial sums, solver state) and the uniform block `u`. Kernels that reduce write one vec4 per
 * workgroup (partials); the kernel after them reduces those redundantly in every workgroup,
 * which saves a dispatch per global sum. Grids are one-dimensional and capped at
 * {@link MAX_GROUPS} workgroups (loops stride over the rest), so a partial region is bounded.
 * @module
 */
import { ATAN2_WGSL, SCALAR_OPS, type ScalarOp } from "../ir/scalar_table.ts";
import type { Instruction, ResidualGroup } from "../contract/residuals.ts";
import { preludeFor } from "./_wgsl_types.ts";

/** Invocations per workgroup of every residual kernel. */
export const WORKGROUP = 256;
/** The most workgroups a residual kernel runs (so at most this many partials per sum). */
export const MAX_GROUPS = 2 * WORKGROUP;
/**
 * Words of the group table per group in `st`: count, first row, entry base, index and constant
 * offsets, parameter slots.
 */
export const GROUP_WORDS = 6;
/** Words of solver state per parity. */
export const STATE_WORDS = 16;

/** Fields of the uniform block, in order (all u32; floats are passed as their bits). */
export const UNIFORM_FIELDS = [
  "n", // parameters
  "m", // residuals
  "x", // ws offsets: parameters,
  "xt", // trial parameters,
  "xe", // the parameters an evaluation reads (x or xt),
  "r", // residuals,
  "j", // Jacobian entries,
  "t", // J p (conjugate gradients),
  "g", // J^T r,
  "d", // diag(J^T J), floored,
  "dx", // the step,
  "cr", // CG residual,
  "z", // preconditioned CG residual,
  "p", // CG direction,
  "q", // A p,
  "pa", // partials: the eval's (cost),
  "pb", // the trial eval's,
  "pc", // the normal equations' / trial step's,
  "prz0", // r.z of even CG iterations,
  "prz1", // r.z of odd CG iterations,
  "ppq", // p.q,
  "pg", // the normal equations' (r.z at the CG start, max |g|),
  "s0", // state read,
  "s1", // state written,
  "cg", // CG iteration (0 first),
  "nrows", // workgroups of residual-parallel kernels (partials they write)
  "ncols", // workgroups of parameter-parallel kernels
  "col", // st offsets: column starts,
  "cole", // column entries,
  "colr", // column rows
  "maxIter", // stop after this many iterations
  "costTol", // f32 bits: stop when an accepted step lowers the cost by less than this fraction
  "gradTol", // f32 bits: stop when max |J^T r| is at most this
  "cgTol", // f32 bits: CG stops (its steps become 0) when r.z falls below cgTol^2 of its start
  "weight", // objective kernels: 0 gradient of sum r^2 (2 r J), 1 of sum r (J)
  "ga", // atomics: offset of the gradient in the accumulation buffer
  "mode", // the residual kernel: 0 residuals and Jacobian (at xe), 1 the trial's cost and reduction
  "groups", // topology groups in the table
  "zero", // always 0: values pass through it so that the compiler cannot fold across ops
] as const;

/** Words of the uniform block (a multiple of 4). */
export const UNIFORM_WORDS = Math.ceil(UNIFORM_FIELDS.length / 4) * 4;

/** State words (per parity, at s0 or s1). */
export const STATE = {
  lambda: 0,
  nu: 1,
  cost: 2,
  stop: 3,
  iterations: 4,
  accepted: 5,
  maxGrad: 6,
  initialCost: 7,
} as const;

/** Why the solver stopped, as the state's `stop` word codes it. */
export const STOP_REASONS = [
  "running",
  "gradientTolerance",
  "costTolerance",
  "maxIterations",
  "damping",
  "nonFinite",
] as const;

function header(atomic: boolean): string {
  const fields = UNIFORM_FIELDS.map((f) => `${f}: u32`);
  for (let i = UNIFORM_FIELDS.length; i < UNIFORM_WORDS; i++) fields.push(`pad${i}: u32`);
  return [
    `struct U { ${fields.join(", ")} }`,
    "@group(0) @binding(0) var<storage, read> st: array<u32>;",
    "@group(0) @binding(1) var<storage, read> cs: array<f32>;",
    "@group(0) @binding(2) var<storage, read_write> ws: array<f32>;",
    ...(atomic
      ? [
        "@group(0) @binding(3) var<storage, read_write> gacc: array<atomic<f32>>;",
        "@group(0) @binding(4) var<uniform> u: U;",
      ]
      : ["@group(0) @binding(3) var<uniform> u: U;"]),
    `var<workgroup> red: array<vec4<f32>, ${WORKGROUP}>;`,
    // x, y, z summed; w a maximum.
    "fn s_merge(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> {",
    "  return vec4<f32>(a.xyz + b.xyz, max(a.w, b.w));",
    "}",
    // Every invocation must call it (barriers): the workgroup's merge of `v`.
    "fn s_workgroup(v: vec4<f32>, lid: u32) -> vec4<f32> {",
    "  red[lid] = v;",
    "  workgroupBarrier();",
    `  for (var s = ${WORKGROUP / 2}u; s > 0u; s = s >> 1u) {`,
    "    if (lid < s) { red[lid] = s_merge(red[lid], red[lid + s]); }",
    "    workgroupBarrier();",
    "  }",
    "  let out = red[0];",
    "  workgroupBarrier();",
    "  return out;",
    "}",
    "fn s_load4(at: u32) -> vec4<f32> {",
    "  return vec4<f32>(ws[at], ws[at + 1u], ws[at + 2u], ws[at + 3u]);",
    "}",
    // Partials (at most MAX_GROUPS = 2 x WORKGROUP) reduced in a fixed order, so every
    // workgroup gets the same bits.
    "fn s_partials(off: u32, count: u32, lid: u32) -> vec4<f32> {",
    "  var acc = vec4<f32>(0.0);",
    "  if (lid < count) { acc = s_load4(off + 4u * lid); }",
    `  if (lid + ${WORKGROUP}u < count) { acc = s_merge(acc, s_load4(off + 4u * (lid + ${WORKGROUP}u))); }`,
    "  return s_workgroup(acc, lid);",
    "}",
    "fn s_publish(off: u32, wid: u32, lid: u32, v: vec4<f32>) {",
    "  if (lid == 0u) {",
    "    ws[off + 4u * wid] = v.x; ws[off + 4u * wid + 1u] = v.y;",
    "    ws[off + 4u * wid + 2u] = v.z; ws[off + 4u * wid + 3u] = v.w;",
    "  }",
    "}",
    // A chain-rule term; zero when either factor is (an infinite adjoint times 0 passes nothing).
    "fn s_chain(d: f32, l: f32) -> f32 {",
    "  return select(d * l, 0.0, d == 0.0 || l == 0.0);",
    "}",
    "fn s_stopped() -> bool { return ws[u.s0 + 3u] != 0.0; }",
    ATAN2_WGSL,
  ].join("\n");
}

/** The float32 bits of `v`, in hex. */
const bitsOf = (v: number): string =>
  `0x${new Uint32Array(new Float32Array([v]).buffer)[0].toString(16)}`;

/**
 * One group's instance function. Mode 0 (`u.mode`): writes the residual and its Jacobian row
 * (`atomic`: also adds weight * J into `gacc`) and returns (r^2, 0, r, 0); mode 1: reads the
 * stored residual and returns (rt^2, (r - rt)(r + rt), 0, 0), the trial's cost and the exact
 * reduction. One function for both modes: the driver compiles one kernel, not two.
 */
function groupFunction(g: number, group: ResidualGroup, atomic: boolean): string {
  const tape: Instruction[] = group.tape;
  const lines = [
    `fn grp${g}(i: u32, row: u32) -> vec4<f32> {`,
    `  let count = st[${g * GROUP_WORDS}u];`,
    `  let ent = st[${g * GROUP_WORDS + 2}u];`,
    `  let so = st[${g * GROUP_WORDS + 3}u];`,
    `  let co = st[${g * GROUP_WORDS + 4}u];`,
  ];
  const v = (k: number) => `v${k}`;
  tape.forEach((ins, k) => {
    if (ins.op === "param") {
      lines.push(`  let i${k} = st[so + ${ins.slot}u * count + i];`);
      lines.push(`  let v${k} = ws[u.xe + i${k}];`);
    } else if (ins.op === "const") {
      lines.push(`  let v${k} = cs[co + ${ins.slot}u * count + i];`);
    } else if (ins.op === "literal") {
      lines.push(`  let v${k} = bitcast<f32>(${bitsOf(ins.value)}u ^ u.zero);`);
    } else {
      // An operand used twice (x - x): the second use through another zero, or the compiler
      // folds the op (Inf - Inf is NaN, not 0).
      const [a, b, c] = ins.args.map((arg, s) =>
        ins.args.indexOf(arg) < s
          ? `bitcast<f32>(bitcast<u32>(v${arg}) ^ (u.zero >> ${s}u))`
          : v(arg)
      );
      // Each value through its own zero (u.zero times an odd number), as the tensor kernels do
      // (src/gpu/_codegen_elementwise.ts): WGSL lets a driver assume no infinity or NaN occurs,
      // and folding on that (-inf * 0 to 0 on lavapipe) or rewriting x - x to 0 would differ
      // from the op-by-op result.
      const code = SCALAR_OPS[ins.op as ScalarOp].wgsl(a, b ?? "", c ?? "", v(k));
      lines.push(`  let v${k} = bitcast<f32>(bitcast<u32>(${code}) ^ (u.zero * ${2 * k + 1}u));`);
    }
  });
  const root = tape.length - 1;
  lines.push(
    "  if (u.mode == 1u) {",
    "    let r = ws[u.r + row];",
    `    return vec4<f32>(v${root} * v${root}, (r - v${root}) * (r + v${root}), 0.0, 0.0);`,
    "  }",
  );
  // Reverse sweep: adjoints of op nodes and parameters (leaves of data need none).
  let terms = 0;
  const needs = (k: number) => tape[k].op !== "const" && tape[k].op !== "literal";
  tape.forEach((_ins, k) => {
    if (needs(k)) lines.push(`  var d${k}: f32 = ${k === root ? "1.0" : "0.0"};`);
  });
  for (let k = root; k >= 0; k--) {
    const ins = tape[k];
    if (ins.args.length === 0) continue;
    const def = SCALAR_OPS[ins.op as ScalarOp];
    const [a, b, c] = ins.args.map(v);
    ins.args.forEach((arg, s) => {
      if (!needs(arg)) return;
      const local = def.wgslD[s](a, b ?? "", c ?? "", v(k));
      if (local === "0.0") return;
      // Opaque as the forward values are: d + t - t must not fold to d where t is NaN.
      const zero = `(u.zero * ${2 * (tape.length + terms++) + 1}u)`;
      lines.push(
        `  d${arg} = bitcast<f32>(bitcast<u32>(d${arg} + s_chain(d${k}, ${local})) ^ ${zero});`,
      );
    });
  }
  lines.push(`  ws[u.r + row] = v${root};`);
  const params = tape.map((ins, k) => ({ ins, k })).filter((x) => x.ins.op === "param");
  for (const { ins, k } of params) {
    lines.push(`  ws[u.j + ent + ${ins.slot}u * count + i] = d${k};`);
  }
  if (atomic) {
    lines.push(`  let w = select(2.0 * v${root}, 1.0, u.weight == 1u);`);
    for (const { k } of params) {
      lines.push(`  if (s_chain(w, d${k}) != 0.0) { atomicAdd(&gacc[u.ga + i${k}], w * d${k}); }`);
    }
  }
  lines.push(`  return vec4<f32>(v${root} * v${root}, 0.0, v${root}, 0.0);`);
  lines.push("}");
  return lines.join("\n");
}

/**
 * The residual kernel of a group set (see `groupFunction` for its two modes): one partial per
 * workgroup, at `pa` (mode 0) or `pb` (mode 1). `atomic`: the variant that also adds the
 * gradient into `gacc` (another binding layout, so another pipeline).
 */
export function generateResidualKernel(groups: readonly ResidualGroup[], atomic: boolean): string {
  const main = [
    header(atomic),
    ...groups.map((g, k) => groupFunction(k, g, atomic)),
    `@compute @workgroup_size(${WORKGROUP})`,
    "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,",
    "        @builtin(local_invocation_index) lid: u32) {",
    "  var acc = vec4<f32>(0.0);",
    "  let lim = select(u.m, 0u, s_stopped());",
    `  for (var row = wid.x * ${WORKGROUP}u + lid; row < lim; row += nwg.x * ${WORKGROUP}u) {`,
    ...groups.map((_, g) => {
      const first = `st[${g * GROUP_WORDS + 1}u]`;
      const end = `(${first} + st[${g * GROUP_WORDS}u])`;
      return `    ${
        g ? "else " : ""
      }if (row < ${end}) { acc = acc + grp${g}(row - ${first}, row); }`;
    }),
    "  }",
    "  let total = s_workgroup(acc, lid);",
    "  s_publish(select(u.pa, u.pb, u.mode == 1u), wid.x, lid, total);",
    "}",
  ].join("\n");
  return `${main}\n${preludeFor(main)}\n`;
}

/**
 * t = J p^ (CG's matrix-vector product, first half), with p^ = z + beta p the direction this
 * iteration will use (beta from the r.z partials; the parameter kernel stores p^ afterwards).
 * Generic (the group table gives each row's group and slots): compiled once for every problem.
 */
export function generateJacobianProduct(): string {
  const main = [
    header(false),
    BETA,
    `@compute @workgroup_size(${WORKGROUP})`,
    "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,",
    "        @builtin(local_invocation_index) lid: u32) {",
    "  let beta = s_beta(lid);",
    "  let lim = select(u.m, 0u, s_stopped());",
    "  var g = 0u;",
    `  for (var row = wid.x * ${WORKGROUP}u + lid; row < lim; row += nwg.x * ${WORKGROUP}u) {`,
    // Rows only grow along the loop: the group index only moves forward.
    `    while (g + 1u < u.groups && row >= st[g * ${GROUP_WORDS}u + 1u] + st[g * ${GROUP_WORDS}u]) { g++; }`,
    `    let base = g * ${GROUP_WORDS}u;`,
    "    let count = st[base];",
    "    let i = row - st[base + 1u];",
    "    let ent = u.j + st[base + 2u] + i;",
    "    let so = st[base + 3u] + i;",
    "    var t = 0.0;",
    `    for (var s = 0u; s < st[base + 5u]; s++) {`,
    "      let k = st[so + s * count];",
    "      t = t + ws[ent + s * count] * (ws[u.z + k] + beta * ws[u.p + k]);",
    "    }",
    "    ws[u.t + row] = t;",
    "  }",
    "}",
  ].join("\n");
  return `${main}\n${preludeFor(main)}\n`;
}

/** beta of CG iteration `cg` (0 on the first: p = z), from the r.z partials of the last two. */
const BETA = [
  "fn s_rz(cg: u32, lid: u32) -> f32 {",
  "  return s_partials(select(u.prz0, u.prz1, (cg & 1u) == 1u), u.ncols, lid).x;",
  "}",
  "fn s_beta(lid: u32) -> f32 {",
  "  if (u.cg == 0u) { return 0.0; }",
  "  let now = s_rz(u.cg, lid);",
  "  let before = s_rz(u.cg - 1u, lid);",
  "  return select(0.0, now / before, before > 0.0 && now > 0.0);",
  "}",
].join("\n");

const PARAM_MAIN = [
  `@compute @workgroup_size(${WORKGROUP})`,
  "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,",
  "        @builtin(local_invocation_index) lid: u32) {",
];

/** Sum over parameter j's column of J[e] * ws[base + row(e)]. */
const COLUMN_DOT = [
  "fn s_column(j: u32, base: u32) -> vec2<f32> {",
  "  var dot = 0.0;",
  "  var sq = 0.0;",
  "  for (var k = st[u.col + j]; k < st[u.col + j + 1u]; k++) {",
  "    let e = ws[u.j + st[u.cole + k]];",
  "    dot = dot + e * ws[base + st[u.colr + k]];",
  "    sq = sq + e * e;",
  "  }",
  "  return vec2<f32>(dot, sq);",
  "}",
].join("\n");

/**
 * The parameter-parallel kernels of the solver, by name:
 * - "normal": g = J^T r, d = max(diag(J^T J), 1e-6); CG start (dx = 0, cr = -g, z = cr / M,
 *   p = z); partials (r.z, max |g|) at prz0.w... see the code;
 * - "cg": p = z + beta p; q = J^T t + lambda d p; partial p.q;
 * - "cgUpdate": alpha = r.z / p.q; dx += alpha p; cr -= alpha q; z = cr / M; partial r.z;
 * - "trial": xt = x + dx; partial of the predicted reduction 1/2 dx.(lambda d dx - g);
 * - "accept": from the eval, trial and prediction partials, accept or reject, update the state;
 * - "gradient": the objective's gradient by gathers (weight * J^T r or J^T 1) into `g`.
 */
export function generateParameterKernel(
  name: "normal" | "cg" | "cgUpdate" | "trial" | "accept" | "gradient",
): string {
  const lambda = "ws[u.s0]";
  const M = `(ws[u.d + j] * (1.0 + ${lambda}))`;
  // A stopped solver's kernels do nothing: their loops run to 0 (an early return would put the
  // barriers of the reductions after them in non-uniform control flow).
  const loop = `  for (var j = wid.x * ${WORKGROUP}u + lid; j < lim; j += nwg.x * ${WORKGROUP}u) {`;
  const bodies: Record<typeof name, string[]> = {
    normal: [
      "  let lim = select(u.n, 0u, s_stopped());",
      "  var acc = vec4<f32>(0.0);",
      loop,
      "    let c = s_column(j, u.r);",
      "    let d = clamp(c.y, 1e-6, 1e30);",
      "    ws[u.g + j] = c.x;",
      "    ws[u.d + j] = d;",
      "    ws[u.dx + j] = 0.0;",
      "    ws[u.cr + j] = -c.x;",
      `    let z = -c.x / (d * (1.0 + ${lambda}));`,
      "    ws[u.z + j] = z;",
      "    ws[u.p + j] = z;",
      "    acc = s_merge(acc, vec4<f32>(-c.x * z, 0.0, 0.0, abs(c.x)));",
      "  }",
      "  let total = s_workgroup(acc, lid);",
      "  s_publish(u.prz0, wid.x, lid, total);",
      "  s_publish(u.pg, wid.x, lid, total);",
    ],
    cg: [
      "  let beta = s_beta(lid);",
      "  let lim = select(u.n, 0u, s_stopped());",
      "  var acc = vec4<f32>(0.0);",
      loop,
      "    let p = ws[u.z + j] + beta * ws[u.p + j];",
      "    ws[u.p + j] = p;",
      `    let q = s_column(j, u.t).x + ${lambda} * ws[u.d + j] * p;`,
      "    ws[u.q + j] = q;",
      "    acc = s_merge(acc, vec4<f32>(p * q, 0.0, 0.0, 0.0));",
      "  }",
      "  s_publish(u.ppq, wid.x, lid, s_workgroup(acc, lid));",
    ],
    cgUpdate: [
      "  let pq = s_partials(u.ppq, u.ncols, lid).x;",
      "  let rz = s_rz(u.cg, lid);",
      "  let rz0 = s_partials(u.pg, u.ncols, lid).x;",
      "  let lim = select(u.n, 0u, s_stopped());",
      // Converged (or broken down): steps of 0 from here on.
      "  let go = pq > 0.0 && rz > bitcast<f32>(u.cgTol) * bitcast<f32>(u.cgTol) * rz0;",
      "  let alpha = select(0.0, rz / pq, go);",
      "  var acc = vec4<f32>(0.0);",
      loop,
      "    ws[u.dx + j] = ws[u.dx + j] + alpha * ws[u.p + j];",
      "    let cr = ws[u.cr + j] - alpha * ws[u.q + j];",
      "    ws[u.cr + j] = cr;",
      `    let z = select(0.0, cr / ${M}, go);`,
      "    ws[u.z + j] = z;",
      "    acc = s_merge(acc, vec4<f32>(cr * z, 0.0, 0.0, 0.0));",
      "  }",
      "  s_publish(select(u.prz0, u.prz1, ((u.cg + 1u) & 1u) == 1u), wid.x, lid, s_workgroup(acc, lid));",
    ],
    trial: [
      "  let lim = select(u.n, 0u, s_stopped());",
      "  var acc = vec4<f32>(0.0);",
      loop,
      "    let dx = ws[u.dx + j];",
      "    ws[u.xt + j] = ws[u.x + j] + dx;",
      `    acc = s_merge(acc, vec4<f32>(0.5 * dx * (${lambda} * ws[u.d + j] * dx - ws[u.g + j]), 0.0, 0.0, 0.0));`,
      "  }",
      "  s_publish(u.pc, wid.x, lid, s_workgroup(acc, lid));",
    ],
    accept: [
      "  let cost = 0.5 * s_partials(u.pa, u.nrows, lid).x;",
      "  let tr = s_partials(u.pb, u.nrows, lid);",
      "  let predicted = s_partials(u.pc, u.ncols, lid).x;",
      "  let maxGrad = s_partials(u.pg, u.ncols, lid).w;",
      "  let stopped = s_stopped();",
      "  let lim = u.n;",
      "  let trialCost = 0.5 * tr.x;",
      "  let reduction = 0.5 * tr.y;",
      `  let lambda = ${lambda};`,
      "  let nu = ws[u.s0 + 1u];",
      "  let iterations = ws[u.s0 + 4u];",
      "  let accepted = ws[u.s0 + 5u];",
      "  let rho = reduction / predicted;",
      "  let ok = !stopped && predicted > 0.0 && reduction > 0.0 && abs(trialCost) < 3.4e38;",
      "  var stop = ws[u.s0 + 3u];",
      "  var lambdaNext = lambda;",
      "  var nuNext = nu;",
      "  var costNext = cost;",
      "  if (!stopped) {",
      "    if (!(abs(cost) < 3.4e38)) { stop = 5.0; }",
      "    else if (maxGrad <= bitcast<f32>(u.gradTol)) { stop = 1.0; }",
      "    else if (ok) {",
      "      let f = 2.0 * rho - 1.0;",
      "      lambdaNext = lambda * max(1.0 / 3.0, 1.0 - f * f * f);",
      "      nuNext = 2.0;",
      "      costNext = trialCost;",
      "      if (reduction <= bitcast<f32>(u.costTol) * cost) { stop = 2.0; }",
      "    } else {",
      "      lambdaNext = lambda * nu;",
      "      nuNext = nu * 2.0;",
      // Rejected, and the model itself promises less than the tolerance: converged (in float32
      // the last steps' reductions are lost in rounding, and the damping would only grow).
      "      if (predicted <= bitcast<f32>(u.costTol) * cost) { stop = 2.0; }",
      "      else if (lambdaNext > 1e30) { stop = 4.0; }",
      "    }",
      "    if (stop == 0.0 && iterations + 1.0 >= f32(u.maxIter)) { stop = 3.0; }",
      "  }",
      "  let take = ok && stop != 1.0 && stop != 5.0;",
      loop,
      "    if (take) { ws[u.x + j] = ws[u.xt + j]; }",
      "  }",
      "  if (wid.x == 0u && lid == 0u) {",
      "    ws[u.s1] = lambdaNext;",
      "    ws[u.s1 + 1u] = nuNext;",
      "    ws[u.s1 + 2u] = select(costNext, ws[u.s0 + 2u], stopped);",
      "    ws[u.s1 + 3u] = stop;",
      "    ws[u.s1 + 4u] = select(iterations + 1.0, iterations, stopped || stop == 1.0 || stop == 5.0);",
      "    ws[u.s1 + 5u] = select(accepted, accepted + 1.0, take);",
      "    ws[u.s1 + 6u] = select(maxGrad, ws[u.s0 + 6u], stopped);",
      "    ws[u.s1 + 7u] = select(ws[u.s0 + 7u], cost, iterations == 0.0 && !stopped);",
      "  }",
    ],
    gradient: [
      "  let lim = u.n;",
      loop,
      // weight 0: the gradient of sum r^2 (2 J^T r); 1: of sum r (J^T 1, from the column's J).
      "    var s = 0.0;",
      "    for (var k = st[u.col + j]; k < st[u.col + j + 1u]; k++) {",
      "      let e = ws[u.j + st[u.cole + k]];",
      "      s = s + select(2.0 * e * ws[u.r + st[u.colr + k]], e, u.weight == 1u);",
      "    }",
      "    ws[u.g + j] = s;",
      "  }",
    ],
  };
  const main = [header(false), BETA, COLUMN_DOT, ...PARAM_MAIN, ...bodies[name], "}"].join("\n");
  return `${main}\n${preludeFor(main)}\n`;
}
