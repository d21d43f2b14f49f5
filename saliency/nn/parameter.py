"""`Parameter`: a Tensor that a Module registers as one of its weights."""
import numpy as np

from ..autograd.tensor import Tensor


class Parameter(Tensor):
    """A Tensor that requires grad by default and that `Module` registers when assigned to an attribute.

    `Parameter(t)` shares `t`'s array, as PyTorch's does; results of ops on a Parameter are plain Tensors.
    """

    __slots__ = ()

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            data = np.empty(0, dtype=np.float32)
        super().__init__(data, requires_grad=requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol):
        return Parameter, (self._array, self.requires_grad)
