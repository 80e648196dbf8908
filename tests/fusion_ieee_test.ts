/**
 * Fused GPU kernels round as the op-by-op kernels do, bit for bit: no algebraic rewrite crosses an
 * op boundary ((a + b) - a, exp(log x), sqrt(x) * sqrt(x), -y + y, a * b + c contracted to an fma)
 * in any kernel family that embeds an expression (elementwise, reduction prologues, row-kernel
 * prologues and epilogues, matmul prologues and epilogues). Scalars are uniforms: a new value
 * compiles no new kernel, and the kernel cache stays bounded.
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import { devices } from "./_devices.ts";
import { gpuBackendOf } from "../src/runtime.ts";

const DEVICES = await devices();
const hasGpu = DEVICES.includes("gpu");

/** 1 + 2^-12: (1 + 2^-12)^2 - 1 is 2^-11 rounded, 2^-11 + 2^-24 as an fma. */
const E12 = 1 + 2 ** -12;

/** An expression over tensors of shape [2, 4], and the ops it fuses (the kernel label's part). */
interface Example {
  name: string;
  label: string;
  /** Each input's 8 elements (two rows of 4). */
  inputs: number[][];
  f: (xs: gyre.Tensor[]) => gyre.Tensor;
  dtype?: gyre.DType;
}

const EXAMPLES: Example[] = [
  {
    name: "(a + b) - a",
    label: "add+sub",
    inputs: [[1e8, 3, 1e8, 3, 1, 2, 5, 7], [1, 0.1, -1, 0.5, 0.25, 0.1, 0.3, 0.7]],
    f: ([a, b]) => a.add(b).sub(a),
  },
  {
    name: "exp(log(x))",
    label: "log+exp",
    inputs: [[-1, 4, -2, 0.5, 3, -0.25, 7, 2]],
    f: ([x]) => x.log().exp(),
  },
  {
    name: "sqrt(x) * sqrt(x)",
    label: "sqrt+mul",
    inputs: [[-1, 2, 3, -4, 5, 6, -7, 10]],
    f: ([x]) => {
      const s = x.sqrt();
      return s.mul(s);
    },
  },
  {
    name: "-y + y",
    label: "neg+add",
    inputs: [[Infinity, -Infinity, 1, 2, 3, Infinity, -5, 6]],
    f: ([y]) => y.neg().add(y),
  },
  {
    name: "a * b + c (no fma)",
    label: "mul+add",
    inputs: [new Array(8).fill(E12), new Array(8).fill(E12), new Array(8).fill(-1)],
    f: ([a, b, c]) => a.mul(b).add(c),
  },
  {
    name: "float16 (a + b) - a",
    label: "add+sub",
    dtype: "float16",
    // 2048 + 1 rounds to 2048 in float16.
    inputs: [[2048, 2048, 3, 1, 2048, 5, 6, 7], [1, -1, 0.1, 0.5, 3, 1, 2, 3]],
    f: ([a, b]) => a.add(b).sub(a),
  },
  {
    name: "float16 (a + a) - a past float16's range",
    label: "add+sub",
    dtype: "float16",
    // 60000 + 60000 rounds to infinity in float16, and stays infinite.
    inputs: [[60000, 40000, 1, 2, -60000, 3, 4, 5]],
    f: ([a]) => a.add(a).sub(a),
  },
];

/** The places an example's expression can be fused into, with the label its kernel gets. */
const CONTEXTS: {
  name: string;
  label: (op: string) => string;
  run: (e: Example, xs: gyre.Tensor[]) => gyre.Tensor;
}[] = [
  { name: "elementwise kernel", label: (op) => op, run: (e, xs) => e.f(xs) },
  {
    name: "reduction prologue",
    label: (op) => `${op}+sum`,
    run: (e, xs) => gyre.sum(e.f(xs), { axis: 1 }),
  },
  {
    name: "softmax prologue",
    label: (op) => `${op}+softmax`,
    run: (e, xs) => gyre.softmax(e.f(xs), { axis: 1 }),
  },
  {
    name: "layerNorm prologue",
    label: (op) => `${op}+layerNorm`,
    run: (e, xs) => gyre.layerNorm(e.f(xs), { axis: 1 }),
  },
  {
    name: "matmul prologue",
    label: (op) => `${op}+matmul`,
    // [2, 4] @ [4, 3]: an identity and a column of ones, exact for finite operands.
    run: (e, xs) => gyre.matmul(e.f(xs), gyre.tensor(IDENTITY_4X3, { dtype: xs[0].dtype })),
  },
];

