"""Padding and rolling by reading the input again: reflect, replicate and circular (F.pad's other
modes), and roll (a cyclic shift).

Each padded axis has an index table: output j reads input idx[j] (a reflection about the edge cells,
the nearest edge cell, or a wrap-around), so the forward is a gather per axis and the VJP adds each
gradient slice back into the cell it was read from. Negative sizes crop that side first, as PyTorch
does. Window rules and the cropped VJP use the same tables; a roll's map axes have tables too
(output j reads input (j - shift) mod n), while its forward and VJP are plain rolls.
"""
from typing import Any, Sequence

import numpy as np
from numpy.typing import DTypeLike, NDArray

from .. import rules
from ..._typing import IntArray, Shape
from ...kernels import resize as _resize
from ..geometry import Box, Shapes, table_window, whole_window
from ..node import Function
from ..patch import Patch

# one axis's resampling table (i0, i1, l0, l1) of `_table`: each output cell reads i0 with weight 1
_Table = tuple[IntArray, IntArray, NDArray[Any], NDArray[Any]]

_NAMES = {"reflect": "ReflectionPad{}DBackward0", "replicate": "ReplicationPad{}DBackward0"}


def pad_index(n: int, before: int, after: int, mode: str) -> IntArray:
    """The input cell (of n) that each output cell of one axis reads, for (before, after) padding."""
    if mode == "circular":
        # PyTorch crops first, then wraps around what is left
        c0, c1 = max(-before, 0), max(-after, 0)
        m, pb, pa = n - c0 - c1, max(before, 0), max(after, 0)
        if m < 0:
            raise ValueError(f"negative padding ({before}, {after}) crops more than the {n} entries of the dimension")
        if pb > m or pa > m:
            raise ValueError(f"circular padding ({before}, {after}) wraps around more than once: each side may add at "
                             f"most the {m} entries that the dimension keeps")
        return c0 + (np.arange(m + pb + pa) - pb) % max(m, 1)
    size = n + before + after
    if size < 1:
        raise ValueError(f"input of size {n} is too small for padding ({before}, {after}): the output size would be "
                         f"{size}")
    t = np.arange(size) - before  # the position in input coordinates
    if mode == "replicate":
        if n < 1:
            raise ValueError("replicate padding needs a non-empty dimension")
        return np.clip(t, 0, n - 1)
    if before >= n or after >= n:
        raise ValueError(f"reflect padding ({before}, {after}) must be less than the size {n} of the dimension")
    t = np.abs(t)
    return np.where(t > n - 1, 2 * (n - 1) - t, t)


def _table(idx: IntArray, dtype: DTypeLike) -> _Table:
    return idx, idx, np.ones(len(idx), dtype), np.zeros(len(idx), dtype)


