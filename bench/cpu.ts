/**
 * CPU benchmark, side by side in one run: gyre's WASM device on 1 thread and on 2 (the pool
 * started), TensorFlow.js's WASM backend (bench/peers/cpu_tfjs.ts), jax-js's wasm backend
 * (bench/peers/cpu_jax.ts) and NumPy with single-threaded OpenBLAS (bench/cpu_numpy.py), over
 * the cases of issue 30 (bench/peers/cpu_common.ts), against the machine's copy bandwidth.
 *
 * Every library runs in its own process, one after another, so that no thread pool, heap or
 * JIT state leaks between them, and so that the CPU-idle check can tell the benchmarked
 * process's CPU time from everyone else's: a case during which other processes used more than
 * 10% of a core is retried up to twice, then the run stops with exit code 2 (`--force` reports
 * anyway and marks those figures contended). See bench/README.md ("bench/cpu.ts").
 *
 * Usage: deno run -A bench/cpu.ts [--quick] [--only exp,sum,...] [--force]
 *          [--libs gyre1,gyre2,tfjs,jax,numpy] [--out bench/results/cpu-<machine>]
 * @module
 */
import * as gyre from "../src/mod.ts";
import { postedTasks } from "../src/wasm/threads.ts";
import {
  CASE_NAMES,
  type CaseName,
  type CaseResult,
  type CpuSizes,
  cpuSizes,
  emit,
  errText,
  log,
  normalData,
  parseWorkerArgs,
  type Runner,
  runWorker,
  timeCase,
  type WorkerArgs,
  type WorkerCase,
} from "./peers/cpu_common.ts";
import { cpuModel, slugOf } from "./_util.ts";

const LIBS = ["gyre1", "gyre2", "tfjs", "jax", "numpy"] as const;
type Lib = (typeof LIBS)[number];
const LIB_TITLES: Record<Lib, string> = {
  gyre1: "gyre 1T",
  gyre2: "gyre 2T",
  tfjs: "tfjs-wasm",
  jax: "jax-js wasm",
  numpy: "NumPy",
};

// ---------------------------------------------------------------------------------------------
// The gyre worker (`--worker gyre --threads N`): one process per thread count.

