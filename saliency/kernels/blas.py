"""Matrix products for the kernels, on one BLAS thread.

NumPy's OpenBLAS splits every product over all cores, and after each product its worker threads
spin for about a tenth of a second waiting for more work. Those spinning workers hold the cores
that the kernels' own threads (`threads.py`) need, and slow every kernel that follows, so the
kernels' products run on one BLAS thread (`matmul`, `gemm`, both under `one_thread`), and large
ones run in parts in the kernels' pool instead (`threads.matmul`).
This uses OpenBLAS's `openblas_set_num_threads_local` (OpenBLAS >= 0.3.27, which NumPy's wheels
bundle); where that is not found, every product runs as NumPy would run it.

Despite its name, in the pthreads build NumPy ships that setter changes the thread count of the
whole process. So the one-thread setting is a shared section (`one_thread`): the first thread to
enter it saves the count and sets 1, the last to leave restores the count. Threads computing maps
at once never leave the process on one BLAS thread, and products of other threads that run while
a section is open use one thread too.
"""
from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import threading
from typing import TYPE_CHECKING, Any, Callable, Literal

import llvmlite.binding
import numba
import numpy as np
from numba import types

from ._jit import njit

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from .._typing import FloatArray


def _openblas_libraries() -> list[ctypes.CDLL]:
    """The OpenBLAS libraries bundled with NumPy (wheels for Linux/Windows, and macOS), loaded."""
    here = os.path.dirname(np.__file__)
    found = []
    for path in glob.glob(os.path.join(here, os.pardir, "numpy.libs", "*openblas*")) + \
            glob.glob(os.path.join(here, ".dylibs", "*openblas*")):
        try:
            found.append(ctypes.CDLL(path))
        except OSError:
            continue
    return found


def _thread_setter(libraries: list[ctypes.CDLL]) -> Callable[[int], int] | None:
    """OpenBLAS's thread-local thread-count setter from the library NumPy loaded, or None."""
    for lib in libraries:
        setter = getattr(lib, "openblas_set_num_threads_local", None)
        if setter is not None:
            setter.argtypes, setter.restype = [ctypes.c_int], ctypes.c_int
            return setter
    return None


# cblas_?gemm under the names NumPy's wheels have exported it: (prefix, suffix, integer type).
# NumPy 2 bundles scipy-openblas (ILP64, prefixed); NumPy 1.x's ILP64 build uses only the suffix.
_GEMM_NAMES = [("scipy_cblas_", "64_", ctypes.c_int64), ("cblas_", "64_", ctypes.c_int64), ("cblas_", "", ctypes.c_int)]
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


def _gemm_functions(libraries: list[ctypes.CDLL]) -> dict[np.dtype[Any], Any]:
    """{dtype: cblas gemm} for float32 and float64 from NumPy's OpenBLAS, or {} where not found."""
    for lib in libraries:
        for prefix, suffix, integer in _GEMM_NAMES:
            found = {}
            for dtype, letter, real in ((np.dtype(np.float32), "s", ctypes.c_float),
                                        (np.dtype(np.float64), "d", ctypes.c_double)):
                f = getattr(lib, f"{prefix}{letter}gemm{suffix}", None)
                if f is None:
                    break
                p = ctypes.c_void_p
                f.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, integer, integer, integer, real, p, integer,
                              p, integer, real, p, integer]
                f.restype = None
                found[dtype] = f
            if len(found) == 2:
                return found
    return {}


_libraries = _openblas_libraries()
_set_threads = _thread_setter(_libraries)
_gemm = _gemm_functions(_libraries)
# Whether `gemm` runs in place through NumPy's cblas (else through NumPy, with a temporary).
IN_PLACE_GEMM = bool(_gemm)


# The same cblas gemm, callable from compiled kernels (`native_gemm`): a kernel that runs its
# products itself makes one call for a whole block of work, without the GIL, where a Python loop
# of `gemm` calls pays about 7 microseconds of ctypes per product and, on two threads, waits for
# the GIL between products. The functions are entered in LLVM's symbol table under names of our
# own, which the compiled (and cached) kernels refer to; the kernels' pointers and sizes are
# 64-bit integers, so only the ILP64 builds NumPy's wheels ship are bound (NATIVE_GEMM).
def _native_gemm_functions(functions: dict[np.dtype[Any], Any]) -> tuple[Any, ...]:
    if not functions or functions[np.dtype(np.float32)].argtypes[3] is not ctypes.c_int64:
        return None, None
    # (numba.config sets its options at import time, from the environment: mypy does not see them)
    if numba.config.DISABLE_JIT:  # type: ignore[attr-defined]  # kernels run as Python: they call ctypes
        return functions[np.dtype(np.float32)], functions[np.dtype(np.float64)]
    i32, i64, ptr = types.int32, types.int64, types.intp
    bound = []
    for dtype, real in ((np.float32, types.float32), (np.float64, types.float64)):
        name = f"saliency_cblas_{np.dtype(dtype).char}gemm_ilp64"
        llvmlite.binding.add_symbol(name, ctypes.cast(functions[np.dtype(dtype)], ctypes.c_void_p).value)
        bound.append(types.ExternalFunction(name, types.void(i32, i32, i32, i64, i64, i64, real, ptr, i64, ptr, i64,
                                                             real, ptr, i64)))
    return tuple(bound)


