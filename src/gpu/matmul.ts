/**
 * The matmul family on the GPU: host code (plan, layouts, uniforms, buffers, passes) for the
 * kernels that _codegen_matmul.ts generates, as `planMatmul` chooses (tiled, split-K, stream-K,
 * or matrix-vector for M = 1 or N = 1). Operands are read through their strides; an operand with
 * a fused prologue is computed by the tiled kernels as they load it, and bias, activation or
 * fused elementwise consumers run in the kernels' epilogue.
 * @module
 */
import type { View } from "../core/view.ts";
import { batchRun, sizeOf } from "../core/shape.ts";
import {
  type MatmulActivation,
  type MatmulJob,
  type MatmulProblem,
  type MatmulPrologue,
  type MatmulResult,
  operandInputs,
} from "../contract/matmul.ts";
import { UNARY } from "../ir/elementwise_table.ts";
import { constantNodes, type Expr, exprKey, readsIndex } from "../ir/expr.ts";
import { observePlan } from "../contract/backend.ts";
import { tunedOverride } from "../heuristics/consensus.ts";
import { matmulTuneKey } from "../heuristics/families.ts";
import { transposeCopy } from "./elementwise.ts";
import { type MatmulChoice, planMatmul } from "../plans/mod.ts";
import type { GpuHost, GpuStorage } from "./host.ts";
import {
  type GemvSpec,
  generateMatmul,
  type MatmulEpilogue,
  matmulKey,
  type MatmulSpec,
  type MatmulUniforms,
  matmulUniforms,
  type OperandLoad,
  type SplitReduceSpec,
  type StreamKFixupSpec,
  type TiledSpec,
  tiledThreads,
} from "./_codegen_matmul.ts";
import type { TransposeUniforms } from "../plans/elementwise.ts";
import { loadAs, storageType } from "./_wgsl_types.ts";
import { constantWords, epilogueFunction } from "./_codegen_elementwise.ts";

/** The operands of a job: A, B and their prologues. */
type Operands = Pick<MatmulJob, "a" | "b" | "aPrologue" | "bPrologue" | "overrides">;

/**
 * Runs a matmul job on the GPU. Null only when the job's fused epilogue cannot run in the
 * product's kernel (see {@link fusedEpilogue}), or its inputs with the operands' and C do not fit
 * the device's storage bindings.
 */
export function runMatmulGpu(backend: GpuHost, job: MatmulJob): MatmulResult | null {
  const p = job.problem;
  let custom: CustomEpilogue | null = null;
  if (job.epilogue) {
    // The epilogue's constants follow the prologues'.
    const base = [job.aPrologue, job.bPrologue].reduce(
      (n, pro) => n + (pro ? constantNodes(pro.expr).length : 0),
      0,
    );
    custom = fusedEpilogue(job.epilogue.expr, job.epilogue.inputs, p, base);
    // The operands' inputs, the epilogue's and C must fit the device's bindings.
    const operandInputCount = operandInputs(job.a, job.aPrologue).length +
      operandInputs(job.b, job.bPrologue).length;
    const bindings = operandInputCount + (custom?.buffers.length ?? 0) + 1;
    if (!custom || bindings > backend.caps.limits.maxStorageBuffersPerShaderStage) return null;
  }
  const output = runGpu(
    job.op,
    backend,
    p,
    job,
    { bias: job.bias, activation: job.activation },
    custom,
  );
  return { output, dtype: p.dtype };
}

/**
 * Batch axes with length-1 axes dropped and neighbours merged where every input allows:
 * `strides[j]` are input j's batch strides, returned collapsed in the same order.
 */
function collapseBatch(
  shape: readonly number[],
  strides: readonly (readonly number[])[],
): { shape: number[]; strides: number[][] } {
  const out = { shape: [] as number[], strides: strides.map(() => [] as number[]) };
  for (let i = 0; i < shape.length; i++) {
    if (shape[i] === 1) continue;
    const last = out.shape.length - 1;
    if (last >= 0 && strides.every((s, j) => out.strides[j][last] === s[i] * shape[i])) {
      out.shape[last] *= shape[i];
      strides.forEach((s, j) => (out.strides[j][last] = s[i]));
    } else {
      out.shape.push(shape[i]);
      strides.forEach((s, j) => out.strides[j].push(s[i]));
    }
  }
  return out;
}

