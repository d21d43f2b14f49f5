"""Reductions over one, several or all dimensions: sum, mean, amax/amin, max/min, norm, logsumexp."""
from typing import Any, Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from .. import rules
from ..._typing import IntArray, Number, Shape
from ..node import DENSE, Function
from ..geometry import Box, Shapes, along_axes_window

# the dims an op reduces over: one, several, or all of them (None)
Dims = int | np.integer[Any] | Sequence[int] | None


def normalize_dims(dim: Dims, ndim: int, what: str = "dim") -> tuple[int, ...]:
    """`dim` (None, an int or a sequence) as a sorted tuple of non-negative axes; None means all."""
    if dim is None:
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
    span = max(ndim, 1)
    axes: set[int] = set()
    for d in dims:
        if not isinstance(d, (int, np.integer)) or not -span <= d < span:
            raise IndexError(f"{what} {d!r} is out of range for a tensor with {ndim} dimension(s); "
                             f"use an integer in [{-span}, {span - 1}]")
        axes.add(int(d) % span)
    return tuple(sorted(a for a in axes if a < ndim))


def arg_index(x: NDArray[Any], dim: int | None, keepdim: bool, fn: Callable[..., Any]) -> IntArray:
    """np.argmax / np.argmin (`fn`) of x over `dim` (all elements when None), as an int64 array."""
    if dim is None:
        return np.asarray(fn(x))
    (axis,) = normalize_dims(dim, x.ndim) or (0,)
    if not x.ndim:
        return np.asarray(0)
    out = fn(x, axis=axis)
    return np.expand_dims(out, axis) if keepdim else np.asarray(out)


def expand_reduced(g: NDArray[Any], in_shape: Shape, axes: Sequence[int], keepdim: bool,
                   seed_ndim: int) -> NDArray[Any]:
    """Broadcast the gradient of a reduction back over the reduced axes of the input."""
    lead = g.shape[:seed_ndim]
    if not keepdim:
        g = g.reshape(lead + tuple(1 if i in axes else n for i, n in enumerate(in_shape)))
    return np.broadcast_to(g, lead + in_shape)


class _Reduction(Function):
    __slots__ = ("axes", "keepdim", "in_shape", "full")
    axes: tuple[int, ...]
    keepdim: bool
    in_shape: Shape
    full: bool
    # a reduction over the map mixes its cells; one over lead dimensions only could run on the windows
    # (the map kept), but has no cropped VJP yet
    backward_window = DENSE

    def setup(self, x: NDArray[Any], dim: Dims, keepdim: bool) -> None:
        # as in PyTorch, an empty list of dims reduces over all of them (dim=None)
        empty = dim is not None and not isinstance(dim, (int, np.integer)) and len(tuple(dim)) == 0
        self.axes = normalize_dims(None if empty else dim, x.ndim)
        self.keepdim = bool(keepdim)
        self.in_shape = x.shape
        self.full = dim is None

    def window_rule(self, box: Box, shapes: Shapes) -> tuple[Box | None, ...]:
        return along_axes_window(self.axes, self, box, shapes)

    def expand(self, g: NDArray[Any]) -> NDArray[Any]:
        return expand_reduced(g, self.in_shape, self.axes, self.keepdim, self.seed_ndim(g))


class Sum(_Reduction):
    """z = x.sum(dim); SumBackward0 over all elements, SumBackward1 over given dims."""

    __slots__ = ()
    rule = rules.SPLIT

    def forward(self, x: NDArray[Any], *, dim: Dims = None, keepdim: bool = False) -> NDArray[Any]:
        self.setup(x, dim, keepdim)
        return x.sum(axis=self.axes, keepdims=self.keepdim)

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        return (self.expand(g),)

    def name(self) -> str:
        return "SumBackward0" if self.full else "SumBackward1"


class Mean(_Reduction):
    """z = x.mean(dim); MeanBackward0 over all elements, MeanBackward1 over given dims."""

    __slots__ = ()
    rule = rules.SPLIT

    def forward(self, x: NDArray[Any], *, dim: Dims = None, keepdim: bool = False) -> NDArray[Any]:
        self.setup(x, dim, keepdim)
        return x.mean(axis=self.axes, keepdims=self.keepdim)

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        count = int(np.prod([self.in_shape[a] for a in self.axes]))
        return (self.expand(g / count),)

    def name(self) -> str:
        return "MeanBackward0" if self.full else "MeanBackward1"


class Amax(_Reduction):
    """z = x.amax(dim); tied maxima share the gradient equally, as in PyTorch."""

    __slots__ = ()
    rule = rules.WINNER
    reducer: Callable[..., Any] = staticmethod(np.amax)

    def forward(self, x: NDArray[Any], *, dim: Dims = None, keepdim: bool = False) -> NDArray[Any]:
        self.setup(x, dim, keepdim)
        if x.size == 0:
            raise ValueError(f"{type(self).__name__.lower()} of an empty tensor of shape {x.shape} has no value")
        kept = self.reducer(x, axis=self.axes, keepdims=True)
        self.save_for_backward(x, kept)
        return kept if self.keepdim else kept.reshape(tuple(n for i, n in enumerate(x.shape) if i not in self.axes))

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        x, kept = self.saved
        winners = x == kept
        count = winners.sum(axis=self.axes, keepdims=True)
        # a NaN extremum equals nothing, not even itself: its whole slice gets NaN, as in PyTorch
        share = np.where(count > 0, self.expand(g) / np.maximum(count, 1), np.nan)
        return (np.where(winners | (count == 0), share, 0).astype(g.dtype, copy=False),)


