"""Window geometry: which input cells the output cells of an op read, per axis and per box.

A `Box` is rows r0:r1 and columns c0:c1 (end-exclusive) of the last two dimensions of a tensor, over
every leading (batch, channel, seed) index; a tensor with fewer than two dimensions is a 1 x n (or
1 x 1) map.

The per-axis functions map an output interval [lo, hi) to the input interval it reads: `reads`
before clipping to the input (what a `Patch` of windows needs: cells outside the map hold zeros),
`sliding`, `transposed` (its inverse), `nearest`, `bilinear` and `adaptive` clipped to the n input positions
(None when nothing is read). The box functions (`conv_window`, `pool_window`, ...) apply them to both axes.

The node rules (`whole_window`, `elementwise_window`, `first_input`) are what op classes name as
their `window_rule` (see `saliency.autograd.windows`). This module imports nothing from the ops.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional, Sequence, Tuple

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from .._typing import Size
    from .tensor import GradNode

# [lo, hi) along one axis, or None when nothing is read
Interval = Optional[Tuple[int, int]]
# an op's input shapes, None for an input that takes no gradient
Shapes = Sequence[Optional[Sequence[int]]]
# one resampling table per axis: (i0, i1, l0, l1), see `tabled`
Table = Sequence["NDArray[Any]"]


class Box(NamedTuple):
    """Rows r0:r1 and columns c0:c1 of a map (end-exclusive), as seeds.region's (r0, c0, r1, c1)."""

    r0: int
    c0: int
    r1: int
    c1: int

    @property
    def size(self) -> tuple[int, int]:
        """(rows, cols)."""
        return self.r1 - self.r0, self.c1 - self.c0

    @classmethod
    def whole(cls, shape: Sequence[int]) -> Box:
        """The whole map of a tensor of this shape."""
        h, w = spatial(shape)
        return cls(0, 0, h, w)

    def clip(self, shape: Sequence[int]) -> Box | None:
        """The part inside the map of a tensor of this shape, or None if that is empty."""
        h, w = spatial(shape)
        r0, c0, r1, c1 = max(self.r0, 0), max(self.c0, 0), min(self.r1, h), min(self.c1, w)
        return Box(r0, c0, r1, c1) if r0 < r1 and c0 < c1 else None

    def union(self, other: Box | None) -> Box:
        """The bounding box of both (None is empty)."""
        if other is None:
            return self
        return Box(min(self.r0, other.r0), min(self.c0, other.c0), max(self.r1, other.r1), max(self.c1, other.c1))


def spatial(shape: Sequence[int]) -> tuple[int, int]:
    """(H, W): the last two dimensions of `shape`, with 1 for a missing one."""
    h, w = ((1, 1) + tuple(shape))[-2:]
    return h, w


def pair(v: Size | NDArray[Any]) -> tuple[int, int]:
    """(rows, cols) of an int or of a (rows, cols) pair (tuple, list or 1-d array)."""
    if isinstance(v, (tuple, list)) or getattr(v, "ndim", 0) == 1:
        return int(v[0]), int(v[1])  # type: ignore[index]
    return int(v), int(v)  # type: ignore[arg-type]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# ---- per axis: an output interval [lo, hi) -> the input interval it reads ------------------------

def reads(lo: Any, hi: Any, kernel: int, stride: int = 1, padding: int = 0, dilation: int = 1) -> tuple[Any, Any]:
    """A sliding window (convolution, pooling), not clipped to the input: outputs lo..hi-1 read
    [lo*stride - padding, (hi - 1)*stride - padding + (kernel - 1)*dilation + 1). `lo` and `hi` may
    be arrays (one interval each)."""
    return lo * stride - padding, (hi - 1) * stride - padding + (kernel - 1) * dilation + 1


