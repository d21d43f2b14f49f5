"""Figures of maps that are values in a unit (a radius in input pixels, a depth in metres), not
attributions: each panel keeps the map's own numbers and has a colour bar labelled with its unit.

A map may be coarser than the image (a value every few pixels): `extent` places it on the image,
in the image's pixel coordinates as matplotlib's imshow takes them, and each value is drawn as
the block it covers. NaN (no value) is drawn transparent.
"""
from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .errors import VizError
from .figures import TITLE_FONTSIZE, TITLE_LINE, _lines
from .heatmap import get_cmap, to_rgb

if TYPE_CHECKING:
    from matplotlib.colors import Colormap
    from numpy.typing import ArrayLike

VALUE_CMAP = "viridis"
BAR_WIDTH = 0.9      # inches beside each panel for its colour bar, tick labels and unit label


def _per_map(value: Any, n: int, name: str) -> list[Any]:
    """`value` repeated for n maps, or its n entries if it is a list or tuple."""
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise VizError(f"{name} has {len(value)} entries for {n} maps; pass one per map or a single value")
        return list(value)
    return [value] * n


def _limit(value: float | None, name: str) -> float | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value)):
        raise VizError(f"{name} must be a finite number or None, got {value!r}")
    return value


def value_panels(maps: Iterable[ArrayLike], *, image: ArrayLike | None = None,
                 titles: str | Sequence[str | None] | None = None, labels: str | Sequence[str | None] | None = None,
                 extents: Sequence[float] | list[Sequence[float] | None] | None = None, alpha: float | None = None,
                 cmap: Colormap | str = VALUE_CMAP, vmin: float | Sequence[float | None] | None = 0.0,
                 vmax: float | Sequence[float | None] | None = None, panel_size: float = 3.0) -> Figure:
    """A one-row Figure: the image (if given), then one panel per 2-D map, each with a colour bar
    in the map's own units.

    maps: 2-D arrays; NaN entries are transparent.
    titles: one per map; labels: the colour bar's label per map (its unit), e.g. "radius (input px)".
    extents: a list with one (left, right, bottom, top) per map, or one tuple for all, in the image's
      pixel coordinates; None: the map covers the whole image (or its own pixels without an image).
    alpha: draw each map over the image with this opacity (needs `image`); None draws maps alone.
    vmin, vmax: the colour range, a number (or None) or one per map; vmin=None and vmax=None take
      the map's finite minimum and maximum.
    fig.panel_axes[0] holds the panels' Axes (the image's first), fig.colorbars the colour bars.
    """
    arrays = [np.asarray(m, dtype=np.float64) for m in maps]
    extent: Any
    if not arrays:
        raise VizError("maps is empty; pass a list of 2-D arrays")
    for k, m in enumerate(arrays):
        if m.ndim != 2 or m.size == 0:
            raise VizError(f"maps[{k}] must be a 2-D array of values, got shape {m.shape}")
    n = len(arrays)
    titles, labels = _per_map(titles, n, "titles"), _per_map(labels, n, "labels")
    extents = _per_map(extents, n, "extents") if isinstance(extents, list) else [extents] * n
    vmins = [_limit(v, "vmin") for v in _per_map(vmin, n, "vmin")]
    vmaxes = [_limit(v, "vmax") for v in _per_map(vmax, n, "vmax")]
    if alpha is not None and (image is None or isinstance(alpha, bool) or not isinstance(alpha, numbers.Real)
                              or not 0 <= alpha <= 1):
        raise VizError(f"alpha must be a number in [0, 1] and needs an image, got alpha={alpha!r} "
                       f"{'without' if image is None else 'with'} an image")
    rgb = None if image is None else to_rgb(image)
    colours = get_cmap(cmap).with_extremes(bad=(0, 0, 0, 0))

    lines = max([_lines(t) for t in titles] + [_lines("image") if rgb is not None else 0])
    columns = n + (rgb is not None)
    fig = Figure(figsize=(columns * panel_size + n * BAR_WIDTH, panel_size + TITLE_LINE * lines + 0.15),
                 layout="constrained")
    FigureCanvasAgg(fig)
    axes = list(fig.subplots(1, columns, squeeze=False)[0])
    fig.panel_axes, fig.colorbars = [axes], []  # type: ignore[attr-defined]
    if rgb is not None:
        axes[0].imshow(rgb, interpolation="nearest")
        axes[0].set_title("image", fontsize=TITLE_FONTSIZE)
    for ax, m, title, label, extent, lo, hi in zip(axes[columns - n:], arrays, titles, labels, extents, vmins, vmaxes):
        finite = m[np.isfinite(m)]
        lo = (float(finite.min()) if finite.size else 0.0) if lo is None else lo
        hi = (float(finite.max()) if finite.size else 1.0) if hi is None else hi
        hi = hi if hi > lo else lo + 1.0
        h, w = (rgb.shape[:2] if rgb is not None else m.shape)
        if extent is None:
            extent = (-0.5, w - 0.5, h - 0.5, -0.5)
        if alpha is not None:
            ax.imshow(rgb, interpolation="nearest")
        shown = ax.imshow(np.ma.masked_invalid(m), cmap=colours, vmin=lo, vmax=hi, extent=extent,
                          interpolation="nearest", alpha=alpha)
        ax.set_xlim(-0.5, w - 0.5)
        ax.set_ylim(h - 0.5, -0.5)
        if title:
            ax.set_title(str(title), fontsize=TITLE_FONTSIZE)
        bar = fig.colorbar(shown, ax=ax, fraction=0.046, pad=0.03)
        bar.solids.set_alpha(1.0)  # type: ignore[union-attr]
        bar.ax.tick_params(labelsize=7)
        if label:
            bar.set_label(str(label), fontsize=8)
        fig.colorbars.append(bar)  # type: ignore[attr-defined]
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
    return fig
