/**
 * The indexing family on the GPU: host code for the kernels _codegen_indexing.ts generates. A
 * gather is one dispatch; a scatter starts its output from a copy of the base (or the
 * reduction's identity), combines the updates in one dispatch of the plan's form, and finishes
 * float max and min (keys back to floats) and means (sums divided by counts). Indices out of range
 * are reported through `GpuHost.indexCheck` and thrown by the next read-back.
 * @module
 */
import { contiguousStrides, sizeOf } from "../core/shape.ts";
import { f32ToF16Bits } from "../core/dtype.ts";
import type { View } from "../core/view.ts";
import { E } from "../ir/expr.ts";
import { observePlan } from "../contract/backend.ts";
import {
  type GatherJob,
  type GatherResult,
  indexRange,
  NEGATIVE_INDEX_CODE,
  scatterIdentity,
  type ScatterJob,
  type ScatterResult,
  SORTED_IDS,
} from "../contract/indexing.ts";
import {
  COMPACT_ROWS,
  type IndexingChoice,
  planGather,
  planScatter,
  RUN_LENGTH,
  SEGMENT_ROWS,
  segmentColumns,
  SHARED_CHUNK,
} from "../plans/indexing.ts";
import type { GpuHost, GpuStorage } from "./host.ts";
import { runSortGpu } from "./sort.ts";
import { constantWords, withConstants } from "./_codegen_elementwise.ts";
import { readsIndex } from "../ir/expr.ts";
import {
  type GatherEpilogueSpec,
  generateIndexing,
  indexingKey,
  type IndexingSpec,
  indexingUniforms,
} from "./_codegen_indexing.ts";

function run(
  gpu: GpuHost,
  op: string,
  spec: IndexingSpec,
  buffers: GPUBuffer[],
  writable: number,
  uniforms: Uint32Array,
  invocations: number,
): void {
  const pipeline = gpu.pipeline(
    indexingKey(spec),
    buffers.length,
    () => generateIndexing(spec),
    writable,
  );
  gpu.dispatch(op, pipeline, buffers, uniforms, gpu.grid(invocations, spec.workgroupSize));
}

/** The buffer under a view (offsets go in the uniforms, in elements). */
function buffer(view: View): GPUBuffer {
  return (view.storage as GpuStorage).buffer;
}

/**
 * A fused epilogue the gather's kernel can take (null: it cannot: an expression reading the
 * element index, more bindings than the device has).
 */
function gatherEpilogue(gpu: GpuHost, job: GatherJob): GatherEpilogueSpec | null {
  const e = job.epilogue!;
  const bindings = 4 + e.inputs.length;
  if (readsIndex(e.expr) || bindings > gpu.caps.limits.maxStorageBuffersPerShaderStage) return null;
  return {
    expr: e.expr,
    shape: e.shape,
    inputs: e.inputs.map((v) => ({ dtype: v.dtype, offset: v.offset, strides: v.strides })),
  };
}

/** Runs a gather job (see `Backend.gather`). */
export function runGatherGpu(gpu: GpuHost, job: GatherJob): GatherResult | null {
  const { op, x, indices, shape, axis } = job;
  const epilogue = job.epilogue ? gatherEpilogue(gpu, job) : null;
  if (job.epilogue && !epilogue) return null;
  const outDtype = epilogue ? epilogue.expr.dtype : x.dtype;
  gpu.checkLive(op, [x.dtype, outDtype]);
  const n = sizeOf(shape);
  const out = gpu.alloc(op, outDtype, n);
  if (n === 0) return { output: out };
  const choice = observePlan(
    "gpu",
    "indexing",
    op,
    planGather({
      dtype: x.dtype,
      shape,
      xStrides: job.xStrides,
      indexStrides: job.indexStrides,
      xOffset: x.offset,
      indexOffset: indices.offset,
      axisStride: axis.stride,
      axisLength: axis.length,
      fused: epilogue !== null,
    }, job.overrides.indexing),
    job.overrides.indexing,
  );
  const check = gpu.indexCheck(op, "indices", indexRange(axis));
  const variant = choice.variant;
  const spec: IndexingSpec = {
    stage: "gather",
    rank: shape.length,
    dtype: x.dtype,
    variant,
    perInvocation: choice.perInvocation,
    workgroupSize: choice.workgroupSize,
    ...(epilogue ? { epilogue } : {}),
  };
  // A float16 pair or a vec4 an invocation, else perInvocation outputs (gather-quad: in quads).
  const invocations = !epilogue && x.dtype === "float16"
    ? Math.ceil(n / 2)
    : variant === "gather-vec4"
    ? n / 4
    : Math.ceil(n / choice.perInvocation);
  const uniforms = indexingUniforms(
    [
      n,
      shape.length,
      axis.stride,
      axis.length,
      x.offset,
      indices.offset,
      NEGATIVE_INDEX_CODE[axis.negative],
      check.slot,
    ],
    shape,
    [job.xStrides, job.indexStrides],
  );
  run(
    gpu,
    op,
    spec,
    [
      buffer(x),
      buffer(indices),
      ...(job.epilogue?.inputs ?? []).map(buffer),
      check.buffer,
      out.buffer,
    ],
    2,
    epilogue ? withConstants(uniforms, constantWords(epilogue.expr)) : uniforms,
    invocations,
  );
  return { output: out };
}

