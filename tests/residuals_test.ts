/**
 * Compiled residuals (issue 26): Jacobians from the compiled kernels against eager `backward()`,
 * grouping by topology, the solvers on problems with known answers (a circle fitted to noisy
 * points, Rosenbrock, a small bundle of rigid transforms) on both devices, both ways of summing
 * J^T r, typed errors for bad input, and buffers returned to the pool.
 * @module
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import {
  CompiledResiduals,
  lbfgs,
  nonlinearLeastSquares,
  V,
  type Value,
  Vec2,
  Vec3,
} from "../src/mod.ts";
import { mulberry32 as uniform } from "./_random.ts";
import { devices, liveCounts } from "./_devices.ts";

const DEVICES = await devices();
const BACKENDS = DEVICES.map((d) => (d === "gpu" ? "gpu" : "cpu") as "gpu" | "cpu");
/** float32 on the GPU: values and derivatives of these well-conditioned graphs to 1e-5. */
const TOL = { cpu: 1e-12, gpu: 1e-5 };

/** Residuals exercising every op and Vec2/Vec3, over four parameters. */
function everyOp(p: readonly Value[]): Value[] {
  const [a, b, c, d] = p;
  const v = new Vec3(a, b, c), w = Vec3.of(d, 0.5, -1);
  return [
    V.sub(V.mul(a, b), V.div(c, d)),
    V.pow(V.abs(a), V.C(1.5)),
    V.atan2(a, b),
    V.min(a, b),
    V.max(c, d),
    V.where(V.less(a, b), V.exp(a), V.log(V.square(b))),
    V.where(V.greater(a, b), V.sin(c), V.cos(c)),
    V.tan(V.mul(a, 0.3)),
    V.tanh(b),
    V.sigmoid(c),
    V.relu(d),
    V.neg(V.sqrt(V.add(V.square(a), 1))),
    V.clamp(V.mul(a, 3), -1, 1),
    V.sum([a, b, c, d]),
    V.mean([a, V.mul(b, c), d]),
    v.cross(w).dot(v),
    v.normalize().x,
    Vec3.of(0, 0, V.sub(a, a)).normalize().z, // zero length: 0 and no NaN
    new Vec2(a, d).length(),
    new Vec2(b, c).normalize().y,
  ];
}

