"""`Upsample` and friends: resize (N, C, H, W) images to a size or by a scale factor (nearest or
bilinear), and `PixelShuffle` / `PixelUnshuffle`: move channels into space and back."""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import functional as F
from .module import Module

if TYPE_CHECKING:
    from .._typing import Size
    from ..autograd.tensor import Tensor


class Upsample(Module):
    """F.interpolate(input, size, scale_factor, mode, align_corners, recompute_scale_factor) as a layer;
    scale_factor is kept as a float (or a tuple of floats), as PyTorch keeps it."""

    def __init__(self, size: Size | None = None, scale_factor: float | tuple[float, ...] | None = None,
                 mode: str = "nearest", align_corners: bool | None = None,
                 recompute_scale_factor: bool | None = None) -> None:
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        self.scale_factor: float | tuple[float, ...] | None
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(factor) for factor in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self) -> str:
        info = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Upsample(size, scale_factor, mode='nearest')."""

    def __init__(self, size: Size | None = None, scale_factor: float | tuple[float, ...] | None = None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Upsample(size, scale_factor, mode='bilinear', align_corners=True)."""

    def __init__(self, size: Size | None = None, scale_factor: float | tuple[float, ...] | None = None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
