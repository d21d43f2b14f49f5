"""Converters of the ops that move values: reshapes, transposes, slices, gathers, concatenation,
padding, resizing, and the constants and shapes of shape arithmetic.

A shape, an axis list or a pad amount must be a constant (an initializer, a Constant node, or
arithmetic on the input's Shape, which is folded for each input size); a value computed from the
image's values is an OnnxError naming the node.
"""
import math
from typing import Any, Callable, Literal, Sequence, TypeVar

import numpy as np
from numpy.typing import NDArray

from ...autograd.api import exported
from ...autograd.tensor import Tensor
from .. import functional as F
from ..module import Module
from .reader import DTYPES, Node, OnnxError
from .registry import Known, Op, Value, as_tensor, const, converter, first_image, ints

_M = TypeVar("_M", bound=Module)
_NpPadMode = Literal["constant", "reflect", "edge", "wrap"]  # np.pad's modes of ONNX's Pad

_ops = exported("saliency")
BIG = 1 << 62  # an end past any axis (ONNX writes INT64_MAX)


def _axis(axis: int, rank: int, node: Node) -> int:
    if not -rank <= axis < rank:
        raise OnnxError(f"{node.where()} ({node.op_type}): axis {axis} is out of range for a {rank}-D input")
    return axis % rank


# ---- reshapes -------------------------------------------------------------------------------

def _reshape_to(x: Value, shape: Sequence[int]) -> Value:
    return np.reshape(x, shape) if not isinstance(x, Tensor) else x.reshape(*shape)


@converter("Reshape", 5, 13, 14, 19, 21, 23, 24, 25)
def reshape(node: Node, known: Known) -> Op:
    allow_zero = int(node.attrs.get("allowzero", 0))

    def run(x: Value, shape: Value) -> Value:
        target = ints(shape, node, "shape")
        if not allow_zero:
            target = [x.shape[i] if d == 0 else d for i, d in enumerate(target)]
        return _reshape_to(x, target)
    return Op(node, run, known)


@converter("Flatten", 1, 9, 11, 13, 21, 23, 24, 25)
def flatten(node: Node, known: Known) -> Op:
    axis = int(node.attrs.get("axis", 1))

    def run(x: Value) -> Value:
        a = axis % len(x.shape) if axis < 0 else axis
        return _reshape_to(x, [math.prod(x.shape[:a]), math.prod(x.shape[a:])])
    return Op(node, run)


@converter("Transpose", 1, 13, 21, 23, 24, 25)
def transpose(node: Node, known: Known) -> Op:
    perm = node.attrs.get("perm")

    def run(x: Value) -> Value:
        p = list(range(len(x.shape)))[::-1] if perm is None else [int(v) for v in perm]
        return np.transpose(x, p) if not isinstance(x, Tensor) else x.permute(*p)
    return Op(node, run)


def _squeeze(node: Node, from_input: bool) -> Callable[..., Value]:
    def run(x: Value, axes: Value = None) -> Value:
        rank = len(x.shape)
        given = ints(axes, node, "axes") if from_input and axes is not None else node.attrs.get("axes")
        drop = {_axis(int(a), rank, node) for a in given} if given is not None else \
            {i for i, d in enumerate(x.shape) if d == 1}
        if any(x.shape[a] != 1 for a in drop):
            raise OnnxError(f"{node.where()} (Squeeze): an axis to squeeze is not of size 1 ({tuple(x.shape)})")
        return _reshape_to(x, [d for i, d in enumerate(x.shape) if i not in drop])
    return run


def _unsqueeze(node: Node, from_input: bool) -> Callable[..., Value]:
    def run(x: Value, axes: Value = None) -> Value:
        given = ints(axes, node, "axes") if from_input else node.attrs.get("axes", [])
        rank = len(x.shape) + len(given)
        new = sorted(_axis(int(a), rank, node) for a in given)
        shape = list(x.shape)
        for a in new:
            shape.insert(a, 1)
        return _reshape_to(x, shape)
    return run


