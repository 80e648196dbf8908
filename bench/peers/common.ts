/// <reference lib="deno.window" />
// Shared harness for the peer benchmarks (bench/peers/tfjs.ts, bench/peers/jax.ts).
//
// Both entries are bundled by scripts/bundle_peers.ts with esbuild; this file is
// inlined into each bundle. It owns: CLI parsing, case sizes, the timing loop,
// per-case isolation (try/catch + timeout), sanity-check helpers and the final
// one-line JSON report on stdout. Everything else goes to stderr.

import { median } from "../_util.ts";

export { median };

export type Scale = "small" | "full";

export interface Options {
  scale: Scale;
  /** Timing samples per case; the reported number is their median. */
  samples: number;
  /** Per-case wall-clock cap (warm-up + all samples), seconds. */
  caseTimeoutS: number;
  /** Only run these cases (empty: all). */
  only: Set<string>;
  /** Skip these cases (recorded as ms: null, note "skipped"). */
  skip: Set<string>;
  /** Override of the back-to-back repetition count R for per-op cases. */
  reps?: number;
  /** jax-js only: wrap each per-op case in jax.jit (default: eager). */
  jit: boolean;
}

export const USAGE = `usage: deno run -A <peer>.js [options]
  --scale small|full     problem sizes (default full; small divides sizes for
                         software GPUs)
  --samples N            timing samples per case, median reported (default 5)
  --case-timeout S       per-case cap in seconds (default 60); a case that
                         exceeds it reports ms: null
  --only a,b,...         run only these cases
  --skip a,b,...         skip these cases (reported as ms: null, "skipped")
  --reps R               ops issued back to back per sample (default per case)
  --jit                  jax-js only: run each per-op case through jax.jit
                         (default: eager op-by-op; chains always eager)`;

export function parseOptions(args: string[]): Options {
  const opts: Options = {
    scale: "full",
    samples: 5,
    caseTimeoutS: 60,
    only: new Set(),
    skip: new Set(),
    jit: false,
  };
  const list = (v: string) =>
    new Set(v.split(",").map((s) => s.trim()).filter((s) => s.length > 0));
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const eq = a.indexOf("=");
    const key = eq >= 0 ? a.slice(0, eq) : a;
    const value = () => {
      if (eq >= 0) return a.slice(eq + 1);
      if (i + 1 >= args.length) throw new Error(`missing value for ${key}`);
      return args[++i];
    };
    switch (key) {
      case "--scale": {
        const v = value();
        if (v !== "small" && v !== "full") {
          throw new Error(`--scale must be small or full, got ${v}`);
        }
        opts.scale = v;
        break;
      }
      case "--samples":
        opts.samples = positiveInt(key, value());
        break;
      case "--case-timeout":
        opts.caseTimeoutS = Number(value());
        if (!(opts.caseTimeoutS > 0)) throw new Error(`bad ${key}`);
        break;
      case "--only":
        opts.only = list(value());
        break;
      case "--skip":
        opts.skip = list(value());
        break;
      case "--reps":
        opts.reps = positiveInt(key, value());
        break;
      case "--jit":
        opts.jit = true;
        break;
      case "-h":
      case "--help":
        console.error(USAGE);
        Deno.exit(0);
        break;
      default:
        throw new Error(`unknown argument ${a}\n${USAGE}`);
    }
  }
  return opts;
}

function positiveInt(key: string, v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new Error(`bad ${key}: ${v}`);
  return n;
}

const Ki = 1024;
const Mi = 1024 * 1024;

/** Problem sizes. Case names always carry the full-scale size. */
export interface Sizes {
  add16: number;
  add64: number;
  softmax: [number, number];
  sum: number;
  cumsum: number;
  /** sort_16Mi and argsort_16Mi. */
  sort: number;
  /** topk of rows: [rows, cols], k. */
  topk: [number, number, number];
  layerNorm: [number, number];
  matmul: number;
  /** A three-layer MLP forward: batch and width. */
  mlp: number;
  chainElems: number;
  /** Default R (ops issued back to back per timing sample) per case kind. */
  reps: { elementwise: number; rows: number; matmul: number };
}

