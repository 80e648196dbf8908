/**
 * Softmax and normalisation: `softmax`, `logSoftmax`, `layerNorm`, `rmsNorm`, `groupNorm` and
 * `batchNorm`, with PyTorch semantics. All but inference-mode batchNorm are row operations: the
 * normalised axes of a (float32 or float16) tensor form rows, which the GPU runs through the row
 * kernels of src/gpu/_codegen_rows.ts (one fused pass per row where a row fits in registers,
 * chunk statistics plus a normalising pass where it does not; see `planRows`) and WASM through
 * asm/rows.ts. Axes other than the last are read through strides in place, never copied first.
 * Inference-mode batchNorm is one fused elementwise kernel over the given running statistics.
 * @module
 */
import { taped } from "../_tape.ts";
import { backendOf, type View } from "../contract/backend.ts";
import {
  broadcastShapes,
  isContiguous,
  normalizeAxes,
  normalizeAxis,
  sameShape,
  sizeOf,
} from "../core/shape.ts";
import {
  checkNumber,
  describe,
  DeviceError,
  DTypeError,
  ShapeError,
  ValueError,
} from "../core/errors.ts";
import type { RowsJob, RowsResult } from "../contract/rows.ts";
import { metaOf, pendingOf, Tensor, tensorFromStorage, viewOf } from "../tensor.ts";
import { planOverrides } from "../plans/overrides.ts";
import { broadcastView, evaluate, runElementwise } from "./_dispatch.ts";
import { E, type Expr } from "../ir/expr.ts";
import { bind, fusedLabel, makePending, type Producer } from "../_lazy.ts";
import { runtime } from "../runtime.ts";
import { checkOptions } from "../core/options.ts";

// ---------------------------------------------------------------------------------------------
// Options and results.

/**
 * Options of {@link softmax} and {@link logSoftmax}.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const options: gyre.SoftmaxOptions = { axis: 0 };
 * ```
 */
export interface SoftmaxOptions {
  /** The axis to normalise over (negative counts from the end). Default -1. */
  axis?: number;
}

/**
 * Options of {@link layerNorm}.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const options: gyre.LayerNormOptions = { axis: [-2, -1], eps: 1e-6 };
 * ```
 */
export interface LayerNormOptions {
  /** Axes to normalise over, any set (negative counts from the end). Default -1. */
  axis?: number | readonly number[];
  /** Scale, broadcastable to the normalised axes' shape (in increasing axis order). */
  weight?: Tensor;
  /** Shift, broadcastable to the normalised axes' shape. */
  bias?: Tensor;
  /** Added to the variance. Default 1e-5. */
  eps?: number;
}

/**
 * Options of {@link rmsNorm}.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const options: gyre.RmsNormOptions = { weight: gyre.ones([8]) };
 * ```
 */
export interface RmsNormOptions {
  /** Axes to normalise over. Default -1. */
  axis?: number | readonly number[];
  /** Scale, broadcastable to the normalised axes' shape. */
  weight?: Tensor;
  /** Added to the mean square. Default 1e-6. */
  eps?: number;
}

/**
 * Options of {@link groupNorm}.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const options: gyre.GroupNormOptions = { groups: 32, eps: 1e-5 };
 * ```
 */
export interface GroupNormOptions {
  /** Groups the channels (axis 1) are split into; must divide the channel count. */
  groups: number;
  /** Per-channel scale, shape [C]. */
  weight?: Tensor;
  /** Per-channel shift, shape [C]. */
  bias?: Tensor;
  /** Added to the variance. Default 1e-5. */
  eps?: number;
}

/**
 * Options of {@link batchNorm}.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const options: gyre.BatchNormOptions = { training: true, momentum: 0.1 };
 * ```
 */
export interface BatchNormOptions {
  /** Running mean, shape [C]: required for inference; in training, updated with `momentum`. */
  mean?: Tensor;
  /** Running variance, shape [C]: required for inference; in training, updated likewise. */
  variance?: Tensor;
  /** Per-channel scale, shape [C]. */
  weight?: Tensor;
  /** Per-channel shift, shape [C]. */
  bias?: Tensor;
  /** Added to the variance. Default 1e-5. */
  eps?: number;
  /** Normalise with the batch's own statistics. Default false. */
  training?: boolean;
  /** Weight of the batch statistics in the running ones (training). Default 0.1. */
  momentum?: number;
}

