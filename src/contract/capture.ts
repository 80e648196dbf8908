/**
 * Capture and replay (what `jit` asks of a device): the device records the work a function issues
 * over some input views, and later re-issues it over other views of the same signature, without
 * running any op code. A device that cannot replay returns no session and the function runs each
 * time.
 * @module
 */
import type { View } from "../core/view.ts";

/** Recorded device work, replayable over new inputs of the traced signature. */
export interface Capture {
  /**
   * Re-issues the recorded work over `inputs`; returns the outputs' views, each over storage
   * the caller takes a reference on (wrapping it in a tensor does).
   */
  replay(inputs: readonly View[]): View[];
  /** Releases the storage the capture holds (data uploaded while tracing, captured tensors). */
  release(): void;
}

/** A recording in progress. */
export interface CaptureSession {
  /**
   * Stops recording. Given the outputs' views, returns the capture, or null where the recorded
   * work cannot be replayed (it used device state that persists across calls). Given null (the
   * function threw), only stops.
   */
  finish(outputs: readonly View[] | null): Capture | null;
}
