/**
 * The multithreaded WASM GEMM (src/wasm/threads.ts, src/wasm/matmul.ts): the threaded build runs
 * over a shared memory; products split between the calling thread and the workers equal the
 * single-threaded product bit for bit (random shapes, thread counts and splits, including ranges
 * that do not divide evenly, broadcast batches, transposes, float32 with NaN and infinities,
 * float16 and int32), and so does the unshared build; a worker's failure is reported; the plan's
 * rule and its override checks; workers stop on request, start without permissions and never keep
 * a process alive.
 *
 * Bit equality is the right bar, not a tolerance: asm/matmul.ts computes each element of C with
 * the same operations in the same order whichever block of C a call covers, and the split puts
 * thread boundaries on whole micro-tiles, so even NaN payloads match.
 * @module
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import * as gyre from "../src/mod.ts";
import { mulberry32 } from "./_random.ts";
import * as tuning from "../src/tuning.ts";
import { WasmBackend } from "../src/wasm/backend.ts";
import { postedTasks, runShares } from "../src/wasm/threads.ts";
import { compiledRelaxedGemm } from "../src/wasm/module.ts";
import { wasmBackendOf } from "../src/runtime.ts";

const rt = await gyre.init({ device: "wasm" });
/** Threads this machine offers (2 on the 2-core CI box); the split tests need at least 2. */
const THREADS = await gyre.startWasmThreads();
const threaded = rt.wasm.shared && THREADS > 1;

type DType = "float32" | "float16" | "int32";

function randomData(n: number, dtype: DType, seed: number, specials: boolean): number[] {
  const next = mulberry32(seed);
  const special = [NaN, Infinity, -Infinity, -0];
  return Array.from({ length: n }, () => {
    if (specials && next() < 0.01) return special[Math.floor(next() * special.length)];
    return dtype === "int32" ? Math.floor(next() * 2001) - 1000 : next() * 2 - 1;
  });
}

/** The elements' bits (float32 NaN payloads and -0 included). */
async function bits(t: gyre.Tensor): Promise<Uint32Array> {
  const data = await t.data();
  return new Uint32Array(data.buffer, data.byteOffset, data.length);
}

function firstDifference(x: Uint32Array, y: Uint32Array): string {
  const i = x.findIndex((v, j) => v !== y[j]);
  return i < 0 ? "none" : `[${i}]: ${x[i].toString(16)} vs ${y[i].toString(16)}`;
}

/** Leaves a NaN-filled block of `elements` float32 on the free list, for the next product's C. */
function poison(elements: number): void {
  gyre.full([Math.max(1, elements)], NaN, { device: "wasm" }).realize().dispose();
}

interface Case {
  m: number;
  n: number;
  k: number;
  batchA: number[];
  batchB: number[];
  transposeA: boolean;
  transposeB: boolean;
  dtype: DType;
  specials: boolean;
  threads: number;
  split: "rows" | "columns";
  seed: number;
}

/** Lengths: 1, primes, around the micro-tile (4 x 8) and the K block (256). */
const LENGTH = fc.oneof(
  fc.constantFrom(1, 2, 3, 4, 5, 7, 8, 9, 13, 31, 33, 127, 129),
  fc.integer({ min: 1, max: 200 }),
);
const K_LENGTH = fc.oneof(LENGTH, fc.constantFrom(255, 256, 257, 300, 513));

const BATCHES = fc.constantFrom<[number[], number[]]>(
  [[], []],
  [[3], []],
  [[], [2]],
  [[2], [2]],
  [[2, 1], [1, 3]],
  [[5], [1]],
);

const CASE: fc.Arbitrary<Case> = fc.record({
  m: LENGTH,
  n: LENGTH,
  k: K_LENGTH,
  batches: BATCHES,
  transposeA: fc.boolean(),
  transposeB: fc.boolean(),
  dtype: fc.constantFrom<DType>("float32", "float32", "float32", "float16", "int32"),
  specials: fc.boolean(),
  // Beyond the threads available the product runs on fewer (still equal).
  threads: fc.integer({ min: 2, max: 4 }),
  split: fc.constantFrom<"rows" | "columns">("rows", "columns"),
  seed: fc.integer(),
}).map(({ batches: [batchA, batchB], ...rest }) => ({ ...rest, batchA, batchB }));

