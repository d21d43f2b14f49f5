"""Pooling over NCHW planes and its VJPs: max_pool2d, avg_pool2d (count_include_pad=True), adaptive_avg_pool2d.

Every pooling here is a window per output row [y0, y1) times a window per output column
[x0, x1), clipped to the image; the wrappers build these tables with NumPy and two kernel
pairs do the work. Kernels loop over (n, c) planes: each iteration owns its plane of
the output (forward) or of dx (backward, a scatter-add), so writes never overlap.
"""
import math

import numpy as np
from numba import prange

from ._jit import njit

from . import threads
from .conv2d import _fold_seeds, _float_array, _pair, conv_output_size


@njit(cache=True, nogil=True)
def _max_pool(x, out, idx, y0, y1, x0, x1):
    """out = max over each window, idx = flat index iy*W + ix of the max (PyTorch: the first, NaN wins)."""
    N, C, H, W = x.shape
    OH, OW = out.shape[2], out.shape[3]
    for t in prange(N * C):
        n = t // C
        c = t % C
        for oy in range(OH):
            for ox in range(OW):
                best = -np.inf
                bi = y0[oy] * W + x0[ox]
                for iy in range(y0[oy], y1[oy]):
                    for ix in range(x0[ox], x1[ox]):
                        v = x[n, c, iy, ix]
                        if v > best or np.isnan(v):
                            best = v
                            bi = iy * W + ix
                out[n, c, oy, ox] = best
                idx[n, c, oy, ox] = bi


@njit(cache=True, nogil=True)
def _max_pool_2x2(x, out, idx):
    """_max_pool for 2x2 windows at stride 2 without padding (tested against it): the four
    candidates of each window compared in the generic kernel's order, branch-free (selects, and
    `v != v` for NaN), read at 2*ox and 2*ox + 1 of slices of two input rows that start at 0 (no
    negative-index test), so that LLVM can vectorize the loop; rows narrower than one vector run
    scalar, still without the window tables."""
    N, C, H, W = x.shape
    OH, OW = out.shape[2], out.shape[3]
    for t in prange(N * C):
        n = t // C
        c = t % C
        for oy in range(OH):
            r0 = x[n, c, 2 * oy, 0:2 * OW]
            r1 = x[n, c, 2 * oy + 1, 0:2 * OW]
            orow = out[n, c, oy]
            irow = idx[n, c, oy]
            base = 2 * oy * W
            for ox in range(OW):
                best = r0[2 * ox]  # -inf < it, or it is NaN: the first candidate always takes the lead
                k = 0
                v = r0[2 * ox + 1]
                take = (v > best) | (v != v)
                best = v if take else best
                k = 1 if take else k
                v = r1[2 * ox]
                take = (v > best) | (v != v)
                best = v if take else best
                k = W if take else k
                v = r1[2 * ox + 1]
                take = (v > best) | (v != v)
                best = v if take else best
                k = W + 1 if take else k
                orow[ox] = best
                irow[ox] = base + 2 * ox + k


@njit(cache=True, nogil=True)
def _max_pool_grad(g, idx, dx):
    """dx[m, c, idx] += g[m, c]; g is (M, C, OH, OW) with M = K*N seeds folded in, idx is (N, C, OH, OW)."""
    M, C, OH, OW = g.shape
    N = idx.shape[0]
    for t in prange(M * C):
        m = t // C
        c = t % C
        plane = dx[m, c]
        plane[:] = 0
        for oy in range(OH):
            for ox in range(OW):
                plane[idx[m % N, c, oy, ox]] += g[m, c, oy, ox]


@njit(cache=True, fastmath={"reassoc", "contract"})
def _box_pool(x, out, y0, y1, x0, x1, div):
    """out[n, c, oy, ox] = sum of x over the window / div[oy, ox]."""
    N, C = x.shape[0], x.shape[1]
    OH, OW = out.shape[2], out.shape[3]
    for t in prange(N * C):
        n = t // C
        c = t % C
        for oy in range(OH):
            for ox in range(OW):
                s = 0.0
                for iy in range(y0[oy], y1[oy]):
                    for ix in range(x0[ox], x1[ox]):
                        s += x[n, c, iy, ix]
                out[n, c, oy, ox] = s / div[oy, ox]


