/**
 * `jit`: trace a function of tensors once per input signature, then replay it. The trace runs the
 * function normally (lazy fusion included) while the GPU backend records every allocation, upload
 * and dispatch; the replay re-issues the recorded dispatches over the new inputs' buffers, with a
 * memory plan that lets intermediates share buffers once their last reader has run. No op code,
 * no expression building and no pipeline lookup runs on a replay.
 *
 * A recorded buffer stands for a value, not for a GPU buffer: the pool hands a buffer released
 * during the trace to a later allocation of the same trace, so each allocation starts a new value
 * and each dispatch binds the values its buffers held when it was recorded.
 * @module
 */
import type { Storage, View } from "./contract/backend.ts";
import { DisposedError } from "./core/errors.ts";
import type { DispatchRecorder, GpuHost, GpuStorage, RecordedDispatch } from "./gpu/host.ts";
import { sizeClass } from "./gpu/buffer_pool.ts";
import { runtime } from "./runtime.ts";
import { Tensor } from "./tensor.ts";
import { tidy } from "./tidy.ts";

/**
 * Where a buffer of a recorded dispatch, or an output, comes from on a replay: an input of the
 * call, a temp the replay allocates, or storage the plan holds (data uploaded by the traced
 * function, tensors it closes over).
 */
type Slot =
  | { kind: "input"; index: number }
  | { kind: "temp"; index: number }
  | { kind: "constant"; storage: GpuStorage };

interface Plan {
  dispatches: { d: RecordedDispatch; slots: Slot[] }[];
  /** Byte size of each temp, and the dispatch index after which it is dead (outputs: never). */
  temps: { bytes: number; lastUse: number; output: boolean }[];
  outputs: { slot: Slot; view: Omit<View, "storage">; length: number }[];
  /** Storage the plan holds a reference on (the constants' storage), released by `dispose`. */
  held: GpuStorage[];
  /** The output structure: a tensor or an array of tensors. */
  single: boolean;
}

