"""Shape images: one anti-aliased shape per image on a textured, cluttered background.

Every shape is an exact signed distance function (SDF) in the shape's own frame, where the
shape fits the unit circle; a pixel's coverage is ``clip(0.5 - d, 0, 1)`` with ``d`` the
signed distance of the pixel centre in pixels (a one-pixel anti-aliasing ramp).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from saliency._typing import Float32, Float64, FloatArray, IntArray

    # the drawn parameters of every image, by name (float32 arrays but for the int64 "label" and
    # "texture" and the bool "clutter_line"), one row per image
    Params = dict[str, NDArray[Any]]

SIZE = 64
SHAPE_CLASSES = ("circle", "square", "triangle", "star", "cross", "ring", "hexagon", "crescent")

_RADIUS = (9.0, 20.0)      # circumradius in pixels
_CHUNK = 512               # images rendered at once (bounds the temporaries to ~100 MB)
_PATCH = 24                # side of the window a clutter item is drawn in
_NOISE = 0.02              # standard deviation of the final per-pixel noise


# --- signed distances in the shape frame (unit circumradius; negative inside) ---

def _sd_box(x: FloatArray, y: FloatArray, hx: float, hy: float) -> FloatArray:
    qx, qy = np.abs(x) - hx, np.abs(y) - hy
    outside = np.hypot(np.maximum(qx, 0), np.maximum(qy, 0))
    return outside + np.minimum(np.maximum(qx, qy), 0)


def _sd_polygon(x: FloatArray, y: FloatArray, n: int) -> FloatArray:
    """Regular n-gon with circumradius 1 and an edge normal along +x."""
    sector = 2 * np.pi / n
    a = np.mod(np.arctan2(y, x) + sector / 2, sector) - sector / 2
    r = np.hypot(x, y)
    qx, qy = r * np.cos(a), r * np.abs(np.sin(a))
    apothem, half_edge = float(np.cos(np.pi / n)), float(np.sin(np.pi / n))
    return np.sign(qx - apothem) * np.hypot(qx - apothem, np.maximum(qy - half_edge, 0))


def _sd_star(x: FloatArray, y: FloatArray, n: int = 5, inner: float = 0.45) -> FloatArray:
    """n-pointed star: tips at radius 1 (one along +x), inner corners at radius ``inner``."""
    sector = 2 * np.pi / n
    a = np.mod(np.arctan2(y, x), sector)
    a = np.minimum(a, sector - a)                      # fold into [0, pi/n]
    r = np.hypot(x, y)
    qx, qy = r * np.cos(a), r * np.sin(a)
    ex, ey = inner * float(np.cos(np.pi / n)) - 1, inner * float(np.sin(np.pi / n))   # tip (1, 0) -> inner corner
    wx, wy = qx - 1, qy
    t = np.clip((wx * ex + wy * ey) / (ex * ex + ey * ey), 0, 1)
    dist = np.hypot(wx - ex * t, wy - ey * t)
    return np.where(ex * wy - ey * wx > 0, -dist, dist)


def _sd_circle(x: FloatArray, y: FloatArray) -> FloatArray:
    return np.hypot(x, y) - 1


def _sd_square(x: FloatArray, y: FloatArray) -> FloatArray:
    return _sd_box(x, y, 0.7, 0.7)


def _sd_triangle(x: FloatArray, y: FloatArray) -> FloatArray:
    return _sd_polygon(x, y, 3)


def _sd_cross(x: FloatArray, y: FloatArray) -> FloatArray:
    return np.minimum(_sd_box(x, y, 0.94, 0.3), _sd_box(x, y, 0.3, 0.94))


def _sd_ring(x: FloatArray, y: FloatArray) -> FloatArray:
    return np.abs(np.hypot(x, y) - 0.72) - 0.28        # outer radius 1, hole radius 0.44


def _sd_hexagon(x: FloatArray, y: FloatArray) -> FloatArray:
    return _sd_polygon(x, y, 6)


def _sd_crescent(x: FloatArray, y: FloatArray) -> FloatArray:
    # the unit disc minus a disc of radius 0.8 centred at (0.45, 0); the shape's centre is empty
    return np.maximum(np.hypot(x, y) - 1, 0.8 - np.hypot(x - 0.45, y))


_SDF = (_sd_circle, _sd_square, _sd_triangle, _sd_star, _sd_cross, _sd_ring, _sd_hexagon, _sd_crescent)


# --- parameters (all drawn up front, so rendering in chunks changes nothing) ---

def _contrasting(rng: np.random.Generator, n: int, background: tuple[Float64, Float64]) -> Float64:
    """Colours at least ~0.35 away (Euclidean) from both background colours."""
    colour = rng.uniform(0, 1, (n, 3))
    near = np.minimum(*(np.linalg.norm(colour - b, axis=1) for b in background)) < 0.35
    mean = (background[0] + background[1]) / 2
    away = np.clip(mean + np.where(mean > 0.5, -1, 1) * rng.uniform(0.45, 0.6, (n, 3)), 0, 1)
    return np.where(near[:, None], away, colour)


def _place_clutter(rng: np.random.Generator, centre: Float64, radius: Float64, n_items: int,
                   tries: int = 4) -> Float64:
    """Clutter positions at least 4 px outside each shape's circumcircle, or NaN when none fits."""
    n = len(radius)
    pos = np.full((n, n_items, 2), np.nan)
    for _ in range(tries):
        candidate = rng.uniform(2, SIZE - 2, (n, n_items, 2))
        fits = np.linalg.norm(candidate - centre[:, None], axis=2) > radius[:, None] + 4 + 7
        take = fits & np.isnan(pos[..., 0])
        pos[take] = candidate[take]
    return pos


