"""ReLU, hardswish and GELU kernels against NumPy's formulas; SiLU, sigmoid and GELU in float32 against their
float64 values; the normal CDF against Python's math.erfc, and the float32 exp and CDF inside the kernels."""
import math

import numba
import numpy as np
import pytest

from saliency.kernels import activation as A
from saliency.kernels import threads


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2, 3, 20, 20), (5,), (1, 4, 16, 16)])
@pytest.mark.parametrize("split", [False, True], ids=["one thread", "in parts on the threads"])
def test_relu_and_its_vjp_equal_numpy(dtype, shape, split, monkeypatch):
    """Also with every batch (and every stack of seeds) split in halves over two threads."""
    if split:
        monkeypatch.setattr(threads, "PARALLEL_ELEMENTS", 1)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype)
    x.flat[::7] = 0.0
    x.flat[::11] = -0.0
    x.flat[::13] = np.nan
    x.flat[::17] = -np.inf
    out, mask = A.relu_forward(x)
    want = np.maximum(x, 0)
    np.testing.assert_array_equal(out, want)
    assert out.dtype == dtype and mask.dtype == np.bool_
    assert not np.signbit(out[~np.isnan(out)]).any(), "relu gives +0.0, never -0.0"
    np.testing.assert_array_equal(mask, ~(want <= 0))
    g = rng.standard_normal((3,) + shape).astype(dtype)
    g.flat[::5] = np.inf
    g.flat[::9] = np.nan
    with np.errstate(invalid="ignore"):  # inf * 0 in NumPy's product
        for gg in (g, g[0], g.astype(np.float64 if dtype == np.float32 else np.float32)):
            got = A.relu_grad(gg, mask)
            np.testing.assert_array_equal(got, gg * mask)
            assert got.dtype == (gg * mask).dtype


SQRT1_2 = 0.7071067811865476  # 1 / sqrt(2) correctly rounded (C's M_SQRT1_2; 1 / math.sqrt(2) is 1 ulp below)


def test_normal_cdf_is_math_erfc_in_float64():
    """Exactly 0.5 * math.erfc(-x * SQRT1_2). (The argument's rounding matters in the far tail: x / sqrt(2)
    instead moves Phi(-37) by up to 4e-13 relative, the condition of erfc there, not an error of either.)"""
    x = np.concatenate([np.linspace(-37.5, 9.0, 20001), [-0.0, 0.0, 1e-300, -1e-300, 5e-324]])  # Phi(x) normal
    want = np.array([0.5 * math.erfc(-v * SQRT1_2) for v in x])
    got = A.normal_cdf(x)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, want)
    with np.errstate(under="ignore"):
        np.testing.assert_array_equal(A.normal_cdf(np.array([np.nan, np.inf, -np.inf, -40.0])), [np.nan, 1.0, 0.0, 0.0])


def test_normal_cdf_keeps_the_dtype_and_shape():
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    got = A.normal_cdf(x)
    assert got.dtype == np.float32 and got.shape == x.shape
    want = np.array([0.5 * math.erfc(-float(v) * SQRT1_2) for v in x.ravel()]).reshape(x.shape)
    np.testing.assert_array_equal(got, want.astype(np.float32))
    assert A.normal_cdf(np.zeros((0, 3))).shape == (0, 3)
    assert A.normal_cdf(np.array([0, 1])).dtype == np.float64


