/**
 * The rows family on the GPU: host code (layout, plan, buffers, passes) for the kernels that
 * _codegen_rows.ts generates. One fused pass per row where a row fits in registers; chunk
 * statistics, a combine pass and a normalising pass where it does not (see `planRows`).
 * @module
 */
import type { View } from "../core/view.ts";
import { contiguousStrides, isContiguous, sizeOf } from "../core/shape.ts";
import type { RowsBackwardJob, RowsJob, RowsResult } from "../contract/rows.ts";
import { observePlan } from "../contract/backend.ts";
import { constantNodes, type Expr, exprKey, readsIndex } from "../ir/expr.ts";
import { planRows, planRowsBackward, ROWS_BACKWARD_WORKGROUP } from "../plans/mod.ts";
import { tunedOverride } from "../heuristics/consensus.ts";
import { rowsKernelTuneKey } from "../heuristics/families.ts";
import type { GpuHost, GpuStorage } from "./host.ts";
import {
  generateRows,
  type RowEpilogue,
  rowKey,
  type RowSpec,
  type RowStage,
  rowUniforms,
  type UnitAxes,
} from "./_codegen_rows.ts";
import { constantWords, emitBody, opaqueF32 } from "./_codegen_elementwise.ts";
import {
  generateRowsBackward,
  rowsBackwardKey,
  type RowsBackwardSpec,
  rowsBackwardUniforms,
} from "./_codegen_rows_backward.ts";
import { computeType, loadAs, storageType } from "./_wgsl_types.ts";

/** Axes of one group (kept or normalised) with unit strides merged and length-1 axes dropped. */
function mergeAxes(
  x: View,
  axes: readonly number[],
  outStrides: readonly number[],
): { shape: number[]; inStrides: number[]; outStrides: number[] } {
  const merged = { shape: [] as number[], inStrides: [] as number[], outStrides: [] as number[] };
  for (const a of axes) {
    const d = x.shape[a];
    if (d === 1) continue;
    const last = merged.shape.length - 1;
    if (
      last >= 0 && merged.inStrides[last] === x.strides[a] * d &&
      merged.outStrides[last] === outStrides[a] * d
    ) {
      merged.shape[last] *= d;
      merged.inStrides[last] = x.strides[a];
      merged.outStrides[last] = outStrides[a];
    } else {
      merged.shape.push(d);
      merged.inStrides.push(x.strides[a]);
      merged.outStrides.push(outStrides[a]);
    }
  }
  return merged;
}

/** How a job's rows lie in memory, as the GPU kernels see them. */
function rowLayout(job: RowsJob) {
  const x = job.x;
  const outStrides = contiguousStrides(x.shape);
  const kept = x.shape.map((_, i) => i).filter((i) => !job.axes.includes(i));
  const outer = mergeAxes(x, kept, outStrides);
  const inner = mergeAxes(x, job.axes, outStrides);
  const rows = sizeOf(kept.map((i) => x.shape[i]));
  const len = sizeOf(job.axes.map((i) => x.shape[i]));
  const last = inner.shape.length - 1;
  const contiguous =
    (last < 0 || (last === 0 && inner.inStrides[0] === 1 && inner.outStrides[0] === 1)) &&
    (outer.shape.length === 0 ||
      (outer.shape.length === 1 && outer.inStrides[0] === len && outer.outStrides[0] === len));
  const by4 = (v: number) => v % 4 === 0;
  let vec4 = x.offset % 4 === 0 &&
    (contiguous ? by4(len) : last >= 0 && inner.inStrides[last] === 1 &&
      inner.outStrides[last] === 1 && by4(inner.shape[last]) &&
      inner.inStrides.slice(0, last).every(by4) && inner.outStrides.slice(0, last).every(by4) &&
      outer.inStrides.every(by4) && outer.outStrides.every(by4));
  // Indexed affine parameters are splat over a vec4, which must not straddle two channels.
  if (job.indexed && (job.weight || job.bias)) vec4 &&= by4(job.indexed.divisor);
  const acrossRows = !contiguous && last >= 0 && Math.abs(inner.inStrides[last]) !== 1 &&
    outer.shape.length > 0 && Math.abs(outer.inStrides[outer.shape.length - 1]) === 1;
  return { rows, len, outer, inner, contiguous, vec4, acrossRows };
}

