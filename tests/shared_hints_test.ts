/**
 * Redis-shared hints (issue 24, part 8), against a real `redis-server` started on a free port of
 * localhost and stopped (or killed) by the tests: winners and rules shared by one runtime reach
 * another's chooser; garbage, a server that is down, slow or killed mid-run give a warning at
 * most and lose nothing local; without `REDIS_URL` the client is never imported. `.ci/run`
 * installs redis-server and sets GYRE_REQUIRE_REDIS, so CI fails rather than skips without it.
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import {
  clearSharedHintsCache,
  deviceFingerprint,
  explainChoice,
  loadHeuristics,
  loadUserRows,
  readSharedHints,
  readTuningCache,
  redisClientLoaded,
  rowsTuneKey,
  shareRule,
  shareWinners,
  tableChoice,
  tune,
} from "../src/tuning.ts";
import { H200 } from "./_caps.ts";
import { devices } from "./_devices.ts";
import { withEnv } from "./_heuristics.ts";

const hasGpu = (await devices()).includes("gpu");
const serverPath = await which("redis-server");
const required = Deno.env.get("GYRE_REQUIRE_REDIS") === "1";
if (!serverPath && required) {
  throw new Error("redis-server is required here (apt-get install redis-server)");
}

async function which(name: string): Promise<string | null> {
  try {
    const out = await new Deno.Command("sh", { args: ["-c", `command -v ${name}`] }).output();
    return out.success ? new TextDecoder().decode(out.stdout).trim() : null;
  } catch {
    return null;
  }
}

/** A redis-server on a free localhost port, with no persistence. */
async function startRedis(): Promise<{ url: string; port: number; process: Deno.ChildProcess }> {
  const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (probe.addr as Deno.NetAddr).port;
  probe.close();
  const process = new Deno.Command(serverPath!, {
    args: [
      "--port",
      String(port),
      "--bind",
      "127.0.0.1",
      "--save",
      "",
      "--appendonly",
      "no",
      "--enable-debug-command",
      "yes",
    ],
    stdout: "null",
    stderr: "null",
  }).spawn();
  for (let i = 0; i < 100; i++) {
    try {
      const c = await Deno.connect({ hostname: "127.0.0.1", port });
      c.close();
      return { url: `redis://127.0.0.1:${port}`, port, process };
    } catch {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  process.kill("SIGKILL");
  throw new Error("redis-server did not start");
}

async function stopRedis(server: { process: Deno.ChildProcess }, signal: Deno.Signal = "SIGTERM") {
  try {
    server.process.kill(signal);
  } catch { /* gone already */ }
  await server.process.status;
}

/** Sends raw commands to the server (RESP), for garbage and for blocking it. */
async function command(port: number, ...args: string[]): Promise<string> {
  const c = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    const text = `*${args.length}\r\n` +
      args.map((a) => `$${new TextEncoder().encode(a).length}\r\n${a}\r\n`).join("");
    await c.write(new TextEncoder().encode(text));
    const buf = new Uint8Array(65536);
    const n = await c.read(buf);
    return new TextDecoder().decode(buf.subarray(0, n ?? 0));
  } finally {
    c.close();
  }
}

/** Captures console.warn while `fn` runs. */
async function warnings<T>(fn: () => Promise<T>): Promise<[T, string[]]> {
  const seen: string[] = [];
  const warn = console.warn;
  console.warn = (m: string) => seen.push(String(m));
  try {
    return [await fn(), seen];
  } finally {
    console.warn = warn;
  }
}

const fp = deviceFingerprint(H200);
const entry = (n: number, variant: number) => ({
  key: { r: 1, n, sg: true, al: true },
  choice: { variant, subgroups: 1 },
  us: 10,
  measured: "2026-11-27T00:00:00.000Z",
});

Deno.test("shared hints: without REDIS_URL nothing is imported and nothing fails", async () => {
  await withEnv({ REDIS_URL: undefined }, async () => {
    const [hints, seen] = await warnings(() => readSharedHints(fp));
    assert.deepEqual(hints, { winners: {}, rules: {} });
    assert.equal(await shareWinners(fp, "reduce", [entry(4096, 1)]), false);
    assert.equal(await shareRule(fp, "reduce", "soft(variant, 1, 0.25, true);"), false);
    await loadHeuristics(H200);
    assert.deepEqual(seen, []);
  });
  assert.equal(redisClientLoaded(), false);
});

Deno.test({
  name: "shared hints: winners and rules shared by one runtime reach another's chooser",
  ignore: !serverPath,
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const server = await startRedis();
    const dir = await Deno.makeTempDir();
    try {
      await withEnv({ REDIS_URL: server.url, GYRE_TUNING_CACHE: dir }, async () => {
        clearSharedHintsCache();
        assert.equal(await shareWinners(fp, "reduce", [entry(4096, 1), entry(1 << 20, 0)]), true);
        assert.equal(await shareRule(fp, "scan", "soft(variant, 2, 0.5, n >= 1048576);"), true);
        // The same rule twice is one member.
        assert.equal(await shareRule(fp, "scan", "soft(variant, 2, 0.5, n >= 1048576);"), true);
        assert.ok(redisClientLoaded());
        const hints = await readSharedHints(fp);
        assert.equal(hints.winners.reduce?.length, 2);
        assert.deepEqual(hints.rules.scan, ["soft(variant, 2, 0.5, n >= 1048576);"]);
        // Another runtime (a fresh load): the winners are table rows, the rule acts.
        loadUserRows({});
        await loadHeuristics(H200);
        assert.deepEqual(tableChoice("reduce", H200, { r: 1, n: 4096, sg: true, al: true }), {
          variant: 1,
          subgroups: 1,
        });
        const d = explainChoice("scan", { ...H200, description: "no table" }, {
          r: 1,
          n: 1 << 22,
          sg: true,
          al: true,
        });
        assert.equal(d.choice.variant, 2);
        // A local result wins over a shared one for the same key.
        const local = await readTuningCache(fp);
        assert.deepEqual(local.families, {});
      });
    } finally {
      loadUserRows({});
      await withEnv({ REDIS_URL: undefined }, () => loadHeuristics(null));
      await stopRedis(server);
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "shared hints: garbage, a server down, slow or killed mid-run: warnings, nothing lost",
  ignore: !serverPath,
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const server = await startRedis();
    try {
      await withEnv({ REDIS_URL: server.url }, async () => {
        clearSharedHintsCache();
        // Garbage beside a good entry: the good one loads, one warning.
        await shareWinners(fp, "reduce", [entry(4096, 1)]);
        await command(server.port, "HSET", `gyre:1:${fp.id}:reduce:winners`, "junk", "{not json");
        await command(server.port, "SET", `gyre:1:${fp.id}:sort:winners`, "a string, not a hash");
        clearSharedHintsCache();
        const [hints, seen] = await warnings(() => readSharedHints(fp));
        // The wrong type fails the whole read (a warning): nothing half-read is used.
        assert.ok(seen.length >= 1, "a warning");
        assert.ok(hints.winners.reduce === undefined || hints.winners.reduce.length === 1);
        await command(server.port, "DEL", `gyre:1:${fp.id}:sort:winners`);
        clearSharedHintsCache();
        const [again, seen2] = await warnings(() => readSharedHints(fp));
        assert.equal(again.winners.reduce?.length, 1);
        assert.ok(seen2.some((w) => /garbage/.test(w)), seen2.join("\n"));
        // A cached read does not ask the server: it answers while the server sleeps.
        const sleeping = command(server.port, "DEBUG", "SLEEP", "1.5");
        await new Promise((r) => setTimeout(r, 100));
        const t0 = performance.now();
        assert.equal((await readSharedHints(fp)).winners.reduce?.length, 1);
        // Slow: a fresh read gives up within its deadline, with a warning.
        clearSharedHintsCache();
        const [slow, seen3] = await warnings(() => readSharedHints(fp));
        assert.deepEqual(slow, { winners: {}, rules: {} });
        assert.ok(performance.now() - t0 < 1400, `${performance.now() - t0} ms`);
        assert.ok(seen3.length === 1, seen3.join("\n"));
        await sleeping;
      });
      // Killed mid-run: tuning still records its result locally, and init still works.
      if (hasGpu && gyre.runtime().gpu?.caps.timestampQuery) {
        const dir = await Deno.makeTempDir();
        try {
          await withEnv({ REDIS_URL: server.url, GYRE_TUNING_CACHE: dir }, async () => {
            await stopRedis(server, "SIGKILL");
            const caps = gyre.runtime().gpu!.caps;
            const key = rowsTuneKey(caps, 8, 4096);
            const [report, seen] = await warnings(() =>
              tune(["reduce"], { shapes: { reduce: [key] }, samples: 3 })
            );
            assert.equal(report.keys.length, 1);
            assert.ok(seen.some((w) => /Redis/.test(w)), seen.join("\n"));
            const local = await readTuningCache(deviceFingerprint(caps));
            assert.equal(local.families.reduce?.length, 1);
            clearSharedHintsCache();
            const [, seen2] = await warnings(() => gyre.init({ device: "gpu" }).then(() => null));
            assert.ok(seen2.length <= 1, seen2.join("\n"));
            assert.deepEqual(tableChoice("reduce", caps, key), local.families.reduce![0].choice);
          });
        } finally {
          loadUserRows({});
          await Deno.remove(dir, { recursive: true });
        }
      }
      // Down from the start: a warning, quickly.
      await withEnv({ REDIS_URL: "redis://127.0.0.1:1" }, async () => {
        clearSharedHintsCache();
        const t0 = performance.now();
        const [hints, seen] = await warnings(() => readSharedHints(fp));
        assert.deepEqual(hints, { winners: {}, rules: {} });
        assert.ok(performance.now() - t0 < 2000);
        assert.equal(seen.length, 1);
        assert.doesNotMatch(seen[0], /password/);
      });
    } finally {
      await stopRedis(server, "SIGKILL");
      clearSharedHintsCache();
    }
  },
});
