/**
 * The backend contract: what the front end asks of a device. One job type per kernel family
 * (elementwise, reduce, rows, scan, pool, matmul) holding views and parameters (never a tensor),
 * capture for `jit`, and the `Backend` interface each device implements (src/gpu/backend.ts,
 * src/wasm/backend.ts). Modules here import only core, ir, plans and each other.
 * @module
 */
export * from "./backend.ts";
export * from "./capture.ts";
export * from "./elementwise.ts";
export * from "./matmul.ts";
export * from "./optim.ts";
export * from "./pool.ts";
export * from "./reduce.ts";
export * from "./rows.ts";
export * from "./scan.ts";
export * from "./sort.ts";
export * from "./indexing.ts";
