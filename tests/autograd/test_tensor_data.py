"""`.data` as PyTorch has it: a tensor outside the graph that shares the values, with the in-place
methods that weight-initialisation code calls on it (`m.weight.data.normal_(0, std)`)."""
import numpy as np
import pytest

import saliency as sl
from saliency import nn


def test_data_is_a_tensor_outside_the_graph_sharing_the_values():
    w = nn.Parameter(sl.tensor([1.0, 2.0, 3.0]))
    d = w.data
    assert type(d) is sl.Tensor and not d.requires_grad and d.grad_fn is None
    assert np.shares_memory(d.numpy(), w.numpy())
    d[1] = 20.0
    assert w.tolist() == [1.0, 20.0, 3.0]


def test_init_code_changes_parameters_through_data_while_grad_mode_is_on():
    sl.manual_seed(0)
    conv = nn.Conv2d(3, 8, 3)
    conv.weight.data.normal_(0, 0.01)
    conv.bias.data.zero_()
    assert abs(conv.weight.numpy().std() - 0.01) < 0.003 and not conv.bias.numpy().any()
    conv.weight.data.uniform_(-0.5, 0.5).mul_(2.0).add_(1.0).clamp_(0.25, 1.75)
    w = conv.weight.numpy()
    assert w.min() >= 0.25 and w.max() <= 1.75 and w.std() > 0.2
    conv.bias.data.fill_(3.0)
    conv.bias.data.copy_(np.arange(8.0))
    assert conv.bias.tolist() == list(range(8))
    assert conv.weight.requires_grad and conv.weight.is_leaf  # still a parameter of the graph
    y = conv(sl.ones((1, 3, 5, 5))).sum()
    y.backward()
    assert conv.bias.grad.tolist() == [9.0] * 8


def test_random_fills_follow_manual_seed_and_explicit_generators():
    t = sl.zeros((1000,))
    sl.manual_seed(3)
    a = t.normal_(2.0, 0.5).numpy().copy()
    sl.manual_seed(3)
    b = t.normal_(2.0, 0.5).numpy().copy()
    np.testing.assert_array_equal(a, b)
    assert abs(a.mean() - 2.0) < 0.1 and abs(a.std() - 0.5) < 0.05
    u = t.uniform_(-1.0, 3.0, generator=np.random.default_rng(1)).numpy()
    assert u.min() >= -1.0 and u.max() < 3.0 and abs(u.mean() - 1.0) < 0.15


def test_assigning_data_swaps_the_values_and_keeps_the_leaf():
    w = nn.Parameter(sl.zeros((2, 2)))
    w.data = sl.ones((3,), dtype=sl.float64)
    assert w.shape == (3,) and w.dtype == np.float64 and w.requires_grad
    w.data = np.full(3, 7.0)
    assert w.tolist() == [7.0, 7.0, 7.0]


def test_changing_a_leaf_that_requires_grad_in_place_is_refused_in_grad_mode():
    w = sl.tensor([1.0, 2.0], requires_grad=True)
    for change in (lambda: w.normal_(), lambda: w.clamp_(0, 1), lambda: w.__setitem__(0, 5.0)):
        with pytest.raises(RuntimeError, match="in place"):
            change()
    with sl.no_grad():
        w[0] = 5.0
        w.clamp_(max=3.0)
    assert w.tolist() == [3.0, 2.0]


def test_clamp_needs_a_bound():
    with pytest.raises(ValueError, match="at least one"):
        sl.zeros(3).clamp_()


def test_the_same_init_code_gives_pytorchs_statistics_and_layout():
    torch = pytest.importorskip("torch")

    def init(module_types, model):
        for m in model.modules():
            if isinstance(m, module_types[0]):
                n = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                m.weight.data.normal_(0, (2.0 / n) ** 0.5)
                if m.bias is not None:
                    m.bias.data.zero_()
            elif isinstance(m, module_types[1]):
                m.weight.data.fill_(1)
                m.bias.data.zero_()

    ours = nn.Sequential(nn.Conv2d(3, 16, 3), nn.BatchNorm2d(16))
    theirs = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3), torch.nn.BatchNorm2d(16))
    init((nn.Conv2d, nn.BatchNorm2d), ours)
    init((torch.nn.Conv2d, torch.nn.BatchNorm2d), theirs)
    for (name, a), (_, b) in zip(ours.state_dict().items(), theirs.state_dict().items()):
        assert a.shape == tuple(b.shape), name
    assert ours[1].weight.tolist() == theirs[1].weight.tolist()
    assert abs(ours[0].weight.numpy().std() - theirs[0].weight.detach().numpy().std()) < 0.03


def test_every_in_place_write_moves_the_version_shared_by_views_data_and_detach():
    """`_version` as PyTorch's counter, but shared with `.data` too (so a write there is seen)."""
    w = nn.Parameter(sl.tensor(np.zeros((2, 3), np.float32)))
    seen = [w._version]
    with sl.no_grad():
        for write in (lambda: w.zero_(), lambda: w.fill_(1.0), lambda: w.copy_(np.ones((2, 3))),
                      lambda: w.add_(1.0), lambda: w.mul_(2.0), lambda: w.clamp_(0.0, 3.0),
                      lambda: w.normal_(), lambda: w.uniform_()):
            write()
            seen.append(w._version)
    w.data[0] = 5.0
    seen.append(w._version)
    w.detach().mul_(1.0)
    seen.append(w._version)
    w.numpy()  # hands out the memory: counted as a write
    seen.append(w._version)
    assert seen == list(range(seen[0], seen[0] + 12))
    assert w.reshape(3, 2)._version == w._version and w[0]._version == w._version


def test_package_writes_move_the_version():
    """load_state_dict, nn.init, an optimiser step and a training-mode batch norm write in place."""
    conv, bn = nn.Conv2d(2, 2, 1), nn.BatchNorm2d(2)
    before = conv.weight._version
    conv.load_state_dict({"weight": np.ones((2, 2, 1, 1), np.float32), "bias": np.zeros(2, np.float32)})
    nn.init.normal_(conv.weight)
    assert conv.weight._version == before + 2
    conv(sl.tensor(np.ones((1, 2, 2, 2), np.float32))).sum().backward()
    sl.optim.SGD(conv.parameters(), lr=0.1).step()
    assert conv.weight._version == before + 3
    mean, var = bn.running_mean._version, bn.running_var._version
    bn.train()(sl.tensor(np.random.default_rng(0).standard_normal((2, 2, 3, 3)).astype(np.float32)))
    assert bn.running_mean._version > mean and bn.running_var._version > var
