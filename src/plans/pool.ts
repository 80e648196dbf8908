/**
 * The 2-D pooling plan: thread per output, unrolled windows, or a team per output.
 * @module
 */
import type { DeviceCaps } from "../core/caps.ts";
import { ValueError } from "../core/errors.ts";

/** The pooling kernel forms (the registry and the coverage test read this list). */
export const POOL_VARIANTS = ["unrolled", "looped", "team"] as const;
/** One of {@link POOL_VARIANTS}. */
export type PoolVariant = (typeof POOL_VARIANTS)[number];

/** The choice for a 2-D pooling kernel (src/gpu/_codegen_pool.ts). */
export interface PoolChoice {
  /** Which plan made this choice (a discriminant). */
  kernel: "pool";
  /**
   * "unrolled": the window walk as straight-line code; "looped": loops over uniform sizes;
   * "team": a team of `teamSize` invocations per output (subgroups).
   */
  variant: PoolVariant;
  /** Team only: invocations per output (a power of two, at most the smallest subgroup). */
  teamSize: number;
  /** Neighbouring outputs along W per invocation (unrolled regular windows only). */
  outputsPerInvocation: 1 | 2 | 4;
  /** Aligned vec4 input loads (unrolled regular windows without column padding or dilation). */
  vec4: boolean;
  /** Invocations per workgroup. */
  workgroupSize: number;
}

/**
 * Adaptive bins up to 11x11 are unrolled by the rule, regular windows up to 16x16 (the most an
 * override may unroll). Regular windows of 12x12 to 16x16 on the H200 (bench/results/
 * tune-quality-h200-no-interiors.json, seed 2711, GPU timestamps): unrolled 1.9-7.1x faster than
 * teams of 32 at all six held-out keys (13x13/4: 74 us against 314; 15x15/4: 682 against 4821);
 * on lavapipe (tune-quality-lavapipe.json, seed 2411) 2.8-3.8x faster than the team at all seven.
 */
const POOL_UNROLL_RULE = 121;
/**
 * Outputs below which a GPU's regular windows past 11x11 go to teams after all: too few
 * invocations for the unrolled form to fill the GPU. On the H200 (tune-quality-h200-96-b.json,
 * seed 6007) teams led at 4330, 5336 and 6142 outputs (14x14/1: 35 us against 39 unrolled;
 * 16x16/1: 36 against 51), the unrolled form from 15212 up (tune-quality-h200-no-interiors);
 * lavapipe's teams lost at every count (4339 outputs of 14x14/1: 3.4 ms against 1.1).
 */
const POOL_TEAM_OUTPUTS = 8192;
/**
 * A GPU's unrolled windows: the most neighbouring outputs an invocation, by stride and window,
 * then halved while the op would have fewer than `POOL_BUSY_INVOCATIONS` invocations. Fitted on
 * the H200 to every candidate measured at 160 held-out keys (bench/results/
 * tune-survey-h200-pool-9002.json, GPU timestamps, `bench/tune_offline.ts` to judge): this rule
 * picks within 5% of the fastest at 88% of them (stride 1: 93%, 2: 85%, 3: 87%, 4: 82%), the
 * rule it replaced (4 at stride 1, else 2, one at strides of 4 and more, whatever the count) at
 * 55%. Neighbours share a window's columns at stride 1 (4 outputs); at strides 2 and 3 windows
 * of 10 and more reuse enough to take 4 too, smaller ones 2 (4 where aligned vec4 windows do not
 * overlap: 2x2/2 on [32, 64, 224, 224] 121 us against 128 with 2). Fewer outputs an invocation
 * win wherever there are too few invocations to hide latency: halving from 65536 led at 60% of
 * the keys below it, against 2^15 or 2^17 a few keys worse (halves of the survey fitted apart
 * judged each other at 80-81%).
 */
const POOL_BUSY_INVOCATIONS = 65536;
/** Windows this wide or wider take 4 outputs an invocation at strides 2 and 3 on a GPU. */
const POOL_WIDE_WINDOW = 10;
/** Strides from which a GPU's invocations take at most 2 outputs. */
const POOL_NARROW_FROM_STRIDE = 4;
const POOL_UNROLL_LIMIT = 256;

/**
 * The most neighbouring outputs a GPU's invocation takes (before `POOL_BUSY_INVOCATIONS` halves
 * them): 4 at stride 1, and at strides below `POOL_NARROW_FROM_STRIDE` for windows
 * `POOL_WIDE_WINDOW` wide or wider or aligned vec4 windows that do not overlap; else 2.
 */
function gpuOutputsPerInvocation(stride: number, width: number, vec4Apart: boolean): 1 | 2 | 4 {
  const reuse = width >= POOL_WIDE_WINDOW || vec4Apart;
  return stride === 1 || (stride < POOL_NARROW_FROM_STRIDE && reuse) ? 4 : 2;
}

