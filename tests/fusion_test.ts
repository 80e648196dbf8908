/**
 * The lazy graph and elementwise fusion: dispatch counts, explain, laziness, and random expression
 * trees (elementwise ops with reductions and norms as fusion barriers) computed fused against the
 * same trees computed op by op, on both devices.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import * as gyre from "../src/mod.ts";
import * as tuning from "../src/tuning.ts";
import { SEED } from "./_harness.ts";
import { devices, liveCounts } from "./_devices.ts";
import { gpuBackendOf } from "../src/runtime.ts";

const DEVICES = await devices();
const hasGpu = DEVICES.includes("gpu");

function gpuDispatches(fn: () => void): number {
  const gpu = gpuBackendOf()!;
  gyre.flush();
  const before = gpu.batch.totalDispatches;
  fn();
  gyre.flush();
  return gpu.batch.totalDispatches - before;
}

/** Runs `build` fused and with fusion off and compares the results within `relative`. */
async function assertFusedMatchesEager(
  build: () => gyre.Tensor[],
  relative: number,
): Promise<void> {
  const results: Float32Array[][] = [];
  for (const fusion of [true, false]) {
    gyre.runtime().fusion = fusion;
    try {
      const outputs = build();
      results.push((await gyre.readAll(outputs)) as Float32Array[]);
      outputs.forEach((t) => t.dispose());
    } finally {
      gyre.runtime().fusion = true;
    }
  }
  const [fused, eager] = results;
  fused.forEach((f, k) =>
    f.forEach((v, i) =>
      assert.ok(
        Math.abs(v - eager[k][i]) <= relative * Math.max(1, Math.abs(eager[k][i])),
        `output ${k}[${i}]: fused ${v}, op by op ${eager[k][i]}`,
      )
    )
  );
}

Deno.test({
  name: "fusion: relu(a * b + c) is one dispatch",
  ignore: !hasGpu,
  fn: async () => {
    const a = gyre.random.normal([1000], { seed: 1, device: "gpu" });
    const b = gyre.random.normal([1000], { seed: 2, device: "gpu" });
    const c = gyre.random.normal([1000], { seed: 3, device: "gpu" });
    gyre.flush();
    let y: gyre.Tensor | null = null;
    // tidy disposes the intermediates (a * b, + c) before they are computed: only y runs.
    assert.equal(gpuDispatches(() => (y = gyre.tidy(() => gyre.relu(a.mul(b).add(c))))), 1);
    const [av, bv, cv, yv] = await gyre.readAll([a, b, c, y!]);
    yv.forEach((v, i) => assert.ok(Math.abs(v - Math.max(av[i] * bv[i] + cv[i], 0)) <= 1e-6));
    for (const t of [a, b, c, y!]) t.dispose();
  },
});

Deno.test({
  name: "fusion: broadcasts, casts, where and creation fold into one kernel",
  ignore: !hasGpu,
  fn: async () => {
    const m = gyre.random.uniform([64, 32], { seed: 4, device: "gpu" });
    gyre.flush();
    let y: gyre.Tensor | null = null;
    const count = gpuDispatches(() => {
      y = gyre.tidy(() => {
        const row = gyre.arange(32, undefined, 1, { device: "gpu" }).cast("float32");
        return gyre.where(m.greater(0.5), m.mul(row), gyre.zeros([64, 32], { device: "gpu" }))
          .cast("float16");
      });
    });
    // The arange row reads its element index, so it is computed on its own before being
    // broadcast; everything else is one kernel.
    assert.equal(count, 2);
    const [mv, yv] = await gyre.readAll([m, y!]);
    for (let i = 0; i < mv.length; i++) {
      const want = mv[i] > 0.5 ? mv[i] * (i % 32) : 0;
      assert.ok(
        Math.abs(yv[i] - want) <= 2 ** -10 * Math.abs(want) + 1e-7,
        `${i}: ${yv[i]} vs ${want}`,
      );
    }
    m.dispose();
    y!.dispose();
  },
});

