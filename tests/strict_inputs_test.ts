/**
 * Strict inputs at run time (issue 21): garbage data, misspelled options and wrong argument types
 * give a typed error naming the op and the argument, never a result, and the runtime stays usable
 * with nothing leaked. The option sweep covers every public op that takes options; the argument
 * sweep every public op of one or two tensors.
 * @module
 */
import assert from "node:assert/strict";
import * as gyre from "../src/mod.ts";
import { devices, liveCounts } from "./_devices.ts";

const DEVICES = await devices();

/** Asserts `fn` throws a GyreError of `cls` naming `op`, and leaks nothing. */
function expectTyped(
  label: string,
  fn: () => unknown,
  cls: new (...args: never[]) => gyre.GyreError,
  op: string,
  argument?: RegExp,
): gyre.GyreError {
  gyre.flush();
  const before = liveCounts();
  let caught: unknown = null;
  try {
    const r = fn();
    if (r instanceof gyre.Tensor) r.dispose();
  } catch (e) {
    caught = e;
  }
  assert.ok(caught instanceof cls, `${label}: expected ${cls.name}, got ${String(caught)}`);
  const e = caught as gyre.GyreError;
  assert.equal(e.op, op, `${label}: op`);
  if (argument) assert.match(e.argument, argument, `${label}: argument`);
  gyre.flush();
  assert.deepEqual(liveCounts(), before, `${label}: leaked`);
  return e;
}

