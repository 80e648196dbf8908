/**
 * Compiled residuals on the GPU (src/contract/residuals.ts): the program's data in three
 * buffers (u32 structure, f32 constants, one f32 workspace holding every vector and the solver
 * state), kernels from src/gpu/_codegen_residuals.ts, and a Levenberg-Marquardt loop that lives on
 * the device: each iteration is a fixed list of dispatches (evaluation, normal equations,
 * conjugate gradients, trial, acceptance) that decide everything there, so the host records
 * iterations ahead and reads only the small state block back, every `iterationsPerRead`
 * iterations and without waiting for it before recording more.
 * @module
 */
import { GpuError } from "../core/errors.ts";
import type {
  Evaluation,
  PreparedResiduals,
  ResidualProgram,
  SolveOutcome,
  SolveSettings,
  StopReason,
} from "../contract/residuals.ts";
import type { GpuHost, GpuStorage } from "./host.ts";
import type { Kernel } from "./batch.ts";
import {
  generateJacobianProduct,
  generateParameterKernel,
  generateResidualKernel,
  GROUP_WORDS,
  MAX_GROUPS,
  STATE,
  STATE_WORDS,
  STOP_REASONS,
  UNIFORM_FIELDS,
  UNIFORM_WORDS,
  WORKGROUP,
} from "./_codegen_residuals.ts";

type Field = (typeof UNIFORM_FIELDS)[number];
type KernelName =
  | "residual"
  | "atomic"
  | "product"
  | "normal"
  | "cg"
  | "cgUpdate"
  | "trial"
  | "accept"
  | "gradient";

/** Batches of solver iterations recorded ahead of the last state the host has read. */
const MAX_READS_IN_FLIGHT = 6;

/** Bytes between uniform slots (WebGPU's minimum dynamic-offset alignment). */
const SLOT_BYTES = 256;

const f32Bits = (v: number): number => new Uint32Array(new Float32Array([v]).buffer)[0];

/**
 * The program prepared on the GPU. `accumulation` picks how `valueAndGradient` sums J^T r:
 * "gather" over the Jacobian's columns (no atomics, deterministic) or "atomic" (float32 atomic
 * adds into the gradient, where the device has them).
 *
 * @example
 * ```ts
 * import { gpuBackendOf, init } from "../runtime.ts";
 * import { compileProgram } from "../scalar/program.ts";
 * import { V } from "../scalar/value.ts";
 * import { prepareResidualsGpu } from "./residuals.ts";
 * await init({ device: "auto" });
 * const gpu = gpuBackendOf();
 * if (gpu) {
 *   const x = [V.W(0), V.W(0)];
 *   const program = compileProgram(x, [V.sub(x[0], 1), V.sub(x[1], 2)]);
 *   const prepared = prepareResidualsGpu(gpu, program, "gather");
 *   await prepared.evaluate(new Float64Array([0, 0])); // residuals -1, -2
 *   prepared.dispose();
 * }
 * ```
 */
export function prepareResidualsGpu(
  host: GpuHost,
  program: ResidualProgram,
  accumulation: "gather" | "atomic",
): PreparedResiduals {
  return new GpuResiduals(host, program, accumulation);
}

class GpuResiduals implements PreparedResiduals {
  readonly device = "gpu" as const;
  readonly accumulation: "gather" | "atomic";
  /** Dispatches recorded, for tests and the bench. */
  dispatches = 0;
  /** The bench sets it: solves then time their batches with GPU timestamps. */
  profile = false;
  /** GPU time of the last profiled solve's batches, in milliseconds. */
  lastGpuMs = 0;
  #host: GpuHost;
  #program: ResidualProgram;
  #offsets: Record<Field, number>;
  #st: GpuStorage;
  #cs: GpuStorage;
  #ws: GpuStorage;
  #gacc: GpuStorage | null = null;
  #uniforms: GPUBuffer;
  #slots = new Map<string, number>();
  #slotData: Uint32Array<ArrayBuffer>[] = [];
  #kernels = new Map<KernelName, Kernel>();
  #bind: GPUBindGroup;
  #bindAtomic: GPUBindGroup | null = null;
  #nrows: number;
  #ncols: number;
  #stateBase: number;
  #disposed = false;

