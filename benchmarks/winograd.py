"""Winograd's F(2x2, 3x3) against the other convolution paths, over a grid of 3x3 layers, and
which one the cost model in `saliency.kernels.conv2d` picks.

    python benchmarks/winograd.py [--repeats 7] [--dtype float32]

Per 3x3 layer at stride 1 and padding 1 (input and output channels from 32 to 512, one image
of 8x8 to 64x64 or 16 images of 4x4 to 32x32): the forward and the input VJP through
`saliency.kernels`, once with the Winograd path forbidden (the path the dispatch takes
otherwise) and once forced (weight transform included), medians in ms over both threads. Each
call takes the next of several copies of the weight (64 MB of them, at most 64 copies), so that
weights come from memory as in a model, not from the caches.
"pick" is what the dispatch chooses; "right" says whether that is the faster of the two
measured (a pick within 10% of the faster counts as right). The cost model's constants
(`conv2d.GEMM_FLOPS`, `MEMORY_BYTES`, `TILE_S`, `WEIGHT_S`) come from this table.
"""
import argparse
import itertools
import numpy as np

from saliency.kernels import conv2d as K

from timing import pick_is_right, replaced, settled_median_ms

CHANNELS = [(32, 32), (64, 64), (96, 96), (128, 128), (192, 192), (256, 256), (384, 384), (512, 512),
            (64, 128), (128, 64), (128, 256), (256, 128), (256, 512), (512, 256)]
MAPS = [(1, 8), (1, 16), (1, 32), (1, 64), (16, 4), (16, 8), (16, 16), (16, 32)]
COLD_BYTES = 64 << 20
LIMIT = 512 * 512 * 16 * 16  # C * O * positions: the largest layer run (about 0.6 s a call without Winograd)


class CycledWeight:
    """Stands for the weight in the timed calls: `now()` is the next copy."""

    def __init__(self, copies):
        self.shape = copies[0].shape
        self.turn = itertools.cycle(copies)

    def now(self):
        return next(self.turn)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    args = parser.parse_args()
    dtype = np.dtype(args.dtype)
    rng = np.random.default_rng(0)
    pays = K._winograd_pays
    print("| C | O | images | size | forward: other / Winograd ms | input VJP: other / Winograd ms | pick | right |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    right = total = 0
    for C, O in CHANNELS:
        for N, H in MAPS:
            if C * O * N * H * H > LIMIT:
                continue
            x = rng.standard_normal((N, C, H, H)).astype(dtype)
            w0 = (rng.standard_normal((O, C, 3, 3)) / np.sqrt(9 * C)).astype(dtype)
            copies = [w0.copy() for _ in range(min(64, max(2, -(-COLD_BYTES // w0.nbytes))))]
            w = CycledWeight(copies)
            g = rng.standard_normal((N, O, H, H)).astype(dtype)
            row = []
            for forced in (False, True):
                with replaced(K, "_winograd_pays", lambda *a, forced=forced: forced):
                    forward = settled_median_ms(lambda: K.conv2d_forward(x, w.now(), None, 1, 1), args.repeats)
                    vjp = settled_median_ms(lambda: K.conv2d_grad_input(g, w.now(), x.shape, 1, 1), args.repeats)
                    row.append((forward, vjp))
            pick = pays(w.shape, (1, 1), (1, 1), 1, N, (H, H), dtype.itemsize)
            (fo, vo), (fw, vw) = row
            ok = pick_is_right(pick, fw + vw, fo + vo)
            right += ok
            total += 1
            print(f"| {C} | {O} | {N} | {H}x{H} | {fo:.2f} / {fw:.2f} | {vo:.2f} / {vw:.2f} | "
                  f"{'Winograd' if pick else 'other'} | {'yes' if ok else 'no'} |", flush=True)
    print(f"\nThe pick is the faster (or within 10% of it) on {right} of {total} layers.")


if __name__ == "__main__":
    main()
