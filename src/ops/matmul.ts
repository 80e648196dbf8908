/**
 * Matrix products: `matmul` with NumPy's semantics (1-D operands promoted and the added axis
 * removed, batch axes broadcast, any M, N, K including 0) plus transpose options read through
 * strides, and `linear` (`x @ weight^T + bias`, then an activation), whose bias and activation run
 * in the GPU kernel's epilogue rather than as extra dispatches.
 *
 * The GPU runs the kernels of src/gpu/_codegen_matmul.ts as `planMatmul` chooses (tiled,
 * split-K, or matrix-vector for M = 1 or N = 1); WASM runs the packed SIMD GEMM of asm/matmul.ts,
 * shared between threads (src/wasm/threads.ts) as `planWasmGemm` chooses.
 * Both read operands through their strides (transposed and broadcast views cost no copy); views
 * with negative strides are copied first. On the GPU, an operand that is a pending elementwise
 * result (`matmul(x.mul(s).relu(), w)`) is computed by the tiled kernels as they load it (a fused
 * prologue) instead of in a kernel of its own.
 * @module
 */
import type { View } from "../contract/backend.ts";
import { batchRun, contiguousStrides, type Shape, sizeOf } from "../core/shape.ts";
import { type DType, promoteTypes } from "../core/dtype.ts";
import {
  _checkOptions,
  describe,
  DeviceError,
  DTypeError,
  ShapeError,
  ValueError,
} from "../core/errors.ts";
import type { GpuHost, GpuStorage } from "../gpu/host.ts";
import {
  type GemvSpec,
  generateMatmul,
  type MatmulDType,
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
} from "../gpu/_codegen_matmul.ts";
import type { TransposeUniforms } from "../gpu/_codegen_transpose.ts";
import { loadAs, storageType } from "../gpu/_wgsl_types.ts";
import { constantWords, epilogueFunction } from "../gpu/_codegen_elementwise.ts";
import { bind, fusedLabel, makePending, type Producer } from "../_lazy.ts";
import { type MatmulChoice, planMatmul, planMatmulPrologue, planWasmGemm } from "../plans/mod.ts";
import { runtime } from "../runtime.ts";
import { Tensor } from "../tensor.ts";
import type { Value, WasmHost, WasmStorage } from "../wasm/host.ts";
import {
  runShares,
  startWasmThreads,
  wasmThreadCapacity,
  wasmThreadCount,
} from "../wasm/threads.ts";
import { UNARY } from "../ir/elementwise_table.ts";
import { constantNodes, E, type Expr, exprKey, readsIndex } from "../ir/expr.ts";
import { evaluate } from "./_dispatch.ts";
import { cast } from "./elementwise.ts";
import { clone } from "./shape.ts";

/** Options of {@link matmul}. */
export interface MatmulOptions {
  /** Use the transpose of a's last two axes (a view: no copy). Ignored for a 1-D `a`. */
  transposeA?: boolean;
  /** Use the transpose of b's last two axes (a view: no copy). Ignored for a 1-D `b`. */
  transposeB?: boolean;
  /**
   * Accumulator precision for float16 operands: "float32" (default) or "float16" (f16 registers
   * and shared tiles in the GPU's tiled kernels: faster, with error growing like K * 2^-11). The
   * matrix-vector kernels (M = 1 or N = 1, bound by memory) and WASM always accumulate in float32,
   * which is never less accurate.
   */
  accumulate?: "float32" | "float16";
}

/** Activations {@link linear} can apply in the kernel's epilogue. */
export type LinearActivation = "relu" | "gelu" | "silu" | "tanh" | "sigmoid";

/** Options of {@link linear}. */
export interface LinearOptions {
  /** Added to every row: shape [out] (or anything that broadcasts to it from one axis). */
  bias?: Tensor;
  /** Applied after the bias; "gelu" is the exact (erf) form. Default: none. */
  activation?: LinearActivation | "none";
  /** As {@link MatmulOptions.accumulate}. */
  accumulate?: "float32" | "float16";
}

