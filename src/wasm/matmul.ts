/**
 * The matmul family on WASM: the packed SIMD GEMM of asm/matmul.ts, shared between threads
 * (threads.ts) as `planWasmGemm` chooses. Operands are read through their strides (transposed
 * and broadcast views cost no copy); float16 is widened to float32 first.
 * @module
 */
import type { View } from "../core/view.ts";
import { contiguousStrides, sizeOf } from "../core/shape.ts";
import type { DType } from "../core/dtype.ts";
import type { MatmulJob, MatmulProblem, MatmulResult } from "../contract/matmul.ts";
import { planWasmGemm } from "../plans/mod.ts";
import { tunedOverride } from "../heuristics/consensus.ts";
import { wasmGemmTuneKey } from "../heuristics/families.ts";
import type { Value, WasmHost, WasmStorage } from "./host.ts";
import { runShares, startWasmThreads, wasmThreadCapacity, wasmThreadCount } from "./threads.ts";

/** The operands of a job: A and B. */
type Operands = Pick<MatmulJob, "a" | "b" | "overrides">;

/**
 * Runs a matmul job on WASM; the result has the compute dtype (float32 for float16). Prologues
 * and epilogues are GPU only: the caller applies bias and activation to the result.
 */
export function runMatmulWasm(backend: WasmHost, job: MatmulJob): MatmulResult {
  if (job.aPrologue || job.bPrologue || job.bias || job.activation || job.epilogue) {
    throw new Error(`${job.op}: internal error: a WASM product with a prologue or epilogue`);
  }
  const p = job.problem;
  const output = runWasm(job.op, backend, p, job);
  return { output, dtype: p.dtype === "int32" ? "int32" : "float32" };
}

/** Arguments of one call of gemm_f32/gemm_i32: c, a, b, m, n, k, sam, sak, sbk, sbn, ldc, workspace. */
const GEMM_ARGS = 12;
/** asm/matmul.ts's micro-tile (MR rows by NR columns): thread boundaries fall on whole tiles. */
const GEMM_TILE_ROWS = 4;
const GEMM_TILE_COLUMNS = 8;

/**
 * Where thread t's range of C starts, out of `threads` equal ranges of the batch's rows (or
 * columns) laid end to end (`count` matrices of `extent` each): rounded to a whole tile within its
 * matrix, so that only matrix edges make partial tiles. Non-decreasing in t; `threads` gives the
 * end.
 */
function splitPoint(t: number, threads: number, count: number, extent: number, tile: number) {
  const target = Math.round((count * extent * t) / threads);
  const matrix = Math.floor(target / extent);
  const within = Math.min(extent, Math.round((target - matrix * extent) / tile) * tile);
  return matrix * extent + within;
}

/**
 * Runs a validated, non-empty product with K > 0 on WASM; returns [...batch, M, N] storage of the
 * compute dtype (float32 for float16). `planWasmGemm` decides how many threads share it: each
 * thread gets a range of C's rows (or columns) over the whole batch, as GEMM calls on its own
 * workspace; each element is computed exactly as a single thread would (asm/matmul.ts).
 */
