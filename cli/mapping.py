"""`saliency map` and `saliency batch`: an image in, a heatmap PNG out."""
import time
from pathlib import Path

import numpy as np
from saliency.models import zoo

from saliency import attribution, viz
from saliency.attribution import seeds

METHODS = attribution.METHODS
SIGNS = ("abs", "positive", "negative", "all")
REDUCES = ("sum", "max_abs", "rgb")
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm"}


class MapError(ValueError):
    """A request `saliency map` cannot carry out (bad option, image, seed or model)."""


def _choice(value, allowed, what):
    if value not in allowed:
        raise MapError(f"unknown {what} {value!r}; choose one of: {', '.join(allowed)}")
    return value


def gradcam_layer(model):
    """The layer Grad-CAM uses by default: the last Conv2d with more than one output channel."""
    from saliency import nn

    convs = [(name, m) for name, m in getattr(model, "named_modules", list)()
             if isinstance(m, nn.Conv2d) and m.out_channels > 1]
    if not convs:
        raise MapError("gradcam needs a model with Conv2d layers (a saliency.nn.Module)")
    return convs[-1]


def method_options(model, method, layer=None):
    """The options a method needs from the command line: Grad-CAM's layer (named, or the last
    convolution's)."""
    if method != "gradcam":
        return {}
    return {"layer": named_layer(model, layer) if layer else gradcam_layer(model)[1]}


def named_layer(model, name):
    """The module called `name` in model.named_modules() (as print(model) shows it), or MapError."""
    modules = dict(getattr(model, "named_modules", list)())
    if name not in modules or not name:
        convs = [n for n, m in modules.items() if type(m).__name__ == "Conv2d"]
        raise MapError(f"the model has no layer {name!r}; its convolutions are: {', '.join(convs) or 'none'}")
    return modules[name]


def prediction_text(model, output):
    """Top classes with softmax probabilities, or the depth range of a dense output."""
    out = np.asarray(output, dtype=np.float64)
    out = out[0] if out.ndim in (2, 4) else out
    if out.ndim == 1:
        p = np.exp(out - out.max())
        p /= p.sum()
        names = getattr(model, "classes", None) or [str(k) for k in range(len(out))]
        top = np.argsort(-p)[:3]
        return "prediction: " + ", ".join(f"{names[k]} {100 * p[k]:.1f}%" for k in top)
    unit = " m" if getattr(model, "task", None) == "depth" else ""
    return (f"prediction: a {'x'.join(map(str, out.shape[-2:]))} map, "
            f"min {out.min():.3g}{unit}, median {np.median(out):.3g}{unit}, max {out.max():.3g}{unit}")


def model_input(model, image_path):
    """(image array (C, H, W), note) read for `model`: resized to its input_shape when it has one."""
    shape = getattr(model, "input_shape", None)
    if shape is not None:
        return viz.load_image(image_path, size=tuple(shape[1:]), channels=shape[0])
    return viz.load_image(image_path)


def _image_file(image):
    """The image file given on the command line, or MapError saying what is there instead."""
    path = Path(image)
    if path.is_dir():
        raise MapError(f"{image} is a folder, not an image file (for every image in a folder: saliency batch)")
    if not path.is_file():
        raise MapError(f"image file {image} does not exist")
    return path


def model_and_input(image, model, weights, model_args=None):
    """(model, image array, note) for an image file given on the command line and a model name."""
    path = _image_file(image)
    net = zoo.resolve(model, weights, model_args)
    return (net,) + tuple(model_input(net, path))


def compute(model, image_path, method="gradient", seed=None, layer=None):
    """(image array (C, H, W), Attribution, notes) for one image file."""
    fn = METHODS[_choice(method, tuple(METHODS), "method")]
    seed_obj = seeds.parse(seed) if seed else None
    if seed_obj is not None and seed_obj.count is not None:
        raise MapError(f"seed {seed} makes {seed_obj.count} maps and saliency map draws one; for K maps per image "
                       f"use saliency batch")
    x, note = model_input(model, image_path)
    attr = fn(model, x, seed_obj, **method_options(model, method, layer))
    _check_output(model, attr, image_path)
    return x, attr, [note] if note else []