class Amin(Amax):
    """z = x.amin(dim); tied minima share the gradient equally, as in PyTorch."""

    __slots__ = ()
    reducer = staticmethod(np.amin)


class MaxAll(Amax):
    """z = x.max() over all elements (ties share the gradient)."""

    __slots__ = ()

    def name(self) -> str:
        return "MaxBackward1"


class MinAll(Amin):
    """z = x.min() over all elements (ties share the gradient)."""

    __slots__ = ()

    def name(self) -> str:
        return "MinBackward1"


class MaxDim(Function):
    """values of x.max(dim) / x.min(dim), picked at the given indices; the gradient goes to them."""

    __slots__ = ("axis", "keepdim", "in_shape", "kind")
    axis: int
    keepdim: bool
    in_shape: Shape
    kind: str
    rule = rules.WINNER
    backward_window = DENSE  # as the reductions'

    def forward(self, x: NDArray[Any], *, index: IntArray, dim: int, keepdim: bool = False,
                kind: str = "Max") -> NDArray[Any]:
        # index: the picked positions along `dim`, with that axis kept (size 1)
        (self.axis,) = normalize_dims(dim, x.ndim) or (0,)
        self.keepdim, self.in_shape, self.kind = bool(keepdim), x.shape, kind
        self.save_for_backward(index)
        values = np.take_along_axis(x, index, axis=self.axis) if x.ndim else x
        return values if keepdim or not x.ndim else values.squeeze(self.axis)

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        (index,) = self.saved
        seed_ndim = self.seed_ndim(g)
        lead = g.shape[:seed_ndim]
        if not self.in_shape:
            return (g,)
        if not self.keepdim:
            g = np.expand_dims(g, seed_ndim + self.axis)
        gx = np.zeros(lead + self.in_shape, dtype=g.dtype)
        np.put_along_axis(gx, np.broadcast_to(index, lead + index.shape), g, axis=seed_ndim + self.axis)
        return (gx,)

    def window_rule(self, box: Box, shapes: Shapes) -> tuple[Box | None, ...]:
        return along_axes_window((self.axis,), self, box, shapes)

    def name(self) -> str:
        return f"{self.kind}Backward0"


class Norm(_Reduction):
    """z = ||x||_p over dim (p = 2 by default; also 1, inf and any p > 0)."""

    __slots__ = ("p",)
    p: float
    rule = rules.NONE

    def forward(self, x: NDArray[Any], *, p: Number = 2, dim: Dims = None, keepdim: bool = False) -> NDArray[Any]:
        self.setup(x, dim, keepdim)
        p = float(p)
        if not p > 0:
            raise ValueError(f"norm order p must be positive (1, 2, inf, ...), got {p!r}")
        self.p = p
        a = np.abs(x)
        if p == 2:
            kept = np.sqrt((x * x).sum(axis=self.axes, keepdims=True))
        elif p == 1:
            kept = a.sum(axis=self.axes, keepdims=True)
        elif p == np.inf:
            kept = a.max(axis=self.axes, keepdims=True, initial=0)
        else:
            kept = np.power(np.power(a, p).sum(axis=self.axes, keepdims=True), 1 / p)
        self.save_for_backward(x, kept)
        return kept if self.keepdim else kept.reshape(tuple(n for i, n in enumerate(x.shape) if i not in self.axes))

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        x, kept = self.saved
        p = self.p
        safe = np.where(kept == 0, 1, kept)
        if p == 2:
            scale = x / safe
        elif p == 1:
            scale = np.sign(x)
        elif p == np.inf:
            winners = np.abs(x) == kept
            scale = np.sign(x) * winners / winners.sum(axis=self.axes, keepdims=True)
        else:
            scale = np.sign(x) * np.power(np.abs(x) / safe, p - 1)
        scale = np.where(kept == 0, 0, scale)  # PyTorch: the gradient of a zero norm is 0
        return ((self.expand(g) * scale).astype(g.dtype, copy=False),)

    def name(self) -> str:
        return "LinalgVectorNormBackward0"


class LogSumExp(_Reduction):
    """z = log(sum(exp(x), dim)), computed without overflow."""

    __slots__ = ()
    rule = rules.NONE

    def forward(self, x: NDArray[Any], *, dim: Dims = None, keepdim: bool = False) -> NDArray[Any]:
        self.setup(x, dim, keepdim)
        m = np.amax(x, axis=self.axes, keepdims=True)
        m = np.where(np.isfinite(m), m, 0)
        kept = m + np.log(np.exp(x - m).sum(axis=self.axes, keepdims=True))
        self.save_for_backward(x, kept)
        return kept if self.keepdim else kept.reshape(tuple(n for i, n in enumerate(x.shape) if i not in self.axes))

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        x, kept = self.saved
        return ((self.expand(g) * np.exp(x - kept)).astype(g.dtype, copy=False),)

    def name(self) -> str:
        return "LogsumexpBackward0"
