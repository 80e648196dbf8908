// Sorting and selection along rows: the WASM reference of the sort and Rank-K families
// (src/wasm/sort.ts runs these; the GPU kernels are checked against them). Rows are contiguous
// runs of `len` 32-bit words. Every order here is the stable order of an unsigned 32-bit key
// (`sort_keys_*`): floats so that unsigned order is numeric order with -0 equal to +0 and every
// NaN (any sign or payload) the largest, as NumPy and PyTorch sort; descending order is the
// complemented key, so NaN comes first and equal keys keep their order. Values are never
// transformed: the kernels sort (key, index) pairs and gather the values by index, so -0 and NaN
// payloads come out as they went in.

// @ts-nocheck: AssemblyScript, compiled by asc, not by Deno.

/** The ordered key of float32 bits `b`: NaN largest, -0 as +0, then sign-magnitude to unsigned. */
@inline function floatKey(b: u32): u32 {
  if ((b & 0x7fffffff) > 0x7f800000) return 0xffffffff;
  if (b == 0x80000000) b = 0;
  return b ^ ((b >> 31) != 0 ? 0xffffffff : 0x80000000);
}

/**
 * The total-order key of float32 bits `b` (IEEE 754 totalOrder, -0 below +0) with every NaN the
 * largest: the order quantiles read their order statistics in.
 */
@inline function totalKey(b: u32): u32 {
  if ((b & 0x7fffffff) > 0x7f800000) return 0xffffffff;
  return b ^ ((b >> 31) != 0 ? 0xffffffff : 0x80000000);
}

/**
 * keys[i] = the ordered key of x[i] for `n` words (`type` 0 float32, 1 int32, 2 uint32, 3 float32
 * in total order), its complement when `descending` is 1.
 */
export function sort_keys(keys: usize, x: usize, n: i32, type: i32, descending: i32): void {
  const flip: u32 = descending ? 0xffffffff : 0;
  for (let i = 0; i < n; i++) {
    const o = <usize>i << 2;
    const b = load<u32>(x + o);
    const k = type == 0 ? floatKey(b) : type == 1 ? b ^ 0x80000000 : type == 3 ? totalKey(b) : b;
    store<u32>(keys + o, k ^ flip);
  }
}

/** Rows up to this long are sorted by insertion (stable), longer ones by radix passes. */
const INSERTION_LENGTH: i32 = 24;

/**
 * Sorts each of `rows` rows of `len` (key, index) pairs by key, stably, in place: `keys` and
 * `indices` (the caller fills indices with 0..len-1 or any payload), with `tmpKeys` and
 * `tmpIndices` of one row each as scratch and `counts` of 256 u32. Least significant digit first,
 * four passes of 8 bits, each a counting pass and a stable scatter; a pass whose digit is the same
 * in the whole row is skipped.
 */
export function sort_pairs_u32(
  keys: usize, indices: usize, tmpKeys: usize, tmpIndices: usize, counts: usize,
  rows: i32, len: i32,
): void {
  const rowBytes = <usize>len << 2;
  for (let r = 0; r < rows; r++) {
    let k = keys + <usize>r * rowBytes;
    let v = indices + <usize>r * rowBytes;
    if (len <= INSERTION_LENGTH) {
      insertionSort(k, v, len);
      continue;
    }
    let tk = tmpKeys;
    let tv = tmpIndices;
    let swapped = false;
    for (let shift: u32 = 0; shift < 32; shift += 8) {
      countDigits(k, len, shift, counts);
      // One bucket holding the whole row: the pass would not move anything.
      const first = (load<u32>(k) >> shift) & 0xff;
      if (load<u32>(counts + (<usize>first << 2)) == <u32>len) continue;
      // Exclusive prefix: each digit's first slot.
      let sum: u32 = 0;
      for (let d = 0; d < 256; d++) {
        const c = load<u32>(counts + (<usize>d << 2));
        store<u32>(counts + (<usize>d << 2), sum);
        sum += c;
      }
      scatterDigits(k, v, len, shift, counts, tk, tv);
      const sk = k;
      const sv = v;
      k = tk;
      v = tv;
      tk = sk;
      tv = sv;
      swapped = !swapped;
    }
    // An odd number of passes left the row in the scratch: copy it home.
    if (swapped) {
      memory.copy(tk, k, rowBytes);
      memory.copy(tv, v, rowBytes);
    }
  }
}

