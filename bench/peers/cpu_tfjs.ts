/// <reference lib="deno.window" />
// TensorFlow.js on its WASM backend (tfjs-core 4.22.0, tfjs-backend-wasm 4.22.0): the tfjs
// worker of the CPU benchmark (bench/cpu.ts starts it; see bench/peers/cpu_common.ts).
//
// tfjs ops are eager and synchronous on WASM (a kernel returns once its output is written, its
// XNNPACK thread pool joined), so each op is timed as issued and its result disposed.
//
// Threads. The SIMD + threads build is an Emscripten pthreads program, which does not start
// under Deno as shipped, for three reasons worked around here (see startThreadedBackend):
// 1. Deno defines `process`, so Emscripten takes its Node path, whose pthread workers need a
//    file path (tfjs gives a blob: URL); `process` is hidden while tfjs starts, so the Web path
//    is taken instead.
// 2. Emscripten's Web path makes classic workers; Deno has module workers only. `Worker` is
//    wrapped so that a classic script runs as a module, with `importScripts` (used once, to load
//    tfjs's main script into each worker) made from the script's text.
// 3. tfjs sizes its XNNPACK pool at navigator.hardwareConcurrency / 2 (it assumes two hardware
//    threads per core), which is 1 thread on a 2-CPU machine; hardwareConcurrency reads twice
//    its value while tfjs starts, so the pool gets one thread per logical CPU.
// With --no-threads (which bench/cpu.ts passes on a second try when the threaded start fails)
// the SIMD build runs on one thread; the header line says which build ran.
//
// The npm: specifiers keep this file a plain Deno program (deno check, deno run); the packages
// are pinned in bench/peers/package.json and package-lock.json as well.

// deno-lint-ignore no-import-prefix
import type * as tfTypes from "npm:@tensorflow/tfjs-core@4.22.0";
// deno-lint-ignore no-import-prefix
import type * as wasmTypes from "npm:@tensorflow/tfjs-backend-wasm@4.22.0";
import {
  CASE_NAMES,
  cpuSizes,
  emit,
  errText,
  log,
  normalData,
  parseWorkerArgs,
  poolOut,
  type Runner,
  runWorker,
  type WorkerCase,
} from "./cpu_common.ts";

const args = parseWorkerArgs(Deno.args);
const wantThreads = !Deno.args.includes("--no-threads");
const sizes = cpuSizes(args.quick);
const WASM_PKG = "@tensorflow/tfjs-backend-wasm";
const WASM_VERSION = "4.22.0";

/** The package's dist/ folder (its .wasm files) as a file: URL ending in "/", or null. */
async function wasmDir(): Promise<string | null> {
  const candidates = [
    new URL(`./node_modules/${WASM_PKG}/dist/`, import.meta.url).pathname,
  ];
  try {
    // Deno's npm cache, where `deno run` put the package when bench/peers has no node_modules.
    const out = await new Deno.Command(Deno.execPath(), { args: ["info", "--json"] }).output();
    const info = JSON.parse(new TextDecoder().decode(out.stdout)) as { npmCache?: string };
    if (info.npmCache) {
      candidates.push(`${info.npmCache}/registry.npmjs.org/${WASM_PKG}/${WASM_VERSION}/dist/`);
    }
  } catch {
    // No cache path: only node_modules is tried.
  }
  for (const dir of candidates) {
    try {
      await Deno.stat(`${dir}tfjs-backend-wasm-threaded-simd.wasm`);
      return new URL(`file://${dir}`).href;
    } catch {
      // Not here; try the next one.
    }
  }
  return null;
}