/**
 * What training-mode {@link batchNorm} returns.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const r: gyre.BatchNormTrainingResult = gyre.batchNorm(gyre.ones([2, 3]), { training: true });
 * ```
 */
export interface BatchNormTrainingResult {
  /** The normalised input. */
  output: Tensor;
  /** Per-channel batch mean, float32 [C]. */
  mean: Tensor;
  /** Per-channel biased batch variance (divided by n), float32 [C]: what normalised `output`. */
  variance: Tensor;
  /** The unbiased batch variance (divided by n - 1), float32 [C]: what PyTorch folds into running_var. */
  unbiasedVariance: Tensor;
  /** `(1 - momentum) * options.mean + momentum * mean`, when running statistics were given. */
  runningMean?: Tensor;
  /** `(1 - momentum) * options.variance + momentum * unbiasedVariance`, likewise. */
  runningVariance?: Tensor;
}

// ---------------------------------------------------------------------------------------------
// Validation.

function checkInput(op: string, x: unknown): View {
  checkInputLazily(op, x);
  return viewOf(x as Tensor, op, "x");
}

/** checkInput without computing a pending x: its shape. */
function checkInputLazily(op: string, x: unknown): readonly number[] {
  if (!(x instanceof Tensor)) {
    throw new ValueError({ op, argument: "x", expected: "a Tensor", received: describe(x) });
  }
  const meta = metaOf(x, op, "x");
  if (meta.dtype !== "float32" && meta.dtype !== "float16") {
    throw new DTypeError({
      op,
      argument: "x",
      expected: "a float32 or float16 tensor",
      received: meta.dtype,
    });
  }
  return meta.shape;
}

/** Most extra inputs a row kernel's prologue reads (with weight, bias, stats and dst: 8). */
const MAX_PROLOGUE_INPUTS = 3;

/**
 * What a row op over `axes` reads: for a pending elementwise x on the GPU whose inputs are all
 * contiguous views of x's shape and whose rows are contiguous, x's first input with the rest of
 * the expression fused in as the row kernel's prologue (`softmax(a.add(b))`: one kernel, no
 * intermediate); otherwise x's view.
 */
function rowSource(
  op: string,
  x: Tensor,
  axes: readonly number[],
): { view: View; prologue?: { expr: Expr; inputs: View[] }; label: string } {
  const pending = runtime().fusion ? pendingOf(x, op, "x") : null;
  if (
    pending && pending.backend.name === "gpu" && !pending.readsIndex && !pending.producer &&
    pending.shape.length > 0
  ) {
    const shape = pending.shape;
    const { expr, inputs } = bind(pending.expr);
    const [first, ...rest] = inputs;
    const fits = (v: View) =>
      sameShape(v.shape, shape) && isContiguous(v.shape, v.strides) && v.offset % 4 === 0;
    // Rows are contiguous when every kept axis longer than 1 comes before every normalised one.
    const kept = shape.map((_, i) => i).filter((i) => !axes.includes(i) && shape[i] > 1);
    const normalised = axes.filter((i) => shape[i] > 1);
    const contiguousRows = kept.length === 0 || normalised.length === 0 ||
      Math.max(...kept) < Math.min(...normalised);
    if (
      first?.dtype === pending.dtype && rest.length <= MAX_PROLOGUE_INPUTS &&
      inputs.every(fits) && contiguousRows
    ) {
      return {
        view: first,
        prologue: { expr, inputs: rest },
        label: `${fusedLabel(pending)}+${op}`,
      };
    }
  }
  return { view: viewOf(x, op, "x"), label: op };
}

function checkEps(op: string, eps: unknown): number {
  return checkNumber(
    op,
    "options.eps",
    eps,
    "a finite number >= 0",
    (v) => v >= 0 && v < Infinity,
  );
}

