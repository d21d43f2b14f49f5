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