const IDENTITY_4X3 = [[1, 0, 1], [0, 1, 1], [0, 0, 1], [0, 0, 1]];

/** Same value, bit for bit, but for NaN payloads (float16 results arrive widened). */
function sameValue(a: number, b: number): boolean {
  return Object.is(a, b) || (Number.isNaN(a) && Number.isNaN(b));
}

/**
 * Runs `build` on the GPU fused, asserting through `explain` that its kernels are all `label`
 * (so the fused path ran), then with fusion off; returns both results.
 */
async function fusedAndUnfused(
  build: () => gyre.Tensor,
  label: string,
): Promise<{ fused: number[]; unfused: number[] }> {
  const rt = gyre.runtime();
  const { kernels, outputs } = gyre.explain(() => gyre.tidy(build), { print: false });
  const fused = Array.from(await outputs[0].data());
  outputs.forEach((t) => t.dispose());
  assert.ok(kernels.length > 0, "no kernel ran");
  for (const k of kernels) assert.equal(k.kernel, label, kernels.map((x) => x.kernel).join(", "));
  rt.fusion = false;
  try {
    const out = gyre.tidy(build);
    const unfused = Array.from(await out.data());
    out.dispose();
    return { fused, unfused };
  } finally {
    rt.fusion = true;
  }
}

function assertSame(fused: number[], unfused: number[], what: string): void {
  assert.equal(fused.length, unfused.length, what);
  fused.forEach((v, i) =>
    assert.ok(sameValue(v, unfused[i]), `${what} [${i}]: fused ${v}, op by op ${unfused[i]}`)
  );
}

for (const context of CONTEXTS) {
  for (const example of EXAMPLES) {
    Deno.test({
      name: `fusion IEEE: ${example.name} in a ${context.name} equals op by op`,
      ignore: !hasGpu,
      fn: async () => {
        const dtype = example.dtype ?? "float32";
        const xs = example.inputs.map((values) =>
          gyre.tensor(values, { dtype, shape: [2, 4], device: "gpu" }).realize()
        );
        try {
          const { fused, unfused } = await fusedAndUnfused(
            () => context.run(example, xs),
            context.label(example.label),
          );
          assertSame(fused, unfused, `${example.name} in a ${context.name}`);
          if (context.name === "elementwise kernel") {
            // The WASM reference: NaN where IEEE arithmetic gives NaN, the roundings of each op.
            const wasm = gyre.tidy(() =>
              example.f(
                example.inputs.map((v) => gyre.tensor(v, { dtype, shape: [2, 4], device: "wasm" })),
              )
            );
            const want = Array.from(await wasm.data());
            wasm.dispose();
            want.forEach((w, i) => {
              const v = fused[i];
              const ok = Number.isNaN(w)
                ? Number.isNaN(v)
                : v === w || Math.abs(v - w) <= 2 ** -20 * Math.abs(w);
              assert.ok(ok, `[${i}]: gpu ${v}, wasm ${w}`);
            });
          }
        } finally {
          xs.forEach((t) => t.dispose());
        }
      },
    });
  }
}

/** Matmul epilogues: the product P = A @ I is A exactly, then the example's pattern on P. */
const EPILOGUES: {
  name: string;
  label: string;
  a: number[];
  f: (p: gyre.Tensor) => gyre.Tensor;
}[] = [
  {
    name: "matmul(a, b).add(x).sub(x)",
    label: "matmul+add+sub",
    a: [1, 0.1, 3, -0.25],
    f: (p) => {
      const x = gyre.tensor([[1e8, 1e8], [1e8, 1e8]], { device: "gpu" });
      return p.add(x).sub(x);
    },
  },
  { name: "exp(log(P))", label: "matmul+log+exp", a: [-1, 4, 0.5, -3], f: (p) => p.log().exp() },
  {
    name: "sqrt(P) * sqrt(P)",
    label: "matmul+sqrt+mul",
    a: [-1, 2, 3, 5],
    f: (p) => {
      const s = p.sqrt();
      return s.mul(s);
    },
  },
  {
    name: "-y + y with y infinite",
    label: "matmul+mul+neg+add",
    a: [1, -2, 3, 0.5],
    f: (p) => {
      const y = p.mul(Infinity);
      return y.neg().add(y);
    },
  },
  {
    name: "P * b + c (no fma)",
    label: "matmul+mul+add",
    a: [E12, E12, E12, 1],
    f: (p) => p.mul(E12).add(-1),
  },
];

