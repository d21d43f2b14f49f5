"""Module hooks: forward (pre-)hooks, and full backward hooks on multi-op modules against PyTorch."""
import warnings

import numpy as np
import pytest

import saliency as sl
from saliency import nn
from saliency.autograd import grad as autograd_grad


class Block(nn.Module):
    """relu(x @ W) * 2 + x: several ops, so a hook on the last op alone would see the wrong gradient."""

    def __init__(self, w):
        super().__init__()
        self.w = nn.Parameter(w)

    def forward(self, x):
        return sl.relu(x @ self.w) * 2 + x


class TwoInputs(nn.Module):
    """x * y + relu(x), with a non-tensor argument in the middle."""

    def forward(self, x, scale, y):
        return x * y * scale + sl.relu(x)


def _record(calls):
    def hook(module, grad_input, grad_output):
        calls.append(([None if g is None else g.numpy().copy() for g in grad_input],
                      [None if g is None else g.numpy().copy() for g in grad_output]))
    return hook


# ---- forward hooks ---------------------------------------------------------------------------------
def test_forward_hook_sees_inputs_and_can_replace_the_output_until_removed():
    lin = nn.Linear(3, 2)
    x = sl.tensor(np.ones((1, 3), np.float32))
    seen = []

    def hook(module, args, output):
        seen.append((module, args, output))
        return output * 0

    handle = lin.register_forward_hook(hook)
    out = lin(x)
    assert seen[0][0] is lin and seen[0][1][0] is x
    np.testing.assert_array_equal(out.numpy(), np.zeros((1, 2), np.float32))
    handle.remove()
    out = lin(x)
    assert len(seen) == 1
    assert np.any(out.numpy() != 0)


def test_forward_pre_hook_replaces_the_args_and_hooks_run_in_order():
    ident = nn.Identity()
    order = []
    ident.register_forward_pre_hook(lambda m, args: (order.append("pre"), args[0] + 1)[1])
    ident.register_forward_hook(lambda m, args, out: order.append("post"))
    ident.register_forward_hook(lambda m, args, out: order.append("first"), prepend=True)
    out = ident(sl.tensor([1.0]))
    assert out.item() == 2.0
    assert order == ["pre", "first", "post"]


def test_handle_as_context_manager_removes_the_hook():
    ident = nn.Identity()
    with ident.register_forward_hook(lambda m, a, o: o * 3):
        assert ident(sl.tensor([1.0])).item() == 3.0
    assert ident(sl.tensor([1.0])).item() == 1.0


# ---- full backward hooks: our engine alone --------------------------------------------------------
def test_full_backward_hook_on_multi_op_module_gives_input_and_output_gradients():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 4))
    x = sl.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    block = Block(w)
    calls = []
    block.register_full_backward_hook(_record(calls))
    y = block(x)
    assert y.grad_fn.name() == "BackwardHookFunctionBackward"
    y.retain_grad()
    v = rng.standard_normal((3, 4))
    (y * sl.tensor(v)).sum().backward()
    assert len(calls) == 1
    (gin,), (gout,) = calls[0]
    np.testing.assert_allclose(gin, x.grad.numpy(), rtol=1e-12, atol=0)
    np.testing.assert_allclose(gout, y.grad.numpy(), rtol=1e-12, atol=0)
    np.testing.assert_allclose(gout, v, rtol=1e-12, atol=0)
    # closed form: dx = v + 2 * (v * [x W > 0]) W^T
    xv = x.numpy()
    np.testing.assert_allclose(gin, v + 2 * ((v * (xv @ w > 0)) @ w.T), rtol=1e-12, atol=1e-14)


def test_replacing_grad_input_changes_x_grad_but_not_the_parameter_grads():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 4))
    x = sl.tensor(rng.standard_normal((2, 4)), requires_grad=True)
    block = Block(w)
    block(x).sum().backward()
    want_w = block.w.grad.numpy().copy()
    block.zero_grad()
    x.grad = None
    block.register_full_backward_hook(lambda m, gi, go: (gi[0] * 0 + 7,))
    block(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 4), 7.0))
    np.testing.assert_allclose(block.w.grad.numpy(), want_w, rtol=1e-12, atol=0)


