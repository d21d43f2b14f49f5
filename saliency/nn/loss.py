"""Loss layers: `CrossEntropyLoss`, `NLLLoss`, `MSELoss` (the functions in `functional`, as modules)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import functional as F
from .module import Module

if TYPE_CHECKING:
    from ..autograd.tensor import Tensor, TensorLike


class _Loss(Module):
    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"reduction {reduction!r} is not valid; choose 'mean', 'sum' or 'none'")
        self.reduction = reduction


class CrossEntropyLoss(_Loss):
    """cross_entropy(logits, target): log_softmax over dim 1, then the negative log-likelihood of the integer
    class targets; logits (N, C) or (N, C, ...), reduced by `reduction` ('mean', 'sum' or 'none')."""

    def forward(self, input: Tensor, target: TensorLike) -> Tensor:
        return F.cross_entropy(input, target, reduction=self.reduction)


class NLLLoss(_Loss):
    """Negative log-likelihood of integer class targets: `-input[n, target[n]]` for log-probabilities input (N, C)
    or (N, C, ...), reduced by `reduction` ('mean', 'sum' or 'none')."""

    def forward(self, input: Tensor, target: TensorLike) -> Tensor:
        return F.nll_loss(input, target, reduction=self.reduction)


class MSELoss(_Loss):
    """(input - target)^2 elementwise, input and target of one shape, reduced by `reduction`: the mean
    ('mean'), the sum ('sum') or none ('none')."""

    def forward(self, input: Tensor, target: TensorLike) -> Tensor:
        return F.mse_loss(input, target, reduction=self.reduction)