/** counts[d] = how many of the `n` keys at `keys` have digit d (bits shift..shift+7). */
@inline function countDigits(keys: usize, n: i32, shift: u32, counts: usize): void {
  memory.fill(counts, 0, 256 << 2);
  for (let i = 0; i < n; i++) {
    const d = <usize>((load<u32>(keys + (<usize>i << 2)) >> shift) & 0xff) << 2;
    store<u32>(counts + d, load<u32>(counts + d) + 1);
  }
}

/**
 * Each of the `n` (key, index) pairs to the next slot of its digit in `slots` (256 u32, advanced
 * as they fill), in `outKeys` and `outIndices`: a stable scatter.
 */
@inline function scatterDigits(
  keys: usize, indices: usize, n: i32, shift: u32, slots: usize, outKeys: usize, outIndices: usize,
): void {
  for (let i = 0; i < n; i++) {
    const key = load<u32>(keys + (<usize>i << 2));
    const d = <usize>((key >> shift) & 0xff) << 2;
    const slot = load<u32>(slots + d);
    store<u32>(slots + d, slot + 1);
    store<u32>(outKeys + (<usize>slot << 2), key);
    store<u32>(outIndices + (<usize>slot << 2), load<u32>(indices + (<usize>i << 2)));
  }
}

/**
 * One thread's share of a radix pass over one long row shared among threads: `counts` (256 u32)
 * receives how many of the `n` keys at `keys` have each digit.
 */
export function sort_digit_counts(keys: usize, n: i32, shift: u32, counts: usize): void {
  countDigits(keys, n, shift, counts);
}

/**
 * The scatter of that share, from `slots` (256 u32: where this share's pairs of each digit start
 * in the whole row, after those of the shares before it, so the pass stays stable).
 */
export function sort_digit_scatter(
  keys: usize, indices: usize, n: i32, shift: u32, slots: usize, outKeys: usize, outIndices: usize,
): void {
  scatterDigits(keys, indices, n, shift, slots, outKeys, outIndices);
}

/** Stable insertion sort of `len` (key, index) pairs at `k` and `v`. */
@inline function insertionSort(k: usize, v: usize, len: i32): void {
  for (let i = 1; i < len; i++) {
    const key = load<u32>(k + (<usize>i << 2));
    const value = load<u32>(v + (<usize>i << 2));
    let j = i - 1;
    while (j >= 0 && load<u32>(k + (<usize>j << 2)) > key) {
      store<u32>(k + (<usize>(j + 1) << 2), load<u32>(k + (<usize>j << 2)));
      store<u32>(v + (<usize>(j + 1) << 2), load<u32>(v + (<usize>j << 2)));
      j--;
    }
    store<u32>(k + (<usize>(j + 1) << 2), key);
    store<u32>(v + (<usize>(j + 1) << 2), value);
  }
}

/** indices[r * len + i] = i for `rows` rows of `len`. */
export function sort_iota_rows(indices: usize, rows: i32, len: i32): void {
  for (let r = 0; r < rows; r++) {
    const row = indices + (<usize>r * <usize>len << 2);
    for (let i = 0; i < len; i++) store<i32>(row + (<usize>i << 2), i);
  }
}

/**
 * The window [start, start + count) of each row's sorted order: values[r][c] = x[r][order[r][start
 * + c]] and, where `outIndices` is not 0, outIndices[r][c] = that index (`order` holds each row's
 * sorted indices, rows of `len`).
 */
