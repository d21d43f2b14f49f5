"""`GroupNorm`, `LayerNorm`, `InstanceNorm2d`: normalisation with per-sample statistics, as PyTorch's
(same constructor arguments, parameter and buffer names, so state dicts load)."""
from __future__ import annotations

import numbers
from typing import TYPE_CHECKING

import numpy as np

from . import functional as F
from .batchnorm import NormBase, affine_parameters
from .module import Module

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

    from .._typing import Size
    from ..autograd.tensor import Tensor
    from ..autograd.tensor import device as Device


class GroupNorm(Module):
    """Normalise (N, C, *) over each sample's groups of C / num_groups channels; weight and bias per channel."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                 device: str | Device | None = None, dtype: DTypeLike | None = None, *, bias: bool = True) -> None:
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = int(num_groups), int(num_channels), eps, affine
        self.use_bias = affine and bias
        affine_parameters(self, self.num_channels, affine, bias, np.dtype(dtype or np.float32))

    def forward(self, input: Tensor) -> Tensor:
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, bias={self.use_bias}"


class LayerNorm(Module):
    """Normalise over the trailing dimensions `normalized_shape`; weight and bias of that shape."""

    def __init__(self, normalized_shape: Size, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 device: str | Device | None = None, dtype: DTypeLike | None = None) -> None:
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (int(normalized_shape),)
        # mypy does not narrow by numbers.Integral: normalized_shape is a sequence here
        self.normalized_shape = tuple(int(n) for n in normalized_shape)  # type: ignore[union-attr]
        self.eps, self.elementwise_affine, self.use_bias = eps, elementwise_affine, elementwise_affine and bias
        affine_parameters(self, self.normalized_shape, elementwise_affine, bias, np.dtype(dtype or np.float32))

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.use_bias}")


class InstanceNorm2d(NormBase):
    """Normalise each channel of each sample of (N, C, H, W) or (C, H, W) over its positions. With
    track_running_stats, train() also updates running_mean / running_var and eval() uses them."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device: str | Device | None = None, dtype: DTypeLike | None = None,
                 *, bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in (3, 4):
            raise ValueError(f"InstanceNorm2d expects input of shape (N, C, H, W) or (C, H, W), "
                             f"got {tuple(input.shape)}")
        if input.shape[-3] != self.num_features and self.affine:
            raise ValueError(f"InstanceNorm2d({self.num_features}) expects {self.num_features} channels, got input "
                             f"of shape {tuple(input.shape)}")
        if input.ndim == 3:
            return self.forward(input.unsqueeze(0)).squeeze(0)
        return F.instance_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                               use_input_stats=self.training or not self.track_running_stats,
                               momentum=0.1 if self.momentum is None else self.momentum, eps=self.eps)
