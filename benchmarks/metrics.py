"""The seven metrics of `saliency evaluate --metrics` over a store of shape images, and Quantus's
time for the ones it computes on the same images and maps.

    python benchmarks/metrics.py [--images 1000] [--quantus-images 1000]

`--images` shape images with their masks (`saliency shapes`), the zoo classifier's gradient maps
in a store (`saliency batch`), then, in this process, `evaluate_store` with the seven metrics
(road, max_sensitivity, infidelity, pointing_game, relevance_mass, random_logit, sparseness) at
their defaults, all at once (the goal: at most 5 minutes for 1000 images on 2 cores) and each
alone. Where Quantus (and torch) are installed: Quantus 0.6.0's metrics on the first
`--quantus-images` of the same images, maps and masks, with the classifier built by PyTorch from
the same architecture file and weights (`batch.torch_twin`), its gradient as Quantus's
explain_func, batches of 64, and the settings that make each compute ours: MaxSensitivity with
10 samples of radius 0.2, Infidelity with its own perturbations (square patches, 10 samples),
PointingGame, RelevanceMassAccuracy, RandomLogit and Sparseness on the channel-summed |map|,
ROAD at 9 fractions. A metric that raises is reported with its error.
"""
import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from saliency import attribution
from saliency.attribution import metrics
from saliency.kernels.memory import keep_freed_memory
from saliency.models import data, load

SEVEN = ("road", "max_sensitivity", "infidelity", "pointing_game", "relevance_mass", "random_logit", "sparseness")
BATCH = 64


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def ours(model, store, masks):
    """Seconds of all seven metrics at once and of each alone."""
    attribution.evaluate_store(model, store, metrics=SEVEN, masks=masks, sample=0,
                               metric_options={"road": {"fractions": (0.5,)}, "max_sensitivity": {"samples": 1},
                                               "infidelity": {"samples": 1}})  # compile the kernels first
    total, ev = timed(lambda: attribution.evaluate_store(model, store, metrics=SEVEN, masks=masks, sample=0))
    alone = {m: timed(lambda m=m: attribution.evaluate_store(model, store, metrics=(m,), masks=masks, sample=0))[0]
             for m in SEVEN}
    return total, alone, ev


def quantus_times(model, store, paths, truth, n):
    """{Quantus metric: seconds or the error it raised} on the first n images, or None without
    Quantus or torch."""
    try:
        import torch
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "models" / "vision"))
        from _torchvision import torchvision  # Quantus imports Zennit, which imports torchvision

        torchvision()
        import quantus
    except ImportError:
        return None
    from batch import torch_twin

    torch.set_num_threads(2)
    twin = torch_twin(model)
    source = attribution.sources.ImageSource(model, paths[:n])
    x = source.read(0, n)[0]
    maps = np.asarray(store.maps[:n], np.float32)
    with torch.no_grad():
        y = np.concatenate([twin(torch.from_numpy(x[a:a + BATCH])).argmax(1).numpy() for a in range(0, n, BATCH)])
    a = np.abs(maps).sum(axis=1, keepdims=True)
    s = truth[:n, None].astype(np.float32)

    def explain(model, inputs, targets, **kwargs):
        xt = torch.tensor(np.asarray(inputs), dtype=torch.float32, requires_grad=True)
        out = model(xt)
        out[torch.arange(len(xt)), torch.as_tensor(np.asarray(targets))].sum().backward()
        return np.abs(xt.grad.numpy()).sum(axis=1, keepdims=True)

    common = {"disable_warnings": True}
    jobs = {
        "road": (quantus.ROAD(percentages=list(range(10, 100, 10)), **common), {}),
        "max_sensitivity": (quantus.MaxSensitivity(nr_samples=10, lower_bound=0.2, abs=False, normalise=False,
                                                   **common), {"explain_func": explain}),
        "infidelity": (quantus.Infidelity(n_perturb_samples=10, **common), {}),
        "pointing_game": (quantus.PointingGame(**common), {"s_batch": s}),
        "relevance_mass": (quantus.RelevanceMassAccuracy(**common), {"s_batch": s}),
        "random_logit": (quantus.RandomLogit(num_classes=len(data.SHAPE_CLASSES), **common),
                         {"explain_func": explain}),
        "sparseness": (quantus.Sparseness(normalise=False, **common), {}),
    }
    out = {}
    for name, (metric, extra) in jobs.items():
        kwargs = {"channel_first": True, "softmax": False, "batch_size": BATCH, **extra}
        kwargs.setdefault("explain_func", explain)
        t0 = time.perf_counter()
        try:
            metric(twin, x, y, a_batch=a, **kwargs)
            out[name] = time.perf_counter() - t0
        except Exception as exc:  # noqa: BLE001: the reference's own failure is a result to report
            out[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:70]}"
        print(f"  quantus {name}: {out[name] if isinstance(out[name], str) else f'{out[name]:.1f} s'}", flush=True)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--quantus-images", type=int, default=1000)
    args = parser.parse_args()
    keep_freed_memory()
    model = load("shapes")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        paths = data.write_shapes(tmp / "data", args.images, seed=7)
        store = attribution.batch(model, paths, "gradient", out=tmp / "run", batch_size=BATCH, use_zarr=False)
        total, alone, ev = ours(model, store, tmp / "data" / "masks")
        print(f"saliency evaluate --metrics {','.join(SEVEN)}: {args.images} shape images (64x64, gradient maps)")
        print(f"\n| metric | ours, {args.images} images | ours per image | Quantus, {min(args.quantus_images, args.images)} "
              f"images | Quantus / ours, per image |")
        print("| --- | ---: | ---: | ---: | ---: |")
        truth = data.shapes(args.images, seed=7, return_info=True)[2]["mask"] >= 0.5
        n = min(args.quantus_images, args.images)
        theirs = quantus_times(model, store, paths, truth, n) if n else None
        for m in SEVEN:
            cell, ratio = "not installed", "-"
            if theirs is not None:
                cell = theirs[m] if isinstance(theirs[m], str) else f"{theirs[m]:.1f} s"
                if not isinstance(theirs[m], str):
                    ratio = f"{(theirs[m] / n) / (alone[m] / args.images):.1f}x"
            print(f"| {m} | {alone[m]:.1f} s | {1000 * alone[m] / args.images:.1f} ms | {cell} | {ratio} |")
        print(f"| all seven at once | {total:.1f} s | {1000 * total / args.images:.1f} ms | | |")
        print(f"\nall seven over {args.images} images: {total / 60:.2f} minutes (goal: at most 5 for 1000)")
        print("means: " + ", ".join(f"{f} {np.nanmean(v):.3f}" for f, v in ev.values.items() if v.ndim == 1))


if __name__ == "__main__":
    main()
