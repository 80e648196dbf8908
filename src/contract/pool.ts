/**
 * The pooling family's job: 2-D max and average pooling, regular and adaptive, over contiguous or
 * strided [..., H, W] planes. Ops validate and build it (src/ops/pool.ts); each device runs it
 * (src/gpu/pool.ts, src/wasm/pool.ts).
 * @module
 */
import type { PlanOverrides } from "../plans/overrides.ts";
import type { Storage, View } from "../core/view.ts";

/**
 * Dtypes with a pooling kernel (int32: max pooling only).
 *
 * @example
 * ```ts
 * const dtype: PoolDType = "float16";
 * ```
 */
export type PoolDType = "float32" | "float16" | "int32";

/** A [height, width] pair. */
export type Pair = [number, number];

/** Everything a kernel needs, after validation. */
export interface PoolProblem {
  op: "max" | "avg";
  adaptive: boolean;
  dtype: PoolDType;
  planes: number;
  inHeight: number;
  inWidth: number;
  outHeight: number;
  outWidth: number;
  outShape: number[];
  kernel: Pair;
  stride: Pair;
  padding: Pair;
  dilation: Pair;
  countIncludePad: boolean;
  /** divisorOverride, 0 when absent. */
  divisor: number;
}

/** One validated pooling problem over `x`: what `Backend.pool` runs. */
export interface PoolJob {
  /** The plan overrides in force when the op was issued. */
  overrides: Readonly<PlanOverrides>;
  /** The op's name (errors, kernel records). */
  op: string;
  /** The input, of shape [..., inHeight, inWidth] and the problem's dtype; any strides. */
  x: View;
  problem: PoolProblem;
  /** Also return the int32 flat index `h * W + w` of each maximum within its plane. */
  indices: boolean;
}

/**
 * What a pooling job makes: storage of `problem.outShape`, contiguous, or channels-last where
 * `channelsLast` says so.
 */
export interface PoolResult {
  /** The pooled values, of the problem's dtype. */
  values: Storage;
  /**
   * The values are laid out channels-last ([..., OH, OW, C] in memory for the [..., C, OH, OW]
   * result, as PyTorch keeps for channels_last input); absent or false: contiguous.
   */
  channelsLast?: boolean;
  /** The int32 indices, when the job asked for them. */
  indices: Storage | null;
}
