"""Ray-cast 3D scenes: a textured ground, a sky and 1 to 5 objects, with z-depth and object masks.

World frame: y up, the ground is the plane y = 0, the camera sits at (0, height, 0) and looks
along +z, pitched down by ``pitch`` radians, with no roll. Pinhole camera, square pixels,
principal point at the image centre, ``FOCAL`` pixels of focal length (60 degrees horizontal
field of view at 128 px). The primary ray of pixel (row i, column j) is
``d = right * u + up * v + forward`` with ``u = (j + 0.5 - W/2) / FOCAL`` and
``v = -(i + 0.5 - H/2) / FOCAL``: its component along the viewing axis is 1, so the ray
parameter t of a hit *is* its z-depth.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from typing import Sequence

    from numpy.typing import NDArray

    from saliency._typing import BoolArray, Float32, Float64, IntArray

    # the drawn parameters of every scene, by name, one row per scene
    Params = dict[str, NDArray[Any]]
    # a coordinate of rays: one for every ray, or one per ray
    Coord = float | Float64
    # a ray cast's (t, nx, ny, nz): the ray parameter of the hit (inf for none) and the surface normal
    Hit = tuple[Float64, Float64, Float64, Float64]

SIZE = 128
FOCAL = (SIZE / 2) / np.tan(np.radians(30.0))
MAX_DEPTH = 50.0           # metres: the depth of the sky, and the cap on every depth
MAX_OBJECTS = 5
# metres: the ground's checker tiles are squares of a known size, which fixes the scale of a scene
# (one image cannot tell a near small scene from a far big one)
TILE = 1.0
OBJECT_KINDS = ("sphere", "box", "cylinder")

_CHUNK = 8                 # scenes ray-cast at once
_EPS = 1e-4


def ground_depth(height: float, pitch: float, focal: float = FOCAL, H: int = SIZE, W: int = SIZE) -> NDArray[Any]:
    """Closed-form z-depth (H, W) of the ground plane seen by the camera; MAX_DEPTH where it is not.

    The ray of row i meets y = 0 at t = height / (sin(pitch) + cos(pitch) * (i + 0.5 - H/2) / focal);
    rows at or above the horizon (denominator <= 0) see the sky.
    """
    rows = (np.arange(H) + 0.5 - H / 2) / focal
    denom = np.sin(pitch) + np.cos(pitch) * rows
    with np.errstate(divide="ignore"):
        depth = np.where(denom > 0, height / np.where(denom > 0, denom, 1.0), np.inf)
    return np.broadcast_to(np.minimum(depth, MAX_DEPTH)[:, None], (H, W)).copy()


# --- ray / surface intersections: rays o + t d (components broadcast against each other);
# each returns (t, nx, ny, nz) with t = inf where the ray misses ---

def _sphere(o: Sequence[Coord], d: Sequence[Coord], cx: Float64, cy: Coord, cz: Float64, r: Float64) -> Hit:
    ox, oy, oz = o[0] - cx, o[1] - cy, o[2] - cz
    a = d[0] ** 2 + d[1] ** 2 + d[2] ** 2
    b = ox * d[0] + oy * d[1] + oz * d[2]
    disc = b * b - a * (ox * ox + oy * oy + oz * oz - r * r)
    t = (-b - np.sqrt(np.maximum(disc, 0))) / a
    t = np.where((disc >= 0) & (t > _EPS), t, np.inf)
    return t, (ox + t * d[0]) / r, (oy + t * d[1]) / r, (oz + t * d[2]) / r


def _box(o: Sequence[Coord], d: Sequence[Coord], lo: Sequence[Coord], hi: Sequence[Coord]) -> Hit:
    """Axis-aligned box; lo and hi are 3-tuples of corner coordinates."""
    t_near: Coord = -np.inf
    t_far: Coord = np.inf
    axis: int | IntArray = 0
    for k in range(3):
        dk = np.where(d[k] == 0, 1e-12, d[k])
        t1, t2 = (lo[k] - o[k]) / dk, (hi[k] - o[k]) / dk
        enter, leave = np.minimum(t1, t2), np.maximum(t1, t2)
        axis = np.where(enter > t_near, k, axis)
        t_near, t_far = np.maximum(t_near, enter), np.minimum(t_far, leave)
    t = np.where((t_near <= t_far) & (t_near > _EPS), t_near, np.inf)
    normal = [np.where(axis == k, -np.sign(d[k]), 0.0) for k in range(3)]
    return t, normal[0], normal[1], normal[2]


def _cylinder(o: Sequence[Coord], d: Sequence[Coord], cx: Float64, cz: Float64, r: Float64, h: Float64) -> Hit:
    """Upright cylinder on the ground: axis (cx, ., cz), radius r, from y = 0 to y = h, with a top cap."""
    ox, oz = o[0] - cx, o[2] - cz
    a = np.maximum(d[0] ** 2 + d[2] ** 2, 1e-12)
    b = ox * d[0] + oz * d[2]
    disc = b * b - a * (ox * ox + oz * oz - r * r)
    t_side = (-b - np.sqrt(np.maximum(disc, 0))) / a
    y = o[1] + t_side * d[1]
    t_side = np.where((disc >= 0) & (t_side > _EPS) & (y >= 0) & (y <= h), t_side, np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_cap = (h - o[1]) / d[1]
    px, pz = ox + t_cap * d[0], oz + t_cap * d[2]
    t_cap = np.where((d[1] < 0) & (t_cap > _EPS) & (px * px + pz * pz <= r * r), t_cap, np.inf)
    side = t_side < t_cap
    t = np.minimum(t_side, t_cap)
    nx = np.where(side, (ox + t_side * d[0]) / r, 0.0)
    nz = np.where(side, (oz + t_side * d[2]) / r, 0.0)
    return t, nx, np.where(side, 0.0, 1.0), nz


def _hit_object(o: Sequence[Coord], d: Sequence[Float64], p: Params, s: IntArray,
                k: int) -> tuple[Float64, list[Float64]]:
    """Intersect rays of scenes s (an index array, shape (m, 1)) with their object slot k."""
    shape = np.broadcast_shapes(*(np.shape(a) for a in (*o, *d)))
    t, normal = np.full(shape, np.inf), [np.zeros(shape) for _ in range(3)]
    kind = p["kind"][s[:, 0], k]
    for j in range(len(OBJECT_KINDS)):
        rows = np.flatnonzero(kind == j)
        if not rows.size:
            continue
        oj, dj = ([np.broadcast_to(a, shape)[rows] if np.ndim(a) else a for a in v] for v in (o, d))
        cx, cz, size = p["pos"][s[rows], k, 0], p["pos"][s[rows], k, 1], p["size"][s[rows], k]
        if j == 0:
            hit = _sphere(oj, dj, cx, size[..., 1] / 2, cz, size[..., 0])
        elif j == 1:
            hit = _box(oj, dj, (cx - size[..., 0], 0.0, cz - size[..., 2]),
                       (cx + size[..., 0], size[..., 1], cz + size[..., 2]))
        else:
            hit = _cylinder(oj, dj, cx, cz, size[..., 0], size[..., 1])
        t[rows] = hit[0]
        for i in range(3):
            normal[i][rows] = hit[i + 1]
    return t, normal


# --- random scene parameters, all drawn up front ---

def _place_objects(rng: np.random.Generator, n: int, n_objects: IntArray, footprint: Float64,
                   tries: int = 6) -> Float64:
    """Ground positions (x, z) in view, each footprint clear of the earlier ones; NaN when none fits."""
    pos = np.full((n, MAX_OBJECTS, 2), np.nan)
    for k in range(MAX_OBJECTS):
        for _ in range(tries):
            z = rng.uniform(2.5, 10.0, n)
            cand = np.stack([rng.uniform(-0.45, 0.45, n) * z, z], axis=1)
            gap = np.linalg.norm(pos[:, :k] - cand[:, None], axis=2) - footprint[:, :k] - footprint[:, k, None]
            free = ~(gap < 0.15).any(axis=1) & np.isnan(pos[:, k, 0]) & (k < n_objects)
            pos[free, k] = cand[free]
    return pos


def _params(n: int, rng: np.random.Generator, objects: tuple[int, int]) -> Params:
    p = {"height": rng.uniform(1.0, 2.5, n), "pitch": np.radians(rng.uniform(8.0, 25.0, n))}
    az, el = rng.uniform(-np.pi, np.pi, n), np.radians(rng.uniform(25.0, 65.0, n))
    p["light"] = np.stack([np.cos(el) * np.sin(az), np.sin(el), np.cos(el) * np.cos(az)], axis=1)
    p["sky"] = np.stack([rng.uniform(0.65, 0.9, (n, 3)), rng.uniform(0.15, 0.6, (n, 3))], axis=1)  # horizon, zenith
    p["sky"][:, 1, 2] = rng.uniform(0.7, 1.0, n)                                                    # a blue zenith
    p["tile"] = np.full(n, TILE)
    p["ground"] = rng.uniform(0.15, 0.75, (n, 2, 3))
    p["kind"] = rng.integers(0, 3, (n, MAX_OBJECTS))
    # half widths (x, -, z) and full height (y); a sphere uses x as its radius and y = 2 x
    size = np.stack([rng.uniform(0.25, 0.8, (n, MAX_OBJECTS)), rng.uniform(0.4, 2.0, (n, MAX_OBJECTS)),
                     rng.uniform(0.25, 0.8, (n, MAX_OBJECTS))], axis=2)
    sphere = p["kind"] == 0
    size[..., 0] = np.where(sphere, size[..., 0] * 1.1, size[..., 0])
    size[..., 1] = np.where(sphere, 2 * size[..., 0], size[..., 1])
    size[..., 2] = np.where(p["kind"] == 1, size[..., 2], size[..., 0])
    p["size"] = size
    footprint = np.where(p["kind"] == 1, np.hypot(size[..., 0], size[..., 2]), size[..., 0])
    lo, hi = objects
    n_objects = rng.integers(lo, hi + 1, n)
    p["pos"] = _place_objects(rng, n, n_objects, footprint)
    p["kind"] = np.where(np.isnan(p["pos"][..., 0]), -1, p["kind"])
    p["albedo"] = rng.uniform(0.15, 0.95, (n, MAX_OBJECTS, 3))
    return p


# --- rendering ---

def _camera_rays(p: Params, s: IntArray) -> list[Float64]:
    """Unit-forward-component ray directions (3 arrays (m, H*W)) of scenes s (m, 1)."""
    i, j = np.divmod(np.arange(SIZE * SIZE), SIZE)
    u, v = (j + 0.5 - SIZE / 2) / FOCAL, -(i + 0.5 - SIZE / 2) / FOCAL
    sp, cp = np.sin(p["pitch"][s]), np.cos(p["pitch"][s])
    # right = (1, 0, 0), up = (0, cos, sin), forward = (0, -sin, cos)
    return [np.broadcast_to(u, (len(s), u.size)), v * cp - sp, v * sp + cp]


def render(p: Params, s: IntArray) -> tuple[Float32, Float32, BoolArray]:
    """Images (m, 3, H, W), depths (m, 1, H, W) and visible-object masks (m, K, H, W) of scenes s."""
    m = len(s)
    s = s[:, None]
    d = _camera_rays(p, s)
    o = (0.0, p["height"][s], 0.0)
    with np.errstate(divide="ignore"):
        t = np.where(d[1] < 0, -o[1] / np.where(d[1] < 0, d[1], -1.0), np.inf)     # the ground
    which = np.full(t.shape, -1)
    normal = [np.zeros(t.shape), np.ones(t.shape), np.zeros(t.shape)]
    for k in range(MAX_OBJECTS):
        tk, nk = _hit_object(o, d, p, s, k)
        nearer = tk < t
        t, which = np.where(nearer, tk, t), np.where(nearer, k, which)
        normal = [np.where(nearer, a, b) for a, b in zip(nk, normal)]
    sky = ~np.isfinite(t)
    hit = [o[i] + np.where(sky, 0.0, t) * d[i] for i in range(3)]

    # albedo: a checker of tiles (each tile a little brighter or darker) on the ground, flat on objects
    tile = p["tile"][s]
    ix, iz = np.floor(hit[0] / tile), np.floor(hit[2] / tile)
    parity = ((ix + iz) % 2)[..., None]
    ground = p["ground"][s[:, 0]]
    jitter = (np.sin(ix * 12.9898 + iz * 78.233) * 43758.5453) % 1.0
    checker = (ground[:, None, 0] * (1 - parity) + ground[:, None, 1] * parity) * (0.85 + 0.3 * jitter[..., None])
    # far tiles shrink below a pixel: fade the checker to its mean where a tile spans < 2 pixels
    footprint = t / FOCAL / np.maximum(-d[1] / np.sqrt(d[0] ** 2 + d[1] ** 2 + d[2] ** 2), 1e-6)
    fade = np.clip(footprint / tile * 2 - 0.5, 0, 1)[..., None]
    checker = checker * (1 - fade) + ground.mean(axis=1)[:, None] * fade
    albedo = np.where((which >= 0)[..., None], p["albedo"][s, np.maximum(which, 0)], checker)

    # Lambertian light with cast shadows, then haze toward the horizon colour with distance
    light = p["light"][s]
    lam = np.maximum(sum(normal[i] * light[..., i] for i in range(3)), 0)
    origin = [np.where(sky, 0.0, hit[i] + 1e-3 * normal[i]) for i in range(3)]
    shadow_dir = [np.broadcast_to(light[..., i], t.shape) for i in range(3)]
    shadowed = np.zeros(t.shape, bool)
    for k in range(MAX_OBJECTS):
        shadowed |= np.isfinite(_hit_object(origin, shadow_dir, p, s, k)[0])
    shade = 0.35 + 0.65 * lam * ~shadowed
    colour = albedo * shade[..., None]
    horizon, zenith = p["sky"][s[:, 0], 0][:, None], p["sky"][s[:, 0], 1][:, None]
    haze = (1 - np.exp(-np.where(sky, 0.0, t) / 60.0))[..., None]
    colour = colour * (1 - haze) + horizon * haze
    elevation = np.clip(d[1] / np.sqrt(d[0] ** 2 + d[1] ** 2 + d[2] ** 2), 0, 1)[..., None]
    sky_colour = horizon + (zenith - horizon) * np.sqrt(elevation)
    colour = np.where(sky[..., None], sky_colour, colour)

    image = np.clip(colour, 0, 1).transpose(0, 2, 1).reshape(m, 3, SIZE, SIZE)
    depth = np.minimum(t, MAX_DEPTH).reshape(m, 1, SIZE, SIZE)
    masks = (which[:, None] == np.arange(MAX_OBJECTS)[:, None]).reshape(m, MAX_OBJECTS, SIZE, SIZE)
    return image.astype(np.float32), depth.astype(np.float32), masks


def scenes(n: int, seed: int = 0, *, objects: tuple[int, int] = (1, MAX_OBJECTS),
           return_params: bool = False) -> tuple[Any, ...]:
    if not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    lo, hi = objects
    if not 0 <= lo <= hi <= MAX_OBJECTS:
        raise ValueError(f"objects must be a range (lo, hi) with 0 <= lo <= hi <= {MAX_OBJECTS}, got {objects!r}")
    p = _params(int(n), np.random.default_rng(seed), (lo, hi))
    images = np.empty((n, 3, SIZE, SIZE), np.float32)
    depths = np.empty((n, 1, SIZE, SIZE), np.float32)
    masks = np.empty((n, MAX_OBJECTS, SIZE, SIZE), bool)
    for start in range(0, n, _CHUNK):
        s = np.arange(start, min(start + _CHUNK, n))
        images[s], depths[s], masks[s] = render(p, s)
    if not return_params:
        return images, depths, masks
    names = {"height", "pitch", "light", "kind", "pos", "size", "albedo"}
    return images, depths, masks, {"focal": FOCAL, **{k: v for k, v in p.items() if k in names}}
