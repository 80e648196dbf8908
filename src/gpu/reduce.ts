/**
 * The reduce family on the GPU: host code for the kernels _codegen_reduce.ts generates (a
 * workgroup or a thread per row, rows split into chunks combined by the last workgroup or a
 * second pass), with a fused elementwise prologue and epilogue.
 * @module
 */
import type { DType } from "../core/dtype.ts";
import { isContiguous, sizeOf } from "../core/shape.ts";
import type { View } from "../core/view.ts";
import { observePlan } from "../contract/backend.ts";
import { tunedOverride } from "../heuristics/consensus.ts";
import { rowsTuneKey } from "../heuristics/families.ts";
import type { ReduceJob } from "../contract/reduce.ts";
import { planReduce } from "../plans/mod.ts";
import { constantWords } from "./_codegen_elementwise.ts";
import {
  generateReduce,
  reduceEpilogue,
  reduceKey,
  type ReduceSpec,
  reduceUniforms,
  stateType,
} from "./_codegen_reduce.ts";
import type { GpuHost, GpuStorage } from "./host.ts";

/**
 * Runs a reduction job (see `Backend.reduce`): null where its fused epilogue cannot run in the
 * kernel (see `reduceEpilogue`, and the device's storage bindings).
 */
export function runReduceGpu(gpu: GpuHost, job: ReduceJob): GpuStorage | null {
  const { op, reduction, input: source, axes, outDtype, epilogue: fused, overrides } = job;
  // Constant slots: the prologue's, then the epilogue's; every pass carries them all.
  const prologueConstants = "expr" in source ? constantWords(source.expr) : [];
  const constants = fused
    ? [...prologueConstants, ...constantWords(fused.expr)]
    : prologueConstants;
  const epilogue = fused
    ? reduceEpilogue(fused.expr, fused.inputs, outDtype, prologueConstants.length)
    : undefined;
  if (epilogue === null) return null;
  // The kernel stores the epilogue's dtype (a cast may end it) or the reduction's.
  const storedDtype = epilogue?.dtype ?? outDtype;
  const epilogueBuffers = (fused?.inputs ?? []).map((v) => (v.storage as GpuStorage).buffer);
  // A fused source is an elementwise expression over views of one shape: its first view plays
  // the plain input's part (shape, layout), the others ride along with their own strides.
  const views = "expr" in source ? source.inputs : [source];
  const input = views[0];
  const prologue = "expr" in source
    ? { expr: source.expr, inputs: views.map((v) => v.dtype) }
    : undefined;
  const valueDtype = prologue ? source.dtype : input.dtype;
  gpu.checkLive(op, [
    ...views.map((v) => v.dtype),
    outDtype,
    storedDtype,
    ...(fused?.inputs ?? []).map((v) => v.dtype),
  ]);
  const kept = input.shape.map((_, i) => i).filter((i) => !axes.includes(i));
  const split = (v: View) => ({
    outerStrides: kept.map((i) => v.strides[i]),
    innerStrides: axes.map((i) => v.strides[i]),
  });
  const outer = { shape: kept.map((i) => input.shape[i]), strides: split(input).outerStrides };
  const inner = { shape: axes.map((i) => input.shape[i]), strides: split(input).innerStrides };
  const rows = sizeOf(outer.shape);
  const rowLength = sizeOf(inner.shape);
  const out = gpu.alloc(op, storedDtype, rows);
  if (rows === 0) return out;
  // Rows of contiguous inputs with the reduced axes last are plain ranges.
  const lastAxes = axes.every((a, i) => a === input.shape.length - axes.length + i);
  const contiguous = lastAxes && views.every((v) => isContiguous(v.shape, v.strides));
  const aligned = contiguous && rowLength % 4 === 0 && views.every((v) => v.offset % 4 === 0);
  // Rows adjacent in memory: the innermost kept axis has stride 1 in every input.
  const rowsAdjacent = kept.length > 0 && !lastAxes &&
    views.every((v) => v.strides[kept[kept.length - 1]] === 1);
  const choice = observePlan(
    "gpu",
    "reduce",
    op,
    planReduce(
      gpu.caps,
      { rows, rowLength, aligned, rowsAdjacent },
      // Sums of contiguous rows are the tuned family's (what the tuner measured).
      reduction === "sum" && contiguous
        ? tunedOverride(
          "reduce",
          gpu.caps,
          rowsTuneKey(gpu.caps, rows, rowLength),
          overrides.reduce,
        )
        : overrides.reduce,
    ),
    overrides.reduce,
  );
  // Arg reductions pass (value bits, index) pairs between their two passes, stateful ones their
  // state vectors: `words` 32-bit words per partial.
  const arg = reduction === "argmax" || reduction === "argmin";
  const state = stateType(reduction);
  const carried = arg || state !== undefined;
  const words = state === "vec4<f32>" ? 4 : carried ? 2 : 1;
  const accDtype: DType = arg
    ? "uint32"
    : state
    ? "float32"
    : outDtype === "float16"
    ? "float32"
    : outDtype;
  const run = (
    spec: ReduceSpec,
    buffers: GPUBuffer[],
    chunks: number,
    uniforms: Uint32Array,
  ) => {
    // The last-workgroup variant also writes its scratch states (bound before the output).
    const writable = spec.lastWorkgroup ? 2 : 1;
    const pipeline = gpu.pipeline(
      reduceKey(spec),
      buffers.length,
      () => generateReduce(spec),
      writable,
    );
    const invocations = spec.variant === "thread"
      ? rows * chunks
      : rows * chunks * spec.workgroupSize;
    gpu.dispatch(op, pipeline, buffers, uniforms, gpu.grid(invocations, spec.workgroupSize));
  };
  const first: ReduceSpec = {
    op: reduction,
    inDtype: input.dtype,
    outDtype: choice.chunks > 1 && !carried ? accDtype : outDtype,
    valueDtype: arg ? valueDtype : undefined,
    pairsOut: carried && choice.chunks > 1,
    vec4: choice.vec4 && !(arg && valueDtype === "bool"),
    prologue,
    mode: contiguous ? "contiguous" : "strided",
    outerRank: outer.shape.length,
    innerRank: inner.shape.length,
    variant: choice.variant,
    subgroups: choice.subgroups,
    workgroupSize: choice.workgroupSize,
  };
  // vec4 chunks start on vector boundaries.
  const chunkLength = choice.vec4
    ? Math.ceil(rowLength / choice.chunks / 4) * 4
    : Math.ceil(rowLength / choice.chunks);
  const sources = views.map((v) => (v.storage as GpuStorage).buffer);
  const extra = views.slice(1).map((v) => ({ offset: v.offset, ...split(v) }));
  const firstUniforms = (chunks: number) =>
    reduceUniforms(
      rows,
      rowLength,
      chunks,
      chunkLength,
      input.offset,
      outer,
      inner,
      extra,
      constants,
    );
  const lastWorkgroup = choice.chunks > 1 && choice.combineChunks === "last-workgroup" &&
    choice.variant === "workgroup";
  const bindings = sources.length + epilogueBuffers.length + (lastWorkgroup ? 2 : 1);
  if (epilogue && bindings > gpu.caps.limits.maxStorageBuffersPerShaderStage) {
    gpu.free(out);
    return null;
  }
  if (choice.chunks === 1) {
    run(
      { ...first, epilogue },
      [...sources, ...epilogueBuffers, out.buffer],
      1,
      firstUniforms(1),
    );
    return out;
  }
  if (lastWorkgroup) {
    // One dispatch: the row's last workgroup combines the published partials (a counter per
    // row, then a tagged word per partial word: 64-bit atomics where the choice takes them,
    // else pairs of 32-bit ones; see the reduce generator). Sizes are in 32-bit words.
    const wideStates = choice.wideStates;
    const states = gpu.scratch(
      "reduce partials",
      (wideStates ? 2 : 1) * rows + rows * choice.chunks * words * 2,
    );
    run(
      { ...first, outDtype, pairsOut: false, lastWorkgroup: true, wideStates, epilogue },
      [...sources, ...epilogueBuffers, states, out.buffer],
      choice.chunks,
      firstUniforms(choice.chunks),
    );
    return out;
  }
  const partials = gpu.alloc(op, accDtype, rows * choice.chunks * words);
  run(first, [...sources, partials.buffer], choice.chunks, firstUniforms(choice.chunks));
  const second: ReduceSpec = {
    ...first,
    inDtype: accDtype,
    outDtype,
    valueDtype: arg ? (valueDtype === "float16" ? "float32" : valueDtype) : undefined,
    pairsIn: carried,
    pairsOut: false,
    vec4: false,
    prologue: undefined,
    mode: "contiguous",
    outerRank: 1,
    innerRank: 1,
  };
  const flat = { shape: [rows], strides: [choice.chunks] };
  run(
    { ...second, epilogue },
    [partials.buffer, ...epilogueBuffers, out.buffer],
    1,
    reduceUniforms(
      rows,
      choice.chunks,
      1,
      choice.chunks,
      0,
      flat,
      { shape: [choice.chunks], strides: [1] },
      [],
      constants,
    ),
  );
  gpu.free(partials);
  return out;
}
