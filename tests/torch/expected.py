"""PyTorch's answers for the cases of `cases.ts`, in float64 on the CPU from the same inputs, each
output with a per-element tolerance (none for exact ops), for `compare.ts` to judge gyre by.

    deno run -A tests/torch/check.ts --write-cases cases.jsonl [--small]
    python3 tests/torch/expected.py cases.jsonl expected.jsonl

Exact for what has one right answer (max, min, their indices, all/any, cummax/cummin, max pools,
relu, sign, rounding, comparisons, shapes, where NaN and infinities fall, errors). Elsewhere
|gyre - torch| may be at most rtol * scale + 1e-7 per element, where
- sums (sum, mean, cumsum, avg pools): scale is the same op over |x| (float32 accumulation error
  grows like eps * log2(n) times the sum of magnitudes), rtol = 4 * eps * (log2(n) + 2);
- variance and std: scale is |result| plus the op's mean of x^2 (or its root), same rtol;
- products: scale |result|, rtol = 2 n 2^-24 (every multiply's rounding reaches the product,
  whatever the order: a float32 tree of 20000 factors near 1 is off by 1.4e-4);
- add, sub, mul, square, mod: 1 ULP of |result|; div and reciprocal 3 (WGSL allows 2.5); sqrt and
  rsqrt 4; exp, exp2, expm1: 3 + 2|x| ULP (WGSL's bound); logs 2^-21 of 1 + |result|; sin, cos,
  tan 2^-20 of (1 + result^2)(1 + |x|) (range reduction); pow (3 + 2|y log2 x|) 2 ULP + 1e-6;
- matmul and linear: 2 K 2^-24 of |a| @ |b| (any summation order), plus 1e-5 of 1 + |result|
  for linear's activation;
- activations, softmax, logSoftmax, logsumexp, norms: scale 1 + |result|, rtol 1e-5 (a few ULP
  of each transcendental the GPU computes in float32, as WGSL allows, compounded).
`compare.ts` rounds each answer to the dtype gyre returned and allows float16 results one more
float16 ULP. Where PyTorch and NumPy differ, the choice issue 3 states is taken (see `expected`).
"""
import array
import base64
import json
import math
import sys

import torch
import torch.nn.functional as F

EPS32 = 2.0**-23


def decode(encoded):
    raw = bytearray(base64.b64decode(encoded["base64"]))
    if not raw:
        return torch.zeros(encoded["shape"], dtype=torch.float64)
    return torch.frombuffer(raw, dtype=torch.float64).reshape(encoded["shape"])


def dims_of(params, x):
    axis = params.get("axis")
    if axis is None:
        return list(range(x.dim()))
    axes = axis if isinstance(axis, list) else [axis]
    for a in axes:
        if not -max(x.dim(), 1) <= a < max(x.dim(), 1):
            raise IndexError(f"dimension {a} out of range for {x.dim()} dimensions")
    return sorted(a % x.dim() for a in axes)


def reduce_each(fn, x, dims, keepdim):
    """Reduces one axis at a time, for ops that take a single dim."""
    out = x
    for d in sorted(dims, reverse=True):
        out = fn(out, d)
    if not keepdim:
        shape = [s for i, s in enumerate(x.shape) if i not in dims]
        out = out.reshape(shape)
    return out


