"""Pixel shuffles: channels into space and back (sub-pixel convolution heads, space-to-depth stems).

pixel_shuffle by r: (*, C r^2, H, W) -> (*, C, H r, W r), out[..., c, h r + i, w r + j] =
x[..., c r^2 + i r + j, h, w]; pixel_unshuffle is its inverse. Each is a reshape and a transpose, and
the VJP of one is the other on the gradient (extra leading seed dimensions pass through). On
windowed gradients (pixel seeds) the same holds window by window: a shuffle's output window is
widened to whole r x r blocks, which unshuffle to whole input cells.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .. import rules
from ...kernels import window as _window
from ..geometry import Box
from ..node import Function

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from ..geometry import Shapes
    from ..patch import Patch


def shuffle(x: NDArray[Any], r: int) -> NDArray[Any]:
    """(*, C r^2, H, W) -> (*, C, H r, W r)."""
    *lead, c, h, w = x.shape
    n = len(lead)
    y = x.reshape(*lead, c // (r * r), r, r, h, w)
    y = y.transpose(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return y.reshape(*lead, c // (r * r), h * r, w * r)


def unshuffle(x: NDArray[Any], r: int) -> NDArray[Any]:
    """(*, C, H r, W r) -> (*, C r^2, H, W)."""
    *lead, c, h, w = x.shape
    n = len(lead)
    y = x.reshape(*lead, c, h // r, r, w // r, r)
    y = y.transpose(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return y.reshape(*lead, c * r * r, h // r, w // r)


class PixelShuffle(Function):
    """z = pixel_shuffle(x, r)."""

    __slots__ = ("r",)
    r: int
    rule = rules.ROUTE

    def forward(self, x: NDArray[Any], *, upscale_factor: int) -> NDArray[Any]:
        self.r = upscale_factor
        return shuffle(x, upscale_factor)

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        return (unshuffle(g, self.r),)

    def backward_window(self, p: Patch) -> tuple[Patch | NDArray[Any]]:
        """Each window widened to the r x r blocks it touches (zeros added), then unshuffled: input
        windows of (h + r - 1) // r + 1 cells at origin // r."""
        r = self.r
        lo = (p.origins // r) * r
        h, w = (((n + r - 1) // r + 1) * r for n in p.size)
        blocks = np.zeros((len(p.origins),) + p.lead + (h, w), p.dtype)
        _window.add_into(blocks, p.data, p.origins - lo)
        rows, cols = p.map_size
        return (p.like(unshuffle(blocks, r), lo // r, (rows // r, cols // r)),)

    def window_rule(self, box: Box, shapes: Shapes) -> tuple[Box]:
        """Output row R reads input row R // r (in one of r^2 channels), likewise columns."""
        r = self.r
        return (Box(box.r0 // r, box.c0 // r, (box.r1 - 1) // r + 1, (box.c1 - 1) // r + 1),)


class PixelUnshuffle(Function):
    """z = pixel_unshuffle(x, r)."""

    __slots__ = ("r",)
    r: int
    rule = rules.ROUTE

    def forward(self, x: NDArray[Any], *, downscale_factor: int) -> NDArray[Any]:
        self.r = downscale_factor
        return unshuffle(x, downscale_factor)

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        return (shuffle(g, self.r),)

    def backward_window(self, p: Patch) -> tuple[Patch | NDArray[Any]]:
        """Each window shuffled: r times its size at r times its origin."""
        rows, cols = p.map_size
        return (p.like(shuffle(p.data, self.r), p.origins * self.r, (rows * self.r, cols * self.r)),)

    def window_rule(self, box: Box, shapes: Shapes) -> tuple[Box]:
        """Output row R reads the r input rows R r .. R r + r - 1, likewise columns."""
        r = self.r
        return (Box(box.r0 * r, box.c0 * r, box.r1 * r, box.c1 * r),)
