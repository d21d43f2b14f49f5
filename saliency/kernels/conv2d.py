"""conv2d (NCHW cross-correlation, PyTorch's `F.conv2d`) and its VJPs: direct Numba kernels, and
the public wrappers that pick a path per shape.

One loop nest, `_corr2d`, computes every correlation here: the forward pass, and the input VJP
as the correlation of the stride-dilated cotangent with the flipped, in/out-swapped weight
(padding `dilation*(k-1) - padding`, which may be negative: a crop). The weight VJP has its own
nest (a different contraction). The other paths live beside it: GEMMs on patch matrices and 1x1
convolutions as plain GEMMs (`im2col.py`), stride-1 convolutions as products on shifted views
(`shifted.py`), 3x3 stride-1 convolutions as Winograd tiles (`winograd.py`), depthwise
convolutions (`depthwise.py`). The wrappers at the bottom choose: `choose_algorithm` between
direct and GEMM, then, within GEMM, the path by what each costs (the products Winograd saves
against its transforms, a weight relayout against the patch rows it saves, patches that fit the
caches or not).

The kernels take the range [lo, hi) of their independent tasks as their last two arguments (all
tasks when omitted); large calls run in parts of the tasks on the kernels' threads
(`threads.run`, with the `_x_parallel` wrappers).
"""
from __future__ import annotations

import enum
import math
from typing import TYPE_CHECKING, Sequence

import numpy as np
from numba import prange

from ._jit import njit

from . import blas, depthwise, im2col, layout, shifted, threads, winograd

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from .._typing import FloatArray, Shape, Size

    Pair = tuple[int, int]