export function sizesFor(scale: Scale): Sizes {
  if (scale === "full") {
    return {
      add16: 16 * Mi,
      add64: 64 * Mi,
      softmax: [4096, 4096],
      sum: 16 * Mi,
      cumsum: 16 * Mi,
      sort: 16 * Mi,
      topk: [8, 65536, 1024],
      layerNorm: [4096, 4096],
      matmul: 4096,
      mlp: 4096,
      chainElems: Ki,
      reps: { elementwise: 10, rows: 10, matmul: 5 },
    };
  }
  // small: 1/64 of the elements for the memory-bound cases, 1/16 per matmul
  // dimension (1/4096 of the flops). Chains are already tiny and unchanged.
  return {
    add16: 16 * Mi / 64,
    add64: 64 * Mi / 64,
    softmax: [512, 512],
    sum: 16 * Mi / 64,
    cumsum: 16 * Mi / 64,
    sort: 16 * Mi / 64,
    topk: [2, 65536, 1024],
    layerNorm: [512, 512],
    matmul: 256,
    mlp: 256,
    chainElems: Ki,
    reps: { elementwise: 5, rows: 5, matmul: 3 },
  };
}

export interface CaseResult {
  name: string;
  /** Median ms per op (per chain for chain_* cases); null when unavailable. */
  ms: number | null;
  samples: number;
  /** Actual problem shape run (differs from the name at --scale small). */
  shape?: number[];
  /** Ops issued back to back per sample (per-op cases). */
  reps?: number;
  /** Result of the numeric sanity check, when the case has one. */
  check?: string;
  note?: string;
}

export interface Report {
  peer: "tfjs" | "jax-js" | "gyre";
  version: string;
  adapter: string;
  /** jax-js: "eager" or "jit" (--jit). */
  mode?: string;
  scale: Scale;
  cases: CaseResult[];
}

export function log(...args: unknown[]): void {
  console.error(...args);
}

/** Human-readable description of the WebGPU adapter Deno hands out. */
export async function adapterDescription(): Promise<string> {
  try {
    const adapter = await navigator.gpu.requestAdapter({
      powerPreference: "high-performance",
    });
    if (!adapter) return "no adapter";
    const info = adapter.info;
    const parts = [
      info.description,
      info.vendor ? `vendor=${info.vendor}` : "",
      info.architecture ? `arch=${info.architecture}` : "",
      info.device && info.device !== "0" ? `device=${info.device}` : "",
      (info as { isFallbackAdapter?: boolean }).isFallbackAdapter ? "fallback" : "",
    ].filter((s) => s);
    return parts.join(" ");
  } catch (e) {
    return `unknown (${errText(e)})`;
  }
}

export function errText(e: unknown): string {
  if (e instanceof Error) return `${e.name}: ${e.message}`;
  return String(e);
}

class TimeoutError extends Error {
  constructor(seconds: number) {
    super(`timed out after ${seconds} s (--case-timeout)`);
    this.name = "TimeoutError";
  }
}

async function withTimeout<T>(p: Promise<T>, seconds: number): Promise<T> {
  let id: ReturnType<typeof setTimeout> | undefined;
  const timer = new Promise<never>((_, reject) => {
    id = setTimeout(() => reject(new TimeoutError(seconds)), seconds * 1000);
  });
  try {
    return await Promise.race([p, timer]);
  } finally {
    clearTimeout(id);
  }
}

/**
 * A per-op case: `run(r)` must issue the op r times back to back without
 * syncing, then force completion of all r results before resolving.
 */
export interface OpCase {
  kind: "op";
  name: string;
  shape: number[];
  reps: number;
  /** Allocate/upload inputs (not timed). */
  setup?: () => Promise<void> | void;
  run: (r: number) => Promise<void>;
  /** Numeric check on one result (not timed); returns a short summary. */
  check?: () => Promise<string>;
  teardown?: () => Promise<void> | void;
  note?: string;
}

/** A whole-sequence case: `run()` is timed as a unit (e.g. op chains). */
export interface TotalCase {
  kind: "total";
  name: string;
  shape: number[];
  setup?: () => Promise<void> | void;
  run: () => Promise<void>;
  check?: () => Promise<string>;
  teardown?: () => Promise<void> | void;
  note?: string;
}

/** A case the peer cannot run (missing op): reported as ms: null + note. */
export interface MissingCase {
  kind: "missing";
  name: string;
  note: string;
}

export type Case = OpCase | TotalCase | MissingCase;

/** The host's wait for the GPU in Deno (mapAsync or onSubmittedWorkDone), milliseconds. */
const WAIT_MS = 11;
/** The most ops one timing sample issues. */
const MAX_REPS = 5000;