Deno.test({
  name: "fusion: a reduction is a barrier: sum(x * y) is the product kernel then the sum",
  ignore: !hasGpu,
  fn: () => {
    const x = gyre.ones([4096], { device: "gpu" });
    const { kernels } = gyre.explain(() => gyre.tidy(() => gyre.sum(x.mul(x))), { print: false });
    assert.deepEqual(kernels.map((k) => k.kernel), ["ones+mul", "sum"]);
    x.dispose();
  },
});

Deno.test("fusion: pending tensors allocate nothing and launch nothing when dropped", async () => {
  for (const device of DEVICES) {
    const before = gyre.runtime().stats();
    const x = gyre.random.normal([1 << 16], { seed: 9, device });
    const y = x.exp().mul(3);
    const { text } = gyre.explain(y, { print: false });
    assert.match(text, /normal.*exp\+mul \(pending, 65536 elements\)/);
    const after = gyre.runtime().stats();
    assert.equal(after.wasm.liveBlocks, before.wasm.liveBlocks);
    assert.equal(after.gpu?.liveBuffers, before.gpu?.liveBuffers);
    x.dispose();
    y.dispose();
    // Once computed, a tensor explains as done.
    const z = gyre.ones([3], { device }).add(1);
    assert.deepEqual(Array.from(await z.data()), [2, 2, 2]);
    assert.equal(gyre.explain(z, { print: false }).text, "computed already: no kernel");
    z.dispose();
  }
});

Deno.test({
  name: "fusion: long chains are cut into kernels of bounded size",
  ignore: !hasGpu,
  fn: async () => {
    const x = gyre.zeros([8], { device: "gpu" });
    const { kernels } = gyre.explain(() => {
      let y = x;
      for (let i = 0; i < 250; i++) y = y.add(1);
      return y;
    }, { print: false });
    assert.ok(kernels.length >= 3 && kernels.length <= 4, kernels.map((k) => k.kernel).join(", "));
    x.dispose();
    const y = gyre.tidy(() => {
      let t = gyre.zeros([8], { device: "gpu" });
      for (let i = 0; i < 250; i++) t = t.add(1);
      return t;
    });
    assert.deepEqual(Array.from(await y.data()), new Array(8).fill(250));
    y.dispose();
  },
});

// ---------------------------------------------------------------------------------------------
// Random expression trees, fused against op by op.

type Node =
  | { kind: "leaf"; index: number }
  | { kind: "const"; value: number }
  | { kind: "unary"; op: string; x: Node }
  | { kind: "binary"; op: string; a: Node; b: Node }
  | { kind: "where"; c: Node; a: Node; b: Node }
  | { kind: "barrier"; op: "sumLast" | "maxLast" | "softmaxLast" | "rmsNormLast"; x: Node };

// Ops whose result is finite and tame on inputs in [-2, 2] composed a few times.
const UNARY = ["neg", "abs", "tanh", "sigmoid", "relu", "silu", "square", "floor", "sin"];
const BINARY = ["add", "sub", "mul", "maximum", "minimum"];

const nodeArb: fc.Arbitrary<Node> = fc.letrec<{ node: Node }>((tie) => ({
  node: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.record({ kind: fc.constant("leaf" as const), index: fc.integer({ min: 0, max: 2 }) }),
    fc.record({ kind: fc.constant("const" as const), value: fc.constantFrom(-1.5, 0, 0.5, 2) }),
    fc.record({
      kind: fc.constant("unary" as const),
      op: fc.constantFrom(...UNARY),
      x: tie("node"),
    }),
    fc.record({
      kind: fc.constant("binary" as const),
      op: fc.constantFrom(...BINARY),
      a: tie("node"),
      b: tie("node"),
    }),
    fc.record({
      kind: fc.constant("where" as const),
      c: tie("node"),
      a: tie("node"),
      b: tie("node"),
    }),
    fc.record({
      kind: fc.constant("barrier" as const),
      // Softmax and rmsNorm take a pending same-shape input as their kernel's prologue.
      op: fc.constantFrom(
        "sumLast" as const,
        "maxLast" as const,
        "softmaxLast" as const,
        "rmsNormLast" as const,
      ),
      x: tie("node"),
    }),
  ),
})).node;

