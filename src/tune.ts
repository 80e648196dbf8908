/**
 * The tuner: measures every legal choice of each tunable family over a grid of keys on the GPU
 * (GPU timestamps of whole ops, a warm-up, several samples interleaved across the candidates,
 * early drop of candidates clearly slower than the leader), keeps each key's fastest, writes the
 * results to the user's tuning cache and loads them into the WASM chooser.
 * @module
 */
import { ValueError } from "./core/errors.ts";
import { checkOptions } from "./core/options.ts";
import type { DeviceCaps } from "./core/caps.ts";
import { GpuProfiler } from "./gpu/profiler.ts";
import { GpuHost } from "./gpu/host.ts";
import { setPlanOverride } from "./plans/overrides.ts";
import {
  cellInterior,
  cellRows,
  type ChooseRow,
  type MeasuredKey,
  PLAN_MARGIN,
  sampleMedian,
  sampleSpread,
} from "./heuristics/choose_table.ts";
import { loadUserRows, replacedTables, userTableRows } from "./heuristics/chooser.ts";
import {
  checkTuneFamilies,
  checkTuneKey,
  choiceText,
  elementwiseTuneKey,
  familyCandidates,
  matmulTuneKey,
  onWasmDevice,
  rowsKernelTuneKey,
  rowsTuneKey,
  TUNE_FAMILIES,
  TUNE_FAMILY,
  type TuneChoice,
  type TuneFamilyName,
  type TuneKey,
  wasmGemmTuneKey,
} from "./heuristics/families.ts";
import { type DeviceFingerprint, deviceFingerprint, sizeBucket } from "./heuristics/fingerprint.ts";
import { recordTuning, type TuningEntry } from "./heuristics/tuning_cache.ts";
import { appendSoftRule, MIN_TRIALS, winsTrials } from "./heuristics/self_rewrite.ts";
import { explainChoice } from "./heuristics/consensus.ts";
import { shareRule, shareWinners } from "./heuristics/shared_hints.ts";
import { rulesFilePath } from "./heuristics/startup.ts";
import { runtime, wasmBackendOf } from "./runtime.ts";
import type { Tensor } from "./tensor.ts";
import { uniform } from "./random.ts";
import { sort, topk } from "./ops/sort.ts";
import { cumsum } from "./ops/scan.ts";
import { sum } from "./ops/reduce.ts";
import { matmul } from "./ops/matmul.ts";
import { softmax } from "./ops/rows.ts";
import { maxPool2d } from "./ops/pool.ts";
import { add } from "./ops/elementwise.ts";
import { transpose } from "./ops/shape.ts";
import { wasmThreadCapacity } from "./wasm/threads.ts";

/** One candidate's measurement at a key. */
export interface CandidateTiming {
  /** The choice. */
  choice: TuneChoice;
  /** Median GPU time of the op, in microseconds. */
  us: number;
  /** Samples taken (fewer where it was dropped early). */
  samples: number;
  /** Each sample's time in microseconds, in the order taken (interleaved with the others'). */
  times: number[];
}

/** A key's measurements. */
export interface KeyTiming {
  /** The family. */
  family: TuneFamilyName;
  /** The key. */
  key: TuneKey;
  /** Every candidate, fastest first. */
  candidates: CandidateTiming[];
}

/** Progress of a tuning run. */
export interface TuneProgress {
  /** The family being tuned. */
  family: TuneFamilyName;
  /** Keys of the family done. */
  done: number;
  /** Keys of the family in all. */
  total: number;
  /** Seconds since the family started. */
  seconds: number;
}