/**
 * Checks an affine tensor (weight, bias, running statistics): a float tensor on x's device that
 * broadcasts to `shape` (exactly `shape` when `exact`).
 */
function checkParameter(
  op: string,
  argument: string,
  t: unknown,
  device: string,
  shape: readonly number[],
  exact = false,
): Tensor | null {
  if (t === undefined || t === null) return null;
  if (!(t instanceof Tensor)) {
    throw new ValueError({ op, argument, expected: "a Tensor", received: describe(t) });
  }
  const view = viewOf(t, op, argument);
  if (view.dtype !== "float32" && view.dtype !== "float16") {
    throw new DTypeError({
      op,
      argument,
      expected: "a float32 or float16 tensor",
      received: view.dtype,
    });
  }
  if (view.storage.backend.name !== device) {
    throw new DeviceError({
      op,
      argument,
      expected: `a tensor on the same device as x ("${device}"); use .to()`,
      received: `a tensor on "${view.storage.backend.name}"`,
    });
  }
  const expected = exact
    ? `shape [${shape.join(", ")}]`
    : `a shape that broadcasts to [${shape.join(", ")}] (the normalised axes)`;
  let fits = exact ? sameShape(view.shape, shape) : view.shape.length <= shape.length;
  if (fits && !exact) {
    try {
      fits = sameShape(broadcastShapes(op, shape, view.shape, argument), shape);
    } catch {
      fits = false;
    }
  }
  if (!fits) {
    throw new ShapeError({ op, argument, expected, received: `[${view.shape.join(", ")}]` });
  }
  return t;
}

/**
 * The parameter as a float32 contiguous tensor of `shape` at offset 0 (what the kernels index):
 * `t` itself when it already is one, else a copy the caller disposes.
 */
function prepareParameter(op: string, t: Tensor, shape: readonly number[]): Tensor {
  const view = viewOf(t, op);
  if (
    view.dtype === "float32" && view.offset === 0 && sameShape(view.shape, shape) &&
    isContiguous(view.shape, view.strides)
  ) return t;
  return evaluate(
    op,
    view.storage.backend.name,
    E.cast(E.input(0, view.dtype), "float32"),
    [broadcastView(view, shape)],
    shape,
  );
}

// ---------------------------------------------------------------------------------------------
// Row jobs: what both devices run.

/**
 * The view a row kernel reads of an affine tensor (see {@link prepareParameter}), or null; a
 * copy it had to make is pushed onto `temps` for the caller to dispose.
 */
function affineView(
  op: string,
  t: Tensor | null,
  shape: readonly number[],
  temps: Tensor[],
): View | null {
  if (!t) return null;
  const p = prepareParameter(op, t, shape);
  if (p !== t) temps.push(p);
  return viewOf(p, op);
}

/** Runs a row job with prepared affine tensors, disposing the copies it made. */
function rowOp(
  job: Omit<RowsJob, "weight" | "bias" | "overrides">,
  affine: { weight: Tensor | null; bias: Tensor | null; shape: readonly number[] },
): RowsResult {
  const temps: Tensor[] = [];
  const prepare = (t: Tensor | null) => affineView(job.op, t, affine.shape, temps);
  try {
    // No epilogue: the GPU path always runs.
    const full = {
      ...job,
      overrides: planOverrides(),
      weight: prepare(affine.weight),
      bias: prepare(affine.bias),
    };
    return backendOf(full.x).rows(full)!;
  } finally {
    for (const t of temps) t.dispose();
  }
}

/**
 * A row op's result of shape `shape`: on the GPU with fusion on, a pending producer whose
 * elementwise consumers run in the row kernel's epilogue (`softmax(x).mul(2)`: one kernel);
 * otherwise computed now.
 */
