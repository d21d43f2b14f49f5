"""Matplotlib Figures of several maps: grid, panels, channel_panels, heatmap_figure; render to pixels.

Only the object-oriented API is used (Figure + the Agg canvas), never pyplot, so this works
headless and leaves matplotlib's global state alone. Colour bars are labelled in the units of
the map: 0..vmax for abs/positive/negative (negative shows magnitudes), -vmax..vmax for "all".
"""
from __future__ import annotations

import io
import numbers
import textwrap
from typing import TYPE_CHECKING, Any, Iterable, Sequence, Union

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Colormap, Normalize
from matplotlib.figure import Figure

from .errors import VizError
from .heatmap import colorize, get_cmap, overlay, resize_values, to_rgb
from .normalize import as_map, common_scale, normalize_with_scale

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.colorbar import Colorbar
    from numpy.typing import ArrayLike, NDArray

Cmap = Union[Colormap, str, None]
Cell = dict[str, Any]   # one panel of a figure: see _cell

CHANNEL_NAMES = ("R", "G", "B")
TITLE_FONTSIZE = 9
# heights and widths in inches reserved around the panels, so that panels keep panel_size
TITLE_CHAR_WIDTH = 0.062   # inches of an average character of a panel title (9 pt), a panel gap allowed
TITLE_LINE = 0.18          # per line of a panel title (9 pt text with matplotlib's 1.2 line spacing, + pad)
SUPTITLE_LINE = 0.26       # per line of the figure title (12 pt)
ROW_TITLE_LINE = 0.22      # per line of a row title (a y label)
MARGIN = 0.15
SHARED_BAR_WIDTH = 0.8     # a colour bar shared by several panels, with its tick labels
SHARED_BAR_FRACTION = 0.15  # the shared bar's own width


def default_title(attr: object) -> str | None:
    """A title "method · seed" from the `.method` and `.seed` attributes of `attr` if present, else None."""
    method, seed = getattr(attr, "method", None), getattr(attr, "seed", None)
    parts = [getattr(method, "__name__", None) or str(method)] if method is not None else []
    if seed is not None:
        text = str(seed)
        parts.append(text if len(text) <= 32 else type(seed).__name__)
    return " · ".join(parts) or None


def _cell(values: NDArray[np.float64] | None, scale: float, title: str | None, sign: str,
          image: NDArray[np.uint8] | None = None, alpha: float | None = None, bar: object = None) -> Cell:
    """One panel: normalized values (None for an image panel), the scale that maps to 1, and `bar`,
    the key of the colour bar it shares with the other cells of that key (None: a bar of its own)."""
    return {"values": values, "scale": scale, "title": title, "sign": sign, "image": image, "alpha": alpha,
            "bar": bar}


def _map_cells(attr: ArrayLike, title: str | None, sign: str, reduce: str, clip_percentile: float | None,
               vmax: float | None, image: NDArray[np.uint8] | None, alpha: float | None, bar: object) -> list[Cell]:
    """The cells one map fills: one, or three (R, G, B) for reduce="rgb"."""
    values, scale = normalize_with_scale(attr, sign, reduce, clip_percentile, vmax)
    if reduce != "rgb":
        return [_cell(values, scale, title, sign, image, alpha, bar)]
    bar = object() if bar is None else bar          # the three channels share a scale, hence a bar
    return [_cell(values[c], scale, f"{title} {name}" if title else name, sign, image, alpha, bar)
            for c, name in enumerate(CHANNEL_NAMES)]


def _map_reduces(reduce: str | Sequence[Sequence[str]], rows: list[list[Any]]) -> list[list[str]]:
    """reduce as one name per map, nested like rows: the same name for every map, or the list given."""
    if isinstance(reduce, str):
        return [[reduce] * len(r) for r in rows]
    nested: Any = reduce if isinstance(reduce, (list, tuple)) else None
    ok = (nested is not None and len(nested) == len(rows)
          and all(isinstance(v, (list, tuple)) and len(v) == len(r) for v, r in zip(nested, rows)))
    if not ok:
        raise VizError(f"reduce must be a name (sum, max_abs, rgb) or a list of lists nested like rows "
                       f"(one name per map), got {reduce!r}")
    return [list(line) for line in nested]


def _row_images(images: Any, n_rows: int) -> list[NDArray[np.uint8] | None]:
    if images is None:
        return [None] * n_rows
    if isinstance(images, np.ndarray) and images.ndim == 4 and images.shape[0] == n_rows and n_rows > 1:
        images = list(images)
    if isinstance(images, (list, tuple)):
        if len(images) != n_rows:
            raise VizError(f"images has {len(images)} entries for {n_rows} rows; pass one image per row or a "
                           "single image")
        return [None if im is None else to_rgb(im) for im in images]
    return [to_rgb(images)] * n_rows


