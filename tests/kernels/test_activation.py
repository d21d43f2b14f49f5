"""ReLU kernels against NumPy's three-pass formulation; the normal CDF against Python's math.erfc."""
import math

import numpy as np
import pytest

from saliency.kernels import activation as A
from saliency.kernels import threads


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2, 3, 20, 20), (5,), (1, 4, 16, 16)])
@pytest.mark.parametrize("split", [False, True], ids=["one thread", "halves on two threads"])
def test_relu_and_its_vjp_equal_numpy(dtype, shape, split, monkeypatch):
    """Also with every batch (and every stack of seeds) split in halves over two threads."""
    if split:
        monkeypatch.setattr(threads, "SPLIT_ELEMENTS", 1)
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
