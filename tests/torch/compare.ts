/**
 * Judges one device's result for a case against PyTorch's answer as `expected.py` wrote it: the
 * same outputs and shapes, NaN and infinities (with their signs) where PyTorch has them, and every
 * other value exact for exact ops or within the per-element tolerance `expected.py` states, after
 * PyTorch's float64 answer is rounded to the dtype gyre returned (a float16 result may also sit one
 * float16 ULP away: its float32 value can round the other way).
 * @module
 */
import { type DeviceResult, fromBase64, values } from "./cases.ts";

/** PyTorch's answer for one case: the error it raised, or its outputs with their tolerances. */
export interface Expectation {
  name: string;
  error?: string;
  outputs?: { shape: number[]; expected: string; tolerance: string | null }[];
}

/** A mismatch described (null when the result matches) and the largest error over tolerance. */
export interface Verdict {
  problem: string | null;
  worst: number;
}

function roundTo(dtype: string, value: number): number {
  if (dtype === "float32") return Math.fround(value);
  if (dtype === "float16") return Math.f16round(value);
  return value;
}

/** Compares a device's result with PyTorch's expectation for the same case. */
export function judge(result: DeviceResult, expectation: Expectation): Verdict {
  if (expectation.error !== undefined) {
    return {
      problem: "error" in result ? null : `no error; PyTorch raised ${expectation.error}`,
      worst: 0,
    };
  }
  if ("error" in result) return { problem: `raised ${result.error}`, worst: 0 };
  const wanted = expectation.outputs ?? [];
  if (wanted.length !== result.outputs.length) {
    return { problem: `${result.outputs.length} outputs, expected ${wanted.length}`, worst: 0 };
  }
  let worst = 0;
  for (let k = 0; k < wanted.length; k++) {
    const got = result.outputs[k];
    const want = wanted[k];
    if (JSON.stringify(got.shape) !== JSON.stringify(want.shape)) {
      return {
        problem: `output ${k}: shape ${JSON.stringify(got.shape)}, expected ${
          JSON.stringify(want.shape)
        }`,
        worst,
      };
    }
    const g = values(got);
    const w = fromBase64(want.expected);
    const tolerance = want.tolerance === null ? null : fromBase64(want.tolerance);
    for (let i = 0; i < w.length; i++) {
      const expected = roundTo(got.dtype, w[i]);
      const actual = g[i];
      const where = `output ${k}[${i}]: expected ${expected}, got ${actual}`;
      if (Number.isNaN(expected) || Number.isNaN(actual) || !Number.isFinite(expected)) {
        if (!Object.is(expected, actual) && !(Number.isNaN(expected) && Number.isNaN(actual))) {
          return { problem: where, worst };
        }
        continue;
      }
      const error = Math.abs(actual - expected);
      if (tolerance === null) {
        if (error !== 0) return { problem: `${where} (exact op)`, worst };
        continue;
      }
      let allowed = tolerance[i];
      if (got.dtype === "float16") allowed += 2 ** -10 * Math.abs(expected) + 2 ** -24;
      worst = Math.max(worst, error / allowed);
      if (!(error <= allowed)) return { problem: `${where}, tolerance ${allowed}`, worst };
    }
  }
  return { problem: null, worst };
}
