"""NumPy worker of the CPU benchmark (bench/cpu.ts starts it; not meant to be run alone).

Runs the cases of bench/peers/cpu_common.ts with plain NumPy, with the same timing loop and
CPU-idle check as the TypeScript workers (see cpu_common.ts for the method), and prints one JSON
line per case on stdout. NumPy is eager: an op returns with its result computed. bench/cpu.ts
sets OPENBLAS_NUM_THREADS=1 (and OMP/MKL), so matmul is single-threaded OpenBLAS; the other ops
are single-threaded in NumPy anyway. Also times the machine's copy bandwidth (np.copyto of
--sizes' copyBytes) as the case "copy_bw".

Usage: python3 bench/cpu_numpy.py --sizes JSON [--only a,b]
"""

import json
import os
import sys
import time

import numpy as np

# Keep in step with bench/peers/cpu_common.ts.
SAMPLES = 9
MIN_SAMPLE_MS = 20.0
OTHER_LIMIT = 0.1
SLACK_TICKS = 3
ATTEMPTS = 3
SLOW_MS = 1000.0
SLOW_SAMPLES = 3
TICKS = os.sysconf("SC_CLK_TCK")


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def emit(obj):
    print(json.dumps(obj), flush=True)


def machine_busy_ticks():
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return v[0] + v[1] + v[2] + v[5] + v[6]  # user nice system irq softirq (not steal)
    except OSError:
        return None


def own_ticks():
    try:
        with open("/proc/self/stat") as f:
            stat = f.read()
        v = stat[stat.rindex(")") + 2 :].split()
        return int(v[11]) + int(v[12]) + int(v[13]) + int(v[14])
    except OSError:
        return None