function runWasm(op: string, backend: WasmHost, p: MatmulProblem, x: Operands): WasmStorage {
  const { m, n, k } = p;
  const compute: DType = p.dtype === "int32" ? "int32" : "float32";
  const r = p.batch.length;
  const count = sizeOf(p.batch);
  const cores = backend.shared ? wasmThreadCapacity() : 1;
  const choice = planWasmGemm(
    { m, n, k, batch: count, cores },
    // Float32 products are the tuned family's (what the tuner measured).
    compute === "float32"
      ? tunedOverride(
        "wasmGemm",
        undefined,
        wasmGemmTuneKey(count * m, n, k, cores),
        x.overrides.wasmGemm,
      )
      : x.overrides.wasmGemm,
  );
  let threads = 1;
  if (choice.threads > 1 && backend.shared) {
    // Started on the first large product; this one runs on the threads that are ready now.
    void startWasmThreads();
    threads = Math.min(choice.threads, wasmThreadCount());
  }
  const rows = choice.split === "rows";
  const extent = rows ? m : n;
  const tile = rows ? GEMM_TILE_ROWS : GEMM_TILE_COLUMNS;
  // No thread without at least a tile's worth of rows (or columns).
  threads = Math.max(1, Math.min(threads, Math.ceil((count * extent) / tile)));
  // float16 is widened to float32 first (a contiguous copy; the product is O(K) times larger).
  const widen = (v: View): Value =>
    v.dtype === "float16"
      ? backend.cast(op, { view: v, temp: false }, "float32", v.shape)
      : { view: v, temp: false };
  const a = widen(x.a);
  const b = widen(x.b);
  const out = backend.alloc(op, compute, count * m * n);
  const workspaceBytes =
    (backend.kernel("gemm_workspace") as unknown as (...args: number[]) => number)(m, n, k);
  const workspaces: WasmStorage[] = [];
  try {
    for (let t = 0; t < threads; t++) {
      workspaces.push(backend.alloc(op, "float32", Math.ceil(workspaceBytes / 4)));
    }
    const name = compute === "int32" ? "gemm_i32" : "gemm_f32";
    const kernel = backend.kernel(name);
    const aPtr = backend.pointer(a.view);
    const bPtr = backend.pointer(b.view);
    const aStrides = broadcastStrides(a.view, x.a);
    const bStrides = broadcastStrides(b.view, x.b);
    const [sam, sak, sbk, sbn] = [aStrides[r], aStrides[r + 1], bStrides[r], bStrides[r + 1]];
    // Each batch matrix's operand addresses (broadcast batch axes have stride 0).
    const aBase: number[] = [];
    const bBase: number[] = [];
    const index = new Array<number>(r).fill(0);
    for (let i = 0; i < count; i++) {
      let aOff = 0, bOff = 0;
      for (let d = 0; d < r; d++) {
        aOff += index[d] * aStrides[d];
        bOff += index[d] * bStrides[d];
      }
      aBase.push(aPtr + aOff * 4);
      bBase.push(bPtr + bOff * 4);
      for (let d = r - 1; d >= 0; d--) {
        if (++index[d] < p.batch[d]) break;
        index[d] = 0;
      }
    }
    const shares: number[][] = [];
    for (let t = 0; t < threads; t++) {
      const start = splitPoint(t, threads, count, extent, tile);
      const end = splitPoint(t + 1, threads, count, extent, tile);
      const calls: number[] = [];
      for (let i = Math.floor(start / extent); i * extent < end; i++) {
        const lo = Math.max(start, i * extent) - i * extent;
        const hi = Math.min(end, (i + 1) * extent) - i * extent;
        if (hi <= lo) continue;
        const c = out.ptr + i * m * n * 4;
        calls.push(
          ...(rows
            ? [c + lo * n * 4, aBase[i] + lo * sam * 4, bBase[i], hi - lo, n]
            : [c + lo * 4, aBase[i], bBase[i] + lo * sbn * 4, m, hi - lo]),
          k,
          sam,
          sak,
          sbk,
          sbn,
          n,
          workspaces[t].ptr,
        );
      }
      shares.push(calls);
    }
    if (threads === 1) {
      const calls = shares[0];
      for (let i = 0; i < calls.length; i += GEMM_ARGS) kernel(...calls.slice(i, i + GEMM_ARGS));
    } else runShares(backend.allocator.memory, name, kernel, GEMM_ARGS, shares);
  } catch (e) {
    backend.free(out);
    throw e;
  } finally {
    for (const w of workspaces) backend.free(w);
    backend.release(a);
    backend.release(b);
  }
  return out;
}

/** Strides of a (possibly widened, hence contiguous) operand, keeping the broadcast zeros. */
function broadcastStrides(v: View, original: View): number[] {
  if (v === original) return [...v.strides];
  // A widened copy is contiguous over the original (broadcast) shape: recompute its strides,
  // and keep stride 0 where the original broadcast or had length 1.
  const strides = contiguousStrides(v.shape);
  return strides.map((s, i) => (original.strides[i] === 0 ? 0 : s));
}
