"""`Tensor`: a NumPy array plus what autograd needs (requires_grad, grad, grad_fn, hooks), and
`AccumulateGrad`, the graph node of a leaf tensor.

This module is the bottom of the engine: it imports no op. The methods that record ops
(`x + y`, `x.relu()`, `x.sum(dim)`, `x.backward()`, ...) are declared with each op's public
function in `saliency.autograd.api`, which sets them on `Tensor` when `saliency.autograd` is
imported; the methods here are the tensor's state, conversions and in-place edits.
"""
from __future__ import annotations

import itertools
import warnings
import weakref
from typing import TYPE_CHECKING, Any, Callable, NoReturn, Protocol, Sequence, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..kernels import versions
from .errors import UnsupportedError, unsupported
from .grad_mode import frozen_var, is_grad_enabled
from .printing import format_data
from .rng import generator as random_generator

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

    from .._typing import Index, Number, Shape

DEFAULT_DTYPE: np.dtype[Any] = np.dtype(np.float32)
# A graph node inside the engine: an op's `saliency.autograd.node.Function` or a leaf's
# `AccumulateGrad`, whichever attributes the engine reads of each. Typed Any because node.py imports
# this module (importing it back, even for annotations, would make a cycle); users see `Node`.
GradNode = Any


class Node(Protocol):
    """What a user sees of a graph node (`Tensor.grad_fn`, and the nodes in its `next_functions`): an
    op's `saliency.autograd.node.Function` (`MulBackward0`, ...) or a leaf's `AccumulateGrad`."""

    next_functions: tuple[tuple[Node | None, int], ...]

    def name(self) -> str: ...

    def register_prehook(self, fn: Hook) -> RemovableHandle: ...


# A gradient hook: fn(grad) -> a replacement or None.
Hook = Callable[..., Any]


def as_array(data: TensorLike, dtype: DTypeLike | None = None) -> NDArray[Any]:
    """The ndarray behind `data`: a Tensor, ndarray, NumPy scalar, Python number or nested list.

    Python floats (and lists of them) become float32, the default dtype; arrays keep theirs.
    """
    arr: NDArray[Any]
    if isinstance(data, Tensor):
        arr = data._array
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


def _short(obj: object) -> str:
    text = repr(obj)
    return text if len(text) <= 60 else text[:57] + "..."


# Every graph node gets a sequence number when it is made; the engine runs the ready node with
# the largest one first (the most recently recorded op, as PyTorch does).
next_seq: Callable[[], int] = itertools.count().__next__
# AccumulateGrad nodes run as soon as they are ready (as in PyTorch): their numbers sit above
# every op's.
_LEAF_PRIORITY = 1 << 62


