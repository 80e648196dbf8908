// Matrix multiply: the WASM device's matmul and the reference of src/gpu/_codegen_matmul.ts.
// A blocked, packed GEMM in the GotoBLAS/BLIS arrangement: a KC x NC block of B is packed into
// NR-column panels (k-major, NR values per k), an MC x KC block of A into MR-row panels (MR values
// per k), and an MR x NR micro-kernel keeps its outputs in v128 locals while it walks K, reading
// both panels sequentially. A block (MC x KC) stays in L2, a B panel (KC x NR) in L1. Operands are
// read through their strides while packing, so transposed views cost no copy; panels past the
// matrix edge are padded with zeros, and edge tiles are written through a small staging tile.
// C is [m, n] with row stride ldc (ldc = n: contiguous; larger when a thread computes a block of
// columns of a wider C) and overwritten. f32 sums run in f32, one step per k: a fused multiply-add
// (one rounding) in the build with relaxed SIMD, which V8 runs as an FMA where the CPU has one,
// else a product and a sum (two); i32 sums wrap. Each element's sum is the same sequence
// of operations whichever rows and columns a call covers (the K blocking starts at 0 in every
// call and lanes never mix), so splitting C between threads changes no bit of the result.

// @ts-nocheck: AssemblyScript, compiled by asc, not by Deno.

const MR: i32 = 4;
const NR: i32 = 8;
const MC: i32 = 128;
const KC: i32 = 256;
const NC: i32 = 2048;

@inline function roundUp(x: i32, to: i32): i32 {
  return ((x + to - 1) / to) * to;
}

/** Bytes of workspace (packed panels and the edge tile) that `gemm_*` needs for this problem. */
export function gemm_workspace(m: i32, n: i32, k: i32): i32 {
  const mc = min(m, MC);
  const kc = min(k, KC);
  const nc = min(n, NC);
  return (roundUp(mc, MR) * kc + kc * roundUp(nc, NR) + MR * NR) * 4;
}

/** Packs B[0:kc, 0:nc] (strides sbk, sbn) into NR-column panels, k-major, zero-padded. */
@inline function packB<T>(pb: usize, b: usize, kc: i32, nc: i32, sbk: i32, sbn: i32): void {
  let out = pb;
  for (let j0 = 0; j0 < nc; j0 += NR) {
    const cols = min(NR, nc - j0);
    if (cols == NR && sbn == 1) {
      // Rows of B are contiguous: two vector loads per k.
      let src = b + (<usize>j0 << 2);
      for (let kk = 0; kk < kc; kk++) {
        v128.store(out, v128.load(src));
        v128.store(out, v128.load(src, 16), 16);
        src += <usize>sbk << 2;
        out += 32;
      }
    } else {
      for (let kk = 0; kk < kc; kk++) {
        const row = b + (<usize>kk * <usize>sbk << 2);
        for (let j = 0; j < NR; j++) {
          store<T>(out, j < cols ? load<T>(row + (<usize>(j0 + j) * <usize>sbn << 2)) : <T>0);
          out += 4;
        }
      }
    }
  }
}

/** Packs A[0:mc, 0:kc] (strides sam, sak) into MR-row panels, k-major, zero-padded. */
@inline function packA<T>(pa: usize, a: usize, mc: i32, kc: i32, sam: i32, sak: i32): void {
  let out = pa;
  for (let i0 = 0; i0 < mc; i0 += MR) {
    const rows = min(MR, mc - i0);
    let kk = 0;
    if (rows == MR && sak == 1) {
      // Rows of A are contiguous: load 4 x 4 blocks and transpose them in registers.
      const r0 = a + (<usize>i0 * <usize>sam << 2);
      const r1 = r0 + (<usize>sam << 2);
      const r2 = r1 + (<usize>sam << 2);
      const r3 = r2 + (<usize>sam << 2);
      for (; kk + 4 <= kc; kk += 4) {
        const at = <usize>kk << 2;
        const x0 = v128.load(r0 + at);
        const x1 = v128.load(r1 + at);
        const x2 = v128.load(r2 + at);
        const x3 = v128.load(r3 + at);
        const t0 = v128.shuffle<i32>(x0, x1, 0, 4, 1, 5);
        const t1 = v128.shuffle<i32>(x0, x1, 2, 6, 3, 7);
        const t2 = v128.shuffle<i32>(x2, x3, 0, 4, 1, 5);
        const t3 = v128.shuffle<i32>(x2, x3, 2, 6, 3, 7);
        v128.store(out, v128.shuffle<i32>(t0, t2, 0, 1, 4, 5));
        v128.store(out, v128.shuffle<i32>(t0, t2, 2, 3, 6, 7), 16);
        v128.store(out, v128.shuffle<i32>(t1, t3, 0, 1, 4, 5), 32);
        v128.store(out, v128.shuffle<i32>(t1, t3, 2, 3, 6, 7), 48);
        out += 64;
      }
    }
    for (; kk < kc; kk++) {
      const column = a + (<usize>kk * <usize>sak << 2);
      for (let i = 0; i < MR; i++) {
        store<T>(out, i < rows ? load<T>(column + (<usize>(i0 + i) * <usize>sam << 2)) : <T>0);
        out += 4;
      }
    }
  }
}

