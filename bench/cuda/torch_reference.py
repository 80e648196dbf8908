"""PyTorch's CUDA kernels on the sizes issue 3 sets targets for, timed by CUDA events (median of
30 calls after 5 warm-ups), beside a device-to-device copy of the same bytes. Run on the GPU host:
python3 bench/cuda/torch_reference.py"""
import torch


def median_us(body):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(5):
        body()
    times = []
    for _ in range(30):
        start.record()
        body()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1000)
    times.sort()
    return (times[14] + times[15]) / 2


print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
print("| op | shape | median us | copy of same bytes us | of copy |")
print("|---|---|---:|---:|---:|")
for name, shape, op, moved in [
    ("cumsum", (1 << 24,), lambda x: torch.cumsum(x, 0), 2),
    ("cumsum", (1 << 26,), lambda x: torch.cumsum(x, 0), 2),
    ("sum", (1 << 24,), lambda x: torch.sum(x), 1),
    ("softmax", (4096, 4096), lambda x: torch.softmax(x, -1), 2),
    ("layer_norm", (4096, 4096), lambda x: torch.nn.functional.layer_norm(x, (4096,)), 2),
]:
    x = torch.randn(shape, device="cuda")
    copy_source = torch.randn(x.numel() * moved // 2, device="cuda")
    copy_target = torch.empty_like(copy_source)
    us = median_us(lambda: op(x))
    copy = median_us(lambda: copy_target.copy_(copy_source))
    print(f"| {name} | {list(shape)} | {us:.1f} | {copy:.1f} | {100 * copy / us:.0f}% |")
