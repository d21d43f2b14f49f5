"""Kernels on windowed gradients: K windows of one size, each at its own place in a map.

A windowed array `data` has shape (K, L, h, w): for each of K seeds, L planes (batch x
channels) of an h x w window whose top-left corner is at `origins[k]` = (row, col) of an
H x W map. Origins may lie outside the map (a window at a border); cells outside the map
hold zeros. These kernels move such windows between maps: gather a saved activation's
windows, add windows into a dense map or a larger window, zero the cells outside the map,
and the adjoints of resampling (upsampling, max pooling) from an output window to the
input window it reads. `saliency.autograd.patch` builds the engine's cropped VJPs on them.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ._jit import njit

from .pool import _indices as _pool_indices

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from .._typing import Float64, FloatArray, IntArray

    IndexArray = NDArray[np.int32 | np.int64]  # max-pool indices (`pool.max_pool2d_forward`)
    Table = tuple[IntArray, IntArray, FloatArray, FloatArray]  # a resampling table (`resize.resize_table`)
    Tables = tuple[IntArray, IntArray, IntArray, IntArray, Float64]  # box pooling's (`pool.avg_pool2d_tables`)


@njit(cache=True)
def _gather(src: NDArray[Any], origins: IntArray, out: NDArray[Any]) -> None:
    """out[k, q] = src[q] on the window at origins[k]; zero outside src's map."""
    K, L, h, w = out.shape
    H, W = src.shape[1], src.shape[2]
    for k in range(K):
        r0, c0 = origins[k, 0], origins[k, 1]
        for q in range(L):
            for i in range(h):
                r = r0 + i
                row = out[k, q, i]
                if r < 0 or r >= H:
                    row[:] = 0
                    continue
                for j in range(w):
                    c = c0 + j
                    row[j] = src[q, r, c] if 0 <= c < W else 0


@njit(cache=True)
def _times_window(g: FloatArray, src: NDArray[Any], origins: IntArray, out: FloatArray) -> None:
    """out[k, q] = g[k, q] * src[q] on the window at origins[k] (zero outside src's map). One plain
    loop over the window with the bounds test inside: no row views, no separate zero fill."""
    K, L, h, w = g.shape
    H, W = src.shape[1], src.shape[2]
    for k in range(K):
        r0, c0 = origins[k, 0], origins[k, 1]
        for q in range(L):
            for i in range(h):
                r = r0 + i
                for j in range(w):
                    c = c0 + j
                    if 0 <= r < H and 0 <= c < W:
                        out[k, q, i, j] = g[k, q, i, j] * src[q, r, c]
                    else:
                        out[k, q, i, j] = 0


@njit(cache=True)
def _add(dst: FloatArray, src: FloatArray, offsets: IntArray) -> None:
    """dst[k, q, offsets[k] + (i, j)] += src[k, q, i, j] where that is inside dst."""
    K, L, h, w = src.shape
    H, W = dst.shape[2], dst.shape[3]
    for k in range(K):
        r0, c0 = offsets[k, 0], offsets[k, 1]
        i_lo, i_hi = max(0, -r0), min(h, H - r0)
        j_lo, j_hi = max(0, -c0), min(w, W - c0)
        for q in range(L):
            for i in range(i_lo, i_hi):
                d = dst[k, q, r0 + i]
                s = src[k, q, i]
                for j in range(j_lo, j_hi):
                    d[c0 + j] += s[j]


@njit(cache=True)
def _clip(data: FloatArray, origins: IntArray, H: int, W: int) -> None:
    """Zero the cells of each window that fall outside the H x W map."""
    K, L, h, w = data.shape
    for k in range(K):
        r0, c0 = origins[k, 0], origins[k, 1]
        i_lo, i_hi = max(0, -r0), min(h, H - r0)
        j_lo, j_hi = max(0, -c0), min(w, W - c0)
        if i_lo == 0 and i_hi == h and j_lo == 0 and j_hi == w:
            continue
        for q in range(L):
            for i in range(h):
                row = data[k, q, i]
                if i < i_lo or i >= i_hi:
                    row[:] = 0
                else:
                    row[:j_lo] = 0
                    row[max(j_hi, j_lo):] = 0


