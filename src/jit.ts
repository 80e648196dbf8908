/**
 * `jit`: trace a function of tensors once per input signature, then replay it. The trace runs the
 * function normally (lazy fusion included) while the GPU backend records every allocation, upload
 * and dispatch; the replay re-issues the recorded dispatches over the new inputs' buffers, with a
 * memory plan that lets intermediates share buffers once their last reader has run. No op code,
 * no expression building and no pipeline lookup runs on a replay.
 * @module
 */
import type { Storage, View } from "./_backend.ts";
import {
  type DispatchRecorder,
  type GpuBackend,
  GpuStorage,
  type RecordedDispatch,
} from "./gpu/backend.ts";
import { sizeClass } from "./gpu/pool.ts";
import { runtime } from "./runtime.ts";
import { Tensor } from "./tensor.ts";
import { tidy } from "./tidy.ts";

/** Where a buffer of a recorded dispatch comes from on a replay. */
type Slot =
  | { kind: "input"; index: number }
  | { kind: "temp"; index: number }
  | { kind: "constant"; buffer: GPUBuffer };

interface Plan {
  dispatches: { d: RecordedDispatch; slots: Slot[] }[];
  /** Byte size of each temp, and the dispatch index after which it is dead (outputs: never). */
  temps: { bytes: number; lastUse: number; output: boolean }[];
  outputs: { temp: number; view: Omit<View, "storage">; length: number }[];
  /**
   * Storage the recorded kernels read that is neither an input nor written by them: tensors the
   * function closes over and constants it made. The plan holds a reference on each.
   */
  constants: Storage[];
  /** The output structure: a tensor or an array of tensors. */
  single: boolean;
}

function signature(inputs: readonly Tensor[]): string {
  return inputs.map((t) => {
    const v = t._view("jit", "input");
    return `${v.storage.backend.name}:${v.dtype}:${v.shape.join("x")}:${
      v.strides.join(",")
    }@${v.offset}`;
  }).join("|");
}

/**
 * Compiles `fn` (a function of tensors returning a tensor or an array of tensors) into a function
 * that traces it once per input signature (device, dtype, shape, strides, offset) and replays the
 * recorded GPU dispatches on later calls. Tensors `fn` closes over are captured as constants (the
 * replay sees their values as of the trace). On the WASM device, and for functions that read
 * tensors back, `fn` simply runs each time.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const step = gyre.jit((x: gyre.Tensor, w: gyre.Tensor) => gyre.relu(x.mul(w).add(1)).sum());
 * const out = step(gyre.ones([1024]), gyre.ones([1024])); // traces; later calls replay
 * ```
 */
export function jit<A extends Tensor[]>(
  fn: (...inputs: A) => Tensor | Tensor[],
): (...inputs: A) => Tensor | Tensor[] {
  const plans = new Map<string, Plan | null>();
  return (...inputs: A): Tensor | Tensor[] => {
    const rt = runtime();
    const gpu = rt.gpu;
    const onGpu = gpu !== null && inputs.length > 0 && inputs.every((t) => t.device === "gpu");
    if (!onGpu) return fn(...inputs);
    for (const t of inputs) t.realize();
    const key = signature(inputs);
    const plan = plans.get(key);
    if (plan) return replay(gpu, plan, inputs);
    if (plan === null) return fn(...inputs);
    const traced = trace(gpu, fn, inputs);
    plans.set(key, traced.plan);
    return traced.result;
  };
}

