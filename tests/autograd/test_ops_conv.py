"""The convolution op runs only the kernels it needs, and K seeds cost one kernel call."""
import numpy as np
import pytest

import saliency as sl
from saliency import kernels


def _inputs(rng, frozen=True):
    x = sl.tensor(rng.standard_normal((2, 3, 8, 8)).astype(np.float32), requires_grad=True)
    w = sl.tensor(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), requires_grad=not frozen)
    b = sl.tensor(rng.standard_normal(4).astype(np.float32), requires_grad=not frozen)
    return x, w, b


def test_frozen_weights_run_no_weight_or_bias_kernel(monkeypatch):
    x, w, b = _inputs(np.random.default_rng(0))

    def forbidden(*args, **kwargs):
        raise AssertionError("a weight/bias VJP kernel ran although the weights are frozen")

    monkeypatch.setattr(kernels, "conv2d_grad_weight", forbidden)
    monkeypatch.setattr(kernels, "conv2d_grad_bias", forbidden)
    y = sl.conv2d(x, w, b, padding=1)
    y.backward(sl.ones_like(y))
    assert x.grad is not None and w.grad is None and b.grad is None


def test_frozen_weights_keep_no_reference_to_the_input():
    x, w, b = _inputs(np.random.default_rng(1))
    y = sl.conv2d(x, w, b, padding=1)
    saved = y.grad_fn.saved
    assert not any(s is x.numpy() for s in saved if s is not None)


def test_trainable_weights_get_gradients_and_only_the_input_vjp_is_skipped_for_a_constant_input(monkeypatch):
    rng = np.random.default_rng(2)
    x, w, b = _inputs(rng, frozen=False)
    x.requires_grad_(False)

    def forbidden(*args, **kwargs):
        raise AssertionError("the input VJP ran although the input needs no gradient")

    monkeypatch.setattr(kernels, "conv2d_grad_input", forbidden)
    y = sl.conv2d(x, w, b, padding=1)
    y.sum().backward()
    assert w.grad.shape == w.shape and b.grad.shape == b.shape
    np.testing.assert_allclose(b.grad.numpy(), np.full(4, 2 * 8 * 8, np.float32), rtol=1e-6, atol=0)


def test_k_seeds_are_one_input_vjp_kernel_call(monkeypatch):
    rng = np.random.default_rng(3)
    x, w, b = _inputs(rng)
    calls = []
    real = kernels.conv2d_grad_input

    def counting(g, *args, **kwargs):
        calls.append(g.shape)
        return real(g, *args, **kwargs)

    monkeypatch.setattr(kernels, "conv2d_grad_input", counting)
    y = sl.conv2d(x, w, b, padding=1)
    seeds = rng.standard_normal((5,) + y.shape).astype(np.float32)
    (batched,) = sl.autograd.grad(y, x, seeds, batched=True, retain_graph=True)
    assert calls == [(5,) + y.shape]
    for k in range(5):
        (one,) = sl.autograd.grad(y, x, seeds[k], retain_graph=True)
        np.testing.assert_allclose(batched.numpy()[k], one.numpy(), rtol=1e-5, atol=1e-5)


def test_mixed_dtypes_and_wrong_ranks_are_clear_errors():
    x = sl.tensor(np.zeros((1, 3, 5, 5), np.float32), requires_grad=True)
    with pytest.raises(TypeError, match="float32 but weight has dtype float64"):
        sl.conv2d(x, np.zeros((2, 3, 3, 3)))
    with pytest.raises(ValueError, match=r"expects input of shape \(N, C, H, W\), got \(3, 5, 5\)"):
        sl.conv2d(np.zeros((3, 5, 5), np.float32), np.zeros((2, 3, 3, 3), np.float32))
