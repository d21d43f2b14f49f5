"""conv2d with one input channel per group (depthwise, `groups == C`, any channel multiplier)
and its input VJP: direct Numba kernels, one input plane at a time.

Each (image, channel) plane is copied once into a zero-padded buffer, its columns split by their
phase modulo the stride (column q at [q % stride, q // stride]), so that the inputs of one tap
for one output row are a contiguous run at any stride. Every output row then takes its taps as
whole-row multiply-adds over such runs (no bounds tests in the inner loop, which vectorizes). The
input VJP is the adjoint loop: each tap scatters a row of the cotangent into a zero buffer of the
padded plane, whose interior is the gradient (no stride-dilated copy of the cotangent, no
flipped weights).

Small planes with many channels (the late layers of MobileNets and EfficientNets: 1152 channels
of 4x4) would spend their time on loop overhead, a few columns per row: those run channels-last
instead (`_forward_nhwc`, `_grad_input_nhwc`), where the inner loop runs over the channels of a
pixel; `channels_last_pays` weighs the two.

Large calls run in parts on the kernels' threads (`threads.run`): parts of the (image, channel)
planes, or of the channels in channels-last order.

Arguments are already checked and normalized by the wrappers in `conv2d.py`.
"""
import numpy as np
from numba import prange

from ._jit import njit

from . import im2col, threads

_FASTMATH = {"reassoc", "contract"}


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _forward(x, w, b, out, sh, sw, ph, pw, dh, dw, lo, hi):
    """For the planes t = n*C + c in [lo, hi) and o = c*m + j (m = O // C, j < m):

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
    for t in range(lo, hi):
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


@njit(cache=True, nogil=True, parallel=True)
def _forward_parallel(x, w, b, out, sh, sw, ph, pw, dh, dw, n, k):
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _forward(x, w, b, out, sh, sw, ph, pw, dh, dw, lo, hi)


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _grad_input(g, w, dx, sh, sw, ph, pw, dh, dw, lo, hi):
    """The adjoint of `_forward` for the planes t = n*C + c in [lo, hi):

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
    for t in range(lo, hi):
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


@njit(cache=True, nogil=True, parallel=True)
def _grad_input_parallel(g, w, dx, sh, sw, ph, pw, dh, dw, n, k):
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _grad_input(g, w, dx, sh, sw, ph, pw, dh, dw, lo, hi)


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _forward_nhwc(xt, wt, b, yt, sh, sw, dh, dw, c0, c1):
    """Channels-last, multiplier 1, on a zero-padded xt (N, Hp, Wp, C) and wt (kh, kw, C), for the
    channels [c0, c1):

        yt[n, oy, ox, c] = b[c] + sum_{ky, kx} wt[ky, kx, c] * xt[n, oy*sh + ky*dh, ox*sw + kx*dw, c]
    """
    N, OH, OW = yt.shape[0], yt.shape[1], yt.shape[2]
    KH, KW = wt.shape[0], wt.shape[1]
    bs = b[c0:c1]
    for t in range(N * OH):
        n = t // OH
        oy = t % OH
        for ox in range(OW):
            acc = yt[n, oy, ox, c0:c1]
            for i in range(c1 - c0):
                acc[i] = bs[i]
            for ky in range(KH):
                for kx in range(KW):
                    xs = xt[n, oy * sh + ky * dh, ox * sw + kx * dw, c0:c1]
                    ws = wt[ky, kx, c0:c1]
                    for i in range(c1 - c0):
                        acc[i] += ws[i] * xs[i]


@njit(cache=True, nogil=True, parallel=True)
def _forward_nhwc_parallel(xt, wt, b, yt, sh, sw, dh, dw, n, k):
    for t in prange(k):
        c0, c1 = threads.part(n, t, k)
        _forward_nhwc(xt, wt, b, yt, sh, sw, dh, dw, c0, c1)


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _grad_input_nhwc(gt, wt, dxt, sh, sw, dh, dw, c0, c1):
    """The adjoint of `_forward_nhwc` for the channels [c0, c1), into a zeroed padded dxt (N, Hp, Wp, C)."""
    N, OH, OW = gt.shape[0], gt.shape[1], gt.shape[2]
    KH, KW = wt.shape[0], wt.shape[1]
    for n in range(N):  # serial over output pixels: the taps of neighbouring pixels overlap
        for oy in range(OH):
            for ox in range(OW):
                gs = gt[n, oy, ox, c0:c1]
                for ky in range(KH):
                    for kx in range(KW):
                        ds = dxt[n, oy * sh + ky * dh, ox * sw + kx * dw, c0:c1]
                        ws = wt[ky, kx, c0:c1]
                        for i in range(c1 - c0):
                            ds[i] += ws[i] * gs[i]


@njit(cache=True, nogil=True, parallel=True)
def _grad_input_nhwc_parallel(gt, wt, dxt, sh, sw, dh, dw, n, k):
    for t in prange(k):
        c0, c1 = threads.part(n, t, k)
        _grad_input_nhwc(gt, wt, dxt, sh, sw, dh, dw, c0, c1)


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _from_nhwc(src, dst, r0, q0):
    """dst[n, c, i, j] = src[n, i + r0, j + q0, c]: a blocked transpose back to NCHW, 16 channels
    of a source pixel at a time (one contiguous read, 16 writes that run along dst's rows)."""
    N, C, H, W = dst.shape
    for t in prange(N * H):
        n = t // H
        i = t % H
        c0 = 0
        while c0 + 16 <= C:
            for j in range(W):
                blk = src[n, i + r0, j + q0, c0:c0 + 16]
                for k in range(16):
                    dst[n, c0 + k, i, j] = blk[k]
            c0 += 16
        for c in range(c0, C):
            row = dst[n, c, i]
            for j in range(W):
                row[j] = src[n, i + r0, j + q0, c]