/** Options of {@link tune} and {@link measureKey}. */
export interface TuneOptions {
  /** Seconds each family may take (keys past it are skipped); default 60. */
  budget?: number;
  /** Keys to measure by family; default {@link tuneGrid}'s for the device. */
  shapes?: Partial<Record<TuneFamilyName, readonly TuneKey[]>>;
  /** Samples of each candidate after its warm-up (default 5, 15 on a software adapter, whose times vary more; the leaders take 9, 25, more). */
  samples?: number;
  /** Called after each key. */
  onProgress?: (progress: TuneProgress) => void;
  /** Write the results to the user's tuning cache (default true). */
  record?: boolean;
  /**
   * Measure each table row's choice again beside the plan's at a key inside its cell, and drop
   * the rows the plan keeps up with there (default true; see `cellInterior`).
   */
  interiors?: boolean;
  /**
   * Load the results into the chooser, over rows loaded before (default true). A family whose
   * whole grid was tuned replaces its compiled table (`loadUserRows`'s `replacing`).
   */
  load?: boolean;
  /**
   * Self-Rewrite: where a key's winner differs from what the chooser picked before, run A/B
   * trials of the two and, if the winner wins them (see `winsTrials`), append a soft rule for
   * each field that differs to this rules file (`true`: the user's, `rulesFilePath()`). Off by
   * default.
   */
  selfRewrite?: boolean | string;
}

/** What {@link tune} measured. */
export interface TuneReport {
  /** Every key measured, by family. */
  keys: KeyTiming[];
  /** The table rows the winners make (what was recorded and loaded). */
  rows: Partial<Record<TuneFamilyName, ChooseRow[]>>;
  /** Seconds each family took. */
  seconds: Partial<Record<TuneFamilyName, number>>;
  /** Keys skipped because a family's budget ran out. */
  skipped: number;
  /** Soft rules Self-Rewrite appended. */
  rewritten: number;
}

/** Candidates over this times the leader's median after three samples take no more. */
const DROP = 1.3;
/** Candidates over this times the leader at the previous grid key are not measured. */
const PRUNE = 1.5;
/** Leaders within this factor of the fastest are measured again before a winner is named. */
const CONFIRM_WITHIN = 1.1;
/** The most leaders measured again. */
const CONFIRM_LEADERS = 3;

/** Elements an input of the tuner's grid may have on a software adapter, and on hardware. */
const GRID_ELEMENTS = { soft: 1 << 18, hard: 1 << 24 };

/**
 * The grid of keys the tuner measures by default for a family on a device: powers of two (each
 * the start of its table bucket) within a size a software adapter measures in seconds.
 *
 * @example
 * ```ts
 * import { tuneGrid } from "@gyre/gyre/tuning";
 * tuneGrid("scan", undefined).length > 0; // true
 * ```
 */
