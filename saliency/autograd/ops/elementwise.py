"""Elementwise ops with NumPy broadcasting; each gradient is summed back to its input's shape."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Sequence, cast

import numpy as np

from ...kernels.activation import relu_forward, relu_grad, sigmoid
from .. import rules
from ..node import Function, shape_of, unbroadcast
from ..geometry import elementwise_window, spatial

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, DTypeLike, NDArray

    from ..._typing import Number, Shape
    from ..patch import Patch

    # an operand of a binary op: an array, or a Python number (api._operand passes those as they are)
    Operand = NDArray[Any] | Number
    # a gradient on its way through the windows: a Patch, a dense array, or None (no gradient)
    WindowGrad = Patch | NDArray[Any] | None


def promote(x: Operand, y: Operand) -> tuple[Operand, Operand]:
    """x and y cast to PyTorch's result dtype, where it differs from NumPy's: a tensor with
    dimensions outranks a 0-d one, which outranks a Python number, unless the lower-ranked one
    is floating point and the higher is not (float32 * int64 tensor, or float32 + 0-d float64,
    stay float32 instead of becoming float64)."""
    # fast paths (every op pays for this call): equal dtypes, or a float array and a number (each test
    # `type(a) is ...`, which also tells a type checker which of them is an array)
    if type(x) is np.ndarray:
        if (type(y) is np.ndarray and x.dtype == y.dtype) or \
                ((type(y) is float or type(y) is int) and x.dtype.kind == "f"):
            return x, y
    elif type(y) is np.ndarray and (type(x) is float or type(x) is int) and y.dtype.kind == "f":
        return x, y
    arrays = [a for a in (x, y) if type(a) is np.ndarray]
    floats = [a.dtype for a in arrays if a.ndim and a.dtype.kind == "f"] or \
             [a.dtype for a in arrays if not a.ndim and a.dtype.kind == "f"]
    if not floats:
        if not (isinstance(x, float) or isinstance(y, float)):
            return x, y
        floats = [np.dtype(np.float32)]  # an integer tensor meets a Python float: the default dtype
    dtype = np.result_type(*floats)
    return (x.astype(dtype, copy=False) if type(x) is np.ndarray and x.dtype != dtype else x,
            y.astype(dtype, copy=False) if type(y) is np.ndarray and y.dtype != dtype else y)


# ---- cropped VJPs (`backward_window`, see saliency.autograd.patch) shared by the classes below ----

def unary_window(self: Function, p: Patch) -> tuple[Patch | NDArray[Any]]:
    """The cropped VJP of a unary elementwise op: its own `backward` on the windows of g and of the
    arrays it saved (cropped to the same windows). Cells outside the map (zeros in both) may come out
    as 0/0; they are zeroed afterwards."""
    saved = self.saved
    try:
        self.saved = tuple(p.window(a) if type(a) is np.ndarray and a.shape == self.out_shape else a for a in saved)
        with np.errstate(divide="ignore", invalid="ignore"):
            (dx,) = self.backward(p.data)
    finally:
        self.saved = saved
    return (p.moved(np.asarray(dx), p.origins, p.map_size),)


def on_windows(p: Patch, a: Operand, out_ndim: int) -> Operand | None:
    """An operand `a` of an elementwise op (a number, or an array that broadcasts to its output of
    out_ndim dimensions) as it meets the windows of `p`: a number or an array without a map (its last
    two dimensions 1) as it is, an array with the output's map cropped to the windows (K, ..., h, w).
    None for an array broadcast along the rows or the columns of the map only."""
    if type(a) is not np.ndarray or spatial(a.shape) == (1, 1):
        return a
    if a.ndim >= 2 and a.shape[-2:] == p.map_size:
        return p.window(a.reshape((1,) * (out_ndim - a.ndim) + a.shape))
    return None


def pass_window(p: Patch, grads: Iterable[WindowGrad], needs: Sequence[bool], shapes: Sequence[Shape],
                out_shape: Shape) -> tuple[WindowGrad, ...]:
    """Per input, from its windowed gradient of the output's shape (a Patch, or the dense array once the
    windows grew): the gradient itself for an input of the output's shape; for a broadcast one (a bias,
    a 0-d tensor), the dense array summed down as `backward` sums it."""
    out: list[WindowGrad] = []
    for needed, shape, gi in zip(needs, shapes, grads):
        if not needed or gi is None:
            out.append(None)
        elif shape == out_shape:
            out.append(gi)
        else:
            gi = gi.dense() if hasattr(gi, "dense") else gi
            out.append(unbroadcast(gi, shape, len(p.seed_shape)))
    return tuple(out)


class _Binary(Function):
    """Shared by the broadcasting binary ops: each writes `grads`, its VJP cell by cell, which `backward`
    sums down to the inputs' shapes and `backward_window` runs on the windows of a Patch."""

    __slots__ = ("shapes",)
    shapes: tuple[Shape, Shape]
    window_rule = elementwise_window
    broadcasts = True

    def grads(self, g: NDArray[Any], *saved: Any) -> tuple[NDArray[Any] | None, NDArray[Any] | None]:
        """(gx, gy) of g's shape for the saved operands `saved` (or their windows), None for an input
        that takes no gradient."""
        raise NotImplementedError

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any] | None, NDArray[Any] | None]:
        return self.reduce(g, *self.grads(g, *self.saved))

    def backward_window(self, p: Patch) -> tuple[WindowGrad, ...] | None:
        """`grads` on the windows of g and of the saved operands; cells outside the map (zeros in both)
        may come out as 0/0 and are zeroed. Dense for an operand broadcast along one axis of the map."""
        saved = tuple(on_windows(p, a, len(self.out_shape)) for a in self.saved)
        if any(a is None for a in saved):
            return None
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            grads = self.grads(p.data, *saved)
        return self.pass_window(p, *(None if gi is None else p.moved(np.asarray(gi), p.origins, p.map_size)
                                     for gi in grads))

    def reduce(self, g: NDArray[Any], gx: NDArray[Any] | None,
               gy: NDArray[Any] | None) -> tuple[NDArray[Any] | None, NDArray[Any] | None]:
        seed_ndim = g.ndim - len(self.out_shape)
        sx, sy = self.shapes
        nx, ny = self.needs_input_grad
        # (grads gives None only for an input that needs no gradient)
        return (unbroadcast(gx, sx, seed_ndim) if nx and gx is not None else None,
                unbroadcast(gy, sy, seed_ndim) if ny and gy is not None else None)

    def pass_window(self, p: Patch, gx: WindowGrad, gy: WindowGrad) -> tuple[WindowGrad, ...]:
        """`pass_window` of the windowed gradients gx, gy (already the VJPs) to the two inputs."""
        return pass_window(p, (gx, gy), self.needs_input_grad, self.shapes, self.out_shape)


