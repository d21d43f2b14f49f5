"""Mass radii: for many non-negative maps, each with its own centre, the smallest distance from the
centre within which the map holds a given fraction of its total.

r(f) = min { d_p : sum of m_q over the pixels q with d_q <= d_p  >=  f * total }, where
d_p = sqrt((i - centre_row)**2 + (j - centre_col)**2) for pixel p = (i, j); NaN when a map's
total is not > 0 (all zero, or NaN inside). Pixels at equal distance count together, so a radius
is always one of the pixels' distances.

Instead of sorting every pixel of every map by distance, each map's non-zero pixels go into rings
of width 1 (distance [k, k + 1)); only the ring where the running total crosses f * total is
sorted. That is O(H * W) per map plus the sort of one ring, instead of a sort of all H * W
pixels. Sums run in a fixed order that differs from a full sort's: a pixel whose
running total lies within rounding of f * total may move the radius by one ring step, nothing
else. The distance is computed as in NumPy (no fastmath contraction), so radii equal NumPy's
sqrt(dr**2 + dc**2) of the pixel offsets bit for bit.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ._jit import njit

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from .._typing import Float64


@njit(cache=True)
def _ring_radius(dist: Float64, weight: Float64, n: int, ring: int, target: float,
                 start: float) -> tuple[float, float]:
    """Walk ring `ring`'s pixels (of the n gathered ones) nearest first from running total `start`:
    (distance where the total first reaches target, or -1.0; the total after the whole ring)."""
    count = 0
    for t in range(n):
        if int(dist[t]) == ring:
            count += 1
    d = np.empty(count)
    w = np.empty(count)
    count = 0
    for t in range(n):                      # gathered in flat (row-major) order
        if int(dist[t]) == ring:
            d[count] = dist[t]
            w[count] = weight[t]
            count += 1
    order = np.argsort(d, kind="mergesort")  # stable: equal distances keep row-major order
    total = start
    for s in range(count):
        total += w[order[s]]
        if total >= target:
            return d[order[s]], total
    return -1.0, total


@njit(cache=True)
def _mass_radii(mass: Float64, centres: Float64, fractions: Float64, out: Float64) -> None:
    """out[m, f] = the radius of map m about centres[m] holding fractions[f] of its total."""
    M, H, W = mass.shape
    F = fractions.shape[0]
    dist = np.empty(H * W)
    weight = np.empty(H * W)
    for m in range(M):
        cr = centres[m, 0]
        cc = centres[m, 1]
        n = 0
        total = 0.0
        far = 0.0
        for i in range(H):
            dr = i - cr
            for j in range(W):
                v = mass[m, i, j]
                if v != 0.0:                # NaN is != 0 and makes the total NaN
                    dc = j - cc
                    d = np.sqrt(dr * dr + dc * dc)
                    dist[n] = d
                    weight[n] = v
                    n += 1
                    total += v
                    far = max(far, d)
        if not total > 0.0:
            for f in range(F):
                out[m, f] = np.nan
            continue
        rings = int(far) + 1
        ring_mass = np.zeros(rings)
        for t in range(n):
            ring_mass[int(dist[t])] += weight[t]
        for f in range(F):
            target = fractions[f] * total
            radius = far                    # rounding left the total short of f * total: all of it
            cum = 0.0
            for k in range(rings):
                if ring_mass[k] == 0.0 or cum + ring_mass[k] < target:
                    cum += ring_mass[k]
                    continue
                r, cum = _ring_radius(dist, weight, n, k, target, cum)
                if r >= 0.0:
                    radius = r
                    break
            out[m, f] = radius


def mass_radii(mass: ArrayLike, centres: ArrayLike, fractions: ArrayLike) -> Float64:
    """The radii of non-negative maps (..., H, W) about their centres: shape (..., F).

    centres: (row, col) per map, shape (..., 2), or one (2,) for every map; fractions: F values in
    (0, 1] (not checked here). Computed in float64.
    """
    mass = np.ascontiguousarray(mass, dtype=np.float64)
    lead, (h, w) = mass.shape[:-2], mass.shape[-2:]
    flat = mass.reshape((-1, h, w))
    c = np.ascontiguousarray(np.broadcast_to(np.asarray(centres, dtype=np.float64), lead + (2,)).reshape(-1, 2))
    f = np.ascontiguousarray(np.atleast_1d(np.asarray(fractions, dtype=np.float64)))
    out = np.empty((flat.shape[0], f.shape[0]))
    if flat.shape[0]:
        _mass_radii(flat, c, f, out)
    return out.reshape(lead + (f.shape[0],))