async function checkCase(c: Case): Promise<void> {
  const aShape = [...c.batchA, ...(c.transposeA ? [c.k, c.m] : [c.m, c.k])];
  const bShape = [...c.batchB, ...(c.transposeB ? [c.n, c.k] : [c.k, c.n])];
  const size = (s: number[]) => s.reduce((x, y) => x * y, 1);
  const specials = c.specials && c.dtype !== "int32";
  const options = { device: "wasm" as const, dtype: c.dtype };
  const a = gyre.tensor(randomData(size(aShape), c.dtype, c.seed, specials), {
    ...options,
    shape: aShape,
  });
  const b = gyre.tensor(randomData(size(bShape), c.dtype, c.seed + 1, specials), {
    ...options,
    shape: bShape,
  });
  const transposes = { transposeA: c.transposeA, transposeB: c.transposeB };
  try {
    tuning.setPlanOverride("wasmGemm", { threads: 1 });
    const single = gyre.matmul(a, b, transposes);
    const expected = await bits(single);
    const elements = expected.length;
    tuning.setPlanOverride("wasmGemm", { threads: c.threads, split: c.split });
    // Rows (columns) in tiles: a second thread has work once there are two tiles.
    const tile = c.split === "rows" ? 4 : 8;
    const batch = Math.max(size(c.batchA), size(c.batchB));
    const shared = batch * (c.split === "rows" ? c.m : c.n) > tile;
    const before = postedTasks();
    poison(elements);
    const split = gyre.matmul(a, b, transposes);
    const got = await bits(split);
    if (shared) assert.ok(postedTasks() > before, "the product was not shared with a worker");
    single.dispose();
    split.dispose();
    assert.equal(got.length, elements);
    assert.ok(got.every((v, i) => v === expected[i]), firstDifference(got, expected));
  } finally {
    tuning.setPlanOverride("wasmGemm", null);
    a.dispose();
    b.dispose();
  }
}

Deno.test({
  name: "the WASM device uses the threaded build over a shared memory, with workers",
  ignore: !threaded,
  fn: () => {
    assert.ok(wasmBackendOf(rt).allocator.memory.buffer instanceof SharedArrayBuffer);
    assert.equal(THREADS, gyre.wasmThreadCapacity());
    assert.equal(gyre.wasmThreadCount(), THREADS);
    assert.equal(THREADS, Math.min(16, navigator.hardwareConcurrency));
  },
});

Deno.test({
  name: "threaded GEMM equals the single-threaded one bit for bit (random shapes and splits)",
  ignore: !threaded,
  fn: async () => {
    const seed = Number(Deno.env.get("GYRE_SEED") ?? Math.floor(Math.random() * 2 ** 31));
    const details = await fc.check(fc.asyncProperty(CASE, checkCase), { seed, numRuns: 150 });
    if (details.failed) {
      throw new Error(
        `failed (replay with GYRE_SEED=${seed}): ${JSON.stringify(details.counterexample)}: ${
          details.errorInstance instanceof Error ? details.errorInstance.message : ""
        }`,
      );
    }
  },
});

Deno.test({
  name: "edge splits: one row or column per tile, more threads than tiles, batches of one row",
  ignore: !threaded,
  fn: async () => {
    const base = {
      batchA: [],
      batchB: [],
      transposeA: false,
      transposeB: false,
      dtype: "float32" as const,
      specials: false,
      seed: 7,
    };
    for (
      const c of [
        // Fewer rows than two tiles: everything stays on one thread (rows), or splits (columns).
        { m: 5, n: 64, k: 3, threads: 2, split: "rows" as const },
        { m: 5, n: 17, k: 3, threads: 2, split: "columns" as const },
        // The split falls inside a batch matrix, and between matrices.
        { m: 6, n: 9, k: 11, threads: 2, split: "rows" as const, batchA: [3] },
        { m: 1, n: 1, k: 300, threads: 2, split: "rows" as const, batchA: [7], batchB: [7] },
        { m: 3, n: 1, k: 2, threads: 2, split: "columns" as const, batchA: [9] },
        // A product above the rule's threshold (the plan's own split: rows).
        { m: 256, n: 200, k: 257, threads: 2, split: "rows" as const },
      ]
    ) await checkCase({ ...base, ...c });
  },
});

Deno.test({
  name: "the plan's rule: large products take every thread, split along the longer side",
  ignore: !threaded,
  fn: async () => {
    const one = tuning.planWasmGemm({ m: 100, n: 100, k: 100, batch: 1, cores: 2 });
    assert.deepEqual(one, { kernel: "wasmGemm", threads: 1, split: "rows" }); // 2e6 FLOPs
    const big = tuning.planWasmGemm({ m: 1024, n: 1024, k: 1024, batch: 1, cores: 2 });
    assert.deepEqual(big, { kernel: "wasmGemm", threads: 2, split: "rows" });
    const wide = tuning.planWasmGemm({ m: 8, n: 4096, k: 4096, batch: 1, cores: 4 });
    assert.deepEqual(wide, { kernel: "wasmGemm", threads: 4, split: "columns" });
    // Exactly the threshold: 2 * 10 * 50 * 10000 = 1e7.
    const edge = tuning.planWasmGemm({ m: 10, n: 50, k: 10000, batch: 1, cores: 2 });
    assert.equal(edge.threads, 2);
    assert.equal(tuning.planWasmGemm({ m: 10, n: 50, k: 9999, batch: 1, cores: 2 }).threads, 1);
    for (const bad of [{ threads: 0 }, { threads: 1.5 }, { split: "diagonal" }]) {
      const override = bad as Partial<tuning.WasmGemmChoice>;
      assert.throws(
        () => tuning.planWasmGemm({ m: 4, n: 4, k: 4, batch: 1, cores: 2 }, override),
        { name: "ValueError" },
      );
    }
    // A product above the threshold is shared with no override.
    const a = gyre.random.uniform([256, 256], { seed: 1, device: "wasm" });
    const before = postedTasks();
    const c = gyre.matmul(a, a);
    await c.data();
    assert.ok(postedTasks() > before);
    c.dispose();
    a.dispose();
  },
});

