"""Making tensors: from data (`tensor`, `as_tensor`, `from_numpy`) and filled (`zeros`, `randn`, ...).

Random tensors draw from an explicit `np.random.Generator` when given one, otherwise from the
default generator of saliency.autograd.rng, which `manual_seed` resets.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from .rng import generator as random_generator
from .rng import manual_seed  # noqa: F401  (saliency.manual_seed)
from .tensor import DEFAULT_DTYPE, Tensor, as_array

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

    from .._typing import Number, Size
    from .tensor import TensorLike


def tensor(data: TensorLike, dtype: DTypeLike | None = None, requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of `data` (floats default to float32; arrays keep their dtype)."""
    return Tensor(np.array(as_array(data, dtype), copy=True), requires_grad=requires_grad)


def as_tensor(data: TensorLike, dtype: DTypeLike | None = None) -> Tensor:
    """A tensor sharing memory with `data` where possible."""
    return data if isinstance(data, Tensor) and dtype is None else Tensor(data, dtype=dtype)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with an ndarray."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy expects an np.ndarray, got {type(array).__name__}")
    return Tensor(array)


def _shape(size: Sequence[Size]) -> tuple[int, ...]:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return tuple(int(n) for n in size[0])
    return tuple(int(n) for n in size)  # type: ignore[arg-type]  # ints, as PyTorch's *size


def _filled(fill: Number, size: Sequence[Size], dtype: DTypeLike | None, requires_grad: bool) -> Tensor:
    return Tensor(np.full(_shape(size), fill, dtype=np.dtype(dtype or DEFAULT_DTYPE)), requires_grad=requires_grad)


def zeros(*size: Size, dtype: DTypeLike | None = None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros of `size` (ints, or one sequence), float32 unless `dtype`; requires grad if requires_grad."""
    return _filled(0, size, dtype, requires_grad)


def ones(*size: Size, dtype: DTypeLike | None = None, requires_grad: bool = False) -> Tensor:
    """A tensor of ones of `size` (ints, or one sequence), float32 unless `dtype`; requires grad if requires_grad."""
    return _filled(1, size, dtype, requires_grad)


def full(size: Size, fill_value: Number, dtype: DTypeLike | None = None, requires_grad: bool = False) -> Tensor:
    """A tensor of `size` (an int or a sequence) filled with fill_value, float32 unless `dtype`; requires grad
    if requires_grad."""
    return _filled(fill_value, (size,), dtype, requires_grad)


def randn(*size: Size, dtype: DTypeLike | None = None, requires_grad: bool = False,
          generator: np.random.Generator | None = None) -> Tensor:
    """Standard normal samples."""
    rng = random_generator(generator)
    data = rng.standard_normal(_shape(size)).astype(dtype or DEFAULT_DTYPE)
    return Tensor(data, requires_grad=requires_grad)


def rand(*size: Size, dtype: DTypeLike | None = None, requires_grad: bool = False,
         generator: np.random.Generator | None = None) -> Tensor:
    """Uniform samples in [0, 1)."""
    rng = random_generator(generator)
    data = rng.random(_shape(size)).astype(dtype or DEFAULT_DTYPE)
    return Tensor(data, requires_grad=requires_grad)


def arange(start: Number, end: Number | None = None, step: Number = 1, dtype: DTypeLike | None = None,
           requires_grad: bool = False) -> Tensor:
    """start, start + step, ... up to but excluding end; arange(n) is 0, 1, ..., n - 1 (torch.arange). int64
    for integer arguments, float32 otherwise, unless `dtype`; requires grad if requires_grad."""
    data = np.arange(start, end, step) if end is not None else np.arange(start)
    return Tensor(as_array(data.tolist() if dtype is None and data.dtype.kind == "f" else data, dtype),
                  requires_grad=requires_grad)


def _like(t: TensorLike) -> tuple[tuple[int, ...], np.dtype]:
    t = t if isinstance(t, Tensor) else Tensor(t)
    return t.shape, t.dtype


def zeros_like(t: TensorLike, dtype: DTypeLike | None = None, requires_grad: bool = False) -> Tensor:
    """Zeros of t's shape, with t's dtype unless `dtype`; requires grad if requires_grad."""
    shape, dt = _like(t)
    return zeros(shape, dtype=dtype or dt, requires_grad=requires_grad)


def ones_like(t: TensorLike, dtype: DTypeLike | None = None, requires_grad: bool = False) -> Tensor:
    """Ones of t's shape, with t's dtype unless `dtype`; requires grad if requires_grad."""
    shape, dt = _like(t)
    return ones(shape, dtype=dtype or dt, requires_grad=requires_grad)


def full_like(t: TensorLike, fill_value: Number, dtype: DTypeLike | None = None,
              requires_grad: bool = False) -> Tensor:
    """fill_value in t's shape, with t's dtype unless `dtype`; requires grad if requires_grad."""
    shape, dt = _like(t)
    return full(shape, fill_value, dtype=dtype or dt, requires_grad=requires_grad)


def randn_like(t: TensorLike, dtype: DTypeLike | None = None, requires_grad: bool = False,
               generator: np.random.Generator | None = None) -> Tensor:
    """Standard normal samples in t's shape, with t's dtype unless `dtype`, drawn from `generator` (else
    the one manual_seed resets); requires grad if requires_grad."""
    shape, dt = _like(t)
    return randn(shape, dtype=dtype or dt, requires_grad=requires_grad, generator=generator)


def rand_like(t: TensorLike, dtype: DTypeLike | None = None, requires_grad: bool = False,
              generator: np.random.Generator | None = None) -> Tensor:
    """Uniform samples in [0, 1) in t's shape, with t's dtype unless `dtype`, drawn from `generator` (else
    the one manual_seed resets); requires grad if requires_grad."""
    shape, dt = _like(t)
    return rand(shape, dtype=dtype or dt, requires_grad=requires_grad, generator=generator)