def reduction(op, params, x):
    dims = dims_of(params, x)
    keep = bool(params.get("keepdims", False))
    if op in ("sum", "mean", "logsumexp"):
        fn = {"sum": torch.sum, "mean": torch.mean, "logsumexp": torch.logsumexp}[op]
        return [fn(x, dim=dims, keepdim=keep)]
    if op in ("max", "min"):
        fn = torch.amax if op == "max" else torch.amin
        return [fn(x, dim=dims, keepdim=keep)]
    if op == "prod":
        return [reduce_each(lambda t, d: torch.prod(t, dim=d, keepdim=True), x, dims, keep)]
    if op in ("all", "any"):
        fn = torch.all if op == "all" else torch.any
        return [reduce_each(lambda t, d: fn(t, dim=d, keepdim=True), x != 0, dims, keep)]
    if op in ("variance", "std"):
        fn = torch.var if op == "variance" else torch.std
        return [fn(x, dim=dims, correction=params.get("ddof", 0), keepdim=keep)]
    if op in ("argmax", "argmin"):
        # NumPy's: the first NaN wins; without an axis, a flat index, all-ones shape with keepdims.
        if params.get("axis") is None:
            flat = x.reshape(-1)
            index = first_extreme(flat, 0, op)
            return [index.reshape([1] * x.dim()) if keep else index.reshape([])]
        return [first_extreme(x, dims[0], op, keep)]
    raise ValueError(op)


def first_extreme(x, dim, op, keep=False):
    if x.shape[dim] == 0:
        raise ValueError(f"{op} of an empty axis")
    extreme = torch.amax(x, dim=dim, keepdim=True) if op == "argmax" else torch.amin(
        x, dim=dim, keepdim=True)
    # The first occurrence on ties (PyTorch documents it) and NumPy's first NaN, made explicit.
    positions = torch.arange(x.shape[dim]).reshape([-1 if i == dim else 1 for i in range(x.dim())])
    is_nan = torch.isnan(x)
    hit = torch.where(is_nan.any(dim=dim, keepdim=True), is_nan, x == extreme)
    first = torch.where(hit, positions, x.shape[dim]).amin(dim=dim, keepdim=True)
    return first if keep else first.squeeze(dim)


def activation(op, params, x):
    if op == "relu":
        return [torch.relu(x)]
    if op == "gelu":
        return [F.gelu(x, approximate=params.get("approximate", "none"))]
    if op == "leakyRelu":
        return [F.leaky_relu(x, negative_slope=params.get("alpha", 0.01))]
    if op == "elu":
        return [F.elu(x, alpha=params.get("alpha", 1.0))]
    if op == "softplus":
        return [F.softplus(x, beta=params.get("beta", 1.0), threshold=params.get("threshold", 20.0))]
    fn = {"silu": F.silu, "mish": F.mish, "hardswish": F.hardswish,
          "hardsigmoid": F.hardsigmoid, "selu": F.selu, "softsign": F.softsign}[op]
    return [fn(x)]


SCAN_IDENTITY = {"cumsum": 0.0, "cumprod": 1.0, "cummax": -math.inf, "cummin": math.inf}


def scan(op, params, x):
    dim = params.get("axis", -1)  # PyTorch raises for one out of range
    source = x.flip(dim) if params.get("reverse") else x
    if params.get("exclusive"):
        pad = torch.full_like(source.narrow(dim, 0, 1), SCAN_IDENTITY[op])
        source = torch.cat([pad, source.narrow(dim, 0, source.shape[dim] - 1)], dim)
    fn = {"cumsum": torch.cumsum, "cumprod": torch.cumprod,
          "cummax": lambda t, d: torch.cummax(t, d).values,
          "cummin": lambda t, d: torch.cummin(t, d).values}[op]
    out = fn(source, dim)
    return [out.flip(dim) if params.get("reverse") else out]


def trailing_shape(params, x, default=-1):
    axis = params.get("axis", default)
    axes = sorted(a % x.dim() for a in (axis if isinstance(axis, list) else [axis]))
    assert axes == list(range(x.dim() - len(axes), x.dim())), "only trailing axes"
    return list(x.shape[-len(axes):])


