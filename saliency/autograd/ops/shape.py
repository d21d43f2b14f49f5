"""Ops that move elements without computing on them: reshape, transpose, permute, squeeze,
unsqueeze, expand, indexing, cat, stack, pad. Their VJPs move the gradient back."""
from typing import Any, Sequence

import numpy as np
from numpy.typing import NDArray

from .. import rules
from ..._typing import Index, IntArray, Shape
from ..node import Function, unbroadcast
from ..geometry import Box, Shapes, elementwise_window, per_axis, shifted, slice_axis, spatial, whole_window
from ..patch import Patch
from .reduce import Dims, normalize_dims


def _lead(g: NDArray[Any], node: Function) -> tuple[slice, ...]:
    return (slice(None),) * node.seed_ndim(g)


def regroup_window(node: Function, box: Box, shapes: Shapes) -> tuple[Box | None, ...]:
    """The window rule of reshape/view/flatten/squeeze/unsqueeze: a C-order reshape keeps a position
    when the last two dimensions are the same before and after; otherwise it mixes positions."""
    assert shapes[0] is not None  # the op's one input, which the gradient reaches
    same = spatial(shapes[0]) == spatial(node.out_shape) and len(shapes[0]) >= 2 and len(node.out_shape) >= 2
    return elementwise_window(node, box, shapes) if same else whole_window(node, box, shapes)


def reshaped_window(node: "Reshape | Squeeze | Unsqueeze", p: Patch) -> tuple[Patch | NDArray[Any]] | None:
    """The cropped VJP of reshape/view/flatten/squeeze/unsqueeze where `regroup_window` keeps the map:
    the windows' lead dimensions take the input's shape. Dense where the map is regrouped."""
    in_shape = node.in_shape
    if spatial(in_shape) != spatial(node.out_shape) or len(in_shape) < 2:
        return None
    return (p.like(p.data.reshape((len(p.origins),) + in_shape[:-2] + p.size)),)


def _reorder_window(node: Function, box: Box, shapes: Shapes, order: Sequence[int]) -> tuple[Box | None, ...]:
    """Transpose/permute, output dimension j being input dimension order[j]: the map kept, its rows
    and columns swapped, or mixed with other dimensions."""
    nd = len(order)
    if nd < 2 or tuple(order[-2:]) == (nd - 2, nd - 1):
        return elementwise_window(node, box, shapes)
    if tuple(order[-2:]) == (nd - 1, nd - 2):
        assert shapes[0] is not None  # the op's one input, which the gradient reaches
        return (Box(box.c0, box.r0, box.c1, box.r1).clip(shapes[0]),)
    return whole_window(node, box, shapes)


def _reordered_window(p: Patch, inverse: Sequence[int]) -> tuple[Patch | NDArray[Any]] | None:
    """The cropped VJP of transpose/permute, `inverse` taking the output's dimensions back to the
    input's (as in `backward`): the windows' lead dimensions reordered, and the windows, their
    origins and the map transposed when rows and columns swap. Dense where the map mixes with the
    lead dimensions."""
    nd = len(inverse)
    tail = tuple(inverse[-2:])
    if tail not in ((nd - 2, nd - 1), (nd - 1, nd - 2)):
        return None
    data = np.ascontiguousarray(p.data.transpose((0,) + tuple(1 + i for i in inverse)))
    if tail == (nd - 2, nd - 1):
        return (p.like(data),)
    return (p.like(data, np.ascontiguousarray(p.origins[:, ::-1]), p.map_size[::-1]),)


class Reshape(Function):
    """z = x.reshape(shape) (also view and flatten); the node is ViewBackward0, as in PyTorch."""

    __slots__ = ("in_shape",)
    in_shape: Shape
    rule = rules.ROUTE
    window_rule = regroup_window
    backward_window = reshaped_window

    def forward(self, x: NDArray[Any], *, shape: Sequence[int]) -> NDArray[Any]:
        self.in_shape = x.shape
        try:
            return x.reshape(shape)
        except ValueError:
            raise ValueError(f"cannot reshape a tensor of shape {x.shape} ({x.size} elements) into shape "
                             f"{tuple(shape)}; the number of elements must stay the same") from None

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        return (g.reshape(g.shape[:self.seed_ndim(g)] + self.in_shape),)

    def name(self) -> str:
        return "ViewBackward0"


