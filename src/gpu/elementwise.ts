/**
 * The elementwise family on the GPU: host code for the kernels _codegen_elementwise.ts generates
 * (one fused expression per kernel: vec4, scalar or tiled through workgroup memory, into fresh
 * storage or through a target's strides) and for the transposing copy of _codegen_transpose.ts.
 * @module
 */
import { type DType, storageBytes } from "../core/dtype.ts";
import { batchRun, type Shape, sizeOf } from "../core/shape.ts";
import type { View } from "../core/view.ts";
import { observePlan } from "../contract/backend.ts";
import { tunedOverride } from "../heuristics/consensus.ts";
import { elementwiseTuneKey } from "../heuristics/families.ts";
import type { ElementwiseJob } from "../contract/elementwise.ts";
import {
  generateTranspose,
  TRANSPOSE_THREADS,
  transposeGroups,
  transposeKey,
  transposeUniforms,
} from "./_codegen_transpose.ts";
import {
  planElementwise,
  planTranspose,
  type TransposeSpec,
  type TransposeUniforms,
} from "../plans/elementwise.ts";
import {
  elementwiseKey,
  type ElementwiseSpec,
  elementwiseUniforms,
  generateElementwise,
  type InputMode,
  inputMode,
  TILE_SIDE,
  vec4Layout,
} from "./_codegen_elementwise.ts";
import type { GpuHost, GpuStorage } from "./host.ts";

/** Evaluates an elementwise job (see `Backend.evaluate`). */
export function runElementwiseGpu(gpu: GpuHost, job: ElementwiseJob): GpuStorage {
  const { op, expr, inputs, shape, out: target, overrides } = job;
  gpu.checkLive(op, [expr.dtype, ...inputs.map((v) => v.dtype)]);
  const n = sizeOf(shape);
  const out = (target?.storage as GpuStorage | undefined) ?? gpu.alloc(op, expr.dtype, n);
  if (n === 0) return out;
  // Transposed matrices among the operands: the tiled kernel reads them through workgroup memory
  // where the plan takes it.
  const transposedViews = inputs.map(transposedCopy);
  const transposedOperands = transposedViews.filter((c) => c !== null).length;
  const modes: InputMode[] = inputs.map((v) => inputMode(shape, v.strides));
  // A target made of rows (a concat part: runs of contiguous elements at a fixed distance) is
  // written by rows, or contiguously where it is one block; by vec4 stores where every run
  // starts and ends on a vector. Other targets go through their strides.
  const runs = target ? targetRows(shape, target.strides) : null;
  const blockTarget = runs !== null && runs.length === n;
  const vec4Target = !target ||
    (runs !== null && [target.offset, runs.length, runs.stride].every((x) => x % 4 === 0));
  const vec4Eligible = vec4Target &&
    vec4Layout(shape, inputs.map((v, k) => ({ mode: modes[k], offset: v.offset })));
  // A plain copy of a transposed matrix (a clone of `x.transpose()`).
  const copy = !target && expr.kind === "input" && inputs[0].dtype === expr.dtype
    ? transposedCopy(inputs[0])
    : null;
  const choice = observePlan(
    "gpu",
    "elementwise",
    op,
    planElementwise(
      gpu.caps,
      {
        elements: n,
        vec4Eligible,
        transposedCopy: copy !== null,
        transposedOperands: target ? 0 : transposedOperands,
        elementBytes: storageBytes(expr.dtype),
      },
      // Computations (a plain copy's transposing form is its own): what the tuner measured.
      copy === null
        ? tunedOverride(
          "elementwise",
          gpu.caps,
          elementwiseTuneKey(n, vec4Eligible, !target && transposedOperands > 0),
          overrides.elementwise,
        )
        : overrides.elementwise,
    ),
    overrides.elementwise,
  );
  if (choice.variant === "transpose" && copy) {
    transposeCopy(gpu, op, (inputs[0].storage as GpuStorage).buffer, out.buffer, copy);
    return out;
  }
  const tiled = choice.variant === "tiled";
  const spec: ElementwiseSpec = {
    expr,
    inputs: inputs.map((v, k) => ({
      dtype: v.dtype,
      mode: tiled && transposedViews[k] ? "transposed" : modes[k],
    })),
    outDtype: expr.dtype,
    rank: shape.length,
    output: !target ? "fresh" : runs === null ? "strided" : blockTarget ? "block" : "rows",
    vec4: choice.variant === "vec4",
    tiled,
    workgroupSize: choice.workgroupSize,
  };
  const pipeline = gpu.pipeline(
    elementwiseKey(spec),
    inputs.length + 1,
    () => generateElementwise(spec),
  );
  const operands = target ? [...inputs, target] : inputs;
  const uniforms = elementwiseUniforms(
    spec,
    n,
    operands.map((v) => v.offset),
    shape,
    // A rows target's stride slot holds its run length and distance.
    operands.map((
      v,
    ) => (v === target && runs && spec.output === "rows" ? [runs.length, runs.stride] : v.strides)),
  );
  // A tiled kernel: a workgroup per tile of each matrix.
  const [rows, columns] = [shape[shape.length - 2], shape[shape.length - 1]];
  const invocations = tiled
    ? (n / (rows * columns)) * Math.ceil(rows / TILE_SIDE) * Math.ceil(columns / TILE_SIDE) *
      spec.workgroupSize
    : spec.vec4
    ? Math.ceil(n / 4)
    : n;
  gpu.dispatch(
    op,
    pipeline,
    [...inputs.map((v) => (v.storage as GpuStorage).buffer), out.buffer],
    uniforms,
    gpu.grid(invocations, spec.workgroupSize),
  );
  return out;
}

