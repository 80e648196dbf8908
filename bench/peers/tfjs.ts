/// <reference lib="deno.window" />
// TensorFlow.js (tfjs-core + tfjs-backend-webgpu) peer benchmark.
//
// Entry point for esbuild (scripts/bundle_peers.ts -> dist/tfjs.js). Runs the
// fixed case list on the tfjs WebGPU backend and prints one line of JSON to
// stdout; diagnostics go to stderr. See bench/peers/README.md.
//
// Timing: ops are issued back to back (tfjs dispatches eagerly into a command
// encoder and submits every WEBGPU_DEFERRED_SUBMIT_BATCH_SIZE dispatches);
// intermediates are disposed as soon as the next one is issued (tfjs defers
// the buffer release until the queue is submitted, so this is safe). After R
// ops we flush the backend's pending command encoder and wait for
// queue.onSubmittedWorkDone(), i.e. exactly what tfjs's own read path does
// minus the copy to a staging buffer, so large outputs are not charged a
// read-back. Chains end with one real read-back (`await t.data()`).

import "./tfjs_shim.ts"; // must stay first: see the file for why
// npm: specifiers keep this file a valid Deno program (deno check / deno run
// without bundling); scripts/bundle_peers.ts maps them onto the versions pinned
// in bench/peers/package-lock.json.
// deno-lint-ignore no-import-prefix
import * as tf from "npm:@tensorflow/tfjs-core@4.22.0";
// deno-lint-ignore no-import-prefix
import "npm:@tensorflow/tfjs-backend-webgpu@4.22.0";
// tfjs-core alone registers no gradient functions (the `@tensorflow/tfjs` package does this).
// deno-lint-ignore no-import-prefix
import "npm:@tensorflow/tfjs-core@4.22.0/dist/register_all_gradients";
// deno-lint-ignore no-import-prefix
import type { WebGPUBackend } from "npm:@tensorflow/tfjs-backend-webgpu@4.22.0";
// deno-lint-ignore no-import-prefix
import { version as versionWebgpu } from "npm:@tensorflow/tfjs-backend-webgpu@4.22.0/dist/version";
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

const opts = parseOptions(Deno.args);
if (opts.jit) throw new Error("--jit is a jax-js option");
const sizes = sizesFor(opts.scale);

