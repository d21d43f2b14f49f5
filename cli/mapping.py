"""`saliency map` and `saliency receptive-field`: an image in, a heatmap PNG out."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike
from saliency.models import zoo

from saliency import attribution, viz
from saliency._typing import Float32
from saliency.attribution import seeds

if TYPE_CHECKING:
    from saliency.attribution.registry import Method
    from saliency.attribution.result import Attribution
    from saliency.viz.files import ImageSource

    from .preprocessing import Request

ProgressCallback = Callable[[int, int], object]  # progress(done, total)

IMAGE_SUFFIXES = viz.files.IMAGE_SUFFIXES  # the suffixes of the formats load_image reads


class MapError(ValueError):
    """A request `saliency map` cannot carry out (bad option, image, seed or model)."""


def prediction_text(model: zoo.Model, output: ArrayLike) -> str:
    """Top classes with softmax probabilities; for a segmentation, the classes predicted most
    (share of the pixels); or the depth range of a dense output."""
    out = np.asarray(output, dtype=np.float64)
    out = out[0] if out.ndim in (2, 4) else out
    names = getattr(model, "classes", None) or []
    if out.ndim == 1:
        p = np.exp(out - out.max())
        p /= p.sum()
        top = np.argsort(-p)[:3]
        return "prediction: " + ", ".join(f"{_name(names, k)} {100 * p[k]:.1f}%" for k in top)
    if getattr(model, "task", None) == "segmentation" and out.ndim == 3:
        share = np.bincount(out.argmax(axis=0).ravel(), minlength=len(out)) / out[0].size
        most = [k for k in np.argsort(-share, kind="stable")[:3] if share[k] > 0]
        return (f"prediction: a {'x'.join(map(str, out.shape[-2:]))} map of {len(out)} classes, most pixels: "
                + ", ".join(f"{_name(names, k)} {100 * share[k]:.1f}%" for k in most))
    unit = " m" if getattr(model, "task", None) == "depth" else ""
    return (f"prediction: a {'x'.join(map(str, out.shape[-2:]))} map, "
            f"min {out.min():.3g}{unit}, median {np.median(out):.3g}{unit}, max {out.max():.3g}{unit}")


def _name(names: Sequence[str], k: int) -> str:
    return names[k] if k < len(names) else str(k)


def reading(model: zoo.Model, preprocess: viz.Preprocess | None = None) -> viz.Preprocess | None:
    """The `viz.Preprocess` that reads images for `model`: `preprocess`, else the model's own
    `.preprocess` (a torchvision architecture's), else None (the image at the model's input_shape)."""
    from saliency.attribution.sources import model_preprocess

    return preprocess if preprocess is not None else model_preprocess(model)


def model_input(model: zoo.Model, image_path: ImageSource,
                preprocess: viz.Preprocess | None = None) -> tuple[Float32, str | None]:
    """(image array (C, H, W), note) read for `model`: through `reading(model, preprocess)` when
    there is one, else resized to the model's input_shape when it has one."""
    preprocess = reading(model, preprocess)
    if preprocess is not None:
        prepared = preprocess.prepare(image_path)
        return prepared.input, prepared.note
    shape = getattr(model, "input_shape", None)
    if shape is not None:
        return viz.load_image(image_path, size=tuple(shape[1:]), channels=shape[0])
    return viz.load_image(image_path)


def picture_of(x: Float32, preprocess: viz.Preprocess | None = None) -> Float32:
    """The picture to draw a map over: the input `x` as it is, or unnormalised by `preprocess`."""
    return x if preprocess is None else preprocess.denormalize(x)


def _image_file(image: str | os.PathLike[str]) -> Path:
    """The image file given on the command line, or MapError saying what is there instead: nothing,
    a folder, a FIFO, a socket, a device, a symbolic link loop, a file this process may not read.
    Only os.stat looks at it, so a FIFO or a device is never opened."""
    from os.path import isdir

    path = Path(image)
    problem = viz.files.file_problem(path)
    if problem and isdir(path):
        raise MapError(f"{image} is a folder, not an image file (for every image in a folder: saliency batch)")
    if problem:
        raise MapError(f"image file {image} {problem}")
    return path


def load_model(source: zoo.ModelSource) -> tuple[zoo.Model, zoo.ModelSource, list[str]]:
    """(model, source, notes) of a `zoo.ModelSource`: notes say the random seed of a model file's
    random initial weights, with which --random-seed builds them again, and for a torchvision
    architecture the weights file found in PyTorch's hub cache and what its loader noted."""
    net, loaded, _ = source.load()
    notes = random_init_notes(loaded)
    if source.weights is None and loaded.weights is not None:
        named = getattr(net, "weights_name", None)
        notes.append(f"note: weights {loaded.weights}{f' ({named})' if named else ''}, found in PyTorch's hub cache")
    notes += [f"note: {text}" for text in getattr(net, "notes", None) or []]
    return net, loaded, notes