/**
 * c + a * b: one fused multiply-add per lane where the engine has relaxed SIMD (this file is also
 * built alone with it on: scripts/build.ts), else a product and a sum, each rounded.
 */
@inline function vfma<T>(a: v128, b: v128, c: v128): v128 {
  if (!isFloat<T>()) return i32x4.add(c, i32x4.mul(a, b));
  if (ASC_FEATURE_RELAXED_SIMD) return f32x4.relaxed_madd(a, b, c);
  return f32x4.add(c, f32x4.mul(a, b));
}

@inline function vadd<T>(x: v128, y: v128): v128 {
  return isFloat<T>() ? f32x4.add(x, y) : i32x4.add(x, y);
}

/**
 * C[0:rows, 0:cols] (row stride ldc) = (accumulate ? C : 0) + packed A panel x packed B panel.
 * Full tiles go straight to C; edge tiles through `edge` (MR x NR).
 */
@inline function microKernel<T>(
  pa: usize, pb: usize, c: usize, ldc: i32, kc: i32, accumulate: bool, rows: i32, cols: i32,
  edge: usize,
): void {
  let c00 = i32x4.splat(0), c01 = i32x4.splat(0);
  let c10 = i32x4.splat(0), c11 = i32x4.splat(0);
  let c20 = i32x4.splat(0), c21 = i32x4.splat(0);
  let c30 = i32x4.splat(0), c31 = i32x4.splat(0);
  let ap = pa;
  let bp = pb;
  // Two k steps per iteration (the odd one first, keeping the order of the sum): in Deno, V8
  // compiles an explicit bounds check for every load (and, for a shared memory, reloads its size
  // each iteration), so the loop is bound by its instruction count and halving the loop overhead
  // gains about 10% (1024^3: 48 -> 44 ms on one core).
  if (kc & 1) {
    const b0 = v128.load(bp);
    const b1 = v128.load(bp, 16);
    const a0 = v128.load32_splat(ap);
    const a1 = v128.load32_splat(ap, 4);
    const a2 = v128.load32_splat(ap, 8);
    const a3 = v128.load32_splat(ap, 12);
    c00 = vfma<T>(a0, b0, c00);
    c01 = vfma<T>(a0, b1, c01);
    c10 = vfma<T>(a1, b0, c10);
    c11 = vfma<T>(a1, b1, c11);
    c20 = vfma<T>(a2, b0, c20);
    c21 = vfma<T>(a2, b1, c21);
    c30 = vfma<T>(a3, b0, c30);
    c31 = vfma<T>(a3, b1, c31);
    ap += 16;
    bp += 32;
  }
  for (let kk = kc & 1; kk < kc; kk += 2) {
    let b0 = v128.load(bp);
    let b1 = v128.load(bp, 16);
    let a0 = v128.load32_splat(ap);
    let a1 = v128.load32_splat(ap, 4);
    let a2 = v128.load32_splat(ap, 8);
    let a3 = v128.load32_splat(ap, 12);
    c00 = vfma<T>(a0, b0, c00);
    c01 = vfma<T>(a0, b1, c01);
    c10 = vfma<T>(a1, b0, c10);
    c11 = vfma<T>(a1, b1, c11);
    c20 = vfma<T>(a2, b0, c20);
    c21 = vfma<T>(a2, b1, c21);
    c30 = vfma<T>(a3, b0, c30);
    c31 = vfma<T>(a3, b1, c31);
    b0 = v128.load(bp, 32);
    b1 = v128.load(bp, 48);
    a0 = v128.load32_splat(ap, 16);
    a1 = v128.load32_splat(ap, 20);
    a2 = v128.load32_splat(ap, 24);
    a3 = v128.load32_splat(ap, 28);
    c00 = vfma<T>(a0, b0, c00);
    c01 = vfma<T>(a0, b1, c01);
    c10 = vfma<T>(a1, b0, c10);
    c11 = vfma<T>(a1, b1, c11);
    c20 = vfma<T>(a2, b0, c20);
    c21 = vfma<T>(a2, b1, c21);
    c30 = vfma<T>(a3, b0, c30);
    c31 = vfma<T>(a3, b1, c31);
    ap += 32;
    bp += 64;
  }
  const full = rows == MR && cols == NR;
  const target = full ? c : edge;
  const stride: usize = full ? <usize>ldc << 2 : <usize>NR << 2;
  if (full && accumulate) {
    let row = c;
    c00 = vadd<T>(c00, v128.load(row)); c01 = vadd<T>(c01, v128.load(row, 16)); row += stride;
    c10 = vadd<T>(c10, v128.load(row)); c11 = vadd<T>(c11, v128.load(row, 16)); row += stride;
    c20 = vadd<T>(c20, v128.load(row)); c21 = vadd<T>(c21, v128.load(row, 16)); row += stride;
    c30 = vadd<T>(c30, v128.load(row)); c31 = vadd<T>(c31, v128.load(row, 16));
  }
  let row = target;
  v128.store(row, c00); v128.store(row, c01, 16); row += stride;
  v128.store(row, c10); v128.store(row, c11, 16); row += stride;
  v128.store(row, c20); v128.store(row, c21, 16); row += stride;
  v128.store(row, c30); v128.store(row, c31, 16);
  if (full) return;
  for (let i = 0; i < rows; i++) {
    for (let j = 0; j < cols; j++) {
      const at = c + ((<usize>i * <usize>ldc + <usize>j) << 2);
      const v = load<T>(edge + ((<usize>(i * NR + j)) << 2));
      store<T>(at, accumulate ? load<T>(at) + v : v);
    }
  }
}