const DTYPES: readonly DType[] = ["float32", "float16", "int32"];
const ACTIVATIONS: readonly string[] = ["relu", "gelu", "silu", "tanh", "sigmoid", "none"];

/** A validated product: operand views broadcast to `[...batch, M, K]` and `[...batch, K, N]`. */
interface Problem {
  dtype: MatmulDType;
  m: number;
  n: number;
  k: number;
  batch: number[];
  outShape: number[];
  halfAccumulate: boolean;
}

/**
 * Most inputs one operand's fused prologue reads: with both operands at the most, and C, 7 of the
 * 8 storage bindings WebGPU guarantees.
 */
const MAX_PROLOGUE_INPUTS = 3;

/**
 * An operand computed inside the product's kernel as it is loaded: an elementwise expression
 * over `inputs`, views of the operand's `[...batch, rows, cols]` matrix view each.
 */
interface Prologue {
  expr: Expr;
  inputs: View[];
  /** The ops folded in (for profiles and explain). */
  label: string;
}

/**
 * Operands after validation, with what must be disposed afterwards. An operand with a prologue
 * has no buffer of its own: its view is then the prologue input whose layout decides how tiles
 * are loaded (the first that varies along both matrix axes).
 */
interface Operands {
  a: View;
  b: View;
  aPrologue: Prologue | null;
  bPrologue: Prologue | null;
  temps: Tensor[];
}

function checkTensor(op: string, argument: string, x: unknown): Tensor {
  if (!(x instanceof Tensor)) {
    throw new ValueError({ op, argument, expected: "a Tensor", received: describe(x) });
  }
  return x;
}

function checkFlag(op: string, argument: string, value: unknown): boolean {
  if (value === undefined) return false;
  if (typeof value !== "boolean") {
    throw new ValueError({ op, argument, expected: "a boolean", received: describe(value) });
  }
  return value;
}

function checkAccumulate(op: string, value: unknown, dtype: DType): boolean {
  if (value === undefined || value === "float32") return false;
  if (value !== "float16") {
    throw new ValueError({
      op,
      argument: "options.accumulate",
      expected: '"float32" or "float16"',
      received: describe(value),
    });
  }
  if (dtype !== "float16") {
    throw new ValueError({
      op,
      argument: "options.accumulate",
      expected: '"float16" only with float16 operands',
      received: `"float16" with ${dtype} operands`,
    });
  }
  return true;
}

/**
 * Validates a product (nothing is allocated before every check passes) and returns its shape
 * facts. `aShape`/`bShape` are the operands' shapes as given.
 */
