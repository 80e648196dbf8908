/**
 * Device fingerprints (issue 24, part 1): stable, blind to the order features come in, changed
 * by anything that changes how kernels run, and carrying gyre's version; size buckets.
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import { type DeviceCaps, deviceFingerprint, sizeBucket } from "../src/tuning.ts";
import { H200 } from "./_caps.ts";

Deno.test("fingerprint: stable, order-blind, and changed by what changes the kernels", () => {
  const a = deviceFingerprint(H200);
  assert.match(a.id, /^[0-9a-f]{16}$/);
  assert.equal(deviceFingerprint({ ...H200 }).id, a.id);
  assert.equal(
    deviceFingerprint({ ...H200, features: [...H200.features].reverse() }).id,
    a.id,
  );
  assert.deepEqual(a.features, ["shader-f16", "subgroups", "timestamp-query"]);
  assert.equal(a.gyre, gyre.VERSION);
  const changed: DeviceCaps[] = [
    { ...H200, description: "NVIDIA H100 80GB HBM3" },
    { ...H200, architecture: "" },
    { ...H200, subgroupMinSize: 16 },
    { ...H200, features: ["subgroups"] },
    { ...H200, isFallbackAdapter: true },
    { ...H200, limits: { ...H200.limits, maxComputeWorkgroupStorageSize: 32768 } },
  ];
  const ids = new Set([a.id, ...changed.map((c) => deviceFingerprint(c).id)]);
  assert.equal(ids.size, changed.length + 1);
  // The WASM device has one fingerprint, apart from every GPU's.
  const wasm = deviceFingerprint(null);
  assert.equal(wasm.vendor, "wasm");
  assert.equal(deviceFingerprint(null).id, wasm.id);
  assert.ok(!ids.has(wasm.id));
});

Deno.test("fingerprint: gyre's version is deno.json's", async () => {
  const config = JSON.parse(await Deno.readTextFile(new URL("../deno.json", import.meta.url)));
  assert.equal(gyre.VERSION, config.version);
});

Deno.test("size buckets: the largest power of two at or below", () => {
  assert.deepEqual([0, 1, 2, 3, 4, 5000, 4096, 4097].map(sizeBucket), [
    0,
    1,
    2,
    2,
    4,
    4096,
    4096,
    4096,
  ]);
  assert.equal(sizeBucket(2 ** 50 - 1), 2 ** 49);
  assert.equal(sizeBucket(NaN), 0);
  assert.equal(sizeBucket(0.5), 0);
});
