"""Time of each attribution method on the zoo's depth model (and the shapes classifier), one image.

    python benchmarks/methods.py [--repeats 7]

Prints the median wall time of each method, and its ratio to one plain gradient map measured
in the same run (the reference: a forward and one backward pass). Seeds: `ones` and a one-hot
pixel for the depth model, the predicted class for the classifier.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import saliency.models as zoo  # noqa: E402
from saliency.models import data  # noqa: E402
from timing import median_ms  # noqa: E402

from saliency import attribution as A  # noqa: E402
from saliency.attribution import seeds  # noqa: E402


def cases(model, x, dense):
    seed = seeds.pixel(64, 64) if dense else None
    layer = model.dec2.conv if dense else model.features.block4.conv
    return [
        ("gradient", lambda: A.gradient(model, x, seed)),
        ("gradient, seed ones" if dense else "gradient, 8 classes batched",
         lambda: A.gradient(model, x, seeds.ones() if dense else seeds.classes(range(8)))),
        ("64 pixel seeds, one batched pass" if dense else "input_x_gradient",
         (lambda: A.gradient(model, x, seeds.pixels([(r, c) for r in range(8, 128, 16) for c in range(8, 128, 16)])))
         if dense else (lambda: A.input_x_gradient(model, x, seed))),
        ("guided_backprop", lambda: A.guided_backprop(model, x, seed)),
        ("smoothgrad n=25", lambda: A.smoothgrad(model, x, seed, n=25)),
        ("integrated_gradients steps=64", lambda: A.integrated_gradients(model, x, seed, steps=64)),
        ("gradcam", lambda: A.gradcam(model, x, seed, layer=layer)),
        ("occlusion window 16 stride 8" if dense else "occlusion window 8 stride 4",
         lambda: A.occlusion(model, x, seed, window=16 if dense else 8, stride=8 if dense else 4)),
        ("receptive_field" if dense else "deletion_insertion steps=32",
         (lambda: A.receptive_field(model, x, (64, 64))) if dense
         else (lambda: A.deletion_insertion(model, x, A.gradient(model, x)))),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    depth_x = data.scenes(1, seed=5)[0][0]
    shapes_x = data.shapes(1, seed=5)[0][0]
    for name, x, dense in (("depth", depth_x, True), ("shapes", shapes_x, False)):
        model = zoo.load(name)
        rows = cases(model, x, dense)
        for _, fn in rows:              # compile and warm every path once
            fn()
        print(f"\n{name} model, input {'x'.join(map(str, x.shape))}, median of {args.repeats} runs")
        ref = None
        for label, fn in rows:
            ms = median_ms(fn, args.repeats)
            ref = ms if ref is None else ref
            print(f"  {label:36s} {ms:9.1f} ms   {ms / ref:6.1f}x gradient")
    assert np.isfinite(ref)


if __name__ == "__main__":
    main()
