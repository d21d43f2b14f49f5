"""3x3 convolutions at stride 1 by Winograd's minimal filtering F(2x2, 3x3), and their input VJP.

Each 2x2 block of output (a tile) depends on a 4x4 block of input, and F(2x2, 3x3) computes it
with 16 multiplications instead of 36: with d the 4x4 input block, g the 3x3 filter,

    y (2x2) = A^T [ (G g G^T) * (B^T d B) ] A        (* elementwise)

    B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
    G   = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]]
    A^T = [[1, 1, 1, 0], [0, 1, -1, -1]].

Summed over input channels, the elementwise product becomes 16 matrix products, one per entry
(a, b) of the 4x4 transformed block: M[a, b] (O, tiles) = U[a, b] (O, C) @ V[a, b] (C, tiles),
with U the transformed weights and V the transformed input tiles. That is 16*O*C multiply-adds
per tile of 4 outputs, against 36*O*C for the direct convolution: 2.25 times fewer. The
transforms are additions only (`_input_tiles`, `_output_tiles`, `_weight_tiles`, one pass each);
their cost grows with C + O per output, the products' saving with C*O, so the path pays for
layers with many channels (`conv2d.winograd_pays`). Large calls run in parts on the kernels'
threads: parts of the tile rows of all images for the transforms and products, parts of the
output channels for the weight transform.

The input VJP at stride 1 is the same correlation on the cotangent with the flipped, in/out
swapped weight (see `conv2d.conv2d_grad_input_direct`). Reversing g's columns reverses the
columns of G, which is G with its first and last rows swapped, so G flip(g) G^T is U[a, b] with
entries 0 and 3 of both a and b swapped: the input VJP reuses the forward's weight transform, its
products reading U[_FLIP[4a + b]] transposed. The weight transform is computed once per version
of the weight (`weight_tiles`), not per call.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Sequence

import numpy as np
from numba import prange

from ._jit import njit

from . import blas, threads, versions

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

    from .._typing import FloatArray, IntArray, Shape

    Pair = tuple[int, int]


_FASTMATH = {"reassoc", "contract"}

_SWAP = (3, 1, 2, 0)
_FLIP = tuple(4 * _SWAP[t // 4] + _SWAP[t % 4] for t in range(16))  # entry of G flip(g) G^T in U


@njit(cache=True, inline="always")
def _g(a: float, b: float, c: float, half: float) -> tuple[float, float, float, float]:
    """G times the column (a, b, c): (a, (a + b + c)/2, (a - b + c)/2, c)."""
    return a, half * (a + b + c), half * (a - b + c), c


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _weight_tiles(w: FloatArray, u: FloatArray, lo: int, hi: int) -> None:
    """u[4a + b, o, c] = (G w[o, c] G^T)[a, b] for w (O, C, 3, 3), u (16, O, C), the output
    channels o in [lo, hi)."""
    C = w.shape[1]
    half = w.dtype.type(0.5)
    for o in range(lo, hi):
        for c in range(C):
            g = w[o, c]
            # G g (4x3), one column at a time; then each of its rows times G^T
            k0 = _g(g[0, 0], g[1, 0], g[2, 0], half)
            k1 = _g(g[0, 1], g[1, 1], g[2, 1], half)
            k2 = _g(g[0, 2], g[1, 2], g[2, 2], half)
            for a in range(4):
                e = _g(k0[a], k1[a], k2[a], half)
                for b in range(4):
                    u[4 * a + b, o, c] = e[b]


@njit(cache=True, nogil=True, parallel=True)
def _weight_tiles_parallel(w: FloatArray, u: FloatArray, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _weight_tiles(w, u, lo, hi)


@njit(cache=True, inline="always")
def _bt(p0: float, p1: float, p2: float, p3: float) -> tuple[float, float, float, float]:
    """B^T times the column (p0, p1, p2, p3): (p0 - p2, p1 + p2, p2 - p1, p1 - p3)."""
    return p0 - p2, p1 + p2, p2 - p1, p1 - p3


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _input_tiles(x: FloatArray, v: FloatArray, ph: int, pw: int, ty0: int, ty1: int, TW: int) -> None:
    """v[4a + b, c, t] = (B^T d B)[a, b] for the 4x4 input block d of tile t, over the images of x
    (N, C, H, W) and the tile rows ty0..ty1-1: tile (n, ty, tx) is t = (n*(ty1 - ty0) + ty - ty0)*TW + tx
    and its block starts at input row 2*ty - ph, column 2*tx - pw (positions outside x are zero).
    """
    N, C, H, W = x.shape
    Wp = 2 * TW + 2
    rows = np.zeros((4, Wp), x.dtype)  # the block rows of one tile row, zero-padded
    lo = min(Wp, max(0, pw))
    hi = max(lo, min(Wp, W + pw))
    nty = ty1 - ty0
    for n in range(N):
        for c in range(C):
            for ty in range(ty0, ty1):
                for k in range(4):
                    iy = 2 * ty + k - ph
                    dst = rows[k]
                    if iy < 0 or iy >= H:
                        dst[:] = 0
                    else:
                        dst[:lo] = 0
                        dst[hi:] = 0
                        src = x[n, c, iy]
                        for j in range(hi - lo):
                            dst[lo + j] = src[lo - pw + j]
                base = (n * nty + ty - ty0) * TW
                d0, d1, d2, d3 = rows[0], rows[1], rows[2], rows[3]
                for tx in range(TW):
                    j = 2 * tx
                    t = base + tx
                    # B^T d, one column of the block at a time; then each of its rows times B
                    k0 = _bt(d0[j], d1[j], d2[j], d3[j])
                    k1 = _bt(d0[j + 1], d1[j + 1], d2[j + 1], d3[j + 1])
                    k2 = _bt(d0[j + 2], d1[j + 2], d2[j + 2], d3[j + 2])
                    k3 = _bt(d0[j + 3], d1[j + 3], d2[j + 3], d3[j + 3])
                    for a in range(4):
                        e = _bt(k0[a], k1[a], k2[a], k3[a])
                        for b in range(4):
                            v[4 * a + b, c, t] = e[b]


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _output_tiles(m: FloatArray, b: FloatArray, y: FloatArray, ty0: int, ty1: int, TW: int) -> None:
    """y[n, o, 2*ty + i, 2*tx + j] = b[o] + (A^T M A)[i, j] with M[a, b] = m[4a + b, o, t] for the
    tiles t of `_input_tiles` (same numbering); outputs past y's last row or column are dropped."""
    N, O, OH, OW = y.shape
    nty = ty1 - ty0
    full = OW // 2  # tiles whose two columns are both inside y
    for n in range(N):
        for o in range(O):
            bo = b[o]
            for ty in range(ty0, ty1):
                base = (n * nty + ty - ty0) * TW
                y0 = y[n, o, 2 * ty]
                second = 2 * ty + 1 < OH
                y1 = y[n, o, min(2 * ty + 1, OH - 1)]
                for tx in range(TW):
                    t = base + tx
                    # A^T M: rows M0 + M1 + M2 and M1 - M2 - M3
                    p0 = m[0, o, t] + m[4, o, t] + m[8, o, t]
                    p1 = m[1, o, t] + m[5, o, t] + m[9, o, t]
                    p2 = m[2, o, t] + m[6, o, t] + m[10, o, t]
                    p3 = m[3, o, t] + m[7, o, t] + m[11, o, t]
                    q0 = m[4, o, t] - m[8, o, t] - m[12, o, t]
                    q1 = m[5, o, t] - m[9, o, t] - m[13, o, t]
                    q2 = m[6, o, t] - m[10, o, t] - m[14, o, t]
                    q3 = m[7, o, t] - m[11, o, t] - m[15, o, t]
                    # (A^T M) A: columns c0 + c1 + c2 and c1 - c2 - c3
                    ox = 2 * tx
                    y0[ox] = bo + p0 + p1 + p2
                    if second:
                        y1[ox] = bo + q0 + q1 + q2
                    if tx < full:
                        y0[ox + 1] = bo + p1 - p2 - p3
                        if second:
                            y1[ox + 1] = bo + q1 - q2 - q3