for (const backend of BACKENDS) {
  Deno.test(`residuals: compiled Jacobians equal eager backward(), every op [${backend}]`, async () => {
    const start = [0.7, -1.3, 0.4, 2.1];
    const params = start.map((v) => V.W(v));
    const compiled = CompiledResiduals.compile(params, everyOp, { backend });
    try {
      assert.equal(compiled.backend, backend);
      const { residuals } = await compiled.evaluate();
      const { rows, cols, values } = await compiled.jacobian();
      const eager = everyOp(params);
      eager.forEach((r, i) => {
        assert.ok(
          Math.abs(residuals[i] - r.data) <= TOL[backend] * (1 + Math.abs(r.data)),
          `residual ${i}: ${residuals[i]} against ${r.data}`,
        );
        // backward() resets only the nodes under r: other parameters keep older gradients.
        for (const p of params) p.grad = 0;
        r.backward();
        for (let k = 0; k < rows.length; k++) {
          if (rows[k] !== i) continue;
          const want = params[cols[k]].grad;
          assert.ok(
            Math.abs(values[k] - want) <= TOL[backend] * (1 + Math.abs(want)),
            `d residual ${i} / d param ${cols[k]}: ${values[k]} against ${want}`,
          );
        }
        // Every parameter with a nonzero derivative has its entry.
        params.forEach((p, j) => {
          if (p.grad === 0) return;
          assert.ok(
            rows.some((row, k) => row === i && cols[k] === j),
            `residual ${i} lacks an entry for param ${j}`,
          );
        });
      });
      assert.ok(!Array.from(residuals).some(Number.isNaN), "a NaN residual");
    } finally {
      compiled.dispose();
    }
  });

  Deno.test(`residuals: value and gradient of sums and of squares [${backend}]`, async () => {
    const params = [V.W(1.5), V.W(-0.5), V.W(2)];
    const fn = (p: readonly Value[]) => [V.mul(p[0], p[1]), V.sub(p[2], 1), V.sin(p[0])];
    for (const accumulation of ["gather", "atomic"] as const) {
      const compiled = CompiledResiduals.compile(params, fn, { backend, accumulation });
      try {
        // The atomic path runs only where the device has float32 atomics.
        const atomics = backend === "gpu" && gyre.runtime().caps!.float32Atomics;
        assert.equal(
          compiled.accumulation,
          accumulation === "atomic" && atomics ? "atomic" : "gather",
        );
        const squares = await compiled.valueAndGradient("squares");
        const sum = await compiled.valueAndGradient("sum");
        const eager = fn(params);
        const want2 = eager.reduce((s, r) => s + r.data ** 2, 0);
        const want1 = eager.reduce((s, r) => s + r.data, 0);
        const tol = TOL[backend] * 10;
        assert.ok(Math.abs(squares.value - want2) <= tol * want2, `sum r^2 ${squares.value}`);
        assert.ok(Math.abs(sum.value - want1) <= tol * (1 + Math.abs(want1)), `sum r ${sum.value}`);
        const total2 = V.sum(eager.map((r) => V.square(r)));
        total2.backward();
        params.forEach((p, j) => {
          assert.ok(
            Math.abs(squares.gradient[j] - p.grad) <= tol * (1 + Math.abs(p.grad)),
            `d/dp${j}`,
          );
        });
        V.sum(eager).backward();
        params.forEach((p, j) => {
          assert.ok(
            Math.abs(sum.gradient[j] - p.grad) <= tol * (1 + Math.abs(p.grad)),
            `sum d/dp${j}`,
          );
        });
      } finally {
        compiled.dispose();
      }
    }
  });

  Deno.test(`residuals: a circle fitted to noisy points [${backend}]`, async () => {
    const next = uniform(7);
    const [cx, cy, radius] = [1.5, -0.75, 2];
    const points = Array.from({ length: 200 }, (_, i) => {
      const t = (2 * Math.PI * i) / 200;
      const noise = 0.01 * (2 * next() - 1);
      return [cx + (radius + noise) * Math.cos(t), cy + (radius + noise) * Math.sin(t)];
    });
    const params = [V.W(0), V.W(0), V.W(1)];
    const result = await nonlinearLeastSquares(
      params,
      ([a, b, r]) => points.map(([x, y]) => V.sub(Vec2.of(V.sub(x, a), V.sub(y, b)).length(), r)),
      {
        backend,
        maxIterations: 100,
      },
    );
    assert.ok(result.converged, `stopped by ${result.reason}`);
    assert.equal(result.backend, backend);
    assert.ok(Math.abs(params[0].data - cx) < 2e-3, `cx ${params[0].data}`);
    assert.ok(Math.abs(params[1].data - cy) < 2e-3, `cy ${params[1].data}`);
    assert.ok(Math.abs(params[2].data - radius) < 2e-3, `r ${params[2].data}`);
    assert.ok(result.cost < result.initialCost);
  });

  Deno.test(`residuals: Rosenbrock by Levenberg-Marquardt and by L-BFGS [${backend}]`, async () => {
    const lm = [V.W(-1.2), V.W(1)];
    const r = await nonlinearLeastSquares(lm, ([x, y]) => [
      V.mul(10, V.sub(y, V.square(x))),
      V.sub(1, x),
    ], { backend, maxIterations: 200, costTolerance: 0, gradientTolerance: 1e-6 });
    assert.ok(
      Math.abs(lm[0].data - 1) < 1e-3 && Math.abs(lm[1].data - 1) < 2e-3,
      `${lm[0].data}, ${lm[1].data} (${r.reason})`,
    );
    const q = [V.W(-1.2), V.W(1)];
    const l = await lbfgs(q, ([x, y]) => [
      V.square(V.sub(1, x)),
      V.mul(100, V.square(V.sub(y, V.square(x)))),
    ], { backend, maxIterations: 300, gradientTolerance: backend === "gpu" ? 1e-3 : 1e-8 });
    assert.ok(
      Math.abs(q[0].data - 1) < 1e-2 && Math.abs(q[1].data - 1) < 2e-2,
      `${q[0].data}, ${q[1].data} (${l.reason})`,
    );
    assert.ok(l.value < l.initialValue && l.evaluations >= l.iterations);
  });

  Deno.test(`residuals: a bundle of rigid transforms [${backend}]`, async () => {
    // Four 2-D frames (angle, tx, ty) observe eight shared landmarks; frame 0 is fixed by a prior.
    const next = uniform(3);
    const landmarks = Array.from({ length: 8 }, () => [4 * next() - 2, 4 * next() - 2]);
    const truth = [[0, 0, 0], [0.3, 1, -0.5], [-0.6, -0.4, 0.8], [1.1, 0.2, 0.3]];
    const observe = ([angle, tx, ty]: number[], [x, y]: number[]) => {
      // The landmark in the frame's coordinates: R(-angle) (p - t).
      const [dx, dy] = [x - tx, y - ty];
      return [
        Math.cos(angle) * dx + Math.sin(angle) * dy,
        -Math.sin(angle) * dx + Math.cos(angle) * dy,
      ];
    };
    const seen = truth.map((f) => landmarks.map((p) => observe(f, p)));
    const params = truth.flatMap((f) => f.map((v) => V.W(v + 0.3 * (2 * next() - 1))));
    const known = landmarks.flatMap((p) => p.map((v) => V.W(v + 0.2 * (2 * next() - 1))));
    const all = [...params, ...known];
    const result = await nonlinearLeastSquares(all, (p) => {
      const out: Value[] = [];
      const frame = (f: number) => p.slice(3 * f, 3 * f + 3);
      const point = (k: number) => p.slice(12 + 2 * k, 14 + 2 * k);
      truth.forEach((_, f) => {
        const [angle, tx, ty] = frame(f);
        landmarks.forEach((_, k) => {
          const [x, y] = point(k);
          const [dx, dy] = [V.sub(x, tx), V.sub(y, ty)];
          const [c, s] = [V.cos(angle), V.sin(angle)];
          out.push(V.sub(V.add(V.mul(c, dx), V.mul(s, dy)), seen[f][k][0]));
          out.push(V.sub(V.sub(V.mul(c, dy), V.mul(s, dx)), seen[f][k][1]));
        });
      });
      // Gauge: frame 0 at the origin, unrotated.
      out.push(...frame(0).map((v) => V.mul(10, v)));
      return out;
    }, { backend, maxIterations: 100 });
    assert.ok(result.converged, `stopped by ${result.reason}`);
    assert.ok(result.cost < 1e-8, `cost ${result.cost}`);
    truth.forEach((f, k) =>
      f.forEach((v, j) => assert.ok(Math.abs(all[3 * k + j].data - v) < 1e-3, `frame ${k}[${j}]`))
    );
  });

  Deno.test(`residuals: bad input is a typed error and the runtime stays usable [${backend}]`, async () => {
    const before = liveCounts();
    const x = V.W(1);
    const bad: [string, () => unknown, RegExp][] = [
      [
        "a NaN parameter",
        () => CompiledResiduals.compile([V.W(NaN)], (p) => [p[0]], { backend }),
        /params\[0\]/,
      ],
      [
        "nothing returned",
        () => CompiledResiduals.compile([x], () => undefined as never, { backend }),
        /residualFn/,
      ],
      ["an empty array", () => CompiledResiduals.compile([x], () => [], { backend }), /residualFn/],
      [
        "a number returned",
        () => CompiledResiduals.compile([x], () => [1 as never], { backend }),
        /residualFn\(\)\[0\]/,
      ],
      [
        "a constant as parameter",
        () => CompiledResiduals.compile([V.C(1)], (p) => [p[0]], { backend }),
        /params\[0\]/,
      ],
      [
        "a parameter twice",
        () => CompiledResiduals.compile([x, x], (p) => [p[0]], { backend }),
        /params\[1\]/,
      ],
      [
        "a parameter not listed",
        () => CompiledResiduals.compile([x], () => [V.add(x, V.W(2))], { backend }),
        /residuals\[0\]/,
      ],
      ["no parameters", () => CompiledResiduals.compile([], () => [V.C(1)], { backend }), /params/],
      [
        "a misspelled option",
        () => CompiledResiduals.compile([x], (p) => [p[0]], { backend, batchsize: 2 } as never),
        /options/,
      ],
      [
        "a bad backend",
        () => CompiledResiduals.compile([x], (p) => [p[0]], { backend: "tpu" as never }),
        /options.backend/,
      ],
      ["not a function", () => CompiledResiduals.compile([x], 3 as never), /residualFn/],
      ["V.W of a string", () => V.W("1" as never), /value/],
      ["V.add of a string", () => V.add(x, "2" as never), /^b$/],
    ];
    for (const [label, fn, argument] of bad) {
      let caught: unknown = null;
      try {
        fn();
      } catch (e) {
        caught = e;
      }
      assert.ok(caught instanceof gyre.ValueError, `${label}: ${caught}`);
      assert.match((caught as gyre.ValueError).argument, argument, label);
    }
    const compiled = CompiledResiduals.compile([x], (p) => [V.sub(p[0], 3)], { backend });
    await assert.rejects(() => compiled.solve({ maxIterations: 0 }), gyre.ValueError);
    await assert.rejects(() => compiled.solve({ cgTolerance: -1 }), gyre.ValueError);
    x.data = NaN;
    await assert.rejects(() => compiled.evaluate(), gyre.ValueError);
    x.data = 1;
    const solved = await compiled.solve();
    assert.ok(Math.abs(x.data - 3) < 1e-4, `x ${x.data}`);
    assert.ok(solved.converged);
    compiled.dispose();
    await assert.rejects(() => compiled.evaluate(), gyre.ValueError);
    await assert.rejects(
      () => nonlinearLeastSquares([x], (p) => [p[0]], { memory: 3 } as never),
      gyre.ValueError,
    );
    await assert.rejects(() => lbfgs([x], () => "x" as never, { backend }), gyre.ValueError);
    gyre.flush();
    assert.deepEqual(liveCounts(), before, "buffers leaked");
  });
}

