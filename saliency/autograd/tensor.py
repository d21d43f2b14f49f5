"""`Tensor`: a NumPy array plus what autograd needs (requires_grad, grad, grad_fn, hooks)."""
import collections
import math
import warnings
import weakref

import numpy as np

from .function import AccumulateGrad, _RemovableHandle
from .grad_mode import frozen_var, is_grad_enabled
from .ops.elementwise import (Abs, Add, Cast, Clamp, Clone, Div, Exp, Log, Maximum, Minimum, Mul, Neg, Pow, Relu,
                              Sigmoid, Sqrt, Sub, Tanh)
from .ops.linalg import Matmul
from .ops.loss import LogSoftmax, Softmax
from .ops.reduce import Amax, Amin, LogSumExp, MaxAll, MaxDim, Mean, MinAll, Norm, Sum, arg_index, normalize_dims
from .ops.shape import Expand, GetItem, Permute, Reshape, Squeeze, Transpose, Unsqueeze
from .printing import format_data

DEFAULT_DTYPE = np.dtype(np.float32)


def as_array(data, dtype=None):
    """The ndarray behind `data`: a Tensor, ndarray, NumPy scalar, Python number or nested list.

    Python floats (and lists of them) become float32, the default dtype; arrays keep theirs.
    """
    if isinstance(data, Tensor):
        arr = data.data
    elif isinstance(data, (np.ndarray, np.generic)):
        arr = np.asarray(data)
    else:
        try:
            arr = np.asarray(data)
        except (ValueError, TypeError) as exc:
            raise TypeError(f"cannot make a tensor from {type(data).__name__} {_short(data)}: {exc}") from None
        if arr.dtype == np.float64 and dtype is None:
            arr = arr.astype(DEFAULT_DTYPE)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"cannot make a tensor from {type(data).__name__} {_short(data)} (dtype {arr.dtype}); "
                        f"pass numbers, nested lists of numbers or a numeric array")
    if dtype is not None:
        arr = arr.astype(dtype, copy=False)
    return arr


def _short(obj):
    text = repr(obj)
    return text if len(text) <= 60 else text[:57] + "..."


# (values, indices), as returned by max(dim) and min(dim)
_ValuesIndices = collections.namedtuple("max_min", ["values", "indices"])


