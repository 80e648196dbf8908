/**
 * The elementwise family on WASM. An expression is compiled into a tile program (the instruction
 * set is src/wasm/tile_ops.ts; the interpreter `ew_run` is generated into asm/_generated.ts):
 * each node runs one SIMD kernel over a tile of about a thousand elements, so a fused chain reads
 * its inputs and writes its result once while its intermediates stay in the L1 cache, and large
 * jobs share their tiles among the worker threads. The node-by-node form (whole arrays, one
 * precompiled kernel per node) remains as the reference the tile programs are tested against,
 * and writes through a target's strides (the scatter kernel).
 * @module
 */
import { isContiguous, sizeOf } from "../core/shape.ts";
import type { Storage } from "../core/view.ts";
import type { DType } from "../core/dtype.ts";
import type { ElementwiseJob } from "../contract/elementwise.ts";
import { children, type Expr, postOrder } from "../ir/expr.ts";
import { opDef } from "../ir/elementwise_table.ts";
import { planWasmElementwise } from "../plans/elementwise.ts";
import { COMPUTE, SUFFIX, type WasmHost, type WasmStorage } from "./host.ts";
import { runShares, wasmThreads } from "./threads.ts";
import {
  COMMUTATIVE,
  TILE_HEADER_WORDS,
  TILE_INSTRUCTION_WORDS,
  TILE_OPCODE,
  TILE_OPS,
  TILE_SCRATCH,
  TILE_STREAM,
} from "./tile_ops.ts";

/** Evaluates an elementwise job (see `Backend.evaluate`). */
export function runElementwiseWasm(wasm: WasmHost, job: ElementwiseJob): Storage {
  const { op, expr, inputs, shape, out: target } = job;
  const n = sizeOf(shape);
  const choice = planWasmElementwise(job.overrides.wasmElementwise);
  const swap = !target && choice.form === "tiles" ? swappedCopy(job) : null;
  if (swap) {
    const out = wasm.alloc(op, expr.dtype, n);
    runTransposeCopy(wasm, job, out, swap);
    return out;
  }
  if (!target && choice.form === "tiles") {
    const out = wasm.alloc(op, expr.dtype, n);
    if (n > 0) runTiles(wasm, job, out, choice.tile, wasmThreads(wasm, n, job.overrides));
    return out;
  }
  let v = wasm.evaluateNodes(op, expr, inputs, shape);
  if (target) {
    if (v.view.dtype !== target.dtype) v = wasm.cast(op, v, target.dtype, shape);
    if (n > 0) {
      const contiguous = wasm.describeOperands(shape, [v.view, target]);
      wasm.kernel(`scatter_${SUFFIX[target.dtype]}`)(
        wasm.pointer(target),
        wasm.pointer(v.view),
        0,
        contiguous,
      );
    }
    wasm.release(v);
    return target.storage;
  }
  if (!v.temp || !isContiguous(shape, v.view.strides) || v.view.dtype !== expr.dtype) {
    v = wasm.cast(op, v, expr.dtype, shape);
  }
  return v.view.storage;
}

/** Compute types whose storage is the tile word itself, read and written in place. */
const STREAMED: ReadonlySet<DType> = new Set(["float32", "int32", "uint32"]);

/** A tile program under construction: registers, then the prologue and body instructions. */
class TileProgram {
  readonly kinds: number[] = [];
  readonly bases: number[] = [];
  readonly prologue: number[][] = [];
  readonly body: number[][] = [];
  /** Descriptors of gathered inputs: [rank, shape, strides], placed after the program. */
  readonly descriptors: number[][] = [];
  #free: number[] = [];

