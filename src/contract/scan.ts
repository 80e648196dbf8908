/**
 * The scan family's job: cumsum, cumprod, cummax and cummin along one axis, with `exclusive` and
 * `reverse`. Ops build it (src/ops/scan.ts); each device runs it (src/gpu/scan.ts,
 * src/wasm/scan.ts).
 * @module
 */
import type { PlanOverrides } from "../plans/overrides.ts";
import type { DType } from "../core/dtype.ts";
import type { Storage, View } from "../core/view.ts";
import type { ScanOp, ScanType } from "../ir/scan.ts";

/** One scan of `x` along `axis`: what `Backend.scan` runs. */
export interface ScanJob {
  /** The plan overrides in force when the op was issued. */
  overrides: Readonly<PlanOverrides>;
  op: string;
  scan: ScanOp;
  /** What the scan computes in (see `scanType` in src/ops/scan.ts). */
  type: ScanType;
  /** The input, at least 1-d (a 0-d tensor is seen as a one-element axis); may be empty. */
  x: View;
  axis: number;
  /** Output i combines the elements before i (output 0 is the identity). */
  exclusive: boolean;
  /** Scan from the end of the axis towards its start. */
  reverse: boolean;
  /** The output's dtype (int32 for sums and products of bools, else x's). */
  outDtype: DType;
}

/** What a scan job makes: new contiguous storage of `outDtype` with x's shape. */
export interface ScanResult {
  output: Storage;
}
