/**
 * The indexing family's plan (gathers and scatters on the GPU), and the merging of a job's axes
 * that both devices' kernels iterate over.
 * @module
 */
import type { DType } from "../core/dtype.ts";

/** The GPU indexing kernels' forms (the registry and the coverage test read this list). */
export const INDEXING_VARIANTS = ["gather", "store", "atomic", "cas"] as const;
/** One of {@link INDEXING_VARIANTS}. */
export type IndexingVariant = (typeof INDEXING_VARIANTS)[number];

/** The choice for a gather or a scatter on the GPU (src/gpu/indexing.ts). */
export interface IndexingChoice {
  /** Which plan made this choice (a discriminant). */
  kernel: "indexing";
  /**
   * "gather": one invocation an output element (a pair of them for float16), reading its index
   * and then x. Scatters, one invocation an update: "store" (no reduction) writes it; "atomic"
   * combines it by one atomic instruction (integer sums, max and min, float32 sums where the
   * device has `wgpu-shader-float32-atomic`, float32 max and min on order-preserving integer
   * keys); "cas" by a compare-and-swap loop on the 32-bit word (products, float16, float32 sums
   * elsewhere). The order in which updates meet is the hardware's, so float sums, means and
   * products can differ in their last bits between runs; max, min and integer results cannot.
   */
  variant: IndexingVariant;
  /** Invocations per workgroup. */
  workgroupSize: number;
}

/**
 * The gather plan: one form.
 *
 * @example
 * ```ts
 * import { planGather } from "@gyre/gyre/tuning";
 * planGather().variant; // "gather"
 * ```
 */
export function planGather(override?: Readonly<Partial<IndexingChoice>>): IndexingChoice {
  return { kernel: "indexing", variant: "gather", workgroupSize: 256, ...pickSize(override) };
}

/**
 * The scatter plan: "store" without a reduction, else one atomic instruction where one exists
 * for the dtype and reduction, else a compare-and-swap loop. An override of the variant applies
 * where it can run ("cas" always can; "atomic" not for products or float16).
 *
 * @example
 * ```ts
 * import { planScatter } from "@gyre/gyre/tuning";
 * planScatter({ float32Atomics: true }, { dtype: "float32", reduce: "sum" }).variant; // "atomic"
 * ```
 */
export function planScatter(
  caps: { float32Atomics: boolean },
  job: { dtype: DType; reduce: "none" | "sum" | "prod" | "max" | "min" | "mean" },
  override?: Readonly<Partial<IndexingChoice>>,
): IndexingChoice {
  const { dtype, reduce } = job;
  const atomic = dtype !== "float16" && reduce !== "prod" &&
    !(dtype === "float32" && (reduce === "sum" || reduce === "mean") && !caps.float32Atomics);
  let variant: IndexingVariant = reduce === "none" ? "store" : atomic ? "atomic" : "cas";
  const forced = override?.variant;
  if (forced === "cas" || (forced === "atomic" && atomic && reduce !== "none")) variant = forced;
  return { kernel: "indexing", variant, workgroupSize: 256, ...pickSize(override) };
}

function pickSize(override?: Readonly<Partial<IndexingChoice>>): { workgroupSize?: number } {
  const size = override?.workgroupSize;
  return size !== undefined && [64, 128, 256].includes(size) ? { workgroupSize: size } : {};
}

/**
 * Merges neighbouring axes that every stride list steps over as one (the inner's stride times
 * its length is the outer's), and drops axes of length 1, so kernels decompose fewer
 * coordinates; an empty shape stays empty, and a 0-d one becomes [1].
 *
 * @example
 * ```ts
 * import { mergeAxes } from "@gyre/gyre/tuning";
 * mergeAxes([2, 3, 4], [[12, 4, 1], [0, 0, 0]]); // { shape: [24], strides: [[1], [0]] }
 * ```
 */
export function mergeAxes(
  shape: readonly number[],
  strides: readonly (readonly number[])[],
): { shape: number[]; strides: number[][] } {
  if (shape.some((d) => d === 0)) return { shape: [0], strides: strides.map(() => [0]) };
  const outShape: number[] = [];
  const outStrides: number[][] = strides.map(() => []);
  for (let d = 0; d < shape.length; d++) {
    if (shape[d] === 1) continue;
    const last = outShape.length - 1;
    if (
      last >= 0 &&
      strides.every((s, k) => outStrides[k][last] === s[d] * shape[d])
    ) {
      outShape[last] *= shape[d];
      strides.forEach((s, k) => (outStrides[k][last] = s[d]));
      continue;
    }
    outShape.push(shape[d]);
    strides.forEach((s, k) => outStrides[k].push(s[d]));
  }
  if (outShape.length === 0) return { shape: [1], strides: strides.map(() => [0]) };
  return { shape: outShape, strides: outStrides };
}
