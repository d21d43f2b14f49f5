"""ModuleDict and ModuleList as PyTorch's (methods, registration, state-dict keys) and Dropout2d (whole
channels, scale, eval identity, gradient)."""
import collections
import warnings

import numpy as np
import pytest

import saliency as sl
import saliency.nn as nn
from saliency.nn import functional as F

torch = pytest.importorskip("torch")


def _both(build):
    return build(nn), build(torch.nn)


def _model(lib):
    class Net(lib.Module):
        def __init__(self):
            super().__init__()
            self.heads = lib.ModuleDict({"cls": lib.Linear(4, 3), "box": lib.Linear(4, 2)})
            self.blocks = lib.ModuleList([lib.Conv2d(2, 2, 3), lib.BatchNorm2d(2)])
            self.heads["extra"] = lib.Sequential(lib.Linear(4, 4), lib.ReLU(), lib.Linear(4, 1))
            self.heads.update([("z", lib.Linear(2, 2))])
            self.heads.update(collections.OrderedDict(a=lib.Identity()))
    return Net()


def test_module_dict_registers_children_with_pytorch_state_dict_keys():
    ours, theirs = _both(_model)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert repr(ours.heads) == repr(theirs.heads)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_allclose(ours.heads["extra"](sl.tensor(x)).numpy(),
                               theirs.heads["extra"](torch.tensor(x)).detach().numpy(), rtol=1e-5)


def test_module_dict_methods_as_pytorch():
    ours, theirs = _both(_model)
    for o, t in ((ours.heads, theirs.heads),):
        assert list(o.keys()) == list(t.keys()) and list(o) == list(t) and len(o) == len(t)
        assert [k for k, _ in o.items()] == [k for k, _ in t.items()]
        assert [type(m).__name__ for m in o.values()] == [type(m).__name__ for m in t.values()]
        assert ("cls" in o) and ("nope" not in o)
        popped = o.pop("box")
        t.pop("box")
        assert isinstance(popped, nn.Linear) and "box" not in o and list(o) == list(t)
        del o["z"]
        del t["z"]
        assert list(o) == list(t)
        with pytest.raises(KeyError):
            o["missing"]
        o.clear()
        assert len(o) == 0 and list(ours.state_dict()) == [k for k in theirs.state_dict() if not k.startswith("heads.")]
    with pytest.raises(TypeError):
        nn.ModuleDict({"a": 3})
    with pytest.raises(ValueError):
        nn.ModuleDict(["ab", "cd"])
    with pytest.raises(NotImplementedError):
        nn.ModuleDict()(1)


def test_module_list_pop_and_add_as_pytorch():
    ours, theirs = _both(lambda lib: lib.ModuleList([lib.Linear(2, 2), lib.ReLU(), lib.Linear(2, 3)]))
    assert type(ours.pop(1)).__name__ == type(theirs.pop(1)).__name__
    assert list(ours.state_dict()) == list(theirs.state_dict())
    both = ours + nn.ModuleList([nn.Tanh()])
    assert isinstance(both, nn.ModuleList) and len(both) == 3 and both[0] is ours[0]


def test_dropout2d_zeroes_whole_channels_and_scales_the_rest():
    sl.manual_seed(0)
    x = sl.tensor(np.random.default_rng(0).uniform(1, 2, (8, 16, 5, 4)), requires_grad=True)
    layer = nn.Dropout2d(0.25)
    assert repr(layer) == repr(torch.nn.Dropout2d(0.25))
    y = layer(x)
    ratio = (y.numpy() / x.numpy()).reshape(8, 16, -1)
    np.testing.assert_allclose(ratio, np.broadcast_to(ratio[:, :, :1], ratio.shape), rtol=1e-12)  # one per channel
    assert np.all(np.isclose(ratio, 0.0) | np.isclose(ratio, 1 / 0.75, rtol=1e-12))
    assert 0 < (ratio[:, :, 0] == 0).sum() < 8 * 16
    y.backward(sl.tensor(np.ones(y.shape)))
    np.testing.assert_allclose(x.grad.numpy(), y.numpy() / x.numpy(), rtol=1e-12)
    layer.eval()
    assert layer(x) is x or np.array_equal(layer(x).numpy(), x.numpy())


def test_dropout2d_edge_cases_as_pytorch():
    x = np.ones((2, 3, 4, 5))
    np.testing.assert_array_equal(F.dropout2d(sl.tensor(x), 1.0).numpy(), 0 * x)
    np.testing.assert_array_equal(F.dropout2d(sl.tensor(x), 0.0).numpy(), x)
    np.testing.assert_array_equal(F.dropout2d(sl.tensor(x), 0.5, training=False).numpy(), x)
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout2d(sl.tensor(x), 1.5)
    with pytest.warns(UserWarning, match="3D input"):
        y = F.dropout2d(sl.tensor(np.ones((6, 50, 7))), 0.5).numpy()
    assert np.all(y == y[:, :, :1])  # (N, C, L): whole rows, as PyTorch
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.dropout2d(sl.tensor(x), 0.5)
