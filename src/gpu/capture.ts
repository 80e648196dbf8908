/**
 * Capture and replay on the GPU (what `jit` runs on): while a function is traced, the backend
 * tells a recorder of every allocation, upload and dispatch; a replay re-issues the recorded
 * dispatches over the new inputs' buffers, with a memory plan that lets intermediates share
 * buffers once their last reader has run. No op code, no expression building and no pipeline
 * lookup runs on a replay.
 *
 * A recorded buffer stands for a value, not for a GPU buffer: the pool hands a buffer released
 * during the trace to a later allocation of the same trace, so each allocation starts a new value
 * and each dispatch binds the values its buffers held when it was recorded.
 * @module
 */
import type { Storage, View } from "../core/view.ts";
import type { Capture, CaptureSession } from "../contract/capture.ts";
import {
  type DispatchRecorder,
  type GpuHost,
  type GpuStorage,
  INDEX_CHECK_SLOT_WORD,
  type IndexCheck,
  type RecordedDispatch,
} from "./host.ts";
import { sizeClass } from "../core/size_class.ts";

/**
 * Where a buffer of a recorded dispatch, or an output, comes from on a replay: an input of the
 * call, a temp the replay allocates, or storage the plan holds (data uploaded by the traced
 * function, tensors it closes over).
 */
type Slot =
  | { kind: "input"; index: number }
  | { kind: "temp"; index: number }
  | { kind: "constant"; storage: GpuStorage }
  | { kind: "scratch"; purpose: string };

/**
 * Scratch buffers a replay may bind as they are: the index checks (each replayed check takes a
 * fresh slot, see INDEX_CHECK_SLOT_WORD), the indexing kernels' unused bindings, and the radix
 * selection's histograms (each pick zeroes the words its pass counted, so they are zero between
 * passes, as when made). Other scratch (look-back states, tickets) keeps state across calls, so
 * work binding it is not replayed.
 */
const STATELESS_SCRATCH = new Set([
  "index-checks",
  "sort selection histograms",
  "indexing-none",
  "indexing-no-updates",
  "indexing-no-checks",
  "indexing-no-carried-counts",
]);

interface Plan {
  /** Each dispatch, its buffers' slots, and the index check it reports into, if any. */
  dispatches: { d: RecordedDispatch; slots: Slot[]; check?: IndexCheck }[];
  /** Byte size of each temp, and the dispatch index after which it is dead (outputs: never). */
  temps: { bytes: number; lastUse: number; output: boolean }[];
  outputs: { slot: Slot; view: Omit<View, "storage">; length: number }[];
  /** Storage the plan holds a reference on (the constants' storage), released by `dispose`. */
  held: GpuStorage[];
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

/** Starts recording the work issued over `inputs` (see src/contract/capture.ts). */
export function startCapture(gpu: GpuHost, inputs: readonly View[]): CaptureSession {
  const inputBuffers = inputs.map((v) => (v.storage as GpuStorage).buffer);
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
    const purpose = gpu.scratchPurpose(buffer);
    if (purpose !== undefined && STATELESS_SCRATCH.has(purpose)) {
      return { kind: "scratch", purpose };
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
      const reports = slots.some((s) => s?.kind === "scratch" && s.purpose === "index-checks");
      dispatches.push({ d, slots: slots as Slot[], ...(reports ? { check: pendingCheck } : {}) });
      if (reports && !pendingCheck) replayable = false;
      if (reports) pendingCheck = undefined;
    },
    indexChecked: (check) => (pendingCheck = check),
  };
  let pendingCheck: IndexCheck | undefined;
  gpu.recorder = recorder;
  const finish = (outputViews: readonly View[] | null): Capture | null => {
    gpu.recorder = null;
    if (!outputViews) {
      releaseAll(held);
      return null;
    }
    const outputs: Plan["outputs"] = [];
    for (const view of outputViews) {
      const slot = slotOf((view.storage as GpuStorage).buffer, dispatches.length);
      if (!slot || slot.kind === "scratch") {
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
      return null;
    }
    // Keep only what a replay binds or returns.
    const used = new Set<GpuStorage>();
    for (const { slots } of dispatches) {
      for (const s of slots) if (s.kind === "constant") used.add(s.storage);
    }
    for (const o of outputs) if (o.slot.kind === "constant") used.add(o.slot.storage);
    releaseAll([...held].filter((s) => !used.has(s)));
    const plan: Plan = { dispatches, temps, outputs, held: [...used] };
    return {
      replay: (views) => replay(gpu, plan, views),
      release: () => releaseAll(plan.held),
    };
  };
  return { finish };
}

function replay(gpu: GpuHost, plan: Plan, inputViews: readonly View[]): View[] {
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
    if (slot.kind === "scratch") return gpu.scratch(slot.purpose, 0);
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
  plan.dispatches.forEach(({ d, slots, check }, i) => {
    let uniforms = d.uniforms;
    if (check) {
      // This run's own slot, read back (and thrown) with the next read as in eager work.
      uniforms = uniforms.slice();
      uniforms[INDEX_CHECK_SLOT_WORD] =
        gpu.indexCheck(check.op, check.argument, check.expected, check.order).slot;
    }
    gpu.dispatch(d.label, d.kernel, slots.map(bufferFor), uniforms, d.grid);
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
  return plan.outputs.map((o) => {
    const { slot } = o;
    let storage: Storage;
    if (slot.kind === "input") storage = inputViews[slot.index].storage;
    else if (slot.kind === "constant") storage = slot.storage;
    else if (slot.kind === "scratch") throw new Error("internal: a scratch buffer as an output");
    else {
      let s = storages.get(slot.index);
      if (!s) {
        s = gpu.adopt(buffers[slot.index], o.length, o.view.dtype);
        storages.set(slot.index, s);
      }
      storage = s;
    }
    return { ...o.view, storage };
  });
}