class Add(_Binary):
    """z = x + y"""

    __slots__ = ()

    @property
    def rule(self) -> rules.Kind:
        """Two data inputs: split in proportion (SPLIT); data and a constant (x - mean): an elementwise
        function of the data (PASS), so that a normalisation inside a network passes relevance on."""
        return rules.SPLIT if all(self.needs_input_grad) else rules.PASS

    def forward(self, x: Operand, y: Operand) -> Operand:
        x, y = promote(x, y)
        self.shapes = (shape_of(x), shape_of(y))
        return x + y

    def grads(self, g: NDArray[Any]) -> tuple[NDArray[Any], NDArray[Any]]:
        return g, g

    def backward_window(self, p: Patch) -> tuple[WindowGrad, ...]:
        return self.pass_window(p, p, p)


class Sub(_Binary):
    """z = x - y. The node is RsubBackward1 for number - tensor, as in PyTorch."""

    __slots__ = ("number_first",)
    number_first: bool

    @property
    def rule(self) -> rules.Kind:
        """Two data inputs: split in proportion (SPLIT); data and a constant (x - mean): an elementwise
        function of the data (PASS), so that a normalisation inside a network passes relevance on."""
        return rules.SPLIT if all(self.needs_input_grad) else rules.PASS

    def forward(self, x: Operand, y: Operand) -> Operand:
        x, y = promote(x, y)
        self.shapes = (shape_of(x), shape_of(y))
        self.number_first = type(x) is not np.ndarray
        return x - y

    def grads(self, g: NDArray[Any]) -> tuple[NDArray[Any], NDArray[Any] | None]:
        return g, (-g if self.needs_input_grad[1] else None)

    def backward_window(self, p: Patch) -> tuple[WindowGrad, ...]:
        return self.pass_window(p, p, -p if self.needs_input_grad[1] else None)

    def name(self) -> str:
        return "RsubBackward1" if self.number_first else "SubBackward0"


