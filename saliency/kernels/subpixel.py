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

All GEMMs run on row-major patches gathered by the kernels of `im2col.py`. The forward and the
input VJP gather, multiply (`blas.native_gemm`) and scatter one block of rows at a time in one
compiled kernel, large calls in parts of their rows on the kernels' threads (`threads.run`); the
weight VJP's products run in the pool (`threads.matmul`).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Sequence

import numpy as np
from numba import prange

from ._jit import njit

from . import blas, im2col, threads
from .conv2d import _fold_seeds, _float_array

if TYPE_CHECKING:
    from .._typing import Float64, FloatArray, IntArray


def phase_matrices(scale: int) -> tuple[IntArray, Float64]:
    """(bases, A): bases[r] = (r - 1) // scale and A[r, t, k] = 1 where kernel row k of phase r
    reads low-resolution row i + bases[r] + t."""
    bases = np.array([(r - 1) // scale for r in range(scale)])
    A = np.zeros((scale, 2, 3))
    for r in range(scale):
        for k in range(3):
            A[r, (r + k - 1) // scale - bases[r], k] = 1
    return bases, A


def phase_weights(w: FloatArray, scale: int) -> FloatArray:
    """(O, C, 3, 3) -> Wph (scale, scale, O, C, 2, 2), the 2x2 kernel of each output phase."""
    O, C = w.shape[:2]
    B = phase_matrices(scale)[1].reshape(2 * scale, 3).astype(w.dtype)  # rows (r, a)
    T = (w.reshape(-1, 3) @ B.T).reshape(O, C, 3, 2 * scale)  # (o, c, k, (q, b))
    U = B @ T.transpose(2, 0, 1, 3).reshape(3, -1)  # ((r, a), (o, c, q, b)): two GEMMs, cheaper than an einsum
    return U.reshape(scale, 2, O, C, scale, 2).transpose(0, 4, 2, 3, 1, 5)


def _check(x_shape: Sequence[int], w_shape: Sequence[int], scale: int) -> int:
    if not isinstance(scale, (int, np.integer)) or scale < 2:
        raise ValueError(f"scale must be an int >= 2 (use conv2d for scale 1), got {scale!r}")
    if len(x_shape) != 4 or tuple(w_shape[1:]) != (x_shape[1], 3, 3) or len(w_shape) != 4:
        raise ValueError(f"upsample_conv2d expects x (N, C, H, W) and w (O, C, 3, 3), got {tuple(x_shape)!r} "
                         f"and {tuple(w_shape)!r}")
    return int(scale)


def _padded(x: FloatArray) -> FloatArray:
    """x channels-last with one zero row and column on each side: the taps' rows bases + t lie in [-1, 1]."""
    N, C, H, W = x.shape
    xp = np.empty((N, H + 2, W + 2, C), x.dtype)
    im2col._to_nhwc(x, xp, 0, 0, 1, 1, 1, 1, 0, -1)
    return xp


def _offsets(scale: int) -> IntArray:
    """offs[r, t]: the padded row (or column) of x that tap t of phase r reads, less the output's
    low-resolution row."""
    return (phase_matrices(scale)[0] + 1)[:, None] + np.arange(2)[None, :]


@njit(cache=True, nogil=True)
def _gather(xv: FloatArray, C: int, offs: IntArray, r: int, q: int, H: int, W: int, cols: FloatArray, u0: int,
            u1: int) -> None:
    """cols[(u - u0)*W + ox] = the patch of phase (r, q) at output position (u // H, u % H, ox), tap
    order (ty, tx, c), for the low-resolution rows u = n*H + oy in [u0, u1) of all the images; xv is
    x after `_padded`, viewed as (N, H + 2, (W + 2)*C)."""
    u = u0
    while u < u1:
        n, oy0 = u // H, u % H
        oy1 = min(H, oy0 + u1 - u)
        a, m = (u - u0) * W, (oy1 - oy0) * W
        im2col._im2row(xv[n, oy0:].reshape(1, xv.shape[1] - oy0, xv.shape[2]), C,
                       cols[a:a + m].reshape(1, m, cols.shape[1]), offs[r:r + 1], offs[q:q + 1], 1, 1, oy1 - oy0, W, 0,
                       0, -1)
        u += oy1 - oy0


@njit(cache=True, nogil=True)
def _patch_rows(xv: FloatArray, C: int, offs: IntArray, s: int, H: int, W: int, NH: int, cols: FloatArray, lo: int,
                hi: int) -> None:
    """The patches of `_patches` for the tasks (phase p, low-resolution row u) in [lo, hi), flattened
    phase-major (p*NH + u)."""
    t = lo
    while t < hi:
        p = t // NH
        u0 = t - p * NH
        u1 = min(NH, u0 + hi - t)
        _gather(xv, C, offs, p // s, p % s, H, W, cols[p, u0 * W:], u0, u1)
        t += u1 - u0


@njit(cache=True, nogil=True, parallel=True)
def _patch_rows_parallel(xv: FloatArray, C: int, offs: IntArray, s: int, H: int, W: int, NH: int, cols: FloatArray,
                         n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _patch_rows(xv, C, offs, s, H, W, NH, cols, lo, hi)


def _patches(x: FloatArray, scale: int, xp: FloatArray | None = None) -> FloatArray:
    """Row-major patches of the s*s phases (r, q): (s*s, N*H*W, 4*C), tap order (ty, tx, c), in parts
    on the kernels' threads when large. xp is x after `_padded`, made here if not given."""
    N, C, H, W = x.shape
    xp = _padded(x) if xp is None else xp
    cols = np.empty((scale * scale, N * H * W, 4 * C), x.dtype)
    threads.run(_patch_rows, _patch_rows_parallel, scale * scale * N * H, cols.size,
                xp.reshape(N, H + 2, (W + 2) * C), C, _offsets(scale), scale, H, W, N * H, cols)
    return cols


@njit(cache=True, nogil=True)
def _forward(xv: FloatArray, C: int, offs: IntArray, wm: FloatArray, bias: FloatArray, y: FloatArray, s: int,
             block: int, lo: int, hi: int) -> None:
    """The tasks (phase p, low-resolution row u = n*H + oy) in [lo, hi), flattened phase-major, in
    blocks of at most `block` rows of one phase: their patches (`_gather`), the product with wm[p]
    (blas.NATIVE_GEMM) and the scatter into output rows s*oy + r, columns s*ox + q of y, plus bias."""
    H, W = y.shape[2] // s, y.shape[3] // s
    NH = y.shape[0] * H
    rows = min(block, hi - lo) * W
    cols = np.empty((rows, 4 * C), y.dtype)
    res = np.empty((rows, y.shape[1]), y.dtype)
    t = lo
    while t < hi:
        p = t // NH
        u0 = t - p * NH
        u1 = min(NH, u0 + block, u0 + hi - t)
        m = (u1 - u0) * W
        r, q = p // s, p % s
        _gather(xv, C, offs, r, q, H, W, cols, u0, u1)
        blas.native_gemm(cols[:m], wm[p], res[:m], 0.0)
        u = u0
        while u < u1:
            n, oy0 = u // H, u % H
            oy1 = min(H, oy0 + u1 - u)
            a, m = (u - u0) * W, (oy1 - oy0) * W
            im2col._row2im(res[a:a + m].reshape(1, m, res.shape[1]), y[n:n + 1], bias, oy1 - oy0, W, s, s,
                           s * oy0 + r, q, 1, 0, -1)
            u += oy1 - oy0
        t += u1 - u0


@njit(cache=True, nogil=True, parallel=True)
def _forward_parallel(xv: FloatArray, C: int, offs: IntArray, wm: FloatArray, bias: FloatArray, y: FloatArray, s: int,
                      block: int, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _forward(xv, C, offs, wm, bias, y, s, block, lo, hi)


def upsample_conv2d_forward(x: FloatArray, w: FloatArray, b: FloatArray | None = None, scale: int = 2) -> FloatArray:
    """conv2d(upsample_nearest(x, scale), w, b, stride=1, padding=1): x (N, C, H, W), w (O, C, 3, 3) -> (N, O, sH, sW).

    Blocks of patches of one phase (about im2col.CHUNK_BYTES), each multiplied by that phase's
    weight and scattered into its rows and columns of y, in parts of the phases' rows on the
    kernels' threads when large."""
    x, w = _float_array(x, "x"), _float_array(w, "w")
    if x.dtype != w.dtype:
        raise TypeError(f"x and w must have one dtype, got {x.dtype} and {w.dtype}")
    s = _check(x.shape, w.shape, scale)
    N, C, H, W = x.shape
    O = w.shape[0]
    bias = np.zeros(O, x.dtype) if b is None else np.ascontiguousarray(b, dtype=x.dtype).reshape(-1)
    if b is not None and bias.shape[0] != O:  # (zeros of the right length when b is None)
        raise ValueError(f"b must have {O} entries (one per output channel), got shape {np.shape(b)!r}")
    wm = np.ascontiguousarray(phase_weights(w, s).transpose(0, 1, 4, 5, 3, 2)).reshape(s * s, 4 * C, O)
    xp = _padded(x)
    y = np.empty((N, O, s * H, s * W), x.dtype)
    if not blas.NATIVE_GEMM:
        res = blas.matmul(_patches(x, s, xp), wm)  # (phases, N*H*W, O)
        im2col._row2im(res, y, bias, H, W, s, s, 0, 0, s, 0, -1)  # phase p lands on rows s*i + p // s
        return y
    block = max(1, im2col.CHUNK_BYTES // max(1, W * 4 * C * x.itemsize))
    tasks = s * s * N * H
    threads.run(_forward, _forward_parallel, tasks, 8.0 * tasks * W * C * O,
                xp.reshape(N, H + 2, (W + 2) * C), C, _offsets(s), wm, bias, y, s, block, flops=True)
    return y


@njit(cache=True, nogil=True)
def _grad_input(g: FloatArray, offs: IntArray, wm: FloatArray, zero: FloatArray, dx: FloatArray, s: int, block: int,
                lo: int, hi: int) -> None:
    """The rows [lo, hi) of dx flattened over the images (task m*H + i), in blocks of at most
    `block` rows: for each image's run of rows [i0, i1) in a block, the padded channels-last rows
    s*i0 .. s*i1 + 2s - 1 of g (a zero border of s) and their patches; the block's product with wm
    (blas.NATIVE_GEMM) and its scatter into dx."""
    C, H, W = dx.shape[1], dx.shape[2], dx.shape[3]
    G = g.shape[1]
    Wp = s * W + 2 * s
    rows = min(block, hi - lo)
    gbuf = np.empty((s * rows + 2 * s) * Wp * G, g.dtype)
    cols = np.empty((rows * W, wm.shape[0]), g.dtype)
    res = np.empty((rows * W, C), g.dtype)
    t = lo
    while t < hi:
        t1 = min(hi, t + block)
        u = t
        while u < t1:
            m, i0 = u // H, u % H
            i1 = min(H, i0 + t1 - u)
            h = s * (i1 - i0) + 2 * s
            gp = gbuf[:h * Wp * G].reshape(1, h, Wp, G)
            im2col._to_nhwc(g[m:m + 1], gp, 0, 0, 1, 1, s - s * i0, s, 0, -1)
            a, n = (u - t) * W, (i1 - i0) * W
            im2col._im2row(gp.reshape(1, h, Wp * G), G, cols[a:a + n].reshape(1, n, cols.shape[1]), offs, offs, s, s,
                           i1 - i0, W, 0, 0, -1)
            u += i1 - i0
        n = (t1 - t) * W
        blas.native_gemm(cols[:n], wm, res[:n], 0.0)
        u = t
        while u < t1:
            m, i0 = u // H, u % H
            i1 = min(H, i0 + t1 - u)
            a, n = (u - t) * W, (i1 - i0) * W
            im2col._row2im(res[a:a + n].reshape(1, n, C), dx[m:m + 1], zero, i1 - i0, W, 1, 1, i0, 0, 1, 0, -1)
            u += i1 - i0
        t = t1


@njit(cache=True, nogil=True, parallel=True)
def _grad_input_parallel(g: FloatArray, offs: IntArray, wm: FloatArray, zero: FloatArray, dx: FloatArray, s: int,
                         block: int, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _grad_input(g, offs, wm, zero, dx, s, block, lo, hi)


def upsample_conv2d_grad_input(g: FloatArray, w: FloatArray, x_shape: Sequence[int], scale: int = 2) -> FloatArray:
    """VJP to x: g (*seeds, N, O, sH, sW) -> (*seeds, N, C, H, W), all phases in one GEMM per block of rows of dx.

    dx[i, j] = sum over phases (r, q) and taps (t, u) of Wph[r, q, :, :, t, u]^T g[s*(i - base_r - t) + r,
    s*(j - base_q - u) + q]: the phase planes of g are read in place from a padded channels-last copy
    of the rows that a block reads. Blocks of about im2col.CHUNK_BYTES of patches, in parts of the
    rows of dx (over all images and seeds) on the kernels' threads when large.
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
    offs: IntArray = (np.arange(s)[:, None] - s * (bases[:, None] + np.arange(2)[None, :]) + s).reshape(2 * s)
    # taps in increasing offset order: consecutive offsets are one contiguous run for _im2row
    # (for s = 2 the 4 taps of a patch row become 1 run of 4*O values instead of 4 runs of O)
    order = np.argsort(offs, kind="stable")
    wm = phase_weights(w, s).transpose(0, 4, 1, 5, 2, 3).reshape(2 * s, 2 * s, O, C)[order][:, order]
    wm = np.ascontiguousarray(wm).reshape(4 * s * s * O, C)
    offs = offs[order].reshape(1, 2 * s)
    dx = np.empty((M, C, H, W), g2.dtype)
    zero = np.zeros(C, g2.dtype)
    if blas.NATIVE_GEMM:
        block = max(1, im2col.CHUNK_BYTES // max(1, W * wm.shape[0] * g2.itemsize))
        threads.run(_grad_input, _grad_input_parallel, M * H, 2.0 * M * H * W * wm.shape[0] * C,
                    g2, offs, wm, zero, dx, s, block, flops=True)
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
        im2col._to_nhwc(g2[m0:m1], gp[:mn], 0, 0, 1, 1, s, s, 0, -1)
        cols = cols_buf[:R]
        im2col._im2row(gp[:mn].reshape(mn, gp.shape[1], -1), O, cols.reshape(1, R, -1), offs, offs, s, s, H, W, 0,
                       0, -1)
        res = res_buf[:R]
        blas.matmul(cols, wm, out=res)
        im2col._row2im(res.reshape(1, R, C), dx[m0:m1], zero, H, W, 1, 1, 0, 0, 1, 0, -1)
    return dx.reshape(seeds + x_shape)


def upsample_conv2d_grad_weight(g: FloatArray, x: FloatArray, w_shape: Sequence[int], scale: int = 2) -> FloatArray:
    """VJP to w: g (*seeds, N, O, sH, sW), x (N, C, H, W) -> (*seeds, O, C, 3, 3).

    Per phase dWph = patches^T @ g-rows (one batched GEMM over phases and seeds, in the pool), then
    the adjoint of the weight sums: dw = sum over phases A_r^T dWph A_q.
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
