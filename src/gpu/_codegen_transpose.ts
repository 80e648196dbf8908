/**
 * Generates a WGSL kernel that copies a batch of strided matrices into contiguous transposed
 * storage: element (b, r, c), read at `offset + b * batchStride + r * rowStride + c * columnStride`,
 * lands at `(b * columns + c) * rows + r`. A workgroup of 32 x 8 invocations moves one tile of
 * `tileRows` x `tileColumns` elements through workgroup memory, so both the reads (along the
 * source's rows) and the writes (along its columns) are coalesced, where a plain strided gather
 * reads one element per memory sector. Every invocation loads all its elements before it stores
 * any, so many loads are in flight.
 *
 * Two-byte elements in even-sized, even-aligned matrices read along the source's rows (`paired`)
 * move as 32-bit words holding two neighbours each, kept whole in workgroup memory: an output word
 * takes one half from each of two source words.
 *
 * Used where a kernel reads the transposed order faster than the strided one: float16 matmul with
 * A copied into [K, M] order first (`MatmulChoice.transposeAFirst`, src/plans.ts).
 * @module
 */

import { storageType } from "./_wgsl_types.ts";
import type { TransposeSpec, TransposeUniforms } from "../plans/elementwise.ts";

/** Invocations per workgroup (32 columns by 8 rows). */
export const TRANSPOSE_THREADS = 256;

/**
 * Workgroup memory a spec's tile takes (a padding word or element per row).
 *
 * @example
 * ```ts
 * transposeSharedBytes({ dtype: "float32", paired: false, tileRows: 64, tileColumns: 64 }); // 16640
 * ```
 */
export function transposeSharedBytes(s: TransposeSpec): number {
  return s.tileRows * ((s.paired ? s.tileColumns / 2 : s.tileColumns) + 1) * 4;
}

/** Cache key of a spec. */
export function transposeKey(s: TransposeSpec): string {
  return `transpose:${s.dtype}:${s.paired ? "paired" : "plain"}:${s.tileRows}x${s.tileColumns}`;
}

function tilesOf(s: TransposeSpec, u: TransposeUniforms): { rows: number; columns: number } {
  return { rows: Math.ceil(u.rows / s.tileRows), columns: Math.ceil(u.columns / s.tileColumns) };
}

/**
 * The uniform block of the copy (eight u32 words); the paired form takes offsets and strides in
 * words.
 *
 * @example
 * ```ts
 * import type { TransposeSpec } from "../plans/elementwise.ts";
 * const spec: TransposeSpec = { dtype: "float32", paired: false, tileRows: 64, tileColumns: 64 };
 * transposeUniforms(spec, {
 *   rows: 2, columns: 3, batches: 1, offset: 0, rowStride: 3, columnStride: 1, batchStride: 0,
 * }).length; // 8
 * ```
 */
export function transposeUniforms(s: TransposeSpec, u: TransposeUniforms): Uint32Array {
  const tiles = tilesOf(s, u);
  const unit = s.paired ? 2 : 1;
  return Uint32Array.from([
    u.rows,
    u.columns,
    u.offset / unit,
    u.rowStride / unit,
    u.columnStride,
    u.batchStride / unit,
    tiles.columns,
    tiles.rows * tiles.columns * u.batches,
  ]);
}

/** Workgroups the copy dispatches: one per tile. */
export function transposeGroups(s: TransposeSpec, u: TransposeUniforms): number {
  const tiles = tilesOf(s, u);
  return tiles.rows * tiles.columns * u.batches;
}

/**
 * WGSL of the transposing copy. The plain form holds float16 tiles as f32 (exact both ways), so
 * workgroup memory is addressed in whole words.
 *
 * @example
 * ```ts
 * generateTranspose({ dtype: "float16", paired: false, tileRows: 64, tileColumns: 64 })
 *   .includes("enable f16;"); // true
 * ```
 */
