/**
 * Matrix products: `matmul` with NumPy's semantics (1-D operands promoted and the added axis
 * removed, batch axes broadcast, any M, N, K including 0) plus transpose options read through
 * strides, and `linear` (`x @ weight^T + bias`, then an activation), whose bias and activation run
 * in the GPU kernel's epilogue rather than as extra dispatches.
 *
 * This module validates, builds a `MatmulJob` (src/contract/matmul.ts) and calls
 * `Backend.matmul`. The GPU (src/gpu/matmul.ts) runs the kernels of src/gpu/_codegen_matmul.ts as
 * `planMatmul` chooses (tiled, split-K, or matrix-vector for M = 1 or N = 1); WASM
 * (src/wasm/matmul.ts) runs the packed SIMD GEMM of asm/matmul.ts, shared between threads
 * (src/wasm/threads.ts) as `planWasmGemm` chooses.
 * Both read operands through their strides (transposed and broadcast views cost no copy); views
 * with negative strides are copied first. On the GPU, an operand that is a pending elementwise
 * result (`matmul(x.mul(s).relu(), w)`) is computed by the tiled kernels as they load it (a fused
 * prologue) instead of in a kernel of its own.
 * @module
 */
import { taped } from "../_tape.ts";
import { backendOf, type View } from "../contract/backend.ts";
import {
  type MatmulActivation,
  type MatmulDType,
  type MatmulJob,
  type MatmulProblem,
  type MatmulPrologue,
  operandInputs,
} from "../contract/matmul.ts";
import { type Shape, sizeOf } from "../core/shape.ts";
import { type DType, promoteTypes } from "../core/dtype.ts";
import { describe, DeviceError, DTypeError, ShapeError, ValueError } from "../core/errors.ts";
import { bind, fusedLabel, makePending, type Producer } from "../_lazy.ts";
import { planMatmulPrologue } from "../plans/mod.ts";
import { planOverrides } from "../plans/overrides.ts";
import { backendFor, runtime } from "../runtime.ts";
import { metaOf, pendingOf, Tensor, tensorFromStorage, viewOf } from "../tensor.ts";
import { E, type Expr } from "../ir/expr.ts";
import { evaluate } from "./_dispatch.ts";
import { cast } from "./elementwise.ts";
import { clone } from "./shape.ts";
import { checkOptions } from "../core/options.ts";

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
export type LinearActivation = MatmulActivation;

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

/**
 * Most inputs one operand's fused prologue reads: with both operands at the most, and C, 7 of the
 * 8 storage bindings WebGPU guarantees.
 */
const MAX_PROLOGUE_INPUTS = 3;

/**
 * Operands after validation, with what must be disposed afterwards. An operand with a prologue
 * has no buffer of its own: its view is then the prologue input whose layout decides how tiles
 * are loaded (the first that varies along both matrix axes).
 */
