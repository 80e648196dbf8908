/**
 * The tuning entry point (`@gyre/gyre/tuning`): a plan override applies to the work issued while
 * it is set, whenever that work is computed, and `onPlan` reports the variant each device ran.
 * @module
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import * as tuning from "../src/tuning.ts";
import { devices } from "./_devices.ts";

const DEVICES = await devices();
const gpu = DEVICES.includes("gpu");

/** The plans the GPU took while `fn` ran (awaited). */
async function plansOf(fn: () => Promise<unknown>): Promise<tuning.PlanRecord[]> {
  const seen: tuning.PlanRecord[] = [];
  const stop = tuning.onPlan((r) => seen.push(r));
  try {
    await fn();
  } finally {
    stop();
  }
  return seen.filter((r) => r.device === "gpu");
}

Deno.test({
  name: "tuning: an override set while lazy work is issued holds when it is computed later",
  ignore: !gpu,
  fn: async () => {
    const x = gyre.random.uniform([64, 300], { seed: 3, device: "gpu" }).realize();
    // Issued under the overrides, computed after they are cleared.
    tuning.setPlanOverride("reduce", { variant: "thread" });
    tuning.setPlanOverride("elementwise", { variant: "scalar" });
    tuning.setPlanOverride("rows", { variant: "chunked" });
    const sum = x.sum({ axis: 1 });
    const scaled = x.mul(2);
    const soft = gyre.softmax(x.add(1));
    tuning.setPlanOverride("reduce", null);
    tuning.setPlanOverride("elementwise", null);
    tuning.setPlanOverride("rows", null);
    const forced = await plansOf(() => gyre.readAll([sum, scaled, soft]));
    const variant = (family: string) =>
      forced.filter((r) => r.family === family).map((r) =>
        (r.choice as { variant: string }).variant
      );
    assert.deepEqual(variant("reduce"), ["thread"]);
    assert.deepEqual(variant("elementwise"), ["scalar"]);
    assert.deepEqual(variant("rows"), ["chunked"]);
    // The same work issued now runs the rule (vec4 and one pass for these shapes; the plans' own,
    // as a device's tuned table may choose otherwise).
    tuning.setTuningMode("off");
    const again = [x.sum({ axis: 1 }), x.mul(2), gyre.softmax(x.add(1))];
    const rule = await plansOf(() => gyre.readAll(again));
    tuning.setTuningMode("table");
    assert.deepEqual(
      rule.map((r) => [r.family, (r.choice as { variant: string }).variant, r.override]),
      [["reduce", "workgroup", undefined], ["elementwise", "vec4", undefined], [
        "rows",
        "single",
        undefined,
      ]],
    );
    for (const t of [x, sum, scaled, soft, ...again]) t.dispose();
  },
});

Deno.test({
  name: "tuning: scan, pool and matmul jobs carry their override; onPlan stops when told",
  ignore: !gpu,
  fn: async () => {
    const x = gyre.random.uniform([4, 1, 16, 16], { seed: 5, device: "gpu" }).realize();
    const m = gyre.random.uniform([64, 64], { seed: 6, device: "gpu" }).realize();
    tuning.setPlanOverride("scan", { variant: "multipass" });
    tuning.setPlanOverride("pool", { variant: "looped" });
    tuning.setPlanOverride("matmul", { variant: "splitK", splitK: 2 });
    // Scans and pools run when issued, the product when read: both under the override.
    const ran: tuning.PlanRecord[] = [];
    const stop = tuning.onPlan((r) => ran.push(r));
    const outputs = [
      gyre.cumsum(m, { axis: 1 }),
      gyre.maxPool2d(x, { kernelSize: 2 }),
      gyre.matmul(m, m),
    ];
    for (const family of ["scan", "pool", "matmul"] as const) {
      tuning.setPlanOverride(family, null);
    }
    await gyre.readAll(outputs);
    const variants = ran.map((r) => `${r.family}/${(r.choice as { variant: string }).variant}`);
    for (const v of ["scan/multipass", "pool/looped", "matmul/splitK"]) {
      assert.ok(variants.includes(v), `${v} not in ${variants}`);
    }
    stop();
    const before = ran.length;
    const more = gyre.cumsum(m, { axis: 1 });
    await more.data();
    assert.equal(ran.length, before);
    for (const t of [x, m, ...outputs, more]) t.dispose();
  },
});

Deno.test("tuning: setPlanOverride names the family and takes an object or null", () => {
  assert.throws(
    () => tuning.setPlanOverride("sorting" as "scan", {}),
    (e: unknown) => e instanceof gyre.ValueError && /"elementwise"/.test(String(e)),
  );
  assert.throws(
    () => tuning.setPlanOverride("scan", 3 as unknown as null),
    (e: unknown) => e instanceof gyre.ValueError && /override/.test(String(e)),
  );
  // A snapshot is immutable: later overrides do not change work already issued.
  tuning.setPlanOverride("scan", { variant: "row" });
  const snapshot = tuning.planOverrides();
  tuning.setPlanOverride("scan", null);
  assert.deepEqual(snapshot.scan, { variant: "row" });
  assert.equal(tuning.planOverrides().scan, undefined);
  assert.ok(Object.isFrozen(snapshot));
});

Deno.test("tuning: every family's variants come from its plan's choice type", () => {
  assert.deepEqual(tuning.FAMILY_VARIANTS.pool, ["unrolled", "looped", "team"]);
  assert.deepEqual(
    tuning.variantsOf("reduce", tuning.planReduce(undefined, { rows: 1, rowLength: 1 << 24 })),
    ["workgroup-shared", "last-workgroup"],
  );
  for (const entry of tuning.KERNELS) {
    const family = tuning.FAMILY_VARIANTS[entry.gpu.family] as readonly string[];
    for (const v of entry.gpu.variants) assert.ok(family.includes(v), `${entry.id}: ${v}`);
  }
});
