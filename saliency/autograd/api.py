"""Every public op, declared once: its function, under PyTorch's name and signature (input
first), and the surfaces it appears on.

`@public("Tensor", "saliency", "F")` above a function makes it a `Tensor` method, the function
`saliency.<name>` and the function `saliency.nn.functional.<name>`, each the same object; `also`
names further Tensor methods for it (`add` is also `__add__`). A new op needs its class in
`ops/` (forward, VJP and window rule side by side) and one declared function here: the three
surfaces are generated from this registry (`exported(surface)`), so they cannot drift apart.
tests/autograd/test_public_names.py checks them against PyTorch's.

Arguments may be Tensors, arrays or numbers where PyTorch accepts numbers; results are Tensors.
"""
import builtins  # this module defines sum, max, min, abs and pow as ops
import collections
import math

import numpy as np

from .backward import backward as _run_backward
from .ops.conv import Convolution, UpsampleConvolution
from .ops.elementwise import (Abs, Add, Cast, Clamp, Clone, Div, Exp, Log, Maximum, Minimum, Mul, Neg, Pow, Relu,
                              Sigmoid, Sqrt, Sub, Tanh, Where)
from .ops.linalg import Matmul
from .ops.loss import LogSoftmax, MseLoss, NllLoss, Softmax
from .ops.norm import BatchNorm
from .ops.pool import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d
from .ops.reduce import Amax, Amin, LogSumExp, MaxAll, MaxDim, Mean, MinAll, Norm, Sum, arg_index, normalize_dims
from .ops.resize import Upsample
from .ops.shape import Cat, Expand, GetItem, Pad, Permute, Reshape, Squeeze, Stack, Transpose, Unsqueeze
from .tensor import Tensor, as_array, index_key, to_arguments

SURFACES = ("Tensor", "saliency", "F")
_registry = {surface: {} for surface in SURFACES}  # surface -> {name: function}


def public(*where, name=None, also=()):
    """Declare the decorated function public on each surface of `where` (see SURFACES), under
    `name` (default: the function's own) and, as a Tensor method, also under the names `also`."""
    unknown = set(where) - set(SURFACES)
    if unknown:
        raise ValueError(f"unknown surface(s) {sorted(unknown)}; the surfaces are {SURFACES}")

    def declare(fn):
        for surface in where:
            _registry[surface][name or fn.__name__] = fn
        for alias in also:
            _registry["Tensor"][alias] = fn
        return fn
    return declare


def exported(surface):
    """{name: function} of every op declared public on `surface`."""
    return dict(_registry[surface])


def _tensor(x):
    return x if isinstance(x, Tensor) else Tensor(x)


def _operand(other, like):
    """The other operand of a binary op: Tensors and Python numbers as they are, anything else
    as an array (integer arrays take the float dtype of the tensor they meet)."""
    if isinstance(other, (Tensor, int, float)):
        return other
    arr = as_array(other)
    if arr.dtype.kind in "biu" and like._array.dtype.kind == "f":
        arr = arr.astype(like._array.dtype)
    return arr