for (const e of EPILOGUES) {
  Deno.test({
    name: `fusion IEEE: ${e.name} in a matmul epilogue equals op by op`,
    ignore: !hasGpu,
    fn: async () => {
      const a = gyre.tensor(e.a, { shape: [2, 2], device: "gpu" }).realize();
      const eye = gyre.tensor([[1, 0], [0, 1]], { device: "gpu" }).realize();
      try {
        const { fused, unfused } = await fusedAndUnfused(() => e.f(gyre.matmul(a, eye)), e.label);
        assertSame(fused, unfused, e.name);
      } finally {
        a.dispose();
        eye.dispose();
      }
    },
  });
}

Deno.test({
  name: "fusion IEEE: a softmax epilogue and a reduction epilogue equal op by op",
  ignore: !hasGpu,
  fn: async () => {
    const x = gyre.tensor([[1, 3, 2, 0], [5, -1, 0.5, 2]], { device: "gpu" }).realize();
    const big = gyre.tensor([1e8, -1e8], { device: "gpu" }).realize();
    try {
      const s = await fusedAndUnfused(
        () => gyre.softmax(x, { axis: 1 }).add(1e8).sub(1e8),
        "softmax+add+sub",
      );
      assertSame(s.fused, s.unfused, "softmax epilogue");
      const r = await fusedAndUnfused(
        () => gyre.sum(x, { axis: 1 }).add(big).sub(big),
        "sum+add+sub",
      );
      assertSame(r.fused, r.unfused, "sum epilogue");
      assert.deepEqual(r.fused, [8, 8]); // 6 + 1e8 and 6.5 - 1e8 round to 8 past 1e8
    } finally {
      x.dispose();
      big.dispose();
    }
  },
});

Deno.test({
  name: "scalars: a loop over new JS scalars compiles no new kernels",
  ignore: !hasGpu,
  fn: async () => {
    const gpu = gpuBackendOf()!;
    const x = gyre.tensor([1, 2, 3, 4, 5, 6, 7, 8], { device: "gpu" }).realize();
    const xv = await x.data();
    // realize: a pending tensor disposed unread is never computed.
    const step = (i: number) => gyre.tidy(() => x.mul(0.1 / Math.sqrt(i)).add(i).neg()).realize();
    step(1).dispose(); // compiles the kernel
    const before = gpu.pipelineCount;
    const compiled = gpu.pipelinesCompiled;
    for (let i = 1; i <= 200; i++) {
      const y = step(i);
      if (i % 50 === 0 || i === 7) {
        const yv = await y.data();
        const c = Math.fround(0.1 / Math.sqrt(i));
        yv.forEach((v, j) => assert.equal(v, -Math.fround(Math.fround(xv[j] * c) + i), `${i}`));
      }
      y.dispose();
    }
    assert.equal(gpu.pipelinesCompiled - compiled, 0, "kernels compiled in the loop");
    assert.equal(gpu.pipelineCount, before);
    x.dispose();
  },
});

Deno.test({
  name: "scalars: constants of every dtype travel in the uniforms",
  ignore: !hasGpu,
  fn: async () => {
    const gpu = gpuBackendOf()!;
    for (const [k, i] of [[0.1, 3], [-2.5, -7], [1e5, 2 ** 31 - 1]]) {
      const compiled = gpu.pipelinesCompiled;
      const f = gyre.tensor([1, 2], { device: "gpu" });
      const h = gyre.tensor([1, 2], { dtype: "float16", device: "gpu" });
      const n = gyre.tensor([1, 2], { dtype: "int32", device: "gpu" });
      const u = gyre.tensor([1, 2], { dtype: "uint32", device: "gpu" });
      const b = gyre.tensor([true, false], { device: "gpu" });
      const outs = [
        f.mul(k).add(i),
        h.mul(k), // the float16 constant holds its half-precision value (1e5 is infinity)
        n.add(i),
        u.mul(Math.abs(i)),
        gyre.where(b.logicalAnd(k > 0), f, gyre.full([2], k, { device: "gpu" })),
      ];
      const got = (await gyre.readAll(outs)).map((a) => Array.from(a));
      const k16 = gyre.tensor([k], { dtype: "float16", device: "wasm" });
      const half = (await k16.data())[0];
      k16.dispose();
      assert.deepEqual(got, [
        [Math.fround(Math.fround(k) + i), Math.fround(Math.fround(2 * Math.fround(k)) + i)],
        [half, Math.abs(2 * half) > 65504 ? Infinity : 2 * half],
        [(1 + i) | 0, (2 + i) | 0],
        [Math.abs(i) >>> 0, (2 * Math.abs(i)) >>> 0],
        k > 0 ? [1, Math.fround(k)] : [Math.fround(k), Math.fround(k)],
      ]);
      for (const t of [f, h, n, u, b, ...outs]) t.dispose();
      // The first values compile the kernels; later ones reuse them.
      if (k !== 0.1) assert.equal(gpu.pipelinesCompiled - compiled, 0, `compiled for ${k}`);
    }
  },
});

