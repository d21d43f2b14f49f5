"""Pooling against PyTorch over grids of its arguments: output sizes (floor and ceil mode), values
(-inf padding of max pooling, the divisors of count_include_pad, ceil-mode windows past the padding,
divisor_override), input gradients, return_indices, adaptive bins, unbatched input and bad arguments."""
import itertools

import numpy as np
import pytest

import saliency as sl
import saliency.nn as nn
from saliency.nn import functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

SIZES = [(7, 6), (8, 9)]


def _distinct(rng, shape):
    return rng.permutation(int(np.prod(shape))).reshape(shape).astype(np.float64) / 10 - 3


def _check(ours_fn, theirs_fn, x, rng):
    xt = torch.tensor(x, requires_grad=True)
    ty = theirs_fn(xt)
    xs = sl.tensor(x, requires_grad=True)
    y = ours_fn(xs)
    assert y.shape == tuple(ty.shape)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    v = rng.standard_normal(ty.shape)
    ty.backward(torch.tensor(v))
    y.backward(sl.tensor(v))
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-12)


def _sliding_grid():
    for (h, w), k, s, p, ceil in itertools.product(SIZES, [2, 3, (3, 2)], [None, 1, 3, (2, 1)], [0, 1],
                                                   [False, True]):
        if 2 * p <= min(k if isinstance(k, tuple) else (k, k)):
            yield (h, w), k, s, p, ceil


@pytest.mark.parametrize("hw,k,s,p,ceil", list(_sliding_grid()))
def test_max_pool2d_grid_matches_pytorch(hw, k, s, p, ceil):
    rng = np.random.default_rng(0)
    x = _distinct(rng, (2, 3) + hw)
    for d in [1, 2, (1, 2)]:
        try:
            TF.max_pool2d(torch.tensor(x), k, s, p, d, ceil)
        except RuntimeError:  # PyTorch refuses it (output too small): so must we, in one sentence
            with pytest.raises(ValueError):
                F.max_pool2d(sl.tensor(x), k, s, p, d, ceil)
            continue
        _check(lambda t: F.max_pool2d(t, k, s, p, d, ceil), lambda t: TF.max_pool2d(t, k, s, p, d, ceil), x, rng)
        _, ti = TF.max_pool2d(torch.tensor(x), k, s, p, d, ceil, return_indices=True)
        _, i = F.max_pool2d(sl.tensor(x), k, s, p, d, ceil, return_indices=True)
        assert i.dtype == np.int64 and (i.numpy() == ti.numpy()).all()


@pytest.mark.parametrize("hw,k,s,p,ceil", list(_sliding_grid()))
def test_avg_pool2d_grid_matches_pytorch(hw, k, s, p, ceil):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3) + hw)
    for cip, div in itertools.product([True, False], [None, 3]):
        _check(lambda t: F.avg_pool2d(t, k, s, p, ceil, cip, div), lambda t: TF.avg_pool2d(t, k, s, p, ceil, cip, div),
               x, rng)


@pytest.mark.parametrize("hw", SIZES)
@pytest.mark.parametrize("out", [1, 2, 3, (2, 4), (None, 3), (4, None), 10, (7, 1)])
@pytest.mark.parametrize("name", ["adaptive_avg_pool2d", "adaptive_max_pool2d"])
def test_adaptive_pool_grid_matches_pytorch(name, out, hw):
    rng = np.random.default_rng(2)
    x = _distinct(rng, (2, 3) + hw)
    _check(lambda t: getattr(F, name)(t, out), lambda t: getattr(TF, name)(t, out), x, rng)


def test_adaptive_max_pool2d_return_indices():
    x = _distinct(np.random.default_rng(3), (2, 3, 7, 5))
    y, i = F.adaptive_max_pool2d(sl.tensor(x), (3, 4), return_indices=True)
    ty, ti = TF.adaptive_max_pool2d(torch.tensor(x), (3, 4), return_indices=True)
    np.testing.assert_array_equal(y.numpy(), ty.numpy())
    np.testing.assert_array_equal(i.numpy(), ti.numpy())


@pytest.mark.parametrize("layer,args,kwargs", [
    ("MaxPool2d", (3,), {"stride": 2, "padding": 1, "ceil_mode": True}), ("MaxPool2d", (2,), {"dilation": 2}),
    ("AvgPool2d", (3,), {"stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False}),
    ("AvgPool2d", (2,), {"divisor_override": 3}), ("AdaptiveAvgPool2d", ((None, 2),), {}),
    ("AdaptiveMaxPool2d", ((2, 3),), {})])
def test_unbatched_input_pools_as_pytorch(layer, args, kwargs):
    rng = np.random.default_rng(4)
    x = _distinct(rng, (3, 8, 7))
    _check(getattr(nn, layer)(*args, **kwargs), getattr(torch.nn, layer)(*args, **kwargs), x, rng)


def test_pooling_layers_return_indices_and_repr_as_pytorch():
    x = _distinct(np.random.default_rng(5), (1, 2, 6, 6))
    y, i = nn.MaxPool2d(2, return_indices=True)(sl.tensor(x))
    ty, ti = torch.nn.MaxPool2d(2, return_indices=True)(torch.tensor(x))
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    for ours, theirs in [(nn.MaxPool2d(3, 2, 1, 2, ceil_mode=True), torch.nn.MaxPool2d(3, 2, 1, 2, ceil_mode=True)),
                         (nn.AvgPool2d(3, ceil_mode=True), torch.nn.AvgPool2d(3, ceil_mode=True)),
                         (nn.AdaptiveMaxPool2d((2, None)), torch.nn.AdaptiveMaxPool2d((2, None)))]:
        assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("call", [
    lambda x: F.max_pool2d(x, 3, padding=2), lambda x: F.max_pool2d(x, 0), lambda x: F.avg_pool2d(x, 2, stride=0),
    lambda x: F.avg_pool2d(x, 2, divisor_override=0), lambda x: F.adaptive_avg_pool2d(x, 0),
    lambda x: F.max_pool2d(x, 9), lambda x: F.adaptive_max_pool2d(x, (1, 2, 3))])
def test_bad_pooling_arguments_raise_value_error(call):
    with pytest.raises(ValueError):
        call(sl.tensor(np.zeros((1, 1, 5, 5))))