class Tensor:
    """An n-dimensional array that records the operations applied to it, for backward()."""

    __slots__ = ("data", "_requires_grad", "grad_fn", "_grad", "_hooks", "_acc", "__weakref__")
    # ndarray <op> Tensor calls the Tensor's reflected operator instead of NumPy's ufunc
    __array_ufunc__ = None
    __hash__ = object.__hash__

    def __init__(self, data, requires_grad=False, dtype=None):
        self.data = as_array(data, dtype)
        self._requires_grad = False
        self.grad_fn = None
        self._grad = None
        self._hooks = None
        self._acc = None
        if requires_grad:
            self.requires_grad = True

    @classmethod
    def _make(cls, data, requires_grad, grad_fn):
        t = object.__new__(cls)
        t.data = data
        t._requires_grad = requires_grad
        t.grad_fn = grad_fn
        t._grad = None
        t._hooks = None
        t._acc = None
        return t

    # ---- autograd state -------------------------------------------------------------------
    @property
    def requires_grad(self):
        """Whether operations on this tensor record the graph (False for a leaf frozen in this
        thread by `grad_mode.frozen`, as attribution methods freeze a model's parameters)."""
        return self._requires_grad and (self.grad_fn is not None or id(self) not in frozen_var.get())

    @requires_grad.setter
    def requires_grad(self, flag):
        flag = bool(flag)
        if self.grad_fn is not None and not flag:
            raise RuntimeError("requires_grad can only be turned off on a leaf tensor; "
                               "use .detach() to get a tensor outside the graph")
        if flag and self.data.dtype.kind != "f":
            raise TypeError(f"only floating point tensors can require gradients, this one has dtype "
                            f"{self.data.dtype}; convert it first, e.g. t.float()")
        self._requires_grad = flag

    def requires_grad_(self, requires_grad=True):
        self.requires_grad = requires_grad
        return self

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def grad(self):
        if self.grad_fn is not None and self.grad_fn.retain_ref is None and self._grad is None:
            warnings.warn("the .grad of a non-leaf tensor is being read; backward() does not fill it. "
                          "Call .retain_grad() on the tensor before backward() if you want it, "
                          "or read the .grad of a leaf instead", UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None:
            value = value if isinstance(value, Tensor) else Tensor(value)
            if value.shape != self.shape:
                raise ValueError(f"grad of shape {value.shape} does not fit a tensor of shape {self.shape}")
            if value.dtype != self.dtype:  # a gradient always has its tensor's dtype
                value = Tensor._make(value.data.astype(self.dtype), False, None)
        self._grad = value

    def _accumulator(self):
        """The AccumulateGrad node of this leaf (one per leaf while any graph uses it)."""
        node = self._acc() if self._acc is not None else None
        if node is None:
            node = AccumulateGrad(self)
            self._acc = weakref.ref(node)
        return node

    def retain_grad(self):
        """Keep this non-leaf tensor's gradient in .grad during backward (no-op on a leaf)."""
        if not self._requires_grad:
            raise RuntimeError("cannot retain_grad on a tensor that does not require grad")
        if self.grad_fn is not None:
            self.grad_fn.retain_ref = weakref.ref(self)
        return self

    @property
    def retains_grad(self):
        return self.grad_fn is not None and self.grad_fn.retain_ref is not None

    def register_hook(self, fn):
        """Call fn(grad) when this tensor's gradient is computed; fn may return a replacement."""
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that does not require grad")
        if self.grad_fn is not None:
            return self.grad_fn.register_prehook(fn)
        if self._hooks is None:
            self._hooks = []
        self._hooks.append(fn)
        return _RemovableHandle(self._hooks, fn)

    def backward(self, gradient=None, retain_graph=None, inputs=None):
        """Accumulate v^T J into the .grad of every leaf, where v = `gradient` (1 for a scalar)."""
        from .backward import backward

        backward(self, gradient, retain_graph=retain_graph, inputs=inputs)

    def detach(self):
        return Tensor._make(self.data, False, None)

    def __deepcopy__(self, memo):
        # a new leaf with its own AccumulateGrad node (a copied graph node would write into the original)
        if self.grad_fn is not None:
            raise RuntimeError("only leaf tensors can be deep-copied (as in PyTorch); copy t.detach() instead")
        copy = type(self)._make(self.data.copy(), self._requires_grad, None)
        if self._grad is not None:
            copy._grad = Tensor._make(self._grad.data.copy(), False, None)
        memo[id(self)] = copy
        return copy

    # ---- array views ------------------------------------------------------------------------
    @property
    def shape(self):
        return self.data.shape

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def ndim(self):
        return self.data.ndim

    def size(self, dim=None):
        return self.data.shape if dim is None else self.data.shape[dim]

    def dim(self):
        return self.data.ndim

    def numel(self):
        return self.data.size

    def numpy(self):
        return self.data

    def item(self):
        if self.data.size != 1:
            raise ValueError(f"item() needs a tensor with one element, this one has shape {self.shape}")
        return self.data.item()

    def tolist(self):
        return self.data.tolist()

    def __array__(self, dtype=None, copy=None):
        arr = self.data if dtype is None else self.data.astype(dtype, copy=False)
        return arr.copy() if copy else arr

    def __len__(self):
        if not self.data.ndim:
            raise TypeError("len() of a 0-d tensor")
        return len(self.data)

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        if self.data.size != 1:
            raise RuntimeError(f"the truth value of a tensor with {self.data.size} elements is ambiguous; "
                               f"use .any() or .all()")
        return bool(self.data.item())

    def any(self):
        return Tensor._make(np.asarray(self.data.any()), False, None)

    def all(self):
        return Tensor._make(np.asarray(self.data.all()), False, None)

    def __repr__(self):
        body = format_data(self.data)
        extras = []
        if self.data.dtype not in (DEFAULT_DTYPE, np.dtype(np.int64), np.dtype(bool)):
            extras.append(f"dtype={self.data.dtype}")
        if self.grad_fn is not None:
            extras.append(f"grad_fn=<{self.grad_fn.name()}>")
        elif self._requires_grad:
            extras.append("requires_grad=True")
        return "tensor(" + body + "".join(", " + e for e in extras) + ")"

    # ---- in place (outside the graph) ----------------------------------------------------------
    def _check_inplace(self):
        if self._requires_grad and is_grad_enabled():
            raise RuntimeError("a tensor that requires grad cannot be changed in place while grad mode is on; "
                               "do it under sl.no_grad() (as optimizers do)")

    def zero_(self):
        self._check_inplace()
        self.data[...] = 0
        return self

    def fill_(self, value):
        self._check_inplace()
        self.data[...] = value
        return self

    def copy_(self, src):
        self._check_inplace()
        self.data[...] = as_array(src)
        return self

    def add_(self, other, alpha=1.0):
        self._check_inplace()
        self.data += alpha * as_array(other)
        return self

    def mul_(self, other):
        self._check_inplace()
        self.data *= as_array(other)
        return self

    # ---- arithmetic ----------------------------------------------------------------------------
    def __add__(self, other):
        return Add.apply(self, _operand(other, self))

    def __radd__(self, other):
        return Add.apply(_operand(other, self), self)

    def __sub__(self, other):
        return Sub.apply(self, _operand(other, self))

    def __rsub__(self, other):
        return Sub.apply(_operand(other, self), self)

    def __mul__(self, other):
        return Mul.apply(self, _operand(other, self))

    def __rmul__(self, other):
        return Mul.apply(_operand(other, self), self)

    def __truediv__(self, other):
        return Div.apply(self, _operand(other, self))

    def __rtruediv__(self, other):
        return Div.apply(_operand(other, self), self)

    def __pow__(self, other):
        return Pow.apply(self, _operand(other, self))

    def __rpow__(self, other):
        return Pow.apply(_operand(other, self), self)

    def __matmul__(self, other):
        return Matmul.apply(self, _operand(other, self))

    def __rmatmul__(self, other):
        return Matmul.apply(_operand(other, self), self)

    def __neg__(self):
        return Neg.apply(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return Abs.apply(self)

    def __getitem__(self, key):
        return GetItem.apply(self, key=_index_key(key))

    # comparisons give boolean tensors outside the graph
    def __lt__(self, other):
        return _compare(np.less, self, other)

    def __le__(self, other):
        return _compare(np.less_equal, self, other)

    def __gt__(self, other):
        return _compare(np.greater, self, other)

    def __ge__(self, other):
        return _compare(np.greater_equal, self, other)

    def __eq__(self, other):
        return _compare(np.equal, self, other)

    def __ne__(self, other):
        return _compare(np.not_equal, self, other)

    add = __add__
    sub = __sub__
    mul = __mul__
    div = __truediv__
    pow = __pow__
    matmul = __matmul__
    neg = __neg__
    abs = __abs__

    def mm(self, other):
        if self.ndim != 2 or np.ndim(other) != 2:
            raise ValueError(f"mm needs two matrices, got shapes {self.shape} and {np.shape(other)}; use matmul")
        return Matmul.apply(self, _operand(other, self))

    def exp(self):
        return Exp.apply(self)

    def log(self):
        return Log.apply(self)

    def sqrt(self):
        return Sqrt.apply(self)

    def relu(self):
        return Relu.apply(self)

    def sigmoid(self):
        return Sigmoid.apply(self)

    def tanh(self):
        return Tanh.apply(self)

    def clamp(self, min=None, max=None):
        return Clamp.apply(self, lo=min, hi=max)

    def maximum(self, other):
        return Maximum.apply(self, _operand(other, self))

    def minimum(self, other):
        return Minimum.apply(self, _operand(other, self))

    def softmax(self, dim):
        return Softmax.apply(self, dim=dim)

    def log_softmax(self, dim):
        return LogSoftmax.apply(self, dim=dim)

    # ---- reductions --------------------------------------------------------------------------
    def sum(self, dim=None, keepdim=False):
        return Sum.apply(self, dim=dim, keepdim=keepdim)

    def mean(self, dim=None, keepdim=False):
        return Mean.apply(self, dim=dim, keepdim=keepdim)

    def amax(self, dim=None, keepdim=False):
        return Amax.apply(self, dim=dim, keepdim=keepdim)

    def amin(self, dim=None, keepdim=False):
        return Amin.apply(self, dim=dim, keepdim=keepdim)

    def max(self, dim=None, keepdim=False):
        """The largest element; with dim, the (values, indices) of each row's first maximum."""
        return MaxAll.apply(self) if dim is None else self._pick(dim, keepdim, np.argmax, "Max")

    def min(self, dim=None, keepdim=False):
        """The smallest element; with dim, the (values, indices) of each row's first minimum."""
        return MinAll.apply(self) if dim is None else self._pick(dim, keepdim, np.argmin, "Min")

    def _pick(self, dim, keepdim, fn, kind):
        index = arg_index(self.data, dim, True, fn)
        values = MaxDim.apply(self, index=index, dim=dim, keepdim=keepdim, kind=kind)
        return _ValuesIndices(values, Tensor._make(arg_index(self.data, dim, keepdim, fn), False, None))

    def argmax(self, dim=None, keepdim=False):
        return Tensor._make(arg_index(self.data, dim, keepdim, np.argmax), False, None)

    def argmin(self, dim=None, keepdim=False):
        return Tensor._make(arg_index(self.data, dim, keepdim, np.argmin), False, None)

    def norm(self, p=2, dim=None, keepdim=False):
        return Norm.apply(self, p=p, dim=dim, keepdim=keepdim)

    def logsumexp(self, dim=None, keepdim=False):
        return LogSumExp.apply(self, dim=dim, keepdim=keepdim)

    # ---- shapes --------------------------------------------------------------------------------
    def reshape(self, *shape):
        return Reshape.apply(self, shape=_shape_args(shape))

    view = reshape

    def flatten(self, start_dim=0, end_dim=-1):
        if not self.ndim:
            return Reshape.apply(self, shape=(1,))
        start, end = (normalize_dims(d, self.ndim)[0] for d in (start_dim, end_dim))
        if start >= end:  # nothing to merge: the tensor itself, as in PyTorch
            return self
        shape = self.shape[:start] + (math.prod(self.shape[start:end + 1]),) + self.shape[end + 1:]
        return Reshape.apply(self, shape=shape)

    def transpose(self, dim0, dim1):
        return Transpose.apply(self, dim0=dim0, dim1=dim1)

    def t(self):
        if self.ndim > 2:
            raise ValueError(f"t() expects a tensor with at most 2 dimensions, got shape {self.shape}; "
                             f"use transpose(dim0, dim1)")
        return Transpose.apply(self, dim0=0, dim1=-1, short=True)

    @property
    def T(self):
        return self.permute(*reversed(range(self.ndim)))

    def permute(self, *dims):
        return Permute.apply(self, dims=_shape_args(dims))

    def squeeze(self, dim=None):
        return Squeeze.apply(self, dim=dim)

    def unsqueeze(self, dim):
        return Unsqueeze.apply(self, dim=dim)

    def expand(self, *shape):
        return Expand.apply(self, shape=_shape_args(shape))

    def broadcast_to(self, shape):
        return Expand.apply(self, shape=tuple(shape))

    def contiguous(self):
        return self

    def clone(self):
        return Clone.apply(self)

    def to(self, dtype):
        dtype = np.dtype(dtype)
        return self if dtype == self.dtype else Cast.apply(self, dtype=dtype)

    def float(self):
        return self.to(np.float32)

    def double(self):
        return self.to(np.float64)


def _operand(other, like):
    """The other operand of a binary op: Tensors and Python numbers as they are, anything else
    as an array (integer arrays take the float dtype of the tensor they meet)."""
    if isinstance(other, (Tensor, int, float)):
        return other
    arr = as_array(other)
    if arr.dtype.kind in "biu" and like.data.dtype.kind == "f":
        arr = arr.astype(like.data.dtype)
    return arr


def _compare(ufunc, a, b):
    return Tensor._make(np.asarray(ufunc(a.data, as_array(b) if not isinstance(b, (int, float)) else b)), False, None)


def _shape_args(args):
    """reshape(2, 3) and reshape((2, 3)) alike."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(int(n) for n in args[0])
    return tuple(int(n) for n in args)


def _index_key(key):
    """An index with Tensors in it, as NumPy indices."""
    if isinstance(key, Tensor):
        return key.data
    if isinstance(key, tuple):
        return tuple(k.data if isinstance(k, Tensor) else k for k in key)
    return key
