/**
 * Named variants of each GPU kernel family, derived from the plans' choice types: what the kernel
 * registry lists, what devices report as they run (`observePlan`), and what the coverage test
 * requires a property test to have run. A name here cannot drift from the plans: each list is
 * built from the plans' own constant tuples.
 * @module
 */
import { ELEMENTWISE_VARIANTS, type ElementwiseChoice } from "./elementwise.ts";
import { MATMUL_VARIANTS, type MatmulChoice } from "./matmul.ts";
import { POOL_VARIANTS, type PoolChoice } from "./pool.ts";
import { REDUCE_COMBINES, type ReduceChoice } from "./reduce.ts";
import { ROWS_COMBINES, ROWS_VARIANTS, type RowsChoice } from "./rows.ts";
import { SCAN_LAYOUTS, SCAN_VARIANTS, type ScanChoice } from "./scan.ts";
import { SORT_VARIANTS, type SortChoice } from "./sort.ts";
import { INDEXING_COMBINES, INDEXING_VARIANTS, type IndexingChoice } from "./indexing.ts";

/** How a workgroup reduction combines: through subgroup operations or shared memory. */
const REDUCE_FORMS = ["workgroup-subgroup", "workgroup-shared", "thread"] as const;

/** Every named variant of each GPU kernel family. */
export const FAMILY_VARIANTS = {
  elementwise: ELEMENTWISE_VARIANTS,
  reduce: [...REDUCE_FORMS, ...REDUCE_COMBINES],
  pool: POOL_VARIANTS,
  scan: [...SCAN_VARIANTS, ...SCAN_LAYOUTS],
  rows: [...ROWS_VARIANTS, ...ROWS_COMBINES],
  matmul: MATMUL_VARIANTS,
  sort: SORT_VARIANTS,
  indexing: [...INDEXING_VARIANTS, ...INDEXING_COMBINES],
} as const;

/** A GPU kernel family with named variants. */
export type GpuFamily = keyof typeof FAMILY_VARIANTS;

/** The choice type of each family. */
export interface FamilyChoice {
  /** The elementwise plan's choice. */
  elementwise: ElementwiseChoice;
  /** The reduction plan's choice. */
  reduce: ReduceChoice;
  /** The pooling plan's choice. */
  pool: PoolChoice;
  /** The scan plan's choice. */
  scan: ScanChoice;
  /** Rows of each source matrix. */
  rows: RowsChoice;
  /** The matrix product plan's choice. */
  matmul: MatmulChoice;
  /** The sort plan's choice. */
  sort: SortChoice;
  /** The gather or scatter plan's choice. */
  indexing: IndexingChoice;
}

/**
 * The named variants a choice runs: its form and, where the family has a second dimension, that
 * one too (a reduction's chunk combine when a row is split, a scan's layout over a non-last axis,
 * how a row's invocations combine).
 *
 * @example
 * ```ts
 * import { planReduce, variantsOf } from "@gyre/gyre/tuning";
 * variantsOf("reduce", planReduce(undefined, { rows: 1, rowLength: 1 << 24 }));
 * // ["workgroup-shared", "last-workgroup"]
 * ```
 */
export function variantsOf<F extends GpuFamily>(
  family: F,
  choice: FamilyChoice[F],
  context: { acrossAxis?: boolean } = {},
): string[] {
  switch (family) {
    case "reduce": {
      const c = choice as ReduceChoice;
      const form = c.variant === "thread"
        ? "thread"
        : c.subgroups
        ? "workgroup-subgroup"
        : "workgroup-shared";
      return c.chunks > 1 ? [form, c.combineChunks] : [form];
    }
    case "scan": {
      const c = choice as ScanChoice;
      return context.acrossAxis ? [c.variant, c.layout] : [c.variant];
    }
    case "rows": {
      const c = choice as RowsChoice;
      return [c.variant, c.combine];
    }
    case "indexing": {
      const c = choice as IndexingChoice;
      return c.variant.startsWith("scatter") ? [c.variant, c.combine] : [c.variant];
    }
    default:
      return [(choice as ElementwiseChoice | PoolChoice | MatmulChoice | SortChoice).variant];
  }
}
