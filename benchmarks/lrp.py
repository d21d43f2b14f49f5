"""LRP (`saliency.attribution.lrp`, composite epsilon_plus_flat) against one gradient map and against Zennit.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/lrp.py [--repeats 5] [--models shapes,depth,resnet18]

Models (rows; `--models` picks some, `--models all` takes every architecture file): the zoo's shapes
classifier (3x64x64) and depth U-Net (3x128x128, `saliency.models.load`, their shipped weights,
on an image of their own data generators), and architecture files of the real-model test suite
(tests/realmodels/archs) built as benchmarks/models.py builds them: real widths, random weights
with trained-looking batch-norm statistics, float32, eval mode, weights frozen, ours fused, on a
random input of the file's INPUT size (the first size benchmarks/models.py names for the U-Nets).

Per row, medians of `--repeats` runs of `timing.alternate` (two engines alternately in the same
run, a pause and an untimed call before each timed call):

* LRP / gradient: one LRP map (default seed: the predicted class, or all ones for a dense output)
  over one gradient map (`saliency.attribution.gradient`) of the same model, input and seed.
  Goal: at most 2.
* ours / Zennit: the same LRP map over Zennit 0.5.1's on the PyTorch model built from the same
  source with the same weights, on 2 torch threads: `Gradient(model, EpsilonPlusFlat(canonizers=
  [...]))(x, lambda y: y * onehot)`, onehot the predicted class (all ones for a dense output), the
  composite registered and removed in each call as that form does ("Z. reg ms": the median time of
  that registration and removal alone, mostly the canonizer's merged copies of the weights, which
  a composite registered once for many maps would not pay per map). Goal: at most 0.5. The
  canonizer merges every batch norm that reads a convolution's output straight into it:
  SequentialMergeBatchNorm where all such pairs are neighbours in a Sequential (the zoo's two
  models, vgg_bn, mobilenet_v2, unet_bilinear), else NamedMergeBatchNorm with the pairs found by
  tracing one forward pass (resnet18: conv1/bn1, conv2/bn2 of every block and the shortcuts'
  convolution/batch norm, ResNetCanonizer only knowing torchvision's block classes; densenet: each
  convolution and the batch norm right after it). The "canonizer" column names it per row. Zennit
  gives the residual additions written as `a + b` (resnet18), the batch norms that read a
  concatenation (densenet's pre-activations, not merged) and the functional ops (F.relu, cat, exp,
  interpolate) plain gradients, no rule of its own: its maps differ from ours there; "corr" is the
  correlation of the two maps.

Then the zoo's depth model with pixel seeds: one LRP pixel seed (`seeds.pixel(64, 64)`) over a
gradient pixel seed of the same pixel, and 64 pixel seeds on an 8x8 grid batched
(`seeds.pixels`) LRP over gradient, each goal at most 2.

A model whose LRP raises (RuleError: an op with no sound rule) prints the error in its row. The
default rows take about 2 minutes on 2 idle cores.
"""
import argparse
import os
import platform
import re
import sys
import time
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "realmodels"))

import porting  # noqa: E402  (tests/realmodels/porting.py)
import saliency.models as zoo  # noqa: E402
from models import build as build_real, cases as real_cases, gemm_rate  # noqa: E402  (benchmarks/models.py)
from saliency.models import data  # noqa: E402
from timing import alternate, settled_median_ms  # noqa: E402

from saliency import attribution as A  # noqa: E402
from saliency.attribution import seeds  # noqa: E402

ZOO = ("shapes", "depth")
DEFAULT = ZOO + ("resnet18", "vgg_bn", "mobilenet_v2", "densenet", "unet_bilinear", "efficientnet_style", "norm_net")
GOAL_GRADIENT, GOAL_ZENNIT = 2.0, 0.5
PIXEL = (64, 64)
GRID = [(r, c) for r in range(8, 128, 16) for c in range(8, 128, 16)]  # 64 pixels of the depth map


def import_zennit():
    """zennit, after letting torchvision import without its compiled ops (tests/models/vision/_torchvision.py:
    `torchvision._meta_registrations` fails against the CPU build of torch; zennit imports torchvision)."""
    sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
    import zennit
    import zennit.attribution
    import zennit.canonizers
    import zennit.composites

    return zennit


