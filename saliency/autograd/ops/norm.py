"""Normalisation: batch norm over (N, C, *) (batch statistics in training, running statistics in eval),
group norm (statistics per sample and group of channels; instance norm is one channel a group) and layer
norm (statistics per sample over the trailing normalized_shape)."""
import math
from typing import Any, Sequence

import numpy as np
from numpy.typing import ArrayLike, DTypeLike, NDArray

from .. import rules
from ... import kernels
from ..._typing import Float64, FloatArray, Shape
from ...kernels import versions
from ..node import Function
from ..geometry import Box, Shapes, first_input, whole_window
from ..patch import Patch


class BatchNorm(Function):
    """z = weight * (x - mean) / sqrt(var + eps) + bias per channel; the node is NativeBatchNormBackward0.

    In training the batch's statistics are used (and depend on x), and the running statistics,
    if given, are updated in place as PyTorch does (the variance unbiased); in eval the running
    statistics are constants.
    """

    __slots__ = ("training", "eps", "x_shape")
    training: bool
    eps: float
    x_shape: Shape

    @property
    def rule(self) -> rules.Kind:
        """With running statistics, a per-channel affine map (BATCHNORM); batch statistics mix the batch's
        images, which no rule can attribute."""
        return rules.NONE if self.training else rules.BATCHNORM

    def channel_affine(self, mean: ArrayLike, var: ArrayLike, weight: ArrayLike | None = None,
                       bias: ArrayLike | None = None) -> tuple[Float64, Float64]:
        """(scale, shift) per channel in eval mode, in float64, for the running statistics and the
        affine parameters the node was called with: z = x * scale + shift."""
        scale = 1.0 / np.sqrt(np.asarray(var, np.float64) + self.eps)
        if weight is not None:
            scale = scale * np.asarray(weight, np.float64)
        shift = -np.asarray(mean, np.float64) * scale
        return scale, shift if bias is None else shift + np.asarray(bias, np.float64)

    def forward(self, x: FloatArray, weight: FloatArray | None = None, bias: FloatArray | None = None, *,
                running_mean: FloatArray | None = None, running_var: FloatArray | None = None, training: bool = False,
                momentum: float = 0.1, eps: float = 1e-5) -> FloatArray:
        self.x_shape = x.shape
        if x.ndim in (2, 3, 5):  # (N, C), (N, C, L), (N, C, D, H, W): the kernels' (N, C, L, 1)
            x = x.reshape(x.shape[0], x.shape[1], -1, 1)
            return self._forward4(x, weight, bias, running_mean, running_var, training, momentum,
                                  eps).reshape(self.x_shape)
        if x.ndim != 4:
            raise ValueError(f"batch_norm expects input of shape (N, C), (N, C, L) or (N, C, H, W), got {x.shape}")
        return self._forward4(x, weight, bias, running_mean, running_var, training, momentum, eps)

    def _forward4(self, x: FloatArray, weight: FloatArray | None, bias: FloatArray | None,
                  running_mean: FloatArray | None, running_var: FloatArray | None, training: bool, momentum: float,
                  eps: float) -> FloatArray:
        if training:
            mean, var = kernels.batch_norm_stats(x)
            count = x.size // x.shape[1]
            if count < 2:
                raise ValueError(f"batch_norm in training needs more than one value per channel, got input of "
                                 f"shape {x.shape}; call .eval() on the model to use the running statistics")
            if running_mean is not None:
                running_mean *= 1 - momentum
                running_mean += momentum * mean
            if running_var is not None:
                running_var *= 1 - momentum
                running_var += momentum * var * count / (count - 1)
            versions.bump(running_mean)
            versions.bump(running_var)
        else:
            if running_mean is None or running_var is None:
                raise ValueError("batch_norm in eval mode needs running_mean and running_var")
            mean, var = np.asarray(running_mean, np.float64), np.asarray(running_var, np.float64)
        self.training, self.eps = training, eps
        self.save_for_backward(x, mean, var, weight)
        return kernels.batch_norm_forward(x, mean, var, weight, bias, eps)

    def backward(self, g: FloatArray) -> tuple[FloatArray | None, ...]:
        x, mean, var, weight = self.saved
        needs = self.needs_input_grad
        if len(self.x_shape) != 4:  # the kernels' (N, C, L, 1) and back
            seeds = g.shape[:self.seed_ndim(g)]
            g = g.reshape(seeds + x.shape)
        if not self.training and not any(needs[1:]):  # frozen eval mode: a per-channel scale, one pass
            dx: FloatArray = g * self._scale(g.dtype)[:, None, None]
            return (dx.reshape(dx.shape[:dx.ndim - 4] + self.x_shape),) + (None,) * (len(needs) - 1)
        grad = kernels.batch_norm_grad_train if self.training else kernels.batch_norm_grad_eval
        dx, dw, db = grad(g, x, mean, var, weight, self.eps)
        dx = dx.reshape(dx.shape[:dx.ndim - 4] + self.x_shape)
        return (dx if needs[0] else None, dw if needs[1] else None, db if needs[2] else None)

    def backward_window(self, p: Patch) -> tuple[Patch | NDArray[Any] | None, ...] | None:
        """Eval mode with frozen weight and bias on (N, C, H, W): a per-channel scale, cell by cell."""
        needs = self.needs_input_grad
        if self.training or any(needs[1:]) or len(self.x_shape) != 4:
            return None
        return (p.like(p.data * self._scale(p.dtype)[:, None, None]),) + (None,) * (len(needs) - 1)

    def window_rule(self, box: Box, shapes: Shapes) -> tuple[Box | None, ...]:
        """Eval mode: cell by cell for x (weight and bias: whole); training: batch statistics mix all cells."""
        return whole_window(self, box, shapes) if self.training else first_input(box.clip, shapes)

    def _scale(self, dtype: DTypeLike) -> FloatArray:
        """weight / sqrt(running_var + eps) per channel: eval mode's dx / dy."""
        _, _, var, weight = self.saved
        gamma = np.ones(len(var)) if weight is None else np.asarray(weight, np.float64)
        return (gamma / np.sqrt(var + self.eps)).astype(dtype)

    def name(self) -> str:
        return "NativeBatchNormBackward0"


