"""Pictures of attribution maps: heatmaps, overlays, panels, PNG I/O (NumPy, matplotlib, Pillow).

A map is an ndarray (or anything `np.asarray` turns into one) of shape (H, W), (C, H, W) or
(1, C, H, W); an object with `.method` / `.seed` lends them to default titles. Rendering has
three steps, each with its option:

* reduce: channels -> one map: "sum" (net effect), "max_abs" (the value of largest magnitude
  per pixel, sign kept), or "rgb" (the three channels side by side, on one scale);
* sign: "abs" (|v|), "positive" (max(v, 0)), "negative" (max(-v, 0), a magnitude), or "all"
  (v itself, on a diverging colormap centred at zero with symmetric limits);
* scale: values are divided by vmax (default: the clip_percentile=99 of the magnitudes shown)
  and clipped, giving [0, 1] ([-1, 1] for "all"); common_scale(maps) gives a vmax that makes
  several maps comparable. An all-zero map renders as zero, a constant one as full scale.

Pictures are RGB uint8 (H, W, 3) arrays; Figures are matplotlib Figures on the Agg canvas
(no pyplot). Each Figure of grid, panels, heatmap_figure and channel_panels carries
`fig.panel_axes`, a list of lists of Axes matching its panels ([row][column], image panel
first), to draw on a panel without relying on the order of fig.axes. Panels with one scale
(shared_scale, or a single vmax) share one colour bar; others each have their own.
`Preprocess` turns an image file into a network's input as torchvision's transforms do (resize,
centre crop, mean and std) and gives the crop the network saw, to draw its maps over.
`value_panels` draws maps that are values in a unit (a radius in pixels, a depth in metres), each
with a colour bar labelled with that unit, optionally over the image. Errors are VizError (a ValueError),
ImageError for unreadable image files.
"""
from .curves import deletion_insertion_figure, evaluation_figure
from .errors import ImageError, VizError
from .figures import channel_panels, default_title, grid, heatmap_figure, panels, png_bytes, render
from .files import load_image
from .heatmap import colorize, get_cmap, heatmap, overlay, resize_values, to_rgb
from .normalize import (
    apply_sign,
    common_scale,
    normalize,
    normalize_with_scale,
    reduce_channels,
    signed_values,
)
from .preprocess import Preprocess
from .result import attribution_figure, plot_attribution
from .saving import save
from .style import Style
from .values import value_panels

__all__ = [
    "ImageError",
    "Preprocess",
    "Style",
    "VizError",
    "apply_sign",
    "attribution_figure",
    "channel_panels",
    "colorize",
    "common_scale",
    "default_title",
    "deletion_insertion_figure",
    "evaluation_figure",
    "get_cmap",
    "grid",
    "heatmap",
    "heatmap_figure",
    "load_image",
    "normalize",
    "normalize_with_scale",
    "overlay",
    "panels",
    "plot_attribution",
    "png_bytes",
    "reduce_channels",
    "render",
    "resize_values",
    "save",
    "signed_values",
    "to_rgb",
    "value_panels",
]
