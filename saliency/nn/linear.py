"""`Linear` (y = x W^T + b, PyTorch's layout and initialisation) and `Identity`."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import functional as F
from . import init
from .module import Module

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import DTypeLike

    from ..autograd.tensor import Tensor


class Identity(Module):
    """Returns its input unchanged (a placeholder, e.g. for a removed layer); ignores any arguments."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class Linear(Module):
    """y = x @ weight.T + bias, weight of shape (out_features, in_features).

    Initialised as PyTorch does: weight ~ U(-1/sqrt(in), 1/sqrt(in)) (kaiming_uniform_ with a=sqrt(5)),
    bias ~ U(-1/sqrt(in), 1/sqrt(in)); `generator` makes it reproducible.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype: DTypeLike | None = None,
                 generator: np.random.Generator | None = None) -> None:
        super().__init__()
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        init.register_weight_and_bias(self, (self.out_features, self.in_features), bias, dtype)
        self.reset_parameters(generator)

    def reset_parameters(self, generator: np.random.Generator | None = None) -> None:
        """Initialise weight and bias again, in place, as PyTorch does: weight by kaiming_uniform_ with
        a=sqrt(5), bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)); from `generator`, else the default one."""
        init.default_weight_and_bias_(self.weight, self.bias, generator)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