function build(node: Node, leaves: gyre.Tensor[]): gyre.Tensor {
  const run = (n: Node): gyre.Tensor | number => {
    switch (n.kind) {
      case "leaf":
        return leaves[n.index];
      case "const":
        return n.value;
      case "unary": {
        // A unary op of a bare number would make a tensor on the default device.
        const x = run(n.x);
        const t = typeof x === "number" ? leaves[0].mul(0).add(x) : x;
        return (gyre as unknown as Record<string, (t: gyre.Tensor) => gyre.Tensor>)[n.op](t);
      }
      case "binary": {
        // Two bare numbers would make a tensor on the default device: one side goes on the leaves'.
        const a = run(n.a);
        const b = run(n.b);
        return (gyre as unknown as Record<string, (a: unknown, b: unknown) => gyre.Tensor>)[n.op](
          typeof a === "number" && typeof b === "number" ? leaves[0].mul(0).add(a) : a,
          b,
        );
      }
      case "where": {
        const c = run(n.c);
        const a = run(n.a);
        const b = run(n.b);
        return gyre.where(
          typeof c === "number" ? c > 0 : gyre.greater(c, 0),
          typeof c === "number" && typeof a === "number" && typeof b === "number"
            ? leaves[0].mul(0).add(a)
            : a,
          b,
        );
      }
      case "barrier": {
        const x = run(n.x);
        const t = typeof x === "number" ? leaves[0].mul(0).add(x) : x;
        if (n.op === "sumLast") return gyre.sum(t, { axis: -1, keepdims: true }).mul(0.125);
        if (n.op === "maxLast") return gyre.max(t, { axis: -1, keepdims: true });
        if (n.op === "rmsNormLast") return gyre.rmsNorm(t, { axis: -1 });
        return gyre.softmax(t, { axis: -1 });
      }
    }
  };
  const out = run(node);
  return typeof out === "number" ? leaves[0].mul(0).add(out) : out;
}

const shapes = fc.constantFrom(
  [[5, 8], [5, 8], [5, 8]],
  [[5, 8], [8], [5, 1]],
  [[3, 1, 8], [4, 8], [1]],
  [[257], [257], [1]],
);

Deno.test("fusion: random expression trees, fused equal op by op (both devices)", async () => {
  const rt = gyre.runtime();
  await fc.assert(
    fc.asyncProperty(
      nodeArb,
      shapes,
      fc.integer({ min: 0, max: 1000 }),
      async (tree, shapeSet, seed) => {
        for (const device of DEVICES) {
          const results: Float32Array[] = [];
          for (const fusion of [true, false]) {
            rt.fusion = fusion;
            try {
              const out = gyre.tidy(() => {
                const leaves = shapeSet.map((shape, i) =>
                  gyre.random.uniform(shape, { seed: seed + i, low: -2, high: 2, device })
                );
                return build(tree, leaves);
              });
              results.push((await out.data()) as Float32Array);
              out.dispose();
            } finally {
              rt.fusion = true;
            }
          }
          const [fused, eager] = results;
          assert.equal(fused.length, eager.length);
          // Identical: WASM evaluates node by node either way, and a fused GPU kernel hides each
          // float node's value from the compiler, so nothing is rewritten or contracted across
          // ops (see emitBody). Only a sum may add in another order on the GPU (its plan reads a
          // fused prologue's broadcast inputs through strides, the unfused buffer as vec4): an
          // ulp, which floor and where can turn into a step, so a rare flip is admitted there.
          const sums = JSON.stringify(tree).includes("sumLast") && device === "gpu";
          let mismatches = 0;
          fused.forEach((v, i) => {
            const w = eager[i];
            const ok = Number.isNaN(w)
              ? Number.isNaN(v)
              : sums
              ? Math.abs(v - w) <= 1e-5 * Math.max(1, Math.abs(w))
              : Object.is(v, w);
            if (!ok) mismatches++;
          });
          assert.ok(
            mismatches <= (sums ? Math.max(1, fused.length / 100) : 0),
            `${device}: ${mismatches} of ${fused.length} differ for ${JSON.stringify(tree)}`,
          );
        }
      },
    ),
    { seed: SEED, numRuns: 40 },
  );
});

