"""Depthwise convolutions: the channels-last kernels against the plane kernels over a grid of
layers, from either memory format, and which one the cost model in `saliency.kernels.depthwise`
picks.

    python benchmarks/depthwise.py [--repeats 7]

Per depthwise layer (32 to 1152 channels, planes of 4x4 to 112x112, 3x3 and 5x5 kernels at
strides 1 and 2, one image or 16), float32, both threads, the array given contiguous (NCHW) or
channels-last: the forward and the input VJP through `saliency.kernels`, each once with the
channels-last kernels forced and once with the plane kernels forced (for 3x3 at stride 1, the
register-tiled 3x3 kernel), medians in ms, each with the copies its path makes (the channels-last
result is returned as it is). "pick" is what the dispatch chooses for that direction and format;
"right" says whether it is the faster of the two (or within 10%).
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


def channels_last(a):
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    pays = depthwise.channels_last_pays
    print("| C | size | kernel, stride | images | given | forward ms: channels-last / planes | pick | "
          "VJP ms: channels-last / planes | pick |")
    print("| ---: | ---: | --- | ---: | --- | ---: | --- | ---: | --- |")
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
                    tiled = depthwise.register_tiled(k, k, (s, s))
                    for last in (False, True):
                        xg, gg = (channels_last(x), channels_last(g)) if last else (x, g)
                        times = {}
                        for forced in (True, False):
                            with replaced(depthwise, "channels_last_pays", lambda *a, forced=forced, **kw: forced):
                                times["forward", forced] = settled_median_ms(
                                    lambda: K.conv2d_forward(xg, w, None, s, k // 2, 1, C), args.repeats)
                                times["vjp", forced] = settled_median_ms(
                                    lambda: K.conv2d_grad_input(gg, w, x.shape, s, k // 2, 1, C), args.repeats)
                        cells = []
                        for direction in ("forward", "vjp"):
                            pick = pays(C, 1, (H, H), g.shape[2:], k * k, tiled, vjp=direction == "vjp", last=last)
                            ok = pick_is_right(pick, times[direction, True], times[direction, False])
                            right += ok
                            total += 1
                            cells.append(f"{times[direction, True]:.3f} / {times[direction, False]:.3f} | "
                                         f"{'channels-last' if pick else 'planes'}{'' if ok else ' (wrong)'}")
                        print(f"| {C} | {H}x{H} | {k}x{k}, {s} | {N} | {'channels-last' if last else 'NCHW'} | "
                              f"{' | '.join(cells)} |", flush=True)
    print(f"\nThe pick is the faster (or within 10% of it) on {right} of {total} (layer, format, direction) cases.")


if __name__ == "__main__":
    main()