_FASTMATH = {"reassoc", "contract"}


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _corr2d(x: FloatArray, w: FloatArray, b: FloatArray, out: FloatArray, sh: int, sw: int, ph: int, pw: int, dh: int,
            dw: int, groups: int, ob: int, rb: int, lo: int, hi: int) -> None:
    """out[n, o, oy, ox] = b[o] + sum_{c, ky, kx} w[o, c, ky, kx]
                                   * x[n, group*Cg + c, oy*sh - ph + ky*dh, ox*sw - pw + kx*dw]

    for o in group `group` (Cg input and Og output channels per group). Out-of-range input
    positions read as zero (padding; negative padding crops). One loop over the independent tasks
    [lo, hi) (hi < 0: to the last) of (n, group, block of `ob` output channels, block of `rb`
    output rows): each task owns its block of `out`, so writes never overlap; its block holds
    `n_oc` = min(ob, what is left of the group) output channels, from o0. The width loop is
    innermost (contiguous for stride 1) and each input row is reused for `n_oc` output channels.
    """
    N, C, H, W = x.shape
    O, Cg, KH, KW = w.shape
    OH, OW = out.shape[2], out.shape[3]
    Og = O // groups
    nob = (Og + ob - 1) // ob
    nrb = (OH + rb - 1) // rb
    for t in range(lo, N * groups * nob * nrb if hi < 0 else hi):
        r = t % nrb
        q = t // nrb
        bi = q % nob
        q = q // nob
        group = q % groups
        n = q // groups
        o0 = group * Og + bi * ob
        n_oc = min(ob, group * Og + Og - o0)
        acc = np.empty((ob, OW), dtype=out.dtype)
        for oy in range(r * rb, min(OH, (r + 1) * rb)):
            for j in range(n_oc):
                for ox in range(OW):
                    acc[j, ox] = b[o0 + j]
            for c in range(Cg):
                for ky in range(KH):
                    iy = oy * sh - ph + ky * dh
                    if iy < 0 or iy >= H:
                        continue
                    xrow = x[n, group * Cg + c, iy]
                    for kx in range(KW):
                        off = kx * dw - pw
                        ox0 = max(0, -(off // sw))  # first ox with ox*sw + off >= 0
                        ox1 = min(OW, (W - 1 - off) // sw + 1)  # past the last ox with ox*sw + off < W
                        if ox0 >= ox1:
                            continue
                        # slices indexed from 0: no negative-index wraparound test, so LLVM vectorizes
                        xs = xrow[ox0 * sw + off:(ox1 - 1) * sw + off + 1:sw]
                        j = 0
                        while j + 4 <= n_oc:  # 4 output channels per pass: each input value is loaded once for all four
                            w0 = w[o0 + j, c, ky, kx]
                            w1 = w[o0 + j + 1, c, ky, kx]
                            w2 = w[o0 + j + 2, c, ky, kx]
                            w3 = w[o0 + j + 3, c, ky, kx]
                            for i in range(ox1 - ox0):
                                xv = xs[i]
                                acc[j, ox0 + i] += w0 * xv
                                acc[j + 1, ox0 + i] += w1 * xv
                                acc[j + 2, ox0 + i] += w2 * xv
                                acc[j + 3, ox0 + i] += w3 * xv
                            j += 4
                        for jj in range(j, n_oc):
                            wv = w[o0 + jj, c, ky, kx]
                            for i in range(ox1 - ox0):
                                acc[jj, ox0 + i] += wv * xs[i]
            for j in range(n_oc):
                for ox in range(OW):
                    out[n, o0 + j, oy, ox] = acc[j, ox]


@njit(cache=True, nogil=True, parallel=True)
def _corr2d_parallel(x: FloatArray, w: FloatArray, b: FloatArray, out: FloatArray, sh: int, sw: int, ph: int, pw: int,
                     dh: int, dw: int, groups: int, ob: int, rb: int, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _corr2d(x, w, b, out, sh, sw, ph, pw, dh, dw, groups, ob, rb, lo, hi)


@njit(cache=True, fastmath=_FASTMATH, inline="always", nogil=True)
def _taps3x3(out: FloatArray, n: int, oy: int, w: FloatArray, o0: int, n_oc: int, c: int, OW: int, r0a: FloatArray,
             r0b: FloatArray, r0c: FloatArray, r1a: FloatArray, r1b: FloatArray, r1c: FloatArray, r2a: FloatArray,
             r2b: FloatArray, r2c: FloatArray) -> None:
    """out[n, o0 + j, oy] += the 9 taps of w[o0 + j, c] times the 9 shifted rows, for j < n_oc."""
    for j in range(n_oc):
        wa = w[o0 + j, c]
        w0, w1, w2 = wa[0, 0], wa[0, 1], wa[0, 2]
        w3, w4, w5 = wa[1, 0], wa[1, 1], wa[1, 2]
        w6, w7, w8 = wa[2, 0], wa[2, 1], wa[2, 2]
        a0 = out[n, o0 + j, oy]  # a C-contiguous row (a row of a 2D view would compile to strided code)
        for i in range(OW):
            a0[i] += (w0 * r0a[i] + w1 * r0b[i] + w2 * r0c[i] + w3 * r1a[i] + w4 * r1b[i] + w5 * r1c[i]
                      + w6 * r2a[i] + w7 * r2b[i] + w8 * r2c[i])


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _corr2d_3x3(x: FloatArray, w: FloatArray, b: FloatArray, out: FloatArray, sh: int, sw: int, ph: int, pw: int,
                dh: int, dw: int, groups: int, ob: int, rb: int, lo: int, hi: int) -> None:
    """_corr2d for 3x3 kernels (the same correlation, tested against it): per output row and input
    channel, the three input rows it reads are copied once into a zero-padded buffer, then each
    output pixel takes all 9 taps from registers for 4 output channels at a time (36 FMAs per 9
    loads and 4 accumulator updates, against 4 FMAs per 9 memory operations tap by tap).
    Same tasks as _corr2d: (n, group, block of `ob` output channels, block of `rb` output rows),
    those in [lo, hi) (hi < 0: to the last), accumulating in place in the task's rows of `out`.
    """
    N, C, H, W = x.shape
    O, Cg = w.shape[0], w.shape[1]
    OH, OW = out.shape[2], out.shape[3]
    Og = O // groups
    nob = (Og + ob - 1) // ob
    nrb = (OH + rb - 1) // rb
    Wp = (OW - 1) * sw + 2 * dw + 1  # padded row: column j holds input column j - pw
    j0 = min(Wp, max(0, pw))
    j1 = max(j0, min(Wp, W + pw))
    for t in range(lo, N * groups * nob * nrb if hi < 0 else hi):
        r = t % nrb
        q = t // nrb
        bi = q % nob
        q = q // nob
        group = q % groups
        n = q // groups
        o0 = group * Og + bi * ob
        n_oc = min(ob, group * Og + Og - o0)
        rows = np.zeros((3, Wp), dtype=out.dtype)
        for oy in range(r * rb, min(OH, (r + 1) * rb)):
            for j in range(n_oc):  # accumulate in place, in this task's rows of out
                orow = out[n, o0 + j, oy]
                for ox in range(OW):
                    orow[ox] = b[o0 + j]
            for c in range(Cg):
                ci = group * Cg + c
                for ky in range(3):
                    iy = oy * sh - ph + ky * dh
                    dst = rows[ky]
                    if iy < 0 or iy >= H:
                        dst[:] = 0
                    else:
                        dst[j1:] = 0
                        dst[:j0] = 0
                        src = x[n, ci, iy]
                        for k in range(j1 - j0):
                            dst[j0 + k] = src[j0 - pw + k]
                # the 9 taps as slices indexed from 0 (no negative-index test, so LLVM vectorizes),
                # contiguous ones for stride 1 (a runtime step of 1 would compile to gathers)
                if sw == 1:
                    r0a, r0b, r0c = rows[0, 0:OW], rows[0, dw:dw + OW], rows[0, 2 * dw:2 * dw + OW]
                    r1a, r1b, r1c = rows[1, 0:OW], rows[1, dw:dw + OW], rows[1, 2 * dw:2 * dw + OW]
                    r2a, r2b, r2c = rows[2, 0:OW], rows[2, dw:dw + OW], rows[2, 2 * dw:2 * dw + OW]
                    _taps3x3(out, n, oy, w, o0, n_oc, c, OW, r0a, r0b, r0c, r1a, r1b, r1c, r2a, r2b, r2c)
                else:
                    e = (OW - 1) * sw + 1
                    s0a, s0b, s0c = rows[0, 0:e:sw], rows[0, dw:dw + e:sw], rows[0, 2 * dw:2 * dw + e:sw]
                    s1a, s1b, s1c = rows[1, 0:e:sw], rows[1, dw:dw + e:sw], rows[1, 2 * dw:2 * dw + e:sw]
                    s2a, s2b, s2c = rows[2, 0:e:sw], rows[2, dw:dw + e:sw], rows[2, 2 * dw:2 * dw + e:sw]
                    _taps3x3(out, n, oy, w, o0, n_oc, c, OW, s0a, s0b, s0c, s1a, s1b, s1c, s2a, s2b, s2c)


@njit(cache=True, nogil=True, parallel=True)
def _corr2d_3x3_parallel(x: FloatArray, w: FloatArray, b: FloatArray, out: FloatArray, sh: int, sw: int, ph: int,
                         pw: int, dh: int, dw: int, groups: int, ob: int, rb: int, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _corr2d_3x3(x, w, b, out, sh, sw, ph, pw, dh, dw, groups, ob, rb, lo, hi)


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _corr2d_3x3_padded(xp: FloatArray, w: FloatArray, b: FloatArray, out: FloatArray, dh: int, dw: int, groups: int,
                       ob: int, lo: int, hi: int) -> None:
    """_corr2d_3x3 at stride 1 on an input padded beforehand (xp: zeros around x, OH + 2*dh rows and
    OW + 2*dw columns): the taps read the rows of xp in place instead of copying three rows per
    output row, channel and block. Tasks (n, group, block of `ob` output channels, output row),
    those in [lo, hi) (hi < 0: to the last), each owning its row of the block."""
    N = xp.shape[0]
    O, Cg = w.shape[0], w.shape[1]
    OH, OW = out.shape[2], out.shape[3]
    Og = O // groups
    nob = (Og + ob - 1) // ob
    for t in range(lo, N * groups * nob * OH if hi < 0 else hi):
        oy = t % OH
        q = t // OH
        bi = q % nob
        q = q // nob
        group = q % groups
        n = q // groups
        o0 = group * Og + bi * ob
        n_oc = min(ob, group * Og + Og - o0)
        for j in range(n_oc):
            orow = out[n, o0 + j, oy]
            for ox in range(OW):
                orow[ox] = b[o0 + j]
        for c in range(Cg):
            ci = group * Cg + c
            r0, r1, r2 = xp[n, ci, oy], xp[n, ci, oy + dh], xp[n, ci, oy + 2 * dh]
            _taps3x3(out, n, oy, w, o0, n_oc, c, OW, r0[0:OW], r0[dw:dw + OW], r0[2 * dw:2 * dw + OW],
                     r1[0:OW], r1[dw:dw + OW], r1[2 * dw:2 * dw + OW],
                     r2[0:OW], r2[dw:dw + OW], r2[2 * dw:2 * dw + OW])


@njit(cache=True, nogil=True, parallel=True)
def _corr2d_3x3_padded_parallel(xp: FloatArray, w: FloatArray, b: FloatArray, out: FloatArray, dh: int, dw: int,
                                groups: int, ob: int, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _corr2d_3x3_padded(xp, w, b, out, dh, dw, groups, ob, lo, hi)


@njit(cache=True, inline="always")
def _nine(wc: FloatArray) -> tuple[float, ...]:
    """The 9 taps of a 3x3 filter as a tuple (held in registers by the loops that use them)."""
    return (wc[0, 0], wc[0, 1], wc[0, 2], wc[1, 0], wc[1, 1], wc[1, 2], wc[2, 0], wc[2, 1], wc[2, 2])


@njit(cache=True, inline="always")
def _shifted_rows(xc: FloatArray, oy: int, dh: int, dw: int, OW: int) -> tuple[FloatArray, ...]:
    """The 9 input row segments that the 3x3 taps of output row oy read, from a padded channel xc."""
    r0, r1, r2 = xc[oy], xc[oy + dh], xc[oy + 2 * dh]
    return (r0[0:OW], r0[dw:dw + OW], r0[2 * dw:2 * dw + OW], r1[0:OW], r1[dw:dw + OW], r1[2 * dw:2 * dw + OW],
            r2[0:OW], r2[dw:dw + OW], r2[2 * dw:2 * dw + OW])


@njit(cache=True, fastmath=_FASTMATH, inline="always")
def _dot9(t: tuple[float, ...], r: tuple[FloatArray, ...], i: int) -> float:
    return (t[0] * r[0][i] + t[1] * r[1][i] + t[2] * r[2][i] + t[3] * r[3][i] + t[4] * r[4][i]
            + t[5] * r[5][i] + t[6] * r[6][i] + t[7] * r[7][i] + t[8] * r[8][i])


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _corr2d_3x3_rgb(xp: FloatArray, w: FloatArray, b: FloatArray, out: FloatArray, dh: int, dw: int, lo: int,
                    hi: int) -> None:
    """_corr2d_3x3_padded for three input channels and one group (a first layer on RGB): each
    output pixel of two output channels at a time takes all 27 taps from registers and is stored
    once, instead of one pass per input channel over the output row. Tasks (n, pair of output
    channels), those in [lo, hi) (hi < 0: to the last); an odd last output channel pairs with
    itself (its values are written twice, by its one task)."""
    N = xp.shape[0]
    O = w.shape[0]
    OH, OW = out.shape[2], out.shape[3]
    P = (O + 1) // 2
    for t in range(lo, N * P if hi < 0 else hi):
        n = t // P
        o = 2 * (t % P)
        o1 = min(o + 1, O - 1)
        a0, a1, a2 = _nine(w[o, 0]), _nine(w[o, 1]), _nine(w[o, 2])
        c0, c1, c2 = _nine(w[o1, 0]), _nine(w[o1, 1]), _nine(w[o1, 2])
        ba, bc = b[o], b[o1]
        for oy in range(OH):
            ya, yc = out[n, o, oy], out[n, o1, oy]
            red = _shifted_rows(xp[n, 0], oy, dh, dw, OW)
            green = _shifted_rows(xp[n, 1], oy, dh, dw, OW)
            blue = _shifted_rows(xp[n, 2], oy, dh, dw, OW)
            for i in range(OW):  # both sums before either store: the loads are shared, the loop vectorizes
                va = ba + _dot9(a0, red, i) + _dot9(a1, green, i) + _dot9(a2, blue, i)
                vc = bc + _dot9(c0, red, i) + _dot9(c1, green, i) + _dot9(c2, blue, i)
                ya[i] = va
                yc[i] = vc


@njit(cache=True, nogil=True, parallel=True)
def _corr2d_3x3_rgb_parallel(xp: FloatArray, w: FloatArray, b: FloatArray, out: FloatArray, dh: int, dw: int, n: int,
                             k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _corr2d_3x3_rgb(xp, w, b, out, dh, dw, lo, hi)


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _corr2d_grad_weight(g: FloatArray, x: FloatArray, dwt: FloatArray, sh: int, sw: int, ph: int, pw: int, dh: int,
                        dw: int, groups: int, lo: int, hi: int) -> None:
    """dwt[k, o, c, ky, kx] = sum_{n, oy, ox} g[k, n, o, oy, ox]
                                 * x[n, group*Cg + c, oy*sh - ph + ky*dh, ox*sw - pw + kx*dw], group = o // Og.

    k indexes seeds. One loop over the independent tasks (k, o, c) in [lo, hi) (hi < 0: to the
    last): each owns one (KH, KW) filter of `dwt`.
    """
    K, N, O, OH, OW = g.shape
    H, W = x.shape[2], x.shape[3]
    Cg, KH, KW = dwt.shape[2], dwt.shape[3], dwt.shape[4]
    Og = O // groups
    for t in range(lo, K * O * Cg if hi < 0 else hi):
        c = t % Cg
        o = (t // Cg) % O
        k = t // (Cg * O)
        ci = (o // Og) * Cg + c
        acc = np.zeros((KH, KW), dtype=np.float64)
        for n in range(N):
            for oy in range(OH):
                grow = g[k, n, o, oy]
                for ky in range(KH):
                    iy = oy * sh - ph + ky * dh
                    if iy < 0 or iy >= H:
                        continue
                    xrow = x[n, ci, iy]
                    for kx in range(KW):
                        off = kx * dw - pw
                        ox0 = max(0, -(off // sw))
                        ox1 = min(OW, (W - 1 - off) // sw + 1)
                        if ox0 >= ox1:
                            continue
                        xs = xrow[ox0 * sw + off:(ox1 - 1) * sw + off + 1:sw]
                        gs = grow[ox0:ox1]
                        s = dwt.dtype.type(0)  # row sums in the input dtype (vectorizes), totals in float64
                        for i in range(ox1 - ox0):
                            s += gs[i] * xs[i]
                        acc[ky, kx] += s
        for ky in range(KH):
            for kx in range(KW):
                dwt[k, o, c, ky, kx] = acc[ky, kx]


@njit(cache=True, nogil=True, parallel=True)
def _corr2d_grad_weight_parallel(g: FloatArray, x: FloatArray, dwt: FloatArray, sh: int, sw: int, ph: int, pw: int,
                                 dh: int, dw: int, groups: int, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _corr2d_grad_weight(g, x, dwt, sh, sw, ph, pw, dh, dw, groups, lo, hi)


# ---------------------------------------------------------------------------------------------
# Public wrappers: arrays and ints in, arrays out.


class ConvAlgorithm(enum.Enum):
    """How a conv2d or its input VJP is computed."""
    DIRECT = "direct"  # _corr2d: width loop innermost, output channels blocked
    GEMM = "gemm"      # im2col / col2im around NumPy matmul (BLAS)


def _pair(v: Size, name: str) -> Pair:
    if isinstance(v, (int, np.integer)):
        return int(v), int(v)
    if isinstance(v, (tuple, list)) and len(v) == 2 and all(isinstance(e, (int, np.integer)) for e in v):
        return int(v[0]), int(v[1])
    raise TypeError(f"{name} must be an int or a pair of ints, got {v!r}")


def _float_array(a: ArrayLike, name: str, keep_format: bool = False) -> FloatArray:
    """a as a float32 or float64 array, contiguous (or as it is, when keep_format and channels-last)."""
    a = np.asarray(a)
    if a.dtype not in (np.float32, np.float64):
        raise TypeError(f"{name} must be float32 or float64, got dtype {a.dtype}; cast it with .astype(np.float32)")
    return a if keep_format and layout.channels_last(a) else np.ascontiguousarray(a)


def conv_output_size(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """PyTorch's output length along one axis: floor((size + 2p - d(k-1) - 1) / s) + 1."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def _check(x_shape: Shape, w_shape: Shape, stride: Size, padding: Size, dilation: Size,
           groups: int) -> tuple[Pair, Pair, Pair, Shape]:
    s, p, d = _pair(stride, "stride"), _pair(padding, "padding"), _pair(dilation, "dilation")
    if len(x_shape) != 4 or len(w_shape) != 4:
        raise ValueError(f"conv2d expects x of shape (N, C, H, W) and w of shape (O, C/groups, kh, kw), "
                         f"got {tuple(x_shape)!r} and {tuple(w_shape)!r}")
    if min(s) < 1 or min(d) < 1 or min(p) < 0:
        raise ValueError(f"conv2d needs stride >= 1, dilation >= 1, padding >= 0, got {s!r}, {d!r}, {p!r}")
    N, C, H, W = x_shape
    O, Cg, KH, KW = w_shape
    if groups < 1 or C % groups or O % groups or C // groups != Cg:
        raise ValueError(f"groups={groups!r} does not fit x with {C} channels and w of shape {tuple(w_shape)!r}; "
                         f"C and O must be divisible by groups and w.shape[1] must be C/groups")
    OH, OW = (conv_output_size(H, KH, s[0], p[0], d[0]), conv_output_size(W, KW, s[1], p[1], d[1]))
    if OH < 1 or OW < 1:
        raise ValueError(f"conv2d output would be empty: input {H}x{W}, kernel {KH}x{KW}, padding {p!r}, "
                         f"dilation {d!r}; pad the input or use a smaller kernel")
    return s, p, d, (N, O, OH, OW)


def _block(o_per_group: int, n_out_rows: int, n_tasks_other: int) -> tuple[int, int]:
    """Output-channel block (register/L1 reuse of an input row) and row block (rows halved until there
    are at least 8 tasks, so that the parts of the tasks on the kernels' threads come out even)."""
    ob = min(8, o_per_group)
    rb = n_out_rows
    while rb > 1 and n_tasks_other * ((n_out_rows + rb - 1) // rb) < 8:
        rb = (rb + 1) // 2
    return ob, rb


def _padded(x: FloatArray, p: Pair, size: Sequence[int]) -> FloatArray:
    """x (N, C, H, W) placed at offset p = (rows, cols) of zeros of spatial `size`: x[..., i, j] at
    [..., i + p[0], j + p[1]]; parts that fall outside (negative p, or a smaller size) are cut."""
    xp = np.zeros(x.shape[:2] + tuple(size), x.dtype)
    H, W = x.shape[2], x.shape[3]
    r0, c0 = max(0, -p[0]), max(0, -p[1])
    r1, c1 = min(H, size[0] - p[0]), min(W, size[1] - p[1])
    if r0 < r1 and c0 < c1:
        xp[:, :, r0 + p[0]:r1 + p[0], c0 + p[1]:c1 + p[1]] = x[:, :, r0:r1, c0:c1]
    return xp


def _direct(x: FloatArray, w: FloatArray, b: FloatArray, out_shape: Shape, s: Pair, p: Pair, d: Pair,
            groups: int) -> FloatArray:
    """The direct kernels, in parts of their tasks on the kernels' threads when large."""
    out = np.empty(out_shape, dtype=x.dtype)
    N, O, OH, OW = out_shape
    Og = O // groups
    ob, rb = _block(Og, OH, N * groups * ((Og + 7) // 8))
    nob = (Og + ob - 1) // ob
    work = max(x.size, out.size)
    if w.shape[2] == 3 and w.shape[3] == 3 and s == (1, 1):
        xp = _padded(x, p, (OH + 2 * d[0], OW + 2 * d[1]))
        if groups == 1 and w.shape[1] == 3:
            threads.run(_corr2d_3x3_rgb, _corr2d_3x3_rgb_parallel, N * ((O + 1) // 2), work, xp, w, b, out, d[0], d[1])
        else:
            threads.run(_corr2d_3x3_padded, _corr2d_3x3_padded_parallel, N * groups * nob * OH, work,
                        xp, w, b, out, d[0], d[1], groups, ob)
        return out
    tasks = N * groups * nob * ((OH + rb - 1) // rb)
    if w.shape[2] == 3 and w.shape[3] == 3:
        threads.run(_corr2d_3x3, _corr2d_3x3_parallel, tasks, work,
                    x, w, b, out, s[0], s[1], p[0], p[1], d[0], d[1], groups, ob, rb)
    else:
        threads.run(_corr2d, _corr2d_parallel, tasks, work, x, w, b, out, s[0], s[1], p[0], p[1], d[0], d[1], groups,
                    ob, rb)
    return out


# The row-major paths (`im2col.conv2d_rows` and `conv2d_grad_input_rows`) copy the weight into
# another layout on every call: a strided transpose of O*C*kh*kw elements, about 15 times the cost
# of a plain copy (2 ns an element here). The K-major paths (`conv2d_gemm`, `conv2d_grad_input_gemm`)
# read the weight as it is stored. What the row-major layout saves grows with the patch rows
# (N*OH*OW of them, each C*kh*kw long; about 1 ns an element of the patches); what it costs grows
# with the weight's rows (O of them, each as long). It is used where the patch rows outnumber the
# weight rows RELAYOUT_RATIO times (about the ratio of those two costs): large maps with few channels, not
# the 512-channel layers of a small map, whose weight relayout would cost more than their GEMM.
RELAYOUT_RATIO = 2


def _relayout_pays(weight_rows: int, patch_rows: int) -> bool:
    return weight_rows * RELAYOUT_RATIO <= patch_rows


# The shortest contraction (input channels of the forward, output channels of the input VJP) for
# which the kh*kw products of `shifted.py` keep BLAS near its peak; shorter ones run on patches.
SHIFTED_MIN_CHANNELS = 16


def _shifted_pays(stride: Pair, groups: int, channels: int, patch_bytes: int) -> bool:
    """Whether a stride-1 convolution (or its input VJP) runs as accumulated products on shifted
    views (`shifted.py`) instead of on a patch matrix: where one image's patches would outgrow
    the caches (im2col.CHUNK_BYTES), so that writing and reading them back would stream from
    memory, and each product contracts over at least SHIFTED_MIN_CHANNELS channels; otherwise the
    patches stay in cache and one long GEMM beats kh*kw short ones."""
    return (stride == (1, 1) and groups == 1 and blas.IN_PLACE_GEMM and channels >= SHIFTED_MIN_CHANNELS
            and patch_bytes > im2col.CHUNK_BYTES)


# Winograd's F(2x2, 3x3) (`winograd.py`) against the direct products, as costs per call in seconds
# for float32 on both cores: the products at GEMM_FLOPS, or at MEMORY_BYTES of weight read where
# there are too few positions to reuse it from the caches; each transformed element (input and
# output tiles) TILE_S, each element of the weight transform WEIGHT_S. Measured over 3x3 layers
# of 32 to 512 channels on 1 to 4096 tiles, weights read from memory as in a model
# (benchmarks/winograd.py prints both paths and the choice).
GEMM_FLOPS = 150e9
MEMORY_BYTES = 20e9
TILE_S = 0.4e-9
WEIGHT_S = 0.45e-9


def _winograd_pays(w_shape: Shape, s: Pair, d: Pair, groups: int, images: int, out_hw: Shape, itemsize: int) -> bool:
    """Whether a 3x3 convolution at stride 1 (or its input VJP: `images` counts the seeds) runs as
    Winograd's F(2x2, 3x3): 16 products per 2x2 tile instead of 36 multiply-adds, plus transforms
    whose cost grows with C + O per tile where the saving grows with C*O."""
    if tuple(w_shape[2:]) != (3, 3) or s != (1, 1) or d != (1, 1) or groups != 1:
        return False
    O, C = w_shape[0], w_shape[1]
    tiles = images * ((out_hw[0] + 1) // 2) * ((out_hw[1] + 1) // 2)
    scale = itemsize / 4  # float64: half the flops per second, twice the bytes per element
    rate, weight = GEMM_FLOPS / scale, O * C * itemsize / MEMORY_BYTES
    direct = max(18.0 * O * C * images * out_hw[0] * out_hw[1] / rate, 9 * weight)
    tiled = (max(32.0 * O * C * tiles / rate, 16 * weight) + 16.0 * (C + O) * tiles * TILE_S * scale
             + 16.0 * O * C * WEIGHT_S * scale)
    return tiled < direct


def _pointwise(w_shape: Shape, p: Pair) -> bool:
    """A 1x1 convolution without padding: a GEMM on the input as it is (any stride, groups)."""
    return tuple(w_shape[2:]) == (1, 1) and p == (0, 0)


def _depthwise(w_shape: Shape, groups: int, s: Pair, in_hw: Shape, out_hw: Shape, vjp: bool = False,
               last: bool = False) -> bool:
    """Whether the depthwise kernels serve this direct convolution: one input channel per group,
    except a 3x3 kernel at stride 1 on planes, which the register-tiled 3x3 kernel computes faster
    (forward, and the input VJP as a stride-1 correlation); small planes of many channels run
    channels-last whatever the kernel (`last`: the array given is channels-last)."""
    if w_shape[1] != 1 or groups == 1:
        return False
    tiled = depthwise.register_tiled(w_shape[2], w_shape[3], s)
    return not tiled or depthwise.channels_last_pays(groups, w_shape[0] // groups, in_hw, out_hw, 9, tiled, vjp,
                                                     last)


def choose_algorithm(x_shape: Shape, w_shape: Shape, out_shape: Shape, groups: int, vjp: bool = False) -> ConvAlgorithm:
    """The algorithm for this shape (the forward, or with vjp=True the input and weight VJPs): the
    faster of the two on the zoo's layers (benchmarks/kernels_conv.py compares them).

    im2col + BLAS GEMM for every layer with at least 4 output channels per group. The direct
    kernel where the GEMM degenerates to a matrix-vector product: few output channels per group
    (the depth head, 16->1, whose input VJP then has a GEMM contraction of length 1) and
    depthwise/grouped convs with one channel per group (one tiny GEMM per group). The forward of
    a 3x3 conv with at most 4 input channels per group (a first layer on RGB) also runs direct:
    a GEMM contraction of 27 is too short to pay for building the patches, while the 3x3 kernels
    (`_corr2d_3x3_rgb` for three channels) keep every tap in registers.
    """
    Og, Cg = w_shape[0] // groups, w_shape[1]
    if Og < 4 or (groups > 1 and Cg < 4):
        return ConvAlgorithm.DIRECT
    if not vjp and Cg <= 4 and tuple(w_shape[2:]) == (3, 3):
        return ConvAlgorithm.DIRECT
    if vjp and Cg <= 4 and tuple(w_shape[2:]) == (3, 3) and x_shape[0] * x_shape[2] * x_shape[3] <= 2 * 64 * 64:
        # the input VJP of such a first layer on up to two 64x64 images: the padded 3x3 kernel, which
        # needs no patches; on more images, or larger ones, GEMM + col2im is the faster
        return ConvAlgorithm.DIRECT
    return ConvAlgorithm.GEMM


def conv2d_forward(x: FloatArray, w: FloatArray, b: FloatArray | None = None, stride: Size = 1, padding: Size = 0,
                   dilation: Size = 1, groups: int = 1, algorithm: ConvAlgorithm | None = None) -> FloatArray:
    """y = conv2d(x, w, b): x (N, C, H, W), w (O, C/groups, kh, kw), b (O,) or None -> (N, O, OH, OW).

    `algorithm` (a ConvAlgorithm) forces a path; None picks by shape (`choose_algorithm`).
    """
    x, w = _float_array(x, "x", keep_format=True), _float_array(w, "w")
    if x.dtype != w.dtype:
        raise TypeError(f"x and w must have one dtype, got {x.dtype} and {w.dtype}")
    s, p, d, out_shape = _check(x.shape, w.shape, stride, padding, dilation, groups)
    bias = np.zeros(w.shape[0], x.dtype) if b is None else np.ascontiguousarray(b, dtype=x.dtype).reshape(-1)
    if b is not None and bias.shape[0] != w.shape[0]:  # (zeros of the right length when b is None)
        raise ValueError(f"b must have {w.shape[0]} entries (one per output channel), got shape {np.shape(b)!r}")
    if algorithm is None and _pointwise(w.shape, p):
        return im2col.conv2d_pointwise(x, w, bias, out_shape, s, groups)  # in x's memory format
    algorithm = algorithm or choose_algorithm(x.shape, w.shape, out_shape, groups)
    if algorithm is ConvAlgorithm.DIRECT and _depthwise(w.shape, groups, s, x.shape[2:], out_shape[2:],
                                                        last=layout.channels_last(x)):
        return depthwise.depthwise_forward(x, w, bias, out_shape, s, p, d)  # channels-last where that pays
    x = np.ascontiguousarray(x)  # every other path reads NCHW
    if algorithm is ConvAlgorithm.GEMM:
        if _winograd_pays(w.shape, s, d, groups, x.shape[0], out_shape[2:], x.itemsize):
            return winograd.conv2d_winograd(x, w, bias, out_shape, p)
        positions = out_shape[0] * out_shape[2] * out_shape[3]
        patch_bytes = w[0].size * out_shape[2] * out_shape[3] * x.itemsize
        if _relayout_pays(w.shape[0], positions) and _shifted_pays(s, groups, x.shape[1], patch_bytes):
            return shifted.conv2d_shifted(x, w, bias, out_shape, p, d)
        if groups == 1 and x.shape[1] >= 8 and _relayout_pays(w.shape[0], positions):
            # row-major patches (cols @ W: the long position axis is GEMM's M)
            return im2col.conv2d_rows(x, w, bias, out_shape, s, p, d)
        return im2col.conv2d_gemm(x, w, bias, out_shape, s, p, d, groups)
    return _direct(x, w, bias, out_shape, s, p, d, groups)


def _fold_seeds(g: ArrayLike, n_trailing: int, name: str, keep_format: bool = False) -> tuple[FloatArray, Shape]:
    """(*seeds, N, O, OH, OW) -> ((K*N, O, OH, OW) contiguous, or as it is when keep_format and
    channels-last, seeds)."""
    g = np.asarray(g)
    if g.ndim < n_trailing:
        raise ValueError(f"{name} must have at least {n_trailing} dimensions, got shape {g.shape!r}")
    seeds = g.shape[:g.ndim - n_trailing]
    return _float_array(g.reshape((-1,) + g.shape[g.ndim - 3:]), name, keep_format), seeds


def _flipped_transposed(w: FloatArray, groups: int) -> FloatArray:
    """(O, Cg, kh, kw) -> (C, Og, kh, kw): per group swap in/out channels and rotate by 180 degrees."""
    O, Cg, KH, KW = w.shape
    wt = w.reshape(groups, O // groups, Cg, KH, KW).transpose(0, 2, 1, 3, 4)[..., ::-1, ::-1]
    return np.ascontiguousarray(wt).reshape(groups * Cg, O // groups, KH, KW)


def conv2d_grad_input_direct(g: FloatArray, w: FloatArray, x_shape: Shape, s: Pair, p: Pair, d: Pair,
                             groups: int) -> FloatArray:
    """Input VJP as a correlation (the formulation every other path is tested against).

    dx = corr(dilate(g, s), flip(w)^T) with padding d*(k-1) - p and the output cropped (or
    zero-extended) to x's size; g is (M, O, OH, OW) with seeds already folded into M.
    """
    M, O, OH, OW = g.shape
    KH, KW = w.shape[2], w.shape[3]
    if s == (1, 1):
        gd = g
    else:
        gd = np.zeros((M, O, (OH - 1) * s[0] + 1, (OW - 1) * s[1] + 1), g.dtype)
        gd[:, :, ::s[0], ::s[1]] = g
    pt = (d[0] * (KH - 1) - p[0], d[1] * (KW - 1) - p[1])
    wt = _flipped_transposed(w, groups)
    zero = np.zeros(wt.shape[0], g.dtype)
    return _direct(gd, wt, zero, (M, x_shape[1], x_shape[2], x_shape[3]), (1, 1), pt, d, groups)


def conv2d_grad_input(g: FloatArray, w: FloatArray, x_shape: Sequence[int], stride: Size = 1, padding: Size = 0,
                      dilation: Size = 1, groups: int = 1, algorithm: ConvAlgorithm | None = None) -> FloatArray:
    """VJP of conv2d to x: g (*seeds, N, O, OH, OW) -> (*seeds, N, C, H, W), one kernel call for all seeds."""
    w = _float_array(w, "w")
    x_shape = tuple(int(e) for e in x_shape)
    s, p, d, out_shape = _check(x_shape, w.shape, stride, padding, dilation, groups)
    g2, seeds = _fold_seeds(g, 4, "g", keep_format=True)
    if g2.shape[1:] != out_shape[1:] or g2.shape[0] != out_shape[0] * math.prod(seeds):
        raise ValueError(f"g must have shape (*seeds, {', '.join(map(str, out_shape))}), got {np.shape(g)!r}")
    w = w.astype(g2.dtype, copy=False)
    x2_shape = (g2.shape[0],) + x_shape[1:]
    if algorithm is None and _pointwise(w.shape, p):  # in g's memory format
        return im2col.conv2d_grad_input_pointwise(g2, w, x2_shape, s, groups).reshape(seeds + x_shape)
    algorithm = algorithm or choose_algorithm(x2_shape, w.shape, out_shape, groups, vjp=True)  # seeds count as images
    if algorithm is ConvAlgorithm.DIRECT and _depthwise(w.shape, groups, s, x_shape[2:], out_shape[2:], vjp=True,
                                                        last=layout.channels_last(g2)):
        return depthwise.depthwise_grad_input(g2, w, x2_shape, s, p, d).reshape(seeds + x_shape)
    g2 = np.ascontiguousarray(g2)  # every other path reads NCHW
    pt = (d[0] * (w.shape[2] - 1) - p[0], d[1] * (w.shape[3] - 1) - p[1])
    rows_pay = _relayout_pays(x_shape[1], g2.shape[0] * x_shape[2] * x_shape[3])
    patch_bytes = w.shape[0] * w.shape[2] * w.shape[3] * x_shape[2] * x_shape[3] * g2.itemsize
    if algorithm is ConvAlgorithm.GEMM and _winograd_pays(w.shape, s, d, groups, g2.shape[0], out_shape[2:],
                                                          g2.itemsize):
        dx = winograd.conv2d_grad_input_winograd(g2, w, x2_shape, p)
    elif algorithm is ConvAlgorithm.GEMM and rows_pay and _shifted_pays(s, groups, w.shape[0], patch_bytes):
        dx = shifted.conv2d_grad_input_shifted(g2, w, x2_shape, p, d)
    elif (algorithm is ConvAlgorithm.GEMM and groups == 1 and s == (1, 1) and min(pt) >= 0 and x_shape[1] >= 16
            and x_shape[2] * x_shape[3] <= 64 * 64 and rows_pay):
        # at stride 1 the VJP is a forward convolution of g with the flipped, transposed weight: the
        # chunked row-major forward is the fastest path on maps up to 64x64 with >= 16 channels
        dx = im2col.conv2d_rows(g2, _flipped_transposed(w, 1), np.zeros(x_shape[1], g2.dtype), x2_shape, (1, 1),
                                pt, d)
    elif algorithm is ConvAlgorithm.GEMM and groups == 1 and g2.shape[0] > 1 and x_shape[1] >= 32 and rows_pay:
        # the correlation on row-major patches wins only for large batches with many input channels;
        # otherwise GEMM + col2im (one GEMM, one scatter, no per-phase launches) is faster
        dx = im2col.conv2d_grad_input_rows(g2, w, x2_shape, s, p, d)
    elif algorithm is ConvAlgorithm.GEMM:
        dx = im2col.conv2d_grad_input_gemm(g2, w, x2_shape, s, p, d, groups)
    else:
        dx = conv2d_grad_input_direct(g2, w, x2_shape, s, p, d, groups)
    return dx.reshape(seeds + x_shape)


def conv2d_grad_weight(g: FloatArray, x: FloatArray, w_shape: Sequence[int], stride: Size = 1, padding: Size = 0,
                       dilation: Size = 1, groups: int = 1, algorithm: ConvAlgorithm | None = None) -> FloatArray:
    """VJP of conv2d to w: g (*seeds, N, O, OH, OW), x (N, C, H, W) -> (*seeds, O, C/groups, kh, kw)."""
    x = _float_array(x, "x")
    w_shape = tuple(int(e) for e in w_shape)
    s, p, d, out_shape = _check(x.shape, w_shape, stride, padding, dilation, groups)
    g2, seeds = _fold_seeds(g, 4, "g")
    if g2.shape[1:] != out_shape[1:] or g2.shape[0] != out_shape[0] * math.prod(seeds):
        raise ValueError(f"g must have shape (*seeds, {', '.join(map(str, out_shape))}), got {np.shape(g)!r}")
    x = x.astype(g2.dtype, copy=False)
    g5 = g2.reshape((-1,) + out_shape)
    algorithm = algorithm or choose_algorithm(x.shape, w_shape, out_shape, groups, vjp=True)
    if algorithm is ConvAlgorithm.GEMM and groups == 1:
        return im2col.conv2d_grad_weight_rows(g5, x, w_shape, s, p, d).reshape(seeds + w_shape)
    if algorithm is ConvAlgorithm.GEMM:
        return im2col.conv2d_grad_weight_gemm(g5, x, w_shape, s, p, d, groups).reshape(seeds + w_shape)
    dwt = np.empty((g5.shape[0],) + w_shape, g2.dtype)
    threads.run(_corr2d_grad_weight, _corr2d_grad_weight_parallel, dwt.shape[0] * w_shape[0] * w_shape[1],
                max(g5.size, x.size), g5, x, dwt, s[0], s[1], p[0], p[1], d[0], d[1], groups)
    return dwt.reshape(seeds + w_shape)


def conv2d_grad_bias(g: FloatArray) -> FloatArray:
    """VJP of conv2d to b: g (*seeds, N, O, OH, OW) -> (*seeds, O)."""
    g = np.asarray(g)
    if g.ndim < 4:
        raise ValueError(f"g must have shape (*seeds, N, O, OH, OW), got {g.shape!r}")
    return g.sum(axis=(-4, -2, -1))