function rowResult(
  job: Omit<RowsJob, "weight" | "bias" | "overrides">,
  affine: { weight: Tensor | null; bias: Tensor | null; shape: readonly number[] },
  shape: readonly number[],
): Tensor {
  const x = job.x;
  if (x.storage.backend.name !== "gpu" || !runtime().fusion || job.stats) {
    return tensorFromStorage(rowOp(job, affine).output, x.dtype, shape);
  }
  // Parameters are prepared now and held by the pending node as views (their tensors may be
  // disposed before it runs).
  const temps: Tensor[] = [];
  const prepare = (t: Tensor | null) => affineView(job.op, t, affine.shape, temps);
  try {
    const weight = prepare(affine.weight);
    const bias = prepare(affine.bias);
    const overrides = planOverrides();
    const producer: Producer = {
      op: job.op,
      dtype: x.dtype,
      run(label, epilogue, inputs) {
        const result = backendOf(x).rows({
          ...job,
          overrides,
          op: label,
          weight,
          bias,
          epilogue: epilogue ? { expr: epilogue, inputs } : undefined,
        });
        return result ? result.output : null;
      },
    };
    const views = [x, weight, bias, ...(job.prologue?.inputs ?? [])].filter((v): v is View =>
      v !== null
    );
    return new Tensor(
      makePending(job.op, backendOf(x), E.producer(x.dtype), shape, views, [], producer),
    );
  } finally {
    for (const t of temps) t.dispose();
  }
}

// ---------------------------------------------------------------------------------------------
// The ops.

function softmaxLike(op: "softmax" | "logSoftmax", x: Tensor, options: SoftmaxOptions): Tensor {
  checkOptions(op, options, ["axis"]);
  const shape = checkInputLazily(op, x);
  const axis = options.axis ?? -1;
  // A 0-d tensor is a row of one element (PyTorch accepts dim -1 or 0 for it).
  const scalar = shape.length === 0;
  const normalised = normalizeAxis(op, axis, Math.max(1, shape.length), "options.axis");
  const source = rowSource(op, x, [normalised]);
  const view = source.view;
  const rowView: View = scalar ? { ...view, shape: [1], strides: [1] } : view;
  return rowResult(
    {
      op: source.label,
      kind: op,
      x: rowView,
      axes: [normalised],
      eps: 0,
      indexed: null,
      stats: false,
      prologue: source.prologue,
    },
    { weight: null, bias: null, shape: [] },
    shape,
  );
}

/**
 * Softmax over `axis`: exp(x - max) / sum(exp(x - max)), max-shifted so large inputs do not
 * overflow. As in PyTorch, a row containing NaN or +inf, or of nothing but -inf, is all NaN.
 * float32 or float16 (computed in float32).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const p = gyre.softmax(gyre.tensor([1, 2, 3])); // [0.0900, 0.2447, 0.6652]
 * ```
 */
export function softmax(x: Tensor, options: SoftmaxOptions = {}): Tensor {
  return taped("softmax", [x], { ...options }, () => softmaxOf(x, options));
}

function softmaxOf(x: Tensor, options: SoftmaxOptions = {}): Tensor {
  return softmaxLike("softmax", x, options);
}

/**
 * Log-softmax over `axis`: (x - max) - log(sum(exp(x - max))), more accurate than
 * `log(softmax(x))` for very negative entries. Special values as {@link softmax}; -inf entries of
 * an otherwise finite row stay -inf.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const l = gyre.logSoftmax(gyre.tensor([[0, 0]]), { axis: 1 }); // [[-0.6931, -0.6931]]
 * ```
 */
export function logSoftmax(x: Tensor, options: SoftmaxOptions = {}): Tensor {
  return taped("logSoftmax", [x], { ...options }, () => logSoftmaxOf(x, options));
}

function logSoftmaxOf(x: Tensor, options: SoftmaxOptions = {}): Tensor {
  return softmaxLike("logSoftmax", x, options);
}

function normOverAxes(
  op: "layerNorm" | "rmsNorm",
  x: Tensor,
  options: LayerNormOptions,
  defaultEps: number,
): Tensor {
  checkOptions(
    op,
    options,
    op === "layerNorm" ? ["axis", "weight", "bias", "eps"] : ["axis", "weight", "eps"],
  );
  const xShape = checkInputLazily(op, x);
  const axes = normalizeAxes(op, options.axis ?? -1, xShape.length, "options.axis");
  const eps = checkEps(op, options.eps ?? defaultEps);
  const shape = axes.map((a) => xShape[a]);
  const device = metaOf(x, op, "x").device;
  const weight = checkParameter(op, "options.weight", options.weight, device, shape);
  const bias = op === "layerNorm"
    ? checkParameter(op, "options.bias", options.bias, device, shape)
    : null;
  const source = rowSource(op, x, axes);
  return rowResult(
    {
      op: source.label,
      kind: op,
      x: source.view,
      axes,
      eps,
      indexed: null,
      stats: false,
      prologue: source.prologue,
    },
    { weight, bias, shape },
    xShape,
  );
}