Deno.test({
  name: "the unshared build (threads unavailable) gives the same bits on one thread",
  ignore: !threaded,
  fn: async () => {
    const plain = new WasmBackend({ threads: false });
    assert.equal(plain.shared, false);
    assert.ok(!(plain.allocator.memory.buffer instanceof SharedArrayBuffer));
    const data = randomData(2 * 70 * 90, "float32", 3, true);
    const shape = [2, 70, 90];
    const a = gyre.tensor(data, { device: "wasm", shape });
    tuning.setPlanOverride("wasmGemm", { threads: 2 });
    const expected = await bits(gyre.matmul(a, a, { transposeB: true }));
    tuning.setPlanOverride("wasmGemm", null);
    a.dispose();
    // The same product through the unshared module's own gemm_f32, called directly.
    const bytes = data.length * 4;
    const x = plain.allocator.alloc(bytes);
    const out = plain.allocator.alloc(2 * 70 * 70 * 4);
    new Float32Array(plain.allocator.memory.buffer, x, data.length).set(data);
    const workspaceBytes = (plain.kernels.gemm_workspace as unknown as (
      ...args: number[]
    ) => number)(70, 70, 90);
    const workspace = plain.allocator.alloc(workspaceBytes);
    for (let i = 0; i < 2; i++) {
      const at = x + i * 70 * 90 * 4;
      plain.kernels.gemm_f32(
        out + i * 70 * 70 * 4,
        at,
        at,
        70,
        70,
        90,
        90,
        1,
        1,
        90,
        70,
        workspace,
      );
    }
    const got = new Uint32Array(plain.allocator.memory.buffer.slice(out, out + 2 * 70 * 70 * 4));
    assert.ok(got.every((v, i) => v === expected[i]), firstDifference(got, expected));
  },
});

Deno.test({
  name: "a worker's failure is rethrown on the calling thread, which carries on",
  ignore: !threaded,
  fn: async () => {
    const memory = wasmBackendOf(rt).allocator.memory;
    const noop = () => {};
    assert.throws(
      () => runShares(memory, "no_such_kernel", noop, 1, [[0], [0]]),
      /a WASM worker failed: .*no WASM kernel no_such_kernel/,
    );
    // Shares beyond the ready workers are refused before anything is posted.
    assert.throws(() => runShares(memory, "gemm_f32", noop, 1, new Array(THREADS + 1).fill([])));
    // The pool still works.
    await checkCase({
      m: 40,
      n: 40,
      k: 40,
      batchA: [],
      batchB: [],
      transposeA: false,
      transposeB: false,
      dtype: "float32",
      specials: false,
      threads: 2,
      split: "rows",
      seed: 1,
    });
  },
});

Deno.test({
  name: "stopWasmThreads terminates the workers; the next large product restarts them",
  ignore: !threaded,
  fn: async () => {
    await gyre.stopWasmThreads();
    assert.equal(gyre.wasmThreadCount(), 1);
    const a = gyre.random.uniform([300, 300], { seed: 2, device: "wasm" });
    const before = postedTasks();
    // Runs on this thread and starts the pool for the next product.
    const c = gyre.matmul(a, a);
    await c.data();
    c.dispose();
    assert.equal(postedTasks(), before);
    assert.equal(await gyre.startWasmThreads(), THREADS);
    const d = gyre.matmul(a, a);
    await d.data();
    d.dispose();
    a.dispose();
    assert.ok(postedTasks() > before);
  },
});

Deno.test({
  name: "workers start without permissions and never keep the process alive",
  ignore: !threaded,
  fn: async () => {
    const script = `
      import * as gyre from ${JSON.stringify(new URL("../src/mod.ts", import.meta.url).href)};
      await gyre.init({ device: "wasm" });
      await gyre.startWasmThreads();
      const a = gyre.ones([256, 256], { device: "wasm" });
      console.log(gyre.wasmThreadCount(), (await gyre.matmul(a, a).data())[0]);
    `;
    const child = new Deno.Command(Deno.execPath(), {
      // No permissions: the workers start from a data: module, which needs none.
      args: ["run", "--no-check", "-"],
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
      env: { XDG_RUNTIME_DIR: "/tmp" },
    }).spawn();
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(script));
    await writer.close();
    // The child ends on its own once its last line has run; a kept-alive worker would hang it.
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    const out = await child.output();
    clearTimeout(timer);
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    assert.equal(new TextDecoder().decode(out.stdout).trim(), `${THREADS} 256`);
  },
});

