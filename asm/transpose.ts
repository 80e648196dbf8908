// The transposing copy on WASM: the CPU counterpart of src/gpu/_codegen_transpose.ts, for plain
// copies of 4-byte elements whose last two axes are swapped (x.transpose().clone(), a
// contiguous copy of x.T). Reading a column element by element touches a cache line per element;
// here 32 x 32 blocks are copied as 4 x 4 sub-blocks transposed in registers, so every line read
// or written is used whole while it is in L1.

// @ts-nocheck: AssemblyScript, compiled by asc, not by Deno.

const BLOCK: i32 = 32;

/**
 * For each of `batch` matrices A (`rows` x `cols`, row stride `lda` elements, column stride 1,
 * matrix b at x + 4 * b * batchStride), writes rows [c0, c1) of B = A^T (`cols` x `rows`,
 * contiguous, matrix b at out + 4 * b * rows * cols). Threads pass disjoint [c0, c1).
 */
export function transpose_copy_32(
  out: usize, x: usize, batch: i32, rows: i32, cols: i32, lda: i32, batchStride: i32,
  c0: i32, c1: i32,
): void {
  for (let b = 0; b < batch; b++) {
    const a = x + (<usize>b * <usize>batchStride << 2);
    const o = out + (<usize>b * <usize>rows * <usize>cols << 2);
    for (let j0 = c0; j0 < c1; j0 += BLOCK) {
      const j1 = min(j0 + BLOCK, c1);
      for (let i0 = 0; i0 < rows; i0 += BLOCK) {
        const i1 = min(i0 + BLOCK, rows);
        let j = j0;
        for (; j + 4 <= j1; j += 4) {
          let i = i0;
          for (; i + 4 <= i1; i += 4) {
            const p = a + ((<usize>i * <usize>lda + <usize>j) << 2);
            const x0 = v128.load(p);
            const x1 = v128.load(p + (<usize>lda << 2));
            const x2 = v128.load(p + (<usize>lda << 3));
            const x3 = v128.load(p + (<usize>lda * 12));
            const t0 = v128.shuffle<i32>(x0, x1, 0, 4, 1, 5);
            const t1 = v128.shuffle<i32>(x0, x1, 2, 6, 3, 7);
            const t2 = v128.shuffle<i32>(x2, x3, 0, 4, 1, 5);
            const t3 = v128.shuffle<i32>(x2, x3, 2, 6, 3, 7);
            const q = o + ((<usize>j * <usize>rows + <usize>i) << 2);
            v128.store(q, v128.shuffle<i32>(t0, t2, 0, 1, 4, 5));
            v128.store(q + (<usize>rows << 2), v128.shuffle<i32>(t0, t2, 2, 3, 6, 7));
            v128.store(q + (<usize>rows << 3), v128.shuffle<i32>(t1, t3, 0, 1, 4, 5));
            v128.store(q + (<usize>rows * 12), v128.shuffle<i32>(t1, t3, 2, 3, 6, 7));
          }
          for (; i < i1; i++) {
            for (let jj = j; jj < j + 4; jj++) {
              store<u32>(o + ((<usize>jj * <usize>rows + <usize>i) << 2), load<u32>(a + ((<usize>i * <usize>lda + <usize>jj) << 2)));
            }
          }
        }
        for (; j < j1; j++) {
          for (let i = i0; i < i1; i++) {
            store<u32>(o + ((<usize>j * <usize>rows + <usize>i) << 2), load<u32>(a + ((<usize>i * <usize>lda + <usize>j) << 2)));
          }
        }
      }
    }
  }
}
