"""Every public op, declared once: its function, under PyTorch's name and signature (input
first), and the surfaces it appears on.

`@public("Tensor", "saliency", "F")` above a function makes it a `Tensor` method, the function
`saliency.<name>` and the function `saliency.nn.functional.<name>`, each the same object; `also`
names further Tensor methods for it (`add` is also `__add__`). A new op needs its class in
`ops/` (forward, VJP and window rule side by side) and one declared function here: the three
surfaces are generated from this registry (`exported(surface)`), so they cannot drift apart.
tests/autograd/test_public_names.py checks them against PyTorch's.

Arguments may be Tensors, arrays or numbers where PyTorch accepts numbers; results are Tensors.
The annotations are PyTorch's, with `TensorLike` (a Tensor or anything np.asarray takes) where an
op converts its argument.
"""
from __future__ import annotations

import builtins  # this module defines sum, max, min, abs and pow as ops
import math
from typing import TYPE_CHECKING, Any, Callable, Literal, NamedTuple, Sequence, TypeVar, overload

import numpy as np

from .backward import backward as _run_backward
from .ops.activation import Elu, Erf, Gelu, Hardsigmoid, Hardswish, Hardtanh, LeakyRelu, Mish, Prelu, Silu, Softplus
from .ops.attention import ScaledDotProductAttention
from .ops.conv import Convolution, ConvolutionTranspose, UpsampleConvolution
from .ops.elementwise import (Abs, Add, Cast, Clamp, Clone, Div, Exp, Log, Maximum, Minimum, Mul, Neg, Pow, Relu,
                              Sigmoid, Sqrt, Sub, Tanh, Where)
from .ops.linalg import Matmul
from .ops.loss import LogSoftmax, MseLoss, NllLoss, Softmax
from .ops.norm import BatchNorm, GroupNorm, LayerNorm
from .ops.pool import AdaptiveAvgPool2d, AdaptiveMaxPool2d, AvgPool2d, MaxPool2d
from .. import kernels as _kernels
from ..kernels import versions as _versions
from .ops.reduce import Amax, Amin, LogSumExp, MaxAll, MaxDim, Mean, MinAll, Norm, Sum, arg_index, normalize_dims
from .ops.pad import Roll, TablePad
from .ops.resize import Upsample
from .ops.shuffle import PixelShuffle, PixelUnshuffle
from .ops.shape import Cat, Expand, GetItem, Pad, Permute, Reshape, Squeeze, Stack, Transpose, Unsqueeze
from .rng import generator as _random_generator
from .tensor import Tensor, as_array, index_key, to_arguments
from .tensor import device as Device  # an annotation; not `device`, which a Tensor method names (Tensor.device)

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

    from .._typing import FloatArray, Index, Number, Shape, Size
    from .node import Function
    from .tensor import TensorLike

SURFACES = ("Tensor", "saliency", "F")
_registry: dict[str, dict[str, Callable[..., Any]]] = {surface: {} for surface in SURFACES}  # surface -> {name: fn}
_Fn = TypeVar("_Fn", bound=Callable[..., Any])


def public(*where: str, name: str | None = None, also: Sequence[str] = ()) -> Callable[[_Fn], _Fn]:
    """Declare the decorated function public on each surface of `where` (see SURFACES), under
    `name` (default: the function's own) and, as a Tensor method, also under the names `also`."""
    unknown = set(where) - set(SURFACES)
    if unknown:
        raise ValueError(f"unknown surface(s) {sorted(unknown)}; the surfaces are {SURFACES}")

    def declare(fn: _Fn) -> _Fn:
        for surface in where:
            _registry[surface][name or fn.__name__] = fn
        for alias in also:
            _registry["Tensor"][alias] = fn
        return fn
    return declare


def exported(surface: str) -> dict[str, Callable[..., Any]]:
    """{name: function} of every op declared public on `surface`."""
    return dict(_registry[surface])


def _tensor(x: TensorLike) -> Tensor:
    return x if isinstance(x, Tensor) else Tensor(x)


def _operand(other: TensorLike | Number, like: Tensor) -> Tensor | Number | np.ndarray:
    """The other operand of a binary op: Tensors and Python numbers as they are, anything else
    as an array (integer arrays take the float dtype of the tensor they meet)."""
    if isinstance(other, (Tensor, int, float)):
        return other
    arr = as_array(other)
    if arr.dtype.kind in "biu" and like._array.dtype.kind == "f":
        arr = arr.astype(like._array.dtype)
    return arr


def _shape_args(args: Sequence[Any]) -> Shape:
    """reshape(2, 3) and reshape((2, 3)) alike."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(int(n) for n in args[0])
    return tuple(int(n) for n in args)


# ---- the backward pass ------------------------------------------------------------------------
@public("Tensor")
def backward(self: Tensor, gradient: TensorLike | None = None, retain_graph: bool | None = None,
             inputs: Tensor | Sequence[Tensor] | None = None) -> None:
    """Accumulate v^T J into the .grad of every leaf, where v = `gradient` (1 for a scalar)."""
    _run_backward(self, gradient, retain_graph=retain_graph, inputs=inputs)


# ---- arithmetic -------------------------------------------------------------------------------
@public("Tensor", "saliency", also=("__add__",))
def add(input: Tensor, other: TensorLike | Number) -> Tensor:
    """input + other elementwise, the shapes broadcast as NumPy's (torch.add; also `a + b`)."""
    return Add.apply(input, _operand(other, input))


@public("Tensor")
def __radd__(input: Tensor, other: TensorLike | Number) -> Tensor:
    return Add.apply(_operand(other, input), input)


@public("Tensor", "saliency", also=("__sub__",))
def sub(input: Tensor, other: TensorLike | Number) -> Tensor:
    """input - other elementwise, the shapes broadcast as NumPy's (torch.sub; also `a - b`)."""
    return Sub.apply(input, _operand(other, input))


@public("Tensor")
def __rsub__(input: Tensor, other: TensorLike | Number) -> Tensor:
    return Sub.apply(_operand(other, input), input)


@public("Tensor", "saliency", also=("__mul__",))
def mul(input: Tensor, other: TensorLike | Number) -> Tensor:
    """input * other elementwise, the shapes broadcast as NumPy's (torch.mul; also `a * b`)."""
    return Mul.apply(input, _operand(other, input))


@public("Tensor")
def __rmul__(input: Tensor, other: TensorLike | Number) -> Tensor:
    return Mul.apply(_operand(other, input), input)


@public("Tensor", "saliency", also=("__truediv__",))
def div(input: Tensor, other: TensorLike | Number) -> Tensor:
    """input / other elementwise, true division (integers give float32), the shapes broadcast as NumPy's
    (torch.div; also `a / b`)."""
    return Div.apply(input, _operand(other, input))


