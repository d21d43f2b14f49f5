"""Padding layers: `ZeroPad2d`, `ConstantPad2d`, `ReflectionPad2d`, `ReplicationPad2d` (F.pad as
layers, with PyTorch's padding argument: one int for all four sides, or (left, right, top, bottom))."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from . import functional as F
from .module import Module

if TYPE_CHECKING:
    from ..autograd.tensor import Tensor


def _four(padding: int | Sequence[int]) -> tuple[int, ...]:
    if isinstance(padding, int) and not isinstance(padding, bool):
        return (padding,) * 4
    sides: tuple[Any, ...] = tuple(padding)  # type: ignore[arg-type]  # (a bool raises TypeError here)
    if len(sides) != 4 or not all(isinstance(p, int) and not isinstance(p, bool) for p in sides):
        raise ValueError(f"padding must be an int or 4 ints (left, right, top, bottom), got {sides!r}")
    return sides


class _Pad2d(Module):
    mode = "constant"

    def __init__(self, padding: int | Sequence[int]) -> None:
        super().__init__()
        self.padding = _four(padding)

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ConstantPad2d(_Pad2d):
    """Pads the last two dimensions (H, W) with `value`: F.pad(input, padding, "constant", value), padding one
    int for all four sides or (left, right, top, bottom)."""

    def __init__(self, padding: int | Sequence[int], value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ZeroPad2d(ConstantPad2d):
    """Pads the last two dimensions (H, W) with zeros: ConstantPad2d(padding, 0)."""

    def __init__(self, padding: int | Sequence[int]) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ReflectionPad2d(_Pad2d):
    """Pads the last two dimensions (H, W) with the mirror image of the border (the border row itself not
    repeated): F.pad(input, padding, "reflect")."""

    mode = "reflect"


class ReplicationPad2d(_Pad2d):
    """Pads the last two dimensions (H, W) by repeating the border row and column: F.pad(input, padding,
    "replicate")."""

    mode = "replicate"
