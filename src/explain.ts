/**
 * `explain`: which kernels a computation runs, one line each, with the ops fused into each.
 * @module
 */
import {
  kernelObservers,
  type KernelRecord,
  planObservers,
  type PlanRecord,
} from "./contract/backend.ts";
import { fusedLabel } from "./_lazy.ts";
import { sizeOf } from "./core/shape.ts";
import { metaOf, pendingOf, Tensor, viewOf } from "./tensor.ts";
import { checkOptions } from "./core/options.ts";
import { describe, ValueError } from "./core/errors.ts";
import type { DeviceName } from "./core/view.ts";

/**
 * A plan a device took, as `explain` shows it: the kernel family, the op it served, the variants
 * that ran and the plan's whole choice (`@gyre/gyre/tuning` types each family's choice and
 * forces any of it by `setPlanOverride`).
 */
export interface ExplainedPlan {
  /** The device that ran it. */
  device: DeviceName;
  /** The kernel family, e.g. "sort" or "reduce". */
  family: string;
  /** The op the work was issued as. */
  op: string;
  /** The named variants that ran, e.g. ["radix-select"]. */
  variants: readonly string[];
  /** The plan's choice, field by field (the override applied). */
  choice: Readonly<Record<string, unknown>>;
}

/** What `explain` found. */
export interface Explanation {
  /** One entry per kernel launch, in order. */
  kernels: KernelRecord[];
  /**
   * Given a function: each plan a device took while it ran (the kernel family, the variant and
   * its parameters, the op it served), in order; the same choices `gyre/tuning`'s overrides force.
   */
  plans: ExplainedPlan[];
  /** The kernels, one line each, then the plans, as printed. */
  text: string;
  /**
   * Given a function: the tensors it returned, now computed. They are the caller's to use and
   * dispose (explain cannot know which of them the caller holds elsewhere).
   */
  outputs: Tensor[];
}

function collectTensors(value: unknown, into: Tensor[]): void {
  if (value instanceof Tensor) into.push(value);
  else if (Array.isArray(value)) value.forEach((v) => collectTensors(v, into));
  else if (value && typeof value === "object") {
    Object.values(value).forEach((v) => collectTensors(v, into));
  }
}

function format(kernels: KernelRecord[], plans: ExplainedPlan[]): string {
  if (!kernels.length) return "no kernels";
  const lines = kernels.map((k, i) => `${String(i + 1).padStart(3)}. ${k.device} ${k.kernel}`);
  if (plans.length) lines.push("plans:");
  for (const p of plans) {
    const params = Object.entries(p.choice)
      .filter(([key]) => key !== "kernel")
      .map(([key, value]) => `${key} ${JSON.stringify(value)}`)
      .join(", ");
    lines.push(`  ${p.device} ${p.family} for ${p.op}: ${params}`);
  }
  return lines.join("\n");
}

/**
 * Explains a computation. Given a tensor: the kernel that would compute it (nothing runs); a
 * pending tensor lists the ops fused into it. Given a function: runs it once, computes what it
 * returns, and lists every kernel launched, in order (on WASM each primitive is its own kernel),
 * then every plan a device took (which variant of a kernel family ran, with its parameters).
 * Prints the lines unless `{ print: false }`.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const a = gyre.ones([4]), b = gyre.ones([4]), c = gyre.ones([4]);
 * gyre.explain(() => gyre.relu(a.mul(b).add(c))); // 1 kernel: ones+...+mul+add+relu
 * const { outputs } = gyre.explain(() => a.exp(), { print: false });
 * outputs.forEach((t) => t.dispose());
 * // Top 3 of each row: on a GPU, `plans` shows the sort plan's variant (e.g. "bitonic-tree").
 * const top = gyre.explain(() => gyre.topk(gyre.ones([8, 100]), 3), { print: false });
 * console.log(top.plans.map((p) => `${p.family}: ${JSON.stringify(p.choice)}`));
 * top.outputs.forEach((t) => t.dispose());
 * ```
 */
export function explain(
  target: Tensor | (() => unknown),
  options: { print?: boolean } = {},
): Explanation {
  checkOptions("explain", options, ["print"]);
  if (!(target instanceof Tensor) && typeof target !== "function") {
    throw new ValueError({
      op: "explain",
      argument: "target",
      expected: "a Tensor or a function",
      received: describe(target),
    });
  }
  const kernels: KernelRecord[] = [];
  const plans: ExplainedPlan[] = [];
  const outputs: Tensor[] = [];
  if (target instanceof Tensor) {
    const pending = pendingOf(target, "explain", "target");
    const meta = metaOf(target, "explain", "target");
    if (pending) {
      kernels.push({
        device: meta.device,
        kernel: `${fusedLabel(pending)} (pending, ${sizeOf(meta.shape)} elements)`,
      });
    }
  } else {
    const observer = (r: KernelRecord) => kernels.push(r);
    const planObserver = (r: PlanRecord) =>
      plans.push({
        device: r.device,
        family: r.family,
        op: r.op,
        variants: r.variants,
        choice: r.choice as unknown as Readonly<Record<string, unknown>>,
      });
    kernelObservers.add(observer);
    planObservers.add(planObserver);
    try {
      collectTensors(target(), outputs);
      for (const t of outputs) viewOf(t, "explain");
    } finally {
      kernelObservers.delete(observer);
      planObservers.delete(planObserver);
    }
  }
  const text = target instanceof Tensor && !kernels.length
    ? "computed already: no kernel"
    : format(kernels, plans);
  if (options.print ?? true) console.log(text);
  return { kernels, plans, text, outputs };
}
