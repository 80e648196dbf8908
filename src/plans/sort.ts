/**
 * The sort family's plan (sort, argsort, Rank-K, kthvalue, quantiles on the GPU).
 * @module
 */
import type { DeviceCaps } from "../core/caps.ts";

/** The GPU sort kernels' forms (the registry and the coverage test read this list). */
export const SORT_VARIANTS = ["bitonic", "bitonic-local", "radix"] as const;
/** One of {@link SORT_VARIANTS}. */
export type SortVariant = (typeof SORT_VARIANTS)[number];

/** The choice for sorting rows on the GPU (src/gpu/sort.ts). */
export interface SortChoice {
  /** Which plan made this choice (a discriminant). */
  kernel: "sort";
  /**
   * "bitonic": every row's (key, index) pairs, padded to a power of two P, through a bitonic
   * network of log2(P)(log2(P) + 1) / 2 compare-exchange dispatches over all rows at once;
   * "bitonic-local": the same network with every step below a tile of 1024 elements done in
   * workgroup memory, one dispatch for all of them per stage (one in all for rows of up to 1024),
   * so rows of P elements take 1 + sum over the stages past the tile of (their global steps + 1)
   * dispatches; "radix": a stable LSD radix sort, four passes of 8-bit digits, each a count of
   * every 1024-element tile's digits, a scan of the counts and a scatter (about 2.5 passes over
   * the pairs each, whatever the row length).
   */
  variant: SortVariant;
  /** The padded row length P (a power of two, at least the row length). */
  padded: number;
  /** The radix scatter's prefix sums by subgroup operations (where the device has them). */
  subgroups: boolean;
}

/**
 * Padded row lengths past which the radix sort takes over: beyond four tiles the bitonic network
 * needs more dispatches over all the pairs (1 + 3 + 4 + 5 + ... ) than the radix passes' ten
 * (by counting passes; not yet measured).
 */
const RADIX_FROM = 4096;

/** Workgroup memory and invocations the local forms need (tiles of 1024 elements). */
const LOCAL_BYTES = 8192;
/** Workgroup memory of the radix scatter: keys, indices and digits of a tile, and its sums. */
const RADIX_BYTES = 14336;
const LOCAL_INVOCATIONS = 256;

/**
 * Sorting rows on the GPU: rows longer than RADIX_FROM by the radix sort, shorter ones by the
 * bitonic network with its steps below a tile in workgroup memory ("bitonic-local"), where the
 * device gives 8 KiB of it and 256 invocations a workgroup (every WebGPU device by default;
 * the radix scatter takes 13 KiB of the 16 KiB default), else all steps global ("bitonic", which
 * an override may also ask for). Both are correct on every adapter (no subgroups or forward progress needed) and sort
 * many rows in one dispatch per step; long rows still take many passes over memory. Radix
 * sorting and selection without a full sort are to come (issue 22); no measurements yet.
 *
 * @example
 * ```ts
 * import { planSort } from "@gyre/gyre/tuning";
 * planSort(undefined, { rows: 8, length: 1000 }).variant; // "bitonic-local"
 * ```
 */
export function planSort(
  caps: DeviceCaps | undefined,
  problem: { rows: number; length: number },
  override: Partial<SortChoice> | null = null,
): SortChoice {
  let padded = 1;
  while (padded < problem.length) padded *= 2;
  const storage = caps?.limits?.maxComputeWorkgroupStorageSize ?? 16384;
  const wide = (caps?.limits?.maxComputeInvocationsPerWorkgroup ?? 256) >= LOCAL_INVOCATIONS;
  const allowed: Record<SortVariant, boolean> = {
    bitonic: true,
    "bitonic-local": wide && storage >= LOCAL_BYTES,
    radix: wide && storage >= RADIX_BYTES,
  };
  let variant: SortVariant = allowed["bitonic-local"] ? "bitonic-local" : "bitonic";
  if (padded > RADIX_FROM && allowed.radix) variant = "radix";
  if (override?.variant && allowed[override.variant]) variant = override.variant;
  // The padding follows the row; the variant and (off) subgroups can be forced.
  const subgroups = (caps?.subgroups ?? false) && override?.subgroups !== false;
  return { kernel: "sort", variant, padded, subgroups };
}