/**
 * Layer normalisation over `axis` (the last by default; any set of axes): (x - mean) /
 * sqrt(var + eps) with the biased variance (two-pass: mean first, then squared deviations), then
 * `* weight + bias`, both broadcast to the normalised axes' shape.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.layerNorm(gyre.tensor([1, 2, 3, 4]), { eps: 0 });
 * // [-1.3416, -0.4472, 0.4472, 1.3416]
 * ```
 */
export function layerNorm(x: Tensor, options: LayerNormOptions = {}): Tensor {
  return taped(
    "layerNorm",
    [x, options?.weight, options?.bias],
    { ...options },
    () => layerNormOf(x, options),
  );
}

function layerNormOf(x: Tensor, options: LayerNormOptions = {}): Tensor {
  return normOverAxes("layerNorm", x, options, 1e-5);
}

/**
 * RMS normalisation over `axis`: x / sqrt(mean(x^2) + eps) * weight. Inputs whose squares
 * overflow float32 (|x| > 1.8e19) give 0 or NaN, as in PyTorch's float32 arithmetic.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const y = gyre.rmsNorm(gyre.tensor([3, 4]), { eps: 0 }); // [0.8485, 1.1314]
 * ```
 */
export function rmsNorm(x: Tensor, options: RmsNormOptions = {}): Tensor {
  return taped("rmsNorm", [x, options?.weight], { ...options }, () => rmsNormOf(x, options));
}

function rmsNormOf(x: Tensor, options: RmsNormOptions = {}): Tensor {
  return normOverAxes("rmsNorm", x, options, 1e-6);
}

function checkChannels(op: string, view: View): number {
  if (view.shape.length < 2) {
    throw new ShapeError({
      op,
      argument: "x",
      expected: "a tensor of shape [N, C, ...] (at least 2 axes)",
      received: `[${view.shape.join(", ")}]`,
    });
  }
  return view.shape[1];
}

/**
 * Group normalisation of an [N, C, ...] tensor: the C channels are split into `groups` groups and
 * each (sample, group) is normalised over its channels and all spatial positions (biased
 * variance), then scaled and shifted per channel.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const x = gyre.tensor([[1, 3, 10, 20]]); // N = 1, C = 4
 * const y = gyre.groupNorm(x, { groups: 2, eps: 0 }); // [[-1, 1, -1, 1]]
 * ```
 */
export function groupNorm(x: Tensor, options: GroupNormOptions): Tensor {
  return taped(
    "groupNorm",
    [x, options?.weight, options?.bias],
    { ...options },
    () => groupNormOf(x, options),
  );
}

function groupNormOf(x: Tensor, options: GroupNormOptions): Tensor {
  checkOptions("groupNorm", options, ["groups", "weight", "bias", "eps"]);
  const op = "groupNorm";
  const view = checkInput(op, x);
  const channels = checkChannels(op, view);
  const groups = checkNumber(
    op,
    "options.groups",
    options?.groups,
    "a positive integer",
    (v) => Number.isInteger(v) && v >= 1,
  );
  if (channels % groups !== 0) {
    throw new ValueError({
      op,
      argument: "options.groups",
      expected: `a divisor of the channel count ${channels}`,
      received: String(groups),
    });
  }
  const eps = checkEps(op, options.eps ?? 1e-5);
  const weight = checkParameter(op, "options.weight", options.weight, view.storage.backend.name, [
    channels,
  ], true);
  const bias = checkParameter(op, "options.bias", options.bias, view.storage.backend.name, [
    channels,
  ], true);
  // [N, C, ...S] seen as [N, G, C/G, ...S] (a view: splitting an axis never needs a copy).
  const perGroup = channels / groups;
  const [n, , ...spatial] = view.shape;
  const [sn, sc, ...spatialStrides] = view.strides;
  const grouped: View = {
    ...view,
    shape: [n, groups, perGroup, ...spatial],
    strides: [sn, sc * perGroup, sc, ...spatialStrides],
  };
  const axes = grouped.shape.map((_, i) => i).slice(2);
  const { output } = rowOp(
    {
      op,
      kind: "layerNorm",
      x: grouped,
      axes,
      eps,
      indexed: { period: groups, scale: perGroup, divisor: sizeOf(spatial) },
      stats: false,
    },
    { weight, bias, shape: [channels] },
  );
  return tensorFromStorage(output, view.dtype, view.shape);
}