export function sort_gather_window(
  values: usize, outIndices: usize, x: usize, order: usize, rows: i32, len: i32, start: i32,
  count: i32,
): void {
  for (let r = 0; r < rows; r++) {
    const row = x + (<usize>r * <usize>len << 2);
    const from = order + ((<usize>r * <usize>len + <usize>start) << 2);
    const to = <usize>r * <usize>count << 2;
    for (let c = 0; c < count; c++) {
      const index = load<i32>(from + (<usize>c << 2));
      store<u32>(values + to + (<usize>c << 2), load<u32>(row + (<usize>index << 2)));
      if (outIndices) store<i32>(outIndices + to + (<usize>c << 2), index);
    }
  }
}

/**
 * NumPy's quantiles of each row of sorted float32 values (`sorted`, rows of `len`, NaN last), for
 * the `qn` quantiles at `q` (f64): out[r * qn + j]. `method` 0 linear, 1 lower, 2 higher, 3
 * nearest (half to even), 4 midpoint, 5 the median's mean of the middle pair. `skipNaN` 1 counts
 * only the values before the first NaN (nanquantile); otherwise a row holding NaN gives NaN. A row
 * with no values (all NaN, skipped) gives NaN. The virtual index (n - 1) q is taken in f64, the
 * interpolation in f32 as NumPy's `_lerp` for float32: a + (b - a) t, or b - (b - a)(1 - t) for
 * t >= 0.5.
 */
export function sort_quantile_rows(
  out: usize, sorted: usize, rows: i32, len: i32, q: usize, qn: i32, method: i32, skipNaN: i32,
): void {
  for (let r = 0; r < rows; r++) {
    const row = sorted + (<usize>r * <usize>len << 2);
    let n = len;
    if (skipNaN) {
      // NaN sorts last: count the values before the first.
      while (n > 0 && isNaN<f32>(load<f32>(row + (<usize>(n - 1) << 2)))) n--;
    }
    const nan = n == 0 || (!skipNaN && isNaN<f32>(load<f32>(row + (<usize>(len - 1) << 2))));
    for (let j = 0; j < qn; j++) {
      const o = out + ((<usize>r * <usize>qn + <usize>j) << 2);
      if (nan) {
        store<f32>(o, NaN);
        continue;
      }
      const qj = load<f64>(q + (<usize>j << 3));
      // A quantile outside [0, 1] (or NaN, from a tensor of them) has no order statistic.
      if (!(qj >= 0 && qj <= 1)) {
        store<f32>(o, NaN);
        continue;
      }
      const h = <f64>(n - 1) * qj;
      const lo = <i32>Math.floor(h);
      const hi = min(lo + 1, n - 1);
      const a = load<f32>(row + (<usize>lo << 2));
      const b = load<f32>(row + (<usize>hi << 2));
      const g = h - <f64>lo;
      let y: f32;
      if (method == 1) y = a;
      else if (method == 2) y = g > 0 ? b : a;
      else if (method == 3) {
        // Round half to even (np.around): the even of lo and lo + 1 at exactly one half.
        const up = g > 0.5 || (g == 0.5 && (lo & 1) == 1);
        y = up ? b : a;
      } else if (method == 5) y = g > 0 ? (a + b) / 2 : a;
      else {
        const t: f32 = method == 4 ? (g > 0 ? 0.5 : 0) : <f32>g;
        const diff = b - a;
        y = t >= 0.5 ? b - diff * (1 - t) : a + diff * t;
      }
      store<f32>(o, y);
    }
  }
}

/**
 * For each of the `m` keys at `values`, the number of keys of the sorted `n` at `sortedKeys` below
 * it (`right` 0: the leftmost insertion point) or at most it (`right` 1), as int32 at `out`.
 */
export function sort_search(
  out: usize, sortedKeys: usize, n: i32, values: usize, m: i32, right: i32,
): void {
  for (let i = 0; i < m; i++) {
    const key = load<u32>(values + (<usize>i << 2));
    let lo = 0;
    let hi = n;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const k = load<u32>(sortedKeys + (<usize>mid << 2));
      if (right ? k <= key : k < key) lo = mid + 1;
      else hi = mid;
    }
    store<i32>(out + (<usize>i << 2), lo);
  }
}
