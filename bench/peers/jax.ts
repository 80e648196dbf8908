/// <reference lib="deno.window" />
// jax-js (@jax-js/jax) peer benchmark on its WebGPU device.
//
// Entry point for esbuild (scripts/bundle_peers.ts -> dist/jax.js). Runs the
// fixed case list in jax-js's eager (op-by-op) mode, or with --jit with each
// per-op case compiled by jax.jit, and prints one line of JSON to stdout;
// diagnostics go to stderr. See bench/peers/README.md.
//
// jax-js is lazy: an op only records a PendingExecute; kernels are dispatched
// when a result is observed (data()/blockUntilReady()), and disposing an
// unobserved result silently drops its work. So per-op cases keep all R
// results alive, force them together with jax.blockUntilReady(results)
// (dispatches every pending kernel, then waits for the queue), and only then
// dispose them. Chains are forced by the final `await x.data()`, which
// dispatches the whole dependent chain. Reference counting follows jax-js's
// ownership rules: inputs are passed as `x.ref` so they survive each call.
//
// No shims are needed: jax-js supports Deno's navigator.gpu natively.

// npm: specifier keeps this file a valid Deno program (deno check / deno run
// without bundling); scripts/bundle_peers.ts maps it onto the version pinned
// in bench/peers/package-lock.json.
// deno-lint-ignore no-import-prefix
import * as jax from "npm:@jax-js/jax@0.1.25";
import {
  adapterDescription,
  type Case,
  compare,
  emit,
  errText,
  gatherAt,
  log,
  MLP_LAYOUTS,
  parseOptions,
  randomData,
  refAdd,
  refChain,
  refCumsum,
  refLastBiasGrad,
  refMatmulRows,
  refMlpRows,
  refRows,
  refSort,
  refSum,
  refTopk,
  runCases,
  sizesFor,
  transposedSquare,
} from "./common.ts";

// Injected by scripts/bundle_peers.ts (esbuild `define`) from
// node_modules/@jax-js/jax/package.json; jax-js exports no version string.
declare const JAX_JS_VERSION: string;

const { blockUntilReady, defaultDevice, getWebGPUDevice, init, jit, nn } = jax;
const np = jax.numpy;
type Arr = jax.numpy.Array;

const opts = parseOptions(Deno.args);
const sizes = sizesFor(opts.scale);

