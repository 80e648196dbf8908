/**
 * The tuning cache (issue 24, part 2): results per fingerprint round-trip; a key measured again
 * replaces its row; concurrent writers all land; a corrupt, foreign or other-version file is
 * ignored with one warning and replaced on the next record; the folder follows the environment.
 */
import assert from "node:assert/strict";
import {
  deviceFingerprint,
  readTuningCache,
  recordTuning,
  TUNING_CACHE_VERSION,
  tuningCachePath,
  type TuningEntry,
} from "../src/tuning.ts";
import { withEnv } from "./_heuristics.ts";

const FP = { id: "0123456789abcdef" };
const entry = (cols: number, variant: string, us: number): TuningEntry => ({
  key: { rows: 8, cols, k: 1024, sg: true },
  choice: { variant },
  us,
  measured: "2026-11-27T10:00:00.000Z",
});

/** Runs `fn` with console.warn captured. */
async function warnings(fn: () => Promise<void>): Promise<string[]> {
  const seen: string[] = [];
  const warn = console.warn;
  console.warn = (...args: unknown[]) => seen.push(args.join(" "));
  try {
    await fn();
  } finally {
    console.warn = warn;
  }
  return seen;
}

Deno.test("tuning cache: round trip, a key replaced, other families kept", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/sub/tuning.json`;
    assert.deepEqual((await readTuningCache(FP, path)).families, {});
    await recordTuning(
      FP,
      "sort",
      [entry(4096, "radix-select", 50), entry(8192, "merge", 70)],
      path,
    );
    await recordTuning(FP, "scan", [{ ...entry(1, "row", 5), key: { length: 1024 } }], path);
    // The same key (its fields in another order) measured again: replaced, not doubled.
    await recordTuning(FP, "sort", [{
      ...entry(4096, "subgroup", 40),
      key: { sg: true, k: 1024, cols: 4096, rows: 8 },
    }], path);
    const cache = await readTuningCache(FP, path);
    assert.equal(cache.version, TUNING_CACHE_VERSION);
    assert.equal(cache.fingerprint, FP.id);
    assert.deepEqual(cache.families.sort.map((e) => e.choice.variant).sort(), [
      "merge",
      "subgroup",
    ]);
    assert.equal(cache.families.scan.length, 1);
    const left: string[] = [];
    for await (const e of Deno.readDir(`${dir}/sub`)) left.push(e.name);
    assert.deepEqual(left, ["tuning.json"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("tuning cache: concurrent writers all land", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/tuning.json`;
    await Promise.all(
      Array.from(
        { length: 12 },
        (_, n) => recordTuning(FP, n % 2 ? "sort" : "scan", [entry(2 ** n, "v", n)], path),
      ),
    );
    const cache = await readTuningCache(FP, path);
    assert.equal(cache.families.sort.length + cache.families.scan.length, 12);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("tuning cache: an unusable file is ignored with one warning, then replaced", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const bad: [string, string][] = [
      ["garbage.json", "{ not json"],
      ["array.json", "[1, 2]"],
      ["version.json", JSON.stringify({ version: 99, fingerprint: FP.id, families: {} })],
      ["foreign.json", JSON.stringify({ version: 1, fingerprint: "ffff", families: {} })],
      ["entry.json", JSON.stringify({ version: 1, fingerprint: FP.id, families: { sort: [{}] } })],
    ];
    for (const [name, text] of bad) {
      const path = `${dir}/${name}`;
      await Deno.writeTextFile(path, text);
      const seen = await warnings(async () => {
        assert.deepEqual((await readTuningCache(FP, path)).families, {});
        assert.deepEqual((await readTuningCache(FP, path)).families, {});
      });
      assert.equal(seen.length, 1, `${name}: ${seen}`);
      assert.match(seen[0], new RegExp(`ignoring the tuning cache .*${name}`));
      await warnings(() => recordTuning(FP, "sort", [entry(64, "merge", 1)], path));
      assert.equal((await readTuningCache(FP, path)).families.sort.length, 1, name);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("tuning cache: its folder follows GYRE_TUNING_CACHE, then XDG_CACHE_HOME", async () => {
  await withEnv({ GYRE_TUNING_CACHE: "/tmp/gyre-cache" }, () => {
    assert.equal(tuningCachePath(FP), `/tmp/gyre-cache/tuning-${FP.id}.json`);
  });
  await withEnv({ GYRE_TUNING_CACHE: undefined, XDG_CACHE_HOME: "/tmp/xdg-cache" }, () => {
    assert.equal(tuningCachePath(FP), `/tmp/xdg-cache/gyre/tuning-${FP.id}.json`);
    assert.match(tuningCachePath(deviceFingerprint(null)), /\/tuning-[0-9a-f]{16}\.json$/);
  });
});
