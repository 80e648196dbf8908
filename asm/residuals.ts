// Compiled residuals on the CPU (issue 26): a tape of scalar instructions (src/plans/residuals.ts)
// run over many instances at once — every instruction a loop over a chunk of instances, columns
// in float64 — forward for the residuals, then in reverse for each instance's Jacobian row. The
// reference the GPU's straight-line kernels (src/gpu/_codegen_residuals.ts) are tested against,
// and the "cpu" backend of CompiledResiduals. Built on its own (scripts/build.ts) over a memory
// src/wasm/residuals.ts owns.
// @ts-nocheck: AssemblyScript, compiled by asc, not by Deno.

import { forward_op, reverse_op } from "./_residual_ops";

/** Instances per chunk: a chunk's columns stay in cache (tapes of up to a few hundred steps). */
const CHUNK: i32 = 64;

// Tape words per instruction: opcode, three operands, the leaf's slot.
const WORDS: i32 = 5;
const PARAM: i32 = 0;
const CONST: i32 = 1;
const LITERAL: i32 = 2;

/**
 * Evaluates one group: `count` instances of the tape at `tape` (`len` instructions; literal
 * values at `literals`, f64), parameter indices at `index` (i32, slot-major), constants at
 * `consts` (f64, slot-major), parameters `x` (f64). Writes residual i at `r` + 8 i and, when
 * `jacobian` is not 0, the entry of slot s at `jacobian` + 8 (s count + i). `vals` and `adj` are
 * scratch of len * CHUNK f64 each.
 */
export function residual_group(
  tape: usize, len: i32, literals: usize, count: i32, index: usize, consts: usize, x: usize,
  r: usize, jacobian: usize, vals: usize, adj: usize,
): void {
  const stride = CHUNK << 3;
  for (let first = 0; first < count; first += CHUNK) {
    const n = min(CHUNK, count - first);
    for (let k = 0; k < len; k++) {
      const w = tape + ((k * WORDS) << 2);
      const code = load<i32>(w);
      const out = vals + k * stride;
      if (code == PARAM) {
        const slot = load<i32>(w, 16);
        const at = index + ((slot * count + first) << 2);
        for (let i = 0; i < n; i++) {
          store<f64>(out + (i << 3), load<f64>(x + (load<i32>(at + (i << 2)) << 3)));
        }
      } else if (code == CONST) {
        memory.copy(out, consts + ((load<i32>(w, 16) * count + first) << 3), n << 3);
      } else if (code == LITERAL) {
        const v = load<f64>(literals + (k << 3));
        for (let i = 0; i < n; i++) store<f64>(out + (i << 3), v);
      } else {
        forward_op(
          code, out,
          vals + load<i32>(w, 4) * stride, vals + load<i32>(w, 8) * stride,
          vals + load<i32>(w, 12) * stride, n,
        );
      }
    }
    memory.copy(r + (first << 3), vals + (len - 1) * stride, n << 3);
    if (jacobian == 0) continue;
    memory.fill(adj, 0, len * stride);
    const root = adj + (len - 1) * stride;
    for (let i = 0; i < n; i++) store<f64>(root + (i << 3), 1.0);
    for (let k = len - 1; k >= 0; k--) {
      const w = tape + ((k * WORDS) << 2);
      const code = load<i32>(w);
      if (code == PARAM) {
        memory.copy(
          jacobian + ((load<i32>(w, 16) * count + first) << 3), adj + k * stride, n << 3,
        );
        continue;
      }
      if (code == CONST || code == LITERAL) continue;
      const a = load<i32>(w, 4), b = load<i32>(w, 8), c = load<i32>(w, 12);
      reverse_op(
        code, vals + k * stride, adj + k * stride,
        vals + a * stride, vals + b * stride, vals + c * stride,
        adj + a * stride, adj + b * stride, adj + c * stride, n,
      );
    }
  }
}
