"""One thread pool for every kernel: Numba's `parallel=True` regions on its OpenMP layer.

A large call runs as `parts` pieces of its range (images, channels, rows, elements) in one
parallel region: a compiled wrapper whose `prange` hands each piece to the serial kernel
(`run`), so handing work to the other threads costs a few microseconds inside compiled code
instead of a Python hand-over. Matrix products run inside the same regions, each piece calling
OpenBLAS's cblas on one thread (`blas.native_gemm`), so OpenBLAS's own workers are never woken
and never spin against the pool (`matmul` for the operations' products; the convolutions' GEMM
paths call it too). A call smaller than its threshold, or any call when one thread is set, runs
the serial kernel on the calling thread: entering a region has a fixed cost that small calls
do not repay.

The thread count is PyTorch's rule: `set_num_threads(n)`, else the environment
(`SALIENCY_NUM_THREADS`, `OMP_NUM_THREADS`, `NUMBA_NUM_THREADS`, in that order), else the cores this
process may run on. GNU OpenMP's workers spin for a moment after a region, then sleep
(`OMP_WAIT_POLICY` and `GOMP_SPINCOUNT` left to the user; benchmarks/thread_pools.py measures
the choices). GNU OpenMP does not survive `fork()`: a process forked from one that has used the
pool runs every kernel serially (Numba would otherwise end it).
"""
from __future__ import annotations

import math
import os
import threading
from typing import TYPE_CHECKING, Any, Callable

import numba
import numpy as np
from numba import prange

from . import blas
from ._jit import njit

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from numpy.typing import ArrayLike, NDArray

    from .._typing import FloatArray


# Thresholds: a call runs in parts when its output (or input, the larger) has at least
# PARALLEL_ELEMENTS elements, or its products at least PARALLEL_FLOPS floating-point operations
# (about 30 microseconds of one core's GEMM: a region costs 3-15).
PARALLEL_ELEMENTS = 1 << 15
PARALLEL_FLOPS = 4e6


def _layer() -> str:
    """'omp' where Numba's OpenMP layer loads (thread-safe: two Python threads may run kernels at
    once), else Numba's default choice."""
    try:
        from numba.np.ufunc import omppool  # type: ignore[attr-defined]  # noqa: F401
    except ImportError:
        return "default"
    return "omp"


# numba.config sets its options at import time, from the environment: mypy does not see them
numba.config.THREADING_LAYER = _layer()  # type: ignore[attr-defined]


def _from_environment() -> int:
    for name in ("SALIENCY_NUM_THREADS", "OMP_NUM_THREADS", "NUMBA_NUM_THREADS"):
        value = os.environ.get(name, "").strip()
        if value.isdigit() and int(value) >= 1:
            return int(value)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


_threads = min(_from_environment(), numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]  # as above
_forked = False


def _after_fork() -> None:
    global _forked, _threads
    _forked, _threads = True, 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def get_num_threads() -> int:
    """The number of threads the kernels use."""
    return _threads


def set_num_threads(n: int) -> None:
    """Use n threads for every kernel from now on (at most Numba's pool size,
    numba.config.NUMBA_NUM_THREADS, which `NUMBA_NUM_THREADS` sets before the first import)."""
    global _threads
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"set_num_threads needs a positive integer, got {n!r}")
    _threads = 1 if _forked else min(int(n), numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]


def parts(n: int, work: float, flops: bool = False) -> int:
    """Into how many parts to cut a range of n items whose call has `work`: elements against
    PARALLEL_ELEMENTS, or with `flops` floating-point operations against PARALLEL_FLOPS. 1 below
    the threshold, else the pool's size (at most n), whatever the threads in use: where the cut
    falls changes the shapes of a call's products, and so the last bits of their results, and a
    map must not depend on the thread count (set_num_threads, a forked child, a cluster's
    process). The parts are shared among the threads in use (`run`)."""
    if n < 2 or work < (PARALLEL_FLOPS if flops else PARALLEL_ELEMENTS):
        return 1
    return min(numba.config.NUMBA_NUM_THREADS, n)  # type: ignore[attr-defined]


_local = threading.local()


def region(k: int) -> AbstractContextManager[None]:
    """`with region(k):` parallel kernels of this thread use at most k threads (and no more than
    the threads in use), and BLAS products one, within the block."""
    k = min(k, _threads)
    if getattr(_local, "threads", None) != k:
        numba.set_num_threads(k)
        _local.threads = k
    return blas.one_thread()


def run(serial: Callable[..., object], parallel: Callable[..., object], n: int, work: float, *args: Any,
        flops: bool = False) -> None:
    """serial(*args, 0, n) on this thread for a call whose `work` is below its threshold (`parts`);
    else serial on each of k parts of [0, n): through parallel(*args, n, k), a compiled wrapper
    whose `prange(k)` runs serial on each part (`part` gives the ranges), the parts shared among
    the threads in use; on one thread, one call of serial per part. Each part must write only its
    own part of the outputs and use its own scratch."""
    k = parts(n, work, flops)
    if k > 1 and _threads > 1:
        with region(k):
            parallel(*args, n, k)
        return
    with blas.one_thread():
        for t in range(k):
            serial(*args, *part(n, t, k))


@njit(cache=True, inline="always")
def part(n: int, t: int, k: int) -> tuple[int, int]:
    """(start, stop) of part t of k of [0, n): sizes differ by at most one."""
    return t * n // k, (t + 1) * n // k


