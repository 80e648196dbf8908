// 2-D pooling over contiguous NCHW planes: the WASM reference of src/gpu/_codegen_pool.ts.
// Straight transcriptions of PyTorch's CPU loops (aten/src/ATen/native/cpu/MaxPoolKernel.cpp,
// AvgPoolKernel.cpp, AdaptiveMaxPoolKernel.cpp, AdaptiveAvgPoolKernel.cpp), including where each
// window starts and ends, how the maximum treats NaN and which index it reports, and how averages
// are divided. Float16 is widened to f32 by the caller; sums accumulate in f32 as PyTorch's.
// `planes` is N * C; `indices` is 0 when no indices are wanted (address 0 holds descriptors).

// @ts-nocheck: AssemblyScript, compiled by asc, not by Deno.

/** The value PyTorch starts a running maximum from (and pads with). */
@inline function lowest<T>(): T {
  if (isFloat<T>()) return <T>-Infinity;
  return <T>i32.MIN_VALUE;
}

/** PyTorch's update: a greater value or a NaN replaces the running maximum. */
@inline function better<T>(value: T, max: T): bool {
  if (isFloat<T>()) return value > max || value != value;
  return value > max;
}

/**
 * The maximum of rows h0..h1 (step dh) and columns w0..w1 (step dw) of the plane at `input`
 * (row length w), stored at output o with its flat index (the window's first element when empty
 * or all lowest, as PyTorch reports).
 */
@inline function windowMax<T>(
  out: usize, indices: usize, o: usize, input: usize, w: i32,
  h0: i32, h1: i32, dh: i32, w0: i32, w1: i32, dw: i32,
): void {
  let maxIndex = h0 * w + w0;
  let max = lowest<T>();
  for (let r = h0; r < h1; r += dh) {
    for (let c = w0; c < w1; c += dw) {
      const index = r * w + c;
      const value = load<T>(input + <usize>index * sizeof<T>());
      if (better<T>(value, max)) {
        max = value;
        maxIndex = index;
      }
    }
  }
  store<T>(out + o * sizeof<T>(), max);
  if (indices) store<i32>(indices + (o << 2), maxIndex);
}

@inline function maxPool<T>(
  out: usize, indices: usize, x: usize, planes: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32, dh: i32, dw: i32,
): void {
  let o: usize = 0;
  for (let plane = 0; plane < planes; plane++) {
    const input = x + <usize>plane * <usize>h * <usize>w * sizeof<T>();
    for (let i = 0; i < oh; i++) {
      for (let j = 0; j < ow; j++) {
        let h0 = i * sh - ph;
        let w0 = j * sw - pw;
        const h1 = min(h0 + (kh - 1) * dh + 1, h);
        const w1 = min(w0 + (kw - 1) * dw + 1, w);
        while (h0 < 0) h0 += dh;
        while (w0 < 0) w0 += dw;
        windowMax<T>(out, indices, o, input, w, h0, h1, dh, w0, w1, dw);
        o++;
      }
    }
  }
}

export function pool_max_f32(
  out: usize, indices: usize, x: usize, planes: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32, dh: i32, dw: i32,
): void {
  maxPool<f32>(out, indices, x, planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw);
}

export function pool_max_i32(
  out: usize, indices: usize, x: usize, planes: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32, dh: i32, dw: i32,
): void {
  maxPool<i32>(out, indices, x, planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw);
}

/**
 * Average pooling. `countIncludePad` counts the padding inside the window (clipped at the padded
 * border, so not the ceil-mode overhang); a non-zero `divisor` overrides both rules.
 */
export function pool_avg_f32(
  out: usize, x: usize, planes: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32, countIncludePad: i32, divisor: i32,
): void {
  let o: usize = 0;
  for (let plane = 0; plane < planes; plane++) {
    const input = x + (<usize>plane * <usize>h * <usize>w << 2);
    for (let i = 0; i < oh; i++) {
      for (let j = 0; j < ow; j++) {
        let h0 = i * sh - ph;
        let w0 = j * sw - pw;
        let h1 = min(h0 + kh, h + ph);
        let w1 = min(w0 + kw, w + pw);
        const poolSize = (h1 - h0) * (w1 - w0);
        h0 = max(h0, 0);
        w0 = max(w0, 0);
        h1 = min(h1, h);
        w1 = min(w1, w);
        let result: f32 = 0;
        if (h0 < h1 && w0 < w1) {
          let sum: f32 = 0;
          for (let r = h0; r < h1; r++) {
            for (let c = w0; c < w1; c++) sum += load<f32>(input + (<usize>(r * w + c) << 2));
          }
          const d = divisor != 0 ? divisor : countIncludePad ? poolSize : (h1 - h0) * (w1 - w0);
          result = sum / <f32>d;
        }
        store<f32>(out + (o << 2), result);
        o++;
      }
    }
  }
}

/** PyTorch's adaptive bin start: floor(i * size / out). */
@inline function binStart(i: i32, out: i32, size: i32): i32 {
  return <i32>((<i64>i * <i64>size) / <i64>out);
}

/** PyTorch's adaptive bin end: ceil((i + 1) * size / out). */
@inline function binEnd(i: i32, out: i32, size: i32): i32 {
  return <i32>(((<i64>i + 1) * <i64>size + <i64>out - 1) / <i64>out);
}

@inline function adaptiveMaxPool<T>(
  out: usize, indices: usize, x: usize, planes: i32, h: i32, w: i32, oh: i32, ow: i32,
): void {
  let o: usize = 0;
  for (let plane = 0; plane < planes; plane++) {
    const input = x + <usize>plane * <usize>h * <usize>w * sizeof<T>();
    for (let i = 0; i < oh; i++) {
      const h0 = binStart(i, oh, h);
      const h1 = binEnd(i, oh, h);
      for (let j = 0; j < ow; j++) {
        const w0 = binStart(j, ow, w);
        const w1 = binEnd(j, ow, w);
        windowMax<T>(out, indices, o, input, w, h0, h1, 1, w0, w1, 1);
        o++;
      }
    }
  }
}

export function pool_adaptive_max_f32(
  out: usize, indices: usize, x: usize, planes: i32, h: i32, w: i32, oh: i32, ow: i32,
): void {
  adaptiveMaxPool<f32>(out, indices, x, planes, h, w, oh, ow);
}

export function pool_adaptive_max_i32(
  out: usize, indices: usize, x: usize, planes: i32, h: i32, w: i32, oh: i32, ow: i32,
): void {
  adaptiveMaxPool<i32>(out, indices, x, planes, h, w, oh, ow);
}

/** Adaptive average: `sum / rows / columns`, two divisions, as PyTorch. */
export function pool_adaptive_avg_f32(
  out: usize, x: usize, planes: i32, h: i32, w: i32, oh: i32, ow: i32,
): void {
  let o: usize = 0;
  for (let plane = 0; plane < planes; plane++) {
    const input = x + (<usize>plane * <usize>h * <usize>w << 2);
    for (let i = 0; i < oh; i++) {
      const h0 = binStart(i, oh, h);
      const h1 = binEnd(i, oh, h);
      for (let j = 0; j < ow; j++) {
        const w0 = binStart(j, ow, w);
        const w1 = binEnd(j, ow, w);
        let sum: f32 = 0;
        for (let r = h0; r < h1; r++) {
          for (let c = w0; c < w1; c++) sum += load<f32>(input + (<usize>(r * w + c) << 2));
        }
        store<f32>(out + (o << 2), sum / <f32>(h1 - h0) / <f32>(w1 - w0));
        o++;
      }
    }
  }
}