def norm(op, params, inputs):
    x = inputs["x"]
    if op == "softmax":
        return [torch.softmax(x, params.get("axis", -1))]
    if op == "logSoftmax":
        return [torch.log_softmax(x, params.get("axis", -1))]
    if op == "layerNorm":
        return [F.layer_norm(x, trailing_shape(params, x), inputs.get("weight"), inputs.get("bias"),
                             params.get("eps", 1e-5))]
    if op == "rmsNorm":
        return [F.rms_norm(x, trailing_shape(params, x), inputs.get("weight"),
                           params.get("eps", 1e-6))]
    if op == "groupNorm":
        return [F.group_norm(x, params["groups"], inputs.get("weight"), inputs.get("bias"),
                             params.get("eps", 1e-5))]
    if op == "batchNorm":
        eps = params.get("eps", 1e-5)
        if not params.get("training"):
            return [F.batch_norm(x, inputs["mean"], inputs["variance"], inputs.get("weight"),
                                 inputs.get("bias"), False, 0.0, eps)]
        running_mean = inputs["mean"].clone() if "mean" in inputs else None
        running_var = inputs["variance"].clone() if "variance" in inputs else None
        out = F.batch_norm(x, running_mean, running_var, inputs.get("weight"), inputs.get("bias"),
                           True, params.get("momentum", 0.1), eps)
        dims = [d for d in range(x.dim()) if d != 1]
        results = [out, x.mean(dim=dims), x.var(dim=dims, correction=0),
                   x.var(dim=dims, correction=1)]
        return results + ([running_mean, running_var] if running_mean is not None else [])
    raise ValueError(op)


def pool(op, params, x):
    if op == "maxPool2d":
        result = F.max_pool2d(x, params["kernelSize"], params.get("stride"),
                              params.get("padding", 0), params.get("dilation", 1),
                              params.get("ceilMode", False), params.get("returnIndices", False))
        return list(result) if params.get("returnIndices") else [result]
    if op == "avgPool2d":
        return [F.avg_pool2d(x, params["kernelSize"], params.get("stride"),
                             params.get("padding", 0), params.get("ceilMode", False),
                             params.get("countIncludePad", True), params.get("divisorOverride"))]
    size = params["outputSize"]
    size = tuple(size) if isinstance(size, list) else size
    if op == "adaptiveAvgPool2d":
        return [F.adaptive_avg_pool2d(x, size)]
    result = F.adaptive_max_pool2d(x, size, params.get("returnIndices", False))
    return list(result) if params.get("returnIndices") else [result]


REDUCTIONS = {"sum", "mean", "max", "min", "prod", "argmax", "argmin", "all", "any", "logsumexp",
              "variance", "std"}
ACTIVATIONS = {"relu", "gelu", "silu", "mish", "hardswish", "hardsigmoid", "leakyRelu", "elu",
               "selu", "softplus", "softsign"}
SCANS = set(SCAN_IDENTITY)
NORMS = {"softmax", "logSoftmax", "layerNorm", "rmsNorm", "groupNorm", "batchNorm"}
EXACT = {"max", "min", "argmax", "argmin", "all", "any", "cummax", "cummin", "maxPool2d",
         "adaptiveMaxPool2d", "relu", "neg", "abs", "sign", "floor", "ceil", "round", "maximum",
         "minimum", "equal", "notEqual", "less", "lessEqual", "greater", "greaterEqual",
         "logicalNot", "logicalAnd", "logicalOr", "clip", "where", "eye", "full", "cast", "concat",
         "stack", "slice", "reshape", "transpose", "squeeze", "expandDims", "broadcastTo"}
# Elementwise float32 ops with a bound in ULP (WGSL's: add, sub, mul exact-rounded; divide 2.5;
# sqrt through inverseSqrt; mod from the exact fmod and one add); the relative tolerance below.
ULP_BOUND = {"add": 1, "sub": 1, "mul": 1, "square": 1, "mod": 1, "div": 3, "reciprocal": 3,
             "sqrt": 4, "rsqrt": 4}


def numpy_sign(x):
    # NumPy's sign keeps NaN; PyTorch's gives 0. gyre follows NumPy.
    return torch.where(torch.isnan(x), x, torch.sign(x))