Deno.test("residuals: the CPU solves small steps densely and large ones by conjugate gradients", async () => {
  // A chain x[i + 1] - x[i] = 1 anchored at x[0] = 0: the answer is x[i] = i.
  for (const [n, solver] of [[40, "cholesky"], [400, "pcg"]] as const) {
    const params = Array.from({ length: n }, () => V.W(0));
    const result = await nonlinearLeastSquares(params, (p) => [
      p[0],
      ...p.slice(1).map((v, i) => V.sub(V.sub(v, p[i]), 1)),
    ], { backend: "cpu", maxIterations: 50, cgIterations: 400, cgTolerance: 1e-10 });
    assert.equal(result.linearSolver, solver);
    const tol = solver === "cholesky" ? 1e-5 : 1e-3; // the chain is ill-conditioned for CG
    params.forEach((p, i) => assert.ok(Math.abs(p.data - i) < tol, `n ${n}: x[${i}] ${p.data}`));
  }
});

Deno.test("residuals: residuals of a few shapes compile into that many kernels", () => {
  const params = Array.from({ length: 300 }, (_, i) => V.W(i / 100));
  const compiled = CompiledResiduals.compile(params, (p) => {
    const out: Value[] = [];
    for (let i = 0; i + 2 < p.length; i += 3) {
      out.push(V.sub(V.mul(p[i], p[i + 1]), i)); // constants differ: data, one kernel
      out.push(V.sqrt(V.add(V.square(p[i + 2]), 1)));
      out.push(V.sin(V.sub(p[i], p[i + 2])));
    }
    return out;
  }, { backend: "cpu" });
  assert.equal(compiled.residualCount, 300);
  assert.equal(compiled.kernelCount, 3);
  compiled.dispose();
});

