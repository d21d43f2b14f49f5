"""Real architectures against PyTorch: the architecture files of the real-model test suite
(tests/realmodels/archs), each built at its real widths by both engines from the same source
(three import lines changed), weights copied, frozen, float32, both on 2 threads.

    python benchmarks/models.py [--models resnet18,unet_transpose] [--repeats 5] [--no-memory]

Per model, the ratio ours / PyTorch (lower is better) of the medians of alternating runs, for:
an attribution map (forward + input gradient of a one-hot class seed, or of the all-ones seed
for a dense output) at batch 1 and batch 16; on dense models, 64 one-hot pixel seeds (ours: one
batched backward pass; PyTorch: its loop of autograd.grad(..., retain_graph=True)), with, in
parentheses, the ratio the forward pass and 64 full input VJPs would reach with every product at
the GEMM rate below (what no engine beats without cropping the seeds' gradients); and the peak
memory (max RSS) of a fresh process that builds the model and computes one map. Also printed:
the convolutions' floating-point work per map divided by our map time (GFLOP/s; the time
includes everything else the map does) against the GEMM rate NumPy's BLAS reaches in this run.
"""
import argparse
import ast
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "realmodels"))

import porting  # noqa: E402  (tests/realmodels/porting.py: loads an architecture file both ways)
from timing import PEAK, alternate, peak_of_process  # noqa: E402

import saliency as sl  # noqa: E402
from saliency import nn  # noqa: E402

# inputs the goals name where they differ from the file's INPUT
SIZES = {"unet_transpose": [(3, 128, 128), (3, 256, 256)], "unet_bilinear": [(3, 128, 128), (3, 256, 256)]}
PIXEL_SEEDS = 64


def cases(names):
    """(label, architecture file, input (C, H, W)) for every benchmarked configuration."""
    out = []
    for path in porting.arch_files():
        name = porting.arch_name(path)
        if names and name not in names:
            continue
        found = {"INPUT": porting.DEFAULT_INPUT}
        for node in ast.parse(porting.read_source(path)).body:
            if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "INPUT":
                found["INPUT"] = ast.literal_eval(node.value)
        shape = tuple(found["INPUT"])[-3:]
        for size in SIZES.get(name, [shape]):
            out.append((f"{name} {size[1]}x{size[2]}", path, size))
    return out


def build(path, engine):
    """The model at its real widths, float32, eval mode, weights frozen; PyTorch's and ours share
    weights (ours gets PyTorch's through the state dict)."""
    import torch

    torch.manual_seed(0)
    theirs = porting.load(path, "torch").build()
    porting.randomize_norm_stats(theirs)
    theirs.float().eval().requires_grad_(False)
    if engine == "torch":
        return theirs
    ours = porting.load(path, "saliency").build()
    porting.copy_weights(theirs, ours)
    return nn.fuse(ours.float().eval().requires_grad_(False))


def seed_for(y_shape):
    """The seed of one map: all ones for a dense output, one-hot at class 0 otherwise."""
    v = np.zeros(y_shape, np.float32)
    if len(y_shape) == 4:
        v[...] = 1.0
    else:
        v[:, 0] = 1.0
    return v


def map_ours(model, x):
    xs = sl.tensor(x, requires_grad=True)
    y = model(xs)
    return sl.autograd.grad(y, xs, sl.tensor(seed_for(y.shape)))[0].numpy()


def map_torch(model, x):
    import torch

    xt = torch.tensor(x, requires_grad=True)
    y = model(xt)
    return torch.autograd.grad(y, xt, torch.from_numpy(seed_for(tuple(y.shape))))[0].numpy()


