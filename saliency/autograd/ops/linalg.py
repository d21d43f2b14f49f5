"""Matrix products: matmul with NumPy's rules (1-D operands, broadcast batch dimensions)."""
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ... import kernels
from ..._typing import FloatArray, Shape
from .. import rules
from ..node import Function, unbroadcast
from ..geometry import whole_window


class Matmul(Function):
    """z = x @ w. The node is MmBackward0 for two matrices, as PyTorch names it (MvBackward0,
    DotBackward0 and BmmBackward0 for vector and batched operands)."""

    __slots__ = ("kind", "x_shape")
    kind: str
    x_shape: Shape
    window_rule = whole_window
    family = "linear"

    @property
    def rule(self) -> rules.Kind:
        """WEIGHTS when one operand is data and the other a constant (a weight), both matrices; a
        product of two data-dependent operands (attention) has no sound rule."""
        return rules.WEIGHTS if sum(self.needs_input_grad) == 1 and self.kind in ("Mm", "Bmm") else rules.NONE

    def affine(self, x: NDArray[Any], w: NDArray[Any], b: NDArray[Any] | None) -> NDArray[Any]:
        """The product with the data operand x and the constant w (LRP's weight rules)."""
        out = kernels.matmul(x, w) if self.needs_input_grad[0] else kernels.matmul(w, x)
        return out if b is None else out + b

    def affine_vjp(self, g: NDArray[Any], w: NDArray[Any]) -> NDArray[Any]:
        """The VJP of g for the data operand, with the constant w."""
        nb = g.ndim - len(self.out_shape)
        if self.needs_input_grad[0]:
            return unbroadcast(kernels.matmul(g, np.swapaxes(w, -1, -2)), self.x_shape, nb)
        return unbroadcast(kernels.matmul(np.swapaxes(w, -1, -2), g), self.x_shape, nb)

    def forward(self, x: NDArray[Any], w: NDArray[Any]) -> NDArray[Any]:
        if x.ndim == 0 or w.ndim == 0:
            raise ValueError(f"matmul needs operands with at least one dimension, got shapes {x.shape} and {w.shape}; "
                             f"use * to multiply by a scalar")
        k_x, k_w = x.shape[-1], w.shape[-2 if w.ndim > 1 else 0]
        if k_x != k_w:
            raise ValueError(f"matmul: shapes {x.shape} and {w.shape} are not aligned: the last dimension of the "
                             f"first ({k_x}) must equal the {'second-to-last' if w.ndim > 1 else 'only'} "
                             f"dimension of the second ({k_w})")
        try:
            out = kernels.matmul(x, w)
        except ValueError:
            raise ValueError(f"matmul: the batch dimensions of shapes {x.shape} and {w.shape} "
                             f"cannot be broadcast together") from None
        self.save_for_backward(x, w)
        self.x_shape = x.shape if self.needs_input_grad[0] else w.shape  # the data operand's
        self.kind = ("Dot" if w.ndim == 1 else "Mm") if x.ndim == 1 else \
            ("Mv" if w.ndim == 1 else ("Mm" if x.ndim == 2 and w.ndim == 2 else "Bmm"))
        return out

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any] | None, NDArray[Any] | None]:
        x, w = self.saved
        seed_ndim = self.seed_ndim(g)
        nx, nw = self.needs_input_grad
        # treat a vector operand as a one-row (x) or one-column (w) matrix
        if w.ndim == 1:
            g = g[..., None]
            w = w[:, None]
        if x.ndim == 1:
            g = g[..., None, :]
            x = x[None, :]
        gx = gw = None
        if nx:
            gx = kernels.matmul(g, np.swapaxes(w, -1, -2))
            gx = unbroadcast(gx[..., 0, :] if self.saved[0].ndim == 1 else gx, self.saved[0].shape, seed_ndim)
        if nw:
            gw = kernels.matmul(np.swapaxes(x, -1, -2), g)
            gw = unbroadcast(gw[..., 0] if self.saved[1].ndim == 1 else gw, self.saved[1].shape, seed_ndim)
        return gx, gw

    def name(self) -> str:
        return f"{self.kind}Backward0"


class Linear(Function):
    """z = x @ w.T + b for x (N, in), w (out, in), b (out,) or None: one op, as PyTorch's addmm, so
    that a rule sees the layer's product and bias together. The node is AddmmBackward0 (MmBackward0
    without a bias), as PyTorch names the node of F.linear."""

    __slots__ = ("x_shape", "has_bias")
    x_shape: Shape
    has_bias: bool
    window_rule = whole_window
    rule = rules.WEIGHTS
    family = "linear"

    def forward(self, x: FloatArray, w: FloatArray, b: FloatArray | None = None) -> FloatArray:
        needs = self.needs_input_grad
        self.x_shape, self.has_bias = x.shape, b is not None
        self.save_for_backward(w if needs[0] else None, x if needs[1] else None)
        return self.affine(x, w, b)

    def backward(self, g: FloatArray) -> tuple[FloatArray | None, FloatArray | None, FloatArray | None]:
        w, x = self.saved
        needs = self.needs_input_grad
        gx = kernels.matmul(g, w) if needs[0] else None
        gw = kernels.matmul(np.swapaxes(g, -1, -2), x) if needs[1] else None
        gb = g.sum(axis=-2) if len(needs) > 2 and needs[2] else None
        return gx, gw, gb

    def affine(self, x: FloatArray, w: FloatArray, b: FloatArray | None) -> FloatArray:
        """x @ w.T + b (LRP's weight rules run it with modified inputs and weights)."""
        out = kernels.matmul(x, w.T)
        if b is not None:
            out += b
        return out

    def affine_vjp(self, g: FloatArray, w: FloatArray) -> FloatArray:
        """The input VJP of g with the weight w."""
        return kernels.matmul(g, w)

    # two (input, weight) pairs may run as one product with their features side by side
    stacks = True

    def merged(self, w: FloatArray, b: FloatArray | None, scale: FloatArray,
               shift: FloatArray) -> tuple[FloatArray, FloatArray]:
        """w and b with a per-output scale and shift after the op folded in (a batch norm)."""
        return w * scale[:, None], shift if b is None else b * scale + shift

    def name(self) -> str:
        return "AddmmBackward0" if self.has_bias else "MmBackward0"