/** The scatter plan's choice for a job, as observed. */
function scatterChoice(gpu: GpuHost, job: ScatterJob): IndexingChoice {
  return observePlan(
    "gpu",
    "indexing",
    job.op,
    planScatter(gpu.caps, {
      dtype: job.dtype,
      reduce: job.reduce,
      shape: job.shape,
      indexStrides: job.indexStrides,
      outStrides: job.outStrides,
      outLength: sizeOf(job.outShape),
      sorted: job.sorted ?? false,
      ...(job.compact ? { compact: true } : {}),
    }, job.overrides.indexing),
    job.overrides.indexing,
  );
}

/**
 * A float16 sum, mean or product scattered in float32 and rounded to float16 once at the end, as
 * the WASM reference's wider accumulators do: float16 partials rounded every step overflowed
 * (a segment sum of [-60000, -60000, 60000] gave -Infinity, a mean of three terms near 30736
 * Infinity, partials of opposite infinities NaN). The updates are widened into a contiguous
 * copy first (2 more bytes read and 4 written an update), the output narrowed after.
 */
function widenedHalfScatter(gpu: GpuHost, job: ScatterJob, updates: View): GpuStorage {
  const { op, overrides, shape, outShape } = job;
  const cast = (view: View, to: "float32" | "float16") =>
    gpu.evaluate({
      op,
      expr: E.cast(E.input(0, view.dtype), to),
      inputs: [view],
      shape: view.shape,
      overrides,
    }) as GpuStorage;
  const wide = cast({ ...updates, shape, strides: job.updateStrides }, "float32");
  try {
    const { output } = runScatterGpu(gpu, {
      ...job,
      dtype: "float32",
      updates: {
        storage: wide,
        dtype: "float32",
        shape,
        strides: contiguousStrides(shape),
        offset: 0,
      },
      updateStrides: contiguousStrides(shape),
    });
    try {
      const sums: View = {
        storage: output,
        dtype: "float32",
        shape: outShape,
        strides: contiguousStrides(outShape),
        offset: 0,
      };
      return cast(sums, "float16");
    } finally {
      gpu.free(output as GpuStorage);
    }
  } finally {
    gpu.free(wide);
  }
}

