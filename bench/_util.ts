/**
 * Helpers every benchmark script shares: medians, deterministic host data, the file-name slug of
 * a device's description, and per-dispatch timings of an op.
 * @module
 */
import * as gyre from "../src/mod.ts";
import type { GpuProfiler } from "../src/gpu/profiler.ts";

/** The median of `xs` (the mean of the middle two for an even count). */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** Deterministic host data in [-1, 1) (mulberry32 of `seed`). */
export function hostData(n: number, seed: number): Float32Array<ArrayBuffer> {
  const out = new Float32Array(n);
  let a = seed >>> 0;
  for (let i = 0; i < n; i++) {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    out[i] = ((t ^ (t >>> 14)) >>> 0) / 2147483648 - 1;
  }
  return out;
}

/** A device description as a file-name part: "NVIDIA H200" -> "nvidia-h200". */
export function slugOf(description: string): string {
  return description.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "");
}

/**
 * Prints each dispatch of `fn` timed on its own: medians of 10 runs, in dispatch order (after one
 * untimed run that compiles its kernels).
 */
export async function dispatchBreakdown(
  profiler: GpuProfiler,
  label: string,
  fn: () => gyre.Tensor,
): Promise<void> {
  const once = () => {
    gyre.tidy(() => fn()).realize().dispose();
    gyre.flush();
  };
  once();
  await gyre.sync();
  profiler.start();
  for (let r = 0; r < 10; r++) once();
  const timings = await profiler.stop();
  const perRun = timings.length / 10;
  const parts = Array.from(
    { length: perRun },
    (_, i) => median(timings.filter((_, j) => j % perRun === i).map((t) => t.nanoseconds / 1000)),
  );
  console.error(`${label} dispatches (us): ${parts.map((us) => us.toFixed(1)).join(", ")}`);
}

/** The CPU's model name from /proc/cpuinfo ("unknown CPU" where there is none). */
export function cpuModel(): string {
  try {
    const info = Deno.readTextFileSync("/proc/cpuinfo");
    return info.match(/^model name\s*:\s*(.+)$/m)?.[1].trim() ?? "unknown CPU";
  } catch {
    return "unknown CPU";
  }
}

/**
 * Takes `name value` out of `args` (a command line's arguments) and returns the value, or
 * undefined where `name` is absent.
 */
export function takeOption(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  if (i < 0) return undefined;
  const [, value] = args.splice(i, 2);
  return value;
}

/**
 * Runs a hardware GPU hot for `ms` (4096^3 products) before measuring: it idles at a low clock,
 * and sparse measurements after idling ran up to 3x slower (bench/README.md, session 24).
 */
export async function warmGpu(ms = 3000): Promise<void> {
  const a = gyre.random.uniform([4096, 4096], { seed: 1 });
  const until = performance.now() + ms;
  while (performance.now() < until) {
    const y = gyre.matmul(a, a);
    await y.array().then(() => y.dispose()).catch(() => {});
  }
  a.dispose();
}