class Transpose(Function):
    """z = x.transpose(dim0, dim1); `x.t()` leaves TBackward0."""

    __slots__ = ("dims", "short")
    dims: tuple[int, int]
    short: bool
    rule = rules.ROUTE

    def forward(self, x: NDArray[Any], *, dim0: int, dim1: int, short: bool = False) -> NDArray[Any]:
        d0, d1 = (normalize_dims(d, x.ndim)[0] if x.ndim else 0 for d in (dim0, dim1))
        self.dims, self.short = (d0, d1), short
        return np.swapaxes(x, d0, d1) if x.ndim else x

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        if not self.out_shape:
            return (g,)
        seed_ndim = self.seed_ndim(g)
        return (np.swapaxes(g, seed_ndim + self.dims[0], seed_ndim + self.dims[1]),)

    def backward_window(self, p: Patch) -> tuple[Patch | NDArray[Any]] | None:
        return _reordered_window(p, self._order())

    def window_rule(self, box: Box, shapes: Shapes) -> tuple[Box | None, ...]:
        return _reorder_window(self, box, shapes, self._order())

    def _order(self) -> list[int]:
        """The input dimension of each output dimension (a swap is its own inverse)."""
        order = list(range(len(self.out_shape)))
        if order:
            d0, d1 = self.dims
            order[d0], order[d1] = d1, d0
        return order

    def name(self) -> str:
        return "TBackward0" if self.short else "TransposeBackward0"


class Permute(Function):
    """z = x.permute(dims)"""

    __slots__ = ("inverse",)
    inverse: tuple[int, ...]
    rule = rules.ROUTE

    def forward(self, x: NDArray[Any], *, dims: Sequence[int]) -> NDArray[Any]:
        order = [normalize_dims(d, x.ndim)[0] for d in dims]
        if sorted(order) != list(range(x.ndim)):
            raise ValueError(f"permute needs each of the {x.ndim} dimensions exactly once, got {tuple(dims)}")
        self.inverse = tuple(int(i) for i in np.argsort(order))
        return x.transpose(order)

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        seed_ndim = self.seed_ndim(g)
        return (g.transpose(tuple(range(seed_ndim)) + tuple(seed_ndim + i for i in self.inverse)),)

    def backward_window(self, p: Patch) -> tuple[Patch | NDArray[Any]] | None:
        return _reordered_window(p, self.inverse)

    def window_rule(self, box: Box, shapes: Shapes) -> tuple[Box | None, ...]:
        order = [0] * len(self.inverse)
        for i, j in enumerate(self.inverse):
            order[j] = i
        return _reorder_window(self, box, shapes, order)


class Squeeze(Function):
    """z = x.squeeze(dim): drops size-1 dimensions (all of them when dim is None)."""

    __slots__ = ("in_shape", "variant")
    in_shape: Shape
    variant: int
    rule = rules.ROUTE
    window_rule = regroup_window
    backward_window = reshaped_window

    def forward(self, x: NDArray[Any], *, dim: Dims = None) -> NDArray[Any]:
        # PyTorch's overloads: SqueezeBackward0 (all), 1 (one dim), 2 (a tuple of dims)
        self.in_shape = x.shape
        self.variant = 0 if dim is None else (1 if isinstance(dim, (int, np.integer)) else 2)
        axes = normalize_dims(dim, x.ndim)
        return x.reshape(tuple(n for i, n in enumerate(x.shape) if not (i in axes and n == 1)))

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        return (g.reshape(g.shape[:self.seed_ndim(g)] + self.in_shape),)

    def name(self) -> str:
        return f"SqueezeBackward{self.variant}"


class Unsqueeze(Function):
    """z = x.unsqueeze(dim): inserts a size-1 dimension."""

    __slots__ = ("in_shape",)
    in_shape: Shape
    rule = rules.ROUTE
    window_rule = regroup_window
    backward_window = reshaped_window

    def forward(self, x: NDArray[Any], *, dim: int) -> NDArray[Any]:
        self.in_shape = x.shape
        (axis,) = normalize_dims(dim, x.ndim + 1)
        return np.expand_dims(x, axis)

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        return (g.reshape(g.shape[:self.seed_ndim(g)] + self.in_shape),)