/** Runs a scatter job (see `Backend.scatter`). */
export function runScatterGpu(gpu: GpuHost, job: ScatterJob): ScatterResult {
  const { op, dtype, reduce, axis } = job;
  gpu.checkLive(op, [dtype]);
  if (job.compact) return { output: runCompact(gpu, job) };
  if (
    dtype === "float16" && job.updates &&
    (reduce === "sum" || reduce === "mean" || reduce === "prod")
  ) {
    return { output: widenedHalfScatter(gpu, job, job.updates) };
  }
  const length = sizeOf(job.outShape);
  const out = (job.base
    ? gpu.evaluate({
      op,
      expr: E.cast(E.input(0, job.base.dtype), dtype),
      inputs: [job.base],
      shape: job.outShape,
      overrides: job.overrides,
    })
    : gpu.evaluate({
      op,
      expr: E.constant(job.fill ?? scatterIdentity(reduce, dtype), dtype),
      inputs: [],
      shape: job.outShape,
      overrides: job.overrides,
    })) as GpuStorage;
  const n = sizeOf(job.shape);
  if (n === 0 && reduce !== "mean") return { output: out };
  const choice = scatterChoice(gpu, job);
  const counts = reduce === "mean" ? gpu.alloc(op, "uint32", Math.max(length, 1)) : null;
  const half = dtype === "float16";
  const finishWords = half ? Math.ceil(length / 2) : length;
  const finish = (stage: "keys" | "unkeys" | "mean") =>
    run(
      gpu,
      op,
      { stage, rank: 0, dtype, reduce, workgroupSize: choice.workgroupSize },
      [counts?.buffer ?? gpu.scratch("indexing-none", 4), out.buffer],
      1,
      indexingUniforms([length, 0, 0, 0, 0, 0, job.base ? 1 : 0, 0], [], []),
      finishWords,
    );
  const keyed = choice.combine === "atomic" && dtype === "float32" &&
    (reduce === "max" || reduce === "min");
  try {
    if (counts) gpu.zero(op, counts.buffer, length);
    if (keyed) finish("keys");
    if (n > 0 && choice.variant === "scatter-segments" && job.updates) {
      runSegments(gpu, job, out, counts, choice.workgroupSize);
    } else if (n > 0 && choice.variant === "scatter-sorted" && job.updates) {
      runSortedSegments(gpu, job, out, counts, choice.workgroupSize);
    } else if (n > 0) {
      const check = gpu.indexCheck(op, job.indexName ?? "indices", indexRange(axis));
      run(
        gpu,
        op,
        {
          stage: "scatter",
          rank: job.shape.length,
          dtype,
          variant: choice.variant,
          combine: choice.combine,
          positions: job.updates === null,
          reduce,
          workgroupSize: choice.workgroupSize,
        },
        [
          job.updates ? buffer(job.updates) : gpu.scratch("indexing-no-updates", 4),
          buffer(job.indices),
          check.buffer,
          counts?.buffer ?? gpu.scratch("indexing-none", 4),
          out.buffer,
        ],
        3,
        indexingUniforms(
          [
            n,
            job.shape.length,
            axis.stride,
            axis.length,
            job.updates?.offset ?? 0,
            job.indices.offset,
            NEGATIVE_INDEX_CODE[axis.negative],
            check.slot,
          ],
          job.shape,
          [job.updateStrides, job.indexStrides, job.outStrides],
        ),
        scatterInvocations(choice.variant, job.shape, choice.workgroupSize),
      );
    }
    if (keyed) finish("unkeys");
    if (counts) finish("mean");
  } catch (e) {
    gpu.free(out);
    throw e;
  } finally {
    if (counts) gpu.free(counts);
  }
  return { output: out };
}

/**
 * "scatter-segments": the segmented reduction of sorted ids (see _codegen_indexing.ts), then the
 * carries of segments that cross tiles; ids out of ascending order are an IndexError.
 */