@njit(cache=True, fastmath={"contract"})
def _separable_grad(g: FloatArray, origins: IntArray, origins_in: IntArray, OH: int, OW: int, y0: IntArray,
                    y1: IntArray, ly0: FloatArray, ly1: FloatArray, x0: IntArray, x1: IntArray, lx0: FloatArray,
                    lx1: FloatArray, dx: FloatArray) -> None:
    """Adjoint of a separable resampling out[R, C] = sum of the four x[y0|y1[R], x0|x1[C]] with weights
    ly0|ly1[R] * lx0|lx1[C], on windows: g at `origins` of the OH x OW output, dx at `origins_in`."""
    K, L, h, w = g.shape
    dx[:] = 0
    for k in range(K):
        r0, c0 = origins[k, 0], origins[k, 1]
        a0, b0 = origins_in[k, 0], origins_in[k, 1]
        i_lo, i_hi = max(0, -r0), min(h, OH - r0)
        j_lo, j_hi = max(0, -c0), min(w, OW - c0)
        for q in range(L):
            plane = dx[k, q]
            for i in range(i_lo, i_hi):
                R = r0 + i
                p0 = plane[y0[R] - a0]
                p1 = plane[y1[R] - a0]
                for j in range(j_lo, j_hi):
                    C = c0 + j
                    v = g[k, q, i, j]
                    a, b = x0[C] - b0, x1[C] - b0
                    p0[a] += ly0[R] * lx0[C] * v
                    p0[b] += ly0[R] * lx1[C] * v
                    p1[a] += ly1[R] * lx0[C] * v
                    p1[b] += ly1[R] * lx1[C] * v