@njit(cache=True, fastmath={"reassoc", "contract"})
def _box_pool_grad(g, dx, y0, y1, x0, x1, div):
    """Adjoint of _box_pool: every x in a window gets g / div of that window."""
    M, C, OH, OW = g.shape
    for t in prange(M * C):
        m = t // C
        c = t % C
        plane = dx[m, c]
        plane[:] = 0
        for oy in range(OH):
            for ox in range(OW):
                v = g[m, c, oy, ox] / div[oy, ox]
                for iy in range(y0[oy], y1[oy]):
                    for ix in range(x0[ox], x1[ox]):
                        plane[iy, ix] += v


def _sliding_windows(size, kernel, stride, padding, name):
    """Clipped windows [lo, hi) of a sliding kernel (PyTorch's floor mode)."""
    if kernel < 1 or stride < 1 or padding < 0 or 2 * padding > kernel:
        raise ValueError(f"{name} needs kernel >= 1, stride >= 1 and 0 <= padding <= kernel/2 "
                         f"(as PyTorch), got kernel={kernel}, stride={stride}, padding={padding}")
    n_out = conv_output_size(size, kernel, stride, padding, 1)
    if n_out < 1:
        raise ValueError(f"{name}: input of size {size} is smaller than the kernel {kernel} after padding {padding}")
    start = np.arange(n_out) * stride - padding
    return np.clip(start, 0, size).astype(np.int64), np.clip(start + kernel, 0, size).astype(np.int64)


def _adaptive_windows(size, n_out):
    """PyTorch's adaptive bins: [floor(i*size/n_out), ceil((i+1)*size/n_out))."""
    i = np.arange(n_out, dtype=np.int64)
    return (i * size) // n_out, ((i + 1) * size + n_out - 1) // n_out


def _check_x(x):
    x = _float_array(x, "x")
    if x.ndim != 4:
        raise ValueError(f"x must have shape (N, C, H, W), got {x.shape!r}")
    return x


def _pool_windows(x_shape, kernel_size, stride, padding, name):
    k = _pair(kernel_size, "kernel_size")
    s = k if stride is None else _pair(stride, "stride")
    p = _pair(padding, "padding")
    return (_sliding_windows(x_shape[2], k[0], s[0], p[0], name), _sliding_windows(x_shape[3], k[1], s[1], p[1], name),
            k)


def _grad_out(g, x_shape, n_out, name):
    g2, seeds = _fold_seeds(g, 4, "g")
    want = (x_shape[0], x_shape[1]) + tuple(n_out)
    if g2.shape[1:] != want[1:] or g2.shape[0] != x_shape[0] * math.prod(seeds):
        raise ValueError(f"{name}: g must have shape (*seeds, {', '.join(map(str, want))}), got {np.shape(g)!r}")
    return g2, seeds


def _is_2x2_stride_2(kernel_size, stride, padding):
    """The common pooling: 2x2 windows, stride 2, no padding (floor mode drops an odd last row/column)."""
    return _pair(kernel_size, "kernel_size") == (2, 2) and (stride is None or _pair(stride, "stride") == (2, 2)) \
        and _pair(padding, "padding") == (0, 0)


def _index_dtype(shape):
    return np.int32 if shape[2] * shape[3] < 2 ** 31 else np.int64


def _indices(indices):
    """Max-pool indices as a C-contiguous int32 or int64 array (no copy when they already are)."""
    indices = np.asarray(indices)
    return np.ascontiguousarray(indices, indices.dtype if indices.dtype in (np.int32, np.int64) else np.int64)