/** Prepended to every pthread worker's (classic) script so that it runs as a module worker. */
const WORKER_PRELUDE = `
// Emscripten must take its Web path here too, not its Node one.
Object.defineProperty(globalThis, "process", { value: undefined, configurable: true, writable: true });
// The worker loads tfjs's main script once, from a Blob in its "load" message, by importScripts;
// the Blob's text is read first (asynchronously) and evaluated as a classic script.
let script = "";
globalThis.importScripts = () => (0, eval)(script);
let handler = null;
Object.defineProperty(globalThis, "onmessage", {
  configurable: true,
  get: () => handler,
  set: (h) => { handler = h; },
});
let queue = Promise.resolve();
addEventListener("message", (e) => {
  queue = queue.then(async () => {
    const d = e.data;
    if (d && d.cmd === "load" && typeof d.urlOrBlob !== "string") script = await d.urlOrBlob.text();
    if (handler) handler(e);
  });
});
`;

type WorkerCtor = new (url: string | URL, options?: WorkerOptions) => Worker;

/** Starts tfjs's WASM backend, threaded when possible; returns a description of the build. */
async function startBackend(): Promise<{ tf: typeof tfTypes; build: string; version: string }> {
  const g = globalThis as unknown as Record<string, unknown>;
  // tfjs-core picks its platform at import: with WorkerGlobalScope defined it takes the browser
  // one (fetch), not the Node one (see tfjs_shim.ts).
  if (typeof g.WorkerGlobalScope === "undefined") g.WorkerGlobalScope = class {};
  const dir = wantThreads ? await wasmDir() : null;
  if (wantThreads && dir === null) log("[tfjs] no tfjs-backend-wasm dist/ found: SIMD build");
  const processDesc = Object.getOwnPropertyDescriptor(globalThis, "process");
  const NativeWorker = globalThis.Worker as unknown as WorkerCtor;
  const cores = navigator.hardwareConcurrency;
  const threaded = dir !== null;
  if (threaded) {
    Object.defineProperty(globalThis, "process", {
      value: undefined,
      configurable: true,
      writable: true,
    });
    g.Worker = class extends NativeWorker {
      constructor(url: string | URL, options?: WorkerOptions) {
        if (options?.type === "module") {
          super(url, options);
          return;
        }
        const src = `${WORKER_PRELUDE}\nawait import(${JSON.stringify(String(url))});\n`;
        super(URL.createObjectURL(new Blob([src], { type: "text/javascript" })), {
          type: "module",
        });
      }
    };
    Object.defineProperty(navigator, "hardwareConcurrency", {
      value: 2 * cores,
      configurable: true,
    });
  }
  try {
    // deno-lint-ignore no-import-prefix
    const tf = await import("npm:@tensorflow/tfjs-core@4.22.0");
    // Threaded: the ES module build (the package's main entry is the CommonJS Node build, which
    // takes Emscripten's Node path whatever the global `process` reads). Otherwise that Node
    // build, which finds its .wasm files by itself.
    let wasm: typeof wasmTypes;
    if (threaded) {
      // deno-lint-ignore no-import-prefix
      wasm = await import("npm:@tensorflow/tfjs-backend-wasm@4.22.0/dist/tf-backend-wasm.fesm.js");
    } else {
      // deno-lint-ignore no-import-prefix
      wasm = await import("npm:@tensorflow/tfjs-backend-wasm@4.22.0");
    }
    if (threaded) {
      tf.env().set("WASM_HAS_MULTITHREAD_SUPPORT", true);
      wasm.setThreadsCount(cores);
      wasm.setWasmPaths(dir, true); // fetch the .wasm from a file: URL with Deno's fetch
    } else {
      tf.env().set("WASM_HAS_MULTITHREAD_SUPPORT", false);
    }
    if (!(await tf.setBackend("wasm"))) throw new Error("tf.setBackend('wasm') failed");
    await tf.ready();
    const simd = await tf.env().getAsync("WASM_HAS_SIMD_SUPPORT");
    const threads = wasm.getThreadsCount();
    const build = threaded
      ? `SIMD + threads build, ${threads} thread${threads > 1 ? "s" : ""}`
      : `${simd ? "SIMD" : "plain"} build, 1 thread`;
    return {
      tf,
      build,
      version: `tfjs-core ${tf.version_core}, tfjs-backend-wasm ${wasm.version_wasm}`,
    };
  } finally {
    if (processDesc) Object.defineProperty(globalThis, "process", processDesc);
    g.Worker = NativeWorker;
    delete (navigator as unknown as Record<string, unknown>).hardwareConcurrency;
  }
}

