"""Activation functions beyond relu, sigmoid and tanh (those are in `elementwise`), with PyTorch's
formulas, node names and choice of gradient at the kinks.

Each pointwise op computes its output and, when a gradient is needed, its derivative dz/dx in the
same pass; the VJP is then g * dz/dx, dense (`backward`) or on the windows of a Patch
(`backward_window`). A NaN in the incoming gradient stays NaN, also where the derivative is 0
(as the package's Relu; PyTorch's masked VJPs would give 0 there). At a NaN input the derivative
is what PyTorch's scalar kernels give (its vectorised kernels differ from them there, so PyTorch's
own result depends on where the NaN sits in memory).

`Prelu` has a second input, the learned slope of each channel: its input gradient is cropped to
the windows like the others', its weight gradient is a sum over the windows.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import rules
from ...kernels.activation import INV_SQRT_2PI, gelu, hardswish, hardtanh, normal_cdf, relu_grad, sigmoid, silu
from ..geometry import elementwise_window, first_input
from ..node import Function

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from ..._typing import Shape
    from ..geometry import Box, Shapes
    from ..patch import Patch

    # (z, dz/dx or None): what `_Pointwise.values` gives; dz/dx is a boolean mask for Hardtanh
    Values = tuple[NDArray[Any], NDArray[Any] | None]

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)    # GELU's tanh approximation: tanh(sqrt(2/pi) (x + 0.044715 x^3))
_GELU_KAPPA = 0.044715
_SIXTH_FLOAT32 = float(np.float32(1 / 6))     # hardsigmoid's slope as PyTorch's kernel computes it


def _softplus(x: NDArray[Any]) -> NDArray[Any]:
    """log(1 + exp(x)) without overflow: max(x, 0) + log1p(exp(-|x|))."""
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


class _Pointwise(Function):
    """A unary elementwise op whose `values(x)` gives (z, dz/dx); the VJP is g * dz/dx, on the dense
    gradient or on the windows of a Patch (the same for every op of the family)."""

    __slots__ = ()
    rule = rules.PASS
    window_rule = elementwise_window

    def forward(self, x: NDArray[Any], **params: Any) -> NDArray[Any]:
        self.set(**params)
        # inf inputs give NaN where the formula does
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            out, slope = self.values(x, self.needs_input_grad[0])
        self.save_for_backward(slope)
        return out

    def set(self) -> None:
        """Keep the op's parameters (subclasses with parameters override this)."""

    def values(self, x: NDArray[Any], grad: bool) -> Values:
        """(z, dz/dx of x's dtype, or None when `grad` is false)."""
        raise NotImplementedError

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        return (g * self.saved[0],)

    def backward_window(self, p: Patch) -> tuple[Patch]:
        """The windows of g times the same windows of dz/dx."""
        return (p.times(self.saved[0]),)


def _as(x: NDArray[Any], a: ArrayLike) -> NDArray[Any]:
    """`a` (an array or number) as an array of x's dtype."""
    return np.asarray(a, dtype=x.dtype)


class Hardtanh(_Pointwise):
    """z = min(max(x, lo), hi); the gradient passes strictly inside (lo, hi), 0 at the bounds and
    beyond, as PyTorch's (relu6 is hardtanh(x, 0, 6) and has this node too). It passes at NaN, as
    Relu's and as PyTorch's scalar kernel (its vectorised kernel gives 0 there)."""

    __slots__ = ("lo", "hi")
    lo: float
    hi: float

    def set(self, *, lo: float, hi: float) -> None:  # type: ignore[override]  # (each op its own parameters)
        self.lo, self.hi = lo, hi

    def values(self, x: NDArray[Any], grad: bool) -> Values:
        # one pass (kernels.activation) for the values and the derivative, a boolean mask (the
        # derivative is 0 or 1): 1/4 of the memory, and the VJP is ReLU's masked product
        if x.dtype in (np.float32, np.float64):
            out, mask = hardtanh(x, self.lo, self.hi)
            return out, (mask if grad else None)
        out = np.minimum(np.maximum(x, _as(x, self.lo)), _as(x, self.hi))
        return out, ~((x <= self.lo) | (x >= self.hi)) if grad else None

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        return (relu_grad(g, self.saved[0]),)


