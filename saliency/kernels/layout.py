"""Memory formats of activations: an array's strides are its format, as PyTorch's `channels_last`.

A 4-D activation (N, C, H, W) is either contiguous (NCHW: each channel a plane) or channels-last
(its axes in memory N, H, W, C: the channels of a pixel side by side), the same shape either way,
so that every operation reads it through NumPy's indexing whatever its format. Kernels that run
faster channels-last (the depthwise kernels, 1x1 convolutions as one product over all pixels)
take it as it is and return channels-last; elementwise kernels keep the format they are given;
every other kernel takes a contiguous copy (`np.ascontiguousarray`), so a format only ever costs a
copy where a layer needs the other, never a wrong index.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray


def channels_last(a: NDArray[Any]) -> bool:
    """Whether the 4-D array a is channels-last and not also contiguous (with axes of length 1 it
    may be both: then it counts as contiguous)."""
    return a.ndim == 4 and not a.flags.c_contiguous and a.transpose(0, 2, 3, 1).flags.c_contiguous


def nhwc(a: NDArray[Any]) -> NDArray[Any]:
    """The (N, H, W, C) C-contiguous array of the 4-D a: a view when a is channels-last (or C or H
    and W are 1), else a copy."""
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1))


def dense_order(a: NDArray[Any]) -> tuple[int, ...] | None:
    """The axes of a from the slowest in memory to the fastest, when a's elements fill one block of
    memory without gaps (contiguous in some order of its axes); else None."""
    if a.flags.c_contiguous:
        return tuple(range(a.ndim))
    order = tuple(sorted(range(a.ndim), key=lambda i: -a.strides[i]))
    return order if a.transpose(order).flags.c_contiguous else None


def flat(a: NDArray[Any], order: tuple[int, ...] | None) -> NDArray[Any]:
    """The elements of a in memory order, a 1-D view (order from `dense_order`)."""
    return a.reshape(-1) if a.flags.c_contiguous else a.transpose(order).reshape(-1)
