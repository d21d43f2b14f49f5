"""Module: registration, traversal order and names, modes, dtype casts, containers, repr."""
import copy
import collections

import numpy as np
import pytest

import saliency as sl
from saliency import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Dropout(0.5), nn.Linear(3, 3))
        self.scale = nn.Parameter(np.ones(1, np.float32))
        self.register_buffer("running", sl.zeros(3))
        self.register_buffer("cache", sl.zeros(1), persistent=False)
        self.head = nn.Linear(3, 2, bias=False)

    def forward(self, x):
        return self.head(self.features(x) * self.scale + self.running)


def test_parameters_buffers_and_modules_in_registration_order_with_dotted_names():
    net = Net()
    assert [n for n, _ in net.named_parameters()] == [
        "scale", "features.0.weight", "features.0.bias", "features.3.weight", "features.3.bias", "head.weight"]
    assert [n for n, _ in net.named_buffers()] == ["running", "cache"]
    assert [n for n, _ in net.named_modules()] == ["", "features", "features.0", "features.1", "features.2",
                                                   "features.3", "head"]
    assert [n for n, _ in net.named_children()] == ["features", "head"]
    assert list(net.children()) == [net.features, net.head]
    assert list(net.parameters())[1] is net.features[0].weight
    assert [n for n, _ in net.named_parameters(recurse=False)] == ["scale"]
    assert net.get_submodule("features.3") is net.features[3]
    assert net.head.bias is None


def test_shared_parameters_and_modules_are_listed_once():
    lin = nn.Linear(2, 2)
    seq = nn.Sequential(lin, nn.ReLU(), lin)
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias"]
    assert [n for n, _ in seq.named_modules()] == ["", "0", "1"]
    assert len(list(seq.named_modules(remove_duplicate=False))) == 4
    # a state dict lists a shared tensor under every name, as PyTorch does
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]


def test_attribute_assignment_rules():
    m = nn.Module()
    m.w = nn.Parameter([1.0, 2.0])
    m.child = nn.Identity()
    m.plain = 3
    assert list(m._parameters) == ["w"] and list(m._modules) == ["child"] and m.plain == 3
    with pytest.raises(TypeError, match="cannot assign Tensor as parameter 'w'"):
        m.w = sl.tensor([1.0])
    m.w = None
    assert m.w is None and list(m.parameters()) == []
    with pytest.raises(TypeError, match="as child module 'child'"):
        m.child = 5
    m.child = nn.Parameter([0.0])  # a new kind of value moves the name to the new registry
    assert "child" not in m._modules and isinstance(m.child, nn.Parameter)
    del m.child
    with pytest.raises(AttributeError, match="'Module' object has no attribute 'child'"):
        m.child
    with pytest.raises(KeyError, match="attribute 'plain' already exists"):
        m.register_buffer("plain", sl.zeros(1))
    with pytest.raises(KeyError, match="contain no '.'"):
        m.add_module("a.b", nn.Identity())
    with pytest.raises(TypeError, match="wrap it"):
        m.register_parameter("q", sl.tensor([1.0]))


def test_assigning_before_init_is_a_clear_error():
    class Broken(nn.Module):
        def __init__(self):
            self.w = nn.Parameter([1.0])

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Broken()


def test_forward_is_required():
    with pytest.raises(NotImplementedError, match='missing the required "forward"'):
        nn.Module()(1)


def test_train_eval_flags_and_dropout():
    net = Net()
    assert all(m.training for m in net.modules())
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    x = sl.tensor(np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32))
    np.testing.assert_array_equal(net(x).numpy(), net(x).numpy())
    net.train()
    assert net.features[2].training
    with pytest.raises(ValueError, match="bool"):
        net.train("yes")


