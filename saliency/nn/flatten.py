"""`Flatten`: merges dimensions start_dim..end_dim (by default all but the batch dimension)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import functional as F
from .module import Module

if TYPE_CHECKING:
    from ..autograd.tensor import Tensor


class Flatten(Module):
    """(N, C, H, W) -> (N, C * H * W) with the defaults start_dim=1, end_dim=-1."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Tensor) -> Tensor:
        return F.flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"