export function tuneGrid(family: TuneFamilyName, caps: DeviceCaps | undefined): TuneKey[] {
  const soft = caps?.isFallbackAdapter ?? true;
  const most = soft ? GRID_ELEMENTS.soft : GRID_ELEMENTS.hard;
  const sg = Boolean(caps?.subgroups);
  const pow = (from: number, to: number, step = 4) => {
    const out: number[] = [];
    for (let v = from; v <= to; v *= step) out.push(v);
    return out;
  };
  const keys: TuneKey[] = [];
  switch (family) {
    // Sorts: every power of two on hardware (their forms cross over within a factor of 4).
    case "rankk":
      for (const r of pow(1, 4096, soft ? 4 : 2)) {
        for (const c of pow(1024, 1 << 20, soft ? 4 : 2)) {
          for (const k of soft ? [8, 64, 512] : [8, 32, 128, 512]) {
            if (r * c <= most && 4 * k <= c) keys.push({ r, c, k, sg });
          }
        }
      }
      break;
    // Whole sorts: rows of a power of two and one more (the bitonic forms pad to the next power,
    // so a cell between 2^i + 1 and 2^(i+1) pads alike at both ends).
    case "sort":
      for (const r of pow(1, 4096, 2)) {
        for (const c of pow(256, 1 << 20, 2)) {
          if (r * c <= most) keys.push({ r, c, sg });
          if (r * (c + 1) <= most) keys.push({ r, c: c + 1, sg });
        }
      }
      break;
    // Rows of a multiple of 4 (vector loads) and one more (scalar loads): keys of each kind.
    case "scan":
    case "reduce":
      for (const r of pow(1, 16384, 2)) {
        for (const n of pow(64, 1 << 24, 2)) {
          if (r * n > most || r * n < 4096) continue;
          keys.push(rowsTuneKey(caps, r, n), rowsTuneKey(caps, r, n + 1));
        }
      }
      break;
    // Products of every power of two where they are small enough to measure many, else every
    // other; unaligned ones (n and k one more) densely on hardware too, where most shapes are.
    case "matmul":
      for (const al of [true, false]) {
        const step = soft || !al ? 2 : 4;
        for (const m of pow(64, 4096, step)) {
          for (const n of pow(64, 4096, step)) {
            for (const k of pow(64, 16384, soft || !al ? 2 : 4)) {
              // Unaligned products up to 2^35 multiply-adds densely (larger ones take the edge).
              const largest = most * (soft ? 16 : al ? 4096 : 2048);
              if (m * n * k <= largest && m * k <= most && k * n <= most) {
                keys.push(al ? matmulTuneKey(m, n, k) : matmulTuneKey(m, n + 1, k + 1));
              }
            }
          }
        }
      }
      break;
    // Row kernels: lengths from a few units to chunked rows, aligned and one more.
    case "rows":
      for (const r of pow(1, 16384, soft ? 4 : 2)) {
        for (const n of pow(16, 1 << 18, soft ? 4 : 2)) {
          if (r * n > most || r * n < 4096) continue;
          keys.push(rowsKernelTuneKey(caps, r, n, true), rowsKernelTuneKey(caps, r, n + 1, false));
        }
      }
      break;
    // Poolings: the windows networks use (2, 3, 5) and larger ones, each stride up to 3 (and 4
    // for the larger windows), outputs from a few thousand (where one output an invocation, the
    // widest spread, beat the plan's four by 30% on an H200) to millions.
    case "pool":
      for (const k of soft ? [2, 3, 7, 13] : [2, 3, 5, 8, 16]) {
        for (const s of [1, 2, 3, 4]) {
          if (s > k || (s === 4 && k < 8)) continue;
          for (const w of soft ? pow(8, 512, 4) : [8, 64, 512]) {
            for (const o of pow(1 << 12, most, 8)) {
              const input = (o / (w * w)) * ((w - 1) * s + k) ** 2;
              if (o >= w * w && input <= 4 * most) keys.push({ k, s, w, o });
            }
          }
        }
      }
      break;
    // WASM products: sides of 32 to 1024 (each thread's share a few tiles to many), up to 2^28
    // multiply-adds (about a tenth of a second on one core), with the threads this machine has.
    case "wasmGemm":
      for (const m of pow(32, 1024, 2)) {
        for (const n of pow(32, 1024, 2)) {
          for (const k of pow(32, 1024, 4)) {
            if (m * n * k <= 1 << 28) keys.push(wasmGemmTuneKey(m, n, k, wasmThreads()));
          }
        }
      }
      break;
    // Elementwise: vector and scalar loads, and a transposed operand.
    case "elementwise":
      for (const e of pow(1 << 10, 4 * most, soft ? 4 : 2)) {
        keys.push(
          elementwiseTuneKey(e, true, false),
          elementwiseTuneKey(e + 1, false, false),
          elementwiseTuneKey(e, false, true),
        );
      }
      break;
  }
  return keys;
}

/** Threads the WASM device can run here (1 without shared memory). */
function wasmThreads(): number {
  return wasmBackendOf().shared ? wasmThreadCapacity() : 1;
}

/** The [rows, columns] of a near-square matrix of about `elements`. */
function matrixOf(elements: number): [number, number] {
  const rows = Math.max(1, Math.floor(Math.sqrt(elements)));
  return [rows, Math.max(1, Math.round(elements / rows))];
}

