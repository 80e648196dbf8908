// 2-D pooling over contiguous NCHW planes: the WASM reference of src/gpu/_codegen_pool.ts.
// Straight transcriptions of PyTorch's CPU loops (aten/src/ATen/native/cpu/MaxPoolKernel.cpp,
// AvgPoolKernel.cpp, AdaptiveMaxPoolKernel.cpp, AdaptiveAvgPoolKernel.cpp), including where each
// window starts and ends, how the maximum treats NaN and which index it reports, and how averages
// are divided. Float16 is widened to f32 by the caller; sums accumulate in f32 as PyTorch's.
// `planes` is N * C; `indices` is 0 when no indices are wanted (address 0 holds descriptors).
//
// The `_fast` entries compute the same results, bit for bit, four output columns at a time in v128
// lanes (src/wasm/pool.ts runs them; the scalar entries stay as their reference). Each lane adds
// its window's elements in the scalar loop's order (rows outer, columns inner), so sums round as
// the scalar loop's do; the maximum's update goes in that order too, or over consecutive runs of
// it (each input row's taps first), which picks the same element: the last NaN (its payload) or
// else the first of equal maxima (the sign of a zero maximum). Only columns whose windows lie
// wholly inside the plane take the vector loops; the edge columns run the scalar code. The fast
// entries take a range of output rows counted over all planes (`first`, `count`), so that
// threads can share a problem.

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
 * Average pooling of output (i, j) of the plane at `input`, stored at output o. `countIncludePad`
 * counts the padding inside the window (clipped at the padded border, so not the ceil-mode
 * overhang); a non-zero `divisor` overrides both rules.
 */
@inline function windowAvg(
  out: usize, o: usize, input: usize, h: i32, w: i32, i: i32, j: i32,
  kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32, countIncludePad: i32, divisor: i32,
): void {
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
}

