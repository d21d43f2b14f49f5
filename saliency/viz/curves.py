"""Figures of an evaluation: curves (deletion and insertion, ROAD) with one line per series (a
method, a store), the mean over images with a band of one standard deviation; and numbers per
image (max-sensitivity, sparseness, ...) as one bar per series, mean and standard deviation."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .errors import VizError

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


def deletion_insertion_figure(fractions: ArrayLike, series: Mapping[str, Sequence[ArrayLike]], *,
                              ylabel: str = "score of the seed", panel_size: float = 3.5) -> Figure:
    """Two panels, deletion and insertion: for each `series` entry label -> (deletion, insertion)
    arrays of shape (images, len(fractions)), the mean curve and a band of one standard
    deviation. A good map's deletion curve falls fast and its insertion curve rises fast."""
    curves = {title: (fractions, {label: pair[i] for label, pair in series.items()})
              for i, title in enumerate(("deletion (most important pixels removed first)",
                                         "insertion (most important pixels inserted first)"))}
    return evaluation_figure(curves, {}, ylabel=ylabel, panel_size=panel_size)


def evaluation_figure(curves: Mapping[str, tuple[ArrayLike, Mapping[str, ArrayLike]]],
                      numbers: Mapping[str, Mapping[str, ArrayLike]], *, ylabel: str = "score of the seed",
                      panel_size: float = 3.2, columns: int = 4) -> Figure:
    """One panel per entry of `curves`, title -> (fractions, {label: values (images, len(fractions))}):
    each label's mean curve and a band of one standard deviation over the fraction of pixels
    changed; then one panel per entry of `numbers`, title -> {label: values (images,)}: a bar per
    label at the mean, with the standard deviation as its error bar (NaN values left out)."""
    if not curves and not numbers:
        raise VizError("nothing to draw: no curves and no numbers")
    panels = len(curves) + len(numbers)
    cols = min(columns, panels)
    rows = math.ceil(panels / cols)
    fig = Figure(figsize=(cols * panel_size + 0.5, rows * panel_size), layout="constrained")
    FigureCanvasAgg(fig)
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False).ravel())
    for ax, (title, (fractions, series)) in zip(axes, curves.items()):
        fractions = np.asarray(fractions, dtype=np.float64)
        for label, values in series.items():
            values = np.asarray(values, dtype=np.float64)
            if values.ndim != 2 or values.shape[1] != len(fractions):
                raise VizError(f"curves of {label!r} have shape {values.shape}; they need (images, {len(fractions)})")
            mean, std = values.mean(axis=0), values.std(axis=0)
            line, = ax.plot(fractions, mean, label=f"{label} ({len(values)} images)")
            ax.fill_between(fractions, mean - std, mean + std, color=line.get_color(), alpha=0.15, linewidth=0)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("fraction of pixels")
        ax.set_ylabel(ylabel, fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax, (title, series) in zip(axes[len(curves):], numbers.items()):
        labels = list(series)
        values = [np.asarray(series[label], dtype=np.float64).reshape(-1) for label in labels]
        means = [np.nanmean(v) if np.isfinite(v).any() else np.nan for v in values]
        stds = [np.nanstd(v) if np.isfinite(v).any() else np.nan for v in values]
        colours = [f"C{i}" for i in range(len(labels))]
        ax.bar(range(len(labels)), means, yerr=stds, color=colours, alpha=0.8, capsize=3)
        ax.set_xticks(range(len(labels)), [str(i + 1) for i in range(len(labels))] if len(labels) > 1 else labels,
                      fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    if numbers and len(next(iter(numbers.values()))) > 1:
        fig.suptitle("bars: " + ", ".join(f"{i + 1} = {label}" for i, label in enumerate(next(iter(numbers.values())))),
                     fontsize=8)
    for ax in axes[panels:]:
        ax.set_visible(False)
    return fig