@public("Tensor")
def __rtruediv__(input: Tensor, other: TensorLike | Number) -> Tensor:
    return Div.apply(_operand(other, input), input)


@public("Tensor", "saliency", also=("__pow__",))
def pow(input: Tensor, exponent: TensorLike | Number) -> Tensor:
    """input ** exponent elementwise, exponent a number or a tensor broadcast with input (torch.pow; also
    `a ** b`)."""
    return Pow.apply(input, _operand(exponent, input))


@public("Tensor")
def __rpow__(input: Tensor, other: TensorLike | Number) -> Tensor:
    return Pow.apply(_operand(other, input), input)


@public("Tensor", "saliency", also=("__matmul__",))
def matmul(input: Tensor, other: TensorLike) -> Tensor:
    """The matrix product input @ other, as NumPy's matmul: vector or matrix operands, or stacks of matrices
    whose leading dimensions broadcast (torch.matmul; also `a @ b`)."""
    return Matmul.apply(input, _operand(other, input))


@public("Tensor")
def __rmatmul__(input: Tensor, other: TensorLike) -> Tensor:
    return Matmul.apply(_operand(other, input), input)


@public("Tensor", "saliency")
def mm(input: Tensor, mat2: TensorLike) -> Tensor:
    """The product of two matrices, (n, m) @ (m, p) -> (n, p); any other shape is an error (use matmul)."""
    if input.ndim != 2 or np.ndim(mat2) != 2:
        raise ValueError(f"mm needs two matrices, got shapes {input.shape} and {np.shape(mat2)}; use matmul")
    return Matmul.apply(input, _operand(mat2, input))


@public("Tensor", "saliency", also=("__neg__",))
def neg(input: Tensor) -> Tensor:
    """-input elementwise (torch.neg; also `-a`)."""
    return Neg.apply(input)


@public("Tensor", "saliency", also=("__abs__",))
def abs(input: Tensor) -> Tensor:
    """|input| elementwise, with gradient 0 at 0 (torch.abs; also `abs(a)`)."""
    return Abs.apply(input)


@public("Tensor")
def __getitem__(input: Tensor, key: Index | Tensor | tuple[Index | Tensor, ...]) -> Tensor:
    return GetItem.apply(input, key=index_key(key))


@public("Tensor", "saliency")
def exp(input: Tensor) -> Tensor:
    """exp(input) elementwise."""
    return Exp.apply(input)


@public("Tensor", "saliency")
def log(input: Tensor) -> Tensor:
    """The natural logarithm of input, elementwise (-inf at 0, nan below 0)."""
    return Log.apply(input)


@public("Tensor", "saliency")
def sqrt(input: Tensor) -> Tensor:
    """The square root of input, elementwise (nan below 0)."""
    return Sqrt.apply(input)