/** Average pooling (see windowAvg for the divisor rules). */
export function pool_avg_f32(
  out: usize, x: usize, planes: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32, countIncludePad: i32, divisor: i32,
): void {
  let o: usize = 0;
  for (let plane = 0; plane < planes; plane++) {
    const input = x + (<usize>plane * <usize>h * <usize>w << 2);
    for (let i = 0; i < oh; i++) {
      for (let j = 0; j < ow; j++) {
        windowAvg(out, o, input, h, w, i, j, kh, kw, sh, sw, ph, pw, countIncludePad, divisor);
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

// ---- The vector entries (see the header). ----

/**
 * The elements at p, p + s, p + 2s and p + 3s (4-byte elements; s is the column stride), never
 * reading past the last of them.
 */
@inline function lanes(p: usize, s: i32): v128 {
  if (s == 1) return v128.load(p);
  if (s == 2) return v128.shuffle<i32>(v128.load(p), v128.load(p, 12), 0, 2, 5, 7);
  const step = <usize>s << 2;
  let v = v128.load32_zero(p);
  v = i32x4.replace_lane(v, 1, load<i32>(p + step));
  v = i32x4.replace_lane(v, 2, load<i32>(p + 2 * step));
  return i32x4.replace_lane(v, 3, load<i32>(p + 3 * step));
}

/** Lanes where `better` holds: v replaces the running maximum m. */
@inline function vbetter<T>(v: v128, m: v128): v128 {
  if (isFloat<T>()) return v128.or(f32x4.gt(v, m), f32x4.ne(v, v));
  return i32x4.gt_s(v, m);
}

/**
 * `better`'s update in each lane. pmax(m, v) is `m < v ? v : m`, which is the update except that
 * a NaN v must replace m (f32x4.max would not do: it prefers +0 to -0 and makes its own NaN).
 */
@inline function vmax<T>(m: v128, v: v128): v128 {
  if (isFloat<T>()) return v128.bitselect(v, f32x4.pmax(m, v), f32x4.ne(v, v));
  return i32x4.max_s(m, v);
}

@inline function vlowest<T>(): v128 {
  return isFloat<T>() ? f32x4.splat(-Infinity) : i32x4.splat(i32.MIN_VALUE);
}

/** The running value after v: an f32 sum (`sum`, a literal) or the maximum's update. */
@inline function step<T>(acc: v128, v: v128, sum: bool): v128 {
  return sum ? f32x4.add(acc, v) : vmax<T>(acc, v);
}

/**
 * Folds the kw taps of one window row into acc, in order, for four output columns: the row
 * starts at p, taps are dw columns apart, outputs sw columns apart. Called with literal kw, sw and
 * dw for the common windows, so that these become straight-line code sharing their loads.
 */
@inline function foldRow<T>(acc: v128, p: usize, kw: i32, sw: i32, dw: i32, sum: bool): v128 {
  // (One tap would read a column past its last: `lanes` below.)
  if (dw == 1 && (kw == 2 || kw == 3) && (sw == 1 || sw == 2)) {
    let t0: v128, t1: v128, t2: v128;
    if (sw == 2) {
      // Columns 0..7 give taps 0 (even lanes) and 1 (odd); tap 2 is tap 0 moved a lane, plus 8.
      const v0 = v128.load(p);
      const v1 = v128.load(p, 16);
      t0 = v128.shuffle<i32>(v0, v1, 0, 2, 4, 6);
      t1 = v128.shuffle<i32>(v0, v1, 1, 3, 5, 7);
      t2 = kw == 3 ? v128.shuffle<i32>(t0, v128.load(p, 20), 1, 2, 3, 7) : t0;
    } else {
      t0 = v128.load(p);
      t1 = v128.load(p, 4);
      t2 = kw == 3 ? v128.load(p, 8) : t0;
    }
    acc = step<T>(step<T>(acc, t0, sum), t1, sum);
    return kw == 3 ? step<T>(acc, t2, sum) : acc;
  }
  const tap = <usize>dw << 2;
  for (let t = 0; t < kw; t++) {
    acc = step<T>(acc, lanes(p, sw), sum);
    p += tap;
  }
  return acc;
}

/** The first output column whose window starts inside the plane (start j * s - p >= 0). */
@inline function interiorStart(s: i32, p: i32, ow: i32): i32 {
  return min((p + s - 1) / s, ow);
}

/** One past the last output column whose window (of `span` columns) ends inside the plane. */
@inline function interiorEnd(w: i32, s: i32, p: i32, span: i32, ow: i32): i32 {
  const room = w + p - span;
  return room < 0 ? 0 : min(room / s + 1, ow);
}

/** The scalar windowMax of output (i, j) (edge columns, and planes too narrow for vectors). */
@inline function edgeMax<T>(
  out: usize, indices: usize, o: usize, input: usize, w: i32, h0: i32, h1: i32, dh: i32,
  j: i32, kw: i32, sw: i32, pw: i32, dw: i32,
): void {
  let w0 = j * sw - pw;
  const w1 = min(w0 + (kw - 1) * dw + 1, w);
  while (w0 < 0) w0 += dw;
  windowMax<T>(out, indices, o, input, w, h0, h1, dh, w0, w1, dw);
}

/**
 * Bytes of workspace a max entry without indices needs: a ring of the horizontal maxima of the
 * (kh - 1) * dh + 1 input rows that a window spans (ow columns each) and each row's tag.
 */
export function pool_max_fast_workspace(kh: i32, dh: i32, ow: i32): i32 {
  const span = (kh - 1) * dh + 1;
  return ((span * 4 + 15) & ~15) + span * (((ow + 3) & ~3) << 2);
}

/**
 * Max pooling without indices of output rows first..first + count - 1 (over all planes), with
 * literal kw, sw and dw for the common windows. Each input row's horizontal maxima (each output
 * column's window row, a run of consecutive taps) are found once into the workspace's ring, then
 * each output row takes the maximum down its window's rows in order. The update is associative
 * over consecutive runs in the window's order (the last NaN and the first of equal maxima win
 * either way), so this is the scalar loop's result.
 */
@inline function maxRing<T>(
  out: usize, x: usize, first: i32, count: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32, dh: i32, dw: i32, work: usize,
): void {
  const jLo = interiorStart(sw, pw, ow);
  let jHi = max(jLo, interiorEnd(w, sw, pw, (kw - 1) * dw + 1, ow));
  // Fewer than 4 interior columns: all scalar.
  if (jHi - jLo < 4) jHi = jLo;
  const span = (kh - 1) * dh + 1;
  // Ring slot s holds row tags[s]'s maxima for columns jLo.. (the last block overlaps).
  const tags = work;
  const ring = work + <usize>((span * 4 + 15) & ~15);
  const slot = <usize>((jHi - jLo + 3) & ~3) << 2;
  const end = ring + <usize>span * slot;
  for (let g = first; g < first + count; g++) {
    const plane = g / oh;
    const i = g - plane * oh;
    const input = x + <usize>plane * <usize>h * <usize>w * sizeof<T>();
    const o = <usize>g * <usize>ow;
    if (g == first || i == 0) {
      for (let s = 0; s < span; s++) store<i32>(tags + (<usize>s << 2), -1);
    }
    let h0 = i * sh - ph;
    const h1 = min(h0 + (kh - 1) * dh + 1, h);
    while (h0 < 0) h0 += dh;
    for (let j = 0; j < ow; j++) {
      if (j == jLo && jHi > jLo) j = jHi;
      if (j >= ow) break;
      edgeMax<T>(out, 0, o + <usize>j, input, w, h0, h1, dh, j, kw, sw, pw, dw);
    }
    if (jHi == jLo) continue;
    if (h0 >= h1) {
      // No row inside the plane: the window's maximum stays the lowest value.
      for (let j = jLo; j < jHi; j += 4) {
        v128.store(out + ((o + <usize>min(j, jHi - 4)) << 2), vlowest<T>());
      }
      continue;
    }
    // The rows' horizontal maxima that the ring does not hold yet.
    for (let r = h0; r < h1; r += dh) {
      const tag = tags + (<usize>(r % span) << 2);
      if (load<i32>(tag) == r) continue;
      store<i32>(tag, r);
      const row = ring + <usize>(r % span) * slot;
      const src = input + (<usize>(r * w - pw) << 2);
      for (let j = jLo; j < jHi; j += 4) {
        const b = min(j, jHi - 4);
        const v = foldRow<T>(vlowest<T>(), src + (<usize>(b * sw) << 2), kw, sw, dw, false);
        v128.store(row + (<usize>(b - jLo) << 2), v);
      }
    }
    // Down the rows, top to bottom.
    const top = ring + <usize>(h0 % span) * slot;
    const down = <usize>dh * slot;
    for (let j = jLo; j < jHi; j += 4) {
      const b = min(j, jHi - 4);
      let p = top + (<usize>(b - jLo) << 2);
      let m = v128.load(p);
      for (let r = h0 + dh; r < h1; r += dh) {
        p += down;
        if (p >= end) p -= end - ring;
        m = vmax<T>(m, v128.load(p));
      }
      v128.store(out + ((o + <usize>b) << 2), m);
    }
  }
}

/**
 * Max pooling with indices of output rows first..first + count - 1 (over all planes): four
 * output columns at a time, each lane walking its window in the scalar loop's order.
 */
@inline function maxIndexed<T>(
  out: usize, indices: usize, x: usize, first: i32, count: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32, dh: i32, dw: i32,
): void {
  const jLo = interiorStart(sw, pw, ow);
  let jHi = max(jLo, interiorEnd(w, sw, pw, (kw - 1) * dw + 1, ow));
  if (jHi - jLo < 4) jHi = jLo;
  const laneColumns = i32x4(0, sw, 2 * sw, 3 * sw);
  for (let g = first; g < first + count; g++) {
    const plane = g / oh;
    const i = g - plane * oh;
    const input = x + <usize>plane * <usize>h * <usize>w * sizeof<T>();
    const o = <usize>g * <usize>ow;
    let h0 = i * sh - ph;
    const h1 = min(h0 + (kh - 1) * dh + 1, h);
    while (h0 < 0) h0 += dh;
    for (let j = 0; j < ow; j++) {
      if (j == jLo && jHi > jLo) j = jHi;
      if (j >= ow) break;
      edgeMax<T>(out, indices, o + <usize>j, input, w, h0, h1, dh, j, kw, sw, pw, dw);
    }
    for (let j = jLo; j < jHi; j += 4) {
      const b = min(j, jHi - 4);
      let m = vlowest<T>();
      // The window's first element, then each tap's index (h * W + w), as windowMax reports.
      let index = i32x4.add(i32x4.splat(h0 * w + b * sw - pw), laneColumns);
      for (let r = h0; r < h1; r += dh) {
        const first = r * w + b * sw - pw;
        let p = input + (<usize>first << 2);
        for (let t = 0; t < kw; t++) {
          const v = lanes(p, sw);
          const take = vbetter<T>(v, m);
          m = v128.bitselect(v, m, take);
          index = v128.bitselect(i32x4.add(i32x4.splat(first + t * dw), laneColumns), index, take);
          p += <usize>dw << 2;
        }
      }
      v128.store(out + ((o + <usize>b) << 2), m);
      v128.store(indices + ((o + <usize>b) << 2), index);
    }
  }
}

// The common window shapes get functions of their own, with literal widths and strides (V8
// compiles each loop nest well on its own, less so many in one function); the rest go by stride.
function maxRing3s2<T>(
  out: usize, x: usize, first: i32, count: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, sh: i32, ph: i32, pw: i32, dh: i32, work: usize,
): void {
  maxRing<T>(out, x, first, count, h, w, oh, ow, kh, 3, sh, 2, ph, pw, dh, 1, work);
}

function maxRing2s2<T>(
  out: usize, x: usize, first: i32, count: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, sh: i32, ph: i32, pw: i32, dh: i32, work: usize,
): void {
  maxRing<T>(out, x, first, count, h, w, oh, ow, kh, 2, sh, 2, ph, pw, dh, 1, work);
}

function maxRing3s1<T>(
  out: usize, x: usize, first: i32, count: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, sh: i32, ph: i32, pw: i32, dh: i32, work: usize,
): void {
  maxRing<T>(out, x, first, count, h, w, oh, ow, kh, 3, sh, 1, ph, pw, dh, 1, work);
}

function maxRing2s1<T>(
  out: usize, x: usize, first: i32, count: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, sh: i32, ph: i32, pw: i32, dh: i32, work: usize,
): void {
  maxRing<T>(out, x, first, count, h, w, oh, ow, kh, 2, sh, 1, ph, pw, dh, 1, work);
}

function maxRingS1<T>(
  out: usize, x: usize, first: i32, count: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, kw: i32, sh: i32, ph: i32, pw: i32, dh: i32, dw: i32, work: usize,
): void {
  maxRing<T>(out, x, first, count, h, w, oh, ow, kh, kw, sh, 1, ph, pw, dh, dw, work);
}

function maxRingS2<T>(
  out: usize, x: usize, first: i32, count: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, kw: i32, sh: i32, ph: i32, pw: i32, dh: i32, dw: i32, work: usize,
): void {
  maxRing<T>(out, x, first, count, h, w, oh, ow, kh, kw, sh, 2, ph, pw, dh, dw, work);
}

function maxRingAny<T>(
  out: usize, x: usize, first: i32, count: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32, dh: i32, dw: i32, work: usize,
): void {
  maxRing<T>(out, x, first, count, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, work);
}

function maxIndexedS1<T>(
  out: usize, indices: usize, x: usize, first: i32, count: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, kw: i32, sh: i32, ph: i32, pw: i32, dh: i32, dw: i32,
): void {
  maxIndexed<T>(out, indices, x, first, count, h, w, oh, ow, kh, kw, sh, 1, ph, pw, dh, dw);
}

function maxIndexedS2<T>(
  out: usize, indices: usize, x: usize, first: i32, count: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, kw: i32, sh: i32, ph: i32, pw: i32, dh: i32, dw: i32,
): void {
  maxIndexed<T>(out, indices, x, first, count, h, w, oh, ow, kh, kw, sh, 2, ph, pw, dh, dw);
}

function maxIndexedAny<T>(
  out: usize, indices: usize, x: usize, first: i32, count: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32, dh: i32, dw: i32,
): void {
  maxIndexed<T>(out, indices, x, first, count, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw);
}

/**
 * Max pooling of output rows first..first + count - 1 (over all planes): see the header. Without
 * indices, `work` holds pool_max_fast_workspace(kh, dh, ow) bytes of this call's own.
 */
@inline function maxPoolFast<T>(
  out: usize, indices: usize, x: usize, first: i32, count: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32, dh: i32, dw: i32, work: usize,
): void {
  if (indices) {
    if (sw == 1) {
      maxIndexedS1<T>(out, indices, x, first, count, h, w, oh, ow, kh, kw, sh, ph, pw, dh, dw);
    } else if (sw == 2) {
      maxIndexedS2<T>(out, indices, x, first, count, h, w, oh, ow, kh, kw, sh, ph, pw, dh, dw);
    } else {
      maxIndexedAny<T>(
        out, indices, x, first, count, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw,
      );
    }
  } else if (dw == 1 && (kw == 2 || kw == 3) && (sw == 1 || sw == 2)) {
    if (kw == 3 && sw == 2) {
      maxRing3s2<T>(out, x, first, count, h, w, oh, ow, kh, sh, ph, pw, dh, work);
    } else if (kw == 2 && sw == 2) {
      maxRing2s2<T>(out, x, first, count, h, w, oh, ow, kh, sh, ph, pw, dh, work);
    } else if (kw == 3) {
      maxRing3s1<T>(out, x, first, count, h, w, oh, ow, kh, sh, ph, pw, dh, work);
    } else {
      maxRing2s1<T>(out, x, first, count, h, w, oh, ow, kh, sh, ph, pw, dh, work);
    }
  } else if (sw == 1) {
    maxRingS1<T>(out, x, first, count, h, w, oh, ow, kh, kw, sh, ph, pw, dh, dw, work);
  } else if (sw == 2) {
    maxRingS2<T>(out, x, first, count, h, w, oh, ow, kh, kw, sh, ph, pw, dh, dw, work);
  } else {
    maxRingAny<T>(out, x, first, count, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, work);
  }
}

export function pool_max_fast_f32(
  out: usize, indices: usize, x: usize, first: i32, count: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32, dh: i32, dw: i32, work: usize,
): void {
  maxPoolFast<f32>(
    out, indices, x, first, count, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, work,
  );
}

export function pool_max_fast_i32(
  out: usize, indices: usize, x: usize, first: i32, count: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32, dh: i32, dw: i32, work: usize,
): void {
  maxPoolFast<i32>(
    out, indices, x, first, count, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, work,
  );
}

/**
 * Average pooling of output rows first..first + count - 1 (over all planes) with literal kw and
 * sw for the common windows: each lane adds its window's rows in order into the output row (in
 * place), then divides. Blocks of four cover the interior columns' largest multiple of 4; the
 * rest run windowAvg.
 */
@inline function avgRows(
  out: usize, x: usize, first: i32, count: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32, countIncludePad: i32, divisor: i32,
): void {
  const jLo = interiorStart(sw, pw, ow);
  const jHi = jLo + (max(0, interiorEnd(w, sw, pw, kw, ow) - jLo) & ~3);
  for (let g = first; g < first + count; g++) {
    const plane = g / oh;
    const i = g - plane * oh;
    const input = x + (<usize>plane * <usize>h * <usize>w << 2);
    const o = <usize>g * <usize>ow;
    // The row bounds as windowAvg finds them; interior columns span kw columns, all counted.
    const top = i * sh - ph;
    const bottom = min(top + kh, h + ph);
    const h0 = max(top, 0);
    const h1 = min(bottom, h);
    const vector = jHi > jLo && h0 < h1;
    for (let j = 0; j < ow; j++) {
      if (j == jLo && vector) j = jHi;
      if (j >= ow) break;
      windowAvg(
        out, o + <usize>j, input, h, w, i, j, kh, kw, sh, sw, ph, pw, countIncludePad, divisor,
      );
    }
    if (!vector) continue;
    const at = out + (o << 2);
    for (let r = h0; r < h1; r++) {
      let p = input + (<usize>(r * w + jLo * sw - pw) << 2);
      for (let q = at + (<usize>jLo << 2); q < at + (<usize>jHi << 2); q += 16) {
        const sum = r == h0 ? f32x4.splat(0) : v128.load(q);
        v128.store(q, foldRow<f32>(sum, p, kw, sw, 1, true));
        p += <usize>sw << 4;
      }
    }
    const rule = (countIncludePad ? bottom - top : h1 - h0) * kw;
    const d = f32x4.splat(<f32>(divisor != 0 ? divisor : rule));
    for (let q = at + (<usize>jLo << 2); q < at + (<usize>jHi << 2); q += 16) {
      v128.store(q, f32x4.div(v128.load(q), d));
    }
  }
}

function avgRows3s2(
  out: usize, x: usize, first: i32, count: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, sh: i32, ph: i32, pw: i32, countIncludePad: i32, divisor: i32,
): void {
  avgRows(out, x, first, count, h, w, oh, ow, kh, 3, sh, 2, ph, pw, countIncludePad, divisor);
}

function avgRows2s2(
  out: usize, x: usize, first: i32, count: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, sh: i32, ph: i32, pw: i32, countIncludePad: i32, divisor: i32,
): void {
  avgRows(out, x, first, count, h, w, oh, ow, kh, 2, sh, 2, ph, pw, countIncludePad, divisor);
}

function avgRows3s1(
  out: usize, x: usize, first: i32, count: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, sh: i32, ph: i32, pw: i32, countIncludePad: i32, divisor: i32,
): void {
  avgRows(out, x, first, count, h, w, oh, ow, kh, 3, sh, 1, ph, pw, countIncludePad, divisor);
}

function avgRowsS1(
  out: usize, x: usize, first: i32, count: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, kw: i32, sh: i32, ph: i32, pw: i32, countIncludePad: i32, divisor: i32,
): void {
  avgRows(out, x, first, count, h, w, oh, ow, kh, kw, sh, 1, ph, pw, countIncludePad, divisor);
}

function avgRowsS2(
  out: usize, x: usize, first: i32, count: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, kw: i32, sh: i32, ph: i32, pw: i32, countIncludePad: i32, divisor: i32,
): void {
  avgRows(out, x, first, count, h, w, oh, ow, kh, kw, sh, 2, ph, pw, countIncludePad, divisor);
}

function avgRowsAny(
  out: usize, x: usize, first: i32, count: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32, countIncludePad: i32, divisor: i32,
): void {
  avgRows(out, x, first, count, h, w, oh, ow, kh, kw, sh, sw, ph, pw, countIncludePad, divisor);
}

/** Average pooling of output rows first..first + count - 1 (over all planes): see the header. */
export function pool_avg_fast_f32(
  out: usize, x: usize, first: i32, count: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32, countIncludePad: i32, divisor: i32,
): void {
  const c = countIncludePad;
  const d = divisor;
  if (kw == 3 && sw == 2) avgRows3s2(out, x, first, count, h, w, oh, ow, kh, sh, ph, pw, c, d);
  else if (kw == 2 && sw == 2) avgRows2s2(out, x, first, count, h, w, oh, ow, kh, sh, ph, pw, c, d);
  else if (kw == 3 && sw == 1) avgRows3s1(out, x, first, count, h, w, oh, ow, kh, sh, ph, pw, c, d);
  else if (sw == 1) avgRowsS1(out, x, first, count, h, w, oh, ow, kh, kw, sh, ph, pw, c, d);
  else if (sw == 2) avgRowsS2(out, x, first, count, h, w, oh, ow, kh, kw, sh, ph, pw, c, d);
  else avgRowsAny(out, x, first, count, h, w, oh, ow, kh, kw, sh, sw, ph, pw, c, d);
}

// ---- The channels-last entries. ----
// The same pooling over channels-last memory (NHWC: a [N, C, H, W] view whose channel stride is
// 1, as PyTorch's channels_last or TensorFlow's layout), four channels per v128: each lane walks
// its window in the scalar loop's order (rows outer, columns inner), so results are the scalar
// loops' bit for bit. Vectors need no shuffles here (NCHW's stride-2 taps do), and the output is
// channels-last too (what PyTorch keeps for such input). Ranges of output rows over all images
// (`first`, `count` of N * OH) let threads share a problem.

/**
 * The maximum of one window over channels-last float input for channels k..k + 3 (see poolCl),
 * fast where no tap is NaN: pmax (one instruction; `m < v ? v : m`, PyTorch's update but for a
 * NaN v) down the taps, and their sum beside it, which is NaN if a tap is (or where +Inf meets
 * -Inf). A NaN sum sends the vector to clWindow's exact update, which picks the last NaN.
 */
@inline function clWindowMaxFast(
  p: usize, rows: i32, cols: i32, rowStep: usize, colStep: usize,
): v128 {
  if (rows == 3 && cols == 3) {
    // Without NaN, pmax is associative and keeps the first of equal maxima whichever way its
    // applications are grouped, so rows go first and then the rows' maxima (shorter chains).
    const q = p + rowStep;
    const s = q + rowStep;
    const a0 = v128.load(p);
    const a1 = v128.load(p + colStep);
    const a2 = v128.load(p + 2 * colStep);
    const b0 = v128.load(q);
    const b1 = v128.load(q + colStep);
    const b2 = v128.load(q + 2 * colStep);
    const c0 = v128.load(s);
    const c1 = v128.load(s + colStep);
    const c2 = v128.load(s + 2 * colStep);
    const a = f32x4.pmax(f32x4.pmax(a0, a1), a2);
    const b = f32x4.pmax(f32x4.pmax(b0, b1), b2);
    const c = f32x4.pmax(f32x4.pmax(c0, c1), c2);
    const z = f32x4.add(
      f32x4.add(f32x4.add(a0, a1), f32x4.add(a2, b0)),
      f32x4.add(f32x4.add(b1, b2), f32x4.add(f32x4.add(c0, c1), c2)),
    );
    if (!v128.any_true(f32x4.ne(z, z))) return f32x4.pmax(f32x4.pmax(a, b), c);
    return clWindow<f32>(p, rows, cols, rowStep, colStep, false);
  }
  let m = f32x4.splat(-Infinity);
  let z = f32x4.splat(0);
  for (let r = 0; r < rows; r++) {
    let t = p + <usize>r * rowStep;
    for (let c = 0; c < cols; c++) {
      const v = v128.load(t);
      m = f32x4.pmax(m, v);
      z = f32x4.add(z, v);
      t += colStep;
    }
  }
  if (!v128.any_true(f32x4.ne(z, z))) return m;
  return clWindow<f32>(p, rows, cols, rowStep, colStep, false);
}

/** The taps of one window over channels-last input for channels k..k + 3 (see poolCl). */
@inline function clWindow<T>(
  p: usize, rows: i32, cols: i32, rowStep: usize, colStep: usize, avg: bool,
): v128 {
  if (rows == 3 && cols == 3) {
    // The common 3x3 window as straight-line code.
    const q = p + rowStep;
    const s = q + rowStep;
    // The first tap replaces max's starting value exactly; a sum starts from 0 (-0 + 0 is +0).
    let m = avg ? f32x4.add(f32x4.splat(0), v128.load(p)) : v128.load(p);
    m = step<T>(m, v128.load(p + colStep), avg);
    m = step<T>(m, v128.load(p + 2 * colStep), avg);
    m = step<T>(m, v128.load(q), avg);
    m = step<T>(m, v128.load(q + colStep), avg);
    m = step<T>(m, v128.load(q + 2 * colStep), avg);
    m = step<T>(m, v128.load(s), avg);
    m = step<T>(m, v128.load(s + colStep), avg);
    return step<T>(m, v128.load(s + 2 * colStep), avg);
  }
  // An empty window keeps the start.
  let m = avg ? f32x4.splat(0) : vlowest<T>();
  for (let r = 0; r < rows; r++) {
    let t = p;
    for (let c = 0; c < cols; c++) {
      m = step<T>(m, v128.load(t), avg);
      t += colStep;
    }
    p += rowStep;
  }
  return m;
}

/** One channel's window, as windowMax or windowAvg's sum (the channels past the last vector). */
@inline function clScalar<T>(
  p: usize, rows: i32, cols: i32, rowStep: usize, colStep: usize, avg: bool,
): T {
  let m: T = avg ? <T>0 : lowest<T>();
  for (let r = 0; r < rows; r++) {
    let t = p;
    for (let c = 0; c < cols; c++) {
      const v = load<T>(t);
      if (avg) m += v;
      else if (better<T>(v, m)) m = v;
      t += colStep;
    }
    p += rowStep;
  }
  return m;
}

@inline function poolCl<T>(
  out: usize, x: usize, first: i32, count: i32, h: i32, w: i32, channels: i32, oh: i32, ow: i32,
  kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32, dh: i32, dw: i32,
  avg: bool, countIncludePad: i32, divisor: i32,
): void {
  const pixel = <usize>channels * sizeof<T>();
  const rowBytes = <usize>w * pixel;
  const vectors = channels & ~3;
  const rowStep = <usize>dh * rowBytes;
  const colStep = <usize>dw * pixel;
  for (let g = first; g < first + count; g++) {
    const n = g / oh;
    const i = g - n * oh;
    const image = x + <usize>n * <usize>h * rowBytes;
    let h0 = i * sh - ph;
    let h1: i32;
    let poolRows = 0;
    if (avg) {
      h1 = min(h0 + kh, h + ph);
      poolRows = h1 - h0;
      h0 = max(h0, 0);
      h1 = min(h1, h);
    } else {
      h1 = min(h0 + (kh - 1) * dh + 1, h);
      while (h0 < 0) h0 += dh;
    }
    const rows = h0 < h1 ? (h1 - h0 + dh - 1) / dh : 0;
    for (let j = 0; j < ow; j++) {
      let w0 = j * sw - pw;
      let w1: i32;
      let poolSize = 0;
      if (avg) {
        w1 = min(w0 + kw, w + pw);
        poolSize = poolRows * (w1 - w0);
        w0 = max(w0, 0);
        w1 = min(w1, w);
      } else {
        w1 = min(w0 + (kw - 1) * dw + 1, w);
        while (w0 < 0) w0 += dw;
      }
      const cols = rows > 0 && w0 < w1 ? (w1 - w0 + dw - 1) / dw : 0;
      const taps = rows * cols;
      const p = image + <usize>max(h0, 0) * rowBytes + <usize>max(w0, 0) * pixel;
      const q = out + (<usize>g * <usize>ow + <usize>j) * pixel;
      // windowAvg's divisor; an empty window averages to 0.
      const d = <f32>(divisor != 0 ? divisor : countIncludePad ? poolSize : taps);
      const dv = f32x4.splat(d);
      for (let k = 0; k < vectors; k += 4) {
        const o = <usize>k * sizeof<T>();
        const m = !avg && isFloat<T>()
          ? clWindowMaxFast(p + o, rows, cols, rowStep, colStep)
          : clWindow<T>(p + o, rows, cols, rowStep, colStep, avg);
        if (!avg) v128.store(q + o, m);
        else v128.store(q + o, taps == 0 ? f32x4.splat(0) : f32x4.div(m, dv));
      }
      for (let k = vectors; k < channels; k++) {
        const o = <usize>k * sizeof<T>();
        const m = clScalar<T>(p + o, rows, cols, rowStep, colStep, avg);
        if (!avg) store<T>(q + o, m);
        else store<T>(q + o, taps == 0 ? <T>0 : m / <T>d);
      }
    }
  }
}

/**
 * Max pooling without indices of channels-last input (see above): output rows first..first +
 * count - 1 of N * OH, each OW pixels of `channels` values.
 */
export function pool_max_cl_f32(
  out: usize, x: usize, first: i32, count: i32, h: i32, w: i32, channels: i32, oh: i32, ow: i32,
  kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32, dh: i32, dw: i32,
): void {
  poolCl<f32>(
    out, x, first, count, h, w, channels, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, false, 0, 0,
  );
}

/** pool_max_cl_f32 for int32. */
export function pool_max_cl_i32(
  out: usize, x: usize, first: i32, count: i32, h: i32, w: i32, channels: i32, oh: i32, ow: i32,
  kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32, dh: i32, dw: i32,
): void {
  poolCl<i32>(
    out, x, first, count, h, w, channels, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, false, 0, 0,
  );
}

/** Average pooling of channels-last input (windowAvg's divisor rules; no dilation). */
export function pool_avg_cl_f32(
  out: usize, x: usize, first: i32, count: i32, h: i32, w: i32, channels: i32, oh: i32, ow: i32,
  kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32, countIncludePad: i32, divisor: i32,
): void {
  poolCl<f32>(
    out, x, first, count, h, w, channels, oh, ow, kh, kw, sh, sw, ph, pw, 1, 1, true,
    countIncludePad, divisor,
  );
}
