"""Matrix products for the convolution kernels, on one BLAS thread when the product is small.

NumPy's OpenBLAS splits every product over all cores. For the small products of a batch-1
attribution map (tens of microseconds of work) waking its other threads costs more than they
save, so below `SMALL_FLOPS` the product runs on the calling thread alone. This uses
OpenBLAS's `openblas_set_num_threads_local` (OpenBLAS >= 0.3.27, which NumPy's wheels bundle);
where that is not found, every product runs as NumPy would run it.

Despite its name, in the pthreads build NumPy ships that setter changes the thread count of the
whole process. So the one-thread setting is a shared section (`one_thread`): the first thread to
enter it saves the count and sets 1, the last to leave restores the count. Threads computing maps
at once never leave the process on one BLAS thread, and products of other threads that run while
a section is open use one thread too.
"""
import contextlib
import ctypes
import glob
import math
import os
import threading

import numpy as np

# Below this many floating-point operations a product runs on one thread: the classifier's
# products (a few MFLOP each) stay on one thread; larger ones, such as the depth model's first
# layer (14 MFLOP), use OpenBLAS's threads (benchmarks/thread_pools.py compares the two).
SMALL_FLOPS = 1e7


def _thread_setter():
    """OpenBLAS's thread-local thread-count setter from the library NumPy loaded, or None."""
    here = os.path.dirname(np.__file__)
    for path in glob.glob(os.path.join(here, os.pardir, "numpy.libs", "*openblas*")) + \
            glob.glob(os.path.join(here, ".dylibs", "*openblas*")):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        setter = getattr(lib, "openblas_set_num_threads_local", None)
        if setter is not None:
            setter.argtypes, setter.restype = [ctypes.c_int], ctypes.c_int
            return setter
    return None


_set_threads = _thread_setter()
_section_lock = threading.Lock()
_section_depth = 0
_saved_threads = None


@contextlib.contextmanager
def one_thread():
    """Within the block, BLAS products (of every thread) run on one thread; sections of several
    threads may overlap, and the count in force before the first one is restored after the last."""
    global _section_depth, _saved_threads
    if _set_threads is None:
        yield
        return
    with _section_lock:
        if _section_depth == 0:
            _saved_threads = _set_threads(1)
        _section_depth += 1
    try:
        yield
    finally:
        with _section_lock:
            _section_depth -= 1
            if _section_depth == 0:
                _set_threads(_saved_threads)


def matmul(a, b, out=None):
    """np.matmul(a, b, out=out), on one BLAS thread when it is small."""
    batch = float(math.prod(np.broadcast_shapes(a.shape[:-2], b.shape[:-2])))
    flops = 2.0 * batch * a.shape[-2] * a.shape[-1] * b.shape[-1]
    if _set_threads is None or flops >= SMALL_FLOPS:
        return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)
    with one_thread():
        return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)
