"""Layers, functional and init: outputs and gradients against torch, closed forms and statistics."""
import math

import numpy as np
import pytest

import saliency as sl
from saliency import nn
from saliency.nn import functional as F
from saliency.nn import init


# ---- init ---------------------------------------------------------------------------------------
def test_linear_init_bounds_are_one_over_sqrt_fan_in():
    lin = nn.Linear(400, 300, generator=np.random.default_rng(0))
    bound = 1 / math.sqrt(400)
    w, b = lin.weight.numpy(), lin.bias.numpy()
    assert w.shape == (300, 400) and w.dtype == np.float32 and b.shape == (300,)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert np.abs(w).max() > 0.99 * bound
    # U(-a, a): mean 0, variance a^2 / 3
    np.testing.assert_allclose(w.mean(), 0.0, atol=3 * bound / math.sqrt(3 * w.size))
    np.testing.assert_allclose(w.var(), bound ** 2 / 3, rtol=0.02)


@pytest.mark.parametrize("nonlinearity, a, gain", [("relu", 0, math.sqrt(2)), ("leaky_relu", math.sqrt(5),
                                                   math.sqrt(1 / 3)), ("tanh", 0, 5 / 3), ("linear", 0, 1.0)])
def test_kaiming_uniform_bound(nonlinearity, a, gain):
    t = sl.zeros(64, 16, 3, 3)
    init.kaiming_uniform_(t, a=a, nonlinearity=nonlinearity, generator=np.random.default_rng(0))
    bound = gain * math.sqrt(3 / (16 * 9))
    assert np.abs(t.numpy()).max() <= bound * (1 + 1e-6)
    assert np.abs(t.numpy()).max() > 0.98 * bound
    np.testing.assert_allclose(t.numpy().var(), bound ** 2 / 3, rtol=0.05)
    assert math.isclose(init.calculate_gain(nonlinearity, a), gain)


def test_init_fan_out_normal_xavier_and_constants():
    rng = np.random.default_rng(0)
    t = sl.zeros(200, 100)
    init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu", generator=rng)
    np.testing.assert_allclose(t.numpy().std(), math.sqrt(2 / 200), rtol=0.02)
    init.xavier_uniform_(t, generator=rng)
    assert np.abs(t.numpy()).max() <= math.sqrt(6 / 300) * (1 + 1e-6)
    init.normal_(t, 1.0, 0.5, generator=rng)
    np.testing.assert_allclose([t.numpy().mean(), t.numpy().std()], [1.0, 0.5], rtol=0.02)
    init.zeros_(t)
    assert not t.numpy().any()
    init.ones_(t)
    assert np.all(t.numpy() == 1)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.kaiming_uniform_(sl.zeros(3))
    with pytest.raises(ValueError, match="mode 'fan_avg'"):
        init.kaiming_uniform_(t, mode="fan_avg")
    with pytest.raises(ValueError, match="unsupported nonlinearity 'gelu'"):
        init.calculate_gain("gelu")


def test_init_works_on_parameters_and_is_reproducible_with_manual_seed():
    sl.manual_seed(3)
    a = nn.Linear(3, 3).weight.numpy().copy()
    sl.manual_seed(3)
    b = nn.Linear(3, 3).weight.numpy().copy()
    np.testing.assert_array_equal(a, b)
    c = nn.Linear(3, 3, generator=np.random.default_rng(1)).weight.numpy()
    d = nn.Linear(3, 3, generator=np.random.default_rng(1)).weight.numpy()
    np.testing.assert_array_equal(c, d)
    assert not np.array_equal(a, c)


def test_init_does_not_touch_numpys_global_generator():
    np.random.seed(0)
    expected = np.random.random()
    np.random.seed(0)
    nn.Linear(10, 10)
    F.dropout(sl.ones(10), 0.5)
    assert np.random.random() == expected


def test_within_skipped_the_initialisers_write_nothing_and_draw_nothing():
    sl.manual_seed(5)
    expected = nn.Linear(4, 4).weight.numpy().copy()
    sl.manual_seed(5)
    t = sl.tensor(np.full((3, 3), 7.0))
    with init.skipped():
        for fill in (init.uniform_, init.normal_, init.trunc_normal_, init.kaiming_normal_, init.xavier_uniform_,
                     init.zeros_, init.ones_):
            fill(t)
        init.constant_(t, 2.0)
        nn.Conv2d(3, 8, 3)
    np.testing.assert_array_equal(t.numpy(), 7.0)
    np.testing.assert_array_equal(nn.Linear(4, 4).weight.numpy(), expected)  # the random stream is where it was
    init.zeros_(t)  # and the initialisers work again after it
    np.testing.assert_array_equal(t.numpy(), 0.0)


# ---- layers against torch -------------------------------------------------------------------------
@pytest.mark.parametrize("dtype, rtol", [(np.float32, 1e-5), (np.float64, 1e-12)])
@pytest.mark.parametrize("name, args", [("ReLU", ()), ("Sigmoid", ()), ("Tanh", ()), ("Softmax", (1,)),
                                        ("LogSoftmax", (1,)), ("Flatten", ()), ("Identity", ()),
                                        ("Flatten", (0, 1))])
