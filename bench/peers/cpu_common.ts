/// <reference lib="deno.window" />
// Shared harness of the CPU benchmark (bench/cpu.ts) for its TypeScript workers: gyre's WASM
// device (bench/cpu.ts --worker), tfjs-wasm (cpu_tfjs.ts) and jax-js wasm (cpu_jax.ts). NumPy's
// worker (bench/cpu_numpy.py) mirrors the timing loop and the idle check in Python.
//
// Each worker is its own process, so that one library's threads, heap or thread pool cannot
// affect another's figures, and so that the idle check can tell the worker's CPU time from
// everyone else's. A worker prints one JSON line per case on stdout; the orchestrator reads them.

/** The cases, in the order they run and print. */
export const CASE_NAMES = [
  "exp",
  "relu_chain",
  "softmax",
  "maxpool",
  "maxpool_nchw",
  "max_rows",
  "sum",
  "matmul_1024",
  "matmul_2048",
  "add",
  "copy",
  "cumsum",
  "layernorm",
  "transpose",
] as const;
export type CaseName = (typeof CASE_NAMES)[number];

/** Problem sizes: the issue's by default, about 16 times smaller with --quick. */
export interface CpuSizes {
  /** Elements of the elementwise, sum, copy and cumsum cases. */
  n: number;
  softmax: [number, number];
  /**
   * [N, C, H, W] of the max pool (3x3, stride 2, no padding): "maxpool" in each library's
   * fastest layout, "maxpool_nchw" over NCHW memory.
   */
  pool: [number, number, number, number];
  maxRows: [number, number];
  layerNorm: [number, number];
  transpose: [number, number];
  matmulSmall: number;
  matmulLarge: number;
  /** Bytes copied by the copy-bandwidth probes. */
  copyBytes: number;
}

export function cpuSizes(quick: boolean): CpuSizes {
  return quick
    ? {
      n: 1 << 20,
      softmax: [1024, 256],
      pool: [2, 16, 64, 64],
      maxRows: [1024, 1024],
      layerNorm: [1024, 1024],
      transpose: [1024, 1024],
      matmulSmall: 256,
      matmulLarge: 512,
      copyBytes: 64 << 20,
    }
    : {
      n: 1 << 24,
      softmax: [4096, 1024],
      pool: [8, 64, 128, 128],
      maxRows: [4096, 4096],
      layerNorm: [4096, 4096],
      transpose: [4096, 4096],
      matmulSmall: 1024,
      matmulLarge: 2048,
      copyBytes: 64 << 20,
    };
}

/** Output side of a 3x3, stride-2, unpadded pool: floor((h - 3) / 2) + 1. */
export function poolOut(h: number): number {
  return Math.floor((h - 3) / 2) + 1;
}

export interface WorkerArgs {
  quick: boolean;
  /** Cases to run (empty: all). */
  only: Set<string>;
}

export function parseWorkerArgs(args: string[]): WorkerArgs {
  const out: WorkerArgs = { quick: false, only: new Set() };
  for (let i = 0; i < args.length; i++) {
    if (args[i] === "--quick") out.quick = true;
    else if (args[i] === "--only") {
      out.only = new Set(
        (args[++i] ?? "").split(",").filter((s) => s.length > 0),
      );
    }
  }
  return out;
}

/**
 * Standard normal float32 data from Math.random (Box-Muller): every library gets the same
 * distribution, not the same numbers (no library's own generator is timed).
 */
export function normalData(n: number): Float32Array<ArrayBuffer> {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i += 2) {
    const r = Math.sqrt(-2 * Math.log(1 - Math.random()));
    const t = 2 * Math.PI * Math.random();
    out[i] = r * Math.cos(t);
    if (i + 1 < n) out[i + 1] = r * Math.sin(t);
  }
  return out;
}

/** One case's figures as a worker reports them. */
export interface CaseResult {
  type: "case";
  case: string;
  /** Median ms per op over the samples; null when the library lacks the op or it failed. */
  ms: number | null;
  /** Ops per sample (more than one where one op takes under MIN_SAMPLE_MS). */
  reps: number;
  /** Every sample, ms per op. */
  samples: number[];
  /** Timing attempts made (1 + retries after another process used the CPU). */
  attempts: number;
  /** Other processes' CPU time during the last attempt, in % of one core; null without /proc. */
  otherCorePct: number | null;
  /** Still above the limit after every retry (or the check was unavailable). */
  contended: boolean;
  note?: string;
}

/** Samples per case, the issue's method: their median is reported. */
export const SAMPLES = 9;
/**
 * A sample runs the op enough times to take this long. Besides evening out short ops, it keeps
 * each case's timed window at 180 ms or more, which the 10 ms ticks of /proc/stat need: with
 * SLACK_TICKS, the shortest windows tolerate others up to about 27% of a core, long ones 10%.
 */
export const MIN_SAMPLE_MS = 20;
/** Other processes may use this fraction of one core during a case. */
export const OTHER_LIMIT = 0.1;
/** Tick-granularity allowance of the idle check: /proc/stat and /proc/self/stat tick apart. */
export const SLACK_TICKS = 3;
/** An op slower than this (ms) gets one warm-up run and SLOW_SAMPLES samples. */
export const SLOW_MS = 1000;
export const SLOW_SAMPLES = 3;
/** Timing attempts per case before it is reported contended. */
export const ATTEMPTS = 3;

const TICKS_PER_SECOND = 100; // USER_HZ, 100 on every Linux build Deno runs on