function validate(
  op: string,
  a: Tensor,
  b: Tensor,
  options: { transposeA?: unknown; transposeB?: unknown; accumulate?: unknown },
  names: [string, string] = ["a", "b"],
): Problem & { transposeA: boolean; transposeB: boolean; aShape: Shape; bShape: Shape } {
  const am = a._meta(op, names[0]);
  const bm = b._meta(op, names[1]);
  const transposeA = checkFlag(op, "options.transposeA", options.transposeA);
  const transposeB = checkFlag(op, "options.transposeB", options.transposeB);
  if (am.device !== bm.device) {
    throw new DeviceError({
      op,
      argument: names[1],
      expected: `a tensor on the same device as ${names[0]} ("${am.device}"); use .to()`,
      received: `a tensor on "${bm.device}"`,
    });
  }
  for (const [m, name] of [[am, names[0]], [bm, names[1]]] as const) {
    if (!DTYPES.includes(m.dtype)) {
      throw new DTypeError({
        op,
        argument: name,
        expected: "float32, float16 or int32",
        received: m.dtype,
      });
    }
    if (m.shape.length === 0) {
      throw new ShapeError({
        op,
        argument: name,
        expected: "a tensor of rank >= 1 (for a scalar factor use mul)",
        received: "shape []",
      });
    }
  }
  const dtype = promoteTypes(am.dtype, bm.dtype) as MatmulDType;
  const halfAccumulate = checkAccumulate(op, options.accumulate, dtype);
  // 1-D operands: a [K] is a row [1, K], b [K] a column [K, 1]; transposing them changes nothing.
  const aMatrix = am.shape.length === 1 ? [1, am.shape[0]] : [...am.shape];
  const bMatrix = bm.shape.length === 1 ? [bm.shape[0], 1] : [...bm.shape];
  if (transposeA && am.shape.length > 1) swapLast(aMatrix);
  if (transposeB && bm.shape.length > 1) swapLast(bMatrix);
  const [m, k] = aMatrix.slice(-2);
  const [k2, n] = bMatrix.slice(-2);
  const shapes = `${names[0]} ${describe(am.shape)}${transposeA ? " (transposed)" : ""}, ${
    names[1]
  } ${describe(bm.shape)}${transposeB ? " (transposed)" : ""}`;
  if (k !== k2) {
    throw new ShapeError({
      op,
      argument: names[1],
      expected: `${
        bm.shape.length === 1 ? "length" : "a second-to-last axis"
      } of ${k} to match the last axis of ${names[0]}`,
      received: `${k2} (shapes ${shapes})`,
    });
  }
  const aBatch = aMatrix.slice(0, -2);
  const bBatch = bMatrix.slice(0, -2);
  const rank = Math.max(aBatch.length, bBatch.length);
  const batch: number[] = [];
  for (let i = 0; i < rank; i++) {
    const da = aBatch[aBatch.length - rank + i] ?? 1;
    const db = bBatch[bBatch.length - rank + i] ?? 1;
    if (da !== db && da !== 1 && db !== 1) {
      throw new ShapeError({
        op,
        argument: names[1],
        expected: `batch axes that broadcast with ${names[0]}'s ${describe(aBatch)}`,
        received: `${describe(bBatch)} (shapes ${shapes})`,
      });
    }
    batch.push(da === 1 ? db : da);
  }
  const outShape = [...batch];
  if (am.shape.length > 1) outShape.push(m);
  if (bm.shape.length > 1) outShape.push(n);
  return {
    dtype,
    m,
    n,
    k,
    batch,
    outShape,
    halfAccumulate,
    transposeA,
    transposeB,
    aShape: am.shape,
    bShape: bm.shape,
  };
}

function swapLast(shape: number[]): void {
  const r = shape.length;
  [shape[r - 2], shape[r - 1]] = [shape[r - 1], shape[r - 2]];
}

/**
 * A pending elementwise operand as a prologue over its inputs' matrix views, or null where it
 * must be computed first: it reads the element index or another product, has no view or too many
 * inputs, or an input has negative strides.
 */
function prologueOf(x: Tensor, op: string, matrix: (v: View) => View): Prologue | null {
  const pending = x._pending(op);
  if (!pending || pending.readsIndex || pending.producer || pending.backend.name !== "gpu") {
    return null;
  }
  const { expr, inputs } = bind(pending.expr);
  if (inputs.length === 0 || inputs.length > MAX_PROLOGUE_INPUTS) return null;
  if (inputs.some((v) => v.strides.some((s) => s < 0))) return null;
  return { expr, inputs: inputs.map(matrix), label: fusedLabel(pending) };
}

/** Among a prologue's inputs, the one whose layout decides the loads: varying along both axes. */
function mainInput(inputs: readonly View[]): View {
  const r = inputs[0].strides.length - 2;
  return inputs.find((v) => v.strides[r] !== 0 && v.strides[r + 1] !== 0) ?? inputs[0];
}

/**
 * The operands as views of `[...batch, M, K]` and `[...batch, K, N]`: promoted to the common
 * dtype, 1-D ones given their unit axis, transposes applied to the strides, batch axes broadcast
 * (stride 0), axes of length 1 given stride 0, negative strides copied away. With `fuse`, a
 * pending elementwise operand (the promotion's cast included) becomes a prologue instead.
 */
