"""Pooling over NCHW planes and its VJPs: max_pool2d (dilation, ceil_mode), avg_pool2d (ceil_mode,
count_include_pad, divisor_override), adaptive_avg_pool2d, adaptive_max_pool2d.

Every pooling here is a window per output row [y0, y1) times a window per output column
[x0, x1), clipped to the image; the wrappers build these tables with NumPy and two kernel
pairs do the work. Kernels loop over a range [lo, hi) of the flattened (n, c) planes: each
iteration owns its plane of the output (forward) or of dx (backward, a scatter-add), so writes
never overlap, and large calls run in parts of their planes on the kernels' threads
(`threads.run`).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
from numba import prange

from ._jit import njit

from . import threads
from .conv2d import _fold_seeds, _float_array, _pair

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from .._typing import Float64, FloatArray, IntArray, Shape, Size

    Pair = tuple[int, int]
    IndexArray = NDArray[np.int32 | np.int64]  # max-pool indices: int32 for planes below 2**31 cells
    Tables = tuple[IntArray, IntArray, IntArray, IntArray, Float64]  # window rows [y0, y1), columns [x0, x1), divisors


@njit(cache=True, nogil=True)
def _max_pool(x: FloatArray, out: FloatArray, idx: IndexArray, y0: IntArray, y1: IntArray, x0: IntArray, x1: IntArray,
              lo: int, hi: int) -> None:
    """out = max over each window, idx = flat index iy*W + ix of the max (PyTorch: the first, NaN
    wins), for the flattened (n, c) planes in [lo, hi)."""
    C, W = x.shape[1], x.shape[3]
    OH, OW = out.shape[2], out.shape[3]
    for t in range(lo, hi):
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


@njit(cache=True, nogil=True, parallel=True)
def _max_pool_parallel(x: FloatArray, out: FloatArray, idx: IndexArray, y0: IntArray, y1: IntArray, x0: IntArray,
                       x1: IntArray, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _max_pool(x, out, idx, y0, y1, x0, x1, lo, hi)


@njit(cache=True, nogil=True)
def _max_pool_dilated(x: FloatArray, out: FloatArray, idx: IndexArray, ys: IntArray, xs: IntArray, kh: int, kw: int,
                      dh: int, dw: int, lo: int, hi: int) -> None:
    """_max_pool for dilated windows: output (oy, ox) reads x[ys[oy] + i*dh, xs[ox] + j*dw] for i < kh,
    j < kw where that is inside the plane (padding is -inf); same scan order and NaN rule."""
    C, H, W = x.shape[1], x.shape[2], x.shape[3]
    OH, OW = out.shape[2], out.shape[3]
    for t in range(lo, hi):
        n = t // C
        c = t % C
        for oy in range(OH):
            for ox in range(OW):
                best = -np.inf
                bi = -1
                for i in range(kh):
                    iy = ys[oy] + i * dh
                    if iy < 0 or iy >= H:
                        continue
                    for j in range(kw):
                        ix = xs[ox] + j * dw
                        if ix < 0 or ix >= W:
                            continue
                        v = x[n, c, iy, ix]
                        if bi < 0 or v > best or np.isnan(v):
                            best = v
                            bi = iy * W + ix
                out[n, c, oy, ox] = best
                idx[n, c, oy, ox] = bi


@njit(cache=True, nogil=True, parallel=True)
def _max_pool_dilated_parallel(x: FloatArray, out: FloatArray, idx: IndexArray, ys: IntArray, xs: IntArray, kh: int,
                               kw: int, dh: int, dw: int, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _max_pool_dilated(x, out, idx, ys, xs, kh, kw, dh, dw, lo, hi)


@njit(cache=True, nogil=True)
def _max_pool_2x2(x: FloatArray, out: FloatArray, idx: IndexArray, lo: int, hi: int) -> None:
    """_max_pool for 2x2 windows at stride 2 without padding (tested against it): the four
    candidates of each window compared in the generic kernel's order, branch-free (selects, and
    `v != v` for NaN), read at 2*ox and 2*ox + 1 of slices of two input rows that start at 0 (no
    negative-index test), so that LLVM can vectorize the loop; rows narrower than one vector run
    scalar, still without the window tables."""
    C, W = x.shape[1], x.shape[3]
    OH, OW = out.shape[2], out.shape[3]
    for t in range(lo, hi):
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


@njit(cache=True, nogil=True, parallel=True)
def _max_pool_2x2_parallel(x: FloatArray, out: FloatArray, idx: IndexArray, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _max_pool_2x2(x, out, idx, lo, hi)


@njit(cache=True, nogil=True)
def _max_pool_grad(g: FloatArray, idx: IndexArray, dx: FloatArray, lo: int, hi: int) -> None:
    """dx[m, c, idx] += g[m, c] for the flattened (m, c) planes in [lo, hi); g is (M, C, OH, OW)
    with M = K*N seeds folded in, idx is (N, C, OH, OW)."""
    C, OH, OW = g.shape[1], g.shape[2], g.shape[3]
    N = idx.shape[0]
    for t in range(lo, hi):
        m = t // C
        c = t % C
        plane = dx[m, c]
        plane[:] = 0
        for oy in range(OH):
            for ox in range(OW):
                plane[idx[m % N, c, oy, ox]] += g[m, c, oy, ox]


@njit(cache=True, nogil=True, parallel=True)
def _max_pool_grad_parallel(g: FloatArray, idx: IndexArray, dx: FloatArray, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _max_pool_grad(g, idx, dx, lo, hi)


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _box_pool(x: FloatArray, out: FloatArray, y0: IntArray, y1: IntArray, x0: IntArray, x1: IntArray, div: FloatArray,
              lo: int, hi: int) -> None:
    """out[n, c, oy, ox] = sum of x over the window / div[oy, ox], for the flattened (n, c) planes
    in [lo, hi)."""
    C = x.shape[1]
    OH, OW = out.shape[2], out.shape[3]
    for t in range(lo, hi):
        n = t // C
        c = t % C
        for oy in range(OH):
            for ox in range(OW):
                s = 0.0
                for iy in range(y0[oy], y1[oy]):
                    for ix in range(x0[ox], x1[ox]):
                        s += x[n, c, iy, ix]
                out[n, c, oy, ox] = s / div[oy, ox]


@njit(cache=True, nogil=True, parallel=True)
def _box_pool_parallel(x: FloatArray, out: FloatArray, y0: IntArray, y1: IntArray, x0: IntArray, x1: IntArray,
                       div: FloatArray, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _box_pool(x, out, y0, y1, x0, x1, div, lo, hi)


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _box_pool_grad(g: FloatArray, dx: FloatArray, y0: IntArray, y1: IntArray, x0: IntArray, x1: IntArray,
                   div: FloatArray, lo: int, hi: int) -> None:
    """Adjoint of _box_pool: every x in a window gets g / div of that window."""
    C, OH, OW = g.shape[1], g.shape[2], g.shape[3]
    for t in range(lo, hi):
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


@njit(cache=True, nogil=True, parallel=True)
def _box_pool_grad_parallel(g: FloatArray, dx: FloatArray, y0: IntArray, y1: IntArray, x0: IntArray, x1: IntArray,
                            div: FloatArray, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _box_pool_grad(g, dx, y0, y1, x0, x1, div, lo, hi)


def _planes_run(serial: Callable[..., object], parallel: Callable[..., object], out: NDArray[Any], other: NDArray[Any],
                *args: Any) -> None:
    """serial(*args, lo, hi) over the N*C planes of `out`, in parts on the kernels' threads when
    `out` or `other` (the call's input) is large (`threads.run`)."""
    threads.run(serial, parallel, out.shape[0] * out.shape[1], max(out.size, other.size), *args)


def _window_starts(size: int, kernel: int, stride: int, padding: int, name: str, dilation: int = 1,
                   ceil_mode: bool = False) -> IntArray:
    """First taps i*stride - padding of a sliding kernel's windows (not clipped), PyTorch's count of
    them: floor or ceil of (size + 2*padding - (kernel-1)*dilation - 1) / stride, plus one; in ceil
    mode a last window that would start past the input and its right padding is dropped."""
    if kernel < 1 or stride < 1 or dilation < 1 or padding < 0 or 2 * padding > kernel:
        raise ValueError(f"{name} needs kernel >= 1, stride >= 1, dilation >= 1 and 0 <= padding <= kernel/2 "
                         f"(as PyTorch), got kernel={kernel}, stride={stride}, padding={padding}")
    span = size + 2 * padding - (kernel - 1) * dilation - 1
    n_out = (span + (stride - 1 if ceil_mode else 0)) // stride + 1  # floor division, as PyTorch's div_rtn
    if ceil_mode and n_out > 0 and (n_out - 1) * stride >= size + padding:
        n_out -= 1
    if n_out < 1:
        raise ValueError(f"{name}: input of size {size} is smaller than the kernel {kernel} "
                         f"(dilation {dilation}) after padding {padding}")
    return np.arange(n_out, dtype=np.int64) * stride - padding


def _sliding_windows(size: int, kernel: int, stride: int, padding: int, name: str,
                     ceil_mode: bool = False) -> tuple[IntArray, IntArray]:
    """Clipped windows [lo, hi) of a sliding kernel (floor mode, or ceil_mode as PyTorch's)."""
    start = _window_starts(size, kernel, stride, padding, name, 1, ceil_mode)
    return np.clip(start, 0, size).astype(np.int64), np.clip(start + kernel, 0, size).astype(np.int64)


def _adaptive_windows(size: int, n_out: int) -> tuple[IntArray, IntArray]:
    """PyTorch's adaptive bins: [floor(i*size/n_out), ceil((i+1)*size/n_out))."""
    i = np.arange(n_out, dtype=np.int64)
    return (i * size) // n_out, ((i + 1) * size + n_out - 1) // n_out


def _check_x(x: ArrayLike) -> FloatArray:
    x = _float_array(x, "x")
    if x.ndim != 4:
        raise ValueError(f"x must have shape (N, C, H, W), got {x.shape!r}")
    return x


def _pool_windows(x_shape: Shape, kernel_size: Size, stride: Size | None, padding: Size, name: str,
                  ceil_mode: bool = False) -> tuple[tuple[IntArray, IntArray], tuple[IntArray, IntArray], Pair]:
    k = _pair(kernel_size, "kernel_size")
    s = k if stride is None else _pair(stride, "stride")
    p = _pair(padding, "padding")
    return (_sliding_windows(x_shape[2], k[0], s[0], p[0], name, ceil_mode),
            _sliding_windows(x_shape[3], k[1], s[1], p[1], name, ceil_mode), k)


def _stride_or_kernel(kernel_size: Size, stride: Size | None) -> Size:
    """PyTorch's stride=None (or an empty list): the kernel size."""
    return kernel_size if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0) else stride


