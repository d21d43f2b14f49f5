"""ReLU and its VJP in one pass each (NumPy needs three passes for the forward, and its
float-times-bool product casts through a buffer); sigmoid, SiLU, hardswish and GELU with their
derivatives in one pass each (NumPy needs about eight), in the input's float dtype, large arrays
in parts on the kernels' threads (`threads.run`); the standard normal CDF that GELU needs (NumPy
has no erf).

relu_forward(x) -> (max(x, 0) with NaN kept, mask = not (x <= 0)); relu_grad(g, mask) = g * mask
with g's optional leading seed dimensions, exactly NumPy's `g * mask` (NaN or inf in g at an
inactive unit gives NaN, a negative g gives -0.0). Both fall back to NumPy for anything but
C-contiguous float32/float64 arrays whose trailing shape is the mask's.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
from llvmlite import ir
from numba import prange, types
from numba.extending import intrinsic, overload

from ._jit import njit

from . import layout, threads

if TYPE_CHECKING:
    from numba.core.typing import Signature
    from numpy.typing import ArrayLike, NDArray

    from .._typing import BoolArray, FloatArray


@njit(cache=True, nogil=True)
def _relu(x: FloatArray, out: FloatArray, mask: NDArray[np.uint8], lo: int, hi: int) -> None:
    x, out, mask = x[lo:hi], out[lo:hi], mask[lo:hi]
    for i in range(x.shape[0]):
        v = x[i]
        on = not (v <= 0)  # True for NaN: NaN passes through, as np.maximum
        mask[i] = on
        out[i] = v if on else 0


@njit(cache=True, nogil=True, parallel=True)
def _relu_parallel(x: FloatArray, out: FloatArray, mask: NDArray[np.uint8], n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _relu(x, out, mask, lo, hi)


@njit(cache=True, nogil=True)
def _relu_grad(g: FloatArray, mask: NDArray[np.uint8], out: FloatArray, lo: int, hi: int) -> None:
    """out[k, i] = g[k, i] * mask[i] (seeds in k) for the elements i in [lo, hi)."""
    mask = mask[lo:hi]
    for k in range(g.shape[0]):
        gr = g[k, lo:hi]
        orow = out[k, lo:hi]
        for i in range(mask.shape[0]):
            orow[i] = gr[i] * mask[i]


@njit(cache=True, nogil=True, parallel=True)
def _relu_grad_parallel(g: FloatArray, mask: NDArray[np.uint8], out: FloatArray, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _relu_grad(g, mask, out, lo, hi)


def relu_forward(x: FloatArray) -> tuple[FloatArray, BoolArray]:
    """(max(x, 0), boolean mask of not (x <= 0)), both in x's memory format; NaN stays NaN and its
    mask is True."""
    order = layout.dense_order(x) if type(x) is np.ndarray else None
    if order is not None and x.dtype in (np.float32, np.float64) and x.size >= 1024:
        out, mask = np.empty_like(x), np.empty_like(x, np.bool_)
        xf, of, mf = layout.flat(x, order), layout.flat(out, order), layout.flat(mask, order).view(np.uint8)
        threads.run(_relu, _relu_parallel, xf.size, xf.size, xf, of, mf)
        return out, mask
    out = np.maximum(x, 0)
    return out, ~(out <= 0)


def relu_grad(g: FloatArray, mask: BoolArray) -> FloatArray:
    """g * mask, g of shape (*seeds, *mask.shape), in g's memory format."""
    if (type(g) is np.ndarray and g.dtype in (np.float32, np.float64) and mask.size >= 1024
            and g.shape[g.ndim - mask.ndim:] == mask.shape and _seeds_over(g, mask)):
        out = np.empty_like(g)
        g2, m, o2 = _flat(g).reshape(-1, mask.size), _flat(mask).view(np.uint8), _flat(out).reshape(-1, mask.size)
        threads.run(_relu_grad, _relu_grad_parallel, m.size, g.size, g2, m, o2)  # parts of the elements
        return out
    return g * mask


