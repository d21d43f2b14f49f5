"""What the rule-based methods compute on every layer's output, in one pass each (NumPy needs five
or six, with temporaries): the stabilised reciprocal 1 / (z + eps * sign(z)), sign(0) = +1, with
whether any z is exactly 0; and the least and greatest value of an array. Large arrays in parts on
the kernels' threads (`threads.run`), each part writing its own slots.

stabilized_reciprocal(z, eps) -> (out, any_zero); value_range(x) -> (lo, hi). Arrays that are not
C-contiguous float32/float64 go through NumPy, with the same results.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numba import prange

from ._jit import njit

from . import threads

if TYPE_CHECKING:
    from .._typing import FloatArray, IntArray


@njit(cache=True, nogil=True)
def _reciprocal(z: FloatArray, eps: np.floating, one: np.floating, out: FloatArray, lo: int, hi: int) -> int:
    """out = one / (z + eps * sign(z)) on [lo, hi); returns how many z there are exactly 0. Branch-free,
    in z's dtype (one, eps), over slices indexed from 0 (an index that might be negative wraps around,
    which keeps LLVM from vectorising): so that the loop is vectorised."""
    z, out = z[lo:hi], out[lo:hi]
    zeros = 0
    for i in range(z.shape[0]):
        v = z[i]
        zeros += v == 0
        out[i] = one / (v + (eps if v >= 0 else -eps))
    return zeros


@njit(cache=True, nogil=True, parallel=True)
def _reciprocal_parallel(z: FloatArray, eps: np.floating, one: np.floating, out: FloatArray, zeros: IntArray, n: int,
                         k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        zeros[t] = _reciprocal(z, eps, one, out, lo, hi)


def stabilized_reciprocal(z: FloatArray, eps: float) -> tuple[FloatArray, bool]:
    """(1 / (z + eps * sign(z)) with sign(0) = +1, in z's dtype and shape; whether any z == 0)."""
    if type(z) is np.ndarray and z.flags.c_contiguous and z.dtype in (np.float32, np.float64) and z.size:
        out = np.empty_like(z)
        flat, of = z.reshape(-1), out.reshape(-1)
        e, one = z.dtype.type(eps), z.dtype.type(1)
        k = threads.parts(flat.size, flat.size // 8)  # memory-bound: parts only for the largest maps
        if k == 1:
            return out, _reciprocal(flat, e, one, of, 0, flat.size) > 0
        zeros = np.zeros(k, np.int64)
        with threads.region(k):
            _reciprocal_parallel(flat, e, one, of, zeros, flat.size, k)
        return out, bool(zeros.any())
    z = np.asarray(z)
    out = np.where(z < 0, z - eps, z + eps).astype(z.dtype, copy=False)
    np.reciprocal(out, out=out)
    return out, not z.all()


@njit(cache=True, nogil=True)
def _range(x: FloatArray) -> tuple[Any, Any]:
    a = b = x[0]
    for i in range(x.shape[0]):
        v = x[i]
        a = min(a, v)
        b = max(b, v)
    return a, b


def value_range(x: FloatArray) -> tuple[Any, Any]:
    """(x.min(), x.max()) of a non-empty array without NaN, in one pass."""
    if type(x) is np.ndarray and x.flags.c_contiguous and x.dtype in (np.float32, np.float64) and x.size:
        flat = x.reshape(-1)
        return _range(flat)
    return x.min(), x.max()