class Tensor:
    """An n-dimensional array that records the operations applied to it, for backward()."""

    __slots__ = ("_array", "_requires_grad", "grad_fn", "_grad", "_hooks", "_acc", "__weakref__")
    # ndarray <op> Tensor calls the Tensor's reflected operator instead of NumPy's ufunc
    __array_ufunc__ = None
    __hash__ = object.__hash__
    _array: NDArray[Any]
    _requires_grad: bool
    grad_fn: Node | None
    _grad: Tensor | None
    _hooks: list[Hook] | None
    _acc: weakref.ref[AccumulateGrad] | None

    def __init__(self, data: TensorLike, requires_grad: bool = False, dtype: DTypeLike | None = None) -> None:
        self._array = as_array(data, dtype)
        self._requires_grad = False
        self.grad_fn = None
        self._grad = None
        self._hooks = None
        self._acc = None
        if requires_grad:
            self.requires_grad = True

    @classmethod
    def _make(cls, data: NDArray[Any], requires_grad: bool, grad_fn: GradNode | None) -> Tensor:
        t = object.__new__(cls)
        t._array = data
        t._requires_grad = requires_grad
        t.grad_fn = grad_fn
        t._grad = None
        t._hooks = None
        t._acc = None
        return t

    # ---- autograd state -------------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        """Whether operations on this tensor record the graph (False for a leaf frozen in this
        thread by `grad_mode.frozen`, as attribution methods freeze a model's parameters)."""
        return self._requires_grad and (self.grad_fn is not None or id(self) not in frozen_var.get())

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        flag = bool(flag)
        if self.grad_fn is not None and not flag:
            raise RuntimeError("requires_grad can only be turned off on a leaf tensor; "
                               "use .detach() to get a tensor outside the graph")
        if flag and self._array.dtype.kind != "f":
            raise TypeError(f"only floating point tensors can require gradients, this one has dtype "
                            f"{self._array.dtype}; convert it first, e.g. t.float()")
        self._requires_grad = flag

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set requires_grad in place (only floating-point tensors can require grad); returns self."""
        self.requires_grad = requires_grad
        return self

    @property
    def is_leaf(self) -> bool:
        """True for a tensor no op made (grad_fn None): backward() fills the .grad of the leaves that
        require grad."""
        return self.grad_fn is None

    @property
    def grad(self) -> Tensor | None:
        """The gradient backward() accumulated: on a leaf, or on a non-leaf that called retain_grad(); None
        before (reading it on another non-leaf warns). Assigning sets it, in this tensor's shape and dtype."""
        node: GradNode = self.grad_fn  # (retain_ref is the engine's, not the user's Node's)
        if node is not None and node.retain_ref is None and self._grad is None:
            warnings.warn("the .grad of a non-leaf tensor is being read; backward() does not fill it. "
                          "Call .retain_grad() on the tensor before backward() if you want it, "
                          "or read the .grad of a leaf instead", UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value: TensorLike | None) -> None:
        if value is not None:
            value = value if isinstance(value, Tensor) else Tensor(value)
            if value.shape != self.shape:
                raise ValueError(f"grad of shape {value.shape} does not fit a tensor of shape {self.shape}")
            if value.dtype != self.dtype:  # a gradient always has its tensor's dtype
                value = Tensor._make(value._array.astype(self.dtype), False, None)
        self._grad = value

    def _accumulator(self) -> AccumulateGrad:
        """The AccumulateGrad node of this leaf (one per leaf while any graph uses it)."""
        node = self._acc() if self._acc is not None else None
        if node is None:
            node = AccumulateGrad(self)
            self._acc = weakref.ref(node)
        return node

    def retain_grad(self) -> Tensor:
        """Keep this non-leaf tensor's gradient in .grad during backward (no-op on a leaf)."""
        if not self._requires_grad:
            raise RuntimeError("cannot retain_grad on a tensor that does not require grad")
        node: GradNode = self.grad_fn
        if node is not None:
            node.retain_ref = weakref.ref(self)
        return self

    @property
    def retains_grad(self) -> bool:
        """Whether retain_grad() was called on this non-leaf tensor (always False on a leaf)."""
        node: GradNode = self.grad_fn
        return node is not None and node.retain_ref is not None

    def register_hook(self, fn: Hook) -> RemovableHandle:
        """Call fn(grad) when this tensor's gradient is computed; fn may return a replacement."""
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that does not require grad")
        if self.grad_fn is not None:
            return self.grad_fn.register_prehook(fn)
        if self._hooks is None:
            self._hooks = []
        self._hooks.append(fn)
        return RemovableHandle(self._hooks, fn)

    @property
    def data(self) -> Tensor:
        """This tensor's values as a new tensor outside the graph that shares them, as PyTorch's
        `.data`: changes made to it in place (`p.data.normal_()`, `p.data[0] = 1`) change this
        tensor, and autograd does not see them. Assigning `t.data = other` swaps the values."""
        return Tensor._make(self._array, False, None)

    @data.setter
    def data(self, value: TensorLike) -> None:
        self._array = value._array if isinstance(value, Tensor) else as_array(value)

    def detach(self) -> Tensor:
        """A new tensor sharing this one's values, outside the graph (requires_grad False)."""
        return Tensor._make(self._array, False, None)

    def __deepcopy__(self, memo: dict[int, Any]) -> Tensor:
        # a new leaf with its own AccumulateGrad node (a copied graph node would write into the original)
        if self.grad_fn is not None:
            raise RuntimeError("only leaf tensors can be deep-copied (as in PyTorch); copy t.detach() instead")
        copy = type(self)._make(self._array.copy(), self._requires_grad, None)
        if self._grad is not None:
            copy._grad = Tensor._make(self._grad._array.copy(), False, None)
        memo[id(self)] = copy
        return copy

    # ---- array views ------------------------------------------------------------------------
    @property
    def shape(self) -> Shape:
        """The size of each dimension, a tuple of ints (PyTorch's torch.Size)."""
        return self._array.shape

    @property
    def dtype(self) -> np.dtype[Any]:
        """The NumPy dtype of the elements (float32 by default)."""
        return self._array.dtype

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return self._array.ndim

    @overload
    def size(self, dim: None = None) -> Shape: ...
    @overload
    def size(self, dim: int) -> int: ...

    def size(self, dim: int | None = None) -> Shape | int:
        """The shape, a tuple of ints; with dim, the size of that dimension."""
        return self._array.shape if dim is None else self._array.shape[dim]

    def dim(self) -> int:
        """The number of dimensions (ndim)."""
        return self._array.ndim

    def numel(self) -> int:
        """The number of elements."""
        return self._array.size

    def numpy(self) -> NDArray[Any]:
        """The tensor's array itself (no copy): writing into it changes the tensor. Handing it out
        counts as a write (`_version` goes up), so weight transforms derived from the tensor are
        computed again at their next use; an array kept and written later is not seen (write
        through the tensor instead: `t.data[...] = v`, `t.copy_(v)`)."""
        self._written()
        return self._array

    def item(self) -> Number:
        """The value of a one-element tensor as a Python number."""
        if self._array.size != 1:
            raise ValueError(f"item() needs a tensor with one element, this one has shape {self.shape}")
        return self._array.item()

    def tolist(self) -> Any:
        """The values as nested Python lists of numbers (a number for a 0-d tensor)."""
        return self._array.tolist()

    def __array__(self, dtype: DTypeLike | None = None, copy: bool | None = None) -> NDArray[Any]:
        arr = self._array if dtype is None else self._array.astype(dtype, copy=False)
        return arr.copy() if copy else arr

    def __len__(self) -> int:
        if not self._array.ndim:
            raise TypeError("len() of a 0-d tensor")
        return len(self._array)

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __bool__(self) -> bool:
        if self._array.size != 1:
            raise RuntimeError(f"the truth value of a tensor with {self._array.size} elements is ambiguous; "
                               f"use .any() or .all()")
        return bool(self._array.item())

    def any(self) -> Tensor:
        """Whether any element is nonzero: a 0-d bool tensor, outside the graph."""
        return Tensor._make(np.asarray(self._array.any()), False, None)

    def all(self) -> Tensor:
        """Whether every element is nonzero: a 0-d bool tensor, outside the graph."""
        return Tensor._make(np.asarray(self._array.all()), False, None)

    def __repr__(self) -> str:
        body = format_data(self._array)
        extras = []
        if self._array.dtype not in (DEFAULT_DTYPE, np.dtype(np.int64), np.dtype(bool)):
            extras.append(f"dtype={self._array.dtype}")
        if self.grad_fn is not None:
            extras.append(f"grad_fn=<{self.grad_fn.name()}>")
        elif self._requires_grad:
            extras.append("requires_grad=True")
        return "tensor(" + body + "".join(", " + e for e in extras) + ")"

    # ---- in place (outside the graph) ----------------------------------------------------------
    def _check_inplace(self) -> None:
        if self._requires_grad and is_grad_enabled():
            raise RuntimeError("a tensor that requires grad cannot be changed in place while grad mode is on; "
                               "do it under sl.no_grad() (as optimizers do)")

    def _written(self) -> Tensor:
        """Record an in-place write to this tensor's memory (its `_version` goes up, and weight
        transforms derived from it are computed again: `kernels.versions`); returns self."""
        versions.bump(self._array)
        return self

    @property
    def _version(self) -> int:
        """How many times this tensor's memory has been written in place, as PyTorch's counter
        (shared with every tensor viewing the same memory, `.data` and `detach()` included)."""
        return versions.version(self._array)

    def zero_(self) -> Tensor:
        """Fill with zeros, in place and outside the graph; returns self."""
        self._check_inplace()
        self._array[...] = 0
        return self._written()

    def fill_(self, value: Number) -> Tensor:
        """Fill with `value`, in place and outside the graph; returns self."""
        self._check_inplace()
        self._array[...] = value
        return self._written()

    def copy_(self, src: TensorLike) -> Tensor:
        """Copy src's values (broadcast to this shape, cast to this dtype) in place, outside the graph; returns self."""
        self._check_inplace()
        self._array[...] = as_array(src)
        return self._written()

    def add_(self, other: TensorLike, alpha: Number = 1.0) -> Tensor:
        """self += alpha * other, in place and outside the graph; returns self."""
        self._check_inplace()
        self._array += alpha * as_array(other)
        return self._written()

    def mul_(self, other: TensorLike) -> Tensor:
        """self *= other, in place and outside the graph; returns self."""
        self._check_inplace()
        self._array *= as_array(other)
        return self._written()

    def clamp_(self, min: Number | None = None, max: Number | None = None) -> Tensor:
        """Clamp to min(max(self, min), max), in place and outside the graph; either bound may be None (not
        both). Returns self."""
        self._check_inplace()
        if min is None and max is None:
            raise ValueError("clamp_ needs at least one of min and max")
        np.clip(self._array, min, max, out=self._array)
        return self._written()

    def normal_(self, mean: Number = 0.0, std: Number = 1.0, *, generator: np.random.Generator | None = None) -> Tensor:
        """Fill with draws from N(mean, std^2) (from `generator`, else the one manual_seed resets)."""
        self._check_inplace()
        self._array[...] = random_generator(generator).normal(mean, std, self.shape)
        return self._written()

    def uniform_(self, a: Number = 0.0, b: Number = 1.0, *, generator: np.random.Generator | None = None) -> Tensor:
        """Fill with draws from U(a, b) (from `generator`, else the one manual_seed resets)."""
        self._check_inplace()
        self._array[...] = random_generator(generator).uniform(a, b, self.shape)
        return self._written()

    def __setitem__(self, key: Index | Tensor | tuple[Index | Tensor, ...], value: TensorLike) -> None:
        """Write `value` into the selected elements, in place and outside the graph."""
        self._check_inplace()
        self._array[index_key(key)] = value._array if isinstance(value, Tensor) else value
        self._written()

    # comparisons give boolean tensors outside the graph
    def __lt__(self, other: TensorLike) -> Tensor:
        return _compare(np.less, self, other)

    def __le__(self, other: TensorLike) -> Tensor:
        return _compare(np.less_equal, self, other)

    def __gt__(self, other: TensorLike) -> Tensor:
        return _compare(np.greater, self, other)

    def __ge__(self, other: TensorLike) -> Tensor:
        return _compare(np.greater_equal, self, other)

    # == and != give bool tensors too, as PyTorch's (object's return bool: hence the overrides' ignore)
    def __eq__(self, other: object) -> Tensor:  # type: ignore[override]
        return _compare(np.equal, self, other)

    def __ne__(self, other: object) -> Tensor:  # type: ignore[override]
        return _compare(np.not_equal, self, other)

    def __pos__(self) -> Tensor:
        return self

    @property
    def T(self) -> Tensor:
        """The tensor with its dimensions in reverse order (a matrix's transpose): permute(ndim - 1, ..., 0)."""
        return self.permute(*reversed(range(self.ndim)))

    def contiguous(self, memory_format: object | None = None) -> Tensor:
        """The tensor itself: every tensor counts as contiguous here (memory_format is ignored)."""
        return self

    def float(self) -> Tensor:
        """The tensor as float32: to(float32) (the tensor itself when it already is)."""
        return self.to(np.float32)

    def double(self) -> Tensor:
        """The tensor as float64: to(float64) (the tensor itself when it already is)."""
        return self.to(np.float64)

    # ---- devices: everything is on the CPU ----------------------------------------------------------
    @property
    def device(self) -> device:
        """Where the tensor lives: always device('cpu')."""
        return CPU

    @property
    def is_cuda(self) -> bool:
        """False: saliency computes on the CPU only."""
        return False

    def cpu(self) -> Tensor:
        """The tensor itself: every tensor is on the CPU."""
        return self

    def cuda(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Raises UnsupportedError: saliency computes on the CPU only."""
        raise unsupported("Tensor", "cuda")

    def __getattr__(self, name: str) -> NoReturn:
        # reached only when normal lookup fails: a PyTorch method ported code calls that we lack
        if name.startswith("_"):
            raise AttributeError(f"'Tensor' object has no attribute '{name}'")
        raise unsupported("Tensor", name)


# An op's tensor argument: a Tensor, or anything np.asarray takes (an array, a number, nested lists).
TensorLike = Tensor | ArrayLike


class device:
    """Where a tensor lives, as PyTorch's `torch.device`: here always the CPU. A device of another
    type can be named, but moving a tensor or a model there fails with a clear error."""

    __slots__ = ("type", "index")
    type: str
    index: int | None

    def __init__(self, type: str = "cpu", index: int | None = None) -> None:
        if not isinstance(type, str):
            raise TypeError(f"device() takes a string such as 'cpu', got {type!r}")
        kind, _, number = type.partition(":")
        self.type = kind
        self.index = int(number) if number else index

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __repr__(self) -> str:
        return f"device(type='{self.type}')" if self.index is None else \
            f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"


CPU = device("cpu")


def check_device(where: object) -> None:
    """None for the CPU (a str or device naming it); the unsupported-device error otherwise."""
    if where is None or isinstance(where, (str, device)) and device(str(where)).type == "cpu":
        return
    if isinstance(where, (str, device)):
        raise UnsupportedError(f"device '{where}' is not available: saliency computes on the CPU only; "
                               f"remove .to('{where}') / .cuda() (tensors and models are already on the CPU)")
    raise TypeError(f"expected a device ('cpu') or a dtype, got {where!r}")


def to_arguments(args: Sequence[Any], dtype: DTypeLike | None = None,
                 where: str | device | None = None) -> tuple[np.dtype[Any] | None, str | device | None]:
    """(dtype, device) from the positional arguments of PyTorch's to(): a dtype, a device (a
    string such as 'cpu' or a device), or a tensor (its dtype). A device other than the CPU is
    an error; the device returned is None or the CPU."""
    for arg in args:
        if isinstance(arg, Tensor):
            dtype = arg.dtype
        elif isinstance(arg, device) or isinstance(arg, str) and not _names_dtype(arg):
            where = arg
        else:
            dtype = arg
    check_device(where)
    return (None if dtype is None else np.dtype(dtype)), where


def _names_dtype(text: str) -> bool:
    try:
        np.dtype(text)
    except TypeError:
        return False
    return True


class PreHooks:
    """The prehooks every graph node has (an op's `Function`, a leaf's `AccumulateGrad`)."""

    __slots__ = ("pre_hooks",)
    pre_hooks: list[Hook] | None

    def register_prehook(self, fn: Hook) -> RemovableHandle:
        """Run `fn(grad) -> replacement or None` on the gradient arriving at this node; at a leaf's
        AccumulateGrad, after the tensor's own hooks and before it is added to `.grad` (PyTorch's order)."""
        if self.pre_hooks is None:
            self.pre_hooks = []
        self.pre_hooks.append(fn)
        return RemovableHandle(self.pre_hooks, fn)


class AccumulateGrad(PreHooks):
    """The node of a leaf tensor: the gradient that reaches it is added to `.variable.grad`."""

    __slots__ = ("variable", "seq", "retain_ref", "__weakref__")
    next_functions: tuple[tuple[GradNode | None, int], ...] = ()
    needs_input_grad: tuple[bool, ...] = ()
    saved: tuple[Any, ...] = ()
    backward_window: Callable[..., Any] | None = None
    variable: Tensor
    seq: int
    retain_ref: weakref.ref[Tensor] | None

    def __init__(self, variable: Tensor) -> None:
        self.variable = variable
        self.seq = _LEAF_PRIORITY - next_seq()  # older leaves first, for readable traces
        self.pre_hooks = None
        self.retain_ref = None

    @property
    def out_shape(self) -> Shape:
        """The leaf's shape, which its gradient has."""
        return self.variable._array.shape

    @property
    def out_dtype(self) -> np.dtype[Any]:
        """The leaf's dtype, which its gradient has."""
        return self.variable._array.dtype

    def name(self) -> str:
        """'AccumulateGrad', the node's name as PyTorch spells it."""
        return "AccumulateGrad"

    def __repr__(self) -> str:
        return f"<AccumulateGrad object at {id(self):#x}>"


class RemovableHandle:
    """Returned by `register_hook`-style calls; `.remove()` unregisters the hook."""

    def __init__(self, hooks: list[Hook], fn: Hook) -> None:
        self._hooks = hooks
        self._fn = fn

    def remove(self) -> None:
        try:
            self._hooks.remove(self._fn)
        except ValueError:
            pass


def _compare(ufunc: np.ufunc, a: Tensor, b: object) -> Tensor:
    other = b if isinstance(b, (int, float)) else as_array(b)  # type: ignore[arg-type]
    return Tensor._make(np.asarray(ufunc(a._array, other)), False, None)


def index_key(key: Any) -> Any:
    """An index with Tensors in it, as NumPy indices."""
    if isinstance(key, Tensor):
        return key._array
    if isinstance(key, tuple):
        return tuple(k._array if isinstance(k, Tensor) else k for k in key)
    return key