Deno.test({
  name: "pipelines: the kernel cache is bounded, least recently used out, and recompiles",
  ignore: !hasGpu,
  fn: async () => {
    const gpu = gpuBackendOf()!;
    const limit = gpu.pipelineLimit;
    const x = gyre.tensor([1, 2, 3], { device: "gpu" }).realize();
    // A chain of k additions: a distinct kernel for each k.
    const chain = async (k: number) => {
      const y = gyre.tidy(() => {
        let t = x;
        for (let i = 0; i < k; i++) t = t.add(1);
        return t;
      });
      assert.deepEqual(Array.from(await y.data()), [1 + k, 2 + k, 3 + k], `chain ${k}`);
      y.dispose();
    };
    try {
      gpu.pipelineLimit = 4;
      for (let k = 1; k <= 12; k++) await chain(k);
      assert.ok(gpu.pipelineCount <= 4, `${gpu.pipelineCount} kernels cached`);
      // Kernels 9..12 are cached; 9 used again becomes the most recent, so 13 evicts 10.
      let compiled = gpu.pipelinesCompiled;
      await chain(9);
      assert.equal(gpu.pipelinesCompiled, compiled, "chain 9 was cached");
      await chain(13);
      assert.equal(gpu.pipelinesCompiled, compiled + 1);
      compiled = gpu.pipelinesCompiled;
      await chain(9);
      assert.equal(gpu.pipelinesCompiled, compiled, "chain 9 stayed cached");
      await chain(10); // evicted: compiled again, and right
      assert.equal(gpu.pipelinesCompiled, compiled + 1, "chain 10 was evicted");
      await chain(1);
      assert.ok(gpu.pipelineCount <= 4);
    } finally {
      gpu.pipelineLimit = limit;
      x.dispose();
    }
  },
});

Deno.test({
  name: "pipelines: a jit plan replays its kernels after the cache evicted them",
  ignore: !hasGpu,
  fn: async () => {
    const gpu = gpuBackendOf()!;
    const limit = gpu.pipelineLimit;
    let scale = 2;
    const f = gyre.jit((t: gyre.Tensor) => gyre.relu(t.mul(scale).sub(1)).sum());
    const x = gyre.tensor([1, 2, 3, 4], { device: "gpu" }).realize();
    const y = gyre.tensor([1, 1, 1, 1], { device: "gpu" }).realize();
    try {
      gpu.pipelineLimit = 2;
      const first = f(x) as gyre.Tensor;
      assert.deepEqual(Array.from(await first.data()), [16]);
      first.dispose();
      // Four other kernels (chains of 1 to 4 exp+neg) push the traced ones out of the cache.
      const compiled = gpu.pipelinesCompiled;
      for (let k = 1; k <= 4; k++) {
        const z = gyre.tidy(() => {
          let t = x;
          for (let i = 0; i < k; i++) t = t.exp().neg();
          return t;
        });
        await z.data();
        z.dispose();
      }
      assert.equal(gpu.pipelinesCompiled - compiled, 4);
      assert.ok(gpu.pipelineCount <= 2);
      // The replay re-issues the trace's uniforms: its constants are the trace's (scale 2).
      scale = 3;
      const again = f(y) as gyre.Tensor;
      assert.deepEqual(Array.from(await again.data()), [4]);
      again.dispose();
    } finally {
      gpu.pipelineLimit = limit;
      x.dispose();
      y.dispose();
    }
  },
});

Deno.test({
  name: "fusion IEEE: abs of int32's minimum stays negative inside a fused kernel",
  ignore: !hasGpu,
  fn: async () => {
    // WGSL defines abs(-2^31) as -2^31; SPIR-V's SAbs does not, and an H200's compiler took a
    // fused abs(x) to be non-negative, so the floor mod below skipped its sign fix (2, not 1).
    const x = gyre.tensor([-2147483648, -7, 5], { dtype: "int32", device: "gpu" }).realize();
    try {
      const { fused, unfused } = await fusedAndUnfused(() => gyre.abs(x).mod(3), "abs+mod");
      assertSame(fused, unfused, "abs+mod");
      assert.deepEqual(fused, [1, 1, 2]); // -2^31 mod 3 is 1 (Python's %), 7 mod 3, 5 mod 3
    } finally {
      x.dispose();
    }
  },
});
