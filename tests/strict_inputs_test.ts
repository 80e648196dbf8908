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