function trace<A extends Tensor[]>(
  gpu: GpuBackend,
  fn: (...inputs: A) => Tensor | Tensor[],
  inputs: A,
): { plan: Plan | null; result: Tensor | Tensor[] } {
  const allocated = new Map<GPUBuffer, GpuStorage>();
  const uploaded = new Set<GPUBuffer>();
  const recorded: RecordedDispatch[] = [];
  const recorder: DispatchRecorder = {
    allocated: (b, storage) => allocated.set(b, storage),
    uploaded: (b) => uploaded.add(b),
    dispatched: (d) => recorded.push(d),
  };
  gpu.recorder = recorder;
  let result: Tensor | Tensor[];
  try {
    result = tidy(() => {
      const out = fn(...inputs);
      for (const t of Array.isArray(out) ? out : [out]) t.realize();
      return out;
    });
  } finally {
    gpu.recorder = null;
  }
  const outs = Array.isArray(result) ? result : [result];
  const inputBuffers = inputs.map((t) => (t._view("jit").storage as GpuStorage).buffer);
  // Temps: buffers allocated by the trace and written by its kernels (not uploaded constants).
  const tempIndex = new Map<GPUBuffer, number>();
  const temps: Plan["temps"] = [];
  const constants = new Set<GPUBuffer>();
  const dispatches = recorded.map((d, i) => ({
    d,
    slots: d.buffers.map((buffer): Slot => {
      const input = inputBuffers.indexOf(buffer);
      if (input >= 0) return { kind: "input", index: input };
      if (allocated.has(buffer) && !uploaded.has(buffer)) {
        let t = tempIndex.get(buffer);
        if (t === undefined) {
          t = temps.length;
          tempIndex.set(buffer, t);
          temps.push({ bytes: buffer.size, lastUse: i, output: false });
        }
        temps[t].lastUse = i;
        return { kind: "temp", index: t };
      }
      constants.add(buffer);
      return { kind: "constant", buffer };
    }),
  }));
  const outputs: Plan["outputs"] = [];
  for (const t of outs) {
    const view = t._view("jit");
    const buffer = (view.storage as GpuStorage).buffer;
    const temp = tempIndex.get(buffer);
    // An output that is an input, a constant or a view the kernels never wrote: not replayable.
    if (temp === undefined) return { plan: null, result };
    temps[temp].output = true;
    outputs.push({
      temp,
      view: { dtype: view.dtype, shape: view.shape, strides: view.strides, offset: view.offset },
      length: view.storage.length,
    });
  }
  // Hold the constants' storage: buffers the trace allocated are found through its record,
  // others (tensors made before the call) through the runtime's live storages.
  const held: Storage[] = [];
  for (const buffer of constants) {
    const storage = allocated.get(buffer) ?? gpu.storageOf(buffer);
    if (!storage) return { plan: null, result };
    storage.refs++;
    held.push(storage);
  }
  return {
    plan: { dispatches, temps, outputs, constants: held, single: !Array.isArray(result) },
    result,
  };
}

function replay(gpu: GpuBackend, plan: Plan, inputs: readonly Tensor[]): Tensor | Tensor[] {
  const inputBuffers = inputs.map((t) => (t._view("jit").storage as GpuStorage).buffer);
  // Memory plan: a temp's buffer returns to a local free list after its last use, for later
  // temps of the same size class; dispatches run in order, so that reuse is safe.
  const buffers: GPUBuffer[] = new Array(plan.temps.length);
  const free = new Map<number, GPUBuffer[]>();
  const dying = new Map<number, number[]>();
  plan.temps.forEach((t, i) => {
    if (t.output) return;
    const list = dying.get(t.lastUse) ?? [];
    list.push(i);
    dying.set(t.lastUse, list);
  });
  const acquired: GPUBuffer[] = [];
  const bufferFor = (slot: Slot): GPUBuffer => {
    if (slot.kind === "input") return inputBuffers[slot.index];
    if (slot.kind === "constant") return slot.buffer;
    let b = buffers[slot.index];
    if (!b) {
      const size = sizeClass(plan.temps[slot.index].bytes);
      b = free.get(size)?.pop() ?? gpu.pool.acquire(size, "jit");
      if (!plan.temps[slot.index].output) acquired.push(b);
      buffers[slot.index] = b;
    }
    return b;
  };
  plan.dispatches.forEach(({ d, slots }, i) => {
    gpu._dispatch(d.label, d.kernel, slots.map(bufferFor), d.uniforms, d.grid);
    for (const t of dying.get(i) ?? []) {
      const b = buffers[t];
      if (!b) continue;
      const list = free.get(b.size) ?? [];
      list.push(b);
      free.set(b.size, list);
    }
  });
  // Intermediates go back to the pool (reusable after the batch is submitted); an output may
  // hold a buffer an intermediate held before it, which therefore stays.
  const outputBuffers = new Set(plan.outputs.map((o) => buffers[o.temp]));
  for (const b of new Set(acquired)) if (!outputBuffers.has(b)) gpu.pool.release(b);
  // One storage per output buffer, however many outputs view it.
  const storages = new Map<number, GpuStorage>();
  const tensors = plan.outputs.map((o) => {
    let storage = storages.get(o.temp);
    if (!storage) {
      storage = new GpuStorage(gpu, buffers[o.temp], o.length, o.view.dtype);
      storages.set(o.temp, storage);
    }
    return new Tensor({ ...o.view, storage });
  });
  return plan.single ? tensors[0] : tensors;
}
