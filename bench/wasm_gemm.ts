/**
 * WASM GEMM benchmark, in one process: gyre's WASM GEMM on one thread and on every thread (the
 * calling thread plus the pool's workers), the same kernel from the unshared (single-threaded)
 * build called directly, and jax-js's wasm backend (`@jax-js/jax` 0.1.25, which shares its kernels
 * with a pool of Web Workers too), on float32 N x N x N (1024 by default). NumPy (OpenBLAS) runs
 * afterwards in a subprocess when python3 has it, for scale.
 *
 * Each sample computes one product and forces it without a read-back: gyre's `realize()` (its
 * products are lazy) and jax-js's `blockUntilReady` (jax-js is lazy too and drops unobserved
 * work). Rounds interleave the variants (each runs once per round, after a warm-up), so drift in
 * the machine's clock or load affects all alike; the table reports the median and best of the
 * rounds. Results are checked against each other and against f64 dot products on a few rows.
 * Writes JSON and Markdown to `--out` as wasm-gemm-<cpu model>.{json,md}.
 *
 * Usage: deno run -A bench/wasm_gemm.ts [--size N] [--rounds R] [--out bench/results]
 * @module
 */
// deno-lint-ignore no-import-prefix
import * as jax from "npm:@jax-js/jax@0.1.25";
import * as gyre from "../src/mod.ts";
import * as tuning from "../src/tuning.ts";
import { WasmBackend } from "../src/wasm/backend.ts";
import { cpuModel, hostData, median, slugOf } from "./_util.ts";

const args = Deno.args;
const flag = (name: string, fallback: string) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const size = Number(flag("size", "1024"));
const rounds = Number(flag("rounds", "15"));
const outDir = flag("out", "bench/results");

/** A variant: `run` computes one product and returns it forced, as host data when `read`. */
interface Variant {
  name: string;
  threads: number;
  run: () => Promise<void>;
  result: () => Promise<Float32Array>;
  times: number[];
}

const n = size;
const aHost = hostData(n * n, 1);
const bHost = hostData(n * n, 2);

// gyre: both thread counts on the runtime's (threaded, shared-memory) WASM device.
const rt = await gyre.init({ device: "wasm" });
const threads = await gyre.startWasmThreads();
const a = gyre.tensor(aHost, { device: "wasm", shape: [n, n] });
const b = gyre.tensor(bHost, { device: "wasm", shape: [n, n] });
function gyreVariant(count: number): Variant {
  const product = () => {
    tuning.setPlanOverride("wasmGemm", { threads: count });
    try {
      return gyre.matmul(a, b).realize();
    } finally {
      tuning.setPlanOverride("wasmGemm", null);
    }
  };
  return {
    name: `gyre WASM GEMM, ${count} thread${count > 1 ? "s" : ""}${
      rt.wasm.shared ? " (threaded build, shared memory)" : ""
    }`,
    threads: count,
    run: () => {
      product().dispose();
      return Promise.resolve();
    },
    result: async () => {
      const c = product();
      try {
        return (await c.data()) as Float32Array;
      } finally {
        c.dispose();
      }
    },
    times: [],
  };
}

// The unshared build: what runs where threads are unavailable. Called directly (one gemm_f32).
const plain = new WasmBackend({ threads: false });
const plainA = plain.allocator.alloc(n * n * 4);
const plainB = plain.allocator.alloc(n * n * 4);
const plainC = plain.allocator.alloc(n * n * 4);
new Float32Array(plain.allocator.memory.buffer, plainA, n * n).set(aHost);
new Float32Array(plain.allocator.memory.buffer, plainB, n * n).set(bHost);
const plainWorkspace = plain.allocator.alloc(
  (plain.kernels.gemm_workspace as unknown as (...x: number[]) => number)(n, n, n),
);
const plainRun = () =>
  plain.kernels.gemm_f32(plainC, plainA, plainB, n, n, n, n, 1, n, 1, n, plainWorkspace);
const plainVariant: Variant = {
  name: "gyre WASM GEMM, 1 thread (unshared build, kernel called directly)",
  threads: 1,
  run: () => {
    plainRun();
    return Promise.resolve();
  },
  result: () => {
    plainRun();
    return Promise.resolve(
      new Float32Array(plain.allocator.memory.buffer.slice(plainC, plainC + n * n * 4)),
    );
  },
  times: [],
};

// jax-js on its wasm device (its worker pool starts on the first kernel).
const devices = await jax.init("wasm");
if (!devices.includes("wasm")) throw new Error(`jax-js has no wasm device: [${devices}]`);
jax.defaultDevice("wasm");
const np = jax.numpy;
const ja = np.array(aHost, { dtype: np.float32 }).reshape([n, n]);
const jb = np.array(bHost, { dtype: np.float32 }).reshape([n, n]);
await jax.blockUntilReady([ja, jb]);
const jaxVariant: Variant = {
  name: `jax-js 0.1.25 wasm backend (${navigator.hardwareConcurrency} workers)`,
  threads: navigator.hardwareConcurrency,
  run: async () => {
    // `.ref` keeps the inputs alive across calls (jax-js consumes its arguments).
    const c = np.matmul(ja.ref, jb.ref);
    await jax.blockUntilReady(c);
    c.dispose();
  },
  result: async () => (await np.matmul(ja.ref, jb.ref).data()) as Float32Array,
  times: [],
};

const variants = [
  plainVariant,
  gyreVariant(1),
  ...(threads > 1 ? [gyreVariant(threads)] : []),
  jaxVariant,
];