/** A [C] parameter as a view broadcast along x's channel axis (axis 1). */
function channelView(p: View, shape: readonly number[]): View {
  const lifted: View = {
    ...p,
    shape: [p.shape[0], ...shape.slice(2).map(() => 1)],
    strides: [p.strides[0], ...shape.slice(2).map(() => 0)],
  };
  return broadcastView(lifted, shape);
}

function checkMomentum(op: string, momentum: unknown): number {
  return checkNumber(
    op,
    "options.momentum",
    momentum,
    "a number in [0, 1]",
    (v) => v >= 0 && v <= 1,
  );
}

/**
 * Batch normalisation of an [N, C, ...] tensor over the batch and spatial axes, per channel.
 *
 * Inference (`training` false, the default): `(x - mean) / sqrt(variance + eps) * weight + bias`
 * with the given running `mean` and `variance` (both required), as one fused elementwise kernel;
 * returns the output tensor.
 *
 * Training: normalises with the batch's own mean and biased variance and returns
 * {@link BatchNormTrainingResult}: the output, the batch mean, the biased batch variance (what
 * the output was normalised with), the unbiased one (n / (n - 1) times it, what PyTorch folds into
 * `running_var`), and, when `mean` and `variance` are given, the updated running statistics
 * `(1 - momentum) * running + momentum * batch` (inputs are never modified). Like PyTorch, training
 * needs more than one value per channel.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const x = gyre.tensor([[1, 10], [3, 30]]); // N = 2, C = 2
 * const { output, mean } = gyre.batchNorm(x, { training: true, eps: 0 });
 * // output [[-1, -1], [1, 1]], mean [2, 20]
 * ```
 */
export function batchNorm(
  x: Tensor,
  options: BatchNormOptions & { training: true },
): BatchNormTrainingResult;
/** Batch normalisation in inference mode, with the running statistics (see above). */
export function batchNorm(x: Tensor, options: BatchNormOptions & { training?: false }): Tensor;
/** Batch normalisation, in training or inference mode as `options.training` says. */
export function batchNorm(
  x: Tensor,
  options: BatchNormOptions,
): Tensor | BatchNormTrainingResult;
export function batchNorm(
  x: Tensor,
  options: BatchNormOptions = {},
): Tensor | BatchNormTrainingResult {
  return taped(
    "batchNorm",
    [x, options?.weight, options?.bias, options?.mean, options?.variance],
    { ...options },
    () => batchNormOf(x, options),
  );
}