async function gyreWorker(threads: number, args: WorkerArgs): Promise<void> {
  // The pool sizes itself from hardwareConcurrency whenever a job asks (src/wasm/threads.ts): at
  // 1 it never starts, so every kernel (GEMM, rows, pools, elementwise) runs on this thread; at
  // 2 it has one worker, whatever the machine's core count.
  Object.defineProperty(navigator, "hardwareConcurrency", { value: threads, configurable: true });
  const rt = await gyre.init({ device: "wasm" });
  const count = threads > 1 ? await gyre.startWasmThreads() : gyre.wasmThreadCount();
  if (count !== threads) {
    throw new Error(`gyre's WASM pool has ${count} threads, ${threads} were asked for`);
  }
  const build = `WASM device, ${count} thread${count > 1 ? "s" : ""}` +
    (rt.wasm.shared ? " (threaded build, shared memory)" : " (unshared build)");
  log(`[gyre] ${build}`);
  emit({ type: "meta", lib: `gyre${threads}`, version: await gyreVersion(), build });

  const sizes = cpuSizes(args.quick);
  const held: gyre.Tensor[] = [];
  const input = (shape: number[]) => {
    const x = gyre.tensor(normalData(shape.reduce((a, b) => a * b, 1)), {
      device: "wasm",
      shape,
    });
    held.push(x);
    return x;
  };
  const free = () => {
    for (const t of held.splice(0)) t.dispose();
  };
  // gyre is lazy: realize() computes the result on the WASM device before it returns (the
  // backend is synchronous), with no read-back; tidy frees the pending intermediates of a chain
  // (folded into the result's one kernel, not computed apart).
  const runner = (op: () => gyre.Tensor): Runner => (reps) => {
    for (let i = 0; i < reps; i++) gyre.tidy(op).realize().dispose();
  };
  const n = sizes.n;
  const byName: Record<CaseName, Omit<WorkerCase, "name">> = {
    exp: { setup: () => runner(((x) => () => gyre.exp(x))(input([n]))) },
    relu_chain: {
      note: "relu(x.mul(2).add(1)): one fused kernel",
      setup: () => runner(((x) => () => gyre.relu(x.mul(2).add(1)))(input([n]))),
    },
    softmax: { setup: () => runner(((x) => () => gyre.softmax(x))(input(sizes.softmax))) },
    maxpool: {
      note: "channels-last: an NHWC tensor seen as NCHW (x.transpose([0, 3, 1, 2])), pooled in " +
        "place into a channels-last result (its fastest layout)",
      setup: () => {
        const [b, c, h, w] = sizes.pool;
        const x = input([b, h, w, c]).transpose([0, 3, 1, 2]);
        held.push(x);
        return runner(() => gyre.maxPool2d(x, { kernelSize: 3, stride: 2 }));
      },
    },
    maxpool_nchw: {
      setup: () =>
        runner(((x) => () => gyre.maxPool2d(x, { kernelSize: 3, stride: 2 }))(input(sizes.pool))),
    },
    max_rows: {
      setup: () => runner(((x) => () => gyre.max(x, { axis: 1 }))(input(sizes.maxRows))),
    },
    sum: { setup: () => runner(((x) => () => gyre.sum(x))(input([n]))) },
    matmul_1024: {
      setup: () => {
        const m = sizes.matmulSmall;
        const a = input([m, m]), b = input([m, m]);
        return runner(() => gyre.matmul(a, b));
      },
    },
    matmul_2048: {
      setup: () => {
        const m = sizes.matmulLarge;
        const a = input([m, m]), b = input([m, m]);
        return runner(() => gyre.matmul(a, b));
      },
    },
    add: {
      setup: () => {
        const a = input([n]), b = input([n]);
        return runner(() => gyre.add(a, b));
      },
    },
    copy: { note: "gyre.clone", setup: () => runner(((x) => () => gyre.clone(x))(input([n]))) },
    cumsum: { setup: () => runner(((x) => () => gyre.cumsum(x))(input([n]))) },
    layernorm: {
      setup: () => runner(((x) => () => gyre.layerNorm(x, { eps: 1e-5 }))(input(sizes.layerNorm))),
    },
    transpose: {
      note: "gyre.clone(x.transpose())",
      setup: () => runner(((x) => () => gyre.clone(x.transpose()))(input(sizes.transpose))),
    },
  };
  // Count the tasks handed to pool workers during each case: none on 1 thread, and on 2 they
  // show which cases were shared at all.
  const cases = CASE_NAMES.map((name): WorkerCase => {
    const c = byName[name];
    let before = 0;
    return {
      name,
      ...c,
      setup: () => {
        before = postedTasks();
        return c.setup!();
      },
      teardown: () => {
        const tasks = postedTasks() - before;
        if (threads === 1 && tasks > 0) log(`  ${name}: ${tasks} tasks went to pool workers`);
        free();
      },
    };
  });
  await runWorker(cases, args);
}

async function gyreVersion(): Promise<string> {
  const config = JSON.parse(
    await Deno.readTextFile(new URL("../deno.json", import.meta.url)),
  ) as { version: string };
  const git = async (...a: string[]) => {
    try {
      const out = await new Deno.Command("git", { args: a, stderr: "null" }).output();
      return out.success ? new TextDecoder().decode(out.stdout).trim() : "";
    } catch {
      return "";
    }
  };
  const commit = await git("rev-parse", "--short", "HEAD");
  const dirty = (await git("status", "--porcelain", "--untracked-files=no")).length > 0;
  return `gyre ${config.version}${
    commit ? ` at ${commit}${dirty ? " + uncommitted changes" : ""}` : ""
  }`;
}

// ---------------------------------------------------------------------------------------------
// Copy bandwidth: WASM memory.copy in this process (NumPy's np.copyto runs in its worker).

