"""conv2d through im2col / col2im around NumPy's matmul (BLAS GEMM).

Wins over the direct kernel in `conv2d.py` when the contraction C/groups*kh*kw is long and the
image small (see `conv2d.choose_algorithm`). The input VJP here is GEMM (W^T g) then col2im,
a scatter-add: tested against the correlation formulation in `conv2d.conv2d_grad_input_direct`.
Arguments are already checked and normalized by the wrappers in `conv2d.py`.
"""
import numpy as np
from numba import prange

from ._jit import njit

from . import blas, threads

_FASTMATH = {"reassoc", "contract"}


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
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


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _col2im(cols, dx, KH, KW, sh, sw, ph, pw, dh, dw):
    """Adjoint of _im2col, per image: cols is (groups, N, Cg*KH*KW, OH*OW) and

        dx[n, group*Cg + c, iy, ix] = sum of cols[group, n, (c*KH + ky)*KW + kx, oy*OW + ox] over the
        (ky, kx, oy, ox) with iy = oy*sh - ph + ky*dh and ix = ox*sw - pw + kx*dw.
    """
    N, C, H, W = dx.shape
    G = cols.shape[0]
    Cg = C // G
    L = cols.shape[3]
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
                row = cols[c // Cg, n, ((c % Cg) * KH + ky) * KW + kx]
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
    """Forward: per group one GEMM (Og, Cg*kh*kw) @ (Cg*kh*kw, n*OH*OW) over the patches of n images,
    plus bias. Two threads take halves of the batch (each with its own patches), or, for one image,
    halves of the output channels of each group."""
    N, C, H, W = x.shape
    O, Cg, KH, KW = w.shape
    L = out_shape[2] * out_shape[3]
    Og = O // groups
    wg = w.reshape(groups, Og, Cg * KH * KW)
    y = np.empty(out_shape, x.dtype)
    flops = 2.0 * N * O * L * Cg * KH * KW

    def images(n0, n1):
        n = n1 - n0
        cols = np.empty((C * KH * KW, n, L), x.dtype)
        _im2col(x[n0:n1], cols, KH, KW, s[0], s[1], p[0], p[1], d[0], d[1])
        res = blas.matmul(wg, cols.reshape(groups, Cg * KH * KW, n * L))
        y[n0:n1] = res.reshape(O, n, L).transpose(1, 0, 2).reshape((n,) + out_shape[1:])

    if N > 1:
        threads.split_flops(N, flops, images)
    else:
        cols = np.empty((groups, Cg * KH * KW, L), x.dtype)
        rows = cols.reshape(C * KH * KW, 1, L)

        def patches(c0, c1):  # the patch rows of input channels c0..c1-1
            _im2col(x[:, c0:c1], rows[c0 * KH * KW:c1 * KH * KW], KH, KW, s[0], s[1], p[0], p[1], d[0], d[1])

        threads.split_batch(C, rows.size, patches)
        yg = y.reshape(groups, Og, L)

        def channels(o0, o1):  # output channels o0..o1-1 of every group
            blas.matmul(wg[:, o0:o1], cols, out=yg[:, o0:o1])

        threads.split_flops(Og, flops, channels)
    if b.any():
        y += b.reshape(1, O, 1, 1)
    return y


def conv2d_pointwise(x, w, b, out_shape, s, groups):
    """Forward of a 1x1 convolution without padding: per image and group one GEMM
    W_g (Og, Cg) @ x_g (Cg, OH*OW) written straight into the NCHW output (no patches, no weight
    relayout); a stride first takes every s-th row and column. Two threads take halves of the
    batch, or of one image's output channels."""
    if s != (1, 1):
        x = np.ascontiguousarray(x[:, :, ::s[0], ::s[1]])
    N, C = x.shape[:2]
    O = w.shape[0]
    L = out_shape[2] * out_shape[3]
    wg = w.reshape(groups, O // groups, C // groups)
    xg = x.reshape(N, groups, C // groups, L)
    y = np.empty(out_shape, x.dtype)
    yg = y.reshape(N, groups, O // groups, L)
    flops = 2.0 * N * O * L * (C // groups)
    if N > 1:
        threads.split_flops(N, flops, lambda n0, n1: blas.matmul(wg, xg[n0:n1], out=yg[n0:n1]))
    else:
        threads.split_flops(O // groups, flops, lambda o0, o1: blas.matmul(wg[:, o0:o1], xg, out=yg[:, :, o0:o1]))
    if b.any():
        y += b.reshape(1, O, 1, 1)
    return y


def conv2d_grad_input_pointwise(g, w, x_shape, s, groups):
    """Input VJP of `conv2d_pointwise`: per image and group W_g^T g (the transpose is a view BLAS
    reads as it is); with a stride, the products land on every s-th row and column of zeros.
    Halves of the images, or of one image's input channels, on two threads."""
    M, O, OH, OW = g.shape
    C = x_shape[1]
    wt = w.reshape(groups, O // groups, C // groups).transpose(0, 2, 1)
    gs = g.reshape(M, groups, O // groups, OH * OW)
    res = np.empty((M, C, OH, OW), g.dtype)
    rg = res.reshape(M, groups, C // groups, OH * OW)
    flops = 2.0 * M * O * OH * OW * (C // groups)
    if M > 1:
        threads.split_flops(M, flops, lambda m0, m1: blas.matmul(wt, gs[m0:m1], out=rg[m0:m1]))
    else:
        threads.split_flops(C // groups, flops, lambda c0, c1: blas.matmul(wt[:, c0:c1], gs, out=rg[:, :, c0:c1]))
    if s == (1, 1):
        return res
    dx = np.zeros(x_shape, g.dtype)
    dx[:, :, ::s[0], ::s[1]] = res
    return dx


def conv2d_grad_input_gemm(g, w, x_shape, s, p, d, groups):
    """Input VJP: per image and group cols = W^T g (g's NCHW planes are the GEMM's right operand
    as they are: no transpose), then col2im; g is (M, O, OH, OW), seeds folded into M. The images
    go through in cache-sized chunks (`chunks`) with the patches buffer reused."""
    M, O, OH, OW = g.shape
    _, Cg, KH, KW = w.shape
    L = OH * OW
    Og = O // groups
    wt = w.reshape(groups, Og, Cg * KH * KW).transpose(0, 2, 1)[:, None]  # a view: BLAS reads W^T as it is
    dx = np.empty(x_shape, g.dtype)

    def work(n0, n1):  # images n0..n1-1, with their own buffer
        spans = chunks(n1, x_shape[1] * KH * KW * L * g.itemsize, n0)
        mc = max(m1 - m0 for m0, m1 in spans)
        buf = np.empty(groups * mc * Cg * KH * KW * L, g.dtype)
        for m0, m1 in spans:
            mn = m1 - m0
            cols = buf[:groups * mn * Cg * KH * KW * L].reshape(groups, mn, Cg * KH * KW, L)
            blas.matmul(wt, g[m0:m1].reshape(mn, groups, Og, L).transpose(1, 0, 2, 3), out=cols)
            _col2im(cols, dx[m0:m1], KH, KW, s[0], s[1], p[0], p[1], d[0], d[1])

    def channels(c0, c1):  # one image, one group: the patches of channels c0..c1-1 make their planes of dx
        KK = KH * KW
        cols = np.empty((1, 1, (c1 - c0) * KK, L), g.dtype)
        blas.matmul(wt[:, :, c0 * KK:c1 * KK], g.reshape(1, 1, O, L), out=cols)
        _col2im(cols, dx[:, c0:c1], KH, KW, s[0], s[1], p[0], p[1], d[0], d[1])

    flops = 2.0 * M * O * L * Cg * KH * KW
    if M == 1 and groups == 1:  # one image: halves of its channels on two threads
        threads.split_flops(x_shape[1], flops, channels)
    else:
        threads.split_flops(M, flops, work)
    return dx


def conv2d_grad_weight_gemm(g, x, w_shape, s, p, d, groups):
    """Weight VJP: per seed and group dW = g (Og, N*OH*OW) @ cols^T; g is (K, N, O, OH, OW), seeds in K."""
    K, N, O, OH, OW = g.shape
    _, Cg, KH, KW = w_shape
    L = OH * OW
    cols = np.empty((x.shape[1] * KH * KW, N, L), x.dtype)
    _im2col(x, cols, KH, KW, s[0], s[1], p[0], p[1], d[0], d[1])
    gt = g.reshape(K, N, groups, O // groups, L).transpose(0, 2, 3, 1, 4).reshape(K, groups, O // groups, N * L)
    dw = threads.matmul(gt, cols.reshape(groups, Cg * KH * KW, N * L).transpose(0, 2, 1))
    return dw.reshape((K,) + tuple(w_shape))


# ---------------------------------------------------------------------------------------------
# Row-major ("channels-last") patches: one row per output position, the taps and channels of its
# receptive field along the row. cols @ W is the faster orientation in OpenBLAS on the zoo's shapes
# (the long position axis becomes GEMM's M), and the same two kernels serve the forward, the
# input VJP (as a correlation, split into stride phases) and the sub-pixel convolution.


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _to_nhwc(src, dst, ry, rx, sy, sx, pt, pl):
    """Zero-padded channels-last copy of a phase plane of src:

        dst[n, i + pt, j + pl, c] = src[n, c, i*sy + ry, j*sx + rx],  zero where no source entry lands.

    Negative pt/pl crop. A blocked transpose: per (n, row of dst), 16 (then 8, then 1) channels
    at a time, each dst pixel's run of channels written contiguously from that many source rows
    (a channel-by-channel scatter would make strided writes and touch one source page per channel
    for every element).
    """
    N, C, H, W = src.shape
    Hl = (H - ry + sy - 1) // sy
    Wl = (W - rx + sx - 1) // sx
    Hp, Wp = dst.shape[1], dst.shape[2]
    lo = max(0, pl)  # dst columns [lo, hi) have a source
    hi = min(Wp, Wl + pl)
    for t in prange(N * Hp):
        n = t // Hp
        i = t % Hp - pt
        drow = dst[n, t % Hp]
        if i < 0 or i >= Hl or lo >= hi:
            drow[:, :] = 0
            continue
        drow[:lo, :] = 0
        drow[hi:, :] = 0
        Y = i * sy + ry
        c0 = 0
        while c0 + 16 <= C:
            blk = src[n, c0:c0 + 16, Y]
            for j in range(lo, hi):
                d = drow[j, c0:c0 + 16]
                s = (j - pl) * sx + rx
                for c in range(16):
                    d[c] = blk[c, s]
            c0 += 16
        while c0 + 8 <= C:
            blk = src[n, c0:c0 + 8, Y]
            for j in range(lo, hi):
                d = drow[j, c0:c0 + 8]
                s = (j - pl) * sx + rx
                for c in range(8):
                    d[c] = blk[c, s]
            c0 += 8
        for c in range(c0, C):
            srow = src[n, c, Y]
            for j in range(lo, hi):
                drow[j, c] = srow[(j - pl) * sx + rx]


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _im2row(xp, C, cols, offy, offx, s_y, s_x, OH, OW, k0):
    """Gather patches from a padded channels-last xp, viewed as (N, Hp, Wp*C) (see `_to_nhwc`):
    for phase p = py*Px + px (Px = offx.shape[0]) and output position (n, oy, ox),

        cols[p, (n*OH + oy)*OW + ox, k0 + (ty*ntx + tx)*C + c] = xp[n, oy*s_y + offy[py, ty], (ox*s_x + offx[px, tx])*C + c]

    Offsets are >= 0 and every read is inside xp (the padding is in xp). Taps with consecutive
    column offsets are one contiguous run of xp (whatever the stride): copied in one loop.
    One loop over independent tasks (p, n, oy): each owns OW rows of cols.
    """
    N = xp.shape[0]
    Py, nty = offy.shape
    Px, ntx = offx.shape
    for t in prange(Py * Px * N * OH):
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


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _row2im(res, y, b, OH, OW, sy, sx, ry, rx, Px):
    """Scatter GEMM rows back to NCHW, plus bias: for phase p = py*Px + px,

        y[n, o, oy*sy + ry + py, ox*sx + rx + px] = res[p, (n*OH + oy)*OW + ox, o] + b[o].

    Every (phase, position) is written once. One loop over independent tasks (p, n, oy): each
    transposes an (OW, O) block of res (in L1), 16 columns at a time: a fixed-length loop of 16
    strided reads and 16 (contiguous, or sx-strided) writes, which LLVM vectorizes (a
    loop of runtime length it does not); the last OW % 16 columns go one by one.
    """
    P, R, O = res.shape
    N = R // (OH * OW)
    for t in prange(P * N * OH):
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


def conv2d_rows(x, w, b, out_shape, s, p, d):
    """Forward (groups = 1): GEMMs (n*OH*OW, kh*kw*C) @ (kh*kw*C, O) over chunks of n images whose
    patches fit CHUNK_BYTES, so that each chunk's padded copy, patches and product stay in cache
    (one GEMM over a whole batch would stream them from memory)."""
    N, C, H, W = x.shape
    O, _, KH, KW = w.shape
    OH, OW = out_shape[2], out_shape[3]
    Hp, Wp = (OH - 1) * s[0] + (KH - 1) * d[0] + 1, (OW - 1) * s[1] + (KW - 1) * d[1] + 1
    offy = (np.arange(KH) * d[0]).reshape(1, KH)
    offx = (np.arange(KW) * d[1]).reshape(1, KW)
    wm = np.ascontiguousarray(w.transpose(2, 3, 1, 0)).reshape(KH * KW * C, O)
    y = np.empty(out_shape, x.dtype)

    def rows(oy0, oy1):  # one image, output rows oy0..oy1-1: its own padded rows, patches and products
        n_rows = oy1 - oy0
        hp = (n_rows - 1) * s[0] + (KH - 1) * d[0] + 1
        xp = np.empty((1, hp, Wp, C), x.dtype)
        _to_nhwc(x, xp, 0, 0, 1, 1, p[0] - oy0 * s[0], p[1])  # padded row oy0*s[0] becomes row 0
        cols = np.empty((1, n_rows * OW, KH * KW * C), x.dtype)
        _im2row(xp.reshape(1, hp, -1), C, cols, offy, offx, s[0], s[1], n_rows, OW, 0)
        res = np.empty((1, n_rows * OW, O), x.dtype)
        blas.matmul(cols[0], wm, out=res[0])
        _row2im(res, y, b, n_rows, OW, 1, 1, oy0, 0, 1)  # rows land at oy0 + oy

    flops = 2.0 * N * OH * OW * KH * KW * C * O
    if N == 1:  # one image: halves of its output rows on two threads
        threads.split_flops(OH, flops, rows)
        return y

    def work(n0, n1):  # images n0..n1-1, with their own buffers
        spans = chunks(n1, OH * OW * KH * KW * C * x.itemsize, n0)
        mc = max(m1 - m0 for m0, m1 in spans)
        xp = np.empty((mc, Hp, Wp, C), x.dtype)
        cols = np.empty((1, mc * OH * OW, KH * KW * C), x.dtype)
        res = np.empty((1, mc * OH * OW, O), x.dtype)
        for m0, m1 in spans:
            n = m1 - m0
            _to_nhwc(x[m0:m1], xp[:n], 0, 0, 1, 1, p[0], p[1])
            c, r = cols[:, :n * OH * OW], res[:, :n * OH * OW]
            _im2row(xp[:n].reshape(n, Hp, -1), C, c, offy, offx, s[0], s[1], OH, OW, 0)
            blas.matmul(c[0], wm, out=r[0])
            _row2im(r, y[m0:m1], b, OH, OW, 1, 1, 0, 0, 1)

    threads.split_flops(N, flops, work)
    return y


def stride_phases(size, kernel, stride, padding, dilation):
    """Input VJP along one axis, split by the phase r of the input index i = a*stride + r:

    dx[a*s + r] = sum over taps k with (r + p - k*d) % s == 0 of w[k] g[a + (r + p - k*d) // s].
    Yields (r, taps, offsets, number of a); phases no tap reaches have no taps.
    """
    for r in range(stride):
        taps = [k for k in range(kernel) if (r + padding - k * dilation) % stride == 0]
        yield r, taps, [(r + padding - k * dilation) // stride for k in taps], (size - r + stride - 1) // stride


# Intermediates of the seed-batched VJPs are built a chunk of images at a time, in buffers reused
# from chunk to chunk, so that the padded copy, the patches and the GEMM result stay in cache
# (the patches of 64 seeds of a 128x128 decoder layer are 268 MB). One wrapper call still serves
# every seed; only the final output is full size.
CHUNK_BYTES = 4 << 20  # patches per chunk: a few MB, so that a chunk's buffers stay in the caches


def chunks(M, bytes_per_image, start=0):
    """Image ranges [m0, m1) of [start, M), of at most CHUNK_BYTES of patches each (at least one image)."""
    step = max(1, min(M - start, CHUNK_BYTES // max(1, bytes_per_image)))
    return [(m0, min(M, m0 + step)) for m0 in range(start, M, step)]


def conv2d_grad_input_rows(g, w, x_shape, s, p, d):
    """Input VJP (groups = 1) as a correlation of g with w^T, one GEMM per stride phase of dx.

    Per phase (ry, rx) only the taps that reach it take part: no multiplications by the zeros a
    stride-dilated cotangent would hold. g is (M, O, OH, OW) with seeds folded into M. One padded
    channels-last copy of g serves every phase; the images go through in cache-sized chunks.
    """
    M, O, OH, OW = g.shape
    C, H, W = x_shape[1:]
    dx = np.empty(x_shape, g.dtype)
    zero = np.zeros(C, g.dtype)
    phases = []
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
    rows_per_image = [ph[2] * ph[3] for ph in phases]
    k_max = max(ph[6].shape[0] for ph in phases)
    per_image = sum(r * ph[6].shape[0] for r, ph in zip(rows_per_image, phases)) * g.itemsize

    def work(n0, n1):  # images n0..n1-1, with their own buffers
        spans = chunks(n1, per_image, n0)
        mc = max(m1 - m0 for m0, m1 in spans)
        gp = np.empty((mc, Hg, Wg, O), g.dtype)
        cols_buf = np.empty(mc * max(rows_per_image) * k_max, g.dtype)
        res_buf = np.empty(mc * max(rows_per_image) * C, g.dtype)
        for m0, m1 in spans:
            mn = m1 - m0
            gpc = gp[:mn]
            _to_nhwc(g[m0:m1], gpc, 0, 0, 1, 1, -y_lo, -x_lo)
            for (ry, rx, Ha, Wa, oys, oxs, wm) in phases:
                R, Kp = mn * Ha * Wa, wm.shape[0]
                cols = cols_buf[:R * Kp].reshape(1, R, Kp)
                _im2row(gpc.reshape(mn, Hg, -1), O, cols, np.array([oys]) - y_lo, np.array([oxs]) - x_lo, 1, 1, Ha, Wa,
                        0)
                res = res_buf[:R * C].reshape(1, R, C)
                blas.matmul(cols[0], wm, out=res[0])
                _row2im(res, dx[m0:m1], zero, Ha, Wa, s[0], s[1], ry, rx, 1)

    threads.split_flops(M, 2.0 * M * per_image / g.itemsize * C, work)
    return dx


def conv2d_grad_weight_rows(g, x, w_shape, s, p, d):
    """Weight VJP (groups = 1): dW[k] = patches^T @ g-rows[k], one batched GEMM over the seeds;
    g is (K, N, O, OH, OW), seeds in K."""
    K, N, O, OH, OW = g.shape
    C, KH, KW = w_shape[1:]
    xp = np.empty((N, (OH - 1) * s[0] + (KH - 1) * d[0] + 1, (OW - 1) * s[1] + (KW - 1) * d[1] + 1, C), x.dtype)
    _to_nhwc(x, xp, 0, 0, 1, 1, p[0], p[1])
    cols = np.empty((1, N * OH * OW, KH * KW * C), x.dtype)
    _im2row(xp.reshape(N, xp.shape[1], -1), C, cols, (np.arange(KH) * d[0]).reshape(1, KH),
            (np.arange(KW) * d[1]).reshape(1, KW), s[0], s[1], OH, OW, 0)
    grows = np.empty((K * N, OH, OW, O), g.dtype)
    _to_nhwc(g.reshape(K * N, O, OH, OW), grows, 0, 0, 1, 1, 0, 0)
    dw = blas.matmul(cols[0].T, grows.reshape(K, N * OH * OW, O))  # (K, KH*KW*C, O)
    return np.ascontiguousarray(dw.reshape(K, KH, KW, C, O).transpose(0, 4, 3, 1, 2))