for (const device of DEVICES) {
  Deno.test(`strict inputs: tensor() takes numbers, booleans, arrays and typed arrays only [${device}]`, async () => {
    const bad: [string, unknown, RegExp][] = [
      ["a string", "hello", /^data$/],
      ["an object with a length", { length: 3 }, /^data\[0\]$/],
      ["a function", () => 1, /^data$/],
      ["null", null, /^data$/],
      ["undefined", undefined, /^data$/],
      ["a BigInt64Array", new BigInt64Array(2), /^data$/],
      ["a DataView", new DataView(new ArrayBuffer(4)), /^data$/],
      ["a symbol", Symbol("x"), /^data$/],
      ["an array holding a string", [1, "a"], /^data\[1\]$/],
    ];
    for (const [label, data] of bad) {
      expectTyped(label, () => gyre.tensor(data as never, { device }), gyre.ValueError, "tensor");
    }
    // Into an integer dtype: NaN, infinities and out-of-range values are errors (NumPy 2);
    // fractions truncate toward zero.
    for (const v of [NaN, Infinity, -Infinity, 2 ** 31, -(2 ** 31) - 1]) {
      expectTyped(
        `int32 ${v}`,
        () => gyre.tensor([1, v], { dtype: "int32", device }),
        gyre.ValueError,
        "tensor",
        /^data\[1\]$/,
      );
    }
    expectTyped(
      "uint32 -1",
      () => gyre.tensor([-1], { dtype: "uint32", device }),
      gyre.ValueError,
      "tensor",
    );
    expectTyped(
      "full NaN int32",
      () => gyre.full([2], NaN, { dtype: "int32", device }),
      gyre.ValueError,
      "full",
      /^value$/,
    );
    const t = gyre.tensor([1.9, -1.9, 2147483647.5], { dtype: "int32", device });
    assert.deepEqual([...(await t.data())], [1, -1, 2147483647]);
    t.dispose();
    // Accepted: an ArrayLike of numbers, a Float64Array, booleans.
    const ok = [
      gyre.tensor({ length: 2, 0: 1, 1: 2 } as ArrayLike<number>, { device }),
      gyre.tensor(new Float64Array([1, 2]), { device }),
      gyre.tensor([true, false], { device }),
    ];
    assert.deepEqual(await Promise.all(ok.map(async (x) => [...(await x.data())])), [
      [1, 2],
      [1, 2],
      [1, 0],
    ]);
    for (const x of ok) x.dispose();
  });

  Deno.test(`strict inputs: a misspelled option of any op is a ValueError with a suggestion [${device}]`, async () => {
    const x = gyre.ones([2, 3, 4, 4], { device });
    const w = gyre.ones([4, 4], { device });
    const v = gyre.ones([3], { device });
    // op, call with the options given, a misspelling, and the key it should suggest.
    const sweep: [string, (o: object) => unknown, string, string | null][] = [
      ["sum", (o) => gyre.sum(x, o), "axes", "axis"],
      ["prod", (o) => gyre.prod(x, o), "keepDims", "keepdims"],
      ["max", (o) => gyre.max(x, o), "axes", "axis"],
      ["min", (o) => gyre.min(x, o), "axes", "axis"],
      ["mean", (o) => gyre.mean(x, o), "axes", "axis"],
      ["argmax", (o) => gyre.argmax(x, o), "axes", "axis"],
      ["argmin", (o) => gyre.argmin(x, o), "keepdim", "keepdims"],
      ["all", (o) => gyre.all(x, o), "axes", "axis"],
      ["any", (o) => gyre.any(x, o), "axes", "axis"],
      ["logsumexp", (o) => gyre.logsumexp(x, o), "axes", "axis"],
      ["variance", (o) => gyre.variance(x, o), "dof", "ddof"],
      ["std", (o) => gyre.std(x, o), "ddof_", "ddof"],
      ["softmax", (o) => gyre.softmax(x, o), "axes", "axis"],
      ["logSoftmax", (o) => gyre.logSoftmax(x, o), "dim", null],
      ["layerNorm", (o) => gyre.layerNorm(x, o), "epsilon", "eps"],
      ["rmsNorm", (o) => gyre.rmsNorm(x, o), "bias", null],
      ["groupNorm", (o) => gyre.groupNorm(x, { groups: 1, ...o }), "group", "groups"],
      [
        "batchNorm",
        (o) => gyre.batchNorm(x, { training: true, ...o } as never),
        "momentun",
        "momentum",
      ],
      ["cumsum", (o) => gyre.cumsum(x, o), "axes", "axis"],
      ["cumprod", (o) => gyre.cumprod(x, o), "exclusve", "exclusive"],
      ["cummax", (o) => gyre.cummax(x, o), "reversed", "reverse"],
      ["cummin", (o) => gyre.cummin(x, o), "axes", "axis"],
      ["sort", (o) => gyre.sort(x, o), "descend", "descending"],
      ["argsort", (o) => gyre.argsort(x, o), "axes", "axis"],
      ["rankK", (o) => gyre.rankK(x, 1, o), "kinds", "kind"],
      ["kthvalue", (o) => gyre.kthvalue(x, 1, o), "keepDims", "keepdims"],
      ["median", (o) => gyre.median(x, o), "axes", "axis"],
      ["quantile", (o) => gyre.quantile(x, 0.5, o), "methods", "method"],
      ["searchsorted", (o) => gyre.searchsorted(v, v, o), "sides", "side"],
      ["matmul", (o) => gyre.matmul(w, w, o), "transposeb", "transposeB"],
      ["linear", (o) => gyre.linear(w, w, o), "activations", "activation"],
      ["maxPool2d", (o) => gyre.maxPool2d(x, { kernelSize: 2, ...o }), "strides", "stride"],
      ["avgPool2d", (o) => gyre.avgPool2d(x, { kernelSize: 2, ...o }), "padding_", "padding"],
      ["adaptiveMaxPool2d", (o) => gyre.adaptiveMaxPool2d(x, 2, o), "returnIndex", "returnIndices"],
      ["gelu", (o) => gyre.gelu(v, o), "approx", "approximate"],
      ["leakyRelu", (o) => gyre.leakyRelu(v, o), "slope", null],
      ["elu", (o) => gyre.elu(v, o), "Alpha", "alpha"],
      ["softplus", (o) => gyre.softplus(v, o), "treshold", "threshold"],
      ["tensor", (o) => gyre.tensor([1], { device, ...o }), "dype", "dtype"],
      ["full", (o) => gyre.full([2], 1, { device, ...o }), "dtyp", "dtype"],
      ["zeros", (o) => gyre.zeros([2], { device, ...o }), "devices", "device"],
      ["ones", (o) => gyre.ones([2], { device, ...o }), "shape", null],
      ["arange", (o) => gyre.arange(0, 3, 1, { device, ...o }), "stop", null],
      ["linspace", (o) => gyre.linspace(0, 1, 3, { device, ...o }), "endPoint", "endpoint"],
      ["eye", (o) => gyre.eye(2, 2, { device, ...o }), "dtpe", "dtype"],
      ["uniform", (o) => gyre.random.uniform([2], { device, ...o }), "hi", "high"],
      ["normal", (o) => gyre.random.normal([2], { device, ...o }), "sd", "std"],
      ["explain", (o) => gyre.explain(() => [], o), "prnt", "print"],
    ];
    // Calls that merge required options into the given ones (a number would merge to nothing).
    const SPREADS = new Set([
      "groupNorm",
      "batchNorm",
      "maxPool2d",
      "avgPool2d",
      "tensor",
      "full",
      "zeros",
      "ones",
      "arange",
      "linspace",
      "eye",
      "uniform",
      "normal",
    ]);
    for (const [op, call, wrong, suggestion] of sweep) {
      const e = expectTyped(
        `${op} { ${wrong} }`,
        () => call({ [wrong]: 1 }),
        gyre.ValueError,
        op,
        new RegExp(`options\\.${wrong}$`),
      );
      if (suggestion) {
        assert.match(
          e.message,
          new RegExp(`"${suggestion}" \\(a misspelling\\?\\)`),
          `${op}: ${e.message}`,
        );
      } else assert.doesNotMatch(e.message, /a misspelling/, `${op}: ${e.message}`);
      // Options that are not an object are refused too (where the call passes them as given).
      if (!SPREADS.has(op)) {
        expectTyped(`${op} options 3`, () => call(3 as unknown as object), gyre.ValueError, op);
      }
    }
    await assert.rejects(gyre.init({ devise: "wasm" } as never), gyre.ValueError);
    // Still usable.
    const y = gyre.sum(x, { axis: [0, 1] });
    assert.deepEqual([...(await y.data())].slice(0, 2), [6, 6]);
    for (const t of [x, w, v, y]) t.dispose();
  });

  Deno.test(`strict inputs: every op of tensors refuses what is not one [${device}]`, () => {
    const x = gyre.ones([2, 2], { device });
    const notTensors: unknown[] = ["2", null, undefined, {}, [1, 2], () => 1];
    const unary = [
      "neg",
      "abs",
      "exp",
      "log",
      "sqrt",
      "sin",
      "tanh",
      "relu",
      "sigmoid",
      "floor",
      "sum",
      "max",
      "mean",
      "argmax",
      "cumsum",
      "softmax",
      "layerNorm",
      "variance",
      "logsumexp",
    ] as const;
    for (const op of unary) {
      for (const bad of notTensors) {
        // Plain JS numbers are TensorLike for elementwise ops; the rest must refuse.
        let caught: unknown = null;
        try {
          (gyre[op] as (a: unknown) => unknown)(bad);
        } catch (e) {
          caught = e;
        }
        assert.ok(caught instanceof gyre.GyreError, `${op}(${String(bad)}): ${String(caught)}`);
        assert.equal((caught as gyre.GyreError).op, op);
      }
    }
    for (const op of ["add", "mul", "maximum", "pow", "matmul"] as const) {
      for (const bad of notTensors) {
        let caught: unknown = null;
        try {
          (gyre[op] as (a: unknown, b: unknown) => unknown)(x, bad);
        } catch (e) {
          caught = e;
        }
        assert.ok(caught instanceof gyre.GyreError, `${op}(x, ${String(bad)}): ${String(caught)}`);
      }
    }
    x.dispose();
  });
}