Deno.test("the GEMM is the relaxed-SIMD build where the engine has it: one rounding per step", async () => {
  const relaxed = compiledRelaxedGemm(rt.wasm.shared);
  // V8 in Deno has validated relaxed SIMD since Deno 1.35; a regression here loses 17%.
  assert.ok(relaxed !== null, "relaxed SIMD did not validate");
  // -1 + (1 + 2^-23)(1 - 2^-23) = -2^-46 with one rounding; the product rounded first gives 0.
  const a = gyre.tensor([[-1, 1 + 2 ** -23]]);
  const b = gyre.tensor([[1], [1 - 2 ** -23]]);
  const [c] = await gyre.matmul(a, b).data();
  // x86-64 CPUs have had FMA3 since 2013, and V8 emits it for relaxed_madd there.
  if (Deno.build.arch === "x86_64") assert.equal(c, -(2 ** -46));
  else assert.ok(c === 0 || c === -(2 ** -46), String(c));
  a.dispose();
  b.dispose();
});

Deno.test({
  name: "the WASM GEMM plan asks the chooser: a rule keeps a large product on one thread",
  ignore: !threaded,
  fn: async () => {
    const a = gyre.random.uniform([300, 300], { seed: 3, device: "wasm" });
    const product = async () => {
      const before = postedTasks();
      const c = gyre.matmul(a, a);
      await c.data();
      c.dispose();
      return postedTasks() - before;
    };
    try {
      assert.ok(await product() > 0, "the plan's own choice shares a 300^3 product");
      gyre.heuristics.set("[wasmGemm]\nthreads: sel(m * n * k < 1e8, 1, t);");
      const key = tuning.wasmGemmTuneKey(
        300,
        300,
        300,
        tuning.tuneGrid("wasmGemm", undefined)[0].t as number,
      );
      assert.equal(gyre.heuristics.explain("wasmGemm", key).decidedBy, "hard");
      assert.equal(await product(), 0, "the rule's one thread was not used");
      // The user's tuning rows (as the tuning cache loads them) decide too.
      gyre.heuristics.clear();
      tuning.loadUserRows({
        wasmGemm: [{
          m_min: 256,
          m_max: 511,
          n_min: 256,
          n_max: 511,
          k_min: 256,
          k_max: 511,
          t_min: 0,
          t_max: 64,
          threads: 1,
          split: 1,
        }],
      });
      assert.equal(await product(), 0, "the user's row of one thread was not used");
    } finally {
      gyre.heuristics.clear();
      tuning.loadUserRows({});
      a.dispose();
    }
  },
});

Deno.test({
  name: "tune: the WASM GEMM's choices are timed by wall clock, without a GPU",
  ignore: !threaded,
  fn: async () => {
    const t = tuning.tuneGrid("wasmGemm", undefined)[0].t as number;
    const key = tuning.wasmGemmTuneKey(256, 256, 256, t);
    const candidates = tuning.familyCandidates("wasmGemm", undefined, key);
    assert.ok(candidates.length >= 4, JSON.stringify(candidates)); // 1 and 2+ threads, 2 splits
    const timing = await tuning.measureKey("wasmGemm", key, { samples: 4, drop: Infinity });
    assert.equal(timing.candidates.length, candidates.length);
    for (const c of timing.candidates) {
      assert.ok(c.times.length === 4 && c.times.every((x) => x > 0));
    }
    // A forced choice ran as asked: one thread posts no task, more do.
    const a = gyre.random.uniform([256, 256], { seed: 4, device: "wasm" });
    for (const threads of [1, t]) {
      const before = postedTasks();
      tuning.setPlanOverride("wasmGemm", { threads });
      const c = gyre.matmul(a, a);
      tuning.setPlanOverride("wasmGemm", null);
      await c.data();
      c.dispose();
      assert.equal(postedTasks() > before, threads > 1, `threads ${threads}`);
    }
    a.dispose();
    const report = await tuning.tune(["wasmGemm"], {
      shapes: { wasmGemm: [key] },
      record: false,
      load: false,
    });
    assert.equal(report.keys.length, 1);
    assert.equal(report.keys[0].candidates.length, candidates.length);
    // A row where a candidate beat the plan clearly; none where the plan kept up (on 16 cores
    // its own choice at 256^3 did).
    assert.ok((report.rows.wasmGemm?.length ?? 0) <= 1);
  },
});