def sliding(lo: int, hi: int, n: int, kernel: int, stride: int = 1, padding: int = 0, dilation: int = 1) -> Interval:
    """A sliding window clipped to the input's n positions: output i reads input
    i*stride - padding + k*dilation for k < kernel, where that is inside 0..n-1. None if none is."""
    a, b = reads(lo, hi, kernel, stride, padding, dilation)
    if 0 <= a and b <= n:
        return (a, b) if lo < hi else None
    # the window reaches past the map: the first and last taps that land inside it (with a stride or
    # a dilation, the clipped interval need not start at 0 or end at n)
    first: int | None = None
    last: int | None = None
    for k in range(kernel):
        c = k * dilation - padding
        i_lo = max(lo, _ceil_div(-c, stride))
        i_hi = min(hi - 1, (n - 1 - c) // stride)
        if i_lo <= i_hi:
            a, b = i_lo * stride + c, i_hi * stride + c
            first = a if first is None else min(first, a)
            last = b if last is None else max(last, b)
    return None if first is None or last is None else (first, last + 1)


def transposed(lo: int, hi: int, n: int, kernel: int, stride: int = 1, padding: int = 0,
               dilation: int = 1) -> Interval:
    """The inverse of a sliding window (a transposed convolution): input j adds into outputs
    j*stride - padding + k*dilation for k < kernel, so outputs lo..hi-1 take values from the inputs j
    (of 0..n-1) with such an output in [lo, hi). None if none does."""
    first: int | None = None
    last: int | None = None
    for k in range(kernel):
        c = k * dilation - padding
        j_lo = max(0, _ceil_div(lo - c, stride))
        j_hi = min(n - 1, (hi - 1 - c) // stride)
        if j_lo <= j_hi:
            first = j_lo if first is None else min(first, j_lo)
            last = j_hi if last is None else max(last, j_hi)
    return None if first is None or last is None or lo >= hi else (first, last + 1)


def nearest(lo: int, hi: int, n: int, scale: int) -> Interval:
    """Nearest upsampling by an integer scale: output i reads input i // scale."""
    return (lo // scale, min((hi - 1) // scale + 1, n)) if lo < hi else None


def bilinear(lo: int, hi: int, n: int, scale: int) -> Interval:
    """Bilinear upsampling by an integer scale, align_corners=False: output i reads the source rows
    floor(s) and floor(s) + 1 (clipped to n - 1) around s = (i + 0.5) / scale - 0.5 >= 0; the
    second has weight 0 when s is a whole number."""
    if lo >= hi:
        return None

    def source(i: int) -> tuple[int, int]:  # s = t / (2 * scale) exactly, clamped at 0
        t = max(2 * i + 1 - scale, 0)
        return t // (2 * scale), t % (2 * scale)

    first = source(lo)[0]
    base, frac = source(hi - 1)
    return first, min(base + (frac != 0), n - 1) + 1


def adaptive(lo: int, hi: int, n: int, n_out: int) -> Interval:
    """Adaptive pooling: output i reads PyTorch's bin floor(i*n/n_out) .. ceil((i+1)*n/n_out)."""
    return ((lo * n) // n_out, _ceil_div(hi * n, n_out)) if lo < hi else None


def slice_axis(lo: int, hi: int, s: slice, n: int) -> tuple[int, int]:
    """Basic slicing by the slice `s` of n positions: outputs lo..hi-1 read these inputs."""
    start, _, step = s.indices(n)
    a, b = start + lo * step, start + (hi - 1) * step
    return min(a, b), max(a, b) + 1


def shifted(lo: int, hi: int, start: int, n: int) -> Interval:
    """A block of n inputs placed at `start` of the output (padding, cat): the inputs lo..hi-1 read."""
    a, b = max(lo, start), min(hi, start + n)
    return (a - start, b - start) if a < b else None


def tabled(lo: int, hi: int, table: Table) -> Interval:
    """A resampling by per-output tables (i0, i1, l0, l1): output i reads i0[i] with weight l0[i] and
    i1[i] with weight l1[i] (any order: resizing, reflection, wrapping). The interval from the least to
    the greatest input that outputs lo..hi-1 read with a non-zero weight; None if none does."""
    if lo >= hi:
        return None
    i0, i1, l0, l1 = (t[lo:hi] for t in table)
    taps = np.concatenate([i0[l0 != 0], i1[l1 != 0]])
    return (int(taps.min()), int(taps.max()) + 1) if taps.size else None


def per_axis(box: Box, rows: Callable[[int, int], Interval], cols: Callable[[int, int], Interval]) -> Box | None:
    """The Box of the row interval rows(r0, r1) and the column interval cols(c0, c1), or None."""
    r, c = rows(box.r0, box.r1), cols(box.c0, box.c1)
    return None if r is None or c is None else Box(r[0], c[0], r[1], c[1])


# ---- per op type: a box of the output -> a box of the input --------------------------------------

def conv_window(box: Box, in_shape: Sequence[int], kernel: Size, stride: Size = 1, padding: Size = 0,
                dilation: Size = 1) -> Box | None:
    """Convolution (any kernel, stride, padding, dilation; groups do not matter)."""
    (h, w), k, s, p, d = spatial(in_shape), pair(kernel), pair(stride), pair(padding), pair(dilation)
    return per_axis(box, lambda a, b: sliding(a, b, h, k[0], s[0], p[0], d[0]),
                    lambda a, b: sliding(a, b, w, k[1], s[1], p[1], d[1]))


def conv_transpose_window(box: Box, in_shape: Sequence[int], kernel: Size, stride: Size = 1, padding: Size = 0,
                          dilation: Size = 1) -> Box | None:
    """Transposed convolution (any kernel, stride, padding, dilation; output_padding and groups do not
    matter): the inputs whose taps land in the box."""
    (h, w), k, s, p, d = spatial(in_shape), pair(kernel), pair(stride), pair(padding), pair(dilation)
    return per_axis(box, lambda a, b: transposed(a, b, h, k[0], s[0], p[0], d[0]),
                    lambda a, b: transposed(a, b, w, k[1], s[1], p[1], d[1]))


def pool_window(box: Box, in_shape: Sequence[int], kernel: Size, stride: Size | None = None, padding: Size = 0,
                dilation: Size = 1) -> Box | None:
    """Max or average pooling (stride None: the kernel size); ceil_mode changes only how many outputs
    there are, not what one reads."""
    return conv_window(box, in_shape, kernel, kernel if stride is None else stride, padding, dilation)


def adaptive_pool_window(box: Box, in_shape: Sequence[int], out_shape: Sequence[int]) -> Box | None:
    """Adaptive (average or max) pooling to the output map of `out_shape`."""
    (h, w), (oh, ow) = spatial(in_shape), spatial(out_shape)
    return per_axis(box, lambda a, b: adaptive(a, b, h, oh), lambda a, b: adaptive(a, b, w, ow))


def upsample_window(box: Box, in_shape: Sequence[int], scale: int, mode: str = "nearest") -> Box | None:
    """Upsampling by an integer scale, 'nearest' or 'bilinear' (align_corners=False)."""
    rules: dict[str, Callable[[int, int, int, int], Interval]] = {"nearest": nearest, "bilinear": bilinear}
    (h, w), rule = spatial(in_shape), rules[mode]
    return per_axis(box, lambda a, b: rule(a, b, h, scale), lambda a, b: rule(a, b, w, scale))


def upsample_conv_window(box: Box, in_shape: Sequence[int], scale: int) -> Box | None:
    """The fused node: conv2d(upsample_nearest(x, scale), w 3x3, padding=1)."""
    h, w = spatial(in_shape)
    up = conv_window(box, (h * scale, w * scale), 3, 1, 1)
    return None if up is None else upsample_window(up, in_shape, scale, "nearest")


def table_window(box: Box, rows: Table, cols: Table) -> Box | None:
    """A separable resampling by per-axis tables (i0, i1, l0, l1) over the output's rows and columns
    (resizing to any size, reflect / replicate / circular padding): see `tabled`."""
    return per_axis(box, lambda a, b: tabled(a, b, rows), lambda a, b: tabled(a, b, cols))


def broadcast_window(box: Box, in_shape: Sequence[int]) -> Box | None:
    """Elementwise ops: the same box; a dimension of size 1 (broadcast) is read at 0."""
    h, w = spatial(in_shape)
    return Box(*(0 if h == 1 else box.r0, 0 if w == 1 else box.c0),
               *(1 if h == 1 else box.r1, 1 if w == 1 else box.c1)).clip(in_shape)


def trailing_kept(axes: Sequence[int], nd: int) -> bool:
    """True when reducing or mixing `axes` of an nd-dimensional tensor leaves the last two alone."""
    return nd >= 2 and nd - 2 not in axes and nd - 1 not in axes


# ---- node rules: (node, box of its output, input shapes) -> one box (or None) per input ----------
# An op class names one as its `window_rule` (or defines a method of that signature); the box is
# already clipped to the output, and an input shape is None where the input takes no gradient.

def whole_window(node: GradNode, box: Box, shapes: Shapes) -> tuple[Box | None, ...]:
    """Every input's whole map: the rule of an op that mixes positions (matmul, losses, a reshape to
    another map) or whose gradient can be anything (hooks)."""
    return tuple(None if s is None else Box.whole(s) for s in shapes)


def elementwise_window(node: GradNode, box: Box, shapes: Shapes) -> tuple[Box | None, ...]:
    """Output cell (r, c) reads cell (r, c) of each input (row or column 0 of a broadcast one)."""
    return tuple(None if s is None else broadcast_window(box, s) for s in shapes)


def first_input(window: Callable[[Sequence[int]], Box | None], shapes: Shapes) -> tuple[Box | None, ...]:
    """`window(shape)` for input 0 (None when it takes no gradient), the whole map for the others
    (weights, biases)."""
    first = None if shapes[0] is None else window(shapes[0])
    return (first,) + tuple(None if s is None else Box.whole(s) for s in shapes[1:])


def along_axes_window(axes: Sequence[int], node: GradNode, box: Box, shapes: Shapes) -> tuple[Box | None, ...]:
    """An op that mixes positions along `axes` only (a reduction, a softmax): the elementwise rule
    when those leave the last two dimensions alone, else the whole map."""
    kept = trailing_kept(axes, len(shapes[0]))  # type: ignore[arg-type]  # input 0 takes a gradient here
    return (elementwise_window if kept else whole_window)(node, box, shapes)
