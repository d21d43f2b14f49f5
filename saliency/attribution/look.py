"""How far each output pixel looks: the gradient maps of many output pixels (rows of the Jacobian
dy/dx), and for every pixel of a grid the radius that holds half (or 90%) of its gradient mass.

Both run ONE forward pass and then batched backward passes of `chunk` pixel seeds through the
same graph (`retain_graph=True`), so thousands of pixels need the memory of one chunk.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, cast

import numpy as np

from ..kernels.radius import mass_radii
from . import seeds as _seeds
from ._core import Call

if TYPE_CHECKING:
    from ..autograd.tensor import TensorLike
    from ._core import Model, Progress

# look_distance's default grid: the smallest stride that samples at most this many output pixels
# (a 128x128 output at stride 4: a 32x32 grid).
DEFAULT_PIXELS = 1024


def jacobian_rows(model: Model, x: TensorLike, pixels: Sequence[tuple[int, int]] | np.ndarray, *,
                  channel: Optional[int] = None, chunk: Optional[int] = None,
                  reduce: Optional[Callable[[np.ndarray], Any]] = None,
                  progress: Optional[Progress] = None) -> np.ndarray:
    """The gradient maps dy[..., row, col]/dx of K output pixels [(row, col), ...] of a dense output.

    Args:
      pixels: K (row, col) pairs (a list, or an int array of shape (K, 2)).
      channel: the output channel seeded (default: all channels, as seeds.pixel).
      chunk: pixel seeds per backward pass; default from `_core.SEED_BUDGET` (K times the input's
        elements per pass), at least 1. Results do not depend on it.
      reduce: optional fn applied to each chunk's maps (k, [N,] C, H, W); it must return an array
        whose first dimension is the chunk's k seeds, and the results are concatenated, so the
        (K, ...) stack of maps never exists (e.g. one number per seed).
      progress: optional callable(done, total), called after each chunk with seeds done so far.
    Returns:
      an ndarray (K, N, C, H, W) for x of shape (N, C, H, W), (K, C, H, W) for (C, H, W): the
      layout of an Attribution's map for K batched seeds (`gradient(model, x, seeds.pixels(pixels))`
      gives the same maps); or the concatenated results of `reduce`.
    A pixel outside the output map, or an output without a map, raises SeedError.
    """
    if reduce is not None and not callable(reduce):
        raise TypeError(f"reduce must be a callable on a chunk of maps, got {type(reduce).__name__}")
    call = Call(model, x)
    xt, y = call.forward(call.x, grad=True)
    seed = _seeds.pixels(pixels, channel=channel)
    seed.check(y._array)
    fn = reduce
    if reduce is not None and call.unbatched:
        given = reduce

        def unbatched(g: np.ndarray) -> Any:
            return given(g[:, 0])
        fn = unbatched
    rows = call.rows(y, xt, cast(int, seed.count), lambda start, stop: seed.vectors(y._array, start, stop), chunk=chunk,
                     reduce=fn, progress=progress)
    return rows[:, 0] if reduce is None and call.unbatched else rows


@dataclass(repr=False)
class LookDistance:
    """What `look_distance` returns: per sampled output pixel, how far from it the model looks.

    radii: {fraction: map} for each fraction asked for; a map has shape (N, rows, cols), or
        (rows, cols) when x had no batch dimension; NaN where the pixel's gradient is all zero.
    std_rows, std_cols: maps of that shape, the standard deviation (input pixels) of the gradient
        mass along rows and along columns, about the mass's own mean.
    rows, cols: the output rows and columns sampled (the grid is every `stride`-th pixel from 0).
    centres: (row centres, col centres) of those pixels in input coordinates.
    stride: the grid's step; output_size, input_size: (H, W) of the model output and of x.
    output: the model output at x; seconds: wall time of the call.
    `radius50` / `radius90` are radii[0.5] / radii[0.9]; `extent` places the maps on the input
    image for matplotlib's imshow (each sample drawn as the stride x stride block it starts).
    """

    radii: dict[float, np.ndarray]
    std_rows: np.ndarray
    std_cols: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    centres: tuple[np.ndarray, np.ndarray]
    stride: int
    output_size: tuple[int, int]
    input_size: tuple[int, int]
    output: np.ndarray
    seconds: float
    method = "look_distance"

    def radius(self, fraction: float) -> np.ndarray:
        """The radius map holding `fraction` of the mass (one of the fractions asked for)."""
        for f, r in self.radii.items():
            if np.isclose(f, fraction, rtol=0, atol=1e-12):
                return r
        raise KeyError(f"no radius for fraction {fraction!r}; this result has fractions "
                       f"{', '.join(map(str, self.radii))} (pass fraction=... to look_distance)")

    @property
    def radius50(self) -> np.ndarray:
        """radii[0.5]: per sampled pixel, the radius (input pixels) holding half of its gradient mass."""
        return self.radius(0.5)

    @property
    def radius90(self) -> np.ndarray:
        """radii[0.9]: per sampled pixel, the radius (input pixels) holding 90% of its gradient mass."""
        return self.radius(0.9)

    @property
    def extent(self) -> tuple[float, float, float, float]:
        """(left, right, bottom, top) in input pixels, for imshow(map, extent=...) over the image."""
        (h_out, w_out), (h_in, w_in), s = self.output_size, self.input_size, self.stride
        return (-0.5, len(self.cols) * s * w_in / w_out - 0.5, len(self.rows) * s * h_in / h_out - 0.5, -0.5)

    def __repr__(self) -> str:
        med = ", ".join(f"r{100 * f:g} {np.nanmedian(r):.3g}" if np.isfinite(r).any() else f"r{100 * f:g} nan"
                        for f, r in self.radii.items())
        return (f"LookDistance({len(self.rows)}x{len(self.cols)} pixels of the {self.output_size[0]}x"
                f"{self.output_size[1]} output at stride {self.stride}, median {med} px, "
                f"seconds={self.seconds:.3g})")


def default_stride(h: int, w: int, pixels: int = DEFAULT_PIXELS) -> int:
    """The smallest stride whose grid over an (h, w) map has at most `pixels` points."""
    stride = 1
    while -(-h // stride) * -(-w // stride) > pixels:
        stride += 1
    return stride


def look_distance(model: Model, x: TensorLike, *, stride: Optional[int] = None, channel: Optional[int] = None,
                  fraction: float | Sequence[float] = (0.5, 0.9), chunk: Optional[int] = None,
                  progress: Optional[Progress] = None) -> LookDistance:
    """For every `stride`-th output pixel (rows and columns, from 0), how far from it the model looks.

    The radius for fraction f is the smallest Euclidean distance r (input pixels) from the pixel's
    centre such that the input pixels within r hold >= f of its gradient mass |dy/dx| summed over
    channels: `receptive.mass_radius` with `receptive_field`'s centre ((row + 0.5) * H_in / H_out
    - 0.5, likewise for columns), so the radius at a grid pixel equals receptive_field's there.

    Args:
      stride: the grid step; default: the smallest that samples at most 1024 pixels (4 for a 128x128
        output). stride=1 measures every pixel (a 128x128 map is 16384 seeds).
      channel: the output channel seeded (default: all channels summed, as seeds.pixel).
      fraction: one fraction in (0, 1] or several.
      chunk, progress: as for `jacobian_rows` (progress counts pixels).
    Returns a `LookDistance`. A model whose output has no map (a classifier) raises SeedError.
    """
    fractions = tuple(float(f) for f in np.atleast_1d(fraction))
    if not fractions or not all(0 < f <= 1 for f in fractions):
        raise ValueError(f"fraction must be a number in (0, 1] or a list of them, got {fraction!r}")
    if stride is not None and (isinstance(stride, bool) or not isinstance(stride, (int, np.integer)) or stride < 1):
        raise ValueError(f"stride must be a positive int (output pixels between samples), got {stride!r}")
    t0 = time.perf_counter()
    call = Call(model, x)
    xt, y = call.forward(call.x, grad=True)
    if y.ndim < 3:
        raise _seeds.SeedError(f"look_distance needs a model with a dense output (N, C, H, W), but the output has "
                               f"shape {y.shape}; a classifier's scores have no pixels to look from")
    (h_out, w_out), (h_in, w_in) = y.shape[-2:], call.x.shape[-2:]
    stride = default_stride(h_out, w_out) if stride is None else int(stride)
    rows, cols = np.arange(0, h_out, stride), np.arange(0, w_out, stride)
    grid_rows, grid_cols = (a.ravel() for a in np.meshgrid(rows, cols, indexing="ij"))
    seed = _seeds.pixels(np.stack([grid_rows, grid_cols], axis=1), channel=channel)
    seed.check(y._array)
    row_centres = (rows + 0.5) * h_in / h_out - 0.5
    col_centres = (cols + 0.5) * w_in / w_out - 0.5
    centres = np.stack([(grid_rows + 0.5) * h_in / h_out - 0.5, (grid_cols + 0.5) * w_in / w_out - 0.5], axis=1)
    done = [0]

    def measure(g: np.ndarray) -> np.ndarray:
        """(k, N, C, H, W) maps -> (k, N, F + 2): the radii, then std along rows and along columns."""
        k = len(g)
        mass = np.abs(g).sum(axis=2, dtype=np.float64)
        here = np.broadcast_to(centres[done[0]:done[0] + k, None], mass.shape[:2] + (2,))
        done[0] += k
        return np.concatenate([mass_radii(mass, here, fractions), mass_spread(mass)], axis=-1)

    stats = call.rows(y, xt, cast(int, seed.count), lambda start, stop: seed.vectors(y._array, start, stop),
                      chunk=chunk, reduce=measure, progress=progress)
    stats = np.moveaxis(stats.reshape(len(rows), len(cols), call.n, -1), (2, 3), (1, 0))  # (F + 2, N, rows, cols)
    if call.unbatched:
        stats = stats[:, 0]
    return LookDistance(radii=dict(zip(fractions, stats[:len(fractions)])), std_rows=stats[-2], std_cols=stats[-1],
                        rows=rows, cols=cols, centres=(row_centres, col_centres), stride=stride,
                        output_size=(h_out, w_out), input_size=(h_in, w_in),
                        output=y._array[0] if call.unbatched else y._array, seconds=time.perf_counter() - t0)


def mass_spread(mass: Any) -> np.ndarray:
    """The standard deviations (along rows, along columns) of non-negative maps (..., H, W) taken
    as distributions over pixel positions: shape (..., 2); NaN where a map's total is not > 0."""
    mass = np.asarray(mass, dtype=np.float64)
    total = mass.sum(axis=(-2, -1))
    ok = total > 0
    safe = np.where(ok, total, 1.0)[..., None]
    out = []
    for marginal in (mass.sum(axis=-1), mass.sum(axis=-2)):       # over columns: mass per row; and per column
        p = marginal / safe
        at = np.arange(p.shape[-1], dtype=np.float64)
        mean = (p * at).sum(axis=-1, keepdims=True)
        out.append(np.sqrt((p * (at - mean) ** 2).sum(axis=-1)))
    return np.where(ok[..., None], np.stack(out, axis=-1), np.nan)
