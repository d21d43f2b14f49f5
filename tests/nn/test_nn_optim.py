"""SGD, Adam and AdamW against torch.optim step by step, and the optimizer plumbing."""
import numpy as np
import pytest

import saliency as sl
from saliency import nn, optim


def _pair(torch, rng):
    """The same float64 MLP in both libraries, and one batch of data."""
    model = nn.Sequential(nn.Linear(4, 6, dtype=np.float64), nn.Tanh(), nn.Linear(6, 3, dtype=np.float64))
    tmodel = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 3)).double()
    tmodel.load_state_dict({k: torch.from_numpy(v) for k, v in model.state_dict().items()})
    x = rng.standard_normal((8, 4))
    y = rng.integers(0, 3, 8)
    return model, tmodel, x, y


CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.8, nesterov=True, weight_decay=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.5, maximize=True)),
    ("Adam", dict()),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, amsgrad=True)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01, weight_decay=0.5, amsgrad=True)),
]


@pytest.mark.parametrize("name, kwargs", CASES)
def test_five_steps_match_torch(name, kwargs):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    model, tmodel, x, y = _pair(torch, rng)
    opt = getattr(optim, name)(model.parameters(), **kwargs)
    topt = getattr(torch.optim, name)(tmodel.parameters(), **kwargs)
    for step in range(5):
        opt.zero_grad()
        topt.zero_grad()
        loss = nn.functional.cross_entropy(model(sl.tensor(x)), y)
        tloss = torch.nn.functional.cross_entropy(tmodel(torch.from_numpy(x)), torch.from_numpy(y))
        np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-6)
        loss.backward()
        tloss.backward()
        opt.step()
        topt.step()
        for (pname, p), tp in zip(model.named_parameters(), tmodel.parameters()):
            np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-6, atol=1e-12,
                                       err_msg=f"{pname} after step {step + 1}")


def test_parameter_groups_with_their_own_learning_rates_match_torch():
    torch = pytest.importorskip("torch")
    model, tmodel, x, y = _pair(torch, np.random.default_rng(1))
    opt = optim.SGD([{"params": model[0].parameters()}, {"params": model[2].parameters(), "lr": 0.5}],
                    lr=0.1, momentum=0.9)
    topt = torch.optim.SGD([{"params": tmodel[0].parameters()}, {"params": tmodel[2].parameters(), "lr": 0.5}],
                           lr=0.1, momentum=0.9)
    for _ in range(3):
        for o, m, inp, lib in ((opt, model, sl.tensor(x), nn.functional), (topt, tmodel, torch.from_numpy(x),
                                                                          torch.nn.functional)):
            o.zero_grad()
            lib.mse_loss(m(inp), inp[:, :3]).backward()
            o.step()
    for p, tp in zip(model.parameters(), tmodel.parameters()):
        np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-6, atol=1e-12)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]


def test_step_updates_in_place_and_skips_parameters_without_grad():
    w = nn.Parameter(np.array([1.0, 2.0]))
    unused = nn.Parameter(np.array([5.0]))
    data = w.numpy()
    opt = optim.SGD([w, unused], lr=0.5)
    (w * w).sum().backward()
    opt.step()
    assert w.numpy() is data
    np.testing.assert_array_equal(w.numpy(), [0.0, 0.0])
    np.testing.assert_array_equal(unused.numpy(), [5.0])
    assert w.grad_fn is None and w.is_leaf


def test_zero_grad_and_closure():
    w = nn.Parameter(np.array([3.0]))
    opt = optim.Adam([w], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss

    assert opt.step(closure).item() == 9.0
    assert w.grad is not None
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(w.grad.numpy(), [0.0])
    opt.zero_grad()
    assert w.grad is None


def test_state_dict_round_trip_continues_identically():
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal(5)
    target = rng.standard_normal(5)

    def run(w, opt, steps):
        for _ in range(steps):
            opt.zero_grad()
            ((w - sl.tensor(target)) ** 2).sum().backward()
            opt.step()

    a = nn.Parameter(w0.copy())
    opt_a = optim.Adam([a], lr=0.1)
    run(a, opt_a, 6)
    b = nn.Parameter(w0.copy())
    opt_b = optim.Adam([b], lr=0.1)
    run(b, opt_b, 3)
    saved = opt_b.state_dict()
    assert saved["param_groups"][0]["params"] == [0] and saved["state"][0]["step"] == 3
    c = nn.Parameter(b.numpy().copy())
    opt_c = optim.Adam([c], lr=0.5)
    opt_c.load_state_dict(saved)
    assert opt_c.param_groups[0]["lr"] == 0.1
    run(c, opt_c, 3)
    np.testing.assert_allclose(c.numpy(), a.numpy(), rtol=1e-12, atol=0)


def test_invalid_arguments_are_clear_errors():
    w = nn.Parameter(np.ones(2))
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="invalid learning rate: -1"):
        optim.SGD([w], lr=-1)
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD([w], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="beta parameter at index 1"):
        optim.Adam([w], betas=(0.9, 1.0))
    with pytest.raises(TypeError, match="iterable of Tensors"):
        optim.Adam(w)
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([w * 2], lr=0.1)
    with pytest.raises(ValueError, match="more than once"):
        optim.SGD([w, w], lr=0.1)
