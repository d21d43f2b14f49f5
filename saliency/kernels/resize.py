"""Resizing NCHW images and its VJPs: upsampling by an integer scale factor (nearest, and bilinear with
align_corners=False), and resampling to any size by per-axis tables (`resize_table`, PyTorch's
index and weight conventions for nearest and bilinear with either align_corners).

PyTorch's conventions: nearest takes source index floor(i / s); bilinear takes source
coordinate (i + 0.5) / s - 0.5, clamped at 0, between rows y0 = floor and y1 = min(y0 + 1,
H - 1) with weight l1 = coordinate - y0 on y1 and l0 = 1 - l1 on y0 (likewise for columns).
The wrappers build these per-row/per-column tables; kernels loop over a range of the (n, c)
planes, each call owning its planes (the VJPs scatter-add within them), and large calls run in
parts of their planes on the kernels' threads (`threads.run`). Bilinear resampling runs in two
separable passes (columns of every input row read, then rows).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
from numba import prange

from ._jit import njit

from . import threads
from .conv2d import _fold_seeds, _float_array
from .window import _planes, _separable_grad

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, DTypeLike, NDArray

    from .._typing import BoolArray, FloatArray, IntArray, Shape

    # A resampling table of one axis, (i0, i1, l0, l1): output r is l0[r] * x[i0[r]] + l1[r] * x[i1[r]]
    Table = tuple[IntArray, IntArray, FloatArray, FloatArray]
    TableLike = tuple[ArrayLike, ArrayLike, ArrayLike, ArrayLike]
    # The kernels' eight arrays: the rows' table, then the columns', contiguous, weights in the data's dtype
    PlaneTables = tuple[IntArray, IntArray, FloatArray, FloatArray, IntArray, IntArray, FloatArray, FloatArray]


@njit(cache=True, nogil=True)
def _nearest(x: FloatArray, out: FloatArray, s: int, lo: int, hi: int) -> None:
    """out = x with each pixel repeated s x s times, for the flattened (n, c) planes in [lo, hi)."""
    C, H, W = x.shape[1], x.shape[2], x.shape[3]
    for t in range(lo, hi):
        n = t // C
        c = t % C
        for oy in range(H * s):
            src = x[n, c, oy // s]
            dst = out[n, c, oy]
            for ox in range(W * s):
                dst[ox] = src[ox // s]


@njit(cache=True, nogil=True, parallel=True)
def _nearest_parallel(x: FloatArray, out: FloatArray, s: int, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _nearest(x, out, s, lo, hi)


@njit(cache=True, nogil=True)
def _nearest_grad(g: FloatArray, dx: FloatArray, s: int, lo: int, hi: int) -> None:
    """dx[m, c, iy, ix] = sum of g over the s x s block it was copied to, for the flattened (m, c)
    planes in [lo, hi)."""
    C, H, W = dx.shape[1], dx.shape[2], dx.shape[3]
    for t in range(lo, hi):
        m = t // C
        c = t % C
        plane = dx[m, c]
        plane[:] = 0
        for oy in range(H * s):
            src = g[m, c, oy]
            dst = plane[oy // s]
            for ox in range(W * s):
                dst[ox // s] += src[ox]


@njit(cache=True, nogil=True, parallel=True)
def _nearest_grad_parallel(g: FloatArray, dx: FloatArray, s: int, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _nearest_grad(g, dx, s, lo, hi)


def _rows_read(i0: IntArray, i1: IntArray, size: int) -> BoolArray:
    """Which of `size` input rows (or columns) a table's outputs read."""
    used = np.zeros(size, np.bool_)
    used[i0] = True
    used[i1] = True
    return used