def _shape_args(args):
    """reshape(2, 3) and reshape((2, 3)) alike."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(int(n) for n in args[0])
    return tuple(int(n) for n in args)


# ---- the backward pass ------------------------------------------------------------------------
@public("Tensor")
def backward(self, gradient=None, retain_graph=None, inputs=None):
    """Accumulate v^T J into the .grad of every leaf, where v = `gradient` (1 for a scalar)."""
    _run_backward(self, gradient, retain_graph=retain_graph, inputs=inputs)


# ---- arithmetic -------------------------------------------------------------------------------
@public("Tensor", "saliency", also=("__add__",))
def add(input, other):
    return Add.apply(input, _operand(other, input))


@public("Tensor")
def __radd__(input, other):
    return Add.apply(_operand(other, input), input)


@public("Tensor", "saliency", also=("__sub__",))
def sub(input, other):
    return Sub.apply(input, _operand(other, input))


@public("Tensor")
def __rsub__(input, other):
    return Sub.apply(_operand(other, input), input)


@public("Tensor", "saliency", also=("__mul__",))
def mul(input, other):
    return Mul.apply(input, _operand(other, input))


@public("Tensor")
def __rmul__(input, other):
    return Mul.apply(_operand(other, input), input)


@public("Tensor", "saliency", also=("__truediv__",))
def div(input, other):
    return Div.apply(input, _operand(other, input))


@public("Tensor")
def __rtruediv__(input, other):
    return Div.apply(_operand(other, input), input)


@public("Tensor", "saliency", also=("__pow__",))
def pow(input, exponent):
    return Pow.apply(input, _operand(exponent, input))


@public("Tensor")
def __rpow__(input, other):
    return Pow.apply(_operand(other, input), input)


@public("Tensor", "saliency", also=("__matmul__",))
def matmul(input, other):
    return Matmul.apply(input, _operand(other, input))


@public("Tensor")
def __rmatmul__(input, other):
    return Matmul.apply(_operand(other, input), input)


@public("Tensor", "saliency")
def mm(input, mat2):
    if input.ndim != 2 or np.ndim(mat2) != 2:
        raise ValueError(f"mm needs two matrices, got shapes {input.shape} and {np.shape(mat2)}; use matmul")
    return Matmul.apply(input, _operand(mat2, input))


@public("Tensor", "saliency", also=("__neg__",))
def neg(input):
    return Neg.apply(input)


@public("Tensor", "saliency", also=("__abs__",))
def abs(input):
    return Abs.apply(input)


@public("Tensor")
def __getitem__(input, key):
    return GetItem.apply(input, key=index_key(key))


@public("Tensor", "saliency")
def exp(input):
    return Exp.apply(input)


@public("Tensor", "saliency")
def log(input):
    return Log.apply(input)


@public("Tensor", "saliency")
def sqrt(input):
    return Sqrt.apply(input)


@public("Tensor", "saliency", "F")
def relu(input):
    return Relu.apply(input)


@public("Tensor", "saliency", "F")
def sigmoid(input):
    return Sigmoid.apply(input)


@public("Tensor", "saliency", "F")
def tanh(input):
    return Tanh.apply(input)


@public("Tensor", "saliency")
def clamp(input, min=None, max=None):
    return Clamp.apply(input, lo=min, hi=max)


@public("Tensor", "saliency")
def maximum(input, other):
    input = _tensor(input)
    return Maximum.apply(input, _operand(other, input))


@public("Tensor", "saliency")
def minimum(input, other):
    input = _tensor(input)
    return Minimum.apply(input, _operand(other, input))


@public("saliency")
def where(condition, input, other):
    """Elements of input where condition holds, else of other (condition carries no gradient)."""
    cond = as_array(condition)
    like = input if isinstance(input, Tensor) else (other if isinstance(other, Tensor) else Tensor(input))
    return Where.apply(cond, _operand(input, like), _operand(other, like))


@public("Tensor", "saliency")
def softmax(input, dim):
    return Softmax.apply(input, dim=dim)


@public("Tensor", "saliency")
def log_softmax(input, dim):
    return LogSoftmax.apply(input, dim=dim)


# ---- reductions -------------------------------------------------------------------------------
# (values, indices), as returned by max(dim) and min(dim)
_ValuesIndices = collections.namedtuple("max_min", ["values", "indices"])


@public("Tensor", "saliency")
def sum(input, dim=None, keepdim=False):
    return Sum.apply(input, dim=dim, keepdim=keepdim)


@public("Tensor", "saliency")
def mean(input, dim=None, keepdim=False):
    return Mean.apply(input, dim=dim, keepdim=keepdim)


@public("Tensor", "saliency")
def amax(input, dim=None, keepdim=False):
    return Amax.apply(input, dim=dim, keepdim=keepdim)


@public("Tensor", "saliency")
def amin(input, dim=None, keepdim=False):
    return Amin.apply(input, dim=dim, keepdim=keepdim)


@public("Tensor", "saliency")
def max(input, dim=None, keepdim=False):
    """The largest element; with dim, the (values, indices) of each row's first maximum."""
    return MaxAll.apply(input) if dim is None else _pick(input, dim, keepdim, np.argmax, "Max")


@public("Tensor", "saliency")
def min(input, dim=None, keepdim=False):
    """The smallest element; with dim, the (values, indices) of each row's first minimum."""
    return MinAll.apply(input) if dim is None else _pick(input, dim, keepdim, np.argmin, "Min")


def _pick(input, dim, keepdim, fn, kind):
    index = arg_index(input._array, dim, True, fn)
    values = MaxDim.apply(input, index=index, dim=dim, keepdim=keepdim, kind=kind)
    return _ValuesIndices(values, Tensor._make(arg_index(input._array, dim, keepdim, fn), False, None))


@public("Tensor", "saliency")
def argmax(input, dim=None, keepdim=False):
    return Tensor._make(arg_index(input._array, dim, keepdim, np.argmax), False, None)


@public("Tensor", "saliency")
def argmin(input, dim=None, keepdim=False):
    return Tensor._make(arg_index(input._array, dim, keepdim, np.argmin), False, None)


@public("Tensor", "saliency")
def norm(input, p=2, dim=None, keepdim=False):
    return Norm.apply(input, p=p, dim=dim, keepdim=keepdim)


@public("Tensor", "saliency")
def logsumexp(input, dim=None, keepdim=False):
    return LogSumExp.apply(input, dim=dim, keepdim=keepdim)


