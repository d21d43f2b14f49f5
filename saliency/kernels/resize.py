"""Upsampling by an integer scale factor and its VJPs: nearest, and bilinear with align_corners=False.

PyTorch's conventions: nearest takes source index floor(i / s); bilinear takes source
coordinate (i + 0.5) / s - 0.5, clamped at 0, between rows y0 = floor and y1 = min(y0 + 1,
H - 1) with weight l1 = coordinate - y0 on y1 and l0 = 1 - l1 on y0 (likewise for columns).
The wrappers build these per-row/per-column tables; kernels loop over (n, c)
planes, each task owning its plane (the VJPs scatter-add within it).
"""
import math

import numpy as np
from numba import prange

from ._jit import njit

from .conv2d import _fold_seeds, _float_array


@njit(cache=True)
def _nearest(x, out, s):
    N, C, H, W = x.shape
    for t in prange(N * C):
        n = t // C
        c = t % C
        for oy in range(H * s):
            src = x[n, c, oy // s]
            dst = out[n, c, oy]
            for ox in range(W * s):
                dst[ox] = src[ox // s]


@njit(cache=True)
def _nearest_grad(g, dx, s):
    """dx[m, c, iy, ix] = sum of g over the s x s block it was copied to."""
    M, C, H, W = dx.shape
    for t in prange(M * C):
        m = t // C
        c = t % C
        plane = dx[m, c]
        plane[:] = 0
        for oy in range(H * s):
            src = g[m, c, oy]
            dst = plane[oy // s]
            for ox in range(W * s):
                dst[ox // s] += src[ox]


@njit(cache=True, fastmath={"contract"})
def _bilinear(x, out, y0, y1, ly0, ly1, x0, x1, lx0, lx1):
    N, C = x.shape[0], x.shape[1]
    OH, OW = out.shape[2], out.shape[3]
    for t in prange(N * C):
        n = t // C
        c = t % C
        plane = x[n, c]
        for oy in range(OH):
            r0 = plane[y0[oy]]
            r1 = plane[y1[oy]]
            for ox in range(OW):
                a, b = x0[ox], x1[ox]
                out[n, c, oy, ox] = (ly0[oy] * (lx0[ox] * r0[a] + lx1[ox] * r0[b])
                                     + ly1[oy] * (lx0[ox] * r1[a] + lx1[ox] * r1[b]))


@njit(cache=True, fastmath={"contract"})
def _bilinear_grad(g, dx, y0, y1, ly0, ly1, x0, x1, lx0, lx1):
    """Adjoint of _bilinear: each g entry goes back to its four source pixels with their weights."""
    M, C = dx.shape[0], dx.shape[1]
    OH, OW = g.shape[2], g.shape[3]
    for t in prange(M * C):
        m = t // C
        c = t % C
        plane = dx[m, c]
        plane[:] = 0
        for oy in range(OH):
            r0 = plane[y0[oy]]
            r1 = plane[y1[oy]]
            for ox in range(OW):
                v = g[m, c, oy, ox]
                a, b = x0[ox], x1[ox]
                r0[a] += ly0[oy] * lx0[ox] * v
                r0[b] += ly0[oy] * lx1[ox] * v
                r1[a] += ly1[oy] * lx0[ox] * v
                r1[b] += ly1[oy] * lx1[ox] * v


def _scale(scale_factor):
    if not isinstance(scale_factor, (int, np.integer)) or isinstance(scale_factor, bool) or scale_factor < 1:
        raise ValueError(f"scale_factor must be an integer >= 1, got {scale_factor!r}")
    return int(scale_factor)


def _check_x(x):
    x = _float_array(x, "x")
    if x.ndim != 4:
        raise ValueError(f"x must have shape (N, C, H, W), got {x.shape!r}")
    return x


def _check_g(g, x_shape, s):
    x_shape = tuple(int(e) for e in x_shape)
    g2, seeds = _fold_seeds(g, 4, "g")
    want = x_shape[:2] + (x_shape[2] * s, x_shape[3] * s)
    if g2.shape[1:] != want[1:] or g2.shape[0] != x_shape[0] * math.prod(seeds):
        raise ValueError(f"g must have shape (*seeds, {', '.join(map(str, want))}), got {np.shape(g)!r}")
    return g2, seeds, x_shape


def _linear_table(size, s, dtype):
    """Source rows/columns and weights for bilinear upsampling by s, align_corners=False."""
    src = np.maximum((np.arange(size * s) + 0.5) / s - 0.5, 0.0)
    i0 = np.floor(src).astype(np.int64)
    i1 = np.minimum(i0 + 1, size - 1)
    l1 = (src - i0).astype(dtype)
    return i0, i1, (1 - l1).astype(dtype), l1


def resample_table(size, scale_factor, mode, dtype):
    """(i0, i1, l0, l1) over the size*s output rows of an upsampling: output row r is
    l0[r] * x[i0[r]] + l1[r] * x[i1[r]] (nearest: i0 = i1 = r // s, l0 = 1, l1 = 0)."""
    s = _scale(scale_factor)
    if mode == "bilinear":
        return _linear_table(size, s, dtype)
    i0 = np.arange(size * s) // s
    return i0, i0, np.ones(size * s, dtype), np.zeros(size * s, dtype)


def upsample_nearest2d_forward(x, scale_factor):
    """(N, C, H, W) -> (N, C, H*s, W*s), each pixel repeated s x s times."""
    x, s = _check_x(x), _scale(scale_factor)
    out = np.empty(x.shape[:2] + (x.shape[2] * s, x.shape[3] * s), x.dtype)
    _nearest(x, out, s)
    return out


def upsample_nearest2d_grad_input(g, x_shape, scale_factor):
    """VJP of nearest upsampling: g (*seeds, N, C, H*s, W*s) -> (*seeds, N, C, H, W), sums over s x s blocks."""
    s = _scale(scale_factor)
    g2, seeds, x_shape = _check_g(g, x_shape, s)
    dx = np.empty((g2.shape[0],) + x_shape[1:], g2.dtype)
    _nearest_grad(g2, dx, s)
    return dx.reshape(seeds + x_shape)


def upsample_bilinear2d_forward(x, scale_factor):
    """(N, C, H, W) -> (N, C, H*s, W*s), bilinear with align_corners=False (PyTorch's default)."""
    x, s = _check_x(x), _scale(scale_factor)
    out = np.empty(x.shape[:2] + (x.shape[2] * s, x.shape[3] * s), x.dtype)
    _bilinear(x, out, *_linear_table(x.shape[2], s, x.dtype), *_linear_table(x.shape[3], s, x.dtype))
    return out


def upsample_bilinear2d_grad_input(g, x_shape, scale_factor):
    """VJP of bilinear upsampling: g (*seeds, N, C, H*s, W*s) -> (*seeds, N, C, H, W)."""
    s = _scale(scale_factor)
    g2, seeds, x_shape = _check_g(g, x_shape, s)
    dx = np.empty((g2.shape[0],) + x_shape[1:], g2.dtype)
    _bilinear_grad(g2, dx, *_linear_table(x_shape[2], s, g2.dtype), *_linear_table(x_shape[3], s, g2.dtype))
    return dx.reshape(seeds + x_shape)