class Mul(_Binary):
    """z = x * y"""

    __slots__ = ()

    @property
    def rule(self) -> rules.Kind:
        """Scaling by a constant is an elementwise function of the data (PASS); a product of two data-dependent
        factors has no rule."""
        return rules.PASS if sum(self.needs_input_grad) == 1 else rules.NONE

    def forward(self, x: Operand, y: Operand) -> Operand:
        x, y = promote(x, y)
        self.shapes = (shape_of(x), shape_of(y))
        self.save_for_backward(x, y)
        return x * y

    def grads(self, g: NDArray[Any], x: Operand, y: Operand) -> tuple[NDArray[Any] | None, NDArray[Any] | None]:
        nx, ny = self.needs_input_grad
        return (g * y if nx else None), (g * x if ny else None)

    def backward_window(self, p: Patch) -> tuple[WindowGrad, ...] | None:
        x, y = self.saved
        if any(n and np.shape(o) not in (self.out_shape, ()) for n, o in zip(self.needs_input_grad, (y, x))):
            return super().backward_window(p)  # a broadcast factor of another shape: crop both operands

        def times(o: Operand) -> Patch | NDArray[Any]:
            # (an array where it has dimensions: a number has none)
            return p.like(p.data * o) if np.ndim(o) == 0 else p.times(cast("NDArray[Any]", o))
        nx, ny = self.needs_input_grad
        return self.pass_window(p, times(y) if nx else None, times(x) if ny else None)


class Div(_Binary):
    """z = x / y"""

    __slots__ = ()

    @property
    def rule(self) -> rules.Kind:
        """Data over a constant, or a constant over data: an elementwise function of the data (PASS); data
        over data has no rule."""
        return rules.PASS if sum(self.needs_input_grad) == 1 else rules.NONE

    def forward(self, x: Operand, y: Operand) -> Operand:
        x, y = promote(x, y)
        if not any(type(a) is np.ndarray and a.dtype.kind == "f" for a in (x, y)):
            # true division of integers gives the default float dtype, as in PyTorch
            x, y = (a.astype(np.float32) if type(a) is np.ndarray else a for a in (x, y))
        self.shapes = (shape_of(x), shape_of(y))
        self.save_for_backward(x, y)
        return x / y

    def grads(self, g: NDArray[Any], x: Operand, y: Operand) -> tuple[NDArray[Any] | None, NDArray[Any] | None]:
        nx, ny = self.needs_input_grad
        return (g / y if nx else None), (-g * x / (y * y) if ny else None)


class Pow(_Binary):
    """z = x ** y. The node is PowBackward0 for tensor ** number, PowBackward1 for
    tensor ** tensor and PowBackward2 for number ** tensor, as in PyTorch."""

    __slots__ = ("variant",)
    variant: int

    @property
    def rule(self) -> rules.Kind:
        """An elementwise function of one data input (PASS); data to the power of data has no rule."""
        return rules.PASS if sum(self.needs_input_grad) == 1 else rules.NONE

    def forward(self, x: Operand, y: Operand) -> Operand:
        x, y = promote(x, y)
        self.shapes = (shape_of(x), shape_of(y))
        self.variant = 0 if type(y) is not np.ndarray else (2 if type(x) is not np.ndarray else 1)
        out = np.power(x, y)
        self.save_for_backward(x, y, out)
        return out

    def grads(self, g: NDArray[Any], x: Operand, y: Operand,
              out: NDArray[Any]) -> tuple[NDArray[Any] | None, NDArray[Any] | None]:
        nx, ny = self.needs_input_grad
        gx = gy = None
        if nx:
            # y * x**(y-1), defined as 0 where y == 0 (even at x == 0), as in PyTorch
            if self.variant == 0:
                gx = g * (y * np.power(x, y - 1)) if y != 0 else np.zeros_like(g)
            else:
                gx = np.where(y == 0, 0, g * (y * np.power(x, y - 1))).astype(g.dtype, copy=False)
        if ny:
            # x**y * log(x), defined as 0 where x == 0 and y >= 0, as in PyTorch
            with np.errstate(divide="ignore", invalid="ignore"):
                gy = np.where((x == 0) & (y >= 0), 0, g * (out * np.log(x))).astype(g.dtype, copy=False)
        return gx, gy

    def name(self) -> str:
        return f"PowBackward{self.variant}"