/** The op a family runs at a key, over inputs made once. */
function workload(family: TuneFamilyName, key: TuneKey): { run: () => Tensor[]; inputs: Tensor[] } {
  const n = (name: string) => key[name] as number;
  const seed = 7;
  switch (family) {
    case "rankk": {
      const x = uniform([n("r"), n("c")], { seed, device: "gpu" }).realize();
      return { inputs: [x], run: () => topk(x, n("k")) };
    }
    case "sort": {
      const x = uniform([n("r"), n("c")], { seed, device: "gpu" }).realize();
      return { inputs: [x], run: () => [sort(x)] };
    }
    case "scan": {
      const x = uniform([n("r"), n("n")], { seed, device: "gpu" }).realize();
      return { inputs: [x], run: () => [cumsum(x, { axis: -1 })] };
    }
    case "reduce": {
      const x = uniform([n("r"), n("n")], { seed, device: "gpu" }).realize();
      return { inputs: [x], run: () => [sum(x, { axis: -1 })] };
    }
    case "matmul": {
      const a = uniform([n("m"), n("k")], { seed, device: "gpu" }).realize();
      const b = uniform([n("k"), n("n")], { seed: seed + 1, device: "gpu" }).realize();
      return { inputs: [a, b], run: () => [matmul(a, b)] };
    }
    case "rows": {
      // An aligned key reads rows of whole vec4 units; an unaligned one rows one longer.
      const x = uniform([n("r"), n("n")], { seed, device: "gpu" }).realize();
      return { inputs: [x], run: () => [softmax(x, { axis: -1 })] };
    }
    case "pool": {
      const [k, s, w] = [n("k"), n("s"), n("w")];
      const side = (w - 1) * s + k;
      const planes = Math.max(1, Math.round(n("o") / (w * w)));
      const x = uniform([1, planes, side, side], { seed, device: "gpu" }).realize();
      return { inputs: [x], run: () => [maxPool2d(x, { kernelSize: k, stride: s })] };
    }
    case "wasmGemm": {
      const a = uniform([n("m"), n("k")], { seed, device: "wasm" }).realize();
      const b = uniform([n("k"), n("n")], { seed: seed + 1, device: "wasm" }).realize();
      return { inputs: [a, b], run: () => [matmul(a, b)] };
    }
    case "elementwise": {
      if (key.t) {
        const [rows, cols] = matrixOf(n("e"));
        const a = uniform([cols, rows], { seed, device: "gpu" }).realize();
        const b = uniform([rows, cols], { seed: seed + 1, device: "gpu" }).realize();
        return { inputs: [a, b], run: () => [add(transpose(a), b)] };
      }
      const a = uniform([n("e")], { seed, device: "gpu" }).realize();
      const b = uniform([n("e")], { seed: seed + 1, device: "gpu" }).realize();
      return { inputs: [a, b], run: () => [add(a, b)] };
    }
  }
}

function gpuHost(op: string): GpuHost {
  const gpu = runtime().gpu;
  if (!(gpu instanceof GpuHost)) {
    throw new ValueError({
      op,
      argument: "runtime",
      expected: 'a GPU runtime (await gyre.init({ device: "gpu" }))',
      received: "no GPU",
    });
  }
  if (!gpu.caps.timestampQuery) {
    throw new ValueError({
      op,
      argument: "runtime",
      expected: "a GPU with timestamp queries",
      received: gpu.caps.description,
    });
  }
  return gpu;
}

/** Times runs of an op: each `time` call's work, in microseconds, in order, at `stop`. */
interface OpTimer {
  start(): void;
  time(fn: () => void): void;
  stop(): Promise<number[]>;
  destroy(): void;
}

/** GPU timestamps of each run's dispatches as one group. */
function gpuTimer(gpu: GpuHost): OpTimer {
  const profiler = new GpuProfiler(gpu);
  let runs = 0;
  return {
    start: () => profiler.startGroups(),
    time: (fn) => void profiler.group(String(runs++), fn),
    stop: async () => (await profiler.stop()).map((t) => t.nanoseconds / 1000),
    destroy: () => profiler.destroy(),
  };
}