Deno.test("residuals: a residual like the one before but for a shared operand is another shape", async () => {
  const [a, b, c, d, e] = [1, 2, 3, 5, 8].map((v) => V.W(v));
  const compiled = CompiledResiduals.compile([a, b, c, d, e], (p) => [
    V.sub(p[0], p[1]),
    V.sub(p[2], p[2]), // same ops, one operand twice
    V.sub(p[3], p[4]),
    V.mul(V.sub(p[0], p[1]), V.sub(p[0], p[1])), // two equal subgraphs, not shared
  ], { backend: "cpu" });
  try {
    assert.equal(compiled.kernelCount, 3);
    assert.deepEqual(Array.from((await compiled.evaluate()).residuals), [-1, 0, -3, 1]);
  } finally {
    compiled.dispose();
  }
});

Deno.test("residuals: auto picks the CPU for small problems and where there is no GPU", () => {
  const x = V.W(1);
  const small = CompiledResiduals.compile([x], (p) => [p[0]]);
  assert.equal(small.backend, "cpu");
  small.dispose();
  const forced = CompiledResiduals.compile([x], (p) => [p[0]], { fallbackThreshold: 10 });
  assert.equal(forced.backend, "cpu");
  forced.dispose();
});

Deno.test("residuals: the GPU solve runs on the device in batches and agrees with the CPU", async () => {
  if (!DEVICES.includes("gpu")) return;
  const next = uniform(11);
  const target = Array.from({ length: 64 }, () => next());
  const run = async (backend: "cpu" | "gpu") => {
    const params = target.map(() => V.W(0.5));
    const r = await nonlinearLeastSquares(
      params,
      (p) => p.map((v, i) => V.sub(V.add(V.mul(v, v), v), target[i] * target[i] + target[i])),
      {
        backend,
        batchSize: 3,
        maxIterations: 40,
        costTolerance: 0,
        gradientTolerance: 1e-7,
      },
    );
    return { r, x: params.map((p) => p.data) };
  };
  const gpu = await run("gpu"), cpu = await run("cpu");
  assert.equal(gpu.r.backend, "gpu");
  gpu.x.forEach((v, i) => assert.ok(Math.abs(v - target[i]) < 1e-4, `gpu x[${i}] ${v}`));
  cpu.x.forEach((v, i) => assert.ok(Math.abs(v - target[i]) < 1e-7, `cpu x[${i}] ${v}`));
});