def test_backward_hook_sees_none_for_inputs_that_do_not_require_grad():
    rng = np.random.default_rng(0)
    x = sl.tensor(rng.standard_normal(3), requires_grad=True)
    y = sl.tensor(rng.standard_normal(3))
    mod = TwoInputs()
    calls = []
    mod.register_full_backward_hook(_record(calls))
    out = mod(x, 2.0, y)
    out.sum().backward()
    (gx, gscale, gy), (gout,) = calls[0]
    assert gscale is None and gy is None
    np.testing.assert_allclose(gx, x.grad.numpy(), rtol=1e-12, atol=0)
    np.testing.assert_array_equal(gout, np.ones(3))


def test_backward_hook_with_two_differentiable_inputs_fires_once_with_both():
    rng = np.random.default_rng(1)
    x = sl.tensor(rng.standard_normal(3), requires_grad=True)
    y = sl.tensor(rng.standard_normal(3), requires_grad=True)
    mod = TwoInputs()
    calls = []
    mod.register_full_backward_hook(_record(calls))
    mod(x, 3.0, y).sum().backward()
    assert len(calls) == 1
    (gx, gscale, gy), _ = calls[0]
    assert gscale is None
    np.testing.assert_allclose(gx, 3 * y.numpy() + (x.numpy() > 0), rtol=1e-12, atol=0)
    np.testing.assert_allclose(gy, 3 * x.numpy(), rtol=1e-12, atol=0)
    np.testing.assert_allclose(x.grad.numpy(), gx, rtol=1e-12, atol=0)
    np.testing.assert_allclose(y.grad.numpy(), gy, rtol=1e-12, atol=0)


def test_replacing_the_second_of_two_inputs():
    x = sl.tensor([1.0, -2.0], dtype=np.float64, requires_grad=True)
    y = sl.tensor([3.0, 4.0], dtype=np.float64, requires_grad=True)
    mod = TwoInputs()
    mod.register_full_backward_hook(lambda m, gi, go: (gi[0], None, gi[2] * 10))
    mod(x, 1.0, y).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), [10.0, -20.0], rtol=1e-12, atol=0)
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 4.0], rtol=1e-12, atol=0)


def test_hook_with_no_differentiable_input_fires_at_the_outputs_with_a_warning():
    lin = nn.Linear(2, 2)
    calls = []
    lin.register_full_backward_hook(_record(calls))
    out = lin(sl.tensor([[1.0, 2.0]]))
    with pytest.warns(UserWarning, match="none of its inputs requires grad"):
        out.sum().backward()
    (gin,), (gout,) = calls[0]
    assert gin is None
    np.testing.assert_array_equal(gout, np.ones((1, 2), np.float32))


def test_wrong_number_or_shape_of_grad_input_is_a_clear_error():
    x = sl.tensor([1.0, 2.0], requires_grad=True)
    ident = nn.Identity()
    handle = ident.register_full_backward_hook(lambda m, gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match="returned 2 grad_input entries, expected 1"):
        ident(x * 1).sum().backward()
    handle.remove()
    ident.register_full_backward_hook(lambda m, gi, go: (sl.zeros(3),))
    with pytest.raises(RuntimeError, match=r"shape \(3,\).*expected \(2,\)"):
        ident(x * 1).sum().backward()


def test_backward_pre_hook_replaces_grad_output():
    x = sl.tensor([1.0, 2.0], dtype=np.float64, requires_grad=True)
    block = Block(np.eye(2))
    calls = []
    block.register_full_backward_pre_hook(lambda m, go: (go[0] * 0.5,))
    block.register_full_backward_hook(_record(calls))
    block(x).sum().backward()
    np.testing.assert_array_equal(calls[0][1][0], [0.5, 0.5])
    np.testing.assert_allclose(x.grad.numpy(), [1.5, 1.5], rtol=1e-12, atol=0)


def test_removed_backward_hook_no_longer_fires_and_no_hook_means_no_identity_node():
    x = sl.tensor([1.0, 2.0], requires_grad=True)
    block = Block(np.eye(2, dtype=np.float32))
    calls = []
    handle = block.register_full_backward_hook(_record(calls))
    handle.remove()
    y = block(x)
    assert y.grad_fn.name() == "AddBackward0"
    y.sum().backward()
    assert calls == []


