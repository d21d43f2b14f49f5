"""Maps -> RGB uint8 pictures: heatmap, overlay on an image, and the image conversion they share."""
from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Sequence

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import Colormap
from PIL import Image

from .errors import VizError
from .normalize import SIGNS, _check_choice, normalize

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from .._typing import Float64

SEQUENTIAL_CMAP = "inferno"
DIVERGING_CMAP = "RdBu_r"


def get_cmap(cmap: Colormap | str | None, sign: str = "abs") -> Colormap:
    """A matplotlib Colormap: `cmap` itself, the one it names, or the default for `sign`
    (inferno for abs/positive/negative, RdBu_r centred at zero for "all")."""
    if cmap is None:
        cmap = DIVERGING_CMAP if sign == "all" else SEQUENTIAL_CMAP
    if isinstance(cmap, Colormap):
        return cmap
    if isinstance(cmap, str) and cmap in colormaps:
        return colormaps[cmap]
    raise VizError(f"unknown cmap {cmap!r}; pass a matplotlib colormap or its name, e.g. 'inferno' or 'RdBu_r'")


def colorize(values: ArrayLike, sign: str = "abs", cmap: Colormap | str | None = None) -> NDArray[np.uint8]:
    """Normalized values ([0, 1], or [-1, 1] for sign="all") -> RGB uint8 of shape values.shape + (3,)."""
    _check_choice("sign", sign, SIGNS)
    values = np.asarray(values, dtype=np.float64)
    position = (values + 1.0) / 2.0 if sign == "all" else values
    return np.ascontiguousarray(get_cmap(cmap, sign)(np.clip(position, 0.0, 1.0), bytes=True)[..., :3])


def heatmap(attr: ArrayLike, sign: str = "abs", reduce: str = "sum", clip_percentile: float | None = 99,
            cmap: Colormap | str | None = None, vmax: float | None = None) -> NDArray[np.uint8]:
    """RGB uint8 (H, W, 3) picture of a map, one pixel per map pixel; see `normalize` for the
    options. For reduce="rgb" the result is (3, H, W, 3): one picture per channel, on one scale."""
    return colorize(normalize(attr, sign, reduce, clip_percentile, vmax), sign, cmap)


def to_rgb(image: ArrayLike) -> NDArray[np.uint8]:
    """An image as RGB uint8 (H, W, 3).

    Accepted: float (C, H, W) in [0, 1] (values outside are clipped), uint8 (H, W, C), either
    layout for either dtype when only one reads as channels, (H, W) grey, a leading batch of 1;
    C is 1 (grey) or 3.
    """
    arr = np.asarray(image)
    if arr.ndim == 4 and arr.shape[0] == 1:
        arr = arr[0]
    if arr.dtype != np.uint8 and not np.issubdtype(arr.dtype, np.floating):
        raise VizError(f"image must be float in [0, 1] or uint8, got dtype {arr.dtype}")
    if arr.ndim == 2:
        arr = arr[..., None]
    elif arr.ndim == 3:
        first, last = arr.shape[0] in (1, 3), arr.shape[-1] in (1, 3)
        channels_first = first and (arr.dtype != np.uint8 or not last)
        if not (first or last):
            raise VizError(f"image of shape {arr.shape} has no axis of 1 or 3 channels; "
                           "pass (C, H, W) or (H, W, C) with C = 1 or 3")
        if channels_first:
            arr = np.moveaxis(arr, 0, -1)
    else:
        raise VizError(f"image must have shape (C, H, W), (H, W, C) or (H, W), got {arr.shape}")
    if arr.dtype != np.uint8:
        if not np.isfinite(arr).all():
            raise VizError("image holds NaN or infinite values; pass values in [0, 1]")
        arr = np.round(np.clip(arr.astype(np.float64), 0.0, 1.0) * 255.0).astype(np.uint8)
    if arr.shape[-1] == 1:
        arr = np.repeat(arr, 3, axis=-1)
    return np.ascontiguousarray(arr)


def resize_values(values: ArrayLike, shape: Sequence[int]) -> Float64:
    """A 2-D float map resized to shape (H, W) with Pillow's bilinear filter (unchanged if it fits)."""
    values = np.asarray(values, dtype=np.float32)
    if values.shape == tuple(shape):
        return values.astype(np.float64)
    resized = Image.fromarray(np.ascontiguousarray(values)).resize((shape[1], shape[0]), Image.Resampling.BILINEAR)
    return np.asarray(resized, dtype=np.float64)


def overlay(image: ArrayLike, attr: ArrayLike, alpha: float = 0.5, sign: str = "abs", reduce: str = "sum",
            clip_percentile: float | None = 99, cmap: Colormap | str | None = None, vmax: float | None = None,
            fade: bool = False) -> NDArray[np.uint8]:
    """RGB uint8 (H, W, 3) of the image blended with the heatmap: (1 - alpha) * image + alpha * heatmap.

    The image is taken as `to_rgb` takes it. A map of another size is resized to the image's size
    (bilinear, Pillow) before it is coloured. alpha=0 gives the image, alpha=1 the heatmap. With
    fade=True the blend weight of each pixel is alpha times its normalized magnitude, so pixels
    with no attribution show the image unchanged. reduce="rgb" is not available here.
    """
    if reduce == "rgb":
        raise VizError("overlay needs one map per image; use reduce='sum' or 'max_abs', or channel_panels")
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not 0 <= alpha <= 1:
        raise VizError(f"alpha must be a number in [0, 1], got {alpha!r}")
    rgb = to_rgb(image)
    values = resize_values(normalize(attr, sign, reduce, clip_percentile, vmax), rgb.shape[:2])
    heat = colorize(values, sign, cmap).astype(np.float64)
    weight = float(alpha) * np.abs(np.clip(values, -1.0, 1.0))[..., None] if fade else float(alpha)
    blend = (1.0 - weight) * rgb + weight * heat
    return np.round(blend).astype(np.uint8)