def pixels(y_shape, k):
    """k one-hot pixel seeds spread over the output map of one image."""
    _, c, h, w = y_shape
    v = np.zeros((k,) + tuple(y_shape), np.float32)
    rows, cols = np.linspace(0, h - 1, 8).astype(int), np.linspace(0, w - 1, k // 8).astype(int)
    for i, (r, cc) in enumerate((r, cc) for r in rows for cc in cols):
        v[i, 0, 0, r, cc] = 1.0
    return v


def pixels_ours(model, x):
    xs = sl.tensor(x, requires_grad=True)
    y = model(xs)
    return sl.autograd.grad(y, xs, sl.tensor(pixels(y.shape, PIXEL_SEEDS)), batched=True)[0].numpy()


def pixels_torch(model, x):
    import torch

    xt = torch.tensor(x, requires_grad=True)
    y = model(xt)
    v = torch.from_numpy(pixels(tuple(y.shape), PIXEL_SEEDS))
    return [torch.autograd.grad(y, xt, v[i], retain_graph=True)[0] for i in range(PIXEL_SEEDS)]


def conv_flops(model, x):
    """Multiply-adds x 2 of every convolution in one forward pass of our model (a map does them
    twice: forward and input VJP)."""
    total = [0]

    def count(module, inputs, output):
        out = output.shape
        per_output = (module.in_channels // module.groups) * int(np.prod(module.kernel_size))
        if type(module).__name__ == "ConvTranspose2d":  # its work is the same products, read from its input
            inp = inputs[0].shape
            total[0] += 2 * inp[0] * inp[1] * inp[2] * inp[3] * (module.out_channels // module.groups) \
                * int(np.prod(module.kernel_size))
        else:
            total[0] += 2 * int(np.prod(out)) * per_output

    handles = [m.register_forward_hook(count) for m in model.modules()
               if type(m).__name__ in ("Conv2d", "ConvTranspose2d")]
    nn.unfuse(model)
    with sl.no_grad():
        model(sl.tensor(x))
    nn.fuse(model)
    for h in handles:
        h.remove()
    return total[0]


def gemm_rate(repeats=9):
    """GFLOP/s of a 1024x1024 float32 matrix product through NumPy's BLAS, median of runs."""
    a = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ a
        times.append(time.perf_counter() - t0)
    return 2 * 1024 ** 3 / statistics.median(times) / 1e9


ONE_MAP = {
    # a fresh process imports only its own engine: the architecture file (ported for ours), the
    # model at its real widths with its own initial weights, float32, eval, frozen, one map
    "torch": """
{peak}
import numpy as np
import torch
torch.set_num_threads(2)
ns = {{}}
exec(compile(open({path!r}).read(), {path!r}, "exec"), ns)
model = ns["build"]().float().eval().requires_grad_(False)
x = torch.tensor(np.random.default_rng(0).standard_normal((1, 3, {h}, {w})).astype(np.float32), requires_grad=True)
y = model(x)
v = torch.ones_like(y) if y.ndim == 4 else torch.zeros_like(y)
if y.ndim != 4:
    v[:, 0] = 1.0
torch.autograd.grad(y, x, v)
print(peak_mb())
""",
    "ours": """
{peak}
import numpy as np
import saliency as sl
text = open({path!r}).read()
for old, new in (("import torch\\n", "import saliency as torch\\n"),
                 ("import torch.nn as nn\\n", "import saliency.nn as nn\\n"),
                 ("import torch.nn.functional as F\\n", "import saliency.nn.functional as F\\n")):
    text = text.replace(old, new, 1)
ns = {{}}
exec(compile(text, {path!r}, "exec"), ns)
model = sl.nn.fuse(ns["build"]().float().eval().requires_grad_(False))
x = sl.tensor(np.random.default_rng(0).standard_normal((1, 3, {h}, {w})).astype(np.float32), requires_grad=True)
y = model(x)
v = np.zeros(y.shape, np.float32)
if y.ndim == 4:
    v[...] = 1.0
else:
    v[:, 0] = 1.0
sl.autograd.grad(y, x, sl.tensor(v))
print(peak_mb())
""",
}


def one_map_process(path, size, engine):
    """Max RSS (MB) of a fresh process that imports one engine, builds the model and computes one map."""
    return peak_of_process(ONE_MAP[engine].format(path=path, h=size[1], w=size[2], peak=PEAK), HERE)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help="comma-separated architecture names (default: all)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-memory", action="store_true", help="skip the fresh-process memory runs")
    parser.add_argument("--memory-only", action="store_true", help="only the fresh-process memory runs")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(2)
    names = [n for n in args.models.split(",") if n]
    peak = gemm_rate()
    print(f"float32, weights frozen, 2 threads, medians of {args.repeats} alternating runs; ratios ours / PyTorch "
          f"(torch {torch.__version__}); GEMM {peak:.0f} GFLOP/s")
    header = (f"{'model':<24} {'map b1 (ours/PyTorch ms)':>26} {'map b16':>8} {'64 pixels (dense)':>17} {'memory':>8} "
              f"{'conv GFLOP/s':>13} {'of GEMM':>8}")
    print(header)
    rows = []
    for label, path, size in cases(names):
        if args.memory_only:
            ours_mb, theirs_mb = one_map_process(path, size, "ours"), one_map_process(path, size, "torch")
            print(f"{label:<24} peak memory of one map: ours {ours_mb:.0f} MB, PyTorch {theirs_mb:.0f} MB, "
                  f"ratio {ours_mb / theirs_mb:.2f}", flush=True)
            continue
        theirs, ours = build(path, "torch"), build(path, "ours")
        x1 = np.random.default_rng(1).standard_normal((1,) + size).astype(np.float32)
        x16 = np.random.default_rng(2).standard_normal((16,) + size).astype(np.float32)
        ours_b1, theirs_b1 = alternate(lambda: map_ours(ours, x1), lambda: map_torch(theirs, x1), args.repeats)
        ours_b16, theirs_b16 = alternate(lambda: map_ours(ours, x16), lambda: map_torch(theirs, x16),
                                         max(1, args.repeats // 2))
        dense = len(ours(sl.tensor(x1)).shape) == 4
        forward_flops = conv_flops(ours, x1)
        pix = floor = None
        if dense:
            o, t = alternate(lambda: pixels_ours(ours, x1), lambda: pixels_torch(theirs, x1),
                             max(1, args.repeats // 2))
            pix = o / t
            # the forward pass and 64 full input VJPs, every product at the GEMM rate, over PyTorch's time
            floor = forward_flops * (1 + PIXEL_SEEDS) / (peak * 1e9) / t
        mem = None
        if not args.no_memory:
            mem = one_map_process(path, size, "ours") / one_map_process(path, size, "torch")
        flops = forward_flops * 2
        rate = flops / ours_b1 / 1e9
        row = (label, ours_b1 / theirs_b1, ours_b16 / theirs_b16, pix, mem, rate, rate / peak)
        rows.append(row)
        times = f"{row[1]:.2f} ({1000 * ours_b1:.1f}/{1000 * theirs_b1:.1f})"
        pixels_text = "-" if pix is None else f"{pix:.3f} ({floor:.2f})"
        print(f"{label:<24} {times:>26} {row[2]:>8.2f} {pixels_text:>17} "
              f"{'-' if mem is None else f'{mem:.2f}':>8} {rate:>13.1f} {100 * row[6]:>7.0f}%", flush=True)
    if rows:
        b1 = [r[1] for r in rows]
        b16 = [r[2] for r in rows]
        print(f"median map b1 {statistics.median(b1):.2f} (worst {max(b1):.2f}), "
              f"b16 {statistics.median(b16):.2f} (worst {max(b16):.2f})")
        pix = [r[3] for r in rows if r[3] is not None]
        if pix:
            print(f"64 pixel seeds: worst {max(pix):.3f}")


if __name__ == "__main__":
    main()