/** Wall clock around each run (the WASM device computes while `realize` runs). */
function wallClockTimer(): OpTimer {
  let times: number[] = [];
  return {
    start: () => (times = []),
    time: (fn) => {
      const t0 = performance.now();
      fn();
      times.push((performance.now() - t0) * 1000);
    },
    stop: () => Promise.resolve(times),
    destroy: () => {},
  };
}

/**
 * Measures `choices` of `family` at `key` (default: every legal candidate) by GPU timestamps
 * (the WASM device's families by wall clock): one warm-up and `samples` runs of each,
 * interleaved; after three samples, candidates over 1.3 times the leader's median are dropped.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * import { measureKey, rowsTuneKey } from "@gyre/gyre/tuning";
 * const rt = await gyre.init({ device: "auto" });
 * if (rt.gpu?.caps.timestampQuery) {
 *   const t = await measureKey("reduce", rowsTuneKey(rt.gpu.caps, 64, 4096));
 *   console.log(t.candidates[0]);
 * }
 * ```
 */
export async function measureKey(
  family: TuneFamilyName,
  key: TuneKey,
  options: {
    samples?: number;
    choices?: readonly TuneChoice[];
    /** Drop candidates over this times the leader after 3 samples (default 1.3; Infinity: none). */
    drop?: number;
  } = {},
): Promise<KeyTiming> {
  checkTuneKey("measureKey", family, key);
  const f = TUNE_FAMILY[family];
  const gpu = f.device === "wasm" ? null : gpuHost("measureKey");
  const choices = options.choices ?? familyCandidates(family, gpu?.caps, key);
  const samples = options.samples ?? 7;
  const { run, inputs } = workload(family, key);
  const timer = gpu ? gpuTimer(gpu) : wallClockTimer();
  const times = choices.map(() => [] as number[]);
  const live = choices.map(() => true);
  try {
    const round = async (count: number, warm: boolean) => {
      timer.start();
      const order: number[] = [];
      for (let s = 0; s < count + (warm ? 1 : 0); s++) {
        choices.forEach((choice, i) => {
          if (!live[i]) return;
          setPlanOverride(f.plan, f.override(choice));
          let outputs: Tensor[] = [];
          try {
            timer.time(() => {
              outputs = run();
              for (const y of outputs) y.realize();
            });
          } finally {
            setPlanOverride(f.plan, null);
            for (const y of outputs) y.dispose();
          }
          order.push(warm && s === 0 ? -1 : i);
        });
      }
      const timings = await timer.stop();
      timings.forEach((us, j) => {
        if (order[j] >= 0) times[order[j]].push(us);
      });
    };
    await round(Math.min(3, samples), true);
    const lead = Math.min(...times.map((t) => sampleMedian(t)));
    times.forEach((t, i) => (live[i] = sampleMedian(t) <= (options.drop ?? DROP) * lead));
    if (samples > 3) await round(samples - 3, false);
  } finally {
    timer.destroy();
    for (const x of inputs) x.dispose();
  }
  const candidates = choices.map((choice, i) => ({
    choice,
    us: sampleMedian(times[i]),
    samples: times[i].length,
    times: times[i],
  }));
  candidates.sort((a, b) => a.us - b.us);
  return { family, key, candidates };
}

/**
 * Tunes `families` (default: all) on the runtime's GPU: measures every legal choice at each key
 * of the grid ({@link tuneGrid}, or `options.shapes`) within each family's budget, records the
 * winners in the user's tuning cache for this device's fingerprint and loads them into the
 * chooser, where the consensus takes them over the hand-written plans.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * import { loadUserRows, rowsTuneKey, tune } from "@gyre/gyre/tuning";
 * const rt = await gyre.init({ device: "auto" });
 * if (rt.gpu?.caps.timestampQuery) {
 *   const report = await tune(["reduce"], {
 *     shapes: { reduce: [rowsTuneKey(rt.gpu.caps, 16, 4096)] },
 *     record: false,
 *   });
 *   console.log(report.rows.reduce);
 *   loadUserRows({}); // back to the compiled tables
 * }
 * ```
 */