  scratch(): number {
    const reused = this.#free.pop();
    if (reused !== undefined) return reused;
    this.kinds.push(TILE_SCRATCH);
    this.bases.push(0);
    return this.kinds.length - 1;
  }
  /** A fresh register the prologue fills once: the body never writes it. */
  constant(): number {
    this.kinds.push(TILE_SCRATCH);
    this.bases.push(0);
    this.pinned.add(this.kinds.length - 1);
    return this.kinds.length - 1;
  }
  stream(address: number): number {
    this.kinds.push(TILE_STREAM);
    this.bases.push(address);
    return this.kinds.length - 1;
  }
  /** Registers filled once by the prologue: never reused for body values. */
  readonly pinned = new Set<number>();
  release(register: number): void {
    if (this.kinds[register] === TILE_SCRATCH && !this.pinned.has(register)) {
      this.#free.push(register);
    }
  }
  emit(list: number[][], name: string, ...operands: number[]): void {
    const code = TILE_OPCODE.get(name);
    if (code === undefined) throw new Error(`internal: no tile instruction ${name}`);
    if (operands.length !== TILE_OPS[code].operands.length) {
      throw new Error(`internal: tile instruction ${name} takes ${TILE_OPS[code].operands.length}`);
    }
    list.push([code, ...operands]);
  }
  /** The program's words for placement at `base`: descriptor operands (-1 - k) become addresses. */
  /** Words of the program with its descriptors (what `words` returns the length of). */
  length(): number {
    const instructions = this.prologue.length + this.body.length;
    const head = TILE_HEADER_WORDS + 2 * this.kinds.length;
    return head + TILE_INSTRUCTION_WORDS * instructions +
      this.descriptors.reduce((s, d) => s + d.length, 0);
  }
  words(tile: number, base: number): Int32Array {
    const instructions = [...this.prologue, ...this.body];
    const head = TILE_HEADER_WORDS + 2 * this.kinds.length;
    const size = head + TILE_INSTRUCTION_WORDS * instructions.length;
    const words = new Int32Array(this.length());
    words.set([tile, this.kinds.length, this.prologue.length, this.body.length]);
    this.kinds.forEach((kind, r) => {
      words[TILE_HEADER_WORDS + 2 * r] = kind;
      words[TILE_HEADER_WORDS + 2 * r + 1] = this.bases[r];
    });
    // Descriptor operands hold -1 - k until placed.
    let at = size;
    const addresses = this.descriptors.map((d) => {
      const address = base + 4 * at;
      words.set(d, at);
      at += d.length;
      return address;
    });
    instructions.forEach((ins, i) => {
      const w = head + TILE_INSTRUCTION_WORDS * i;
      ins.forEach((v, k) => (words[w + k] = k === 3 && v < 0 ? addresses[-1 - v] : v));
    });
    return words;
  }
}

/** The tile word of a constant of `dtype` (its bits as an i32). */
function constantWord(value: number, dtype: DType): number {
  switch (dtype) {
    case "float32":
    case "float16":
      return new Int32Array(new Float32Array([value]).buffer)[0];
    case "int32":
      return value | 0;
    case "uint32":
      return (value >>> 0) | 0;
    case "bool":
      return value ? 1 : 0;
  }
}

/**
 * Compiles `job`'s expression into a tile program writing `out`, and runs it: on `threads`
 * threads (those ready) when the memory is shared, each over its own range of whole tiles with
 * its own scratch.
 */