/** Set by runCases: whether the library keeps every result of a sample alive (jax-js). */
let holdsResults = false;

async function measure(c: OpCase | TotalCase, opts: Options): Promise<number> {
  const times: number[] = [];
  if (c.kind === "op") {
    // Warm-up: one op (compiles pipelines), then one full batch (fills the library's buffer
    // pools so samples see steady state). The batch that sizes R is the next one: timing the
    // warm-up batch itself once left gyre's jit-compiled MLP at R = 5 on a freshly started H200
    // (its first batch ran past 20 waits), which charged each op 2 ms of the wait.
    await c.run(1);
    await c.run(c.reps);
    let t0 = performance.now();
    await c.run(c.reps);
    // Each sample ends with one wait for the GPU (about 11 ms in Deno). Unless --reps fixes R,
    // issue enough ops per sample that the ops take 20 waits' worth, whoever is measured. The
    // wait is a fixed cost, so a short batch says little about the per-op time: R grows from
    // re-timed batches until one is long enough (or R reaches its cap).
    // jax-js holds all R results until the wait: for it, cap R at 8 GiB of inputs. The others
    // free each result as the next is issued.
    if (opts.reps === undefined) {
      const inputBytes = 4 * c.shape.reduce((a, b) => a * b, 1);
      const cap = holdsResults ? Math.max(c.reps, Math.floor(8 * 2 ** 30 / inputBytes)) : MAX_REPS;
      let batchMs = performance.now() - t0;
      for (let round = 0; round < 4 && batchMs < 20 * WAIT_MS && c.reps < cap; round++) {
        const perOpMs = Math.max(batchMs - WAIT_MS, batchMs / 10) / c.reps;
        c.reps = Math.min(cap, MAX_REPS, Math.ceil((20 * WAIT_MS) / perOpMs));
        t0 = performance.now();
        await c.run(c.reps);
        batchMs = performance.now() - t0;
      }
    }
    for (let s = 0; s < opts.samples; s++) {
      t0 = performance.now();
      await c.run(c.reps);
      times.push((performance.now() - t0) / c.reps);
    }
  } else {
    await c.run();
    for (let s = 0; s < opts.samples; s++) {
      const t0 = performance.now();
      await c.run();
      times.push(performance.now() - t0);
    }
  }
  log(
    `  samples (ms${c.kind === "op" ? "/op" : ""}): ${times.map((t) => t.toFixed(3)).join(" ")}`,
  );
  return median(times);
}

export async function runCases(
  header: Omit<Report, "cases" | "scale">,
  cases: Case[],
  opts: Options,
  device?: GPUDevice,
): Promise<Report> {
  holdsResults = header.peer === "jax-js";
  // WebGPU validation errors (e.g. a binding over maxStorageBufferBindingSize)
  // do not throw: the dispatch is dropped and the library returns garbage.
  // Count them per case; a case that produced any reports ms: null.
  const gpuErrors: string[] = [];
  device?.addEventListener("uncapturederror", (ev) => {
    gpuErrors.push((ev as GPUUncapturedErrorEvent).error.message);
  });
  const results: CaseResult[] = [];
  for (const c of cases) {
    if (opts.only.size > 0 && !opts.only.has(c.name)) continue;
    if (c.kind === "missing") {
      log(`[${header.peer}] ${c.name}: unavailable: ${c.note}`);
      results.push({ name: c.name, ms: null, samples: 0, note: c.note });
      continue;
    }
    const res: CaseResult = {
      name: c.name,
      ms: null,
      samples: 0,
      shape: c.shape,
    };
    if (c.kind === "op") res.reps = c.reps;
    results.push(res);
    if (opts.skip.has(c.name)) {
      res.note = "skipped (--skip)";
      log(`[${header.peer}] ${c.name}: skipped`);
      continue;
    }
    log(`[${header.peer}] ${c.name} shape=[${c.shape}]`);
    const notes: string[] = c.note ? [c.note] : [];
    let setUp = false;
    gpuErrors.length = 0;
    try {
      await withTimeout(
        (async () => {
          await c.setup?.();
          setUp = true;
          if (c.check) {
            try {
              res.check = await c.check();
            } catch (e) {
              res.check = `error: ${errText(e)}`;
            }
            log(`  [sanity] ${c.name}: ${res.check}`);
          }
          res.ms = await measure(c, opts);
          // R as measured (the calibration may have grown it).
          if (c.kind === "op") res.reps = c.reps;
          res.samples = opts.samples;
        })(),
        opts.caseTimeoutS,
      );
      log(`  median: ${res.ms!.toFixed(3)} ms`);
      // Let late validation errors of this case's queue arrive.
      await new Promise((r) => setTimeout(r, 0));
      if (gpuErrors.length > 0) {
        throw new Error(
          `${gpuErrors.length} WebGPU error(s), results invalid; first: ${gpuErrors[0]}`,
        );
      }
      if (res.check?.startsWith("FAIL")) {
        notes.unshift("WRONG RESULT (sanity check failed), timing kept");
      }
      res.ms = Math.round(res.ms! * 1e4) / 1e4;
    } catch (e) {
      res.ms = null;
      res.samples = 0;
      notes.push(errText(e));
      log(`  FAILED: ${errText(e)}`);
      if (e instanceof Error && e.stack) log(e.stack);
    }
    if (notes.length > 0) res.note = notes.join("; ");
    // Teardown only when the case finished: after a timeout the work may
    // still be in flight and freeing its inputs could fault the library.
    if (setUp && res.ms !== null) {
      try {
        await c.teardown?.();
      } catch (e) {
        log(`  teardown failed: ${errText(e)}`);
      }
    }
  }
  return { ...header, scale: opts.scale, cases: results };
}

