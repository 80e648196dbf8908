/**
 * Automatic differentiation: `grad`, `valueAndGrad`, `vjp`, `jvp`, `stopGradient`, and the
 * optimizers of `optim`. A transformation of functions of tensors, apart from the op library:
 * ops only report themselves to the tape (src/_tape.ts); the rules live here.
 * @module
 */
export {
  grad,
  type GradOptions,
  jvp,
  type Pullback,
  stopGradient,
  valueAndGrad,
  vjp,
} from "./grad.ts";
export type { Tree } from "./_tree.ts";
export * as optim from "./optim.ts";
export { hypergrad, type HypergradOptions, type HypergradResult } from "./hypergrad.ts";