def test_activation_layers_match_torch(name, args, dtype, rtol):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((2, 3, 4)).astype(dtype)
    xv[np.abs(xv) < 1e-3] = 0.5  # away from the relu kink
    x = sl.tensor(xv, requires_grad=True)
    y = getattr(nn, name)(*args)(x)
    tx = torch.from_numpy(xv.copy()).requires_grad_()
    ty = getattr(torch.nn, name)(*args)(tx)
    v = rng.standard_normal(ty.shape).astype(dtype)
    y.backward(sl.tensor(v))
    ty.backward(torch.from_numpy(v))
    assert y.shape == tuple(ty.shape)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=rtol, atol=rtol)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=rtol, atol=rtol)


@pytest.mark.parametrize("bias", [True, False])
def test_linear_matches_torch_on_batched_inputs(bias):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    lin = nn.Linear(4, 3, bias=bias, dtype=np.float64)
    tlin = torch.nn.Linear(4, 3, bias=bias).double()
    tlin.load_state_dict({k: torch.from_numpy(v) for k, v in lin.state_dict().items()})
    xv = rng.standard_normal((2, 5, 4))
    x = sl.tensor(xv, requires_grad=True)
    tx = torch.from_numpy(xv.copy()).requires_grad_()
    lin(x).sum().backward()
    tlin(tx).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(lin.weight.grad.numpy(), tlin.weight.grad.numpy(), rtol=1e-12, atol=1e-14)
    if bias:
        np.testing.assert_allclose(lin.bias.grad.numpy(), tlin.bias.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_linear_shape_error_names_the_shapes():
    with pytest.raises(ValueError, match=r"input of shape \(2, 5\) does not fit a weight of shape \(3, 4\)"):
        nn.Linear(4, 3)(sl.zeros(2, 5))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_loss_layers_match_torch(reduction):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((4, 3))
    target = np.array([0, 2, 1, 2])
    ours = nn.CrossEntropyLoss(reduction=reduction)(sl.tensor(logits), target)
    theirs = torch.nn.CrossEntropyLoss(reduction=reduction)(torch.from_numpy(logits), torch.from_numpy(target))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12, atol=0)
    logp = F.log_softmax(sl.tensor(logits), dim=1)
    np.testing.assert_allclose(nn.NLLLoss(reduction=reduction)(logp, target).numpy(), theirs.numpy(), rtol=1e-12,
                               atol=0)
    pred, tgt = rng.standard_normal((3, 2)), rng.standard_normal((3, 2))
    np.testing.assert_allclose(nn.MSELoss(reduction=reduction)(sl.tensor(pred), sl.tensor(tgt)).numpy(),
                               torch.nn.MSELoss(reduction=reduction)(torch.from_numpy(pred),
                                                                     torch.from_numpy(tgt)).numpy(),
                               rtol=1e-12, atol=0)
    with pytest.raises(ValueError, match="reduction 'avg'"):
        nn.MSELoss(reduction="avg")


def test_softmax_without_dim_warns_and_uses_torchs_legacy_choice():
    x = sl.tensor(np.arange(6.0).reshape(2, 3))
    with pytest.warns(UserWarning, match="implicit dimension"):
        y = F.softmax(x)
    np.testing.assert_allclose(y.numpy().sum(axis=1), [1.0, 1.0], rtol=1e-6)


# ---- dropout ------------------------------------------------------------------------------------
def test_dropout_is_identity_in_eval_and_inverted_dropout_in_train():
    x = sl.ones(200, 100, requires_grad=True)
    drop = nn.Dropout(0.3, generator=np.random.default_rng(0))
    y = drop(x)
    vals = np.unique(y.numpy())
    np.testing.assert_allclose(vals, [0.0, 1 / 0.7], rtol=1e-6)
    kept = y.numpy() != 0
    assert abs(kept.mean() - 0.7) < 0.01
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), y.numpy())  # the gradient goes through the same mask
    drop.eval()
    assert drop(x) is x


def test_dropout_masks_are_reproducible_and_validated():
    x = sl.ones(50)
    a = nn.Dropout(0.5, generator=np.random.default_rng(7))(x).numpy()
    b = nn.Dropout(0.5, generator=np.random.default_rng(7))(x).numpy()
    np.testing.assert_array_equal(a, b)
    sl.manual_seed(1)
    c = F.dropout(x, 0.5).numpy()
    sl.manual_seed(1)
    np.testing.assert_array_equal(F.dropout(x, 0.5).numpy(), c)
    np.testing.assert_array_equal(F.dropout(x, 1.0).numpy(), np.zeros(50, np.float32))
    assert F.dropout(x, 0.5, training=False) is x
    with pytest.raises(ValueError, match="between 0 and 1, but got 1.5"):
        nn.Dropout(1.5)
    xd = sl.ones(10, dtype=np.float64)
    assert F.dropout(xd, 0.5).dtype == np.float64


def test_functional_linear_flatten_and_pad():
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((2, 3)), rng.standard_normal((4, 3)), rng.standard_normal(4)
    np.testing.assert_allclose(F.linear(x, w, b).numpy(), x @ w.T + b, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(F.linear(x, w).numpy(), x @ w.T, rtol=1e-12, atol=1e-14)
    assert F.flatten(sl.zeros(2, 3, 4)).shape == (24,)
    assert F.flatten(sl.zeros(2, 3, 4), 1).shape == (2, 12)
    assert F.pad(sl.zeros(1, 2, 2), (1, 1, 2, 0)).shape == (1, 4, 4)