UNARY = {"neg": torch.neg, "abs": torch.abs, "sign": numpy_sign, "square": torch.square,
         "reciprocal": torch.reciprocal, "exp": torch.exp, "exp2": torch.exp2, "log": torch.log,
         "log2": torch.log2, "log1p": torch.log1p, "expm1": torch.expm1, "sqrt": torch.sqrt,
         "rsqrt": torch.rsqrt, "sin": torch.sin, "cos": torch.cos, "tan": torch.tan,
         "tanh": torch.tanh, "sigmoid": torch.sigmoid, "erf": torch.erf, "floor": torch.floor,
         "ceil": torch.ceil, "round": torch.round,
         "logicalNot": lambda x: torch.logical_not(x != 0)}
BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
          "pow": torch.pow, "maximum": torch.maximum, "minimum": torch.minimum,
          "mod": torch.remainder, "equal": torch.eq, "notEqual": torch.ne, "less": torch.lt,
          "lessEqual": torch.le, "greater": torch.gt, "greaterEqual": torch.ge,
          "logicalAnd": lambda x, y: torch.logical_and(x != 0, y != 0),
          "logicalOr": lambda x, y: torch.logical_or(x != 0, y != 0)}


CREATION = {"arange", "linspace", "eye", "full"}
MOVEMENT = {"cast", "concat", "stack", "slice", "reshape", "transpose", "squeeze", "expandDims",
            "broadcastTo"}


def numpy_slice(x, ranges):
    """NumPy basic indexing (an int drops its axis; [start, stop, step] with negative steps and
    clamped bounds), through index_select since PyTorch slices take no negative steps."""
    axis = 0
    for r in ranges:
        if isinstance(r, int):
            x = x.select(axis, r)
            continue
        if r is not None:
            picked = range(*slice(*(list(r) + [None] * (3 - len(r)))).indices(x.shape[axis]))
            x = x.index_select(axis, torch.tensor(list(picked), dtype=torch.long))
        axis += 1
    return x


def creation_or_movement(op, params, inputs):
    if op == "arange":
        return torch.arange(params["start"], params["stop"], params["step"], dtype=torch.float64)
    if op == "linspace":
        num, endpoint = params["num"], params.get("endpoint", True)
        if endpoint:
            return torch.linspace(params["start"], params["stop"], num, dtype=torch.float64)
        return torch.linspace(params["start"], params["stop"], num + 1, dtype=torch.float64)[:-1]
    if op == "eye":
        return torch.eye(params["n"], params["m"], dtype=torch.float64)
    if op == "full":
        return torch.full(params["shape"], params["value"], dtype=torch.float64)
    x = inputs["x"]
    if op == "cast":
        target = params["dtype"]
        if target == "int32":
            return torch.trunc(x)  # toward zero; the inputs stay inside int32
        if target == "bool":
            return (x != 0).to(torch.float64)
        return x  # float16 and float32: compare.ts rounds to the dtype gyre returned
    if op == "concat":
        return torch.cat([x, inputs["y"]], params["axis"])
    if op == "stack":
        return torch.stack([x, inputs["y"]], params["axis"])
    if op == "slice":
        return numpy_slice(x, params["ranges"])
    if op == "reshape":
        return x.reshape(params["shape"])
    if op == "transpose":
        return x.permute(params.get("permutation") or list(range(x.dim() - 1, -1, -1)))
    if op == "squeeze":
        axis = params.get("axis")
        return x.squeeze() if axis is None else x.squeeze(axis)
    if op == "expandDims":
        return x.unsqueeze(params["axis"])
    return x.expand(params["shape"])


