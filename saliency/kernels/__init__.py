"""Numba kernels on plain C-contiguous float32/float64 arrays: convolution and its VJPs, pooling, resizing, batch norm."""