interface Operands {
  a: View;
  b: View;
  aPrologue: MatmulPrologue | null;
  bPrologue: MatmulPrologue | null;
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
): MatmulProblem & { transposeA: boolean; transposeB: boolean; aShape: Shape; bShape: Shape } {
  const am = metaOf(a, op, names[0]);
  const bm = metaOf(b, op, names[1]);
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
function prologueOf(x: Tensor, op: string, matrix: (v: View) => View): MatmulPrologue | null {
  const pending = pendingOf(x, op);
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
  ): { view: View; prologue: MatmulPrologue | null } => {
    let x = t;
    if (metaOf(x, op).dtype !== p.dtype) temps.push(x = cast(x, p.dtype));
    const prologue = fuse ? prologueOf(x, op, matrix) : null;
    if (prologue) return { view: mainInput(prologue.inputs), prologue };
    if (viewOf(x, op).strides.some((s) => s < 0)) temps.push(x = clone(x));
    return { view: matrix(viewOf(x, op)), prologue: null };
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

/** Validated inputs of `linear`'s epilogue. */
function linearParts(op: string, options: LinearOptions, p: MatmulProblem, device: string): {
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
    const meta = metaOf(bias, op, "options.bias");
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
  const device = metaOf(a, op).device;
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
      const view = viewOf(bias, op, "options.bias");
      inputs.push(broadcastLast(view, p.outShape));
      leaf = E.input(0, view.dtype);
    }
    return evaluate(op, device, epilogueExpr(zero, leaf), inputs, p.outShape);
  }
  // Refuse an output the device cannot hold before anything is allocated.
  const deviceBackend = backendFor(device, op);
  deviceBackend.checkAllocation(op, p.dtype, size);
  const onGpu = deviceBackend.name === "gpu";
  // Pending elementwise operands are computed as the kernel loads them (a prologue), except in
  // matrix-vector products (M = 1 or N = 1), whose kernels read their operands as they are.
  const overrides = planOverrides();
  const x = operandViews(
    op,
    a,
    b,
    p,
    onGpu && runtime().fusion && p.m > 1 && p.n > 1 &&
      planMatmulPrologue({ m: p.m, n: p.n, k: p.k, batch: sizeOf(p.batch) }, overrides.matmul),
  );
  // Named after the ops fused in front of the product too, for profiles and explain.
  const label = [x.aPrologue?.label, x.bPrologue?.label, op].filter(Boolean).join("+");
  // The job without its label and epilogue: the operands, as views (and prologues on the GPU).
  const job: Omit<MatmulJob, "op" | "bias" | "activation"> = {
    overrides,
    problem: p,
    a: x.a,
    b: x.b,
    aPrologue: x.aPrologue,
    bPrologue: x.bPrologue,
  };
  let biasTensor = bias;
  try {
    if (onGpu) {
      if (biasTensor) {
        const v = viewOf(biasTensor, op);
        if (v.strides[0] !== 1 && p.n > 1) x.temps.push(biasTensor = clone(biasTensor));
      }
      if (
        !biasTensor && !activation && runtime().fusion && p.outShape.length === p.batch.length + 2
      ) {
        // Lazy: elementwise consumers of the product fold into its kernel as an epilogue (the
        // device returns null where they do not fit it).
        const producer: Producer = {
          op: label,
          dtype: p.dtype,
          run(runLabel, epilogue, inputs) {
            const result = backendOf(x.a).matmul({
              ...job,
              op: runLabel,
              bias: null,
              activation: null,
              epilogue: epilogue ? { expr: epilogue, inputs } : undefined,
            });
            return result ? result.output : null;
          },
        };
        // It holds the operands' storage (a prologue's inputs') until it runs.
        const pending = makePending(
          label,
          deviceBackend,
          E.producer(p.dtype),
          p.outShape,
          [...operandInputs(x.a, x.aPrologue), ...operandInputs(x.b, x.bPrologue)],
          [],
          producer,
        );
        return new Tensor(pending);
      }
      // No fused epilogue: the GPU path always runs.
      const { output } = backendOf(x.a).matmul({
        ...job,
        op: label,
        bias: biasTensor ? viewOf(biasTensor, op) : null,
        activation,
      })!;
      return tensorFromStorage(output, p.dtype, p.outShape);
    }
    // WASM runs the product alone, in its compute dtype (float32 for float16); the epilogue and
    // the cast back run here.
    const { output, dtype: compute } = backendOf(x.a).matmul({
      ...job,
      op,
      bias: null,
      activation: null,
    })!;
    const result = tensorFromStorage(output, compute, p.outShape);
    if (!biasTensor && !activation && compute === p.dtype) return result;
    try {
      const inputs: View[] = [viewOf(result, op)];
      let leaf: Expr | null = null;
      if (biasTensor) {
        const view = viewOf(biasTensor, op, "options.bias");
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
  return taped("matmul", [a, b], { ...options }, () => matmulOf(a, b, options));
}

function matmulOf(a: Tensor, b: Tensor, options: MatmulOptions = {}): Tensor {
  const op = "matmul";
  checkTensor(op, "a", a);
  checkTensor(op, "b", b);
  checkOptions(op, options, ["transposeA", "transposeB", "accumulate"]);
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
  return taped(
    "linear",
    [x, weight, options?.bias],
    { ...options },
    () => linearOf(x, weight, options),
  );
}

function linearOf(x: Tensor, weight: Tensor, options: LinearOptions = {}): Tensor {
  const op = "linear";
  checkTensor(op, "x", x);
  checkTensor(op, "weight", weight);
  checkOptions(op, options, ["bias", "activation", "accumulate"]);
  const wm = metaOf(weight, op, "weight");
  if (wm.shape.length !== 2) {
    throw new ShapeError({
      op,
      argument: "weight",
      expected: "a 2-D [out, in] tensor",
      received: `shape ${describe(wm.shape)}`,
    });
  }
  for (const [t, name] of [[x, "x"], [weight, "weight"]] as const) {
    const dtype = metaOf(t, op, name).dtype;
    if (dtype !== "float32" && dtype !== "float16") {
      throw new DTypeError({ op, argument: name, expected: "float32 or float16", received: dtype });
    }
  }
  const p = validate(op, x, weight, { transposeB: true, accumulate: options.accumulate }, [
    "x",
    "weight",
  ]);
  const parts = linearParts(op, options, p, metaOf(x, op).device);
  return product(op, x, weight, p, parts.bias, parts.activation);
}