def _awkward(shape, dtype, scale):
    """Random values with zeros of both signs, NaN, both infinities and the kinks -3 and 3."""
    x = (np.random.default_rng(0).standard_normal(shape) * scale).astype(dtype)
    for step, value in ((7, 0.0), (11, -0.0), (13, np.nan), (17, -np.inf), (19, np.inf), (23, -3.0), (29, 3.0)):
        x.flat[::step] = value
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("split", [False, True], ids=["one thread", "in parts on the threads"])
def test_hardswish_and_its_derivative_equal_numpys_formula(dtype, split, monkeypatch):
    if split:
        monkeypatch.setattr(threads, "PARALLEL_ELEMENTS", 1)
    x = _awkward((2, 3, 9, 9), dtype, 4.0)
    out, slope = A.hardswish(x, True)
    with np.errstate(invalid="ignore"):  # inf * 0 at +-inf, as the formula gives
        np.testing.assert_array_equal(out, x * np.minimum(np.maximum(x + 3, 0), 6) / 6)
    np.testing.assert_array_equal(slope, np.where(x <= -3, dtype(0), np.where(x < 3, x / 3 + dtype(0.5), dtype(1))))
    assert out.dtype == slope.dtype == dtype and A.hardswish(x, False)[1] is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("split", [False, True], ids=["one thread", "in parts on the threads"])
@pytest.mark.parametrize("bounds", [(0.0, 6.0), (-3.0, 3.0), (-np.inf, 1.5)])
def test_hardtanh_and_its_derivative_equal_numpys_formula(dtype, split, bounds, monkeypatch):
    """ReLU6 and hardtanh: NumPy's min(max(x, low), high) to the bit (signed zeros and NaN kept), and
    a derivative mask that is True strictly inside the bounds and at NaN, False at them and beyond."""
    if split:
        monkeypatch.setattr(threads, "PARALLEL_ELEMENTS", 1)
    low, high = bounds
    x = _awkward((2, 3, 9, 9), dtype, 4.0)
    out, mask = A.hardtanh(x, low, high)
    want = np.minimum(np.maximum(x, dtype(low)), dtype(high))
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(np.signbit(out), np.signbit(want))
    np.testing.assert_array_equal(mask, ~((x <= low) | (x >= high)))
    assert out.dtype == dtype and mask.dtype == np.bool_


@pytest.mark.parametrize("split", [False, True], ids=["one thread", "in parts on the threads"])
def test_float32_silu_and_sigmoid_are_within_a_few_ulp_of_float64_and_float64_is_unchanged(split, monkeypatch):
    """Computed in float32: SiLU and sigmoid within 4 ulp of the float64 values; SiLU's derivative
    s (1 + x (1 - s)) within 4 float32 epsilons of 1 + |x| (it cancels near x = -1.28, as PyTorch's
    float32 kernel's does)."""
    if split:
        monkeypatch.setattr(threads, "PARALLEL_ELEMENTS", 1)
    x = _awkward((3, 5, 11, 11), np.float32, 6.0)
    x64 = x.astype(np.float64)
    eps = float(np.finfo(np.float32).eps)
    for i, (got, want) in enumerate(zip(A.silu(x, True) + (A.sigmoid(x),), A.silu(x64, True) + (A.sigmoid(x64),))):
        assert got.dtype == np.float32
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        ok = np.isfinite(want)
        if i == 1:
            bound = 4 * eps * (1 + np.abs(x64[ok]))
        else:
            bound = 4 * np.spacing(np.abs(want[ok]).astype(np.float32)).astype(np.float64) + 1e-45
        assert np.all(np.abs(got[ok] - want[ok]) <= bound)
    # float64 keeps the quotients: e / (1 + e) below 0, 1 / (1 + e) above (within a few ulp: compiled
    # exp may round differently from NumPy's, by CPU; 1 - 1 / (1 + e) below 0 would be far off)
    e = np.exp(-np.abs(x64))
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(A.sigmoid(x64), np.where(x64 >= 0, 1 / (1 + e), e / (1 + e)), rtol=4e-16, atol=0)


