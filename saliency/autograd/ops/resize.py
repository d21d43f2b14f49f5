"""Resizing NCHW images: nearest and bilinear (either align_corners) to any output size.

The output size and the per-axis index/weight tables follow PyTorch's CPU kernels
(`kernels.resize.resize_table`). Nearest upsampling by the same integer factor on both axes runs on
the integer-scale kernels (each pixel repeated s x s times); everything else is a separable
resampling by the tables: output (r, c) = sum of the two row taps times the two column taps.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from .. import rules
from ... import kernels
from ...kernels import resize as _resize
from ..node import Function
from ..geometry import table_window

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from ..._typing import Shape
    from ...kernels.resize import Table
    from ..geometry import Box, Shapes
    from ..patch import Patch

_NAMES = {"nearest": "UpsampleNearest2D", "bilinear": "UpsampleBilinear2D"}


class Upsample(Function):
    """z = x resized to `size` (oh, ow) with mode 'nearest' or 'bilinear'; `scales` holds the user's
    scale factor per axis (None where the size was given or recomputed), which PyTorch's index
    conventions use in place of in/out."""

    __slots__ = ("x_shape", "scale", "mode", "rows", "cols")
    x_shape: Shape
    scale: int
    mode: str
    rows: Table
    cols: Table
    rule = rules.SPLIT

    def forward(self, x: NDArray[Any], *, size: Sequence[int], scales: Sequence[float | None] = (None, None),
                mode: str = "nearest", align_corners: bool = False) -> NDArray[Any]:
        if mode not in _NAMES:
            raise ValueError(f"upsampling mode must be one of {', '.join(_NAMES)}, got {mode!r}")
        if x.ndim != 4:
            raise ValueError(f"upsample expects input of shape (N, C, H, W), got {x.shape}")
        (H, W), (oh, ow) = x.shape[2:], (int(size[0]), int(size[1]))
        self.x_shape, self.mode = x.shape, mode
        self.rows = _resize.resize_table(H, oh, mode, align_corners, scales[0], x.dtype)
        self.cols = _resize.resize_table(W, ow, mode, align_corners, scales[1], x.dtype)
        self.scale = self._integer_scale(H, W, oh, ow)
        if self.scale:
            return kernels.upsample_nearest2d_forward(x, self.scale)
        if mode == "nearest":
            return x[:, :, self.rows[0][:, None], self.cols[0][None, :]]
        return _resize.resample2d_forward(x, self.rows, self.cols)

    def _integer_scale(self, H: int, W: int, oh: int, ow: int) -> int:
        """s when this is nearest upsampling by the integer s on both axes (output row r reads r // s,
        likewise columns), else 0."""
        if self.mode != "nearest" or H == 0 or W == 0 or oh % H or ow % W or oh // H != ow // W:
            return 0
        s = oh // H
        same = (self.rows[0] == np.arange(oh) // s).all() and (self.cols[0] == np.arange(ow) // s).all()
        return s if same else 0

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        if self.scale:
            return (kernels.upsample_nearest2d_grad_input(g, self.x_shape, self.scale),)
        if self.mode == "nearest":
            _, _, H, W = self.x_shape
            dx = _resize.gather_grad_axis(g, self.cols[0], W, -1)
            return (_resize.gather_grad_axis(dx, self.rows[0], H, -2),)
        return (_resize.resample2d_grad_input(g, self.x_shape, self.rows, self.cols),)

    def backward_window(self, p: Patch) -> tuple[Patch | NDArray[Any]]:
        """Each output window reads the input rows and columns its interpolation taps; the adjoint
        sends each cell back to them with the forward's weights."""
        _, _, H, W = self.x_shape
        if self.scale:
            dx, origins = kernels.window.nearest_grad(p.data, p.origins, self.scale)
        else:
            dx, origins = kernels.window.resample_grad(p.data, p.origins, p.map_size, self.rows, self.cols)
        return (p.like(dx, origins, (H, W)),)

    def window_rule(self, box: Box, shapes: Shapes) -> tuple[Box | None]:
        return (table_window(box, self.rows, self.cols),)

    def name(self) -> str:
        return _NAMES[self.mode] + "Backward0"
