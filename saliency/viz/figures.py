"""Matplotlib Figures of several maps: grid, panels, channel_panels, heatmap_figure; render to pixels.

Only the object-oriented API is used (Figure + the Agg canvas), never pyplot, so this works
headless and leaves matplotlib's global state alone. Colour bars are labelled in the units of
the map: 0..vmax for abs/positive/negative (negative shows magnitudes), -vmax..vmax for "all".
"""
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from .errors import VizError
from .heatmap import colorize, get_cmap, overlay, resize_values, to_rgb
from .normalize import as_map, common_scale, normalize_with_scale

CHANNEL_NAMES = ("R", "G", "B")


def default_title(attr):
    """A title "method · seed" from the `.method` and `.seed` attributes of `attr` if present, else None."""
    method, seed = getattr(attr, "method", None), getattr(attr, "seed", None)
    parts = [getattr(method, "__name__", None) or str(method)] if method is not None else []
    if seed is not None:
        text = str(seed)
        parts.append(text if len(text) <= 32 else type(seed).__name__)
    return " · ".join(parts) or None


def _cell(values, scale, title, sign, image=None, alpha=None):
    return {"values": values, "scale": scale, "title": title, "sign": sign, "image": image, "alpha": alpha}


def _map_cells(attr, title, sign, reduce, clip_percentile, vmax, image, alpha):
    """The cells one map fills: one, or three (R, G, B) for reduce="rgb"."""
    values, scale = normalize_with_scale(attr, sign, reduce, clip_percentile, vmax)
    if reduce != "rgb":
        return [_cell(values, scale, title, sign, image, alpha)]
    return [_cell(values[c], scale, f"{title} {name}" if title else name, sign, image, alpha)
            for c, name in enumerate(CHANNEL_NAMES)]


def _row_images(images, n_rows):
    if images is None:
        return [None] * n_rows
    if isinstance(images, np.ndarray) and images.ndim == 4 and images.shape[0] == n_rows and n_rows > 1:
        images = list(images)
    if isinstance(images, (list, tuple)):
        if len(images) != n_rows:
            raise VizError(f"images has {len(images)} entries for {n_rows} rows; pass one image per row or a single image")
        return [None if im is None else to_rgb(im) for im in images]
    return [to_rgb(images)] * n_rows


def _draw_cell(fig, ax, cell, cmap, colorbar):
    ax.set_xticks([])
    ax.set_yticks([])
    if cell["title"]:
        ax.set_title(cell["title"], fontsize=9)
    if cell["values"] is None:
        ax.imshow(cell["image"], interpolation="nearest")
        return
    sign, scale = cell["sign"], cell["scale"]
    if cell["alpha"] is not None and cell["image"] is not None:
        # the values are normalized already: "abs" keeps them as they are (>= 0), "all" keeps the sign
        picture = overlay(cell["image"], cell["values"], alpha=cell["alpha"], sign="all" if sign == "all" else "abs",
                          clip_percentile=None, cmap=cmap, vmax=1.0)
    else:
        picture = colorize(cell["values"], sign, cmap)
    ax.imshow(picture, interpolation="nearest")
    if colorbar:
        top = scale if scale > 0 else 1.0
        norm = Normalize(-top if sign == "all" else 0.0, top)
        bar = fig.colorbar(ScalarMappable(norm, get_cmap(cmap, sign)), ax=ax, fraction=0.046, pad=0.03)
        bar.ax.tick_params(labelsize=7)
        bar.formatter.set_powerlimits((-2, 3))