class Expand(Function):
    """z = x.expand(shape) / broadcast_to(x, shape): a broadcast view; -1 keeps a size."""

    __slots__ = ("in_shape",)
    in_shape: Shape
    rule = rules.ROUTE
    window_rule = elementwise_window

    def forward(self, x: NDArray[Any], *, shape: Sequence[int]) -> NDArray[Any]:
        self.in_shape = x.shape
        shape = tuple(shape)
        offset = len(shape) - x.ndim
        target = tuple(x.shape[i - offset] if n == -1 and i >= offset else n for i, n in enumerate(shape))
        try:
            return np.broadcast_to(x, target)
        except ValueError:
            raise ValueError(f"cannot expand a tensor of shape {x.shape} to shape {shape}; "
                             f"only dimensions of size 1 can grow, and new dimensions go in front") from None

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        return (unbroadcast(g, self.in_shape, self.seed_ndim(g)),)

    def backward_window(self, p: Patch) -> tuple[Patch | NDArray[Any]] | None:
        """The map not expanded: the windows summed over the expanded lead dimensions, as `backward`
        sums. Dense when rows or columns are expanded: every one of them adds into row or column 0."""
        if len(self.in_shape) < 2 or self.in_shape[-2:] != self.out_shape[-2:]:
            return None
        return (p.like(unbroadcast(p.data, self.in_shape[:-2] + p.size, 1)),)


def _is_basic(item: object) -> bool:
    return item is None or item is Ellipsis or isinstance(item, (slice, int, np.integer))