def _grad_out(g: FloatArray, x_shape: Shape, n_out: Sequence[int], name: str) -> tuple[FloatArray, Shape]:
    g2, seeds = _fold_seeds(g, 4, "g")
    want = (x_shape[0], x_shape[1]) + tuple(n_out)
    if g2.shape[1:] != want[1:] or g2.shape[0] != x_shape[0] * math.prod(seeds):
        raise ValueError(f"{name}: g must have shape (*seeds, {', '.join(map(str, want))}), got {np.shape(g)!r}")
    return g2, seeds


def _is_2x2_stride_2(kernel_size: Size, stride: Size | None, padding: Size) -> bool:
    """The common pooling: 2x2 windows, stride 2, no padding (floor mode drops an odd last row/column)."""
    return _pair(kernel_size, "kernel_size") == (2, 2) and (stride is None or _pair(stride, "stride") == (2, 2)) \
        and _pair(padding, "padding") == (0, 0)


def _index_dtype(shape: Shape) -> type[np.int32] | type[np.int64]:
    return np.int32 if shape[2] * shape[3] < 2 ** 31 else np.int64


def _indices(indices: ArrayLike) -> IndexArray:
    """Max-pool indices as a C-contiguous int32 or int64 array (no copy when they already are)."""
    indices = np.asarray(indices)
    return np.ascontiguousarray(indices, indices.dtype if indices.dtype in (np.int32, np.int64) else np.int64)