def _figure(rows, row_titles, cmap, colorbar, panel_size):
    """A Figure with one axes per cell; rows is a list of lists of cells (None leaves a gap)."""
    n_rows, n_cols = len(rows), max(len(r) for r in rows)
    width = panel_size * n_cols * (1.25 if colorbar else 1.0)
    fig = Figure(figsize=(width, panel_size * n_rows + 0.3), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(n_rows, n_cols, squeeze=False)
    for r, row in enumerate(rows):
        for c in range(n_cols):
            ax = axes[r][c]
            cell = row[c] if c < len(row) else None
            if cell is None:
                ax.set_axis_off()
                continue
            _draw_cell(fig, ax, cell, cmap, colorbar)
        if row_titles is not None and row_titles[r]:
            axes[r][0].set_ylabel(str(row_titles[r]))
    return fig


def grid(rows, *, images=None, titles=None, row_titles=None, sign="abs", reduce="sum", clip_percentile=99,
         cmap=None, vmax=None, shared_scale=False, colorbar=True, alpha=None, panel_size=2.5):
    """A Figure with one row of heatmaps per entry of `rows` (a list of lists of maps).

    images: None, one image for every row, or one per row (a list, or an (N, C, H, W) array),
    shown in a first column. titles: a list of lists like `rows` (default: from each map's
    .method/.seed). shared_scale: one vmax for every map (common_scale), so colours compare across
    panels; vmax: an explicit one. alpha: draw each map as an overlay on its row's image. A map
    with reduce="rgb" fills three panels on one scale.
    """
    rows = [list(r) for r in rows]
    if not rows or not any(rows):
        raise VizError("rows is empty; pass a list of lists of maps, e.g. [[attr]]")
    if titles is not None and (len(titles) != len(rows) or any(len(t) != len(r) for t, r in zip(titles, rows))):
        raise VizError("titles must have the same nesting as rows: one list of titles per row, one per map")
    if row_titles is not None and len(row_titles) != len(rows):
        raise VizError(f"row_titles has {len(row_titles)} entries for {len(rows)} rows")
    if vmax is None and shared_scale:
        vmax = common_scale([m for r in rows for m in r], sign, reduce, clip_percentile)
    row_images = _row_images(images, len(rows))
    cells = []
    for r, row in enumerate(rows):
        line = [] if row_images[r] is None else [_cell(None, 0.0, "image", sign, row_images[r])]
        for c, attr in enumerate(row):
            title = titles[r][c] if titles is not None else default_title(attr)
            line += _map_cells(attr, title, sign, reduce, clip_percentile, vmax, row_images[r], alpha)
        cells.append(line)
    return _figure(cells, row_titles, cmap, colorbar, panel_size)


def panels(maps, *, image=None, titles=None, sign="abs", reduce="sum", clip_percentile=99, cmap=None, vmax=None,
           shared_scale=False, colorbar=True, alpha=None, panel_size=2.5):
    """A one-row `grid`: the optional image, then one panel per map (three for reduce="rgb")."""
    return grid([list(maps)], images=None if image is None else [image],
                titles=None if titles is None else [list(titles)], sign=sign, reduce=reduce,
                clip_percentile=clip_percentile, cmap=cmap, vmax=vmax, shared_scale=shared_scale,
                colorbar=colorbar, alpha=alpha, panel_size=panel_size)


def heatmap_figure(attr, *, image=None, title=None, sign="abs", reduce="sum", clip_percentile=99, cmap=None,
                   vmax=None, colorbar=True, alpha=None, panel_size=3.0):
    """A Figure of one map (beside its image if given), with a labelled colour bar unless colorbar=False."""
    return panels([attr], image=image, titles=None if title is None else [title], sign=sign, reduce=reduce,
                  clip_percentile=clip_percentile, cmap=cmap, vmax=vmax, colorbar=colorbar, alpha=alpha,
                  panel_size=panel_size)


def channel_panels(image, attr, *, sign="abs", clip_percentile=99, cmap=None, shared_scale=True, colorbar=True,
                   title=None, panel_size=2.5):
    """A Figure: the image, the map of each input channel (R, G, B for 3 channels), and their sum.

    With shared_scale the channel panels share one scale, so they compare; the sum has its own.
    A map of another size than the image is resized to it (bilinear).
    """
    rgb = to_rgb(image)
    arr = as_map(attr)
    if arr.shape[0] > 4:
        raise VizError(f"attr has {arr.shape[0]} channels (shape {np.shape(attr)}); channel_panels takes a "
                       "(C, H, W) map with C <= 4")
    names = CHANNEL_NAMES if arr.shape[0] == 3 else [f"channel {c}" for c in range(arr.shape[0])]
    vmax = common_scale(list(arr), sign, "sum", clip_percentile) if shared_scale else None
    cells = [_cell(None, 0.0, "image", sign, rgb)]
    for c, name in enumerate(names):
        values, scale = normalize_with_scale(arr[c], sign, "sum", clip_percentile, vmax)
        cells.append(_cell(resize_values(values, rgb.shape[:2]), scale, name, sign))
    values, scale = normalize_with_scale(arr, sign, "sum", clip_percentile)
    cells.append(_cell(resize_values(values, rgb.shape[:2]), scale, "sum", sign))
    fig = _figure([cells], None, cmap, colorbar, panel_size)
    if title:
        fig.suptitle(str(title))
    return fig


def render(fig):
    """The pixels of a Figure as RGB uint8 (H, W, 3), drawn with the Agg canvas."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()
