// The WASM kernel module's entry: everything exported here is callable from src/wasm/.
// Built by scripts/build.ts with asc (SIMD on, memory imported from JS).
export * from "./_generated";
export * from "./pool";
export * from "./scan";
export * from "./rows";
export * from "./matmul";
export * from "./transpose";
export * from "./sort";
export { exp_f32x4_array, sigmoid_f32x4_array } from "./vector_math";
export * from "./indexing";
export * from "./_choose";
