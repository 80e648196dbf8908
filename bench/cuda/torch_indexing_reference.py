"""PyTorch's CUDA indexing, scatter and segment kernels on the sizes issue 23 quotes, timed as
torch_reference.py times (CUDA events around 100 calls issued back to back, divided by 100,
median of 30 such groups: the method closest to gyre's GPU timestamps around one compute pass).
Indices are int64 (PyTorch's index dtype); inputs are generated as gyre's benchmark generates them.
Run on the GPU host: python3 bench/cuda/torch_indexing_reference.py"""
import torch

from torch_reference import CALLS, median_us

Mi = 1 << 20
g = torch.Generator(device="cuda").manual_seed(1)
x16 = torch.rand(16 * Mi, device="cuda", generator=g) * 4 - 2
square = torch.rand((4096, 4096), device="cuda", generator=g)
order = torch.argsort(square, dim=1)
table = torch.rand((1_000_000, 256), device="cuda", generator=g)
rows = torch.randint(0, 1_000_000, (65536,), device="cuda", generator=g)
bins1m = torch.randint(0, Mi, (16 * Mi,), device="cuda", generator=g)
sorted_ids = torch.sort(torch.randint(0, 65536, (16 * Mi,), device="cuda", generator=g)).values
small = torch.randint(0, 1024, (16 * Mi,), device="cuda", generator=g)
mask = x16 > 0
row_ids = torch.sort(torch.randint(0, 4096, (16 * Mi // 64,), device="cuda", generator=g)).values
cases = [
    ("take_along_dim [4096,4096]", lambda: torch.take_along_dim(square, order, dim=1)),
    ("index_select 65536 rows of [1000000,256]", lambda: torch.index_select(table, 0, rows)),
    ("scatter_add 16Mi into 1Mi bins", lambda: torch.zeros(Mi, device="cuda").scatter_add_(0, bins1m, x16)),
    ("masked_select 16Mi half", lambda: torch.masked_select(x16, mask)),
    ("nonzero 16Mi half", lambda: torch.nonzero(mask)),
    ("index_add 16Mi sorted ids into 65536", lambda: torch.zeros(65536, device="cuda").index_add_(0, sorted_ids, x16)),
    ("bincount 16Mi into 1024 bins", lambda: torch.bincount(small, minlength=1024)),
    ("index_add [262144,64] sorted ids into 4096", lambda: torch.zeros((4096, 64), device="cuda").index_add_(0, row_ids, x16.view(-1, 64))),
    ("copy 16Mi f32", lambda: x16.clone()),
]
print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
print("| op | back to back us |")
print("|---|---:|")
for name, op in cases:
    print(f"| {name} | {median_us(op, CALLS):.1f} |")
