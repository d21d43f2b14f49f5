"""Maps of a whole folder: `saliency batch`'s pipeline (saliency.attribution.batch) in maps per
second, and where the time goes.

    python benchmarks/batch.py [--images 1024] [--repeats 3] [--memory 10000] [--workers 1,2]

Jobs: the shapes classifier on 64x64 PNGs (gradient maps into the store; the same with --png
heatmaps), the zoo depth model on 128x128 PNGs (all-ones maps). Each job runs the whole pipeline on
a folder of `--images` distinct images (drawn by the zoo's data generators, written as PNG) into a
fresh store, both stores formats where Zarr is installed. Printed per job: the median maps per
second of `--repeats` runs, and the parts measured alone on the same images: reading (decode and
resize), the method on batches already in memory (as the pipeline calls it), writing the store, and rendering the PNGs, and where torch is installed, PyTorch's rate for
the method alone on the same decoded batches (the same architecture file built by torch, the zoo's
weights, 2 threads). Then `saliency evaluate`'s curves (16 steps) of the classifier's maps of 256
of the images, in images per second. With `--memory N`, also the peak resident memory (VmHWM) of a
fresh `saliency batch` process over N images of the classifier (raw maps). With `--workers`, the
classifier job also on local Dask clusters of that many worker processes (`saliency batch
--workers`; the cluster's start-up is timed apart). Freed memory is kept for reuse
(`kernels.memory.keep_freed_memory`), as the command line does.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

from saliency import attribution, models, viz
from saliency.attribution import naming, pipeline, sources
from saliency.attribution import store as stores
from saliency.kernels.memory import keep_freed_memory

BATCH = 32


def write_pngs(folder, images):
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, chw in enumerate(images):
        path = folder / f"img{i:05d}.png"
        Image.fromarray((np.moveaxis(chw, 0, -1) * 255).round().astype(np.uint8)).save(path)
        paths.append(path)
    return paths


def images_for(task, n):
    if task == "depth":
        return models.data.scenes(n, seed=7)[0]
    return models.data.shapes(n, seed=7)[0]


def seconds(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def parts(model, paths, seed, png_dir, use_zarr, tmp):
    """Seconds of each stage alone over all images: read, compute, store, render."""
    source = sources.ImageSource(model, paths)
    n = len(paths)
    spans = [(a, min(n, a + BATCH)) for a in range(0, n, BATCH)]
    batches = []
    read = seconds(lambda: batches.extend(source.read(a, b)[0] for a, b in spans))
    maps = []
    run = attribution.Run.build("gradient", seed)
    compute = seconds(lambda: maps.extend(pipeline._maps_of(run, model, x)[0] for x in batches))
    store = stores.create_store(stores.store_path(tmp / "alone", use_zarr), [str(p) for p in paths],
                                maps[0].shape[1:], BATCH, {})
    write = seconds(lambda: [store.write_batch(k, m, np.zeros(len(m)), [""] * len(m)) for k, m in enumerate(maps)])
    render = None
    if png_dir is not None:
        names = naming.output_names([str(p) for p in paths], "gradient")
        style = viz.Style()
        render = seconds(lambda: [naming.write_pngs(png_dir, [names[p] for p in paths[a:b]], x, m, [""] * (b - a),
                                                    style) for (a, b), x, m in zip(spans, batches, maps)])
    return read, compute, write, render


def run_job(label, model, paths, seed, png, use_zarr, repeats, tmp):
    rates = []
    for r in range(repeats):
        out = tmp / f"{label}-{r}"
        t = seconds(lambda: attribution.batch(model, paths, "gradient", seed, out, batch_size=BATCH,
                                              png=out if png else None, use_zarr=use_zarr))
        rates.append(len(paths) / t)
    read, compute, write, render = parts(model, paths, seed, (tmp / f"{label}-png") if png else None, use_zarr, tmp)
    n = len(paths)
    stage = f"read {n / read:.0f}/s, method {n / compute:.0f}/s, store {n / write:.0f}/s"
    if render is not None:
        stage += f", PNGs {n / render:.0f}/s"
    reference = None if png else torch_rate(model, paths, seed is not None, repeats)
    if reference is not None:
        stage += f"; PyTorch, the method alone: {reference:.0f}/s"
    print(f"{label:<44} {statistics.median(rates):8.0f} maps/s   alone: {stage}", flush=True)


def torch_twin(model):
    """The zoo model's architecture built by PyTorch from the same file (models/architectures.py with
    its two saliency import lines pointing at torch), the zoo's weights loaded, in eval mode."""
    import torch

    source = Path(models.__file__).with_name("architectures.py").read_text()
    ours = "import saliency as sl\nfrom saliency import nn\n"
    if ours not in source:
        raise RuntimeError("models/architectures.py no longer starts with the two import lines this benchmark swaps")
    source = source.replace(ours, "import torch as sl\nfrom torch import nn\n")
    namespace = {"__name__": "architectures_torch"}
    exec(compile(source, "architectures_torch", "exec"), namespace)
    twin = namespace["DepthNet"]() if type(model).__name__ == "DepthNet" else namespace["shapes_net"]()
    twin.load_state_dict({k: torch.tensor(np.asarray(v)) for k, v in model.state_dict().items()})
    return twin.eval().requires_grad_(False)


