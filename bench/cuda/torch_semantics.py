"""Checks gyre's results for issue 3's ops, as `torch_semantics.ts` wrote them (both devices),
against PyTorch computing the same op in float64 on the CPU from the same float32 inputs.

    python3 bench/cuda/torch_semantics.py cases.json [--out report.md]

Exact for what has one right answer (max, min, their indices, all/any, cummax/cummin, max pools,
relu, shapes, where NaN and infinities fall, errors). Elsewhere |gyre - torch| may be at most
rtol * scale + atol per element, where
- sums (sum, mean, cumsum, avg pools): scale is the same op over |x| (float32 accumulation error
  grows like eps * log2(n) times the sum of magnitudes), rtol = 4 * eps * (log2(n) + 2);
- variance and std: scale is |result| plus the op's mean of x^2 (or its root), same rtol;
- products: scale |result|, rtol = 4 * eps * (log2(n) + 2) * 8 (each factor rounds once);
- activations, softmax, logSoftmax, logsumexp, norms: scale 1 + |result|, rtol 1e-5 (a few ULP
  of each transcendental the GPU computes in float32, as WGSL allows, compounded);
- float16 storage: PyTorch's answer rounded to float16, plus one float16 ULP (2^-10 |result|)
  for a float32 result that rounded the other way.
Where PyTorch and NumPy differ, the choice issue 3 states is checked (see `expected`).
"""
import json
import math
import sys

import torch
import torch.nn.functional as F

EPS32 = 2.0**-23


def decode(encoded, dtype=torch.float64):
    data = [float(v) if isinstance(v, str) else v for v in encoded["data"]]
    return torch.tensor(data, dtype=dtype).reshape(encoded["shape"])


def dims_of(params, x):
    axis = params.get("axis")
    if axis is None:
        return list(range(x.dim()))
    axes = axis if isinstance(axis, list) else [axis]
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
    dim = params.get("axis", -1) % x.dim()
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
         "adaptiveMaxPool2d", "relu"}


def expected(case, inputs):
    op, params, x = case["op"], case["params"], inputs["x"]
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
        return want.abs(), sum_rtol * 8
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


def compare(case, inputs, want, got):
    """None when `got` matches `want`, else a line saying where and by how much it does not."""
    if len(want) != len(got):
        return f"{len(got)} outputs, expected {len(want)}"
    worst = 0.0
    for k, (w, g_encoded) in enumerate(zip(want, got)):
        g = decode(g_encoded)
        if list(g.shape) != list(w.shape):
            return f"output {k}: shape {list(g.shape)}, expected {list(w.shape)}"
        w = w.to(torch.float64)
        # float16 storage: the answer rounded to float16, give or take one float16 ULP.
        half = g_encoded["dtype"] == "float16"
        if half:
            w = w.to(torch.float16).to(torch.float64)
        if w.numel() == 0:
            continue
        w_nan, g_nan = torch.isnan(w), torch.isnan(g)
        if not torch.equal(w_nan, g_nan):
            flat = torch.nonzero((w_nan != g_nan).reshape(-1))[0].item()
            return (f"output {k}: NaN at flat {flat} differs (expected "
                    f"{w.reshape(-1)[flat].item()}, got {g.reshape(-1)[flat].item()})")
        w_inf, g_inf = torch.isinf(w), torch.isinf(g)
        if not torch.equal(w_inf, g_inf) or not torch.equal(w[w_inf], g[w_inf]):
            flat = torch.nonzero(((w_inf != g_inf) | (w_inf & (w != g))).reshape(-1))[0].item()
            return (f"output {k}: infinity at flat {flat} differs (expected "
                    f"{w.reshape(-1)[flat].item()}, got {g.reshape(-1)[flat].item()})")
        finite = ~(w_nan | w_inf)
        difference = (w - g).abs()[finite]
        if case["op"] in EXACT or k > 0 and case["op"] in ("maxPool2d", "adaptiveMaxPool2d"):
            if difference.numel() and difference.max() > 0:
                flat = torch.nonzero(((w - g).abs() > 0) & finite)[0].tolist()
                return f"output {k}: at {flat} expected {w[tuple(flat)].item()}, got {g[tuple(flat)].item()} (exact op)"
            continue
        n = reduced_length(case, inputs["x"])
        if case["op"] == "batchNorm":
            scale, rtol = 1 + w.abs(), 1e-5
        else:
            scale, rtol = scale_and_rtol(case, inputs, w, n)
        scale = scale.to(torch.float64)[finite] if scale.dim() else scale
        tolerance = rtol * scale + 1e-7
        if half:
            tolerance = tolerance + 2.0**-10 * w[finite].abs() + 2.0**-24
        ratio = (difference / tolerance).max().item() if difference.numel() else 0.0
        worst = max(worst, ratio)
        if ratio > 1:
            i = int(torch.argmax(difference / tolerance))
            return (f"output {k}: error {difference[i].item():.3g} over tolerance "
                    f"{tolerance[i].item():.3g} (expected {w[finite][i].item():.9g}, got "
                    f"{g[finite][i].item():.9g})")
    case["worst"] = max(case.get("worst", 0.0), worst)
    return None


def main():
    path = sys.argv[1]
    out = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else None
    with open(path) as f:
        document = json.load(f)
    lines = [f"gyre on {document.get('adapter')} and WASM against PyTorch {torch.__version__} "
             f"(float64, CPU) from the same float32 inputs", ""]
    failures, by_op = [], {}
    for case in document["cases"]:
        inputs = {k: decode(v) for k, v in case["inputs"].items()}
        try:
            want, want_error = expected(case, inputs), None
        except Exception as error:  # PyTorch refuses: gyre must too
            want, want_error = None, f"{type(error).__name__}: {error}"
        for device, result in case["results"].items():
            if want_error is not None:
                problem = None if "error" in result else f"no error; PyTorch raised {want_error}"
            elif "error" in result:
                problem = f"raised {result['error']}"
            else:
                problem = compare(case, inputs, want, result["outputs"])
            stats = by_op.setdefault((case["op"], device), [0, 0, 0.0])
            stats[0] += 1
            if problem:
                stats[1] += 1
                failures.append(f"- {device} `{case['name']}`: {problem}")
            stats[2] = max(stats[2], case.get("worst", 0.0))
    lines += ["| op | device | cases | mismatches | worst error / tolerance |", "|---|---|---:|---:|---:|"]
    for (op, device), (count, bad, worst) in sorted(by_op.items()):
        exact = "exact" if op in EXACT else f"{worst:.3f}"
        lines.append(f"| {op} | {device} | {count} | {bad} | {exact} |")
    lines += ["", f"{len(failures)} mismatches" + (":" if failures else "."), *failures]
    report = "\n".join(lines)
    print(report)
    if out:
        with open(out, "w") as f:
            f.write(report + "\n")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
