"""torchvision's architectures, ours (saliency.models.load by name) against torchvision's own, at
224x224, float32, weights frozen, both on 2 threads, in one process, alternating.

    python benchmarks/vision.py [--models resnet50,vit_b_16] [--repeats 5] [--no-memory]

torchvision builds each model with its random initialisation (batch-norm statistics randomised),
saves its state dict, and ours loads that file by name: the same weights. Per model, the ratio
ours / PyTorch (lower is better) of the medians of alternating runs of a map at batch 1: the
forward pass and the input gradient of the top class's one-hot seed; for a segmenter, of the
`out` logits of one pixel (class 0) and of the semantic-segmentation seed (the class-K logits of
the pixels predicted K, K the class most pixels are given). Then the peak memory (VmHWM) of a
fresh process that loads the model and computes one map, ours / PyTorch's. Goals: median <= 1.0
and worst <= 1.5 at batch 1; memory no higher than PyTorch's.
"""
import argparse
import functools
import os
import statistics
import sys
import tempfile
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from timing import PEAK, alternate, peak_of_process  # noqa: E402

MODELS = ["resnet50", "efficientnet_b0", "mobilenet_v3_large", "convnext_tiny", "vit_b_16", "swin_t",
          "deeplabv3_mobilenet_v3_large"]
SIZE = 224


def torchvision():
    """torchvision with its compiled ops' registrations left out (they do not load against the
    CPU build of torch; the model builders do not need them)."""
    sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
    import torchvision as tv

    return tv


def build(name, folder, seed=0):
    """(ours, PyTorch's): the same random weights, float32, eval mode, frozen."""
    import torch

    from saliency import models

    tv = torchvision()
    torch.manual_seed(seed)
    kwargs = {"weights_backbone": None} if "deeplab" in name or "lraspp" in name or "fcn" in name else {}
    theirs = tv.models.get_model(name, weights=None, **kwargs)
    for m in theirs.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.running_var.uniform_(0.75, 1.25)
            m.running_mean.normal_(0, 0.1)
    path = os.path.join(folder, f"{name}.pth")
    torch.save(theirs.state_dict(), path)
    theirs = theirs.float().eval().requires_grad_(False)
    ours = models.load(name, weights=path).float().eval().requires_grad_(False)
    return ours, theirs


def seed_of(kind, y):
    """The seed v of one map for an output y (an ndarray): "class" the top class of a classifier,
    "pixel" the logit of class 0 at the centre pixel, "segment" the class-K logits of the pixels
    predicted K (K the commonest predicted class)."""
    v = np.zeros(y.shape, np.float32)
    if kind == "class":
        v[np.arange(len(y)), y.argmax(1)] = 1.0
    elif kind == "pixel":
        v[:, 0, y.shape[2] // 2, y.shape[3] // 2] = 1.0
    else:
        labels = y.argmax(1)
        k = np.bincount(labels.ravel()).argmax()
        v[:, k] = labels == k
    return v


def map_ours(model, x, kind):
    import saliency as sl

    xs = sl.tensor(x, requires_grad=True)
    y = model(xs)
    return sl.autograd.grad(y, xs, sl.tensor(seed_of(kind, y.numpy())))[0].numpy()


def map_torch(model, x, kind):
    import torch

    xt = torch.tensor(x, requires_grad=True)
    y = model(xt)
    y = y["out"] if isinstance(y, dict) else y
    return torch.autograd.grad(y, xt, torch.from_numpy(seed_of(kind, y.detach().numpy())))[0].numpy()


ONE_MAP = {
    "torch": """
{peak}
import sys, types
import numpy as np
import torch
torch.set_num_threads(2)
sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
import torchvision
kwargs = {{"weights_backbone": None}} if "deeplab" in {name!r} or "lraspp" in {name!r} or "fcn" in {name!r} else {{}}
model = torchvision.models.get_model({name!r}, weights=None, **kwargs)
model.load_state_dict(torch.load({path!r}))
model = model.float().eval().requires_grad_(False)
x = np.random.default_rng(0).standard_normal((1, 3, {size}, {size})).astype(np.float32)
x = torch.tensor(x, requires_grad=True)
y = model(x)
y = y["out"] if isinstance(y, dict) else y
v = torch.zeros_like(y)
if y.ndim == 2:
    v[:, 0] = 1.0
else:
    v[:, 0, {size} // 2, {size} // 2] = 1.0
torch.autograd.grad(y, x, v)
print(peak_mb())
""",
    "ours": """
{peak}
import numpy as np
import saliency as sl
from saliency import models
model = models.load({name!r}, weights={path!r}).float().eval().requires_grad_(False)
x = sl.tensor(np.random.default_rng(0).standard_normal((1, 3, {size}, {size})).astype(np.float32), requires_grad=True)
y = model(x)
v = np.zeros(y.shape, np.float32)
if y.ndim == 2:
    v[:, 0] = 1.0
else:
    v[:, 0, {size} // 2, {size} // 2] = 1.0
sl.autograd.grad(y, x, sl.tensor(v))
print(peak_mb())
""",
}


def one_map_process(name, path, engine):
    """Peak memory (MB) of a fresh process that imports one engine, loads the model and computes one map."""
    return peak_of_process(ONE_MAP[engine].format(name=name, path=path, size=SIZE, peak=PEAK), HERE)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated architecture names")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-memory", action="store_true", help="skip the fresh-process memory runs")
    args = parser.parse_args()
    import torch

    import saliency as sl

    torch.set_num_threads(2)
    print(f"{SIZE}x{SIZE}, float32, weights frozen, 2 threads, medians of {args.repeats} alternating runs; "
          f"ratios ours / PyTorch (torch {torch.__version__}, torchvision {torchvision().__version__})")
    print(f"{'model':<30} {'seed':<8} {'map b1 (ours/PyTorch ms)':>28} {'memory (ours/PyTorch MB)':>28}")
    ratios, memory = [], []
    with tempfile.TemporaryDirectory() as folder:
        for name in [n for n in args.models.split(",") if n]:
            ours, theirs = build(name, folder)
            x = np.random.default_rng(1).standard_normal((1, 3, SIZE, SIZE)).astype(np.float32)
            dense = ours(sl.tensor(x)).ndim == 4
            for kind in ("pixel", "segment") if dense else ("class",):
                o, t = alternate(functools.partial(map_ours, ours, x, kind),
                                 functools.partial(map_torch, theirs, x, kind), args.repeats)
                ratios.append(o / t)
                mem = ""
                if not args.no_memory and kind in ("class", "pixel"):
                    path = os.path.join(folder, f"{name}.pth")
                    om, tm = one_map_process(name, path, "ours"), one_map_process(name, path, "torch")
                    memory.append(om / tm)
                    mem = f"{om / tm:.2f} ({om:.0f}/{tm:.0f})"
                print(f"{name:<30} {kind:<8} {f'{o / t:.2f} ({1000 * o:.0f}/{1000 * t:.0f})':>28} {mem:>28}",
                      flush=True)
            del ours, theirs
    if ratios:
        print(f"map b1: median {statistics.median(ratios):.2f}, worst {max(ratios):.2f} (goals: median <= 1.0, "
              f"worst <= 1.5)" + (f"; memory: worst {max(memory):.2f} (goal <= 1.0)" if memory else ""))


if __name__ == "__main__":
    main()
