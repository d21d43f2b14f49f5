"""The seven metrics of `saliency evaluate --metrics` over a store of shape images, and Quantus's
time for the ones it computes on the same images and maps.

    python benchmarks/metrics.py [--images 1000] [--quantus-images 1000] [--quantus-seconds 300]

First ROAD's imputation alone (`metrics.impute`, noise 0) of one 64x64 RGB shape image per removed
fraction, the pixels removed in order of its gradient map's |value| (blob-like regions, as
attribution maps are), median of 25 runs; where SciPy is installed, beside SciPy's sparse direct
solver (`spsolve`, SuperLU) on the same linear system, built from the same neighbour weights.

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
ROAD at 9 fractions. Quantus is called on batches of 64 images until they are done or
`--quantus-seconds` have passed for that metric (its Infidelity takes seconds per image): the
table gives how many images it did and the per-image ratio. A metric that raises is reported with
its error.
"""
import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from saliency import attribution
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


def imputation(model):
    """The imputation's median milliseconds per fraction, and SciPy's spsolve on the same system."""
    from saliency.attribution import metrics

    x = data.shapes(1, seed=3)[0]
    importance = np.abs(attribution.gradient(model, x).map).sum(axis=1)[0]
    order = np.argsort(-importance.ravel(), kind="stable")
    print("ROAD's imputation of one 64x64 RGB image (median of 25, ms):\n")
    print("| fraction removed | ours | SciPy spsolve | SciPy / ours |")
    print("| ---: | ---: | ---: | ---: |")
    worst = None
    for fraction in (0.1, 0.3, 0.5, 0.7, 0.9):
        keep = np.ones(64 * 64, bool)
        keep[order[:round(fraction * keep.size)]] = False
        keep = keep.reshape(1, 64, 64)
        metrics.impute(x, keep, noise=0)
        ours = np.median([timed(lambda: metrics.impute(x, keep, noise=0))[0] for _ in range(25)]) * 1e3
        solve, cells = scipy_solver(x[0], keep[0]), "not installed | -"
        if solve is not None:
            agree = np.abs(solve().T - metrics.impute(x, keep, noise=0)[0][:, ~keep[0]]).max()
            worst = agree if worst is None else max(worst, agree)
            theirs = np.median([timed(solve)[0] for _ in range(25)]) * 1e3
            cells = f"{theirs:.2f} | {theirs / ours:.1f}x"
        print(f"| {fraction:.1f} | {ours:.2f} | {cells} |", flush=True)
    print(f"\nlargest difference from SciPy's solution: {worst:.1e}\n" if worst is not None else "")


def scipy_solver(image, keep):
    """A function building and solving the removed pixels' system with scipy.sparse (the values of
    the removed pixels, (removed, C)), or None without SciPy: row i (a removed pixel) has 1 minus
    the weights of its neighbours outside the image on the diagonal, -w for each removed
    neighbour, and the kept neighbours' w * value on the right."""
    try:
        from scipy.sparse import coo_matrix
        from scipy.sparse.linalg import spsolve
    except ImportError:
        return None
    h, w = keep.shape
    weights = [((dr, dc), 1 / 6 if dr == 0 or dc == 0 else 1 / 12)
               for dr in (-1, 0, 1) for dc in (-1, 0, 1) if (dr, dc) != (0, 0)]

    def solve():
        removed = np.flatnonzero(~keep.ravel())
        index = np.full(h * w, -1)
        index[removed] = np.arange(len(removed))
        r, c = np.divmod(removed, w)
        rows, cols, vals = [np.arange(len(removed))], [np.arange(len(removed))], [np.ones(len(removed))]
        rhs = np.zeros((len(removed), image.shape[0]))
        for (dr, dc), wt in weights:
            rr, cc = r + dr, c + dc
            inside = (rr >= 0) & (rr < h) & (cc >= 0) & (cc < w)
            vals[0][~inside] -= wt
            flat = np.where(inside, rr * w + cc, 0)
            unknown = inside & ~keep.ravel()[flat]
            rows.append(np.flatnonzero(unknown))
            cols.append(index[flat[unknown]])
            vals.append(np.full(unknown.sum(), -wt))
            known = inside & keep.ravel()[flat]
            rhs[known] += wt * image.reshape(image.shape[0], -1)[:, flat[known]].T
        a = coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                       shape=(len(removed),) * 2).tocsc()
        return spsolve(a, rhs).reshape(len(removed), -1)

    return solve


def quantus_times(model, store, paths, truth, n, budget):
    """{Quantus metric: (seconds, images done) or the error it raised} on the first n images, each
    metric stopped after the batch that passes `budget` seconds; None without Quantus or torch."""
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
        t0, done = time.perf_counter(), 0
        try:
            while done < n and time.perf_counter() - t0 < budget:
                part = slice(done, min(done + BATCH, n))
                more = {k: v[part] if k == "s_batch" else v for k, v in kwargs.items()}
                metric(twin, x[part], y[part], a_batch=a[part], **more)
                done = part.stop
            out[name] = (time.perf_counter() - t0, done)
        except Exception as exc:  # noqa: BLE001: the reference's own failure is a result to report
            out[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:70]}"
        shown = out[name] if isinstance(out[name], str) else f"{out[name][0]:.1f} s, {done} images"
        print(f"  quantus {name}: {shown}", flush=True)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--quantus-images", type=int, default=1000)
    parser.add_argument("--quantus-seconds", type=float, default=300)
    args = parser.parse_args()
    keep_freed_memory()
    model = load("shapes")
    imputation(model)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        paths = data.write_shapes(tmp / "data", args.images, seed=7)
        store = attribution.batch(model, paths, "gradient", out=tmp / "run", batch_size=BATCH, use_zarr=False)
        total, alone, ev = ours(model, store, tmp / "data" / "masks")
        print(f"saliency evaluate --metrics {','.join(SEVEN)}: {args.images} shape images (64x64, gradient maps)")
        n = min(args.quantus_images, args.images)
        print(f"\n| metric | ours, {args.images} images | ours per image | Quantus (images done) | "
              f"Quantus / ours, per image |")
        print("| --- | ---: | ---: | ---: | ---: |")
        truth = data.shapes(args.images, seed=7, return_info=True)[2]["mask"] >= 0.5
        theirs = quantus_times(model, store, paths, truth, n, args.quantus_seconds) if n else None
        for m in SEVEN:
            cell, ratio = "not installed", "-"
            if theirs is not None:
                cell = theirs[m] if isinstance(theirs[m], str) else f"{theirs[m][0]:.1f} s ({theirs[m][1]})"
                if not isinstance(theirs[m], str):
                    ratio = f"{(theirs[m][0] / theirs[m][1]) / (alone[m] / args.images):.1f}x"
            print(f"| {m} | {alone[m]:.1f} s | {1000 * alone[m] / args.images:.1f} ms | {cell} | {ratio} |")
        print(f"| all seven at once | {total:.1f} s | {1000 * total / args.images:.1f} ms | | |")
        print(f"\nall seven over {args.images} images: {total / 60:.2f} minutes (goal: at most 5 for 1000)")
        print("means: " + ", ".join(f"{f} {np.nanmean(v):.3f}" for f, v in ev.values.items() if v.ndim == 1))


if __name__ == "__main__":
    main()
