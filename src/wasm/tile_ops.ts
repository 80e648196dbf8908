/**
 * The instruction set of the WASM device's tile programs: an elementwise expression compiled
 * (src/wasm/elementwise.ts) into instructions that each run one contiguous kernel over a tile of
 * elements held in the L1 cache, interpreted by `ew_run` (generated into asm/_generated.ts by
 * scripts/gen_asm.ts from this same list, so the opcode numbers cannot drift).
 *
 * Values in tiles are 32-bit words of a compute type: f32 (float32 and float16), i32, u32, and
 * bool as the u32 words 0 and 1.
 * @module
 */
import { BINARY, type ComputeType, UNARY } from "../ir/elementwise_table.ts";

/** How an instruction's operand words are read: a register number or a plain word. */
export type TileOperand = "register" | "word";

/** One instruction of the tile programs. */
export interface TileOp {
  /** The kernel it runs, e.g. "unary_exp_f32" (the generated function is `t_` + name). */
  name: string;
  /** Its operand words after the opcode: the destination first where it has one. */
  operands: readonly TileOperand[];
}

/** The compute types of tile values. */
export const TILE_TYPES: readonly ComputeType[] = ["f32", "i32", "u32", "bool"];
/** The storage types a tile program reads (gathers) from memory. */
export const TILE_STORAGES = ["f32", "i32", "u32", "bool", "f16"] as const;

function build(): TileOp[] {
  const ops: TileOp[] = [];
  const r = "register" as const, w = "word" as const;
  for (const [op, def] of Object.entries(UNARY)) {
    for (const ct of Object.keys(def.asm)) {
      ops.push({ name: `unary_${op}_${ct}`, operands: [r, r] });
    }
  }
  for (const [op, def] of Object.entries(BINARY)) {
    for (const ct of Object.keys(def.asm)) {
      ops.push({ name: `binary_${op}_${ct}`, operands: [r, r, r] });
      // The second operand a constant's register, read once ("register, scalar").
      ops.push({ name: `binary_${op}_${ct}_rs`, operands: [r, r, r] });
    }
  }
  for (const ct of TILE_TYPES) ops.push({ name: `where_${ct}`, operands: [r, r, r, r] });
  for (const from of TILE_TYPES) {
    for (const to of TILE_TYPES) ops.push({ name: `cast_${from}_${to}`, operands: [r, r] });
  }
  // Rounds f32 words to float16 precision in place: a float16 node's value.
  ops.push({ name: "round_f16", operands: [r, r] });
  // Reads a tile of an input through its strides: destination, base address, descriptor address.
  for (const s of TILE_STORAGES) ops.push({ name: `gather_${s}`, operands: [r, w, w] });
  // Writes f32 words as float16 storage: output base address, source.
  ops.push({ name: "store_f16", operands: [w, r] });
  // Fills a tile with one word (constants, in the prologue).
  ops.push({ name: "splat", operands: [r, w] });
  // The flat element index (the `index` leaf).
  ops.push({ name: "iota", operands: [r] });
  return ops;
}

/** Every tile instruction; an instruction's opcode is its position here. */
export const TILE_OPS: readonly TileOp[] = build();

/** Opcode of each tile instruction by name. */
export const TILE_OPCODE: ReadonlyMap<string, number> = new Map(
  TILE_OPS.map((op, i) => [op.name, i]),
);

/** Words per instruction: the opcode and four operands (unused ones 0). */
export const TILE_INSTRUCTION_WORDS = 5;
/** Words before the registers: tile length, registers, prologue and body instruction counts. */
export const TILE_HEADER_WORDS = 4;
/** Register kinds: a scratch tile, or a stream (a base address advanced with the tile). */
export const TILE_SCRATCH = 0;
/** A register read or written in place in memory: base + tile start * 4. */
export const TILE_STREAM = 1;

/** Binary ops whose operands may be swapped (so a constant first operand can go second). */
export const COMMUTATIVE: ReadonlySet<string> = new Set([
  "add",
  "mul",
  "maximum",
  "minimum",
  "equal",
  "notEqual",
  "logicalAnd",
  "logicalOr",
  "bitwiseAnd",
  "bitwiseOr",
  "bitwiseXor",
]);
