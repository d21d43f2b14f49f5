"""Nearest upsampling by an integer `scale` followed by a 3x3 conv2d (stride 1, padding 1), as a
sub-pixel convolution, and its VJPs.

With u = upsample_nearest(x, s), output row s*i + r of conv2d(u, w) reads u rows s*i + r - 1,
s*i + r, s*i + r + 1, i.e. x rows (s*i + r + k - 1) // s for the kernel rows k = 0, 1, 2: only
two distinct rows, i + base_r and i + base_r + 1 with base_r = (r - 1) // s. So each of the s*s
output phases (r, q) is a 2x2 correlation of the low-resolution x with weights summed from the
3x3 kernel, Wph[r, q] = A_r w A_q^T (A_r is the 2x3 0/1 matrix that says which tap row k lands
on), costing 4/9 of the FLOPs of the 3x3 convolution of the upsampled image and never building
it. The input VJP is the adjoint: dx = sum over phases of the correlation of that phase of g with
Wph^T, all phases in one GEMM; the weight VJP computes each phase's 2x2 weight gradient by GEMM
and applies the sums' adjoint (A_r^T dWph A_q).

All GEMMs run on row-major patches gathered by the kernels of `im2col.py`.
"""
import math

import numpy as np

from . import blas, im2col, threads
from .conv2d import _fold_seeds, _float_array