converter("Squeeze", 1, 11)(lambda node, known: Op(node, _squeeze(node, False)))
converter("Squeeze", 13, 21, 23, 24, 25)(lambda node, known: Op(node, _squeeze(node, True), known))
converter("Unsqueeze", 1, 11)(lambda node, known: Op(node, _unsqueeze(node, False)))
converter("Unsqueeze", 13, 21, 23, 24, 25)(lambda node, known: Op(node, _unsqueeze(node, True), known))


@converter("Expand", 8, 13)
def expand(node: Node, known: Known) -> Op:
    def run(x: Value, shape: Value) -> Value:
        target = np.broadcast_shapes(tuple(x.shape), tuple(ints(shape, node, "shape")))
        if not isinstance(x, Tensor):
            return np.broadcast_to(x, target).copy()
        return x if tuple(x.shape) == target else x.broadcast_to(target)
    return Op(node, run, known)


@converter("Tile", 6, 13)
def tile(node: Node, known: Known) -> Op:
    def run(x: Value, repeats: Value) -> Value:
        reps = ints(repeats, node, "repeats")
        return np.tile(x, reps) if not isinstance(x, Tensor) else x.repeat(*reps)
    return Op(node, run, known)


@converter("DepthToSpace", 11, 13)
def depth_to_space(node: Node, known: Known) -> Op:
    b = int(node.attrs["blocksize"])
    mode = node.attrs.get("mode", "DCR")

    def run(x: Value) -> Value:
        n, c, h, w = x.shape
        if mode == "CRD":
            return F.pixel_shuffle(as_tensor(x), b)
        y = _reshape_to(x, [n, b, b, c // (b * b), h, w])
        y = y.permute(0, 3, 4, 1, 5, 2) if isinstance(y, Tensor) else np.transpose(y, (0, 3, 4, 1, 5, 2))
        return _reshape_to(y, [n, c // (b * b), h * b, w * b])
    return Op(node, run)


@converter("SpaceToDepth", 1, 13)
def space_to_depth(node: Node, known: Known) -> Op:
    b = int(node.attrs["blocksize"])

    def run(x: Value) -> Value:
        n, c, h, w = x.shape
        y = _reshape_to(x, [n, c, h // b, b, w // b, b])
        y = y.permute(0, 3, 5, 1, 2, 4) if isinstance(y, Tensor) else np.transpose(y, (0, 3, 5, 1, 2, 4))
        return _reshape_to(y, [n, c * b * b, h // b, w // b])
    return Op(node, run)


# ---- joining and cutting ----------------------------------------------------------------------

@converter("Concat", 4, 11, 13)
def concat(node: Node, known: Known) -> Op:
    axis = int(node.attrs["axis"])

    def run(*xs: Value) -> Value:
        parts = [v for v in xs if v is not None]
        kept = [v for v in parts if math.prod(v.shape) > 0] or parts[:1]  # an empty part adds nothing
        like = first_image(*kept)
        a = _axis(axis, len(kept[0].shape), node)
        if like is None:
            return np.concatenate([np.asarray(v._array if isinstance(v, Tensor) else v) for v in kept], axis=a)
        return _ops["cat"]([as_tensor(v, like) for v in kept], a)
    return Op(node, run, known)


def _split_sizes(node: Node, length: int, split: Sequence[int] | None, outputs: int) -> list[int]:
    if split is not None:
        sizes = [int(s) for s in split]
    elif "num_outputs" in node.attrs:
        n = int(node.attrs["num_outputs"])
        each = -(-length // n)
        sizes = [each] * (n - 1) + [length - each * (n - 1)]
    else:
        sizes = [length // outputs] * outputs
    if sum(sizes) != length:
        raise OnnxError(f"{node.where()} (Split): parts {sizes} do not add up to the axis's {length}")
    return sizes


def _split(node: Node, from_input: bool) -> Callable[..., tuple[Value, ...]]:
    axis = int(node.attrs.get("axis", 0))
    outputs = len(node.outputs)

    def run(x: Value, split: Value = None) -> tuple[Value, ...]:
        a = _axis(axis, len(x.shape), node)
        given = ints(split, node, "split") if from_input and split is not None else node.attrs.get("split")
        sizes = _split_sizes(node, x.shape[a], given, outputs)
        starts = np.cumsum([0] + sizes[:-1])
        index = (slice(None),) * a
        return tuple(x[index + (slice(int(s), int(s) + n),)] for s, n in zip(starts, sizes))
    return run


converter("Split", 2, 11)(lambda node, known: Op(node, _split(node, False)))
converter("Split", 13, 18)(lambda node, known: Op(node, _split(node, True), known))


def _slice_of(start: int, end: int, step: int, size: int) -> slice:
    """ONNX's clamping of one axis's start and end, as a Python slice."""
    start = start + size if start < 0 else start
    end = end + size if end < 0 else end
    if step > 0:
        return slice(min(max(start, 0), size), min(max(end, 0), size), step)
    start, end = min(max(start, 0), size - 1), min(max(end, -1), size - 1)
    return slice(start, None if end < 0 else end, step)


@converter("Slice", 10, 11, 13)
def slice_op(node: Node, known: Known) -> Op:
    def run(x: Value, starts: Value, ends: Value, axes: Value = None, steps: Value = None) -> Value:
        s, e = ints(starts, node, "starts"), ints(ends, node, "ends")
        rank = len(x.shape)
        ax = [_axis(a, rank, node) for a in ints(axes, node, "axes")] if axes is not None else list(range(len(s)))
        st = ints(steps, node, "steps") if steps is not None else [1] * len(s)
        if 0 in st:
            raise OnnxError(f"{node.where()} (Slice): a step of 0")
        index = [slice(None)] * rank
        for a, b, c, d in zip(ax, s, e, st):
            index[a] = _slice_of(b, min(c, BIG), d, x.shape[a])
        return x[tuple(index)]
    return Op(node, run, known)


@converter("Gather", 1, 11, 13)
def gather(node: Node, known: Known) -> Op:
    axis = int(node.attrs.get("axis", 0))

    def run(x: Value, indices: Value) -> Value:
        idx = np.asarray(const(indices, node, "indices")).astype(np.int64)
        a = _axis(axis, len(x.shape), node)
        size = x.shape[a]
        if np.any((idx < -size) | (idx >= size)):
            raise OnnxError(f"{node.where()} (Gather): an index is out of range for an axis of {size}")
        idx = np.where(idx < 0, idx + size, idx)
        if not isinstance(x, Tensor):
            return np.take(np.asarray(x), idx, axis=a)
        index = (slice(None),) * a
        if idx.ndim == 0:
            return x[index + (int(idx),)]
        flat = x[index + (idx.reshape(-1),)]
        return flat.reshape(*(tuple(x.shape[:a]) + idx.shape + tuple(x.shape[a + 1:])))
    return Op(node, run, known, keep=(1,))


# ---- padding and resizing ---------------------------------------------------------------------

def _pad(node: Node, from_input: bool) -> Callable[..., Value]:
    mode = node.attrs.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise OnnxError(f"{node.where()} (Pad): mode {mode!r} is not one ONNX defines")

    def run(x: Value, pads: Value = None, value: Value = None, axes: Value = None) -> Value:
        rank = len(x.shape)
        p = ints(pads, node, "pads") if from_input else [int(v) for v in node.attrs["pads"]]
        ax = [_axis(a, rank, node) for a in ints(axes, node, "axes")] if axes is not None else list(range(rank))
        if len(p) != 2 * len(ax):
            raise OnnxError(f"{node.where()} (Pad): {len(p)} pad amounts for {len(ax)} axes")
        begin, end = [0] * rank, [0] * rank
        for i, a in enumerate(ax):
            begin[a], end[a] = p[i], p[len(ax) + i]
        fill = float(np.asarray(const(value, node, "constant value")).reshape(-1)[0]) if value is not None and \
            np.asarray(const(value, node, "constant value")).size else float(node.attrs.get("value", 0.0))
        if any(v < 0 for v in begin + end):  # negative pads crop
            x = x[tuple(slice(-b if b < 0 else 0, x.shape[i] + e if e < 0 else None)
                        for i, (b, e) in enumerate(zip(begin, end)))]
            begin, end = [max(v, 0) for v in begin], [max(v, 0) for v in end]
        if not any(begin + end):
            return x
        if not isinstance(x, Tensor):
            np_modes: dict[str, _NpPadMode] = {"constant": "constant", "reflect": "reflect", "edge": "edge",
                                               "wrap": "wrap"}
            kw: dict[str, Any] = {"constant_values": fill} if mode == "constant" else {}
            return np.pad(x, list(zip(begin, end)), mode=np_modes[mode], **kw)
        used = [i for i in range(rank) if begin[i] or end[i]]
        last_two = max(rank - 2, 1)
        if mode != "constant" and (used[0] < last_two or rank > 4):
            raise OnnxError(f"{node.where()} (Pad): {mode} padding of other axes than the last two is not supported")
        first = used[0] if mode == "constant" else last_two
        flat = []
        for i in range(rank - 1, first - 1, -1):
            flat += [begin[i], end[i]]
        torch_mode = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}[mode]
        return F.pad(x, tuple(flat), mode=torch_mode, value=fill if mode == "constant" else None)
    return run


converter("Pad", 2)(lambda node, known: Op(node, _pad(node, False)))
converter("Pad", 11, 13, 18, 19, 21, 23, 24, 25)(lambda node, known: Op(node, _pad(node, True), known))


def _coordinates(mode: str, out: int, size: int, scale: float | np.float32) -> NDArray[np.float32]:
    """The input coordinate of each output index of one axis (ONNX's coordinate_transformation_mode),
    in float32 as onnxruntime computes it (a coordinate on a rounding boundary then rounds as there)."""
    f = np.float32
    x, scale, half = np.arange(out, dtype=f), f(scale), f(0.5)
    if mode == "half_pixel":
        return (x + half) / scale - half
    if mode == "pytorch_half_pixel":
        return (x + half) / scale - half if out > 1 else np.zeros(out, f)
    if mode == "align_corners":
        return x * f(size - 1) / f(out - 1) if out > 1 else np.zeros(out, f)
    if mode == "asymmetric":
        return x / scale
    if mode == "half_pixel_symmetric":  # onnxruntime's sum in float64
        offset = f(size) / f(2) * (f(1) - f(out) / (scale * f(size)))
        return (np.float64(offset) + (x.astype(np.float64) + 0.5) / np.float64(scale) - 0.5).astype(f)
    raise OnnxError(f"coordinate_transformation_mode {mode!r} is not supported")


def _nearest(coords: NDArray[np.float64], rounding: str, size: int, scale: float) -> NDArray[np.int64]:
    """The input index of each coordinate; "simple" (Resize 10, Upsample): floor, ceil when shrinking."""
    if rounding == "simple":
        rounding = "ceil" if scale < 1 else "floor"
    if rounding == "floor":
        idx = np.floor(coords)
    elif rounding == "ceil":
        idx = np.ceil(coords)
    else:
        half = coords - np.floor(coords) == 0.5
        idx = np.where(half, np.floor(coords) if rounding == "round_prefer_floor" else np.ceil(coords),
                       np.round(coords))
    return np.clip(idx, 0, size - 1).astype(np.int64)


def _matrix(mode: str, coordinate: str, rounding: str, out: int, size: int, scale: float) -> NDArray[np.float64]:
    """(out, size): the map from one axis of the input to the output's (rows sum to 1)."""
    coords = _coordinates(coordinate, out, size, scale).astype(np.float64)
    m = np.zeros((out, size))
    if mode == "nearest":
        m[np.arange(out), _nearest(coords, rounding, size, scale)] = 1.0
        return m
    coords = np.clip(coords, 0, size - 1)
    lo = np.floor(coords).astype(np.int64)
    hi = np.minimum(lo + 1, size - 1)
    w = coords - lo
    np.add.at(m, (np.arange(out), lo), 1 - w)
    np.add.at(m, (np.arange(out), hi), w)
    return m


def _resize(node: Node, version: int) -> Callable[..., Value]:
    a = node.attrs
    mode = a.get("mode", "nearest")
    coordinate = a.get("coordinate_transformation_mode", "half_pixel" if version >= 11 else "asymmetric")
    rounding = a.get("nearest_mode", "round_prefer_floor" if version >= 11 else "simple")
    if mode not in ("nearest", "linear"):
        raise OnnxError(f"{node.where()} (Resize): mode {mode!r} is not supported (nearest and linear are)")
    if int(a.get("antialias", 0)):
        raise OnnxError(f"{node.where()} (Resize): antialias is not supported")
    if a.get("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise OnnxError(f"{node.where()} (Resize): keep_aspect_ratio_policy other than stretch is not supported")
    if coordinate == "tf_crop_and_resize":
        raise OnnxError(f"{node.where()} (Resize): tf_crop_and_resize is not supported")
    axes_attr = a.get("axes")

    def run(x: Value, roi: Value = None, scales: Value = None, sizes: Value = None) -> Value:
        rank = len(x.shape)
        axes = [_axis(int(v), rank, node) for v in axes_attr] if axes_attr is not None else list(range(rank))
        given_scales = np.asarray(const(scales, node, "scales"), np.float64).reshape(-1) \
            if scales is not None and np.asarray(const(scales, node, "scales")).size else None
        given_sizes = ints(sizes, node, "sizes") if sizes is not None and np.asarray(
            const(sizes, node, "sizes")).size else None
        out, scale = list(x.shape), [1.0] * rank
        for i, axis in enumerate(axes):
            if given_sizes is not None:
                out[axis] = given_sizes[i]
                scale[axis] = given_sizes[i] / x.shape[axis]
            elif given_scales is not None:
                scale[axis] = float(given_scales[i])
                out[axis] = int(np.floor(np.float32(scale[axis]) * np.float32(x.shape[axis])))
            else:
                raise OnnxError(f"{node.where()} (Resize): neither scales nor sizes are given")
        if any(out[i] != x.shape[i] for i in range(min(2, rank))) or rank != 4:
            raise OnnxError(f"{node.where()} (Resize): only the last two axes of (N, C, H, W) are resized")
        if tuple(out) == tuple(x.shape):
            return x
        x = as_tensor(x)
        fast = _fast(x, mode, coordinate, rounding, out, scale, given_sizes is not None)
        if fast is not None:
            return fast
        mh = _matrix(mode, coordinate, rounding, out[2], x.shape[2], scale[2]).astype(x.dtype)
        mw = _matrix(mode, coordinate, rounding, out[3], x.shape[3], scale[3]).astype(x.dtype)
        return Tensor(mh).matmul(x.matmul(Tensor(np.ascontiguousarray(mw.T))))
    return run


def _fast(x: Tensor, mode: str, coordinate: str, rounding: str, out: list[int], scale: list[float],
          by_size: bool) -> Tensor | None:
    """F.interpolate where its rounding is ONNX's for these settings, else None."""
    size = (out[2], out[3])
    factor = None if by_size else (scale[2], scale[3])
    exact = by_size or (factor is not None and all(float(s).is_integer() for s in factor))
    if mode == "nearest" and coordinate == "asymmetric" and rounding in ("floor", "simple") and exact:
        return F.interpolate(x, size=size) if by_size else F.interpolate(x, scale_factor=factor)
    if mode == "linear" and coordinate in ("half_pixel", "pytorch_half_pixel") and exact and min(size) > 1:
        return F.interpolate(x, size=size, mode="bilinear", align_corners=False) if by_size else \
            F.interpolate(x, scale_factor=factor, mode="bilinear", align_corners=False)
    if mode == "linear" and coordinate == "align_corners":
        return F.interpolate(x, size=size, mode="bilinear", align_corners=True)
    return None


converter("Resize", 11, 13, 18, 19)(lambda node, known: Op(node, _resize(node, 11), known, keep=(1, 2, 3)))


@converter("Upsample", 7, 9, 10)
@converter("Resize", 10)
def upsample(node: Node, known: Known) -> Op:
    """Upsample, and Resize 10 (its inputs and semantics: asymmetric coordinates, floor or ceil)."""
    scales_attr = node.attrs.get("scales")
    run = _resize(node, 9)

    def upsample_run(x: Value, scales: Value = None) -> Value:
        return run(x, None, np.asarray(scales_attr if scales is None else const(scales, node, "scales")), None)
    return Op(node, upsample_run, known, keep=(1,))


# ---- values of no gradient: constants, shapes, casts ------------------------------------------

converter("Identity", 1, 13, 14, 16, 19, 21, 23, 24, 25)(lambda node, known: Op(node, lambda x: x))


@converter("Dropout", 7, 10, 12, 13, 22)
def dropout(node: Node, known: Known) -> Op:
    mask = len([o for o in node.outputs if o]) > 1

    def run(x: Value, ratio: Value = None, training: Value = None) -> Value:
        if training is not None and bool(np.asarray(const(training, node, "training_mode")).reshape(-1)[0]):
            raise OnnxError(f"{node.where()}: Dropout in training mode; export the model in eval mode")
        return (x, np.ones(tuple(x.shape), bool)) if mask else x
    return Op(node, run, known)


@converter("Cast", 6, 9, 13, 19, 21, 23, 24, 25)
def cast(node: Node, known: Known) -> Op:
    dtype = DTYPES.get(int(node.attrs["to"]))
    if dtype is None:
        raise OnnxError(f"{node.where()} (Cast): to an element type this engine does not compute in")

    def run(x: Value) -> Value:
        if isinstance(x, Tensor):
            if np.issubdtype(dtype, np.floating) and np.issubdtype(x._array.dtype, np.floating):
                return x  # float to float: the engine keeps the model's dtype
            return Tensor(x._array.astype(dtype.newbyteorder("=")))  # to or from integers: no gradient
        return np.asarray(x).astype(dtype.newbyteorder("="))
    return Op(node, run)


@converter("Constant", 9, 11, 12, 13, 19, 21, 23, 24, 25)
def constant(node: Node, known: Known) -> Op:
    a = node.attrs
    if "value" in a:
        value = np.asarray(a["value"])
    elif "value_float" in a:
        value = np.asarray(a["value_float"], np.float32)
    elif "value_floats" in a:
        value = np.asarray(a["value_floats"], np.float32)
    elif "value_int" in a:
        value = np.asarray(a["value_int"], np.int64)
    elif "value_ints" in a:
        value = np.asarray(a["value_ints"], np.int64)
    else:
        raise OnnxError(f"{node.where()} (Constant): no value this engine reads (sparse or string values are not)")
    return Op(node, lambda: value)


@converter("ConstantOfShape", 9, 20, 21, 23, 24, 25)
def constant_of_shape(node: Node, known: Known) -> Op:
    value = np.asarray(node.attrs.get("value", np.zeros(1, np.float32))).reshape(-1)

    def run(shape: Value) -> NDArray[Any]:
        return np.full(ints(shape, node, "shape"), value[0], value.dtype)
    return Op(node, run, known)


@converter("Shape", 1, 13, 15, 19, 21, 23, 24, 25)
def shape(node: Node, known: Known) -> Op:
    start, end = node.attrs.get("start", 0), node.attrs.get("end")

    def run(x: Value) -> NDArray[np.int64]:
        return np.asarray(tuple(x.shape)[start:end], np.int64)
    return _shape_only(Op(node, run))


@converter("Size", 1, 13, 19, 21, 23, 24, 25)
def size(node: Node, known: Known) -> Op:
    return _shape_only(Op(node, lambda x: np.asarray(math.prod(x.shape), np.int64)))


def _shape_only(module: _M) -> _M:
    """Marks a module that reads only its input's shape: folded per input shape (model.py)."""
    module.shape_only = True
    return module


@converter("Range", 11)
def range_op(node: Node, known: Known) -> Op:
    def run(start: Value, limit: Value, delta: Value) -> NDArray[Any]:
        s, l, d = (np.asarray(const(v, node, what)).reshape(-1)[0] for v, what in
                   ((start, "start"), (limit, "limit"), (delta, "delta")))
        return np.arange(s, l, d).astype(np.asarray(start).dtype)
    return Op(node, run, known, keep=(0, 1, 2))