export async function tune(
  families: readonly TuneFamilyName[] = TUNE_FAMILIES,
  options: TuneOptions = {},
): Promise<TuneReport> {
  if (!Array.isArray(families as unknown)) {
    throw new ValueError({
      op: "tune",
      argument: "families",
      expected: `an array of families (${TUNE_FAMILIES.join(", ")})`,
      received: typeof families,
    });
  }
  checkOptions("tune", options, [
    "budget",
    "shapes",
    "samples",
    "onProgress",
    "record",
    "load",
    "selfRewrite",
    "interiors",
  ]);
  checkTuneFamilies("tune", "families", families);
  // A GPU only where a GPU family is asked for: the WASM device's are timed by wall clock.
  const gpu = families.every(onWasmDevice) ? null : gpuHost("tune");
  const budget = options.budget ?? 60;
  const report: TuneReport = { keys: [], rows: {}, seconds: {}, skipped: 0, rewritten: 0 };
  const partial = new Set<TuneFamilyName>();
  for (const family of families) {
    // The WASM device's families decide without a GPU's capabilities and cache under its own
    // fingerprint (src/heuristics/startup.ts loads it with or without a GPU).
    const caps = onWasmDevice(family) ? undefined : gpu!.caps;
    const fingerprint = deviceFingerprint(caps ?? null);
    const keys = options.shapes?.[family] ?? tuneGrid(family, caps);
    for (const key of keys) checkTuneKey("tune", family, key);
    const start = performance.now();
    const entries: TuningEntry[] = [];
    const measured: MeasuredKey[] = [];
    for (const [i, key] of keys.entries()) {
      if ((performance.now() - start) / 1000 > budget) {
        report.skipped += keys.length - i;
        partial.add(family);
        break;
      }
      // Candidates far behind at the previous key (a neighbour on the grid: one variable a step
      // away) are not measured again; the plan's own choice always is.
      const all = familyCandidates(family, caps, key);
      const soft = caps?.isFallbackAdapter ?? false;
      const previous = report.keys.at(-1);
      const lagging = new Set<string>();
      if (previous?.family === family && neighbours(family, previous.key, key)) {
        const lead = previous.candidates[0].us;
        for (const c of previous.candidates) {
          if (c.us > PRUNE * lead) lagging.add(choiceText(c.choice));
        }
      }
      const choices = all.filter((c, i) => i === 0 || !lagging.has(choiceText(c)));
      const timing = await measureKey(family, key, {
        samples: options.samples ?? (soft ? 15 : 5),
        choices,
      });
      report.keys.push(timing);
      // What the chooser picks now (before this run's rows load), for Self-Rewrite.
      const before = options.selfRewrite ? explainChoice(family, caps, key).choice : null;
      // The leaders measured again together: the fastest of one noisy round is biased low.
      const leaders = timing.candidates.filter((c) =>
        c.us <= CONFIRM_WITHIN * timing.candidates[0].us
      )
        .slice(0, CONFIRM_LEADERS);
      const again = leaders.length > 1
        ? (await measureKey(family, key, {
          choices: leaders.map((c) => c.choice),
          samples: soft ? 25 : 9,
        }))
          .candidates
        : [];
      const best = again[0] ?? timing.candidates[0];
      entries.push({ key, choice: best.choice, us: best.us, measured: new Date().toISOString() });
      if (before && choiceText(before) !== choiceText(best.choice)) {
        const path = typeof options.selfRewrite === "string"
          ? options.selfRewrite
          : rulesFilePath();
        report.rewritten += await selfRewrite(fingerprint, family, key, best.choice, before, path);
      }
      // Every candidate's time for the table's cells, the leaders' from their second round.
      const confirmed = new Map(again.map((c) => [choiceText(c.choice), c.us]));
      const planned = timing.candidates.find((c) => choiceText(c.choice) === choiceText(all[0]));
      measured.push({
        key,
        plan: all[0],
        noise: planned ? sampleSpread(planned.times) : undefined,
        timings: timing.candidates.map((c) => ({
          choice: c.choice,
          us: confirmed.get(choiceText(c.choice)) ?? c.us,
        })),
      });
      options.onProgress?.({
        family,
        done: i + 1,
        total: keys.length,
        seconds: (performance.now() - start) / 1000,
      });
    }
    const deadline = start + budget * 1000;
    const rows = cellRows(family, measured);
    report.rows[family] = options.interiors === false
      ? rows
      : await checkInteriors(family, caps, rows, measured, deadline);
    report.seconds[family] = (performance.now() - start) / 1000;
    if (options.record !== false && entries.length) {
      await recordTuning(fingerprint, family, entries);
      // Shared after the local record (with REDIS_URL; a warning at most).
      await shareWinners(fingerprint, family, entries);
    }
  }
  if (options.load !== false) {
    // A family tuned over its whole grid replaces its compiled table; given shapes, or a grid
    // the budget cut short, only add rows.
    const whole = families.filter((f) => !options.shapes?.[f] && !partial.has(f));
    loadUserRows({ ...userTableRows(), ...report.rows }, {
      replacing: [...replacedTables(), ...whole],
    });
  }
  return report;
}