async function main() {
  const adapter = await adapterDescription();
  if (!(await tf.setBackend("webgpu"))) {
    throw new Error("tf.setBackend('webgpu') failed");
  }
  await tf.ready();
  const backend = tf.backend() as WebGPUBackend;
  log(
    `[tfjs] core ${tf.version_core}, webgpu ${versionWebgpu}, backend ${tf.getBackend()}, adapter ${adapter}`,
  );

  /** Force completion of everything issued so far (no read-back). */
  async function sync(): Promise<void> {
    // Same steps as WebGPUBackend.getBufferData() before its staging copy.
    backend.ensureCommandEncoderReady();
    backend.endComputePassEncoder();
    backend.submitQueue();
    await backend.device.queue.onSubmittedWorkDone();
  }

  /** Per-op case: issue `op` r times, keep only the newest result alive. */
  function opRunner(op: () => tf.Tensor): (r: number) => Promise<void> {
    return async (r: number) => {
      let last: tf.Tensor | null = null;
      for (let i = 0; i < r; i++) {
        const t = op();
        last?.dispose();
        last = t;
      }
      await sync();
      last?.dispose();
    };
  }

  async function readOnce(op: () => tf.Tensor): Promise<Float32Array> {
    const t = op();
    const d = await t.data();
    t.dispose();
    return d as Float32Array;
  }

  const cases: Case[] = [];
  const held: tf.Tensor[] = [];
  const free = () => {
    for (const t of held.splice(0)) t.dispose();
  };

  // add_16Mi / add_64Mi
  for (
    const [name, n] of [
      ["add_16Mi", sizes.add16],
      ["add_64Mi", sizes.add64],
    ] as const
  ) {
    let a: tf.Tensor, b: tf.Tensor, ha: Float32Array, hb: Float32Array;
    const op = () => tf.add(a, b);
    cases.push({
      kind: "op",
      name,
      shape: [n],
      reps: opts.reps ?? sizes.reps.elementwise,
      setup: () => {
        ha = randomData(n, 1);
        hb = randomData(n, 2);
        a = tf.tensor1d(ha, "float32");
        b = tf.tensor1d(hb, "float32");
        held.push(a, b);
      },
      check: async () => compare(await readOnce(op), refAdd(ha, hb), 0, 0),
      run: opRunner(op),
      teardown: free,
    });
  }

  // softmax_4096x4096 (last axis)
  {
    const [rows, cols] = sizes.softmax;
    let x: tf.Tensor, hx: Float32Array;
    const op = () => tf.softmax(x, -1);
    cases.push({
      kind: "op",
      name: "softmax_4096x4096",
      shape: [rows, cols],
      reps: opts.reps ?? sizes.reps.rows,
      setup: () => {
        hx = randomData(rows * cols, 3, -4, 4);
        x = tf.tensor2d(hx, [rows, cols], "float32");
        held.push(x);
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
    let x: tf.Tensor, hx: Float32Array;
    const op = () => tf.sum(x);
    cases.push({
      kind: "op",
      name: "sum_16Mi",
      shape: [n],
      reps: opts.reps ?? sizes.reps.elementwise,
      setup: () => {
        hx = randomData(n, 4);
        x = tf.tensor1d(hx, "float32");
        held.push(x);
      },
      check: async () => {
        const [want, abs] = refSum(hx);
        return compare(await readOnce(op), [want], 1e-5 * abs, 0);
      },
      run: opRunner(op),
      teardown: free,
    });
  }

  // cumsum_16Mi (along the only axis)
  {
    const n = sizes.cumsum;
    let x: tf.Tensor, hx: Float32Array;
    const op = () => tf.cumsum(x, 0);
    cases.push({
      kind: "op",
      name: "cumsum_16Mi",
      shape: [n],
      reps: opts.reps ?? sizes.reps.elementwise,
      setup: () => {
        hx = randomData(n, 5);
        x = tf.tensor1d(hx, "float32");
        held.push(x);
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

  // layerNorm_4096x4096 (last axis, eps 1e-5, no affine). tfjs has no fused
  // layer norm: composed from tf.moments + sub/rsqrt/mul inside tf.tidy.
  {
    const [rows, cols] = sizes.layerNorm;
    let x: tf.Tensor, hx: Float32Array;
    const op = () =>
      tf.tidy(() => {
        const { mean, variance } = tf.moments(x, -1, true);
        return tf.mul(tf.sub(x, mean), tf.rsqrt(tf.add(variance, 1e-5)));
      });
    cases.push({
      kind: "op",
      name: "layerNorm_4096x4096",
      shape: [rows, cols],
      reps: opts.reps ?? sizes.reps.rows,
      note: "composed: tf.moments + sub/add/rsqrt/mul (no fused op in tfjs)",
      setup: () => {
        hx = randomData(rows * cols, 6, -2, 3);
        x = tf.tensor2d(hx, [rows, cols], "float32");
        held.push(x);
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
  // Sorting (issue 22): tfjs has no sort or argsort; tf.topk of all of a row sorts it (largest
  // first) with its indices, so both cases time tf.topk(x, n), and top-k of rows tf.topk.
  {
    const n = sizes.sort;
    const [rows, cols, k] = sizes.topk;
    let x: tf.Tensor, rowsX: tf.Tensor, hx: Float32Array, hr: Float32Array;
    const sortFn = () => {
      const { values, indices } = tf.topk(x, n);
      indices.dispose();
      return values;
    };
    const argsortFn = () => {
      const { values, indices } = tf.topk(x, n);
      values.dispose();
      return indices;
    };
    const topkFn = () => {
      const { values, indices } = tf.topk(rowsX, k);
      indices.dispose();
      return values;
    };
    const setup = () => {
      hx = randomData(n, 9);
      hr = randomData(rows * cols, 10);
      x = tf.tensor1d(hx, "float32");
      rowsX = tf.tensor2d(hr, [rows, cols], "float32");
      held.push(x, rowsX);
    };
    const descending = (a: Float32Array) => a.slice().reverse();
    cases.push({
      kind: "op",
      name: "sort_16Mi",
      shape: [n],
      reps: opts.reps ?? sizes.reps.rows,
      note: "tf.topk(x, n): descending",
      setup,
      check: async () => compare(await readOnce(sortFn), descending(refSort(hx)), 0, 0),
      run: opRunner(sortFn),
      teardown: free,
    });
    cases.push({
      kind: "op",
      name: "argsort_16Mi",
      shape: [n],
      reps: opts.reps ?? sizes.reps.rows,
      note: "tf.topk(x, n) indices: descending",
      setup,
      check: async () => {
        const t = argsortFn();
        const indices = await t.data();
        t.dispose();
        return compare(gatherAt(hx, indices), descending(refSort(hx)), 0, 0);
      },
      run: opRunner(argsortFn),
      teardown: free,
    });
    cases.push({
      kind: "op",
      name: "topk_8x65536_k1024",
      shape: [rows, cols],
      reps: opts.reps ?? sizes.reps.rows,
      note: "values and int32 indices",
      setup,
      check: async () => compare(await readOnce(topkFn), refTopk(hr, cols, k), 0, 0),
      run: opRunner(topkFn),
      teardown: free,
    });
  }
  {
    const n = sizes.matmul;
    let a: tf.Tensor, b: tf.Tensor, ha: Float32Array, hb: Float32Array;
    const op = () => tf.matMul(a, b);
    cases.push({
      kind: "op",
      name: "matmul_4096",
      shape: [n, n, n],
      reps: opts.reps ?? sizes.reps.matmul,
      setup: () => {
        ha = randomData(n * n, 7);
        hb = randomData(n * n, 8);
        a = tf.tensor2d(ha, [n, n], "float32");
        b = tf.tensor2d(hb, [n, n], "float32");
        held.push(a, b);
      },
      check: async () => {
        const got = (await readOnce(op)).subarray(0, 2 * n);
        return compare(
          got,
          refMatmulRows(ha, hb, n, 2),
          1e-5 * n,
          1e-3,
        );
      },
      run: opRunner(op),
      teardown: free,
    });
  }

  // mlp3_4096: three linear layers (relu, relu, none), batch = width (tfjs has no jit), with the
  // weights in either layout.
  for (const { layout, name, note } of MLP_LAYOUTS) {
    const n = sizes.mlp;
    let x: tf.Tensor, hx: Float32Array;
    const hw: Float32Array[] = [], hb: Float32Array[] = [];
    let w: tf.Tensor[] = [], b: tf.Tensor[] = [];
    const t = layout === "out-in";
    const op = () =>
      tf.tidy(() => {
        const h1 = tf.relu(tf.add(tf.matMul(x, w[0], false, t), b[0]));
        const h2 = tf.relu(tf.add(tf.matMul(h1, w[1], false, t), b[1]));
        return tf.add(tf.matMul(h2, w[2], false, t), b[2]);
      });
    cases.push({
      kind: "op",
      name,
      note,
      shape: [n, n, n],
      reps: opts.reps ?? sizes.reps.matmul,
      setup: () => {
        hx = randomData(n * n, 31);
        x = tf.tensor2d(hx, [n, n], "float32");
        for (let l = 0; l < 3; l++) {
          hw[l] = randomData(n * n, 32 + l, -1 / Math.sqrt(n), 1 / Math.sqrt(n));
          hb[l] = randomData(n, 40 + l, -0.1, 0.1);
        }
        w = hw.map((d) => tf.tensor2d(t ? d : transposedSquare(d, n), [n, n], "float32"));
        b = hb.map((d) => tf.tensor1d(d, "float32"));
        held.push(x, ...w, ...b);
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
  // weights and biases) through tf.grads, in either layout.
  for (const { layout, name, note } of MLP_LAYOUTS) {
    const n = sizes.mlp;
    const t = layout === "out-in";
    let x: tf.Tensor, y: tf.Tensor, hy: Float32Array;
    let params: tf.Tensor[] = [];
    const forward = (p: tf.Tensor[]) => {
      const h1 = tf.relu(tf.add(tf.matMul(x, p[0], false, t), p[1]));
      const h2 = tf.relu(tf.add(tf.matMul(h1, p[2], false, t), p[3]));
      return tf.add(tf.matMul(h2, p[4], false, t), p[5]);
    };
    const gradients = tf.grads((...p: tf.Tensor[]) =>
      tf.mean(tf.square(tf.sub(forward(p), y))) as tf.Scalar
    );
    const run = () => gradients(params);
    cases.push({
      kind: "op",
      name: name.replace("mlp3", "mlp3_train"),
      note:
        `training step: forward + mean squared loss + gradients of 3 weights and 3 biases; ${note}`,
      shape: [n, n, n],
      reps: opts.reps ?? sizes.reps.matmul,
      setup: () => {
        x = tf.tensor2d(randomData(n * n, 31), [n, n], "float32");
        hy = randomData(n * n, 50);
        y = tf.tensor2d(hy, [n, n], "float32");
        params = [];
        for (let l = 0; l < 3; l++) {
          const w = randomData(
            n * n,
            32 + l,
            -1 / Math.sqrt(n),
            1 / Math.sqrt(n),
          );
          params.push(
            tf.tensor2d(t ? w : transposedSquare(w, n), [n, n], "float32"),
          );
          params.push(tf.tensor1d(randomData(n, 40 + l, -0.1, 0.1), "float32"));
        }
        held.push(x, y, ...params);
      },
      check: async () => {
        const grads = run();
        const got = (await grads[5].data()) as Float32Array;
        tf.dispose(grads);
        const out = tf.tidy(() => forward(params));
        const outData = (await out.data()) as Float32Array;
        out.dispose();
        return compare(got, refLastBiasGrad(outData, hy, n), 1e-6, 1e-3);
      },
      run: async (r: number) => {
        let last: tf.Tensor[] = [];
        for (let i = 0; i < r; i++) {
          const grads = run();
          tf.dispose(last);
          last = grads;
        }
        await sync();
        tf.dispose(last);
      },
      teardown: free,
    });
  }

  // chain_1Ki_{100,1100}: x = x + y repeated, one read-back; total wall ms.
  for (const len of [100, 1100]) {
    const n = sizes.chainElems;
    let x0: tf.Tensor, y: tf.Tensor, hx: Float32Array, hy: Float32Array;
    const chain = async (): Promise<Float32Array> => {
      let x = tf.add(x0, y);
      for (let i = 1; i < len; i++) {
        const nx = tf.add(x, y);
        x.dispose();
        x = nx;
      }
      const d = await x.data();
      x.dispose();
      return d as Float32Array;
    };
    cases.push({
      kind: "total",
      name: `chain_1Ki_${len}`,
      shape: [n],
      note: `total ms for ${len} dependent adds + one read-back`,
      setup: () => {
        hx = randomData(n, 9);
        hy = randomData(n, 10, 0, 0.01);
        x0 = tf.tensor1d(hx, "float32");
        y = tf.tensor1d(hy, "float32");
        held.push(x0, y);
      },
      check: async () => compare(await chain(), refChain(hx, hy, len), 1e-5 * len, 1e-5),
      run: async () => {
        await chain();
      },
      teardown: free,
    });
  }

  const version = tf.version_core === versionWebgpu
    ? tf.version_core
    : `core ${tf.version_core} / webgpu ${versionWebgpu}`;
  const report = await runCases(
    { peer: "tfjs", version, adapter },
    cases,
    opts,
    backend.device,
  );
  log(`[tfjs] tensors still alive: ${tf.memory().numTensors}`);
  emit(report);
}

try {
  await main();
} catch (e) {
  log(`[tfjs] fatal: ${errText(e)}`);
  if (e instanceof Error && e.stack) log(e.stack);
  Deno.exit(1);
}
// The WebGPU device keeps the event loop alive; exit explicitly.
Deno.exit(0);