def expected(case, inputs):
    op, params = case["op"], case["params"]
    if op in UNARY:
        return [UNARY[op](inputs["x"])]
    if op in BINARY:
        return [BINARY[op](inputs["x"], inputs["y"])]
    if op == "clip":
        return [torch.clamp(inputs["x"], params.get("min"), params.get("max"))]
    if op == "where":
        return [torch.where(inputs["condition"] != 0, inputs["x"], inputs["y"])]
    if op in CREATION or op in MOVEMENT:
        return [creation_or_movement(op, params, inputs)]
    if op == "matmul":
        a, b = inputs["x"], inputs["y"]
        if params.get("transposeA") and a.dim() >= 2:
            a = a.transpose(-1, -2)
        if params.get("transposeB") and b.dim() >= 2:
            b = b.transpose(-1, -2)
        return [torch.matmul(a, b)]
    if op == "linear":
        out = F.linear(inputs["x"], inputs["weight"], inputs.get("bias"))
        epilogue = {"none": lambda t: t, "relu": torch.relu, "gelu": F.gelu, "silu": F.silu,
                    "tanh": torch.tanh, "sigmoid": torch.sigmoid}[params.get("activation", "none")]
        return [epilogue(out)]
    x = inputs["x"]
    if op in REDUCTIONS:
        return reduction(op, params, x)
    if op in ACTIVATIONS:
        return activation(op, params, x)
    if op in SCANS:
        return scan(op, params, x)
    if op in NORMS:
        return norm(op, params, inputs)
    return pool(op, params, x)


def scale_and_rtol(case, inputs, want, n):
    """Per-element scale and rtol for the inexact ops (see the module comment)."""
    op, params = case["op"], case["params"]
    if op == "batchNorm":
        return 1 + want.abs(), 1e-5
    if op in ("arange", "linspace"):
        # start + i * step in float32: a rounding of the product and one of the sum.
        bound = max(abs(params["start"]), abs(params["stop"])) + abs(params.get("step", 0))
        return torch.full_like(want, bound), 2 * EPS32
    sum_rtol = 4 * EPS32 * (math.log2(max(n, 1)) + 2)
    absolute = dict(inputs, x=inputs["x"].abs())
    if op in ("sum", "mean", "cumsum"):
        return expected(case, absolute)[0].abs(), sum_rtol
    if op == "avgPool2d":
        return pool(op, params, inputs["x"].abs())[0], sum_rtol
    if op == "adaptiveAvgPool2d":
        return pool(op, params, inputs["x"].abs())[0], sum_rtol
    if op in ("variance", "std"):
        squares = reduction("mean", {k: v for k, v in params.items() if k != "ddof"},
                            inputs["x"] ** 2)[0]
        extra = squares if op == "variance" else squares.sqrt()
        return want.abs() + extra * n / max(n - params.get("ddof", 0), 1), sum_rtol
    if op in ("prod", "cumprod"):
        # Every multiply's rounding reaches the product whatever the order: n u (u = 2^-24), x2.
        return want.abs(), 2 * max(n, 1) * 2.0**-24
    if op in ("matmul", "linear"):
        # K products summed in any order: |error| <= K u |a| |b| (u = 2^-24), x2; linear's
        # activation adds its own few ULP (the 1e-5 of 1 + |result|).
        a, b = inputs["x"].abs(), (inputs["y"] if op == "matmul" else inputs["weight"]).abs()
        if op == "matmul":
            if params.get("transposeA") and a.dim() >= 2:
                a = a.transpose(-1, -2)
            if params.get("transposeB") and b.dim() >= 2:
                b = b.transpose(-1, -2)
            scale = torch.matmul(a, b)
        else:
            scale = F.linear(a, b, None if "bias" not in inputs else inputs["bias"].abs())
        k = a.shape[-1]  # a's last axis is K once transposed
        return scale * 2 * max(k, 1) * 2.0**-24 + 1e-5 * (1 + want.abs()), 1.0
    if op in ULP_BOUND:
        return want.abs(), ULP_BOUND[op] * EPS32
    x = inputs["x"].to(torch.float64)
    if op in ("exp", "exp2", "expm1"):
        # WGSL's exp: 3 + 2|x| ULP.
        return want.abs() + 1e-6, (3 + 2 * x.abs().nan_to_num(0, 0, 0)) * EPS32 + 1e-6
    if op in ("log", "log2", "log1p"):
        return want.abs() + 1, 2.0**-21
    if op in ("sin", "cos", "tan"):
        # Range reduction on the GPU loses about |x| 2^-22 of the argument; tan amplifies it.
        grow = x.abs().nan_to_num(0, 0, 0) + 1
        return (1 + want.abs() ** 2) * grow, 2.0**-20
    if op == "pow":
        y = inputs["y"].to(torch.float64)
        log_size = (y * torch.log2(x.abs())).abs().nan_to_num(0, 0, 0)
        return want.abs(), (3 + 2 * log_size) * EPS32 * 2 + 1e-6
    return 1 + want.abs(), 1e-5


