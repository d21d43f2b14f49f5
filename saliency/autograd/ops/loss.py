"""Softmax heads and losses: softmax, log_softmax, nll_loss (cross-entropy's second half), mse_loss."""
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..._typing import Shape
from .. import rules
from ..node import DENSE, Function
from ..geometry import Box, Shapes, along_axes_window, whole_window
from .reduce import normalize_dims

_REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(reduction: str) -> None:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {', '.join(_REDUCTIONS)}, got {reduction!r}")


class Softmax(Function):
    """z = exp(x) / sum(exp(x), dim)"""

    __slots__ = ("axis",)
    axis: int
    rule = rules.NONE
    # mixes cells along dim: over the map, all of it; over channels the map is kept, and a cropped VJP
    # could run on the windows, but there is none yet
    backward_window = DENSE

    def forward(self, x: NDArray[Any], *, dim: int) -> NDArray[Any]:
        (self.axis,) = normalize_dims(dim, x.ndim) or (0,)
        e = np.exp(x - np.amax(x, axis=self.axis, keepdims=True)) if x.ndim else np.ones_like(x)
        out = e / e.sum(axis=self.axis, keepdims=True) if x.ndim else e
        self.save_for_backward(out)
        return out

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        (y,) = self.saved
        if not y.ndim:
            return (np.zeros_like(g),)
        axis = self.seed_ndim(g) + self.axis
        return (y * (g - (g * y).sum(axis=axis, keepdims=True)),)

    def window_rule(self, box: Box, shapes: Shapes) -> tuple[Box | None, ...]:
        return along_axes_window((self.axis,), self, box, shapes)


class LogSoftmax(Function):
    """z = x - log(sum(exp(x), dim))"""

    __slots__ = ("axis",)
    axis: int
    rule = rules.NONE
    backward_window = DENSE  # as Softmax's

    def forward(self, x: NDArray[Any], *, dim: int) -> NDArray[Any]:
        (self.axis,) = normalize_dims(dim, x.ndim) or (0,)
        if not x.ndim:
            out = np.zeros_like(x)
        else:
            shifted = x - np.amax(x, axis=self.axis, keepdims=True)
            out = shifted - np.log(np.exp(shifted).sum(axis=self.axis, keepdims=True))
        self.save_for_backward(out)
        return out

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any]]:
        (y,) = self.saved
        if not y.ndim:
            return (np.zeros_like(g),)
        axis = self.seed_ndim(g) + self.axis
        return (g - np.exp(y) * g.sum(axis=axis, keepdims=True),)

    def window_rule(self, box: Box, shapes: Shapes) -> tuple[Box | None, ...]:
        return along_axes_window((self.axis,), self, box, shapes)


class NllLoss(Function):
    """z = -logp[n, target[n]] averaged (or summed) over n; logp is (N, C) or (N, C, d1, ...)."""

    __slots__ = ("reduction", "in_shape", "count")
    reduction: str
    in_shape: Shape
    count: int
    rule = rules.NONE
    window_rule = whole_window

    def forward(self, logp: NDArray[Any], *, target: ArrayLike, reduction: str = "mean") -> NDArray[Any]:
        _check_reduction(reduction)
        target = np.asarray(target)
        if target.dtype.kind not in "iu":
            raise TypeError(f"target must hold integer class indices, got dtype {target.dtype}")
        if logp.ndim < 2 or target.shape != logp.shape[:1] + logp.shape[2:]:
            raise ValueError(f"target of shape {target.shape} does not fit input of shape {logp.shape}; "
                             f"for input (N, C, ...) pass a target of shape (N, ...)")
        classes = logp.shape[1]
        if target.size and (target.min() < 0 or target.max() >= classes):
            bad = target.max() if target.max() >= classes else target.min()
            raise ValueError(f"target holds class {int(bad)} but the input has {classes} classes; "
                             f"use class indices in [0, {classes - 1}]")
        index = np.expand_dims(target, 1)
        picked = -np.take_along_axis(logp, index, axis=1)[:, 0]
        self.reduction, self.in_shape, self.count = reduction, logp.shape, max(target.size, 1)
        self.save_for_backward(index)
        if reduction == "none":
            return picked
        return picked.sum() / self.count if reduction == "mean" else picked.sum()

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any], None]:
        (index,) = self.saved
        seed_ndim = self.seed_ndim(g)
        lead = g.shape[:seed_ndim]
        scale = -g / self.count if self.reduction == "mean" else -g
        if self.reduction != "none":
            scale = scale.reshape(lead + (1,) * index.ndim)
        else:
            scale = np.expand_dims(scale, seed_ndim + 1)
        gx = np.zeros(lead + self.in_shape, dtype=g.dtype)
        np.put_along_axis(gx, np.broadcast_to(index, lead + index.shape),
                          np.broadcast_to(scale, lead + index.shape), axis=seed_ndim + 1)
        return gx, None

    def name(self) -> str:
        # PyTorch runs inputs with spatial dimensions (N, C, d1, ...) through nll_loss2d
        return "NllLossBackward0" if len(self.in_shape) == 2 else "NllLoss2DBackward0"


class MseLoss(Function):
    """z = mean((x - t) ** 2) (or the sum, or elementwise with reduction='none')."""

    __slots__ = ("reduction",)
    reduction: str
    rule = rules.NONE
    window_rule = whole_window

    def forward(self, x: NDArray[Any], t: NDArray[Any], *, reduction: str = "mean") -> NDArray[Any]:
        _check_reduction(reduction)
        if np.shape(x) != np.shape(t):
            raise ValueError(f"mse_loss: input has shape {np.shape(x)} but target has shape {np.shape(t)}; "
                             f"they must match")
        self.reduction = reduction
        diff = x - t
        self.save_for_backward(diff)
        sq = diff * diff
        return sq.mean() if reduction == "mean" else (sq.sum() if reduction == "sum" else sq)

    def backward(self, g: NDArray[Any]) -> tuple[NDArray[Any] | None, NDArray[Any] | None]:
        (diff,) = self.saved
        seed_ndim = self.seed_ndim(g)
        if self.reduction != "none":
            g = g.reshape(g.shape[:seed_ndim] + (1,) * diff.ndim)
        scale = 2.0 / diff.size if self.reduction == "mean" else 2.0
        gx = g * (scale * diff)
        nx, nt = self.needs_input_grad
        return (gx if nx else None), (-gx if nt else None)
