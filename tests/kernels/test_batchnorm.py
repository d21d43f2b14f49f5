"""Batch norm kernels against NumPy formulas, finite differences and torch."""
import numpy as np
import pytest

from saliency.kernels import batchnorm as B

from . import _reference as ref

SHAPES = [(4, 3, 5, 7), (1, 2, 3, 3), (3, 1, 1, 1)]


def params(C, dtype, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(C).astype(dtype), rng.standard_normal(C).astype(dtype),
            rng.standard_normal(C) * 0.5, rng.uniform(0.5, 2.0, C))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_forward_matches_formula(shape, dtype):
    x = (np.random.default_rng(0).standard_normal(shape) * 3 + 1).astype(dtype)
    w, b, rm, rv = params(shape[1], dtype, 1)
    mean, var = B.batch_norm_stats(x)
    np.testing.assert_allclose(mean, x.astype(np.float64).mean(axis=(0, 2, 3)), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(var, x.astype(np.float64).var(axis=(0, 2, 3)), rtol=1e-5, atol=1e-6)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    y = B.batch_norm_forward(x, mean, var, w, b, 1e-5)
    assert y.dtype == dtype
    np.testing.assert_allclose(y, ref.batch_norm_train(x.astype(np.float64), w, b, 1e-5), **tol)
    ye = B.batch_norm_forward(x, rm, rv, w, b, 1e-5)
    expect = w.reshape(1, -1, 1, 1) * (x - rm.reshape(1, -1, 1, 1)) / np.sqrt(rv.reshape(1, -1, 1, 1) + 1e-5)
    np.testing.assert_allclose(ye, expect + b.reshape(1, -1, 1, 1), **tol)


@pytest.mark.parametrize("shape", SHAPES[:2])
def test_vjps_satisfy_directional_finite_differences(shape):
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape)
    w, b, rm, rv = params(shape[1], np.float64, 3)

    def train(x_, w_=w, b_=b):
        return B.batch_norm_forward(x_, *B.batch_norm_stats(x_), w_, b_, 1e-5)

    mean, var = B.batch_norm_stats(x)
    ref.check_vjp(train, lambda v: B.batch_norm_grad_train(v, x, mean, var, w)[0], x, rng, rtol=1e-5)
    ref.check_vjp(lambda w_: train(x, w_), lambda v: B.batch_norm_grad_train(v, x, mean, var, w)[1], w, rng)
    ref.check_vjp(lambda b_: train(x, w, b_), lambda v: B.batch_norm_grad_train(v, x, mean, var, w)[2], b, rng)
    evalf = lambda x_: B.batch_norm_forward(x_, rm, rv, w, b)  # noqa: E731
    ref.check_vjp(evalf, lambda v: B.batch_norm_grad_eval(v, x, rm, rv, w)[0], x, rng)
    ref.check_vjp(lambda w_: B.batch_norm_forward(x, rm, rv, w_, b),
                  lambda v: B.batch_norm_grad_eval(v, x, rm, rv, w)[1], w, rng)


@pytest.mark.parametrize("grad", [B.batch_norm_grad_train, B.batch_norm_grad_eval])
def test_seed_dimensions_equal_per_seed_calls(grad):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 4, 5))
    w, _, rm, rv = params(3, np.float64, 5)
    g = rng.standard_normal((2, 3) + x.shape)
    dx, dw, db = grad(g, x, rm, rv, w)
    assert dx.shape == g.shape and dw.shape == db.shape == (2, 3, 3)
    for i in range(2):
        for j in range(3):
            for got, want in zip((dx[i, j], dw[i, j], db[i, j]), grad(g[i, j], x, rm, rv, w)):
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("training", [True, False])
def test_matches_torch(training):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((4, 3, 5, 6)) * 2 + 0.5).astype(np.float32)
    w, b, rm, rv = params(3, np.float32, 7)
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    yt = torch.nn.functional.batch_norm(xt, torch.tensor(rm, dtype=torch.float32), torch.tensor(rv, dtype=torch.float32),
                                        wt, bt, training=training, momentum=0.1, eps=1e-5)
    g = rng.standard_normal(tuple(yt.shape)).astype(np.float32)
    yt.backward(torch.tensor(g))
    mean, var = B.batch_norm_stats(x) if training else (rm, rv)
    grad = B.batch_norm_grad_train if training else B.batch_norm_grad_eval
    tol = dict(rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(B.batch_norm_forward(x, mean, var, w, b), yt.detach().numpy(), **tol)
    for got, want in zip(grad(g, x, mean, var, w), (xt.grad, wt.grad, bt.grad)):
        np.testing.assert_allclose(got, want.numpy(), **tol)


def test_affine_none_means_identity_scale_and_zero_shift():
    x = np.random.default_rng(8).standard_normal((2, 2, 3, 3))
    mean, var = B.batch_norm_stats(x)
    np.testing.assert_allclose(B.batch_norm_forward(x, mean, var), B.batch_norm_forward(x, mean, var, [1, 1], [0, 0]),
                               rtol=0, atol=0)
    with pytest.raises(ValueError, match="weight must have 2 entries"):
        B.batch_norm_forward(x, mean, var, [1, 1, 1])