def torch_rate(model, paths, dense, repeats):
    """PyTorch's maps per second (2 threads) for the method alone (gradient of the top class, or of
    the all-ones seed for the depth model) on the same images in batches of BATCH, already decoded;
    None without torch."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(2)
    twin = torch_twin(model)
    source = sources.ImageSource(model, paths)
    batches = [torch.tensor(source.read(a, min(len(paths), a + BATCH))[0]) for a in range(0, len(paths), BATCH)]

    def maps():
        for x in batches:
            x = x.clone().requires_grad_(True)
            y = twin(x)
            v = torch.ones_like(y) if dense else torch.nn.functional.one_hot(y.argmax(1), y.shape[1]).to(y.dtype)
            torch.autograd.grad(y, x, v)

    maps()
    return len(paths) / statistics.median(seconds(maps) for _ in range(repeats))


def evaluation_rate(model, paths, repeats, tmp):
    """`saliency evaluate`'s curves (deletion and insertion, 16 steps, no randomisation check) of
    the classifier's gradient maps of `paths`, in images per second."""
    store = attribution.batch(model, paths, "gradient", out=tmp / "evaluated", batch_size=BATCH, use_zarr=False)
    attribution.evaluate_store(model, store, steps=16, sample=0)
    rate = len(paths) / statistics.median(seconds(lambda: attribution.evaluate_store(model, store, steps=16, sample=0))
                                          for _ in range(repeats))
    print(f"{'evaluate: classifier maps, 16 steps':<44} {rate:8.0f} images/s", flush=True)


def peak_memory(n, tmp):
    folder = tmp / "many"
    write_pngs(folder, images_for("shapes", n))
    command = [sys.executable, "-c", "from saliency.cli.main import main; main()", "batch", str(folder),
               "--out", str(tmp / "many-out")]
    code = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, capture_output=True); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    t0 = time.perf_counter()
    kb = int(subprocess.run([sys.executable, "-c", code] + command, capture_output=True, text=True,
                            check=True).stdout.strip())
    print(f"saliency batch over {n} classifier images (raw maps): peak memory {kb / 1024:.0f} MB, "
          f"{time.perf_counter() - t0:.1f} s for the whole process")


def on_dask(paths, workers, repeats, tmp):
    from saliency.attribution import distributed
    from saliency.models.zoo import ModelSource

    t0 = time.perf_counter()
    client, cluster = distributed.client(workers=workers)
    started = time.perf_counter() - t0

    def run(out):
        return attribution.Run.build("gradient", out=out, batch_size=BATCH, model=ModelSource("shapes"))

    try:
        distributed.batch(client, run(tmp / f"dask-warm-{workers}"), paths[:BATCH])
        rates = []
        for r in range(repeats):
            out = tmp / f"dask-{workers}-{r}"
            t = seconds(lambda: distributed.batch(client, run(out), paths))
            rates.append(len(paths) / t)
    finally:
        client.close()
        cluster.close()
    print(f"{'classifier 64x64, gradient, ' + str(workers) + ' Dask workers':<44} {statistics.median(rates):8.0f} "
          f"maps/s   (cluster start-up {started:.1f} s, first task's model load not counted)", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--memory", type=int, default=0, help="images for the peak-memory run (0: skip)")
    parser.add_argument("--workers", default="", help="comma-separated Dask worker counts (default: none)")
    args = parser.parse_args()
    keep_freed_memory()
    formats = [True, False] if stores.zarr_available() else [False]
    print(f"{os.cpu_count()} cores, {args.images} images per job, batches of {BATCH}, medians of {args.repeats}; "
          f"zarr {'installed' if formats[0] else 'not installed'}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        classifier, depth = models.load("shapes"), models.load("depth")
        shapes = write_pngs(tmp / "shapes", images_for("shapes", args.images))
        scenes = write_pngs(tmp / "scenes", images_for("depth", args.images // 4))
        viz.load_image(shapes[0])
        for use_zarr in formats:
            kind = "zarr" if use_zarr else "npy"
            run_job(f"classifier 64x64, gradient ({kind})", classifier, shapes, None, False, use_zarr, args.repeats,
                    tmp)
            run_job(f"classifier 64x64, gradient + PNGs ({kind})", classifier, shapes, None, True, use_zarr,
                    args.repeats, tmp)
            run_job(f"depth 128x128, all ones ({kind})", depth, scenes, attribution.seeds.ones(), False, use_zarr,
                    args.repeats, tmp)
        evaluation_rate(classifier, shapes[:256], args.repeats, tmp)
        for workers in [int(w) for w in args.workers.split(",") if w]:
            on_dask(shapes, workers, args.repeats, tmp)
        if args.memory:
            peak_memory(args.memory, tmp)


if __name__ == "__main__":
    main()