# Costs behind `channels_last_pays` (nanoseconds, fitted on the layers of benchmarks/depthwise.py:
# 32 to 1152 channels, planes of 4x4 to 112x112, 3x3 and 5x5 kernels at strides 1 and 2): a
# vectorized row of multiply-adds of the plane kernels costs ROW_NS of loop overhead plus
# ELEMENT_NS per element; a row of the register-tiled 3x3 kernel (all 9 taps at once, stride 1)
# TILED_ROW_NS plus TILED_ELEMENT_NS per element and tap, after a padded copy of the input; a row
# of the channels-last kernels (C long) CHANNELS_ROW_NS plus CHANNELS_ELEMENT_NS per element; a
# blocked transpose into or out of channels-last order (`im2col._to_nhwc`, `_from_nhwc`) or a
# padded copy COPY_NS per element.
ROW_NS, ELEMENT_NS = 7.0, 0.1
TILED_ROW_NS, TILED_ELEMENT_NS = 40.0, 0.05
CHANNELS_ROW_NS, CHANNELS_ELEMENT_NS = 10.0, 0.5
COPY_NS = 0.2


def channels_last_pays(C, m, in_hw, out_hw, taps, tiled=False):
    """Whether the channels-last kernels beat the plane kernels (`tiled`: the register-tiled 3x3
    kernel of conv2d, which serves 3x3 at stride 1): one row per (channel, output row, tap), OW
    long (one per (channel, output row) when tiled), against one per (output pixel, tap), C long,
    plus the copies into and out of channels-last order. Only for a channel multiplier of 1."""
    if m != 1:
        return False
    (H, W), (OH, OW) = in_hw, out_hw
    if tiled:
        planes = C * OH * (TILED_ROW_NS + OW * taps * TILED_ELEMENT_NS) + COPY_NS * C * H * W
    else:
        planes = C * OH * taps * (ROW_NS + OW * ELEMENT_NS)
    pixels = OH * OW * taps * (CHANNELS_ROW_NS + C * CHANNELS_ELEMENT_NS) + COPY_NS * C * (H * W + OH * OW)
    return pixels < planes


def register_tiled(KH, KW, s):
    """Whether the plane alternative is conv2d's register-tiled 3x3 kernel (3x3 at stride 1)."""
    return (KH, KW) == (3, 3) and tuple(s) == (1, 1)


def depthwise_forward(x, w, b, out_shape, s, p, d):
    """conv2d with groups == C (w of shape (O, 1, kh, kw), O a multiple of C)."""
    N, C, H, W = x.shape
    KH, KW = w.shape[2], w.shape[3]
    OH, OW = out_shape[2], out_shape[3]
    if channels_last_pays(C, out_shape[1] // C, (H, W), (OH, OW), KH * KW, register_tiled(KH, KW, s)):
        Hp, Wp = (OH - 1) * s[0] + (KH - 1) * d[0] + 1, (OW - 1) * s[1] + (KW - 1) * d[1] + 1
        xt = np.empty((N, Hp, Wp, C), x.dtype)
        im2col._to_nhwc(x, xt, 0, 0, 1, 1, p[0], p[1], 0, -1)
        wt = np.ascontiguousarray(w[:, 0].transpose(1, 2, 0))
        yt = np.empty((N, OH, OW, C), x.dtype)
        threads.run(_forward_nhwc, _forward_nhwc_parallel, C, yt.size, xt, wt, b, yt, s[0], s[1], d[0], d[1])
        out = np.empty(out_shape, x.dtype)
        _from_nhwc(yt, out, 0, 0)
        return out
    out = np.empty(out_shape, x.dtype)
    threads.run(_forward, _forward_parallel, N * C, out.size, x, w, b, out, s[0], s[1], p[0], p[1], d[0], d[1])
    return out


def depthwise_grad_input(g, w, x_shape, s, p, d):
    """Input VJP of `depthwise_forward`; g is (M, O, OH, OW) with seeds folded into M."""
    M, C, H, W = x_shape
    KH, KW = w.shape[2], w.shape[3]
    OH, OW = g.shape[2], g.shape[3]
    if channels_last_pays(C, g.shape[1] // C, (H, W), (OH, OW), KH * KW, register_tiled(KH, KW, s)):
        Hp, Wp = (OH - 1) * s[0] + (KH - 1) * d[0] + 1, (OW - 1) * s[1] + (KW - 1) * d[1] + 1
        gt = np.empty((M, OH, OW, C), g.dtype)
        im2col._to_nhwc(g, gt, 0, 0, 1, 1, 0, 0, 0, -1)
        wt = np.ascontiguousarray(w[:, 0].transpose(1, 2, 0))
        dxt = np.zeros((M, max(Hp, H + p[0]), max(Wp, W + p[1]), C), g.dtype)
        threads.run(_grad_input_nhwc, _grad_input_nhwc_parallel, C, g.size, gt, wt, dxt, s[0], s[1], d[0], d[1])
        dx = np.empty(x_shape, g.dtype)
        _from_nhwc(dxt, dx, p[0], p[1])
        return dx
    dx = np.empty(x_shape, g.dtype)
    threads.run(_grad_input, _grad_input_parallel, M * C, max(g.size, dx.size), g, w, dx, s[0], s[1], p[0], p[1],
                d[0], d[1])
    return dx
