"""conv2d at stride 1 as kh*kw accumulated matrix products on shifted views of the zero-padded
input, and its input VJP the same way: no patch matrix.

With one image zero-padded to (C, Hp, Wp) and each channel flattened, the input value that tap
(ky, kx) multiplies for output (oy, ox) sits at flat index (oy + ky*dh)*Wp + ox + kx*dw. Computed
on rows Wp wide (the OW true columns, then Wp - OW that are dropped), the output of tap (ky, kx)
reads the run of OH*Wp consecutive entries from offset ky*dh*Wp + kx*dw of every channel: a
(C, OH*Wp) view of the padded buffer, which BLAS reads in place. So

    y_wide (O, OH*Wp) = sum over taps of W[:, :, ky, kx] (O, C) @ X_(ky, kx) (C, OH*Wp),

each product accumulated into y_wide by the GEMM itself (`blas.native_gemm` called from the
compiled kernel, beta = 1). The patch matrix of the im2col paths (kh*kw times the input) is never
written; the work is the GEMMs, one padded copy of the input and one crop of the output. The
weight is copied once per call into per-tap matrices (kh*kw, O, C). Large calls run in parts of
the output rows of all the images on the kernels' threads (`threads.run`), each part padding the
input rows its output rows read (its rows and the (kh - 1)*dh below them).

The input VJP at stride 1 is the correlation of the cotangent with the flipped, in/out-swapped
weight at padding dilation*(k - 1) - padding (see `conv2d.conv2d_grad_input_direct`): the same
products, with the per-tap matrices read transposed (no second copy) and in reverse tap order.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np
from numba import prange

from ._jit import njit

from . import blas, im2col, threads

if TYPE_CHECKING:
    from .._typing import FloatArray, Shape

    Pair = tuple[int, int]


def _tap_matrices(w: FloatArray) -> FloatArray:
    """(O, C, kh, kw) -> (kh*kw, O, C): the weight of each tap as one contiguous matrix."""
    O, C, KH, KW = w.shape
    return np.ascontiguousarray(w.transpose(2, 3, 0, 1)).reshape(KH * KW, O, C)


@njit(cache=True, nogil=True)
def _correlate_rows(x: FloatArray, wt: FloatArray, flip: bool, out: FloatArray, ph: int, pw: int, dh: int, dw: int,
                    KH: int, KW: int, lo: int, hi: int) -> None:
    """The output rows [lo, hi) of `_correlate`, flattened over the images (task n*OH + oy), with
    their products called from here (blas.NATIVE_GEMM): for each image's run of rows [r0, r1), the
    padded rows r0 .. r1 - 1 + (KH - 1)*dh of its input (flattened Wp wide, plus the last tap's
    (KW - 1)*dw entries), the products of the taps accumulated into y_wide, and its crop into out."""
    C, H, W = x.shape[1], x.shape[2], x.shape[3]
    O, OH, OW = out.shape[1], out.shape[2], out.shape[3]
    T = KH * KW
    Wp = OW + (KW - 1) * dw
    ey, ex = (KH - 1) * dh, (KW - 1) * dw
    most = min(hi - lo, OH)
    xp = np.empty((C, (most + ey) * Wp + ex), x.dtype)
    yw = np.empty((O, most * Wp), out.dtype)
    c0, c1 = max(0, -pw), min(W, Wp - pw)  # the columns of x inside the padded plane
    t = lo
    while t < hi:
        n, r0 = t // OH, t % OH
        r1 = min(OH, r0 + hi - t)
        L = (r1 - r0) * Wp
        for c in range(C):  # row j of the run is padded row r0 + j, row r0 + j - ph of x
            xc = xp[c]
            xc[:L + ey * Wp + ex] = 0
            if c0 < c1:
                for j in range(r1 - r0 + ey):
                    iy = r0 + j - ph
                    if 0 <= iy < H:
                        im2col.copy(xc[j * Wp + c0 + pw:], x[n, c, iy, c0:], c1 - c0)
        for k in range(T):
            off = (k // KW) * dh * Wp + (k % KW) * dw
            beta = 0.0 if k == 0 else 1.0
            if flip:
                blas.native_gemm(wt[T - 1 - k].T, xp[:, off:off + L], yw[:, :L], beta)
            else:
                blas.native_gemm(wt[k], xp[:, off:off + L], yw[:, :L], beta)
        for o in range(O):
            for j in range(r1 - r0):
                im2col.copy(out[n, o, r0 + j], yw[o, j * Wp:], OW)
        t += r1 - r0


@njit(cache=True, nogil=True, parallel=True)
def _correlate_rows_parallel(x: FloatArray, wt: FloatArray, flip: bool, out: FloatArray, ph: int, pw: int, dh: int,
                             dw: int, KH: int, KW: int, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _correlate_rows(x, wt, flip, out, ph, pw, dh, dw, KH, KW, lo, hi)


def _correlate(x: FloatArray, wt: FloatArray, flip: bool, out: FloatArray, pad: Pair, d: Pair,
               kernel: Sequence[int]) -> FloatArray:
    """out[n, o, oy, ox] = sum_{c, ky, kx} W_(ky*kw + kx)[o, c] * x[n, c, oy - pad[0] + ky*dh, ox - pad[1] + kx*dw]

    (stride 1; input positions outside x read as zero, a negative pad crops), with W_t = wt[t], or
    with `flip` wt[kh*kw - 1 - t]^T read in place. In parts of the output rows of all the images on
    the kernels' threads when large (the products keep all O rows, the long dimension being the
    positions).
    """
    N, C, H, W = x.shape
    O, OH, OW = out.shape[1], out.shape[2], out.shape[3]
    KH, KW = kernel
    if blas.NATIVE_GEMM and wt.dtype == x.dtype == out.dtype:
        flops = 2.0 * N * O * C * KH * KW * OH * OW
        threads.run(_correlate_rows, _correlate_rows_parallel, N * OH, flops, x, wt, flip, out, pad[0], pad[1],
                    d[0], d[1], KH, KW, flops=True)
        return out
    T = KH * KW
    Hp, Wp = OH + (KH - 1) * d[0], OW + (KW - 1) * d[1]
    plane = Hp * Wp + (KW - 1) * d[1]  # the last tap's run ends (KW - 1)*dw entries past the plane
    L = OH * Wp
    r0, c0 = max(0, -pad[0]), max(0, -pad[1])  # the part of x inside the padded plane
    r1, c1 = min(H, Hp - pad[0]), min(W, Wp - pad[1])
    yw = np.empty((O, L), out.dtype)
    with blas.one_thread():
        for n in range(N):
            xp = np.zeros((C, plane), x.dtype)
            if r0 < r1 and c0 < c1:
                inside = xp[:, :Hp * Wp].reshape(C, Hp, Wp)
                inside[:, r0 + pad[0]:r1 + pad[0], c0 + pad[1]:c1 + pad[1]] = x[n, :, r0:r1, c0:c1]
            for t in range(T):
                off = (t // KW) * d[0] * Wp + (t % KW) * d[1]
                blas.gemm(wt[T - 1 - t].T if flip else wt[t], xp[:, off:off + L], yw, 0.0 if t == 0 else 1.0)
            out[n] = yw.reshape(O, OH, Wp)[:, :, :OW]
    return out


def conv2d_shifted(x: FloatArray, w: FloatArray, b: FloatArray, out_shape: Shape, p: Pair, d: Pair) -> FloatArray:
    """Forward at stride 1 (groups = 1), plus bias."""
    y = _correlate(x, _tap_matrices(w), False, np.empty(out_shape, x.dtype), p, d, w.shape[2:])
    if b.any():
        y += b.reshape(1, -1, 1, 1)
    return y


def conv2d_grad_input_shifted(g: FloatArray, w: FloatArray, x_shape: Shape, p: Pair, d: Pair) -> FloatArray:
    """Input VJP at stride 1 (groups = 1); g is (M, O, OH, OW) with seeds folded into M."""
    KH, KW = w.shape[2], w.shape[3]
    pt = (d[0] * (KH - 1) - p[0], d[1] * (KW - 1) - p[1])
    return _correlate(g, _tap_matrices(w), True, np.empty(x_shape, g.dtype), pt, d, (KH, KW))