/**
 * Pooling: regular windows of at most 16x16 elements (past 11x11 on a GPU only where there are
 * 8192 outputs or more) and adaptive bins of at most 11x11 are unrolled, larger ones are walked
 * by a team of invocations per output (see below), or loop without subgroups. Unrolled regular
 * windows compute several neighbouring outputs per invocation. On a GPU: 4 at stride 1, at
 * strides 2 and 3 for windows 10 wide or wider or aligned vec4 windows that do not overlap along
 * W (no column padding or dilation, W and the input offset multiples of 4), else 2; halved while
 * the op has fewer than 65536 invocations (see `POOL_BUSY_INVOCATIONS`). vec4 loads where
 * `outputs * strideW` is a multiple of 4, so every invocation starts on a vector. A software
 * adapter takes 4 (lavapipe, seed 2411: the leader's count at 22 of 24 held-out keys, and within
 * 1% of it at the other two). Never more outputs than the row needs.
 * Measured on an H200 (timestamps, float32 unless said; the vec4 copy kernel runs at 3.7 TB/s):
 * maxPool 2x2/2 on [32, 64, 224, 224]: 121 us (4.2 TB/s) with 4 outputs and vec4, 128 with 2 and
 * vec4, 154 with 1, 292 looped; float16: 65 us with 4, 84 with 2; W = 222 (no vec4): 143 us with
 * 2, 190 with 4. 3x3/2 padding 1 on [32, 64, 112, 112]: 39 us with 2, 47 with 1, 58 with 4.
 * 3x3/1 padding 1 on [32, 64, 56, 56]: 30 us with 4, 34 with 2. 11x11/4 on [32, 64, 224, 224]:
 * 225 us unrolled, 705 looped. Workgroups of 128, 256 or 512: within 6%.
 * Past the unrolled range, teams of 32 invocations per output where subgroups exist (the looped
 * variant otherwise): 32 x 32 bins (adaptive pools of [32, 64, 224, 224] to 7x7) average in
 * 119 us (90% of a copy of the same bytes) against 433 looped, their maxima in 151 us against
 * 437; the global average of [32, 256, 56, 56] 35 us against 479 (teams of 16: 43, of 8: 68).
 * Small windows stay unrolled: the global average of [32, 2048, 7, 7] takes 9.6 us unrolled, 34
 * by teams of 32 and 14 by teams of 8, whose lanes mostly idle on 49 elements.
 *
 * @example
 * ```ts
 * import { planPool } from "@gyre/gyre/tuning";
 * planPool(undefined, {
 *   window: "regular", kernel: [2, 2], stride: [2, 2], padding: [0, 0], dilation: [1, 1],
 *   inWidth: 224, outWidth: 112, alignedOffset: true,
 * }); // { variant: "unrolled", outputsPerInvocation: 4, vec4: true, ... }
 * ```
 */