/** A module exporting its memory and copy(dst, src, bytes) = memory.copy (bulk memory). */
const COPY_MODULE = new Uint8Array([
  0x00,
  0x61,
  0x73,
  0x6d,
  0x01,
  0x00,
  0x00,
  0x00, // header
  0x01,
  0x07,
  0x01,
  0x60,
  0x03,
  0x7f,
  0x7f,
  0x7f,
  0x00, // type (i32, i32, i32) -> ()
  0x03,
  0x02,
  0x01,
  0x00, // one function of that type
  0x05,
  0x03,
  0x01,
  0x00,
  0x01, // memory, 1 page to start
  0x07,
  0x0e,
  0x02,
  0x03,
  0x6d,
  0x65,
  0x6d,
  0x02,
  0x00,
  0x04,
  0x63,
  0x6f,
  0x70,
  0x79,
  0x00,
  0x00,
  0x0a,
  0x0e,
  0x01,
  0x0c,
  0x00,
  0x20,
  0x00,
  0x20,
  0x01,
  0x20,
  0x02,
  0xfc,
  0x0a,
  0x00,
  0x00,
  0x0b,
]);

async function wasmCopy(bytes: number): Promise<CaseResult> {
  const { instance } = await WebAssembly.instantiate(COPY_MODULE);
  const memory = instance.exports.mem as WebAssembly.Memory;
  const copy = instance.exports.copy as (dst: number, src: number, n: number) => void;
  memory.grow((2 * bytes) / 65536);
  new Float32Array(memory.buffer, 0, bytes / 4).set(normalData(bytes / 4));
  return await timeCase("wasm_memory_copy", (reps) => {
    for (let i = 0; i < reps; i++) copy(bytes, 0, bytes);
  }, "memory.copy");
}

// ---------------------------------------------------------------------------------------------
// The orchestrator.

interface Options extends WorkerArgs {
  force: boolean;
  out: string | null;
  libs: Lib[];
}

function parseOptions(args: string[]): Options {
  const base = parseWorkerArgs(args);
  const value = (name: string) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const libs = (value("--libs") ?? LIBS.join(",")).split(",") as Lib[];
  for (const l of libs) if (!LIBS.includes(l)) throw new Error(`--libs: unknown ${l}`);
  for (const c of base.only) {
    if (!(CASE_NAMES as readonly string[]).includes(c)) {
      throw new Error(`--only: unknown case ${c} (cases: ${CASE_NAMES.join(", ")})`);
    }
  }
  return { ...base, force: args.includes("--force"), out: value("--out") ?? null, libs };
}

interface LibRun {
  lib: Lib;
  version: string;
  build: string;
  results: Map<string, CaseResult>;
  /** Why the worker stopped early, if it did. */
  error?: string;
}

class Refusal extends Error {}

/** Reads `stream` line by line. */
async function* lines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  let buffer = "";
  for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
    buffer += chunk;
    let at;
    while ((at = buffer.indexOf("\n")) >= 0) {
      yield buffer.slice(0, at);
      buffer = buffer.slice(at + 1);
    }
  }
  if (buffer.length > 0) yield buffer;
}

/** No line for this long: the worker is taken as hung and stopped. */
const LINE_TIMEOUT_MS = 15 * 60 * 1000;

function fmtMs(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "n/a";
  return ms < 1
    ? ms.toFixed(3)
    : ms < 10
    ? ms.toFixed(2)
    : ms < 100
    ? ms.toFixed(1)
    : ms.toFixed(0);
}

function progress(title: string, r: CaseResult): void {
  const other = r.otherCorePct === null ? "idle check n/a" : `others ${r.otherCorePct.toFixed(0)}%`;
  const extra = r.ms === null ? ` (${r.note})` : ` ms (x${r.reps}, ${other}` +
    `${r.attempts > 1 ? `, attempt ${r.attempts}` : ""}${r.contended ? ", CONTENDED" : ""})`;
  log(`[${title}] ${r.case}: ${fmtMs(r.ms)}${extra}`);
}