/** What the epilogue adds: a bias (already a contiguous view of [N]) and an activation. */
interface EpilogueParts {
  bias: View | null;
  activation: MatmulActivation | null;
}

function gpuEpilogue(parts: EpilogueParts): MatmulEpilogue | null {
  if (!parts.bias && !parts.activation) return null;
  const bias = parts.bias;
  const activation = parts.activation;
  return {
    key: `${bias ? `bias:${bias.dtype}` : ""}|${activation ?? ""}`,
    bindings: bias ? [{ name: "bias", type: storageType(bias.dtype) }] : [],
    apply(value, _row, col) {
      let x = value;
      if (bias) x = `(${x} + ${loadAs(bias.dtype, `bias[p.e_off + ${col}]`)})`;
      if (activation) x = UNARY[activation].wgsl.f32!(x, "");
      return x;
    },
  };
}

/** A fused elementwise epilogue: its code, its inputs' buffers and its constants' words. */
interface CustomEpilogue {
  epilogue: MatmulEpilogue;
  buffers: GPUBuffer[];
  constants: number[];
}

/**
 * An epilogue from a fused elementwise expression: input 0 is the product's value, inputs 1...
 * are views of the output's shape, read at (row, col) through strides baked into the code (so
 * the key names them). Null when the expression cannot run there: another result dtype, an
 * input that varies along batch axes or has negative strides, or one that reads the index. Its
 * constants take the uniform slots from `constantBase` on (after the prologues').
 */
function fusedEpilogue(
  expr: Expr,
  inputs: View[],
  p: MatmulProblem,
  constantBase: number,
): CustomEpilogue | null {
  const r = p.batch.length;
  if (expr.dtype !== p.dtype || readsIndex(expr)) return null;
  for (const v of inputs) {
    if (v.strides.slice(0, r).some((s) => s !== 0) || v.strides.some((s) => s < 0)) return null;
  }
  // The matrix kernels' uniforms call their zero word `pad`.
  const declarations = epilogueFunction(
    expr,
    p.dtype,
    inputs.map((v) => v.dtype),
    ["row", "col"],
    (k) =>
      `${inputs[k].offset}u + row * ${inputs[k].strides[r]}u + col * ${inputs[k].strides[r + 1]}u`,
    { zero: "p.pad", constantBase },
  );
  const constants = constantWords(expr);
  return {
    epilogue: {
      key: `fused:${exprKey(expr)}@k${constantBase}:${
        inputs.map((v) => `${v.dtype}@${v.offset}/${v.strides[r]},${v.strides[r + 1]}`).join(";")
      }`,
      bindings: inputs.map((v, i) => ({ name: `epilogue_in${i + 1}`, type: storageType(v.dtype) })),
      apply: (value, row, col) => `gyre_epilogue(${value}, ${row}, ${col})`,
      declarations,
      constantSlots: constantBase + constants.length,
    },
    buffers: inputs.map((v) => (v.storage as GpuStorage).buffer),
    constants,
  };
}

function bufferOf(v: View): GPUBuffer {
  return (v.storage as GpuStorage).buffer;
}

