/**
 * What a tensor is on a device: a strided view of storage. Core types, below the IR and the
 * backend contract (src/contract/backend.ts), so both can name them without an import circle.
 * @module
 */
import type { DType } from "./dtype.ts";
import type { Shape } from "./shape.ts";

/** The devices a tensor can live on. */
export type DeviceName = "gpu" | "wasm";

/** What storage needs of the backend that owns it (src/contract/backend.ts extends it). */
export interface StorageOwner {
  readonly name: DeviceName;
  /**
   * Set when `init` replaced the runtime this device belongs to: its tensors can no longer be
   * used (their storage is in another device's memory than the current runtime's).
   */
  retired: boolean;
  /** Frees storage whose last view let go. */
  free(storage: Storage): void;
}

/** Device memory shared by one or more tensor views, freed when the last view lets go. */
export interface Storage {
  readonly backend: StorageOwner;
  /** Elements of `dtype` it holds. */
  readonly length: number;
  readonly dtype: DType;
  /** Views holding it. */
  refs: number;
}

/** A strided window onto a storage: what a tensor is. */
export interface View {
  storage: Storage;
  dtype: DType;
  shape: Shape;
  /** Strides in elements; 0 for a broadcast axis. */
  strides: readonly number[];
  /** First element, in elements. */
  offset: number;
}