class TablePad(Function):
    """z = F.pad(x, pad, mode) for mode 'reflect', 'replicate' or 'circular' over the last
    len(pad) // 2 dimensions (1, 2 or 3)."""

    __slots__ = ("mode", "x_shape", "index")  # index: {axis (negative): table}
    mode: str
    x_shape: Shape
    index: dict[int, IntArray]
    rule = rules.ROUTE

    def forward(self, x: NDArray[Any], *, pad: Sequence[int], mode: str) -> NDArray[Any]:
        self.mode, self.x_shape = mode, x.shape
        self.index = {}
        for i in range(len(pad) // 2):
            self.index[-1 - i] = pad_index(x.shape[-1 - i], int(pad[2 * i]), int(pad[2 * i + 1]), mode)
        y = x
        for axis, idx in self.index.items():
            y = y.take(idx, axis=axis)
        return y

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        for axis, idx in self.index.items():
            g = _resize.gather_grad_axis(g, idx, self.x_shape[axis], axis)
        return (g,)

    def _map_tables(self, dtype: DTypeLike) -> tuple[_Table, ...]:
        """The (rows, cols) tables of the last two dimensions (the identity where one is not padded)."""
        h, w = self.out_shape[-2:]
        return tuple(_table(self.index.get(axis, np.arange(n)), dtype) for axis, n in ((-2, h), (-1, w)))

    def backward_window(self, p: Patch) -> tuple[Patch | NDArray[Any]] | None:
        """Each window goes back to the bounding box of the cells its cells read (per axis), the
        gradient added into them; a padded third-to-last dimension is folded back as in `backward`."""
        if len(self.out_shape) < 3:
            return None
        rows, cols = self._map_tables(p.dtype)
        dx, origins = _resize.table_window_grad(p.data, p.origins, p.map_size, rows, cols)
        if -3 in self.index:
            dx = _resize.gather_grad_axis(dx, self.index[-3], self.x_shape[-3], -3)
        return (p.like(dx, origins, self.x_shape[-2:]),)

    def window_rule(self, box: Box, shapes: Shapes) -> tuple[Box | None]:
        """Per axis, the cells that the box's cells read: mirrored, clamped or wrapped intervals."""
        in_shape = shapes[0]
        assert in_shape is not None  # the op's one input, which the gradient reaches
        if len(in_shape) < 2:
            return (Box.whole(in_shape),)
        return (table_window(box, *self._map_tables(np.float64)),)

    def name(self) -> str:
        if self.mode == "circular":
            return "CopySlices"  # PyTorch writes the wrapped slices into the output in place
        return _NAMES[self.mode].format(len(self.index))


class Roll(Function):
    """z = roll(x, shifts, dims): along each dimension of `dims`, output i is input (i - shift) mod n
    (a dimension listed twice moves by the sum); dims None rolls the flattened tensor."""

    __slots__ = ("shifts", "dims")
    shifts: tuple[int, ...]
    dims: tuple[int, ...] | None
    rule = rules.ROUTE

    def forward(self, x: NDArray[Any], *, shifts: tuple[int, ...], dims: tuple[int, ...] | None) -> NDArray[Any]:
        self.shifts, self.dims = shifts, dims
        if dims is None:
            return np.roll(x.reshape(-1), shifts[0]).reshape(x.shape)
        return np.roll(x, shifts, axis=dims)

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        """The opposite roll."""
        lead = self.seed_ndim(g)
        back = tuple(-s for s in self.shifts)
        if self.dims is None:
            return (np.roll(g.reshape(g.shape[:lead] + (-1,)), back[0], axis=-1).reshape(g.shape),)
        return (np.roll(g, back, axis=tuple(lead + d for d in self.dims)),)

    def _map_tables(self, dtype: DTypeLike) -> tuple[_Table, ...]:
        """The (rows, cols) tables of the last two dimensions (the identity where one is not rolled)."""
        assert self.dims is not None  # a flattened roll has no map tables (its callers check)
        nd = len(self.out_shape)
        shift: dict[int, int] = {}
        for s, d in zip(self.shifts, self.dims):
            shift[d] = shift.get(d, 0) + s
        return tuple(_table((np.arange(n) - shift.get(axis, 0)) % max(n, 1), dtype)
                     for axis, n in ((nd - 2, self.out_shape[-2]), (nd - 1, self.out_shape[-1])))

    def backward_window(self, p: Patch) -> tuple[Patch | NDArray[Any]] | None:
        """The windows go back by the shift of each rolled map axis, to the bounding box of the cells
        they read (the whole axis for a window that wraps around), the lead dimensions rolled back as
        in `backward`. Dense for a flattened roll, which mixes rows."""
        nd = len(self.out_shape)
        if self.dims is None or nd < 3:
            return None
        lead = [(s, d) for s, d in zip(self.shifts, self.dims) if d < nd - 2]
        data = np.roll(p.data, [-s for s, _ in lead], axis=[1 + d for _, d in lead]) if lead else p.data
        if len(lead) == len(self.dims):
            return (p.like(data),)
        dx, origins = _resize.table_window_grad(data, p.origins, p.map_size, *self._map_tables(p.dtype))
        return (p.like(dx, origins),)

    def window_rule(self, box: Box, shapes: Shapes) -> tuple[Box | None, ...]:
        """Per map axis, the box moved back by the shift, or the whole axis where it wraps around (the
        box holding both pieces); a flattened roll moves cells across rows: the whole map."""
        assert shapes[0] is not None  # the op's one input, which the gradient reaches
        if self.dims is None or len(shapes[0]) < 2:
            return whole_window(self, box, shapes)
        return (table_window(box, *self._map_tables(np.float64)),)