// ---------------------------------------------------------------------------------------------
// The generated sweep: every public function and every Tensor method, each argument in turn
// replaced by values no argument of any op accepts.

/** A valid call of each public function, as its arguments (`x`: a [2, 2] float32 tensor). */
type Call = (t: Operands) => unknown[];
interface Operands {
  x: gyre.Tensor;
  x4: gyre.Tensor;
  row: gyre.Tensor;
  mask: gyre.Tensor;
  /** int32 indices: [[1, 0], [0, 1]] and [1, 0]. */
  ix: gyre.Tensor;
  i1: gyre.Tensor;
}

// Ops whose last argument is an options object take `{}` there, so that a wrong value in that
// place is tried too.
const ONE_TENSOR = [
  "abs ceil cos erf exp exp2 expm1 floor log log1p log2 logicalNot neg reciprocal round rsqrt",
  "sign sin sqrt square tan tanh sigmoid relu silu mish hardswish hardsigmoid selu softsign clone",
].join(" ").split(" ");
const ONE_TENSOR_AND_OPTIONS = [
  "gelu elu leakyRelu softplus all any sum max min mean prod logsumexp variance std argmax",
  "argmin softmax logSoftmax layerNorm rmsNorm cumsum cumprod cummax cummin sort argsort median",
  "nanmedian",
].join(" ").split(" ");
const TWO_TENSORS = [
  "add sub mul div pow maximum minimum mod equal notEqual less lessEqual greater greaterEqual",
  "logicalAnd logicalOr",
].join(" ").split(" ");
const CALLS: Record<string, Call> = {
  ...Object.fromEntries(ONE_TENSOR.map((op) => [op, ({ x }: Operands) => [x]])),
  ...Object.fromEntries(ONE_TENSOR_AND_OPTIONS.map((op) => [op, ({ x }: Operands) => [x, {}]])),
  ...Object.fromEntries(TWO_TENSORS.map((op) => [op, ({ x }: Operands) => [x, x]])),
  matmul: ({ x }) => [x, x, {}],
  topology: () => [gyre.V.W(1)],
  nonlinearLeastSquares: () => [[gyre.V.W(1)], (p: gyre.Value[]) => [p[0]], {}],
  lbfgs: () => [[gyre.V.W(1)], (p: gyre.Value[]) => [p[0]], {}],
  rankK: ({ x }) => [x, 1, {}],
  topk: ({ x }) => [x, 1, {}],
  bottomk: ({ x }) => [x, 1, {}],
  midk: ({ x }) => [x, 1, {}],
  kthvalue: ({ x }) => [x, 1, {}],
  quantile: ({ x }) => [x, 0.5, {}],
  nanquantile: ({ x }) => [x, 0.5, {}],
  searchsorted: ({ row }) => [row, row, {}],
  linear: ({ x }) => [x, x, {}],
  adaptiveAvgPool2d: ({ x4 }) => [x4, 1],
  adaptiveMaxPool2d: ({ x4 }) => [x4, 1, {}],
  maxPool2d: ({ x4 }) => [x4, { kernelSize: 2 }],
  avgPool2d: ({ x4 }) => [x4, { kernelSize: 2 }],
  batchNorm: ({ x4 }) => [x4, { training: true }],
  groupNorm: ({ x4 }) => [x4, { groups: 1 }],
  arange: () => [0, 3, 1, {}],
  broadcastTo: ({ row }) => [row, [2, 2]],
  cast: ({ x }) => [x, "int32"],
  clip: ({ x }) => [x, 0, 1],
  concat: ({ x }) => [[x, x], 1],
  stack: ({ x }) => [[x, x]],
  expandDims: ({ x }) => [x, 0],
  squeeze: ({ x4 }) => [x4, 0],
  eye: () => [2, 2, {}],
  full: () => [[2], 1, {}],
  linspace: () => [0, 1, 3, {}],
  ones: () => [[2], {}],
  zeros: () => [[2], {}],
  tensor: () => [[1, 2], {}],
  reshape: ({ x }) => [x, [4]],
  slice: ({ x }) => [x, [0, 1]],
  transpose: ({ x }) => [x, [1, 0]],
  where: ({ mask, x }) => [mask, x, x],
  to: ({ x }) => [x, "wasm"],
  readAll: ({ x }) => [[x]],
  promoteTypes: () => ["float32", "int32"],
  unaryOp: () => ["exp"],
  binaryOp: () => ["add"],
  tidy: () => [() => 1],
  jit: () => [(a: gyre.Tensor) => a.add(1)],
  grad: () => [(a: gyre.Tensor) => a.sum(), {}],
  valueAndGrad: () => [(a: gyre.Tensor) => a.sum(), {}],
  vjp: ({ x }) => [(a: gyre.Tensor) => a.exp(), x],
  jvp: ({ x }) => [(a: gyre.Tensor) => a.exp(), [x], [x]],
  stopGradient: ({ x }) => [x],
  hypergrad: ({ x, row }) => [x, row, {
    innerLoss: (w: gyre.Tensor, h: gyre.Tensor) => w.mul(h).sum(),
    outerLoss: (w: gyre.Tensor) => w.sum(),
    steps: 1,
    lr: 0.1,
  }],
  explain: ({ x }) => [() => x.add(1), { print: false }],
  "random.uniform": () => [[2], {}],
  "random.normal": () => [[2], {}],
  "random.pcgHash": () => [7],
  takeAlongAxis: ({ x, ix }) => [x, ix, {}],
  gather: ({ x, ix }) => [x, ix, {}],
  take: ({ x, i1 }) => [x, i1, {}],
  indexSelect: ({ x, i1 }) => [x, i1, {}],
  at: ({ x, i1 }) => [x, null, i1],
  scatter: ({ x, ix }) => [x, ix, x, {}],
  scatterAdd: ({ x, ix }) => [x, ix, x, {}],
  segmentSum: ({ x, i1 }) => [x, i1, { numSegments: 2 }],
  segmentMean: ({ x, i1 }) => [x, i1, { numSegments: 2 }],
  segmentMax: ({ x, i1 }) => [x, i1, { numSegments: 2 }],
  segmentMin: ({ x, i1 }) => [x, i1, { numSegments: 2 }],
  segmentProd: ({ x, i1 }) => [x, i1, { numSegments: 2 }],
  bincount: ({ i1 }) => [i1, { minlength: 2 }],
  histogram: ({ x }) => [x, {}],
  oneHot: ({ i1 }) => [i1, 2, {}],
  argwhere: ({ x }) => [x, { size: 2 }],
  nonzero: ({ x }) => [x, { size: 2 }],
  maskedSelect: ({ x, mask }) => [x, mask, { size: 2 }],
  unique: ({ x }) => [x, { size: 2 }],
  argwhereAsync: ({ x }) => [x],
  nonzeroAsync: ({ x }) => [x],
  maskedSelectAsync: ({ x, mask }) => [x, mask],
  uniqueAsync: ({ x }) => [x, {}],
  whereAsync: ({ x }) => [x],
  bincountAsync: ({ i1 }) => [i1, {}],
  tune: () => [["reduce"], { shapes: { reduce: [] }, record: false, load: false }],
  "heuristics.set": () => ["[scan]\nsoft(variant, 1, 0.5, true);"],
  "heuristics.explain": () => ["scan", { r: 1, n: 64, sg: false, al: true }],
};
/** Public functions of no arguments (nothing to get wrong) and the classes. */
const NO_ARGUMENTS = new Set(
  [
    "init runtime flush sync startWasmThreads stopWasmThreads wasmThreadCapacity wasmThreadCount",
    "heuristics.clear",
    "Runtime Tensor GyreError AxisError DTypeError DeviceError DisposedError GpuError ShapeError RuleError",
    "ValueError OutOfMemoryError IndexError",
    // Scalar graphs: made by V.W, V.C and the ops of V (tests/residuals_test.ts checks their
    // arguments); CompiledResiduals by its static compile (same).
    "Value Vec2 Vec3 CompiledResiduals",
  ].join(" ").split(" "),
);
/** Values that no argument of any op accepts (an options object of an unknown key included). */
const WRONG: [string, unknown][] = [
  ["a string", "2"],
  ["a symbol", Symbol("s")],
  ["a bigint", 10n],
  ["an object of an unknown key", { bogus: 1 }],
];
/** Every public function by name, `random`'s under "random.". */
const publicFunctions = (): [string, (...a: unknown[]) => unknown][] => [
  ...Object.entries(gyre).filter(([, v]) => typeof v === "function") as [
    string,
    (...a: unknown[]) => unknown,
  ][],
  ...Object.entries(gyre.random).map(([k, v]) =>
    [`random.${k}`, v] as [string, (...a: unknown[]) => unknown]
  ),
  ...Object.entries(gyre.heuristics).map(([k, v]) =>
    [`heuristics.${k}`, v] as [string, (...a: unknown[]) => unknown]
  ),
];