/** Axes in units of `v` elements (the innermost normalised axis is the vectorised one). */
function toUnits(axes: UnitAxes, v: number, inner: boolean): UnitAxes {
  if (v === 1) return axes;
  const last = axes.shape.length - 1;
  return {
    shape: axes.shape.map((d, i) => (inner && i === last ? d / v : d)),
    inStrides: axes.inStrides.map((s, i) => (inner && i === last ? s : s / v)),
    outStrides: axes.outStrides.map((s, i) => (inner && i === last ? s : s / v)),
  };
}

/**
 * Fused elementwise work of a row kernel from an expression, or undefined where it cannot run
 * there: a strided layout, an extra input not laid out like the (contiguous) rows, offsets off
 * the vector width, or a result of another dtype. As an epilogue, input 0 is the op's value; as
 * a prologue, the value read from x. Its constants take the uniform slots from `constantBase` on.
 */
function rowElementwise(
  role: "epilogue" | "prologue",
  e: { expr: Expr; inputs: View[] },
  x: View,
  contiguous: boolean,
  v: number,
  constantBase: number,
): RowEpilogue | undefined {
  if (!contiguous || e.expr.dtype !== x.dtype || readsIndex(e.expr)) return undefined;
  for (const input of e.inputs) {
    if (!isContiguous(x.shape, input.strides) || input.offset % v !== 0) return undefined;
  }
  const types = e.inputs.map((
    i,
  ) => (v === 4 ? `vec4<${storageType(i.dtype)}>` : storageType(i.dtype)));
  const params = [
    "value: f32",
    ...e.inputs.map((i, k) => `x${k + 1}: ${computeType(i.dtype)}`),
    "idx: u32",
  ];
  // The row kernels' zero uniform word is `pad1`. The op's value, stored and read back when
  // unfused, goes through it too: none of the op's arithmetic may merge with the epilogue's.
  const zero = "p.pad1";
  const x0 = role === "epilogue" ? opaqueF32("value", zero) : "value";
  const body = emitBody(e.expr, { zero, constantBase });
  const scalar = `fn gyre_${role}(${params.join(", ")}) -> f32 {\n  let x0 = ${x0};\n${body}\n}`;
  const lanes = v === 4 ? ["x", "y", "z", "w"] : [""];
  const at = (k: number, lane: string) => {
    const load = `${role}_in${k + 1}[${e.inputs[k].offset / v}u + unit]`;
    return loadAs(e.inputs[k].dtype, lane ? `${load}.${lane}` : load);
  };
  // As an epilogue of float16 rows, the value is rounded as its unfused store would round it.
  const round = (
    y: string,
  ) => (role === "epilogue" && x.dtype === "float16" ? `g_round_f16(${y})` : y);
  const call = (lane: string) =>
    `gyre_${role}(${round(lane ? `y.${lane}` : "y")}${
      e.inputs.map((_, k) => `, ${at(k, lane)}`).join("")
    }, 0u)`;
  const vt = v === 4 ? "vec4<f32>" : "f32";
  const vector = `fn gyre_${role}_unit(y: ${vt}, unit: u32) -> ${vt} {\n  return ${
    v === 4 ? `vec4<f32>(${lanes.map(call).join(", ")})` : call("")
  };\n}`;
  return {
    key: `${exprKey(e.expr)}@k${constantBase}:${
      e.inputs.map((i) => `${i.dtype}@${i.offset / v}`).join(",")
    }`,
    inputs: types,
    declarations: [scalar, vector].join("\n"),
    apply: (y, unit) => `gyre_${role}_unit(${y}, ${unit})`,
    constantSlots: constantBase + constantNodes(e.expr).length,
  };
}