def _moments(xr: FloatArray, eps: float) -> tuple[Float64, Float64]:
    """Mean and 1 / sqrt(biased variance + eps) over the last axis of xr, accumulated in float64."""
    mean = xr.mean(axis=-1, keepdims=True, dtype=np.float64)
    var = np.square(xr - mean).mean(axis=-1, keepdims=True)
    return mean, 1.0 / np.sqrt(var + eps)


def _normalized_grad(dxhat: FloatArray, xhat: FloatArray, rstd: Float64) -> FloatArray:
    """d/dx of xhat = (x - mean) * rstd over the last axis (the statistics depend on x):
    rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)); dxhat may carry leading seed dimensions."""
    return rstd * (dxhat - dxhat.mean(axis=-1, keepdims=True) - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))


class _Normalization(Function):
    """z = (x - mean) / sqrt(var + eps) * weight + bias with the statistics of each row of a view of x
    (`_rows`), weight and bias broadcast as `_affine_shape` says. Subclasses give the view."""

    __slots__ = ("x_shape", "eps", "param_shape")
    x_shape: Shape
    eps: float
    param_shape: Shape
    rule = rules.NONE
    window_rule = whole_window  # every output cell depends on the whole group (map included)

    def _rows(self, shape: Sequence[int]) -> Shape:
        raise NotImplementedError

    def _affine_shape(self) -> Shape:
        raise NotImplementedError

    def _normalize(self, x: FloatArray, weight: FloatArray | None, bias: FloatArray | None,
                   eps: float) -> FloatArray:
        self.x_shape, self.eps = x.shape, eps
        xr = x.reshape(self._rows(x.shape))
        mean, rstd = _moments(xr, eps)
        xhat = ((xr - mean) * rstd).astype(x.dtype).reshape(x.shape)
        self.save_for_backward(xhat, rstd, weight)
        out = xhat
        if weight is not None:
            out = out * weight.reshape(self._affine_shape())
        if bias is not None:
            out = out + bias.reshape(self._affine_shape())
        return out.astype(x.dtype, copy=False)

    def backward(self, g: FloatArray) -> tuple[FloatArray | None, ...]:
        xhat, rstd, weight = self.saved
        nb = self.seed_ndim(g)
        seeds = g.shape[:nb]
        needs = self.needs_input_grad
        dx = dw = db = None
        if needs[0]:
            dxhat = g if weight is None else g * weight.reshape(self._affine_shape())
            rows = self._rows(self.x_shape)
            dx = _normalized_grad(dxhat.reshape(seeds + rows), xhat.reshape(rows), rstd)
            dx = dx.astype(g.dtype, copy=False).reshape(g.shape)
        axes = tuple(nb + i for i, n in enumerate(self._affine_shape()) if n == 1)
        lead = tuple(range(nb, nb + len(self.x_shape) - len(self._affine_shape())))
        if len(needs) > 1 and needs[1]:
            dw = (g * xhat).sum(axis=lead + tuple(a + len(lead) for a in axes)).reshape(seeds + self.param_shape)
        if len(needs) > 2 and needs[2]:
            db = g.sum(axis=lead + tuple(a + len(lead) for a in axes)).reshape(seeds + self.param_shape)
        return (dx, dw, db)[:len(needs)]