Deno.test({
  name: "fusion: relu(matmul(a, b) + bias) is one dispatch, and a residual add folds in too",
  ignore: !hasGpu,
  fn: async () => {
    const a = gyre.random.normal([64, 48], { seed: 11, device: "gpu" }).realize();
    const b = gyre.random.normal([48, 40], { seed: 12, device: "gpu" }).realize();
    const bias = gyre.random.normal([40], { seed: 13, device: "gpu" }).realize();
    const res = gyre.random.normal([64, 40], { seed: 14, device: "gpu" }).realize();
    let y: gyre.Tensor | null = null;
    assert.equal(
      gpuDispatches(() => (y = gyre.tidy(() => gyre.relu(gyre.matmul(a, b).add(bias).add(res))))),
      1,
    );
    const { kernels } = gyre.explain(() => gyre.tidy(() => gyre.matmul(a, b).mul(2).sub(res)), {
      print: false,
    });
    assert.deepEqual(kernels.map((k) => k.kernel), ["matmul+mul+sub"]);
    // The same on WASM, op by op: the fused epilogue computes the same function.
    const [av, bv, biasv, resv, yv] = await gyre.readAll([a, b, bias, res, y!]);
    for (let i = 0; i < 64; i += 7) {
      for (let j = 0; j < 40; j += 3) {
        let dot = 0;
        for (let k = 0; k < 48; k++) dot += av[i * 48 + k] * bv[k * 40 + j];
        const want = Math.max(dot + biasv[j] + resv[i * 40 + j], 0);
        assert.ok(Math.abs(yv[i * 40 + j] - want) <= 1e-4 * (1 + Math.abs(want)), `${i},${j}`);
      }
    }
    for (const t of [a, b, bias, res, y!]) t.dispose();
  },
});

Deno.test({
  name: "fusion: epilogues that cannot run in the product's kernel fall back correctly",
  ignore: !hasGpu,
  fn: async () => {
    const a = gyre.random.normal([2, 16, 8], { seed: 21, device: "gpu" }).realize();
    const b = gyre.random.normal([8, 12], { seed: 22, device: "gpu" }).realize();
    const perBatch = gyre.random.normal([2, 16, 12], { seed: 23, device: "gpu" }).realize();
    const results = gyre.tidy(() => [
      gyre.matmul(a, b).greater(0), // bool result: the product's dtype cannot store it
      gyre.matmul(a, b).add(perBatch), // varies along the batch axis
      gyre.sum(gyre.matmul(a, b), { axis: -1 }), // a reduction reads the product
    ]);
    const fused = await gyre.readAll(results);
    gyre.runtime().fusion = false;
    let eager: Float32Array[];
    try {
      const again = gyre.tidy(() => [
        gyre.matmul(a, b).greater(0),
        gyre.matmul(a, b).add(perBatch),
        gyre.sum(gyre.matmul(a, b), { axis: -1 }),
      ]);
      eager = (await gyre.readAll(again)) as Float32Array[];
      again.forEach((t) => t.dispose());
    } finally {
      gyre.runtime().fusion = true;
    }
    fused.forEach((f, k) => assert.deepEqual(Array.from(f), Array.from(eager[k]), `result ${k}`));
    for (const t of [a, b, perBatch, ...results]) t.dispose();
  },
});

