"""Depthwise convolutions: the channels-last kernels against the plane kernels over a grid of
layers, and which one the cost model in `saliency.kernels.depthwise` picks.

    python benchmarks/depthwise.py [--repeats 7]

Per depthwise layer (32 to 1152 channels, planes of 4x4 to 112x112, 3x3 and 5x5 kernels at
strides 1 and 2, one image or 16), float32, both threads: the forward and the input VJP
through `saliency.kernels`, once with the channels-last kernels forced and once with the plane
kernels forced (for 3x3 at stride 1, the register-tiled 3x3 kernel), medians in ms. "pick" is
what the dispatch chooses; "right" says whether it is the faster of the two (or within 10%).
"""
import argparse
import numpy as np

from saliency.kernels import conv2d as K
from saliency.kernels import depthwise

from timing import pick_is_right, replaced, settled_median_ms

CHANNELS = [32, 96, 144, 256, 480, 672, 1152]
SIZES = [4, 8, 16, 32, 56, 112]
KERNELS = [(3, 1), (3, 2), (5, 1), (5, 2)]
LIMIT = 16 * 144 * 56 * 56  # images * C * H * W: the largest layer run


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    pays = depthwise.channels_last_pays
    print("| C | size | kernel, stride | images | channels-last ms | planes ms | pick | right |")
    print("| ---: | ---: | --- | ---: | ---: | ---: | --- | --- |")
    right = total = 0
    for C in CHANNELS:
        for H in SIZES:
            for k, s in KERNELS:
                for N in (1, 16):
                    if N * C * H * H > LIMIT or H < k - 1:
                        continue
                    x = rng.standard_normal((N, C, H, H)).astype(np.float32)
                    w = rng.standard_normal((C, 1, k, k)).astype(np.float32)
                    g = rng.standard_normal(K.conv2d_forward(x, w, None, s, k // 2, 1, C).shape).astype(np.float32)
                    times = []
                    for forced in (True, False):
                        with replaced(depthwise, "channels_last_pays", lambda *a, forced=forced: forced):
                            forward = settled_median_ms(lambda: K.conv2d_forward(x, w, None, s, k // 2, 1, C),
                                                        args.repeats)
                            vjp = settled_median_ms(lambda: K.conv2d_grad_input(g, w, x.shape, s, k // 2, 1, C),
                                                    args.repeats)
                            times.append(forward + vjp)
                    last, planes = times
                    pick = pays(C, 1, (H, H), g.shape[2:], k * k, depthwise.register_tiled(k, k, (s, s)))
                    ok = pick_is_right(pick, last, planes)
                    right += ok
                    total += 1
                    print(f"| {C} | {H}x{H} | {k}x{k}, {s} | {N} | {last:.3f} | {planes:.3f} | "
                          f"{'channels-last' if pick else 'planes'} | {'yes' if ok else 'no'} |", flush=True)
    print(f"\nThe pick is the faster (or within 10% of it) on {right} of {total} layers.")


if __name__ == "__main__":
    main()