class GroupNorm(_Normalization):
    """Group norm of (N, C, *): statistics per sample and group of C / num_groups channels, weight and bias
    per channel; the node is NativeGroupNormBackward0."""

    __slots__ = ("groups",)
    groups: int

    def forward(self, x: FloatArray, weight: FloatArray | None = None, bias: FloatArray | None = None, *,
                num_groups: int, eps: float = 1e-5) -> FloatArray:
        if x.ndim < 2 or x.shape[1] % num_groups:
            raise ValueError(f"group_norm: the {x.shape[1] if x.ndim > 1 else 0} channels of input of shape "
                             f"{x.shape} cannot be split into {num_groups} groups")
        self.groups, self.param_shape = num_groups, (x.shape[1],)
        self.x_shape = x.shape
        for name, v in (("weight", weight), ("bias", bias)):
            if v is not None and v.shape != self.param_shape:
                raise ValueError(f"group_norm: {name} must have shape ({x.shape[1]},), got {v.shape}")
        return self._normalize(x, weight, bias, eps)

    def _rows(self, shape: Sequence[int]) -> Shape:
        return (shape[0], self.groups, -1)

    def _affine_shape(self) -> Shape:
        return (self.x_shape[1],) + (1,) * (len(self.x_shape) - 2)

    def name(self) -> str:
        return "NativeGroupNormBackward0"


class LayerNorm(_Normalization):
    """Layer norm: statistics per index of the leading dimensions over the trailing normalized_shape,
    weight and bias of normalized_shape; the node is NativeLayerNormBackward0."""

    def forward(self, x: FloatArray, weight: FloatArray | None = None, bias: FloatArray | None = None, *,
                normalized_shape: Sequence[int], eps: float = 1e-5) -> FloatArray:
        k = len(normalized_shape)
        if x.ndim < k or tuple(x.shape[x.ndim - k:]) != tuple(normalized_shape):
            raise ValueError(f"layer_norm: input of shape {x.shape} does not end in normalized_shape "
                             f"{tuple(normalized_shape)}")
        self.param_shape = tuple(normalized_shape)
        self.x_shape = x.shape
        for name, v in (("weight", weight), ("bias", bias)):
            if v is not None and v.shape != self.param_shape:
                raise ValueError(f"layer_norm: {name} must have shape {self.param_shape}, got {v.shape}")
        return self._normalize(x, weight, bias, eps)

    def _rows(self, shape: Sequence[int]) -> Shape:
        return (-1, math.prod(self.param_shape))

    def _affine_shape(self) -> Shape:
        return self.param_shape

    def name(self) -> str:
        return "NativeLayerNormBackward0"
