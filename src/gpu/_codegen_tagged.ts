/**
 * Tagged words: how a workgroup publishes a 32-bit value to others through WGSL's relaxed
 * atomics without any ordering between two stores. The value goes out with a tag (a status,
 * from 1), and a reader takes the value only once it sees the tag. Two forms:
 * - wide, where the device has 64-bit atomics: one `atomic<u64>`, the tag in the high half, stored
 *   and read whole (one atomic operation each; on an H200 half the atomic traffic of the other
 *   form made the scan's look-back 7% faster);
 * - narrow: the value split over two 32-bit atomic words, each holding a 16-bit half in bits 0-15
 *   and the same tag in bits 16 and up. A reader that sees both halves with one tag has both
 *   halves of that one publication, provided a word's tag is written once per publication and only
 *   grows (or is cleared by its only reader).
 * Either way `tagged_read(at)` gives (tag, bits), the tag 0 while nothing whole is there. The
 * scan's look-back states and the reductions' last-workgroup partials both use them.
 * @module
 */

/**
 * WGSL over the atomic array named `array` (`array<atomic<u64>>` when `wide`, else
 * `array<atomic<u32>>`): `tagged_store(at, tag, bits)` publishes `bits` at element `at` (wide) or
 * elements `at`, `at + 1`; `tagged_read(at)` reads it back as (tag, bits); `tagged_clear(at)`
 * zeroes it. Wide words are read by `atomicOr(word, 0)`: lavapipe's 64-bit `atomicLoad` returned
 * wrong values, and on an H200 the scan's look-back ran 168.6 us with it against 152.8. Narrow
 * words are read by `narrowRead`: `atomicOr(word, 0)` for the scan's look-back (247 us with
 * `atomicLoad` against 220), `atomicLoad` for the reductions' one-time reads of their partials
 * (on an H200 a max of 16 Mi ran 0.4-0.5 us behind the wide form with `atomicOr` reads, and
 * 0-0.3 us with `atomicLoad`, each against the wide form in the same run).
 *
 * @example
 * ```ts
 * taggedWordFunctions("flags", true); // "fn tagged_store(at: u32, tag: u32, bits: u32) { ..."
 * ```
 */
export function taggedWordFunctions(
  array: string,
  wide: boolean,
  narrowRead: "atomicOr" | "atomicLoad" = "atomicOr",
): string {
  const read = (at: string) =>
    narrowRead === "atomicOr" ? `atomicOr(&${array}[${at}], 0u)` : `atomicLoad(&${array}[${at}])`;
  if (wide) {
    return [
      "fn tagged_store(at: u32, tag: u32, bits: u32) {",
      `  atomicStore(&${array}[at], (u64(tag) << 32u) | u64(bits));`,
      "}",
      "fn tagged_read(at: u32) -> vec2<u32> {",
      `  let word = atomicOr(&${array}[at], 0lu);`,
      "  return vec2(u32(word >> 32u), u32(word & 0xfffffffflu));",
      "}",
      "fn tagged_clear(at: u32) {",
      `  atomicStore(&${array}[at], 0lu);`,
      "}",
    ].join("\n");
  }
  return [
    "fn tagged_store(at: u32, tag: u32, bits: u32) {",
    `  atomicStore(&${array}[at], (tag << 16u) | (bits & 0xffffu));`,
    `  atomicStore(&${array}[at + 1u], (tag << 16u) | (bits >> 16u));`,
    "}",
    "fn tagged_read(at: u32) -> vec2<u32> {",
    `  return tagged_word(${read("at")}, ${read("at + 1u")});`,
    "}",
    "fn tagged_clear(at: u32) {",
    `  atomicStore(&${array}[at], 0u);`,
    `  atomicStore(&${array}[at + 1u], 0u);`,
    "}",
    "fn tagged_word(lo: u32, hi: u32) -> vec2<u32> {",
    "  let tag = select(0u, lo >> 16u, (lo >> 16u) == (hi >> 16u));",
    "  return vec2(tag, (lo & 0xffffu) | (hi << 16u));",
    "}",
  ].join("\n");
}