/** The GPU path: one dispatch ("single") or partial, combine and apply ("chunked"). */
export function runRowsGpu(backend: GpuHost, job: RowsJob): RowsResult | null {
  const { op, x } = job;
  backend.checkLive(op, [x.dtype]);
  const layout = rowLayout(job);
  const { rows, len } = layout;
  const n = rows * len;
  const output = backend.alloc(op, x.dtype, n);
  if (n === 0) return { output, stats: job.stats ? backend.alloc(op, "float32", 2 * rows) : null };
  const choice = observePlan(
    "gpu",
    "rows",
    op,
    planRows(
      backend.caps,
      {
        rows,
        rowLength: len,
        vec4: layout.vec4,
        acrossRows: layout.acrossRows,
        stats: job.stats,
        elementBytes: x.dtype === "float16" ? 2 : 4,
      },
      // Float32 rows along the innermost axis without statistics: what the tuner measured.
      x.dtype === "float32" && !layout.acrossRows && !job.stats
        ? tunedOverride(
          "rows",
          backend.caps,
          rowsKernelTuneKey(backend.caps, rows, len, layout.vec4),
          job.overrides.rows,
        )
        : job.overrides.rows,
    ),
    job.overrides.rows,
  );
  const v = choice.vec4 ? 4 : 1;
  // Constant slots: the prologue's, then the epilogue's.
  const prologueConstants = job.prologue ? constantWords(job.prologue.expr) : [];
  const epilogue = job.epilogue
    ? rowElementwise("epilogue", job.epilogue, x, layout.contiguous, v, prologueConstants.length)
    : undefined;
  const prologue = job.prologue
    ? rowElementwise("prologue", job.prologue, x, layout.contiguous, v, 0)
    : undefined;
  if (job.prologue && !prologue) {
    // rowSource only offers a prologue that fits; this would be a bug, not bad input.
    throw new Error(`${op}: internal error: the fused prologue does not fit the row layout`);
  }
  // src, prologue inputs, weight, bias, stats, epilogue inputs, dst.
  const bindings = 3 + (prologue?.inputs.length ?? 0) + (job.weight ? 1 : 0) +
    (job.bias ? 1 : 0) + (epilogue?.inputs.length ?? 0);
  if (
    job.epilogue &&
    (!epilogue || bindings > backend.caps.limits.maxStorageBuffersPerShaderStage)
  ) {
    backend.free(output);
    return null;
  }
  const units = len / v;
  const t = choice.threadsPerRow;
  const chunkUnits = choice.variant === "single" ? units : t * choice.registers;
  const uniforms = rowUniforms({
    rows,
    units,
    chunks: choice.chunks,
    chunkUnits,
    inOffset: x.offset / v,
    eps: job.eps,
    period: job.indexed?.period ?? 1,
    scale: job.indexed?.scale ?? 0,
    divisor: job.indexed?.divisor ?? 1,
    len,
    chunkLen: chunkUnits * v,
    outer: toUnits(layout.outer, v, false),
    inner: toUnits(layout.inner, v, true),
    constants: job.epilogue
      ? [...prologueConstants, ...constantWords(job.epilogue.expr)]
      : prologueConstants,
  });
  const base: Omit<RowSpec, "stage"> = {
    kind: job.kind,
    dtype: x.dtype as "float32" | "float16",
    strided: !layout.contiguous,
    outerRank: layout.contiguous ? 0 : layout.outer.shape.length,
    innerRank: layout.contiguous ? 0 : layout.inner.shape.length,
    vec4: choice.vec4,
    threadsPerRow: t,
    workgroupSize: choice.workgroupSize,
    registers: choice.registers,
    combine: choice.combine,
    weight: job.weight !== null,
    bias: job.bias !== null,
    affineIndexed: job.indexed !== null,
    epilogue,
    prologue,
  };
  const buffer = (view: View) => (view.storage as GpuStorage).buffer;
  const extra = (job.epilogue?.inputs ?? []).map(buffer);
  // x and the prologue's inputs: what every stage that reads x binds first.
  const source = [x, ...(job.prologue?.inputs ?? [])].map(buffer);
  const affine = [job.weight, job.bias].filter((w): w is View => w !== null).map(buffer);
  const run = (spec: RowSpec, buffers: GPUBuffer[], items: number) => {
    const pipeline = backend.pipeline(rowKey(spec), buffers.length, () => generateRows(spec));
    const perGroup = spec.workgroupSize / spec.threadsPerRow;
    const invocations = Math.ceil(items / perGroup) * spec.workgroupSize;
    backend.dispatch(
      op,
      pipeline,
      buffers,
      uniforms,
      backend.grid(invocations, spec.workgroupSize),
    );
  };
  if (choice.variant === "single") {
    run({ ...base, stage: "single" }, [...source, ...affine, ...extra, output.buffer], rows);
    return { output, stats: null };
  }
  const items = rows * choice.chunks;
  const partials = backend.alloc(op, "float32", 2 * items);
  const stats = backend.alloc(op, "float32", 2 * rows);
  // Statistics do not depend on the affine parameters: one partial kernel serves all variants.
  const stage = (s: RowStage): RowSpec => ({
    ...base,
    stage: s,
    weight: s === "apply" && base.weight,
    bias: s === "apply" && base.bias,
    affineIndexed: s === "apply" && base.affineIndexed,
  });
  run(stage("partial"), [...source, partials.buffer], items);
  run(
    {
      kind: job.kind === "logSoftmax" ? "softmax" : job.kind === "rmsNorm" ? "layerNorm" : job.kind,
      stage: "combine",
      dtype: "float32",
      strided: false,
      outerRank: 0,
      innerRank: 0,
      vec4: false,
      threadsPerRow: choice.combineThreads,
      workgroupSize: 256,
      registers: 1,
      combine: choice.combineStage,
      weight: false,
      bias: false,
      affineIndexed: false,
    },
    [partials.buffer, stats.buffer],
    rows,
  );
  run(stage("apply"), [...source, ...affine, stats.buffer, ...extra, output.buffer], items);
  backend.free(partials);
  if (job.stats) return { output, stats };
  backend.free(stats);
  return { output, stats: null };
}

