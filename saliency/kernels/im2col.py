"""conv2d through im2col / col2im around BLAS GEMM, large calls in parts on the kernels' threads
(`threads.run`, `threads.matmul`).

Wins over the direct kernel in `conv2d.py` when the contraction C/groups*kh*kw is long and the
image small (see `conv2d.choose_algorithm`). The input VJP here is GEMM (W^T g) then col2im,
a scatter-add: tested against the correlation formulation in `conv2d.conv2d_grad_input_direct`.
Arguments are already checked and normalized by the wrappers in `conv2d.py`.

Each kernel takes the range [lo, hi) of its tasks as its last two arguments (the layout kernels:
all tasks when they are omitted); its `_x_parallel(..., n, k)` runs it on k parts of [0, n) in one
parallel region.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

import numba
import numpy as np
from numba import prange

from ._jit import njit

from . import blas, layout, threads

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from .._typing import FloatArray, IntArray, Shape

    Pair = tuple[int, int]

_FASTMATH = {"reassoc", "contract"}


# The GEMM paths build their intermediates a chunk of images (or of an image's rows) at a time, in
# buffers reused from chunk to chunk, so that the padded copy, the patches and the GEMM result stay
# in cache (the patches of 64 seeds of a 128x128 decoder layer are 268 MB). One wrapper call still
# serves every seed; only the final output is full size.
CHUNK_BYTES = 4 << 20  # patches per chunk: a few MB, so that a chunk's buffers stay in the caches


def chunks(M: int, bytes_per_image: int, start: int = 0) -> list[tuple[int, int]]:
    """Image ranges [m0, m1) of [start, M), of at most CHUNK_BYTES of patches each (at least one image)."""
    step = max(1, min(M - start, CHUNK_BYTES // max(1, bytes_per_image)))
    return [(m0, min(M, m0 + step)) for m0 in range(start, M, step)]


def _units(N: int, rows: int, bytes_per_row: int) -> tuple[int, int, int]:
    """(images per unit, rows per unit, number of units) of the fused kernels' units of work: at
    most CHUNK_BYTES of patches each (at least one row); whole images, several to a unit, where
    one fits, else blocks of an image's rows; at least as many units as Numba's pool has threads
    where the shape allows. They follow from the shape alone, not from the threads in use, so
    every unit's products, and so the results, are the same however many threads run them."""
    pool: int = numba.config.NUMBA_NUM_THREADS  # type: ignore[attr-defined]  # set at import: mypy does not see it
    step = max(1, min(CHUNK_BYTES // max(1, rows * bytes_per_row), -(-N // pool)))
    if step > 1:
        return step, rows, -(-N // step)
    rb = max(1, min(rows, CHUNK_BYTES // max(1, bytes_per_row), -(-rows // -(-pool // N))))
    return 1, rb, N * -(-rows // rb)


@njit(cache=True, nogil=True)
def _unit(u: int, N: int, rows: int, step: int, rb: int) -> tuple[int, int, int, int]:
    """(n0, n1, r0, r1): unit u of `_units` is the rows r0..r1-1 of the images n0..n1-1."""
    if rb < rows:
        blocks = (rows + rb - 1) // rb
        n, r = u // blocks, u % blocks
        return n, n + 1, r * rb, min(rows, r * rb + rb)
    return u * step, min(N, u * step + step), 0, rows


@njit(cache=True, nogil=True)
def copy(dst: NDArray[Any], src: NDArray[Any], n: int) -> None:
    """dst[i] = src[i] for i < n, for kernels: a loop, since NumPy's general slice assignment
    `dst[a:b] = src[c:d]` costs seconds of compile time in every kernel that has one (and pass
    slices indexed from 0, so that LLVM loads whole vectors)."""
    for i in range(n):
        dst[i] = src[i]


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _im2col(x: FloatArray, cols: FloatArray, KH: int, KW: int, sh: int, sw: int, ph: int, pw: int, dh: int, dw: int,
            lo: int, hi: int) -> None:
    """cols[(c*KH + ky)*KW + kx, n, oy*OW + ox] = x[n, c, oy*sh - ph + ky*dh, ox*sw - pw + kx*dw] (0 outside),
    for the tasks t = n*C + c in [lo, hi) (hi < 0: to the last).

    The batch sits between rows and columns so that one GEMM covers several images.
    """
    N, C, H, W = x.shape
    L = cols.shape[2]
    OW = (W + 2 * pw - dw * (KW - 1) - 1) // sw + 1
    OH = L // OW
    for t in range(lo, N * C if hi < 0 else hi):
        n = t // C
        c = t % C
        for ky in range(KH):
            for kx in range(KW):
                row = cols[(c * KH + ky) * KW + kx, n]
                off = kx * dw - pw
                ox0 = max(0, -(off // sw))
                ox1 = min(OW, (W - 1 - off) // sw + 1)
                e = min(ox0, OW)  # zeros in [0, e) and [max(e, ox1), OW), x's columns in [e, ox1)
                for oy in range(OH):
                    iy = oy * sh - ph + ky * dh
                    dst = row[oy * OW:(oy + 1) * OW]
                    if iy < 0 or iy >= H:
                        for ox in range(OW):
                            dst[ox] = 0
                        continue
                    for ox in range(e):
                        dst[ox] = 0
                    for ox in range(max(e, ox1), OW):
                        dst[ox] = 0
                    if e < ox1:  # contiguous for stride 1
                        src = x[n, c, iy, e * sw + off:] if sw == 1 else x[n, c, iy, e * sw + off::sw]
                        copy(dst[e:ox1], src, ox1 - e)


@njit(cache=True, nogil=True, parallel=True)
def _im2col_parallel(x: FloatArray, cols: FloatArray, KH: int, KW: int, sh: int, sw: int, ph: int, pw: int, dh: int,
                     dw: int, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _im2col(x, cols, KH, KW, sh, sw, ph, pw, dh, dw, lo, hi)


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _col2im(cols: FloatArray, dx: FloatArray, KH: int, KW: int, sh: int, sw: int, ph: int, pw: int, dh: int, dw: int,
            lo: int, hi: int) -> None:
    """Adjoint of _im2col, per image: cols is (groups, N, Cg*KH*KW, OH*OW) and

        dx[n, group*Cg + c, iy, ix] = sum of cols[group, n, (c*KH + ky)*KW + kx, oy*OW + ox] over the
        (ky, kx, oy, ox) with iy = oy*sh - ph + ky*dh and ix = ox*sw - pw + kx*dw,

    for the planes t = n*C + c in [lo, hi) of dx (hi < 0: to the last).
    """
    N, C, H, W = dx.shape
    G = cols.shape[0]
    Cg = C // G
    L = cols.shape[3]
    OW = (W + 2 * pw - dw * (KW - 1) - 1) // sw + 1
    OH = L // OW
    for t in range(lo, N * C if hi < 0 else hi):
        n = t // C
        c = t % C
        plane = dx[n, c]
        for iy in range(H):
            for ix in range(W):
                plane[iy, ix] = 0
        for ky in range(KH):
            for kx in range(KW):
                row = cols[c // Cg, n, ((c % Cg) * KH + ky) * KW + kx]
                off = kx * dw - pw
                ox0 = max(0, -(off // sw))
                ox1 = min(OW, (W - 1 - off) // sw + 1)
                for oy in range(OH):
                    iy = oy * sh - ph + ky * dh
                    if iy < 0 or iy >= H:
                        continue
                    if ox0 >= ox1:
                        continue
                    dst = plane[iy, ox0 * sw + off:(ox1 - 1) * sw + off + 1:sw]
                    src = row[oy * OW + ox0:oy * OW + ox1]
                    for i in range(ox1 - ox0):
                        dst[i] += src[i]


@njit(cache=True, nogil=True, parallel=True)
def _col2im_parallel(cols: FloatArray, dx: FloatArray, KH: int, KW: int, sh: int, sw: int, ph: int, pw: int, dh: int,
                     dw: int, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _col2im(cols, dx, KH, KW, sh, sw, ph, pw, dh, dw, lo, hi)


@njit(cache=True, nogil=True)
def _gemm_units(x: FloatArray, wg: FloatArray, y: FloatArray, KH: int, KW: int, sh: int, sw: int, ph: int, pw: int,
                dh: int, dw: int, step: int, lo: int, hi: int) -> None:
    """The units [lo, hi) of `conv2d_gemm` (`step` images each; blas.NATIVE_GEMM only), y viewed as
    (N, O, OH*OW): per unit the patches of its images (`_im2col`), per group one product
    W_g (Og, Cg*KH*KW) @ patches (Cg*KH*KW, n*OH*OW), then each image's columns of the product
    into its planes, in one patches and one product buffer reused from unit to unit."""
    N, C = x.shape[0], x.shape[1]
    G, Og, Kg = wg.shape
    L = y.shape[2]
    cols_buf = np.empty(G * Kg * step * L, x.dtype)
    res_buf = np.empty(Og * step * L, x.dtype)
    for u in range(lo, hi):
        n0, n1, _, _ = _unit(u, N, 1, step, 1)
        n = n1 - n0
        cols = cols_buf[:G * Kg * n * L].reshape(G, Kg, n * L)
        _im2col(x[n0:n1], cols.reshape(C * KH * KW, n, L), KH, KW, sh, sw, ph, pw, dh, dw, 0, n * C)
        res = res_buf[:Og * n * L].reshape(Og, n * L)
        for g in range(G):
            blas.native_gemm(wg[g], cols[g], res, 0.0)
            for i in range(n):
                for o in range(Og):
                    copy(y[n0 + i, g * Og + o], res[o, i * L:(i + 1) * L], L)


@njit(cache=True, nogil=True, parallel=True)
def _gemm_units_parallel(x: FloatArray, wg: FloatArray, y: FloatArray, KH: int, KW: int, sh: int, sw: int, ph: int,
                         pw: int, dh: int, dw: int, step: int, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _gemm_units(x, wg, y, KH, KW, sh, sw, ph, pw, dh, dw, step, lo, hi)


def conv2d_gemm(x: FloatArray, w: FloatArray, b: FloatArray, out_shape: Shape, s: Pair, p: Pair, d: Pair,
                groups: int) -> FloatArray:
    """Forward: per group one GEMM (Og, Cg*kh*kw) @ (Cg*kh*kw, n*OH*OW) over the patches of n images,
    plus bias. Several images: units of images (`_units`) in parts on the kernels' threads, each
    part with its own patches and products (blas.NATIVE_GEMM). One image, or without NATIVE_GEMM:
    the patches of all images, then the products, each in parts (`threads.matmul`)."""
    N, C, H, W = x.shape
    O, Cg, KH, KW = w.shape
    L = out_shape[2] * out_shape[3]
    Og = O // groups
    wg = w.reshape(groups, Og, Cg * KH * KW)
    y = np.empty(out_shape, x.dtype)
    flops = 2.0 * N * O * L * Cg * KH * KW
    geometry = (KH, KW, s[0], s[1], p[0], p[1], d[0], d[1])
    if N > 1 and blas.NATIVE_GEMM:
        step, _, units = _units(N, 1, C * KH * KW * L * x.itemsize)
        threads.run(_gemm_units, _gemm_units_parallel, units, flops, x, wg, y.reshape(N, O, L), *geometry, step,
                    flops=True)
    else:
        cols = np.empty((C * KH * KW, N, L), x.dtype)
        threads.run(_im2col, _im2col_parallel, N * C, cols.size, x, cols, *geometry)
        patches = cols.reshape(groups, Cg * KH * KW, N * L)
        if N == 1:
            threads.matmul(wg, patches, out=y.reshape(groups, Og, L))
        else:
            y[...] = threads.matmul(wg, patches).reshape(O, N, L).transpose(1, 0, 2).reshape(out_shape)
    if b.any():
        y += b.reshape(1, O, 1, 1)
    return y


def conv2d_pointwise(x: FloatArray, w: FloatArray, b: FloatArray, out_shape: Shape, s: Pair, groups: int) -> FloatArray:
    """Forward of a 1x1 convolution without padding: per image and group one GEMM
    W_g (Og, Cg) @ x_g (Cg, OH*OW) written straight into the NCHW output (no patches, no weight
    relayout); a stride first takes every s-th row and column. The products in parts on the
    kernels' threads (`threads.matmul`: by images and groups, or by the rows or columns of each).
    A channels-last x (one group) is one GEMM over all its pixels, x (N*OH*OW, C) @ W^T, whose
    result is the channels-last output."""
    O = w.shape[0]
    if groups == 1 and layout.channels_last(x):
        xt = layout.nhwc(x[:, :, ::s[0], ::s[1]])
        yt = np.empty((xt.shape[0], xt.shape[1], xt.shape[2], O), x.dtype)
        threads.matmul(xt.reshape(-1, xt.shape[3]), w.reshape(O, -1).T, out=yt.reshape(-1, O))
        if b.any():
            yt += b
        return yt.transpose(0, 3, 1, 2)
    x = np.ascontiguousarray(x[:, :, ::s[0], ::s[1]])
    N, C = x.shape[:2]
    L = out_shape[2] * out_shape[3]
    wg = w.reshape(groups, O // groups, C // groups)
    xg = x.reshape(N, groups, C // groups, L)
    y = np.empty(out_shape, x.dtype)
    threads.matmul(wg, xg, out=y.reshape(N, groups, O // groups, L))
    if b.any():
        y += b.reshape(1, O, 1, 1)
    return y


def conv2d_grad_input_pointwise(g: FloatArray, w: FloatArray, x_shape: Shape, s: Pair, groups: int) -> FloatArray:
    """Input VJP of `conv2d_pointwise`: per image and group W_g^T g (the transpose is a view BLAS
    reads as it is); with a stride, the products land on every s-th row and column of zeros.
    The products in parts on the kernels' threads (`threads.matmul`). A channels-last g (one group)
    is one GEMM over all its pixels, g (M*OH*OW, O) @ W, whose result is channels-last."""
    M, O, OH, OW = g.shape
    C = x_shape[1]
    if groups == 1 and layout.channels_last(g):
        res = np.empty((M, OH, OW, C), g.dtype)
        threads.matmul(layout.nhwc(g).reshape(-1, O), w.reshape(O, C), out=res.reshape(-1, C))
        if s == (1, 1):
            return res.transpose(0, 3, 1, 2)
        dxt = np.zeros((M, x_shape[2], x_shape[3], C), g.dtype)
        dxt[:, ::s[0], ::s[1]] = res
        return dxt.transpose(0, 3, 1, 2)
    g = np.ascontiguousarray(g)
    wt = w.reshape(groups, O // groups, C // groups).transpose(0, 2, 1)
    gs = g.reshape(M, groups, O // groups, OH * OW)
    res = np.empty((M, C, OH, OW), g.dtype)
    threads.matmul(wt, gs, out=res.reshape(M, groups, C // groups, OH * OW))
    if s == (1, 1):
        return res
    dx = np.zeros(x_shape, g.dtype)
    dx[:, :, ::s[0], ::s[1]] = res
    return dx


def conv2d_grad_input_gemm(g: FloatArray, w: FloatArray, x_shape: Shape, s: Pair, p: Pair, d: Pair,
                           groups: int) -> FloatArray:
    """Input VJP: per image and group cols = W^T g (g's NCHW planes are the GEMM's right operand
    as they are: no transpose), then col2im; g is (M, O, OH, OW), seeds folded into M. The images
    go through in cache-sized chunks (`chunks`) with the patches buffer reused; each chunk's
    products (`threads.matmul`) and its col2im run in parts on the kernels' threads."""
    M, O, OH, OW = g.shape
    C = x_shape[1]
    _, Cg, KH, KW = w.shape
    L = OH * OW
    Og = O // groups
    wt = w.reshape(groups, Og, Cg * KH * KW).transpose(0, 2, 1)[:, None]  # a view: BLAS reads W^T as it is
    dx = np.empty(x_shape, g.dtype)
    spans = chunks(M, C * KH * KW * L * g.itemsize)
    mc = max(m1 - m0 for m0, m1 in spans)
    buf = np.empty(groups * mc * Cg * KH * KW * L, g.dtype)
    for m0, m1 in spans:
        mn = m1 - m0
        cols = buf[:groups * mn * Cg * KH * KW * L].reshape(groups, mn, Cg * KH * KW, L)
        threads.matmul(wt, g[m0:m1].reshape(mn, groups, Og, L).transpose(1, 0, 2, 3), out=cols)
        threads.run(_col2im, _col2im_parallel, mn * C, max(cols.size, mn * C * x_shape[2] * x_shape[3]),
                    cols, dx[m0:m1], KH, KW, s[0], s[1], p[0], p[1], d[0], d[1])
    return dx


def conv2d_grad_weight_gemm(g: FloatArray, x: FloatArray, w_shape: Shape, s: Pair, p: Pair, d: Pair,
                            groups: int) -> FloatArray:
    """Weight VJP: per seed and group dW = g (Og, N*OH*OW) @ cols^T; g is (K, N, O, OH, OW), seeds in K.
    The patches and the products in parts on the kernels' threads."""
    K, N, O, OH, OW = g.shape
    _, Cg, KH, KW = w_shape
    L = OH * OW
    cols = np.empty((x.shape[1] * KH * KW, N, L), x.dtype)
    threads.run(_im2col, _im2col_parallel, N * x.shape[1], cols.size, x, cols, KH, KW, s[0], s[1], p[0], p[1],
                d[0], d[1])
    gt = g.reshape(K, N, groups, O // groups, L).transpose(0, 2, 3, 1, 4).reshape(K, groups, O // groups, N * L)
    dw = threads.matmul(gt, cols.reshape(groups, Cg * KH * KW, N * L).transpose(0, 2, 1))
    return dw.reshape((K,) + tuple(w_shape))


# ---------------------------------------------------------------------------------------------
# Row-major ("channels-last") patches: one row per output position, the taps and channels of its
# receptive field along the row. cols @ W is the faster orientation in OpenBLAS on the zoo's shapes
# (the long position axis becomes GEMM's M), and the same two kernels serve the forward, the
# input VJP (as a correlation, split into stride phases) and the sub-pixel convolution.


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _to_nhwc(src: NDArray[Any], dst: NDArray[Any], ry: int, rx: int, sy: int, sx: int, pt: int, pl: int, lo: int,
             hi: int) -> None:
    """Zero-padded channels-last copy of a phase plane of src:

        dst[n, i + pt, j + pl, c] = src[n, c, i*sy + ry, j*sx + rx],  zero where no source entry lands,

    for the rows t = n*Hp + i + pt of dst in [lo, hi) (hi < 0: to the last). Negative pt/pl crop.
    A blocked transpose: per (n, row of dst), 16 (then 8, then 1) channels at a time, each dst
    pixel's run of channels written contiguously from that many source rows (a channel-by-channel
    scatter would make strided writes and touch one source page per channel for every element).
    """
    N, C, H, W = src.shape
    Hl = (H - ry + sy - 1) // sy
    Wl = (W - rx + sx - 1) // sx
    Hp, Wp = dst.shape[1], dst.shape[2]
    j0 = max(0, pl)  # dst columns [j0, j1) have a source
    j1 = min(Wp, Wl + pl)
    for t in range(lo, N * Hp if hi < 0 else hi):
        n = t // Hp
        i = t % Hp - pt
        drow = dst[n, t % Hp]
        if i < 0 or i >= Hl or j0 >= j1:
            drow[:, :] = 0
            continue
        drow[:j0, :] = 0
        drow[j1:, :] = 0
        Y = i * sy + ry
        c0 = 0
        while c0 + 16 <= C:
            blk = src[n, c0:c0 + 16, Y]
            for j in range(j0, j1):
                d = drow[j, c0:c0 + 16]
                s = (j - pl) * sx + rx
                for c in range(16):
                    d[c] = blk[c, s]
            c0 += 16
        while c0 + 8 <= C:
            blk = src[n, c0:c0 + 8, Y]
            for j in range(j0, j1):
                d = drow[j, c0:c0 + 8]
                s = (j - pl) * sx + rx
                for c in range(8):
                    d[c] = blk[c, s]
            c0 += 8
        for c in range(c0, C):
            srow = src[n, c, Y]
            for j in range(j0, j1):
                drow[j, c] = srow[(j - pl) * sx + rx]


@njit(cache=True, nogil=True, parallel=True)
def _to_nhwc_parallel(src: NDArray[Any], dst: NDArray[Any], ry: int, rx: int, sy: int, sx: int, pt: int, pl: int,
                      n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _to_nhwc(src, dst, ry, rx, sy, sx, pt, pl, lo, hi)


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _im2row(xp: FloatArray, C: int, cols: FloatArray, offy: IntArray, offx: IntArray, s_y: int, s_x: int, OH: int,
            OW: int, k0: int, lo: int, hi: int) -> None:
    """Gather patches from a padded channels-last xp, viewed as (N, Hp, Wp*C) (see `_to_nhwc`):
    for phase p = py*Px + px (Px = offx.shape[0]) and output position (n, oy, ox),

        cols[p, (n*OH + oy)*OW + ox, k0 + (ty*ntx + tx)*C + c] = xp[n, oy*s_y + offy[py, ty], (ox*s_x + offx[px, tx])*C + c]

    Offsets are >= 0 and every read is inside xp (the padding is in xp). Taps with consecutive
    column offsets are one contiguous run of xp (whatever the stride): copied in one loop.
    Independent tasks t = (p*N + n)*OH + oy in [lo, hi) (hi < 0: to the last), each owning OW
    rows of cols.
    """
    N = xp.shape[0]
    Py, nty = offy.shape
    Px, ntx = offx.shape
    for t in range(lo, Py * Px * N * OH if hi < 0 else hi):
        oy = t % OH
        q = t // OH
        n = q % N
        p = q // N
        py = p // Px
        px = p % Px
        r0 = (n * OH + oy) * OW
        for ty in range(nty):
            srow = xp[n, oy * s_y + offy[py, ty]]
            tx = 0
            while tx < ntx:
                e = tx + 1
                while e < ntx and offx[px, e] == offx[px, e - 1] + 1:
                    e += 1
                kb = k0 + (ty * ntx + tx) * C
                ln = (e - tx) * C
                for ox in range(OW):
                    row = cols[p, r0 + ox, kb:kb + ln]
                    src = srow[(ox * s_x + offx[px, tx]) * C:]
                    for i in range(ln):
                        row[i] = src[i]
                tx = e


@njit(cache=True, nogil=True, parallel=True)
def _im2row_parallel(xp: FloatArray, C: int, cols: FloatArray, offy: IntArray, offx: IntArray, s_y: int, s_x: int,
                     OH: int, OW: int, k0: int, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _im2row(xp, C, cols, offy, offx, s_y, s_x, OH, OW, k0, lo, hi)


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _row2im(res: FloatArray, y: FloatArray, b: FloatArray, OH: int, OW: int, sy: int, sx: int, ry: int, rx: int,
            Px: int, lo: int, hi: int) -> None:
    """Scatter GEMM rows back to NCHW, plus bias: for phase p = py*Px + px,

        y[n, o, oy*sy + ry + py, ox*sx + rx + px] = res[p, (n*OH + oy)*OW + ox, o] + b[o].

    Every (phase, position) is written once. Independent tasks t = (p*N + n)*OH + oy in [lo, hi)
    (hi < 0: to the last): each transposes an (OW, O) block of res (in L1), 16 columns at a time:
    a fixed-length loop of 16 strided reads and 16 (contiguous, or sx-strided) writes, which LLVM
    vectorizes (a loop of runtime length it does not); the last OW % 16 columns go one by one.
    """
    P, R, O = res.shape
    N = R // (OH * OW)
    for t in range(lo, P * N * OH if hi < 0 else hi):
        oy = t % OH
        q = t // OH
        n = q % N
        p = q // N
        Y = oy * sy + ry + p // Px
        X0 = rx + p % Px
        blk = res[p, (n * OH + oy) * OW:(n * OH + oy + 1) * OW]
        ox0 = 0
        while ox0 + 16 <= OW:
            if sx == 1:
                for o in range(O):
                    d = y[n, o, Y, X0 + ox0:X0 + ox0 + 16]
                    bo = b[o]
                    for k in range(16):
                        d[k] = blk[ox0 + k, o] + bo
            else:
                for o in range(O):
                    d = y[n, o, Y, X0 + ox0 * sx:X0 + (ox0 + 15) * sx + 1:sx]
                    bo = b[o]
                    for k in range(16):
                        d[k] = blk[ox0 + k, o] + bo
            ox0 += 16
        for o in range(O):
            dst = y[n, o, Y]
            bo = b[o]
            for ox in range(ox0, OW):
                dst[ox * sx + X0] = blk[ox, o] + bo


@njit(cache=True, nogil=True, parallel=True)
def _row2im_parallel(res: FloatArray, y: FloatArray, b: FloatArray, OH: int, OW: int, sy: int, sx: int, ry: int,
                     rx: int, Px: int, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _row2im(res, y, b, OH, OW, sy, sx, ry, rx, Px, lo, hi)


@njit(cache=True, nogil=True)
def _rows_block(x: FloatArray, wm: FloatArray, b: FloatArray, y: FloatArray, offy: IntArray, offx: IntArray, sy: int,
                sx: int, ph: int, pw: int, n0: int, n1: int, oy0: int, oy1: int, xp_buf: FloatArray,
                cols_buf: FloatArray, res_buf: FloatArray) -> None:
    """Output rows oy0..oy1-1 of the images n0..n1-1 of `conv2d_rows` (blas.NATIVE_GEMM only), in
    the given flat buffers: the padded channels-last rows they read (padded row oy0*sy becomes
    row 0), their patches, one product with wm (KH*KW*C, O), and the rows back to NCHW plus bias."""
    C, K, O, OW = x.shape[1], wm.shape[0], wm.shape[1], y.shape[3]
    n, rows = n1 - n0, oy1 - oy0
    hp = (rows - 1) * sy + offy[0, offy.shape[1] - 1] + 1
    wp = (OW - 1) * sx + offx[0, offx.shape[1] - 1] + 1
    R = n * rows * OW
    xp = xp_buf[:n * hp * wp * C].reshape(n, hp, wp, C)
    _to_nhwc(x[n0:n1], xp, 0, 0, 1, 1, ph - oy0 * sy, pw, 0, n * hp)
    cols = cols_buf[:R * K].reshape(1, R, K)
    _im2row(xp.reshape(n, hp, wp * C), C, cols, offy, offx, sy, sx, rows, OW, 0, 0, n * rows)
    res = res_buf[:R * O].reshape(1, R, O)
    blas.native_gemm(cols[0], wm, res[0], 0.0)
    _row2im(res, y[n0:n1], b, rows, OW, 1, 1, oy0, 0, 1, 0, n * rows)


@njit(cache=True, nogil=True)
def _rows(x: FloatArray, wm: FloatArray, b: FloatArray, y: FloatArray, offy: IntArray, offx: IntArray, sy: int, sx: int,
          ph: int, pw: int, step: int, rb: int, lo: int, hi: int) -> None:
    """`_rows_block` on the units [lo, hi) of `_units` (`step` images, or `rb` rows of one image,
    each), in one set of buffers for all units."""
    N, C, OH, OW = x.shape[0], x.shape[1], y.shape[2], y.shape[3]
    rows = min(OH, rb)
    hp = (rows - 1) * sy + offy[0, offy.shape[1] - 1] + 1
    wp = (OW - 1) * sx + offx[0, offx.shape[1] - 1] + 1
    xp_buf = np.empty(step * hp * wp * C, x.dtype)
    cols_buf = np.empty(step * rows * OW * wm.shape[0], x.dtype)
    res_buf = np.empty(step * rows * OW * wm.shape[1], x.dtype)
    for u in range(lo, hi):
        n0, n1, oy0, oy1 = _unit(u, N, OH, step, rb)
        _rows_block(x, wm, b, y, offy, offx, sy, sx, ph, pw, n0, n1, oy0, oy1, xp_buf, cols_buf, res_buf)


@njit(cache=True, nogil=True, parallel=True)
def _rows_parallel(x: FloatArray, wm: FloatArray, b: FloatArray, y: FloatArray, offy: IntArray, offx: IntArray,
                   sy: int, sx: int, ph: int, pw: int, step: int, rb: int, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _rows(x, wm, b, y, offy, offx, sy, sx, ph, pw, step, rb, lo, hi)


def conv2d_rows(x: FloatArray, w: FloatArray, b: FloatArray, out_shape: Shape, s: Pair, p: Pair, d: Pair) -> FloatArray:
    """Forward (groups = 1): GEMMs (n*OH*OW, kh*kw*C) @ (kh*kw*C, O) over units of n images (or of
    an image's output rows) whose patches fit CHUNK_BYTES (`_units`), so that each unit's padded
    copy, patches and product stay in cache (one GEMM over a whole batch would stream them from
    memory). The units in parts on the kernels' threads, each part with its own buffers
    (blas.NATIVE_GEMM; without it, on the calling thread)."""
    N, C, H, W = x.shape
    O, _, KH, KW = w.shape
    OH, OW = out_shape[2], out_shape[3]
    offy = (np.arange(KH) * d[0]).reshape(1, KH)
    offx = (np.arange(KW) * d[1]).reshape(1, KW)
    wm = np.ascontiguousarray(w.transpose(2, 3, 1, 0)).reshape(KH * KW * C, O)
    y = np.empty(out_shape, x.dtype)
    step, rb, units = _units(N, OH, OW * KH * KW * C * x.itemsize)
    if blas.NATIVE_GEMM:
        threads.run(_rows, _rows_parallel, units, 2.0 * N * OH * OW * KH * KW * C * O,
                    x, wm, b, y, offy, offx, s[0], s[1], p[0], p[1], step, rb, flops=True)
        return y
    with blas.one_thread():
        for u in range(units):
            n0, n1, oy0, oy1 = _unit(u, N, OH, step, rb)
            n, rows = n1 - n0, oy1 - oy0
            hp = (rows - 1) * s[0] + (KH - 1) * d[0] + 1
            xp = np.empty((n, hp, (OW - 1) * s[1] + (KW - 1) * d[1] + 1, C), x.dtype)
            _to_nhwc(x[n0:n1], xp, 0, 0, 1, 1, p[0] - oy0 * s[0], p[1], 0, -1)
            cols = np.empty((1, n * rows * OW, KH * KW * C), x.dtype)
            _im2row(xp.reshape(n, hp, -1), C, cols, offy, offx, s[0], s[1], rows, OW, 0, 0, -1)
            res = blas.matmul(cols[0], wm).reshape(1, n * rows * OW, O)
            _row2im(res, y[n0:n1], b, rows, OW, 1, 1, oy0, 0, 1, 0, -1)
    return y


def stride_phases(size: int, kernel: int, stride: int, padding: int,
                  dilation: int) -> Iterator[tuple[int, list[int], list[int], int]]:
    """Input VJP along one axis, split by the phase r of the input index i = a*stride + r:

    dx[a*s + r] = sum over taps k with (r + p - k*d) % s == 0 of w[k] g[a + (r + p - k*d) // s].
    Yields (r, taps, offsets, number of a); phases no tap reaches have no taps.
    """
    for r in range(stride):
        taps = [k for k in range(kernel) if (r + padding - k * dilation) % stride == 0]
        yield r, taps, [(r + padding - k * dilation) // stride for k in taps], (size - r + stride - 1) // stride


@njit(cache=True, nogil=True)
def _phase_rows(g: FloatArray, wms: FloatArray, phases: IntArray, offy: IntArray, offx: IntArray, dx: FloatArray,
                zero: FloatArray, sy: int, sx: int, y_lo: int, x_lo: int, Hg: int, Wg: int, step: int, lo: int,
                hi: int) -> None:
    """The units [lo, hi) of `conv2d_grad_input_rows` (`step` images each; blas.NATIVE_GEMM only),
    in buffers reused from unit to unit: the unit's padded channels-last copy of g (rows from
    y_lo, columns from x_lo), then per phase i its patches, one product with its weight and the
    rows into its phase of dx. phases[i] = (ry, rx, Ha, Wa, taps along y, taps along x, start of
    the weight (taps*O, C) in wms); offy[i], offx[i] hold the taps' offsets into the copy."""
    M, O, C = g.shape[0], g.shape[1], dx.shape[1]
    mc = min(step, M)
    cols_size, res_size = 0, 0
    for i in range(phases.shape[0]):
        R = mc * phases[i, 2] * phases[i, 3]
        cols_size = max(cols_size, R * phases[i, 4] * phases[i, 5] * O)
        res_size = max(res_size, R * C)
    gp = np.empty((mc, Hg, Wg, O), g.dtype)
    cols_buf = np.empty(cols_size, g.dtype)
    res_buf = np.empty(res_size, g.dtype)
    for u in range(lo, hi):
        m0, m1, _, _ = _unit(u, M, 1, step, 1)
        mn = m1 - m0
        gpc = gp[:mn]
        _to_nhwc(g[m0:m1], gpc, 0, 0, 1, 1, -y_lo, -x_lo, 0, mn * Hg)
        for i in range(phases.shape[0]):
            ry, rx, Ha, Wa = phases[i, 0], phases[i, 1], phases[i, 2], phases[i, 3]
            nty, ntx, start = phases[i, 4], phases[i, 5], phases[i, 6]
            R, Kp = mn * Ha * Wa, nty * ntx * O
            cols = cols_buf[:R * Kp].reshape(1, R, Kp)
            _im2row(gpc.reshape(mn, Hg, Wg * O), O, cols, offy[i:i + 1, :nty], offx[i:i + 1, :ntx], 1, 1, Ha, Wa, 0,
                    0, mn * Ha)
            res = res_buf[:R * C].reshape(1, R, C)
            blas.native_gemm(cols[0], wms[start:start + Kp * C].reshape(Kp, C), res[0], 0.0)
            _row2im(res, dx[m0:m1], zero, Ha, Wa, sy, sx, ry, rx, 1, 0, mn * Ha)


@njit(cache=True, nogil=True, parallel=True)
def _phase_rows_parallel(g: FloatArray, wms: FloatArray, phases: IntArray, offy: IntArray, offx: IntArray,
                         dx: FloatArray, zero: FloatArray, sy: int, sx: int, y_lo: int, x_lo: int, Hg: int, Wg: int,
                         step: int, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _phase_rows(g, wms, phases, offy, offx, dx, zero, sy, sx, y_lo, x_lo, Hg, Wg, step, lo, hi)


def conv2d_grad_input_rows(g: FloatArray, w: FloatArray, x_shape: Shape, s: Pair, p: Pair, d: Pair) -> FloatArray:
    """Input VJP (groups = 1) as a correlation of g with w^T, one GEMM per stride phase of dx.

    Per phase (ry, rx) only the taps that reach it take part: no multiplications by the zeros a
    stride-dilated cotangent would hold. g is (M, O, OH, OW) with seeds folded into M. One padded
    channels-last copy of g serves every phase; the images go through in cache-sized units
    (`_units`), in parts on the kernels' threads, each part with its own buffers
    (blas.NATIVE_GEMM; without it, on the calling thread).
    """
    M, O, OH, OW = g.shape
    C, H, W = x_shape[1:]
    dx = np.empty(x_shape, g.dtype)
    zero = np.zeros(C, g.dtype)
    # (ry, rx, Ha, Wa, row offsets, column offsets, the taps' weight (taps*O, C)) per phase with taps
    phases: list[tuple[int, int, int, int, list[int], list[int], FloatArray]] = []
    for ry, tys, oys, Ha in stride_phases(H, w.shape[2], s[0], p[0], d[0]):
        for rx, txs, oxs, Wa in stride_phases(W, w.shape[3], s[1], p[1], d[1]):
            if Ha == 0 or Wa == 0:
                continue
            if not tys or not txs:
                dx[:, :, ry::s[0], rx::s[1]] = 0
                continue
            phases.append((ry, rx, Ha, Wa, oys, oxs,
                           np.ascontiguousarray(w[:, :, tys][:, :, :, txs].transpose(2, 3, 0, 1)).reshape(-1, C)))
    if not phases:
        return dx
    # one padded copy for all phases: rows [y_lo, y_hi) and columns [x_lo, x_hi) of g, zero outside
    y_lo = min(min(ph[4]) for ph in phases)
    x_lo = min(min(ph[5]) for ph in phases)
    Hg = max(ph[2] + max(ph[4]) for ph in phases) - y_lo
    Wg = max(ph[3] + max(ph[5]) for ph in phases) - x_lo
    per_image = sum(ph[2] * ph[3] * ph[6].shape[0] for ph in phases) * g.itemsize
    step, _, units = _units(M, 1, per_image)
    if blas.NATIVE_GEMM:
        table = np.zeros((len(phases), 7), np.int64)
        offy = np.zeros((len(phases), w.shape[2]), np.int64)
        offx = np.zeros((len(phases), w.shape[3]), np.int64)
        start = 0
        for i, (ry, rx, Ha, Wa, oys, oxs, wm) in enumerate(phases):
            table[i] = ry, rx, Ha, Wa, len(oys), len(oxs), start
            offy[i, :len(oys)] = np.array(oys) - y_lo
            offx[i, :len(oxs)] = np.array(oxs) - x_lo
            start += wm.size
        wms = np.concatenate([ph[6].reshape(-1) for ph in phases])
        threads.run(_phase_rows, _phase_rows_parallel, units, 2.0 * M * per_image / g.itemsize * C,
                    g, wms, table, offy, offx, dx, zero, s[0], s[1], y_lo, x_lo, Hg, Wg, step, flops=True)
        return dx
    rows_per_image = [ph[2] * ph[3] for ph in phases]
    k_max = max(ph[6].shape[0] for ph in phases)
    mc = min(step, M)
    gp = np.empty((mc, Hg, Wg, O), g.dtype)
    cols_buf = np.empty(mc * max(rows_per_image) * k_max, g.dtype)
    res_buf = np.empty(mc * max(rows_per_image) * C, g.dtype)
    with blas.one_thread():
        for u in range(units):
            m0, m1, _, _ = _unit(u, M, 1, step, 1)
            mn = m1 - m0
            gpc = gp[:mn]
            _to_nhwc(g[m0:m1], gpc, 0, 0, 1, 1, -y_lo, -x_lo, 0, -1)
            for (ry, rx, Ha, Wa, oys, oxs, wm) in phases:
                R, Kp = mn * Ha * Wa, wm.shape[0]
                cols = cols_buf[:R * Kp].reshape(1, R, Kp)
                _im2row(gpc.reshape(mn, Hg, -1), O, cols, np.array([oys]) - y_lo, np.array([oxs]) - x_lo, 1, 1, Ha,
                        Wa, 0, 0, -1)
                res = res_buf[:R * C].reshape(1, R, C)
                blas.matmul(cols[0], wm, out=res[0])
                _row2im(res, dx[m0:m1], zero, Ha, Wa, s[0], s[1], ry, rx, 1, 0, -1)
    return dx


def conv2d_grad_weight_rows(g: FloatArray, x: FloatArray, w_shape: Shape, s: Pair, p: Pair, d: Pair) -> FloatArray:
    """Weight VJP (groups = 1): dW[k] = patches^T @ g-rows[k], one batched GEMM over the seeds;
    g is (K, N, O, OH, OW), seeds in K. The copies, the patches and the products in parts on the
    kernels' threads."""
    K, N, O, OH, OW = g.shape
    C, KH, KW = w_shape[1:]
    xp = np.empty((N, (OH - 1) * s[0] + (KH - 1) * d[0] + 1, (OW - 1) * s[1] + (KW - 1) * d[1] + 1, C), x.dtype)
    threads.run(_to_nhwc, _to_nhwc_parallel, N * xp.shape[1], max(x.size, xp.size), x, xp, 0, 0, 1, 1, p[0], p[1])
    cols = np.empty((1, N * OH * OW, KH * KW * C), x.dtype)
    threads.run(_im2row, _im2row_parallel, N * OH, cols.size, xp.reshape(N, xp.shape[1], -1), C, cols,
                (np.arange(KH) * d[0]).reshape(1, KH), (np.arange(KW) * d[1]).reshape(1, KW), s[0], s[1], OH, OW, 0)
    grows = np.empty((K * N, OH, OW, O), g.dtype)
    threads.run(_to_nhwc, _to_nhwc_parallel, K * N * OH, grows.size, g.reshape(K * N, O, OH, OW), grows,
                0, 0, 1, 1, 0, 0)
    dw = threads.matmul(cols[0].T, grows.reshape(K, N * OH * OW, O))  # (K, KH*KW*C, O)
    return np.ascontiguousarray(dw.reshape(K, KH, KW, C, O).transpose(0, 4, 3, 1, 2))
