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
}

/** Any plan's result. */
export type Choice = ElementwiseChoice | ReduceChoice;

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
  return {
    kernel: "elementwise",
    variant: problem.vec4Eligible && problem.elements >= 4 ? "vec4" : "scalar",
    workgroupSize: 256,
  };
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
  problem: { rows: number; rowLength: number },
): ReduceChoice {
  const workgroupSize = 256;
  const subgroups = Boolean(caps?.subgroups) && (caps?.subgroupMinSize ?? 0) >= 4 &&
    (caps?.subgroupMaxSize ?? 0) <= workgroupSize;
  if (problem.rowLength <= 64 && problem.rows >= 4096) {
    return { kernel: "reduce", variant: "thread", subgroups: false, workgroupSize, chunks: 1 };
  }
  const chunks = Math.min(
    4096,
    Math.max(1, Math.ceil(problem.rowLength / (workgroupSize * ELEMENTS_PER_INVOCATION))),
  );
  return { kernel: "reduce", variant: "workgroup", subgroups, workgroupSize, chunks };
}
