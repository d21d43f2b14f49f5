"""state_dict / load_state_dict: PyTorch's keys, loading a PyTorch model's weights, error messages."""
import numpy as np
import pytest

import saliency as sl
from saliency import nn


def _mlp(nn_, dims=(5, 8, 6, 3)):
    return nn_.Sequential(nn_.Linear(dims[0], dims[1]), nn_.ReLU(), nn_.Linear(dims[1], dims[2]), nn_.Tanh(),
                          nn_.Dropout(0.2), nn_.Linear(dims[2], dims[3]), nn_.LogSoftmax(dim=1))


def _torch_state(tmodel):
    return {k: v.detach().numpy() for k, v in tmodel.state_dict().items()}


def test_state_dict_values_are_copies_and_keep_vars_gives_the_tensors():
    lin = nn.Linear(2, 3)
    sd = lin.state_dict()
    assert list(sd) == ["weight", "bias"] and isinstance(sd["weight"], np.ndarray)
    sd["weight"][...] = 0
    assert np.any(lin.weight.numpy() != 0)
    assert lin.state_dict(keep_vars=True)["weight"] is lin.weight


def test_state_dict_keys_match_torch_for_nested_models():
    torch = pytest.importorskip("torch")

    class Ours(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = _mlp(nn)
            self.register_buffer("steps", sl.tensor(np.zeros((), np.int64)))
            self.head = nn.ModuleList([nn.Linear(3, 2), nn.Identity(), nn.Linear(2, 1, bias=False)])

    class Theirs(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.features = _mlp(torch.nn)
            self.register_buffer("steps", torch.zeros((), dtype=torch.int64))
            self.head = torch.nn.ModuleList([torch.nn.Linear(3, 2), torch.nn.Identity(),
                                             torch.nn.Linear(2, 1, bias=False)])

    ours, theirs = Ours(), Theirs()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert {k: v.shape for k, v in ours.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in theirs.state_dict().items()}
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    ours.load_state_dict(_torch_state(theirs))
    assert ours.steps.dtype == np.int64


@pytest.mark.parametrize("dtype, rtol", [(np.float32, 1e-4), (np.float64, 1e-10)])
def test_torch_weights_load_and_give_the_same_outputs_and_input_gradients(dtype, rtol):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    tmodel = _mlp(torch.nn).to(torch.float64 if dtype == np.float64 else torch.float32).eval()
    model = _mlp(nn).to(dtype).eval()
    assert model.load_state_dict(_torch_state(tmodel)).missing_keys == []
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((4, 5)).astype(dtype)
    v = rng.standard_normal((4, 3)).astype(dtype)
    x = sl.tensor(xv, requires_grad=True)
    y = model(x)
    y.backward(sl.tensor(v))
    tx = torch.from_numpy(xv.copy()).requires_grad_()
    ty = tmodel(tx)
    ty.backward(torch.from_numpy(v))
    assert y.dtype == dtype
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=rtol, atol=rtol)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=rtol, atol=rtol)
    for (name, p), (tname, tp) in zip(model.named_parameters(), tmodel.named_parameters()):
        assert name == tname
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=rtol, atol=rtol)


def test_our_state_dict_loads_into_torch():
    torch = pytest.importorskip("torch")
    model = _mlp(nn)
    tmodel = _mlp(torch.nn)
    tmodel.load_state_dict({k: torch.from_numpy(v) for k, v in model.state_dict().items()})
    x = np.random.default_rng(1).standard_normal((2, 5)).astype(np.float32)
    np.testing.assert_allclose(model.eval()(sl.tensor(x)).numpy(), tmodel.eval()(torch.from_numpy(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)


def test_load_copies_in_place_keeping_the_parameter_objects_and_casting():
    lin = nn.Linear(2, 2)
    weight = lin.weight
    lin.load_state_dict({"weight": np.eye(2), "bias": sl.tensor([1.0, 2.0])})
    assert lin.weight is weight and weight.dtype == np.float32
    np.testing.assert_array_equal(weight.numpy(), np.eye(2))
    np.testing.assert_array_equal(lin.bias.numpy(), [1.0, 2.0])


def test_errors_name_missing_unexpected_and_mis_shaped_keys_in_one_message():
    model = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2))
    state = model.state_dict()
    state["0.weight"] = np.zeros((4, 3), np.float32)
    del state["2.bias"]
    state["3.weight"] = np.zeros(1)
    state["extra"] = np.zeros(1)
    before = model[0].weight.numpy().copy()
    with pytest.raises(RuntimeError) as info:
        model.load_state_dict(state)
    assert str(info.value) == (
        'Error(s) in loading state_dict for Sequential:\n'
        '\tMissing key(s) in state_dict: "2.bias". \n'
        '\tUnexpected key(s) in state_dict: "3.weight", "extra". \n'
        '\tsize mismatch for 0.weight: copying a param with shape (4, 3) from checkpoint, '
        'the shape in current model is (5, 3).')
    np.testing.assert_array_equal(model[0].weight.numpy(), before)


