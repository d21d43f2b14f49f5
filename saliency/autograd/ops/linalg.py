"""Matrix products: matmul with NumPy's rules (1-D operands, broadcast batch dimensions)."""
import numpy as np

from ... import kernels
from ..node import Function, unbroadcast
from ..geometry import whole_window


class Matmul(Function):
    """z = x @ w. The node is MmBackward0 for two matrices, as PyTorch names it (MvBackward0,
    DotBackward0 and BmmBackward0 for vector and batched operands)."""

    __slots__ = ("kind",)
    window_rule = whole_window

    def forward(self, x, w):
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
        self.kind = ("Dot" if w.ndim == 1 else "Mm") if x.ndim == 1 else \
            ("Mv" if w.ndim == 1 else ("Mm" if x.ndim == 2 and w.ndim == 2 else "Bmm"))
        return out

    def backward(self, g):
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

    def name(self):
        return f"{self.kind}Backward0"