/** Deterministic pseudo-random float32 data in [lo, hi). */
export function randomData(
  n: number,
  seed: number,
  lo = -1,
  hi = 1,
): Float32Array<ArrayBuffer> {
  const out = new Float32Array(n);
  let s = (seed >>> 0) || 1;
  const scale = (hi - lo) / 4294967296;
  for (let i = 0; i < n; i++) {
    // xorshift32
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    out[i] = lo + s * scale;
  }
  return out;
}

/** Max |got - want| / (atol + rtol*|want|) over all elements; <= 1 passes. */
export function compare(
  got: ArrayLike<number>,
  want: ArrayLike<number>,
  atol: number,
  rtol: number,
): string {
  if (got.length !== want.length) {
    return `FAIL length ${got.length} != ${want.length}`;
  }
  let worst = 0;
  let worstAt = -1;
  let maxAbs = 0;
  for (let i = 0; i < want.length; i++) {
    const d = Math.abs(got[i] - want[i]);
    const r = Number.isNaN(d) ? Infinity : d / (atol + rtol * Math.abs(want[i]));
    if (r > worst) {
      worst = r;
      worstAt = i;
    }
    if (d > maxAbs || Number.isNaN(d)) maxAbs = d;
  }
  const summary = `n=${want.length} max_abs_err=${maxAbs.toExponential(2)}`;
  if (worst <= 1) return `ok ${summary}`;
  return `FAIL ${summary} at [${worstAt}] got=${got[worstAt]} want=${want[worstAt]}`;
}

export function emit(report: Report): void {
  console.log(JSON.stringify(report));
}

// ---- CPU references for the sanity checks (float64 accumulation) ----

export function refAdd(a: Float32Array, b: Float32Array): Float32Array {
  const out = new Float32Array(a.length);
  for (let i = 0; i < a.length; i++) out[i] = a[i] + b[i];
  return out;
}

/** [sum, sum of |a|] (the latter scales the tolerance). */
export function refSum(a: Float32Array): [number, number] {
  let s = 0;
  let abs = 0;
  for (let i = 0; i < a.length; i++) {
    s += a[i];
    abs += Math.abs(a[i]);
  }
  return [s, abs];
}

export function refCumsum(a: Float32Array): Float64Array {
  const out = new Float64Array(a.length);
  let s = 0;
  for (let i = 0; i < a.length; i++) out[i] = s += a[i];
  return out;
}

/** `a` sorted ascending. */
export function refSort(a: Float32Array): Float32Array {
  return Float32Array.from(a).sort();
}

/** The values of `a` at `indices` (to check an argsort against `refSort`, ties either way). */
export function gatherAt(a: Float32Array, indices: ArrayLike<number>): Float32Array {
  return Float32Array.from(indices, (i) => a[i]);
}