export function generateTranspose(s: TransposeSpec): string {
  const element = s.paired ? "u32" : storageType(s.dtype);
  const shared = s.paired ? "u32" : s.dtype === "float16" ? "f32" : element;
  const width = s.paired ? s.tileColumns / 2 : s.tileColumns;
  const body = s.paired ? pairedTile(s) : plainTile(s, shared, element);
  return [
    ...(s.dtype === "float16" && !s.paired ? ["enable f16;"] : []),
    "struct Params { rows: u32, columns: u32, offset: u32, row_stride: u32, column_stride: u32, " +
    "batch_stride: u32, tiles_columns: u32, tiles: u32 }",
    `@group(0) @binding(0) var<storage, read> src: array<${element}>;`,
    `@group(0) @binding(1) var<storage, read_write> dst: array<${element}>;`,
    "@group(0) @binding(2) var<uniform> p: Params;",
    // One padding column: reading the tile down its columns does not hit one bank.
    `var<workgroup> tile: array<array<${shared}, ${width + 1}>, ${s.tileRows}>;`,
    "@compute @workgroup_size(32, 8)",
    "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, " +
    "@builtin(local_invocation_id) lid: vec3<u32>) {",
    "  let t = wid.x + wid.y * nwg.x;",
    "  if (t >= p.tiles) { return; }",
    `  let tiles_rows = (p.rows + ${s.tileRows - 1}u) / ${s.tileRows}u;`,
    "  let per_batch = tiles_rows * p.tiles_columns;",
    "  let b = t / per_batch;",
    "  let within = t - b * per_batch;",
    `  let r0 = (within / p.tiles_columns) * ${s.tileRows}u;`,
    `  let c0 = (within % p.tiles_columns) * ${s.tileColumns}u;`,
    "  let base = p.offset + b * p.batch_stride;",
    // Out-of-range lanes read a valid element and discard it, so no load is conditional.
    "  let last = arrayLength(&src) - 1u;",
    "  let out_base = b * p.rows * p.columns;",
    ...body.load,
    ...body.keep,
    "  workgroupBarrier();",
    ...body.store,
    "}",
    "",
  ].join("\n");
}

/** The tile's loads (into registers), their writes to `tile`, and its stores. */
interface TileLines {
  load: string[];
  keep: string[];
  store: string[];
}

/**
 * Element by element: invocation (x, y) loads columns x, x + 32, ... of tile rows y, y + 8, ...,
 * and stores rows x, x + 32, ... of tile columns y, y + 8, ...
 */
function plainTile(s: TransposeSpec, shared: string, element: string): TileLines {
  const out: TileLines = { load: [], keep: [], store: [] };
  for (let i = 0; i < s.tileRows / 8; i++) {
    for (let h = 0; h < s.tileColumns / 32; h++) {
      const v = `v${i}_${h}`;
      const r = `${i * 8}u + lid.y`, c = `${h * 32}u + lid.x`;
      out.load.push(
        `  let ${v} = select(${shared}(), ${shared}(src[min(base + (r0 + ${r}) * p.row_stride + ` +
          `(c0 + ${c}) * p.column_stride, last)]), r0 + ${r} < p.rows && c0 + ${c} < p.columns);`,
      );
      out.keep.push(`  tile[${r}][${c}] = ${v};`);
    }
  }
  for (let i = 0; i < s.tileColumns / 8; i++) {
    for (let h = 0; h < s.tileRows / 32; h++) {
      const c = `${i * 8}u + lid.y`, r = `${h * 32}u + lid.x`;
      out.store.push(
        `  if (c0 + ${c} < p.columns && r0 + ${r} < p.rows) { ` +
          `dst[out_base + (c0 + ${c}) * p.rows + r0 + ${r}] = ${element}(tile[${r}][${c}]); }`,
      );
    }
  }
  return out;
}

/**
 * Words of two elements (low half first): invocation (x, y) loads words x, x + 32, ... of tile
 * rows y, y + 8, ..., and stores words x, x + 32, ... (tile rows 2x and 2x + 1, ...) of tile
 * columns y, y + 8, ..., each half taken from the source word holding that column.
 */
function pairedTile(s: TransposeSpec): TileLines {
  const out: TileLines = { load: [], keep: [], store: [] };
  for (let i = 0; i < s.tileRows / 8; i++) {
    for (let h = 0; h < s.tileColumns / 64; h++) {
      const w = `w${i}_${h}`;
      const r = `${i * 8}u + lid.y`, word = `${h * 32}u + lid.x`;
      out.load.push(
        `  let ${w} = select(0u, src[min(base + (r0 + ${r}) * p.row_stride + c0 / 2u + ${word}, ` +
          `last)], r0 + ${r} < p.rows && c0 + 2u * (${word}) < p.columns);`,
      );
      out.keep.push(`  tile[${r}][${word}] = ${w};`);
    }
  }
  for (let i = 0; i < s.tileColumns / 8; i++) {
    const c = `column${i}`;
    out.store.push(
      `  let ${c} = ${i * 8}u + lid.y;`,
      `  let shift${i} = (${c} & 1u) * 16u;`,
    );
    for (let h = 0; h < s.tileRows / 64; h++) {
      const pair = `${h * 32}u + lid.x`;
      const half = (row: string) => `((tile[${row}][${c} >> 1u] >> shift${i}) & 0xffffu)`;
      out.store.push(
        `  if (c0 + ${c} < p.columns && r0 + 2u * (${pair}) < p.rows) { ` +
          `dst[(out_base + (c0 + ${c}) * p.rows + r0) / 2u + ${pair}] = ` +
          `${half(`2u * (${pair})`)} | (${half(`2u * (${pair}) + 1u`)} << 16u); }`,
      );
    }
  }
  return out;
}