/** Where in a cell (log scale, 0 its low bounds, 1 its high) a row is checked, in turn. */
const INTERIOR_POINTS = [0.5, 0.25, 0.75];

/**
 * A table's rows less those the plan matches between the grid's points. A cell's corners are
 * powers of two, where tiles and lanes divide sizes evenly; between them the plan, deciding key
 * by key, often does as well as one choice for the whole cell, or better (lavapipe's matmul:
 * its 128x128 tile split in two where the tile count is odd, which corners of powers of two
 * never show). So each row's choice is measured again beside the plan's at an interior key of
 * its cell where the plan would choose otherwise (the middle, else a quarter of the way from
 * either end), and the row is dropped where the plan comes within the plan margin (or its
 * samples' spread) of it there, or where the plan makes the row's choice at all three points.
 * Rows are checked while the tuning budget lasts; the rest are kept, as are rows whose choice is
 * not legal inside their cell or whose key cannot be run.
 */
async function checkInteriors(
  family: TuneFamilyName,
  caps: DeviceCaps | undefined,
  rows: Record<string, number | boolean>[],
  measured: readonly MeasuredKey[],
  deadline: number,
): Promise<Record<string, number | boolean>[]> {
  const f = TUNE_FAMILY[family];
  const soft = caps?.isFallbackAdapter ?? false;
  const kept: Record<string, number | boolean>[] = [];
  for (const row of rows) {
    if (performance.now() > deadline) {
      kept.push(row);
      continue;
    }
    const choice = Object.fromEntries(f.fields.map((x) => [x.name, row[x.name] as number]));
    // The middle of the cell first, then a quarter of the way from either end: the first
    // point where the plan would choose otherwise than the row.
    let tested = false;
    let contest: { key: TuneKey; plan: TuneChoice } | null = null;
    for (const at of INTERIOR_POINTS) {
      const key = cellInterior(family, row, measured, at);
      if (!key) continue;
      const candidates = familyCandidates(family, caps, key);
      if (!candidates.some((c) => choiceText(c) === choiceText(choice))) continue;
      tested = true;
      if (choiceText(candidates[0]) !== choiceText(choice)) {
        contest = { key, plan: candidates[0] };
        break;
      }
    }
    // Untestable (too narrow a cell, or its choice illegal inside it): kept. Where the plan
    // makes the row's choice at every point tried, the row changes nothing there: dropped.
    if (!contest) {
      if (!tested) kept.push(row);
      continue;
    }
    let timing: KeyTiming;
    try {
      timing = await measureKey(family, contest.key, {
        choices: [contest.plan, choice],
        samples: soft ? 15 : 5,
        drop: Infinity,
      });
    } catch (e) {
      if (!(e instanceof ValueError) && !(e instanceof RangeError)) throw e;
      kept.push(row);
      continue;
    }
    const at = (c: TuneChoice) =>
      timing.candidates.find((t) => choiceText(t.choice) === choiceText(c))!;
    const planned = at(contest.plan);
    const margin = Math.max(PLAN_MARGIN, sampleSpread(planned.times));
    if (planned.us > at(choice).us * (1 + margin)) kept.push(row);
  }
  return kept;
}

