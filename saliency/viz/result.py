"""The picture of one attribution result, as `saliency map` draws it: the image, the model's output
beside it when the output is dense (of several channels, a segmentation's classes, each pixel's
argmax), and the map (a panel per seed for K seeds at once), titled
with the method and the seed.

It reads the result's attributes only (`map`, `seed`, `method`, `output`, `input`), so it takes an
`Attribution` or anything shaped like one, and the maps of a batch store (`attribution_figure`
of one stored map with its image).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from .errors import VizError
from .figures import panels
from .style import Style

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from numpy.typing import ArrayLike, NDArray

SHOWN_SEEDS = 8  # panels of K seeds' maps drawn at most (the figure says how many it leaves out)


def _pick(values: NDArray[Any], index: int, batched: bool, what: str) -> NDArray[Any]:
    """values[index] when `batched`, else values; an IndexError-free one-line VizError."""
    if not batched:
        if index not in (0, -1):
            raise VizError(f"the {what} holds one image; index must be 0, got {index}")
        return values
    if not -len(values) <= index < len(values):
        raise VizError(f"index {index} is out of range for the {len(values)} images of the {what}")
    return values[index]


def figure_parts(result: Any, index: int = 0, classes: Sequence[str] | None = None
                 ) -> tuple[NDArray[Any] | None, list[NDArray[Any]], list[str], NDArray[Any] | None]:
    """(image or None, [maps], [titles], dense output (C, H, W) or None) of image `index` of `result`."""
    amap = np.asarray(result.map)
    count = getattr(result.seed, "count", None)
    image = getattr(result, "input", None)
    lead = 0 if count is None else 1           # a leading K for K seeds
    batched = amap.ndim - lead == 4
    if image is not None:
        image = _pick(np.asarray(image), index, np.ndim(image) == 4, "result")
    if count is None:
        maps = [_pick(amap, index, batched, "result")]
    else:
        maps = list(amap[:, index] if batched else amap)
    method = getattr(result.method, "__name__", result.method)
    describe = getattr(result.seed, "describe", None)
    seed_text = describe(classes) if callable(describe) else str(result.seed)
    if count is None:
        titles = [f"{method} · {seed_text}"]
    else:  # a batched seed's items (seeds.classes, seeds.pixels) describe themselves
        items = getattr(result.seed, "items", None) or [None] * count
        titles = [f"{method} · {item.describe(classes)}" if item is not None else f"{method} · seed {k + 1} of {count}"
                  for k, item in enumerate(items)]
        maps, titles = maps[:SHOWN_SEEDS], titles[:SHOWN_SEEDS]
    output = getattr(result, "output", None)
    dense = None
    if output is not None:
        out = np.asarray(output)
        out = _pick(out, index, batched, "result") if batched else out
        if out.ndim >= 2:                       # (C, H, W) or (H, W): a dense output
            dense = out.reshape(-1, *out.shape[-2:])
    return image, maps, titles, dense


def attribution_figure(result: Any, image: ArrayLike | None = None, *, index: int = 0,
                       classes: Sequence[str] | None = None, style: Style = Style()) -> Figure:
    """A Figure of image `index` of `result` (an Attribution): the image (`image`, else the
    result's input), the dense output if the model's output is a map, and the map (K panels for K
    seeds), drawn in `style` (a `viz.Style`). `classes`: class names for the title's seed."""
    shown: ArrayLike | None
    shown, maps, titles, dense = figure_parts(result, index, classes)
    shown = shown if image is None else image
    reduces = ["sum" if m.shape[-3] == 1 and style.reduce == "rgb" else style.reduce for m in maps]
    vmax = None
    if dense is not None:                       # beside its map: one channel as it is; of several
        if len(dense) > 1:                      # (a segmentation's classes), each pixel's argmax,
            vmax = [len(dense) - 1] + [None] * len(maps)  # coloured on the scale of the channels
            dense, title = dense.argmax(axis=0)[None].astype(np.float32), f"argmax of the {len(dense)} channels"
        else:
            title = "model output"
        maps.insert(0, dense)
        titles.insert(0, title)
        reduces.insert(0, "sum")
    return panels(maps, image=shown, titles=titles, sign=style.sign, reduce=reduces,
                  clip_percentile=style.clip_percentile, cmap=style.cmap, vmax=vmax,
                  alpha=style.alpha if style.overlay and shown is not None else None)


def plot_attribution(result: Any, ax: Axes | None = None, *, index: int = 0, seed_index: int = 0,
                     image: ArrayLike | None = None, style: Style = Style()) -> Axes:
    """Draw the map of image `index` (seed `seed_index` for K seeds) of `result` on a matplotlib
    Axes (default: pyplot's current one), coloured as `viz.heatmap` (over the image with
    style.overlay), titled with the method and seed; returns the Axes."""
    from .heatmap import heatmap, overlay

    shown: ArrayLike | None
    shown, maps, titles, _ = figure_parts(result, index)
    shown = shown if image is None else image
    if not 0 <= seed_index < len(maps):
        raise VizError(f"seed_index {seed_index} is out of range for the {len(maps)} seeds of the map")
    m, reduce = maps[seed_index], style.reduce
    reduce = "sum" if reduce == "rgb" else reduce   # one Axes: the channels summed
    if style.overlay and shown is not None:
        rgb = overlay(shown, m, alpha=style.alpha, sign=style.sign, reduce=reduce,
                      clip_percentile=style.clip_percentile, cmap=style.cmap)
    else:
        rgb = heatmap(m, sign=style.sign, reduce=reduce, clip_percentile=style.clip_percentile, cmap=style.cmap)
    if ax is None:
        import matplotlib.pyplot as plt

        ax = plt.gca()
    ax.imshow(rgb)
    ax.set_title(titles[seed_index], fontsize=9)
    ax.set_axis_off()
    return ax