class LeakyRelu(_Pointwise):
    """z = x where x > 0, slope * x elsewhere (the gradient at 0 is the slope)."""

    __slots__ = ("slope",)
    slope: float

    def set(self, *, slope: float) -> None:  # type: ignore[override]  # (each op its own parameters)
        self.slope = slope

    def values(self, x: NDArray[Any], grad: bool) -> Values:
        positive = x > 0
        out = np.where(positive, x, x * _as(x, self.slope))
        return out, (np.where(positive, _as(x, 1), _as(x, self.slope)) if grad else None)


class Elu(_Pointwise):
    """z = x where x > 0, alpha * (exp(x) - 1) elsewhere (via expm1); the gradient at 0 is alpha."""

    __slots__ = ("alpha",)
    alpha: float

    def set(self, *, alpha: float) -> None:  # type: ignore[override]  # (each op its own parameters)
        self.alpha = alpha

    def values(self, x: NDArray[Any], grad: bool) -> Values:
        alpha = _as(x, self.alpha)
        below = np.minimum(x, 0)  # no overflow in the branch that x > 0 does not take
        out = np.where(x > 0, x, alpha * np.expm1(below))
        return out, (np.where(x <= 0, alpha * np.exp(below), _as(x, 1)) if grad else None)


class Silu(_Pointwise):
    """z = x * sigmoid(x); dz/dx = s (1 + x (1 - s))."""

    __slots__ = ()

    def values(self, x: NDArray[Any], grad: bool) -> Values:
        return silu(x, grad)


class Hardswish(_Pointwise):
    """z = x * min(max(x + 3, 0), 6) / 6; dz/dx = 0 for x <= -3, x / 3 + 1/2 for -3 < x < 3, 1 for
    x >= 3 (and NaN), as PyTorch's."""

    __slots__ = ()

    def values(self, x: NDArray[Any], grad: bool) -> Values:
        if x.dtype in (np.float32, np.float64):
            return hardswish(x, grad)
        out = x * np.minimum(np.maximum(x + 3, 0), 6) / 6
        if not grad:
            return out, None
        return out, np.where(x <= -3, _as(x, 0), np.where(x < 3, x / 3 + 0.5, _as(x, 1)))


class Hardsigmoid(_Pointwise):
    """z = min(max(x + 3, 0), 6) / 6; dz/dx = 1/6 strictly inside (-3, 3), 0 elsewhere. The 1/6 of
    the gradient is the float32 constant in float64 too (0.16666667163...), as PyTorch's kernel has it."""

    __slots__ = ()

    def values(self, x: NDArray[Any], grad: bool) -> Values:
        out = np.minimum(np.maximum(x + 3, 0), 6) / 6
        return out, (np.where((x > -3) & (x < 3), _as(x, _SIXTH_FLOAT32), _as(x, 0)) if grad else None)