/**
 * A row op's backward in one kernel (one workgroup a row, the row in registers), or null where
 * the rows do not fit it (too long or too short; the caller composes the backward instead).
 */
export function runRowsBackwardGpu(backend: GpuHost, job: RowsBackwardJob): GpuStorage | null {
  const { op, a, g, weight, rows, len } = job;
  const dtype = a.dtype;
  if ((dtype !== "float32" && dtype !== "float16") || g.dtype !== dtype) return null;
  if (weight && weight.dtype !== dtype) return null;
  const views = weight ? [a, g, weight] : [a, g];
  const vec4 = len % 4 === 0 && views.every((v) => v.offset % 4 === 0);
  const v = vec4 ? 4 : 1;
  const units = len / v;
  const registers = planRowsBackward(units);
  if (registers === null || rows === 0) return null;
  backend.checkLive(op, [dtype]);
  const spec: RowsBackwardSpec = {
    kind: job.kind,
    dtype,
    vec4,
    registers,
    weight: weight !== null,
    subgroups: backend.caps.subgroups,
  };
  const output = backend.alloc(op, dtype, rows * len);
  const buffers = [...views.map((view) => (view.storage as GpuStorage).buffer), output.buffer];
  const pipeline = backend.pipeline(
    rowsBackwardKey(spec),
    buffers.length,
    () => generateRowsBackward(spec),
  );
  const uniforms = rowsBackwardUniforms(
    rows,
    units,
    [a.offset / v, g.offset / v, (weight?.offset ?? 0) / v],
    job.eps,
  );
  backend.dispatch(
    op,
    pipeline,
    buffers,
    uniforms,
    backend.grid(rows * ROWS_BACKWARD_WORKGROUP, ROWS_BACKWARD_WORKGROUP),
  );
  return output;
}