/** A function compiled by {@link jit}: call it like the original; `dispose` frees its constants. */
export interface JittedFunction<A extends Tensor[]> {
  (...inputs: A): Tensor | Tensor[];
  /**
   * Releases the constants every trace holds (data the function uploaded, tensors it closes
   * over) and forgets the traces; calling the function afterwards throws {@link DisposedError}.
   */
  dispose(): void;
  /** Same as `dispose`, for `using`. */
  [Symbol.dispose](): void;
  /** Traces recorded so far (one per input signature), replayable or not. For tests. */
  readonly traces: number;
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
 * recorded GPU dispatches on later calls. Tensors `fn` closes over, and tensors it creates from
 * data (`tensor`, uploads), are captured as constants of the trace: the replay sees their values
 * as of the trace, and the jitted function holds them until its `dispose()`. Tensors computed by
 * kernels inside `fn` (`full`, `eye`, `arange`, `random` with a seed) are recomputed by each
 * replay. On the WASM device, for traces that use a kernel keeping state across calls (the
 * look-back scan, one-dispatch reductions), and for functions that read tensors back, `fn` simply
 * runs each time.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const step = gyre.jit((x: gyre.Tensor) => gyre.relu(x.mul(gyre.tensor([2, -1]))).sum());
 * const out = step(gyre.ones([2])); // traces; later calls with a [2] float32 input replay
 * console.log(await (out as gyre.Tensor).data()); // Float32Array [2]
 * step.dispose(); // frees the constant [2, -1]
 * ```
 */
export function jit<A extends Tensor[]>(
  fn: (...inputs: A) => Tensor | Tensor[],
): JittedFunction<A> {
  const plans = new Map<string, Plan | null>();
  let disposed = false;
  const jitted = (...inputs: A): Tensor | Tensor[] => {
    if (disposed) {
      throw new DisposedError({
        op: "jit",
        argument: "function",
        expected: "a jitted function that was not disposed",
        received: "a disposed one",
      });
    }
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
  const dispose = () => {
    if (disposed) return;
    disposed = true;
    for (const plan of plans.values()) if (plan) releaseAll(plan.held);
    plans.clear();
  };
  return Object.defineProperties(jitted, {
    dispose: { value: dispose },
    [Symbol.dispose]: { value: dispose },
    traces: { get: () => plans.size },
  }) as unknown as JittedFunction<A>;
}

function releaseAll(storages: Iterable<GpuStorage>): void {
  for (const s of storages) if (--s.refs === 0) s.backend.free(s);
}

/** One value a trace allocated: its storage, and whether it holds uploaded data. */
interface TracedValue {
  storage: GpuStorage;
  uploaded: boolean;
  /** Temp index once a dispatch writes or reads it (kernel-written values only). */
  temp?: number;
}

function trace<A extends Tensor[]>(
  gpu: GpuHost,
  fn: (...inputs: A) => Tensor | Tensor[],
  inputs: A,
): { plan: Plan | null; result: Tensor | Tensor[] } {
  const inputBuffers = inputs.map((t) => (t._view("jit").storage as GpuStorage).buffer);
  // The value each buffer holds now, in the trace's order of events.
  const current = new Map<GPUBuffer, TracedValue>();
  const temps: Plan["temps"] = [];
  // Held from the moment they are seen, so the pool cannot hand them to a later allocation of
  // the trace (or of a replay) while the plan may still bind them.
  const held = new Set<GpuStorage>();
  const dispatches: Plan["dispatches"] = [];
  let replayable = true;
  const hold = (storage: GpuStorage) => {
    if (held.has(storage)) return;
    storage.refs++;
    held.add(storage);
  };
  const slotOf = (buffer: GPUBuffer, at: number): Slot | null => {
    const input = inputBuffers.indexOf(buffer);
    if (input >= 0) return { kind: "input", index: input };
    const value = current.get(buffer);
    if (value?.uploaded) return { kind: "constant", storage: value.storage };
    if (value) {
      if (value.temp === undefined) {
        value.temp = temps.length;
        temps.push({ bytes: buffer.size, lastUse: at, output: false });
      }
      temps[value.temp].lastUse = at;
      return { kind: "temp", index: value.temp };
    }
    // Storage made before the call (a tensor the function closes over); a device-owned scratch
    // buffer has none, and its kernels keep state across calls: not replayable.
    const storage = gpu.storageOf(buffer);
    if (!storage) return null;
    hold(storage);
    return { kind: "constant", storage };
  };
  const recorder: DispatchRecorder = {
    allocated: (b, storage) => current.set(b, { storage, uploaded: false }),
    uploaded: (b) => {
      const value = current.get(b)!;
      value.uploaded = true;
      hold(value.storage);
    },
    dispatched: (d) => {
      const at = dispatches.length;
      const slots = d.buffers.map((b) => slotOf(b, at));
      if (slots.some((s) => s === null)) replayable = false;
      dispatches.push({ d, slots: slots as Slot[] });
    },
  };
  gpu.recorder = recorder;
  let result: Tensor | Tensor[];
  try {
    result = tidy(() => {
      const out = fn(...inputs);
      for (const t of Array.isArray(out) ? out : [out]) t.realize();
      return out;
    });
  } catch (e) {
    releaseAll(held);
    throw e;
  } finally {
    gpu.recorder = null;
  }
  const outputs: Plan["outputs"] = [];
  for (const t of Array.isArray(result) ? result : [result]) {
    const view = t._view("jit");
    const slot = slotOf((view.storage as GpuStorage).buffer, dispatches.length);
    if (!slot) {
      replayable = false;
      break;
    }
    if (slot.kind === "temp") temps[slot.index].output = true;
    outputs.push({
      slot,
      view: { dtype: view.dtype, shape: view.shape, strides: view.strides, offset: view.offset },
      length: view.storage.length,
    });
  }
  if (!replayable) {
    releaseAll(held);
    return { plan: null, result };
  }
  // Keep only what a replay binds or returns.
  const used = new Set<GpuStorage>();
  for (const { slots } of dispatches) {
    for (const s of slots) if (s.kind === "constant") used.add(s.storage);
  }
  for (const o of outputs) if (o.slot.kind === "constant") used.add(o.slot.storage);
  releaseAll([...held].filter((s) => !used.has(s)));
  return {
    plan: { dispatches, temps, outputs, held: [...used], single: !Array.isArray(result) },
    result,
  };
}

function replay(gpu: GpuHost, plan: Plan, inputs: readonly Tensor[]): Tensor | Tensor[] {
  const inputViews = inputs.map((t) => t._view("jit"));
  // Memory plan: a temp's buffer returns to a local free list after its last use, for later
  // temps of the same size class; dispatches run in order, so that reuse is safe. A temp's first
  // use is the dispatch that writes it, so a buffer is never bound as both a live value and a
  // fresh output of one dispatch.
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
    if (slot.kind === "input") return (inputViews[slot.index].storage as GpuStorage).buffer;
    if (slot.kind === "constant") return slot.storage.buffer;
    let b = buffers[slot.index];
    if (!b) {
      const size = sizeClass(plan.temps[slot.index].bytes);
      // Written first by a kernel recorded after every earlier reader: a buffer released into the
      // open batch may serve, as in eager execution.
      b = free.get(size)?.pop() ?? gpu.bufferPool.acquire(size, "jit", true);
      acquired.push(b);
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
  // An output no kernel wrote (an empty tensor) still needs a buffer of its own.
  for (const o of plan.outputs) if (o.slot.kind === "temp") bufferFor(o.slot);
  // Intermediates go back to the pool (reusable after the batch is submitted); an output may
  // hold a buffer an intermediate held before it, which therefore stays.
  const outputBuffers = new Set(
    plan.outputs.flatMap((o) => (o.slot.kind === "temp" ? [buffers[o.slot.index]] : [])),
  );
  for (const b of new Set(acquired)) if (!outputBuffers.has(b)) gpu.bufferPool.release(b);
  // One storage per output buffer, however many outputs view it.
  const storages = new Map<number, GpuStorage>();
  const tensors = plan.outputs.map((o) => {
    const { slot } = o;
    let storage: Storage;
    if (slot.kind === "input") storage = inputViews[slot.index].storage;
    else if (slot.kind === "constant") storage = slot.storage;
    else {
      let s = storages.get(slot.index);
      if (!s) {
        s = gpu._adopt(buffers[slot.index], o.length, o.view.dtype);
        storages.set(slot.index, s);
      }
      storage = s;
    }
    return new Tensor({ ...o.view, storage });
  });
  return plan.single ? tensors[0] : tensors;
}
