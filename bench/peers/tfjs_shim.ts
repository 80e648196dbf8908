/// <reference lib="deno.window" />
// Browser-detection shim for TensorFlow.js under Deno. Imported by tfjs.ts
// BEFORE @tensorflow/tfjs-core so it runs before tfjs-core's module-level
// platform selection (ES module evaluation order; esbuild keeps it).
//
// Why: tfjs-core picks its platform at import time:
//   IS_BROWSER = (window && window.document) || typeof WorkerGlobalScope != undefined
//   IS_NODE    = typeof process.versions.node != undefined
// Deno 2 defines `process` (Node compat) but neither `window.document` nor
// `WorkerGlobalScope`, so tfjs-core would choose PlatformNode, whose
// constructor does `require('util')`, which fails inside an ES module bundle
// ("Dynamic require of util is not supported"). Defining a placeholder
// `WorkerGlobalScope` makes IS_BROWSER true, so tfjs-core uses PlatformBrowser
// (fetch, performance.now, TextEncoder/TextDecoder), all of which Deno
// provides natively. Nothing else in tfjs-core or tfjs-backend-webgpu reads
// WorkerGlobalScope. `navigator.gpu` is native in Deno, so the WebGPU backend
// itself needs no shim.
const g = globalThis as { WorkerGlobalScope?: unknown };
if (typeof g.WorkerGlobalScope === "undefined") {
  g.WorkerGlobalScope = class WorkerGlobalScope {};
}
