"""One image's conv calls split over two threads (by rows, channels or phase rows) against unsplit.

    python benchmarks/image_split.py [--size 128 256] [--repeats 20]

The layers of the depth reference model at the given input sizes, batch 1, forward and input VJP
as the model runs them (stride-2 encoder, RGB first layer, fused upsample + conv decoder). Each
call is timed with `saliency.kernels.threads.SPLIT_IMAGE_ELEMENTS` and `SPLIT_FLOPS` at 1 and 0
(always split) and out of reach (never split), alternating; printed: medians in ms and split /
unsplit. The package splits a direct kernel's call when its input or output has at least
SPLIT_IMAGE_ELEMENTS elements, and a call made of matrix products when it does SPLIT_FLOPS.
Run as `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python ...` on machines that set those.
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


def calls(size, rng):
    """(label, call) for the depth model's layers on a size x size input."""
    def arr(*shape):
        return rng.random(shape, dtype=np.float32)

    s, h, q = size, size // 2, size // 4
    return [
        (f"Conv2d(3,16) @{s} forward", lambda x=arr(1, 3, s, s), w=arr(16, 3, 3, 3):
            kernels.conv2d_forward(x, w, None, 1, 1)),
        (f"Conv2d(3,16) @{s} input VJP", lambda g=arr(1, 16, s, s), w=arr(16, 3, 3, 3):
            kernels.conv2d_grad_input(g, w, (1, 3, s, s), 1, 1)),
        (f"Conv2d(16,32,s=2) @{s} forward", lambda x=arr(1, 16, s, s), w=arr(32, 16, 3, 3):
            kernels.conv2d_forward(x, w, None, 2, 1)),
        (f"Conv2d(16,32,s=2) @{s} input VJP", lambda g=arr(1, 32, h, h), w=arr(32, 16, 3, 3):
            kernels.conv2d_grad_input(g, w, (1, 16, s, s), 2, 1)),
        (f"Conv2d(32,64,s=2) @{h} forward", lambda x=arr(1, 32, h, h), w=arr(64, 32, 3, 3):
            kernels.conv2d_forward(x, w, None, 2, 1)),
        (f"Up+Conv2d(64,32) @{q} forward", lambda x=arr(1, 64, q, q), w=arr(32, 64, 3, 3):
            kernels.upsample_conv2d_forward(x, w, None, 2)),
        (f"Up+Conv2d(32,16) @{h} forward", lambda x=arr(1, 32, h, h), w=arr(16, 32, 3, 3):
            kernels.upsample_conv2d_forward(x, w, None, 2)),
        (f"Up+Conv2d(32,16) @{h} input VJP", lambda g=arr(1, 16, s, s), w=arr(16, 32, 3, 3):
            kernels.upsample_conv2d_grad_input(g, w, (1, 32, h, h), 2)),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, nargs="+", default=[128, 256])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    default = threads.SPLIT_IMAGE_ELEMENTS, threads.SPLIT_FLOPS
    print(f"{'call':34s} {'split ms':>9s} {'whole ms':>9s} {'ratio':>6s}")
    for size in args.size:
        for label, call in calls(size, rng):
            times = {(1, 0.0): [], (1 << 62, float("inf")): []}  # (elements, flops): always, never
            for at in times:  # warm-up, buffers of both paths allocated once
                threads.SPLIT_IMAGE_ELEMENTS, threads.SPLIT_FLOPS = at
                call()
            for _ in range(5):
                for at, t in times.items():
                    threads.SPLIT_IMAGE_ELEMENTS, threads.SPLIT_FLOPS = at
                    t.append(median_ms(call, args.repeats))
            split, whole = (statistics.median(t) for t in times.values())
            print(f"{label:34s} {split:9.3f} {whole:9.3f} {split / whole:6.2f}")
    threads.SPLIT_IMAGE_ELEMENTS, threads.SPLIT_FLOPS = default


if __name__ == "__main__":
    main()