# ---- shapes -----------------------------------------------------------------------------------
@public("Tensor", "saliency", also=("view",))
def reshape(input, *shape):
    return Reshape.apply(input, shape=_shape_args(shape))


@public("Tensor", "saliency", "F")
def flatten(input, start_dim=0, end_dim=-1):
    """Merge dimensions start_dim..end_dim into one."""
    input = _tensor(input)
    if not input.ndim:
        return Reshape.apply(input, shape=(1,))
    start, end = (normalize_dims(d, input.ndim)[0] for d in (start_dim, end_dim))
    if start >= end:  # nothing to merge: the tensor itself, as in PyTorch
        return input
    shape = input.shape[:start] + (math.prod(input.shape[start:end + 1]),) + input.shape[end + 1:]
    return Reshape.apply(input, shape=shape)


@public("Tensor", "saliency")
def transpose(input, dim0, dim1):
    return Transpose.apply(input, dim0=dim0, dim1=dim1)


@public("Tensor", "saliency")
def t(input):
    if input.ndim > 2:
        raise ValueError(f"t() expects a tensor with at most 2 dimensions, got shape {input.shape}; "
                         f"use transpose(dim0, dim1)")
    return Transpose.apply(input, dim0=0, dim1=-1, short=True)


@public("Tensor", "saliency")
def permute(input, *dims):
    return Permute.apply(input, dims=_shape_args(dims))


@public("Tensor", "saliency")
def squeeze(input, dim=None):
    return Squeeze.apply(input, dim=dim)


@public("Tensor", "saliency")
def unsqueeze(input, dim):
    return Unsqueeze.apply(input, dim=dim)


@public("Tensor")
def expand(input, *sizes):
    return Expand.apply(input, shape=_shape_args(sizes))


@public("Tensor", "saliency")
def broadcast_to(input, size):
    return Expand.apply(_tensor(input), shape=tuple(size))


@public("Tensor", "saliency")
def clone(input):
    return Clone.apply(input)


@public("Tensor")
def to(input, *args, dtype=None, device=None, non_blocking=False, copy=False, memory_format=None):
    """The tensor in `dtype` (a Cast node when it changes), as PyTorch's to(dtype), to(device),
    to(device, dtype) or to(other): the only device is the CPU; another one is an error."""
    dtype, _ = to_arguments(args, dtype, device)
    if dtype is None or dtype == input.dtype:
        return Clone.apply(input) if copy else input
    return Cast.apply(input, dtype=dtype)


@public("Tensor")
def type_as(input, other):
    return to(input, other.dtype)


@public("Tensor")
def view_as(input, other):
    return Reshape.apply(input, shape=tuple(other.shape))


@public("Tensor")
def reshape_as(input, other):
    return Reshape.apply(input, shape=tuple(other.shape))


@public("Tensor")
def expand_as(input, other):
    return Expand.apply(input, shape=tuple(other.shape))


@public("Tensor")
def repeat(input, *sizes):
    """Tile the tensor `sizes[i]` times along dimension i (leading sizes add dimensions)."""
    sizes = _shape_args(sizes)
    if len(sizes) < input.ndim:
        raise ValueError(f"repeat needs at least {input.ndim} sizes for a tensor of shape {input.shape}, got {sizes}")
    shape = (1,) * (len(sizes) - input.ndim) + input.shape
    paired = tuple(d for n in shape for d in (1, n))
    tiled = tuple(d for r, n in zip(sizes, shape) for d in (r, n))
    out = Reshape.apply(input, shape=paired)
    out = Expand.apply(out, shape=tiled)
    return Reshape.apply(out, shape=tuple(r * n for r, n in zip(sizes, shape)))