def reduced_length(case, x):
    op, params = case["op"], case["params"]
    if op in REDUCTIONS:
        return math.prod(x.shape[d] for d in dims_of(params, x)) if x.dim() else 1
    if op in SCANS:
        return x.shape[params.get("axis", -1) % x.dim()]
    if op in ("avgPool2d",):
        k = params["kernelSize"]
        return (k[0] * k[1]) if isinstance(k, list) else k * k
    if op == "adaptiveAvgPool2d":
        return x.shape[-1] * x.shape[-2]
    return x.shape[-1] if x.dim() else 1


def apply_view(x, view):
    """The view `cases.ts` takes of input x: permute, slice (steps >= 1), then flip."""
    if "permute" in view:
        x = x.permute(view["permute"])
    if "slice" in view:
        x = x[tuple(slice(*r) if r else slice(None) for r in view["slice"])]
    for axis in view.get("flip", []):
        x = x.flip(axis)
    return x.contiguous()


def encode(tensor):
    """Float64 bytes in base64 (little-endian), as `fromBase64` in cases.ts reads them."""
    return base64.b64encode(array.array("d", tensor.to(torch.float64).reshape(-1).tolist())
                            .tobytes()).decode()


def expectation(case):
    """PyTorch's error for a case, or its outputs with their tolerances."""
    inputs = {k: decode(v) for k, v in case["inputs"].items()}
    if "view" in case:
        inputs["x"] = apply_view(inputs["x"], case["view"])
    try:
        want = expected(case, inputs)
    # PyTorch refuses (its errors, and this file's own for what PyTorch would refuse): gyre must
    # too. Anything else is a bug here and stops the run.
    except (RuntimeError, ValueError, IndexError) as error:
        return {"name": case["name"], "error": f"{type(error).__name__}: {error}"}
    outputs = []
    for w in want:
        w = w.to(torch.float64)
        tolerance = None
        if case["op"] not in EXACT and w.numel():
            n = reduced_length(case, inputs["x"]) if "x" in inputs else 1
            scale, rtol = scale_and_rtol(case, inputs, w, n)
            full = torch.broadcast_to(torch.as_tensor(rtol * scale + 1e-7, dtype=torch.float64),
                                      w.shape)
            tolerance = encode(full.nan_to_num(1e-7, 1e-7, 1e-7))
        outputs.append({"shape": list(w.shape), "expected": encode(w), "tolerance": tolerance})
    return {"name": case["name"], "outputs": outputs}


def main():
    source, target = sys.argv[1], sys.argv[2]
    count = 0
    with open(source) as cases, open(target, "w") as out:
        header = json.loads(cases.readline())
        out.write(json.dumps({"torch": torch.__version__, "cases": header.get("cases")}) + "\n")
        for line in cases:
            out.write(json.dumps(expectation(json.loads(line))) + "\n")
            count += 1
    print(f"{count} expectations from PyTorch {torch.__version__} written to {target}")


if __name__ == "__main__":
    main()
