"""Activation layers: `ReLU`, `ReLU6`, `Hardtanh`, `LeakyReLU`, `ELU`, `SiLU`, `Hardswish`,
`Hardsigmoid`, `GELU`, `Softplus`, `Mish`, `PReLU`, `Sigmoid`, `Tanh`, `Softmax`, `LogSoftmax`.

Constructors, attributes, `extra_repr` and parameter names are PyTorch's. `inplace=True` is
accepted (and shown in the repr, as PyTorch shows it) but the result is always a new tensor: an
in-place op would cut the graph, and the values are the same.
"""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

from . import functional as F
from .module import Module
from .parameter import Parameter

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

    from ..autograd.tensor import Tensor
    from ..autograd.tensor import device as Device


def _inplace(inplace: bool) -> str:
    return ", inplace=True" if inplace else ""


class ReLU(Module):
    """max(x, 0) elementwise. `inplace` is accepted for compatibility (the result is a new tensor)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.relu(input)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Sigmoid(Module):
    """1 / (1 + exp(-x)) elementwise."""

    def forward(self, input: Tensor) -> Tensor:
        return F.sigmoid(input)


class Tanh(Module):
    """tanh(x) elementwise."""

    def forward(self, input: Tensor) -> Tensor:
        return F.tanh(input)


class Softmax(Module):
    """exp(x) / sum(exp(x)) along `dim`."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """log(softmax(x)) along `dim`."""

    def forward(self, input: Tensor) -> Tensor:
        return F.log_softmax(input, self.dim)


class Hardtanh(Module):
    """min(max(x, min_val), max_val) elementwise. `min_value` / `max_value` are the deprecated
    names of min_val / max_val (with a FutureWarning, as in PyTorch)."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False,
                 min_value: float | None = None, max_value: float | None = None) -> None:
        super().__init__()
        if min_value is not None:
            warnings.warn("keyword argument `min_value` is deprecated and renamed to `min_val`", FutureWarning,
                          stacklevel=2)
            min_val = min_value
        if max_value is not None:
            warnings.warn("keyword argument `max_value` is deprecated and renamed to `max_val`", FutureWarning,
                          stacklevel=2)
            max_val = max_value
        if not max_val > min_val:
            raise ValueError(f"Hardtanh's max_val ({max_val}) must be greater than its min_val ({min_val})")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.hardtanh(input, self.min_val, self.max_val)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}{_inplace(self.inplace)}"


class ReLU6(Hardtanh):
    """min(max(x, 0), 6) elementwise: Hardtanh(0, 6)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    """x where x > 0, negative_slope * x elsewhere."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}{_inplace(self.inplace)}"


class ELU(Module):
    """x where x > 0, alpha * (exp(x) - 1) elsewhere."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.elu(input, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}{_inplace(self.inplace)}"


class SiLU(Module):
    """x * sigmoid(x) elementwise."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.silu(input)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Hardswish(Module):
    """x * relu6(x + 3) / 6 elementwise (PyTorch's repr does not show inplace)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.hardswish(input)


class Hardsigmoid(Module):
    """relu6(x + 3) / 6 elementwise (PyTorch's repr does not show inplace)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.hardsigmoid(input)


class GELU(Module):
    """x * Phi(x) elementwise (Phi the standard normal CDF); approximate='tanh' for the tanh formula."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU's approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Softplus(Module):
    """log(1 + exp(beta * x)) / beta elementwise, and x where beta * x > threshold."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input: Tensor) -> Tensor:
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Mish(Module):
    """x * tanh(softplus(x)) elementwise."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.mish(input)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class PReLU(Module):
    """x where x > 0, weight * x elsewhere, with a learned `weight` of `num_parameters` elements: one
    for all channels, or one per channel (dimension 1 of the input), each initialised to `init`."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device: str | Device | None = None,
                 dtype: DTypeLike | None = None) -> None:
        super().__init__()
        if device is not None and str(device) != "cpu":
            raise ValueError(f"PReLU's device must be the CPU (the only device), got {device!r}")
        self.num_parameters, self.init = int(num_parameters), init
        self.weight = Parameter(np.empty(self.num_parameters, dtype=np.dtype(dtype or np.float32)))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Set every element of `weight` to `init`, in place."""
        self.weight._array[...] = self.init
        self.weight._written()

    def forward(self, input: Tensor) -> Tensor:
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"
