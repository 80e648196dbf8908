/**
 * Scalar expression graphs (issue 26): `V` and `Value` for writing residuals and objectives as
 * small scalar expressions, `Vec2` and `Vec3`, `CompiledResiduals` (one GPU kernel or WASM tape
 * per residual topology) and the solvers `nonlinearLeastSquares` (Levenberg-Marquardt on the
 * device) and `lbfgs`.
 * @module
 */
export { type Scalar, type ScalarOps, V, Value } from "./value.ts";
export { Vec2, Vec3 } from "./vec.ts";
export { type Topology, topology } from "./topology.ts";
export {
  CompiledResiduals,
  type CompileOptions,
  type CompileTimings,
  type SolveOptions,
  type SolveResult,
} from "./compiled.ts";
export { lbfgs, type LbfgsOptions, type LbfgsResult, nonlinearLeastSquares } from "./solve.ts";
export type { StopReason } from "../contract/residuals.ts";