export function planPool(
  caps: DeviceCaps | undefined,
  problem: {
    window: "regular" | "adaptive";
    /** Window rows and columns (adaptive: the largest bin). */
    kernel: readonly [number, number];
    stride: readonly [number, number];
    padding: readonly [number, number];
    dilation: readonly [number, number];
    inWidth: number;
    outWidth: number;
    /** The input's first element is a multiple of 4. */
    alignedOffset: boolean;
    /** Outputs in all (planes x rows x columns), where known. */
    totalOutputs?: number;
  },
  override: Partial<PoolChoice> | null = null,
): PoolChoice {
  const elements = problem.kernel[0] * problem.kernel[1];
  const regular = problem.window === "regular";
  const sw = problem.stride[1];
  const span = problem.dilation[1] * (problem.kernel[1] - 1) + 1;
  const vec4Layout = regular && problem.padding[1] === 0 && problem.dilation[1] === 1 &&
    problem.inWidth % 4 === 0 && problem.alignedOffset;
  const soft = Boolean(caps?.isFallbackAdapter);
  const totalOutputs = problem.totalOutputs ?? Infinity;
  const unrolled = elements <= POOL_UNROLL_RULE ||
    (regular && elements <= POOL_UNROLL_LIMIT && (soft || totalOutputs >= POOL_TEAM_OUTPUTS));
  // A software adapter's invocations are iterations of a CPU loop: 4 outputs each, always.
  let outputs = soft ? 4 : gpuOutputsPerInvocation(sw, problem.kernel[1], vec4Layout && span <= sw);
  while (!soft && outputs > 1 && totalOutputs / outputs < POOL_BUSY_INVOCATIONS) outputs /= 2;
  while (outputs > 1 && outputs / 2 >= problem.outWidth) outputs /= 2;
  // Teams: as wide as a window row of 32 floats (one coalesced read), within every subgroup.
  const teamLimit = caps?.subgroups ? Math.min(32, caps.subgroupMinSize) : 0;
  const teams = teamLimit >= 4;
  const choice: PoolChoice = {
    kernel: "pool",
    variant: unrolled ? "unrolled" : teams ? "team" : "looped",
    teamSize: Math.max(1, teamLimit),
    outputsPerInvocation: unrolled && regular ? outputs as 1 | 2 | 4 : 1,
    vec4: unrolled && vec4Layout,
    workgroupSize: 256,
    ...override,
  };
  if (choice.variant === "team") {
    // Subgroups only; a power-of-two team within the smallest subgroup.
    const size = choice.teamSize;
    const power = Number.isInteger(size) && size >= 1 && (size & (size - 1)) === 0;
    if (!teams) choice.variant = unrolled ? "unrolled" : "looped";
    else if (!power || size > teamLimit) choice.teamSize = teamLimit;
  }
  // What the device and the layout allow, whatever an override asks.
  if (![1, 2, 4].includes(choice.outputsPerInvocation)) choice.outputsPerInvocation = 1;
  const maxInvocations = caps?.limits?.maxComputeInvocationsPerWorkgroup ?? 256;
  if (
    !Number.isInteger(choice.workgroupSize) || choice.workgroupSize < 1 ||
    choice.workgroupSize > maxInvocations
  ) choice.workgroupSize = 256;
  if (elements > POOL_UNROLL_LIMIT && choice.variant === "unrolled") {
    choice.variant = teams ? "team" : "looped";
  }
  // A team's whole workgroup is teams.
  if (choice.variant === "team" && choice.workgroupSize % choice.teamSize !== 0) {
    choice.workgroupSize = 256;
  }
  if (choice.variant !== "unrolled" || !regular) choice.outputsPerInvocation = 1;
  if (
    choice.variant !== "unrolled" || !vec4Layout ||
    (choice.outputsPerInvocation * sw) % 4 !== 0
  ) choice.vec4 = false;
  return choice;
}

/** The choice for a pooling on the WASM device (src/wasm/pool.ts). */
export interface WasmPoolChoice {
  /** Which plan made this choice (a discriminant). */
  kernel: "wasmPool";
  /**
   * "vector": max and average pooling four output columns per v128 over contiguous planes (other
   * layouts copied so first); "channels-last": four channels per v128 over NHWC memory, in place,
   * into a channels-last result; "reference": the scalar loops (PyTorch's CPU loops
   * transcribed), which adaptive pooling always takes. All give the scalar loops' results bit for
   * bit.
   */
  form: "vector" | "channels-last" | "reference";
}

const WASM_POOL_FORMS = ["vector", "channels-last", "reference"];

/**
 * WASM pooling: the channels-last kernels where the input is laid out channels-last (an NHWC
 * tensor seen as NCHW, e.g. `x.transpose([0, 3, 1, 2])`) and has at least 4 channels, else the
 * vector kernels; an override may ask for the reference loops, or for "vector" on channels-last
 * input (a copy to NCHW first); "channels-last" on other input gives "vector". Threads are
 * `planWasmThreads`'s.
 * Measured on 2 cores of an AMD EPYC (medians of 30 samples of 5 ops, wall clock): max pooling
 * 3x3/2 of [8, 64, 128, 128] float32 over NCHW planes 4.01 ms on one thread, 2.36 on two;
 * channels-last 3.38 and 1.88 (the NCHW copy first would add some 2 ms). Its windows need no
 * shuffles: with [1, 64, 128, 128] resident in cache, 0.22 ms against NCHW's 0.49 on one
 * thread; at full size both wait on memory.
 *
 * @example
 * ```ts
 * import { planWasmPool } from "@gyre/gyre/tuning";
 * planWasmPool().form; // "vector"
 * planWasmPool(null, { channelsLast: true, channels: 64 }).form; // "channels-last"
 * ```
 */
export function planWasmPool(
  override: Partial<WasmPoolChoice> | null = null,
  input: { channelsLast: boolean; channels: number } = { channelsLast: false, channels: 0 },
): WasmPoolChoice {
  const fits = input.channelsLast && input.channels >= 4;
  const choice: WasmPoolChoice = {
    kernel: "wasmPool",
    form: fits ? "channels-last" : "vector",
    ...override,
  };
  if (!WASM_POOL_FORMS.includes(choice.form)) {
    throw new ValueError({
      op: "setPlanOverride",
      argument: "wasmPool.form",
      expected: '"vector", "channels-last" or "reference"',
      received: String(choice.form),
    });
  }
  if (choice.form === "channels-last" && !input.channelsLast) choice.form = "vector";
  return choice;
}