def random_init_notes(source: zoo.ModelSource) -> list[str]:
    """The note for a model whose weights are its random initialisation (no --weights)."""
    if not source.random_init:
        return []
    return [f"note: no --weights, so the model has its random initial weights (random seed {source.random_seed}; "
            f"--random-seed {source.random_seed} builds the same weights again)"]


def model_and_input(image: str | os.PathLike[str], source: zoo.ModelSource,
                    request: Request | None = None) -> tuple[zoo.Model, Float32, Float32, list[str]]:
    """(model, image array, picture, notes) for an image file given on the command line, a
    `zoo.ModelSource` and the preprocessing options (`preprocessing.Request`, or None)."""
    path = _image_file(image).absolute()  # a model that calls os.chdir cannot move it
    net, _, notes = load_model(source)
    preprocess = request.apply(net) if request is not None else None
    x, note = model_input(net, path, preprocess)
    return net, x, picture_of(x, reading(net, preprocess)), notes + ([note] if note else [])


def one_seed(seed: seeds.Seed | str | None) -> seeds.Seed | None:
    """The seed of a map of one image: a Seed or its command-line form (parsed here), or None;
    a MapError for K seeds at once, which make K maps."""
    seed_obj = seeds.parse(seed) if isinstance(seed, str) else seed
    if seed_obj is not None and seed_obj.count is not None:
        raise MapError(f"seed {seed} makes {seed_obj.count} maps and saliency map draws one; for K maps per image "
                       f"use saliency batch")
    return seed_obj


def compute(model: zoo.Model, image_path: str | os.PathLike[str], method: str | Method = "gradient",
            seed: seeds.Seed | str | None = None, options: Mapping[str, Any] | None = None,
            progress: ProgressCallback | None = None,
            preprocess: viz.Preprocess | None = None) -> tuple[Float32, Attribution, list[str]]:
    """(image array (C, H, W), Attribution, notes) for one image file: `method` a name or a
    registry record, `seed` a Seed (or its command-line form), `options` the method's keyword
    arguments; `progress(done, total)` for a method that reports it; `preprocess` a
    `viz.Preprocess` that reads the image (None: the model's own, or at its input_shape)."""
    record = attribution.registry.get(method)
    seed = one_seed(seed)
    x, note = model_input(model, image_path, preprocess)
    extra = {"progress": progress} if progress is not None and record.takes("progress") else {}
    attr = record(model, x, seed, **(options or {}), **extra)
    _check_output(model, attr, image_path)
    return x, attr, [note] if note else []


def _check_output(model: zoo.Model, attr: Attribution, image_path: str | os.PathLike[str]) -> None:
    """MapError when the model's output for a finite image is not finite, naming the parameters and
    buffers that hold NaN or infinite values (the usual cause) when there are any."""
    out = np.asarray(attr.output)
    if out.dtype.kind not in "fc" or np.isfinite(out).all():
        return
    state = getattr(model, "state_dict", None)
    bad = [k for k, v in (state() if callable(state) else {}).items()
           if np.asarray(v).dtype.kind == "f" and not np.isfinite(v).all()]
    where = (f"its weights hold NaN or infinite values in {', '.join(bad[:3])}"
             f"{f' and {len(bad) - 3} more' if len(bad) > 3 else ''}" if bad else "its weights are finite")
    raise MapError(f"the model's output for {Path(image_path).name} holds {out.size - np.isfinite(out).sum()} NaN "
                   f"or infinite values; {where}")


def render_one(net: zoo.Model, path: str | os.PathLike[str], method: str | Method = "gradient",
               seed: seeds.Seed | str | None = None, style: viz.Style = viz.Style(),
               out: str | os.PathLike[str] | None = None, options: Mapping[str, Any] | None = None,
               progress: ProgressCallback | None = None, preprocess: viz.Preprocess | None = None) -> list[str]:
    """Compute one image's map with a loaded model (the image read through `preprocess`, if
    given) and write its PNG (drawn in `style`, over the crop the model saw); returns the lines to
    print (but the last, which names the file written)."""
    from .preprocessing import check_classes

    started = time.perf_counter()
    x, attr, notes = compute(net, path, method, seed, options, progress, preprocess)
    seconds = time.perf_counter() - started
    assert attr.output is not None  # a map computed here has its model's output
    check_classes(net, np.asarray(attr.output))
    out = Path(out) if out is not None else Path(f"{Path(path).stem}_{attr.method}.png")
    classes = getattr(net, "classes", None) or None
    viz.save(viz.attribution_figure(attr, picture_of(x, reading(net, preprocess)), classes=classes, style=style), out)
    return notes + [prediction_text(net, attr.output),
                    f"seed: {attr.seed.describe(classes)}   method: {attr.method}   time: {1000 * seconds:.0f} ms"]