@njit(cache=True)
def _nearest_grad(g: FloatArray, shifts: IntArray, s: int, dx: FloatArray) -> None:
    """Adjoint of nearest upsampling by s on windows: g[k, q, i, j] goes to dx[k, q, (i + shifts[k, 0]) // s,
    (j + shifts[k, 1]) // s] (cells outside the output map hold zeros, so they need no test)."""
    K, L, h, w = g.shape
    dx[:] = 0
    for k in range(K):
        sr, sc = shifts[k, 0], shifts[k, 1]
        for q in range(L):
            for i in range(h):
                d = dx[k, q, (i + sr) // s]
                gi = g[k, q, i]
                for j in range(w):
                    d[(j + sc) // s] += gi[j]


@njit(cache=True)
def _max_pool_grad(g: FloatArray, origins: IntArray, origins_in: IntArray, idx: IndexArray, W: int,
                   dx: FloatArray) -> None:
    """Adjoint of max pooling on windows: idx (L, OH, OW) flat positions iy*W + ix of the maxima."""
    K, L, h, w = g.shape
    OH, OW = idx.shape[1], idx.shape[2]
    dx[:] = 0
    for k in range(K):
        r0, c0 = origins[k, 0], origins[k, 1]
        a0, b0 = origins_in[k, 0], origins_in[k, 1]
        i_lo, i_hi = max(0, -r0), min(h, OH - r0)
        j_lo, j_hi = max(0, -c0), min(w, OW - c0)
        for q in range(L):
            for i in range(i_lo, i_hi):
                for j in range(j_lo, j_hi):
                    p = idx[q, r0 + i, c0 + j]
                    dx[k, q, p // W - a0, p % W - b0] += g[k, q, i, j]


@njit(cache=True, fastmath={"contract"})
def _box_grad(g: FloatArray, origins: IntArray, origins_in: IntArray, y0: IntArray, y1: IntArray, x0: IntArray,
              x1: IntArray, div: FloatArray, dx: FloatArray) -> None:
    """Adjoint of a box pooling (out[R, C] = sum of x over rows y0[R]:y1[R], columns x0[C]:x1[C], divided
    by div[R, C]) on windows: g at `origins` of the output map, dx at `origins_in` of the input's."""
    K, L, h, w = g.shape
    OH, OW = div.shape
    dx[:] = 0
    for k in range(K):
        r0, c0 = origins[k, 0], origins[k, 1]
        a0, b0 = origins_in[k, 0], origins_in[k, 1]
        i_lo, i_hi = max(0, -r0), min(h, OH - r0)
        j_lo, j_hi = max(0, -c0), min(w, OW - c0)
        for q in range(L):
            plane = dx[k, q]
            for i in range(i_lo, i_hi):
                R = r0 + i
                for j in range(j_lo, j_hi):
                    C = c0 + j
                    v = g[k, q, i, j] / div[R, C]
                    for iy in range(y0[R], y1[R]):
                        row = plane[iy - a0]
                        for ix in range(x0[C], x1[C]):
                            row[ix - b0] += v


@njit(cache=True)
def _support(g: FloatArray, box: IntArray) -> None:
    """box[k] = (r0, c0, r1, c1), the bounding box of the non-zero cells of g[k] (L, H, W) over all its
    planes (NaN counts as non-zero); (0, 0, 0, 0) for an all-zero g[k]."""
    K, L, H, W = g.shape
    for k in range(K):
        r0, c0, r1, c1 = H, W, 0, 0
        for q in range(L):
            for r in range(H):
                row = g[k, q, r]
                for c in range(W):
                    if row[c] != 0:
                        if r < r0:
                            r0 = r
                        if r >= r1:
                            r1 = r + 1
                        if c < c0:
                            c0 = c
                        if c >= c1:
                            c1 = c + 1
        if r1 == 0:
            r0, c0 = 0, 0
        box[k, 0], box[k, 1], box[k, 2], box[k, 3] = r0, c0, r1, c1


def _planes(a: NDArray[Any]) -> NDArray[Any]:
    """(K, *lead, h, w) -> contiguous (K, L, h, w) with L the product of lead."""
    return np.ascontiguousarray(a).reshape(a.shape[0], -1, a.shape[-2], a.shape[-1])


def support(g: FloatArray) -> IntArray:
    """Per seed, the (r0, c0, r1, c1) bounding box (end-exclusive) of the non-zero cells of g (K, *lead,
    H, W) over all lead indices: int64 (K, 4); an all-zero seed gives (0, 0, 0, 0)."""
    g2 = _planes(g)
    box = np.empty((g2.shape[0], 4), np.int64)
    _support(g2, box)
    return box


def gather(src: NDArray[Any], origins: IntArray, size: Sequence[int]) -> NDArray[Any]:
    """The windows of `src` (*lead, H, W) at `origins` (K, 2), each `size` = (h, w): (K, *lead, h, w),
    zero where a window leaves the map. Boolean arrays come back as uint8."""
    src = np.ascontiguousarray(src)
    if src.dtype == np.bool_:
        src = src.view(np.uint8)
    lead = src.shape[:-2]
    out = np.empty((len(origins), math.prod(lead)) + tuple(size), src.dtype)
    _gather(src.reshape((-1,) + src.shape[-2:]), origins, out)
    return out.reshape((len(origins),) + lead + tuple(size))


def times_window(g: FloatArray, src: NDArray[Any], origins: ArrayLike) -> FloatArray:
    """g (K, *lead, h, w) times the windows of `src` (*lead, H, W) at `origins`, zero outside the map;
    src may be boolean (a mask). One pass, no gathered copy of src."""
    g2 = _planes(g)
    src = np.ascontiguousarray(src)
    if src.dtype == np.bool_:
        src = src.view(np.uint8)
    out = np.empty_like(g2)
    _times_window(g2, src.reshape((-1,) + src.shape[-2:]), np.ascontiguousarray(origins, np.int64), out)
    return out.reshape(g.shape)


def add_into(dst: FloatArray, src: FloatArray, offsets: ArrayLike) -> FloatArray:
    """dst (K, *lead, H, W) += src (K, *lead, h, w) placed at `offsets` (K, 2); cells outside dst are
    dropped. dst must be C-contiguous; returns it."""
    _add(_planes(dst), _planes(src).astype(dst.dtype, copy=False), np.ascontiguousarray(offsets, np.int64))
    return dst


def clip(data: FloatArray, origins: IntArray, map_size: Sequence[int]) -> FloatArray:
    """`data` (K, *lead, h, w), windows at `origins`, with the cells outside the map zeroed (in place
    when `data` is C-contiguous, else in a copy); returns it."""
    data = np.ascontiguousarray(data)
    _clip(_planes(data), origins, int(map_size[0]), int(map_size[1]))
    return data


def resample_grad(g: FloatArray, origins: IntArray, out_size: Sequence[int], rows: Table,
                  cols: Table) -> tuple[FloatArray, IntArray]:
    """Adjoint of a separable resampling on windows. `rows` and `cols` are tables (i0, i1, l0, l1) over
    the output map's rows / columns (source indices and weights). Returns (dx windows, origins_in)."""
    y0, y1, ly0, ly1 = rows
    x0, x1, lx0, lx1 = cols
    OH, OW = int(out_size[0]), int(out_size[1])
    h, w = g.shape[-2:]
    lo_r = np.clip(origins[:, 0], 0, OH - 1)
    hi_r = np.clip(origins[:, 0] + h - 1, 0, OH - 1)
    lo_c = np.clip(origins[:, 1], 0, OW - 1)
    hi_c = np.clip(origins[:, 1] + w - 1, 0, OW - 1)
    origins_in = np.stack([y0[lo_r], x0[lo_c]], axis=1)
    size = (int((y1[hi_r] + 1 - origins_in[:, 0]).max()), int((x1[hi_c] + 1 - origins_in[:, 1]).max()))
    g2 = _planes(g)
    dx = np.empty(g2.shape[:2] + size, g2.dtype)
    _separable_grad(g2, origins, origins_in, OH, OW, y0, y1, ly0.astype(g2.dtype), ly1.astype(g2.dtype),
                    x0, x1, lx0.astype(g2.dtype), lx1.astype(g2.dtype), dx)
    return dx.reshape(g.shape[:-2] + size), origins_in


def nearest_grad(g: FloatArray, origins: IntArray, scale: int) -> tuple[FloatArray, IntArray]:
    """Adjoint of nearest upsampling by `scale` on windows g (K, *lead, h, w) at `origins` of the upsampled
    map: (dx windows, origins_in) of the input map."""
    s = int(scale)
    origins_in = origins // s
    shifts = np.ascontiguousarray(origins - origins_in * s)
    h, w = g.shape[-2:]
    size = ((h - 1 + int(shifts[:, 0].max())) // s + 1, (w - 1 + int(shifts[:, 1].max())) // s + 1)
    g2 = _planes(g)
    dx = np.empty(g2.shape[:2] + size, g2.dtype)
    _nearest_grad(g2, shifts, s, dx)
    return dx.reshape(g.shape[:-2] + size), origins_in


def max_pool_grad(g: FloatArray, origins: IntArray, indices: IndexArray, in_width: int, origins_in: ArrayLike,
                  size_in: Sequence[int]) -> FloatArray:
    """Adjoint of max pooling on windows: g (K, *lead, h, w) at `origins` of the pooled map, `indices`
    (*lead, OH, OW) of the forward; dx (K, *lead, *size_in) at `origins_in`."""
    g2 = _planes(g)
    idx = _pool_indices(indices).reshape((-1,) + indices.shape[-2:])
    dx = np.empty(g2.shape[:2] + tuple(size_in), g2.dtype)
    _max_pool_grad(g2, origins, np.ascontiguousarray(origins_in, np.int64), idx, int(in_width), dx)
    return dx.reshape(g.shape[:-2] + tuple(size_in))


def box_grad(g: FloatArray, origins: ArrayLike, tables: Tables, origins_in: ArrayLike,
             size_in: Sequence[int]) -> FloatArray:
    """Adjoint of a box pooling on windows: g (K, *lead, h, w) at `origins` of the pooled map, `tables`
    (y0, y1, x0, x1, div) of the forward (windows clipped to the input, divisors per output cell);
    dx (K, *lead, *size_in) at `origins_in`, which must hold every window that g's cells read."""
    y0, y1, x0, x1, div = tables
    g2 = _planes(g)
    dx = np.empty(g2.shape[:2] + tuple(size_in), g2.dtype)
    _box_grad(g2, np.ascontiguousarray(origins, np.int64), np.ascontiguousarray(origins_in, np.int64),
              np.ascontiguousarray(y0, np.int64), np.ascontiguousarray(y1, np.int64),
              np.ascontiguousarray(x0, np.int64), np.ascontiguousarray(x1, np.int64),
              np.ascontiguousarray(div, g2.dtype), dx)
    return dx.reshape(g.shape[:-2] + tuple(size_in))