def zoo_pair(name):
    """(our zoo model, a PyTorch copy with its weights, input (1, C, H, W))."""
    from batch import torch_twin  # benchmarks/batch.py: the zoo's architecture file run by PyTorch

    ours = zoo.load(name).eval().requires_grad_(False)
    theirs = torch_twin(ours).float()
    x = (data.scenes(1, seed=5) if name == "depth" else data.shapes(1, seed=5))[0][:1].astype(np.float32)
    return ours, theirs, x


def rows(names, torch):
    """(label, our model, PyTorch model, input) per row, or (label, None, None, the exception) where the
    models cannot be built."""
    for name in names:
        if name in ZOO:
            ours, theirs, x = zoo_pair(name)
            yield f"zoo {name} {x.shape[2]}x{x.shape[3]}", ours, theirs, x
            continue
        found = real_cases([name])[:1]  # the U-Nets: only their first size
        if not found:
            yield name, None, None, ValueError(f"no architecture file or zoo model named {name!r}")
            continue
        label, path, size = found[0]
        try:
            theirs, ours = build_real(path, "torch"), build_real(path, "ours")
        except Exception as exc:  # noqa: BLE001: the row reports it
            yield label, None, None, exc
            continue
        yield label, ours, theirs, np.random.default_rng(1).standard_normal((1,) + size).astype(np.float32)


def batch_norm_pairs(torch, model, x):
    """[(convolution or linear name, batch norm name)] where the batch norm reads that layer's output
    tensor itself (what can be merged), found by one traced forward pass; and whether every pair is
    two neighbours of a Sequential."""
    names = {m: n for n, m in model.named_modules()}
    produced, pairs, handles = {}, [], []

    def out_hook(module, inputs, output):
        produced[id(output)] = (names[module], output)

    def bn_hook(module, inputs):
        hit = produced.get(id(inputs[0]))
        if hit is not None and hit[1] is inputs[0]:
            pairs.append((hit[0], names[module]))

    for m in model.modules():
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
            handles.append(m.register_forward_hook(out_hook))
        elif isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            handles.append(m.register_forward_pre_hook(bn_hook))
    with torch.no_grad():
        model(torch.from_numpy(x))
    for h in handles:
        h.remove()
    modules = dict(model.named_modules())

    def neighbours(a, b):
        pa, _, ia = a.rpartition(".")
        pb, _, ib = b.rpartition(".")
        parent = modules[pa]
        if pa != pb or not isinstance(parent, torch.nn.Sequential):
            return False
        keys = list(parent._modules)
        return keys.index(ib) == keys.index(ia) + 1

    return pairs, all(neighbours(a, b) for a, b in pairs)


def zennit_runner(zennit, torch, model, x):
    """(one Zennit EpsilonPlusFlat map of x seeded y * onehot, registering the composite and removing it
    as that call does; the registration and removal alone; the canonizer's name)."""
    pairs, sequential = batch_norm_pairs(torch, model, x)
    if sequential:
        canonizer, label = zennit.canonizers.SequentialMergeBatchNorm(), "SequentialMergeBatchNorm"
    else:
        canonizer = zennit.canonizers.NamedMergeBatchNorm([((a,), b) for a, b in pairs])
        label = f"NamedMergeBatchNorm ({len(pairs)} pairs)"
    composite = zennit.composites.EpsilonPlusFlat(canonizers=[canonizer])
    xt = torch.from_numpy(x)
    with torch.no_grad():
        y = model(xt)
    if y.ndim == 2:
        onehot = torch.nn.functional.one_hot(y.argmax(1), y.shape[1]).to(y.dtype)
    else:
        onehot = torch.ones_like(y)

    def run():
        return zennit.attribution.Gradient(model, composite)(xt, lambda out: out * onehot)[1].numpy()

    def register():
        composite.register(model)
        composite.remove()

    return run, register, label


def corr(a, b):
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    if a.std() == 0 or b.std() == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def ratio_text(a, b):
    return f"{a / b:.2f} ({1000 * a:.1f}/{1000 * b:.1f})"