class GetItem(Function):
    """z = x[key] with basic (ints, slices, None, ...) or integer-array / boolean indexing.

    As in PyTorch (unlike NumPy), ints, slices and None act first, as a view; the integer arrays
    then index the dimensions left, so an int never joins the arrays: x[1, :, [0, 2]] is (n, 2).
    """

    __slots__ = ("pre", "post", "in_shape", "moved", "last")
    pre: tuple[Any, ...]  # the basic entries (ints, slices, None, ...): a view
    post: tuple[Any, ...] | None  # then the integer arrays (slices between them) for the dimensions left, or None
    in_shape: Shape
    moved: bool
    last: str
    rule = rules.ROUTE

    def forward(self, x: NDArray[Any], *, key: Any) -> NDArray[Any]:  # an Index, or a tuple of them
        single_slice = isinstance(key, slice)
        key = tuple(_as_int(k) for k in (key if isinstance(key, tuple) else (key,)))
        self.in_shape = x.shape
        if all(_is_basic(k) for k in key):
            self.pre, self.post, self.moved = key, None, False
            self.last = "Slice" if single_slice else _last_basic_step(key, x.shape)
        else:
            self.pre, self.post = _split_advanced(key)
            self.last = "Index"
            # NumPy puts the indexed dimensions first when array indices are separated by a slice
            positions = [i for i, k in enumerate(self.post) if not _is_basic(k)]
            self.moved = positions != list(range(positions[0], positions[-1] + 1))
        try:
            out = x[self.pre]
            return out if self.post is None else out[self.post]
        except IndexError as exc:
            raise IndexError(f"index {key!r} is out of range for a tensor of shape {x.shape}: {exc}") from None

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        seed_ndim = self.seed_ndim(g)
        lead = (slice(None),) * seed_ndim
        gx = np.zeros(g.shape[:seed_ndim] + self.in_shape, dtype=g.dtype)
        if self.post is None:
            gx[lead + self.pre] = g
            return (gx,)
        if self.moved and seed_ndim:
            # the indexed dimensions come first in x[key]; with seed dimensions in front of
            # x they still do, so move the seed dimensions behind them
            na = np.broadcast(*[k for k in self.post if not _is_basic(k)]).ndim
            g = np.moveaxis(g, tuple(range(seed_ndim)), tuple(range(na, na + seed_ndim)))
        np.add.at(gx[lead + self.pre], lead + self.post, g)  # gx[lead + pre] is a view of gx
        return (gx,)

    def backward_window(self, p: Patch) -> tuple[Patch | NDArray[Any]] | None:
        """Basic indexing that keeps both map axes as slices of step 1 (a crop, with any basic index of
        the lead dimensions): the windows move by the slices' starts, the lead axes are scattered as in
        `backward`."""
        crop = self._crop()
        if crop is None:
            return None
        lead_key, starts = crop
        data = np.zeros((len(p.origins),) + self.in_shape[:-2] + p.size, p.dtype)
        data[(slice(None),) + lead_key] = p.data
        return (p.like(data, p.origins + np.array(starts), self.in_shape[-2:]),)

    def window_rule(self, box: Box, shapes: Shapes) -> tuple[Box | None, ...]:
        """Basic indexing (ints, slices, None, ...): slices of the last two dimensions shift the box;
        anything else that touches them (an int, advanced indexing) mixes positions."""
        (in_shape,) = shapes
        assert in_shape is not None  # the op's one input, which the gradient reaches
        nd = len(in_shape)
        if self.post is not None or nd < 2:
            return whole_window(self, box, shapes)
        key = list(self.pre)
        used = sum(1 for k in key if k is not None and k is not Ellipsis)
        dots = [i for i, k in enumerate(key) if k is Ellipsis]
        if dots:
            key[dots[0]:dots[0] + 1] = [slice(None)] * (nd - used)
        key += [slice(None)] * (nd - sum(1 for k in key if k is not None))
        # (input dimension, slice) of each output dimension; (None, None) for a new one
        kept: list[tuple[int, slice] | tuple[None, None]] = []
        d = 0
        for k in key:
            if k is None:
                kept.append((None, None))
                continue
            if isinstance(k, slice):
                kept.append((d, k))
            d += 1
        if len(kept) < 2 or (kept[-2][0], kept[-1][0]) != (nd - 2, nd - 1):
            return whole_window(self, box, shapes)
        (_, rs), (_, cs) = kept[-2:]
        assert rs is not None and cs is not None  # the map's two input dimensions, checked above
        return (per_axis(box, lambda a, b: slice_axis(a, b, rs, in_shape[-2]),
                         lambda a, b: slice_axis(a, b, cs, in_shape[-1])),)

    def _crop(self) -> tuple[tuple[Any, ...], tuple[int, int]] | None:
        """(key of the lead dimensions, (row start, col start)) when the key is a crop, else None."""
        nd = len(self.in_shape)
        if self.post is not None or nd < 3 or len(self.out_shape) < 3 or any(k is None for k in self.pre):
            return None
        key = list(self.pre)
        if Ellipsis in key:
            i = key.index(Ellipsis)
            key[i:i + 1] = [slice(None)] * (nd - len(key) + 1)
        key += [slice(None)] * (nd - len(key))
        *lead, rows, cols = key
        if not all(isinstance(k, slice) for k in (rows, cols)):
            return None
        (r0, _, rs), (c0, _, cs) = rows.indices(self.in_shape[-2]), cols.indices(self.in_shape[-1])
        if rs != 1 or cs != 1:
            return None
        return tuple(lead) + (slice(None), slice(None)), (r0, c0)

    def name(self) -> str:
        return f"{self.last}Backward0"


def _as_int(k: Any) -> Any:
    """A 0-d integer array (a 0-d index tensor) selects, as an int does."""
    if isinstance(k, np.ndarray) and k.ndim == 0 and k.dtype.kind in "iu":
        return int(k)
    return k


