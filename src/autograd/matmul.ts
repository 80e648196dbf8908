/**
 * Gradient rules of matmul and linear. Every product of the backward pass reads its operands
 * through the transpose flags (never a transposed copy, never a broadcast product): for
 * C = A B, dA = dC B^T and dB = A^T dC. A batched A times a 2-D B gives B's cotangent as one
 * product over the flattened batch. linear's activation is undone from its output where it can be
 * (relu, tanh, sigmoid; relu's mask then runs in the epilogue of the product computing dX), and
 * from the pre-activation, recomputed, for gelu and silu.
 * @module
 */
import type { Tensor } from "../tensor.ts";
import { lessEqual, mul, sub, where } from "../ops/elementwise.ts";
import { linear, matmul, type MatmulOptions } from "../ops/matmul.ts";
import { expandDims, reshape, squeeze } from "../ops/shape.ts";
import { defineRule } from "./_rules.ts";
import { geluGrad, siluGrad } from "./elementwise.ts";

type Accumulate = MatmulOptions["accumulate"];

/** dA and dB of C = op(A) op(B) for operands of rank 2 or more (batch axes summed by backprop). */
function productGrads(
  g: Tensor,
  a: Tensor,
  b: Tensor,
  tA: boolean,
  tB: boolean,
  needs: readonly boolean[],
  accumulate: Accumulate,
): [Tensor | null, Tensor | null] {
  const o = (transposeA: boolean, transposeB: boolean): MatmulOptions =>
    accumulate ? { transposeA, transposeB, accumulate } : { transposeA, transposeB };
  let da: Tensor | null = null, db: Tensor | null = null;
  if (needs[0]) {
    da = tA ? matmul(b, g, o(tB, true)) : matmul(g, b, o(false, !tB));
  }
  if (needs[1]) {
    if (b.rank === 2 && a.rank > 2 && !tA) {
      // One product over the flattened batch instead of a batch of them summed afterwards.
      const k = a.shape[a.rank - 1], n = g.shape[g.rank - 1];
      const a2 = reshape(a, [-1, k]), g2 = reshape(g, [-1, n]);
      db = tB ? matmul(g2, a2, o(true, false)) : matmul(a2, g2, o(true, false));
    } else {
      db = tB ? matmul(g, a, o(true, tA)) : matmul(a, g, o(!tA, false));
    }
  }
  return [da, db];
}

defineRule("matmul", (c) => {
  const a0 = c.inputs[0] as Tensor, b0 = c.inputs[1] as Tensor;
  let a = a0, b = b0, g = c.cts[0]!;
  let tA = c.attrs.transposeA === true, tB = c.attrs.transposeB === true;
  // A 1-D operand is a row (a) or a column (b) whose axis the result dropped: put both back,
  // and take them out of the cotangents again.
  if (a0.rank === 1) {
    a = reshape(a0, [1, a0.shape[0]]);
    g = expandDims(g, b0.rank === 1 ? 0 : -2);
    tA = false;
  }
  if (b0.rank === 1) {
    b = reshape(b0, [b0.shape[0], 1]);
    g = expandDims(g, -1);
    tB = false;
  }
  const [da, db] = productGrads(g, a, b, tA, tB, c.needs, c.attrs.accumulate as Accumulate);
  return [
    da && a0.rank === 1 ? squeeze(da, -2) : da,
    db && b0.rank === 1 ? squeeze(db, -1) : db,
  ];
});

defineRule("linear", (c) => {
  const x = c.inputs[0] as Tensor, weight = c.inputs[1] as Tensor;
  const bias = c.inputs[2] as Tensor | undefined;
  const y = c.outputs[0];
  const g = c.cts[0]!;
  const accumulate = c.attrs.accumulate as Accumulate;
  const activation = (c.attrs.activation as string | undefined) ?? "none";
  const pre = () => linear(x, weight, bias ? { bias, accumulate } : { accumulate });
  const gp = activation === "relu"
    ? where(lessEqual(y, 0), 0, g)
    : activation === "tanh"
    ? mul(g, sub(1, mul(y, y)))
    : activation === "sigmoid"
    ? mul(g, mul(y, sub(1, y)))
    : activation === "gelu"
    ? geluGrad(g, pre(), "none")
    : activation === "silu"
    ? siluGrad(g, pre())
    : g;
  const o = accumulate ? { accumulate } : {};
  const inputs = weight.shape[1];
  return [
    c.needs[0] ? matmul(gp, weight, o) : null,
    c.needs[1]
      ? matmul(reshape(gp, [-1, weight.shape[0]]), reshape(x, [-1, inputs]), {
        ...o,
        transposeA: true,
      })
      : null,
    c.needs[2] ? gp : null,
  ];
});