Deno.test("strict inputs: the generated sweep knows a valid call of every public function", () => {
  const missing = publicFunctions().map(([name]) => name).filter((name) =>
    !(name in CALLS) && !NO_ARGUMENTS.has(name)
  );
  assert.deepEqual(missing, [], "add a valid call to CALLS for each");
});

/** Runs `fn`, returning the error it threw or its promise rejected with, or null. */
async function outcome(fn: () => unknown): Promise<unknown> {
  try {
    const r = fn();
    const value = r instanceof Promise ? await r : r;
    if (value instanceof gyre.Tensor) value.dispose();
    return null;
  } catch (e) {
    return e;
  }
}

for (const device of DEVICES) {
  Deno.test(`strict inputs: every argument of every public function and method, wrong [${device}]`, async () => {
    const operands: Operands = {
      x: gyre.tensor([[1, 2], [3, 4]], { device }),
      x4: gyre.ones([1, 2, 2, 2], { device }),
      row: gyre.tensor([1, 2], { device }),
      mask: gyre.tensor([[true, false], [false, true]], { device }),
      ix: gyre.tensor([[1, 0], [0, 1]], { dtype: "int32", device }),
      i1: gyre.tensor([1, 0], { dtype: "int32", device }),
    };
    const checked: string[] = [];
    const failures: string[] = [];
    const expectRefused = async (label: string, op: string, fn: () => unknown) => {
      gyre.flush();
      const before = liveCounts();
      const e = await outcome(fn);
      gyre.flush();
      checked.push(label);
      if (!(e instanceof gyre.GyreError)) failures.push(`${label}: ${e === null ? "ran" : e}`);
      else if (
        !e.op.toLowerCase().includes(op.replace(/^random\./, "").toLowerCase()) &&
        !(op.startsWith("heuristics.") && /heuristics|explain/.test(e.op))
      ) {
        failures.push(`${label}: the error names op "${e.op}"`);
      }
      if (JSON.stringify(liveCounts()) !== JSON.stringify(before)) {
        failures.push(`${label}: leaked`);
      }
    };
    for (const [name, fn] of publicFunctions()) {
      const call = CALLS[name];
      if (!call) continue;
      const args = call(operands);
      for (let position = 0; position < args.length; position++) {
        for (const [what, wrong] of WRONG) {
          const bad = args.slice();
          bad[position] = wrong;
          await expectRefused(`${name} argument ${position} ${what}`, name, () => fn(...bad));
        }
      }
      // The Tensor method of the same name takes the rest of the arguments.
      const method = (gyre.Tensor.prototype as unknown as Record<string, unknown>)[name];
      if (typeof method === "function" && args[0] instanceof gyre.Tensor) {
        for (let position = 1; position < args.length; position++) {
          for (const [what, wrong] of WRONG) {
            const bad = args.slice();
            bad[position] = wrong;
            await expectRefused(
              `x.${name}() argument ${position - 1} ${what}`,
              name,
              () => (method as (...a: unknown[]) => unknown).apply(bad[0], bad.slice(1)),
            );
          }
        }
      }
    }
    // The runtime is still usable, and the sweep did what it says.
    await Deno.writeTextFile(`/tmp/sweep-${device}.txt`, failures.join("\n"));
    assert.deepEqual(failures, [], `${failures.length} of ${checked.length} calls`);
    assert.ok(checked.length > 600, `${checked.length} calls`);
    const y = operands.x.add(1);
    assert.deepEqual([...(await y.data())], [2, 3, 4, 5]);
    y.dispose();
    Object.values(operands).forEach((t) => t.dispose());
  });
}
