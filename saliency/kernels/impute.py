"""Linear imputation of removed pixels, the noise-free part of ROAD's "noisy linear imputation"
(Rong et al. 2022, arXiv:2202.00449).

Each removed pixel takes the weighted mean of its in-image neighbours: weight 1/6 for the four
edge neighbours, 1/12 for the four diagonal ones. A neighbour outside the image is left out and
the pixel's own coefficient shrinks by its weight, so that the pixel is the mean over the
neighbours that exist. Removed neighbours are unknowns too, so the removed pixels of one image
solve one sparse linear system M x = b, where for removed pixel i

    M[i, i] = 1 - (weights of i's neighbours outside the image)
    M[i, j] = -w   for each removed neighbour j, w its weight
    b[i]    = sum of w * value over i's kept neighbours

The matrix is the same for every channel; the channels are the columns of b. M is symmetric and
diagonally dominant, strictly so in at least one row of every 8-connected group of removed
pixels (a group that is not the whole image touches a kept pixel), hence positive definite
unless every pixel of the image is removed, the one case with no solution.

The system is solved exactly (up to float64 rounding) by an LDL^T factorization confined to the
envelope of M: with the unknowns numbered row by row, row i of M is zero left of its lowest
numbered removed neighbour, and the factor L has no entry outside that envelope either. Row i
then costs about (i - first[i])**2 / 2 multiply-adds, where i - first[i] counts the removed pixels
between i's upper-left neighbour and i: at most W + 1, less where few pixels are removed. The
image is numbered by columns instead when that envelope is smaller (for instance when H < W).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ._jit import njit

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from .._typing import BoolArray, Float64, IntArray


@njit(cache=True)
def _number(keep: BoolArray, by_rows: bool, index: IntArray) -> int:
    """index[r, c] = the number of removed pixel (r, c), counted row by row (by column if not
    by_rows), or -1 for a kept pixel; returns how many pixels are removed."""
    H, W = keep.shape
    n = 0
    outer, inner = (H, W) if by_rows else (W, H)
    for a in range(outer):
        for b in range(inner):
            r, c = (a, b) if by_rows else (b, a)
            if keep[r, c]:
                index[r, c] = -1
            else:
                index[r, c] = n
                n += 1
    return n


@njit(cache=True)
def _envelope(index: IntArray, first: IntArray) -> int:
    """first[i] = the lowest number among unknown i and its removed neighbours; returns the
    factorization's cost, the sum of (i - first[i])**2."""
    H, W = index.shape
    cost = 0
    for r in range(H):
        for c in range(W):
            i = index[r, c]
            if i < 0:
                continue
            f = i
            for rr in range(max(r - 1, 0), min(r + 2, H)):
                for cc in range(max(c - 1, 0), min(c + 2, W)):
                    j = index[rr, cc]
                    if 0 <= j < f:
                        f = j
            first[i] = f
            cost += (i - f) * (i - f)
    return cost


@njit(cache=True)
def _assemble(image: Float64, index: IntArray, band: Float64, rhs: Float64) -> None:
    """Write M's lower triangle into band (n, wd + 1), entry (i, j) at band[i, wd - i + j], and b
    into rhs (C, n), for the n removed pixels of one image (C, H, W) numbered by index."""
    C, H, W = image.shape
    wd = band.shape[1] - 1
    band[:] = 0.0
    rhs[:] = 0.0
    for r in range(H):
        for c in range(W):
            i = index[r, c]
            if i < 0:
                continue
            d = 1.0
            for dr in range(-1, 2):
                for dc in range(-1, 2):
                    if dr == 0 and dc == 0:
                        continue
                    w = 1.0 / 6.0 if dr == 0 or dc == 0 else 1.0 / 12.0
                    rr = r + dr
                    cc = c + dc
                    if rr < 0 or rr >= H or cc < 0 or cc >= W:
                        d -= w
                        continue
                    j = index[rr, cc]
                    if j < 0:
                        for ch in range(C):
                            rhs[ch, i] += w * image[ch, rr, cc]
                    elif j < i:
                        band[i, wd - i + j] = -w
            band[i, wd] = d


