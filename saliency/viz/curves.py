"""A Figure of deletion and insertion curves: one line per series (a method, a store), mean over
images with a band of one standard deviation."""
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .errors import VizError


def deletion_insertion_figure(fractions, series, *, ylabel="score of the seed", panel_size=3.5):
    """Two panels, deletion and insertion: for each `series` entry label -> (deletion, insertion)
    arrays of shape (images, len(fractions)), the mean curve and a band of one standard
    deviation. A good map's deletion curve falls fast and its insertion curve rises fast."""
    fractions = np.asarray(fractions, dtype=np.float64)
    if not series:
        raise VizError("no curves to draw")
    fig = Figure(figsize=(2 * panel_size + 0.5, panel_size), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 2, sharey=True)
    for label, curves in series.items():
        for ax, values in zip(axes, curves):
            values = np.asarray(values, dtype=np.float64)
            if values.ndim != 2 or values.shape[1] != len(fractions):
                raise VizError(f"curves of {label!r} have shape {values.shape}; they need (images, {len(fractions)})")
            mean, std = values.mean(axis=0), values.std(axis=0)
            line, = ax.plot(fractions, mean, label=f"{label} ({len(values)} images)")
            ax.fill_between(fractions, mean - std, mean + std, color=line.get_color(), alpha=0.15, linewidth=0)
    for ax, title in zip(axes, ("deletion (most important pixels removed first)",
                                "insertion (most important pixels inserted first)")):
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("fraction of pixels")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(ylabel)
    axes[1].legend(fontsize=8)
    return fig
