"""PyTorch's CUDA kernels on the sizes issue 3 sets targets for, beside a device-to-device copy of
the same bytes, timed two ways by CUDA events:
- one call: an event pair around each call (median of 30 after 5 warm-ups); includes the launch
  gap and the drain of that one call;
- back to back: an event pair around 100 calls issued back to back, divided by 100 (median of 30
  such groups): the per-call time with launches overlapped, the method closest to gyre's GPU
  timestamps around one compute pass.
Run on the GPU host: python3 bench/cuda/torch_reference.py"""
import torch

WARM_UPS, GROUPS, CALLS = 5, 30, 100


def median_us(body, calls=1):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(WARM_UPS):
        body()
    times = []
    for _ in range(GROUPS):
        start.record()
        for _ in range(calls):
            body()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1000 / calls)
    times.sort()
    return (times[GROUPS // 2 - 1] + times[GROUPS // 2]) / 2


if __name__ == "__main__":
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| op | shape | one call us | copy us | of copy | back to back us | copy us | of copy |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
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
        row = [name, str(list(shape))]
        for calls in (1, CALLS):
            us = median_us(lambda: op(x), calls)
            copy = median_us(lambda: copy_target.copy_(copy_source), calls)
            row += [f"{us:.1f}", f"{copy:.1f}", f"{100 * copy / us:.0f}%"]
        print("| " + " | ".join(row) + " |")