/** Runs a validated, non-empty product with K > 0 on the GPU; returns [...batch, M, N] storage. */
function runGpu(
  op: string,
  backend: GpuHost,
  p: MatmulProblem,
  x: Operands,
  parts: EpilogueParts,
  custom: CustomEpilogue | null = null,
): GpuStorage {
  backend.checkLive(op, [p.dtype]);
  const r = p.batch.length;
  const [aOuter, aK] = [x.a.strides[r], x.a.strides[r + 1]];
  const [bK, bOuter] = [x.b.strides[r], x.b.strides[r + 1]];
  // A's own batch axes as one run of matrices (broadcast ones stay broadcast in the copy's view).
  const aBatch = x.aPrologue ? null : batchRun(p.batch, x.a.strides.slice(0, r));
  const choice = observePlan(
    "gpu",
    "matmul",
    op,
    planMatmul(
      backend.caps,
      {
        m: p.m,
        n: p.n,
        k: p.k,
        batch: sizeOf(p.batch),
        dtype: p.dtype,
        transposeA: aK !== 1 && aOuter === 1,
        transposeB: bK === 1 && bOuter !== 1,
        halfAccumulate: p.halfAccumulate,
        aCopyable: aBatch !== null,
      },
      // Plain float32 products are the tuned family's (what the tuner measured: no prologue or
      // epilogue, which a split or streamed K would move out of the product's kernel).
      p.dtype === "float32" && !p.halfAccumulate && sizeOf(p.batch) === 1 && aK === 1 &&
        bOuter === 1 && !x.aPrologue && !x.bPrologue && !parts.bias && !parts.activation &&
        !custom && p.m > 1 && p.n > 1
        ? tunedOverride("matmul", backend.caps, matmulTuneKey(p.m, p.n, p.k), x.overrides.matmul)
        : x.overrides.matmul,
    ),
    x.overrides.matmul,
  );
  if (!choice.transposeAFirst || !aBatch) {
    return runPlanned(op, backend, p, x, parts, custom, choice);
  }
  const copy = copyAColumns(backend, op, p, x.a, aBatch);
  try {
    return runPlanned(op, backend, p, { ...x, a: copy.view }, parts, custom, choice);
  } finally {
    backend.free(copy.storage);
  }
}

/**
 * Copies A ([...batch, M, K] through its strides) into fresh contiguous [count, K, M] storage by
 * the tiled transposing kernel, and returns a view of it with A's logical shape.
 */
function copyAColumns(
  backend: GpuHost,
  op: string,
  p: MatmulProblem,
  a: View,
  run: { count: number; stride: number },
): { storage: GpuStorage; view: View } {
  const r = p.batch.length;
  const { m, k } = p;
  const storage = backend.alloc(op, a.dtype, run.count * m * k);
  const copy: TransposeUniforms = {
    rows: m,
    columns: k,
    batches: run.count,
    offset: a.offset,
    rowStride: a.strides[r],
    columnStride: a.strides[r + 1],
    batchStride: run.stride,
  };
  // Its own label, so profiles and `explain` tell the copy from the product.
  const label = `transpose A (${op})`;
  transposeCopy(backend, label, (a.storage as GpuStorage).buffer, storage.buffer, {
    ...copy,
    dtype: a.dtype,
  });
  // Batch axes step through the copies in A's own order; broadcast axes stay broadcast.
  const batchStrides = a.strides.slice(0, r).map((s, d) =>
    p.batch[d] === 1 || s === 0 ? 0 : (s / run.stride) * m * k
  );
  return {
    storage,
    view: { storage, dtype: a.dtype, shape: a.shape, offset: 0, strides: [...batchStrides, 1, m] },
  };
}

