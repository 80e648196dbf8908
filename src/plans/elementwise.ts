/**
 * The elementwise plan: which kernel form (vec4, scalar, strided, tiled) evaluates an
 * expression, and the transposing copy it may use.
 * @module
 */
import type { DeviceCaps } from "../core/caps.ts";
import type { DType } from "../core/dtype.ts";
import { ValueError } from "../core/errors.ts";

/** The elementwise kernel forms (the registry and the coverage test read this list). */
export const ELEMENTWISE_VARIANTS = ["vec4", "scalar", "transpose", "tiled"] as const;
/** One of {@link ELEMENTWISE_VARIANTS}. */
export type ElementwiseVariant = (typeof ELEMENTWISE_VARIANTS)[number];

/** The choice for an elementwise kernel. */
export interface ElementwiseChoice {
  /** Which plan made this choice (a discriminant). */
  kernel: "elementwise";
  /**
   * "vec4": four elements per invocation with vector loads; "scalar": one, through strides;
   * "transpose": a plain copy of a transposed matrix by the tiled transposing copy
   * (src/gpu/_codegen_transpose.ts), whose reads and writes are both coalesced; "tiled": the
   * elementwise kernel over tiles of 32 x 32 outputs, for transposed matrices among the operands
   * (of a computation, or of a plain copy), which it reads through workgroup memory so that
   * every access is coalesced.
   */
  variant: ElementwiseVariant;
  /** Invocations per workgroup. */
  workgroupSize: number;
}

/**
 * Elements from which an elementwise computation on a hardware GPU reads its transposed operands
 * in tiles through workgroup memory, 256 invocations (4 rows of the tile each) per tile of 32 x 32
 * (H200, `x.transpose().add(x)`: 8192^2 239 us, 81% of copy, against 350 with the operand copied
 * in order first (an option since removed) and 736 gathered through strides; 4096^2 60.0 against
 * 94.5; 2048^2 14.9 against 26.2; 1024^2 7.7 against 12.3 and 13.9. Tiles of 8 rows per invocation: 266 us at 8192^2, of 1
 * row 248. bench/results/history/kernels-nvidia-h200-transposed-operand.md).
 */
const TRANSPOSED_OPERAND_ELEMENTS = 1 << 20;

/**
 * Elements from which a plain copy of a transposed matrix of 4-byte elements takes the tiled
 * kernel with 8 rows of the tile per invocation (128 per workgroup) rather than the tiled
 * transposing copy (H200, float32: 8192^2 141.9 us, 91% of copy, against 165.0; 4096^2 40.5
 * against 44.5; 2048^2 11.5 against 12.9; at 1024^2 the copy's 7.0 against 8.8 with the clock
 * lowered; float16: 29.1 against the paired copy's 28.4, so 2-byte elements keep the copy).
 */
const TRANSPOSED_CLONE_TILED_ELEMENTS = 1 << 22;

/**
 * Elementwise: vec4 whenever the layout allows it (contiguous or scalar inputs, 4-aligned
 * offsets); 256 invocations per workgroup, which fills an SM's schedulers on NVIDIA and suits
 * llvmpipe's wide SIMD. On a hardware GPU, transposed matrices (both sides at least 32) are read
 * in tiles: a computation with them as operands by the tiled kernel
 * ({@link TRANSPOSED_OPERAND_ELEMENTS}); a plain copy of one (`transposedCopy`) by the tiled
 * kernel for large 4-byte elements ({@link TRANSPOSED_CLONE_TILED_ELEMENTS}), else by the tiled
 * transposing copy (at 4096 x 4096, 44.0 us for float32 and 27.9 for float16 against 123.5 and
 * 112.1 for the strided gather; bench/results/history/kernels-nvidia-h200-transpose.md). Software adapters
 * keep the gather (llvmpipe at 512 x 512: 0.8 ms against 1.1-2.5 for the tiled copy).
 *
 * @example
 * ```ts
 * import { planElementwise } from "@gyre/gyre/tuning";
 * planElementwise(undefined, { elements: 1 << 20, vec4Eligible: true }).variant; // "vec4"
 * ```
 */
export function planElementwise(
  caps: DeviceCaps | undefined,
  problem: {
    elements: number;
    vec4Eligible: boolean;
    transposedCopy?: boolean;
    transposedOperands?: number;
    /** Bytes per element (a plain copy's). */
    elementBytes?: number;
  },
  override: Partial<ElementwiseChoice> | null = null,
): ElementwiseChoice {
  const hardware = !caps?.isFallbackAdapter;
  const tiledClone = hardware && problem.transposedCopy === true &&
    problem.elementBytes === 4 && problem.elements >= TRANSPOSED_CLONE_TILED_ELEMENTS;
  const choice: ElementwiseChoice = {
    kernel: "elementwise",
    variant: tiledClone
      ? "tiled"
      : problem.transposedCopy && hardware
      ? "transpose"
      : hardware && (problem.transposedOperands ?? 0) > 0 &&
          problem.elements >= TRANSPOSED_OPERAND_ELEMENTS
      ? "tiled"
      : problem.vec4Eligible && problem.elements >= 4
      ? "vec4"
      : "scalar",
    workgroupSize: tiledClone ? 128 : 256,
    ...override,
  };
  // vec4, the transposing copy and tiles need the problem's permission, whatever an override asks.
  if (choice.variant === "vec4" && !problem.vec4Eligible) choice.variant = "scalar";
  if (
    (choice.variant === "transpose" && !problem.transposedCopy) ||
    (choice.variant === "tiled" && !problem.transposedOperands)
  ) {
    choice.variant = problem.vec4Eligible ? "vec4" : "scalar";
  }
  // A tiled kernel's workgroup holds whole rows of the tile.
  if (
    choice.variant === "tiled" &&
    (!TILED_WORKGROUP_SIZES.includes(choice.workgroupSize) ||
      choice.workgroupSize > (caps?.limits?.maxComputeInvocationsPerWorkgroup ?? 256))
  ) {
    choice.workgroupSize = 256;
  }
  return choice;
}

