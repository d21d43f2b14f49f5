"""Many one-hot pixel seeds: our cropped VJPs against PyTorch's loop of backward(retain_graph=True).

    python benchmarks/pixel_seeds.py [--repeats 21] [--seeds 64]

For K one-hot pixel seeds of a dense output, each engine computes the K input-gradient maps after
one forward pass, weights frozen in both: ours as one batched backward in which every layer's VJP
is computed on the windows where the gradients can be non-zero (saliency.autograd.patch), the same
pass with cropping switched off ("ours, full"), and PyTorch as a loop of K
`autograd.grad(y, x, v[k], retain_graph=True)` (its fastest way here). Models: the depth reference
model of `reference_models.py` and the zoo's depth U-Net (a PyTorch copy built here, weights moved
through state_dict). The engines alternate in blocks after a short pause (idle BLAS/OpenMP
workers spin for about 0.1 s and would slow the other engine), medians of --repeats runs.

Run as `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python ...` where the environment sets those.
"""
import argparse
import os
import statistics
import sys
import time
from collections import OrderedDict

import numpy as np

import saliency as sl
from saliency.autograd import patch
from saliency.models import load

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_models import build, copy_weights, random_input  # noqa: E402
from timing import median_ms  # noqa: E402

GOAL = 0.05  # ours / PyTorch's loop, 64 pixel seeds on the depth reference model


def torch_depth_net(torch, widths=(16, 24, 32, 48, 64)):
    """The zoo's DepthNet (models/architectures.py) in PyTorch, with the same state_dict keys."""
    nn = torch.nn

    def block(cin, cout, stride=1):
        return nn.Sequential(OrderedDict(conv=nn.Conv2d(cin, cout, 3, stride, 1, bias=False), bn=nn.BatchNorm2d(cout),
                                  relu=nn.ReLU()))

    def down(cin, cout):
        return nn.Sequential(OrderedDict(down=block(cin, cout, 2), conv=block(cout, cout)))

    class DepthNet(nn.Module):
        def __init__(self):
            super().__init__()
            w1, w2, w3, w4, w5 = widths
            self.enc1, self.enc2, self.enc3 = block(3, w1), down(w1, w2), down(w2, w3)
            self.enc4, self.enc5 = down(w3, w4), down(w4, w5)
            self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
            self.dec4, self.dec3 = block(w5 + w4, w4), block(w4 + w3, w3)
            self.dec2, self.dec1 = block(w3 + w2, w2), block(w2 + w1, w1)
            self.head = nn.Conv2d(w1, 1, 3, padding=1)

        def forward(self, x):
            e1 = self.enc1(x)
            e2 = self.enc2(e1)
            e3 = self.enc3(e2)
            e4 = self.enc4(e3)
            e5 = self.enc5(e4)
            d = self.dec4(torch.cat([self.up(e5), e4], 1))
            d = self.dec3(torch.cat([self.up(d), e3], 1))
            d = self.dec2(torch.cat([self.up(d), e2], 1))
            d = self.dec1(torch.cat([self.up(d), e1], 1))
            return torch.exp(self.head(d))

    return DepthNet()


def models(torch):
    """(label, our model, torch model, input array) for each model measured."""
    torch.manual_seed(0)
    ref = build("depth", torch.nn).eval()
    yield "depth reference model", copy_weights(ref, build("depth", sl.nn)).eval(), ref, random_input("depth", 1)
    zoo = load("depth")
    tzoo = torch_depth_net(torch).eval()
    tzoo.load_state_dict({k: torch.tensor(np.asarray(v)) for k, v in zoo.state_dict().items()})
    yield "zoo depth U-Net", zoo, tzoo, random_input("depth", 1)


def runners(torch, ours, tmodel, x_np, k):
    ours.requires_grad_(False)
    for p in tmodel.parameters():
        p.requires_grad_(False)
    x = sl.tensor(x_np, requires_grad=True)
    tx = torch.tensor(x_np, requires_grad=True)
    rng = np.random.default_rng(1)
    h, w = x_np.shape[2:]
    rows, cols = rng.integers(0, h, k), rng.integers(0, w, k)
    v = np.zeros((k, 1, 1, h, w), np.float32)
    v[np.arange(k), 0, 0, rows, cols] = 1.0
    tv = torch.tensor(v)

    def cropped():
        y = ours(x)
        return sl.autograd.grad(y, x, v, batched=True)[0].numpy()

    def full():
        old, patch.SPARSE_AT = patch.SPARSE_AT, -1.0
        try:
            return cropped()
        finally:
            patch.SPARSE_AT = old

    def torch_loop():
        y = tmodel(tx)
        return torch.stack([torch.autograd.grad(y, tx, tv[i], retain_graph=True)[0] for i in range(k)])

    a, b, c = cropped(), full(), torch_loop().numpy()
    assert np.abs(a - b).max() <= 1e-5 * np.abs(b).max(), "cropped and full maps differ"
    err = np.linalg.norm(a - c) / np.linalg.norm(c)
    assert err < 1e-3, f"our maps and PyTorch's differ by {err:.1e} (relative L2)"
    return {"ours, cropped": cropped, "ours, full": full, "PyTorch loop": torch_loop}


def measure(fns, repeats, block=3):
    for fn in fns.values():
        fn()
    times = {name: [] for name in fns}
    for _ in range(max(1, repeats // block)):
        for name, fn in fns.items():
            time.sleep(0.15)
            fn()
            times[name].extend(median_ms(fn, 1) for _ in range(block))
    return {name: statistics.median(t) for name, t in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--seeds", type=int, default=64)
    args = parser.parse_args()
    import torch
    torch.set_num_threads(2)
    k = args.seeds
    print(f"{k} one-hot pixel seeds, one forward pass each; medians of {args.repeats} runs (ms)")
    print(f"{'model':24s} {'ours, cropped':>14s} {'ours, full':>11s} {'PyTorch loop':>13s} {'ratio':>7s} "
          f"{'per seed':>9s}")
    for label, ours, tmodel, x in models(torch):
        t = measure(runners(torch, ours, tmodel, x, k), args.repeats)
        ratio = t["ours, cropped"] / t["PyTorch loop"]
        goal = f"  (goal <= {GOAL}: {'met' if ratio <= GOAL else 'MISSED'})" if label.startswith("depth ref") else ""
        print(f"{label:24s} {t['ours, cropped']:14.2f} {t['ours, full']:11.2f} {t['PyTorch loop']:13.2f} "
              f"{ratio:7.3f} {t['ours, cropped'] / k:9.3f}{goal}")


if __name__ == "__main__":
    main()
