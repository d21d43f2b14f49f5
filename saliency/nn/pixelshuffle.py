"""`PixelShuffle` and `PixelUnshuffle`: move channels into space and back."""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import functional as F
from .module import Module

if TYPE_CHECKING:
    from ..autograd.tensor import Tensor


class PixelShuffle(Module):
    """`(*, C r^2, H, W)` -> `(*, C, H r, W r)`, r = upscale_factor (F.pixel_shuffle)."""

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """`(*, C, H r, W r)` -> `(*, C r^2, H, W)`, r = downscale_factor (F.pixel_unshuffle)."""

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"
