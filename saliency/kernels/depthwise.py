"""conv2d with one input channel per group (depthwise, `groups == C`, any channel multiplier)
and its input VJP: direct Numba kernels, one input plane at a time.

Each (image, channel) plane is copied once into a zero-padded buffer, its columns split by their
phase modulo the stride (column q at [q % stride, q // stride]), so that the inputs of one tap
for one output row are a contiguous run at any stride. Every output row then takes its taps as
whole-row multiply-adds over such runs (no bounds tests in the inner loop, which vectorizes). The
input VJP is the adjoint loop: each tap scatters a row of the cotangent into a zero buffer of the
padded plane, whose interior is the gradient (no stride-dilated copy of the cotangent, no
flipped weights).
Arguments are already checked and normalized by the wrappers in `conv2d.py`.
"""
import numpy as np
from numba import prange

from ._jit import njit

from . import threads

_FASTMATH = {"reassoc", "contract"}


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _forward(x, w, b, out, sh, sw, ph, pw, dh, dw, t0, t1):
    """For the planes t = n*C + c in [t0, t1) and o = c*m + j (m = O // C, j < m):

        out[n, o, oy, ox] = b[o] + sum_{ky, kx} w[o, 0, ky, kx] * x[n, c, oy*sh - ph + ky*dh, ox*sw - pw + kx*dw]

    with input positions outside x read as zero.
    """
    N, C, H, W = x.shape
    O, _, KH, KW = w.shape
    OH, OW = out.shape[2], out.shape[3]
    m = O // C
    Hp = (OH - 1) * sh + (KH - 1) * dh + 1  # padded rows: row r holds input row r - ph
    Wp = (OW - 1) * sw + (KW - 1) * dw + 1  # padded columns: column q holds input column q - pw ...
    Wq = (Wp + sw - 1) // sw                # ... and sits in phase q % sw at index q // sw
    r0, r1 = max(0, ph), min(Hp, H + ph)
    c0, c1 = max(0, pw), min(Wp, W + pw)
    buf = np.zeros((sw, Hp, Wq), dtype=out.dtype)  # its border stays zero: every plane fills the same interior
    for t in prange(t0, t1):
        n = t // C
        c = t % C
        for r in range(r0, r1):
            for q0 in range(c0, min(c1, c0 + sw)):  # one phase of the row at a time
                k = (c1 - q0 + sw - 1) // sw
                src = x[n, c, r - ph, q0 - pw:c1 - pw:sw]
                dst = buf[q0 % sw, r, q0 // sw:q0 // sw + k]
                for i in range(k):
                    dst[i] = src[i]
        for j in range(m):
            o = c * m + j
            bo = b[o]
            wo = w[o, 0]
            for oy in range(OH):
                orow = out[n, o, oy]
                for ox in range(OW):
                    orow[ox] = bo
                for ky in range(KH):
                    r = oy * sh + ky * dh
                    for kx in range(KW):
                        wv = wo[ky, kx]
                        off = kx * dw  # column ox*sw + off is phase off % sw, index ox + off // sw
                        seg = buf[off % sw, r, off // sw:off // sw + OW]  # contiguous, indexed from 0: vectorizes
                        for ox in range(OW):
                            orow[ox] += wv * seg[ox]


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _grad_input(g, w, dx, sh, sw, ph, pw, dh, dw, t0, t1):
    """The adjoint of `_forward` for the planes t = n*C + c in [t0, t1):

        dx[n, c, iy, ix] = sum over j < m, ky, kx, oy, ox with iy = oy*sh - ph + ky*dh and
                           ix = ox*sw - pw + kx*dw of w[c*m + j, 0, ky, kx] * g[n, c*m + j, oy, ox].
    """
    N, C, H, W = dx.shape
    O, _, KH, KW = w.shape
    OH, OW = g.shape[2], g.shape[3]
    m = O // C
    Hp = (OH - 1) * sh + (KH - 1) * dh + 1
    Wp = (OW - 1) * sw + (KW - 1) * dw + 1
    Wq = (Wp + sw - 1) // sw
    r0, r1 = max(0, ph), min(Hp, H + ph)
    c0, c1 = max(0, pw), min(Wp, W + pw)
    buf = np.empty((sw, Hp, Wq), dtype=dx.dtype)  # the padded plane, in column phases as in _forward
    for t in prange(t0, t1):
        n = t // C
        c = t % C
        buf[:, :, :] = 0
        for j in range(m):
            o = c * m + j
            wo = w[o, 0]
            for oy in range(OH):
                grow = g[n, o, oy]
                for ky in range(KH):
                    r = oy * sh + ky * dh
                    for kx in range(KW):
                        wv = wo[ky, kx]
                        off = kx * dw
                        seg = buf[off % sw, r, off // sw:off // sw + OW]
                        for ox in range(OW):
                            seg[ox] += wv * grow[ox]
        plane = dx[n, c]
        plane[:, :] = 0  # input positions no tap reaches (cropped by the stride) stay zero
        for r in range(r0, r1):
            for q0 in range(c0, min(c1, c0 + sw)):
                k = (c1 - q0 + sw - 1) // sw
                src = buf[q0 % sw, r, q0 // sw:q0 // sw + k]
                dst = plane[r - ph, q0 - pw:c1 - pw:sw]
                for i in range(k):
                    dst[i] = src[i]


def depthwise_forward(x, w, b, out_shape, s, p, d):
    """conv2d with groups == C (w of shape (O, 1, kh, kw), O a multiple of C)."""
    out = np.empty(out_shape, x.dtype)

    def planes(t0, t1):
        _forward(x, w, b, out, s[0], s[1], p[0], p[1], d[0], d[1], t0, t1)

    threads.split_batch(x.shape[0] * x.shape[1], out.size, planes)
    return out


def depthwise_grad_input(g, w, x_shape, s, p, d):
    """Input VJP of `depthwise_forward`; g is (M, O, OH, OW) with seeds folded into M."""
    dx = np.empty(x_shape, g.dtype)

    def planes(t0, t1):
        _grad_input(g, w, dx, s[0], s[1], p[0], p[1], d[0], d[1], t0, t1)

    threads.split_batch(x_shape[0] * x_shape[1], max(g.size, dx.size), planes)
    return dx