@pytest.mark.parametrize("split", [False, True], ids=["one thread", "in parts on the threads"])
def test_float64_gelu_is_x_times_the_normal_cdf_and_its_derivative_the_formula(split, monkeypatch):
    """The value as x * normal_cdf(x), to the bit; the derivative Phi + x phi within 2 eps of the
    same formula in NumPy."""
    if split:
        monkeypatch.setattr(threads, "PARALLEL_ELEMENTS", 1)
    x = _awkward((2, 3, 9, 9), np.float64, 3.0)
    out, slope = A.gelu(x, True)
    cdf = A.normal_cdf(x)
    with np.errstate(invalid="ignore", over="ignore"):
        np.testing.assert_array_equal(out, x * cdf)
        want = cdf + x * (np.exp(-0.5 * x * x) * (1 / math.sqrt(2 * math.pi)))
    np.testing.assert_allclose(slope, want, rtol=2 * np.finfo(np.float64).eps, atol=2 * np.finfo(np.float64).eps,
                               equal_nan=True)
    assert out.dtype == slope.dtype == np.float64 and A.gelu(x, False)[1] is None


@pytest.mark.parametrize("split", [False, True], ids=["one thread", "in parts on the threads"])
def test_float32_gelu_is_within_5e_7_of_its_float64_value(split, monkeypatch):
    """Computed in float32 (no float64 libm call per element): x Phi(x) within 5e-7 relative of the
    float64 value (down to the lower tail, where x Phi(x) is below 1e-36) and 1e-45 absolute; the
    derivative within 4 float32 epsilons of 1 + |x|; NaN and infinities as in float64."""
    if split:
        monkeypatch.setattr(threads, "PARALLEL_ELEMENTS", 1)
    x = np.concatenate([_awkward((2, 3, 9, 9), np.float32, 3.0).ravel(),
                        np.linspace(-12.5, 9.0, 20001, dtype=np.float32)])
    out, slope = A.gelu(x, True)
    want, want_slope = A.gelu(x.astype(np.float64), True)
    assert out.dtype == slope.dtype == np.float32
    np.testing.assert_array_equal(np.isnan(out), np.isnan(want))
    np.testing.assert_array_equal(np.isnan(slope), np.isnan(want_slope))
    ok = np.isfinite(want)
    np.testing.assert_array_equal(out[~ok & ~np.isnan(want)], want[~ok & ~np.isnan(want)])
    assert np.all(np.abs(out[ok] - want[ok]) <= 5e-7 * np.abs(want[ok]) + 1e-45)
    ok = np.isfinite(want_slope)
    assert np.all(np.abs(slope[ok] - want_slope[ok]) <= 4 * np.finfo(np.float32).eps * (1 + np.abs(x[ok])))


@A.njit()
def _exp_and_phi(x, e, p):
    for i in range(x.shape[0]):
        e[i] = A.exp(x[i])
        p[i] = A.phi(x[i])


def test_float32_exp_is_within_an_ulp_and_phi_within_5e_7_relative():
    """The float32 exp inside the kernels: within an ulp of the correctly rounded value over its
    whole range, subnormal results included, 0 and inf beyond it, NaN for NaN; the normal CDF within
    5e-7 relative down to float32's smallest normal."""
    if numba.config.DISABLE_JIT:
        pytest.skip("with NUMBA_DISABLE_JIT, exp and phi are NumPy's and Python's")
    x = np.concatenate([np.linspace(-106, 90, 400001), [0.0, -0.0, np.inf, -np.inf, np.nan]]).astype(np.float32)
    e, p = np.empty_like(x), np.empty_like(x)
    _exp_and_phi(x, e, p)
    with np.errstate(over="ignore"):
        want = np.exp(x.astype(np.float64))
        rounded = want.astype(np.float32)
    finite = np.isfinite(rounded)
    ulp = np.spacing(np.abs(rounded[finite])).astype(np.float64)
    assert np.all(np.abs(e[finite] - want[finite]) <= ulp)
    np.testing.assert_array_equal(e[~finite], rounded[~finite])
    assert e[x < -104].max() == 0 and np.isnan(e[-1])
    want = np.array([0.5 * math.erfc(-float(v) / math.sqrt(2)) for v in x])
    ok = want > np.finfo(np.float32).tiny
    assert np.all(np.abs(p[ok] - want[ok]) <= 5e-7 * want[ok])
    assert np.isnan(p[-1]) and p[x == np.inf][0] == 1 and p[x == -np.inf][0] == 0
