/**
 * Generates a WGSL kernel that copies a batch of strided matrices into contiguous transposed
 * storage: element (b, r, c), read at `offset + b * batchStride + r * rowStride + c * columnStride`,
 * lands at `(b * columns + c) * rows + r`. A workgroup of 32 x 8 invocations moves one 64 x 64 tile
 * through workgroup memory, so both the reads (along the source's columns) and the writes (along
 * its rows) are coalesced, where a plain strided gather reads one element per memory sector.
 * Every invocation loads its sixteen elements before it stores any, so many loads are in flight.
 * Two-byte elements in even-sized, even-aligned matrices read along the source's rows (`paired`)
 * move as 32-bit words holding two neighbours each: a subgroup's loads and stores then cover 128
 * bytes rather than 64.
 *
 * Used where a kernel reads the transposed order faster than the strided one: float16 matmul with
 * A copied into [K, M] order first (`MatmulChoice.transposeAFirst`, src/plans.ts).
 * @module
 */
import type { DType } from "../dtype.ts";
import { storageType } from "./_wgsl_types.ts";

/** Side of the square tile one workgroup moves. */
export const TRANSPOSE_TILE = 64;
/** Invocations per workgroup (32 columns by 8 rows). */
export const TRANSPOSE_THREADS = 256;

/**
 * The copy's sizes and the source's layout, for {@link transposeUniforms}.
 *
 * @example
 * ```ts
 * const copy: TransposeUniforms = {
 *   rows: 4096, columns: 4096, batches: 1,
 *   offset: 0, rowStride: 4096, columnStride: 1, batchStride: 0,
 * };
 * ```
 */
export interface TransposeUniforms {
  rows: number;
  columns: number;
  batches: number;
  offset: number;
  rowStride: number;
  columnStride: number;
  batchStride: number;
}

/**
 * Whether {@link generateTranspose}'s paired form can copy `u` for elements of `dtype`: two-byte
 * elements, contiguous along the source's rows, with even sizes, offsets and strides.
 *
 * @example
 * ```ts
 * transposePairs("float16", {
 *   rows: 64, columns: 64, batches: 1, offset: 0, rowStride: 64, columnStride: 1, batchStride: 0,
 * }); // true
 * ```
 */
export function transposePairs(dtype: DType, u: TransposeUniforms): boolean {
  return dtype === "float16" && u.columnStride === 1 &&
    [u.rows, u.columns, u.offset, u.rowStride, u.batchStride].every((x) => x % 2 === 0);
}

/**
 * The uniform block of the transposing copy (eight u32 words); the paired form takes offsets and
 * strides in words.
 *
 * @example
 * ```ts
 * transposeUniforms({
 *   rows: 2, columns: 3, batches: 1, offset: 0, rowStride: 3, columnStride: 1, batchStride: 0,
 * }).length; // 8
 * ```
 */
export function transposeUniforms(u: TransposeUniforms, paired = false): Uint32Array {
  const tilesRows = Math.ceil(u.rows / TRANSPOSE_TILE);
  const tilesColumns = Math.ceil(u.columns / TRANSPOSE_TILE);
  const unit = paired ? 2 : 1;
  return Uint32Array.from([
    u.rows,
    u.columns,
    u.offset / unit,
    u.rowStride / unit,
    u.columnStride,
    u.batchStride / unit,
    tilesColumns,
    tilesRows * tilesColumns * u.batches,
  ]);
}

/** Workgroups the copy dispatches: one per `tilesPerGroup` tiles. */
export function transposeGroups(u: TransposeUniforms, tilesPerGroup = 1): number {
  const tiles = Math.ceil(u.rows / TRANSPOSE_TILE) * Math.ceil(u.columns / TRANSPOSE_TILE) *
    u.batches;
  return Math.ceil(tiles / tilesPerGroup);
}

/**
 * WGSL of the transposing copy for elements of `dtype` (`paired`: two-byte elements moved as
 * words of two, see {@link transposePairs}), each workgroup moving `tilesPerGroup` consecutive
 * tiles: the next tile's loads go out before this tile's stores. The tile is held as f32 for
 * float16 (exact both ways), or as the 16-bit patterns when paired, so workgroup memory is
 * addressed in whole words.
 *
 * @example
 * ```ts
 * generateTranspose("float16").includes("enable f16;"); // true
 * ```
 */