@public("Tensor", "saliency", "F")
def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(x, 0). `inplace` is accepted and ignored: the result is a new tensor (the same values)."""
    return Relu.apply(input)


@public("Tensor", "saliency", "F")
def sigmoid(input: Tensor) -> Tensor:
    """1 / (1 + exp(-input)) elementwise."""
    return Sigmoid.apply(input)


@public("Tensor", "saliency", "F")
def tanh(input: Tensor) -> Tensor:
    """The hyperbolic tangent of input, elementwise."""
    return Tanh.apply(input)


@public("Tensor", "saliency")
def clamp(input: Tensor, min: Number | None = None, max: Number | None = None) -> Tensor:
    """min(max(input, min), max) elementwise; either bound may be None (not both). The gradient passes where
    min <= input <= max (torch.clamp)."""
    return Clamp.apply(input, lo=min, hi=max)


@public("Tensor", "saliency")
def maximum(input: TensorLike, other: TensorLike | Number) -> Tensor:
    """The larger of input and other elementwise, the shapes broadcast as NumPy's; at ties each gets half the
    gradient (torch.maximum)."""
    input = _tensor(input)
    return Maximum.apply(input, _operand(other, input))


@public("Tensor", "saliency")
def minimum(input: TensorLike, other: TensorLike | Number) -> Tensor:
    """The smaller of input and other elementwise, the shapes broadcast as NumPy's; at ties each gets half the
    gradient (torch.minimum)."""
    input = _tensor(input)
    return Minimum.apply(input, _operand(other, input))


@public("saliency")
def where(condition: TensorLike, input: TensorLike | Number, other: TensorLike | Number) -> Tensor:
    """Elements of input where condition holds, else of other (condition carries no gradient)."""
    cond = as_array(condition)
    like = input if isinstance(input, Tensor) else (other if isinstance(other, Tensor) else Tensor(input))
    return Where.apply(cond, _operand(input, like), _operand(other, like))


@public("Tensor", "saliency")
def softmax(input: Tensor, dim: int) -> Tensor:
    """exp(input) / sum(exp(input)) along dim, computed without overflow: each slice along dim sums to 1."""
    return Softmax.apply(input, dim=dim)


@public("Tensor", "saliency")
def log_softmax(input: Tensor, dim: int) -> Tensor:
    """log(softmax(input, dim)), computed as input - logsumexp(input, dim) (no overflow, no log of 0)."""
    return LogSoftmax.apply(input, dim=dim)


@public("F")
def scaled_dot_product_attention(query: TensorLike, key: TensorLike, value: TensorLike,
                                 attn_mask: TensorLike | None = None, dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: float | None = None, enable_gqa: bool = False) -> Tensor:
    """softmax(query @ key^T * scale + bias) @ value over the last two dimensions: query (..., L, E), key
    (..., S, E), value (..., S, Ev) -> (..., L, Ev), the leading dimensions broadcast; scale None is
    1 / sqrt(E). attn_mask broadcasts to (..., L, S): boolean (True: the query attends to that key) or
    added to the scores (a Tensor that requires grad gets its gradient). is_causal lets query i attend
    to keys 0..i only. dropout_p drops attention weights at random, always (a layer passes 0 in eval
    mode). enable_gqa repeats each head of key and value (dimension -3) for its group of query heads."""
    query, key, value = _tensor(query), _tensor(key), _tensor(value)
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise ValueError(f"scaled_dot_product_attention needs query, key and value of at least 2 dimensions "
                         f"(..., L, E), got shapes {query.shape}, {key.shape} and {value.shape}")
    (L, E), S = query.shape[-2:], key.shape[-2]
    if key.shape[-1] != E or value.shape[-2] != S:
        raise ValueError(f"scaled_dot_product_attention: key {key.shape} must end in (S, {E}) as query "
                         f"{query.shape} ends in E = {E}, and value {value.shape} must have S = {S} rows as key")
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        groups = query.shape[-3] // key.shape[-3]
        if groups * key.shape[-3] != query.shape[-3] or value.shape[-3] != key.shape[-3]:
            raise ValueError(f"enable_gqa needs key and value heads {key.shape[-3]}, {value.shape[-3]} that "
                             f"divide the query heads {query.shape[-3]}")
        key, value = (_repeat_heads(t, groups) for t in (key, value))
    dtype = np.result_type(query.dtype, key.dtype)
    mask: Tensor | np.ndarray | None = None
    if is_causal:
        if attn_mask is not None:
            raise ValueError("scaled_dot_product_attention: an explicit attn_mask should not be set when "
                             "is_causal=True; pass one of them")
        mask = np.where(np.tri(L, S, dtype=bool), 0.0, -np.inf).astype(dtype)
    elif attn_mask is not None:
        mask = attn_mask if isinstance(attn_mask, Tensor) and attn_mask.dtype.kind == "f" else as_array(attn_mask)
        if mask.dtype == bool:
            mask = np.where(mask, 0.0, -np.inf).astype(dtype)
        elif not isinstance(mask, Tensor):
            mask = mask.astype(dtype)
    keep, factor = None, 1.0
    if dropout_p > 0.0:
        shape = np.broadcast_shapes(query.shape[:-1] + (S,), key.shape[:-2] + (L, S),
                                    () if mask is None else np.shape(mask))
        draw = np.float64 if dtype == np.float64 else np.float32
        keep = _random_generator(None).random(shape, dtype=draw) >= dropout_p
        factor = 0.0 if dropout_p >= 1.0 else 1.0 / (1.0 - dropout_p)
    scale = 1.0 / math.sqrt(E) if scale is None else float(scale)
    return ScaledDotProductAttention.apply(query, key, value, mask, scale=scale, keep=keep, factor=factor)


def _repeat_heads(t: Tensor, groups: int) -> Tensor:
    """t (..., H, S, E) -> (..., H * groups, S, E), each head repeated `groups` times in a row."""
    shape = t.shape
    out = Expand.apply(Unsqueeze.apply(t, dim=-3), shape=shape[:-2] + (groups,) + shape[-2:])
    return Reshape.apply(out, shape=shape[:-3] + (shape[-3] * groups,) + shape[-2:])


@public("F")
def normalize(input: TensorLike, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Tensor | None = None) -> Tensor:
    """input / max(||input||_p, eps) along dim: unit vectors (a zero vector stays zero)."""
    if out is not None:
        raise NotImplementedError("normalize(out=...) is not supported; use the returned tensor")
    input = _tensor(input)
    return Div.apply(input, Clamp.apply(Norm.apply(input, p=p, dim=dim, keepdim=True), lo=eps, hi=None))


# ---- activations (ops/activation.py); `inplace` is accepted and ignored: an in-place op would cut the
# graph, and the values are the same -----------------------------------------------------------------
@public("F")
def hardtanh(input: TensorLike, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """min(max(x, min_val), max_val); the gradient is 1 strictly between the bounds, 0 elsewhere."""
    if min_val > max_val:
        raise ValueError(f"hardtanh's min_val ({min_val}) cannot be greater than its max_val ({max_val})")
    return Hardtanh.apply(_tensor(input), lo=min_val, hi=max_val)


@public("F")
def relu6(input: TensorLike, inplace: bool = False) -> Tensor:
    """min(max(x, 0), 6): hardtanh(x, 0, 6), with its node (HardtanhBackward0) as in PyTorch."""
    return Hardtanh.apply(_tensor(input), lo=0.0, hi=6.0)


@public("F")
def leaky_relu(input: TensorLike, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """x where x > 0, negative_slope * x elsewhere."""
    return LeakyRelu.apply(_tensor(input), slope=negative_slope)


@public("F")
def elu(input: TensorLike, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x where x > 0, alpha * (exp(x) - 1) elsewhere."""
    return Elu.apply(_tensor(input), alpha=alpha)


@public("F")
def silu(input: TensorLike, inplace: bool = False) -> Tensor:
    """x * sigmoid(x) (swish)."""
    return Silu.apply(_tensor(input))


@public("F")
def hardswish(input: TensorLike, inplace: bool = False) -> Tensor:
    """x * relu6(x + 3) / 6."""
    return Hardswish.apply(_tensor(input))


@public("F")
def hardsigmoid(input: TensorLike, inplace: bool = False) -> Tensor:
    """relu6(x + 3) / 6."""
    return Hardsigmoid.apply(_tensor(input))


@public("F")
def gelu(input: TensorLike, *, approximate: str = "none") -> Tensor:
    """x * Phi(x), Phi the standard normal CDF; approximate='tanh' uses PyTorch's tanh formula."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu's approximate must be 'none' or 'tanh', got {approximate!r}")
    return Gelu.apply(_tensor(input), approximate=approximate)


@public("Tensor", "saliency")
def erf(input: TensorLike) -> Tensor:
    """The error function, 2 / sqrt(pi) * integral of exp(-t^2) from 0 to x."""
    return Erf.apply(_tensor(input))


@public("F")
def softplus(input: TensorLike, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold."""
    return Softplus.apply(_tensor(input), beta=beta, threshold=threshold)


@public("F")
def mish(input: TensorLike, inplace: bool = False) -> Tensor:
    """x * tanh(softplus(x))."""
    return Mish.apply(_tensor(input))


@public("Tensor", "saliency", "F")
def prelu(input: TensorLike, weight: TensorLike) -> Tensor:
    """x where x > 0, weight * x elsewhere; weight has one element, or one per channel (dimension 1)."""
    return Prelu.apply(_tensor(input), _tensor(weight))


# ---- reductions -------------------------------------------------------------------------------
class _ValuesIndices(NamedTuple):
    """(values, indices), as returned by max(dim) and min(dim)."""
    values: Tensor
    indices: Tensor


