/**
 * The contract between the device-independent front end (tensors, ops) and each device.
 * A backend owns storage on its device and runs three kinds of work: elementwise expressions,
 * row reductions and read-backs. Everything else lowers to these.
 * @module
 */
import type { DType, TypedArray } from "../core/dtype.ts";

import type { PoolJob, PoolResult } from "./pool.ts";
import type { CaptureSession } from "./capture.ts";
import type { MatmulJob, MatmulResult } from "./matmul.ts";
import type { ElementwiseJob } from "./elementwise.ts";
import type { ReduceJob } from "./reduce.ts";
import type { RowsBackwardJob, RowsJob, RowsResult } from "./rows.ts";
import type { AdamJob, AdamResult } from "./optim.ts";
import type { PreparedResiduals, ResidualProgram } from "./residuals.ts";
import type { Choice } from "../plans/mod.ts";

import { type FamilyChoice, type GpuFamily, variantsOf } from "../plans/variants.ts";
import type { ScanJob, ScanResult } from "./scan.ts";
import type {
  QuantileJob,
  QuantileResult,
  SearchJob,
  SearchResult,
  SortJob,
  SortResult,
} from "./sort.ts";
import type { GatherJob, GatherResult, ScatterJob, ScatterResult } from "./indexing.ts";
import type { DeviceName, Storage, StorageOwner, View } from "../core/view.ts";

export type { DeviceName, Storage, View };

/** Counters that leak tests compare before and after. */
export interface MemoryStats {
  /** Allocations in use (buffers on the GPU, blocks in WASM memory). */
  liveBuffers: number;
  liveBytes: number;
}

/** One device. */
export interface Backend extends StorageOwner {
  readonly name: DeviceName;
  /** Copies host data (in `hostArray` layout for `dtype`) into new storage. */
  upload(dtype: DType, data: TypedArray): Storage;
  /**
   * Evaluates an elementwise expression: into new contiguous storage of `expr.dtype`, or through
   * the strides of the job's `out` view into its storage.
   */
  evaluate(job: ElementwiseJob): Storage;
  /**
   * Throws the error `allocate` would throw for this size, without allocating: lazy results check
   * at the call that makes them, not later when they are computed.
   */
  checkAllocation(op: string, dtype: DType, length: number): void;
  /** New uninitialised storage (filled by `evaluate` with an `out` view). */
  allocate(op: string, dtype: DType, length: number): Storage;
  /**
   * Reduces a job's input over its axes into new contiguous storage of `outDtype` with the kept
   * axes' shape; null only when the job's fused epilogue cannot run in the device's kernel (the
   * caller then runs it apart).
   */
  reduce(job: ReduceJob): Storage | null;
  /**
   * Runs a row job (softmax and the norms). Null only when the job's fused epilogue cannot run
   * in the row kernel; the caller then runs it without one.
   */
  rows(job: RowsJob): RowsResult | null;
  /**
   * A row op's backward pass in one kernel, where the device has one for the job (else null:
   * the caller composes it from other jobs). Optional: devices without it always compose.
   */
  rowsBackward?(job: RowsBackwardJob): Storage | null;
  /**
   * One Adam step of a parameter in one kernel, where the device has one (else null: the caller
   * composes it). Optional, as `rowsBackward`.
   */
  adam?(job: AdamJob): AdamResult | null;
  /**
   * Compiled residuals (src/scalar/): the program's data and kernels on this device, ready to
   * evaluate, differentiate and solve. `accumulation` asks for J^T r by "gather" (columns) or
   * "atomic" (float32 atomics; devices without them gather).
   */
  prepareResiduals(
    program: ResidualProgram,
    accumulation: "gather" | "atomic",
  ): PreparedResiduals;
  /** Runs a scan job (cumsum, cumprod, cummax, cummin along one axis). */
  scan(job: ScanJob): ScanResult;
  /** Runs a sort job: a window of each row's stable order (sort, argsort, Rank-K, kthvalue). */
  sort(job: SortJob): SortResult;
  /** Runs a quantile job (median, quantile and their NaN-skipping forms). */
  quantile(job: QuantileJob): QuantileResult;
  /** Runs a search job (searchsorted). */
  searchsorted(job: SearchJob): SearchResult;
  /**
   * Runs a gather job (takeAlongAxis, take, indexSelect, `at`). Null only when the job's fused
   * epilogue cannot run in the gather's kernel; the caller then runs it apart.
   */
  gather(job: GatherJob): GatherResult | null;
  /** Runs a scatter job (scatter, scatterAdd, the segment reductions, bincount). */
  scatter(job: ScatterJob): ScatterResult;
  /** Runs a pooling job (2-D max and average pooling, regular and adaptive). */
  pool(job: PoolJob): PoolResult;
  /**
   * Runs a matrix product (matmul, linear). Null only when the job's fused epilogue cannot run
   * in the product's kernel; the caller then runs it without one.
   */
  matmul(job: MatmulJob): MatmulResult | null;
  /**
   * Starts capturing the work issued over `inputs` for replay (`jit`); null where the device does
   * not replay.
   */
  capture(inputs: readonly View[]): CaptureSession | null;
  /** Reads many views back; one device synchronisation for all of them. */
  read(views: readonly View[]): Promise<TypedArray[]>;
  /** Frees storage whose last view let go. */
  free(storage: Storage): void;
  /** Sends recorded work to the device without waiting. */
  flush(): void;
  /** Allocation counters. */
  stats(): MemoryStats;
}

/** One kernel launch, as `explain` and tests see it. */
export interface KernelRecord {
  /** The device that launched it. */
  device: DeviceName;
  /** The op that launched it; fused elementwise kernels name every op folded in, joined by "+". */
  kernel: string;
}

/** A plan's choice as a device took it: which variant of a family's kernels ran. */
export interface PlanRecord {
  /** The device that ran it. */
  device: DeviceName;
  /** The kernel family whose plan it is. */
  family: GpuFamily;
  /** The op (label) the work was issued as. */
  op: string;
  /** The plan's choice, the override applied. */
  choice: Choice;
  /** The named variants that run (see `variantsOf`): what coverage counts. */
  variants: string[];
  /** The override the work was issued under, if any: tests check that a forced variant ran. */
  override: Readonly<Record<string, unknown>> | undefined;
}

/** Callbacks told of every plan a device takes (empty unless something is listening). */
export const planObservers: Set<(record: PlanRecord) => void> = new Set();

/** Tells the observers which variant a device runs; returns the choice. */
export function observePlan<F extends GpuFamily>(
  device: DeviceName,
  family: F,
  op: string,
  choice: FamilyChoice[F],
  override: Readonly<Partial<FamilyChoice[F]>> | null | undefined,
  context: { acrossAxis?: boolean } = {},
): FamilyChoice[F] {
  if (planObservers.size === 0) return choice;
  const variants = variantsOf(family, choice, context);
  const record = { device, family, op, choice, variants, override: override ?? undefined };
  for (const observer of planObservers) observer(record);
  return choice;
}

/** Callbacks told of every kernel launch (empty unless something is listening). */
export const kernelObservers: Set<(record: KernelRecord) => void> = new Set();

/** Tells the observers of a launch. */
export function observeKernel(device: DeviceName, kernel: string): void {
  for (const observer of kernelObservers) observer({ device, kernel });
}

/**
 * The backend that owns a view's storage. Storage names its owner by the narrow `StorageOwner`
 * (core cannot name the contract), but only backends make storage.
 */
export function backendOf(view: View): Backend {
  return view.storage.backend as Backend;
}