@inline function gemm<T>(
  c: usize, a: usize, b: usize, m: i32, n: i32, k: i32,
  sam: i32, sak: i32, sbk: i32, sbn: i32, ldc: i32, workspace: usize,
): void {
  if (k == 0) {
    for (let i = 0; i < m; i++) memory.fill(c + (<usize>i * <usize>ldc << 2), 0, <usize>n << 2);
    return;
  }
  const mcMax = min(m, MC);
  const kcMax = min(k, KC);
  const pa = workspace;
  const pb = pa + (<usize>roundUp(mcMax, MR) * <usize>kcMax << 2);
  const edge = pb + (<usize>kcMax * <usize>roundUp(min(n, NC), NR) << 2);
  for (let jc = 0; jc < n; jc += NC) {
    const nc = min(NC, n - jc);
    for (let pc = 0; pc < k; pc += KC) {
      const kc = min(KC, k - pc);
      packB<T>(pb, b + ((<usize>pc * <usize>sbk + <usize>jc * <usize>sbn) << 2), kc, nc, sbk, sbn);
      for (let ic = 0; ic < m; ic += MC) {
        const mc = min(MC, m - ic);
        packA<T>(pa, a + ((<usize>ic * <usize>sam + <usize>pc * <usize>sak) << 2), mc, kc, sam, sak);
        for (let jr = 0; jr < nc; jr += NR) {
          const panelB = pb + (<usize>jr * <usize>kc << 2);
          for (let ir = 0; ir < mc; ir += MR) {
            microKernel<T>(
              pa + (<usize>ir * <usize>kc << 2),
              panelB,
              c + ((<usize>(ic + ir) * <usize>ldc + <usize>(jc + jr)) << 2),
              ldc,
              kc,
              pc > 0,
              min(MR, mc - ir),
              min(NR, nc - jr),
              edge,
            );
          }
        }
      }
    }
  }
}

/**
 * C[m, n] = A[m, k] @ B[k, n] in f32. A's element (i, p) is at a + 4 * (i * sam + p * sak), B's
 * (p, j) at b + 4 * (p * sbk + j * sbn); strides are non-negative. C's element (i, j) is at
 * c + 4 * (i * ldc + j). `workspace` holds `gemm_workspace(m, n, k)` bytes. Uses no other memory
 * (no descriptor area), so threads may run it at once on disjoint blocks of C.
 */
export function gemm_f32(
  c: usize, a: usize, b: usize, m: i32, n: i32, k: i32,
  sam: i32, sak: i32, sbk: i32, sbn: i32, ldc: i32, workspace: usize,
): void {
  gemm<f32>(c, a, b, m, n, k, sam, sak, sbk, sbn, ldc, workspace);
}

/** As gemm_f32, in i32 with wrapping products and sums. */
export function gemm_i32(
  c: usize, a: usize, b: usize, m: i32, n: i32, k: i32,
  sam: i32, sak: i32, sbk: i32, sbn: i32, ldc: i32, workspace: usize,
): void {
  gemm<i32>(c, a, b, m, n, k, sam, sak, sbk, sbn, ldc, workspace);
}
