"""Scaled dot-product attention as one op: softmax(q k^T * scale + mask) v, its VJP from the saved
attention weights (the four products of the backward pass, no intermediate node)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .. import rules
from ... import kernels
from ..geometry import whole_window
from ..node import Function, unbroadcast

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from ..._typing import BoolArray, FloatArray, Shape

    Grad = NDArray[Any] | None  # one input's gradient, None for one that takes none


def _mT(a: NDArray[Any]) -> NDArray[Any]:
    return np.swapaxes(a, -1, -2)


class ScaledDotProductAttention(Function):
    """z = softmax(q @ k^T * scale + mask) @ v: q (..., L, E), k (..., S, E), v (..., S, Ev) -> (..., L, Ev),
    the leading dimensions broadcast; mask (added to the scores, -inf leaves a key out) broadcasts to
    (..., L, S). A query whose keys are all left out attends to nothing (zeros, as PyTorch's). With
    `keep` (dropout, a boolean array of the weights' shape) the weights it drops are zeroed and the
    others multiplied by `factor`."""

    __slots__ = ("scale", "keep", "factor", "mask_meta")
    scale: float
    keep: BoolArray | None
    factor: float
    mask_meta: tuple[Shape, np.dtype[Any]] | None  # the mask's shape and dtype (its gradient's)
    rule = rules.NONE
    window_rule = whole_window  # every output row reads every key and value

    def forward(self, q: FloatArray, k: FloatArray, v: FloatArray, mask: ArrayLike | None = None, *, scale: float,
                keep: BoolArray | None = None, factor: float = 1.0) -> NDArray[Any]:
        s = kernels.matmul(q, _mT(k))
        s *= scale
        if mask is not None:
            mask = np.asarray(mask)
            if np.broadcast_shapes(s.shape, mask.shape) == s.shape:
                np.add(s, mask, out=s, casting="unsafe")
            else:
                s = s + mask.astype(s.dtype, copy=False)
        top = s.max(axis=-1, keepdims=True)
        top[top == -np.inf] = 0  # every key left out: exp(-inf) = 0 everywhere, the row stays 0
        np.subtract(s, top, out=s)
        np.exp(s, out=s)
        total = s.sum(axis=-1, keepdims=True)
        total[total == 0] = 1
        p = np.divide(s, total, out=s)
        self.scale, self.keep, self.factor = scale, keep, factor
        self.mask_meta = None if mask is None else (mask.shape, mask.dtype)
        self.save_for_backward(q, k, v, p)
        return kernels.matmul(self._dropped(p), v)

    def _dropped(self, p: NDArray[Any]) -> NDArray[Any]:
        return p if self.keep is None else p * self.keep * p.dtype.type(self.factor)

    def backward(self, g: FloatArray) -> tuple[Grad, Grad, Grad, Grad]:
        q, k, v, p = self.saved
        seeds = self.seed_ndim(g)
        nq, nk, nv, nm = self.needs_input_grad
        dv = unbroadcast(kernels.matmul(_mT(self._dropped(p)), g), v.shape, seeds) if nv else None
        if not (nq or nk or nm):
            return None, None, dv, None
        dp = self._dropped(kernels.matmul(g, _mT(v)))
        ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))  # the softmax's VJP
        dm = None
        if nm:
            assert self.mask_meta is not None  # (a mask that takes a gradient was given)
            shape, dtype = self.mask_meta
            dm = unbroadcast(ds, shape, seeds).astype(dtype, copy=False)
        ds *= self.scale
        dq = unbroadcast(kernels.matmul(ds, k), q.shape, seeds) if nq else None
        dk = unbroadcast(kernels.matmul(_mT(ds), q), k.shape, seeds) if nk else None
        return dq, dk, dv, dm

    def name(self) -> str:
        # PyTorch's fused CPU kernel (its math fallback, for 3-D inputs or a mask that takes a
        # gradient, leaves several nodes instead)
        return "ScaledDotProductFlashAttentionForCpuBackward0"