@njit(cache=True, nogil=True, fastmath={"contract"})
def _bilinear(x: FloatArray, out: FloatArray, y0: IntArray, y1: IntArray, ly0: FloatArray, ly1: FloatArray,
              x0: IntArray, x1: IntArray, lx0: FloatArray, lx1: FloatArray, used: BoolArray, lo: int, hi: int) -> None:
    """Planes [lo, hi) of the flattened (N*C) planes, in two separable passes: every input row that
    an output row reads, resampled along the columns once (H x OW scratch), then each output row as
    the weighted sum of its two resampled rows (a contiguous pass)."""
    C, H = x.shape[1], x.shape[2]
    OH, OW = out.shape[2], out.shape[3]
    rows = np.empty((H, OW), x.dtype)
    for t in range(lo, hi):
        n = t // C
        c = t % C
        plane = x[n, c]
        for iy in range(H):
            if used[iy]:
                src = plane[iy]
                dst = rows[iy]
                for ox in range(OW):
                    dst[ox] = lx0[ox] * src[x0[ox]] + lx1[ox] * src[x1[ox]]
        for oy in range(OH):
            r0 = rows[y0[oy]]
            r1 = rows[y1[oy]]
            w0, w1 = ly0[oy], ly1[oy]
            dst = out[n, c, oy]
            for ox in range(OW):
                dst[ox] = w0 * r0[ox] + w1 * r1[ox]