def test_nested_modules_fire_inner_hook_before_outer_hook():
    x = sl.tensor([[1.0, -1.0]], requires_grad=True)
    inner = nn.Linear(2, 2)
    model = nn.Sequential(inner, nn.ReLU(), nn.Linear(2, 1))
    order = []
    model.register_full_backward_hook(lambda m, gi, go: order.append("outer"))
    inner.register_full_backward_hook(lambda m, gi, go: order.append("inner"))
    model(x).sum().backward()
    assert order == ["inner", "outer"]


def test_autograd_grad_with_respect_to_a_parameter_only_does_not_fire_the_input_hook():
    x = sl.tensor([[1.0, 2.0]], requires_grad=True)
    lin = nn.Linear(2, 2)
    calls = []
    lin.register_full_backward_hook(_record(calls))
    (gw,) = autograd_grad(lin(x).sum(), [lin.weight])
    assert calls == [] and x.grad is None
    np.testing.assert_array_equal(gw.numpy(), np.array([[1.0, 2.0], [1.0, 2.0]], np.float32))


def test_batched_seeds_give_hooks_the_leading_seed_dimension():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 4))
    x = sl.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    block = Block(w)
    calls = []
    block.register_full_backward_hook(_record(calls))
    y = block(x)
    seeds = rng.standard_normal((5, 3, 4))
    (g,) = autograd_grad(y, [x], grad_outputs=sl.tensor(seeds), batched=True, retain_graph=True)
    (gin,), (gout,) = calls[0]
    assert gin.shape == (5, 3, 4) and gout.shape == (5, 3, 4)
    np.testing.assert_allclose(gin, g.numpy(), rtol=1e-12, atol=0)
    np.testing.assert_allclose(gout, seeds, rtol=1e-12, atol=0)
    for k in range(5):  # each seed equals its own pass
        (gk,) = autograd_grad(y, [x], grad_outputs=sl.tensor(seeds[k]), retain_graph=True)
        np.testing.assert_allclose(calls[-1][0][0], gk.numpy(), rtol=1e-12, atol=0)
        np.testing.assert_allclose(gin[k], gk.numpy(), rtol=1e-12, atol=1e-14)


def test_batched_seeds_with_a_replacing_hook_on_two_inputs():
    rng = np.random.default_rng(2)
    x = sl.tensor(rng.standard_normal(3), requires_grad=True)
    y = sl.tensor(rng.standard_normal(3), requires_grad=True)
    mod = TwoInputs()
    mod.register_full_backward_hook(lambda m, gi, go: (gi[0] * 2, None, gi[2]))
    out = mod(x, 1.0, y)
    seeds = rng.standard_normal((4, 3))
    gx, gy = autograd_grad(out, [x, y], grad_outputs=sl.tensor(seeds), batched=True)
    np.testing.assert_allclose(gx.numpy(), 2 * seeds * (y.numpy() + (x.numpy() > 0)), rtol=1e-12, atol=0)
    np.testing.assert_allclose(gy.numpy(), seeds * x.numpy(), rtol=1e-12, atol=0)


def test_hook_fires_once_per_call_and_per_backward_with_retain_graph():
    x = sl.tensor([1.0, 2.0], requires_grad=True)
    block = Block(np.eye(2, dtype=np.float32))
    calls = []
    block.register_full_backward_hook(_record(calls))
    y = block(block(x))
    y.sum().backward(retain_graph=True)
    assert len(calls) == 2
    y.sum().backward()
    assert len(calls) == 4


def test_no_identity_nodes_under_no_grad():
    block = Block(np.eye(2, dtype=np.float32))
    block.register_full_backward_hook(lambda m, gi, go: None)
    with sl.no_grad():
        y = block(sl.tensor([1.0, 2.0], requires_grad=True))
    assert y.grad_fn is None