def _split_advanced(key: Sequence[Index]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """`key` as (pre, post): its basic entries as one view-making index, then the integer arrays
    (a boolean mask as the arrays of its nonzero positions) for the dimensions pre leaves."""
    pre: list[Any] = []
    post: list[Any] = []
    for k in key:
        if _is_basic(k):
            pre.append(k)
            if not isinstance(k, (int, np.integer)):  # a slice, None or ... keeps its dimensions
                post.append(Ellipsis if k is Ellipsis else slice(None))
            continue
        k = np.asarray(k)
        if k.dtype == bool:
            pre.extend([slice(None)] * k.ndim)
            post.extend(np.nonzero(k))
        elif k.dtype.kind in "iu":
            pre.append(slice(None))
            post.append(k)
        else:
            raise IndexError(f"tensors used as indices must be integer or boolean, got dtype {k.dtype}")
    return tuple(pre), tuple(post)


def _last_basic_step(key: Sequence[Index], shape: Shape) -> str:
    """PyTorch applies a basic index one entry at a time (select, slice, unsqueeze) and skips
    full slices; the node it leaves last names the whole indexing: 'Alias' if nothing was done."""
    last = "Alias"
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    dim = 0
    for k in key:
        if k is Ellipsis:
            dim += len(shape) - used
        elif k is None:
            last = "Unsqueeze"
        elif isinstance(k, slice):
            if dim < len(shape) and k.indices(shape[dim]) != (0, shape[dim], 1):
                last = "Slice"
            dim += 1
        else:
            last = "Select"
            dim += 1
    return last


class Cat(Function):
    """z = cat(tensors, dim)"""

    __slots__ = ("axis", "bounds")
    axis: int
    bounds: IntArray  # where each input's block ends along axis (but the last)
    rule = rules.ROUTE

    def forward(self, *xs: NDArray[Any], dim: int = 0) -> NDArray[Any]:
        if not xs:
            raise ValueError("cat needs at least one tensor, got an empty sequence")
        (self.axis,) = normalize_dims(dim, xs[0].ndim)
        try:
            out = np.concatenate(xs, axis=self.axis)
        except ValueError:
            shapes = ", ".join(str(x.shape) for x in xs)
            raise ValueError(f"cat along dim {dim}: shapes {shapes} must match in every other dimension") from None
        self.bounds = np.cumsum([x.shape[self.axis] for x in xs])[:-1]
        return out

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any], ...]:
        seed_ndim = self.seed_ndim(g)
        return tuple(np.split(g, self.bounds, axis=seed_ndim + self.axis))

    def backward_window(self, p: Patch) -> tuple[Patch | NDArray[Any], ...] | None:
        """Along a dimension before the map (channels): each input gets its slice of the windows."""
        if self.axis >= len(self.out_shape) - 2:
            return None
        return tuple(p.like(np.ascontiguousarray(d)) for d in np.split(p.data, self.bounds, axis=1 + self.axis))

    def window_rule(self, box: Box, shapes: Shapes) -> tuple[Box | None, ...]:
        """Along a dimension before the map: the same box in every input; along rows or columns:
        each input gets the part of the box that falls on its block."""
        nd = len(self.out_shape)
        if self.axis < nd - 2:
            return elementwise_window(self, box, shapes)
        out: list[Box | None] = []
        # each block's extent from the bounds (an input without a gradient has no shape in `shapes`)
        ends = [*self.bounds.tolist(), self.out_shape[self.axis]]
        start = 0
        for end in ends:
            n = end - start
            if self.axis == nd - 2:
                rows = shifted(box.r0, box.r1, start, n)
                out.append(None if rows is None else Box(rows[0], box.c0, rows[1], box.c1))
            else:
                cols = shifted(box.c0, box.c1, start, n)
                out.append(None if cols is None else Box(box.r0, cols[0], box.r1, cols[1]))
            start += n
        return tuple(out)


class Stack(Function):
    """z = stack(tensors, dim)"""

    __slots__ = ("axis",)
    axis: int
    rule = rules.ROUTE

    def forward(self, *xs: NDArray[Any], dim: int = 0) -> NDArray[Any]:
        if not xs:
            raise ValueError("stack needs at least one tensor, got an empty sequence")
        (self.axis,) = normalize_dims(dim, xs[0].ndim + 1)
        try:
            return np.stack(xs, axis=self.axis)
        except ValueError:
            shapes = ", ".join(str(np.shape(x)) for x in xs)
            raise ValueError(f"stack needs tensors of equal shape, got {shapes}") from None

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any], ...]:
        lead = _lead(g, self) + (slice(None),) * self.axis
        return tuple(g[lead + (i,)] for i in range(len(self.needs_input_grad)))

    def backward_window(self, p: Patch) -> tuple[Patch | NDArray[Any], ...] | None:
        """Along a dimension before the map: each input gets its slice of the windows."""
        if self.axis > len(self.out_shape) - 3:
            return None
        lead = (slice(None),) * (1 + self.axis)
        return tuple(p.like(np.ascontiguousarray(p.data[lead + (i,)])) for i in range(len(self.needs_input_grad)))

    def window_rule(self, box: Box, shapes: Shapes) -> tuple[Box | None, ...]:
        if self.axis <= len(self.out_shape) - 3:
            return elementwise_window(self, box, shapes)
        return whole_window(self, box, shapes)