class Gelu(_Pointwise):
    """z = x * Phi(x) (Phi the standard normal CDF, from erfc) for approximate='none';
    z = x / 2 * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) for approximate='tanh'."""

    __slots__ = ("approximate",)
    approximate: str

    def set(self, *, approximate: str = "none") -> None:
        if approximate not in ("none", "tanh"):
            raise ValueError(f"gelu's approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def values(self, x: NDArray[Any], grad: bool) -> Values:
        if self.approximate == "none" and x.dtype in (np.float32, np.float64):
            return gelu(x, grad)
        if self.approximate == "none":
            cdf = normal_cdf(x).astype(x.dtype, copy=False)
            out = x * cdf
            if not grad:
                return out, None
            return out, cdf + x * (np.exp(-0.5 * x * x) * _as(x, INV_SQRT_2PI))
        x2 = x * x
        t = np.tanh(_as(x, _SQRT_2_OVER_PI) * (x + _as(x, _GELU_KAPPA) * x2 * x))
        out = 0.5 * x * (1 + t)
        if not grad:
            return out, None
        return out, 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _as(x, _SQRT_2_OVER_PI) * (1 + _as(x, 3 * _GELU_KAPPA) * x2)


class Erf(_Pointwise):
    """z = erf(x) = 2 Phi(x sqrt 2) - 1 (Phi the standard normal CDF, from erfc, in float64);
    dz/dx = 2 / sqrt(pi) exp(-x^2)."""

    __slots__ = ()

    def values(self, x: NDArray[Any], grad: bool) -> Values:
        wide = np.asarray(x, np.float64)
        out = (2.0 * normal_cdf(wide * np.sqrt(2.0)) - 1.0).astype(x.dtype, copy=False)
        if not grad:
            return out, None
        return out, (2.0 / np.sqrt(np.pi) * np.exp(-wide * wide)).astype(x.dtype, copy=False)


class Softplus(_Pointwise):
    """z = log(1 + exp(beta x)) / beta, and z = x where beta x > threshold (as PyTorch);
    dz/dx = sigmoid(beta x), 1 above the threshold. Computed without overflow for any threshold."""

    __slots__ = ("beta", "threshold")
    beta: float
    threshold: float

    def set(self, *, beta: float = 1.0, threshold: float = 20.0) -> None:
        self.beta, self.threshold = beta, threshold

    def values(self, x: NDArray[Any], grad: bool) -> Values:
        bx = x * _as(x, self.beta)
        linear = bx > self.threshold
        out = np.where(linear, x, _softplus(bx) / _as(x, self.beta))
        return out, (np.where(linear, _as(x, 1), sigmoid(bx)) if grad else None)


class Mish(_Pointwise):
    """z = x * tanh(softplus(x)); dz/dx = t + x sigmoid(x) (1 - t^2) with t = tanh(softplus(x))."""

    __slots__ = ()

    def values(self, x: NDArray[Any], grad: bool) -> Values:
        t = np.tanh(_softplus(x))
        return x * t, (t + x * sigmoid(x) * (1 - t * t) if grad else None)


class Prelu(Function):
    """z = x where x > 0, weight * x elsewhere, with one weight per channel (dimension 1 of x; a
    single weight for all). The weight gradient is the sum of g * x over the cells where x <= 0 of
    each channel; on a Patch it is summed over the windows. The node is PreluKernelBackward0."""

    __slots__ = ("w_shape",)
    w_shape: Shape
    rule = rules.PASS

    def forward(self, x: NDArray[Any], w: NDArray[Any]) -> NDArray[Any]:
        if w.ndim > 1:
            raise ValueError(f"prelu expects a weight of one dimension (num_parameters,), got shape {w.shape}")
        channels = x.shape[1] if x.ndim >= 2 else 1
        if w.size != 1 and w.size != channels:
            raise ValueError(f"prelu has {w.size} weights for an input of {channels} channels (shape {x.shape}); "
                             f"there must be one weight, or one per channel (dimension 1)")
        if x.dtype != w.dtype:
            raise TypeError(f"prelu input has dtype {x.dtype} but weight has dtype {w.dtype}; "
                            f"convert one of them (model.to(...) or x.to(...))")
        self.w_shape = w.shape
        wb = w.reshape(()) if w.size == 1 else w.reshape((-1,) + (1,) * (x.ndim - 2))
        positive = x > 0
        needs_x, needs_w = self.needs_input_grad
        self.save_for_backward(np.where(positive, np.ones((), x.dtype), wb) if needs_x else None,
                               np.where(positive, np.zeros((), x.dtype), x) if needs_w else None)
        return np.where(positive, x, wb * x)

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any] | None, NDArray[Any] | None]:
        slope, negative = self.saved
        needs_x, needs_w = self.needs_input_grad
        return (g * slope if needs_x else None,
                self._weight_grad(g * negative, self.seed_ndim(g), 1) if needs_w else None)

    def backward_window(self, p: Patch) -> tuple[Patch | None, NDArray[Any] | None] | None:
        """The input gradient on the windows; the weight gradient summed over them: the channel is a
        lead dimension of the windows only for inputs with a map and a channel (4 or more dimensions)."""
        slope, negative = self.saved
        needs_x, needs_w = self.needs_input_grad
        gw = None
        if needs_w:
            if len(self.out_shape) < 4 and math.prod(self.w_shape) != 1:
                return None
            gw = self._weight_grad(p.data * p.window(negative), 1, 1).reshape(p.seed_shape + self.w_shape)
        return (p.times(slope) if needs_x else None, gw)

    def _weight_grad(self, product: NDArray[Any], seed_ndim: int, channel: int) -> NDArray[Any]:
        """Sum `product` (seed dims, then x's dims) down to the seed dims and the weight's shape;
        the channel is dimension `channel` of x."""
        lead = product.shape[:seed_ndim]
        if math.prod(self.w_shape) == 1:
            return product.reshape(lead + (-1,)).sum(-1).reshape(lead + self.w_shape)
        axes = tuple(i for i in range(seed_ndim, product.ndim) if i != seed_ndim + channel)
        return product.sum(axis=axes).reshape(lead + self.w_shape)

    def window_rule(self, box: Box, shapes: Shapes) -> tuple[Box | None, ...]:
        """x cell by cell; the weight: whole."""
        return first_input(box.clip, shapes)

    def name(self) -> str:
        return "PreluKernelBackward0"
