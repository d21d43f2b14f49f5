"""Making tensors: from data (`tensor`, `as_tensor`, `from_numpy`) and filled (`zeros`, `randn`, ...).

Random tensors draw from an explicit `np.random.Generator` when given one, otherwise from the
default generator of saliency.autograd.rng, which `manual_seed` resets.
"""
import numpy as np

from .rng import generator as random_generator
from .rng import manual_seed  # noqa: F401  (saliency.manual_seed)
from .tensor import DEFAULT_DTYPE, Tensor, as_array


def tensor(data, dtype=None, requires_grad=False):
    """A new tensor holding a copy of `data` (floats default to float32; arrays keep their dtype)."""
    return Tensor(np.array(as_array(data, dtype), copy=True), requires_grad=requires_grad)


def as_tensor(data, dtype=None):
    """A tensor sharing memory with `data` where possible."""
    return data if isinstance(data, Tensor) and dtype is None else Tensor(data, dtype=dtype)


def from_numpy(array):
    """A tensor sharing memory with an ndarray."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy expects an np.ndarray, got {type(array).__name__}")
    return Tensor(array)


def _shape(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    return tuple(int(n) for n in size)


def _filled(fill, size, dtype, requires_grad):
    return Tensor(np.full(_shape(size), fill, dtype=np.dtype(dtype or DEFAULT_DTYPE)), requires_grad=requires_grad)


def zeros(*size, dtype=None, requires_grad=False):
    return _filled(0, size, dtype, requires_grad)


def ones(*size, dtype=None, requires_grad=False):
    return _filled(1, size, dtype, requires_grad)


def full(size, fill_value, dtype=None, requires_grad=False):
    return _filled(fill_value, (size,), dtype, requires_grad)


def randn(*size, dtype=None, requires_grad=False, generator=None):
    """Standard normal samples."""
    rng = random_generator(generator)
    data = rng.standard_normal(_shape(size)).astype(dtype or DEFAULT_DTYPE)
    return Tensor(data, requires_grad=requires_grad)


def rand(*size, dtype=None, requires_grad=False, generator=None):
    """Uniform samples in [0, 1)."""
    rng = random_generator(generator)
    data = rng.random(_shape(size)).astype(dtype or DEFAULT_DTYPE)
    return Tensor(data, requires_grad=requires_grad)


def arange(start, end=None, step=1, dtype=None, requires_grad=False):
    data = np.arange(start, end, step) if end is not None else np.arange(start)
    return Tensor(as_array(data.tolist() if dtype is None and data.dtype.kind == "f" else data, dtype),
                  requires_grad=requires_grad)


def _like(t):
    t = t if isinstance(t, Tensor) else Tensor(t)
    return t.shape, t.dtype


def zeros_like(t, dtype=None, requires_grad=False):
    shape, dt = _like(t)
    return zeros(shape, dtype=dtype or dt, requires_grad=requires_grad)


def ones_like(t, dtype=None, requires_grad=False):
    shape, dt = _like(t)
    return ones(shape, dtype=dtype or dt, requires_grad=requires_grad)


def full_like(t, fill_value, dtype=None, requires_grad=False):
    shape, dt = _like(t)
    return full(shape, fill_value, dtype=dtype or dt, requires_grad=requires_grad)


def randn_like(t, dtype=None, requires_grad=False, generator=None):
    shape, dt = _like(t)
    return randn(shape, dtype=dtype or dt, requires_grad=requires_grad, generator=generator)


def rand_like(t, dtype=None, requires_grad=False, generator=None):
    shape, dt = _like(t)
    return rand(shape, dtype=dtype or dt, requires_grad=requires_grad, generator=generator)