/** Busy ticks of the whole machine (user, nice, system, irq, softirq; not steal), or null. */
export function machineBusyTicks(): number | null {
  try {
    const line = Deno.readTextFileSync("/proc/stat").split("\n")[0];
    const f = line.trim().split(/\s+/).slice(1).map(Number);
    return f[0] + f[1] + f[2] + f[5] + f[6];
  } catch {
    return null;
  }
}

/** This process's CPU ticks, every thread and every waited-for child included, or null. */
export function ownTicks(): number | null {
  try {
    const stat = Deno.readTextFileSync("/proc/self/stat");
    // Fields after the parenthesised command name: utime is the 12th, then stime, cutime, cstime.
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ").map(Number);
    return f[11] + f[12] + f[13] + f[14];
  } catch {
    return null;
  }
}

export function log(...args: unknown[]): void {
  console.error(...args);
}

export function emit(obj: object): void {
  console.log(JSON.stringify(obj));
}

export function errText(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}

/** `run(reps)` performs the op `reps` times and returns once every result is computed. */
export type Runner = (reps: number) => void | Promise<void>;

/**
 * Times one case: two warm-up runs (the first compiles), runs for MIN_SAMPLE_MS to pick the ops
 * per sample, then SAMPLES samples under the idle check; retried (after a pause) while other
 * processes used more than OTHER_LIMIT of a core, at most ATTEMPTS times in all. An op of over
 * SLOW_MS gets one warm-up run and SLOW_SAMPLES samples, and its note says so.
 */
export async function timeCase(
  name: string,
  run: Runner,
  note?: string,
): Promise<CaseResult> {
  let t0 = performance.now();
  await run(1);
  const first = performance.now() - t0;
  // An op of seconds (jax-js's composed cumsum) gets fewer runs, so that a run stays minutes.
  const slow = first > SLOW_MS;
  if (!slow) await run(1);
  // Ops per sample from as many runs as fill one sample (a single run of a fast op can be
  // several times slower than the rest, which would leave the samples short).
  let runs = 0;
  t0 = performance.now();
  do {
    await run(1);
    runs++;
  } while (performance.now() - t0 < MIN_SAMPLE_MS && runs < 1000);
  const once = (performance.now() - t0) / runs;
  const reps = once >= MIN_SAMPLE_MS ? 1 : Math.min(1000, Math.ceil(MIN_SAMPLE_MS / once));
  const count = slow && once > SLOW_MS ? SLOW_SAMPLES : SAMPLES;
  if (count < SAMPLES) {
    note = `${note ? `${note}; ` : ""}${count} samples (one op takes over ${SLOW_MS / 1000} s)`;
  }
  let samples: number[] = [];
  let otherCorePct: number | null = null;
  let contended = true;
  let attempts = 0;
  while (attempts < ATTEMPTS) {
    attempts++;
    const busy0 = machineBusyTicks(), own0 = ownTicks();
    const w0 = performance.now();
    samples = [];
    for (let s = 0; s < count; s++) {
      t0 = performance.now();
      await run(reps);
      samples.push((performance.now() - t0) / reps);
    }
    const wallTicks = ((performance.now() - w0) / 1000) * TICKS_PER_SECOND;
    const busy1 = machineBusyTicks(), own1 = ownTicks();
    if (busy0 === null || own0 === null || busy1 === null || own1 === null) {
      otherCorePct = null; // no /proc: nothing can be verified, and retrying will not help
      break;
    }
    const other = Math.max(0, busy1 - busy0 - (own1 - own0));
    otherCorePct = (100 * other) / wallTicks;
    contended = other > OTHER_LIMIT * wallTicks + SLACK_TICKS;
    if (!contended) break;
    log(
      `  ${name}: other processes used ${otherCorePct.toFixed(0)}% of a core (attempt ${attempts})`,
    );
    if (attempts < ATTEMPTS) await new Promise((r) => setTimeout(r, 1000));
  }
  const sorted = [...samples].sort((a, b) => a - b);
  return {
    type: "case",
    case: name,
    ms: sorted[sorted.length >> 1],
    reps,
    samples,
    attempts,
    otherCorePct,
    contended,
    ...(note ? { note } : {}),
  };
}

/** A case the library cannot run. */
export function missing(name: string, note: string): CaseResult {
  return {
    type: "case",
    case: name,
    ms: null,
    reps: 0,
    samples: [],
    attempts: 0,
    otherCorePct: null,
    contended: false,
    note,
  };
}

/**
 * Runs a worker's cases in CASE_NAMES order, each isolated: `setup` builds the inputs (untimed)
 * and returns the runner, `teardown` frees them; an exception becomes a null figure with its
 * message, and the next case still runs.
 */
export interface WorkerCase {
  name: CaseName;
  note?: string;
  /** Where the library lacks the op: why (the case reports n/a). */
  missing?: string;
  setup?: () => Runner | Promise<Runner>;
  teardown?: () => void;
}

export async function runWorker(
  cases: WorkerCase[],
  args: WorkerArgs,
): Promise<void> {
  for (const c of cases) {
    if (args.only.size > 0 && !args.only.has(c.name)) continue;
    if (c.missing !== undefined || !c.setup) {
      emit(missing(c.name, c.missing ?? "no such op"));
      continue;
    }
    try {
      const run = await c.setup();
      emit(await timeCase(c.name, run, c.note));
    } catch (e) {
      log(`  ${c.name}: ${errText(e)}`);
      emit(missing(c.name, `failed: ${errText(e)}`));
    } finally {
      try {
        c.teardown?.();
      } catch {
        // A failed teardown must not stop the next case.
      }
    }
  }
  emit({ type: "done" });
}
