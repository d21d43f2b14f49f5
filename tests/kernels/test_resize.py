"""Upsampling kernels against the NumPy reference, finite differences and torch."""
import numpy as np
import pytest

from saliency.kernels import resize as R

from . import _reference as ref

SHAPES = [(2, 3, 5, 7), (1, 1, 1, 4), (1, 2, 4, 4)]
SCALES = [1, 2, 3]
TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-12)}


def data(shape, dtype, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("s", SCALES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_forward_matches_reference(shape, s, dtype):
    x = data(shape, dtype, 0)
    np.testing.assert_array_equal(R.upsample_nearest2d_forward(x, s), ref.upsample_nearest(x, s))
    y = R.upsample_bilinear2d_forward(x, s)
    assert y.dtype == dtype
    np.testing.assert_allclose(y, ref.upsample_bilinear(x, s), **TOL[dtype])


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("s", SCALES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_vjps_match_reference(shape, s, dtype):
    x = data(shape, dtype, 1)
    g = data(shape[:2] + (shape[2] * s, shape[3] * s), dtype, 2)
    dn = R.upsample_nearest2d_grad_input(g, shape, s)
    np.testing.assert_allclose(dn, g.reshape(shape[:2] + (shape[2], s, shape[3], s)).sum(axis=(3, 5)), **TOL[dtype])
    Ah, Aw = ref.bilinear_matrix(shape[2], s), ref.bilinear_matrix(shape[3], s)
    np.testing.assert_allclose(R.upsample_bilinear2d_grad_input(g, x.shape, s),
                               np.einsum("ih,ncij,jw->nchw", Ah, g, Aw), **TOL[dtype])


@pytest.mark.parametrize("s", [2, 3])
def test_vjps_satisfy_directional_finite_differences(s):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 2, 5, 4))
    ref.check_vjp(lambda x_: R.upsample_nearest2d_forward(x_, s),
                  lambda v: R.upsample_nearest2d_grad_input(v, x.shape, s), x, rng)
    ref.check_vjp(lambda x_: R.upsample_bilinear2d_forward(x_, s),
                  lambda v: R.upsample_bilinear2d_grad_input(v, x.shape, s), x, rng)


def test_seed_dimensions_equal_per_seed_calls():
    x_shape = (2, 3, 4, 5)
    g = data((3, 2, 3, 8, 10), np.float64, 4)
    for vjp in (R.upsample_nearest2d_grad_input, R.upsample_bilinear2d_grad_input):
        d = vjp(g, x_shape, 2)
        assert d.shape == (3,) + x_shape
        for i in range(3):
            np.testing.assert_allclose(d[i], vjp(g[i], x_shape, 2), rtol=0, atol=0)


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
@pytest.mark.parametrize("s", [2, 3])
def test_matches_torch(mode, s):
    torch = pytest.importorskip("torch")
    x = data((2, 3, 5, 7), np.float32, 5)
    xt = torch.tensor(x, requires_grad=True)
    kw = {} if mode == "nearest" else {"align_corners": False}
    yt = torch.nn.functional.interpolate(xt, scale_factor=s, mode=mode, **kw)
    g = data(tuple(yt.shape), np.float32, 6)
    yt.backward(torch.tensor(g))
    fwd, bwd = ((R.upsample_nearest2d_forward, R.upsample_nearest2d_grad_input) if mode == "nearest"
                else (R.upsample_bilinear2d_forward, R.upsample_bilinear2d_grad_input))
    np.testing.assert_allclose(fwd(x, s), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bwd(g, x.shape, s), xt.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_bad_scale_factor_raises():
    with pytest.raises(ValueError, match="integer >= 1"):
        R.upsample_bilinear2d_forward(np.zeros((1, 1, 2, 2)), 1.5)


def table_matrix(table, size):
    """The (outputs, size) matrix of a resampling table: row r holds l0[r] at i0[r] and l1[r] at i1[r]."""
    i0, i1, l0, l1 = table
    A = np.zeros((len(i0), size))
    np.add.at(A, (np.arange(len(i0)), i0), l0)
    np.add.at(A, (np.arange(len(i1)), i1), l1)
    return A


@pytest.mark.parametrize("size_in, size_out", [((64, 48), (128, 96)), ((97, 80), (31, 45)), ((9, 12), (40, 7))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_resample_any_size_and_its_vjp_match_dense_matrices(size_in, size_out, dtype):
    # The first case has outputs large enough to run in halves of the planes on two threads; the
    # others shrink an axis, so some input rows are never read.
    x = data((2, 5) + size_in, dtype, 7)
    rows = R.resize_table(size_in[0], size_out[0], "bilinear", dtype=dtype)
    cols = R.resize_table(size_in[1], size_out[1], "bilinear", dtype=dtype)
    Ah, Aw = table_matrix(rows, size_in[0]), table_matrix(cols, size_in[1])
    y = R.resample2d_forward(x, rows, cols)
    np.testing.assert_allclose(y, np.einsum("hi,ncij,wj->nchw", Ah, x, Aw), **TOL[dtype])
    g = data((3, 2, 5) + size_out, dtype, 8)
    np.testing.assert_allclose(R.resample2d_grad_input(g, x.shape, rows, cols),
                               np.einsum("hi,sncij,jw->snchw", Ah.T, g, Aw), **TOL[dtype])


def test_large_upsampling_split_over_two_threads_matches_reference():
    x = data((2, 8, 64, 64), np.float32, 9)
    g = data((2, 8, 128, 128), np.float32, 10)
    np.testing.assert_allclose(R.upsample_bilinear2d_forward(x, 2), ref.upsample_bilinear(x, 2), **TOL[np.float32])
    A = ref.bilinear_matrix(64, 2)
    np.testing.assert_allclose(R.upsample_bilinear2d_grad_input(g, x.shape, 2), np.einsum("ih,ncij,jw->nchw", A, g, A),
                               rtol=1e-5, atol=1e-5)
