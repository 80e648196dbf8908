/**
 * gyre: a tensor runtime for Deno with WebGPU kernels and a WebAssembly fallback that is also the
 * reference every GPU kernel is checked against.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * await gyre.init({ device: "auto" });
 * const x = gyre.tensor([[1, 2], [3, 4]]);
 * console.log(await x.exp().sum({ axis: 1 }).array());
 * ```
 * @module
 */
import "./ops/mod.ts";
export { Tensor } from "./tensor.ts";
export {
  type AllocatorStats,
  type DevicePreference,
  flush,
  init,
  type InitOptions,
  type PoolStats,
  Runtime,
  runtime,
  type RuntimeStats,
  startWasmThreads,
  stopWasmThreads,
  sync,
  wasmThreadCapacity,
  wasmThreadCount,
} from "./runtime.ts";
export { tidy } from "./tidy.ts";
export { VERSION } from "./version.ts";
export { explain, type ExplainedPlan, type Explanation } from "./explain.ts";
export { jit, type JittedFunction } from "./jit.ts";
export * from "./autograd/mod.ts";
export * from "./scalar/mod.ts";
export {
  arange,
  type CreationOptions,
  eye,
  full,
  linspace,
  ones,
  tensor,
  type TensorOptions,
  zeros,
} from "./creation.ts";
export * as random from "./random.ts";
export * as heuristics from "./heuristics.ts";
export {
  type CandidateTiming,
  type KeyTiming,
  tune,
  type TuneOptions,
  type TuneProgress,
  type TuneReport,
} from "./tune.ts";
export type { TuneChoice, TuneFamilyName, TuneKey } from "./heuristics/families.ts";
export type { ChooseRow } from "./heuristics/choose_table.ts";
export type { TuningMode } from "./heuristics/consensus.ts";
export * from "./ops/elementwise.ts";
export * from "./ops/activations.ts";
export {
  all,
  any,
  argmax,
  argmin,
  type ArgReduceOptions,
  logsumexp,
  max,
  mean,
  min,
  prod,
  type ReduceOptions,
  std,
  sum,
  variance,
  type VarianceOptions,
} from "./ops/reduce.ts";
export {
  broadcastTo,
  clone,
  concat,
  expandDims,
  reshape,
  slice,
  type SliceRange,
  squeeze,
  stack,
  to,
  transpose,
} from "./ops/shape.ts";
export { readAll } from "./ops/read.ts";
export * from "./ops/pool.ts";
export * from "./ops/scan.ts";
export * from "./ops/sort.ts";
export * from "./ops/indexing.ts";
// One `where` of both forms (the elementwise module's is its three-argument form).
export { where } from "./ops/indexing.ts";
export * from "./ops/matmul.ts";
export type { NestedArray, TensorLike } from "./ops/_dispatch.ts";
export type { BinaryOp, UnaryOp } from "./ir/elementwise_table.ts";
export { type DataFor, type DType, promoteTypes, type TypedArray } from "./core/dtype.ts";
export {
  AxisError,
  DeviceError,
  DisposedError,
  DTypeError,
  GpuError,
  GyreError,
  type GyreErrorDetails,
  IndexError,
  OutOfMemoryError,
  RuleError,
  ShapeError,
  ValueError,
} from "./core/errors.ts";
export type { DeviceName, KernelRecord } from "./contract/backend.ts";
export type { DeviceCaps, GpuDeviceHandle, WasmDeviceHandle } from "./core/caps.ts";
export * from "./ops/rows.ts";