@public("Tensor", "saliency")
def sum(input: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    """The sum of the elements: of all of them (dim None), or over dim (an int or a sequence), whose dimensions
    are removed unless keepdim (torch.sum)."""
    return Sum.apply(input, dim=dim, keepdim=keepdim)


@public("Tensor", "saliency")
def mean(input: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    """The mean of the elements: of all of them (dim None), or over dim (an int or a sequence), whose dimensions
    are removed unless keepdim (torch.mean)."""
    return Mean.apply(input, dim=dim, keepdim=keepdim)


@public("Tensor", "saliency")
def amax(input: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    """The largest element over dim (an int or a sequence; all elements when None), without indices; tied
    maxima share the gradient equally (torch.amax)."""
    return Amax.apply(input, dim=dim, keepdim=keepdim)


@public("Tensor", "saliency")
def amin(input: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    """The smallest element over dim (an int or a sequence; all elements when None), without indices; tied
    minima share the gradient equally (torch.amin)."""
    return Amin.apply(input, dim=dim, keepdim=keepdim)


@overload
def max(input: Tensor, dim: None = None, keepdim: bool = False) -> Tensor: ...
@overload
def max(input: Tensor, dim: int, keepdim: bool = False) -> _ValuesIndices: ...


@public("Tensor", "saliency")
def max(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor | _ValuesIndices:
    """The largest element; with dim, the (values, indices) of each row's first maximum."""
    return MaxAll.apply(input) if dim is None else _pick(input, dim, keepdim, np.argmax, "Max")


@overload
def min(input: Tensor, dim: None = None, keepdim: bool = False) -> Tensor: ...
@overload
def min(input: Tensor, dim: int, keepdim: bool = False) -> _ValuesIndices: ...


@public("Tensor", "saliency")
def min(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor | _ValuesIndices:
    """The smallest element; with dim, the (values, indices) of each row's first minimum."""
    return MinAll.apply(input) if dim is None else _pick(input, dim, keepdim, np.argmin, "Min")


def _pick(input: Tensor, dim: int, keepdim: bool, fn: Callable[..., Any], kind: str) -> _ValuesIndices:
    index = arg_index(input._array, dim, True, fn)
    values = MaxDim.apply(input, index=index, dim=dim, keepdim=keepdim, kind=kind)
    return _ValuesIndices(values, Tensor._make(arg_index(input._array, dim, keepdim, fn), False, None))


@public("Tensor", "saliency")
def argmax(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """The index of the first maximum: in the flattened tensor (dim None), or along dim (kept with size 1
    if keepdim); an int64 tensor outside the graph (torch.argmax)."""
    return Tensor._make(arg_index(input._array, dim, keepdim, np.argmax), False, None)


@public("Tensor", "saliency")
def argmin(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """The index of the first minimum: in the flattened tensor (dim None), or along dim (kept with size 1
    if keepdim); an int64 tensor outside the graph (torch.argmin)."""
    return Tensor._make(arg_index(input._array, dim, keepdim, np.argmin), False, None)


@public("Tensor", "saliency")
def norm(input: Tensor, p: Number = 2, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    """The p-norm (sum |x|^p)^(1/p) of all elements (dim None) or over dim (an int or a sequence), the
    dimensions removed unless keepdim; p is 2 by default, or 1, any p > 0, or inf (max |x|) (torch.norm)."""
    return Norm.apply(input, p=p, dim=dim, keepdim=keepdim)


@public("Tensor", "saliency")
def logsumexp(input: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    """log(sum(exp(input))) over dim (an int or a sequence; all elements when None), computed without
    overflow (torch.logsumexp)."""
    return LogSumExp.apply(input, dim=dim, keepdim=keepdim)


# ---- shapes -----------------------------------------------------------------------------------
@public("Tensor", "saliency", also=("view",))
def reshape(input: Tensor, *shape: Size) -> Tensor:
    """The same elements in the shape given as ints or as one sequence; one size may be -1 (inferred).
    Tensor.view is this op too (no contiguity is required here) (torch.reshape)."""
    return Reshape.apply(input, shape=_shape_args(shape))


@public("Tensor", "saliency", "F")
def flatten(input: TensorLike, start_dim: int = 0, end_dim: int = -1) -> Tensor:
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
def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """input with dimensions dim0 and dim1 swapped (torch.transpose)."""
    return Transpose.apply(input, dim0=dim0, dim1=dim1)


@public("Tensor", "saliency")
def t(input: Tensor) -> Tensor:
    """The transpose of a matrix (its two dimensions swapped); a 0-d or 1-d tensor keeps its shape, and more
    than 2 dimensions is an error (torch.t)."""
    if input.ndim > 2:
        raise ValueError(f"t() expects a tensor with at most 2 dimensions, got shape {input.shape}; "
                         f"use transpose(dim0, dim1)")
    return Transpose.apply(input, dim0=0, dim1=-1, short=True)


@public("Tensor", "saliency")
def permute(input: Tensor, *dims: Size) -> Tensor:
    """input with its dimensions reordered: dimension i of the result is dimension dims[i] of input (dims
    as ints or one sequence, each dimension once) (torch.permute)."""
    return Permute.apply(input, dims=_shape_args(dims))


@public("Tensor", "saliency")
def squeeze(input: Tensor, dim: int | Sequence[int] | None = None) -> Tensor:
    """input without size-1 dimensions: all of them (dim None), or those of dim (an int or a sequence) that
    have size 1 (torch.squeeze)."""
    return Squeeze.apply(input, dim=dim)


@public("Tensor", "saliency")
def unsqueeze(input: Tensor, dim: int) -> Tensor:
    """input with a size-1 dimension inserted at position dim (a negative dim counts from the end of the
    result) (torch.unsqueeze)."""
    return Unsqueeze.apply(input, dim=dim)


@public("Tensor")
def expand(input: Tensor, *sizes: Size) -> Tensor:
    """input broadcast to sizes (ints or one sequence), without copying: size-1 dimensions are repeated, -1
    keeps a dimension's size, and new leading dimensions may be added (Tensor.expand)."""
    return Expand.apply(input, shape=_shape_args(sizes))


@public("Tensor", "saliency")
def broadcast_to(input: TensorLike, size: Sequence[int]) -> Tensor:
    """input broadcast to size, as expand (torch.broadcast_to)."""
    return Expand.apply(_tensor(input), shape=tuple(size))


@public("Tensor", "saliency")
def roll(input: Tensor, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None) -> Tensor:
    """Shift cyclically along `dims` by `shifts` (ints, or sequences of equal length): element i of a
    dimension moves to (i + shift) mod n. Without dims, the flattened tensor rolls by one shift."""
    shifts = _int_tuple(shifts, "shifts")
    if dims is None:
        if len(shifts) != 1:
            raise ValueError(f"shifts and dimensions must align: roll without dims takes one shift, got {shifts}; "
                             f"pass dims= with one dimension per shift")
        return Roll.apply(input, shifts=shifts, dims=None)
    dims = _int_tuple(dims, "dims")
    if len(shifts) != len(dims) or not dims:
        raise ValueError(f"shifts and dimensions must align: {len(shifts)} shift(s) {shifts} for {len(dims)} "
                         f"dimension(s) {dims}")
    return Roll.apply(input, shifts=shifts, dims=tuple(normalize_dims(d, input.ndim)[0] for d in dims))


def _int_tuple(v: int | Sequence[int], what: str) -> tuple[int, ...]:
    values = tuple(v) if isinstance(v, (tuple, list)) else (v,)
    if not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) for n in values):
        raise TypeError(f"roll: {what} must be an int or a sequence of ints, got {v!r}")
    return tuple(int(n) for n in values)


@public("Tensor", "saliency")
def clone(input: Tensor) -> Tensor:
    """A copy of input, on the graph: the gradient passes through unchanged (torch.clone)."""
    return Clone.apply(input)


@public("Tensor")
def to(input: Tensor, *args: DTypeLike | str | Device | Tensor, dtype: DTypeLike | None = None,
       device: str | Device | None = None, non_blocking: bool = False, copy: bool = False,
       memory_format: object | None = None) -> Tensor:
    """The tensor in `dtype` (a Cast node when it changes), as PyTorch's to(dtype), to(device),
    to(device, dtype) or to(other): the only device is the CPU; another one is an error."""
    dtype, _ = to_arguments(args, dtype, device)
    if dtype is None or dtype == input.dtype:
        return Clone.apply(input) if copy else input
    return Cast.apply(input, dtype=dtype)


def _new(input: Tensor, fill: Number, size: Sequence[Size], dtype: DTypeLike | None, device: str | Device | None,
         requires_grad: bool) -> Tensor:
    """A tensor of `size` filled with `fill`, of input's dtype unless `dtype` (PyTorch's Tensor.new_*)."""
    dtype, _ = to_arguments((), dtype, device)
    return Tensor(np.full(_shape_args(size), fill, dtype=dtype or input.dtype), requires_grad=requires_grad)


@public("Tensor")
def new_zeros(input: Tensor, *size: Size, dtype: DTypeLike | None = None, device: str | Device | None = None,
              requires_grad: bool = False, layout: object | None = None, pin_memory: bool = False) -> Tensor:
    """Zeros of `size` (a sequence, or ints) with input's dtype unless `dtype`; not on the graph."""
    return _new(input, 0, size, dtype, device, requires_grad)


@public("Tensor")
def new_ones(input: Tensor, *size: Size, dtype: DTypeLike | None = None, device: str | Device | None = None,
             requires_grad: bool = False, layout: object | None = None, pin_memory: bool = False) -> Tensor:
    """Ones of `size` (a sequence, or ints) with input's dtype unless `dtype`; not on the graph."""
    return _new(input, 1, size, dtype, device, requires_grad)


@public("Tensor")
def new_empty(input: Tensor, *size: Size, dtype: DTypeLike | None = None, device: str | Device | None = None,
              requires_grad: bool = False, layout: object | None = None, pin_memory: bool = False) -> Tensor:
    """Zeros: an 'uninitialised' tensor with defined values."""
    return _new(input, 0, size, dtype, device, requires_grad)


@public("Tensor")
def new_full(input: Tensor, size: Size, fill_value: Number, *, dtype: DTypeLike | None = None,
             device: str | Device | None = None, requires_grad: bool = False, layout: object | None = None,
             pin_memory: bool = False) -> Tensor:
    """A tensor of `size` filled with fill_value, with input's dtype unless `dtype`; not on the graph."""
    return _new(input, fill_value, (size,), dtype, device, requires_grad)


@public("Tensor")
def new_tensor(input: Tensor, data: TensorLike, *, dtype: DTypeLike | None = None, device: str | Device | None = None,
               requires_grad: bool = False, layout: object | None = None, pin_memory: bool = False) -> Tensor:
    """A copy of `data` (not on the graph) with input's dtype unless `dtype`."""
    dtype, _ = to_arguments((), dtype, device)
    return Tensor(np.array(as_array(data), dtype=dtype or input.dtype, copy=True), requires_grad=requires_grad)


@public("Tensor")
def type_as(input: Tensor, other: Tensor) -> Tensor:
    """input cast to other's dtype, as to(other.dtype): input itself when the dtypes are the same."""
    return to(input, other.dtype)


@public("Tensor")
def view_as(input: Tensor, other: Tensor) -> Tensor:
    """input reshaped to other's shape: view(other.shape)."""
    return Reshape.apply(input, shape=tuple(other.shape))


@public("Tensor")
def reshape_as(input: Tensor, other: Tensor) -> Tensor:
    """input reshaped to other's shape: reshape(other.shape)."""
    return Reshape.apply(input, shape=tuple(other.shape))


@public("Tensor")
def expand_as(input: Tensor, other: Tensor) -> Tensor:
    """input broadcast to other's shape: expand(other.shape)."""
    return Expand.apply(input, shape=tuple(other.shape))


@public("Tensor")
def repeat(input: Tensor, *sizes: Size) -> Tensor:
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
def split(input: Tensor, split_size_or_sections: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
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
def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """At most `chunks` pieces along `dim`, each of ceil(size / chunks) elements but the last."""
    if chunks <= 0:
        raise ValueError(f"chunk expects a positive number of chunks, got {chunks}")
    (axis,) = normalize_dims(dim, input.ndim)
    return split(input, builtins.max(1, -(-input.shape[axis] // chunks)), dim)


@public("saliency")
def cat(tensors: Sequence[TensorLike], dim: int = 0) -> Tensor:
    """The tensors joined along their existing dimension dim; their shapes must match in every other
    dimension (torch.cat)."""
    return Cat.apply(*[_tensor(t) for t in tensors], dim=dim)


@public("saliency")
def stack(tensors: Sequence[TensorLike], dim: int = 0) -> Tensor:
    """The tensors, all of one shape, joined along a new dimension dim (torch.stack)."""
    return Stack.apply(*[_tensor(t) for t in tensors], dim=dim)


@public("saliency", "F")
def pad(input: TensorLike, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad (or, with negative sizes, crop) the last len(pad) // 2 dimensions; `pad` lists (before,
    after) sizes from the last dimension backwards. mode 'constant' (with `value`, default 0) pads any
    number of dimensions; 'reflect', 'replicate' and 'circular' pad the last 1, 2 or 3 dimensions of
    an input with at most one more dimension besides the batch one, as PyTorch."""
    input = _tensor(input)
    pad = tuple(pad)
    if not all(isinstance(p, (int, np.integer)) and not isinstance(p, bool) for p in pad):
        raise TypeError(f"pad must be a tuple of ints, got {pad!r}")
    if len(pad) % 2:
        raise ValueError(f"padding length must be divisible by 2, got {len(pad)}")
    if len(pad) // 2 > input.ndim:
        raise ValueError(f"padding length should be less than or equal to two times the input dimension but got "
                         f"padding length {len(pad)} and input of dimension {input.ndim}")
    if mode == "constant":
        return Pad.apply(input, pad=pad, value=0.0 if value is None else value)
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"unrecognised padding mode {mode!r}; the modes are 'constant', 'reflect', "
                                  f"'replicate' and 'circular'")
    if value is not None and value != 0:
        raise ValueError(f"padding mode {mode!r} doesn't take in value argument")
    d = len(pad) // 2
    if d not in (1, 2, 3) or input.ndim not in (d + 1, d + 2):
        raise NotImplementedError(f"padding size {len(pad)} is not supported for {input.ndim}D input with mode "
                                  f"{mode!r}: pad 2, 4 or 6 sizes pad the last 1, 2 or 3 dimensions of an input "
                                  f"with 1 or 2 more dimensions")
    return TablePad.apply(input, pad=pad, mode=mode)


# ---- losses -----------------------------------------------------------------------------------
@public("saliency", "F")
def nll_loss(input: TensorLike, target: TensorLike, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of integer class targets; input (log-probabilities) is (N, C) or (N, C, ...)."""
    target = as_array(target)
    return NllLoss.apply(_tensor(input), target=target, reduction=reduction)


@public("saliency", "F")
def cross_entropy(input: TensorLike, target: TensorLike, reduction: str = "mean") -> Tensor:
    """nll_loss(log_softmax(input, dim=1), target): logits (N, C) or (N, C, ...), or (C,) with a scalar target."""
    logits = _tensor(input)
    labels = as_array(target)
    if logits.ndim == 1:
        out = nll_loss(logits.unsqueeze(0).log_softmax(1), labels.reshape(1), reduction)
        return out.squeeze(0) if reduction == "none" else out
    return nll_loss(logits.log_softmax(1), labels, reduction)


@public("saliency", "F")
def mse_loss(input: TensorLike, target: TensorLike, reduction: str = "mean") -> Tensor:
    """Mean (or sum) of squared differences; input and target must have the same shape."""
    input = _tensor(input)
    return MseLoss.apply(input, _operand(target, input), reduction=reduction)


# ---- convolution, pooling, resizing, normalisation (NCHW; kernels in saliency.kernels) -----------------
def _pair(v: Any) -> tuple[Any, ...]:
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


@public("saliency", "F")
def conv2d(input: TensorLike, weight: TensorLike, bias: TensorLike | None = None, stride: Size = 1, padding: Size = 0,
           dilation: Size = 1, groups: int = 1) -> Tensor:
    """2-D cross-correlation: input (N, C, H, W), weight (O, C/groups, kh, kw), bias (O,) or None."""
    return Convolution.apply(_tensor(input), _tensor(weight), None if bias is None else _tensor(bias),
                             stride=stride, padding=padding, dilation=dilation, groups=groups)


@public("saliency", "F")
def conv_transpose2d(input: TensorLike, weight: TensorLike, bias: TensorLike | None = None, stride: Size = 1,
                     padding: Size = 0, output_padding: Size = 0, groups: int = 1, dilation: Size = 1) -> Tensor:
    """2-D transposed convolution (the adjoint of conv2d): input (N, C, H, W), weight (C, O/groups, kh,
    kw), bias (O,) or None -> (N, O, (H - 1) * stride - 2 * padding + dilation * (kh - 1) +
    output_padding + 1, likewise W)."""
    return ConvolutionTranspose.apply(_tensor(input), _tensor(weight), None if bias is None else _tensor(bias),
                                      stride=stride, padding=padding, output_padding=output_padding,
                                      groups=groups, dilation=dilation)


@public("F")
def upsample_conv2d(input: TensorLike, weight: TensorLike, bias: TensorLike | None = None,
                    scale_factor: float = 2) -> Tensor:
    """conv2d(interpolate(input, scale_factor, 'nearest'), weight, bias, padding=1) for a 3x3 weight,
    as one sub-pixel convolution (4/9 of the work; the upsampled image is never built)."""
    if int(scale_factor) != scale_factor or scale_factor < 1:
        raise ValueError(f"scale_factor must be a positive integer, got {scale_factor!r}")
    return UpsampleConvolution.apply(_tensor(input), _tensor(weight), None if bias is None else _tensor(bias),
                                     scale=int(scale_factor))


def _pool_arg(v: Any, name: str, positive: bool = True) -> tuple[int, ...]:
    """An int or a pair of ints (a 1-element list counts for both axes), as PyTorch's pooling reads it."""
    if isinstance(v, (tuple, list)):
        if len(v) == 1:
            v = (v[0], v[0])
        if len(v) != 2:
            raise ValueError(f"{name} must be an int or a pair of ints, got {v!r}")
        pair = tuple(int(e) for e in v)
    else:
        pair = (int(v), int(v))
    if positive and (pair[0] < 1 or pair[1] < 1):
        raise ValueError(f"{name} must be positive, got {v!r}")
    return pair


def _pooled(input: TensorLike, run: Callable[[Tensor], Any]) -> Any:
    """`run` on (N, C, H, W); an unbatched (C, H, W) input, which PyTorch also pools, goes through as a
    batch of one."""
    input = _tensor(input)
    if input.ndim == 3:
        out = run(input.unsqueeze(0))
        return tuple(o.squeeze(0) for o in out) if isinstance(out, tuple) else out.squeeze(0)
    if input.ndim != 4:
        raise ValueError(f"2-d pooling expects input of shape (N, C, H, W) or (C, H, W), got {tuple(input.shape)}")
    return run(input)


def _with_indices(out: Tensor, node_type: type[Function], compute: Callable[[], Any]) -> tuple[Tensor, Tensor]:
    """(out, int64 indices into each H*W plane of the input) for return_indices=True: the node's saved
    indices when out is on the graph, else computed again."""
    node = out.grad_fn
    indices = node.saved[0] if type(node) is node_type else compute()[1]
    return out, Tensor(np.asarray(indices, np.int64))


@overload
def max_pool2d(input: TensorLike, kernel_size: Size, stride: Size | None = None, padding: Size = 0, dilation: Size = 1,
               ceil_mode: bool = False, return_indices: Literal[False] = False) -> Tensor: ...


@overload
def max_pool2d(input: TensorLike, kernel_size: Size, stride: Size | None, padding: Size, dilation: Size,
               ceil_mode: bool, return_indices: Literal[True]) -> tuple[Tensor, Tensor]: ...


@overload
def max_pool2d(input: TensorLike, kernel_size: Size, stride: Size | None = None, padding: Size = 0, dilation: Size = 1,
               ceil_mode: bool = False, *, return_indices: Literal[True]) -> tuple[Tensor, Tensor]: ...


@overload
def max_pool2d(input: TensorLike, kernel_size: Size, stride: Size | None = None, padding: Size = 0, dilation: Size = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]: ...


@public("saliency", "F")
def max_pool2d(input: TensorLike, kernel_size: Size, stride: Size | None = None, padding: Size = 0, dilation: Size = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    """Maximum over sliding windows (padding is -inf); stride None (or []) is the kernel size.
    return_indices=True also gives the flat index iy * W + ix of each maximum, as PyTorch's."""
    k = _pool_arg(kernel_size, "kernel_size")
    s = k if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0) else _pool_arg(stride, "stride")
    p, d = _pool_arg(padding, "padding", positive=False), _pool_arg(dilation, "dilation")
    cfg: dict[str, Any] = dict(kernel_size=k, stride=s, padding=p)
    if d != (1, 1) or ceil_mode:
        cfg.update(dilation=d, ceil_mode=bool(ceil_mode))

    def run(x: Tensor) -> Tensor | tuple[Tensor, Tensor]:
        out = MaxPool2d.apply(x, **cfg)
        if not return_indices:
            return out
        return _with_indices(out, MaxPool2d,
                             lambda: _kernels.max_pool2d_forward(x._array, k, s, p, d, bool(ceil_mode)))
    return _pooled(input, run)


@public("F")
def avg_pool2d(input: TensorLike, kernel_size: Size, stride: Size | None = None, padding: Size = 0,
               ceil_mode: bool = False, count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """Mean over sliding windows: the window's sum divided by its cells up to the end of the padding
    (count_include_pad=True), by its cells inside the input (False), or by divisor_override."""
    k = _pool_arg(kernel_size, "kernel_size")
    s = k if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0) else _pool_arg(stride, "stride")
    cfg: dict[str, Any] = dict(kernel_size=k, stride=s, padding=_pool_arg(padding, "padding", positive=False))
    if ceil_mode or not count_include_pad or divisor_override is not None:
        cfg.update(ceil_mode=bool(ceil_mode), count_include_pad=bool(count_include_pad),
                   divisor_override=divisor_override)
    return _pooled(input, lambda x: AvgPool2d.apply(x, **cfg))


def _adaptive_size(output_size: int | Sequence[int | None], x: Tensor) -> tuple[int, int]:
    """PyTorch's output_size: an int, or a pair whose None entries keep that dimension of the input."""
    size = output_size if isinstance(output_size, (tuple, list)) else (output_size, output_size)
    if len(size) != 2:
        raise ValueError(f"output_size must be an int or a pair, got {output_size!r}")
    size = tuple(x.shape[-2 + i] if e is None else int(e) for i, e in enumerate(size))
    if size[0] < 1 or size[1] < 1:
        raise ValueError(f"output_size must be positive, got {output_size!r}")
    return size


@public("F")
def adaptive_avg_pool2d(input: TensorLike, output_size: int | Sequence[int | None]) -> Tensor:
    """Mean over PyTorch's adaptive bins [floor(i * H / oh), ceil((i + 1) * H / oh)) for an (oh, ow) output."""
    return _pooled(input, lambda x: AdaptiveAvgPool2d.apply(x, output_size=_adaptive_size(output_size, x)))


@overload
def adaptive_max_pool2d(input: TensorLike, output_size: int | Sequence[int | None],
                        return_indices: Literal[False] = False) -> Tensor: ...


@overload
def adaptive_max_pool2d(input: TensorLike, output_size: int | Sequence[int | None],
                        return_indices: Literal[True]) -> tuple[Tensor, Tensor]: ...


@overload
def adaptive_max_pool2d(input: TensorLike, output_size: int | Sequence[int | None],
                        return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]: ...


@public("F")
def adaptive_max_pool2d(input: TensorLike, output_size: int | Sequence[int | None],
                        return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    """Maximum over PyTorch's adaptive bins; return_indices=True also gives each maximum's flat index."""
    def run(x: Tensor) -> Tensor | tuple[Tensor, Tensor]:
        size = _adaptive_size(output_size, x)
        out = AdaptiveMaxPool2d.apply(x, output_size=size)
        if not return_indices:
            return out
        return _with_indices(out, AdaptiveMaxPool2d, lambda: _kernels.adaptive_max_pool2d_forward(x._array, size))
    return _pooled(input, run)


_RESIZE_INSTEAD = {
    "bicubic": "mode='bilinear' (the nearest supported interpolation)",
    "area": "F.adaptive_avg_pool2d(input, size), which is what 'area' computes",
    "nearest-exact": "mode='nearest' (PyTorch's legacy rounding, floor(dst * in / out))",
    "trilinear": "mode='bilinear' on 4-D input",
    "linear": "mode='bilinear' on a 4-D (N, C, 1, W) view of the input",
}


def _spatial_pair(value: Any, what: str, ndim: int) -> tuple[Any, ...]:
    """(rows, cols) of an int/float or of a 2-sequence, checked against the input's spatial dimensions."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(f"{what} must give one value per spatial dimension ({ndim} for (N, C, H, W) "
                             f"input), got {list(value)}")
        return tuple(value)
    return value, value


@public("F")
def interpolate(input: TensorLike, size: Size | None = None, scale_factor: float | Sequence[float] | None = None,
                mode: str = "nearest", align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """Resize (N, C, H, W) to `size` (an int or (h, w)) or by `scale_factor` (a number or a pair,
    non-integer allowed), with mode 'nearest' or 'bilinear' (align_corners True or False), with
    PyTorch's output sizes, source indices and weights."""
    input = _tensor(input)
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    if mode in _RESIZE_INSTEAD:
        raise NotImplementedError(f"interpolate mode {mode!r} is not supported; use {_RESIZE_INSTEAD[mode]}")
    if mode not in ("nearest", "bilinear"):
        raise NotImplementedError(f"interpolate mode {mode!r} is not supported; the modes are 'nearest' and 'bilinear'")
    if input.ndim != 4:
        raise NotImplementedError(f"interpolate supports 4-D input (N, C, H, W) only, got {input.ndim}-D input "
                                  f"of shape {tuple(input.shape)}")
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is None and scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if antialias:
        raise NotImplementedError("interpolate(antialias=True) is not supported; downsample with antialias=False, "
                                  "or average first with F.avg_pool2d / F.adaptive_avg_pool2d")
    H, W = input.shape[2:]
    if size is not None:
        out = _spatial_pair(size, "size", 2)
        if not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) for n in out):
            raise TypeError(f"expected size to be one of int or Tuple[int, int], but got size with types "
                            f"{[type(n) for n in out]}")
        scales: tuple[float | None, ...] = (None, None)
    else:
        factors = tuple(float(f) for f in _spatial_pair(scale_factor, "scale_factor", 2))
        scales = factors
        out = (int(H * factors[0]), int(W * factors[1]))  # floor, in double precision, as PyTorch
        if recompute_scale_factor:
            scales = (None, None)
    out = (int(out[0]), int(out[1]))
    if H <= 0 or W <= 0 or out[0] <= 0 or out[1] <= 0:
        raise ValueError(f"Input and output sizes should be greater than 0, but got input (H: {H}, W: {W}) "
                         f"output (H: {out[0]}, W: {out[1]})")
    return Upsample.apply(input, size=out, scales=scales, mode=mode, align_corners=bool(align_corners))


def _shuffle_factor(name: str, what: str, factor: int) -> int:
    if isinstance(factor, bool) or not isinstance(factor, (int, np.integer)):
        raise TypeError(f"{name}(): argument '{what}' must be int, not {type(factor).__name__}")
    if factor <= 0:
        raise ValueError(f"{name} expects a positive {what}, but got {factor}")
    return int(factor)


@public("saliency", "F")
def pixel_shuffle(input: TensorLike, upscale_factor: int) -> Tensor:
    """`(*, C r^2, H, W)` -> `(*, C, H r, W r)` with r = upscale_factor: each group of r^2 channels
    becomes an r x r block of one channel."""
    input = _tensor(input)
    r = _shuffle_factor("pixel_shuffle", "upscale_factor", upscale_factor)
    if input.ndim < 3:
        raise ValueError(f"pixel_shuffle expects input to have at least 3 dimensions, but got input with "
                         f"{input.ndim} dimension(s)")
    if input.shape[-3] % (r * r):
        raise ValueError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                         f"upscale_factor, but input.size(-3)={input.shape[-3]} is not divisible by {r * r}")
    return PixelShuffle.apply(input, upscale_factor=r)


@public("saliency", "F")
def pixel_unshuffle(input: TensorLike, downscale_factor: int) -> Tensor:
    """`(*, C, H r, W r)` -> `(*, C r^2, H, W)` with r = downscale_factor: the inverse of pixel_shuffle."""
    input = _tensor(input)
    r = _shuffle_factor("pixel_unshuffle", "downscale_factor", downscale_factor)
    if input.ndim < 3:
        raise ValueError(f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with "
                         f"{input.ndim} dimension(s)")
    for axis, what in ((-2, "height"), (-1, "width")):
        if input.shape[axis] % r:
            raise ValueError(f"pixel_unshuffle expects {what} to be divisible by downscale_factor, but "
                             f"input.size({axis})={input.shape[axis]} is not divisible by {r}")
    return PixelUnshuffle.apply(input, downscale_factor=r)


@public("saliency", "F")
def batch_norm(input: TensorLike, running_mean: Tensor | FloatArray | None, running_var: Tensor | FloatArray | None,
               weight: TensorLike | None = None, bias: TensorLike | None = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Per-channel normalisation of (N, C), (N, C, L) or (N, C, H, W); updates the running statistics in place
    when training."""
    def stat(v: Tensor | FloatArray | None) -> FloatArray | None:
        return None if v is None else (v._array if isinstance(v, Tensor) else v)

    return BatchNorm.apply(_tensor(input), None if weight is None else _tensor(weight),
                           None if bias is None else _tensor(bias), running_mean=stat(running_mean),
                           running_var=stat(running_var), training=training, momentum=momentum, eps=eps)


def _optional(v: TensorLike | None) -> Tensor | None:
    return None if v is None else _tensor(v)


@public("saliency", "F")
def group_norm(input: TensorLike, num_groups: int, weight: TensorLike | None = None, bias: TensorLike | None = None,
               eps: float = 1e-5) -> Tensor:
    """Normalise (N, C, *) over each sample's groups of C / num_groups channels (and all their positions);
    weight and bias (C,) per channel."""
    return GroupNorm.apply(_tensor(input), _optional(weight), _optional(bias), num_groups=int(num_groups), eps=eps)


@public("saliency", "F")
def layer_norm(input: TensorLike, normalized_shape: Size, weight: TensorLike | None = None,
               bias: TensorLike | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise over the trailing dimensions `normalized_shape` (an int or a sequence), separately for
    every index of the leading ones; weight and bias have shape normalized_shape."""
    shape = (int(normalized_shape),) if isinstance(normalized_shape, (int, np.integer)) else \
        tuple(int(n) for n in normalized_shape)
    return LayerNorm.apply(_tensor(input), _optional(weight), _optional(bias), normalized_shape=shape, eps=eps)


@public("saliency", "F")
def instance_norm(input: TensorLike, running_mean: Tensor | FloatArray | None = None,
                  running_var: Tensor | FloatArray | None = None, weight: TensorLike | None = None,
                  bias: TensorLike | None = None, use_input_stats: bool = True, momentum: float = 0.1,
                  eps: float = 1e-5) -> Tensor:
    """Normalise each channel of each sample of (N, C, *) over its positions (use_input_stats=True, updating
    running_mean / running_var in place with the batch's average of the per-sample statistics, the
    variance unbiased), or with the running statistics (use_input_stats=False); weight, bias (C,)."""
    input = _tensor(input)
    if input.ndim < 3:
        raise ValueError(f"instance_norm expects input of shape (N, C, *) with positions, got {tuple(input.shape)}")
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise ValueError("instance_norm with use_input_stats=False needs running_mean and running_var")
        return batch_norm(input, running_mean, running_var, weight, bias, training=False, eps=eps)
    count = math.prod(input.shape[2:])
    if count < 2:
        raise ValueError(f"instance_norm needs more than one position per channel with input statistics, got "
                         f"input of shape {tuple(input.shape)}")
    for stat, running in ((False, running_mean), (True, running_var)):
        if running is not None:
            x = input._array.reshape(input.shape[0], input.shape[1], -1)
            v = (x.var(axis=2, dtype=np.float64) * count / (count - 1)) if stat else x.mean(axis=2, dtype=np.float64)
            arr = running._array if isinstance(running, Tensor) else running
            arr *= 1 - momentum
            arr += (momentum * v.mean(axis=0)).astype(arr.dtype)
            _versions.bump(arr)
    return GroupNorm.apply(input, _optional(weight), _optional(bias), num_groups=input.shape[1], eps=eps)


for _name, _fn in _registry["Tensor"].items():
    setattr(Tensor, _name, _fn)