def _params(n: int, rng: np.random.Generator) -> Params:
    p: dict[str, Any] = {}
    p["label"] = rng.integers(0, len(SHAPE_CLASSES), n)
    p["radius"] = rng.uniform(*_RADIUS, n)
    margin = p["radius"] + 1.5
    p["center"] = np.stack([rng.uniform(margin, SIZE - margin), rng.uniform(margin, SIZE - margin)], axis=1)
    p["angle"] = rng.uniform(0, 2 * np.pi, n)
    b0 = rng.uniform(0.05, 0.95, (n, 3))
    b1 = np.clip(b0 + rng.uniform(-0.3, 0.3, (n, 3)), 0, 1)
    p["background"] = (b0, b1)
    p["texture"] = rng.integers(0, 3, n)               # 0 smooth noise, 1 linear gradient, 2 stripes
    p["texture_angle"] = rng.uniform(0, 2 * np.pi, n)
    p["stripe_period"] = rng.uniform(5, 16, n)
    p["stripe_phase"] = rng.uniform(0, 2 * np.pi, n)
    p["noise_grid"] = rng.uniform(0, 1, (n, 6, 6))
    p["color"] = _contrasting(rng, n, p["background"])
    items = 5
    p["clutter_pos"] = _place_clutter(rng, p["center"], p["radius"], items)
    p["clutter_pos"][np.arange(items) >= rng.integers(1, items + 1, n)[:, None]] = np.nan
    p["clutter_line"] = rng.random((n, items)) < 0.5
    p["clutter_size"] = rng.uniform(1.5, 3.0, (n, items))          # blob radius
    p["clutter_length"] = rng.uniform(4, 7, (n, items))           # half length of a line
    p["clutter_angle"] = rng.uniform(0, np.pi, (n, items))
    p["clutter_color"] = rng.uniform(0, 1, (n, items, 3))
    p["background"] = np.stack(p["background"])
    # float32 from here on: rendering runs about twice as fast as in float64
    return {k: v.astype(np.float32) if v.dtype == np.float64 else v for k, v in p.items()}


# --- rendering ---

