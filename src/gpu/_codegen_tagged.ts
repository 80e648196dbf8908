/**
 * Tagged words: how a workgroup publishes a 32-bit value to others through WGSL's relaxed
 * atomics without any ordering between two stores. The value is split over two atomic words,
 * each holding a 16-bit half in bits 0-15 and the same tag (a status, from 1) in bits 16 and up.
 * A reader that sees both halves with one tag has both halves of that one publication, provided
 * a word's tag is written once per publication and only grows (or is cleared by its only reader).
 * The scan's look-back states and the reductions' last-workgroup partials both use it.
 * @module
 */

/**
 * WGSL over the `array<atomic<u32>>` named `array`: `tagged_store(at, tag, bits)` publishes
 * `bits` at words `at`, `at + 1`; `tagged_word(lo, hi)` turns a reading of those two words into
 * (tag, bits), the tag 0 while the halves disagree.
 *
 * @example
 * ```ts
 * taggedWordFunctions("flags"); // "fn tagged_store(at: u32, tag: u32, bits: u32) { ..."
 * ```
 */
export function taggedWordFunctions(array: string): string {
  return [
    "fn tagged_store(at: u32, tag: u32, bits: u32) {",
    `  atomicStore(&${array}[at], (tag << 16u) | (bits & 0xffffu));`,
    `  atomicStore(&${array}[at + 1u], (tag << 16u) | (bits >> 16u));`,
    "}",
    "fn tagged_word(lo: u32, hi: u32) -> vec2<u32> {",
    "  let tag = select(0u, lo >> 16u, (lo >> 16u) == (hi >> 16u));",
    "  return vec2(tag, (lo & 0xffffu) | (hi << 16u));",
    "}",
  ].join("\n");
}