def max_pool2d_forward(x, kernel_size, stride=None, padding=0):
    """(N, C, H, W) -> (out (N, C, OH, OW), indices (N, C, OH, OW) into each H*W plane, as PyTorch's but
    int32 when a plane has fewer than 2**31 cells (half the memory traffic of int64 in the forward
    and the VJP), else int64."""
    x = _check_x(x)
    if _is_2x2_stride_2(kernel_size, stride, padding) and x.shape[2] >= 2 and x.shape[3] >= 2:
        out = np.empty(x.shape[:2] + (x.shape[2] // 2, x.shape[3] // 2), x.dtype)  # no window tables
        idx = np.empty(out.shape, _index_dtype(x.shape))
        threads.split_batch(x.shape[0], x.size, lambda n0, n1: _max_pool_2x2(x[n0:n1], out[n0:n1], idx[n0:n1]))
        return out, idx
    (y0, y1), (x0, x1), _ = _pool_windows(x.shape, kernel_size, stride, padding, "max_pool2d")
    out = np.empty(x.shape[:2] + (len(y0), len(x0)), x.dtype)
    idx = np.empty(out.shape, _index_dtype(x.shape))
    _max_pool(x, out, idx, y0, y1, x0, x1)
    return out, idx


def max_pool2d_grad_input(g, indices, x_shape):
    """VJP of max_pool2d: g (*seeds, N, C, OH, OW) and the forward's indices -> (*seeds, N, C, H, W)."""
    x_shape = tuple(int(e) for e in x_shape)
    indices = _indices(indices)
    g2, seeds = _grad_out(g, x_shape, indices.shape[2:], "max_pool2d")
    dx = np.empty((g2.shape[0], x_shape[1], x_shape[2] * x_shape[3]), g2.dtype)
    if g2.shape[0] == indices.shape[0]:  # no seed dimensions: halves of the batch
        threads.split_batch(g2.shape[0], dx.size,
                            lambda n0, n1: _max_pool_grad(g2[n0:n1], indices[n0:n1], dx[n0:n1]))
    else:
        _max_pool_grad(g2, indices, dx)
    return dx.reshape(seeds + x_shape)


def _avg_tables(x_shape, kernel_size, stride, padding):
    (y0, y1), (x0, x1), k = _pool_windows(x_shape, kernel_size, stride, padding, "avg_pool2d")
    return y0, y1, x0, x1, np.full((len(y0), len(x0)), float(k[0] * k[1]))  # count_include_pad=True


def _adaptive_tables(x_shape, output_size):
    oh, ow = _pair(output_size, "output_size")
    if oh < 1 or ow < 1:
        raise ValueError(f"adaptive_avg_pool2d needs output_size >= 1, got {output_size!r}")
    y0, y1 = _adaptive_windows(x_shape[2], oh)
    x0, x1 = _adaptive_windows(x_shape[3], ow)
    return y0, y1, x0, x1, np.outer(y1 - y0, x1 - x0).astype(np.float64)


def _box_forward(x, tables):
    y0, y1, x0, x1, div = tables
    out = np.empty(x.shape[:2] + div.shape, x.dtype)
    _box_pool(x, out, y0, y1, x0, x1, div.astype(x.dtype))
    return out


def _box_grad(g, x_shape, tables, name):
    y0, y1, x0, x1, div = tables
    g2, seeds = _grad_out(g, x_shape, div.shape, name)
    dx = np.empty((g2.shape[0],) + x_shape[1:], g2.dtype)
    _box_pool_grad(g2, dx, y0, y1, x0, x1, div.astype(g2.dtype))
    return dx.reshape(seeds + x_shape)


def avg_pool2d_forward(x, kernel_size, stride=None, padding=0):
    """(N, C, H, W) -> (N, C, OH, OW), PyTorch's defaults: count_include_pad=True, ceil_mode=False."""
    x = _check_x(x)
    return _box_forward(x, _avg_tables(x.shape, kernel_size, stride, padding))


def avg_pool2d_grad_input(g, x_shape, kernel_size, stride=None, padding=0):
    """VJP of avg_pool2d: g (*seeds, N, C, OH, OW) -> (*seeds, N, C, H, W)."""
    x_shape = tuple(int(e) for e in x_shape)
    return _box_grad(g, x_shape, _avg_tables(x_shape, kernel_size, stride, padding), "avg_pool2d")


def adaptive_avg_pool2d_forward(x, output_size):
    """(N, C, H, W) -> (N, C, oh, ow), bins [floor(i*H/oh), ceil((i+1)*H/oh)) as PyTorch."""
    x = _check_x(x)
    if _pair(output_size, "output_size") == (1, 1):  # a global mean: NumPy's pairwise sum, no window tables
        N, C = x.shape[:2]
        return x.reshape(N, C, -1).mean(axis=2).reshape(N, C, 1, 1)
    return _box_forward(x, _adaptive_tables(x.shape, output_size))


def adaptive_avg_pool2d_grad_input(g, x_shape, output_size):
    """VJP of adaptive_avg_pool2d: g (*seeds, N, C, oh, ow) -> (*seeds, N, C, H, W)."""
    x_shape = tuple(int(e) for e in x_shape)
    if _pair(output_size, "output_size") == (1, 1):  # the mean's gradient, spread: one broadcast copy
        g2, seeds = _grad_out(g, x_shape, (1, 1), "adaptive_avg_pool2d")
        dx = np.empty((g2.shape[0],) + x_shape[1:], g2.dtype)
        dx[...] = g2 / (x_shape[2] * x_shape[3])
        return dx.reshape(seeds + x_shape)
    return _box_grad(g, x_shape, _adaptive_tables(x_shape, output_size), "adaptive_avg_pool2d")