def _plane_step(shape: Sequence[int], itemsize: int) -> int:
    """Elements from one plane of `_planes` to the next: the plane's size rounded up to 4 KiB,
    plus 256 bytes."""
    return (-(-int(np.prod(shape)) * itemsize // 4096) * 4096 + 256) // itemsize


def _planes(shape: Sequence[int], buffer: FloatArray) -> FloatArray:
    """A (16, *shape) view of the flat `buffer` (at least 16 * _plane_step elements) whose 16
    planes are 256 bytes apart modulo 4 KiB.

    The transforms read or write one entry of each of the 16 planes per tile; planes whose
    distance is a multiple of 4 KiB (any power-of-two size) put those 16 accesses in one set of
    the cache, which holds 8, so every tile would miss. Offsetting the planes spreads them."""
    size, step = int(np.prod(shape)), _plane_step(shape, buffer.itemsize)
    planes = buffer[:16 * step].reshape(16, step)[:, :size]
    planes.shape = (16,) + tuple(shape)  # splits the contiguous rows in place (never a copy)
    return planes


_workspaces = threading.local()


def _workspace(elements: int, dtype: DTypeLike) -> FloatArray:
    """A flat scratch buffer of this thread, kept from call to call (grown when a call needs
    more): fresh buffers of a few megabytes come from the system as untouched pages, and the
    page faults of touching them cost as much as the products of a small layer."""
    held = getattr(_workspaces, "buffers", None)
    if held is None:
        held = _workspaces.buffers = {}
    dtype = np.dtype(dtype)
    buffer = held.get(dtype)
    if buffer is None or buffer.size < elements:
        buffer = held[dtype] = np.empty(elements, dtype)
    return buffer[:elements]


def weight_tiles(w: FloatArray) -> FloatArray:
    """The transformed weights U (16, O, C) of w (O, C, 3, 3), read-only: computed once per version
    of w's memory (`versions.derived`), so a map's forward pass and input VJP, and every later map
    until the weight changes, share one transform."""
    return versions.derived("winograd_weight_tiles", _transform_weight, w)


def _transform_weight(w: FloatArray) -> FloatArray:
    """U of w, in parts of the output channels on the kernels' threads when the weight is large."""
    u = _planes(w.shape[:2], np.empty(16 * _plane_step(w.shape[:2], w.itemsize), w.dtype))
    threads.run(_weight_tiles, _weight_tiles_parallel, w.shape[0], u.size, w, u)
    return u


# The transformed tiles of one block of work (16 planes of max(C, O) rows) stay under this size,
# so that the products read them back from the caches rather than from memory.
BLOCK_BYTES = 1 << 21


@njit(cache=True, nogil=True)
def _blocks(N: int, TH: int, rows: int, lo: int, hi: int) -> IntArray:
    """The blocks (n0, n1, ty0, ty1) of the tile rows r = n*TH + ty in [lo, hi): tile rows ty0..ty1-1
    of the images n0..n1-1, at most `rows` tile rows each. Whole images in the range share a block,
    as many as `rows` holds; the other tile rows go in blocks of one image."""
    count = 0
    blocks = np.empty((max(0, hi - lo), 4), np.int64)
    r = lo
    while r < hi:
        n, ty = r // TH, r % TH
        if ty == 0 and rows >= TH and hi - r >= TH:
            k = min((hi - r) // TH, rows // TH)
            blocks[count, 0], blocks[count, 1], blocks[count, 2], blocks[count, 3] = n, n + k, 0, TH
            r += k * TH
        else:
            ty1 = min(TH, ty + rows, ty + hi - r)
            blocks[count, 0], blocks[count, 1], blocks[count, 2], blocks[count, 3] = n, n + 1, ty, ty1
            r += ty1 - ty
        count += 1
    return blocks[:count]


@njit(cache=True, nogil=True)
def _block_tiles(x: FloatArray, u: FloatArray, flip: bool, b: FloatArray, out: FloatArray, v: FloatArray, m: FloatArray,
                 ph: int, pw: int, TW: int, rows: int, lo: int, hi: int) -> None:
    """The tile rows [lo, hi) of `_correlate` in blocks (`_blocks`), each with its products called
    from here (blas.NATIVE_GEMM): input tiles into v, the 16 products U[t] @ V[t] (U[_FLIP[t]]^T @
    V[t] with `flip`) into m, output tiles into out. v (16, C, T) and m (16, O, T) hold at
    least the largest block's T tiles."""
    TH = (out.shape[2] + 1) // 2
    blocks = _blocks(x.shape[0], TH, rows, lo, hi)
    for i in range(blocks.shape[0]):
        n0, n1, ty0, ty1 = blocks[i, 0], blocks[i, 1], blocks[i, 2], blocks[i, 3]
        T = (n1 - n0) * (ty1 - ty0) * TW
        vb, mb = v[:, :, :T], m[:, :, :T]
        _input_tiles(x[n0:n1], vb, ph, pw, ty0, ty1, TW)
        for t in range(16):
            if flip:
                blas.native_gemm(u[_FLIP[t]].T, vb[t], mb[t], 0.0)
            else:
                blas.native_gemm(u[t], vb[t], mb[t], 0.0)
        _output_tiles(mb, b, out[n0:n1], ty0, ty1, TW)


@njit(cache=True, nogil=True, parallel=True)
def _block_tiles_parallel(x: FloatArray, u: FloatArray, flip: bool, b: FloatArray, out: FloatArray, v: FloatArray,
                          m: FloatArray, ph: int, pw: int, TW: int, rows: int, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _block_tiles(x, u, flip, b, out, v[t], m[t], ph, pw, TW, rows, lo, hi)


def _scratch(k: int, C: int, O_: int, T: int, dtype: DTypeLike) -> tuple[FloatArray, FloatArray]:
    """k scratch pairs (v (k, 16, C, T), m (k, 16, O_, T)) in this thread's workspace, the planes
    of each laid out as `_planes` lays them."""
    item = np.dtype(dtype).itemsize
    into, outof = _plane_step((C, T), item), _plane_step((O_, T), item)
    each = 16 * (into + outof)
    buffer = _workspace(k * each, dtype)
    v = np.lib.stride_tricks.as_strided(buffer, (k, 16, C, T), (each * item, into * item, T * item, item))
    m = np.lib.stride_tricks.as_strided(buffer[16 * into:], (k, 16, O_, T), (each * item, outof * item, T * item, item))
    return v, m


def _correlate(x: FloatArray, u: FloatArray, flip: bool, b: FloatArray, out: FloatArray, pad: Pair) -> FloatArray:
    """out = b + the 3x3 correlation at stride 1 of x with the weight whose transform is u (U[t],
    or with `flip` U[_FLIP[t]]^T: the input VJP's weight), input positions outside x reading as
    zero (a negative pad crops). Blocks of tiles (whole images, or tile rows of one image) of at
    most BLOCK_BYTES of transformed tiles, in parts of the tile rows of all images on the
    kernels' threads when the products are large (`threads.parts`), each part with its own
    scratch."""
    N, C = x.shape[0], x.shape[1]
    O, OH, OW = out.shape[1], out.shape[2], out.shape[3]
    TH, TW = (OH + 1) // 2, (OW + 1) // 2
    per_block = max(1, BLOCK_BYTES // (16 * max(C, O) * x.itemsize))  # tiles
    rows = max(1, per_block // TW)  # tile rows per block
    n = N * TH
    flops = 32.0 * N * O * C * TH * TW
    if not blas.NATIVE_GEMM:
        v, m = _scratch(1, C, O, min(rows, n) * TW, x.dtype)
        v, m = v[0], m[0]
        with blas.one_thread():
            for n0, n1, ty0, ty1 in _blocks(N, TH, rows, 0, n):
                T = (n1 - n0) * (ty1 - ty0) * TW
                vb, mb = v[:, :, :T], m[:, :, :T]
                _input_tiles(x[n0:n1], vb, pad[0], pad[1], ty0, ty1, TW)
                for t in range(16):
                    blas.gemm(u[_FLIP[t]].T if flip else u[t], vb[t], mb[t], 0.0)
                _output_tiles(mb, b, out[n0:n1], ty0, ty1, TW)
        return out
    k = threads.parts(n, flops, True)
    v, m = _scratch(k, C, O, min(rows, -(-n // k)) * TW, x.dtype)
    if k > 1 and threads.get_num_threads() > 1:
        with threads.region(k):
            _block_tiles_parallel(x, u, flip, b, out, v, m, pad[0], pad[1], TW, rows, n, k)
        return out
    with blas.one_thread():
        for t in range(k):
            _block_tiles(x, u, flip, b, out, v[t], m[t], pad[0], pad[1], TW, rows, *threads.part(n, t, k))
    return out


def conv2d_winograd(x: FloatArray, w: FloatArray, b: FloatArray, out_shape: Shape, p: Pair) -> FloatArray:
    """Forward of a 3x3 convolution at stride 1, dilation 1, groups 1, plus bias."""
    u = weight_tiles(w)
    return _correlate(x, u, False, b, np.empty(out_shape, x.dtype), p)


def conv2d_grad_input_winograd(g: FloatArray, w: FloatArray, x_shape: Shape, p: Pair) -> FloatArray:
    """Input VJP of the same convolution; g is (M, O, OH, OW) with seeds folded into M."""
    u = weight_tiles(w)
    zero = np.zeros(x_shape[1], g.dtype)
    return _correlate(g, u, True, zero, np.empty(x_shape, g.dtype), (2 - p[0], 2 - p[1]))