Deno.test({
  name: "fusion: elementwise consumers of a reduction run in its store",
  ignore: !hasGpu,
  fn: async () => {
    const x = gyre.random.normal([64, 3000], { seed: 41, device: "gpu" }).realize();
    const w = gyre.random.normal([64], { seed: 42, device: "gpu" }).realize();
    // Long enough to be split into chunks: the epilogue runs where the chunks are combined.
    const big = gyre.random.normal([(1 << 20) + 12], { seed: 43, device: "gpu" }).realize();
    const half = x.cast("float16").realize();
    const build = () =>
      gyre.tidy(() => [
        gyre.mean(x, { axis: 1 }),
        gyre.sum(x, { axis: 1 }).mul(w).add(1),
        gyre.std(x, { axis: 1, keepdims: true }),
        gyre.mean(big),
        gyre.argmax(x, { axis: 1 }).add(1),
        gyre.sum(x, { axis: 1 }).greater(0), // stored as bool by the sum's kernel
        gyre.mean(half, { axis: 1 }), // float16: cast, summed in float32, divided, rounded
      ]);
    const { kernels } = gyre.explain(build, { print: false });
    assert.deepEqual(kernels.map((k) => k.kernel), [
      "sum+div",
      "sum+mul+add",
      "std+div+sqrt",
      "sum+div",
      "argmax+add",
      "sum+greater",
      "cast+sum+div+cast",
    ]);
    await assertFusedMatchesEager(build, 1e-6);
    // The same with the chunks combined by a second pass: the epilogue moves there.
    tuning.setPlanOverride("reduce", { combineChunks: "second-pass" });
    try {
      assert.equal(gpuDispatches(() => gyre.tidy(() => gyre.mean(big).realize()).dispose()), 2);
      await assertFusedMatchesEager(() => gyre.tidy(() => [gyre.mean(big).mul(w)]), 1e-6);
    } finally {
      tuning.setPlanOverride("reduce", null);
    }
    assert.equal(gpuDispatches(() => gyre.tidy(() => gyre.mean(big).realize()).dispose()), 1);
    for (const t of [x, w, big, half]) t.dispose();
  },
});

Deno.test({
  name: "a large uniform block, then a smaller one under the same layout, in one pass",
  ignore: !hasGpu,
  fn: async () => {
    // A sum with a three-input prologue binds four buffers and a 304-byte Params block; the
    // elementwise kernel after it binds four buffers too and a 160-byte block. wgpu checks the
    // second binding's size against the first pipeline's Params (seed 208 of the random trees).
    const before = liveCounts();
    const a = gyre.random.normal([5, 8], { seed: 1, device: "gpu" }).realize();
    const b = gyre.random.normal([8], { seed: 2, device: "gpu" }).realize();
    const c = gyre.random.normal([5, 1], { seed: 3, device: "gpu" }).realize();
    const mask = gyre.greater(a, 0).realize();
    await gyre.sync();
    const outputs = gyre.tidy(() => [
      gyre.sum(gyre.where(mask, b, c), { axis: -1 }).realize(),
      gyre.where(mask, c, b).realize(),
    ]);
    const [sums, picked] = await gyre.readAll(outputs);
    const [av, bv, cv] = await gyre.readAll([a, b, c]);
    for (let i = 0; i < 5; i++) {
      let want = 0;
      for (let j = 0; j < 8; j++) {
        const positive = av[i * 8 + j] > 0;
        want += positive ? bv[j] : cv[i];
        assert.equal(picked[i * 8 + j], positive ? cv[i] : bv[j]);
      }
      assert.ok(Math.abs(sums[i] - want) <= 1e-5 * 8 * (Math.abs(want) + 8), `row ${i}`);
    }
    for (const t of [a, b, c, mask, ...outputs]) t.dispose();
    assert.deepEqual(liveCounts(), before);
  },
});

Deno.test({
  name: "fusion: elementwise consumers of softmax and the norms run in the row kernel",
  ignore: !hasGpu,
  fn: async () => {
    // The plan's own forms (the two-stage scheme of long rows included): a tuned table may
    // choose others, whose kernel lists differ.
    tuning.setTuningMode("off");
    try {
      const x = gyre.random.normal([64, 256], { seed: 31, device: "gpu" }).realize();
      const res = gyre.random.normal([64, 256], { seed: 32, device: "gpu" }).realize();
      const w = gyre.random.normal([256], { seed: 33, device: "gpu" }).realize();
      const long = gyre.random.normal([4, 70000], { seed: 34, device: "gpu" }).realize();
      const build = () =>
        gyre.tidy(() => [
          gyre.softmax(x).mul(2),
          gyre.layerNorm(x, { weight: w }).add(res).relu(),
          gyre.rmsNorm(x).mul(res),
          gyre.logSoftmax(long).exp(), // the two-stage scheme: the epilogue is in its last pass
          gyre.softmax(x.transpose(), { axis: 0 }).mul(3), // strided rows: computed, then scaled
          gyre.softmax(x).greater(0.01), // a bool result cannot be stored by the row kernel
        ]);
      const { kernels } = gyre.explain(build, { print: false });
      assert.deepEqual(kernels.map((k) => k.kernel), [
        "softmax+mul",
        "layerNorm+add+relu",
        "rmsNorm+mul",
        "logSoftmax+exp",
        "logSoftmax+exp",
        "logSoftmax+exp",
        "softmax",
        "softmax+mul",
        "softmax",
        "softmax+greater",
      ]);
      // The same kernels compute the same values; only where the product's value is kept in a
      // register instead of memory may the compiler contract a multiply-add (an ulp or so).
      await assertFusedMatchesEager(build, 1e-6);
      for (const t of [x, res, w, long]) t.dispose();
    } finally {
      tuning.setTuningMode("table");
    }
  },
});