def _seeds_over(g: NDArray[Any], mask: NDArray[Any]) -> bool:
    """Whether g (*seeds, *mask.shape) is, in memory, seed after seed of mask's memory format."""
    lead, order = g.ndim - mask.ndim, layout.dense_order(mask)
    return order is not None and layout.dense_order(g) == tuple(range(lead)) + tuple(lead + i for i in order)


_SQRT1_2 = 0.7071067811865476  # 1 / sqrt(2), correctly rounded (C's M_SQRT1_2)


@njit(cache=True, nogil=True)
def _normal_cdf(x: FloatArray, out: FloatArray) -> None:
    for i in range(x.shape[0]):
        out[i] = 0.5 * math.erfc(-float(x[i]) * _SQRT1_2)


def normal_cdf(x: ArrayLike) -> FloatArray:
    """Phi(x) = P(Z <= x) for a standard normal Z, elementwise, in x's float dtype (float64 for any
    other dtype): 0.5 * erfc(-x * (1 / sqrt 2)), evaluated in float64 with Numba's math.erfc (the
    same values as Python's math.erfc). The erfc form keeps full relative precision in the lower
    tail, where 0.5 * (1 + erf(x / sqrt 2)) would cancel. NaN gives NaN, -inf 0 and inf 1."""
    x = _float_flat(x)
    out = np.empty_like(x)
    if x.size:
        _normal_cdf(_flat(x), _flat(out))
    return out


# ---- exp and erfc of float32 values in float32, in code LLVM vectorizes --------------------------
# Numba compiles np.exp and math.erfc to scalar calls of the C library (4 and 15 ns an element here,
# whatever the dtype); these are polynomials, selects and a bit cast, 8 or 16 lanes at a time. Inside
# a kernel, `exp(a)` and `phi(v)` are them for float32 values and the C library's for float64
# (PyTorch's float64 values to the last bit); outside compiled code (NUMBA_DISABLE_JIT) they are
# NumPy's and Python's.

@intrinsic
def _float32_from_bits(typingctx: Any, bits: types.Type) -> tuple[Signature, Callable[..., ir.Value]] | None:
    """The float32 whose IEEE 754 bits are the low 32 bits of the integer `bits`."""
    if not isinstance(bits, types.Integer):
        return None

    def codegen(context: Any, builder: ir.IRBuilder, signature: Any, args: Sequence[ir.Value]) -> ir.Value:
        wide = bits.bitwidth > 32  # type: ignore[attr-defined]  # numba's stubs omit it
        low = builder.trunc(args[0], ir.IntType(32)) if wide else args[0]
        return builder.bitcast(low, ir.FloatType())
    return types.float32(bits), codegen


def exp(a: float) -> float:
    """e ** a."""
    return np.exp(a)


def phi(v: float) -> float:
    """The standard normal CDF at v: erfc(-v / sqrt 2) / 2."""
    return 0.5 * math.erfc(-float(v) * _SQRT1_2)


_F = np.float32


@njit(inline="always")
def _exp32(a):  # type: ignore[no-untyped-def]  # `exp`'s overload returns it: Numba compares their parameters
    """e ** a for a float32 `a`, within an ulp (subnormal results included; 0 and inf beyond them),
    NaN for NaN: a = n ln 2 + r with |r| <= ln 2 / 2 (ln 2 in two parts, so that n ln 2 is
    exact), e ** r by a degree-7 polynomial (Cephes' expf), times 2 ** n built from its bits in two
    factors (each a normal float32, so that a subnormal result is rounded once)."""
    a = max(min(a, _F(89.0)), _F(-105.0))  # e ** a is inf above, 0 below; NaN stays NaN
    n = np.floor(a * _F(1.4426950408889634) + _F(0.5))
    r = (a - n * _F(0.693359375)) - n * _F(-2.12194440e-4)
    p = _F(1.9875691500e-4)
    p = p * r + _F(1.3981999507e-3)
    p = p * r + _F(8.3334519073e-3)
    p = p * r + _F(4.1665795894e-2)
    p = p * r + _F(1.6666665459e-1)
    p = p * r + _F(5.0000001201e-1)
    p = p * r * r + r + _F(1.0)
    k = np.int32(max(min(n, _F(128.0)), _F(-152.0)))
    k1 = max(min(k, 127), -126)
    # min and max, never conditionals: Numba's inliner trips on those, and the loop stays vectorized
    return p * _float32_from_bits((k1 + 127) << 23) * _float32_from_bits((k - k1 + 127) << 23) + (a - a)


