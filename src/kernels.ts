/**
 * The kernel registry: every GPU kernel gyre can run, with its WASM reference, its GPU variants
 * and the plan that chooses among them. One place to list them keeps the property-test coverage
 * check (tests/kernel_coverage_test.ts) honest: a kernel added here without a property test fails
 * the suite.
 * @module
 */
import { BINARY, UNARY } from "./ir/elementwise_table.ts";
import { FAMILY_VARIANTS, type GpuFamily } from "./plans/variants.ts";

/** A family's generator and every variant its plan names. */
function family(name: GpuFamily, generator: string): KernelEntry["gpu"] {
  return { generator, family: name, variants: FAMILY_VARIANTS[name] };
}

/** One registered kernel. */
export interface KernelEntry {
  /** Stable id, e.g. "elementwise/add" or "reduce/sum". */
  id: string;
  /** The WASM reference: AssemblyScript export names (a prefix ending in `_` stands for all of a family). */
  wasmReference: string;
  /**
   * The WGSL generator, the kernel family whose plan chooses among its variants, and those
   * variants (`FAMILY_VARIANTS`, built from the plans' own types: they cannot drift).
   */
  gpu: { generator: string; family: GpuFamily; variants: readonly string[] };
  /** The plan function (src/plans/). */
  plan: string;
}

const ELEMENTWISE_GPU = family("elementwise", "gpu/_codegen_elementwise.ts");
const internal = new Set([
  "pcgHash",
  "bitwiseXor",
  "bitwiseAnd",
  "bitwiseOr",
  "shiftRight",
  "floorDiv",
  "isnan",
]);

/**
 * Every registered kernel.
 *
 * @example
 * ```ts
 * import { KERNELS } from "@gyre/gyre/tuning";
 * console.log(KERNELS.map((k) => k.id));
 * ```
 */
export const KERNELS: readonly KernelEntry[] = [
  ...Object.keys(UNARY).map((op) => ({
    id: `elementwise/${op}`,
    wasmReference: `unary_${op}_`,
    gpu: ELEMENTWISE_GPU,
    plan: "planElementwise",
  })),
  ...Object.keys(BINARY).map((op) => ({
    id: `elementwise/${op}`,
    wasmReference: `binary_${op}_`,
    gpu: ELEMENTWISE_GPU,
    plan: "planElementwise",
  })),
  {
    id: "elementwise/where",
    wasmReference: "where_",
    gpu: ELEMENTWISE_GPU,
    plan: "planElementwise",
  },
  { id: "elementwise/cast", wasmReference: "cast_", gpu: ELEMENTWISE_GPU, plan: "planElementwise" },
  // A plain copy of a transposed matrix (a clone of `x.transpose()`): WASM copies it as a cast
  // to the same dtype does.
  {
    id: "elementwise/transposedCopy",
    wasmReference: "cast_",
    gpu: {
      generator: "gpu/_codegen_transpose.ts",
      family: "elementwise",
      variants: ["transpose", "tiled"],
    },
    plan: "planElementwise",
  },
  {
    id: "elementwise/scatter",
    wasmReference: "scatter_",
    gpu: {
      generator: "gpu/_codegen_elementwise.ts",
      family: "elementwise",
      variants: ["vec4", "scalar"],
    },
    plan: "planElementwise",
  },
  ...["sum", "prod", "max", "min", "argmax", "argmin", "logsumexp", "moments"].map((op) => ({
    id: `reduce/${op}`,
    wasmReference: `reduce_${op}_`,
    gpu: family("reduce", "gpu/_codegen_reduce.ts"),
    plan: "planReduce",
  })),
  ...[
    ["maxPool2d", "pool_max_"],
    ["avgPool2d", "pool_avg_"],
    ["adaptiveMaxPool2d", "pool_adaptive_max_"],
    ["adaptiveAvgPool2d", "pool_adaptive_avg_"],
  ].map(([op, wasm]) => ({
    id: `pool/${op}`,
    wasmReference: wasm,
    gpu: family("pool", "gpu/_codegen_pool.ts"),
    plan: "planPool",
  })),
  ...["sort", "argsort", "rankK", "kthvalue", "quantile", "searchsorted"].map((op) => ({
    id: `sort/${op}`,
    wasmReference: "sort_",
    gpu: family("sort", "gpu/_codegen_sort.ts"),
    plan: "planSort",
  })),
  ...["gather", "takeAlongAxis", "take", "indexSelect", "at"].map((op) => ({
    id: `indexing/${op}`,
    wasmReference: "indexing_gather",
    gpu: family("indexing", "gpu/_codegen_indexing.ts"),
    plan: "planGather",
  })),
  ...[
    "scatter",
    "scatterAdd",
    "segmentSum",
    "segmentMean",
    "segmentMax",
    "segmentMin",
    "segmentProd",
    "bincount",
  ].map((op) => ({
    id: `indexing/${op}`,
    wasmReference: "indexing_scatter",
    gpu: family("indexing", "gpu/_codegen_indexing.ts"),
    plan: "planScatter",
  })),
  ...["sum", "prod", "max", "min"].map((op) => ({
    id: `scan/cum${op}`,
    wasmReference: `scan_${op}_`,
    gpu: family("scan", "gpu/_codegen_scan.ts"),
    plan: "planScan",
  })),
  ...[
    ["softmax", "softmax_rows_f32"],
    ["logSoftmax", "softmax_rows_f32"],
    ["layerNorm", "layer_norm_rows_f32"],
    ["rmsNorm", "layer_norm_rows_f32"],
    ["groupNorm", "layer_norm_rows_f32"],
    ["batchNorm", "layer_norm_rows_f32"],
  ].map(([op, wasm]) => ({
    id: `rows/${op}`,
    wasmReference: wasm,
    gpu: family("rows", "gpu/_codegen_rows.ts"),
    plan: "planRows",
  })),
  // The one-pass backward of the row ops: their reference is the composed backward on WASM (the
  // row reductions and elementwise kernels the gradient rule uses where a device has no routine).
  ...["softmax", "logSoftmax", "layerNorm", "rmsNorm"].map((op) => ({
    id: `rows/${op}.backward`,
    wasmReference: "reduce_",
    gpu: family("rows", "gpu/_codegen_rows_backward.ts"),
    plan: "planRowsBackward",
  })),
  // The optimizers' fused Adam step: one elementwise kernel of three outputs; its reference is
  // the update composed of elementwise kernels on WASM (src/autograd/_adam.ts).
  {
    id: "optim/adam",
    wasmReference: "elementwise_",
    gpu: family("elementwise", "gpu/optim.ts"),
    plan: "none: one kernel, vec4 where the layout allows",
  },
  ...[["matmul", "gemm_"], ["linear", "gemm_f32"]].map(([op, wasm]) => ({
    id: `matmul/${op}`,
    wasmReference: wasm,
    gpu: family("matmul", "gpu/_codegen_matmul.ts"),
    plan: "planMatmul",
  })),
];

/**
 * Ids of kernels that serve only other ops (the RNG hash, index arithmetic): tested through them.
 *
 * @example
 * ```ts
 * import { INTERNAL_KERNELS } from "@gyre/gyre/tuning";
 * INTERNAL_KERNELS.has("elementwise/pcgHash"); // true
 * ```
 */
export const INTERNAL_KERNELS: ReadonlySet<string> = new Set(
  [...internal].map((op) => `elementwise/${op}`),
);