function refuse(title: string, r: CaseResult): never {
  const why = r.otherCorePct === null
    ? "the CPU-idle check is unavailable here (no /proc/stat)"
    : `other processes used ${
      r.otherCorePct.toFixed(0)
    }% of a core during it (limit 10%), in ${r.attempts} attempts`;
  throw new Refusal(
    `refusing to report: ${title} ${r.case}: ${why}. Stop the other work and run again, ` +
      "or pass --force to report figures marked contended.",
  );
}

/** Runs one worker process and collects its cases; refuses (throws) on a contended case. */
async function runLib(
  lib: Lib,
  command: string,
  args: string[],
  opts: Options,
  env?: Record<string, string>,
): Promise<LibRun> {
  const title = LIB_TITLES[lib];
  const run: LibRun = { lib, version: "?", build: "?", results: new Map() };
  const child = new Deno.Command(command, { args, stdout: "piped", stderr: "inherit", env })
    .spawn();
  const reader = lines(child.stdout)[Symbol.asyncIterator]();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let done = false;
  try {
    while (true) {
      const next = await Promise.race([
        reader.next(),
        new Promise<"timeout">((r) => timer = setTimeout(() => r("timeout"), LINE_TIMEOUT_MS)),
      ]);
      clearTimeout(timer);
      if (next === "timeout") {
        run.error = `no output for ${LINE_TIMEOUT_MS / 60000} minutes`;
        break;
      }
      if (next.done) break;
      let msg: { type: string } & Record<string, unknown>;
      try {
        msg = JSON.parse(next.value);
      } catch {
        log(`[${title}] ${next.value}`); // a library printing to stdout
        continue;
      }
      if (msg.type === "meta") {
        run.version = String(msg.version);
        run.build = String(msg.build);
      } else if (msg.type === "case") {
        const r = msg as unknown as CaseResult;
        progress(title, r);
        run.results.set(r.case, r);
        if (r.contended && !opts.force) refuse(title, r);
      } else if (msg.type === "done") done = true;
    }
  } finally {
    clearTimeout(timer);
    if (!done) {
      try {
        child.kill();
      } catch {
        // Already exited.
      }
    }
    const status = await child.status;
    if (!done && !run.error) run.error = `exited with code ${status.code} before finishing`;
  }
  return run;
}

async function orchestrate(opts: Options): Promise<void> {
  const sizes = cpuSizes(opts.quick);
  const deno = Deno.execPath();
  const self = new URL(import.meta.url).pathname;
  const peers = new URL("./peers/", import.meta.url).pathname;
  const pass = [
    ...(opts.quick ? ["--quick"] : []),
    ...(opts.only.size ? ["--only", [...opts.only].join(",")] : []),
  ];
  const runs: LibRun[] = [];

  log(`[copy] WASM memory.copy of ${sizes.copyBytes >> 20} MiB`);
  const wasmCopyResult = await wasmCopy(sizes.copyBytes);
  progress("copy", wasmCopyResult);
  if (wasmCopyResult.contended && !opts.force) refuse("copy bandwidth", wasmCopyResult);

  for (const lib of opts.libs) {
    let run: LibRun;
    switch (lib) {
      case "gyre1":
      case "gyre2":
        run = await runLib(lib, deno, [
          "run",
          "-A",
          self,
          "--worker",
          "gyre",
          "--threads",
          lib === "gyre1" ? "1" : "2",
          ...pass,
        ], opts);
        break;
      case "tfjs":
        run = await runLib(lib, deno, ["run", "-A", `${peers}cpu_tfjs.ts`, ...pass], opts);
        if (run.results.size === 0) {
          log(`[tfjs-wasm] the threaded build did not start (${run.error}): the SIMD build`);
          run = await runLib(lib, deno, [
            "run",
            "-A",
            `${peers}cpu_tfjs.ts`,
            "--no-threads",
            ...pass,
          ], opts);
        }
        break;
      case "jax":
        run = await runLib(lib, deno, ["run", "-A", `${peers}cpu_jax.ts`, ...pass], opts);
        break;
      case "numpy": {
        const single = { OPENBLAS_NUM_THREADS: "1", OMP_NUM_THREADS: "1", MKL_NUM_THREADS: "1" };
        const script = new URL("./cpu_numpy.py", import.meta.url).pathname;
        run = await runLib(
          lib,
          "python3",
          [
            script,
            "--sizes",
            JSON.stringify(sizes),
            ...pass.filter((a) => a !== "--quick"),
          ],
          opts,
          single,
        );
        break;
      }
    }
    if (run.error) log(`[${LIB_TITLES[lib]}] stopped: ${run.error}`);
    runs.push(run);
  }
  report(opts, sizes, runs, wasmCopyResult);
}