@njit(cache=True, nogil=True, parallel=True)
def _bilinear_parallel(x: FloatArray, out: FloatArray, y0: IntArray, y1: IntArray, ly0: FloatArray, ly1: FloatArray,
                       x0: IntArray, x1: IntArray, lx0: FloatArray, lx1: FloatArray, used: BoolArray, n: int,
                       k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _bilinear(x, out, y0, y1, ly0, ly1, x0, x1, lx0, lx1, used, lo, hi)


@njit(cache=True, nogil=True, fastmath={"contract"})
def _bilinear_grad(g: FloatArray, dx: FloatArray, y0: IntArray, y1: IntArray, ly0: FloatArray, ly1: FloatArray,
                   x0: IntArray, x1: IntArray, lx0: FloatArray, lx1: FloatArray, used: BoolArray, lo: int,
                   hi: int) -> None:
    """Adjoint of _bilinear, its two passes in reverse: each g row added into the two resampled rows
    it was made from (contiguous), then each of those rows sent back to its source columns."""
    C, H = dx.shape[1], dx.shape[2]
    OH, OW = g.shape[2], g.shape[3]
    rows = np.empty((H, OW), g.dtype)
    for t in range(lo, hi):
        m = t // C
        c = t % C
        for iy in range(H):
            if used[iy]:
                rows[iy, :] = 0
        for oy in range(OH):
            src = g[m, c, oy]
            r0 = rows[y0[oy]]
            w0 = ly0[oy]
            for ox in range(OW):
                r0[ox] += w0 * src[ox]
            r1 = rows[y1[oy]]
            w1 = ly1[oy]
            for ox in range(OW):
                r1[ox] += w1 * src[ox]
        plane = dx[m, c]
        for iy in range(H):
            dst = plane[iy]
            dst[:] = 0
            if used[iy]:
                src = rows[iy]
                for ox in range(OW):
                    dst[x0[ox]] += lx0[ox] * src[ox]
                    dst[x1[ox]] += lx1[ox] * src[ox]


@njit(cache=True, nogil=True, parallel=True)
def _bilinear_grad_parallel(g: FloatArray, dx: FloatArray, y0: IntArray, y1: IntArray, ly0: FloatArray, ly1: FloatArray,
                            x0: IntArray, x1: IntArray, lx0: FloatArray, lx1: FloatArray, used: BoolArray, n: int,
                            k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _bilinear_grad(g, dx, y0, y1, ly0, ly1, x0, x1, lx0, lx1, used, lo, hi)


def _planes_run(serial: Callable[..., object], parallel: Callable[..., object], out: NDArray[Any], other: NDArray[Any],
                *args: Any) -> None:
    """serial(*args, lo, hi) over the N*C planes of `out`, in parts on the kernels' threads when
    `out` or `other` (the call's input) is large (`threads.run`)."""
    threads.run(serial, parallel, out.shape[0] * out.shape[1], max(out.size, other.size), *args)


def _resample(x: FloatArray, out: FloatArray, tables: PlaneTables) -> FloatArray:
    """out = the separable resampling of x by `tables` (_tables' eight arrays), in parts of the
    planes on the kernels' threads when large."""
    used = _rows_read(tables[0], tables[1], x.shape[2])
    _planes_run(_bilinear, _bilinear_parallel, out, x, x, out, *tables, used)
    return out


def _resample_grad(g: FloatArray, dx: FloatArray, tables: PlaneTables) -> FloatArray:
    """dx = the adjoint of _resample applied to g (both folded to planes as in the forward)."""
    used = _rows_read(tables[0], tables[1], dx.shape[2])
    _planes_run(_bilinear_grad, _bilinear_grad_parallel, dx, g, g, dx, *tables, used)
    return dx


def _scale(scale_factor: int) -> int:
    if not isinstance(scale_factor, (int, np.integer)) or isinstance(scale_factor, bool) or scale_factor < 1:
        raise ValueError(f"scale_factor must be an integer >= 1, got {scale_factor!r}")
    return int(scale_factor)


def _check_x(x: ArrayLike) -> FloatArray:
    x = _float_array(x, "x")
    if x.ndim != 4:
        raise ValueError(f"x must have shape (N, C, H, W), got {x.shape!r}")
    return x


def _check_g(g: FloatArray, x_shape: Sequence[int], s: int) -> tuple[FloatArray, Shape, Shape]:
    x_shape = tuple(int(e) for e in x_shape)
    g2, seeds = _fold_seeds(g, 4, "g")
    want = x_shape[:2] + (x_shape[2] * s, x_shape[3] * s)
    if g2.shape[1:] != want[1:] or g2.shape[0] != x_shape[0] * math.prod(seeds):
        raise ValueError(f"g must have shape (*seeds, {', '.join(map(str, want))}), got {np.shape(g)!r}")
    return g2, seeds, x_shape


def _linear_table(size: int, s: int, dtype: DTypeLike) -> Table:
    """Source rows/columns and weights for bilinear upsampling by s, align_corners=False."""
    src = np.maximum((np.arange(size * s) + 0.5) / s - 0.5, 0.0)
    i0 = np.floor(src).astype(np.int64)
    i1 = np.minimum(i0 + 1, size - 1)
    l1 = (src - i0).astype(dtype)
    return i0, i1, (1 - l1).astype(dtype), l1


def resample_table(size: int, scale_factor: int, mode: str, dtype: DTypeLike) -> Table:
    """(i0, i1, l0, l1) over the size*s output rows of an upsampling: output row r is
    l0[r] * x[i0[r]] + l1[r] * x[i1[r]] (nearest: i0 = i1 = r // s, l0 = 1, l1 = 0)."""
    s = _scale(scale_factor)
    if mode == "bilinear":
        return _linear_table(size, s, dtype)
    i0 = np.arange(size * s) // s
    return i0, i0, np.ones(size * s, dtype), np.zeros(size * s, dtype)


def upsample_nearest2d_forward(x: FloatArray, scale_factor: int) -> FloatArray:
    """(N, C, H, W) -> (N, C, H*s, W*s), each pixel repeated s x s times."""
    x, s = _check_x(x), _scale(scale_factor)
    out = np.empty(x.shape[:2] + (x.shape[2] * s, x.shape[3] * s), x.dtype)
    _planes_run(_nearest, _nearest_parallel, out, x, x, out, s)
    return out


def upsample_nearest2d_grad_input(g: FloatArray, x_shape: Sequence[int], scale_factor: int) -> FloatArray:
    """VJP of nearest upsampling: g (*seeds, N, C, H*s, W*s) -> (*seeds, N, C, H, W), sums over s x s blocks."""
    s = _scale(scale_factor)
    g2, seeds, x_shape = _check_g(g, x_shape, s)
    dx = np.empty((g2.shape[0],) + x_shape[1:], g2.dtype)
    _planes_run(_nearest_grad, _nearest_grad_parallel, dx, g2, g2, dx, s)
    return dx.reshape(seeds + x_shape)


def upsample_bilinear2d_forward(x: FloatArray, scale_factor: int) -> FloatArray:
    """(N, C, H, W) -> (N, C, H*s, W*s), bilinear with align_corners=False (PyTorch's default)."""
    x, s = _check_x(x), _scale(scale_factor)
    out = np.empty(x.shape[:2] + (x.shape[2] * s, x.shape[3] * s), x.dtype)
    tables = _tables(_linear_table(x.shape[2], s, x.dtype), _linear_table(x.shape[3], s, x.dtype), x.dtype)
    return _resample(x, out, tables)


def upsample_bilinear2d_grad_input(g: FloatArray, x_shape: Sequence[int], scale_factor: int) -> FloatArray:
    """VJP of bilinear upsampling: g (*seeds, N, C, H*s, W*s) -> (*seeds, N, C, H, W)."""
    s = _scale(scale_factor)
    g2, seeds, x_shape = _check_g(g, x_shape, s)
    dx = np.empty((g2.shape[0],) + x_shape[1:], g2.dtype)
    tables = _tables(_linear_table(x_shape[2], s, g2.dtype), _linear_table(x_shape[3], s, g2.dtype), g2.dtype)
    return _resample_grad(g2, dx, tables).reshape(seeds + x_shape)


# ---- any output size: per-axis tables computed as PyTorch's CPU kernels compute them -------------

def resize_table(size_in: int, size_out: int, mode: str, align_corners: bool = False, scale: float | None = None,
                 dtype: DTypeLike = np.float32) -> Table:
    """(i0, i1, l0, l1) over the `size_out` outputs of one axis resized from `size_in`: output r is
    l0[r] * x[i0[r]] + l1[r] * x[i1[r]]. `scale` is the user's scale factor (None when the size was
    given or recomputed).

    nearest: i0 = i1 = min(floor(r * t), size_in - 1) with t = 1 / scale, else size_in / size_out,
    in float32 whatever the dtype (r itself when the sizes match, r // 2 when size_out = 2 size_in).
    bilinear: source s = r * (size_in - 1) / (size_out - 1) with align_corners, else
    max((r + 0.5) * t - 0.5, 0), in the input's precision; i0 = min(floor(s), size_in - 1),
    i1 = i0 + 1 unless i0 is the last row, l1 = s - i0 clipped to [0, 1], l0 = 1 - l1 (the identity
    when the sizes match)."""
    r = np.arange(size_out)
    if mode == "nearest":
        if size_out == size_in:
            i0 = r
        elif size_out == 2 * size_in:
            i0 = r // 2
        else:
            t: np.floating = (np.float32(1.0 / scale) if scale is not None and scale > 0
                              else np.float32(size_in) / np.float32(size_out))
            i0 = np.minimum(np.floor(r.astype(np.float32) * t).astype(np.int64), size_in - 1)
        return i0, i0, np.ones(size_out, dtype), np.zeros(size_out, dtype)
    if mode != "bilinear":
        raise ValueError(f"mode must be 'nearest' or 'bilinear', got {mode!r}")
    if size_out == size_in:
        return r, r, np.ones(size_out, dtype), np.zeros(size_out, dtype)
    op: type[np.floating] = np.float64 if np.dtype(dtype) == np.float64 else np.float32
    if align_corners:
        t = op(size_in - 1) / op(size_out - 1) if size_out > 1 else op(0)
        src = r.astype(op) * t
    else:
        t = op(1.0 / scale) if scale is not None and scale > 0 else op(size_in) / op(size_out)
        src = np.maximum((r.astype(op) + op(0.5)) * t - op(0.5), op(0))
    i0 = np.minimum(np.floor(src).astype(np.int64), size_in - 1)
    i1 = i0 + (i0 < size_in - 1)
    l1 = np.clip(src - i0.astype(op), op(0), op(1))
    return i0, i1, (op(1) - l1).astype(dtype), l1.astype(dtype)


def _tables(rows: TableLike, cols: TableLike, dtype: DTypeLike) -> PlaneTables:
    (y0, y1, ly0, ly1), (x0, x1, lx0, lx1) = rows, cols
    ints = [np.ascontiguousarray(a, np.int64) for a in (y0, y1, x0, x1)]
    flts = [np.ascontiguousarray(a, dtype) for a in (ly0, ly1, lx0, lx1)]
    return ints[0], ints[1], flts[0], flts[1], ints[2], ints[3], flts[2], flts[3]


def resample2d_forward(x: FloatArray, rows: Table, cols: Table) -> FloatArray:
    """(N, C, H, W) -> (N, C, len(rows[0]), len(cols[0])): out[r, c] = sum over the two row taps and
    the two column taps of `rows` and `cols` (tables (i0, i1, l0, l1), see `resize_table`) of weight
    times input."""
    x = _check_x(x)
    out = np.empty(x.shape[:2] + (len(rows[0]), len(cols[0])), x.dtype)
    return _resample(x, out, _tables(rows, cols, x.dtype))


def resample2d_grad_input(g: FloatArray, x_shape: Sequence[int], rows: Table, cols: Table) -> FloatArray:
    """VJP of `resample2d_forward`: g (*seeds, N, C, OH, OW) -> (*seeds, N, C, H, W), each g cell sent
    back to its four taps with their weights."""
    x_shape = tuple(int(e) for e in x_shape)
    g2, seeds = _fold_seeds(g, 4, "g")
    want = x_shape[:2] + (len(rows[0]), len(cols[0]))
    if g2.shape[1:] != want[1:] or g2.shape[0] != x_shape[0] * math.prod(seeds):
        raise ValueError(f"g must have shape (*seeds, {', '.join(map(str, want))}), got {np.shape(g)!r}")
    dx = np.empty((g2.shape[0],) + x_shape[1:], g2.dtype)
    return _resample_grad(g2, dx, _tables(rows, cols, g2.dtype)).reshape(seeds + x_shape)


def gather_grad_axis(g: ArrayLike, index: IntArray, n: int, axis: int) -> NDArray[Any]:
    """Adjoint of x.take(index, axis) for an x with n entries along `axis`: each g slice added into the
    entry it was read from (index need not be monotone; entries never read get 0)."""
    g = np.moveaxis(np.asarray(g), axis, 0)
    order = np.argsort(index, kind="stable")
    sorted_index = index[order]
    starts = np.flatnonzero(np.r_[True, sorted_index[1:] != sorted_index[:-1]]) if len(index) else np.zeros(0, np.int64)
    dx = np.zeros((n,) + g.shape[1:], g.dtype)
    if len(index):
        src = g if np.array_equal(order, np.arange(len(order))) else g[order]
        dx[sorted_index[starts]] = np.add.reduceat(src, starts, axis=0)
    return np.moveaxis(dx, 0, axis)


def _range_bounds(t0: IntArray, t1: IntArray, origins: IntArray, size: int) -> tuple[IntArray, IntArray]:
    """Per window k of `size` consecutive outputs from origins[k] (clipped to the outputs): the least
    and one past the greatest entry of the tables t0 and t1 among its outputs (tables may be
    non-monotone; every tap counts, weight 0 or not, since the adjoint kernel visits all four)."""
    big = np.iinfo(np.int64).max
    lo_tab, hi_tab = np.minimum(t0, t1), np.maximum(t0, t1)
    pad = size - 1  # windows reaching past either end see neutral values there
    lo = np.lib.stride_tricks.sliding_window_view(np.concatenate([np.full(pad, big), lo_tab, np.full(pad, big)]),
                                                  size).min(axis=1)
    hi = np.lib.stride_tricks.sliding_window_view(np.concatenate([np.full(pad, -1), hi_tab, np.full(pad, -1)]),
                                                  size).max(axis=1)
    at = np.clip(origins + pad, 0, len(lo) - 1)
    first, last = lo[at], hi[at]
    empty = last < 0  # a window wholly outside the map reads nothing
    return np.where(empty, 0, first), np.where(empty, 1, last + 1)


def table_window_grad(g: FloatArray, origins: IntArray, out_size: Sequence[int], rows: TableLike,
                      cols: TableLike) -> tuple[FloatArray, IntArray]:
    """Adjoint of a separable resampling by tables `rows` and `cols` (i0, i1, l0, l1 over the output's
    rows / columns, in any order, e.g. a reflection) on windows g (K, *lead, h, w) at `origins` of the
    output map: (dx windows, origins_in) of the input map, each window the bounding box of the taps
    that its cells read."""
    OH, OW = int(out_size[0]), int(out_size[1])
    h, w = g.shape[-2:]
    bounds = [_range_bounds(np.asarray(t[0], np.int64), np.asarray(t[1], np.int64), o, n)
              for t, n, o in ((rows, h, origins[:, 0]), (cols, w, origins[:, 1]))]
    origins_in = np.stack([bounds[0][0], bounds[1][0]], axis=1).astype(np.int64)
    size = (max(int((bounds[0][1] - bounds[0][0]).max()), 1), max(int((bounds[1][1] - bounds[1][0]).max()), 1))
    g2 = _planes(g)
    dx = np.empty(g2.shape[:2] + size, g2.dtype)
    y0, y1, ly0, ly1, x0, x1, lx0, lx1 = _tables(rows, cols, g2.dtype)
    _separable_grad(g2, np.ascontiguousarray(origins, np.int64), origins_in, OH, OW, y0, y1, ly0, ly1,
                    x0, x1, lx0, lx1, dx)
    return dx.reshape(g.shape[:-2] + size), origins_in
