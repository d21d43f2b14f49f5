"""`saliency look-distance`: for a grid of output pixels, how far from each pixel the model looks."""
import contextlib
import time
from pathlib import Path

import numpy as np
import typer

from saliency import attribution, viz
from saliency.models import zoo

from .mapping import MapError, model_and_input, output_file, shown_path


@contextlib.contextmanager
def progress_bar(label, stream, delay=0.0):
    """A callback progress(done, total) that draws a typer progress bar on `stream` from its first
    call made `delay` seconds or more after this one (work that ends sooner shows no bar)."""
    state, started = {}, time.perf_counter()

    def update(done, total):
        if "bar" not in state:
            if time.perf_counter() - started < delay:
                return
            state["bar"] = typer.progressbar(length=total, label=label, file=stream).__enter__()
            state["shown"] = 0
        state["bar"].update(done - state["shown"])
        state["shown"] = done

    try:
        yield update
    finally:
        if "bar" in state:
            state["bar"].__exit__(None, None, None)


def run_look_distance(image, source=zoo.ModelSource("depth"), stride=None, fraction=0.5, out=None, progress=None,
                      request=None):
    """Compute the look-distance map of one image and write it as a PNG; returns the lines to print."""
    if stride is not None and stride < 1:
        raise MapError(f"--stride must be a positive integer (output pixels between samples), got {stride}")
    if not 0 < fraction <= 1:
        raise MapError(f"--fraction must be in (0, 1], e.g. 0.5 or 0.9, got {fraction}")
    path = Path(image)
    out = output_file(out, f"{path.stem}_look_distance.png")
    shown = shown_path(out)
    net, x, picture, notes = model_and_input(image, source, request)
    result = attribution.look_distance(net, x, stride=stride, fraction=fraction, progress=progress)
    radius = result.radius(fraction)
    pct = f"{100 * fraction:g}%"
    (h, w), grid = result.output_size, f"{len(result.rows)}x{len(result.cols)}"
    title = f"look distance: radius holding {pct} of |dy/dx|\n{grid} pixels, stride {result.stride}"
    fig = viz.value_panels([radius], image=picture, extents=result.extent, alpha=0.7, titles=[title],
                           labels=[f"radius (input px) holding {pct} of the gradient"])
    viz.save(fig, out)
    finite = radius[np.isfinite(radius)]
    if finite.size:
        median = (f"median radius holding {pct} of the gradient mass: {np.median(finite):.1f} input px "
                  f"(from {finite.min():.1f} to {finite.max():.1f})")
    else:
        median = "no output pixel of the grid depends on the image (every gradient is zero)"
    summary = (f"model: {source.model}   stride: {result.stride} ({grid} of the {h}x{w} output pixels)   "
               f"time: {result.seconds:.1f} s")
    return notes + [summary, median, f"wrote {shown}"]