def _is_number(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _map_vmaxes(vmax: Any, rows: list[list[Any]]) -> list[list[float | None]] | None:
    """vmax as one entry (a number or None) per map, nested like rows; None if vmax is None or one number."""
    if vmax is None or _is_number(vmax):
        return None
    nested = vmax.tolist() if isinstance(vmax, np.ndarray) else vmax
    ok = (isinstance(nested, (list, tuple)) and len(nested) == len(rows)
          and all(isinstance(v, (list, tuple)) and len(v) == len(r) for v, r in zip(nested, rows)))
    if not ok:
        raise VizError(f"vmax must be a number, None, or a list of lists nested like rows (one entry per map), "
                       f"got {vmax!r}")
    for r, line in enumerate(nested):
        for c, value in enumerate(line):
            if value is not None and not (_is_number(value) and np.isfinite(value) and value > 0):
                raise VizError(f"vmax[{r}][{c}] must be a finite number > 0 or None, got {value!r}")
    return [list(line) for line in nested]


def _draw_cell(ax: Axes, cell: Cell, cmap: Cmap) -> None:
    ax.set_xticks([])
    ax.set_yticks([])
    if cell["title"]:
        ax.set_title(cell["title"], fontsize=TITLE_FONTSIZE)
    if cell["values"] is None:
        ax.imshow(cell["image"], interpolation="nearest")
        return
    if cell["alpha"] is not None and cell["image"] is not None:
        # the values are normalized already: "abs" keeps them as they are (>= 0), "all" keeps the sign
        picture = overlay(cell["image"], cell["values"], alpha=cell["alpha"],
                          sign="all" if cell["sign"] == "all" else "abs", clip_percentile=None, cmap=cmap, vmax=1.0)
    else:
        picture = colorize(cell["values"], cell["sign"], cmap)
    ax.imshow(picture, interpolation="nearest")


def _draw_colorbar(fig: Figure, axes: Axes | list[Axes], cell: Cell, cmap: Cmap, fraction: float) -> Colorbar:
    """A colour bar in the map's units (0..vmax, or -vmax..vmax for sign="all") beside `axes` (one or a list)."""
    sign, top = cell["sign"], cell["scale"] if cell["scale"] > 0 else 1.0
    norm = Normalize(-top if sign == "all" else 0.0, top)
    bar = fig.colorbar(ScalarMappable(norm, get_cmap(cmap, sign)), ax=axes, fraction=fraction, pad=0.03)
    bar.ax.tick_params(labelsize=7)
    bar.formatter.set_powerlimits((-2, 3))  # type: ignore[attr-defined]
    return bar


def _lines(text: object) -> int:
    return 0 if not text else str(text).count("\n") + 1


def _wrapped(title: str, panel_size: float) -> str:
    """`title` with each line broken at spaces to fit a panel `panel_size` inches wide (about
    TITLE_CHAR_WIDTH inches a character at TITLE_FONTSIZE), so that no title runs into its
    neighbours; a word longer than the panel stays whole."""
    width = max(8, int(panel_size / TITLE_CHAR_WIDTH))
    return "\n".join(textwrap.fill(line, width, break_long_words=False) or line for line in title.split("\n"))


def _figure(rows: list[list[Cell]], row_titles: Sequence[object] | None, cmap: Cmap, colorbar: bool, panel_size: float,
            title: object = None) -> Figure:
    """A Figure with one axes per cell; rows is a list of lists of cells, shorter rows leave gaps.

    The figure is sized so that panels keep panel_size inches whatever the titles: each row gets
    TITLE_LINE inches per line of its longest title, the figure title SUPTITLE_LINE per line. Cells
    with the same "bar" key share one colour bar, drawn beside all of them; fig.panel_axes[r][c] is
    the Axes of cell (r, c).
    """
    n_rows, n_cols = len(rows), max(len(r) for r in rows)
    cell: Cell | None
    cells = [cell for row in rows for cell in row if cell is not None and cell["values"] is not None]
    groups = {cell["bar"] for cell in cells if cell["bar"] is not None}
    groups = {key for key in groups if sum(cell["bar"] == key for cell in cells) > 1} if colorbar else set()
    own_bars = colorbar and any(cell["bar"] not in groups for cell in cells)
    bars_per_row = max(len({c["bar"] for c in row if c is not None and c["bar"] in groups}) for row in rows)
    width = panel_size * n_cols * (1.25 if own_bars else 1.0) + SHARED_BAR_WIDTH * bars_per_row
    if row_titles is not None:
        width += ROW_TITLE_LINE * max(_lines(t) for t in row_titles)
    for cell in (c for row in rows for c in row if c is not None and c["title"]):
        cell["title"] = _wrapped(str(cell["title"]), panel_size)
    title_lines = [max([_lines(c["title"]) for c in row if c is not None] or [0]) for row in rows]
    height = (panel_size * n_rows + TITLE_LINE * sum(title_lines) + SUPTITLE_LINE * _lines(title) + MARGIN)
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(n_rows, n_cols, squeeze=False)
    fig.panel_axes = [[axes[r][c] for c in range(len(row))] for r, row in enumerate(rows)]  # type: ignore[attr-defined]
    shared: dict[object, tuple[Cell, list[Axes]]] = {}
    for r, row in enumerate(rows):
        for c in range(n_cols):
            cell = row[c] if c < len(row) else None
            if cell is None:
                axes[r][c].set_axis_off()
                continue
            _draw_cell(axes[r][c], cell, cmap)
            if colorbar and cell["values"] is not None:
                if cell["bar"] in groups:
                    shared.setdefault(cell["bar"], (cell, []))[1].append(axes[r][c])
                else:
                    _draw_colorbar(fig, axes[r][c], cell, cmap, 0.046)
        if row_titles is not None and row_titles[r]:
            axes[r][0].set_ylabel(str(row_titles[r]))
    for cell, group_axes in shared.values():
        span = len({ax.get_subplotspec().colspan.start for ax in group_axes}) * panel_size  # type: ignore[union-attr]
        _draw_colorbar(fig, group_axes, cell, cmap, min(0.15, SHARED_BAR_FRACTION / span))
    if title:
        fig.suptitle(str(title))
    return fig


def grid(rows: Iterable[Iterable[ArrayLike]], *, images: ArrayLike | Sequence[ArrayLike | None] | None = None,
         titles: Sequence[Sequence[str | None]] | None = None, row_titles: Sequence[object] | None = None,
         sign: str = "abs", reduce: str | Sequence[Sequence[str]] = "sum", clip_percentile: float | None = 99,
         cmap: Cmap = None, vmax: float | Sequence[Sequence[float | None]] | NDArray[Any] | None = None,
         shared_scale: bool = False, colorbar: bool = True, alpha: float | None = None,
         panel_size: float = 2.5) -> Figure:
    """A Figure with one row of heatmaps per entry of `rows` (a list of lists of maps).

    images: None, one image for every row, or one per row (a list, or an (N, C, H, W) array),
    shown in a first column. titles: a list of lists like `rows` (default: from each map's
    .method/.seed). shared_scale: one vmax for every map (common_scale), so colours compare across
    panels. vmax: one number for every map, or a list of lists nested like `rows` with one
    number (or None: the map's own clip_percentile scale) per map; not together with shared_scale.
    When every map has the same scale (shared_scale, or a single vmax) one colour bar is drawn for
    the figure, else each map has its own. alpha: draw each map as an overlay on its row's image.
    A map with reduce="rgb" fills three panels on one scale. reduce: one name for every map, or a
    list of lists nested like `rows` with one name per map (a 1-channel map beside an RGB one).

    fig.panel_axes[r][c] is the Axes of panel c of row r, counting the image panel first (when
    the row has an image) and three panels for each map with reduce="rgb"; use it to draw on a panel.
    """
    table = [list(r) for r in rows]
    top: Any
    if not table or not any(table):
        raise VizError("rows is empty; pass a list of lists of maps, e.g. [[attr]]")
    if titles is not None and (len(titles) != len(table) or any(len(t) != len(r) for t, r in zip(titles, table))):
        raise VizError("titles must have the same nesting as rows: one list of titles per row, one per map")
    if row_titles is not None and len(row_titles) != len(table):
        raise VizError(f"row_titles has {len(row_titles)} entries for {len(table)} rows")
    vmaxes = _map_vmaxes(vmax, table)
    reduces = _map_reduces(reduce, table)
    if shared_scale and not isinstance(reduce, str):
        raise VizError("shared_scale=True needs one reduce for every map; pass a name, not a list")
    if vmaxes is not None and shared_scale:
        raise VizError("shared_scale=True computes one vmax for all maps; pass a list vmax or shared_scale, not both")
    if vmax is None and shared_scale:
        vmax = common_scale([m for r in table for m in r], sign, str(reduce), clip_percentile)
    bar = "shared" if vmaxes is None and vmax is not None else None
    row_images = _row_images(images, len(table))
    cells: list[list[Cell]] = []
    for r, row in enumerate(table):
        line = [] if row_images[r] is None else [_cell(None, 0.0, "image", sign, row_images[r])]
        for c, attr in enumerate(row):
            title = titles[r][c] if titles is not None else default_title(attr)
            top = vmax if vmaxes is None else vmaxes[r][c]
            line += _map_cells(attr, title, sign, reduces[r][c], clip_percentile, top, row_images[r], alpha, bar)
        cells.append(line)
    return _figure(cells, row_titles, cmap, colorbar, panel_size)


def panels(maps: Iterable[ArrayLike], *, image: ArrayLike | None = None, titles: Sequence[str | None] | None = None,
           sign: str = "abs", reduce: str | Sequence[str] = "sum", clip_percentile: float | None = 99,
           cmap: Cmap = None, vmax: float | Sequence[float | None] | NDArray[Any] | None = None,
           shared_scale: bool = False, colorbar: bool = True, alpha: float | None = None,
           panel_size: float = 2.5) -> Figure:
    """A one-row `grid`: the optional image, then one panel per map (three for reduce="rgb").

    vmax: one number for every map, or a list with one number (or None) per map; reduce: one name
    for every map, or a list with one name per map; fig.panel_axes[0] holds the panels' Axes, the
    image's first.
    """
    maps = list(maps)
    grid_reduce: Any = reduce
    if not isinstance(reduce, str) and isinstance(reduce, (list, tuple)):
        grid_reduce = [list(reduce)]
    grid_vmax: Any = vmax
    if vmax is not None and not _is_number(vmax):
        grid_vmax = [vmax.tolist() if isinstance(vmax, np.ndarray) else vmax]
    return grid([maps], images=None if image is None else [image],
                titles=None if titles is None else [list(titles)], sign=sign, reduce=grid_reduce,
                clip_percentile=clip_percentile, cmap=cmap, vmax=grid_vmax, shared_scale=shared_scale,
                colorbar=colorbar, alpha=alpha, panel_size=panel_size)


def heatmap_figure(attr: ArrayLike, *, image: ArrayLike | None = None, title: str | None = None, sign: str = "abs",
                   reduce: str = "sum", clip_percentile: float | None = 99, cmap: Cmap = None,
                   vmax: float | None = None, colorbar: bool = True, alpha: float | None = None,
                   panel_size: float = 3.0) -> Figure:
    """A Figure of one map (beside its image if given), with a labelled colour bar unless colorbar=False."""
    return panels([attr], image=image, titles=None if title is None else [title], sign=sign, reduce=reduce,
                  clip_percentile=clip_percentile, cmap=cmap, vmax=vmax, colorbar=colorbar, alpha=alpha,
                  panel_size=panel_size)


def channel_panels(image: ArrayLike, attr: ArrayLike, *, sign: str = "abs", clip_percentile: float | None = 99,
                   cmap: Cmap = None, shared_scale: bool = True, colorbar: bool = True, title: str | None = None,
                   panel_size: float = 2.5) -> Figure:
    """A Figure: the image, the map of each input channel (R, G, B for 3 channels), and their sum.

    With shared_scale the channel panels share one scale (and one colour bar), so they compare;
    the sum has its own. A map of another size than the image is resized to it (bilinear).
    fig.panel_axes[0] holds the panels' Axes in that order.
    """
    rgb = to_rgb(image)
    arr = as_map(attr)
    if arr.shape[0] > 4:
        raise VizError(f"attr has {arr.shape[0]} channels (shape {np.shape(attr)}); channel_panels takes a "
                       "(C, H, W) map with C <= 4")
    names: Sequence[str] = CHANNEL_NAMES if arr.shape[0] == 3 else [f"channel {c}" for c in range(arr.shape[0])]
    vmax = common_scale(list(arr), sign, "sum", clip_percentile) if shared_scale else None
    cells = [_cell(None, 0.0, "image", sign, rgb)]
    for c, name in enumerate(names):
        values, scale = normalize_with_scale(arr[c], sign, "sum", clip_percentile, vmax)
        cells.append(_cell(resize_values(values, rgb.shape[:2]), scale, name, sign,
                           bar="channels" if shared_scale else None))
    values, scale = normalize_with_scale(arr, sign, "sum", clip_percentile)
    cells.append(_cell(resize_values(values, rgb.shape[:2]), scale, "sum", sign))
    return _figure([cells], None, cmap, colorbar, panel_size, title)


def render(fig: Figure) -> NDArray[np.uint8]:
    """The pixels of a Figure as RGB uint8 (H, W, 3), drawn with the Agg canvas."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


def png_bytes(fig: Figure, dpi: float = 100) -> bytes:
    """The bytes of a PNG of a Figure (what a notebook shows for `_repr_png_`)."""
    buffer = io.BytesIO()
    FigureCanvasAgg(fig)
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()