// ---------------------------------------------------------------------------------------------
// The report.

/** Bytes a memory-bound case must move (inputs read once, output written once), else null. */
function bytesMoved(c: CaseName, s: CpuSizes): number | null {
  const f = 4;
  const prod = (xs: number[]) => xs.reduce((a, b) => a * b, 1);
  switch (c) {
    case "add":
      return 3 * s.n * f;
    case "copy":
    case "cumsum":
    case "relu_chain":
      return 2 * s.n * f;
    case "sum":
      return s.n * f;
    case "max_rows":
      return (prod(s.maxRows) + s.maxRows[0]) * f;
    case "transpose":
      return 2 * prod(s.transpose) * f;
    case "softmax":
      return 2 * prod(s.softmax) * f;
    case "layernorm":
      return 2 * prod(s.layerNorm) * f;
    default:
      return null; // exp, the pool and the products are not held to copy speed
  }
}

function caseLabel(c: CaseName, s: CpuSizes): string {
  const mi = `${s.n / (1 << 20)} Mi`;
  const dims = (xs: number[]) => `[${xs.join(", ")}]`;
  const labels: Record<CaseName, string> = {
    exp: `exp ${mi}`,
    relu_chain: `relu(x * 2 + 1) ${mi}`,
    softmax: `softmax rows ${dims(s.softmax)}`,
    maxpool: `maxPool2d 3x3/2 ${dims(s.pool)}, fastest layout`,
    maxpool_nchw: `maxPool2d 3x3/2 ${dims(s.pool)}, NCHW memory`,
    max_rows: `max rows ${dims(s.maxRows)}`,
    sum: `sum ${mi}`,
    matmul_1024: `matmul ${s.matmulSmall}^3`,
    matmul_2048: `matmul ${s.matmulLarge}^3`,
    add: `a + b ${mi}`,
    copy: `copy ${mi}`,
    cumsum: `cumsum ${mi}`,
    layernorm: `layerNorm rows ${dims(s.layerNorm)}`,
    transpose: `transpose-copy ${dims(s.transpose)}`,
  };
  return labels[c];
}

const NUMPY_TARGET: ReadonlySet<CaseName> = new Set([
  "softmax",
  "relu_chain",
  "maxpool",
  "maxpool_nchw",
  "sum",
  "max_rows",
]);
const THREAD_TARGET: ReadonlySet<CaseName> = new Set([
  "exp",
  "softmax",
  "maxpool",
  "maxpool_nchw",
  "matmul_1024",
  "matmul_2048",
]);

interface Row {
  case: CaseName;
  label: string;
  ms: Record<Lib, number | null>;
  contended: boolean;
  /** gyre 2T / the faster of tfjs-wasm and jax-js. */
  vsPeers: number | null;
  vsNumpy: number | null;
  copyPct: number | null;
  speedup: number | null;
  targets: {
    peers: boolean | null;
    numpy: boolean | null;
    copy: boolean | null;
    threads: boolean | null;
  };
}