class Maximum(_Binary):
    """z = maximum(x, y); at ties each input gets half the gradient, as in PyTorch."""

    __slots__ = ()

    @property
    def rule(self) -> rules.Kind:
        """Against a constant, elementwise (PASS); between two data inputs, a selection (WINNER)."""
        return rules.PASS if sum(self.needs_input_grad) == 1 else rules.WINNER
    pick: staticmethod[[Operand, Operand], NDArray[Any]] = staticmethod(np.maximum)
    x_loses: staticmethod[[Operand, Operand], NDArray[np.bool_]] = staticmethod(np.less)

    def forward(self, x: Operand, y: Operand) -> Operand:
        x, y = promote(x, y)
        self.shapes = (shape_of(x), shape_of(y))
        self.save_for_backward(x, y)
        return self.pick(x, y)

    def grads(self, g: NDArray[Any], x: Operand, y: Operand) -> tuple[NDArray[Any] | None, NDArray[Any] | None]:
        nx, ny = self.needs_input_grad
        shared = np.where(x == y, g * 0.5, g)
        gx = np.where(self.x_loses(x, y), 0, shared).astype(g.dtype, copy=False) if nx else None
        gy = np.where(self.x_loses(y, x), 0, shared).astype(g.dtype, copy=False) if ny else None
        return gx, gy


class Minimum(Maximum):
    """z = minimum(x, y); at ties each input gets half the gradient, as in PyTorch."""

    __slots__ = ()
    pick: staticmethod[[Operand, Operand], NDArray[Any]] = staticmethod(np.minimum)
    x_loses: staticmethod[[Operand, Operand], NDArray[np.bool_]] = staticmethod(np.greater)


class Where(Function):
    """z = where(cond, x, y); `cond` is a boolean constant."""

    __slots__ = ("shapes",)
    shapes: tuple[Shape, Shape]
    rule = rules.ROUTE
    window_rule = elementwise_window

    def forward(self, cond: ArrayLike, x: Operand, y: Operand) -> NDArray[Any]:
        x, y = promote(x, y)
        self.shapes = (shape_of(x), shape_of(y))
        cond = np.asarray(cond, dtype=bool)
        self.save_for_backward(cond)
        try:
            return np.where(cond, x, y)
        except ValueError:
            raise ValueError(f"where: condition of shape {cond.shape}, x of shape {self.shapes[0]} and y of shape "
                             f"{self.shapes[1]} cannot be broadcast together; each dimension must match or be 1") \
                from None

    def backward(self, g: NDArray[Any]) -> tuple[None, NDArray[Any] | None, NDArray[Any] | None]:
        (cond,) = self.saved
        seed_ndim = self.seed_ndim(g)
        sx, sy = self.shapes
        _, nx, ny = self.needs_input_grad
        gx = unbroadcast(np.where(cond, g, 0).astype(g.dtype, copy=False), sx, seed_ndim) if nx else None
        gy = unbroadcast(np.where(cond, 0, g).astype(g.dtype, copy=False), sy, seed_ndim) if ny else None
        return None, gx, gy

    def backward_window(self, p: Patch) -> tuple[WindowGrad, ...] | None:
        """As the binary ops': the condition cropped to the windows (dense for one broadcast along the
        rows or the columns of the map only); an operand of the output's shape gets windows, a
        broadcast one the dense array summed down."""
        cond = on_windows(p, self.saved[0], len(self.out_shape))
        if cond is None:
            return None
        _, nx, ny = self.needs_input_grad
        gx = p.like(np.where(cond, p.data, 0).astype(p.dtype, copy=False)) if nx else None
        gy = p.like(np.where(cond, 0, p.data).astype(p.dtype, copy=False)) if ny else None
        return (None,) + pass_window(p, (gx, gy), (nx, ny), self.shapes, self.out_shape)


class Neg(Function):
    """z = -x"""

    __slots__ = ()
    rule = rules.PASS
    window_rule = elementwise_window
    backward_window = unary_window

    def forward(self, x: NDArray[Any]) -> NDArray[Any]:
        return -x

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        return (-g,)


class Exp(Function):
    """z = exp(x)"""

    __slots__ = ()
    rule = rules.PASS
    window_rule = elementwise_window

    def forward(self, x: NDArray[Any]) -> NDArray[Any]:
        out = np.exp(x)
        self.save_for_backward(out)
        return out

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        return (g * self.saved[0],)

    def backward_window(self, p: Patch) -> tuple[Patch]:
        return (p.times(self.saved[0]),)


class Log(Function):
    """z = log(x)"""

    __slots__ = ()
    rule = rules.PASS
    window_rule = elementwise_window
    backward_window = unary_window

    def forward(self, x: NDArray[Any]) -> NDArray[Any]:
        self.save_for_backward(x)
        return np.log(x)

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        return (g / self.saved[0],)