def _phi32(v):  # type: ignore[no-untyped-def]  # as _exp32, for `phi`
    """The standard normal CDF at a float32 v: erfc(|v| / sqrt 2) / 2 below 0, 1 minus it above,
    within 4e-7 relative while above float32's smallest normal (v > -13). erfc(|v| / sqrt 2) is
    t exp(P(t) - v^2 / 2) with t = 1 / (1 + |v| / (2 sqrt 2)) and the degree-9 P of Numerical
    Recipes' erfcc (relative error below 1.2e-7 as a real formula). v^2 / 2 is exact in float64 and
    the exponent is rounded to float32 once, its remainder d applied as (1 + d): a float32 exponent
    alone would lose |v^2 / 2| ulps, 3e-5 relative at v = -13. NaN for NaN."""
    t = _F(1.0) / (_F(1.0) + abs(v) * _F(0.5 * _SQRT1_2))
    p = _F(0.17087277)
    p = p * t + _F(-0.82215223)
    p = p * t + _F(1.48851587)
    p = p * t + _F(-1.13520398)
    p = p * t + _F(0.27886807)
    p = p * t + _F(-0.18628806)
    p = p * t + _F(0.09678418)
    p = p * t + _F(0.37409196)
    p = p * t + _F(1.00002368)
    p = p * t + _F(-1.26551223)
    w = np.float64(v)
    a64 = max(np.float64(p) - 0.5 * w * w, -300.0)  # finite (its remainder below is not NaN at +-inf)
    a = _F(a64)
    h = _F(0.5) * t * _exp32(a) * (_F(1.0) + _F(a64 - np.float64(a)))
    # h below 0, 1 - h above: a sum with one zero term (exact), since a conditional expression
    # here trips Numba's inliner
    below = _F(v < _F(0.0))
    return below * h + (_F(1.0) - below) * (_F(1.0) - h)


@overload(exp, inline="always")
def _exp_compiled(a):  # type: ignore[no-untyped-def]  # Numba compares its parameters with the implementation's
    if a == types.float32:
        return _exp32.py_func
    return lambda a: np.exp(a)


@overload(phi, inline="always")
def _phi_compiled(v):  # type: ignore[no-untyped-def]  # as _exp_compiled
    if v == types.float32:
        return _phi32
    return lambda v: 0.5 * math.erfc(-float(v) * _SQRT1_2)


# sigmoid and SiLU compute in x's dtype (`one` is 1 in it), as PyTorch's kernels do: no float64
# detour for float32 activations. `fast` (float32) divides once and multiplies, e / (1 + e) as
# e * (1 / (1 + e)), within an ulp of the quotient and about 1.5 times the rate of two guarded
# divisions; float64 keeps the quotients, PyTorch's values to the last bit.
@njit(cache=True, nogil=True)
def _sigmoid(x: FloatArray, out: FloatArray, fast: bool, lo: int, hi: int) -> None:
    one = np.ones(1, x.dtype)[0]
    x, out = x[lo:hi], out[lo:hi]
    for i in range(x.shape[0]):
        v = x[i]
        e = exp(-abs(v))  # exp of -|x| never overflows: for x < 0, sigmoid(x) = e^x / (1 + e^x)
        if fast:
            r = one / (one + e)
            out[i] = r if v >= 0 else e * r
        else:
            out[i] = one / (one + e) if v >= 0 else e / (one + e)


