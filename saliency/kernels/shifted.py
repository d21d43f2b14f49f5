"""conv2d at stride 1 as kh*kw accumulated matrix products on shifted views of the zero-padded
input, and its input VJP the same way: no patch matrix.

With one image zero-padded to (C, Hp, Wp) and each channel flattened, the input value that tap
(ky, kx) multiplies for output (oy, ox) sits at flat index (oy + ky*dh)*Wp + ox + kx*dw. Computed
on rows Wp wide (the OW true columns, then Wp - OW that are dropped), the output of tap (ky, kx)
reads the run of OH*Wp consecutive entries from offset ky*dh*Wp + kx*dw of every channel: a
(C, OH*Wp) view of the padded buffer, which BLAS reads in place. So

    y_wide (O, OH*Wp) = sum over taps of W[:, :, ky, kx] (O, C) @ X_(ky, kx) (C, OH*Wp),

each product accumulated into y_wide by the GEMM itself (`blas.gemm`, beta = 1). The patch
matrix of the im2col paths (kh*kw times the input) is never written; the work is the GEMMs, one
padded copy of the input and one crop of the output. The weight is copied once per call into
per-tap matrices (kh*kw, O, C).

The input VJP at stride 1 is the correlation of the cotangent with the flipped, in/out-swapped
weight at padding dilation*(k - 1) - padding (see `conv2d.conv2d_grad_input_direct`): the same
products, with the per-tap matrices read transposed (no second copy) and in reverse tap order.
"""
import numpy as np

from . import blas, threads


def _tap_matrices(w):
    """(O, C, kh, kw) -> (kh*kw, O, C): the weight of each tap as one contiguous matrix."""
    O, C, KH, KW = w.shape
    return np.ascontiguousarray(w.transpose(2, 3, 0, 1)).reshape(KH * KW, O, C)


def _correlate(x, taps, out, pad, d, kernel):
    """out[n, o, oy, ox] = sum_{c, ky, kx} taps(ky*kw + kx)[o, c] * x[n, c, oy - pad[0] + ky*dh, ox - pad[1] + kx*dw]

    (stride 1; input positions outside x read as zero, a negative pad crops). `taps(t)` returns
    tap t's (O, C) matrix as a view. Halves of the images, or of one image's output rows (the
    products keep all O rows, the long dimension being the positions), on two threads.
    """
    N, C, H, W = x.shape
    O, OH, OW = out.shape[1], out.shape[2], out.shape[3]
    KH, KW = kernel
    Hp, Wp = OH + (KH - 1) * d[0], OW + (KW - 1) * d[1]
    plane = Hp * Wp + (KW - 1) * d[1]  # the last tap's run ends (KW - 1)*dw entries past the plane
    L = OH * Wp
    r0, c0 = max(0, -pad[0]), max(0, -pad[1])  # the part of x inside the padded plane
    r1, c1 = min(H, Hp - pad[0]), min(W, Wp - pad[1])
    flops = 2.0 * N * O * C * KH * KW * OH * OW

    def padded(n):
        xp = np.zeros((C, plane), x.dtype)
        if r0 < r1 and c0 < c1:
            inside = xp[:, :Hp * Wp].reshape(C, Hp, Wp)
            inside[:, r0 + pad[0]:r1 + pad[0], c0 + pad[1]:c1 + pad[1]] = x[n, :, r0:r1, c0:c1]
        return xp

    def products(xp, yw, r0, r1):  # output rows r0..r1-1: columns r0*Wp..r1*Wp-1 of yw
        a, z = r0 * Wp, r1 * Wp
        for t in range(KH * KW):
            off = (t // KW) * d[0] * Wp + (t % KW) * d[1]
            blas.gemm(taps(t), xp[:, off + a:off + z], yw[:, a:z], 0.0 if t == 0 else 1.0)

    def images(n0, n1):  # whole images, each with its own padded copy
        yw = np.empty((O, L), out.dtype)
        for n in range(n0, n1):
            products(padded(n), yw, 0, OH)
            out[n] = yw.reshape(O, OH, Wp)[:, :, :OW]

    def rows(r0, r1):  # output rows r0..r1-1 of the one image, from one padded copy
        products(xp, yw, r0, r1)
        out[0, :, r0:r1] = yw[:, r0 * Wp:r1 * Wp].reshape(O, r1 - r0, Wp)[:, :, :OW]

    with blas.one_thread():  # products too small to split stay on this thread, not on OpenBLAS's
        if N > 1:
            threads.split_flops(N, flops, images)
        else:
            xp, yw = padded(0), np.empty((O, L), out.dtype)
            threads.split_flops(OH, flops, rows)
    return out


def conv2d_shifted(x, w, b, out_shape, p, d):
    """Forward at stride 1 (groups = 1), plus bias."""
    wt = _tap_matrices(w)
    y = _correlate(x, lambda t: wt[t], np.empty(out_shape, x.dtype), p, d, w.shape[2:])
    if b.any():
        y += b.reshape(1, -1, 1, 1)
    return y


def conv2d_grad_input_shifted(g, w, x_shape, p, d):
    """Input VJP at stride 1 (groups = 1); g is (M, O, OH, OW) with seeds folded into M."""
    KH, KW = w.shape[2], w.shape[3]
    wt = _tap_matrices(w)
    T = KH * KW
    pt = (d[0] * (KH - 1) - p[0], d[1] * (KW - 1) - p[1])
    return _correlate(g, lambda t: wt[T - 1 - t].T, np.empty(x_shape, g.dtype), pt, d, (KH, KW))