class Sqrt(Function):
    """z = sqrt(x)"""

    __slots__ = ()
    rule = rules.PASS
    window_rule = elementwise_window
    backward_window = unary_window

    def forward(self, x: NDArray[Any]) -> NDArray[Any]:
        out = np.sqrt(x)
        self.save_for_backward(out)
        return out

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        return (g / (2 * self.saved[0]),)


class Abs(Function):
    """z = |x|; the gradient at 0 is 0."""

    __slots__ = ()
    rule = rules.PASS
    window_rule = elementwise_window
    backward_window = unary_window

    def forward(self, x: NDArray[Any]) -> NDArray[Any]:
        self.save_for_backward(x)
        return np.abs(x)

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        return (g * np.sign(self.saved[0]),)


class Relu(Function):
    """z = max(x, 0); the gradient at 0 is 0 (and passes through NaN, as PyTorch's)."""

    __slots__ = ()
    rule = rules.PASS
    window_rule = elementwise_window

    def forward(self, x: NDArray[Any]) -> NDArray[Any]:
        # one pass (kernels.activation) for max(x, 0) and the mask; the VJP needs only where the output
        # is positive (or NaN): keep a boolean mask, 1/4 of the memory
        out, mask = relu_forward(x)
        self.save_for_backward(mask)
        return out

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        # a product with the mask (one multiply per element, no selection); a NaN or inf arriving at
        # an inactive unit stays NaN (PyTorch's where() would give 0 there)
        if rules.guided():  # guided backprop: negative incoming gradients stop here too
            g = np.maximum(g, 0)
        return (relu_grad(g, self.saved[0]),)

    def backward_window(self, p: Patch) -> tuple[Patch]:
        return (p.times(self.saved[0], np.maximum(p.data, 0) if rules.guided() else None),)


class Sigmoid(Function):
    """z = 1 / (1 + exp(-x))"""

    __slots__ = ()
    rule = rules.PASS
    window_rule = elementwise_window
    backward_window = unary_window

    def forward(self, x: NDArray[Any]) -> NDArray[Any]:
        out = sigmoid(x)  # exp of -|x| only: never overflows
        self.save_for_backward(out)
        return out

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        y = self.saved[0]
        return (g * (y * (1 - y)),)


class Tanh(Function):
    """z = tanh(x)"""

    __slots__ = ()
    rule = rules.PASS
    window_rule = elementwise_window
    backward_window = unary_window

    def forward(self, x: NDArray[Any]) -> NDArray[Any]:
        out = np.tanh(x)
        self.save_for_backward(out)
        return out

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        y = self.saved[0]
        return (g * (1 - y * y),)


class Clamp(Function):
    """z = min(max(x, lo), hi); the gradient passes where lo <= x <= hi (bounds included)."""

    __slots__ = ()
    rule = rules.PASS
    window_rule = elementwise_window
    backward_window = unary_window

    def forward(self, x: NDArray[Any], *, lo: Number | None = None, hi: Number | None = None) -> NDArray[Any]:
        if lo is None and hi is None:
            raise ValueError("clamp needs at least one of min and max, got neither")
        inside = np.ones(x.shape, dtype=bool)
        if lo is not None:
            inside &= x >= lo
        if hi is not None:
            inside &= x <= hi
        self.save_for_backward(inside)
        return np.clip(x, lo, hi)

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        return (np.where(self.saved[0], g, 0).astype(g.dtype, copy=False),)

    def name(self) -> str:
        return "ClampBackward1"


class Cast(Function):
    """z = x converted to another float dtype; the gradient is converted back."""

    __slots__ = ("in_dtype",)
    in_dtype: np.dtype[Any]
    rule = rules.PASS
    window_rule = elementwise_window
    backward_window = unary_window

    def forward(self, x: NDArray[Any], *, dtype: DTypeLike) -> NDArray[Any]:
        self.in_dtype = x.dtype
        return x.astype(dtype)

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        return (g.astype(self.in_dtype),)

    def name(self) -> str:
        return "ToCopyBackward0"


class Clone(Function):
    """z = a copy of x"""

    __slots__ = ()
    rule = rules.PASS
    window_rule = elementwise_window
    backward_window = unary_window

    def forward(self, x: NDArray[Any]) -> NDArray[Any]:
        return x.copy()

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        return (g,)