/** The k largest of each row of `a` ([rows, cols]), largest first. */
export function refTopk(a: Float32Array, cols: number, k: number): Float32Array {
  const rows = a.length / cols;
  const out = new Float32Array(rows * k);
  for (let r = 0; r < rows; r++) {
    const row = Float32Array.from(a.subarray(r * cols, (r + 1) * cols)).sort().reverse();
    out.set(row.subarray(0, k), r * k);
  }
  return out;
}

/** Softmax / layerNorm reference on the first `rows` rows only. */
export function refRows(
  kind: "softmax" | "layerNorm",
  x: Float32Array,
  cols: number,
  rows: number,
): Float64Array {
  const out = new Float64Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    const row = x.subarray(r * cols, (r + 1) * cols);
    if (kind === "softmax") {
      let m = -Infinity;
      for (const v of row) m = Math.max(m, v);
      let z = 0;
      for (const v of row) z += Math.exp(v - m);
      for (let c = 0; c < cols; c++) {
        out[r * cols + c] = Math.exp(row[c] - m) / z;
      }
    } else {
      let mean = 0;
      for (const v of row) mean += v;
      mean /= cols;
      let v2 = 0;
      for (const v of row) v2 += (v - mean) * (v - mean);
      v2 /= cols;
      const inv = 1 / Math.sqrt(v2 + 1e-5);
      for (let c = 0; c < cols; c++) {
        out[r * cols + c] = (row[c] - mean) * inv;
      }
    }
  }
  return out;
}

/** Rows [0, rows) of A(n x n) @ B(n x n). */
export function refMatmulRows(
  a: Float32Array,
  b: Float32Array,
  n: number,
  rows: number,
): Float64Array {
  const out = new Float64Array(rows * n);
  for (let i = 0; i < rows; i++) {
    for (let k = 0; k < n; k++) {
      const aik = a[i * n + k];
      for (let j = 0; j < n; j++) out[i * n + j] += aik * b[k * n + j];
    }
  }
  return out;
}

/** Expected value after `len` steps of x = x + y starting from x0. */
export function refChain(
  x0: Float32Array,
  y: Float32Array,
  len: number,
): Float32Array {
  const out = Float32Array.from(x0);
  for (let s = 0; s < len; s++) {
    for (let i = 0; i < out.length; i++) out[i] = out[i] + y[i];
  }
  return out;
}

/**
 * An n x n matrix in the other order: the MLP's weights as [in, out] (`x @ W`, the layout where
 * each library reads B row-major) from the [out, in] data of `nn.Linear` (`x @ W^T`).
 */
export function transposedSquare(data: Float32Array, n: number): Float32Array<ArrayBuffer> {
  const out = new Float32Array(n * n);
  for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) out[j * n + i] = data[i * n + j];
  return out;
}

/** The MLP cases' layouts: weights [out, in] as `nn.Linear` stores them, or [in, out]. */
export const MLP_LAYOUTS = [
  { layout: "out-in", name: "mlp3_4096", note: "weights [out, in] (nn.Linear): x @ W^T" },
  { layout: "in-out", name: "mlp3_4096_in_out", note: "weights [in, out]: x @ W" },
] as const;

/** The MLP case's reference: relu(relu(x W1^T + b1) W2^T + b2) W3^T + b3, the first `rows` rows. */
export function refMlpRows(
  x: Float32Array,
  w: Float32Array[],
  b: Float32Array[],
  n: number,
  rows: number,
): Float64Array {
  let h = Float64Array.from(x.subarray(0, rows * n));
  for (let layer = 0; layer < 3; layer++) {
    const next = new Float64Array(rows * n);
    for (let i = 0; i < rows; i++) {
      for (let j = 0; j < n; j++) {
        let acc = b[layer][j];
        for (let k = 0; k < n; k++) acc += h[i * n + k] * w[layer][j * n + k];
        next[i * n + j] = layer < 2 ? Math.max(acc, 0) : acc;
      }
    }
    h = next;
  }
  return h;
}

/**
 * The training-step cases' check: the gradient of the last bias under the mean squared loss,
 * (2 / n^2) * sum over rows of (out - y), from the library's own forward output `out` (the forward
 * itself is checked by the mlp3 cases).
 */
export function refLastBiasGrad(
  out: Float32Array,
  y: Float32Array,
  n: number,
): Float64Array {
  const g = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) g[j] += out[i * n + j] - y[i * n + j];
  }
  for (let j = 0; j < n; j++) g[j] *= 2 / (n * n);
  return g;
}