function runSegments(
  gpu: GpuHost,
  job: ScatterJob,
  out: GpuStorage,
  counts: GpuStorage | null,
  workgroupSize: number,
): void {
  const { op, dtype, reduce, axis } = job;
  const n = sizeOf(job.shape);
  const inner = n / job.shape[0];
  const rows = job.shape[0];
  const columns = segmentColumns(inner, workgroupSize);
  const tiles = Math.ceil(rows / ((workgroupSize / columns) * SEGMENT_ROWS));
  const groups = tiles * Math.ceil(inner / columns);
  const values = gpu.alloc(op, "uint32", 2 * tiles * inner);
  const carriedCounts = counts ? gpu.alloc(op, "uint32", 2 * tiles * inner) : null;
  const ids = gpu.alloc(op, "int32", 3 * tiles);
  try {
    // One column of contiguous rows at offsets a multiple of 4 (a vec4's elements).
    const wide = inner === 1 && job.shape.length === 1 && dtype !== "float16" &&
      job.updateStrides[0] === 1 && job.indexStrides[0] === 1 &&
      job.updates!.offset % 4 === 0 && job.indices.offset % 4 === 0 &&
      [job.updates!, job.indices].every((v) =>
        buffer(v).size >= 16 * Math.ceil((v.offset + rows) / 4)
      );
    const spec = (stage: "segments" | "segment-carries"): IndexingSpec => ({
      stage,
      rank: job.shape.length,
      dtype,
      reduce,
      columns,
      ...(wide && stage === "segments" ? { wide } : {}),
      workgroupSize,
    });
    const check = gpu.indexCheck(
      op,
      job.indexName ?? "indices",
      indexRange(axis),
      SORTED_IDS,
    );
    const header = (slot: number) => [
      n,
      job.shape.length,
      axis.stride,
      axis.length,
      job.updates!.offset,
      job.indices.offset,
      NEGATIVE_INDEX_CODE[axis.negative],
      slot,
    ];
    const strides = [job.updateStrides, job.indexStrides, job.outStrides];
    const buffers = (checks: GPUBuffer) => [
      buffer(job.updates!),
      buffer(job.indices),
      checks,
      counts?.buffer ?? gpu.scratch("indexing-none", 4),
      out.buffer,
      values.buffer,
      carriedCounts?.buffer ?? gpu.scratch("indexing-no-carried-counts", 4),
      ids.buffer,
    ];
    run(
      gpu,
      op,
      spec("segments"),
      buffers(check.buffer),
      6,
      indexingUniforms(header(check.slot), job.shape, strides),
      groups * workgroupSize,
    );
    // One tile: no segment crosses tiles.
    if (tiles > 1) {
      run(
        gpu,
        op,
        spec("segment-carries"),
        buffers(gpu.scratch("indexing-no-checks", 4)),
        6,
        indexingUniforms(header(0), job.shape, strides),
        groups * workgroupSize,
      );
    }
  } finally {
    for (const s of [values, carriedCounts, ids]) if (s) gpu.free(s);
  }
}

/**
 * "scatter-compact": the compaction's three passes (see _codegen_indexing.ts): each tile's count
 * of selected rows, their exclusive offsets (one workgroup), then each tile's selected rows
 * written at their offsets and the rows past the total filled.
 */
function runCompact(gpu: GpuHost, job: ScatterJob): GpuStorage {
  const { op, dtype, axis } = job;
  const size = axis.length;
  const inner = job.shape.slice(1).reduce((a, b) => a * b, 1);
  const out = gpu.alloc(op, dtype, size * inner);
  if (size * inner === 0) return out;
  const choice = scatterChoice(gpu, job);
  const size_ = choice.workgroupSize;
  const rows = job.shape[0];
  const tiles = Math.max(1, Math.ceil(rows / (size_ * COMPACT_ROWS)));
  const summed = choice.offsets === "summed";
  const offsets = gpu.alloc(op, "uint32", tiles + 1);
  const half = dtype === "float16";
  const fill = half
    ? f32ToF16Bits(job.fill ?? 0)
    : dtype === "float32"
    ? new Uint32Array(new Float32Array([job.fill ?? 0]).buffer)[0]
    : (job.fill ?? 0) >>> 0;
  // One column of contiguous, aligned mask words: read four at a time.
  const wide = job.indexStrides[0] === 1 && job.indices.offset % 4 === 0 &&
    buffer(job.indices).size >= 16 * Math.ceil((job.indices.offset + rows) / 4);
  try {
    const uniforms = indexingUniforms(
      [
        rows * inner,
        job.shape.length,
        inner,
        size,
        job.updates?.offset ?? 0,
        job.indices.offset,
        0,
        0,
        tiles,
        0,
        fill,
      ],
      job.shape,
      [job.updateStrides, job.indexStrides, job.outStrides],
    );
    const buffers = [
      job.updates ? buffer(job.updates) : gpu.scratch("indexing-no-updates", 4),
      buffer(job.indices),
      offsets.buffer,
      out.buffer,
    ];
    const stages = summed
      ? ["compact-count", "compact-write"] as const
      : ["compact-count", "compact-offsets", "compact-write"] as const;
    for (const stage of stages) {
      run(
        gpu,
        op,
        {
          stage,
          rank: job.shape.length,
          dtype,
          positions: job.updates === null,
          ...(wide && stage !== "compact-offsets" ? { wide } : {}),
          ...(summed && stage === "compact-write" ? { summed } : {}),
          workgroupSize: size_,
        },
        buffers,
        2,
        uniforms,
        (stage === "compact-offsets" ? 1 : tiles) * size_,
      );
    }
  } catch (e) {
    gpu.free(out);
    throw e;
  } finally {
    gpu.free(offsets);
  }
  return out;
}