@njit(cache=True, nogil=True, parallel=True)
def _sigmoid_parallel(x: FloatArray, out: FloatArray, fast: bool, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _sigmoid(x, out, fast, lo, hi)


@njit(cache=True, nogil=True)
def _silu(x: FloatArray, out: FloatArray, slope: FloatArray, grad: bool, fast: bool, lo: int, hi: int) -> None:
    one = np.ones(1, x.dtype)[0]
    x, out, slope = x[lo:hi], out[lo:hi], slope[lo:hi]
    for i in range(x.shape[0]):
        v = x[i]
        e = exp(-abs(v))
        if fast:
            r = one / (one + e)
            s = r if v >= 0 else e * r
        else:
            s = one / (one + e) if v >= 0 else e / (one + e)
        out[i] = v * s
        if grad:
            slope[i] = s * (one + v * (one - s))


@njit(cache=True, nogil=True, parallel=True)
def _silu_parallel(x: FloatArray, out: FloatArray, slope: FloatArray, grad: bool, fast: bool, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _silu(x, out, slope, grad, fast, lo, hi)


def _float_flat(x: ArrayLike) -> FloatArray:
    """x as a float32 or float64 array (float64 for any other dtype) whose elements fill one block of
    memory: as it is when it does (contiguous, channels-last), else a contiguous copy."""
    x = np.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        return np.ascontiguousarray(x, np.float64)
    return x if layout.dense_order(x) is not None else np.ascontiguousarray(x)


def _flat(a: NDArray[Any]) -> NDArray[Any]:
    """The elements of an array from `_float_flat` (or `np.empty_like` of one) in memory order:
    arrays of one memory format list the same positions in the same order."""
    return layout.flat(a, layout.dense_order(a))


def sigmoid(x: ArrayLike) -> FloatArray:
    """1 / (1 + exp(-x)) elementwise in x's float dtype (float64 for any other dtype), evaluated in
    that dtype without overflow (exp of -|x| only). NaN gives NaN, -inf 0 and inf 1."""
    x = _float_flat(x)
    out = np.empty_like(x)
    xf = _flat(x)
    threads.run(_sigmoid, _sigmoid_parallel, xf.size, xf.size, xf, _flat(out), x.dtype == np.float32)
    return out


def _with_slope(kernel: Callable[..., object], parallel: Callable[..., object], x: FloatArray, grad: bool,
                *args: Any) -> tuple[FloatArray, FloatArray | None]:
    """(out, slope or None) of kernel(x, out, slope, grad, *args, lo, hi) over `x` flattened
    (from `_float_flat`), in parts on the kernels' threads when large (`threads.run`); out and slope
    in x's memory format."""
    out = np.empty_like(x)
    slope = np.empty_like(x) if grad else np.empty(0, x.dtype)
    xf = _flat(x)
    threads.run(kernel, parallel, xf.size, xf.size, xf, _flat(out), _flat(slope), grad, *args)
    return out, (slope if grad else None)


def silu(x: ArrayLike, grad: bool) -> tuple[FloatArray, FloatArray | None]:
    """(x * sigmoid(x), its derivative s (1 + x (1 - s)) or None when `grad` is false), in one pass,
    evaluated in x's float dtype. NaN gives NaN; at -inf the value is NaN
    (-inf * 0), as the formula gives in NumPy and PyTorch."""
    x = _float_flat(x)
    return _with_slope(_silu, _silu_parallel, x, grad, x.dtype == np.float32)


@njit(cache=True, nogil=True)
def _hardswish(x: FloatArray, out: FloatArray, slope: FloatArray, grad: bool, lo: int, hi: int) -> None:
    one = np.ones(1, x.dtype)[0]
    zero = one - one
    three = one + one + one  # constants in x's dtype (an int times a float32 would be a float64)
    six, half = three + three, one / (one + one)
    x, out, slope = x[lo:hi], out[lo:hi], slope[lo:hi]
    for i in range(x.shape[0]):
        v = x[i]
        m = v + three          # min(max(x + 3, 0), 6), NaN kept as np.maximum and np.minimum keep it
        if m < zero:
            m = zero
        elif m > six:
            m = six
        out[i] = v * m / six
        if grad:
            slope[i] = zero if v <= -three else (v / three + half if v < three else one)


@njit(cache=True, nogil=True, parallel=True)
def _hardswish_parallel(x: FloatArray, out: FloatArray, slope: FloatArray, grad: bool, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _hardswish(x, out, slope, grad, lo, hi)


def hardswish(x: ArrayLike, grad: bool) -> tuple[FloatArray, FloatArray | None]:
    """(x * min(max(x + 3, 0), 6) / 6, its derivative (0 for x <= -3, x / 3 + 1/2 below 3, else 1,
    NaN included) or None), one pass over a float32 or float64 array in its dtype, the same values
    as NumPy's expression of the formula."""
    return _with_slope(_hardswish, _hardswish_parallel, _float_flat(x), grad)


@njit(cache=True, nogil=True)
def _hardtanh(x: FloatArray, out: FloatArray, mask: NDArray[np.uint8], low: np.floating, high: np.floating, lo: int,
              hi: int) -> None:
    x, out, mask = x[lo:hi], out[lo:hi], mask[lo:hi]
    for i in range(x.shape[0]):
        v = x[i]
        m = low if v <= low else v  # np.maximum(x, low): low at a tie (so -0.0 becomes 0.0), NaN kept
        out[i] = high if m >= high else m  # np.minimum(m, high)
        mask[i] = not ((v <= low) | (v >= high))


@njit(cache=True, nogil=True, parallel=True)
def _hardtanh_parallel(x: FloatArray, out: FloatArray, mask: NDArray[np.uint8], low: np.floating, high: np.floating,
                       n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _hardtanh(x, out, mask, low, high, lo, hi)


def hardtanh(x: ArrayLike, low: float, high: float) -> tuple[FloatArray, BoolArray]:
    """(min(max(x, low), high), its derivative as a boolean mask: True strictly inside (low, high)
    and at NaN), one pass over a float32 or float64 array in its dtype and memory format, NumPy's
    values; `relu_grad` is the VJP."""
    x = _float_flat(x)
    out, mask = np.empty_like(x), np.empty_like(x, np.bool_)
    xf = _flat(x)
    threads.run(_hardtanh, _hardtanh_parallel, xf.size, xf.size, xf, _flat(out), _flat(mask).view(np.uint8),
                x.dtype.type(low), x.dtype.type(high))
    return out, mask


INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)  # the standard normal density at 0


@njit(cache=True, nogil=True)
def _gelu(x: FloatArray, out: FloatArray, slope: FloatArray, grad: bool, lo: int, hi: int) -> None:
    cell = np.empty(1, x.dtype)  # rounds a float64 value to x's dtype
    cell[0] = INV_SQRT_2PI
    density = cell[0]
    one = np.ones(1, x.dtype)[0]
    half = one / (one + one)
    x, out, slope = x[lo:hi], out[lo:hi], slope[lo:hi]
    for i in range(x.shape[0]):
        v = x[i]
        c = phi(v)
        out[i] = v * c
        if grad:
            slope[i] = c + v * (exp(-half * v * v) * density)


@njit(cache=True, nogil=True, parallel=True)
def _gelu_parallel(x: FloatArray, out: FloatArray, slope: FloatArray, grad: bool, n: int, k: int) -> None:
    for t in prange(k):
        lo, hi = threads.part(n, t, k)
        _gelu(x, out, slope, grad, lo, hi)


def gelu(x: ArrayLike, grad: bool) -> tuple[FloatArray, FloatArray | None]:
    """(x * Phi(x), its derivative Phi(x) + x phi(x) or None) for a float32 or float64 array, in one
    pass in x's dtype: float64 with the C library's erfc and exp (Phi as `normal_cdf`), float32
    with `_phi32` and `_exp32` (within 5e-7 relative of the float64 values)."""
    return _with_slope(_gelu, _gelu_parallel, _float_flat(x), grad)