function report(opts: Options, sizes: CpuSizes, runs: LibRun[], wasmCopyResult: CaseResult): void {
  const get = (lib: Lib, c: string) => runs.find((r) => r.lib === lib)?.results.get(c);
  const numpyCopy = get("numpy", "copy_bw");
  // Read and write bytes per ms: GB/s once divided by 1e6.
  const bw = (r: CaseResult | undefined) => r?.ms ? (2 * sizes.copyBytes) / r.ms / 1e6 : null;
  // One thread's copy may not saturate memory: gyre's own copy on two threads counts too.
  const gyreCopy = get("gyre2", "copy");
  const gyreCopyBytes = bytesMoved("copy", sizes);
  const gyreBw = gyreCopy?.ms && gyreCopyBytes ? gyreCopyBytes / gyreCopy.ms / 1e6 : null;
  const copyGBs = Math.max(bw(wasmCopyResult) ?? 0, bw(numpyCopy) ?? 0, gyreBw ?? 0) || null;
  const cases = CASE_NAMES.filter((c) => opts.only.size === 0 || opts.only.has(c));
  const rows: Row[] = cases.map((c) => {
    const ms = Object.fromEntries(LIBS.map((l) => [l, get(l, c)?.ms ?? null])) as Record<
      Lib,
      number | null
    >;
    const contended = LIBS.some((l) => get(l, c)?.contended);
    const peers = [ms.tfjs, ms.jax].filter((x): x is number => x !== null);
    const g = ms.gyre2;
    const bytes = bytesMoved(c, sizes);
    const vsPeers = g !== null && peers.length ? g / Math.min(...peers) : null;
    const vsNumpy = g !== null && ms.numpy !== null ? g / ms.numpy : null;
    const copyPct = g !== null && bytes !== null && copyGBs
      ? (100 * bytes) / g / 1e6 / copyGBs
      : null;
    const speedup = g !== null && ms.gyre1 !== null ? ms.gyre1 / g : null;
    return {
      case: c,
      label: caseLabel(c, sizes),
      ms,
      contended,
      vsPeers,
      vsNumpy,
      copyPct,
      speedup,
      targets: {
        peers: vsPeers === null ? null : vsPeers <= 1,
        numpy: NUMPY_TARGET.has(c) && vsNumpy !== null ? vsNumpy <= 1.5 : null,
        copy: copyPct === null ? null : copyPct >= 60,
        threads: THREAD_TARGET.has(c) && speedup !== null ? speedup >= 1.6 : null,
      },
    };
  });

  const cpu = cpuModel();
  const meta = runs.map((r) =>
    `${LIB_TITLES[r.lib]}: ${r.version}, ${r.build}${r.error ? ` (stopped: ${r.error})` : ""}`
  );
  const anyContended = rows.some((r) => r.contended) || wasmCopyResult.contended ||
    !!numpyCopy?.contended;
  const flag = (t: boolean | null, detail: string) =>
    t === null ? "" : `${t ? "pass" : "FAIL"} ${detail}`;
  const x = (v: number | null) => v === null ? "" : `${v.toFixed(2)}x`;
  const md: string[] = [
    `# CPU: gyre WASM vs tfjs-wasm, jax-js wasm and NumPy${opts.quick ? " (--quick sizes)" : ""}`,
    "",
    `${new Date().toISOString()}, ${cpu}, ${navigator.hardwareConcurrency} logical CPUs, ` +
    `Deno ${Deno.version.deno} (V8 ${Deno.version.v8}), ${Deno.build.os} ${Deno.osRelease()}. ` +
    `\`deno run -A bench/cpu.ts${Deno.args.map((a) => ` ${a}`).join("")}\`.`,
    "",
    ...meta.map((m) => `- ${m}`),
    `- copy bandwidth (read + write bytes): WASM memory.copy ${fmtGB(bw(wasmCopyResult))} GB/s, ` +
    `NumPy np.copyto ${fmtGB(bw(numpyCopy))} GB/s (${sizes.copyBytes >> 20} MiB), gyre's copy ` +
    `case on 2 threads ${fmtGB(gyreBw)} GB/s; the largest, ${fmtGB(copyGBs)} GB/s, is "copy"`,
    "",
    ...(anyContended
      ? [
        "**CONTENDED: other processes used more than 10% of a core during the rows marked *; " +
        "their figures are not clean (--force).**",
        "",
      ]
      : []),
    'Median ms of 9 samples per op. "gyre" in the ratios is gyre on 2 threads (the pool ' +
    "started, as a program gets it). gyre/best peer: below 1 is faster than the faster of " +
    "tfjs-wasm and jax-js. % of copy: bytes the case must move / time / copy bandwidth.",
    "",
    "| case | gyre 1T | gyre 2T | tfjs-wasm | jax-js wasm | NumPy | gyre/best peer | gyre % of copy | T1 >= peers | T2 <= 1.5x NumPy | T3 >= 60% copy | T4 2T >= 1.6x 1T |",
    "|---|--:|--:|--:|--:|--:|--:|--:|---|---|---|---|",
    ...rows.map((r) =>
      `| ${r.label}${r.contended ? " *" : ""} | ${LIBS.map((l) => fmtMs(r.ms[l])).join(" | ")} | ` +
      `${x(r.vsPeers)} | ${r.copyPct === null ? "" : `${r.copyPct.toFixed(0)}%`} | ` +
      `${flag(r.targets.peers, x(r.vsPeers))} | ${flag(r.targets.numpy, x(r.vsNumpy))} | ` +
      `${flag(r.targets.copy, r.copyPct === null ? "" : `${r.copyPct.toFixed(0)}%`)} | ` +
      `${flag(r.targets.threads, x(r.speedup))} |`
    ),
    "",
    targetSummary(rows),
    "",
    "Targets (issue 30): T1 gyre at least as fast as the faster of tfjs-wasm and jax-js wasm on " +
    "every case; T2 softmax, the fused chain, max pooling, sum and the row max within 1.5x of " +
    "NumPy; T3 memory-bound cases at 60% of copy bandwidth or more; T4 2 threads at least 1.6x " +
    "faster than 1 on exp, softmax, pooling and the products.",
    "",
    "Notes:",
    "",
    ...notes(runs),
    "",
  ];
  console.log(md.join("\n"));
  if (opts.out) {
    const prefix = opts.out.endsWith("/") ? `${opts.out}cpu-${slugOf(cpu)}` : opts.out;
    const dir = prefix.slice(0, prefix.lastIndexOf("/") + 1);
    if (dir) Deno.mkdirSync(dir, { recursive: true });
    Deno.writeTextFileSync(`${prefix}.md`, md.join("\n"));
    Deno.writeTextFileSync(
      `${prefix}.json`,
      JSON.stringify(
        {
          date: new Date().toISOString(),
          machine: {
            cpu,
            logicalCpus: navigator.hardwareConcurrency,
            deno: Deno.version.deno,
            v8: Deno.version.v8,
            os: `${Deno.build.os} ${Deno.osRelease()}`,
          },
          quick: opts.quick,
          forced: opts.force,
          contended: anyContended,
          sizes,
          copy: { wasmMemoryCopy: wasmCopyResult, numpyCopyto: numpyCopy ?? null, gbPerS: copyGBs },
          libraries: runs.map((r) => ({
            lib: r.lib,
            title: LIB_TITLES[r.lib],
            version: r.version,
            build: r.build,
            error: r.error ?? null,
            cases: Object.fromEntries(r.results),
          })),
          rows,
        },
        null,
        2,
      ) + "\n",
    );
    Deno.writeTextFileSync(`${prefix}.svg`, svgChart(rows));
    log(`wrote ${prefix}.{md,json,svg}`);
  }
}