def max_pool2d_forward(x: FloatArray, kernel_size: Size, stride: Size | None = None, padding: Size = 0,
                       dilation: Size = 1, ceil_mode: bool = False) -> tuple[FloatArray, IndexArray]:
    """(N, C, H, W) -> (out (N, C, OH, OW), indices (N, C, OH, OW) into each H*W plane, as PyTorch's but
    int32 when a plane has fewer than 2**31 cells (half the memory traffic of int64 in the forward
    and the VJP), else int64. Padding is -inf (cells outside the plane are never the maximum);
    ceil_mode and dilation as PyTorch's."""
    x = _check_x(x)
    d = _pair(dilation, "dilation")
    if d != (1, 1):
        k = _pair(kernel_size, "kernel_size")
        s = _pair(_stride_or_kernel(kernel_size, stride), "stride")
        p = _pair(padding, "padding")
        ys = _window_starts(x.shape[2], k[0], s[0], p[0], "max_pool2d", d[0], ceil_mode)
        xs = _window_starts(x.shape[3], k[1], s[1], p[1], "max_pool2d", d[1], ceil_mode)
        out = np.empty(x.shape[:2] + (len(ys), len(xs)), x.dtype)
        idx = np.empty(out.shape, _index_dtype(x.shape))
        _planes_run(_max_pool_dilated, _max_pool_dilated_parallel, out, x, x, out, idx, ys, xs, k[0], k[1], d[0], d[1])
        return out, idx
    if ceil_mode:
        (y0, y1), (x0, x1), _ = _pool_windows(x.shape, kernel_size, _stride_or_kernel(kernel_size, stride), padding,
                                              "max_pool2d", True)
        out = np.empty(x.shape[:2] + (len(y0), len(x0)), x.dtype)
        idx = np.empty(out.shape, _index_dtype(x.shape))
        _planes_run(_max_pool, _max_pool_parallel, out, x, x, out, idx, y0, y1, x0, x1)
        return out, idx
    if _is_2x2_stride_2(kernel_size, stride, padding) and x.shape[2] >= 2 and x.shape[3] >= 2:
        out = np.empty(x.shape[:2] + (x.shape[2] // 2, x.shape[3] // 2), x.dtype)  # no window tables
        idx = np.empty(out.shape, _index_dtype(x.shape))
        _planes_run(_max_pool_2x2, _max_pool_2x2_parallel, out, x, x, out, idx)
        return out, idx
    (y0, y1), (x0, x1), _ = _pool_windows(x.shape, kernel_size, stride, padding, "max_pool2d")
    out = np.empty(x.shape[:2] + (len(y0), len(x0)), x.dtype)
    idx = np.empty(out.shape, _index_dtype(x.shape))
    _planes_run(_max_pool, _max_pool_parallel, out, x, x, out, idx, y0, y1, x0, x1)
    return out, idx


def max_pool2d_grad_input(g: FloatArray, indices: IndexArray, x_shape: Sequence[int]) -> FloatArray:
    """VJP of max_pool2d: g (*seeds, N, C, OH, OW) and the forward's indices -> (*seeds, N, C, H, W)."""
    x_shape = tuple(int(e) for e in x_shape)
    indices = _indices(indices)
    g2, seeds = _grad_out(g, x_shape, indices.shape[2:], "max_pool2d")
    dx = np.empty((g2.shape[0], x_shape[1], x_shape[2] * x_shape[3]), g2.dtype)
    _planes_run(_max_pool_grad, _max_pool_grad_parallel, dx, g2, g2, indices, dx)
    return dx.reshape(seeds + x_shape)


def _avg_tables(x_shape: Shape, kernel_size: Size, stride: Size | None, padding: Size, ceil_mode: bool = False,
                count_include_pad: bool = True, divisor_override: float | None = None) -> Tables:
    """Window tables and divisors of avg_pool2d, as PyTorch's: with count_include_pad the window's
    cells up to the end of the padding (a ceil_mode window past the padding counts fewer), else
    the window's cells inside the input; divisor_override replaces both."""
    if not ceil_mode and count_include_pad and divisor_override is None:
        (y0, y1), (x0, x1), k = _pool_windows(x_shape, kernel_size, stride, padding, "avg_pool2d")
        return y0, y1, x0, x1, np.full((len(y0), len(x0)), float(k[0] * k[1]))  # count_include_pad=True
    k = _pair(kernel_size, "kernel_size")
    s = _pair(_stride_or_kernel(kernel_size, stride), "stride")
    p = _pair(padding, "padding")
    tables = []
    for axis in range(2):
        start = _window_starts(x_shape[2 + axis], k[axis], s[axis], p[axis], "avg_pool2d", 1, ceil_mode)
        end = start + k[axis]
        padded = np.minimum(end, x_shape[2 + axis] + p[axis]) - start
        lo, hi = np.clip(start, 0, x_shape[2 + axis]), np.clip(end, 0, x_shape[2 + axis])
        tables.append((lo, hi, padded if count_include_pad else hi - lo))
    (y0, y1, ny), (x0, x1, nx) = tables
    if divisor_override is not None:
        if int(divisor_override) != divisor_override or divisor_override == 0:
            raise ValueError(f"avg_pool2d: divisor_override must be a non-zero integer, got {divisor_override!r}")
        div = np.full((len(y0), len(x0)), float(divisor_override))
    else:
        div = np.outer(ny, nx).astype(np.float64)
    return y0, y1, x0, x1, div


def _adaptive_tables(x_shape: Shape, output_size: Size) -> Tables:
    oh, ow = _pair(output_size, "output_size")
    if oh < 1 or ow < 1:
        raise ValueError(f"adaptive pooling needs output_size >= 1, got {output_size!r}")
    y0, y1 = _adaptive_windows(x_shape[2], oh)
    x0, x1 = _adaptive_windows(x_shape[3], ow)
    return y0, y1, x0, x1, np.outer(y1 - y0, x1 - x0).astype(np.float64)


def _box_forward(x: FloatArray, tables: Tables) -> FloatArray:
    y0, y1, x0, x1, div = tables
    out = np.empty(x.shape[:2] + div.shape, x.dtype)
    _planes_run(_box_pool, _box_pool_parallel, out, x, x, out, y0, y1, x0, x1, div.astype(x.dtype))
    return out


def _box_grad(g: FloatArray, x_shape: Shape, tables: Tables, name: str) -> FloatArray:
    y0, y1, x0, x1, div = tables
    g2, seeds = _grad_out(g, x_shape, div.shape, name)
    dx = np.empty((g2.shape[0],) + x_shape[1:], g2.dtype)
    _planes_run(_box_pool_grad, _box_pool_grad_parallel, dx, g2, g2, dx, y0, y1, x0, x1, div.astype(g2.dtype))
    return dx.reshape(seeds + x_shape)


def avg_pool2d_forward(x: FloatArray, kernel_size: Size, stride: Size | None = None, padding: Size = 0,
                       ceil_mode: bool = False, count_include_pad: bool = True,
                       divisor_override: float | None = None) -> FloatArray:
    """(N, C, H, W) -> (N, C, OH, OW), with PyTorch's arguments and defaults (see _avg_tables)."""
    x = _check_x(x)
    return _box_forward(x, _avg_tables(x.shape, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                       divisor_override))


def avg_pool2d_grad_input(g: FloatArray, x_shape: Sequence[int], kernel_size: Size, stride: Size | None = None,
                          padding: Size = 0, ceil_mode: bool = False, count_include_pad: bool = True,
                          divisor_override: float | None = None) -> FloatArray:
    """VJP of avg_pool2d: g (*seeds, N, C, OH, OW) -> (*seeds, N, C, H, W)."""
    x_shape = tuple(int(e) for e in x_shape)
    return _box_grad(g, x_shape, _avg_tables(x_shape, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                             divisor_override), "avg_pool2d")


def adaptive_avg_pool2d_forward(x: FloatArray, output_size: Size) -> FloatArray:
    """(N, C, H, W) -> (N, C, oh, ow), bins [floor(i*H/oh), ceil((i+1)*H/oh)) as PyTorch."""
    x = _check_x(x)
    if _pair(output_size, "output_size") == (1, 1):  # a global mean: NumPy's pairwise sum, no window tables
        N, C = x.shape[:2]
        return x.reshape(N, C, -1).mean(axis=2).reshape(N, C, 1, 1)
    return _box_forward(x, _adaptive_tables(x.shape, output_size))


def adaptive_avg_pool2d_grad_input(g: FloatArray, x_shape: Sequence[int], output_size: Size) -> FloatArray:
    """VJP of adaptive_avg_pool2d: g (*seeds, N, C, oh, ow) -> (*seeds, N, C, H, W)."""
    x_shape = tuple(int(e) for e in x_shape)
    if _pair(output_size, "output_size") == (1, 1):  # the mean's gradient, spread: one broadcast copy
        g2, seeds = _grad_out(g, x_shape, (1, 1), "adaptive_avg_pool2d")
        dx = np.empty((g2.shape[0],) + x_shape[1:], g2.dtype)
        dx[...] = g2 / (x_shape[2] * x_shape[3])
        return dx.reshape(seeds + x_shape)
    return _box_grad(g, x_shape, _adaptive_tables(x_shape, output_size), "adaptive_avg_pool2d")


def adaptive_max_pool2d_forward(x: FloatArray, output_size: Size) -> tuple[FloatArray, IndexArray]:
    """(N, C, H, W) -> (out (N, C, oh, ow), indices into each H*W plane): the maximum over PyTorch's
    adaptive bins [floor(i*H/oh), ceil((i+1)*H/oh)), first maximum (NaN wins) as max_pool2d."""
    x = _check_x(x)
    y0, y1, x0, x1, _ = _adaptive_tables(x.shape, output_size)
    out = np.empty(x.shape[:2] + (len(y0), len(x0)), x.dtype)
    idx = np.empty(out.shape, _index_dtype(x.shape))
    _planes_run(_max_pool, _max_pool_parallel, out, x, x, out, idx, y0, y1, x0, x1)
    return out, idx


def avg_pool2d_tables(x_shape: Sequence[int], kernel_size: Size, stride: Size | None = None, padding: Size = 0,
                      ceil_mode: bool = False, count_include_pad: bool = True,
                      divisor_override: float | None = None) -> Tables:
    """(y0, y1, x0, x1, div) of avg_pool2d: each output row's / column's window clipped to the input,
    and each output cell's divisor (float64)."""
    return _avg_tables(tuple(int(e) for e in x_shape), kernel_size, stride, padding, ceil_mode, count_include_pad,
                       divisor_override)


def adaptive_pool2d_tables(x_shape: Sequence[int], output_size: Size) -> Tables:
    """(y0, y1, x0, x1, div) of adaptive pooling to `output_size`: PyTorch's bins and their cell counts."""
    return _adaptive_tables(tuple(int(e) for e in x_shape), output_size)
