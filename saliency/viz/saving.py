"""Pictures out: save writes a Figure (PNG, PDF, SVG) or a picture array / Pillow image (PNG), atomically."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.figure import Figure
from PIL import Image

from .._write import atomic_path
from .errors import VizError

if TYPE_CHECKING:
    import os

    from numpy.typing import ArrayLike, NDArray

FIGURE_SUFFIXES = (".png", ".pdf", ".svg")
LAYOUTS = ("HWC", "CHW")


def _as_picture(array: ArrayLike, layout: str | None = None) -> NDArray[np.uint8]:
    """An array to save as uint8 (H, W), (H, W, 3) or (H, W, 4); floats are taken in [0, 1].
    layout "CHW" reads a 3-D array as (C, H, W); a 3-D array that reads both ways ((1, 3 or 4) first
    and (3 or 4) last) needs `layout`, so that a channels-first image is never saved as a wrong picture."""
    arr = np.asarray(array)
    if layout is not None and layout not in LAYOUTS:
        raise VizError(f"layout must be None, 'HWC' or 'CHW', got {layout!r}")
    if arr.ndim == 3 and layout is None and arr.shape[0] in (1, 3, 4) and arr.shape[-1] in (3, 4):
        raise VizError(f"an array of shape {arr.shape} reads as (C, H, W) and as (H, W, C); pass layout='CHW' "
                       f"or layout='HWC'")
    if arr.ndim == 3 and layout == "CHW":
        arr = np.moveaxis(arr, 0, -1)
        arr = arr[..., 0] if arr.shape[-1] == 1 else arr
    ok_shape = arr.ndim == 2 or (arr.ndim == 3 and arr.shape[-1] in (3, 4))
    if not ok_shape or arr.size == 0:
        raise VizError(f"cannot save an array of shape {arr.shape}; pass an (H, W), (H, W, 3) or (H, W, 4) "
                       "picture (for a (C, H, W) image pass layout='CHW')")
    if arr.dtype == np.uint8:
        return arr
    if not np.issubdtype(arr.dtype, np.floating):
        raise VizError(f"cannot save an array of dtype {arr.dtype}; pass uint8, or float in [0, 1]")
    if not np.isfinite(arr).all():
        raise VizError("cannot save an array holding NaN or infinite values")
    return np.round(np.clip(arr, 0.0, 1.0) * 255.0).astype(np.uint8)


def save(picture: Figure | Image.Image | ArrayLike, path: str | os.PathLike[str], dpi: float = 150, *,
         layout: str | None = None) -> Path:
    """Write a Figure (.png, .pdf or .svg, at `dpi`) or a picture array / Pillow image (.png)
    to `path`, creating missing parent folders; returns the path. The file is written beside
    `path` and renamed into place, so `path` is never left truncated. An array is (H, W) or
    (H, W, 3 or 4), or with layout="CHW" (1, 3 or 4, H, W); an array that reads both ways, such as
    (3, H, 3), is refused without `layout`."""
    path = Path(path)
    suffix = path.suffix.lower()
    is_figure = isinstance(picture, Figure)
    allowed = FIGURE_SUFFIXES if is_figure else (".png",)
    if suffix not in allowed:
        kind = "a Figure" if is_figure else "a picture"
        raise VizError(f"cannot save {kind} to '{path}': use a path ending in {' or '.join(allowed)}")
    if not isinstance(picture, (Figure, Image.Image)):
        picture = Image.fromarray(np.ascontiguousarray(_as_picture(picture, layout)))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            if isinstance(picture, Figure):
                picture.savefig(tmp, dpi=dpi, format=suffix[1:])
            else:
                picture.save(tmp, format="PNG")
    except OSError as exc:
        raise VizError(f"cannot write '{path}': {exc.strerror or exc}") from None
    return path
