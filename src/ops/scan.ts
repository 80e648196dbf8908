/**
 * Scans along one axis: `cumsum`, `cumprod`, `cummax`, `cummin`, with NumPy/PyTorch semantics plus
 * `exclusive` (output i combines the elements before i; output 0 is the identity) and `reverse`
 * (scan from the end of the axis).
 *
 * Ops validate and build a scan job (src/contract/scan.ts); each device runs it. On the GPU
 * (src/gpu/scan.ts) the rows (every axis but the scan axis) are read through strides and the plan
 * (`planScan`) picks one of three kernels from src/gpu/_codegen_scan.ts: a workgroup or a team of
 * invocations per row, a single-pass decoupled look-back for long sums on hardware GPUs, or the
 * multipass tile scan for other long rows (and where forward progress between workgroups is not
 * assured, as on software adapters). Inner axes with many rows give each row one invocation
 * walking the axis ("columns", coalesced across neighbouring rows); with few rows, a strided one
 * is first copied with the axis last. On WASM (src/wasm/scan.ts) the input is first copied with
 * the scan axis last and contiguous, scanned row by row (asm/scan.ts) and copied back into the
 * input's axis order.
 * @module
 */
import { taped } from "../_tape.ts";
import type { View } from "../contract/backend.ts";
import type { ScanJob } from "../contract/scan.ts";
import type { ScanOp, ScanType } from "../ir/scan.ts";
import { planOverrides } from "../plans/overrides.ts";
import { normalizeAxis } from "../core/shape.ts";
import type { DType } from "../core/dtype.ts";
import { describe, ValueError } from "../core/errors.ts";
import { backendFor } from "../runtime.ts";
import { metaOf, Tensor, tensorFromStorage, viewOf } from "../tensor.ts";
import { runElementwise, type TensorLike } from "./_dispatch.ts";
import { checkOptions } from "../core/options.ts";

/** Options of every scan. */
export interface ScanOptions {
  /** The axis to scan along (negative counts from the end). Default -1, the last. */
  axis?: number;
  /** Output i combines the elements before i (output 0 is the identity). Default false. */
  exclusive?: boolean;
  /** Scan from the end of the axis towards its start. Default false. */
  reverse?: boolean;
}

/** A scan's parameters after validation. */
interface Resolved {
  axis: number;
  exclusive: boolean;
  reverse: boolean;
}

function resolveOptions(op: string, options: unknown, rank: number): Resolved {
  if (options === undefined || options === null) {
    return { axis: rank === 0 ? 0 : rank - 1, exclusive: false, reverse: false };
  }
  if (typeof options !== "object" || Array.isArray(options)) {
    throw new ValueError({
      op,
      argument: "options",
      expected: "an object { axis?, exclusive?, reverse? }",
      received: describe(options),
    });
  }
  const o = checkOptions(op, options as Record<string, unknown>, ["axis", "exclusive", "reverse"]);
  for (const name of ["exclusive", "reverse"]) {
    if (o[name] !== undefined && typeof o[name] !== "boolean") {
      throw new ValueError({
        op,
        argument: `options.${name}`,
        expected: "a boolean",
        received: describe(o[name]),
      });
    }
  }
  // A 0-d tensor scans as one element: axis 0 or -1.
  const axis = normalizeAxis(op, (o.axis ?? -1) as number, Math.max(rank, 1), "options.axis");
  return { axis, exclusive: o.exclusive === true, reverse: o.reverse === true };
}

/** The register type of each dtype (float16 computes in f32). */
const REGISTER: Record<DType, ScanType> = {
  float32: "f32",
  float16: "f32",
  int32: "i32",
  uint32: "u32",
  bool: "bool",
};

/** The register type of a scan over `dtype`: floats in f32, bools counted in i32 by sums. */
function scanType(op: ScanOp, dtype: DType): ScanType {
  if (dtype === "bool" && (op === "sum" || op === "prod")) return "i32";
  return REGISTER[dtype];
}

