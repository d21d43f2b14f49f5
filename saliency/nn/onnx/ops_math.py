"""Converters of elementwise arithmetic, comparisons and reductions.

Each runs on NumPy when all its inputs are constants (shape arithmetic, folded) and on the engine's
ops when one is a Tensor, with ONNX's (NumPy's) broadcasting.
"""
import math
from typing import Any, Callable

import numpy as np
from numpy.typing import NDArray

from ...autograd.api import exported
from ...autograd.tensor import Tensor
from .reader import Node, OnnxError
from .registry import Known, Op, Value, as_tensor, converter, first_image, first_tensor, ints

_OnArrays = Callable[..., Value]  # a NumPy function of the constants' arrays (a ufunc, np.mean, ...)
_OnTensors = Callable[..., Tensor]  # the engine's op on Tensors

_ops = exported("saliency")  # the engine's functions, as saliency.where, saliency.maximum, ...


def _value(v: Value) -> NDArray[Any]:
    return np.asarray(v._array) if isinstance(v, Tensor) else np.asarray(v)


def _binary(node: Node, known: Known, on_arrays: _OnArrays, on_tensors: _OnTensors) -> Op:
    def run(a: Value, b: Value) -> Value:
        like = first_image(a, b)
        if like is None:
            return on_arrays(_value(a), _value(b))
        return on_tensors(as_tensor(a, like), as_tensor(b, like))
    return Op(node, run, known)


def _integer_div(a: NDArray[Any], b: NDArray[Any]) -> NDArray[Any]:
    if np.issubdtype(a.dtype, np.integer) and np.issubdtype(b.dtype, np.integer):
        return np.trunc(a / b).astype(np.result_type(a, b))  # ONNX's integer Div truncates, as C does
    return a / b


for _op, _arrays, _tensors in (("Add", np.add, lambda a, b: a + b), ("Sub", np.subtract, lambda a, b: a - b),
                               ("Mul", np.multiply, lambda a, b: a * b), ("Div", _integer_div, lambda a, b: a / b)):
    converter(_op, 7, 13, 14)(lambda node, known, _a=_arrays, _t=_tensors: _binary(node, known, _a, _t))


@converter("Pow", 7, 12, 13, 15)
def power(node: Node, known: Known) -> Op:
    def run(x: Value, p: Value) -> Value:
        if first_image(x, p) is None:
            return np.power(_value(x), _value(p)).astype(_value(x).dtype)
        if isinstance(p, Tensor):
            raise OnnxError(f"{node.where()} (Pow): an exponent that depends on the image is not supported")
        p = np.asarray(p)
        if p.size == 1 and p.ndim <= x.ndim:
            value = float(p.reshape(-1)[0])
            return x * x if value == 2.0 else x.sqrt() if value == 0.5 else x.pow(value)
        return _ops["pow"](x, as_tensor(p, x))
    return Op(node, run, known, keep=(1,))


def _unary(op_type: str, versions: tuple[int, ...], on_arrays: _OnArrays,
           on_tensors: Callable[[Tensor], Tensor] | None) -> None:
    def build(node: Node, known: Known) -> Op:
        def run(x: Value) -> Value:
            if not isinstance(x, Tensor):
                return on_arrays(np.asarray(x))
            if on_tensors is None:
                raise OnnxError(f"{node.where()} ({op_type}) on values that depend on the image: it has no gradient "
                                f"this engine computes")
            return on_tensors(x)
        return Op(node, run)
    converter(op_type, *versions)(build)


_unary("Sqrt", (6, 13), np.sqrt, lambda x: x.sqrt())
_unary("Exp", (6, 13), np.exp, lambda x: x.exp())
_unary("Log", (6, 13), np.log, lambda x: x.log())
_unary("Neg", (6, 13), np.negative, lambda x: -x)
_unary("Abs", (6, 13), np.abs, lambda x: x.abs())
_unary("Reciprocal", (6, 13), lambda a: 1 / a, lambda x: 1.0 / x)
_unary("Floor", (6, 13), np.floor, None)
_unary("Ceil", (6, 13), np.ceil, None)


@converter("Erf", 9, 13)
def erf(node: Node, known: Known) -> Op:
    def run(x: Value) -> Value:
        if not isinstance(x, Tensor):
            return np.vectorize(math.erf, otypes=[np.asarray(x).dtype])(np.asarray(x))
        return x.erf()
    return Op(node, run)


def _variadic(node: Node, known: Known, on_arrays: _OnArrays, on_tensors: _OnTensors) -> Op:
    def run(*xs: Value) -> Value:
        like = first_image(*xs)
        if like is None:
            out: Value = _value(xs[0])
            for v in xs[1:]:
                out = on_arrays(out, _value(v))
            return out
        out = as_tensor(xs[0], like)
        for v in xs[1:]:
            out = on_tensors(out, as_tensor(v, like))
        return out
    return Op(node, run, known)