function fmtGB(v: number | null): string {
  return v === null ? "n/a" : v.toFixed(1);
}

function targetSummary(rows: Row[]): string {
  const all = rows.flatMap((r) => Object.values(r.targets).filter((t) => t !== null));
  const failed = rows.flatMap((r) =>
    Object.entries(r.targets).filter(([, t]) => t === false).map(([k]) => `${r.case} (${k})`)
  );
  return `Targets: ${all.length - failed.length} of ${all.length} pass` +
    (failed.length ? `; failing: ${failed.join(", ")}.` : ".");
}

/** The libraries' per-case notes (how each op was written), each distinct note once. */
function notes(runs: LibRun[]): string[] {
  const byNote = new Map<string, string[]>();
  for (const r of runs) {
    for (const c of r.results.values()) {
      if (!c.note) continue;
      const key = `${c.case}: ${c.note}`;
      byNote.set(key, [...(byNote.get(key) ?? []), LIB_TITLES[r.lib]]);
    }
  }
  return [...byNote].map(([key, libs]) => `- ${libs.join(", ")}, ${key}`);
}

/** Horizontal bars, log scale: one group per case, one bar per library. */
function svgChart(rows: Row[]): string {
  const colors: Record<Lib, string> = {
    gyre1: "#9ecae1",
    gyre2: "#3182bd",
    tfjs: "#fd8d3c",
    jax: "#74c476",
    numpy: "#969696",
  };
  const all = rows.flatMap((r) => LIBS.map((l) => r.ms[l])).filter((v): v is number => !!v);
  const lo = Math.floor(Math.log10(Math.min(...all, 1))),
    hi = Math.ceil(Math.log10(Math.max(...all, 1)));
  const left = 230, width = 520, bar = 7, group = LIBS.length * bar + 10, top = 40;
  const xOf = (ms: number) =>
    Math.round(10 * (left + ((Math.log10(ms) - lo) / Math.max(1, hi - lo)) * width)) / 10;
  const height = top + rows.length * group + 30;
  const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;");
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${
      left + width + 20
    }" height="${height}" font-family="sans-serif" font-size="11">`,
    `<text x="10" y="16" font-size="13">ms per op (log scale), lower is better</text>`,
    ...LIBS.map((l, i) =>
      `<rect x="${left + i * 100}" y="24" width="10" height="10" fill="${colors[l]}"/><text x="${
        left + i * 100 + 14
      }" y="33">${LIB_TITLES[l]}</text>`
    ),
  ];
  for (let d = lo; d <= hi; d++) {
    const x = xOf(10 ** d);
    parts.push(
      `<line x1="${x}" y1="${top}" x2="${x}" y2="${height - 25}" stroke="#ddd"/><text x="${x}" y="${
        height - 12
      }" text-anchor="middle">${10 ** d >= 1 ? 10 ** d : (10 ** d).toFixed(-d)}</text>`,
    );
  }
  rows.forEach((r, i) => {
    const y = top + i * group;
    parts.push(
      `<text x="${left - 6}" y="${y + group / 2}" text-anchor="end">${esc(r.label)}</text>`,
    );
    LIBS.forEach((l, j) => {
      const ms = r.ms[l];
      if (ms) {
        parts.push(
          `<rect x="${left}" y="${y + j * bar}" width="${
            Math.max(1, xOf(ms) - left).toFixed(1)
          }" height="${bar - 1}" fill="${colors[l]}"><title>${LIB_TITLES[l]}: ${
            fmtMs(ms)
          } ms</title></rect>`,
        );
      }
    });
  });
  parts.push("</svg>\n");
  return parts.join("\n");
}

// ---------------------------------------------------------------------------------------------

const argv = Deno.args;
if (argv.includes("--help")) {
  console.log(
    "usage: deno run -A bench/cpu.ts [--quick] [--only a,b] [--force] [--libs " +
      `${LIBS.join(",")}] [--out PREFIX]\ncases: ${CASE_NAMES.join(", ")}`,
  );
  Deno.exit(0);
}
try {
  if (argv.includes("--worker")) {
    const threads = Number(argv[argv.indexOf("--threads") + 1] ?? "1");
    await gyreWorker(threads, parseWorkerArgs(argv));
  } else {
    await orchestrate(parseOptions(argv));
  }
} catch (e) {
  if (e instanceof Refusal) {
    log(e.message);
    Deno.exit(2);
  }
  log(`fatal: ${errText(e)}`);
  if (e instanceof Error && e.stack) log(e.stack);
  Deno.exit(1);
}
// Exit explicitly, whatever handles a library left open.
Deno.exit(0);