_native_sgemm, _native_dgemm = _native_gemm_functions(_gemm)
# Whether compiled kernels can call `native_gemm` (else they must not be called).
NATIVE_GEMM = _native_sgemm is not None


@njit(cache=True, inline="always")
def _native_operand(a: FloatArray) -> tuple[int, int]:
    """(transpose flag, leading dimension) of a 2-D view with unit stride along one axis."""
    item = a.itemsize
    if a.strides[1] == item and (a.shape[0] <= 1 or a.strides[0] >= item * a.shape[1]):
        return _NO_TRANS, max(a.strides[0] // item, a.shape[1], 1)
    return _TRANS, max(a.strides[1] // item, a.shape[0], 1)


@njit(cache=True, nogil=True)
def native_gemm(a: FloatArray, b: FloatArray, c: FloatArray, beta: float) -> None:
    """c = a @ b + beta * c in place, called from compiled kernels (with NATIVE_GEMM only): 2-D
    float32 or float64 views of one dtype, a and b with unit stride along one axis, c along its
    rows; the caller checks the shapes. Runs on the calling thread's BLAS settings."""
    M, K, N = a.shape[0], a.shape[1], b.shape[1]
    if M == 0 or N == 0:
        return
    ta, lda = _native_operand(a)
    tb, ldb = _native_operand(b)
    ldc = max(c.strides[0] // c.itemsize, N, 1)
    if c.itemsize == 4:
        _native_sgemm(_ROW_MAJOR, ta, tb, M, N, K, 1.0, a.ctypes.data, lda, b.ctypes.data, ldb, beta,
                      c.ctypes.data, ldc)
    else:
        _native_dgemm(_ROW_MAJOR, ta, tb, M, N, K, 1.0, a.ctypes.data, lda, b.ctypes.data, ldb, beta,
                      c.ctypes.data, ldc)


class _OneThread:
    """The block `one_thread()` opens (a class: a generator-based context manager costs 5 us a
    call, and kernels open one per call). OpenBLAS's count is not only the calling thread's, so
    the sections of all threads are counted together: the count in force before the first one is
    restored after the last."""

    __slots__ = ("depth", "saved")
    depth: int
    saved: int | None

    def __init__(self) -> None:
        self.depth, self.saved = 0, None

    def __enter__(self) -> None:
        with _section_lock:
            if self.depth == 0:
                self.saved = _set_threads(1)  # type: ignore[misc]  # made only where there is a setter
            self.depth += 1

    def __exit__(self, *exc: object) -> Literal[False]:
        with _section_lock:
            self.depth -= 1
            if self.depth == 0:
                _set_threads(self.saved)  # type: ignore[misc, arg-type]  # as above; saved in __enter__
        return False


_section_lock = threading.Lock()
_ONE_THREAD = _OneThread() if _set_threads is not None else contextlib.nullcontext()


def one_thread() -> contextlib.AbstractContextManager[None]:
    """Within the block, BLAS products (of every thread) run on one thread; blocks of several
    threads may overlap and nest."""
    return _ONE_THREAD


def matmul(a: ArrayLike, b: ArrayLike, out: NDArray[Any] | None = None) -> NDArray[Any]:
    """np.matmul(a, b, out=out) on one BLAS thread."""
    with one_thread():
        return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)


def _operand(a: NDArray[Any]) -> tuple[int, int] | None:
    """(transpose flag, leading dimension) of a 2-D view BLAS can read in place: unit stride along
    one of its axes (a row-major matrix with any row stride, or the transpose of one)."""
    item = a.itemsize
    if a.strides[1] == item and a.strides[0] % item == 0 and a.strides[0] >= item * max(1, a.shape[1]):
        return _NO_TRANS, a.strides[0] // item
    if a.strides[0] == item and a.strides[1] % item == 0 and a.strides[1] >= item * max(1, a.shape[0]):
        return _TRANS, a.strides[1] // item
    return None


def gemm(a: FloatArray, b: FloatArray, c: FloatArray, beta: float) -> None:
    """c = a @ b + beta * c in place, for 2-D views a (M, K), b (K, N), c (M, N) of one float
    dtype that BLAS can read as they are: each has unit stride along one axis (c along its
    rows), any stride along the other, so a shifted window of a larger buffer is an operand with
    no copy. Runs on the calling thread's BLAS settings (callers hold `one_thread`). Where
    NumPy's cblas is not found, or a view is not BLAS-shaped, NumPy computes the same thing."""
    f = _gemm.get(c.dtype)
    ta, tb = _operand(a), _operand(b)
    if f is None or ta is None or tb is None or c.strides[1] != c.itemsize or a.dtype != c.dtype or \
            b.dtype != c.dtype or a.shape[1] != b.shape[0] or c.shape != (a.shape[0], b.shape[1]):
        if beta == 0:
            np.matmul(a, b, out=c)
        else:
            if beta != 1:
                c *= beta
            c += np.matmul(a, b)
        return
    M, K = a.shape
    N = b.shape[1]
    if M == 0 or N == 0:
        return
    f(_ROW_MAJOR, ta[0], tb[0], M, N, K, 1.0, a.ctypes.data, ta[1], b.ctypes.data, tb[1], beta, c.ctypes.data,
      c.strides[0] // c.itemsize)
