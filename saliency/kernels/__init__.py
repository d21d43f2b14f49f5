"""Numba kernels on plain C-contiguous float32/float64 arrays: convolution and its VJPs, pooling, resizing, batch norm.

Conventions for the whole package: arrays are NCHW; the public functions are plain Python
wrappers (arrays and ints in, arrays out, inputs made contiguous) around `@njit` kernels that
write into preallocated outputs. Every VJP takes a cotangent `g` with optional extra leading
seed dimensions (K seeds through one pass) and returns gradients with the same leading
dimensions; the seeds are folded into the batch so that K*N gradients are one kernel call.
"""
from .conv2d import (ConvAlgorithm, choose_algorithm, conv2d_forward, conv2d_grad_bias, conv2d_grad_input,
                     conv2d_grad_weight, conv_output_size)

__all__ = ["ConvAlgorithm", "choose_algorithm", "conv2d_forward", "conv2d_grad_bias", "conv2d_grad_input",
           "conv2d_grad_weight", "conv_output_size"]
