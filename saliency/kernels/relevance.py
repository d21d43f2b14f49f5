"""What the rule-based methods compute on every layer's output, in one pass each (NumPy needs five
or six, with temporaries): the stabilised reciprocal 1 / (z + eps * sign(z)), sign(0) = +1, with
whether any z is exactly 0; and the least and greatest value of an array. Large arrays in parts on
the kernels' threads (`threads.run`), each part writing its own slots.

stabilized_reciprocal(z, eps) -> (out, any_zero); value_range(x) -> (lo, hi). Arrays that are not
C-contiguous float32/float64 go through NumPy, with the same results.
"""
import numpy as np
from numba import prange

from ._jit import njit

from . import threads


@njit(cache=True, nogil=True)
def _reciprocal(z, eps, out, zero, lo, hi):
    found = False
    for i in range(lo, hi):
        v = z[i]
        if v == 0:
            found = True
        out[i] = 1 / (v - eps if v < 0 else v + eps)
    if found:
        zero[0] = 1


@njit(cache=True, nogil=True, parallel=True)
def _reciprocal_parallel(z, eps, out, zero, n, k):
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _reciprocal(z, eps, out, zero[t:t + 1], lo, hi)


def stabilized_reciprocal(z, eps):
    """(1 / (z + eps * sign(z)) with sign(0) = +1, in z's dtype and shape; whether any z == 0)."""
    if type(z) is np.ndarray and z.flags.c_contiguous and z.dtype in (np.float32, np.float64) and z.size:
        out = np.empty_like(z)
        flat, of = z.reshape(-1), out.reshape(-1)
        k = threads.parts(flat.size, flat.size)
        zero = np.zeros(k, np.uint8)
        e = z.dtype.type(eps)
        if k > 1:
            threads.run(_reciprocal, _reciprocal_parallel, flat.size, flat.size, flat, e, of, zero)
        else:
            _reciprocal(flat, e, of, zero, 0, flat.size)
        return out, bool(zero.any())
    z = np.asarray(z)
    out = np.where(z < 0, z - eps, z + eps).astype(z.dtype, copy=False)
    np.reciprocal(out, out=out)
    return out, not z.all()


@njit(cache=True, nogil=True)
def _range(x, lo, hi):
    a = b = x[lo]
    for i in range(lo + 1, hi):
        v = x[i]
        if v < a:
            a = v
        elif v > b:
            b = v
    return a, b


def value_range(x):
    """(x.min(), x.max()) of a non-empty array without NaN, in one pass."""
    if type(x) is np.ndarray and x.flags.c_contiguous and x.dtype in (np.float32, np.float64) and x.size:
        flat = x.reshape(-1)
        return _range(flat, 0, flat.size)
    return x.min(), x.max()