/**
 * Records the tiled transposing copy (./_codegen_transpose.ts) of `copy`'s matrices of the
 * source's dtype from `source` into `target` (at least `batches * rows * columns` elements) as
 * kernel `label`, in the plan's form and tile unless `spec` says otherwise.
 */
export function transposeCopy(
  gpu: GpuHost,
  label: string,
  source: GPUBuffer,
  target: GPUBuffer,
  copy: TransposeUniforms & { dtype: DType },
  spec: TransposeSpec = planTranspose(copy.dtype, copy),
): void {
  const pipeline = gpu.pipeline(transposeKey(spec), 2, () => generateTranspose(spec));
  gpu.dispatch(
    label,
    pipeline,
    [source, target],
    transposeUniforms(spec, copy),
    gpu.grid(transposeGroups(spec, copy) * TRANSPOSE_THREADS, TRANSPOSE_THREADS),
  );
}

/**
 * A target view of `shape` as rows: runs of `length` contiguous elements (its trailing axes, as
 * far as they are contiguous), `stride` apart (the leading axes, spaced evenly); null when it is
 * not. A whole contiguous block is one run (`length` = its size).
 */
function targetRows(
  shape: Shape,
  strides: readonly number[],
): { length: number; stride: number } | null {
  let d = shape.length - 1;
  let length = 1;
  while (d >= 0 && (shape[d] === 1 || strides[d] === length)) length *= shape[d--];
  if (d < 0) return { length, stride: length };
  const stride = strides[d];
  let span = 1;
  while (d >= 0 && (shape[d] === 1 || strides[d] === stride * span)) span *= shape[d--];
  return d < 0 && stride >= length ? { length, stride } : null;
}

/**
 * The copy of a view whose last two axes read a contiguous matrix transposed (stride 1 down its
 * rows, a stride of 2 or more along them), both at least a tile's side (32), with batch axes that
 * form one run (or are all broadcast), as the tiled transposing copy's parameters: the source's
 * rows are the view's columns. Null for any other view.
 */
function transposedCopy(view: View): (TransposeUniforms & { dtype: DType }) | null {
  const rank = view.shape.length;
  if (rank < 2) return null;
  const [rows, columns] = [view.shape[rank - 2], view.shape[rank - 1]];
  const [rowStride, columnStride] = [view.strides[rank - 2], view.strides[rank - 1]];
  if (rowStride !== 1 || columnStride < 2 || Math.min(rows, columns) < 32) return null;
  // Every output matrix is written: batch axes all broadcast, or none (one run).
  const run = batchRun(view.shape.slice(0, -2), view.strides.slice(0, -2));
  if (!run || (run.count > 1 && run.broadcast > 1)) return null;
  return {
    dtype: view.dtype,
    rows: columns,
    columns: rows,
    batches: run.count * run.broadcast,
    offset: view.offset,
    rowStride: columnStride,
    columnStride: 1,
    batchStride: run.stride,
  };
}