/**
 * "scatter-sorted": the ids (axis 0 of the iteration space; negatives counted from the end made
 * non-negative first) sorted with their order, the update rows gathered in that order, then the
 * segmented reduction of the sorted ids ("scatter-segments"). Every temporary is freed.
 */
function runSortedSegments(
  gpu: GpuHost,
  job: ScatterJob,
  out: GpuStorage,
  counts: GpuStorage | null,
  workgroupSize: number,
): void {
  const { op, overrides } = job;
  const rows = job.shape[0];
  const temps: GpuStorage[] = [];
  const view = (storage: GpuStorage, dtype: View["dtype"], shape: number[]): View => ({
    storage,
    dtype,
    offset: 0,
    shape,
    strides: contiguousStrides(shape),
  });
  try {
    let ids: View = {
      ...job.indices,
      shape: [rows],
      strides: [job.indexStrides[0]],
    };
    if (job.axis.negative === "wrap") {
      const i = E.input(0, "int32");
      const wrapped = gpu.evaluate({
        op,
        // Only [-n, 0) moves: an index out of range stays as it came, for its IndexError.
        expr: E.where(
          E.binary(
            "logicalAnd",
            E.binary("less", i, E.constant(0, "int32"), "bool"),
            E.binary("greaterEqual", i, E.constant(-job.axis.length, "int32"), "bool"),
            "bool",
          ),
          E.binary("add", i, E.constant(job.axis.length, "int32")),
          i,
        ),
        inputs: [ids],
        shape: [rows],
        overrides,
      }) as GpuStorage;
      temps.push(wrapped);
      ids = view(wrapped, "int32", [rows]);
    }
    const sorted = runSortGpu(gpu, {
      overrides,
      op,
      x: ids,
      axis: 0,
      descending: false,
      start: 0,
      count: rows,
      indices: true,
    });
    temps.push(sorted.values as GpuStorage, sorted.indices as GpuStorage);
    const gathered = runGatherGpu(gpu, {
      overrides,
      op,
      x: job.updates!,
      indices: view(sorted.indices as GpuStorage, "int32", [rows]),
      shape: job.shape,
      xStrides: [0, ...job.updateStrides.slice(1)],
      indexStrides: job.shape.map((_, d) => (d === 0 ? 1 : 0)),
      axis: { stride: job.updateStrides[0], length: rows, negative: "error" },
    })!.output as GpuStorage;
    temps.push(gathered);
    runSegments(
      gpu,
      {
        ...job,
        updates: view(gathered, job.dtype, [...job.shape]),
        updateStrides: contiguousStrides(job.shape),
        indices: view(sorted.values as GpuStorage, "int32", [rows]),
        indexStrides: job.shape.map((_, d) => (d === 0 ? 1 : 0)),
        axis: job.axis.negative === "wrap" ? { ...job.axis, negative: "error" } : job.axis,
        sorted: true,
      },
      out,
      counts,
      workgroupSize,
    );
  } finally {
    for (const t of temps) gpu.free(t);
  }
}

/** Invocations a scatter form takes for an iteration space of `shape`. */
function scatterInvocations(variant: string, shape: readonly number[], workgroupSize: number) {
  const n = sizeOf(shape);
  if (variant === "scatter-shared") return Math.ceil(n / SHARED_CHUNK) * workgroupSize;
  if (variant === "scatter-runs") {
    const inner = n / shape[0];
    return Math.ceil(shape[0] / RUN_LENGTH) * inner;
  }
  return n;
}