// Check: every variant against f64 dot products on a few rows, and gyre's threaded result
// against its single-threaded one bit for bit.
const checks: string[] = [];
const results = await Promise.all(variants.map((v) => v.result()));
const rows = [0, 1, n >> 1, n - 1];
results.forEach((c, vi) => {
  let worst = 0;
  for (const i of rows) {
    for (let j = 0; j < n; j++) {
      let dot = 0, scale = 0;
      for (let p = 0; p < n; p++) {
        dot += aHost[i * n + p] * bHost[p * n + j];
        scale += Math.abs(aHost[i * n + p] * bHost[p * n + j]);
      }
      worst = Math.max(worst, Math.abs(c[i * n + j] - dot) / scale);
    }
  }
  // float32 sums of n products: |error| <= n u sum|a b| with u = 2^-24.
  const bound = n * 2 ** -24;
  checks.push(
    `${variants[vi].name}: max |c - c64| / sum|ab| over rows ${rows.join(", ")} = ${
      worst.toExponential(2)
    } (bound ${bound.toExponential(2)})${worst <= bound ? "" : " WRONG"}`,
  );
});
const bitsOf = (x: Float32Array) => new Uint32Array(x.buffer, x.byteOffset, x.length);
for (let vi = 2; vi < variants.length - 1; vi++) {
  const same = bitsOf(results[vi]).every((v, i) => v === bitsOf(results[1])[i]);
  checks.push(`${variants[vi].name} equals 1 thread bit for bit: ${same}`);
}
const samePlain = bitsOf(results[0]).every((v, i) => v === bitsOf(results[1])[i]);
checks.push(`unshared build equals the threaded build bit for bit: ${samePlain}`);
for (const c of checks) console.error(c);

// Warm-up, then interleaved rounds.
for (const v of variants) for (let i = 0; i < 3; i++) await v.run();
for (let r = 0; r < rounds; r++) {
  for (const v of variants) {
    const t0 = performance.now();
    await v.run();
    v.times.push(performance.now() - t0);
  }
}

/** NumPy's matmul in a subprocess (median of `rounds` after a warm-up), or null. */
async function numpy(): Promise<{ ms: number; version: string } | null> {
  const script = `
import time, numpy as np
n = ${n}
a = np.random.default_rng(1).random((n, n), dtype=np.float32)
b = np.random.default_rng(2).random((n, n), dtype=np.float32)
for _ in range(3): a @ b
ts = []
for _ in range(${rounds}):
    t0 = time.perf_counter(); a @ b; ts.append(time.perf_counter() - t0)
ts.sort()
print(ts[len(ts) // 2] * 1e3, np.__version__)
`;
  try {
    const out = await new Deno.Command("python3", { args: ["-c", script] }).output();
    if (!out.success) return null;
    const [ms, version] = new TextDecoder().decode(out.stdout).trim().split(" ");
    return { ms: Number(ms), version };
  } catch {
    return null;
  }
}
const numpyResult = await numpy();

const cpu = cpuModel();
const flops = 2 * n ** 3;
const table = variants.map((v) => ({
  variant: v.name,
  threads: v.threads,
  medianMs: median(v.times),
  bestMs: Math.min(...v.times),
  gflops: flops / median(v.times) / 1e6,
  times: v.times,
}));
const md = [
  `# WASM GEMM ${n}x${n}x${n} float32: gyre vs jax-js (same run)`,
  "",
  `${new Date().toISOString()}, ${cpu}, ${navigator.hardwareConcurrency} logical CPUs, Deno ` +
  `${Deno.version.deno} (V8 ${Deno.version.v8}). Each sample computes one product and forces it ` +
  `without a read-back (gyre \`realize()\`, jax-js \`blockUntilReady\`); ${rounds} rounds ` +
  "interleaving the variants after 3 warm-up runs each. `bench/wasm_gemm.ts`.",
  "",
  "| variant | threads | median ms | best ms | GFLOP/s (median) |",
  "|---|---:|---:|---:|---:|",
  ...table.map((r) =>
    `| ${r.variant} | ${r.threads} | ${r.medianMs.toFixed(1)} | ${r.bestMs.toFixed(1)} | ${
      r.gflops.toFixed(1)
    } |`
  ),
  ...(numpyResult
    ? [
      `| NumPy ${numpyResult.version} (OpenBLAS), subprocess after the rounds, for scale | all | ${
        numpyResult.ms.toFixed(1)
      } | | ${(flops / numpyResult.ms / 1e6).toFixed(1)} |`,
    ]
    : []),
  "",
  "Checks:",
  "",
  ...checks.map((c) => `- ${c}`),
  "",
].join("\n");
const slug = slugOf(cpu);
await Deno.mkdir(outDir, { recursive: true });
await Deno.writeTextFile(`${outDir}/wasm-gemm-${slug}.md`, md);
await Deno.writeTextFile(
  `${outDir}/wasm-gemm-${slug}.json`,
  JSON.stringify(
    {
      date: new Date().toISOString(),
      cpu,
      logicalCpus: navigator.hardwareConcurrency,
      deno: Deno.version.deno,
      v8: Deno.version.v8,
      size: n,
      rounds,
      rows: table,
      numpy: numpyResult,
      checks,
    },
    null,
    2,
  ) + "\n",
);
console.log(md);
// jax-js's Web Workers would keep the process alive.
Deno.exit(0);
