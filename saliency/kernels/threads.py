"""Batched kernel calls split in two halves of the batch: one half on the calling thread, the other on
a helper thread, the matrix products of both on one BLAS thread each.

Why not Numba's `parallel=True`, or OpenBLAS's threads for everything: their worker pools spin-wait
after each call, and when both run in one process a pool that spins holds the core the other pool
needs (benchmarks/thread_pools.py shows the effect). The helper here is one thread of a
`ThreadPoolExecutor` blocked on its queue (it sleeps, it never spins); the kernels are compiled with
`nogil=True` so the two halves run at once; and while a split call runs, the BLAS calls of both
halves use one thread each, so OpenBLAS's workers are not woken. A batch of one, or a call whose
output has fewer than SPLIT_ELEMENTS elements, stays on the calling thread: handing work to the
helper has a fixed cost that a small call does not repay (benchmarks/batch_split.py compares the
split with the unsplit call).

One image splits too, by output rows, channels or phase rows (`split_image`), but only when the
call's input or output has SPLIT_IMAGE_ELEMENTS: below that (the depth model's 128x128 layers
among them) the hand-over cost outweighs what the second thread saves; above it the halves'
buffers also fit the caches better than the whole call's (benchmarks/image_split.py compares).

Matrix products split by their work instead (`split_flops`: images, output rows or channels,
whichever the call has; `matmul`: rows or columns of any product), so that every product of the
package runs on one BLAS thread: a product left to OpenBLAS's threads wakes its workers, which
then spin for about a tenth of a second and slow every split kernel that follows.
"""
import contextvars
import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import blas

# Split a call when its batch has >= 2 entries and its output has at least this many elements.
SPLIT_ELEMENTS = 1 << 17
# Split matrix products (`split_flops`) of at least this many floating-point operations: about
# 200 microseconds of one core's GEMM, three times the cost of handing half to the helper (at
# 4e6 the reference models' maps were 20-30% slower, the hand-over eating what the halves saved).
SPLIT_FLOPS = 2e7
# Split one image's call when its input or output has at least this many elements (16 channels
# of 181x181).
SPLIT_IMAGE_ELEMENTS = 1 << 19

_local = threading.local()
_pool = None
_pool_pid = None
_pool_lock = threading.Lock()


def _helper_init():
    _local.inside = True  # what runs on the helper never splits again


def _helper():
    """The one-thread pool, made on first use (and again in a forked child, which has no threads)."""
    global _pool, _pool_pid
    pid = os.getpid()
    if _pool is None or _pool_pid != pid:
        with _pool_lock:
            if _pool is None or _pool_pid != pid:
                _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="saliency-kernels",
                                           initializer=_helper_init)
                _pool_pid = pid
    return _pool


def split_image(n, elements, body):
    """split_batch for the parts (rows, channels, phases) of one image's call: split only when the
    call's larger array (input or output) has SPLIT_IMAGE_ELEMENTS `elements`."""
    split_batch(n, elements if elements >= SPLIT_IMAGE_ELEMENTS else 0, body)


def split_flops(n, flops, body):
    """split_batch for matrix products: rows (or products) [0, n) in two halves when the call does
    at least SPLIT_FLOPS floating-point operations. Its products run on one BLAS thread each,
    split or not, so OpenBLAS's own workers are never woken by these kernels (workers that spin
    after a product would hold the core the helper thread needs)."""
    with blas.one_thread():
        _split(n, flops >= SPLIT_FLOPS, body)


def matmul(a, b, out=None):
    """np.matmul(a, b, out=out) with its products on one BLAS thread, the rows of the result (or
    its columns, when it has more of those) in two halves on two threads when the product does
    SPLIT_FLOPS. For the products that are not already inside a split kernel: the operations'
    matrix products, weight VJPs."""
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim < 2 or b.ndim < 2:
        return blas.matmul(a, b, out=out)
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    if out is None:
        out = np.empty(shape, np.result_type(a, b))
    flops = 2.0 * math.prod(shape) * a.shape[-1]
    if shape[-2] >= shape[-1]:
        split_flops(shape[-2], flops, lambda r0, r1: np.matmul(a[..., r0:r1, :], b, out=out[..., r0:r1, :]))
    else:
        split_flops(shape[-1], flops, lambda c0, c1: np.matmul(a, b[..., c0:c1], out=out[..., c0:c1]))
    return out


def split_batch(n, elements, body):
    """Run body(n0, n1) over the batch range [0, n): as two halves on two threads when n >= 2 and the
    call's output has >= SPLIT_ELEMENTS `elements`, else as body(0, n). Each half must write only its
    own part of the outputs and use its own scratch buffers; an exception in either half is raised
    here after both have finished. Calls made from inside a half run unsplit."""
    _split(n, elements >= SPLIT_ELEMENTS, body)


def split_work(n, body):
    """body(n0, n1) over [0, n) as two halves on two threads whenever n >= 2 (unless called from
    inside a half), for work large enough to pay for one hand-over whatever its size: a model's
    forward and backward pass on half a batch, say. Every kernel call inside a half runs unsplit
    on that half's thread, so the hand-over is paid once instead of at every kernel call, and the
    Python between one half's kernels runs while the other half computes. The helper's half runs
    in a copy of the caller's context (grad mode, backward rules); exceptions as split_batch."""
    _split(n, True, body, contextvars.copy_context())


def _split(n, large, body, context=None):
    if n < 2 or not large or getattr(_local, "inside", False):
        body(0, n)
        return
    half = n // 2
    with blas.one_thread():                 # open until both halves are done
        other = (_helper().submit(body, half, n) if context is None
                 else _helper().submit(context.run, body, half, n))
        _local.inside = True
        try:
            body(0, half)
        finally:
            _local.inside = False
            other.exception()  # wait for the other half, whatever happened to this one
    other.result()  # raises the other half's exception, if it had one
