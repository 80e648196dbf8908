/**
 * Plans: the one place where heuristics pick a GPU kernel variant and its parameters. Each plan is
 * a pure function of the device's caps and the problem's shape returning a plain {@link Choice}
 * record, so an autotuner can later replace the rule with a measured table.
 * @module
 */
import type { DeviceCaps } from "./gpu/device.ts";

/** The choice for an elementwise kernel. */
export interface ElementwiseChoice {
  kernel: "elementwise";
  /** "vec4": four elements per invocation with vector loads; "scalar": one, through strides. */
  variant: "vec4" | "scalar";
  workgroupSize: number;
}

/** The choice for a reduction. */
export interface ReduceChoice {
  kernel: "reduce";
  /** "workgroup": a workgroup per row chunk; "thread": one invocation per row. */
  variant: "workgroup" | "thread";
  /** Combine within a workgroup through subgroup operations rather than shared memory. */
  subgroups: boolean;
  workgroupSize: number;
  /** Chunks each row is split into (1: one pass; more: partials plus a second pass). */
  chunks: number;
  /** Read contiguous, 4-aligned rows as vec4 (chunk lengths are then multiples of 4). */
  vec4: boolean;
}

/** Any plan's result. */
export type Choice = ElementwiseChoice | ReduceChoice;

const overrides: {
  elementwise: Partial<ElementwiseChoice> | null;
  reduce: Partial<ReduceChoice> | null;
} = {
  elementwise: null,
  reduce: null,
};

/**
 * Forces fields of a plan's choice (tests use it to cover every variant; an autotuner can use it to
 * measure them). `null` restores the rule.
 *
 * @example
 * ```ts
 * import { setPlanOverride } from "@gyre/gyre";
 * setPlanOverride("reduce", { subgroups: false }); // the shared-memory path
 * setPlanOverride("reduce", null);
 * ```
 */
export function setPlanOverride(
  kernel: "elementwise" | "reduce",
  override: Partial<ElementwiseChoice> | Partial<ReduceChoice> | null,
): void {
  if (kernel === "elementwise") {
    overrides.elementwise = override as Partial<ElementwiseChoice> | null;
  } else overrides.reduce = override as Partial<ReduceChoice> | null;
}

/**
 * Elementwise: vec4 whenever the layout allows it (contiguous or scalar inputs, 4-aligned
 * offsets); 256 invocations per workgroup, which fills an SM's schedulers on NVIDIA and suits
 * llvmpipe's wide SIMD.
 *
 * @example
 * ```ts
 * import { planElementwise } from "@gyre/gyre";
 * planElementwise(undefined, { elements: 1 << 20, vec4Eligible: true }).variant; // "vec4"
 * ```
 */
export function planElementwise(
  _caps: DeviceCaps | undefined,
  problem: { elements: number; vec4Eligible: boolean },
): ElementwiseChoice {
  const choice: ElementwiseChoice = {
    kernel: "elementwise",
    variant: problem.vec4Eligible && problem.elements >= 4 ? "vec4" : "scalar",
    workgroupSize: 256,
    ...overrides.elementwise,
  };
  // vec4 needs the layout's permission, whatever an override asks.
  if (!problem.vec4Eligible) choice.variant = "scalar";
  return choice;
}

/** Elements one invocation should accumulate before the workgroup combine. */
const ELEMENTS_PER_INVOCATION = 32;

/**
 * Reductions: many short rows get one invocation each; otherwise a workgroup per row, and rows so
 * long that one workgroup would loop more than {@link ELEMENTS_PER_INVOCATION} times are split
 * into chunks whose partials a second pass combines. Subgroup operations where the device has them.
 *
 * @example
 * ```ts
 * import { planReduce } from "@gyre/gyre";
 * planReduce(undefined, { rows: 1, rowLength: 1 << 24 }).chunks; // 2048
 * ```
 */
export function planReduce(
  caps: DeviceCaps | undefined,
  problem: { rows: number; rowLength: number; aligned?: boolean },
): ReduceChoice {
  const workgroupSize = 256;
  const subgroups = Boolean(caps?.subgroups) && (caps?.subgroupMinSize ?? 0) >= 4 &&
    (caps?.subgroupMaxSize ?? 0) <= workgroupSize;
  const choice: ReduceChoice = problem.rowLength <= 64 && problem.rows >= 4096
    ? {
      kernel: "reduce",
      variant: "thread",
      subgroups: false,
      workgroupSize,
      chunks: 1,
      vec4: false,
    }
    : {
      kernel: "reduce",
      variant: "workgroup",
      subgroups,
      workgroupSize,
      vec4: Boolean(problem.aligned),
      chunks: Math.min(
        4096,
        Math.max(1, Math.ceil(problem.rowLength / (workgroupSize * ELEMENTS_PER_INVOCATION))),
      ),
    };
  Object.assign(choice, overrides.reduce);
  // Subgroups only where the device has them; chunks only within a row's length.
  if (!caps?.subgroups) choice.subgroups = false;
  choice.chunks = Math.max(1, Math.min(choice.chunks, problem.rowLength));
  if (choice.variant === "thread") choice.chunks = 1;
  if (!problem.aligned || choice.variant === "thread") choice.vec4 = false;
  return choice;
}