function operandViews(
  op: string,
  a: Tensor,
  b: Tensor,
  p: ReturnType<typeof validate>,
  fuse = false,
): Operands {
  const temps: Tensor[] = [];
  const prepare = (
    t: Tensor,
    matrix: (v: View) => View,
  ): { view: View; prologue: Prologue | null } => {
    let x = t;
    if (x._meta(op).dtype !== p.dtype) temps.push(x = cast(x, p.dtype));
    const prologue = fuse ? prologueOf(x, op, matrix) : null;
    if (prologue) return { view: mainInput(prologue.inputs), prologue };
    if (x._view(op).strides.some((s) => s < 0)) temps.push(x = clone(x));
    return { view: matrix(x._view(op)), prologue: null };
  };
  const batchView = (v: View, rows: number, cols: number): View => {
    const lead = p.batch.length - (v.shape.length - 2);
    const shape = [...p.batch, rows, cols];
    const strides = shape.map((d, i) => {
      if (d === 1) return 0;
      const j = i - lead;
      return j < 0 || v.shape[j] === 1 ? 0 : v.strides[j];
    });
    return { ...v, shape, strides };
  };
  const aView = prepare(a, (v) => {
    let shape = [...v.shape];
    let strides = [...v.strides];
    if (shape.length === 1) {
      shape = [1, shape[0]];
      strides = [0, strides[0]];
    } else if (p.transposeA) {
      swapLast(shape);
      swapLast(strides);
    }
    return batchView({ ...v, shape, strides }, p.m, p.k);
  });
  const bView = prepare(b, (v) => {
    let shape = [...v.shape];
    let strides = [...v.strides];
    if (shape.length === 1) {
      shape = [shape[0], 1];
      strides = [strides[0], 0];
    } else if (p.transposeB) {
      swapLast(shape);
      swapLast(strides);
    }
    return batchView({ ...v, shape, strides }, p.k, p.n);
  });
  return {
    a: aView.view,
    b: bView.view,
    aPrologue: aView.prologue,
    bPrologue: bView.prologue,
    temps,
  };
}

