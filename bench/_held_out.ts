/**
 * Held-out keys of the tunable families (issue 24): sizes drawn log-uniformly between the tuning
 * grid's points, never a power of two, so that a key is never one the tuner measured. Shared by
 * bench/tune_quality.ts (which judges the chooser there) and bench/tune_survey.ts (which measures
 * every candidate there, the evidence the plans' cost models are fitted to).
 * @module
 */
import type { DeviceCaps } from "../src/core/caps.ts";
import {
  elementwiseTuneKey,
  matmulTuneKey,
  rowsKernelTuneKey,
  rowsTuneKey,
  type TuneFamilyName,
  tuneGrid,
  type TuneKey,
  wasmGemmTuneKey,
} from "../src/tuning.ts";

/** Sizes drawn log-uniformly in [low, high], never a power of two. */
const sizeDraw = (random: () => number) => (low: number, high: number) => {
  for (;;) {
    const v = Math.round(Math.exp(Math.log(low) + random() * (Math.log(high) - Math.log(low))));
    if ((v & (v - 1)) !== 0) return v;
  }
};

/** One held-out key of `family`, drawn with `random` (a seeded generator). */
export function heldOutKey(
  family: TuneFamilyName,
  caps: DeviceCaps,
  random: () => number,
): TuneKey {
  const size = sizeDraw(random);
  const soft = caps.isFallbackAdapter;
  const most = soft ? 1 << 18 : 1 << 24;
  const sg = caps.subgroups;
  for (;;) {
    let key: TuneKey;
    switch (family) {
      case "rankk": {
        const c = size(1024, 1 << 20);
        key = { r: size(1, 4096), c, k: size(8, 512), sg };
        if ((key.k as number) * 4 > c) continue;
        break;
      }
      case "sort":
        key = { r: size(1, 4096), c: size(256, 1 << 20), sg };
        break;
      case "scan":
      case "reduce":
        key = rowsTuneKey(caps, size(1, 16384), size(64, 1 << 24));
        if ((key.r as number) * (key.n as number) < 4096) continue;
        break;
      case "matmul": {
        key = matmulTuneKey(size(64, 4096), size(64, 4096), size(64, 16384));
        const [m, n, k] = [key.m as number, key.n as number, key.k as number];
        if (m * n * k > most * (soft ? 16 : 4096) || m * k > most || k * n > most) continue;
        break;
      }
      case "rows": {
        const n = size(16, 1 << 18);
        key = rowsKernelTuneKey(caps, size(1, 16384), n, n % 4 === 0);
        if ((key.r as number) * n < 4096) continue;
        break;
      }
      case "pool": {
        // Windows of the grid's sides and between, strides up to the side.
        const k = Math.round(2 + random() * 14);
        const s = 1 + Math.floor(random() * Math.min(4, k));
        const w = size(8, 512);
        const o = size(1 << 12, most);
        if (o < w * w || (o / (w * w)) * ((w - 1) * s + k) ** 2 > 4 * most) continue;
        key = { k, s, w, o };
        break;
      }
      case "wasmGemm": {
        // The WASM device's products, timed by wall clock, with the threads this machine has.
        const t = tuneGrid("wasmGemm", undefined)[0].t as number;
        key = wasmGemmTuneKey(size(32, 1024), size(32, 1024), size(32, 1024), t);
        if ((key.m as number) * (key.n as number) * (key.k as number) > 1 << 28) continue;
        return key;
      }
      case "elementwise": {
        const e = size(1 << 10, 4 * most);
        key = random() < 1 / 3
          ? elementwiseTuneKey(e, false, true)
          : elementwiseTuneKey(e, e % 4 === 0, false);
        break;
      }
    }
    if (family === "pool" || family === "elementwise") return key;
    const elements = family === "matmul" ? 0 : (key.r as number) * ((key.c ?? key.n) as number);
    if (elements <= most) return key;
  }
}