# ---------------------------------------------------------------------------------------------
# Matrix products in the pool: a batch of products (B1, B2, M, K) @ (B1, B2, K, N), cut by
# products, or, when there are fewer than the pool has threads, each into `units` blocks of rows
# (or columns), from the shape and the pool's size alone (`parts`).


@njit(cache=True, nogil=True)
def _products(a: FloatArray, b: FloatArray, c: FloatArray, lo: int, hi: int) -> None:
    """c[p] = a[p] @ b[p] for the flattened products p in [lo, hi)."""
    B2 = c.shape[1]
    for p in range(lo, hi):
        i, j = p // B2, p % B2
        blas.native_gemm(a[i, j], b[i, j], c[i, j], 0.0)


@njit(cache=True, nogil=True, parallel=True)
def _products_parallel(a: FloatArray, b: FloatArray, c: FloatArray, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = part(n, t, k)
        _products(a, b, c, lo, hi)


@njit(cache=True, nogil=True)
def _rows(a: FloatArray, b: FloatArray, c: FloatArray, units: int, lo: int, hi: int) -> None:
    """Blocks u in [lo, hi) of `units` blocks of rows: c[..., r0:r1, :] = a[..., r0:r1, :] @ b."""
    for u in range(lo, hi):
        r0, r1 = part(c.shape[2], u, units)
        for i in range(c.shape[0]):
            for j in range(c.shape[1]):
                blas.native_gemm(a[i, j, r0:r1], b[i, j], c[i, j, r0:r1], 0.0)


@njit(cache=True, nogil=True, parallel=True)
def _rows_parallel(a: FloatArray, b: FloatArray, c: FloatArray, units: int, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = part(n, t, k)
        _rows(a, b, c, units, lo, hi)


@njit(cache=True, nogil=True)
def _columns(a: FloatArray, b: FloatArray, c: FloatArray, units: int, lo: int, hi: int) -> None:
    """Blocks u in [lo, hi) of `units` blocks of columns: c[..., c0:c1] = a @ b[..., c0:c1]."""
    for u in range(lo, hi):
        c0, c1 = part(c.shape[3], u, units)
        for i in range(c.shape[0]):
            for j in range(c.shape[1]):
                blas.native_gemm(a[i, j], b[i, j, :, c0:c1], c[i, j, :, c0:c1], 0.0)


@njit(cache=True, nogil=True, parallel=True)
def _columns_parallel(a: FloatArray, b: FloatArray, c: FloatArray, units: int, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = part(n, t, k)
        _columns(a, b, c, units, lo, hi)


def _blas_view(a: NDArray[Any]) -> NDArray[Any]:
    """a, or a C-contiguous copy when its last two axes are not a BLAS operand as they are."""
    s, item = a.strides, a.itemsize
    r, c = a.shape[-2], a.shape[-1]
    if (s[-1] == item and (r <= 1 or s[-2] >= item * c)) or (s[-2] == item and (c <= 1 or s[-1] >= item * r)):
        return a
    return np.ascontiguousarray(a)


def _four(a: NDArray[Any], batch: tuple[int, ...]) -> NDArray[Any]:
    """a broadcast to batch + its matrix shape, as 4-D (B1, B2, rows, cols); a view where NumPy can."""
    a = np.broadcast_to(a, batch + a.shape[-2:])
    b2 = batch[-1] if batch else 1
    return a.reshape((math.prod(batch[:-1]), b2) + a.shape[-2:])


def matmul(a: ArrayLike, b: ArrayLike, out: NDArray[Any] | None = None) -> NDArray[Any]:
    """np.matmul(a, b, out=out), its products in the pool on one BLAS thread each: cut by
    products, or by the rows (columns) of each when there are fewer products than threads. For
    the operations' matrix products, weight VJPs and the convolutions' GEMM paths."""
    a, b = np.asarray(a), np.asarray(b)
    if (a.ndim < 2 or b.ndim < 2 or not blas.NATIVE_GEMM or a.dtype != b.dtype
            or a.dtype not in (np.float32, np.float64) or (out is not None and out.dtype != a.dtype)):
        return blas.matmul(a, b, out=out)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
    if b.shape[-2] != K:
        return blas.matmul(a, b, out=out)  # NumPy's error
    shape = batch + (M, N)
    if out is None:
        out = np.empty(shape, a.dtype)
    elif out.shape != shape:
        return blas.matmul(a, b, out=out)
    if out.size == 0:
        return out
    if K == 0:
        out[...] = 0
        return out
    c = out if out.flags.c_contiguous else np.empty(shape, a.dtype)
    a4, b4 = _four(_blas_view(a), batch), _four(_blas_view(b), batch)
    c4 = c.reshape((math.prod(batch[:-1]), batch[-1] if batch else 1, M, N))
    products = c4.shape[0] * c4.shape[1]
    flops = 2.0 * products * M * N * K
    pool = numba.config.NUMBA_NUM_THREADS  # type: ignore[attr-defined]
    if products >= 2 * pool or products % pool == 0 or parts(max(M, N), flops, True) == 1:
        run(_products, _products_parallel, products, flops, a4, b4, c4, flops=True)
    else:  # fewer products than the pool has threads: each in blocks of rows (columns), as many as threads
        units = parts(max(M, N), flops, True)
        run(_rows if M >= N else _columns, _rows_parallel if M >= N else _columns_parallel, units, flops,
            a4, b4, c4, units, flops=True)
    if c is not out:
        out[...] = c
    return out
