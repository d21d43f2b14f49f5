"""Weight initialisation, in place, with PyTorch's formulas (`kaiming_uniform_`, `uniform_`, ...).

Each function takes an optional `generator` (an `np.random.Generator`); without one it draws from
the generator that `saliency.manual_seed` resets (never from NumPy's global state). Within
`skipped()` they leave tensors as allocated.
"""
from __future__ import annotations

import contextlib
import contextvars
import math
import warnings
from typing import TYPE_CHECKING, Iterator

import numpy as np

from ..autograd import rng

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, DTypeLike

    from .._typing import Shape
    from ..autograd.tensor import Tensor
    from .module import Module


_skipping = contextvars.ContextVar("saliency.init_skipped", default=False)


@contextlib.contextmanager
def skipped() -> Iterator[None]:
    """Within it (in this thread or task) the initialisers leave every tensor as allocated, its
    memory unwritten and no random numbers drawn: for building a model whose parameters and
    buffers a strict `load_state_dict` fills at once. The building is quicker, and memory never
    written is never paid for (a 344 MB ViT-B/16 is not drawn only to be overwritten)."""
    token = _skipping.set(True)
    try:
        yield
    finally:
        _skipping.reset(token)


def _fill(tensor: Tensor, values: ArrayLike) -> Tensor:
    """Write `values` into the tensor's array in place (outside the graph, as PyTorch's init does)."""
    if not _skipping.get():
        tensor._array[...] = values
        tensor._written()
    return tensor


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity: 1 for linear/conv/sigmoid, 5/3 for tanh, sqrt(2) for
    relu, sqrt(2 / (1 + slope^2)) for leaky_relu (slope `param`, default 0.01), 3/4 for selu."""
    if nonlinearity in ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                        "conv_transpose3d", "sigmoid"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"negative_slope {param!r} is not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"unsupported nonlinearity {nonlinearity!r}; choose one of linear, conv2d, sigmoid, tanh, "
                     f"relu, leaky_relu, selu")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """fan_in = shape[1] * receptive field, fan_out = shape[0] * receptive field (weight layout (out, in, ...))."""
    shape = tensor.shape
    if len(shape) < 2:
        raise ValueError(f"fan in and fan out can not be computed for a tensor with fewer than 2 dimensions, "
                         f"got shape {shape}")
    receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    return shape[1] * receptive, shape[0] * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode {mode!r} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: np.random.Generator | None = None) -> Tensor:
    """Fill with samples from U(a, b)."""
    if _skipping.get():
        return tensor
    return _fill(tensor, rng.generator(generator).uniform(a, b, tensor.shape))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0,
            generator: np.random.Generator | None = None) -> Tensor:
    """Fill with samples from N(mean, std^2)."""
    if _skipping.get():
        return tensor
    return _fill(tensor, rng.generator(generator).normal(mean, std, tensor.shape))


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                  generator: np.random.Generator | None = None) -> Tensor:
    """Fill with samples from N(mean, std^2) restricted to [a, b] (a and b are values, not
    multiples of std, as in PyTorch): where the interval holds most of the distribution (as in
    every initialisation that uses it, std 0.02 within +-2), draws from N(mean, std^2) with the
    few that fall outside drawn again; elsewhere by inverting the normal CDF on the interval's
    probabilities."""
    if a >= b:
        raise ValueError(f"trunc_normal_ needs a < b, got a={a}, b={b}")
    if std <= 0:
        raise ValueError(f"trunc_normal_ needs a positive std, got {std}")
    lo, hi = (_normal_cdf((v - mean) / std) for v in (a, b))
    if hi - lo < 1e-12:
        raise ValueError(f"[{a}, {b}] lies too far out in the tails of N({mean}, {std}^2) to sample from")
    if _skipping.get():
        return tensor
    gen = rng.generator(generator)
    if hi - lo >= 0.5:  # each redraw keeps at least half of what is left outside
        values = gen.normal(mean, std, tensor.shape)
        outside = np.flatnonzero((values < a) | (values > b))
        while outside.size:
            values.flat[outside] = gen.normal(mean, std, outside.size)
            outside = outside[(values.flat[outside] < a) | (values.flat[outside] > b)]
        return _fill(tensor, values)
    u = gen.uniform(lo, hi, tensor.shape)
    values = mean + std * math.sqrt(2.0) * _erfinv(2.0 * u - 1.0)
    return _fill(tensor, np.clip(values, a, b))


def _normal_cdf(z: float) -> float:
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def _erfinv(y: ArrayLike) -> np.ndarray:
    """Inverse error function of an array in (-1, 1): an initial guess refined by Newton steps on
    erf (vectorised math.erf), accurate to float64 rounding."""
    y = np.asarray(y, dtype=np.float64)
    erf = np.vectorize(math.erf, otypes=[np.float64])
    w = -np.log(np.maximum((1.0 - y) * (1.0 + y), 1e-300))
    t = 2.0 / (np.pi * 0.147) - w / 2.0  # Winitzki's approximation, within 2e-3 of erfinv
    x = np.sign(y) * np.sqrt(np.maximum(np.sqrt(t * t + w / 0.147) - t, 0.0))
    for _ in range(3):
        x = x - (erf(x) - y) / (2.0 / math.sqrt(math.pi) * np.exp(-x * x))
    return x


def constant_(tensor: Tensor, val: float) -> Tensor:
    return _fill(tensor, val)


def zeros_(tensor: Tensor) -> Tensor:
    return _fill(tensor, 0)


def ones_(tensor: Tensor) -> Tensor:
    return _fill(tensor, 1)


def _empty(tensor: Tensor) -> bool:
    if 0 in tensor.shape:
        warnings.warn("initializing a zero-element tensor is a no-op", UserWarning, stacklevel=3)
        return True
    return False


def kaiming_uniform_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator: np.random.Generator | None = None) -> Tensor:
    """He et al. (2015): U(-bound, bound) with bound = gain * sqrt(3 / fan). PyTorch's Linear and
    Conv2d use a=sqrt(5), which gives bound = 1 / sqrt(fan_in)."""
    if _empty(tensor):
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    generator: np.random.Generator | None = None) -> Tensor:
    """He et al. (2015): N(0, std^2) with std = gain / sqrt(fan)."""
    if _empty(tensor):
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))
    return normal_(tensor, 0.0, std, generator)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator: np.random.Generator | None = None) -> Tensor:
    """Glorot & Bengio (2010): U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: np.random.Generator | None = None) -> Tensor:
    """Glorot & Bengio (2010): N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def default_weight_and_bias_(weight: Tensor, bias: Tensor | None = None,
                             generator: np.random.Generator | None = None) -> None:
    """PyTorch's default for Linear and Conv2d: weight by kaiming_uniform_ with a=sqrt(5) (that is,
    U(-1/sqrt(fan_in), 1/sqrt(fan_in))), bias from the same uniform distribution."""
    kaiming_uniform_(weight, a=math.sqrt(5), generator=generator)
    if bias is not None:
        fan_in = _calculate_fan_in_and_fan_out(weight)[0]
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        uniform_(bias, -bound, bound, generator)


def register_weight_and_bias(module: Module, weight_shape: Shape, bias: bool = True,
                             dtype: DTypeLike | None = None) -> None:
    """Give a Linear- or Conv2d-like `module` an uninitialised `weight` of `weight_shape` and a `bias`
    (one per output, weight_shape[0], or None); `reset_parameters` fills them."""
    from .parameter import Parameter

    dtype = np.dtype(dtype or np.float32)
    module.weight = Parameter(np.empty(weight_shape, dtype=dtype))
    if bias:
        module.bias = Parameter(np.empty(weight_shape[0], dtype=dtype))
    else:
        module.register_parameter("bias", None)