async function main() {
  const adapter = await adapterDescription();
  const devices = await init("webgpu");
  if (!devices.includes("webgpu")) {
    throw new Error(`jax-js init("webgpu") failed; got [${devices}]`);
  }
  defaultDevice("webgpu");
  const version = typeof JAX_JS_VERSION === "string" ? JAX_JS_VERSION : "unknown";
  log(`[jax-js] ${version}, device ${defaultDevice()}, adapter ${adapter}`);

  // --jit: compile each per-op function with jax.jit (fuses its primitives
  // into as few kernels as jax-js can); the first call (warm-up) traces.
  const jit1 = (f: (x: Arr) => Arr): (x: Arr) => Arr => opts.jit ? jit(f) : f;
  const jit2 = (f: (x: Arr, y: Arr) => Arr): (x: Arr, y: Arr) => Arr => opts.jit ? jit(f) : f;

  /** Per-op case: issue `op` r times, then force all r results. */
  function opRunner(op: () => Arr): (r: number) => Promise<void> {
    return async (r: number) => {
      const outs: Arr[] = [];
      for (let i = 0; i < r; i++) outs.push(op());
      await blockUntilReady(outs);
      for (const o of outs) o.dispose();
    };
  }

  async function readOnce(op: () => Arr): Promise<Float32Array> {
    return (await op().data()) as Float32Array; // data() consumes the array
  }

  const upload = (data: Float32Array<ArrayBuffer>, shape: number[]): Arr => {
    const a = np.array(data, { dtype: np.float32 });
    return shape.length === 1 ? a : a.reshape(shape);
  };

  const cases: Case[] = [];
  const held: Arr[] = [];
  const free = () => {
    for (const t of held.splice(0)) t.dispose();
  };
  /** Make sure uploads finished before timing. */
  const settle = async () => {
    await blockUntilReady(held);
  };

  // add_16Mi / add_64Mi
  for (
    const [name, n] of [
      ["add_16Mi", sizes.add16],
      ["add_64Mi", sizes.add64],
    ] as const
  ) {
    let a: Arr,
      b: Arr,
      ha: Float32Array<ArrayBuffer>,
      hb: Float32Array<ArrayBuffer>;
    const f = jit2((x, y) => np.add(x, y));
    const op = () => f(a.ref, b.ref);
    cases.push({
      kind: "op",
      name,
      shape: [n],
      reps: opts.reps ?? sizes.reps.elementwise,
      setup: async () => {
        ha = randomData(n, 1);
        hb = randomData(n, 2);
        a = upload(ha, [n]);
        b = upload(hb, [n]);
        held.push(a, b);
        await settle();
      },
      check: async () => compare(await readOnce(op), refAdd(ha, hb), 0, 0),
      run: opRunner(op),
      teardown: free,
    });
  }

  // softmax_4096x4096 (last axis)
  {
    const [rows, cols] = sizes.softmax;
    let x: Arr, hx: Float32Array<ArrayBuffer>;
    const f = jit1((x) => nn.softmax(x, -1));
    const op = () => f(x.ref);
    cases.push({
      kind: "op",
      name: "softmax_4096x4096",
      shape: [rows, cols],
      reps: opts.reps ?? sizes.reps.rows,
      setup: async () => {
        hx = randomData(rows * cols, 3, -4, 4);
        x = upload(hx, [rows, cols]);
        held.push(x);
        await settle();
      },
      check: async () => {
        const got = (await readOnce(op)).subarray(0, 4 * cols);
        return compare(got, refRows("softmax", hx, cols, 4), 1e-7, 1e-4);
      },
      run: opRunner(op),
      teardown: free,
    });
  }

  // sum_16Mi (full reduction to a scalar)
  {
    const n = sizes.sum;
    let x: Arr, hx: Float32Array<ArrayBuffer>;
    const f = jit1((x) => np.sum(x));
    const op = () => f(x.ref);
    cases.push({
      kind: "op",
      name: "sum_16Mi",
      shape: [n],
      reps: opts.reps ?? sizes.reps.elementwise,
      setup: async () => {
        hx = randomData(n, 4);
        x = upload(hx, [n]);
        held.push(x);
        await settle();
      },
      check: async () => {
        const [want, abs] = refSum(hx);
        return compare(await readOnce(op), [want], 1e-5 * abs, 0);
      },
      run: opRunner(op),
      teardown: free,
    });
  }

  // cumsum_16Mi (np.cumsum: jax-js builds it from blocked quadratic scans)
  {
    const n = sizes.cumsum;
    let x: Arr, hx: Float32Array<ArrayBuffer>;
    const f = jit1((x) => np.cumsum(x, 0));
    const op = () => f(x.ref);
    cases.push({
      kind: "op",
      name: "cumsum_16Mi",
      shape: [n],
      reps: opts.reps ?? sizes.reps.elementwise,
      note: "np.cumsum (composed by jax-js: 256-wide blocked scans + offsets)",
      setup: async () => {
        hx = randomData(n, 5);
        x = upload(hx, [n]);
        held.push(x);
        await settle();
      },
      check: async () =>
        compare(
          await readOnce(op),
          refCumsum(hx),
          1e-5 * Math.sqrt(n) * Math.log2(n),
          1e-4,
        ),
      run: opRunner(op),
      teardown: free,
    });
  }

  // layerNorm_4096x4096: nn.standardize(x, -1, {epsilon}) is exactly
  // (x - mean) / sqrt(var + eps) over the last axis with no affine.
  {
    const [rows, cols] = sizes.layerNorm;
    let x: Arr, hx: Float32Array<ArrayBuffer>;
    const f = jit1((x) => nn.standardize(x, -1, { epsilon: 1e-5 }));
    const op = () => f(x.ref);
    cases.push({
      kind: "op",
      name: "layerNorm_4096x4096",
      shape: [rows, cols],
      reps: opts.reps ?? sizes.reps.rows,
      note: "nn.standardize (composed by jax-js from mean/square/sub/div)",
      setup: async () => {
        hx = randomData(rows * cols, 6, -2, 3);
        x = upload(hx, [rows, cols]);
        held.push(x);
        await settle();
      },
      check: async () => {
        const got = (await readOnce(op)).subarray(0, 4 * cols);
        return compare(got, refRows("layerNorm", hx, cols, 4), 1e-4, 1e-3);
      },
      run: opRunner(op),
      teardown: free,
    });
  }

  // matmul_4096 (float32 n x n x n)
  // Sorting (issue 22): np.sort, np.argsort and lax.topK (values and indices).
  {
    const n = sizes.sort;
    const [rows, cols, k] = sizes.topk;
    let x: Arr, rowsX: Arr, hx: Float32Array<ArrayBuffer>, hr: Float32Array<ArrayBuffer>;
    const sortF = jit1((x) => np.sort(x));
    const argsortF = jit1((x) => np.argsort(x));
    const topkF = opts.jit ? jit((x: Arr) => jax.lax.topK(x, k)) : (x: Arr) => jax.lax.topK(x, k);
    const sortFn = () => sortF(x.ref);
    const argsortFn = () => argsortF(x.ref);
    const topkFn = () => {
      const [values, indices] = topkF(rowsX.ref);
      indices.dispose();
      return values;
    };
    const setup = async () => {
      hx = randomData(n, 9);
      hr = randomData(rows * cols, 10);
      x = upload(hx, [n]);
      rowsX = upload(hr, [rows, cols]);
      held.push(x, rowsX);
      await settle();
    };
    cases.push({
      kind: "op",
      name: "sort_16Mi",
      shape: [n],
      reps: opts.reps ?? sizes.reps.rows,
      setup,
      check: async () => compare(await readOnce(sortFn), refSort(hx), 0, 0),
      run: opRunner(sortFn),
      teardown: free,
    });
    cases.push({
      kind: "op",
      name: "argsort_16Mi",
      shape: [n],
      reps: opts.reps ?? sizes.reps.rows,
      setup,
      check: async () => {
        const indices = await argsortFn().data();
        return compare(gatherAt(hx, indices as ArrayLike<number>), refSort(hx), 0, 0);
      },
      run: opRunner(argsortFn),
      teardown: free,
    });
    cases.push({
      kind: "op",
      name: "topk_8x65536_k1024",
      shape: [rows, cols],
      reps: opts.reps ?? sizes.reps.rows,
      note: "lax.topK: values and int32 indices",
      setup,
      check: async () => compare(await readOnce(topkFn), refTopk(hr, cols, k), 0, 0),
      run: opRunner(topkFn),
      teardown: free,
    });
  }
  {
    const n = sizes.matmul;
    let a: Arr,
      b: Arr,
      ha: Float32Array<ArrayBuffer>,
      hb: Float32Array<ArrayBuffer>;
    const f = jit2((x, y) => np.matmul(x, y));
    const op = () => f(a.ref, b.ref);
    cases.push({
      kind: "op",
      name: "matmul_4096",
      shape: [n, n, n],
      reps: opts.reps ?? sizes.reps.matmul,
      setup: async () => {
        ha = randomData(n * n, 7);
        hb = randomData(n * n, 8);
        a = upload(ha, [n, n]);
        b = upload(hb, [n, n]);
        held.push(a, b);
        await settle();
      },
      check: async () => {
        const got = (await readOnce(op)).subarray(0, 2 * n);
        return compare(got, refMatmulRows(ha, hb, n, 2), 1e-5 * n, 1e-3);
      },
      run: opRunner(op),
      teardown: free,
    });
  }

  // mlp3_4096: three linear layers (relu, relu, none), batch = width, under jit when --jit, with
  // the weights in either layout.
  for (const { layout, name, note } of MLP_LAYOUTS) {
    const n = sizes.mlp;
    const t = layout === "out-in";
    let x: Arr, hx: Float32Array<ArrayBuffer>;
    const hw: Float32Array<ArrayBuffer>[] = [], hb: Float32Array<ArrayBuffer>[] = [];
    let w: Arr[] = [], b: Arr[] = [];
    const layers = (
      input: Arr,
      w0: Arr,
      b0: Arr,
      w1: Arr,
      b1: Arr,
      w2: Arr,
      b2: Arr,
    ): Arr => {
      const weight = (w: Arr) => (t ? np.transpose(w) : w);
      const h1 = jax.nn.relu(np.add(np.matmul(input, weight(w0)), b0));
      const h2 = jax.nn.relu(np.add(np.matmul(h1, weight(w1)), b1));
      return np.add(np.matmul(h2, weight(w2)), b2);
    };
    const f = opts.jit ? jit(layers) : layers;
    const op = () => f(x.ref, w[0].ref, b[0].ref, w[1].ref, b[1].ref, w[2].ref, b[2].ref);
    cases.push({
      kind: "op",
      name,
      note,
      shape: [n, n, n],
      reps: opts.reps ?? sizes.reps.matmul,
      setup: async () => {
        hx = randomData(n * n, 31);
        x = upload(hx, [n, n]);
        for (let l = 0; l < 3; l++) {
          hw[l] = randomData(n * n, 32 + l, -1 / Math.sqrt(n), 1 / Math.sqrt(n));
          hb[l] = randomData(n, 40 + l, -0.1, 0.1);
        }
        w = hw.map((d) => upload(t ? d : transposedSquare(d, n), [n, n]));
        b = hb.map((d) => upload(d, [n]));
        held.push(x, ...w, ...b);
        await settle();
      },
      check: async () => {
        const got = (await readOnce(op)).subarray(0, 2 * n);
        return compare(got, refMlpRows(hx, hw, hb, n, 2), 1e-5 * n, 1e-3);
      },
      run: opRunner(op),
      teardown: free,
    });
  }

  // mlp3_train_4096: one training step of that MLP (forward, mean squared loss, gradients of all
  // weights and biases) through grad, under jit when --jit, in either layout.
  for (const { layout, name, note } of MLP_LAYOUTS) {
    const n = sizes.mlp;
    const t = layout === "out-in";
    let x: Arr, y: Arr, hy: Float32Array<ArrayBuffer>;
    let params: Arr[] = [];
    const forward = (input: Arr, p: Arr[]): Arr => {
      const weight = (w: Arr) => (t ? np.transpose(w) : w);
      const h1 = jax.nn.relu(np.add(np.matmul(input, weight(p[0])), p[1]));
      const h2 = jax.nn.relu(np.add(np.matmul(h1, weight(p[2])), p[3]));
      return np.add(np.matmul(h2, weight(p[4])), p[5]);
    };
    const loss = (
      input: Arr,
      target: Arr,
      w0: Arr,
      b0: Arr,
      w1: Arr,
      b1: Arr,
      w2: Arr,
      b2: Arr,
    ): Arr =>
      np.mean(
        np.square(
          np.subtract(forward(input, [w0, b0, w1, b1, w2, b2]), target),
        ),
      );
    const gradients = jax.grad(loss, { argnums: [2, 3, 4, 5, 6, 7] });
    const step = opts.jit ? jit(gradients) : gradients;
    const run = () => {
      const [w0, b0, w1, b1, w2, b2] = params.map((p) => p.ref);
      return step(x.ref, y.ref, w0, b0, w1, b1, w2, b2) as unknown as Arr[];
    };
    cases.push({
      kind: "op",
      name: name.replace("mlp3", "mlp3_train"),
      note:
        `training step: forward + mean squared loss + gradients of 3 weights and 3 biases; ${note}`,
      shape: [n, n, n],
      reps: opts.reps ?? sizes.reps.matmul,
      setup: async () => {
        x = upload(randomData(n * n, 31), [n, n]);
        hy = randomData(n * n, 50);
        y = upload(hy, [n, n]);
        params = [];
        for (let l = 0; l < 3; l++) {
          const w = randomData(
            n * n,
            32 + l,
            -1 / Math.sqrt(n),
            1 / Math.sqrt(n),
          );
          params.push(upload(t ? w : transposedSquare(w, n), [n, n]));
          params.push(upload(randomData(n, 40 + l, -0.1, 0.1), [n]));
        }
        held.push(x, y, ...params);
        await settle();
      },
      check: async () => {
        const grads = run();
        const got = (await grads[5].data()) as Float32Array;
        for (const g of grads.slice(0, 5)) g.dispose();
        const out = forward(x.ref, params.map((p) => p.ref));
        const outData = (await out.data()) as Float32Array;
        return compare(got, refLastBiasGrad(outData, hy, n), 1e-6, 1e-3);
      },
      run: async (r: number) => {
        const outs: Arr[] = [];
        for (let i = 0; i < r; i++) outs.push(...run());
        await blockUntilReady(outs);
        for (const o of outs) o.dispose();
      },
      teardown: free,
    });
  }

  // chain_1Ki_{100,1100}: x = x + y repeated, one read-back; total wall ms.
  for (const len of [100, 1100]) {
    const n = sizes.chainElems;
    let x0: Arr,
      y: Arr,
      hx: Float32Array<ArrayBuffer>,
      hy: Float32Array<ArrayBuffer>;
    const chain = async (): Promise<Float32Array> => {
      let x = np.add(x0.ref, y.ref);
      for (let i = 1; i < len; i++) x = np.add(x, y.ref); // consumes old x
      return (await x.data()) as Float32Array<ArrayBuffer>;
    };
    cases.push({
      kind: "total",
      name: `chain_1Ki_${len}`,
      shape: [n],
      note: `total ms for ${len} dependent adds + one read-back`,
      setup: async () => {
        hx = randomData(n, 9);
        hy = randomData(n, 10, 0, 0.01);
        x0 = upload(hx, [n]);
        y = upload(hy, [n]);
        held.push(x0, y);
        await settle();
      },
      check: async () => compare(await chain(), refChain(hx, hy, len), 1e-5 * len, 1e-5),
      run: async () => {
        await chain();
      },
      teardown: free,
    });
  }

  emit(
    await runCases(
      { peer: "jax-js", version, adapter, mode: opts.jit ? "jit" : "eager" },
      cases,
      opts,
      getWebGPUDevice(),
    ),
  );
}

try {
  await main();
} catch (e) {
  log(`[jax-js] fatal: ${errText(e)}`);
  if (e instanceof Error && e.stack) log(e.stack);
  Deno.exit(1);
}
// The WebGPU device keeps the event loop alive; exit explicitly.
Deno.exit(0);