Deno.test({
  name: "fusion: elementwise producers of softmax and the norms run in the row kernel's prologue",
  ignore: !hasGpu,
  fn: async () => {
    // The plan's own forms (the two-stage scheme of long rows included): a tuned table may
    // choose others, whose kernel lists differ.
    tuning.setTuningMode("off");
    try {
      const before = liveCounts();
      const x = gyre.random.normal([64, 256], { seed: 41, device: "gpu" }).realize();
      const res = gyre.random.normal([64, 256], { seed: 42, device: "gpu" }).realize();
      const w = gyre.random.normal([256], { seed: 43, device: "gpu" }).realize();
      const long = gyre.random.normal([4, 70000], { seed: 44, device: "gpu" }).realize();
      const build = () =>
        gyre.tidy(() => [
          gyre.softmax(x.add(res)),
          // Prologue and epilogue in one kernel, with the weight between their inputs.
          gyre.layerNorm(x.mul(2).add(res), { weight: w }).add(res).relu(),
          gyre.rmsNorm(x.sigmoid().mul(res)),
          gyre.logSoftmax(long.mul(0.5)), // the two-stage scheme: partial and apply both read x
          gyre.softmax(x.add(res), { axis: 0 }), // strided rows: the sum is computed first
          gyre.layerNorm(x.add(w)), // a broadcast input: computed first
          gyre.softmax(x.add(res).reshape([64, 4, 64])), // a reshape computes its input
        ]);
      const { kernels, outputs: explained } = gyre.explain(build, { print: false });
      explained.forEach((t) => t.dispose());
      assert.deepEqual(kernels.map((k) => k.kernel), [
        // Calls that cannot fuse a prologue compute their input at once.
        "add",
        "add",
        "add",
        "add+softmax",
        "mul+add+layerNorm+add+relu",
        "sigmoid+mul+rmsNorm",
        "mul+logSoftmax",
        "mul+logSoftmax",
        "mul+logSoftmax",
        "softmax", // rows across memory: partial, combine and apply
        "softmax",
        "softmax",
        "layerNorm",
        "softmax",
      ]);
      // The same arithmetic in the same order; a value kept in a register may let the compiler
      // contract a multiply-add (an ulp of the input, amplified by at most 1/std in the norms).
      await assertFusedMatchesEager(build, 1e-5);
      for (const t of [x, res, w, long]) t.dispose();
      // The prologue's inputs, held by the pending row op, are released with it.
      assert.deepEqual(liveCounts(), before);
    } finally {
      tuning.setTuningMode("table");
    }
  },
});

