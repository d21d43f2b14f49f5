"""The type aliases of the package's signatures, for readers and type checkers (nothing here runs
at import time but the aliases themselves).

    Number      an int or a float
    Size        one size for every dimension, or one per dimension (PyTorch's int or tuple)
    Shape       a tensor's shape
    FloatArray  a float32 or float64 NumPy array, what the kernels and maps are
    Float32     a float32 array (model inputs, the engine's default)
    Float64     a float64 array (the metrics, exact checks)
    BoolArray   a bool array (masks)
    IntArray    an int64 array (indices, labels)
    Index       one entry of a subscript: an int, slice, None, Ellipsis or an int/bool array (or list)

A Tensor argument that also takes arrays and numbers is annotated `TensorLike`, which
`saliency.autograd.tensor` defines beside the Tensor class.
"""
from types import EllipsisType
from typing import Sequence, SupportsIndex, Union

import numpy as np
from numpy.typing import ArrayLike, NDArray

Number = Union[int, float]
Size = Union[int, Sequence[int]]
Shape = tuple[int, ...]
FloatArray = NDArray[np.floating]
Float32 = NDArray[np.float32]
Float64 = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.int64]
Index = Union[SupportsIndex, slice, EllipsisType, None, ArrayLike]

__all__ = ["BoolArray", "Float32", "Float64", "FloatArray", "Index", "IntArray", "Number", "Shape", "Size"]
