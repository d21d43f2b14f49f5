"""The PyTorch surface that ported model files call: splitting and tiling, devices, to(), weight
initialisation, and one clear NotImplementedError for a PyTorch name saliency lacks."""
import math

import numpy as np
import pytest

import saliency as sl
from saliency import nn
from saliency.autograd.errors import UnsupportedError
from saliency.nn import functional as F
from saliency.nn import init


def _x(*shape, seed=0):
    return sl.tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=True)


@pytest.mark.parametrize("call, shapes", [
    (lambda x: x.chunk(3, 1), [(4, 2), (4, 2), (4, 2)]),
    (lambda x: x.chunk(4, 1), [(4, 2), (4, 2), (4, 2)]),
    (lambda x: x.chunk(4, 0), [(1, 6)] * 4),
    (lambda x: x.split(4, 1), [(4, 4), (4, 2)]),
    (lambda x: x.split([1, 5], -1), [(4, 1), (4, 5)]),
    (lambda x: sl.split(x, 3), [(3, 6), (1, 6)]),
    (lambda x: sl.chunk(x, 2, dim=1), [(4, 3), (4, 3)]),
])
def test_chunk_and_split_give_pytorchs_pieces_and_gradients(call, shapes):
    x = _x(4, 6)
    pieces = call(x)
    assert [p.shape for p in pieces] == shapes
    axis = 0 if shapes[0][1] == 6 else 1
    np.testing.assert_array_equal(np.concatenate([p.numpy() for p in pieces], axis=axis), x.numpy())
    total = sum(((k + 1.0) * p).sum() for k, p in enumerate(pieces))
    total.backward()
    want = np.concatenate([np.full(p.shape, k + 1.0) for k, p in enumerate(pieces)], axis=axis)
    np.testing.assert_array_equal(x.grad.numpy(), want)


def test_split_sizes_must_add_up():
    with pytest.raises(ValueError, match="add up to 5, but dimension 1 has size 6"):
        _x(4, 6).split([2, 3], 1)


def test_repeat_tiles_like_numpy_and_sums_the_gradient_back():
    x = _x(2, 3)
    y = x.repeat(2, 1, 3)
    np.testing.assert_array_equal(y.numpy(), np.tile(x.numpy(), (2, 1, 3)))
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3), 6.0))
    with pytest.raises(ValueError, match="at least 2 sizes"):
        x.repeat(2)


def test_as_methods_and_to_take_pytorchs_arguments():
    x, other = _x(2, 3), sl.zeros((3, 2), dtype=sl.float32)
    assert x.view_as(other).shape == (3, 2) and x.reshape_as(other).shape == (3, 2)
    assert sl.ones((1, 3)).expand_as(x).shape == (2, 3)
    assert x.type_as(other).dtype == np.float32
    assert x.to("cpu") is x and x.cpu() is x and x.to(sl.device("cpu")) is x
    assert x.to("cpu", sl.float32).dtype == np.float32 and x.to(dtype=np.float32).dtype == np.float32
    assert x.to(other).dtype == np.float32 and x.to("float32").dtype == np.float32
    assert x.to(sl.float64, copy=True) is not x
    assert x.device == "cpu" and x.device.type == "cpu" and not x.is_cuda and str(x.device) == "cpu"


@pytest.mark.parametrize("move", [lambda t: t.cuda(), lambda t: t.to("cuda"), lambda t: t.to("cuda:0", sl.float64),
                                  lambda t: t.to(device="mps"), lambda t: t.to(sl.device("cuda", 1))])
def test_a_device_other_than_the_cpu_is_one_clear_error(move):
    for obj in (_x(2), nn.Linear(2, 2)):
        with pytest.raises(NotImplementedError, match="CPU only"):
            move(obj)


def test_model_files_that_ask_for_cuda_pick_the_cpu():
    where = sl.device("cuda" if sl.cuda.is_available() else "cpu")
    model = nn.Linear(3, 2).to(where)
    assert model(sl.ones((1, 3)).to(where)).shape == (1, 2) and sl.cuda.device_count() == 0


@pytest.mark.parametrize("owner, name", [(sl.Tensor, "gather"), (sl, "fft"), (nn, "Conv3d"), (F, "grid_sample")])
def test_a_pytorch_name_saliency_lacks_is_a_clear_not_implemented_error(owner, name):
    target = _x(2) if owner is sl.Tensor else owner
    with pytest.raises(NotImplementedError, match=f"{name} is not supported by saliency"):
        getattr(target, name)
    assert not hasattr(target, name)  # an AttributeError too: hasattr and getattr(..., default) work
    assert getattr(target, name, "default") == "default"
    with pytest.raises(AttributeError):
        getattr(target, "_private_name")
    assert issubclass(UnsupportedError, NotImplementedError)


def _truncated_normal_moments(mean, std, a, b):
    alpha, beta = (a - mean) / std, (b - mean) / std
    pdf = [math.exp(-z * z / 2) / math.sqrt(2 * math.pi) for z in (alpha, beta)]
    mass = 0.5 * (math.erf(beta / math.sqrt(2)) - math.erf(alpha / math.sqrt(2)))
    mu = mean + std * (pdf[0] - pdf[1]) / mass
    var = std ** 2 * (1 + (alpha * pdf[0] - beta * pdf[1]) / mass - ((pdf[0] - pdf[1]) / mass) ** 2)
    return mu, math.sqrt(var)


@pytest.mark.parametrize("mean, std, a, b", [(0.0, 0.02, -0.04, 0.04), (1.0, 1.0, 0.5, 4.0), (0.0, 1.0, -2.0, 2.0)])
def test_trunc_normal_has_the_truncated_distributions_moments(mean, std, a, b):
    t = init.trunc_normal_(sl.zeros((400, 500)), mean, std, a, b, generator=np.random.default_rng(0))
    v = t.numpy().astype(np.float64)
    mu, sd = _truncated_normal_moments(mean, std, a, b)
    assert v.min() >= a and v.max() <= b
    assert abs(v.mean() - mu) < 4 * sd / math.sqrt(v.size) and abs(v.std() - sd) < 0.01 * sd


def test_trunc_normal_refuses_an_empty_interval():
    with pytest.raises(ValueError, match="a < b"):
        init.trunc_normal_(sl.zeros(3), a=1.0, b=1.0)


def test_init_has_pytorchs_functions():
    for name in ("kaiming_normal_", "kaiming_uniform_", "xavier_normal_", "xavier_uniform_", "normal_", "uniform_",
                 "constant_", "zeros_", "ones_", "trunc_normal_", "calculate_gain"):
        assert callable(getattr(init, name)), name
