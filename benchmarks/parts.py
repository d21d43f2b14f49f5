"""Kernel calls in parts on the pool's threads against whole on the calling thread.

    python benchmarks/parts.py [--size 64 128 256] [--batch 1 16] [--repeats 20]

The layers of the depth reference model at the given input sizes and batch sizes, forward and
input VJP as the model runs them (stride-2 encoder, RGB first layer, fused upsample + conv
decoder), a ReLU and a product. Each call is timed with `saliency.kernels.threads`'s
PARALLEL_ELEMENTS and PARALLEL_FLOPS at 1 (always in parts) and out of reach (always whole),
alternating; printed: medians in ms, parts / whole, and the work that sets the package's choice
(elements or flops against the thresholds) with the choice the package makes. Run as
`env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python ...` on machines that set those.
"""
import argparse
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import median_ms  # noqa: E402

from saliency import kernels  # noqa: E402
from saliency.kernels import threads  # noqa: E402


def calls(size, batch, rng):
    """(label, call) for the depth model's layers on `batch` inputs of size x size."""
    def arr(n, *shape):  # activations: n per image
        return rng.random((n * batch,) + shape, dtype=np.float32)

    def wt(*shape):  # weights
        return rng.random(shape, dtype=np.float32)

    s, h, q = size, size // 2, size // 4
    return [
        (f"Conv2d(3,16) @{s} b{batch} forward", lambda x=arr(1, 3, s, s), w=wt(16, 3, 3, 3):
            kernels.conv2d_forward(x, w, None, 1, 1)),
        (f"Conv2d(3,16) @{s} b{batch} input VJP", lambda g=arr(1, 16, s, s), w=wt(16, 3, 3, 3):
            kernels.conv2d_grad_input(g, w, (batch, 3, s, s), 1, 1)),
        (f"Conv2d(16,32,s=2) @{s} b{batch} forward", lambda x=arr(1, 16, s, s), w=wt(32, 16, 3, 3):
            kernels.conv2d_forward(x, w, None, 2, 1)),
        (f"Conv2d(16,32,s=2) @{s} b{batch} input VJP", lambda g=arr(1, 32, h, h), w=wt(32, 16, 3, 3):
            kernels.conv2d_grad_input(g, w, (batch, 16, s, s), 2, 1)),
        (f"Conv2d(32,64,s=2) @{h} b{batch} forward", lambda x=arr(1, 32, h, h), w=wt(64, 32, 3, 3):
            kernels.conv2d_forward(x, w, None, 2, 1)),
        (f"Up+Conv2d(64,32) @{q} b{batch} forward", lambda x=arr(1, 64, q, q), w=wt(32, 64, 3, 3):
            kernels.upsample_conv2d_forward(x, w, None, 2)),
        (f"Up+Conv2d(32,16) @{h} b{batch} forward", lambda x=arr(1, 32, h, h), w=wt(16, 32, 3, 3):
            kernels.upsample_conv2d_forward(x, w, None, 2)),
        (f"Up+Conv2d(32,16) @{h} b{batch} input VJP", lambda g=arr(1, 16, s, s), w=wt(16, 32, 3, 3):
            kernels.upsample_conv2d_grad_input(g, w, (batch, 32, h, h), 2)),
    ]


def timed(call, repeats):
    """(parts ms, whole ms, whether the package's thresholds chose parts) of one call."""
    default = threads.PARALLEL_ELEMENTS, threads.PARALLEL_FLOPS
    chosen = []
    parts = threads.parts
    threads.parts = lambda *a, **k: (chosen.append(parts(*a, **k)), chosen[-1])[1]
    try:
        call()
    finally:
        threads.parts = parts
    times = {(1, 1): [], (1 << 62, float("inf")): []}  # always in parts, always whole
    for at in times:  # warm-up: buffers of both paths allocated once
        threads.PARALLEL_ELEMENTS, threads.PARALLEL_FLOPS = at
        call()
    try:
        for _ in range(5):
            for at, t in times.items():
                threads.PARALLEL_ELEMENTS, threads.PARALLEL_FLOPS = at
                t.append(median_ms(call, repeats))
    finally:
        threads.PARALLEL_ELEMENTS, threads.PARALLEL_FLOPS = default
    in_parts, whole = (statistics.median(t) for t in times.values())
    return in_parts, whole, max(chosen, default=1) > 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"{threads.get_num_threads()} threads; PARALLEL_ELEMENTS {threads.PARALLEL_ELEMENTS}, "
          f"PARALLEL_FLOPS {threads.PARALLEL_FLOPS:g}")
    print(f"{'call':42s} {'parts ms':>9s} {'whole ms':>9s} {'ratio':>6s}  package's choice")
    for batch in args.batch:
        for size in args.size:
            for label, call in calls(size, batch, rng):
                in_parts, whole, chose = timed(call, args.repeats)
                right = (in_parts <= 1.1 * whole) if chose else (whole <= 1.1 * in_parts)
                print(f"{label:42s} {in_parts:9.3f} {whole:9.3f} {in_parts / whole:6.2f}  "
                      f"{'parts' if chose else 'whole'}{'' if right else ' (the slower one)'}")


if __name__ == "__main__":
    main()
