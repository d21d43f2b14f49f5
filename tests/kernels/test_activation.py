"""ReLU kernels against NumPy's three-pass formulation."""
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