def _bilinear_matrix(n_out: int, n_in: int) -> NDArray[np.float32]:
    """(n_out, n_in) matrix of half-pixel-centred bilinear interpolation."""
    pos = np.clip((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0, n_in - 1)
    lo = np.minimum(np.floor(pos).astype(int), n_in - 2)
    w = pos - lo
    m = np.zeros((n_out, n_in), np.float32)
    m[np.arange(n_out), lo] = 1 - w
    m[np.arange(n_out), lo + 1] = w
    return m


def _background(p: Params, idx: IntArray, xs: Float32, ys: Float32) -> Float32:
    tex, ang = p["texture"][idx, None, None], p["texture_angle"][idx, None, None]
    u = (xs - SIZE / 2) * np.cos(ang) + (ys - SIZE / 2) * np.sin(ang)
    up = _bilinear_matrix(SIZE, p["noise_grid"].shape[1])
    noise = up @ p["noise_grid"][idx] @ up.T
    gradient = 0.5 + u / (SIZE * 2 ** 0.5)
    period, phase = p["stripe_period"][idx, None, None], p["stripe_phase"][idx, None, None]
    stripes = 0.5 + 0.5 * np.sin(2 * np.pi * u / period + phase)
    t = np.where(tex == 0, noise, np.where(tex == 1, gradient, stripes))[:, None]
    b0, b1 = (b[idx, :, None, None] for b in p["background"])
    return b0 + (b1 - b0) * t                           # (n, 3, H, W)


def _shape_coverage(p: Params, idx: IntArray, xs: Float32, ys: Float32) -> Float32:
    radius = p["radius"][idx, None, None]
    dx, dy = xs - p["center"][idx, 0, None, None], ys - p["center"][idx, 1, None, None]
    c, s = np.cos(p["angle"][idx])[:, None, None], np.sin(p["angle"][idx])[:, None, None]
    x, y = (c * dx + s * dy) / radius, (-s * dx + c * dy) / radius     # rotate by -angle into the shape frame
    d = np.empty(x.shape, np.float32)
    labels = p["label"][idx]
    for k, sdf in enumerate(_SDF):
        sel = labels == k
        if sel.any():
            d[sel] = sdf(x[sel], y[sel])
    return np.clip(0.5 - d * radius, 0, 1)


def _draw_clutter(img: Float32, p: Params, idx: IntArray) -> None:
    """Blobs and short lines, each drawn in a window of a padded canvas through flat indices."""
    n, pad = len(idx), _PATCH // 2
    side = SIZE + 2 * pad
    canvas = np.zeros((n, 3, side, side), np.float32)
    canvas[:, :, pad:-pad, pad:-pad] = img
    flat = canvas.reshape(-1)
    local = np.arange(_PATCH, dtype=np.float32) - pad + 0.5
    window = np.arange(_PATCH)[:, None] * side + np.arange(_PATCH)          # (P, P) offsets in one channel
    for k in range(p["clutter_pos"].shape[1]):
        present = np.flatnonzero(~np.isnan(p["clutter_pos"][idx, k, 0]))
        if not present.size:
            continue
        q = idx[present]
        pos = p["clutter_pos"][q, k]
        corner = np.floor(pos).astype(np.int64)          # window origin in the padded canvas
        y = (corner[:, 1, None] + local)[:, :, None] - pos[:, 1, None, None]   # offsets from the item's centre
        x = (corner[:, 0, None] + local)[:, None, :] - pos[:, 0, None, None]
        cos, sin = (f(p["clutter_angle"][q, k])[:, None, None] for f in (np.cos, np.sin))
        half = p["clutter_length"][q, k][:, None, None]
        along = np.clip(x * cos + y * sin, -half, half)
        line_d = np.hypot(x - along * cos, y - along * sin) - 0.7
        blob_d = np.hypot(x, y) - p["clutter_size"][q, k][:, None, None]
        alpha = np.clip(0.5 - np.where(p["clutter_line"][q, k][:, None, None], line_d, blob_d), 0, 1)[:, None]
        start = (present[:, None] * 3 + np.arange(3)) * side * side + corner[:, 1, None] * side + corner[:, 0, None]
        at = start[:, :, None, None] + window                                # (m, 3, P, P) flat indices
        colour = p["clutter_color"][q, k][:, :, None, None]
        flat[at] = flat[at] * (1 - alpha) + colour * alpha
    img[:] = canvas[:, :, pad:-pad, pad:-pad]


def render(p: Params, idx: IntArray, rng: np.random.Generator) -> tuple[Float32, Float32]:
    """Images (len(idx), 3, 64, 64) float32 and the shapes' coverage (len(idx), 64, 64) float32."""
    ys, xs = np.mgrid[0:SIZE, 0:SIZE].astype(np.float32) + np.float32(0.5)
    img = _background(p, idx, xs, ys)
    _draw_clutter(img, p, idx)
    cover = _shape_coverage(p, idx, xs, ys)
    img += (p["color"][idx, :, None, None] - img) * cover[:, None]
    img += (rng.random(img.shape, np.float32) - np.float32(0.5)) * np.float32(_NOISE * 12 ** 0.5)  # uniform, std _NOISE
    return np.clip(img, 0, 1, out=img), cover


def shapes(n: int, seed: int = 0, *, return_info: bool = False) -> tuple[Any, ...]:
    if not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    rng = np.random.default_rng(seed)
    p = _params(int(n), rng)
    images = np.empty((n, 3, SIZE, SIZE), np.float32)
    cover = np.empty((n, SIZE, SIZE), np.float32)
    for start in range(0, n, _CHUNK):
        stop = min(start + _CHUNK, n)
        images[start:stop], cover[start:stop] = render(p, np.arange(start, stop), rng)
    labels = p["label"].astype(np.int64)
    if not return_info:
        return images, labels
    info = {"mask": cover, "center": p["center"], "radius": p["radius"], "angle": p["angle"], "color": p["color"]}
    return images, labels, info