function runTiles(
  wasm: WasmHost,
  job: ElementwiseJob,
  out: WasmStorage,
  tile: number,
  threads: number,
): void {
  const { op, expr, inputs, shape } = job;
  const n = sizeOf(shape);
  const program = new TileProgram();
  const ct = (dtype: DType) => SUFFIX[COMPUTE[dtype]];
  const order = postOrder(expr);
  // A cast that changes nothing on this device (float32 to float32 words) stands for its operand.
  const noop = (e: Expr) =>
    e.kind === "cast" && ct(e.x.dtype) === ct(e.dtype) && e.dtype !== "float16";
  const canonical = new Map<Expr, Expr>();
  const uses = new Map<Expr, number>();
  for (const e of order) {
    canonical.set(e, noop(e) ? canonical.get(children(e)[0])! : e);
    if (noop(e)) continue;
    for (const c of children(e)) {
      const k = canonical.get(c)!;
      uses.set(k, (uses.get(k) ?? 0) + 1);
    }
  }
  const registers = new Map<Expr, number>();
  const outputStreamed = STREAMED.has(out.dtype) || out.dtype === "bool";
  const outputRegister = outputStreamed ? program.stream(out.ptr) : -1;
  // Rounds or converts register `r` in place from compute type `from` to node dtype `to`.
  const settle = (r: number, from: string, to: DType) => {
    if (from !== ct(to)) program.emit(program.body, `cast_${from}_${ct(to)}`, r, r);
    if (to === "float16") program.emit(program.body, "round_f16", r, r);
  };
  for (const e of order) {
    const root = canonical.get(expr) === e;
    if (noop(e)) continue;
    const operands = children(e).map((c) => canonical.get(c)!);
    const argument = operands.map((c) => registers.get(c)!);
    // Operands whose last use this is free their registers first, so the result may reuse one
    // (each kernel reads an element before writing it).
    for (const c of operands) {
      const left = uses.get(c)! - 1;
      uses.set(c, left);
      if (left === 0) program.release(registers.get(c)!);
    }
    const destination = () => (root && outputStreamed ? outputRegister : program.scratch());
    let r: number;
    switch (e.kind) {
      case "input": {
        const view = inputs[e.index];
        if (STREAMED.has(view.dtype) && isContiguous(shape, view.strides)) {
          r = program.stream(wasm.pointer(view));
        } else {
          const scalar = view.strides.every((s) => s === 0);
          r = scalar ? program.constant() : program.scratch();
          program.descriptors.push([shape.length, ...shape, ...view.strides]);
          program.emit(
            scalar ? program.prologue : program.body,
            `gather_${SUFFIX[view.dtype]}`,
            r,
            wasm.pointer(view),
            -program.descriptors.length,
          );
        }
        break;
      }
      case "view":
      case "producer":
        throw new Error("internal: a pending expression reached the WASM backend unbound");
      case "const":
        r = program.constant();
        program.emit(program.prologue, "splat", r, constantWord(e.value, e.dtype));
        break;
      case "index":
        r = program.scratch();
        program.emit(program.body, "iota", r);
        break;
      case "cast": {
        const from = ct(e.x.dtype);
        r = destination();
        program.emit(program.body, `cast_${from}_${ct(e.dtype)}`, r, argument[0]);
        if (e.dtype === "float16") program.emit(program.body, "round_f16", r, r);
        break;
      }
      case "unary":
      case "binary":
      case "where": {
        const typed = ct(children(e)[operands.length - 1].dtype);
        const name = e.kind === "where" ? `where_${typed}` : `${e.kind}_${e.op}_${typed}`;
        const result = e.kind !== "where" && opDef(e.op).result === "bool" ? "bool" : typed;
        r = destination();
        let [kernel, ordered] = [name, argument];
        // A constant operand (filled once by the prologue) is read once per tile.
        if (e.kind === "binary") {
          const [a, b] = argument;
          if (program.pinned.has(b) && !program.pinned.has(a)) kernel = `${name}_rs`;
          else if (program.pinned.has(a) && !program.pinned.has(b) && COMMUTATIVE.has(e.op)) {
            [kernel, ordered] = [`${name}_rs`, [b, a]];
          }
        }
        program.emit(program.body, kernel, r, ...ordered);
        settle(r, result, e.dtype);
        break;
      }
    }
    registers.set(e, r);
  }
  const rootRegister = registers.get(canonical.get(expr)!)!;
  if (out.dtype === "float16") {
    program.emit(program.body, "store_f16", out.ptr, rootRegister);
  } else if (rootRegister !== outputRegister) {
    // A leaf or a no-op cast at the root: copy it out.
    program.emit(
      program.body,
      `cast_${ct(out.dtype)}_${ct(out.dtype)}`,
      outputRegister,
      rootRegister,
    );
  }
  runProgram(wasm, op, program, n, tile, threads);
}

