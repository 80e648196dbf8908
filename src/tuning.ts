/**
 * gyre's tuning surface (`@gyre/gyre/tuning`): the plans that choose each kernel family's
 * variant, the overrides that force one, the record of which variant each device ran, and the
 * kernel registry. For tests, benchmarks and tuners; programs need only the main entry.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * import { onPlan, setPlanOverride } from "@gyre/gyre/tuning";
 * setPlanOverride("reduce", { subgroups: false });
 * const y = gyre.ones([1024]).sum(); // issued under the override
 * setPlanOverride("reduce", null);
 * const stop = onPlan((record) => console.log(record.family, record.choice));
 * await y.array(); // computed now, still with the override it was issued under
 * stop();
 * ```
 * @module
 */
import { planObservers, type PlanRecord } from "./contract/backend.ts";

export * from "./plans/mod.ts";
export * from "./heuristics/spiralk.ts";
export * from "./heuristics/fingerprint.ts";
export * from "./heuristics/self_rewrite.ts";
export * from "./heuristics/tuning_cache.ts";
export * from "./heuristics/families.ts";
export * from "./heuristics/choose_table.ts";
export * from "./heuristics/chooser.ts";
export * from "./heuristics/consensus.ts";
export * from "./heuristics/online.ts";
export * from "./tune.ts";
export * from "./heuristics/startup.ts";
export * from "./heuristics/shared_hints.ts";
export type { PlanRecord } from "./contract/backend.ts";
export type { DeviceCaps } from "./core/caps.ts";
export type { DeviceName } from "./core/view.ts";
export type { DType } from "./core/dtype.ts";
export type { ScanOp } from "./ir/scan.ts";
export { INTERNAL_KERNELS, type KernelEntry, KERNELS } from "./kernels.ts";

/**
 * Calls `callback` with every plan a device takes (the variant that runs) until the returned
 * function is called.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * import { onPlan } from "@gyre/gyre/tuning";
 * const seen: string[] = [];
 * const stop = onPlan((r) => seen.push(r.family));
 * gyre.ones([8]).add(1).realize();
 * stop();
 * ```
 */
export function onPlan(callback: (record: PlanRecord) => void): () => void {
  planObservers.add(callback);
  return () => planObservers.delete(callback);
}
