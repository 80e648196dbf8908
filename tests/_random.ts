/**
 * Deterministic data from a seed, for tests that must not start the GPU runtime that
 * tests/_harness.ts initialises on import (the WASM-only tests); _harness re-exports it.
 * @module
 */

/** A small, fast PRNG (Mulberry32): uniform numbers in [0, 1). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