class Pad(Function):
    """z = pad(x, pad, value): constant padding; `pad` lists (before, after) pairs from the last
    dimension backwards, as PyTorch's F.pad. A negative size crops that side instead."""

    __slots__ = ("window", "in_window", "x_shape")
    window: tuple[slice, ...]  # where the kept input cells land in the output, per dimension
    in_window: tuple[slice, ...]  # the input cells kept (negative sizes crop), per dimension
    x_shape: Shape
    rule = rules.ROUTE

    def forward(self, x: NDArray[Any], *, pad: Sequence[int], value: float = 0.0) -> NDArray[Any]:
        pad = tuple(int(p) for p in pad)
        if len(pad) % 2 or len(pad) // 2 > x.ndim:
            raise ValueError(f"pad must hold (before, after) pairs for at most {x.ndim} dimensions, got {pad}")
        widths = [(0, 0)] * x.ndim
        for i in range(len(pad) // 2):
            widths[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
        for d, ((b, a), n) in enumerate(zip(widths, x.shape)):
            if max(-b, 0) + max(-a, 0) > n:
                raise ValueError(f"pad ({b}, {a}) of dimension {d} crops more than its {n} entries")
        # the input cells kept (negative sizes crop) and where they land in the output
        self.in_window = tuple(slice(max(-b, 0), n - max(-a, 0)) for (b, a), n in zip(widths, x.shape))
        self.window = tuple(slice(max(b, 0), max(b, 0) + (s.stop - s.start))
                            for (b, _), s in zip(widths, self.in_window))
        self.x_shape = x.shape
        return np.pad(x[self.in_window], [(max(b, 0), max(a, 0)) for b, a in widths], mode="constant",
                      constant_values=value)

    def _cropped(self) -> bool:
        return any(s.start != 0 or s.stop != n for s, n in zip(self.in_window, self.x_shape))

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        lead = _lead(g, self)
        if not self._cropped():
            return (g[lead + self.window],)
        dx = np.zeros(g.shape[:len(lead)] + self.x_shape, g.dtype)
        dx[lead + self.in_window] = g[lead + self.window]
        return (dx,)

    def backward_window(self, p: Patch) -> tuple[Patch | NDArray[Any]] | None:
        """The windows move by the padding before each map axis; cells that fall on the padding are
        dropped (zeroed), and the lead dimensions are cut back (or filled out) as in `backward`."""
        if len(self.out_shape) < 3:
            return None
        rows, cols = self.window[-2:]
        lead_in, lead_out = self.in_window[:-2], self.window[:-2]
        data = np.zeros((len(p.data),) + self.x_shape[:-2] + p.size, p.dtype)  # `moved` zeroes cells in place
        data[(slice(None),) + lead_in] = p.data[(slice(None),) + lead_out]
        shift = np.array([rows.start - self.in_window[-2].start, cols.start - self.in_window[-1].start])
        return (p.moved(data, p.origins - shift, self.x_shape[-2:]),)

    def window_rule(self, box: Box, shapes: Shapes) -> tuple[Box | None, ...]:
        """The box moves back by the padding before each map axis; cells on the padding read nothing."""
        assert shapes[0] is not None  # the op's one input, which the gradient reaches
        if len(shapes[0]) < 2:
            return whole_window(self, box, shapes)
        (rs, cs), (ri, ci) = self.window[-2:], self.in_window[-2:]
        rows = shifted(box.r0, box.r1, rs.start, rs.stop - rs.start)
        cols = shifted(box.c0, box.c1, cs.start, cs.stop - cs.start)
        if rows is None or cols is None:
            return (None,)
        return (Box(rows[0] + ri.start, cols[0] + ci.start, rows[1] + ri.start, cols[1] + ci.start),)

    def name(self) -> str:
        return "ConstantPadNdBackward0"
