"""`Parameter`: a Tensor that a Module registers as one of its weights."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..autograd.tensor import Tensor

if TYPE_CHECKING:
    from ..autograd.tensor import TensorLike


class Parameter(Tensor):
    """A Tensor that requires grad by default and that `Module` registers when assigned to an attribute.

    `Parameter(t)` shares `t`'s array, as PyTorch's does; results of ops on a Parameter are plain Tensors.
    """

    __slots__ = ()

    def __init__(self, data: TensorLike | None = None, requires_grad: bool = True) -> None:
        if data is None:
            data = np.empty(0, dtype=np.float32)
        super().__init__(data, requires_grad=requires_grad)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol: Any) -> tuple[type[Parameter], tuple[Any, bool]]:
        return Parameter, (self._array, self.requires_grad)
