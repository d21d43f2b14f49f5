"""Loss layers: `CrossEntropyLoss`, `NLLLoss`, `MSELoss` (the functions in `functional`, as modules)."""
from . import functional as F
from .module import Module


class _Loss(Module):
    def __init__(self, reduction="mean"):
        super().__init__()
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"reduction {reduction!r} is not valid; choose 'mean', 'sum' or 'none'")
        self.reduction = reduction


class CrossEntropyLoss(_Loss):
    """cross_entropy(logits, target): log_softmax over dim 1, then the negative log-likelihood."""

    def forward(self, input, target):
        return F.cross_entropy(input, target, reduction=self.reduction)


class NLLLoss(_Loss):
    """Negative log-likelihood of integer class targets, given log-probabilities."""

    def forward(self, input, target):
        return F.nll_loss(input, target, reduction=self.reduction)


class MSELoss(_Loss):
    """Mean (or sum) of squared differences."""

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)
