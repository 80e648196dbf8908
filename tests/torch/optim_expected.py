"""PyTorch's optimizers on fixed gradients, for tests/optim_test.ts: for each configuration, the
parameter after each of 6 steps (float64 on the CPU), from p0[i] = 0.5 - 0.25 i and gradients
g_t[i] = sin(1.3 t + 0.7 i) + 0.2 (the same formulas in the test).

    python3 tests/torch/optim_expected.py tests/torch/optim_expected.json
"""
import json
import math
import sys

import torch

torch.set_default_dtype(torch.float64)
N, STEPS = 5, 6

CONFIGS = {
    "sgd": ("SGD", {"lr": 0.1}),
    "sgd momentum dampening weight decay": ("SGD", {"lr": 0.05, "momentum": 0.9, "dampening": 0.3, "weight_decay": 0.01}),
    "sgd nesterov": ("SGD", {"lr": 0.05, "momentum": 0.8, "nesterov": True}),
    "sgd maximize": ("SGD", {"lr": 0.1, "momentum": 0.5, "maximize": True}),
    "adam": ("Adam", {"lr": 0.01}),
    "adam weight decay betas": ("Adam", {"lr": 0.02, "betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 0.1}),
    "adam maximize": ("Adam", {"lr": 0.01, "maximize": True}),
    "adamw": ("AdamW", {"lr": 0.01}),
    "adamw weight decay": ("AdamW", {"lr": 0.03, "weight_decay": 0.2}),
}


def main(dst):
    out = {"torch": torch.__version__}
    for name, (cls, options) in CONFIGS.items():
        p = torch.tensor([0.5 - 0.25 * i for i in range(N)], requires_grad=True)
        opt = getattr(torch.optim, cls)([p], **options)
        trail = []
        for t in range(1, STEPS + 1):
            p.grad = torch.tensor([math.sin(1.3 * t + 0.7 * i) + 0.2 for i in range(N)])
            opt.step()
            trail.append(p.detach().tolist())
        out[name] = trail
    with open(dst, "w") as fh:
        json.dump(out, fh, indent=1)
        fh.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