function scan(op: string, scanOp: ScanOp, x: TensorLike, options?: ScanOptions): Tensor {
  if (!(x instanceof Tensor)) {
    // Validated before the scalar becomes a tensor, which a throw would leak.
    resolveOptions(op, options, 0);
    const t = runElementwise(op, [x], ["x"], ([leaf]) => leaf);
    try {
      return scan(op, scanOp, t, options);
    } finally {
      t.dispose();
    }
  }
  // Everything is checked before a pending input is computed or anything is allocated.
  const meta = metaOf(x, op, "x");
  const { axis, exclusive, reverse } = resolveOptions(op, options, meta.shape.length);
  const outDtype: DType = meta.dtype === "bool" && (scanOp === "sum" || scanOp === "prod")
    ? "int32"
    : meta.dtype;
  const type = scanType(scanOp, meta.dtype);
  const backend = backendFor(meta.device, op);
  const view = viewOf(x, op, "x");
  // A 0-d tensor scans as a one-element axis.
  const seen: View = view.shape.length === 0 ? { ...view, shape: [1], strides: [1] } : view;
  const job: ScanJob = {
    op,
    scan: scanOp,
    type,
    x: seen,
    axis,
    exclusive,
    reverse,
    outDtype,
    overrides: planOverrides(),
  };
  const { output: storage } = backend.scan(job);
  return tensorFromStorage(storage, outDtype, view.shape);
}

// ---------------------------------------------------------------------------------------------
// Public ops

/**
 * Cumulative sum along `axis` (default the last). Bools count as int32; integer sums wrap.
 * Float sums add in float32 on the GPU (in tiles, so not in sequence) and in float64 on WASM.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * await gyre.cumsum(gyre.tensor([1, 2, 3])).array(); // [1, 3, 6]
 * await gyre.cumsum(gyre.tensor([1, 2, 3]), { exclusive: true }).array(); // [0, 1, 3]
 * await gyre.cumsum(gyre.tensor([1, 2, 3]), { reverse: true }).array(); // [6, 5, 3]
 * ```
 */
export function cumsum(x: TensorLike, options?: ScanOptions): Tensor {
  return taped("cumsum", [x], { ...options }, () => cumsumOf(x, options));
}

function cumsumOf(x: TensorLike, options?: ScanOptions): Tensor {
  return scan("cumsum", "sum", x, options);
}

/**
 * Cumulative product along `axis`. Bools multiply as int32; integer products wrap.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * await gyre.cumprod(gyre.tensor([1, 2, 3, 4])).array(); // [1, 2, 6, 24]
 * ```
 */
export function cumprod(x: TensorLike, options?: ScanOptions): Tensor {
  return taped("cumprod", [x], { ...options }, () => cumprodOf(x, options));
}

function cumprodOf(x: TensorLike, options?: ScanOptions): Tensor {
  return scan("cumprod", "prod", x, options);
}

/**
 * Running maximum along `axis`, as PyTorch's `cummax` values: once a NaN appears it stays.
 * The exclusive identity is -Infinity, the int32 minimum, 0 (uint32) or false.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * await gyre.cummax(gyre.tensor([1, 3, 2, 5])).array(); // [1, 3, 3, 5]
 * ```
 */
export function cummax(x: TensorLike, options?: ScanOptions): Tensor {
  return taped("cummax", [x], { ...options }, () => cummaxOf(x, options));
}

function cummaxOf(x: TensorLike, options?: ScanOptions): Tensor {
  return scan("cummax", "max", x, options);
}

/**
 * Running minimum along `axis`: once a NaN appears it stays. The exclusive identity is
 * +Infinity, the int32 maximum, the uint32 maximum or true.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * await gyre.cummin(gyre.tensor([[3, 1], [2, 4]]), { axis: 0 }).array(); // [[3, 1], [2, 1]]
 * ```
 */
export function cummin(x: TensorLike, options?: ScanOptions): Tensor {
  return taped("cummin", [x], { ...options }, () => cumminOf(x, options));
}

function cumminOf(x: TensorLike, options?: ScanOptions): Tensor {
  return scan("cummin", "min", x, options);
}