def phase_matrices(scale):
    """(bases, A): bases[r] = (r - 1) // scale and A[r, t, k] = 1 where kernel row k of phase r
    reads low-resolution row i + bases[r] + t."""
    bases = np.array([(r - 1) // scale for r in range(scale)])
    A = np.zeros((scale, 2, 3))
    for r in range(scale):
        for k in range(3):
            A[r, (r + k - 1) // scale - bases[r], k] = 1
    return bases, A


def phase_weights(w, scale):
    """(O, C, 3, 3) -> Wph (scale, scale, O, C, 2, 2), the 2x2 kernel of each output phase."""
    O, C = w.shape[:2]
    B = phase_matrices(scale)[1].reshape(2 * scale, 3).astype(w.dtype)  # rows (r, a)
    T = (w.reshape(-1, 3) @ B.T).reshape(O, C, 3, 2 * scale)  # (o, c, k, (q, b))
    U = B @ T.transpose(2, 0, 1, 3).reshape(3, -1)  # ((r, a), (o, c, q, b)): two GEMMs, cheaper than an einsum
    return U.reshape(scale, 2, O, C, scale, 2).transpose(0, 4, 2, 3, 1, 5)


def _check(x_shape, w_shape, scale):
    if not isinstance(scale, (int, np.integer)) or scale < 2:
        raise ValueError(f"scale must be an int >= 2 (use conv2d for scale 1), got {scale!r}")
    if len(x_shape) != 4 or tuple(w_shape[1:]) != (x_shape[1], 3, 3) or len(w_shape) != 4:
        raise ValueError(f"upsample_conv2d expects x (N, C, H, W) and w (O, C, 3, 3), got {tuple(x_shape)!r} "
                         f"and {tuple(w_shape)!r}")
    return int(scale)


def _padded(x):
    """x channels-last with one zero row and column on each side: the taps' rows bases + t lie in [-1, 1]."""
    N, C, H, W = x.shape
    xp = np.empty((N, H + 2, W + 2, C), x.dtype)
    im2col._to_nhwc(x, xp, 0, 0, 1, 1, 1, 1)
    return xp


def _patches(x, scale, xp=None, r0=0, r1=None):
    """Row-major patches of the phases (r, q) with r0 <= r < r1 (by default all s*s of them):
    ((r1 - r0)*s, N*H*W, 4*C), tap order (ty, tx, c). xp is x after `_padded`, made here if not given."""
    N, C, H, W = x.shape
    r1 = scale if r1 is None else r1
    xp = _padded(x) if xp is None else xp
    offs = (phase_matrices(scale)[0] + 1)[:, None] + np.arange(2)[None, :]
    cols = np.empty(((r1 - r0) * scale, N * H * W, 4 * C), x.dtype)
    im2col._im2row(xp.reshape(N, H + 2, -1), C, cols, offs[r0:r1], offs, 1, 1, H, W, 0)
    return cols


def upsample_conv2d_forward(x, w, b=None, scale=2):
    """conv2d(upsample_nearest(x, scale), w, b, stride=1, padding=1): x (N, C, H, W), w (O, C, 3, 3) -> (N, O, sH, sW)."""
    x, w = _float_array(x, "x"), _float_array(w, "w")
    if x.dtype != w.dtype:
        raise TypeError(f"x and w must have one dtype, got {x.dtype} and {w.dtype}")
    s = _check(x.shape, w.shape, scale)
    N, C, H, W = x.shape
    O = w.shape[0]
    bias = np.zeros(O, x.dtype) if b is None else np.ascontiguousarray(b, dtype=x.dtype).reshape(-1)
    if bias.shape[0] != O:
        raise ValueError(f"b must have {O} entries (one per output channel), got shape {np.shape(b)!r}")
    wm = np.ascontiguousarray(phase_weights(w, s).transpose(0, 1, 4, 5, 3, 2)).reshape(s * s, 4 * C, O)
    xp = _padded(x)
    y = np.empty((N, O, s * H, s * W), x.dtype)

    def phase_rows(r0, r1):  # output phases (r, q) with r0 <= r < r1: their patches, products and rows of y
        res = blas.matmul(_patches(x, s, xp, r0, r1), wm[r0 * s:r1 * s])  # (phases, N*H*W, O)
        im2col._row2im(res, y, bias, H, W, s, s, r0, 0, s)  # phase p lands on rows s*i + r0 + p // s

    split = threads.split_batch if N > 1 else threads.split_image
    split(s, max(x.size, y.size), phase_rows)  # the phase rows in two halves on two threads
    return y


def upsample_conv2d_grad_input(g, w, x_shape, scale=2):
    """VJP to x: g (*seeds, N, O, sH, sW) -> (*seeds, N, C, H, W), all phases in one GEMM per chunk of images.

    dx[i, j] = sum over phases (r, q) and taps (t, u) of Wph[r, q, :, :, t, u]^T g[s*(i - base_r - t) + r,
    s*(j - base_q - u) + q]: the phase planes of g are read in place from one padded channels-last copy.
    """
    w = _float_array(w, "w")
    x_shape = tuple(int(e) for e in x_shape)
    s = _check(x_shape, w.shape, scale)
    N, C, H, W = x_shape
    O = w.shape[0]
    g2, seeds = _fold_seeds(g, 4, "g")
    if g2.shape[1:] != (O, s * H, s * W) or g2.shape[0] != N * math.prod(seeds):
        raise ValueError(f"g must have shape (*seeds, {N}, {O}, {s * H}, {s * W}), got {np.shape(g)!r}")
    w = w.astype(g2.dtype, copy=False)
    M = g2.shape[0]
    bases, _ = phase_matrices(s)
    # tap (r, t) reads padded row s*i + r - s*(bases[r] + t) + s
    offs = (np.arange(s)[:, None] - s * (bases[:, None] + np.arange(2)[None, :]) + s).reshape(2 * s)
    # taps in increasing offset order: consecutive offsets are one contiguous run for _im2row
    # (for s = 2 the 4 taps of a patch row become 1 run of 4*O values instead of 4 runs of O)
    order = np.argsort(offs, kind="stable")
    wm = phase_weights(w, s).transpose(0, 4, 1, 5, 2, 3).reshape(2 * s, 2 * s, O, C)[order][:, order]
    wm = np.ascontiguousarray(wm).reshape(4 * s * s * O, C)
    offs = offs[order].reshape(1, 2 * s)
    dx = np.empty((M, C, H, W), g2.dtype)
    zero = np.zeros(C, g2.dtype)
    if M == 1:  # one image: halves of the rows of dx on two threads, from one padded copy of g
        gp = np.empty((1, s * H + 2 * s, s * W + 2 * s, O), g2.dtype)
        im2col._to_nhwc(g2, gp, 0, 0, 1, 1, s, s)
        gv = gp.reshape(1, gp.shape[1], -1)

        def rows(i0, i1):  # rows i0..i1-1 of dx read padded rows from s*i0 on
            R = (i1 - i0) * W
            cols = np.empty((1, R, 4 * s * s * O), g2.dtype)
            im2col._im2row(gv[:, s * i0:], O, cols, offs, offs, s, s, i1 - i0, W, 0)
            res = blas.matmul(cols[0], wm)
            im2col._row2im(res.reshape(1, R, C), dx, zero, i1 - i0, W, 1, 1, i0, 0, 1)

        threads.split_image(H, g2.size, rows)
        return dx.reshape(seeds + x_shape)
    # images in cache-sized chunks (im2col.chunks), buffers reused: one call still serves every seed
    spans = im2col.chunks(M, H * W * 4 * s * s * O * g2.itemsize)
    mc = max(m1 - m0 for m0, m1 in spans)
    gp = np.empty((mc, s * H + 2 * s, s * W + 2 * s, O), g2.dtype)
    cols_buf = np.empty((mc * H * W, 4 * s * s * O), g2.dtype)
    res_buf = np.empty((mc * H * W, C), g2.dtype)
    for m0, m1 in spans:
        mn = m1 - m0
        R = mn * H * W
        im2col._to_nhwc(g2[m0:m1], gp[:mn], 0, 0, 1, 1, s, s)
        cols = cols_buf[:R]
        im2col._im2row(gp[:mn].reshape(mn, gp.shape[1], -1), O, cols.reshape(1, R, -1), offs, offs, s, s, H, W, 0)
        res = res_buf[:R]
        threads.matmul(cols, wm, out=res)
        im2col._row2im(res.reshape(1, R, C), dx[m0:m1], zero, H, W, 1, 1, 0, 0, 1)
    return dx.reshape(seeds + x_shape)


def upsample_conv2d_grad_weight(g, x, w_shape, scale=2):
    """VJP to w: g (*seeds, N, O, sH, sW), x (N, C, H, W) -> (*seeds, O, C, 3, 3).

    Per phase dWph = patches^T @ g-rows (one batched GEMM over phases and seeds), then the adjoint
    of the weight sums: dw = sum over phases A_r^T dWph A_q.
    """
    x = _float_array(x, "x")
    w_shape = tuple(int(e) for e in w_shape)
    s = _check(x.shape, w_shape, scale)
    N, C, H, W = x.shape
    O = w_shape[0]
    g2, seeds = _fold_seeds(g, 4, "g")
    if g2.shape[1:] != (O, s * H, s * W) or g2.shape[0] != N * math.prod(seeds):
        raise ValueError(f"g must have shape (*seeds, {N}, {O}, {s * H}, {s * W}), got {np.shape(g)!r}")
    x = x.astype(g2.dtype, copy=False)
    Kn = g2.shape[0] // N
    cols = _patches(x, s)  # (P, N*H*W, 4C)
    # g rows per phase: (P, K, N*H*W, O)
    grows = g2.reshape(Kn, N, O, H, s, W, s).transpose(4, 6, 0, 1, 3, 5, 2).reshape(s * s, Kn, N * H * W, O)
    dwph = threads.matmul(cols.transpose(0, 2, 1)[:, None], grows)  # (P, K, 4C, O), rows (ty, tx, c)
    dwph = dwph.reshape(s, s, Kn, 2, 2, C, O)
    _, A = phase_matrices(s)
    dw = np.einsum("rak,qbl,rqnabco->nockl", A.astype(g2.dtype), A.astype(g2.dtype), dwph, optimize=True)
    return np.ascontiguousarray(dw).reshape(seeds + w_shape)
