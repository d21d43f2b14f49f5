"""Numba kernels on plain C-contiguous float32/float64 arrays: convolution and its VJPs, pooling, resizing, batch norm,
ReLU (`activation`, used by the autograd op directly).

Conventions for the whole package: arrays are NCHW; the public functions are plain Python
wrappers (arrays and ints in, arrays out, inputs made contiguous) around `@njit` kernels that
write into preallocated outputs. Every VJP takes a cotangent `g` with optional extra leading
seed dimensions (K seeds through one pass) and returns gradients with the same leading
dimensions; the seeds are folded into the batch so that K*N gradients are one wrapper call (the
GEMM-based conv VJPs then run the images through in cache-sized chunks, `im2col.chunks`).

Threads: one pool for every kernel, Numba's parallel regions on its OpenMP layer (`threads`). A
large call runs in parts of its range, a compiled `prange` wrapper handing each part to the
serial kernel; matrix products run inside the same parts through OpenBLAS on one thread each
(`threads.matmul`, `blas.native_gemm`), so OpenBLAS's own workers never spin against the pool.
Small calls run the serial kernel on the calling thread. Values derived from weights alone
(Winograd's weight tiles, a convolution's weight with its batch norm folded in) are computed once
per version of the weight's memory (`versions`), not per call. In a kernel compiled without
`parallel=True`, a `prange` loop runs serially, like `range`; it marks a loop whose iterations
write disjoint parts of the output.
"""
from .batchnorm import batch_norm_forward, batch_norm_grad_eval, batch_norm_grad_train, batch_norm_stats
from .conv2d import (ConvAlgorithm, choose_algorithm, conv2d_forward, conv2d_grad_bias, conv2d_grad_input,
                     conv2d_grad_weight, conv_output_size)
from .pool import (adaptive_avg_pool2d_forward, adaptive_avg_pool2d_grad_input, adaptive_max_pool2d_forward,
                   avg_pool2d_forward, avg_pool2d_grad_input, max_pool2d_forward, max_pool2d_grad_input)
from .subpixel import upsample_conv2d_forward, upsample_conv2d_grad_input, upsample_conv2d_grad_weight
from . import window
from .threads import matmul
from .resize import (resample_table, upsample_bilinear2d_forward, upsample_bilinear2d_grad_input,
                     upsample_nearest2d_forward, upsample_nearest2d_grad_input)

__all__ = [
    "ConvAlgorithm", "choose_algorithm", "conv_output_size",
    "conv2d_forward", "conv2d_grad_input", "conv2d_grad_weight", "conv2d_grad_bias",
    "max_pool2d_forward", "max_pool2d_grad_input", "avg_pool2d_forward", "avg_pool2d_grad_input",
    "adaptive_avg_pool2d_forward", "adaptive_avg_pool2d_grad_input", "adaptive_max_pool2d_forward",
    "upsample_nearest2d_forward", "upsample_nearest2d_grad_input",
    "upsample_bilinear2d_forward", "upsample_bilinear2d_grad_input", "resample_table", "window",
    "upsample_conv2d_forward", "upsample_conv2d_grad_input", "upsample_conv2d_grad_weight",
    "batch_norm_stats", "batch_norm_forward", "batch_norm_grad_train", "batch_norm_grad_eval", "matmul",
]