function runProgram(
  wasm: WasmHost,
  op: string,
  program: TileProgram,
  n: number,
  tile: number,
  threads: number,
): void {
  const tiles = Math.ceil(n / tile);
  const count = Math.min(threads, tiles);
  const scratchTiles = program.kinds.filter((k) => k === TILE_SCRATCH).length;
  const scratchBytes = 16 * Math.ceil((4 * program.kinds.length + 15) / 16) +
    4 * tile * scratchTiles + 16;
  const code = wasm.alloc(op, "int32", program.length());
  const scratch = wasm.alloc(op, "int32", Math.ceil((count * scratchBytes) / 4) + 4);
  try {
    const words = program.words(tile, code.ptr);
    new Int32Array(wasm.allocator.memory.buffer, code.ptr, words.length).set(words);
    const kernel = wasm.kernel("ew_run");
    const base = (scratch.ptr + 15) & ~15;
    const shares: number[][] = [];
    for (let t = 0; t < count; t++) {
      const start = Math.round((tiles * t) / count) * tile;
      const end = Math.min(n, Math.round((tiles * (t + 1)) / count) * tile);
      shares.push([code.ptr, start, end, base + t * scratchBytes]);
    }
    if (count === 1) kernel(...shares[0]);
    else runShares(wasm.allocator.memory, "ew_run", kernel, 4, shares);
  } finally {
    wasm.free(code);
    wasm.free(scratch);
  }
}

/** A plain copy of 4-byte elements as `batch` transposes of `rows` x `cols` matrices. */
interface SwappedCopy {
  batch: number;
  /** Rows of each source matrix (the output's last axis). */
  rows: number;
  /** Columns of each source matrix (the output's second last axis), contiguous in memory. */
  cols: number;
  /** The source's row stride, in elements. */
  lda: number;
  /** The source's stride between matrices, in elements. */
  batchStride: number;
}

/**
 * Whether `job` is a plain copy (the expression is its input) of 4-byte elements whose last two
 * axes are swapped in memory (the second last contiguous, the last strided), with the axes before
 * them collapsing into one stride: then a blocked transpose (asm/transpose.ts) copies it instead
 * of a gather that reads a cache line per element.
 */
function swappedCopy(job: ElementwiseJob): SwappedCopy | null {
  const { expr, inputs, shape } = job;
  if (expr.kind !== "input" || shape.length < 2) return null;
  const view = inputs[expr.index];
  if (view.dtype !== expr.dtype || view.dtype === "float16") return null;
  const r = shape.length;
  const [cols, rows] = [shape[r - 2], shape[r - 1]];
  const [unit, lda] = [view.strides[r - 2], view.strides[r - 1]];
  if (unit !== 1 || lda <= 1 || rows < 16 || cols < 16) return null;
  // The batch axes must walk memory with one stride.
  let batch = 1;
  let batchStride = 0;
  for (let d = r - 3; d >= 0; d--) {
    if (shape[d] === 1) continue;
    if (batch === 1) batchStride = view.strides[d];
    else if (view.strides[d] !== batchStride * batch) return null;
    batch *= shape[d];
  }
  return { batch, rows, cols, lda, batchStride };
}

function runTransposeCopy(
  wasm: WasmHost,
  job: ElementwiseJob,
  out: WasmStorage,
  s: SwappedCopy,
): void {
  const threads = Math.min(wasmThreads(wasm, s.batch * s.rows * s.cols, job.overrides), s.cols);
  const kernel = wasm.kernel("transpose_copy_32");
  const x = wasm.pointer(job.inputs[(job.expr as { index: number }).index]);
  // Threads take ranges of the output's rows (the source's columns), in whole 32-column blocks.
  const blocks = Math.ceil(s.cols / 32);
  const shares = Array.from({ length: threads }, (_, t) => {
    const c0 = Math.min(s.cols, 32 * Math.floor((blocks * t) / threads));
    const c1 = Math.min(s.cols, 32 * Math.floor((blocks * (t + 1)) / threads));
    return [out.ptr, x, s.batch, s.rows, s.cols, s.lda, s.batchStride, c0, c1];
  });
  if (threads === 1) kernel(...shares[0]);
  else runShares(wasm.allocator.memory, "transpose_copy_32", kernel, 9, shares);
}
