/// <reference lib="deno.window" />
// gyre's side of the peer comparison: the same cases, sizes and timing harness as
// bench/peers/tfjs.ts and bench/peers/jax.ts (bench/peers/common.ts), so the three
// columns of bench/compare.ts are measured alike. Runs unbundled (gyre has no
// dependencies). Cases gyre does not have yet are reported as missing.
import * as gyre from "../../src/mod.ts";
import {
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
import { gpuBackendOf } from "../../src/runtime.ts";

// gyre's own option: `--submit-every N` sets how many dispatches a batch records before it is
// submitted (src/gpu/batch.ts), to compare submit policies on a pipelined stream.
const submitAt = Deno.args.indexOf("--submit-every");
const submitEvery = submitAt >= 0 ? Number(Deno.args[submitAt + 1]) : undefined;
const opts = parseOptions(
  submitAt >= 0 ? Deno.args.filter((_, i) => i !== submitAt && i !== submitAt + 1) : Deno.args,
);
const sizes = sizesFor(opts.scale);

async function main() {
  const rt = await gyre.init({ device: "gpu" });
  if (submitEvery !== undefined) gpuBackendOf(rt)!.batch.submitEvery = submitEvery;
  const adapter = rt.caps!.description;
  log(`[gyre] adapter ${adapter}`);

  /** Per-op case: issue `op` r times, keep only the newest result, then wait for the GPU. */
  function opRunner(op: () => gyre.Tensor): (r: number) => Promise<void> {
    return async (r: number) => {
      let last: gyre.Tensor | null = null;
      for (let i = 0; i < r; i++) {
        // gyre is lazy: realize() makes every op run (recorded, not waited for), as the other
        // libraries' eager ops do.
        const t = op().realize();
        last?.dispose();
        last = t;
      }
      await gyre.sync();
      last?.dispose();
    };
  }
  async function readOnce(op: () => gyre.Tensor): Promise<Float32Array> {
    const t = op();
    const d = await t.data();
    t.dispose();
    return d as Float32Array;
  }

  const cases: Case[] = [];
  const held: gyre.Tensor[] = [];
  const free = () => {
    for (const t of held.splice(0)) t.dispose();
  };

  for (
    const [name, n] of [["add_16Mi", sizes.add16], [
      "add_64Mi",
      sizes.add64,
    ]] as const
  ) {
    let a: gyre.Tensor, b: gyre.Tensor, ha: Float32Array, hb: Float32Array;
    const op = () => gyre.add(a, b);
    cases.push({
      kind: "op",
      name,
      shape: [n],
      reps: opts.reps ?? sizes.reps.elementwise,
      setup: () => {
        ha = randomData(n, 1);
        hb = randomData(n, 2);
        a = gyre.tensor(ha);
        b = gyre.tensor(hb);
        held.push(a, b);
      },
      check: async () => compare(await readOnce(op), refAdd(ha, hb), 0, 0),
      run: opRunner(op),
      teardown: free,
    });
  }
  {
    const n = sizes.sum;
    let x: gyre.Tensor, hx: Float32Array;
    const op = () => gyre.sum(x);
    cases.push({
      kind: "op",
      name: "sum_16Mi",
      shape: [n],
      reps: opts.reps ?? sizes.reps.elementwise,
      setup: () => {
        hx = randomData(n, 4);
        x = gyre.tensor(hx);
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
  // Row ops, the scan and the product: same data, sizes and checks as the peers' cases.
  for (
    const [name, shape, seed, lo, hi, op, check] of [
      [
        "softmax_4096x4096",
        sizes.softmax,
        3,
        -4,
        4,
        (x: gyre.Tensor) => gyre.softmax(x, { axis: -1 }),
        "softmax",
      ],
      [
        "layerNorm_4096x4096",
        sizes.layerNorm,
        6,
        -2,
        3,
        (x: gyre.Tensor) => gyre.layerNorm(x, { eps: 1e-5 }),
        "layerNorm",
      ],
    ] as const
  ) {
    const [rows, cols] = shape;
    let x: gyre.Tensor, hx: Float32Array;
    const fn = () => op(x);
    cases.push({
      kind: "op",
      name,
      shape: [rows, cols],
      reps: opts.reps ?? sizes.reps.rows,
      setup: () => {
        hx = randomData(rows * cols, seed, lo, hi);
        x = gyre.tensor(hx, { shape: [rows, cols] });
        held.push(x);
      },
      check: async () => {
        const got = (await readOnce(fn)).subarray(0, 4 * cols);
        return check === "softmax"
          ? compare(got, refRows("softmax", hx, cols, 4), 1e-7, 1e-4)
          : compare(got, refRows("layerNorm", hx, cols, 4), 1e-4, 1e-3);
      },
      run: opRunner(fn),
      teardown: free,
    });
  }
  {
    const n = sizes.cumsum;
    let x: gyre.Tensor, hx: Float32Array;
    const fn = () => gyre.cumsum(x, { axis: 0 });
    cases.push({
      kind: "op",
      name: "cumsum_16Mi",
      shape: [n],
      reps: opts.reps ?? sizes.reps.elementwise,
      setup: () => {
        hx = randomData(n, 5);
        x = gyre.tensor(hx);
        held.push(x);
      },
      check: async () =>
        compare(
          await readOnce(fn),
          refCumsum(hx),
          1e-5 * Math.sqrt(n) * Math.log2(n),
          1e-4,
        ),
      run: opRunner(fn),
      teardown: free,
    });
  }
  // Sorting (issue 22): values; indices (checked through the values they pick); top-k of rows.
  {
    const n = sizes.sort;
    const [rows, cols, k] = sizes.topk;
    let x: gyre.Tensor, rowsX: gyre.Tensor, hx: Float32Array, hr: Float32Array;
    const sortFn = () => gyre.sort(x);
    const argsortFn = () => gyre.argsort(x);
    const topkFn = () => {
      const [values, indices] = gyre.topk(rowsX, k);
      indices.realize().dispose();
      return values;
    };
    const setup = () => {
      hx = randomData(n, 9);
      hr = randomData(rows * cols, 10);
      x = gyre.tensor(hx);
      rowsX = gyre.tensor(hr).reshape([rows, cols]);
      held.push(x, rowsX);
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
        const t = argsortFn();
        const indices = await t.data();
        t.dispose();
        return compare(gatherAt(hx, indices), refSort(hx), 0, 0);
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
    let a: gyre.Tensor, b: gyre.Tensor, ha: Float32Array, hb: Float32Array;
    const fn = () => gyre.matmul(a, b);
    cases.push({
      kind: "op",
      name: "matmul_4096",
      shape: [n, n, n],
      reps: opts.reps ?? sizes.reps.matmul,
      setup: () => {
        ha = randomData(n * n, 7);
        hb = randomData(n * n, 8);
        a = gyre.tensor(ha, { shape: [n, n] });
        b = gyre.tensor(hb, { shape: [n, n] });
        held.push(a, b);
      },
      check: async () => {
        const got = (await readOnce(fn)).subarray(0, 2 * n);
        return compare(got, refMatmulRows(ha, hb, n, 2), 1e-5 * n, 1e-3);
      },
      run: opRunner(fn),
      teardown: free,
    });
  }
  // A three-layer MLP forward, batch and width sizes.mlp: linear + relu twice, then linear, with
  // the weights in either layout. gyre runs it through jit (recorded once, replayed); bias and relu
  // fuse into each product's kernel.
  for (const { layout, name, note } of MLP_LAYOUTS) {
    const n = sizes.mlp;
    const t = layout === "out-in";
    let x: gyre.Tensor, hx: Float32Array;
    const hw: Float32Array[] = [], hb: Float32Array[] = [];
    let w: gyre.Tensor[] = [], b: gyre.Tensor[] = [];
    const forward = gyre.jit((input: gyre.Tensor) => {
      if (!t) {
        const h1 = gyre.relu(gyre.matmul(input, w[0]).add(b[0]));
        const h2 = gyre.relu(gyre.matmul(h1, w[1]).add(b[1]));
        return gyre.matmul(h2, w[2]).add(b[2]);
      }
      const h1 = gyre.linear(input, w[0], { bias: b[0], activation: "relu" });
      const h2 = gyre.linear(h1, w[1], { bias: b[1], activation: "relu" });
      return gyre.linear(h2, w[2], { bias: b[2] });
    });
    const fn = () => forward(x) as gyre.Tensor;
    // The same network op by op: fusion off, no jit (matmul, add, relu: one kernel each).
    const rt = gyre.runtime();
    const eager = () => {
      rt.fusion = false;
      try {
        return gyre.tidy(() => {
          const h1 = gyre.relu(gyre.matmul(x, w[0], { transposeB: true }).add(b[0]));
          const h2 = gyre.relu(gyre.matmul(h1, w[1], { transposeB: true }).add(b[1]));
          return gyre.matmul(h2, w[2], { transposeB: true }).add(b[2]);
        });
      } finally {
        rt.fusion = true;
      }
    };
    cases.push({
      kind: "op",
      name,
      shape: [n, n, n],
      reps: opts.reps ?? sizes.reps.matmul,
      note:
        `three linear layers (relu, relu, none), batch = width, ${note}; gyre: jit + fused epilogues`,
      setup: () => {
        hx = randomData(n * n, 31);
        x = gyre.tensor(hx, { shape: [n, n] });
        for (let l = 0; l < 3; l++) {
          hw[l] = randomData(n * n, 32 + l, -1 / Math.sqrt(n), 1 / Math.sqrt(n));
          hb[l] = randomData(n, 40 + l, -0.1, 0.1);
        }
        w = hw.map((d) => gyre.tensor(t ? d : transposedSquare(d, n), { shape: [n, n] }));
        b = hb.map((d) => gyre.tensor(d));
        held.push(x, ...w, ...b);
      },
      check: async () => {
        const got = (await readOnce(fn)).subarray(0, 2 * n);
        return compare(got, refMlpRows(hx, hw, hb, n, 2), 1e-5 * n, 1e-3);
      },
      run: opRunner(fn),
      ...(t ? {} : { teardown: free }),
    });
    if (!t) continue;
    cases.push({
      kind: "op",
      name: "mlp3_4096 (gyre op by op)",
      shape: [n, n, n],
      reps: opts.reps ?? sizes.reps.matmul,
      note: "gyre with fusion off and no jit: matmul, add and relu as separate kernels",
      check: async () => {
        const got = (await readOnce(eager)).subarray(0, 2 * n);
        return compare(got, refMlpRows(hx, hw, hb, n, 2), 1e-5 * n, 1e-3);
      },
      run: opRunner(eager),
      teardown: free,
    });
  }
  // One training step of the same MLP in either layout: forward, mean squared loss against a
  // target, backward to the gradients of all weights and biases, through jit(grad(...)). The
  // gradient of the input is not asked for (as in training).
  for (const { layout, name, note } of MLP_LAYOUTS) {
    const n = sizes.mlp;
    const t = layout === "out-in";
    let x: gyre.Tensor, y: gyre.Tensor, hy: Float32Array;
    let params: gyre.Tensor[] = [];
    type Layers = [
      gyre.Tensor,
      gyre.Tensor,
      gyre.Tensor,
      gyre.Tensor,
      gyre.Tensor,
      gyre.Tensor,
    ];
    const forward = (input: gyre.Tensor, p: Layers) => {
      if (!t) {
        const h1 = gyre.relu(gyre.matmul(input, p[0]).add(p[1]));
        const h2 = gyre.relu(gyre.matmul(h1, p[2]).add(p[3]));
        return gyre.matmul(h2, p[4]).add(p[5]);
      }
      const h1 = gyre.linear(input, p[0], { bias: p[1], activation: "relu" });
      const h2 = gyre.linear(h1, p[2], { bias: p[3], activation: "relu" });
      return gyre.linear(h2, p[4], { bias: p[5] });
    };
    const loss = (input: gyre.Tensor, target: gyre.Tensor, ...p: Layers) =>
      forward(input, p).sub(target).square().mean();
    const gradients = gyre.grad(loss, { argnums: [2, 3, 4, 5, 6, 7] });
    const step = gyre.jit((...a: gyre.Tensor[]) =>
      gradients(
        ...(a as [gyre.Tensor, gyre.Tensor, ...Layers]),
      ) as gyre.Tensor[]
    );
    const run = () => step(x, y, ...params) as gyre.Tensor[];
    cases.push({
      kind: "op",
      name: name.replace("mlp3", "mlp3_train"),
      shape: [n, n, n],
      reps: opts.reps ?? sizes.reps.matmul,
      note: "training step: forward + mean squared loss + gradients of 3 weights and 3 biases; " +
        `${note}; gyre: jit(grad(loss))`,
      setup: () => {
        x = gyre.tensor(randomData(n * n, 31), { shape: [n, n] });
        hy = randomData(n * n, 50);
        y = gyre.tensor(hy, { shape: [n, n] });
        params = [];
        for (let l = 0; l < 3; l++) {
          const w = randomData(
            n * n,
            32 + l,
            -1 / Math.sqrt(n),
            1 / Math.sqrt(n),
          );
          params.push(
            gyre.tensor(t ? w : transposedSquare(w, n), { shape: [n, n] }),
            gyre.tensor(randomData(n, 40 + l, -0.1, 0.1)),
          );
        }
        held.push(x, y, ...params);
      },
      check: async () => {
        const grads = run();
        const got = await grads[5].data() as Float32Array;
        for (const g of grads) g.dispose();
        const out = forward(x, params as Layers);
        const outData = await out.data() as Float32Array;
        out.dispose();
        return compare(got, refLastBiasGrad(outData, hy, n), 1e-6, 1e-3);
      },
      run: async (r: number) => {
        let last: gyre.Tensor[] = [];
        for (let i = 0; i < r; i++) {
          const grads = run();
          for (const g of grads) g.realize();
          for (const g of last) g.dispose();
          last = grads;
        }
        await gyre.sync();
        for (const g of last) g.dispose();
      },
      teardown: free,
    });
  }
  for (const len of [100, 1100]) {
    const n = sizes.chainElems;
    let x0: gyre.Tensor, y: gyre.Tensor, hx: Float32Array, hy: Float32Array;
    const chain = async (): Promise<Float32Array> => {
      const out = gyre.tidy(() => {
        let x = gyre.add(x0, y);
        for (let i = 1; i < len; i++) x = gyre.add(x, y);
        return x;
      });
      const d = await out.data();
      out.dispose();
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
        x0 = gyre.tensor(hx);
        y = gyre.tensor(hy);
        held.push(x0, y);
      },
      check: async () => compare(await chain(), refChain(hx, hy, len), 1e-5 * len, 1e-5),
      run: async () => {
        await chain();
      },
      teardown: free,
    });
  }
  const report = await runCases(
    { peer: "gyre", version: "0.1.0", adapter },
    cases,
    opts,
    rt.gpu!.device,
  );
  emit(report);
}

try {
  await main();
} catch (e) {
  log(`[gyre] fatal: ${errText(e)}`);
  if (e instanceof Error && e.stack) log(e.stack);
  Deno.exit(1);
}
Deno.exit(0);