export function generateTranspose(dtype: DType, paired = false, tilesPerGroup = 1): string {
  const element = paired ? "u32" : storageType(dtype);
  const shared = paired ? "u32" : dtype === "float16" ? "f32" : element;
  const K = tilesPerGroup;
  const lines = [
    ...(dtype === "float16" && !paired ? ["enable f16;"] : []),
    "struct Params { rows: u32, columns: u32, offset: u32, row_stride: u32, column_stride: u32, " +
    "batch_stride: u32, tiles_columns: u32, tiles: u32 }",
    `@group(0) @binding(0) var<storage, read> src: array<${element}>;`,
    `@group(0) @binding(1) var<storage, read_write> dst: array<${element}>;`,
    "@group(0) @binding(2) var<uniform> p: Params;",
    // One padding column: the stores read the tile down its columns without bank conflicts.
    `var<workgroup> tile: array<array<${shared}, ${TRANSPOSE_TILE + 1}>, ${TRANSPOSE_TILE}>;`,
    "@compute @workgroup_size(32, 8)",
    "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, " +
    "@builtin(local_invocation_id) lid: vec3<u32>) {",
    "  let g = wid.x + wid.y * nwg.x;",
    `  if (g * ${K}u >= p.tiles) { return; }`,
    `  let tiles_rows = (p.rows + ${TRANSPOSE_TILE - 1}u) / ${TRANSPOSE_TILE}u;`,
    "  let per_batch = tiles_rows * p.tiles_columns;",
    // Out-of-range lanes read a valid element and discard it, so no load is conditional.
    "  let last = arrayLength(&src) - 1u;",
  ];
  const tiles = Array.from(
    { length: K },
    (_, j) => (paired ? pairedTile(j) : plainTile(j, shared, element)),
  );
  for (let j = 0; j < K; j++) {
    // Tile j of this workgroup: `r0_j, c0_j` in batch `b_j`, from source element (or word)
    // `base_j`; its output starts at element `out_j`; `ok_j` false past the last tile.
    lines.push(
      `  let t${j} = g * ${K}u + ${j}u;`,
      `  let ok${j} = t${j} < p.tiles;`,
      `  let b${j} = t${j} / per_batch;`,
      `  let within${j} = t${j} - b${j} * per_batch;`,
      `  let r0_${j} = (within${j} / p.tiles_columns) * ${TRANSPOSE_TILE}u;`,
      `  let c0_${j} = (within${j} % p.tiles_columns) * ${TRANSPOSE_TILE}u;`,
      `  let base${j} = p.offset + b${j} * p.batch_stride;`,
      `  let out${j} = b${j} * p.rows * p.columns;`,
    );
  }
  lines.push(...tiles[0].load);
  for (let j = 0; j < K; j++) {
    // The previous tile's reads of `tile` come before this one's writes.
    if (j > 0) lines.push("  workgroupBarrier();");
    lines.push(...tiles[j].keep, "  workgroupBarrier();");
    if (j + 1 < K) lines.push(...tiles[j + 1].load);
    lines.push(...tiles[j].store);
  }
  lines.push("}", "");
  return lines.join("\n");
}

/** One tile's loads (into registers), their writes to `tile`, and its stores. */
interface TileLines {
  load: string[];
  keep: string[];
  store: string[];
}

/**
 * Tile j, element by element: invocation (x, y) loads columns x and x + 32 of tile rows y,
 * y + 8, ..., and stores rows x and x + 32 of tile columns y, y + 8, ...
 */
function plainTile(j: number, shared: string, element: string): TileLines {
  const out: TileLines = { load: [], keep: [], store: [] };
  const [r0, c0] = [`r0_${j}`, `c0_${j}`];
  for (let i = 0; i < TRANSPOSE_TILE / 8; i++) {
    for (let h = 0; h < 2; h++) {
      const v = `v${j}_${i}_${h}`;
      const r = `${i * 8}u + lid.y`, c = `${h * TRANSPOSE_TILE / 2}u + lid.x`;
      out.load.push(
        `  let ${v} = select(${shared}(), ${shared}(src[min(base${j} + (${r0} + ${r}) * ` +
          `p.row_stride + (${c0} + ${c}) * p.column_stride, last)]), ok${j} && ` +
          `${r0} + ${r} < p.rows && ${c0} + ${c} < p.columns);`,
      );
      out.keep.push(`  tile[${r}][${c}] = ${v};`);
      out.store.push(
        `  if (ok${j} && ${c0} + ${r} < p.columns && ${r0} + ${c} < p.rows) { ` +
          `dst[out${j} + (${c0} + ${r}) * p.rows + ${r0} + ${c}] = ` +
          `${element}(tile[${c}][${r}]); }`,
      );
    }
  }
  return out;
}

/**
 * Tile j in words of two elements (low half first): invocation (x, y) loads word x (elements 2x,
 * 2x + 1) of tile rows y, y + 8, ..., and stores word x (tile rows 2x, 2x + 1) of tile columns
 * y, y + 8, ...: 32 words span the 64-wide tile.
 */
function pairedTile(j: number): TileLines {
  const out: TileLines = { load: [], keep: [], store: [] };
  const [r0, c0] = [`r0_${j}`, `c0_${j}`];
  for (let i = 0; i < TRANSPOSE_TILE / 8; i++) {
    const w = `w${j}_${i}`;
    const r = `${i * 8}u + lid.y`;
    out.load.push(
      `  let ${w} = select(0u, src[min(base${j} + (${r0} + ${r}) * p.row_stride + ${c0} / 2u + ` +
        `lid.x, last)], ok${j} && ${r0} + ${r} < p.rows && ${c0} + 2u * lid.x < p.columns);`,
    );
    out.keep.push(
      `  tile[${r}][2u * lid.x] = ${w} & 0xffffu;`,
      `  tile[${r}][2u * lid.x + 1u] = ${w} >> 16u;`,
    );
    out.store.push(
      `  if (ok${j} && ${c0} + ${r} < p.columns && ${r0} + 2u * lid.x < p.rows) { ` +
        `dst[(out${j} + (${c0} + ${r}) * p.rows + ${r0}) / 2u + lid.x] = ` +
        `tile[2u * lid.x][${r}] | (tile[2u * lid.x + 1u][${r}] << 16u); }`,
    );
  }
  return out;
}