def shown_path(path: str | os.PathLike[str]) -> str | os.PathLike[str]:
    """A path to print: relative to the working folder when it lies inside it."""
    try:
        return Path(path).relative_to(Path.cwd())
    except ValueError:
        return path


def output_file(out: str | os.PathLike[str] | None, default: str) -> Path:
    """The file to write, as an absolute path (a model that calls os.chdir cannot move it): `out`,
    else `default` in the working folder. Checked before any work: an empty name, an existing
    folder or a suffix other than .png, .pdf or .svg is a MapError. An existing file is
    overwritten; missing parent folders are created when it is written."""
    if out is not None and not str(out).strip():
        raise MapError(f"--out is empty; give a file name ending in .png, e.g. {default}")
    path = Path(out) if out is not None else Path(default)
    if path.is_dir():
        raise MapError(f"--out {out} is a folder; give a file name ending in .png, e.g. {path / Path(default).name}")
    if path.suffix.lower() not in (".png", ".pdf", ".svg"):
        raise MapError(f"--out must be a file name ending in .png (or .pdf, .svg), got {out}")
    return path.absolute()


def run(image: str | os.PathLike[str], source: zoo.ModelSource = zoo.ModelSource(), method: str | Method = "gradient",
        seed: seeds.Seed | str | None = None, style: viz.Style = viz.Style(), out: str | os.PathLike[str] | None = None,
        options: Mapping[str, Any] | None = None, progress: ProgressCallback | None = None,
        request: Request | None = None) -> list[str]:
    """Load the model of `source` (a `zoo.ModelSource`), compute and write one heatmap, the image
    read as the preprocessing options `request` (a `preprocessing.Request`) and the model say;
    returns the lines to print. Everything about the request is checked before the model is loaded."""
    record = attribution.registry.get(method)
    seed = one_seed(seed)
    path = _image_file(image).absolute()  # a model that calls os.chdir cannot move it
    out = output_file(out, f"{path.stem}_{record.name}.png")
    shown = shown_path(out)
    net, _, notes = load_model(source)
    preprocess = request.apply(net) if request is not None else None
    lines = render_one(net, path, record, seed, style, out, options, progress, preprocess)
    return notes + lines + [f"wrote {shown}"]


def _pair(text: str, what: str) -> tuple[int, int]:
    try:
        a, b = (int(v) for v in text.split(","))
    except ValueError:
        raise MapError(f"{what} must be two integers ROW,COL, got {text!r}") from None
    return a, b


def run_receptive_field(image: str | os.PathLike[str], pixel: str, source: zoo.ModelSource = zoo.ModelSource("depth"),
                        out: str | os.PathLike[str] | None = None, request: Request | None = None) -> list[str]:
    """The receptive field of one output pixel, drawn with its 50%/90% mass circles; the lines to print."""
    from matplotlib.patches import Circle, Rectangle

    row, col = _pair(pixel, "--pixel")
    path = _image_file(image)
    out = output_file(out, f"{path.stem}_rf_{row}_{col}.png")
    shown = shown_path(out)
    net, x, picture, notes = model_and_input(image, source, request)
    started = time.perf_counter()
    attr = attribution.receptive_field(net, x, (row, col))
    seconds = time.perf_counter() - started
    ex = attr.extras
    box = ex["box"]
    fig = viz.panels([attr.map], image=picture, titles=[f"d y[{row}, {col}] / d x"], sign="abs")
    (cy, cx), (image_ax, map_ax) = ex["centre"], fig.panel_axes[0]  # type: ignore[attr-defined]  # set by viz
    for ax in (image_ax, map_ax):
        ax.plot([cx], [cy], marker="+", color="cyan", markersize=10)
        for r, style in ((ex["radius50"], "-"), (ex["radius90"], "--")):
            ax.add_patch(Circle((cx, cy), r, fill=False, color="cyan", linestyle=style, linewidth=1))
        if box is not None:
            ax.add_patch(Rectangle((box.c0 - 0.5, box.r0 - 0.5), box.c1 - box.c0, box.r1 - box.r0, fill=False,
                                   color="white", linestyle=":", linewidth=1))
        ax.set_xlim(-0.5, x.shape[-1] - 0.5)           # circles must not widen the picture
        ax.set_ylim(x.shape[-2] - 0.5, -0.5)
    viz.save(fig, out)
    rows, cols = ex["theoretical_size"]
    radii = (f"output pixel ({row}, {col}): 50% of the gradient mass lies within {ex['radius50']:.1f} px, "
             f"90% within {ex['radius90']:.1f} px (circles)")
    theory = (f"theoretical receptive field: {rows}x{cols} px, rows {box.r0}..{box.r1 - 1}, "
              f"cols {box.c0}..{box.c1 - 1} (dotted box); time {1000 * seconds:.0f} ms")
    return notes + [radii, theory, f"wrote {shown}"]
