// Row kernels of softmax, logSoftmax and the normalisations (layerNorm, rmsNorm, groupNorm,
// batchNorm): the CPU fallback and the reference the GPU row kernels (src/gpu/_codegen_rows.ts) are
// checked against. Each works on `rows` contiguous rows of `len` float32 values; statistics are
// accumulated in f64 and each result is rounded to f32 once, so the reference is within half an
// f32 ULP of the exact answer for the f32 inputs.
//
// Special values follow PyTorch: a row containing NaN, or +inf, or nothing but -inf, is NaN
// throughout under softmax and logSoftmax; the norms propagate NaN and infinities through their
// arithmetic (a row with an infinity has an infinite or NaN mean, so it comes out NaN).

// @ts-nocheck: AssemblyScript, compiled by asc, not by Deno.

/** Sum of `n` f32 values at `p`, in f64 (two f64x2 accumulators over f32x4 loads). */
function sumF64(p: usize, n: i32): f64 {
  let a = f64x2.splat(0);
  let b = f64x2.splat(0);
  let j = 0;
  for (; j + 4 <= n; j += 4) {
    const v = v128.load(p + (<usize>j << 2));
    a = f64x2.add(a, f64x2.promote_low_f32x4(v));
    b = f64x2.add(b, f64x2.promote_low_f32x4(i32x4.shuffle(v, v, 2, 3, 0, 1)));
  }
  const c = f64x2.add(a, b);
  let total = f64x2.extract_lane(c, 0) + f64x2.extract_lane(c, 1);
  for (; j < n; j++) total += <f64>load<f32>(p + (<usize>j << 2));
  return total;
}

/** Sum of (x - centre)^2 over `n` f32 values at `p`, in f64. */
function squaredDeviationsF64(p: usize, n: i32, centre: f64): f64 {
  const c = f64x2.splat(centre);
  let a = f64x2.splat(0);
  let b = f64x2.splat(0);
  let j = 0;
  for (; j + 4 <= n; j += 4) {
    const v = v128.load(p + (<usize>j << 2));
    const lo = f64x2.sub(f64x2.promote_low_f32x4(v), c);
    const hi = f64x2.sub(f64x2.promote_low_f32x4(i32x4.shuffle(v, v, 2, 3, 0, 1)), c);
    a = f64x2.add(a, f64x2.mul(lo, lo));
    b = f64x2.add(b, f64x2.mul(hi, hi));
  }
  const s = f64x2.add(a, b);
  let total = f64x2.extract_lane(s, 0) + f64x2.extract_lane(s, 1);
  for (; j < n; j++) {
    const d = <f64>load<f32>(p + (<usize>j << 2)) - centre;
    total += d * d;
  }
  return total;
}

/** Maximum of `n` f32 values at `p`; NaN if any is NaN (f32x4.max and f32.max propagate it). */
function maxF32(p: usize, n: i32): f32 {
  let m = f32x4.splat(-Infinity);
  let j = 0;
  for (; j + 4 <= n; j += 4) m = f32x4.max(m, v128.load(p + (<usize>j << 2)));
  let top = max<f32>(
    max<f32>(f32x4.extract_lane(m, 0), f32x4.extract_lane(m, 1)),
    max<f32>(f32x4.extract_lane(m, 2), f32x4.extract_lane(m, 3)),
  );
  for (; j < n; j++) top = max<f32>(top, load<f32>(p + (<usize>j << 2)));
  return top;
}

/**
 * softmax (`logarithm` 0) or logSoftmax (1) of each row: exp(x - max) / sum(exp(x - max)), or
 * (x - max) - log(sum(exp(x - max))).
 */
export function softmax_rows_f32(out: usize, x: usize, rows: i32, len: i32, logarithm: i32): void {
  const rowBytes = <usize>len << 2;
  for (let r = 0; r < rows; r++) {
    const p = x + <usize>r * rowBytes;
    const q = out + <usize>r * rowBytes;
    const top = maxF32(p, len);
    // NaN anywhere, +inf (inf - inf in the sum) or a row of only -inf (-inf - -inf): NaN, as
    // PyTorch computes it.
    if (top != top || top == Infinity || top == -Infinity) {
      for (let j = 0; j < len; j++) store<f32>(q + (<usize>j << 2), NaN);
      continue;
    }
    const m = <f64>top;
    let total: f64 = 0;
    for (let j = 0; j < len; j++) total += Math.exp(<f64>load<f32>(p + (<usize>j << 2)) - m);
    if (logarithm) {
      const shift = Math.log(total);
      for (let j = 0; j < len; j++) {
        store<f32>(q + (<usize>j << 2), <f32>((<f64>load<f32>(p + (<usize>j << 2)) - m) - shift));
      }
    } else {
      for (let j = 0; j < len; j++) {
        store<f32>(q + (<usize>j << 2), <f32>(Math.exp(<f64>load<f32>(p + (<usize>j << 2)) - m) / total));
      }
    }
  }
}

/**
 * layerNorm (`centered` 1) or rmsNorm (0) of each row: (x - mean) / sqrt(var + eps) with the
 * biased variance (rmsNorm: mean 0, var = mean(x^2)), then `* weight + bias` when those pointers
 * are not 0. The affine parameters of element j of row r are at index
 * `(r % period) * scale + j / divisor` (layerNorm: period 1, scale 0, divisor 1 gives j;
 * groupNorm: the channel). When `stats` is not 0 it receives the mean of each row at [r] and the
 * variance at [rows + r], as float32.
 */
export function layer_norm_rows_f32(
  out: usize,
  x: usize,
  rows: i32,
  len: i32,
  eps: f64,
  weight: usize,
  bias: usize,
  period: i32,
  scale: i32,
  divisor: i32,
  stats: usize,
  centered: i32,
): void {
  const rowBytes = <usize>len << 2;
  for (let r = 0; r < rows; r++) {
    const p = x + <usize>r * rowBytes;
    const q = out + <usize>r * rowBytes;
    // Two passes: the mean, then squared deviations from it (never sum(x^2) - mean^2).
    const mean: f64 = centered ? sumF64(p, len) / <f64>len : 0;
    const variance = squaredDeviationsF64(p, len, mean) / <f64>len;
    const rstd = 1.0 / Math.sqrt(variance + eps);
    if (stats) {
      store<f32>(stats + (<usize>r << 2), <f32>mean);
      store<f32>(stats + (<usize>(rows + r) << 2), <f32>variance);
    }
    const base = (r % period) * scale;
    for (let j = 0; j < len; j++) {
      let y = (<f64>load<f32>(p + (<usize>j << 2)) - mean) * rstd;
      const c = <usize>(base + j / divisor) << 2;
      if (weight) y *= <f64>load<f32>(weight + c);
      if (bias) y += <f64>load<f32>(bias + c);
      store<f32>(q + (<usize>j << 2), <f32>y);
    }
  }
}