function batchNormOf(x: Tensor, options: BatchNormOptions): Tensor | BatchNormTrainingResult {
  checkOptions("batchNorm", options, [
    "mean",
    "variance",
    "weight",
    "bias",
    "eps",
    "training",
    "momentum",
  ]);
  const op = "batchNorm";
  const view = checkInput(op, x);
  const channels = checkChannels(op, view);
  const eps = checkEps(op, options.eps ?? 1e-5);
  const training = options.training ?? false;
  if (typeof training !== "boolean") {
    throw new ValueError({
      op,
      argument: "options.training",
      expected: "a boolean",
      received: describe(training),
    });
  }
  const momentum = checkMomentum(op, options.momentum ?? 0.1);
  const shape = [channels];
  const mean = checkParameter(
    op,
    "options.mean",
    options.mean,
    view.storage.backend.name,
    shape,
    true,
  );
  const variance = checkParameter(
    op,
    "options.variance",
    options.variance,
    view.storage.backend.name,
    shape,
    true,
  );
  const weight = checkParameter(
    op,
    "options.weight",
    options.weight,
    view.storage.backend.name,
    shape,
    true,
  );
  const bias = checkParameter(
    op,
    "options.bias",
    options.bias,
    view.storage.backend.name,
    shape,
    true,
  );
  if (!training || mean || variance) {
    for (const [name, given] of [["mean", mean], ["variance", variance]] as const) {
      if (given) continue;
      throw new ValueError({
        op,
        argument: `options.${name}`,
        expected: training
          ? "both running statistics or neither"
          : `the running ${name} (inference normalises with the running statistics)`,
        received: "none",
      });
    }
  }
  if (!training) {
    return batchNormInference(view, { mean: mean!, variance: variance!, weight, bias }, eps);
  }

  const rows = channels;
  const len = sizeOf(view.shape) / Math.max(1, channels);
  if (channels > 0 && len < 2) {
    throw new ValueError({
      op,
      argument: "x",
      expected: "more than 1 value per channel when training (N times the spatial size)",
      received: `[${view.shape.join(", ")}]`,
    });
  }
  const axes = view.shape.map((_, i) => i).filter((i) => i !== 1);
  const result = rowOp(
    {
      op,
      kind: "layerNorm",
      x: view,
      axes,
      eps,
      indexed: { period: Math.max(1, rows), scale: 1, divisor: Math.max(1, len) },
      stats: true,
    },
    { weight, bias, shape },
  );
  const output = tensorFromStorage(result.output, view.dtype, view.shape);
  // Both statistics share one storage: means at [0, C), variances at [C, 2C).
  const statsStorage = result.stats!;
  const statView = (offset: number): Tensor =>
    new Tensor({ storage: statsStorage, dtype: "float32", shape, strides: [1], offset });
  const batchMean = statView(0);
  const batchVariance = statView(rows);
  const correction = len / Math.max(1, len - 1);
  const unbiasedVariance = runElementwise(
    op,
    [batchVariance],
    ["variance"],
    ([v]) => E.binary("mul", v, E.constant(correction, "float32")),
  );
  const out: BatchNormTrainingResult = {
    output,
    mean: batchMean,
    variance: batchVariance,
    unbiasedVariance,
  };
  if (mean && variance) {
    const blend = (running: Tensor, batch: Tensor, name: string) =>
      runElementwise(op, [running, batch], [name, "batch"], ([r, b], dtypes) => {
        const f = (e: Expr) => E.cast(e, "float32");
        const c = (value: number) => E.constant(value, "float32");
        const mixed = E.binary(
          "add",
          E.binary("mul", f(r), c(1 - momentum)),
          E.binary("mul", f(b), c(momentum)),
        );
        return E.cast(mixed, dtypes[0]);
      });
    out.runningMean = blend(mean, batchMean, "options.mean");
    out.runningVariance = blend(variance, unbiasedVariance, "options.variance");
  }
  return out;
}

function batchNormInference(
  x: View,
  p: { mean: Tensor; variance: Tensor; weight: Tensor | null; bias: Tensor | null },
  eps: number,
): Tensor {
  const op = "batchNorm";
  const inputs: View[] = [x];
  const leaf = (t: Tensor) => {
    const view = viewOf(t, op);
    inputs.push(channelView(view, x.shape));
    return E.cast(E.input(inputs.length - 1, view.dtype), "float32");
  };
  const xf = E.cast(E.input(0, x.dtype), "float32");
  const centred = E.binary("sub", xf, leaf(p.mean));
  const rstd = E.unary("rsqrt", E.binary("add", leaf(p.variance), E.constant(eps, "float32")));
  let y = E.binary("mul", centred, rstd);
  if (p.weight) y = E.binary("mul", y, leaf(p.weight));
  if (p.bias) y = E.binary("add", y, leaf(p.bias));
  return evaluate(op, x.storage.backend.name, E.cast(y, x.dtype), inputs, x.shape);
}
