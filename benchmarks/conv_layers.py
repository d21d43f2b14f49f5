"""Convolution layers of the real architectures, our kernels against PyTorch's, one layer at a time.

    python benchmarks/conv_layers.py [--batch 16] [--repeats 15]

Per layer shape (ResNet-18's 3x3 and 1x1 layers at 32x32 input, MobileNet depthwise layers, an
EfficientNet 5x5 depthwise layer, a pointwise projection), float32, both engines on 2 threads:
the forward `conv2d` and the input VJP, ours through `saliency.kernels` and PyTorch's through
`F.conv2d` and `autograd.grad` (its VJP time is the forward-and-grad time minus its forward).
All of our runs first, then all of PyTorch's (each engine's idle threads spin after its work and
would slow the other), each after a 0.15 s pause and two untimed calls. Printed: medians in ms,
the ratios ours / PyTorch, and the GFLOP/s of the forward (2 x multiply-adds of the convolution
as written, padding taps included).
"""
import argparse
import statistics
import time

import numpy as np

from saliency.kernels import conv2d as K

# (C, O, H, kernel, stride, groups): ResNet-18 at 32x32, MobileNet/EfficientNet depthwise, pointwise
LAYERS = [(3, 64, 32, 3, 1, 1), (64, 64, 32, 3, 1, 1), (64, 128, 32, 3, 2, 1), (128, 128, 16, 3, 1, 1),
          (128, 256, 16, 3, 2, 1), (256, 256, 8, 3, 1, 1), (256, 512, 8, 3, 2, 1), (512, 512, 4, 3, 1, 1),
          (64, 128, 32, 1, 2, 1), (256, 512, 8, 1, 2, 1), (32, 32, 112, 3, 1, 32), (96, 96, 56, 3, 2, 96),
          (672, 672, 8, 5, 1, 672), (144, 24, 32, 1, 1, 1)]


def median_ms(f, repeats):
    time.sleep(0.15)
    f()
    f()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(2)
    rng = np.random.default_rng(0)
    cases = []
    for C, O, H, k, s, groups in LAYERS:
        x = rng.standard_normal((args.batch, C, H, H)).astype(np.float32)
        w = rng.standard_normal((O, C // groups, k, k)).astype(np.float32)
        y = K.conv2d_forward(x, w, None, s, k // 2, 1, groups)
        g = rng.standard_normal(y.shape).astype(np.float32)
        cases.append(((C, O, H, k, s, groups), x, w, g, 2.0 * y.size * (C // groups) * k * k))
    ours = [(median_ms(lambda: K.conv2d_forward(x, w, None, a[4], a[3] // 2, 1, a[5]), args.repeats),
             median_ms(lambda: K.conv2d_grad_input(g, w, x.shape, a[4], a[3] // 2, 1, a[5]), args.repeats))
            for a, x, w, g, _ in cases]
    theirs = []
    for a, x, w, g, _ in cases:
        xt, wt, gt = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(g)
        xr = xt.clone().requires_grad_(True)

        def both():
            torch.autograd.grad(torch.nn.functional.conv2d(xr, wt, None, a[4], a[3] // 2, 1, a[5]), xr, gt)

        forward = median_ms(lambda: torch.nn.functional.conv2d(xt, wt, None, a[4], a[3] // 2, 1, a[5]), args.repeats)
        theirs.append((forward, max(median_ms(both, args.repeats) - forward, 1e-3)))
    print(f"batch {args.batch}, float32, 2 threads, medians of {args.repeats}; ms, ratio ours / PyTorch")
    print(f"{'layer':<34} {'forward':>20} {'ratio':>6} {'input VJP':>20} {'ratio':>6} {'GFLOP/s ours/PyTorch':>22}")
    for (a, *_, flops), (of, ov), (tf, tv) in zip(cases, ours, theirs):
        label = f"Conv2d({a[0]},{a[1]},{a[3]},s={a[4]}{f',g={a[5]}' if a[5] > 1 else ''}) @{a[2]}x{a[2]}"
        print(f"{label:<34} {of:9.3f} / {tf:8.3f} {of / tf:6.2f} {ov:9.3f} / {tv:8.3f} {ov / tv:6.2f} "
              f"{flops / of / 1e6:10.1f} / {flops / tf / 1e6:8.1f}")


if __name__ == "__main__":
    main()