@njit(cache=True, fastmath={"reassoc", "contract"})
def _finish_row(band: Float64, first: IntArray, i: int, kmin: int, j0: int) -> None:
    """Row i of the factor, its entries from column kmin held in band and those left of column j0
    already reduced: t[j] = L[i, j] * D[j] = M[i, j] - sum_k t[k] * L[j, k] for j0 <= j < i, then
    L[i, j] = t[j] / D[j] and D[i] = M[i, i] - sum_j t[j] * L[i, j]."""
    wd = band.shape[1] - 1
    row = band[i, wd - i + kmin:wd + 1]     # views, not offsets, keep the loops vectorized
    for j in range(j0, i):
        k0 = max(kmin, first[j])
        m = j - k0
        left = row[k0 - kmin:j - kmin]
        above = band[j, wd - m:wd]
        s = row[j - kmin]
        for k in range(m):
            s -= left[k] * above[k]
        row[j - kmin] = s
    d = row[i - kmin]
    for k in range(i - kmin):
        t = row[k]
        lik = t / band[kmin + k, wd]
        d -= t * lik
        row[k] = lik
    row[i - kmin] = d


@njit(cache=True, fastmath={"reassoc", "contract"})
def _factor(band: Float64, first: IntArray, n: int) -> None:
    """In place: M = L D L^T, L unit lower triangular (below the diagonal of band), D on it.

    Rows go in blocks of four: their dot products with each earlier row j of L share the loads of
    row j, over the union of the four envelopes (zeros left of a row's own envelope stay zeros).
    That union is why band keeps 3 columns more than the widest envelope."""
    wd = band.shape[1] - 1
    blocked = n - n % 4
    for i0 in range(0, blocked, 4):
        kmin = min(min(first[i0], first[i0 + 1]), min(first[i0 + 2], first[i0 + 3]))
        r0 = band[i0, wd - i0 + kmin:wd + 1]
        r1 = band[i0 + 1, wd - i0 - 1 + kmin:wd + 1]
        r2 = band[i0 + 2, wd - i0 - 2 + kmin:wd + 1]
        r3 = band[i0 + 3, wd - i0 - 3 + kmin:wd + 1]
        for j in range(kmin, i0):
            k0 = max(kmin, first[j])
            m = j - k0
            above = band[j, wd - m:wd]
            a0 = r0[k0 - kmin:j - kmin]
            a1 = r1[k0 - kmin:j - kmin]
            a2 = r2[k0 - kmin:j - kmin]
            a3 = r3[k0 - kmin:j - kmin]
            s0 = 0.0
            s1 = 0.0
            s2 = 0.0
            s3 = 0.0
            for k in range(m):
                u = above[k]
                s0 += a0[k] * u
                s1 += a1[k] * u
                s2 += a2[k] * u
                s3 += a3[k] * u
            r0[j - kmin] -= s0
            r1[j - kmin] -= s1
            r2[j - kmin] -= s2
            r3[j - kmin] -= s3
        for i in range(i0, i0 + 4):
            _finish_row(band, first, i, kmin, i0)
    for i in range(blocked, n):
        _finish_row(band, first, i, first[i], first[i])


@njit(cache=True, fastmath={"reassoc", "contract"})
def _solve1(band: Float64, first: IntArray, x: Float64) -> None:
    """In place: x (n,) becomes the solution of L D L^T x = x."""
    wd = band.shape[1] - 1
    n = x.shape[0]
    for i in range(n):                      # L y = b, a row of L at a time
        m = i - first[i]
        row = band[i, wd - m:wd]
        before = x[first[i]:i]
        s = x[i]
        for k in range(m):
            s -= row[k] * before[k]
        x[i] = s
    for i in range(n):                      # z = y / D
        x[i] /= band[i, wd]
    for i in range(n - 1, -1, -1):          # L^T x = z, a column of L at a time
        m = i - first[i]
        row = band[i, wd - m:wd]
        before = x[first[i]:i]
        xi = x[i]
        for k in range(m):
            before[k] -= row[k] * xi


