"""1x1 convolutions over a batch: one product per image (what `saliency.kernels` runs) against one
product over the whole batch between two transposes.

    python benchmarks/pointwise.py [--repeats 50]

NCHW activations hold each image's channels as a (C, H*W) matrix, so a 1x1 layer is one product
W (O, C) @ x_n (C, H*W) per image, written straight into the output (`im2col.conv2d_pointwise`,
its products in parts on the pool). The alternative makes the batch one product,
W @ x (C, N*H*W), at the price of copying x to channels-major and the result back. Layers: the
expansions and projections of MobileNetV2 and EfficientNet at 32x32 and 224x224 inputs, float32,
both threads; medians in microseconds, GFLOP/s, and the ratio single / per image (below 1: the
single product would pay).
"""
import argparse

import numpy as np

from saliency.kernels import im2col, threads

from timing import settled_median_ms

# (images, in channels, out channels, plane side)
LAYERS = [(1, 96, 576, 8), (16, 96, 576, 8), (16, 24, 144, 16), (16, 32, 192, 16), (16, 160, 960, 4),
          (16, 320, 1280, 4), (1, 32, 192, 56), (16, 144, 24, 28)]


def single_product(x, w):
    """The 1x1 convolution as one product over the batch: x to (C, N*L), W @ it, back to NCHW."""
    N, C, H, W = x.shape
    O = w.shape[0]
    xt = np.ascontiguousarray(x.reshape(N, C, H * W).transpose(1, 0, 2)).reshape(C, N * H * W)
    r = threads.matmul(np.ascontiguousarray(w.reshape(O, C)), xt)
    return np.ascontiguousarray(r.reshape(O, N, H * W).transpose(1, 0, 2)).reshape(N, O, H, W)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print("| images | C -> O | plane | per image us | GFLOP/s | single product us | GFLOP/s | ratio |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    ratios = []
    for N, C, O, H in LAYERS:
        x = rng.standard_normal((N, C, H, H)).astype(np.float32)
        w = rng.standard_normal((O, C, 1, 1)).astype(np.float32)
        b = np.zeros(O, np.float32)
        per_image = im2col.conv2d_pointwise(x, w, b, (N, O, H, H), (1, 1), 1)
        np.testing.assert_allclose(single_product(x, w), per_image, rtol=1e-4, atol=1e-4)
        a = settled_median_ms(lambda: im2col.conv2d_pointwise(x, w, b, (N, O, H, H), (1, 1), 1), args.repeats) * 1e3
        s = settled_median_ms(lambda: single_product(x, w), args.repeats) * 1e3
        flops = 2.0 * N * C * O * H * H
        ratios.append(s / a)
        print(f"| {N} | {C} -> {O} | {H}x{H} | {a:.0f} | {flops / a / 1e3:.0f} | {s:.0f} | {flops / s / 1e3:.0f} "
              f"| {s / a:.2f} |")
    print(f"median ratio single / per image: {np.median(ratios):.2f} (min {min(ratios):.2f})")


if __name__ == "__main__":
    main()
