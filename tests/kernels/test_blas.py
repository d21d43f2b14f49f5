"""Matrix products on one BLAS thread (in parts on the kernels' threads or not) give NumPy's results,
and leave the process's BLAS thread count as they found it, whichever threads ran them."""
import threading

import numpy as np
import pytest

from saliency.kernels import blas, threads

needs_setter = pytest.mark.skipif(blas._set_threads is None, reason="no OpenBLAS thread setting found")


def _threads_now():
    """The process's BLAS thread count (setting a count returns the one before)."""
    count = blas._set_threads(1)
    blas._set_threads(count)
    return count


@pytest.mark.parametrize("split", [False, True], ids=["one thread", "in parts on the threads"])
@pytest.mark.parametrize("a_shape,b_shape", [((5, 7), (7, 3)), ((2, 5, 7), (7, 3)), ((4, 1, 5, 7), (3, 7, 2)),
                                             ((300, 64), (64, 32)), ((1, 64), (64, 300)), ((7,), (7, 3)),
                                             ((5, 7), (7,)), ((3, 5, 7), (3, 7, 4)), ((2, 3, 2, 5, 7), (3, 1, 7, 4)),
                                             ((5, 0), (0, 3)), ((0, 5), (5, 3))])
def test_matmul_equals_the_sum_of_products(monkeypatch, split, a_shape, b_shape):
    """blas.matmul (one BLAS thread) and threads.matmul (by products, or by rows or columns of each
    when there are fewer products than threads, in parts when split) give np.matmul's result,
    broadcast batches, empty contractions and vectors included, into a new array or into `out`
    (a strided `out` too)."""
    monkeypatch.setattr(threads, "PARALLEL_FLOPS", 0 if split else 1e30)
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        a = rng.standard_normal(a_shape).astype(dtype)
        b = rng.standard_normal(b_shape).astype(dtype)
        expected = np.matmul(a.astype(np.float64), b.astype(np.float64))
        for matmul in (blas.matmul, threads.matmul):
            np.testing.assert_allclose(matmul(a, b), expected, rtol=1e-5, atol=1e-5)
            out = np.empty(expected.shape, dtype)
            assert matmul(a, b, out=out) is out
            np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
            if expected.ndim:
                wide = np.zeros(expected.shape[:-1] + (2 * expected.shape[-1],), dtype)
                matmul(a, b, out=wide[..., ::2])
                np.testing.assert_allclose(wide[..., ::2], expected, rtol=1e-5, atol=1e-5)
                assert not wide[..., 1::2].any()


@needs_setter
def test_products_leave_the_blas_thread_count_as_they_found_it(monkeypatch):
    """In parts or not, the products run inside one-thread sections that restore the count after."""
    before = _threads_now()
    blas._set_threads(2)
    try:
        for flops in (0, 1e30):
            monkeypatch.setattr(threads, "PARALLEL_FLOPS", flops)
            threads.matmul(np.ones((64, 64), np.float32), np.ones((64, 64), np.float32))
            assert _threads_now() == 2
    finally:
        blas._set_threads(before)


def test_numpys_openblas_thread_setting_is_found():
    # NumPy's own wheels bundle OpenBLAS >= 0.3.27 (which has the thread-local setting) since 2.1
    if tuple(int(p) for p in np.__version__.split(".")[:2]) < (2, 1):
        pytest.skip("older NumPy wheels bundle an OpenBLAS without a thread-local setting")
    config = np.show_config(mode="dicts")
    if "openblas" not in str(config.get("Build Dependencies", {}).get("blas", {})).lower():
        pytest.skip("NumPy is not built with OpenBLAS here")
    assert blas._set_threads is not None


@needs_setter
def test_sections_of_many_threads_restore_the_count_in_force_before():
    before = _threads_now()
    blas._set_threads(2)
    try:
        barrier = threading.Barrier(4)
        inside = []

        def work():
            barrier.wait()
            for _ in range(300):
                with blas.one_thread():
                    inside.append(_threads_now())
                blas.matmul(np.ones((8, 8), np.float32), np.ones((8, 8), np.float32))

        workers = [threading.Thread(target=work) for _ in range(4)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
        assert set(inside) == {1}
        assert _threads_now() == 2
    finally:
        blas._set_threads(before)


@pytest.mark.parametrize("route", ["native", "cblas", "numpy"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gemm_accumulates_on_strided_and_transposed_views(monkeypatch, route, dtype):
    """c = a @ b + beta*c on views of larger buffers (a shifted window, a transposed matrix, rows of
    a wider output), against float64 sums; the views' buffers outside them stay untouched. Through
    the compiled kernels' binding (native_gemm), NumPy's cblas from Python, and NumPy."""
    if route == "native" and not blas.NATIVE_GEMM or route == "cblas" and not blas.IN_PLACE_GEMM:
        pytest.skip("NumPy's cblas gemm not found")
    if route == "numpy":
        monkeypatch.setattr(blas, "_gemm", {})
    product = blas.native_gemm if route == "native" else blas.gemm
    rng = np.random.default_rng(3)
    big = rng.standard_normal((7, 40)).astype(dtype)
    at = rng.standard_normal((7, 5)).astype(dtype)
    out = rng.standard_normal((5, 30)).astype(dtype)
    before = out.copy()
    a, b, c = at.T, big[:, 9:21], out[:, 4:16]  # a transposed, b a window with row stride 40, c rows of 30
    want = a.astype(np.float64) @ b.astype(np.float64) + 0.5 * before[:, 4:16]
    product(a, b, c, 0.5)
    np.testing.assert_allclose(out[:, 4:16], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out[:, :4], before[:, :4])
    np.testing.assert_array_equal(out[:, 16:], before[:, 16:])
    product(a, b, c, 0.0)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not blas.NATIVE_GEMM, reason="NumPy's ILP64 cblas gemm not found")
@pytest.mark.parametrize("m,k,n", [(1, 7, 3), (5, 1, 6), (4, 6, 1), (1, 1, 1), (3, 4, 5)])
@pytest.mark.parametrize("a_transposed", [False, True])
@pytest.mark.parametrize("b_transposed", [False, True])
def test_native_gemm_reads_single_rows_and_columns_either_way(m, k, n, a_transposed, b_transposed):
    """Matrices of one row or one column (whose stride along that axis says nothing about their
    layout), stored as they are or transposed, give the product."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((k, m)).astype(np.float32).T if a_transposed else rng.standard_normal((m, k)).astype(
        np.float32)
    b = rng.standard_normal((n, k)).astype(np.float32).T if b_transposed else rng.standard_normal((k, n)).astype(
        np.float32)
    c = np.full((m, n), np.nan, np.float32)
    blas.native_gemm(a, b, c, 0.0)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-5)