/**
 * The SpiralK condition of a key's power-of-two buckets (booleans as they are), e.g.
 * `r >= 8 && r < 16 && n >= 4096 && n < 8192 && sg && !al`.
 *
 * @example
 * ```ts
 * import { keyCondition } from "@gyre/gyre/tuning";
 * keyCondition("scan", { r: 10, n: 5000, sg: true, al: false });
 * // "r >= 8 && r < 16 && n >= 4096 && n < 8192 && sg && !al"
 * ```
 */
export function keyCondition(family: TuneFamilyName, key: TuneKey): string {
  return TUNE_FAMILY[family].keys.map((k) => {
    const v = key[k.name];
    if (typeof v === "boolean") return v ? k.name : `!${k.name}`;
    const b = sizeBucket(v);
    return `${k.name} >= ${b} && ${k.name} < ${2 * b}`;
  }).join(" && ");
}

/** Weight of the soft rules Self-Rewrite appends (above the table's prior). */
const REWRITE_WEIGHT = "0.25";

/**
 * A/B trials of `winner` against `before` at `key` (MIN_TRIALS interleaved pairs); where the
 * winner wins them, a soft rule for each field that differs, appended to `path`. Returns the
 * rules appended.
 */
async function selfRewrite(
  fingerprint: DeviceFingerprint,
  family: TuneFamilyName,
  key: TuneKey,
  winner: TuneChoice,
  before: TuneChoice,
  path: string,
): Promise<number> {
  const trial = await measureKey(family, key, {
    choices: [winner, before],
    samples: MIN_TRIALS,
    drop: Infinity,
  });
  const [a, b] = [winner, before].map((c) =>
    trial.candidates.find((t) => choiceText(t.choice) === choiceText(c))!.times
  );
  const trials = Math.min(a.length, b.length);
  const wins = a.slice(0, trials).filter((t, i) => t < b[i]).length;
  if (!winsTrials({ wins, trials })) return 0;
  let appended = 0;
  for (const field of TUNE_FAMILY[family].fields) {
    if (winner[field.name] === before[field.name]) continue;
    const rule = {
      field: field.name,
      value: String(winner[field.name]),
      weight: REWRITE_WEIGHT,
      condition: keyCondition(family, key),
    };
    if (await appendSoftRule(path, rule, { wins, trials }, family)) {
      appended++;
      const text = `soft(${rule.field}, ${rule.value}, ${rule.weight}, ${rule.condition});`;
      await shareRule(fingerprint, family, text);
    }
  }
  return appended;
}

/** Whether two keys differ in one numeric variable, by at most a factor of 4, and in no flag. */
function neighbours(family: TuneFamilyName, a: TuneKey, b: TuneKey): boolean {
  let differ = 0;
  for (const k of TUNE_FAMILY[family].keys) {
    const [x, y] = [a[k.name], b[k.name]];
    if (x === y) continue;
    if (typeof x !== "number" || typeof y !== "number") return false;
    if (Math.max(x, y) > 4 * Math.min(x, y)) return false;
    differ++;
  }
  return differ === 1;
}