  constructor(host: GpuHost, program: ResidualProgram, accumulation: "gather" | "atomic") {
    host.checkLive("CompiledResiduals.compile", ["float32"]);
    this.#host = host;
    this.#program = program;
    this.accumulation = accumulation === "atomic" && host.caps.float32Atomics ? "atomic" : "gather";
    const { parameters: n, residuals: m, entries } = program;
    this.#nrows = Math.min(MAX_GROUPS, Math.max(1, Math.ceil(m / WORKGROUP)));
    this.#ncols = Math.min(MAX_GROUPS, Math.max(1, Math.ceil(n / WORKGROUP)));
    // The workspace's regions, each 4-word aligned.
    let at = 0;
    const region = (words: number) => {
      const start = at;
      at += Math.ceil(Math.max(words, 1) / 4) * 4;
      return start;
    };
    const o = {} as Record<Field, number>;
    for (const f of ["x", "xt", "g", "d", "dx", "cr", "z", "p", "q"] as const) o[f] = region(n);
    o.xe = o.x;
    o.r = region(m);
    o.t = region(m);
    o.j = region(entries);
    for (const f of ["pa", "pb", "pc", "prz0", "prz1", "ppq", "pg"] as const) {
      o[f] = region(4 * MAX_GROUPS);
    }
    // Three state blocks: two the solver alternates between, one of zeros for evaluations.
    this.#stateBase = region(3 * STATE_WORDS);
    o.s0 = this.#stateBase + 2 * STATE_WORDS;
    o.s1 = o.s0;
    // The structure: group table, parameter indices, columns.
    const groups = program.groups;
    let stWords = GROUP_WORDS * groups.length;
    const indexAt = groups.map((g) => {
      const start = stWords;
      stWords += g.paramIndex.length;
      return start;
    });
    o.col = stWords;
    o.cole = o.col + n + 1;
    o.colr = o.cole + entries;
    stWords = o.colr + entries;
    const st = new Uint32Array(Math.max(stWords, 1));
    let csWords = 0;
    const constAt = groups.map((g) => {
      const start = csWords;
      csWords += g.constants.length;
      return start;
    });
    const cs = new Float32Array(Math.max(csWords, 1));
    groups.forEach((g, k) => {
      st.set(
        [g.count, g.firstRow, g.entryBase, indexAt[k], constAt[k], g.paramSlots],
        k * GROUP_WORDS,
      );
      st.set(g.paramIndex, indexAt[k]);
      cs.set(g.constants, constAt[k]);
    });
    st.set(program.colStart, o.col);
    st.set(program.colEntry, o.cole);
    st.set(program.colRow, o.colr);
    o.n = n;
    o.m = m;
    o.nrows = this.#nrows;
    o.ncols = this.#ncols;
    o.cg = 0;
    o.maxIter = 0;
    o.costTol = 0;
    o.gradTol = 0;
    o.cgTol = 0;
    o.weight = 0;
    o.ga = 0;
    o.mode = 0;
    o.zero = 0;
    o.groups = groups.length;
    this.#offsets = o;
    this.#st = host.upload("uint32", st) as GpuStorage;
    this.#cs = host.upload("float32", cs) as GpuStorage;
    this.#ws = host.alloc("CompiledResiduals.compile", "float32", at);
    host.zero("residuals", this.#ws.buffer, at);
    this.#uniforms = host.device.createBuffer({
      label: "gyre residual uniforms",
      size: 64 * SLOT_BYTES,
      usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST,
    });
    // Every kernel compiled now: compilation is the compile step's cost, not the first solve's.
    // Only the residual kernel is the program's own; the others serve every program.
    const key = groups.map((g) => g.key).join("#");
    const make = (name: KernelName, source: () => string, storage = 3, writable = 1) => {
      const own = name === "residual" || name === "atomic";
      this.#kernels.set(
        name,
        host.pipeline(`residuals|${name}|${own ? key : ""}`, storage, source, writable),
      );
    };
    make("residual", () => generateResidualKernel(groups, false));
    make("product", () => generateJacobianProduct());
    for (const name of ["normal", "cg", "cgUpdate", "trial", "accept", "gradient"] as const) {
      make(name, () => generateParameterKernel(name));
    }
    if (this.accumulation === "atomic") {
      make("atomic", () => generateResidualKernel(groups, true), 4, 2);
      this.#gacc = host.alloc("CompiledResiduals.compile", "float32", Math.max(n, 1));
    }
    host.flush();
    this.#bind = this.#bindGroups();
  }

  /** The dynamic offset of a uniform slot with `changes` over the base block (made on first use). */
  #slot(changes: Partial<Record<Field, number>>): number {
    const words = new Uint32Array(UNIFORM_WORDS);
    UNIFORM_FIELDS.forEach((f, i) => (words[i] = changes[f] ?? this.#offsets[f]));
    const key = words.join(",");
    let slot = this.#slots.get(key);
    if (slot === undefined) {
      slot = this.#slotData.length;
      if ((slot + 1) * SLOT_BYTES > this.#uniforms.size) {
        // Grown, and every slot written again (bind groups refer to the buffer).
        const bigger = this.#host.device.createBuffer({
          label: "gyre residual uniforms",
          size: this.#uniforms.size * 2,
          usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST,
        });
        this.#uniforms.destroy();
        this.#uniforms = bigger;
        this.#bind = this.#bindGroups();
        this.#slotData.forEach((d, k) => this.#writeSlot(k, d));
      }
      this.#slots.set(key, slot);
      this.#slotData.push(words);
      this.#writeSlot(slot, words);
    }
    return slot * SLOT_BYTES;
  }

  #writeSlot(slot: number, words: Uint32Array<ArrayBuffer>): void {
    this.#host.device.queue.writeBuffer(this.#uniforms, slot * SLOT_BYTES, words);
  }

  /** The bind groups over the program's buffers and the current uniform buffer (atomic's too). */
  #bindGroups(): GPUBindGroup {
    const device = this.#host.device;
    const entriesOf = (buffers: GPUBuffer[]): GPUBindGroupEntry[] => [
      ...buffers.map((buffer, binding) => ({ binding, resource: { buffer } })),
      {
        binding: buffers.length,
        resource: { buffer: this.#uniforms, offset: 0, size: UNIFORM_WORDS * 4 },
      },
    ];
    const data = [this.#st.buffer, this.#cs.buffer, this.#ws.buffer];
    if (this.#gacc) {
      this.#bindAtomic = device.createBindGroup({
        layout: this.#kernels.get("atomic")!.layout,
        entries: entriesOf([...data, this.#gacc.buffer]),
      });
    }
    return device.createBindGroup({
      layout: this.#kernels.get("residual")!.layout,
      entries: entriesOf(data),
    });
  }

  #dispatch(pass: GPUComputePassEncoder, name: KernelName, offset: number): void {
    const kernel = this.#kernels.get(name)!;
    const rows = name === "residual" || name === "atomic" || name === "product";
    if (pass !== this.#lastPass) {
      this.#lastPass = pass;
      this.#lastPipeline = null;
      this.#lastOffset = -1;
    }
    if (kernel.pipeline !== this.#lastPipeline) {
      pass.setPipeline(kernel.pipeline);
      this.#lastPipeline = kernel.pipeline;
    }
    const bind = name === "atomic" ? this.#bindAtomic! : this.#bind;
    if (offset !== this.#lastOffset || bind !== this.#lastBind) {
      this.#offsetWord[0] = offset;
      pass.setBindGroup(0, bind, this.#offsetWord, 0, 1);
      this.#lastOffset = offset;
      this.#lastBind = bind;
    }
    pass.dispatchWorkgroups(rows ? this.#nrows : this.#ncols);
    this.dispatches++;
  }
  #lastPass: GPUComputePassEncoder | null = null;
  #lastPipeline: GPUComputePipeline | null = null;
  #lastBind: GPUBindGroup | null = null;
  #lastOffset = -1;
  #offsetWord = new Uint32Array(1);

  #check(op: string): void {
    if (this.#disposed) {
      throw new GpuError(
        "device-lost",
        op,
        "this",
        "compiled residuals not yet disposed",
        "disposed",
      );
    }
    this.#host.checkLive(op, ["float32"]);
  }

  /** Writes the parameters (inside `#scoped`, which has flushed the runtime's batch). */
  #upload(x: Float64Array): void {
    this.#host.device.queue.writeBuffer(
      this.#ws.buffer,
      this.#offsets.x * 4,
      new Float32Array(x),
    );
  }

  /** Copies ws regions [start, words) into one mapped read and returns them as float64. */
  async #read(regions: readonly [number, number][]): Promise<Float64Array[]> {
    const device = this.#host.device;
    const total = regions.reduce((s, [, w]) => s + Math.ceil(w / 4) * 16, 0);
    const staging = device.createBuffer({
      size: Math.max(total, 16),
      usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
    const encoder = device.createCommandEncoder();
    let at = 0;
    const starts: number[] = [];
    for (const [start, words] of regions) {
      starts.push(at);
      if (words) encoder.copyBufferToBuffer(this.#ws.buffer, start * 4, staging, at, words * 4);
      at += Math.ceil(words / 4) * 16;
    }
    device.queue.submit([encoder.finish()]);
    try {
      await staging.mapAsync(GPUMapMode.READ);
      const mapped = staging.getMappedRange();
      return regions.map(([, words], k) =>
        Float64Array.from(new Float32Array(mapped, starts[k], words))
      );
    } finally {
      staging.destroy();
    }
  }

  async #scoped<T>(op: string, body: () => Promise<T>): Promise<T> {
    const device = this.#host.device;
    // The runtime's batch first: its open error scopes must close before this one opens.
    this.#host.flush();
    device.pushErrorScope("validation");
    let result: { value: T } | null = null;
    let failure: unknown = null;
    try {
      result = { value: await body() };
    } catch (e) {
      failure = e;
    }
    // The scope is closed whatever happened; a GPU error explains a failure that follows it.
    const error = await device.popErrorScope();
    if (error) {
      throw new GpuError("validation", op, "gpu work", "valid GPU commands", error.message);
    }
    if (!result) throw failure;
    return result.value;
  }

  evaluate(x: Float64Array): Promise<Evaluation> {
    this.#check("CompiledResiduals.evaluate");
    return this.#scoped("CompiledResiduals.evaluate", async () => {
      this.#upload(x);
      const at = this.#slot({});
      const encoder = this.#host.device.createCommandEncoder();
      const pass = encoder.beginComputePass();
      this.#dispatch(pass, "residual", at);
      pass.end();
      this.#host.device.queue.submit([encoder.finish()]);
      const o = this.#offsets;
      const [residuals, jacobian] = await this.#read([
        [o.r, this.#program.residuals],
        [o.j, this.#program.entries],
      ]);
      return { residuals, jacobian };
    });
  }

  /**
   * Records `repeats` evaluations of the value and gradient (for the bench: the last one's
   * results stay in the workspace).
   */
  recordValueAndGradient(
    encoder: GPUCommandEncoder,
    weight: "squares" | "sum",
    repeats = 1,
  ): void {
    const at = this.#slot({ weight: weight === "sum" ? 1 : 0 });
    for (let k = 0; k < repeats; k++) {
      if (this.accumulation === "atomic") {
        encoder.clearBuffer(this.#gacc!.buffer, 0, Math.max(this.#program.parameters, 1) * 4);
        const pass = encoder.beginComputePass();
        this.#dispatch(pass, "atomic", at);
        pass.end();
      } else {
        const pass = encoder.beginComputePass();
        this.#dispatch(pass, "residual", at);
        this.#dispatch(pass, "gradient", at);
        pass.end();
      }
    }
  }

  valueAndGradient(
    x: Float64Array,
    weight: "squares" | "sum",
  ): Promise<{ value: number; gradient: Float64Array }> {
    this.#check("CompiledResiduals.valueAndGradient");
    return this.#scoped("CompiledResiduals.valueAndGradient", async () => {
      this.#upload(x);
      const encoder = this.#host.device.createCommandEncoder();
      this.recordValueAndGradient(encoder, weight);
      const o = this.#offsets;
      if (this.#gacc) {
        encoder.copyBufferToBuffer(
          this.#gacc.buffer,
          0,
          this.#ws.buffer,
          o.g * 4,
          this.#program.parameters * 4,
        );
      }
      this.#host.device.queue.submit([encoder.finish()]);
      const [partials, gradient] = await this.#read([
        [o.pa, 4 * this.#nrows],
        [o.g, this.#program.parameters],
      ]);
      let value = 0;
      for (let k = 0; k < this.#nrows; k++) value += partials[4 * k + (weight === "sum" ? 2 : 0)];
      return { value, gradient };
    });
  }

  /**
   * The dispatches of one Levenberg-Marquardt iteration reading state block `parity`, with their
   * uniform slots (made before anything is recorded: a slot made later may grow the uniform
   * buffer, which the commands recorded before would still name).
   */
  #iteration(parity: number, settings: SolveSettings): [KernelName, number][] {
    const o = this.#offsets;
    const s0 = this.#stateBase + parity * STATE_WORDS;
    const s1 = this.#stateBase + (1 - parity) * STATE_WORDS;
    const fixed = {
      s0,
      s1,
      maxIter: settings.maxIterations,
      costTol: f32Bits(settings.costTolerance),
      gradTol: f32Bits(settings.gradientTolerance),
      cgTol: f32Bits(settings.cgTolerance),
    };
    const steps: [KernelName, number][] = [
      ["residual", this.#slot(fixed)],
      ["normal", this.#slot(fixed)],
    ];
    for (let k = 0; k < settings.cgIterations; k++) {
      const at = this.#slot({ ...fixed, cg: k });
      steps.push(["product", at], ["cg", at], ["cgUpdate", at]);
    }
    steps.push(
      ["trial", this.#slot(fixed)],
      ["residual", this.#slot({ ...fixed, xe: o.xt, mode: 1 })],
      ["accept", this.#slot(fixed)],
    );
    return steps;
  }

  solve(x0: Float64Array, settings: SolveSettings): Promise<SolveOutcome> {
    this.#check("nonlinearLeastSquares");
    return this.#scoped("nonlinearLeastSquares", async () => {
      const device = this.#host.device;
      const start = this.dispatches;
      this.#upload(x0);
      const state = new Float32Array(2 * STATE_WORDS);
      state[STATE.lambda] = settings.initialDamping;
      state[STATE.nu] = 2;
      device.queue.writeBuffer(this.#ws.buffer, this.#stateBase * 4, state);
      const stateBytes = 2 * STATE_WORDS * 4;
      // With `profile` set (the bench), each batch's pass is bracketed by timestamps.
      const querySet = this.profile ? device.createQuerySet({ type: "timestamp", count: 2 }) : null;
      const resolve = querySet
        ? device.createBuffer({
          size: 16,
          usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC,
        })
        : null;
      let gpuNs = 0;
      interface Read {
        staging: GPUBuffer;
        mapped: Promise<void>;
        done: boolean;
        parity: number;
      }
      const pending: Read[] = [];
      // Every batch's staging holds the state and the parameters: the last one read gives the
      // solution, with no read-back of its own (another 11 ms) after the loop.
      const xBytes = 4 * this.#program.parameters;
      let latest: GPUBuffer | null = null;
      const stateOf = (read: Read): Float32Array => {
        const bytes = read.staging.getMappedRange(0, stateBytes + 16).slice(0);
        latest?.destroy();
        latest = read.staging;
        if (querySet) {
          const [begin, end] = new BigUint64Array(bytes, stateBytes, 2);
          gpuNs += Number(end - begin);
        }
        const words = new Float32Array(bytes, 0, 2 * STATE_WORDS);
        return words.subarray(read.parity * STATE_WORDS, (read.parity + 1) * STATE_WORDS);
      };
      let parity = 0;
      let recorded = 0;
      let last: Float32Array | null = null;
      const perRead = Math.max(1, settings.iterationsPerRead);
      const iterations = [this.#iteration(0, settings), this.#iteration(1, settings)];
      while (recorded < settings.maxIterations && !(last && last[STATE.stop] !== 0)) {
        const encoder = device.createCommandEncoder();
        const pass = encoder.beginComputePass(
          querySet
            ? {
              timestampWrites: { querySet, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 },
            }
            : {},
        );
        for (let k = 0; k < perRead && recorded < settings.maxIterations; k++) {
          for (const [name, at] of iterations[parity]) this.#dispatch(pass, name, at);
          parity ^= 1;
          recorded++;
        }
        pass.end();
        const staging = device.createBuffer({
          size: stateBytes + 16 + xBytes,
          usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
        });
        encoder.copyBufferToBuffer(this.#ws.buffer, this.#stateBase * 4, staging, 0, stateBytes);
        if (xBytes) {
          encoder.copyBufferToBuffer(
            this.#ws.buffer,
            this.#offsets.x * 4,
            staging,
            stateBytes + 16,
            xBytes,
          );
        }
        if (querySet && resolve) {
          encoder.resolveQuerySet(querySet, 0, 2, resolve, 0);
          encoder.copyBufferToBuffer(resolve, 0, staging, stateBytes, 16);
        }
        device.queue.submit([encoder.finish()]);
        const read: Read = { staging, mapped: Promise.resolve(), done: false, parity };
        read.mapped = staging.mapAsync(GPUMapMode.READ).then(() => {
          read.done = true;
        });
        pending.push(read);
        // A read-back takes at least ~11 ms in Deno whatever the work: several batches stay in
        // flight, the state of those already mapped is looked at without waiting, and the host
        // waits only when MAX_READS_IN_FLIGHT batches are ahead of what it has seen.
        if (pending.length >= MAX_READS_IN_FLIGHT) await pending[0].mapped;
        while (pending.length && pending[0].done) last = stateOf(pending.shift()!);
      }
      for (const read of pending) {
        await read.mapped;
        last = stateOf(read);
      }
      querySet?.destroy();
      resolve?.destroy();
      this.lastGpuMs = gpuNs / 1e6;
      const finalStaging = latest as GPUBuffer | null;
      const x = finalStaging
        ? Float64Array.from(
          new Float32Array(finalStaging.getMappedRange(stateBytes + 16, xBytes).slice(0)),
        )
        : x0.slice();
      finalStaging?.destroy();
      const s = last ?? state;
      const code = s[STATE.stop];
      return {
        x,
        iterations: s[STATE.iterations],
        accepted: s[STATE.accepted],
        initialCost: s[STATE.initialCost],
        cost: s[STATE.cost],
        maxGradient: s[STATE.maxGrad],
        reason: (code === 0 ? "maxIterations" : STOP_REASONS[code]) as StopReason,
        dispatches: this.dispatches - start,
        linearSolver: "pcg",
      };
    });
  }

  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#host.flush();
    for (const s of [this.#st, this.#cs, this.#ws, this.#gacc]) if (s) this.#host.free(s);
    this.#uniforms.destroy();
  }
}
