/// <reference lib="deno.window" />
// jax-js (@jax-js/jax 0.1.25) on its wasm backend: the jax-js worker of the CPU benchmark
// (bench/cpu.ts starts it; see bench/peers/cpu_common.ts). The backend runs its kernels on a
// pool of navigator.hardwareConcurrency Web Workers sharing the module's memory.
//
// jax-js is lazy: an op records a pending kernel, which runs when a result is observed, and
// the work of a result disposed unobserved is dropped. So a sample issues the op `reps` times,
// keeps every result, forces them together with jax.blockUntilReady (dispatches every pending
// kernel, then waits for the workers) and only then disposes them, as bench/peers/jax.ts does.
// Inputs are passed as `x.ref` (jax-js ops consume their arguments).
//
// The npm: specifier keeps this file a plain Deno program (deno check, deno run); the package
// is pinned in bench/peers/package.json and package-lock.json as well.

// deno-lint-ignore no-import-prefix
import * as jax from "npm:@jax-js/jax@0.1.25";
import {
  CASE_NAMES,
  cpuSizes,
  emit,
  errText,
  log,
  normalData,
  parseWorkerArgs,
  poolOut,
  type Runner,
  runWorker,
  type WorkerCase,
} from "./cpu_common.ts";

const { blockUntilReady, defaultDevice, init, lax, nn } = jax;
const np = jax.numpy;
type Arr = jax.numpy.Array;

const args = parseWorkerArgs(Deno.args);
const sizes = cpuSizes(args.quick);
/** jax-js exports no version string; this is the one pinned above. */
const VERSION = "0.1.25";

async function main(): Promise<void> {
  const devices = await init("wasm");
  if (!devices.includes("wasm")) throw new Error(`jax-js has no wasm device: [${devices}]`);
  defaultDevice("wasm");
  const build = `wasm backend, ${navigator.hardwareConcurrency} workers`;
  log(`[jax-js] ${VERSION}, ${build}`);
  emit({ type: "meta", lib: "jax-js-wasm", version: `@jax-js/jax ${VERSION}`, build });

  const held: Arr[] = [];
  const input = async (shape: number[]) => {
    const a = np.array(normalData(shape.reduce((p, q) => p * q, 1)), { dtype: np.float32 });
    const x = shape.length === 1 ? a : a.reshape(shape);
    held.push(x);
    await blockUntilReady(x); // the upload is not timed
    return x;
  };
  const free = () => {
    for (const t of held.splice(0)) t.dispose();
  };
  const runner = (op: () => Arr): Runner => async (reps) => {
    const outs: Arr[] = [];
    for (let i = 0; i < reps; i++) outs.push(op());
    await blockUntilReady(outs);
    for (const o of outs) o.dispose();
  };
  const n = sizes.n;
  /** Max pooling 3x3 stride 2 by reduceWindow over the trailing axes (jax-js pools NCHW). */
  const poolCase = (note: string): Omit<WorkerCase, "name"> => ({
    note,
    setup: async () => {
      const x = await input(sizes.pool);
      const op = () => lax.reduceWindow(x.ref, (w: Arr) => np.max(w), [3, 3], [2, 2]);
      const [b, c, h, w] = sizes.pool;
      const probe = op();
      const want = [b, c, poolOut(h), poolOut(w)];
      const shape = probe.shape;
      probe.dispose();
      if (shape.join() !== want.join()) throw new Error(`pool shape ${shape}`);
      return runner(op);
    },
  });
  const byName: Record<string, Omit<WorkerCase, "name">> = {
    exp: {
      setup: async () => {
        const x = await input([n]);
        return runner(() => np.exp(x.ref));
      },
    },
    relu_chain: {
      note: "nn.relu(x * 2 + 1), eager (jax-js fuses pending elementwise ops)",
      setup: async () => {
        const x = await input([n]);
        return runner(() => nn.relu(np.add(np.multiply(x.ref, 2), 1)));
      },
    },
    softmax: {
      setup: async () => {
        const x = await input(sizes.softmax);
        return runner(() => nn.softmax(x.ref, -1));
      },
    },
    maxpool: poolCase("lax.reduceWindow(x, np.max, [3, 3], [2, 2]) over NCHW (the trailing axes)"),
    maxpool_nchw: poolCase("lax.reduceWindow(x, np.max, [3, 3], [2, 2])"),
    max_rows: {
      setup: async () => {
        const x = await input(sizes.maxRows);
        return runner(() => np.max(x.ref, 1));
      },
    },
    sum: {
      setup: async () => {
        const x = await input([n]);
        return runner(() => np.sum(x.ref));
      },
    },
    matmul_1024: {
      setup: async () => {
        const m = sizes.matmulSmall;
        const a = await input([m, m]), b = await input([m, m]);
        return runner(() => np.matmul(a.ref, b.ref));
      },
    },
    matmul_2048: {
      setup: async () => {
        const m = sizes.matmulLarge;
        const a = await input([m, m]), b = await input([m, m]);
        return runner(() => np.matmul(a.ref, b.ref));
      },
    },
    add: {
      setup: async () => {
        const a = await input([n]), b = await input([n]);
        return runner(() => np.add(a.ref, b.ref));
      },
    },
    copy: {
      missing: "no copy op: arrays are immutable and shared by reference",
    },
    cumsum: {
      note: "np.cumsum (composed by jax-js from blocked scans)",
      setup: async () => {
        const x = await input([n]);
        return runner(() => np.cumsum(x.ref, 0));
      },
    },
    layernorm: {
      note: "nn.standardize(x, -1, {epsilon: 1e-5}) (composed by jax-js)",
      setup: async () => {
        const x = await input(sizes.layerNorm);
        return runner(() => nn.standardize(x.ref, -1, { epsilon: 1e-5 }));
      },
    },
    transpose: {
      note: "np.transpose is a view; realised by the copy kernel data() would run",
      setup: async () => {
        const x = await input(sizes.transpose);
        return runner(() => {
          const t = np.transpose(x.ref);
          // Records the kernel that lays the view out contiguously (what data() and any
          // consumer of the view do first); blockUntilReady then runs it.
          t._realizeSource();
          return t;
        });
      },
    },
  };
  await runWorker(CASE_NAMES.map((name) => ({ name, ...byName[name], teardown: free })), args);
}

try {
  await main();
} catch (e) {
  log(`[jax-js] fatal: ${errText(e)}`);
  Deno.exit(1);
}
// jax-js's Web Workers would keep the process alive.
Deno.exit(0);