async function main(): Promise<void> {
  const { tf, build, version } = await startBackend();
  log(`[tfjs] ${version}, ${build}`);
  emit({ type: "meta", lib: "tfjs-wasm", version, build });

  const held: tfTypes.Tensor[] = [];
  const input = (shape: number[]) => {
    const t = tf.tensor(normalData(shape.reduce((a, b) => a * b, 1)), shape, "float32");
    held.push(t);
    return t;
  };
  const free = () => {
    for (const t of held.splice(0)) t.dispose();
  };
  /** tfjs computes as it issues: run the op, drop its result. */
  const runner = (op: () => tfTypes.Tensor): Runner => (reps) => {
    for (let i = 0; i < reps; i++) tf.tidy(op).dispose();
  };
  const n = sizes.n;
  const byName: Record<string, Omit<WorkerCase, "name">> = {
    exp: {
      setup: () => {
        const x = input([n]);
        return runner(() => tf.exp(x));
      },
    },
    relu_chain: {
      note: "tf.relu(x * 2 + 1): three kernels",
      setup: () => {
        const x = input([n]);
        return runner(() => tf.relu(tf.add(tf.mul(x, 2), 1)));
      },
    },
    softmax: {
      setup: () => {
        const x = input(sizes.softmax);
        return runner(() => tf.softmax(x));
      },
    },
    maxpool: {
      note: "tf.maxPool on NHWC (tfjs pools NHWC only): the same sizes as [N, H, W, C]",
      setup: () => {
        const [b, c, h, w] = sizes.pool;
        const x = input([b, h, w, c]);
        const want = [b, poolOut(h), poolOut(w), c];
        const check = tf.maxPool(x as tfTypes.Tensor4D, 3, 2, "valid");
        if (check.shape.join() !== want.join()) throw new Error(`pool shape ${check.shape}`);
        check.dispose();
        return runner(() => tf.maxPool(x as tfTypes.Tensor4D, 3, 2, "valid"));
      },
    },
    maxpool_nchw: { missing: "tfjs pools NHWC only" },
    max_rows: {
      setup: () => {
        const x = input(sizes.maxRows);
        return runner(() => tf.max(x, 1));
      },
    },
    sum: {
      setup: () => {
        const x = input([n]);
        return runner(() => tf.sum(x));
      },
    },
    matmul_1024: {
      setup: () => {
        const m = sizes.matmulSmall;
        const a = input([m, m]), b = input([m, m]);
        return runner(() => tf.matMul(a, b));
      },
    },
    matmul_2048: {
      setup: () => {
        const m = sizes.matmulLarge;
        const a = input([m, m]), b = input([m, m]);
        return runner(() => tf.matMul(a, b));
      },
    },
    add: {
      setup: () => {
        const a = input([n]), b = input([n]);
        return runner(() => tf.add(a, b));
      },
    },
    copy: {
      missing: "no copy op: tf.clone shares the input's buffer",
    },
    cumsum: {
      setup: () => {
        const x = input([n]);
        return runner(() => tf.cumsum(x));
      },
    },
    layernorm: {
      note: "tf.moments, then (x - mean) / sqrt(var + eps): composed, no tfjs op",
      setup: () => {
        const x = input(sizes.layerNorm);
        return runner(() => {
          const { mean, variance } = tf.moments(x, 1, true);
          return tf.div(tf.sub(x, mean), tf.sqrt(tf.add(variance, 1e-5)));
        });
      },
    },
    transpose: {
      note: "tf.transpose (copies)",
      setup: () => {
        const x = input(sizes.transpose);
        return runner(() => tf.transpose(x));
      },
    },
  };
  await runWorker(CASE_NAMES.map((name) => ({ name, ...byName[name], teardown: free })), args);
}

try {
  await main();
} catch (e) {
  log(`[tfjs] fatal: ${errText(e)}`);
  Deno.exit(1);
}
// tfjs's pthread workers would keep the process alive.
Deno.exit(0);