/** The views an operand reads: its prologue's inputs, or itself. */
function operandInputs(view: View, prologue: Prologue | null): View[] {
  return prologue ? prologue.inputs : [view];
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
  activation: LinearActivation | null;
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
  p: Problem,
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
  p: Problem,
  x: Operands,
  parts: EpilogueParts,
  custom: CustomEpilogue | null = null,
): GpuStorage {
  backend._check(op, [p.dtype]);
  const r = p.batch.length;
  const [aOuter, aK] = [x.a.strides[r], x.a.strides[r + 1]];
  const [bK, bOuter] = [x.b.strides[r], x.b.strides[r + 1]];
  // A's own batch axes as one run of matrices (broadcast ones stay broadcast in the copy's view).
  const aBatch = x.aPrologue ? null : batchRun(p.batch, x.a.strides.slice(0, r));
  const choice = planMatmul(backend.caps, {
    m: p.m,
    n: p.n,
    k: p.k,
    batch: sizeOf(p.batch),
    dtype: p.dtype,
    transposeA: aK !== 1 && aOuter === 1,
    transposeB: bK === 1 && bOuter !== 1,
    halfAccumulate: p.halfAccumulate,
    aCopyable: aBatch !== null,
  });
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
  p: Problem,
  a: View,
  run: { count: number; stride: number },
): { storage: GpuStorage; view: View } {
  const r = p.batch.length;
  const { m, k } = p;
  const storage = backend._alloc(op, a.dtype, run.count * m * k);
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
  backend._transposeCopy(label, (a.storage as GpuStorage).buffer, storage.buffer, {
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
  p: Problem,
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
  const out = backend._alloc(op, p.dtype, batches * m * n);
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
    const pipeline = backend._pipeline(
      matmulKey(spec),
      buffers.length,
      () => generateMatmul(spec),
      writable,
    );
    backend._dispatch(
      op,
      pipeline,
      buffers,
      matmulUniforms(u),
      backend._grid(groups * threads, threads),
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
    prologue: Prologue | null,
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
    const partials = backend._alloc(op, "float32", persistent * 2 * choice.tileM * choice.tileN);
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
  const partials = backend._alloc(
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

/** Arguments of one call of gemm_f32/gemm_i32: c, a, b, m, n, k, sam, sak, sbk, sbn, ldc, workspace. */
const GEMM_ARGS = 12;
/** asm/matmul.ts's micro-tile (MR rows by NR columns): thread boundaries fall on whole tiles. */
const GEMM_TILE_ROWS = 4;
const GEMM_TILE_COLUMNS = 8;

/**
 * Where thread t's range of C starts, out of `threads` equal ranges of the batch's rows (or
 * columns) laid end to end (`count` matrices of `extent` each): rounded to a whole tile within its
 * matrix, so that only matrix edges make partial tiles. Non-decreasing in t; `threads` gives the
 * end.
 */
function splitPoint(t: number, threads: number, count: number, extent: number, tile: number) {
  const target = Math.round((count * extent * t) / threads);
  const matrix = Math.floor(target / extent);
  const within = Math.min(extent, Math.round((target - matrix * extent) / tile) * tile);
  return matrix * extent + within;
}

/**
 * Runs a validated, non-empty product with K > 0 on WASM; returns [...batch, M, N] storage of the
 * compute dtype (float32 for float16). `planWasmGemm` decides how many threads share it: each
 * thread gets a range of C's rows (or columns) over the whole batch, as GEMM calls on its own
 * workspace; each element is computed exactly as a single thread would (asm/matmul.ts).
 */
function runWasm(op: string, backend: WasmHost, p: Problem, x: Operands): WasmStorage {
  const { m, n, k } = p;
  const compute: DType = p.dtype === "int32" ? "int32" : "float32";
  const r = p.batch.length;
  const count = sizeOf(p.batch);
  const choice = planWasmGemm({
    m,
    n,
    k,
    batch: count,
    cores: backend.shared ? wasmThreadCapacity() : 1,
  });
  let threads = 1;
  if (choice.threads > 1 && backend.shared) {
    // Started on the first large product; this one runs on the threads that are ready now.
    void startWasmThreads();
    threads = Math.min(choice.threads, wasmThreadCount());
  }
  const rows = choice.split === "rows";
  const extent = rows ? m : n;
  const tile = rows ? GEMM_TILE_ROWS : GEMM_TILE_COLUMNS;
  // No thread without at least a tile's worth of rows (or columns).
  threads = Math.max(1, Math.min(threads, Math.ceil((count * extent) / tile)));
  // float16 is widened to float32 first (a contiguous copy; the product is O(K) times larger).
  const widen = (v: View): Value =>
    v.dtype === "float16"
      ? backend._cast(op, { view: v, temp: false }, "float32", v.shape)
      : { view: v, temp: false };
  const a = widen(x.a);
  const b = widen(x.b);
  const out = backend._alloc(op, compute, count * m * n);
  const workspaceBytes =
    (backend._kernel("gemm_workspace") as unknown as (...args: number[]) => number)(m, n, k);
  const workspaces: WasmStorage[] = [];
  try {
    for (let t = 0; t < threads; t++) {
      workspaces.push(backend._alloc(op, "float32", Math.ceil(workspaceBytes / 4)));
    }
    const name = compute === "int32" ? "gemm_i32" : "gemm_f32";
    const kernel = backend._kernel(name);
    const aPtr = backend._pointer(a.view);
    const bPtr = backend._pointer(b.view);
    const aStrides = broadcastStrides(a.view, x.a);
    const bStrides = broadcastStrides(b.view, x.b);
    const [sam, sak, sbk, sbn] = [aStrides[r], aStrides[r + 1], bStrides[r], bStrides[r + 1]];
    // Each batch matrix's operand addresses (broadcast batch axes have stride 0).
    const aBase: number[] = [];
    const bBase: number[] = [];
    const index = new Array<number>(r).fill(0);
    for (let i = 0; i < count; i++) {
      let aOff = 0, bOff = 0;
      for (let d = 0; d < r; d++) {
        aOff += index[d] * aStrides[d];
        bOff += index[d] * bStrides[d];
      }
      aBase.push(aPtr + aOff * 4);
      bBase.push(bPtr + bOff * 4);
      for (let d = r - 1; d >= 0; d--) {
        if (++index[d] < p.batch[d]) break;
        index[d] = 0;
      }
    }
    const shares: number[][] = [];
    for (let t = 0; t < threads; t++) {
      const start = splitPoint(t, threads, count, extent, tile);
      const end = splitPoint(t + 1, threads, count, extent, tile);
      const calls: number[] = [];
      for (let i = Math.floor(start / extent); i * extent < end; i++) {
        const lo = Math.max(start, i * extent) - i * extent;
        const hi = Math.min(end, (i + 1) * extent) - i * extent;
        if (hi <= lo) continue;
        const c = out.ptr + i * m * n * 4;
        calls.push(
          ...(rows
            ? [c + lo * n * 4, aBase[i] + lo * sam * 4, bBase[i], hi - lo, n]
            : [c + lo * 4, aBase[i], bBase[i] + lo * sbn * 4, m, hi - lo]),
          k,
          sam,
          sak,
          sbk,
          sbn,
          n,
          workspaces[t].ptr,
        );
      }
      shares.push(calls);
    }
    if (threads === 1) {
      const calls = shares[0];
      for (let i = 0; i < calls.length; i += GEMM_ARGS) kernel(...calls.slice(i, i + GEMM_ARGS));
    } else runShares(backend.allocator.memory, name, kernel, GEMM_ARGS, shares);
  } catch (e) {
    backend.free(out);
    throw e;
  } finally {
    for (const w of workspaces) backend.free(w);
    backend._release(a);
    backend._release(b);
  }
  return out;
}

/** Strides of a (possibly widened, hence contiguous) operand, keeping the broadcast zeros. */
function broadcastStrides(v: View, original: View): number[] {
  if (v === original) return [...v.strides];
  // A widened copy is contiguous over the original (broadcast) shape: recompute its strides,
  // and keep stride 0 where the original broadcast or had length 1.
  const strides = contiguousStrides(v.shape);
  return strides.map((s, i) => (original.strides[i] === 0 ? 0 : s));
}

/** Validated inputs of `linear`'s epilogue. */
function linearParts(op: string, options: LinearOptions, p: Problem, device: string): {
  bias: Tensor | null;
  activation: LinearActivation | null;
} {
  const activation = options.activation ?? "none";
  if (typeof activation !== "string" || !ACTIVATIONS.includes(activation)) {
    throw new ValueError({
      op,
      argument: "options.activation",
      expected: '"relu", "gelu", "silu", "tanh", "sigmoid" or "none"',
      received: describe(activation),
    });
  }
  let bias: Tensor | null = null;
  if (options.bias !== undefined) {
    bias = checkTensor(op, "options.bias", options.bias);
    const meta = bias._meta(op, "options.bias");
    if (meta.device !== device) {
      throw new DeviceError({
        op,
        argument: "options.bias",
        expected: `a tensor on the same device as x ("${device}"); use .to()`,
        received: `a tensor on "${meta.device}"`,
      });
    }
    if (meta.dtype !== "float32" && meta.dtype !== "float16") {
      throw new DTypeError({
        op,
        argument: "options.bias",
        expected: "float32 or float16",
        received: meta.dtype,
      });
    }
    if (meta.shape.length !== 1 || meta.shape[0] !== p.n) {
      throw new ShapeError({
        op,
        argument: "options.bias",
        expected: `shape [${p.n}] (weight's first axis)`,
        received: `shape ${describe(meta.shape)}`,
      });
    }
  }
  return { bias, activation: activation === "none" ? null : activation as LinearActivation };
}

/** Runs a validated product with an optional epilogue on the operands' device. */
function product(
  op: string,
  a: Tensor,
  b: Tensor,
  p: ReturnType<typeof validate>,
  bias: Tensor | null,
  activation: LinearActivation | null,
): Tensor {
  const device = a._meta(op).device;
  const size = sizeOf(p.outShape);
  const epilogueExpr = (value: Expr, biasLeaf: Expr | null): Expr => {
    let e = E.cast(value, "float32");
    if (biasLeaf) e = E.binary("add", e, E.cast(biasLeaf, "float32"));
    if (activation) e = E.unary(activation, e);
    return E.cast(e, p.dtype);
  };
  if (size === 0 || p.k === 0) {
    // No products to sum: zeros, through the epilogue.
    const zero = E.constant(0, p.dtype);
    if (!bias && !activation) return evaluate(op, device, zero, [], p.outShape);
    const inputs: View[] = [];
    let leaf: Expr | null = null;
    if (bias) {
      const view = bias._view(op, "options.bias");
      inputs.push(broadcastLast(view, p.outShape));
      leaf = E.input(0, view.dtype);
    }
    return evaluate(op, device, epilogueExpr(zero, leaf), inputs, p.outShape);
  }
  // Refuse an output the device cannot hold before anything is allocated.
  const deviceBackend = runtime().backend(device, op);
  deviceBackend.checkAllocation(op, p.dtype, size);
  const onGpu = deviceBackend.name === "gpu";
  // Pending elementwise operands are computed as the kernel loads them (a prologue), except in
  // matrix-vector products (M = 1 or N = 1), whose kernels read their operands as they are.
  const x = operandViews(
    op,
    a,
    b,
    p,
    onGpu && runtime().fusion && p.m > 1 && p.n > 1 &&
      planMatmulPrologue({ m: p.m, n: p.n, k: p.k, batch: sizeOf(p.batch) }),
  );
  // Named after the ops fused in front of the product too, for profiles and explain.
  const label = [x.aPrologue?.label, x.bPrologue?.label, op].filter(Boolean).join("+");
  let biasTensor = bias;
  try {
    if (onGpu) {
      if (biasTensor) {
        const v = biasTensor._view(op);
        if (v.strides[0] !== 1 && p.n > 1) x.temps.push(biasTensor = clone(biasTensor));
      }
      const backend = deviceBackend as GpuHost;
      if (
        !biasTensor && !activation && runtime().fusion && p.outShape.length === p.batch.length + 2
      ) {
        // Lazy: elementwise consumers of the product fold into its kernel as an epilogue.
        const operandInputCount = operandInputs(x.a, x.aPrologue).length +
          operandInputs(x.b, x.bPrologue).length;
        const producer: Producer = {
          op: label,
          dtype: p.dtype,
          run(runLabel, epilogue, inputs) {
            // The epilogue's constants follow the prologues'.
            const base = [x.aPrologue, x.bPrologue].reduce(
              (n, pro) => n + (pro ? constantNodes(pro.expr).length : 0),
              0,
            );
            const custom = epilogue ? fusedEpilogue(epilogue, inputs, p, base) : null;
            // The operands' inputs, the epilogue's and C must fit the device's bindings.
            const bindings = operandInputCount + (custom?.buffers.length ?? 0) + 1;
            if (
              epilogue &&
              (!custom || bindings > backend.caps.limits.maxStorageBuffersPerShaderStage)
            ) return null;
            return runGpu(runLabel, backend, p, x, { bias: null, activation: null }, custom);
          },
        };
        // It holds the operands' storage (a prologue's inputs') until it runs.
        const pending = makePending(
          label,
          backend,
          E.producer(p.dtype),
          p.outShape,
          [...operandInputs(x.a, x.aPrologue), ...operandInputs(x.b, x.bPrologue)],
          [],
          producer,
        );
        return new Tensor(pending);
      }
      const storage = runGpu(label, backend, p, x, {
        bias: biasTensor ? biasTensor._view(op) : null,
        activation,
      });
      return Tensor._fromStorage(storage, p.dtype, p.outShape);
    }
    const backend = deviceBackend as WasmHost;
    const storage = runWasm(op, backend, p, x);
    const compute: DType = p.dtype === "int32" ? "int32" : "float32";
    const result = Tensor._fromStorage(storage, compute, p.outShape);
    if (!biasTensor && !activation && compute === p.dtype) return result;
    try {
      const inputs: View[] = [result._view(op)];
      let leaf: Expr | null = null;
      if (biasTensor) {
        const view = biasTensor._view(op, "options.bias");
        inputs.push(broadcastLast(view, p.outShape));
        leaf = E.input(1, view.dtype);
      }
      return evaluate(op, device, epilogueExpr(E.input(0, compute), leaf), inputs, p.outShape);
    } finally {
      result.dispose();
    }
  } finally {
    for (const t of x.temps) t.dispose();
  }
}

/** A 1-D view along the last axis of `shape` (stride 0 elsewhere). */
function broadcastLast(v: View, shape: readonly number[]): View {
  const strides = shape.map((d, i) => (i === shape.length - 1 && d !== 1 ? v.strides[0] : 0));
  return { ...v, shape: [...shape], strides };
}

/**
 * Matrix product with NumPy's `matmul` semantics: the last two axes multiply
 * (`[..., M, K] @ [..., K, N] -> [..., M, N]`), the others broadcast; a 1-D `a` is a row and a 1-D
 * `b` a column, and the added axis is removed from the result. `transposeA`/`transposeB` use the
 * transpose of the last two axes, read through strides (as are transposed views). float32,
 * float16 (float32 accumulation unless `accumulate: "float16"`) and int32 (wrapping); mixed dtypes
 * promote. K = 0 gives zeros.
 *
 * Errors: {@link ShapeError} (argument "b") when inner axes differ or batch axes do not broadcast,
 * and for rank-0 operands; {@link DTypeError} for bool and uint32.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const a = gyre.tensor([[1, 2, 3], [4, 5, 6]]);
 * const b = gyre.tensor([[1, 0], [0, 1], [1, 1]]);
 * const c = gyre.matmul(a, b); // [[4, 5], [10, 11]]
 * const d = gyre.matmul(a, a, { transposeB: true }); // a @ a^T, shape [2, 2]
 * ```
 */
export function matmul(a: Tensor, b: Tensor, options: MatmulOptions = {}): Tensor {
  const op = "matmul";
  checkTensor(op, "a", a);
  checkTensor(op, "b", b);
  _checkOptions(op, options);
  const p = validate(op, a, b, options);
  return product(op, a, b, p, null, null);
}

/**
 * A fully connected layer: `x @ weight^T + bias`, then `activation`, with weight [out, in] (as
 * PyTorch's `nn.Linear`), x [..., in] and bias [out]. On the GPU, bias and activation run in the
 * matmul kernel's epilogue: one dispatch (two when K is split). float32 and float16.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const x = gyre.tensor([[1, 2]]);
 * const w = gyre.tensor([[1, 0], [0, 1], [1, -1]]);
 * const y = gyre.linear(x, w, { bias: gyre.tensor([0, 1, 0]), activation: "relu" }); // [[1, 3, 0]]
 * ```
 */
export function linear(x: Tensor, weight: Tensor, options: LinearOptions = {}): Tensor {
  const op = "linear";
  checkTensor(op, "x", x);
  checkTensor(op, "weight", weight);
  _checkOptions(op, options);
  const wm = weight._meta(op, "weight");
  if (wm.shape.length !== 2) {
    throw new ShapeError({
      op,
      argument: "weight",
      expected: "a 2-D [out, in] tensor",
      received: `shape ${describe(wm.shape)}`,
    });
  }
  for (const [t, name] of [[x, "x"], [weight, "weight"]] as const) {
    const dtype = t._meta(op, name).dtype;
    if (dtype !== "float32" && dtype !== "float16") {
      throw new DTypeError({ op, argument: name, expected: "float32 or float16", received: dtype });
    }
  }
  const p = validate(op, x, weight, { transposeB: true, accumulate: options.accumulate }, [
    "x",
    "weight",
  ]);
  const parts = linearParts(op, options, p, x._meta(op).device);
  return product(op, x, weight, p, parts.bias, parts.activation);
}