# ---- full backward hooks against PyTorch ----------------------------------------------------------
@pytest.mark.parametrize("dtype, rtol", [(np.float32, 1e-5), (np.float64, 1e-12)])
def test_full_backward_hook_matches_torch(dtype, rtol):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 4)).astype(dtype)
    xv = rng.standard_normal((3, 4)).astype(dtype)
    v = rng.standard_normal((3, 4)).astype(dtype)

    class TorchBlock(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.from_numpy(w.copy()))

        def forward(self, x):
            return torch.relu(x @ self.w) * 2 + x

    ours, theirs = [], []
    block = Block(w.copy())
    block.register_full_backward_hook(_record(ours))
    x = sl.tensor(xv, requires_grad=True)
    block(x).backward(sl.tensor(v))

    tblock = TorchBlock()
    tblock.register_full_backward_hook(
        lambda m, gi, go: theirs.append(([g.detach().numpy().copy() for g in gi], [g.detach().numpy().copy()
                                                                                  for g in go])))
    tx = torch.from_numpy(xv.copy()).requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ty = tblock(tx)
    assert ty.grad_fn.name() == block(x).grad_fn.name() == "BackwardHookFunctionBackward"
    ty.backward(torch.from_numpy(v))
    np.testing.assert_allclose(ours[0][0][0], theirs[0][0][0], rtol=rtol, atol=rtol)
    np.testing.assert_allclose(ours[0][1][0], theirs[0][1][0], rtol=rtol, atol=0)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=rtol, atol=rtol)
    np.testing.assert_allclose(block.w.grad.numpy(), tblock.w.grad.numpy(), rtol=rtol, atol=rtol)


def test_replacing_grad_input_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    xv = rng.standard_normal((2, 3))
    lin = nn.Linear(3, 3, dtype=np.float64)
    tlin = torch.nn.Linear(3, 3).double()
    with torch.no_grad():
        tlin.weight.copy_(torch.from_numpy(lin.weight.numpy()))
        tlin.bias.copy_(torch.from_numpy(lin.bias.numpy()))
    ours = nn.Sequential(lin, nn.Tanh())
    theirs = torch.nn.Sequential(tlin, torch.nn.Tanh())
    ours[1].register_full_backward_hook(lambda m, gi, go: (gi[0].abs(),))
    theirs[1].register_full_backward_hook(lambda m, gi, go: (gi[0].abs(),))
    x = sl.tensor(xv, requires_grad=True)
    tx = torch.from_numpy(xv.copy()).requires_grad_()
    ours(x).sum().backward()
    theirs(tx).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(lin.weight.grad.numpy(), tlin.weight.grad.numpy(), rtol=1e-12, atol=1e-14)


class TwoOutputs(nn.Module):
    def forward(self, x, y):
        return x * 2, x * y


@pytest.mark.parametrize("use", ["first", "second", "both"])
def test_tuple_outputs_and_unused_tensors_match_torch(use):
    """grad_output is None for an output that got no gradient, grad_input is zeros for an input
    that got none, as in PyTorch."""
    torch = pytest.importorskip("torch")

    class TorchTwoOutputs(torch.nn.Module):
        def forward(self, x, y):
            return x * 2, x * y

    def as_arrays(gs):
        return [None if g is None else np.asarray(g.detach().numpy() if hasattr(g, "detach") else g.numpy())
                for g in gs]

    results = []
    for lib, mod in ((sl, TwoOutputs()), (torch, TorchTwoOutputs())):
        calls = []
        mod.register_full_backward_hook(lambda m, gi, go: calls.append((as_arrays(gi), as_arrays(go))))
        x = lib.tensor([1.0, -2.0], dtype=lib.float64, requires_grad=True)
        y = lib.tensor([3.0, 0.5], dtype=lib.float64, requires_grad=True)
        a, b = mod(x, y)
        loss = {"first": a.sum(), "second": (b * 3).sum(), "both": a.sum() + (b * 3).sum()}[use]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loss.backward()
        results.append((calls, x.grad.numpy(), y.grad.numpy() if y.grad is not None else None))
    (ours, ox, oy), (theirs, tx, ty) = results
    assert len(ours) == len(theirs) == 1
    for mine, other in zip(ours[0][0] + ours[0][1], theirs[0][0] + theirs[0][1]):
        assert (mine is None) == (other is None)
        if mine is not None:
            np.testing.assert_allclose(mine, other, rtol=1e-12, atol=0)
    np.testing.assert_allclose(ox, tx, rtol=1e-12, atol=0)
    if ty is None:
        assert oy is None or not oy.any()
    else:
        np.testing.assert_allclose(oy, ty, rtol=1e-12, atol=0)
