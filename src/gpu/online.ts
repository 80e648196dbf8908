/**
 * The GPU's side of online tuning (src/heuristics/online.ts): under `tuningMode() === "online"`
 * each job of a tunable family runs as one timed group (one compute pass between two timestamp
 * writes, as a profiler's group), and where its plan tried an alternative, the pair is resolved
 * into a small buffer mapped once the work's own submission is made. The read-back is not
 * awaited: the user's next sync pays nothing for it, and the sample lands when the GPU is done.
 * Jobs under a profiler, inside another timed group, or recorded by `jit` are not timed.
 * @module
 */
import {
  type OnlineSample,
  recordOnlineSample,
  setOnlineSampling,
  takeOnlineSample,
} from "../heuristics/online.ts";
import { tuningMode } from "../heuristics/consensus.ts";
import type { GpuHost } from "./host.ts";

/** Timestamp pairs in flight at once (a pair is busy from its job until its read-back). */
const SLOTS = 64;

interface TimerState {
  querySet: GPUQuerySet | null;
  free: number[];
}

const states = new WeakMap<GpuHost, TimerState>();

function stateOf(gpu: GpuHost): TimerState {
  let s = states.get(gpu);
  if (!s) states.set(gpu, s = { querySet: null, free: [...Array(SLOTS).keys()] });
  return s;
}

/**
 * Runs a job's host code `run`, timing it for online tuning where the mode is on and the job can
 * be timed. For the GPU backend's family entry points.
 */
export function timedForOnline<T>(gpu: GpuHost, run: () => T): T {
  if (
    tuningMode() !== "online" || !gpu.caps.timestampQuery || gpu.profiler || gpu.recorder ||
    gpu.batch.inTimedGroup
  ) return run();
  const state = stateOf(gpu);
  const slot = state.free.pop();
  if (slot === undefined) return run();
  state.querySet ??= gpu.device.createQuerySet({ type: "timestamp", count: 2 * SLOTS });
  const querySet = state.querySet;
  const dispatches = gpu.batch.totalDispatches;
  const submits = gpu.batch.totalSubmits;
  gpu.batch.beginTimedGroup({ querySet, begin: 2 * slot, end: 2 * slot + 1 });
  setOnlineSampling(true);
  let sample: OnlineSample | null = null;
  try {
    return run();
  } finally {
    setOnlineSampling(false);
    gpu.batch.endTimedGroup();
    sample = takeOnlineSample();
    // A group that ran nothing wrote no timestamps (resolving those waits forever on Vulkan); one
    // split by a submission timed only its last part.
    const whole = gpu.batch.totalDispatches > dispatches && gpu.batch.totalSubmits === submits;
    if (sample && whole) readBack(gpu, state, querySet, slot, sample);
    else state.free.push(slot);
  }
}

/** Resolves a slot's pair and maps it once submitted; the sample is recorded when it lands. */
function readBack(
  gpu: GpuHost,
  state: TimerState,
  querySet: GPUQuerySet,
  slot: number,
  sample: OnlineSample,
): void {
  const resolved = gpu.device.createBuffer({
    label: "gyre online timestamps",
    size: 16,
    usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC,
  });
  const staging = gpu.device.createBuffer({
    size: 16,
    usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
  });
  const encoder = gpu.batch.encoderForCopies();
  encoder.resolveQuerySet(querySet, 2 * slot, 2, resolved, 0);
  encoder.copyBufferToBuffer(resolved, 0, staging, 0, 16);
  gpu.batch.afterSubmit(() => {
    staging.mapAsync(GPUMapMode.READ).then(() => {
      const [begin, end] = new BigUint64Array(staging.getMappedRange().slice(0));
      recordOnlineSample(sample, Number(end - begin) / 1000);
    }).catch(() => {/* a lost sample: the trial waits for another call */}).finally(() => {
      staging.destroy();
      resolved.destroy();
      state.free.push(slot);
    });
  });
}
