"""The receptive field of one output pixel: its gradient map, how far it reaches, and the theoretical box."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, cast

import numpy as np

from ..autograd.windows import receptive_box
from ..kernels.radius import mass_radii
from . import seeds as _seeds
from ._core import Call

if TYPE_CHECKING:
    from ..autograd.tensor import TensorLike
    from ._core import Model
    from .result import Attribution


def receptive_field(model: Model, x: TensorLike, pixel: Optional[tuple[int, int]] = None, *,
                    channel: Optional[int] = None) -> Attribution:
    """The gradient map of output pixel (row, col) (all channels, or `channel`): where the model looks.

    `pixel` defaults to the centre of the output map. The pixel's centre in input coordinates is
    ((row + 0.5) * H_in / H_out - 0.5, (col + 0.5) * W_in / W_out - 0.5) (half-pixel centres, so
    output and input may differ in size). Extras:
      radius50, radius90: per image, the smallest Euclidean distance r (input pixels) from that centre
        such that the pixels within r hold >= 50% / 90% of the gradient mass |map| summed over channels
        (NaN for an all-zero map);
      centre: that centre (row, col);
      box: the theoretical receptive field from the recorded graph, a `saliency.autograd.windows.Box`
        (r0, c0, r1, c1), end-exclusive; the map is zero outside it;
      theoretical_size: the box's (rows, cols).
    A pixel outside the output map, or an output without a map, raises SeedError.
    """
    call = Call(model, x)
    xt, y = call.forward(call.x, grad=True)
    h_out, w_out = y.shape[-2:] if y.ndim >= 3 else (0, 0)
    if pixel is None:
        pixel = (h_out // 2, w_out // 2)
    try:
        row, col = pixel
    except (TypeError, ValueError):
        raise _seeds.SeedError(f"pixel must be a (row, col) pair of ints, got {pixel!r}") from None
    seed = cast("_seeds._Pixel", _seeds.pixel(row, col, channel=channel))
    v = seed.vector(y._array)
    g = call.grad(y, xt, v, False)
    box = receptive_box(y, xt, seed.row, seed.col)
    h_in, w_in = call.x.shape[-2:]
    centre = ((seed.row + 0.5) * h_in / h_out - 0.5, (seed.col + 0.5) * w_in / w_out - 0.5)
    mass = np.abs(g).sum(axis=1)
    extras: dict[str, Any] = {"radius50": mass_radius(mass, centre, 0.5), "radius90": mass_radius(mass, centre, 0.9),
                              "centre": centre, "box": box,
                              "theoretical_size": box.size if box is not None else (0, 0)}
    if call.unbatched:
        extras["radius50"], extras["radius90"] = float(extras["radius50"][0]), float(extras["radius90"][0])
    return call.finish("receptive_field", g, seed, y._array, extras)


def mass_radius(mass: np.ndarray, centre: Any, fraction: float) -> np.ndarray:
    """The smallest r such that the entries of `mass` (..., H, W), non-negative, within Euclidean
    distance r of `centre` (row, col) hold >= `fraction` of each map's total: shape (...,); NaN
    where a map's total is 0. r is always one of the entries' distances from the centre; `centre`
    may also give one (row, col) per map, shape (..., 2) (`saliency.kernels.radius.mass_radii`)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
    return mass_radii(mass, centre, (fraction,))[..., 0]