def machine_line(torch, repeats):
    """The machine and the versions, as the other benchmarks print them (CPU, cores, libraries, the
    OpenBLAS override, NumPy's float32 GEMM rate in this run)."""
    from importlib.metadata import version

    cpu, flags = platform.processor() or platform.machine(), ""
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
        cpu = re.search(r"^model name\s*:\s*(.*)$", info, re.M).group(1).strip()
        flags = re.search(r"^flags\s*:(.*)$", info, re.M).group(1).split()
    except (OSError, AttributeError):
        pass
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return (f"{cpu} ({isa}), {os.cpu_count()} cores; numpy {np.__version__}, torch {torch.__version__} on "
            f"{torch.get_num_threads()} threads, zennit {version('zennit')}; "
            f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')}; NumPy float32 GEMM {gemm_rate():.0f} GFLOP/s\n"
            f"float32, eval, weights frozen; medians of {repeats} alternating runs; ratios (ms / ms)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--models", default=",".join(DEFAULT),
                        help="comma-separated zoo models (shapes, depth) and architecture files; 'all': every one")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(2)
    zennit = import_zennit()
    if args.models == "all":
        names = list(ZOO) + [porting.arch_name(p) for p in porting.arch_files()]
    else:
        names = [n for n in args.models.split(",") if n]
    t_start = time.perf_counter()
    print(machine_line(torch, args.repeats))
    print(f"{'model':<24} {'LRP / gradient (ms)':>22} {'ours / Zennit (ms)':>22} {'Z. reg ms':>9} {'corr':>6}  "
          f"canonizer")
    by_gradient, by_zennit = [], []
    for label, ours, theirs, x in rows(names, torch):
        if ours is None:
            print(f"{label:<24} cannot build: {type(x).__name__}: {x}", flush=True)
            continue
        try:
            ours_map = A.lrp(ours, x).map
        except Exception as exc:  # noqa: BLE001: the row reports it
            print(f"{label:<24} LRP failed: {type(exc).__name__}: {exc}", flush=True)
            continue
        lrp_s, grad_s = alternate(lambda: A.lrp(ours, x), lambda: A.gradient(ours, x), args.repeats)
        by_gradient.append(lrp_s / grad_s)
        try:
            zennit_map, zennit_register, canonizer = zennit_runner(zennit, torch, theirs, x)
            theirs_map = zennit_map()
        except Exception as exc:  # noqa: BLE001: the row reports it
            print(f"{label:<24} {ratio_text(lrp_s, grad_s):>22}  Zennit failed: {type(exc).__name__}: {exc}",
                  flush=True)
            continue
        lrp2_s, zennit_s = alternate(lambda: A.lrp(ours, x), zennit_map, args.repeats)
        by_zennit.append(lrp2_s / zennit_s)
        register_ms = settled_median_ms(zennit_register, args.repeats)
        print(f"{label:<24} {ratio_text(lrp_s, grad_s):>22} {ratio_text(lrp2_s, zennit_s):>22} {register_ms:>9.1f} "
              f"{corr(ours_map, theirs_map):6.3f}  {canonizer}", flush=True)
    if by_gradient:
        print(f"LRP / gradient: worst {max(by_gradient):.2f} (goal <= {GOAL_GRADIENT}); "
              + (f"ours / Zennit: worst {max(by_zennit):.2f} (goal <= {GOAL_ZENNIT})" if by_zennit else ""))

    if "depth" in names:
        model = zoo.load("depth").eval().requires_grad_(False)
        x = data.scenes(1, seed=5)[0][:1].astype(np.float32)
        print(f"\n{'zoo depth 128x128, pixel seeds':<30} {'LRP / gradient (ms)':>22}")
        for label, seed in ((f"one pixel {PIXEL}", seeds.pixel(*PIXEL)), ("64 pixels batched", seeds.pixels(GRID))):
            try:
                A.lrp(model, x, seed)
            except Exception as exc:  # noqa: BLE001: the row reports it
                print(f"{label:<30} LRP failed: {type(exc).__name__}: {exc}", flush=True)
                continue
            lrp_s, grad_s = alternate(lambda: A.lrp(model, x, seed), lambda: A.gradient(model, x, seed),
                                      args.repeats)
            mark = "ok" if lrp_s / grad_s <= GOAL_GRADIENT else "MISSED"
            print(f"{label:<30} {ratio_text(lrp_s, grad_s):>22}  goal <= {GOAL_GRADIENT} {mark}", flush=True)
    print(f"\n{time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