@njit(cache=True, fastmath={"reassoc", "contract"})
def _solve3(band: Float64, first: IntArray, x0: Float64, x1: Float64, x2: Float64) -> None:
    """_solve1 for three right-hand sides at once, sharing the loads of L."""
    wd = band.shape[1] - 1
    n = x0.shape[0]
    for i in range(n):
        m = i - first[i]
        row = band[i, wd - m:wd]
        b0 = x0[first[i]:i]
        b1 = x1[first[i]:i]
        b2 = x2[first[i]:i]
        s0 = x0[i]
        s1 = x1[i]
        s2 = x2[i]
        for k in range(m):
            lik = row[k]
            s0 -= lik * b0[k]
            s1 -= lik * b1[k]
            s2 -= lik * b2[k]
        x0[i] = s0
        x1[i] = s1
        x2[i] = s2
    for i in range(n):
        d = band[i, wd]
        x0[i] /= d
        x1[i] /= d
        x2[i] /= d
    for i in range(n - 1, -1, -1):
        m = i - first[i]
        row = band[i, wd - m:wd]
        b0 = x0[first[i]:i]
        b1 = x1[first[i]:i]
        b2 = x2[first[i]:i]
        y0 = x0[i]
        y1 = x1[i]
        y2 = x2[i]
        for k in range(m):
            lik = row[k]
            b0[k] -= lik * y0
            b1[k] -= lik * y1
            b2[k] -= lik * y2


@njit(cache=True)
def _impute(out: Float64, keep: BoolArray) -> None:
    """In place on out (N, C, H, W) float64: every pixel where keep (N, H, W) is False becomes the
    solution of its image's system. No image may have every pixel removed."""
    N, C, H, W = out.shape
    index = np.empty((H, W), np.int64)
    first = np.empty(H * W, np.int64)
    buffer = np.empty(0)
    rhs_buffer = np.empty(C * H * W)
    for m in range(N):
        n = _number(keep[m], False, index)
        if n == 0:
            continue
        by_columns = _envelope(index, first)
        _number(keep[m], True, index)
        if _envelope(index, first) > by_columns:
            _number(keep[m], False, index)
            _envelope(index, first)
        width = 0
        for i in range(n):
            width = max(width, i - first[i])
        width += 4                          # the diagonal, and 3 columns for _factor's blocks
        if n * width > buffer.size:
            buffer = np.empty(n * width)
        band = buffer[:n * width].reshape((n, width))
        rhs = rhs_buffer[:C * n].reshape((C, n))
        _assemble(out[m], index, band, rhs)
        _factor(band, first, n)
        threes = C - C % 3
        for ch in range(0, threes, 3):
            _solve3(band, first, rhs[ch], rhs[ch + 1], rhs[ch + 2])
        for ch in range(threes, C):
            _solve1(band, first, rhs[ch])
        for r in range(H):
            for c in range(W):
                i = index[r, c]
                if i >= 0:
                    for ch in range(C):
                        out[m, ch, r, c] = rhs[ch, i]


def linear_impute(images: ArrayLike, keep: ArrayLike) -> Float64:
    """Fill the removed pixels of images (N, C, H, W), float32 or float64, where keep (N, H, W)
    bool is False, by ROAD's linear imputation without its noise.

    Returns a new float64 array: kept pixels hold their input values, each removed pixel the
    exact solution of its image's system (see the module docstring). An image with nothing
    removed comes back unchanged; one with every pixel removed raises ValueError.
    """
    images = np.asarray(images)
    keep = np.asarray(keep)
    if images.ndim != 4:
        raise ValueError(f"images must have shape (N, C, H, W), got shape {images.shape!r}")
    if images.dtype not in (np.float32, np.float64):
        raise TypeError(f"images must be float32 or float64, got dtype {images.dtype}")
    n, _, h, w = images.shape
    if keep.shape != (n, h, w):
        raise ValueError(f"keep must have shape {(n, h, w)!r} (N, H, W of images), got shape {keep.shape!r}")
    if keep.dtype != np.bool_:
        raise TypeError(f"keep must be a bool array (True = kept), got dtype {keep.dtype}")
    out = np.array(images, dtype=np.float64, order="C")
    if h * w == 0:
        return out
    flat = keep.reshape(n, h * w)
    empty = np.flatnonzero(~flat.any(axis=1))
    if empty.size:
        raise ValueError(f"keep removes every pixel of image {int(empty[0])}, which leaves nothing to impute "
                         f"from; keep at least one pixel per image")
    if not flat.all():
        _impute(out, np.ascontiguousarray(keep))
    return out
