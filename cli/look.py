"""`saliency look-distance`: for a grid of output pixels, how far from each pixel the model looks."""
from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, TextIO

import numpy as np
import typer

from saliency import attribution, viz
from saliency.models import zoo

from .mapping import MapError, model_and_input, output_file, shown_path

if TYPE_CHECKING:
    from .preprocessing import Request


@contextlib.contextmanager
def progress_bar(label: str, stream: TextIO | None, delay: float = 0.0) -> Iterator[Callable[[int, int], None]]:
    """A callback progress(done, total) that draws a typer progress bar on `stream` from its first
    call made `delay` seconds or more after this one (work that ends sooner shows no bar)."""
    state: dict[str, Any] = {}
    started = time.perf_counter()

    def update(done: int, total: int) -> None:
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


def run_look_distance(image: str | Path, source: zoo.ModelSource = zoo.ModelSource("depth"), stride: int | None = None,
                      fraction: float = 0.5, out: str | Path | None = None,
                      progress: Callable[[int, int], object] | None = None,
                      request: Request | None = None) -> list[str]:
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
