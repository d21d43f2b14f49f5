"""Attribution map -> 2-D values in [0, 1] (or [-1, 1] for sign="all"); pure NumPy.

A map is anything `np.asarray` turns into a finite real array of shape (H, W), (C, H, W) or
(1, C, H, W). Channels are reduced first, then the sign mode applies, then the values are
divided by a scale (the clip_percentile of the magnitudes shown, or `vmax`) and clipped.
"""
from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Iterable

import numpy as np

from .errors import VizError

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from .._typing import Float64

SIGNS = ("abs", "positive", "negative", "all")
REDUCTIONS = ("sum", "max_abs", "rgb")


def as_map(attr: ArrayLike) -> Float64:
    """The map of `attr` as a float64 (C, H, W) array (C is 1 for an (H, W) map)."""
    arr = np.asarray(attr)
    if arr.dtype == object and hasattr(attr, "map"):
        arr = np.asarray(attr.map)
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise VizError(f"attr must hold real numbers, got dtype {arr.dtype}; pass the attribution map as an ndarray")
    if arr.ndim == 4:
        if arr.shape[0] != 1:
            raise VizError(f"attr has a batch of {arr.shape[0]} maps (shape {arr.shape}); pass one map, e.g. attr[0]")
        arr = arr[0]
    if arr.ndim == 2:
        arr = arr[None]
    if arr.ndim != 3 or arr.size == 0:
        raise VizError(f"attr must have shape (H, W), (C, H, W) or (1, C, H, W) with no empty axis, "
                       f"got {np.shape(attr)}")
    arr = arr.astype(np.float64)
    bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
    if bad:
        raise VizError(f"attr holds {bad} NaN or infinite values; a heatmap needs finite values")
    return arr


def _check_choice(name: str, value: object, choices: Iterable[str]) -> None:
    if not isinstance(value, str) or value not in choices:
        raise VizError(f"unknown {name} {value!r}; choose one of: {', '.join(choices)}")


def reduce_channels(attr: ArrayLike, reduce: str = "sum") -> Float64:
    """(H, W) map for reduce="sum" or "max_abs" (value of largest magnitude, sign kept,
    first channel on a tie); (3, H, W) for reduce="rgb", which needs exactly 3 channels."""
    _check_choice("reduce", reduce, REDUCTIONS)
    arr = as_map(attr)
    if reduce == "sum":
        with np.errstate(over="ignore"):
            total = arr.sum(axis=0)
        if not np.isfinite(total).all():
            raise VizError("the channel sum of attr overflows float64; divide the map by a constant, "
                           "or use reduce='max_abs'")
        return total
    if reduce == "max_abs":
        pick = np.argmax(np.abs(arr), axis=0)
        return np.take_along_axis(arr, pick[None], axis=0)[0]
    if arr.shape[0] != 3:
        raise VizError(f"reduce='rgb' needs a map with 3 channels, got {arr.shape[0]}; use reduce='sum' or 'max_abs'")
    return arr


def apply_sign(values: ArrayLike, sign: str = "abs") -> Float64:
    """|v| for "abs", max(v, 0) for "positive", max(-v, 0) for "negative", v itself for "all"."""
    _check_choice("sign", sign, SIGNS)
    values = np.asarray(values, dtype=np.float64)
    if sign == "abs":
        return np.abs(values)
    if sign == "positive":
        return np.maximum(values, 0.0)
    if sign == "negative":
        return np.maximum(-values, 0.0)
    return values.copy()


def _check_percentile(clip_percentile: float | None) -> None:
    if clip_percentile is None:
        return
    ok = isinstance(clip_percentile, numbers.Real) and not isinstance(clip_percentile, bool)
    if not ok or not 0 < clip_percentile <= 100:
        raise VizError(f"clip_percentile must be a number in (0, 100] or None, got {clip_percentile!r}")


def _scale_of(magnitudes: Float64, clip_percentile: float | None) -> float:
    """The clip_percentile of `magnitudes`, or their maximum if that percentile is 0 or clipping is off."""
    top = float(magnitudes.max())
    if clip_percentile is None or top == 0.0:
        return top
    value = float(np.percentile(magnitudes, clip_percentile))
    return value if value > 0.0 else top


def signed_values(attr: ArrayLike, sign: str = "abs", reduce: str = "sum") -> Float64:
    """The values a heatmap shows, before scaling: reduce_channels, then apply_sign."""
    _check_choice("sign", sign, SIGNS)
    return apply_sign(reduce_channels(attr, reduce), sign)


def common_scale(maps: Iterable[ArrayLike], sign: str = "abs", reduce: str = "sum",
                 clip_percentile: float | None = 99) -> float:
    """One vmax for several maps: the clip_percentile of the magnitudes of all of them together
    (their maximum if clip_percentile is None); 1.0 if every map is zero, so it is always a valid vmax."""
    _check_percentile(clip_percentile)
    if isinstance(maps, np.ndarray) or not hasattr(maps, "__iter__"):
        raise VizError(f"maps must be a list of maps, got {type(maps).__name__}; wrap a single map as [attr]")
    magnitudes = [np.abs(signed_values(m, sign, reduce)).ravel() for m in maps]
    if not magnitudes:
        raise VizError("maps is empty; pass at least one map")
    scale = _scale_of(np.concatenate(magnitudes), clip_percentile)
    return scale if scale > 0.0 else 1.0


def _check_vmax(vmax: float) -> float:
    ok = isinstance(vmax, numbers.Real) and not isinstance(vmax, bool)
    if not ok or not np.isfinite(vmax) or vmax <= 0:
        raise VizError(f"vmax must be a finite number > 0, got {vmax!r}; common_scale(maps) computes one")
    return float(vmax)


def normalize_with_scale(attr: ArrayLike, sign: str = "abs", reduce: str = "sum", clip_percentile: float | None = 99,
                         vmax: float | None = None) -> tuple[Float64, float]:
    """(normalized values, scale): like `normalize`, plus the value that maps to 1 (0.0 for an all-zero map)."""
    _check_percentile(clip_percentile)
    values = signed_values(attr, sign, reduce)
    scale = _scale_of(np.abs(values), clip_percentile) if vmax is None else _check_vmax(vmax)
    if scale == 0.0:
        return np.zeros_like(values), 0.0
    return np.clip(values, -scale, scale) / scale, scale


def normalize(attr: ArrayLike, sign: str = "abs", reduce: str = "sum", clip_percentile: float | None = 99,
              vmax: float | None = None) -> Float64:
    """Values divided by the scale and clipped: in [0, 1], or [-1, 1] for sign="all"; all zeros for a zero map.

    The scale is `vmax` if given, else the clip_percentile of the magnitudes shown (the maximum if
    clip_percentile is None or that percentile is 0). Shape (H, W), or (3, H, W) for reduce="rgb",
    where the three channels share one scale.
    """
    return normalize_with_scale(attr, sign, reduce, clip_percentile, vmax)[0]