@public("Tensor", "saliency")
def split(input, split_size_or_sections, dim=0):
    """Pieces along `dim`: of `split_size_or_sections` elements each (the last may be smaller), or
    of the listed sizes, which must add up to the dimension's size."""
    (axis,) = normalize_dims(dim, input.ndim)
    n = input.shape[axis]
    if isinstance(split_size_or_sections, int):
        if split_size_or_sections <= 0:
            raise ValueError(f"split size must be positive, got {split_size_or_sections}")
        sizes = [builtins.min(split_size_or_sections, n - i) for i in range(0, n, split_size_or_sections)] or [0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if builtins.sum(sizes) != n:
            raise ValueError(f"split sizes {sizes} add up to {builtins.sum(sizes)}, but dimension {dim} has size {n}")
    pieces, start = [], 0
    for size in sizes:
        key = (slice(None),) * axis + (slice(start, start + size),)
        pieces.append(GetItem.apply(input, key=key))
        start += size
    return tuple(pieces)


@public("Tensor", "saliency")
def chunk(input, chunks, dim=0):
    """At most `chunks` pieces along `dim`, each of ceil(size / chunks) elements but the last."""
    if chunks <= 0:
        raise ValueError(f"chunk expects a positive number of chunks, got {chunks}")
    (axis,) = normalize_dims(dim, input.ndim)
    return split(input, builtins.max(1, -(-input.shape[axis] // chunks)), dim)


@public("saliency")
def cat(tensors, dim=0):
    return Cat.apply(*[_tensor(t) for t in tensors], dim=dim)


@public("saliency")
def stack(tensors, dim=0):
    return Stack.apply(*[_tensor(t) for t in tensors], dim=dim)


@public("saliency", "F")
def pad(input, pad, mode="constant", value=0.0):
    """Constant padding; `pad` lists (before, after) sizes from the last dimension backwards."""
    if mode != "constant":
        raise ValueError(f"pad mode {mode!r} is not supported; use mode='constant'")
    return Pad.apply(_tensor(input), pad=pad, value=value)


# ---- losses -----------------------------------------------------------------------------------
@public("saliency", "F")
def nll_loss(input, target, reduction="mean"):
    """Negative log-likelihood of integer class targets; input (log-probabilities) is (N, C) or (N, C, ...)."""
    target = as_array(target)
    return NllLoss.apply(_tensor(input), target=target, reduction=reduction)


@public("saliency", "F")
def cross_entropy(input, target, reduction="mean"):
    """nll_loss(log_softmax(input, dim=1), target): logits (N, C) or (N, C, ...), or (C,) with a scalar target."""
    logits = _tensor(input)
    target = as_array(target)
    if logits.ndim == 1:
        out = nll_loss(logits.unsqueeze(0).log_softmax(1), target.reshape(1), reduction)
        return out.squeeze(0) if reduction == "none" else out
    return nll_loss(logits.log_softmax(1), target, reduction)


@public("saliency", "F")
def mse_loss(input, target, reduction="mean"):
    """Mean (or sum) of squared differences; input and target must have the same shape."""
    input = _tensor(input)
    return MseLoss.apply(input, _operand(target, input), reduction=reduction)


# ---- convolution, pooling, resizing, normalisation (NCHW; kernels in saliency.kernels) -----------------
def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


@public("saliency", "F")
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D cross-correlation: input (N, C, H, W), weight (O, C/groups, kh, kw), bias (O,) or None."""
    return Convolution.apply(_tensor(input), _tensor(weight), None if bias is None else _tensor(bias),
                             stride=stride, padding=padding, dilation=dilation, groups=groups)


@public("F")
def upsample_conv2d(input, weight, bias=None, scale_factor=2):
    """conv2d(interpolate(input, scale_factor, 'nearest'), weight, bias, padding=1) for a 3x3 weight,
    as one sub-pixel convolution (4/9 of the work; the upsampled image is never built)."""
    if int(scale_factor) != scale_factor or scale_factor < 1:
        raise ValueError(f"scale_factor must be a positive integer, got {scale_factor!r}")
    return UpsampleConvolution.apply(_tensor(input), _tensor(weight), None if bias is None else _tensor(bias),
                                     scale=int(scale_factor))


@public("saliency", "F")
def max_pool2d(input, kernel_size, stride=None, padding=0):
    return MaxPool2d.apply(_tensor(input), kernel_size=kernel_size, stride=stride, padding=padding)


@public("F")
def avg_pool2d(input, kernel_size, stride=None, padding=0):
    return AvgPool2d.apply(_tensor(input), kernel_size=kernel_size, stride=stride, padding=padding)


@public("F")
def adaptive_avg_pool2d(input, output_size):
    return AdaptiveAvgPool2d.apply(_tensor(input), output_size=_pair(output_size))


@public("F")
def interpolate(input, scale_factor, mode="nearest"):
    """Upsample (N, C, H, W) by an integer scale factor; bilinear uses align_corners=False."""
    s = _pair(scale_factor)
    if s[0] != s[1] or int(s[0]) != s[0] or s[0] < 1:
        raise ValueError(f"scale_factor must be one positive integer for both axes, got {scale_factor!r}")
    return Upsample.apply(_tensor(input), scale_factor=int(s[0]), mode=mode)


@public("saliency", "F")
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Per-channel normalisation of (N, C, H, W); updates the running statistics in place when training."""
    def stat(v):
        return None if v is None else (v._array if isinstance(v, Tensor) else v)

    return BatchNorm.apply(_tensor(input), None if weight is None else _tensor(weight),
                           None if bias is None else _tensor(bias), running_mean=stat(running_mean),
                           running_var=stat(running_var), training=training, momentum=momentum, eps=eps)


for _name, _fn in _registry["Tensor"].items():
    setattr(Tensor, _name, _fn)
