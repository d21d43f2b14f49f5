"""Layers as functions (`F.relu(x)`, `F.linear(x, w, b)`, ...), under PyTorch's names and signatures.

Arguments are Tensors (arrays are accepted where noted); results are Tensors on the graph.
"""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, NoReturn, Sequence

import numpy as np

from ..autograd.rng import generator as random_generator
from ..autograd.api import exported
from ..autograd.errors import LayerInputError, unsupported
from ..autograd.ops.linalg import Linear
from ..autograd.tensor import Tensor

if TYPE_CHECKING:
    from .._typing import Size
    from ..autograd.api import interpolate  # one of _ops, bound above at run time
    from ..autograd.tensor import TensorLike

# The op functions declared for this surface in saliency/autograd/api.py (F.relu, F.conv2d, ...);
# the layer-level functions below (linear, dropout, softmax's legacy dim) are this module's own.
_ops = exported("F")
globals().update(_ops)


def upsample(input: TensorLike, size: Size | None = None, scale_factor: float | Sequence[float] | None = None,
             mode: str = "nearest", align_corners: bool | None = None) -> Tensor:
    """Deprecated in PyTorch (with a warning): interpolate(input, size, scale_factor, mode, align_corners)."""
    warnings.warn("nn.functional.upsample is deprecated. Use nn.functional.interpolate instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)  # noqa: F821 (from _ops)


def upsample_nearest(input: TensorLike, size: Size | None = None,
                     scale_factor: float | Sequence[float] | None = None) -> Tensor:
    """Deprecated in PyTorch (with a warning): interpolate(input, size, scale_factor, mode='nearest')."""
    warnings.warn("nn.functional.upsample_nearest is deprecated. Use nn.functional.interpolate instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")  # noqa: F821


def upsample_bilinear(input: TensorLike, size: Size | None = None,
                      scale_factor: float | Sequence[float] | None = None) -> Tensor:
    """Deprecated in PyTorch (with a warning): interpolate(input, size, scale_factor, mode='bilinear',
    align_corners=True)."""
    warnings.warn("nn.functional.upsample_bilinear is deprecated. Use nn.functional.interpolate instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)  # noqa: F821


def _tensor(x: TensorLike) -> Tensor:
    return x if isinstance(x, Tensor) else Tensor(x)


def _softmax_dim(name: str, ndim: int, stacklevel: int) -> int:
    warnings.warn(f"implicit dimension choice for {name} has been deprecated; pass dim= explicitly",
                  UserWarning, stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input: TensorLike, dim: int | None = None) -> Tensor:
    """exp(x) / sum(exp(x)) along `dim` (without dim, PyTorch's legacy choice and a warning)."""
    input = _tensor(input)
    if dim is None:
        dim = _softmax_dim("softmax", input.ndim, 3)
    return input.softmax(dim)


def log_softmax(input: TensorLike, dim: int | None = None) -> Tensor:
    """log(softmax(x)) along `dim`, computed stably."""
    input = _tensor(input)
    if dim is None:
        dim = _softmax_dim("log_softmax", input.ndim, 3)
    return input.log_softmax(dim)


def linear(input: TensorLike, weight: TensorLike, bias: TensorLike | None = None) -> Tensor:
    """input @ weight.T + bias, with weight of shape (out_features, in_features)."""
    input = _tensor(input)
    weight = _tensor(weight)
    if input.shape[-1:] != weight.shape[-1:]:
        got = input.shape[-1] if input.ndim else 0
        raise LayerInputError(f"linear: input of shape {input.shape} does not fit a weight of shape {weight.shape}; "
                              f"the input's last dimension must equal in_features = {weight.shape[-1]}",
                              what="features", expected=weight.shape[-1], got=got, input_shape=input.shape)
    if input.ndim > 2:
        # one matrix product over all the leading dimensions, as PyTorch: the weight's VJP is then one
        # product too, not one per leading index summed afterwards
        lead = input.shape[:-1]
        flat = input.reshape(int(np.prod(lead)), input.shape[-1])
        return linear(flat, weight, bias).reshape(*lead, weight.shape[0])
    if input.ndim == 2 and weight.ndim == 2 and (bias is None or tuple(np.shape(bias)) == weight.shape[:1]):
        return Linear.apply(input, weight, bias)
    out = input @ weight.t()
    return out if bias is None else out + bias


def dropout(input: TensorLike, p: float = 0.5, training: bool = True, inplace: bool = False,
            generator: np.random.Generator | None = None) -> Tensor:
    """Zero each element with probability p and scale the rest by 1 / (1 - p) (inverted dropout);
    the identity when not training. The mask is drawn from `generator`, else from the generator
    that `saliency.manual_seed` resets. `inplace` is accepted for compatibility and ignored."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    input = _tensor(input)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * np.zeros(input.shape, dtype=input.dtype)
    rng = random_generator(generator)
    draw_dtype = np.float64 if input.dtype == np.float64 else np.float32
    keep = rng.random(input.shape, dtype=draw_dtype) >= p
    return input * (keep.astype(input.dtype) * input.dtype.type(1.0 / (1.0 - p)))


def dropout2d(input: TensorLike, p: float = 0.5, training: bool = True, inplace: bool = False,
              generator: np.random.Generator | None = None) -> Tensor:
    """Zero whole channels: each (sample, channel) plane of (N, C, H, W) with probability p, the rest scaled
    by 1 / (1 - p); the identity when not training. As PyTorch (with its warnings), a 3-D input is (N, C, L)
    and a 2-D one (N, C). The mask is drawn from `generator`, else from the generator that
    `saliency.manual_seed` resets; `inplace` is accepted for compatibility and ignored."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    input = _tensor(input)
    if input.ndim not in (2, 3, 4):
        raise ValueError(f"dropout2d expects input of shape (N, C, H, W), got {tuple(input.shape)}")
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim; "
                      "use dropout1d for that", UserWarning, stacklevel=2)
    elif input.ndim == 2:
        warnings.warn("dropout2d: Received a 2-D input to dropout2d, which is deprecated; use dropout instead",
                      UserWarning, stacklevel=2)
    if not training or p == 0.0:
        return input
    mask_shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
    if p == 1.0:
        return input * np.zeros(mask_shape, dtype=input.dtype)
    rng = random_generator(generator)
    draw_dtype = np.float64 if input.dtype == np.float64 else np.float32
    keep = rng.random(mask_shape, dtype=draw_dtype) >= p
    return input * (keep.astype(input.dtype) * input.dtype.type(1.0 / (1.0 - p)))


__all__ = sorted(set(_ops) | {"dropout", "linear", "log_softmax", "softmax", "upsample", "upsample_bilinear",
                              "upsample_nearest"})


def __getattr__(name: str) -> NoReturn:
    # reached only for names this module lacks: a PyTorch function that ported code asks for
    if name.startswith("_"):
        raise AttributeError(f"module 'saliency.nn.functional' has no attribute '{name}'")
    raise unsupported("F", name)


__all__ = sorted(set(__all__) | {"dropout2d"})
