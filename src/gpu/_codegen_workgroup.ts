/**
 * WGSL pieces over a workgroup's shared memory that several families' kernels use.
 * @module
 */

/**
 * WGSL lines: an inclusive sum over the workgroup of `array` (one u32 word an invocation, at
 * index `lane`; `size` invocations) by Hillis and Steele, in place; barriers before and after each
 * step, so every invocation must reach it.
 */
export function workgroupInclusiveSum(
  array: string,
  lane: string,
  size: number,
  indent = "",
): string[] {
  return [
    `for (var step = 1u; step < ${size}u; step = step * 2u) {`,
    "  var add = 0u;",
    `  if (${lane} >= step) { add = ${array}[${lane} - step]; }`,
    "  workgroupBarrier();",
    `  ${array}[${lane}] = ${array}[${lane}] + add;`,
    "  workgroupBarrier();",
    "}",
  ].map((line) => indent + line);
}
