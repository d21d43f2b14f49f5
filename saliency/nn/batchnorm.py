"""`BatchNorm1d`, `BatchNorm2d`: per-channel normalisation with running statistics, as PyTorch's."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import functional as F
from .module import Module
from .parameter import Parameter

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

    from .._typing import Shape
    from ..autograd.tensor import Tensor
    from ..autograd.tensor import device as Device


def affine_parameters(module: Module, shape: int | Shape, affine: bool, bias: bool, dtype: DTypeLike) -> None:
    """Register `weight` (ones) and `bias` (zeros) of `shape` on a norm layer, or None for each
    one it does not have (affine False; bias False), as PyTorch's norm layers do."""
    if affine:
        module.weight = Parameter(np.ones(shape, dtype=dtype))
        if bias:
            module.bias = Parameter(np.zeros(shape, dtype=dtype))
        else:
            module.register_parameter("bias", None)
    else:
        module.register_parameter("weight", None)
        module.register_parameter("bias", None)


class NormBase(Module):
    """What the norms with running statistics share (batch and instance norms): weight and bias
    per channel, and the buffers running_mean, running_var and num_batches_tracked (None when
    no statistics are tracked), PyTorch's state-dict keys."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device: str | Device | None = None, dtype: DTypeLike | None = None,
                 *, bias: bool = True) -> None:
        super().__init__()
        self.num_features, self.eps, self.momentum = int(num_features), eps, momentum
        self.affine, self.track_running_stats, self.use_bias = affine, track_running_stats, affine and bias
        dtype = np.dtype(dtype or np.float32)
        affine_parameters(self, self.num_features, affine, bias, dtype)
        if track_running_stats:
            self.register_buffer("running_mean", np.zeros(self.num_features, dtype=dtype))
            self.register_buffer("running_var", np.ones(self.num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", np.zeros((), dtype=np.int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.use_bias}, track_running_stats={self.track_running_stats}")


class _BatchNorm(NormBase):
    """What the batch norms share: the update of num_batches_tracked and the call."""

    def _check_input(self, input: Tensor) -> None:
        raise NotImplementedError

    def forward(self, input: Tensor) -> Tensor:
        self._check_input(input)
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.num_batches_tracked is not None:
            self.num_batches_tracked._array[...] += 1
            self.num_batches_tracked._written()
            if self.momentum is None:  # PyTorch's cumulative moving average
                momentum = 1.0 / float(self.num_batches_tracked._array)
        # batch statistics in training (updating the running ones) and whenever none are tracked
        return F.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                            training=self.training or self.running_mean is None, momentum=momentum, eps=self.eps)


class BatchNorm2d(_BatchNorm):
    """Normalise each channel of (N, C, H, W): batch statistics in train(), running statistics in eval()."""

    def _check_input(self, input: Tensor) -> None:
        if input.ndim != 4 or input.shape[1] != self.num_features:
            raise ValueError(f"BatchNorm2d({self.num_features}) expects input of shape (N, {self.num_features}, H, W), "
                             f"got {tuple(input.shape)}")


class BatchNorm1d(_BatchNorm):
    """Normalise each channel of (N, C) or (N, C, L): batch statistics in train(), running statistics in eval()."""

    def _check_input(self, input: Tensor) -> None:
        if input.ndim not in (2, 3) or input.shape[1] != self.num_features:
            raise ValueError(f"BatchNorm1d({self.num_features}) expects input of shape (N, {self.num_features}) or "
                             f"(N, {self.num_features}, L), got {tuple(input.shape)}")
