/**
 * The sort family's plan (sort, argsort, Rank-K, kthvalue, quantiles on the GPU).
 * @module
 */
import type { DeviceCaps } from "../core/caps.ts";

/** The GPU sort kernels' forms (the registry and the coverage test read this list). */
export const SORT_VARIANTS = ["bitonic"] as const;
/** One of {@link SORT_VARIANTS}. */
export type SortVariant = (typeof SORT_VARIANTS)[number];

/** The choice for sorting rows on the GPU (src/gpu/sort.ts). */
export interface SortChoice {
  /** Which plan made this choice (a discriminant). */
  kernel: "sort";
  /**
   * "bitonic": every row's (key, index) pairs, padded to a power of two P, through a bitonic
   * network of log2(P)(log2(P) + 1) / 2 compare-exchange dispatches over all rows at once.
   */
  variant: SortVariant;
  /** The padded row length P (a power of two, at least the row length). */
  padded: number;
}

/**
 * Sorting rows on the GPU: the bitonic network, the one form so far. It is correct on every
 * adapter (no workgroup memory, subgroups or forward progress needed) and sorts many rows in one
 * dispatch per step; it moves every pair once per step, so long rows take many passes over
 * memory. Radix sorting and selection without a full sort are to come (issue 22); no
 * measurements yet.
 *
 * @example
 * ```ts
 * import { planSort } from "@gyre/gyre/tuning";
 * planSort(undefined, { rows: 8, length: 1000 }); // { kernel: "sort", variant: "bitonic", padded: 1024 }
 * ```
 */
export function planSort(
  caps: DeviceCaps | undefined,
  problem: { rows: number; length: number },
  override: Partial<SortChoice> | null = null,
): SortChoice {
  void caps;
  let padded = 1;
  while (padded < problem.length) padded *= 2;
  // The padding follows the row; only the variant can be forced.
  return { kernel: "sort", variant: override?.variant ?? "bitonic", padded };
}
