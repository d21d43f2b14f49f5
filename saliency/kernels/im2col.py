"""conv2d through im2col / col2im around NumPy's matmul (BLAS GEMM).

Wins over the direct kernel in `conv2d.py` when the contraction C/groups*kh*kw is long and the
image small (see `conv2d.choose_algorithm`). The input VJP here is GEMM (W^T g) then col2im,
a scatter-add: tested against the correlation formulation in `conv2d.conv2d_grad_input_direct`.
Arguments are already checked and normalized by the wrappers in `conv2d.py`.
"""
import numpy as np
from numba import njit, prange

_FASTMATH = {"reassoc", "contract"}


@njit(cache=True, parallel=True, fastmath=_FASTMATH)
def _im2col(x, cols, KH, KW, sh, sw, ph, pw, dh, dw):
    """cols[(c*KH + ky)*KW + kx, n, oy*OW + ox] = x[n, c, oy*sh - ph + ky*dh, ox*sw - pw + kx*dw] (0 outside).

    The batch sits between rows and columns so that one GEMM covers the whole batch.
    """
    N, C, H, W = x.shape
    L = cols.shape[2]
    OW = (W + 2 * pw - dw * (KW - 1) - 1) // sw + 1
    OH = L // OW
    for t in prange(N * C):
        n = t // C
        c = t % C
        for ky in range(KH):
            for kx in range(KW):
                row = cols[(c * KH + ky) * KW + kx, n]
                off = kx * dw - pw
                lo = max(0, -(off // sw))
                hi = min(OW, (W - 1 - off) // sw + 1)
                for oy in range(OH):
                    iy = oy * sh - ph + ky * dh
                    base = oy * OW
                    if iy < 0 or iy >= H:
                        for ox in range(OW):
                            row[base + ox] = 0
                        continue
                    dst = row[base:base + OW]
                    dst[:] = 0
                    if lo < hi:
                        dst[lo:hi] = x[n, c, iy, lo * sw + off:(hi - 1) * sw + off + 1:sw]


@njit(cache=True, parallel=True, fastmath=_FASTMATH)
def _col2im(cols, dx, KH, KW, sh, sw, ph, pw, dh, dw):
    """Adjoint of _im2col: dx[n, c, iy, ix] = sum of the cols entries that _im2col copied from there."""
    N, C, H, W = dx.shape
    L = cols.shape[2]
    OW = (W + 2 * pw - dw * (KW - 1) - 1) // sw + 1
    OH = L // OW
    for t in prange(N * C):  # each task owns one (n, c) plane of dx
        n = t // C
        c = t % C
        plane = dx[n, c]
        for iy in range(H):
            for ix in range(W):
                plane[iy, ix] = 0
        for ky in range(KH):
            for kx in range(KW):
                row = cols[(c * KH + ky) * KW + kx, n]
                off = kx * dw - pw
                lo = max(0, -(off // sw))
                hi = min(OW, (W - 1 - off) // sw + 1)
                for oy in range(OH):
                    iy = oy * sh - ph + ky * dh
                    if iy < 0 or iy >= H:
                        continue
                    if lo >= hi:
                        continue
                    dst = plane[iy, lo * sw + off:(hi - 1) * sw + off + 1:sw]
                    src = row[oy * OW + lo:oy * OW + hi]
                    for i in range(hi - lo):
                        dst[i] += src[i]


def conv2d_gemm(x, w, b, out_shape, s, p, d, groups):
    """Forward: per group one GEMM (Og, Cg*kh*kw) @ (Cg*kh*kw, N*OH*OW), plus bias."""
    N, C, H, W = x.shape
    O, Cg, KH, KW = w.shape
    L = out_shape[2] * out_shape[3]
    cols = np.empty((C * KH * KW, N, L), x.dtype)
    _im2col(x, cols, KH, KW, s[0], s[1], p[0], p[1], d[0], d[1])
    y = np.matmul(w.reshape(groups, O // groups, Cg * KH * KW), cols.reshape(groups, Cg * KH * KW, N * L))
    y = np.ascontiguousarray(y.reshape(O, N, L).transpose(1, 0, 2)).reshape(out_shape)
    if b.any():
        y += b.reshape(1, O, 1, 1)
    return y


def conv2d_grad_input_gemm(g, w, x_shape, s, p, d, groups):
    """Input VJP: per group cols = W^T g, one GEMM over the batch, then col2im; g is (M, O, OH, OW), seeds folded into M."""
    M, O, OH, OW = g.shape
    _, Cg, KH, KW = w.shape
    L = OH * OW
    wt = w.reshape(groups, O // groups, Cg * KH * KW).transpose(0, 2, 1)
    gt = g.reshape(M, groups, O // groups, L).transpose(1, 2, 0, 3).reshape(groups, O // groups, M * L)
    cols = np.ascontiguousarray(np.matmul(wt, gt)).reshape(x_shape[1] * KH * KW, M, L)
    dx = np.empty(x_shape, g.dtype)
    _col2im(cols, dx, KH, KW, s[0], s[1], p[0], p[1], d[0], d[1])
    return dx


def conv2d_grad_weight_gemm(g, x, w_shape, s, p, d, groups):
    """Weight VJP: per seed and group dW = g (Og, N*OH*OW) @ cols^T; g is (K, N, O, OH, OW), seeds in K."""
    K, N, O, OH, OW = g.shape
    _, Cg, KH, KW = w_shape
    L = OH * OW
    cols = np.empty((x.shape[1] * KH * KW, N, L), x.dtype)
    _im2col(x, cols, KH, KW, s[0], s[1], p[0], p[1], d[0], d[1])
    gt = g.reshape(K, N, groups, O // groups, L).transpose(0, 2, 3, 1, 4).reshape(K, groups, O // groups, N * L)
    dw = np.matmul(gt, cols.reshape(groups, Cg * KH * KW, N * L).transpose(0, 2, 1))
    return dw.reshape((K,) + tuple(w_shape))
