"""`Dropout`, `Dropout2d`: inverted dropout (of elements, of whole channels) in training mode, the identity
in evaluation mode."""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import functional as F
from .module import Module

if TYPE_CHECKING:
    import numpy as np

    from ..autograd.tensor import Tensor


class Dropout(Module):
    """Zeroes each element with probability p during training and scales the rest by 1 / (1 - p).

    The mask comes from `generator` (an np.random.Generator), else from the generator that
    `saliency.manual_seed` resets. In eval mode (`model.eval()`) the input passes unchanged.
    """

    def __init__(self, p: float = 0.5, inplace: bool = False, generator: np.random.Generator | None = None) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace
        self.generator = generator

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, generator=self.generator)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout2d(Dropout):
    """Zeroes each whole channel (an H x W plane of one sample) with probability p during training and
    scales the rest by 1 / (1 - p); the identity in eval mode. Masks as `Dropout`'s."""

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout2d(input, self.p, self.training, generator=self.generator)