def time_case(name, run, note=None):
    """Warm-up, ops per sample, samples under the idle check, as timeCase in cpu_common.ts."""
    t0 = time.perf_counter()
    run(1)
    first = (time.perf_counter() - t0) * 1e3
    slow = first > SLOW_MS
    if not slow:
        run(1)
    runs, t0 = 0, time.perf_counter()
    while True:
        run(1)
        runs += 1
        if (time.perf_counter() - t0) * 1e3 >= MIN_SAMPLE_MS or runs >= 1000:
            break
    once = (time.perf_counter() - t0) * 1e3 / runs
    reps = 1 if once >= MIN_SAMPLE_MS else min(1000, int(np.ceil(MIN_SAMPLE_MS / max(once, 1e-6))))
    count = SLOW_SAMPLES if slow and once > SLOW_MS else SAMPLES
    if count < SAMPLES:
        note = (note + "; " if note else "") + f"{count} samples (one op takes over 1 s)"
    samples, other_pct, contended, attempts = [], None, True, 0
    while attempts < ATTEMPTS:
        attempts += 1
        busy0, own0, w0 = machine_busy_ticks(), own_ticks(), time.perf_counter()
        samples = []
        for _ in range(count):
            t0 = time.perf_counter()
            run(reps)
            samples.append((time.perf_counter() - t0) * 1e3 / reps)
        wall_ticks = (time.perf_counter() - w0) * TICKS
        busy1, own1 = machine_busy_ticks(), own_ticks()
        if None in (busy0, own0, busy1, own1):
            other_pct = None
            break
        other = max(0, busy1 - busy0 - (own1 - own0))
        other_pct = 100.0 * other / wall_ticks
        contended = other > OTHER_LIMIT * wall_ticks + SLACK_TICKS
        if not contended:
            break
        log(f"  {name}: other processes used {other_pct:.0f}% of a core (attempt {attempts})")
        if attempts < ATTEMPTS:
            time.sleep(1)
    out = {
        "type": "case",
        "case": name,
        "ms": sorted(samples)[len(samples) // 2],
        "reps": reps,
        "samples": samples,
        "attempts": attempts,
        "otherCorePct": other_pct,
        "contended": contended,
    }
    if note:
        out["note"] = note
    return out


def runner(op):
    def run(reps):
        for _ in range(reps):
            op()

    return run


def normal(shape):
    return np.random.default_rng().standard_normal(shape, dtype=np.float32)


def pool_out(h):
    return (h - 3) // 2 + 1


def max_pool_3x3_s2(x):
    """Max of the 9 shifted stride-2 views (no NumPy pooling op): one pass per window tap."""
    oh, ow = pool_out(x.shape[2]), pool_out(x.shape[3])
    taps = [x[:, :, i : i + 2 * oh - 1 : 2, j : j + 2 * ow - 1 : 2] for i in range(3) for j in range(3)]
    out = np.maximum(taps[0], taps[1])
    for t in taps[2:]:
        np.maximum(out, t, out=out)
    return out


# Expressions are written so that no operator has a temporary of 256 KiB or more on its left:
# NumPy then tries to reuse that temporary in place ("temporary elision"), and the check that it
# may (glibc's backtrace()) cost 1 to 16 ms per operator on the 2-core test machine (x * 2 + 1 of
# 1 Mi float32: 16 ms, against 0.3 ms as y = x * 2; y += 1). In-place steps are what a NumPy
# user writes for speed anyway, so NumPy's figures are its fast ones.


def relu_chain(x):
    y = x * 2
    y += 1
    return np.maximum(y, 0, out=y)


def layer_norm(x, eps=1e-5):
    mean = x.mean(axis=1, keepdims=True)
    var = x.var(axis=1, keepdims=True)
    y = x - mean
    y /= np.sqrt(var + eps)
    return y


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    e /= e.sum(axis=1, keepdims=True)
    return e


def cases(sz):
    """name -> (setup returning the op, note)."""
    n = sz["n"]

    def unary(shape, f):
        def setup():
            x = normal(shape)
            return lambda: f(x)

        return setup

    def binary(shape, f):
        def setup():
            a, b = normal(shape), normal(shape)
            return lambda: f(a, b)

        return setup

    def copy_bw():
        src = normal(sz["copyBytes"] // 4)
        dst = np.empty_like(src)
        return lambda: np.copyto(dst, src)

    ms, ml = sz["matmulSmall"], sz["matmulLarge"]
    return {
        "exp": (unary([n], np.exp), None),
        "relu_chain": (unary([n], relu_chain), "y = x * 2; y += 1; np.maximum(y, 0, out=y)"),
        "softmax": (unary(sz["softmax"], softmax), "e = exp(x - max); e /= sum(e)"),
        "maxpool": (unary(sz["pool"], max_pool_3x3_s2), "max of the 9 strided views of NCHW"),
        "maxpool_nchw": (unary(sz["pool"], max_pool_3x3_s2), "max of the 9 strided views"),
        "max_rows": (unary(sz["maxRows"], lambda x: x.max(axis=1)), None),
        "sum": (unary([n], np.sum), None),
        "matmul_1024": (binary([ms, ms], np.matmul), None),
        "matmul_2048": (binary([ml, ml], np.matmul), None),
        "add": (binary([n], np.add), None),
        "copy": (unary([n], np.copy), "x.copy()"),
        "cumsum": (unary([n], np.cumsum), None),
        "layernorm": (unary(sz["layerNorm"], layer_norm), "y = x - mean; y /= sqrt(var + eps)"),
        "transpose": (unary(sz["transpose"], lambda x: np.ascontiguousarray(x.T)), "np.ascontiguousarray(x.T)"),
        "copy_bw": (copy_bw, "np.copyto"),
    }


def main():
    args = sys.argv[1:]
    sz = json.loads(args[args.index("--sizes") + 1])
    only = set(args[args.index("--only") + 1].split(",")) if "--only" in args else set()
    blas = np.show_config(mode="dicts").get("Build Dependencies", {}).get("blas", {})
    threads = os.environ.get("OPENBLAS_NUM_THREADS", "default")
    build = f"{blas.get('name', '?')} {blas.get('version', '')}, OPENBLAS_NUM_THREADS={threads}"
    log(f"[numpy] {np.__version__}, {build}")
    emit({"type": "meta", "lib": "numpy", "version": f"NumPy {np.__version__}", "build": build})
    for name, (setup, note) in cases(sz).items():
        if only and name not in only and name != "copy_bw":
            continue
        try:
            emit(time_case(name, runner(setup()), note))
        except Exception as e:  # one failed case must not stop the rest
            log(f"  {name}: {e!r}")
            emit({"type": "case", "case": name, "ms": None, "reps": 0, "samples": [], "attempts": 0,
                  "otherCorePct": None, "contended": False, "note": f"failed: {e!r}"})
    emit({"type": "done"})


if __name__ == "__main__":
    main()
