"""PyTorch's CUDA sorting and selection on the sizes issue 22 quotes, timed as
torch_reference.py times (CUDA events around 100 calls issued back to back, divided by 100,
median of 30 such groups: the method closest to gyre's GPU timestamps around one compute pass).
Run on the GPU host: python3 bench/cuda/torch_sort_reference.py"""
import torch

from torch_reference import CALLS, median_us

cases = [
    ("sort with indices", (1 << 24,), lambda x: torch.sort(x)),
    ("sort with indices", (1 << 26,), lambda x: torch.sort(x)),
    ("median", (1 << 24,), lambda x: torch.median(x)),
    ("topk k=1024", (8, 65536), lambda x: torch.topk(x, 1024)),
    ("topk k=32", (1024, 4096), lambda x: torch.topk(x, 32)),
    ("topk k=100", (1, 1 << 24), lambda x: torch.topk(x, 100)),
    ("sort rows", (4096, 4096), lambda x: torch.sort(x, dim=1)),
    ("quantile 0.9 rows", (4096, 4096), lambda x: torch.quantile(x, 0.9, dim=1)),
]
print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
print("| op | shape | back to back us |")
print("|---|---|---:|")
for name, shape, op in cases:
    x = torch.rand(shape, device="cuda") * 4 - 2
    print(f"| {name} | {list(shape)} | {median_us(lambda: op(x), CALLS):.1f} |")