Deno.test({
  name: "fusion: elementwise operands of matmul and linear run in the product's kernel (prologue)",
  ignore: !hasGpu,
  fn: async () => {
    const before = liveCounts();
    const a = gyre.random.normal([64, 48], { seed: 51, device: "gpu" }).realize();
    const b = gyre.random.normal([48, 40], { seed: 52, device: "gpu" }).realize();
    const c = gyre.random.normal([64, 48], { seed: 53, device: "gpu" }).realize();
    const bias = gyre.random.normal([40], { seed: 54, device: "gpu" }).realize();
    const scale = gyre.random.normal([48], { seed: 55, device: "gpu" }).realize();
    const w = gyre.random.normal([40, 48], { seed: 56, device: "gpu" }).realize();
    const products = [
      () => gyre.matmul(a.mul(2).relu(), b),
      () => gyre.relu(gyre.matmul(a.add(c), b).add(bias)), // prologue and epilogue in one kernel
      () => gyre.linear(a.mul(scale), w, { bias, activation: "gelu" }), // a per-column scale
      () => gyre.matmul(a, b.sub(0.5).abs()), // B's prologue
    ];
    const build = () => gyre.tidy(() => products.map((f) => f()));
    // K = 48 is too short to split: one dispatch per product.
    products.forEach((f, i) => {
      let y: gyre.Tensor | null = null;
      assert.equal(gpuDispatches(() => (y = gyre.tidy(f))), 1, `product ${i}`);
      y!.dispose();
    });
    const { kernels, outputs } = gyre.explain(build, { print: false });
    outputs.forEach((t) => t.dispose());
    assert.deepEqual(kernels.map((k) => k.kernel), [
      "mul+linear", // with a bias, linear runs at once; the other products when they are read
      "mul+relu+matmul",
      "add+matmul+add+relu",
      "sub+abs+matmul",
    ]);
    // The same operations in the same compute type, summed in the same order under the same
    // plan; only a multiply-add the compiler contracts in one kernel and not the other moves an
    // operand by an ulp (|A||B| / max(1, |AB|) stays below ~50 for these normal values).
    await assertFusedMatchesEager(build, 1e-5);
    for (const t of [a, b, c, bias, scale, w]) t.dispose();
    assert.deepEqual(liveCounts(), before);
  },
});

Deno.test({
  name: "fusion: matmul operands that cannot run as a prologue are computed first, correctly",
  ignore: !hasGpu,
  fn: async () => {
    const before = liveCounts();
    const a = gyre.random.normal([64, 48], { seed: 61, device: "gpu" }).realize();
    const b = gyre.random.normal([48, 40], { seed: 62, device: "gpu" }).realize();
    const c = gyre.random.normal([64, 48], { seed: 63, device: "gpu" }).realize();
    const d = gyre.random.normal([64, 48], { seed: 64, device: "gpu" }).realize();
    const e = gyre.random.normal([64, 48], { seed: 65, device: "gpu" }).realize();
    const row = gyre.random.normal([1, 48], { seed: 66, device: "gpu" }).realize();
    const b2 = gyre.random.normal([40, 32], { seed: 67, device: "gpu" }).realize();
    // The plan's products (a tuned table may split K, which adds a kernel to the list below).
    tuning.setTuningMode("off");
    const build = () =>
      gyre.tidy(() => [
        gyre.matmul(a.add(c).add(d).add(e), b), // four inputs: more than a prologue reads
        gyre.matmul(row.mul(2), b), // M = 1: the matrix-vector kernel reads operands as they are
        gyre.matmul(gyre.matmul(a, b).relu(), b2), // another product's result
        gyre.matmul(a.slice(null, [null, null, -1]).mul(2), b), // a negative stride
        gyre.matmul(gyre.random.normal([64, 48], { seed: 68, device: "gpu" }), b), // reads the index
      ]);
    const { kernels, outputs } = gyre.explain(build, { print: false });
    outputs.forEach((t) => t.dispose());
    // Each operand is computed when its product is recorded; the products run when read.
    assert.deepEqual(kernels.map((k) => k.kernel), [
      "add×3",
      "mul",
      "matmul+relu",
      "mul",
      "random.normal",
      ...Array(5).fill("matmul"),
    ]);
    // Computed first or not, the same kernels: identical up to a contracted multiply-add.
    await assertFusedMatchesEager(build, 1e-5);
    tuning.setTuningMode("table");
    for (const t of [a, b, c, d, e, row, b2]) t.dispose();
    assert.deepEqual(liveCounts(), before);
  },
});

