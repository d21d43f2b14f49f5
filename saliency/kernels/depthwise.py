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
instead, in kernels generated per kernel size, stride and dilation (`channels_last_kernels`)
whose inner loop runs over the channels of a pixel with every tap written out; the input VJP is
the same kernel on the stride-dilated cotangent with the taps flipped. Their results stay
channels-last (see `layout.py`): the 1x1 convolutions around a depthwise layer take them as they
are, so a chain of such blocks converts once. `channels_last_pays` weighs the two per call, with
the format of the array it is given.

Large calls run in parts on the kernels' threads (`threads.run`): parts of the (image, channel)
planes, or of the output rows in channels-last order.

Arguments are already checked and normalized by the wrappers in `conv2d.py`.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
from numba import prange

from . import _jit
from ._jit import njit

from . import im2col, layout, threads

if TYPE_CHECKING:
    from .._typing import FloatArray, Shape

    Pair = tuple[int, int]


_FASTMATH = {"reassoc", "contract"}


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _forward(x: FloatArray, w: FloatArray, b: FloatArray, out: FloatArray, sh: int, sw: int, ph: int, pw: int, dh: int,
             dw: int, lo: int, hi: int) -> None:
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
def _forward_parallel(x: FloatArray, w: FloatArray, b: FloatArray, out: FloatArray, sh: int, sw: int, ph: int, pw: int,
                      dh: int, dw: int, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _forward(x, w, b, out, sh, sw, ph, pw, dh, dw, lo, hi)


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _grad_input(g: FloatArray, w: FloatArray, dx: FloatArray, sh: int, sw: int, ph: int, pw: int, dh: int, dw: int,
                lo: int, hi: int) -> None:
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
def _grad_input_parallel(g: FloatArray, w: FloatArray, dx: FloatArray, sh: int, sw: int, ph: int, pw: int, dh: int,
                         dw: int, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _grad_input(g, w, dx, sh, sw, ph, pw, dh, dw, lo, hi)


def _columns(KH: int, KW: int, s: Pair, d: Pair) -> int:
    """How many output columns a channels-last kernel computes at once: as many as LLVM still
    vectorizes (read from the compiled code on AVX2 with Numba 0.68: 4 for 3x3 at stride 1, 3 for
    3x3 at larger strides, 2 up to 25 taps, one beyond; past that the loop body stays scalar, 3-5
    times slower)."""
    taps = KH * KW
    if taps <= 9:
        return 4 if s == (1, 1) and d == (1, 1) else 3
    return 2 if taps <= 25 else 1


def _source(KH: int, KW: int, s: Pair, d: Pair, B: int) -> str:
    """Python source of the channels-last kernels for one (kernel size, stride, dilation): every
    tap written out, B output columns at a time, the loop over channels innermost (see
    `channels_last_kernels`)."""
    (sh, sw), (dh, dw) = s, d
    taps = [(ky, kx) for ky in range(KH) for kx in range(KW)]
    lines = [
        f'"""Channels-last depthwise kernels for {KH}x{KW} taps, stride {sh}x{sw}, dilation {dh}x{dw}: written by',
        'saliency.kernels.depthwise._source; any change here is overwritten."""',
        "import numpy as np",
        "from numba import prange",
        "",
        "from saliency.kernels import threads",
        "from saliency.kernels._jit import njit",
        "",
        "",
        "@njit(cache=True, fastmath={'reassoc', 'contract'}, nogil=True)",
        "def serial(xt, wt, b, yt, lo, hi):",
        "    N, OH, OW, C = yt.shape",
        "    C = np.uint64(C)  # unsigned indices: no test for negative ones, which keeps the loops vectorizable",
        "    wf = wt.reshape(-1)",
        "    for t in range(lo, N * OH if hi < 0 else hi):",
        "        n = t // OH",
        "        oy = t % OH",
        "        yr = yt[n, oy].reshape(-1)",
    ]
    lines += [f"        r{ky} = xt[n, oy * {sh} + {ky * dh}].reshape(-1)" for ky in range(KH)]
    lines += ["        ox = 0", "        while ox < OW:"]

    def block(width: int, indent: int) -> list[str]:
        pad = " " * indent
        out = [f"{pad}xo = np.uint64(ox * {sw}) * C", f"{pad}yo = np.uint64(ox) * C", f"{pad}for i in range(C):"]
        out += [f"{pad}    a{j} = b[i]" for j in range(width)]
        for t, (ky, kx) in enumerate(taps):
            out.append(f"{pad}    w = wf[np.uint64({t}) * C + i]")
            out += [f"{pad}    a{j} += w * r{ky}[xo + np.uint64({j * sw + kx * dw}) * C + i]" for j in range(width)]
        out += [f"{pad}    yr[yo + np.uint64({j}) * C + i] = a{j}" for j in range(width)]
        return out

    lines += [f"            if ox + {B} <= OW:"] + block(B, 16) + [f"                ox += {B}"]
    if B > 1:
        lines += ["            else:  # the last columns, one at a time"] + block(1, 16) + ["                ox += 1"]
    lines += [
        "",
        "",
        "@njit(cache=True, nogil=True, parallel=True)",
        "def parallel(xt, wt, b, yt, n, k):",
        "    for t in prange(k):",
        "        lo, hi = threads.part(n, t, k)",
        "        serial(xt, wt, b, yt, lo, hi)",
        "",
    ]
    return "\n".join(lines)


@functools.lru_cache(maxsize=None)
def channels_last_kernels(KH: int, KW: int, s: Pair, d: Pair) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """(serial, parallel) channels-last depthwise kernels for this kernel size, stride and dilation
    (multiplier 1), generated on first use and cached like every kernel:

        serial(xt, wt, b, yt, lo, hi):
        yt[n, oy, ox, c] = b[c] + sum_{ky, kx} wt[ky, kx, c] * xt[n, oy*sh + ky*dh, ox*sw + kx*dw, c]

    for the output rows t = n*OH + oy in [lo, hi) (hi < 0: to the last), on a zero-padded xt
    (N, Hp, Wp, C), wt (KH, KW, C), b (C,), yt (N, OH, OW, C), all C-contiguous. Stride and
    dilation are constants of the code, so every tap's input is a fixed offset from one row; the
    accumulators of a few output columns stay in registers across all taps, and the loop over the
    channels (innermost, contiguous) vectorizes. parallel(..., n, k) runs serial on k parts of n rows."""
    name = f"depthwise_{KH}x{KW}_s{s[0]}x{s[1]}_d{d[0]}x{d[1]}"
    module = _jit.generated(name, _source(KH, KW, s, d, _columns(KH, KW, s, d)))
    return module.serial, module.parallel


# Costs behind `channels_last_pays` (nanoseconds, fitted on the layers of benchmarks/depthwise.py:
# 32 to 1152 channels, planes of 4x4 to 112x112, 3x3 and 5x5 kernels at strides 1 and 2, from
# either format, forward and input VJP): a vectorized row of multiply-adds of the plane kernels
# costs ROW_NS of loop overhead plus ELEMENT_NS per element; a row of the register-tiled 3x3
# kernel (all 9 taps at once, stride 1) TILED_ROW_NS plus TILED_ELEMENT_NS per element and tap,
# after a padded copy of the input; the channels-last kernels CHANNELS_PIXEL_NS per output pixel
# and tap plus CHANNELS_ELEMENT_NS per channel of it; a transposing copy into or out of
# channels-last order (`im2col._to_nhwc`, `np.ascontiguousarray`) TRANSPOSE_NS per element, a
# padded copy that keeps the order COPY_NS.
ROW_NS, ELEMENT_NS = 7.0, 0.1
TILED_ROW_NS, TILED_ELEMENT_NS = 40.0, 0.05
CHANNELS_PIXEL_NS, CHANNELS_ELEMENT_NS = 0.5, 0.05
TRANSPOSE_NS, COPY_NS = 0.2, 0.2


def channels_last_pays(C: int, m: int, in_hw: Sequence[int], out_hw: Sequence[int], taps: int, tiled: bool = False,
                       vjp: bool = False, last: bool = False) -> bool:
    """Whether the channels-last kernels beat the plane kernels (`tiled`: the register-tiled 3x3
    kernel of conv2d, which serves 3x3 at stride 1) for a forward pass from in_hw to out_hw, or with
    vjp=True its input VJP (the channels-last one a correlation over the input's size), the array it
    is given (x, or the cotangent) channels-last when `last`: one row per (channel, output row, tap),
    OW long (one per (channel, output row) when tiled), against one per (pixel, tap), C long, plus
    the copies each needs. The channels-last result is returned as it is. Multiplier 1 only."""
    if m != 1:
        return False
    (H, W), (OH, OW) = in_hw, out_hw
    if tiled:
        planes = C * OH * (TILED_ROW_NS + OW * taps * TILED_ELEMENT_NS) + COPY_NS * C * H * W
    else:
        planes = C * OH * taps * (ROW_NS + OW * ELEMENT_NS)
    given = C * (OH * OW if vjp else H * W)
    pixels = (H * W if vjp else OH * OW) * taps * (CHANNELS_PIXEL_NS + C * CHANNELS_ELEMENT_NS)
    if last:
        return pixels + COPY_NS * given < planes + TRANSPOSE_NS * given
    return pixels + TRANSPOSE_NS * given < planes


def register_tiled(KH: int, KW: int, s: Sequence[int]) -> bool:
    """Whether the plane alternative is conv2d's register-tiled 3x3 kernel (3x3 at stride 1)."""
    return (KH, KW) == (3, 3) and tuple(s) == (1, 1)


@njit(cache=True, nogil=True)
def _pad_rows(src: FloatArray, dst: FloatArray, pt: int, pl: int, lo: int, hi: int) -> None:
    """dst[n, i + pt, j + pl, :] = src[n, i, j, :], zero elsewhere, for the rows t = n*Hp + r of
    dst in [lo, hi): each row a run of zeros, one contiguous copy and another run of zeros."""
    H, W, C = src.shape[1], src.shape[2], src.shape[3]
    Hp, Wp = dst.shape[1], dst.shape[2]
    left = min(pl, Wp)  # columns of zeros before the copy, which holds w columns
    w = max(0, min(W, Wp - pl))
    for t in range(lo, hi):
        n, r = t // Hp, t % Hp
        row = dst[n, r].reshape(-1)
        i = r - pt
        if i < 0 or i >= H:
            for e in range(Wp * C):
                row[e] = 0
            continue
        for e in range(left * C):
            row[e] = 0
        im2col.copy(row[left * C:], src[n, i].reshape(-1), w * C)
        for e in range((left + w) * C, Wp * C):
            row[e] = 0


@njit(cache=True, nogil=True, parallel=True)
def _pad_rows_parallel(src: FloatArray, dst: FloatArray, pt: int, pl: int, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _pad_rows(src, dst, pt, pl, lo, hi)


def _padded_nhwc(a: FloatArray, shape: Shape, pt: int, pl: int) -> FloatArray:
    """The zero-padded channels-last copy of the 4-D a, of shape (N, Hp, Wp, C): a[n, c, i, j] at
    [n, i + pt, j + pl, c] (pt, pl >= 0), cropped to the shape, whichever a's memory format."""
    out = np.empty(shape, a.dtype)
    if layout.channels_last(a):
        threads.run(_pad_rows, _pad_rows_parallel, shape[0] * shape[1], out.size, layout.nhwc(a), out, pt, pl)
    else:
        threads.run(im2col._to_nhwc, im2col._to_nhwc_parallel, shape[0] * shape[1], out.size, a, out, 0, 0, 1, 1,
                    pt, pl)
    return out


def depthwise_forward(x: FloatArray, w: FloatArray, b: FloatArray, out_shape: Shape, s: Pair, p: Pair,
                      d: Pair) -> FloatArray:
    """conv2d with groups == C (w of shape (O, 1, kh, kw), O a multiple of C); x contiguous or
    channels-last. The result is channels-last when the channels-last kernels ran."""
    N, C, H, W = x.shape
    KH, KW = w.shape[2], w.shape[3]
    OH, OW = out_shape[2], out_shape[3]
    if channels_last_pays(C, out_shape[1] // C, (H, W), (OH, OW), KH * KW, register_tiled(KH, KW, s),
                          last=layout.channels_last(x)):
        Hp, Wp = (OH - 1) * s[0] + (KH - 1) * d[0] + 1, (OW - 1) * s[1] + (KW - 1) * d[1] + 1
        xt = _padded_nhwc(x, (N, Hp, Wp, C), p[0], p[1])
        wt = np.ascontiguousarray(w[:, 0].transpose(1, 2, 0))
        yt = np.empty((N, OH, OW, C), x.dtype)
        serial, parallel = channels_last_kernels(KH, KW, tuple(s), tuple(d))
        threads.run(serial, parallel, N * OH, yt.size, xt, wt, np.ascontiguousarray(b), yt)
        return yt.transpose(0, 3, 1, 2)
    x = np.ascontiguousarray(x)
    out = np.empty(out_shape, x.dtype)
    threads.run(_forward, _forward_parallel, N * C, out.size, x, w, b, out, s[0], s[1], p[0], p[1], d[0], d[1])
    return out


def depthwise_grad_input(g: FloatArray, w: FloatArray, x_shape: Shape, s: Pair, p: Pair, d: Pair) -> FloatArray:
    """Input VJP of `depthwise_forward`; g is (M, O, OH, OW), contiguous or channels-last, with seeds
    folded into M. The result is channels-last when the channels-last kernels ran.

    Channels-last, it is the stride-1 correlation of the cotangent, spread to every s-th position
    of a zero plane padded by d*(k-1) - p, with the taps flipped: the forward kernels with
    stride 1 (where padding exceeds a tap's reach, d*(k-1) - p < 0, the plane kernels serve)."""
    M, C, H, W = x_shape
    KH, KW = w.shape[2], w.shape[3]
    OH, OW = g.shape[2], g.shape[3]
    pt, pl = d[0] * (KH - 1) - p[0], d[1] * (KW - 1) - p[1]
    if min(pt, pl) >= 0 and channels_last_pays(C, g.shape[1] // C, (H, W), (OH, OW), KH * KW,
                                               register_tiled(KH, KW, s), vjp=True, last=layout.channels_last(g)):
        shape = (M, H + (KH - 1) * d[0], W + (KW - 1) * d[1], C)
        if s == (1, 1):
            gd = _padded_nhwc(g, shape, pt, pl)
        else:
            gd = np.zeros(shape, g.dtype)
            gd[:, pt:pt + (OH - 1) * s[0] + 1:s[0], pl:pl + (OW - 1) * s[1] + 1:s[1]] = g.transpose(0, 2, 3, 1)
        wt = np.ascontiguousarray(w[:, 0, ::-1, ::-1].transpose(1, 2, 0))
        dxt = np.empty((M, H, W, C), g.dtype)
        serial, parallel = channels_last_kernels(KH, KW, (1, 1), tuple(d))
        threads.run(serial, parallel, M * H, dxt.size, gd, wt, np.zeros(C, g.dtype), dxt)
        return dxt.transpose(0, 3, 1, 2)
    g = np.ascontiguousarray(g)
    dx = np.empty(x_shape, g.dtype)
    threads.run(_grad_input, _grad_input_parallel, M * C, max(g.size, dx.size), g, w, dx, s[0], s[1], p[0], p[1],
                d[0], d[1])
    return dx
