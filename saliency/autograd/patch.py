"""Windowed gradients: the engine's cropped VJPs for local seeds.

A one-hot pixel seed on a dense output has a gradient that is zero outside a small window
at every layer until it reaches the input (its receptive field). A `Patch` stores K such
gradients as K windows of one size, each at its own origin in the map, instead of K full
maps. Every op with a spatial window rule declares, next to its `backward`, either its cropped
VJP `backward_window`, which computes the VJP on the windows only, or `backward_window = DENSE`
(saliency.autograd.node); an op without a cropped VJP sees `patch.dense()`, the same full array a
plain backward would have produced. The results are the same numbers, computed on less.

The engine makes a Patch from a seed gradient when every seed's non-zero cells fit a window
of at most a quarter of the map (`from_seed`), and turns a Patch back into a dense array as
soon as its windows cover half the map (`Patch.like`), at a node without a cropped VJP (or whose
cropped VJP declines the case), at a leaf, and wherever a hook, `retain_grad` or a trace must see
the gradient.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from . import geometry
from ..kernels import window as _window

if TYPE_CHECKING:
    from numpy.typing import DTypeLike, NDArray

    from .._typing import IntArray, Shape, Size

# A seed becomes windows when its windows cover at most this fraction of the map; windows
# grown past DENSE_AT of the map go back to a dense array (the full VJP costs no more).
SPARSE_AT = 0.25
DENSE_AT = 0.5


class Patch:
    """K gradients, each zero outside an h x w window of the H x W map of an output.

    data: (K, *lead, h, w), lead being the output's shape without its map (N, C);
    origins: (K, 2) int64, the (row, col) of each window's top-left cell (may lie outside the
        map: cells outside it hold zeros);
    map_size: (H, W); seed_shape: the seed dimensions that K flattens (() for a plain backward).
    """

    __slots__ = ("data", "origins", "map_size", "seed_shape")
    __array_ufunc__ = None  # ndarray + Patch goes to Patch.__radd__

    data: NDArray[Any]
    origins: IntArray
    map_size: Shape  # (H, W)
    seed_shape: Shape

    def __init__(self, data: NDArray[Any], origins: IntArray, map_size: Sequence[int],
                 seed_shape: Sequence[int]) -> None:
        self.data, self.origins = data, origins
        self.map_size, self.seed_shape = tuple(map_size), tuple(seed_shape)

    @property
    def size(self) -> Shape:
        """(h, w) of the windows."""
        return self.data.shape[-2:]

    @property
    def lead(self) -> Shape:
        return self.data.shape[1:-2]

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.data.dtype

    @property
    def shape(self) -> Shape:
        """The shape of the dense gradient it stands for."""
        return self.seed_shape + self.lead + self.map_size

    def dense(self) -> NDArray[Any]:
        """The full gradient: seed_shape + output shape."""
        full = np.zeros((len(self.origins),) + self.lead + self.map_size, self.data.dtype)
        _window.add_into(full, self.data, self.origins)
        return full.reshape(self.shape)

    def like(self, data: NDArray[Any], origins: IntArray | None = None,
             map_size: Sequence[int] | None = None) -> Patch | NDArray[Any]:
        """New windows (K, *lead, h, w) at `origins` (default: these) of a map of `map_size` (default:
        this one): a Patch, or the dense array once the windows cover DENSE_AT of the map."""
        origins = self.origins if origins is None else origins
        map_size = self.map_size if map_size is None else tuple(map_size)
        p = Patch(data, origins, map_size, self.seed_shape)
        h, w = data.shape[-2:]
        if h * w >= DENSE_AT * map_size[0] * map_size[1]:
            return p.dense()
        return p

    def moved(self, data: NDArray[Any], origins: IntArray, map_size: Sequence[int]) -> Patch | NDArray[Any]:
        """`like` for windows whose cells outside the map may hold values that belong to no input
        cell (a convolution's padding): those are zeroed first."""
        return self.like(_window.clip(data, origins, map_size), origins, map_size)

    def sliding(self, kernel: Size, stride: Size = 1, padding: Size = 0,
                dilation: Size = 1) -> tuple[IntArray, tuple[int, ...]]:
        """(origins, size) of the input windows that a sliding-window op (convolution, pooling) reads
        for these output windows, per axis `geometry.reads` (not clipped to the map): origin * stride
        - padding, (h - 1) * stride + (k - 1) * dilation + 1 rows, likewise columns. Arguments are ints
        or (rows, cols) pairs."""
        origins: list[Any] = []
        size: list[int] = []
        pairs = map(geometry.pair, (kernel, stride, padding, dilation))
        for axis, (n, k, s, p, d) in enumerate(zip(self.size, *pairs)):
            lo, hi = geometry.reads(0, n, k, s, p, d)
            origins.append(geometry.reads(self.origins[:, axis], self.origins[:, axis] + n, k, s, p, d)[0])
            size.append(hi - lo)
        return np.stack(origins, axis=1), tuple(size)

    def fills(self, size: Sequence[int], map_size: Sequence[int]) -> bool:
        """True when windows of `size` (h, w) cover DENSE_AT of a map of `map_size` or more: their VJP
        would be made dense by `like` anyway, after costing more than the dense VJP (a dilated
        convolution's input windows can be several times its map), so a cropped VJP declines them."""
        return size[0] * size[1] >= DENSE_AT * map_size[0] * map_size[1]

    def window(self, a: NDArray[Any]) -> NDArray[Any]:
        """The windows of `a` (an array of the output's shape, or of its map with fewer lead
        dimensions) at these origins: (K, *a.shape[:-2], h, w); booleans come back as uint8."""
        return _window.gather(a, self.origins, self.size)

    def times(self, a: NDArray[Any], data: NDArray[Any] | None = None) -> Patch:
        """These windows (or `data` in their place) times the same windows of `a` (an array of the
        output's shape, a boolean mask included): a new Patch of the same windows."""
        data = self.data if data is None else data
        return Patch(_window.times_window(data, a, self.origins), self.origins, self.map_size, self.seed_shape)

    def like_data(self, data: NDArray[Any]) -> Patch:
        """The same windows holding `data` (K, *lead, h, w) instead: a new Patch."""
        return Patch(data, self.origins, self.map_size, self.seed_shape)

    def astype(self, dtype: DTypeLike) -> Patch:
        return Patch(self.data.astype(dtype), self.origins, self.map_size, self.seed_shape)

    def __neg__(self) -> Patch:
        return Patch(-self.data, self.origins, self.map_size, self.seed_shape)

    def __add__(self, other: Patch | NDArray[Any]) -> Patch | NDArray[Any]:
        if type(other) is not Patch:
            return self.dense() + other
        lo = np.minimum(self.origins, other.origins)
        hi = np.maximum(self.origins + self.size, other.origins + other.size)
        h, w = (int(e) for e in (hi - lo).max(axis=0))
        data = np.zeros((len(lo),) + self.lead + (h, w), np.result_type(self.dtype, other.dtype))
        _window.add_into(data, self.data, self.origins - lo)
        _window.add_into(data, other.data, other.origins - lo)
        return self.like(data, lo)

    def __radd__(self, other: NDArray[Any]) -> NDArray[Any]:
        return other + self.dense()

    def __repr__(self) -> str:
        return (f"Patch({len(self.origins)} windows {self.size[0]}x{self.size[1]} of a "
                f"{self.map_size[0]}x{self.map_size[1]} map, lead {self.lead})")


def from_seed(g: NDArray[Any], seed_ndim: int) -> Patch | None:
    """A Patch for the seed gradient `g` (seed dims seed_ndim, then the output's shape) when every seed is zero
    outside a window of at most SPARSE_AT of the map, else None. Outputs without a map and a channel
    (fewer than 3 dimensions) stay dense: their ops (linear layers) have no window rule."""
    out_ndim = g.ndim - seed_ndim
    if out_ndim < 3 or g.dtype.kind != "f":
        return None
    H, W = g.shape[-2:]
    K = math.prod(g.shape[:seed_ndim])
    if K == 0 or H * W < 16:
        return None
    g3 = g.reshape((K, -1, H, W))
    if all(np.any(edge.reshape(K, -1) != 0, axis=1).all() for edge in
           (g3[:, :, 0], g3[:, :, -1], g3[:, :, :, 0], g3[:, :, :, -1])):
        return None  # every seed reaches all four borders (ones, weights, targets): no scan of the rest
    r_lo, c_lo, r_hi, c_hi = _window.support(g3).T
    h, w = max(int((r_hi - r_lo).max()), 1), max(int((c_hi - c_lo).max()), 1)
    if h * w > SPARSE_AT * H * W:
        return None
    origins = np.stack([np.minimum(r_lo, H - h), np.minimum(c_lo, W - w)], axis=1)
    lead = g.shape[seed_ndim:-2]
    rows = origins[:, 0, None] + np.arange(h)
    cols = origins[:, 1, None] + np.arange(w)
    data = g3[np.arange(K)[:, None, None, None], np.arange(g3.shape[1])[None, :, None, None],
              rows[:, None, :, None], cols[:, None, None, :]]
    return Patch(np.ascontiguousarray(data).reshape((K,) + lead + (h, w)), origins, (H, W), g.shape[:seed_ndim])
