/**
 * Allocation size classes, shared by the GPU buffer pool and the WASM allocator: both pool freed
 * blocks by class, so a later tensor of a similar size reuses one.
 * @module
 */

/**
 * Rounds a byte size up to its class: powers of two up to 1 MiB, then eighths of a power of two,
 * so large tensors waste at most 12.5%. Every class is a multiple of 16 bytes, which lets vec4
 * kernels read and write a whole last vector.
 */
export function sizeClass(bytes: number): number {
  const b = Math.max(16, bytes);
  if (b <= 1 << 20) return 2 ** Math.ceil(Math.log2(b));
  const step = 2 ** (Math.floor(Math.log2(b)) - 3);
  return Math.ceil(b / step) * step;
}