Deno.test({
  name: "fusion: a matmul prologue holds its inputs until the product runs, then releases them",
  ignore: !hasGpu,
  fn: async () => {
    const before = liveCounts();
    const a = gyre.random.normal([64, 48], { seed: 71, device: "gpu" }).realize();
    const b = gyre.random.normal([48, 40], { seed: 72, device: "gpu" }).realize();
    const s = gyre.random.normal([48], { seed: 73, device: "gpu" }).realize();
    const [av, bv, sv] = await gyre.readAll([a, b, s]);
    const scaled = a.mul(s);
    const y = gyre.matmul(scaled, b);
    // The operands go before the (lazy) product runs: it holds their storage.
    for (const t of [scaled, a, b, s]) t.dispose();
    // A read submits the batch, which makes freed buffers reusable; new tensors of the same sizes
    // would then take over (and overwrite) any buffer freed too early.
    const probe = gyre.tensor([1], { device: "gpu" });
    await probe.data();
    probe.dispose();
    const others = [[64, 48], [48, 40], [48]].map((shape) =>
      gyre.tensor(new Float32Array(shape.reduce((p, q) => p * q)).fill(1e6), {
        shape,
        device: "gpu",
      })
    );
    const yv = await y.data();
    others.forEach((t) => t.dispose());
    for (let i = 0; i < 64; i += 9) {
      for (let j = 0; j < 40; j += 7) {
        let want = 0;
        for (let k = 0; k < 48; k++) want += av[i * 48 + k] * sv[k] * bv[k * 40 + j];
        assert.ok(Math.abs(yv[i * 40 + j] - want) <= 1e-4 * (1 + Math.abs(want)), `${i},${j}`);
      }
    }
    y.dispose();
    // A product disposed before it runs releases them too.
    const x = gyre.random.normal([64, 48], { seed: 74, device: "gpu" }).realize();
    const xt = x.transpose();
    const unused = gyre.tidy(() => gyre.matmul(x.add(1), xt));
    x.dispose();
    xt.dispose();
    unused.dispose();
    assert.deepEqual(liveCounts(), before);
  },
});

Deno.test("fusion: the plan fuses matmul prologues into small products only", () => {
  // Past 2^30 flops the product's slower K steps cost more than computing the operand first.
  assert.equal(tuning.planMatmulPrologue({ m: 256, n: 256, k: 256, batch: 1 }), true);
  assert.equal(tuning.planMatmulPrologue({ m: 512, n: 1024, k: 1024, batch: 1 }), true);
  assert.equal(tuning.planMatmulPrologue({ m: 1024, n: 1024, k: 1024, batch: 1 }), false);
  assert.equal(tuning.planMatmulPrologue({ m: 256, n: 256, k: 256, batch: 64 }), false);
  const big = { m: 4096, n: 4096, k: 4096, batch: 1 };
  assert.equal(tuning.planMatmulPrologue(big, { prologue: true }), true);
  assert.equal(
    tuning.planMatmulPrologue({ m: 8, n: 8, k: 8, batch: 1 }, { prologue: false }),
    false,
  );
});

Deno.test({
  name: "fusion: with the prologue turned off, a pending operand is computed first",
  ignore: !hasGpu,
  fn: () => {
    const before = liveCounts();
    const a = gyre.random.normal([64, 48], { seed: 71, device: "gpu" }).realize();
    const b = gyre.random.normal([48, 40], { seed: 72, device: "gpu" }).realize();
    const build = () => gyre.tidy(() => [gyre.matmul(a.mul(2).relu(), b)]);
    tuning.setPlanOverride("matmul", { prologue: false });
    try {
      const { kernels, outputs } = gyre.explain(build, { print: false });
      outputs.forEach((t) => t.dispose());
      assert.deepEqual(kernels.map((k) => k.kernel), ["mul+relu", "matmul"]);
    } finally {
      tuning.setPlanOverride("matmul", null);
    }
    const { kernels, outputs } = gyre.explain(build, { print: false });
    outputs.forEach((t) => t.dispose());
    assert.deepEqual(kernels.map((k) => k.kernel), ["mul+relu+matmul"]);
    for (const t of [a, b]) t.dispose();
    assert.deepEqual(liveCounts(), before);
  },
});
