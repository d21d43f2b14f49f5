"""The rule-based methods' one-pass kernels against their NumPy formulas."""
import numpy as np
import pytest

from saliency.kernels import relevance as R
from saliency.kernels import threads


def stabilized(z, eps):
    return 1 / np.where(z < 0, z - eps, z + eps)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("split", [False, True], ids=["one thread", "in parts on the threads"])
def test_the_stabilized_reciprocal_is_zennits_and_finds_zeros(dtype, split, monkeypatch):
    if split:
        monkeypatch.setattr(threads, "PARALLEL_ELEMENTS", 1)
    rng = np.random.default_rng(0)
    z = rng.standard_normal((2, 3, 17, 19)).astype(dtype)
    out, zero = R.stabilized_reciprocal(z, 1e-6)
    np.testing.assert_array_equal(out, stabilized(z, dtype(1e-6)).astype(dtype))
    assert out.dtype == dtype and not zero
    z.flat[[5, 1000]] = 0.0
    z.flat[7] = -0.0
    out, zero = R.stabilized_reciprocal(z, 0.5)
    assert zero and out.flat[5] == out.flat[7] == 2.0    # sign(0) = +1, for -0.0 too
    np.testing.assert_array_equal(out, stabilized(z, dtype(0.5)).astype(dtype))
    strided = z[:, :, ::2]                                # not contiguous: NumPy's way, same values
    out, zero = R.stabilized_reciprocal(strided, 0.5)
    np.testing.assert_array_equal(out, stabilized(strided, dtype(0.5)).astype(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_value_range_is_min_and_max(dtype):
    x = np.random.default_rng(1).standard_normal((3, 4, 5)).astype(dtype)
    assert R.value_range(x) == (x.min(), x.max())
    assert R.value_range(x[:, ::2]) == (x[:, ::2].min(), x[:, ::2].max())
    assert R.value_range(np.array([2.0], dtype)) == (2.0, 2.0)