def test_requires_grad_and_zero_grad():
    net = Net()
    net(sl.ones(2, 4)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(np.all(p.grad.numpy() == 0) for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())


def test_to_float64_casts_in_place_keeping_parameter_identity():
    net = Net()
    params = list(net.parameters())
    net(sl.ones(1, 4)).sum().backward()
    assert net.double() is net
    assert [id(p) for p in net.parameters()] == [id(p) for p in params]
    assert all(p.dtype == np.float64 and p.grad.dtype == np.float64 for p in params)
    assert net.running.dtype == np.float64
    out = net(sl.ones(1, 4, dtype=np.float64))
    assert out.dtype == np.float64
    net.zero_grad()
    out.sum().backward()
    assert params[1].grad.dtype == np.float64
    net.to(sl.float32)
    assert all(p.dtype == np.float32 for p in params)
    assert net.to("cpu") is net
    with pytest.raises(TypeError, match="floating point"):
        net.to(np.int64)


def test_deepcopy_gives_independent_parameters():
    net = nn.Sequential(nn.Linear(2, 2))
    twin = copy.deepcopy(net)
    assert twin[0].weight is not net[0].weight
    np.testing.assert_array_equal(twin[0].weight.numpy(), net[0].weight.numpy())
    twin(sl.ones(1, 2)).sum().backward()
    assert twin[0].weight.grad is not None and net[0].weight.grad is None


def test_parameter_repr_and_defaults():
    p = nn.Parameter(np.array([1.0, 2.0], np.float32))
    assert p.requires_grad and p.is_leaf
    assert repr(p) == "Parameter containing:\ntensor([1., 2.], requires_grad=True)"
    assert isinstance(p, sl.Tensor) and type(p * 2) is sl.Tensor
    assert not nn.Parameter([1.0], requires_grad=False).requires_grad


def test_sequential_indexing_slicing_and_editing():
    layers = [nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)]
    seq = nn.Sequential(*layers)
    assert len(seq) == 3 and list(seq) == layers
    assert seq[-1] is layers[2]
    head = seq[:2]
    assert isinstance(head, nn.Sequential) and list(head) == layers[:2]
    with pytest.raises(IndexError, match="out of range"):
        seq[3]
    del seq[1]
    assert list(seq._modules) == ["0", "1"] and seq[1] is layers[2]
    seq.append(nn.Sigmoid())
    seq.insert(1, nn.Tanh())
    assert [type(m).__name__ for m in seq] == ["Linear", "Tanh", "Linear", "Sigmoid"]
    named = nn.Sequential(collections.OrderedDict([("fc", nn.Linear(2, 2)), ("act", nn.ReLU())]))
    assert list(named.state_dict()) == ["fc.weight", "fc.bias"]


def test_module_list():
    blocks = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    blocks.append(nn.ReLU())
    assert len(blocks) == 4 and isinstance(blocks[1:], nn.ModuleList)
    assert [n for n, _ in blocks.named_parameters()][:2] == ["0.weight", "0.bias"]
    with pytest.raises(NotImplementedError):
        blocks(sl.ones(1))


def test_repr_matches_torch():
    torch = pytest.importorskip("torch")
    ours = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Dropout(0.25), nn.Flatten(), nn.Softmax(dim=1),
                         nn.Sequential(nn.Sigmoid(), nn.Tanh(), nn.Identity()), nn.Linear(3, 2, bias=False),
                         nn.LogSoftmax(dim=-1))
    theirs = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Dropout(0.25),
                                 torch.nn.Flatten(), torch.nn.Softmax(dim=1),
                                 torch.nn.Sequential(torch.nn.Sigmoid(), torch.nn.Tanh(), torch.nn.Identity()),
                                 torch.nn.Linear(3, 2, bias=False), torch.nn.LogSoftmax(dim=-1))
    assert repr(ours) == repr(theirs)
    ml = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2), nn.ReLU(), nn.ReLU(inplace=True)])
    tml = torch.nn.ModuleList([torch.nn.Linear(2, 2), torch.nn.Linear(2, 2), torch.nn.ReLU(),
                               torch.nn.ReLU(inplace=True)])
    assert repr(ml) == repr(tml)
    assert repr(nn.ModuleList()) == repr(torch.nn.ModuleList())


def test_apply_visits_children_first():
    seq = nn.Sequential(nn.Linear(1, 1), nn.ReLU())
    names = []
    seq.apply(lambda m: names.append(type(m).__name__))
    assert names == ["Linear", "ReLU", "Sequential"]
