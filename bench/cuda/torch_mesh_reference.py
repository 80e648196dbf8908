"""PyTorch CUDA on issue 26's reference: the edge-length energy sum (|p_a - p_b| - L)^2 of a
40,962-vertex icosphere (122,880 edges) and its gradient by autograd, timed as
bench/cuda/torch_reference.py times (CUDA events; one call, and 100 calls back to back / 100),
beside gyre's bench/residuals.ts (GPU timestamps over 200 evaluations).
Run on the GPU host: python3 bench/cuda/torch_mesh_reference.py"""
import math

import torch

from torch_reference import median_us


def icosphere(level):
    t = (1 + math.sqrt(5)) / 2
    pts = [[-1, t, 0], [1, t, 0], [-1, -t, 0], [1, -t, 0], [0, -1, t], [0, 1, t], [0, -1, -t],
           [0, 1, -t], [t, 0, -1], [t, 0, 1], [-t, 0, -1], [-t, 0, 1]]
    pts = [[c / math.hypot(*p) for c in p] for p in pts]
    faces = [[0, 11, 5], [0, 5, 1], [0, 1, 7], [0, 7, 10], [0, 10, 11], [1, 5, 9], [5, 11, 4],
             [11, 10, 2], [10, 7, 6], [7, 1, 8], [3, 9, 4], [3, 4, 2], [3, 2, 6], [3, 6, 8],
             [3, 8, 9], [4, 9, 5], [2, 4, 11], [6, 2, 10], [8, 6, 7], [9, 8, 1]]
    for _ in range(level):
        mid = {}

        def middle(a, b):
            key = (min(a, b), max(a, b))
            if key not in mid:
                c = [(x + y) / 2 for x, y in zip(pts[a], pts[b])]
                n = math.hypot(*c)
                pts.append([x / n for x in c])
                mid[key] = len(pts) - 1
            return mid[key]

        nxt = []
        for a, b, c in faces:
            ab, bc, ca = middle(a, b), middle(b, c), middle(c, a)
            nxt += [[a, ab, ca], [b, bc, ab], [c, ca, bc], [ab, bc, ca]]
        faces = nxt
    edges = sorted({(min(p, q), max(p, q)) for a, b, c in faces for p, q in ((a, b), (b, c), (c, a))})
    return pts, edges


if __name__ == "__main__":
    pts, edges = icosphere(6)
    p = torch.tensor(pts, device="cuda", dtype=torch.float32)
    e = torch.tensor(edges, device="cuda", dtype=torch.int64)
    target = (p[e[:, 0]] - p[e[:, 1]]).norm(dim=1).mean().item()
    x = (p + 0.01 * torch.randn_like(p)).requires_grad_(True)

    def energy_and_gradient():
        x.grad = None
        d = x[e[:, 0]] - x[e[:, 1]]
        energy = ((d.norm(dim=1) - target) ** 2).sum()
        energy.backward()

    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"icosphere: {len(pts)} vertices, {len(edges)} edges")
    print("| work | one call us | back to back us |")
    print("|---|---:|---:|")
    print(f"| edge energy + gradient (autograd) | {median_us(energy_and_gradient):.1f} | "
          f"{median_us(energy_and_gradient, 100):.1f} |")