def test_error_message_has_torchs_structure():
    torch = pytest.importorskip("torch")
    state = {"0.weight": np.zeros((4, 3), np.float32), "3.x": np.zeros(1, np.float32)}
    with pytest.raises(RuntimeError) as ours:
        nn.Sequential(nn.Linear(3, 5)).load_state_dict(state)
    with pytest.raises(RuntimeError) as theirs:
        torch.nn.Sequential(torch.nn.Linear(3, 5)).load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    assert str(ours.value) == str(theirs.value).replace("torch.Size([4, 3])", "(4, 3)") \
        .replace("torch.Size([5, 3])", "(5, 3)")


def test_non_strict_returns_missing_and_unexpected_keys():
    lin = nn.Linear(2, 2)
    result = lin.load_state_dict({"weight": np.zeros((2, 2)), "other": np.zeros(1)}, strict=False)
    assert result.missing_keys == ["bias"] and result.unexpected_keys == ["other"]
    missing, unexpected = result
    assert (missing, unexpected) == (["bias"], ["other"])
    assert repr(lin.load_state_dict(lin.state_dict())) == "<All keys matched successfully>"
    with pytest.raises(RuntimeError, match="size mismatch for weight"):
        lin.load_state_dict({"weight": np.zeros((3, 2))}, strict=False)


def test_non_persistent_buffers_are_not_saved_or_expected():
    m = nn.Module()
    m.register_buffer("kept", sl.zeros(2))
    m.register_buffer("scratch", sl.zeros(2), persistent=False)
    assert list(m.state_dict()) == ["kept"]
    m.load_state_dict({"kept": np.ones(2)})
    np.testing.assert_array_equal(m.kept.numpy(), [1.0, 1.0])


def test_bad_values_are_clear_errors():
    lin = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="mapping"):
        lin.load_state_dict([("weight", np.zeros((2, 2)))])
    with pytest.raises(TypeError, match=r"state_dict\['weight'\].*dtype"):
        lin.load_state_dict({"weight": np.array([["a", "b"], ["c", "d"]]), "bias": np.zeros(2)})


def test_integer_weights_for_float_parameters_and_non_string_keys_are_type_errors():
    lin = nn.Linear(2, 2)
    with pytest.raises(TypeError, match=r"state_dict\['weight'\] has dtype int64 but the model's weight is "
                                        r"float32; integer weights are refused"):
        lin.load_state_dict({"weight": np.ones((2, 2), np.int64), "bias": np.zeros(2, np.float32)})
    with pytest.raises(TypeError, match=r"state_dict\['bias'\] has dtype uint8"):
        lin.load_state_dict({"weight": np.ones((2, 2), np.float32), "bias": np.zeros(2, np.uint8)})
    with pytest.raises(TypeError, match=r"state_dict keys must be strings, got int 3"):
        lin.load_state_dict({"weight": np.ones((2, 2), np.float32), "bias": np.zeros(2, np.float32), 3: 0})
    bn = nn.BatchNorm2d(2)                  # an integer buffer still takes integers
    state = {k: np.asarray(v) for k, v in bn.state_dict().items()}
    state["num_batches_tracked"] = np.array(5, np.int64)
    bn.load_state_dict(state)
    assert int(bn.num_batches_tracked.item()) == 5