def _check_output(model, attr, image_path):
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


def figure(model, x, attr, sign="abs", reduce="sum", overlay=False):
    """image | [the model's dense output |] map, with colour bars; the map's title names method and seed."""
    classes = getattr(model, "classes", None) or None
    title = f"{getattr(attr.method, '__name__', attr.method)} · {attr.seed.describe(classes)}"
    maps, titles = [attr.map], [title]
    reduces = ["sum" if attr.map.shape[-3] == 1 and reduce == "rgb" else reduce]
    if np.ndim(attr.output) >= 2:        # a dense output: show it beside its map (one channel: reduce is the map's)
        maps.insert(0, np.asarray(attr.output).reshape(-1, *np.shape(attr.output)[-2:])[:1])
        titles.insert(0, "model output")
        reduces.insert(0, "sum")
    return viz.panels(maps, image=x, titles=titles, sign=sign, reduce=reduces, alpha=0.5 if overlay else None)


def render_one(net, path, method="gradient", seed=None, sign="abs", reduce="sum", overlay=False, out=None,
               layer=None):
    """Compute one image's map with a loaded model and write its PNG; returns the lines to print."""
    started = time.perf_counter()
    x, attr, notes = compute(net, path, method, seed, layer)
    seconds = time.perf_counter() - started
    out = Path(out) if out is not None else Path(f"{Path(path).stem}_{method}.png")
    viz.save(figure(net, x, attr, sign, reduce, overlay), out)
    classes = getattr(net, "classes", None) or None
    return notes + [prediction_text(net, attr.output),
                    f"seed: {attr.seed.describe(classes)}   method: {method}   time: {1000 * seconds:.0f} ms",
                    f"wrote {out}"]


def output_file(out, default):
    """The file to write: `out`, else `default` in the working folder. Checked before any work: an
    existing folder or a suffix other than .png, .pdf or .svg is a MapError. An existing file is
    overwritten; missing parent folders are created when it is written."""
    path = Path(out) if out is not None else Path(default)
    if path.is_dir():
        raise MapError(f"--out {out} is a folder; give a file name ending in .png, e.g. {path / Path(default).name}")
    if path.suffix.lower() not in (".png", ".pdf", ".svg"):
        raise MapError(f"--out must be a file name ending in .png (or .pdf, .svg), got {out}")
    return path


def _check_options(method, sign, reduce):
    _choice(method, tuple(METHODS), "method")
    _choice(sign, SIGNS, "sign")
    _choice(reduce, REDUCES, "reduce")


def run(image, model="shapes", weights=None, method="gradient", seed=None, sign="abs", reduce="sum",
        overlay=False, out=None, layer=None, model_args=None):
    """Load the model, compute and write one heatmap; returns the lines to print."""
    _check_options(method, sign, reduce)
    if seed:
        seeds.parse(seed)
    path = _image_file(image)
    out = output_file(out, f"{path.stem}_{method}.png")
    return render_one(zoo.resolve(model, weights, model_args), path, method, seed, sign, reduce, overlay, out, layer)


def _pair(text, what):
    try:
        a, b = (int(v) for v in text.split(","))
    except ValueError:
        raise MapError(f"{what} must be two integers ROW,COL, got {text!r}") from None
    return a, b


def run_receptive_field(image, pixel, model="depth", weights=None, out=None, model_args=None):
    """The receptive field of one output pixel, drawn with its 50%/90% mass circles; the lines to print."""
    from matplotlib.patches import Circle, Rectangle

    row, col = _pair(pixel, "--pixel")
    path = _image_file(image)
    out = output_file(out, f"{path.stem}_rf_{row}_{col}.png")
    net, x, note = model_and_input(image, model, weights, model_args)
    started = time.perf_counter()
    attr = attribution.receptive_field(net, x, (row, col))
    seconds = time.perf_counter() - started
    ex = attr.extras
    box = ex["box"]
    fig = viz.panels([attr.map], image=x, titles=[f"d y[{row}, {col}] / d x"], sign="abs")
    (cy, cx), (image_ax, map_ax) = ex["centre"], fig.panel_axes[0]
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
    return ([note] if note else []) + [radii, theory, f"wrote {out}"]