converter("Max", 8, 12, 13)(lambda node, known: _variadic(node, known, np.maximum, _ops["maximum"]))
converter("Min", 8, 12, 13)(lambda node, known: _variadic(node, known, np.minimum, _ops["minimum"]))
converter("Sum", 8, 13)(lambda node, known: _variadic(node, known, np.add, lambda a, b: a + b))
converter("Mean", 8, 13)(lambda node, known: _mean(node, known))


def _mean(node: Node, known: Known) -> Op:
    total = _variadic(node, known, np.add, lambda a, b: a + b)
    count = len([n for n in node.inputs if n])
    inner = total.fn
    total.fn = lambda *xs: inner(*xs) / count
    return total


def _compare(op_type: str, versions: tuple[int, ...], fn: _OnArrays) -> None:
    def build(node: Node, known: Known) -> Op:
        def run(a: Value, b: Value) -> Value:
            return _of_image(fn(_value(a), _value(b)), a, b)
        return Op(node, run, known, keep=(0, 1))
    converter(op_type, *versions)(build)


def _of_image(out: Value, *inputs: Value) -> Value:
    """A value of no gradient computed from `inputs`: a Tensor when one of them depends on the image
    (so that no input shape's plan keeps it), else the array."""
    return Tensor(out) if first_image(*inputs) is not None else out


_compare("Equal", (11, 13, 19), np.equal)
_compare("Greater", (9, 13), np.greater)
_compare("Less", (9, 13), np.less)
_unary("Not", (1,), np.logical_not, lambda x: Tensor(np.logical_not(_value(x))))


@converter("Where", 9, 16)
def where(node: Node, known: Known) -> Op:
    def run(condition: Value, a: Value, b: Value) -> Value:
        cond = _value(condition)
        like = first_image(a, b)
        if like is None and not isinstance(condition, Tensor):
            return np.where(cond, _value(a), _value(b))
        like = first_tensor(a, b) if like is None else like
        if like is None:
            return Tensor(np.where(cond, a, b))
        return _ops["where"](Tensor(np.asarray(cond, bool)), as_tensor(a, like), as_tensor(b, like))
    return Op(node, run, known, keep=(0,))


# ---- reductions -----------------------------------------------------------------------------

def _axes(node: Node, x: Value, axes_input: Value, from_input: bool) -> tuple[int, ...] | None:
    """The axes to reduce (a tuple), or None for all of them."""
    if from_input:
        if axes_input is None:
            return None if not int(node.attrs.get("noop_with_empty_axes", 0)) else ()
        axes: list[int] | None = ints(axes_input, node, "axes")
        return tuple(axes) if axes else (None if not int(node.attrs.get("noop_with_empty_axes", 0)) else ())
    axes = node.attrs.get("axes")
    return None if axes is None else tuple(int(a) for a in axes)


def _reduce(op_type: str, versions_attr: tuple[int, ...], versions_input: tuple[int, ...], on_arrays: _OnArrays,
            on_tensors: Callable[[Tensor, tuple[int, ...], bool], Tensor],
            on_none: Callable[[Value], Value] = lambda x: x) -> None:
    """`on_none(x)`: the reduction over no axis (noop_with_empty_axes), its steps other than reducing."""
    def make(from_input: bool) -> Callable[[Node, Known], Op]:
        def build(node: Node, known: Known) -> Op:
            keep = bool(int(node.attrs.get("keepdims", 1)))

            def run(x: Value, axes: Value = None) -> Value:
                dims = _axes(node, x, axes, from_input)
                if dims == ():
                    return on_none(x)
                if not isinstance(x, Tensor):
                    return on_arrays(np.asarray(x), axis=dims, keepdims=keep)
                dims = tuple(range(x.ndim)) if dims is None else tuple(d % x.ndim for d in dims)
                return on_tensors(x, dims, keep)
            return Op(node, run, known)
        return build
    if versions_attr:
        converter(op_type, *versions_attr)(make(False))
    if versions_input:
        converter(op_type, *versions_input)(make(True))


_reduce("ReduceMean", (11, 13), (18,), np.mean, lambda x, d, k: x.mean(dim=d, keepdim=k))
_reduce("ReduceSum", (11,), (13,), np.sum, lambda x, d, k: x.sum(dim=d, keepdim=k))
_reduce("ReduceMax", (11, 12, 13), (18, 20), np.max, lambda x, d, k: x.amax(dim=d, keepdim=k))
_reduce("ReduceMin", (11, 12, 13), (18, 20), np.min, lambda x, d, k: x.amin(dim=d, keepdim=k))
_reduce("ReduceL2", (11, 13), (18,), lambda a, axis, keepdims: np.sqrt(np.sum(a * a, axis=axis, keepdims=keepdims)),
        lambda x, d, k: (x * x).sum(dim=d, keepdim=k).sqrt(), lambda x: x.abs() if isinstance(x, Tensor) else np.abs(x))