/** {@link runGpu} under a chosen plan, with A already in the layout the plan expects. */
function runPlanned(
  op: string,
  backend: GpuHost,
  p: MatmulProblem,
  x: Operands,
  parts: EpilogueParts,
  custom: CustomEpilogue | null,
  choice: MatmulChoice,
): GpuStorage {
  const { m, n, k } = p;
  const r = p.batch.length;
  const batches = sizeOf(p.batch);
  const aInputs = operandInputs(x.a, x.aPrologue);
  const bInputs = operandInputs(x.b, x.bPrologue);
  const inputs = [...aInputs, ...bInputs];
  const batchStrides = collapseBatch(p.batch, inputs.map((v) => v.strides.slice(0, r)));
  const batchOf = (v: View) => batchStrides.strides[inputs.indexOf(v)];
  const collapsed = { shape: batchStrides.shape, a: batchOf(x.a), b: batchOf(x.b) };
  const batchRank = collapsed.shape.length;
  const [aOuter, aK] = [x.a.strides[r], x.a.strides[r + 1]];
  const [bK, bOuter] = [x.b.strides[r], x.b.strides[r + 1]];
  const epilogue = custom?.epilogue ?? gpuEpilogue(parts);
  const extraBuffers = custom?.buffers ??
    (parts.bias ? [(parts.bias.storage as GpuStorage).buffer] : []);
  const aligned = (offset: number, strides: readonly number[]) =>
    choice.vectorLoads && offset % 4 === 0 && strides.every((s) => s % 4 === 0);
  const out = backend.alloc(op, p.dtype, batches * m * n);
  const base: Omit<MatmulUniforms, "tilesM" | "tilesN" | "splits" | "kChunk"> = {
    m,
    n,
    k,
    batches,
    aOffset: x.a.offset,
    bOffset: x.b.offset,
    aOuterStride: aOuter,
    aKStride: aK,
    bKStride: bK,
    bOuterStride: bOuter,
    epilogueOffset: parts.bias?.offset ?? 0,
    batchShape: collapsed.shape,
    aBatchStrides: collapsed.a,
    bBatchStrides: collapsed.b,
    // Slots: A's prologue's constants, B's, then the epilogue's.
    constants: [
      ...(x.aPrologue ? constantWords(x.aPrologue.expr) : []),
      ...(x.bPrologue ? constantWords(x.bPrologue.expr) : []),
      ...(custom?.constants ?? []),
    ],
  };
  const aBuffer = (x.a.storage as GpuStorage).buffer;
  const bBuffer = (x.b.storage as GpuStorage).buffer;
  const dispatch = (
    spec: MatmulSpec,
    buffers: GPUBuffer[],
    u: MatmulUniforms,
    groups: number,
    threads: number,
    writable = 1,
  ) => {
    const pipeline = backend.pipeline(
      matmulKey(spec),
      buffers.length,
      () => generateMatmul(spec),
      writable,
    );
    backend.dispatch(
      op,
      pipeline,
      buffers,
      matmulUniforms(u),
      backend.grid(groups * threads, threads),
    );
  };

  if (choice.variant === "gemv") {
    // Prologues are only fused where M and N exceed 1, where the plan never picks gemv.
    if (x.aPrologue || x.bPrologue) throw new Error(`${op}: internal error: gemv with a prologue`);
    // M = 1: the matrix is B (its outputs along N) and the vector A's row; N = 1: the matrix is
    // A and the vector B's column. The uniforms' A slot holds the matrix, the B slot the vector.
    const byN = m === 1;
    const outputs = byN ? n : m;
    const w = byN
      ? { view: x.b, outer: bOuter, kStride: bK, batch: collapsed.b, buffer: bBuffer }
      : { view: x.a, outer: aOuter, kStride: aK, batch: collapsed.a, buffer: aBuffer };
    const v = byN
      ? { view: x.a, kStride: aK, batch: collapsed.a, buffer: aBuffer }
      : { view: x.b, kStride: bK, batch: collapsed.b, buffer: bBuffer };
    const form = w.kStride === 1 || w.outer !== 1 ? "dot" : "column";
    const vec4 = form === "dot"
      ? k % 4 === 0 && w.kStride === 1 && v.kStride === 1 &&
        aligned(w.view.offset, [w.outer, ...w.batch]) &&
        aligned(v.view.offset, v.batch)
      : outputs % 4 === 0 && aligned(w.view.offset, [w.kStride, ...w.batch]);
    const width = Math.min(choice.gemvWidth, choice.gemvWorkgroupSize);
    const spec: GemvSpec = {
      kind: "gemv",
      dtype: p.dtype,
      form,
      vec4,
      workgroupSize: choice.gemvWorkgroupSize,
      width,
      subgroups: form === "dot" && choice.subgroups,
      outputs: byN ? "n" : "m",
      batchRank,
      epilogue,
    };
    const perGroup = form === "dot" ? choice.gemvWorkgroupSize / width : 4 * width;
    const groups = Math.ceil(outputs / perGroup);
    dispatch(
      spec,
      [w.buffer, v.buffer, ...extraBuffers, out.buffer],
      {
        ...base,
        tilesM: groups,
        tilesN: 1,
        splits: 1,
        kChunk: k,
        aOffset: w.view.offset,
        bOffset: v.view.offset,
        aOuterStride: w.outer,
        aKStride: w.kStride,
        bKStride: v.kStride,
        bOuterStride: 0,
        aBatchStrides: w.batch,
        bBatchStrides: v.batch,
      },
      groups * batches,
      choice.gemvWorkgroupSize,
    );
    return out;
  }

  // An operand's loads: along its (main) view's contiguous axis, as vec4s when every input
  // read has stride 1 along it with aligned offset and other strides, or (a prologue input
  // broadcast along it) stride 0.
  const loadOf = (
    main: View,
    prologue: MatmulPrologue | null,
    outerAxis: number,
    outerLength: number,
  ): OperandLoad => {
    const outerOf = (v: View) => v.strides[outerAxis];
    const kOf = (v: View) => v.strides[outerAxis === r ? r + 1 : r];
    const [outerStride, kStride] = [outerOf(main), kOf(main)];
    const along: "k" | "outer" = kStride === 1
      ? "k"
      : outerStride === 1
      ? "outer"
      : Math.abs(kStride) <= Math.abs(outerStride)
      ? "k"
      : "outer";
    const alongStride = (v: View) => (along === "k" ? kOf(v) : outerOf(v));
    const vectors = (v: View) =>
      alongStride(v) === 1 &&
      aligned(v.offset, [along === "k" ? outerOf(v) : kOf(v), ...batchOf(v)]);
    const length = along === "k" ? k : outerLength;
    if (!prologue) return { along, vec4: length % 4 === 0 && vectors(main) };
    const vec4 = choice.vectorLoads && length % 4 === 0 &&
      prologue.inputs.every((v) => alongStride(v) === 0 || vectors(v));
    return {
      along,
      vec4,
      prologue: {
        expr: prologue.expr,
        inputs: prologue.inputs.map((v) => ({
          dtype: v.dtype,
          splat: vec4 && alongStride(v) === 0,
        })),
      },
    };
  };
  const tilesM = Math.ceil(m / choice.tileM);
  const tilesN = Math.ceil(n / choice.tileN);
  // Split K into chunks of whole tile steps; partials must fit one binding.
  let splits = choice.variant === "splitK" ? choice.splitK : 1;
  const partialBytes = 4 * batches * m * n;
  splits = Math.max(
    1,
    Math.min(splits, Math.floor(backend.caps.limits.maxStorageBufferBindingSize / partialBytes)),
  );
  const kChunk = Math.ceil(Math.ceil(k / splits) / choice.tileK) * choice.tileK;
  splits = Math.ceil(k / kChunk);
  // Stream-K: whole waves of `streamKGroups` tiles run as plain tiles; the tiles left over are
  // shared out by (tile, K step) units, no more workgroups than units. With K = 0, or no tiles
  // left over, plain tiles do it all.
  const allTiles = batches * tilesM * tilesN;
  const wholeWaves = choice.variant === "streamK"
    ? Math.floor(allTiles / choice.streamKGroups) * choice.streamKGroups
    : allTiles;
  const units = (allTiles - wholeWaves) * Math.ceil(k / choice.tileK);
  const streamK = units > 0 && !p.halfAccumulate && p.dtype !== "int32";
  const spec: TiledSpec = {
    kind: "tiled",
    dtype: p.dtype,
    math: p.dtype === "int32" ? "i32" : p.halfAccumulate ? "f16" : "f32",
    tileM: choice.tileM,
    tileN: choice.tileN,
    tileK: choice.tileK,
    threadM: choice.threadM,
    threadN: choice.threadN,
    laneColumns: choice.laneColumns,
    doubleBuffer: choice.doubleBuffer,
    sharedLayout: choice.sharedLayout,
    prefetch: choice.prefetch,
    swizzle: choice.swizzle,
    productForm: choice.productForm,
    a: loadOf(x.a, x.aPrologue, r, m),
    b: loadOf(x.b, x.bPrologue, r + 1, n),
    vectorStore: choice.vectorLoads && n % 4 === 0,
    batchRank,
    split: splits > 1,
    streamK: false,
    interior: choice.interiorLoads && m % choice.tileM === 0 && n % choice.tileN === 0 &&
      k % choice.tileK === 0,
    epilogue,
  };
  const threads = tiledThreads(spec);
  // Each prologue input's offset and strides as (outer, k), A's inputs then B's.
  const prologueInputs = [
    ...(x.aPrologue?.inputs ?? []).map((v) => [v, v.strides[r], v.strides[r + 1]] as const),
    ...(x.bPrologue?.inputs ?? []).map((v) => [v, v.strides[r + 1], v.strides[r]] as const),
  ].map(([v, outerStride, kStride]) => ({
    offset: v.offset,
    outerStride,
    kStride,
    batchStrides: batchOf(v),
  }));
  // The workgroups' two slots of partial tiles each must fit one binding.
  const slotBytes = 4 * choice.tileM * choice.tileN;
  const persistent = streamK
    ? Math.min(
      choice.streamKGroups,
      units,
      Math.floor(backend.caps.limits.maxStorageBufferBindingSize / (2 * slotBytes)),
    )
    : 0;
  const uniforms: MatmulUniforms = {
    ...base,
    tilesM,
    tilesN,
    splits,
    kChunk,
    prologueInputs,
  };
  const groups = batches * tilesM * tilesN * splits;
  // Operand buffers: each operand's own, or its prologue's inputs'.
  const operandBuffers = [
    ...(x.aPrologue ? aInputs.map(bufferOf) : [aBuffer]),
    ...(x.bPrologue ? bInputs.map(bufferOf) : [bBuffer]),
  ];
  if (streamK) {
    // The whole waves, then the tiles left over (the stream-K workgroup count and first tile
    // travel in the split count's and K chunk's words), then the sums of the tiles cut between
    // workgroups. Two slots of partial tiles per workgroup.
    if (wholeWaves > 0) {
      dispatch(
        spec,
        [...operandBuffers, ...extraBuffers, out.buffer],
        uniforms,
        wholeWaves,
        threads,
      );
    }
    const shared = { ...uniforms, splits: persistent, kChunk: wholeWaves };
    const streamKSpec: TiledSpec = { ...spec, streamK: true };
    const partials = backend.alloc(op, "float32", persistent * 2 * choice.tileM * choice.tileN);
    dispatch(
      streamKSpec,
      [...operandBuffers, ...extraBuffers, out.buffer, partials.buffer],
      shared,
      persistent,
      threads,
      2,
    );
    if (persistent > 1) {
      const fixup: StreamKFixupSpec = {
        kind: "streamKFixup",
        tiled: streamKSpec,
        epilogue,
      };
      dispatch(
        fixup,
        [partials.buffer, ...extraBuffers, out.buffer],
        shared,
        persistent - 1,
        threads,
      );
    }
    backend.free(partials);
    return out;
  }
  if (splits === 1) {
    dispatch(spec, [...operandBuffers, ...extraBuffers, out.buffer], uniforms, groups, threads);
    return out;
  }
  const partials = backend.alloc(
    op,
    p.dtype === "int32" ? "int32" : "float32",
    splits * batches * m * n,
  );
  dispatch(spec, [...operandBuffers, partials.buffer], uniforms, groups, threads);
  const reduce: SplitReduceSpec = {
    kind: "splitReduce",
    dtype: p.dtype,
    vec4: spec.vectorStore,
    workgroupSize: 256,
    epilogue,
  };
  const elements = reduce.vec4 ? (batches * m * n) / 4 : batches * m * n;
  dispatch(
    reduce,
    [partials.buffer, ...extraBuffers, out.buffer],
    // Its Params has no prologue inputs, which come before the constants.
    { ...uniforms, prologueInputs: [] },
    Math.ceil(elements / 256),
    256,
  );
  backend.free(partials);
  return out;
}
