"""Matrix products on one BLAS thread when small give NumPy's results."""
import numpy as np
import pytest

from saliency.kernels import blas


@pytest.mark.parametrize("small", [0.0, 1e12], ids=["every product on all threads", "every product on one thread"])
@pytest.mark.parametrize("a_shape,b_shape", [((5, 7), (7, 3)), ((2, 5, 7), (7, 3)), ((4, 1, 5, 7), (3, 7, 2)),
                                             ((300, 64), (64, 32))])
def test_matmul_equals_numpy(monkeypatch, small, a_shape, b_shape):
    monkeypatch.setattr(blas, "SMALL_FLOPS", small)
    rng = np.random.default_rng(0)
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    expected = np.matmul(a, b)
    np.testing.assert_allclose(blas.matmul(a, b), expected, rtol=1e-5, atol=1e-5)
    out = np.empty_like(expected)
    assert blas.matmul(a, b, out=out) is out
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_numpys_openblas_thread_setting_is_found():
    # NumPy's own wheels bundle OpenBLAS >= 0.3.27 (which has the thread-local setting) since 2.1
    if tuple(int(p) for p in np.__version__.split(".")[:2]) < (2, 1):
        pytest.skip("older NumPy wheels bundle an OpenBLAS without a thread-local setting")
    config = np.show_config(mode="dicts")
    if "openblas" not in str(config.get("Build Dependencies", {}).get("blas", {})).lower():
        pytest.skip("NumPy is not built with OpenBLAS here")
    assert blas._set_threads is not None