/** The choice for an elementwise job on the WASM device (src/wasm/elementwise.ts). */
export interface WasmElementwiseChoice {
  /** Which plan made this choice (a discriminant). */
  kernel: "wasmElementwise";
  /**
   * "tiles": the expression compiled into a tile program, each node one SIMD kernel over a tile
   * of {@link WasmElementwiseChoice.tile} elements in the L1 cache, so a fused expression reads
   * its inputs and writes its output once; "nodes": node by node over whole arrays with the
   * op table's kernels (the reference the tile programs are tested against).
   */
  form: "tiles" | "nodes";
  /** Elements per tile (a multiple of 4). */
  tile: number;
}

/** The WASM tile plans' variants (the differential test covers both). */
export const WASM_ELEMENTWISE_FORMS = ["tiles", "nodes"] as const;

/**
 * Elements per tile: 1024 words are 4 KiB, so the registers of an expression of a dozen nodes stay
 * in a 32-48 KiB L1 cache. On the 2-core test machine relu(x * 2 + 1) of 16 Mi took 18.9, 19.9,
 * 22.4 and 21.8 ms with tiles of 512, 1024, 2048 and 4096 elements (noise of a busy machine).
 */
export const WASM_TILE = 1024;

/**
 * WASM elementwise: a tile program of {@link WASM_TILE} elements per tile (threads are
 * `planWasmThreads`'s). An override may ask for the node by node form or another tile length (a
 * multiple of 4).
 *
 * @example
 * ```ts
 * import { planWasmElementwise } from "@gyre/gyre/tuning";
 * planWasmElementwise({ form: "nodes" }).form; // "nodes"
 * ```
 */
export function planWasmElementwise(
  override: Partial<WasmElementwiseChoice> | null = null,
): WasmElementwiseChoice {
  const choice: WasmElementwiseChoice = {
    kernel: "wasmElementwise",
    form: "tiles",
    tile: WASM_TILE,
    ...override,
  };
  const fail = (field: string, expected: string, received: unknown) => {
    throw new ValueError({
      op: "setPlanOverride",
      argument: `wasmElementwise.${field}`,
      expected,
      received: String(received),
    });
  };
  if (!(WASM_ELEMENTWISE_FORMS as readonly string[]).includes(choice.form)) {
    fail("form", '"tiles" or "nodes"', choice.form);
  }
  if (!Number.isInteger(choice.tile) || choice.tile < 4 || choice.tile % 4 !== 0) {
    fail("tile", "a positive multiple of 4", choice.tile);
  }
  return choice;
}

/**
 * The transposing copy's form and tile (src/gpu/_codegen_transpose.ts): two-byte elements in words
 * of two (`paired`) wherever the layout allows. Measured on an H200 copying 4096 x 4096 (bench/results/
 * history/kernels-nvidia-h200-transpose.md): paired float16 64x64 27.9 us, 57% of copy (128x64 35.0,
 * 64x128 39.2, 128x128 72.3); element by element 32x32 is best, float32 44.0 us, 73% (64x64 52.6,
 * 128-wide 70), float16 36.8 (64x64 48.6); a strided gather (the elementwise kernel) 112-124 us.
 * Smaller tiles won every comparison; several tiles per workgroup, each tile's stores overlapping
 * the next one's loads, did not help (40-66 us).
 */
export function planTranspose(dtype: DType, copy: TransposeUniforms): TransposeSpec {
  const paired = transposePairs(dtype, copy);
  const side = paired ? 64 : 32;
  return { dtype, paired, tileRows: side, tileColumns: side };
}

/**
 * Workgroup sizes of a tiled kernel: TILE_SIDE x (size / TILE_SIDE) invocations, each taking
 * TILE_SIDE * TILE_SIDE / size elements of the tile.
 */
export const TILED_WORKGROUP_SIZES: readonly number[] = [128, 256, 512, 1024];

/**
 * Everything the generated code depends on. Tile sides are 32, 64 or 128 elements (64 or 128
 * when paired).
 *
 * @example
 * ```ts
 * const spec: TransposeSpec = { dtype: "float16", paired: true, tileRows: 64, tileColumns: 128 };
 * ```
 */
export interface TransposeSpec {
  /** The element type copied. */
  dtype: DType;
  /** Two-byte elements moved in 32-bit words of two. */
  paired: boolean;
  /** Rows of the tile a workgroup transposes. */
  tileRows: number;
  /** Columns of the tile a workgroup transposes. */
  tileColumns: number;
}

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
  /** Rows of each source matrix. */
  rows: number;
  /** Columns of each source matrix. */
  columns: number;
  /** Matrices copied. */
  batches: number;
  /** First element of the source, in elements. */
  offset: number;
  /** Elements between rows of the source. */
  rowStride: number;
  /** Elements between columns of the source (1: contiguous rows). */
  columnStride: number;
  /** Elements between matrices of the source. */
  batchStride: number;
}

/**
 * Whether the paired form can copy `u` for elements of `dtype`: two-byte elements, contiguous
 * along the source's rows, with even sizes, offsets and strides.
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
