"""Backward semantics of the engine, against PyTorch's: accumulation, retain_graph, retain_grad,
hooks, inputs=, autograd.grad (also batched), grad modes, graph identity, long chains, errors."""
import gc
import sys
import warnings

import numpy as np
import pytest

import saliency as sl

TOL32 = dict(rtol=1e-5, atol=1e-6)
TOL64 = dict(rtol=1e-12, atol=1e-12)


def leaf(values, dtype=np.float32):
    return sl.tensor(np.asarray(values, dtype=dtype), requires_grad=True)


def close(t, expected, tol=TOL32):
    np.testing.assert_allclose(np.asarray(t.numpy() if isinstance(t, sl.Tensor) else t, dtype=np.float64),
                               np.asarray(expected, dtype=np.float64), **tol)


# ---- accumulation -----------------------------------------------------------------------------------
def test_leaf_grad_accumulates_across_graphs():
    x = leaf([1.0, 2.0, 3.0])
    (x * x).sum().backward()
    close(x.grad, [2, 4, 6])
    (3 * x).sum().backward()
    close(x.grad, [5, 7, 9])
    x.grad = None
    (3 * x).sum().backward()
    close(x.grad, [3, 3, 3])


def test_grad_is_none_before_backward_and_for_constants():
    x = leaf([1.0, 2.0])
    c = sl.tensor([3.0, 4.0])
    assert x.grad is None
    (x * c).sum().backward()
    assert c.grad is None
    close(x.grad, [3, 4])


def test_accumulated_grad_object_is_reused_in_place():
    x = leaf([1.0, 2.0])
    (x * 2).sum().backward()
    g = x.grad
    (x * 3).sum().backward()
    assert x.grad is g  # PyTorch also accumulates into the same tensor
    close(g, [5, 5])


def test_grad_zero_and_reset():
    x = leaf([1.0, 2.0])
    (x * 2).sum().backward()
    x.grad.zero_()
    close(x.grad, [0, 0])
    (x * 2).sum().backward()
    close(x.grad, [2, 2])


# ---- retain_graph --------------------------------------------------------------------------------------
def test_second_backward_through_saved_values_raises_with_fix():
    x = leaf([1.0, 2.0])
    y = (sl.exp(x) * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time") as info:
        y.backward()
    assert "retain_graph=True" in str(info.value)


def test_retain_graph_allows_repeats_then_last_frees():
    x = leaf([1.0, 2.0])
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward(retain_graph=True)
    y.backward()
    close(x.grad, [6, 12])
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_add_only_graph_can_be_rerun_as_in_pytorch():
    a, b = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    y = a + b + a
    y.backward(sl.ones(2))
    y.backward(sl.ones(2))
    close(a.grad, [4, 4])
    close(b.grad, [2, 2])


def test_freed_graph_also_refuses_autograd_grad():
    x = leaf([1.0, 2.0])
    y = (x * x).sum()
    (g,) = sl.autograd.grad(y, x)
    close(g, [2, 4])
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        sl.autograd.grad(y, x)


def test_retain_graph_matches_torch():
    torch = pytest.importorskip("torch")
    v = np.array([1.0, -2.0, 0.5])
    x = leaf(v, np.float64)
    y = sl.tanh(x) * x
    y.backward(sl.tensor(v), retain_graph=True)
    y.backward(sl.ones(3, dtype=np.float64))
    xt = torch.tensor(v, requires_grad=True)
    yt = torch.tanh(xt) * xt
    yt.backward(torch.tensor(v), retain_graph=True)
    yt.backward(torch.ones(3, dtype=torch.float64))
    close(x.grad, xt.grad.numpy(), TOL64)


# ---- retain_grad -------------------------------------------------------------------------------------------
def test_retain_grad_on_non_leaf():
    x = leaf([1.0, 2.0])
    y = x * 3
    y.retain_grad()
    assert y.retains_grad
    (y * y).sum().backward()
    close(y.grad, 2 * y.numpy())
    close(x.grad, 18 * x.numpy())


def test_retained_grad_accumulates():
    x = leaf([1.0, 2.0])
    y = x * 3
    y.retain_grad()
    z = (y * 2).sum()
    z.backward(retain_graph=True)
    z.backward()
    close(y.grad, [4, 4])


def test_retained_grad_sees_hook_modified_gradient_in_either_order():
    x = leaf([1.0, 2.0])
    y = x * 2
    y.register_hook(lambda g: g * 100)
    y.retain_grad()
    y.sum().backward()
    close(y.grad, [100, 100])
    close(x.grad, [200, 200])

    x2 = leaf([1.0, 2.0])
    y2 = x2 * 2
    y2.retain_grad()
    y2.register_hook(lambda g: g * 100)
    y2.sum().backward()
    close(y2.grad, [100, 100])  # PyTorch: the retained grad is read after all tensor hooks


def test_non_leaf_without_retain_grad_has_none_and_warns():
    x = leaf([1.0, 2.0])
    y = x * 3
    y.sum().backward()
    with pytest.warns(UserWarning, match="non-leaf"):
        assert y.grad is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert x.grad is not None


def test_retain_grad_on_leaf_is_a_no_op_and_root_gets_seed():
    x = leaf([1.0, 2.0])
    x.retain_grad()
    y = x * 3
    y.retain_grad()
    y.backward(sl.tensor([1.0, -1.0]))
    close(y.grad, [1, -1])
    close(x.grad, [3, -3])


def test_retain_grad_on_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match="does not require grad"):
        sl.tensor([1.0]).retain_grad()


# ---- hooks ---------------------------------------------------------------------------------------------------
def test_hook_on_leaf_called_with_gradient_and_can_replace_it():
    x = leaf([1.0, 2.0])
    seen = []
    x.register_hook(lambda g: seen.append(g.numpy().copy()))
    x.register_hook(lambda g: g * 10)
    (x * 3).sum().backward()
    assert len(seen) == 1
    close(seen[0], [3, 3])
    close(x.grad, [30, 30])


def test_hook_on_non_leaf_changes_what_flows_down():
    x = leaf([1.0, 2.0])
    y = x * x
    seen = []

    def hook(g):
        assert isinstance(g, sl.Tensor)
        seen.append(g.numpy().copy())
        return g * 0.5

    y.register_hook(hook)
    y.backward(sl.tensor([2.0, 4.0]))
    close(seen[0], [2, 4])
    close(x.grad, [2 * 1 * 1, 2 * 2 * 2])  # 0.5 * g * 2x


def test_a_leaf_nodes_prehook_runs_after_the_tensors_hooks_and_before_grad():
    x = leaf([1.0, 2.0])
    y = x * 3
    acc = y.grad_fn.next_functions[0][0]
    assert acc.name() == "AccumulateGrad"
    order = []
    x.register_hook(lambda g: order.append("tensor") or g + 1)
    handle = acc.register_prehook(lambda g: order.append("node") or g * 10)
    y.sum().backward(retain_graph=True)
    assert order == ["tensor", "node"]
    close(x.grad, [40, 40])  # (3 + 1) * 10, as PyTorch
    handle.remove()
    x.grad = None
    y.sum().backward()
    close(x.grad, [4, 4])


def test_hooks_run_in_registration_order_and_chain():
    x = leaf([1.0])
    x.register_hook(lambda g: g + 1)
    x.register_hook(lambda g: g * 10)
    (x * 2).sum().backward()
    close(x.grad, [30])


def test_hook_may_return_ndarray():
    x = leaf([1.0, 2.0])
    x.register_hook(lambda g: np.array([7.0, 8.0]))
    (x * 2).sum().backward()
    close(x.grad, [7, 8])
    assert x.grad.dtype == np.float32


def test_hook_handle_remove():
    x = leaf([1.0, 2.0])
    calls = []
    h1 = x.register_hook(lambda g: calls.append("leaf"))
    y = x * 2
    h2 = y.register_hook(lambda g: calls.append("y") or g * 0)
    h1.remove()
    h2.remove()
    h2.remove()  # removing twice is harmless
    y.sum().backward()
    assert calls == []
    close(x.grad, [2, 2])


def test_hook_returning_wrong_shape_raises_clearly():
    x = leaf([1.0, 2.0])
    y = x * 2
    y.register_hook(lambda g: sl.ones(3))
    with pytest.raises(RuntimeError, match=r"hook.*MulBackward0.*shape \(3,\).*expected \(2,\)"):
        y.sum().backward()

    z = leaf([1.0, 2.0])
    z.register_hook(lambda g: np.ones((2, 1)))
    with pytest.raises(RuntimeError, match=r"hook.*AccumulateGrad.*shape \(2, 1\)"):
        (z * 2).sum().backward()


def test_hook_on_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match="does not require grad"):
        sl.tensor([1.0]).register_hook(lambda g: g)


def test_hooks_match_torch():
    torch = pytest.importorskip("torch")
    v = np.array([0.3, -1.2, 2.0])
    x = leaf(v, np.float64)
    y = sl.sigmoid(x) * x
    y.register_hook(lambda g: g * sl.tensor([1.0, 2.0, 3.0], dtype=np.float64))
    x.register_hook(lambda g: g - 1)
    y.sum().backward()
    xt = torch.tensor(v, requires_grad=True)
    yt = torch.sigmoid(xt) * xt
    yt.register_hook(lambda g: g * torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))
    xt.register_hook(lambda g: g - 1)
    yt.sum().backward()
    close(x.grad, xt.grad.numpy(), TOL64)


# ---- backward(inputs=...) -------------------------------------------------------------------------------------
def test_backward_inputs_fills_only_those():
    a, b = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    y = (a * b).sum()
    y.backward(inputs=[a])
    close(a.grad, [3, 4])
    assert b.grad is None


def test_backward_inputs_non_leaf():
    a = leaf([1.0, 2.0])
    h = a * 2
    y = (h * h).sum()
    y.backward(inputs=[h])
    close(h.grad, 2 * h.numpy())
    assert a.grad is None


def test_backward_inputs_non_leaf_that_retains_grad_counts_once():
    a = leaf([1.0, 2.0])
    h = a * 2
    h.retain_grad()
    (h * h).sum().backward(inputs=[h])
    close(h.grad, [4, 8])  # as PyTorch: not twice
    assert a.grad is None


def test_backward_inputs_non_leaf_and_leaf_below_it():
    a = leaf([1.0, 2.0])
    h = a * 2
    y = (h * h).sum()
    y.backward(inputs=[h, a])
    close(h.grad, [4, 8])
    close(a.grad, [8, 16])


def test_backward_inputs_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    va, vb = rng.standard_normal(3), rng.standard_normal(3)
    a, b = leaf(va, np.float64), leaf(vb, np.float64)
    h = sl.tanh(a) * b
    (h * a).sum().backward(inputs=[b, h])
    at, bt = torch.tensor(va, requires_grad=True), torch.tensor(vb, requires_grad=True)
    ht = torch.tanh(at) * bt
    (ht * at).sum().backward(inputs=[bt, ht])
    assert a.grad is None and at.grad is None
    close(b.grad, bt.grad.numpy(), TOL64)
    close(h.grad, ht.grad.numpy(), TOL64)


def test_backward_inputs_errors():
    a = leaf([1.0])
    with pytest.raises(RuntimeError, match="does not require grad"):
        (a * 2).sum().backward(inputs=[sl.tensor([1.0])])
    with pytest.raises(ValueError, match="empty"):
        (a * 2).sum().backward(inputs=[])


# ---- autograd.grad ---------------------------------------------------------------------------------------------
def test_grad_returns_vjps_and_leaves_grad_untouched():
    a, b = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    h = a * b
    h.retain_grad()
    y = (h * a).sum()
    ga, gb = sl.autograd.grad(y, [a, b])
    close(ga, 2 * a.numpy() * b.numpy())
    close(gb, a.numpy() ** 2)
    assert a.grad is None and b.grad is None and h._grad is None
    assert ga.grad_fn is None and not ga.requires_grad
    assert ga.dtype == np.float32


def test_grad_with_respect_to_non_leaf_and_seed():
    a = leaf([1.0, 2.0])
    h = a * 3
    y = sl.exp(h)
    (gh,) = sl.autograd.grad(y, h, grad_outputs=sl.tensor([1.0, 2.0]))
    close(gh, np.exp(h.numpy()) * [1, 2], dict(rtol=1e-6, atol=0))


def test_grad_allow_unused():
    a, b = leaf([1.0]), leaf([2.0])
    y = (a * 2).sum()
    with pytest.raises(RuntimeError, match="allow_unused=True"):
        sl.autograd.grad(y, [a, b], retain_graph=True)
    ga, gb = sl.autograd.grad(y, [a, b], allow_unused=True)
    close(ga, [2])
    assert gb is None


def test_grad_same_input_twice():
    a = leaf([1.0, 2.0])
    g1, g2 = sl.autograd.grad((a * a).sum(), [a, a])
    close(g1, [2, 4])
    close(g2, [2, 4])


def test_grad_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    vx, vm, v = rng.standard_normal((2, 3)), rng.standard_normal((3, 4)), rng.standard_normal((2, 4))
    x, m = leaf(vx, np.float64), leaf(vm, np.float64)
    gx, gm = sl.autograd.grad(sl.sigmoid(x @ m), [x, m], grad_outputs=sl.tensor(v))
    xt, mt = torch.tensor(vx, requires_grad=True), torch.tensor(vm, requires_grad=True)
    gxt, gmt = torch.autograd.grad(torch.sigmoid(xt @ mt), [xt, mt], grad_outputs=torch.tensor(v))
    close(gx, gxt.numpy(), TOL64)
    close(gm, gmt.numpy(), TOL64)


# ---- batched seeds -----------------------------------------------------------------------------------------------
def _model(x, w):
    return sl.tanh(x @ w).sum(dim=0) * 2 + sl.exp(x[0] @ w) * 0.1


def test_batched_grad_equals_k_separate_passes():
    rng = np.random.default_rng(0)
    vx, vw = rng.standard_normal((2, 3)), rng.standard_normal((3, 4))
    seeds = rng.standard_normal((5, 4))
    x, w = leaf(vx, np.float64), leaf(vw, np.float64)
    gx, gw = sl.autograd.grad(_model(x, w), [x, w], grad_outputs=sl.tensor(seeds), batched=True)
    assert gx.shape == (5, 2, 3) and gw.shape == (5, 3, 4)
    for k in range(5):
        x1, w1 = leaf(vx, np.float64), leaf(vw, np.float64)
        _model(x1, w1).backward(sl.tensor(seeds[k]))
        close(gx.numpy()[k], x1.grad.numpy(), TOL64)
        close(gw.numpy()[k], w1.grad.numpy(), TOL64)
    assert x.grad is None and w.grad is None


def test_batched_identity_seeds_give_the_jacobian():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    vx = rng.standard_normal(3)
    x = leaf(vx, np.float64)
    y = sl.sigmoid(x) * x.sum()
    (jac,) = sl.autograd.grad(y, x, grad_outputs=np.eye(3), batched=True)
    jt = torch.autograd.functional.jacobian(lambda t: torch.sigmoid(t) * t.sum(), torch.tensor(vx))
    close(jac, jt.numpy(), TOL64)


def test_batched_through_broadcast_and_leaf_dtype():
    x = leaf([1.0, 2.0, 3.0])  # float32 meets a float64 constant
    b = sl.tensor(np.array([[1.0], [2.0]]))
    y = x * b  # (2, 3) float64
    assert y.dtype == np.float64
    seeds = np.stack([np.ones((2, 3)), np.zeros((2, 3))])
    (g,) = sl.autograd.grad(y, x, grad_outputs=seeds, batched=True)
    assert g.shape == (2, 3) and g.dtype == np.float32
    close(g, [[3, 3, 3], [0, 0, 0]])


def test_batched_errors():
    x = leaf([1.0, 2.0])
    y = x * 2
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        sl.autograd.grad(y, x, grad_outputs=np.ones(2), batched=True)
    with pytest.raises(ValueError, match="batched"):
        sl.autograd.grad(y.sum(), x, batched=True)


# ---- grad modes ----------------------------------------------------------------------------------------------------
def test_no_grad_and_enable_grad_nested():
    x = leaf([1.0])
    assert sl.is_grad_enabled()
    with sl.no_grad():
        assert not sl.is_grad_enabled()
        y = x * 2
        with sl.enable_grad():
            assert sl.is_grad_enabled()
            z = x * 2
            with sl.no_grad():
                w = x * 2
            assert sl.is_grad_enabled()
        assert not sl.is_grad_enabled()
    assert sl.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None and y.is_leaf
    assert z.requires_grad and z.grad_fn is not None
    assert not w.requires_grad


def test_no_grad_restores_mode_after_exception():
    with pytest.raises(ZeroDivisionError):
        with sl.no_grad():
            1 / 0
    assert sl.is_grad_enabled()


def test_grad_mode_decorators():
    x = leaf([1.0])

    @sl.no_grad()
    def f():
        return x * 2

    @sl.no_grad
    def f_bare():
        return x * 2

    @sl.enable_grad()
    def g():
        return x * 2

    assert not f().requires_grad
    assert not f_bare().requires_grad
    assert f_bare.__name__ == "f_bare"
    with sl.no_grad():
        assert g().requires_grad
    assert sl.is_grad_enabled()


def test_set_grad_enabled_context():
    x = leaf([1.0])
    with sl.set_grad_enabled(False):
        assert not (x * 2).requires_grad
        with sl.set_grad_enabled(True):
            assert (x * 2).requires_grad
    assert sl.is_grad_enabled()


def test_set_grad_enabled_as_call_and_decorator():
    x = leaf([1.0])
    try:
        sl.set_grad_enabled(False)  # a plain call switches the mode, as in PyTorch
        assert not sl.is_grad_enabled() and not (x * 2).requires_grad
        sl.set_grad_enabled(True)
        assert sl.is_grad_enabled()
    finally:
        sl.set_grad_enabled(True)

    @sl.set_grad_enabled(False)
    def f():
        return x * 2

    assert sl.is_grad_enabled()  # decorating does not switch the mode
    assert not f().requires_grad
    assert sl.is_grad_enabled()


def test_no_grad_takes_no_arguments():
    with pytest.raises(TypeError, match="no arguments"):
        sl.no_grad(False)


def test_no_grad_output_cannot_backward():
    x = leaf([1.0, 2.0])
    with sl.no_grad():
        y = (x * 2).sum()
    with pytest.raises(RuntimeError, match="does not require grad"):
        y.backward()


# ---- graph structure -------------------------------------------------------------------------------------------------
def test_accumulate_grad_identity_and_constants():
    a = leaf([1.0, 2.0])
    c = sl.tensor([3.0, 4.0])
    y1 = a * c
    y2 = a + 1.0
    (acc1, i1), (none, i2) = y1.grad_fn.next_functions
    (acc2, _), (none2, _) = y2.grad_fn.next_functions
    assert acc1 is acc2 and acc1.variable is a
    assert (none, i2) == (None, 0) and none2 is None and i1 == 0
    assert acc1.next_functions == ()
    assert a.is_leaf and c.is_leaf and not y1.is_leaf
    assert a.grad_fn is None and c.grad_fn is None
    assert y1.grad_fn.name() == "MulBackward0" and y2.grad_fn.name() == "AddBackward0"


def test_next_functions_match_torch_names():
    torch = pytest.importorskip("torch")

    def names(fn):  # torch spells the leaf node "torch::autograd::AccumulateGrad"
        return [(n.name().split("::")[-1] if n is not None else None, i) for n, i in fn.next_functions]

    a, b, d = leaf(2.0), leaf(3.0), leaf(4.0)
    e = (a + b) * d
    at, bt, dt = (torch.tensor(v, requires_grad=True) for v in (2.0, 3.0, 4.0))
    et = (at + bt) * dt
    assert e.grad_fn.name() == et.grad_fn.name()
    assert names(e.grad_fn) == names(et.grad_fn)
    assert names(e.grad_fn.next_functions[0][0]) == names(et.grad_fn.next_functions[0][0])
    f = a * 3.0
    assert names(f.grad_fn)[0] == ("AccumulateGrad", 0)


def test_requires_grad_propagates_and_detach_cuts():
    x = leaf([1.0, 2.0])
    d = x.detach()
    assert not d.requires_grad and d.is_leaf
    assert np.shares_memory(d.numpy(), x.numpy())
    y = d * 2
    assert not y.requires_grad and y.grad_fn is None
    with pytest.raises(RuntimeError, match="leaf"):
        (x * 2).requires_grad = False


def test_backward_on_a_leaf_itself():
    x = leaf([1.0, 2.0])
    x.backward(sl.tensor([3.0, 4.0]))
    close(x.grad, [3, 4])


# ---- long chains -------------------------------------------------------------------------------------------------------
N_CHAIN = 100_000


def test_long_chain_backward_without_recursion():
    x = leaf([1.0], np.float64)
    y = x
    for _ in range(N_CHAIN):
        y = y + 1.0
    assert sys.getrecursionlimit() < N_CHAIN
    y.backward(sl.ones(1, dtype=np.float64))
    close(x.grad, [1.0])
    close(y, [1.0 + N_CHAIN])


def test_long_chain_with_saved_values_and_autograd_grad():
    x = leaf([1.0], np.float64)
    y = x
    for _ in range(N_CHAIN):
        y = y * 1.0
    (g,) = sl.autograd.grad(y.sum(), x)
    close(g, [1.0])


def test_long_chain_can_be_deleted_and_collected():
    x = leaf([1.0])
    y = x
    for _ in range(N_CHAIN):
        y = y * 1.0
    del y
    gc.collect()
    y = x
    for _ in range(N_CHAIN):
        y = y + 1.0
    y.sum().backward()
    del y
    gc.collect()
    close(x.grad, [1.0])


# ---- several roots ------------------------------------------------------------------------------------------------------
def test_backward_several_outputs_at_once():
    a, b = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    y1, y2 = a * b, a + b
    g1, g2 = sl.tensor([1.0, 10.0]), sl.tensor([100.0, 1000.0])
    sl.autograd.backward([y1, y2], [g1, g2])
    close(a.grad, [3 + 100, 40 + 1000])
    close(b.grad, [1 + 100, 20 + 1000])


def test_backward_single_output_gradient_alone_or_in_a_list():
    a = leaf([1.0, 2.0])
    sl.autograd.backward(a * 3, sl.ones(2))
    sl.autograd.backward(a * 3, [sl.ones(2)])
    sl.autograd.backward(a * 3, [1.0, 1.0])
    close(a.grad, [9, 9])


def test_backward_several_outputs_scalar_defaults():
    a = leaf([1.0, 2.0])
    sl.autograd.backward([(a * a).sum(), (a * 3).sum()])
    close(a.grad, [5, 7])
    with pytest.raises(ValueError, match="one per output"):
        sl.autograd.backward([(a * 2).sum(), (a * 2).sum()], [None])


def test_root_that_is_an_ancestor_of_another_root():
    torch = pytest.importorskip("torch")
    a = leaf([1.0, 2.0], np.float64)
    h = a * a
    y = sl.exp(h).sum()
    sl.autograd.backward([h, y], [sl.tensor([1.0, 1.0], dtype=np.float64), None])
    at = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    ht = at * at
    torch.autograd.backward([ht, torch.exp(ht).sum()], [torch.ones(2, dtype=torch.float64), None])
    close(a.grad, at.grad.numpy(), TOL64)


def test_root_ancestor_closed_form():
    a = leaf([1.0, 2.0], np.float64)
    h = a * 3
    y = (h * h).sum()
    sl.autograd.backward([y, h], [None, sl.ones(2, dtype=np.float64)])
    close(a.grad, 18 * a.numpy() + 3, TOL64)


def test_same_root_twice():
    a = leaf([1.0, 2.0])
    y = (a * 2).sum()
    sl.autograd.backward([y, y])
    close(a.grad, [4, 4])


# ---- diamonds ------------------------------------------------------------------------------------------------------------
def test_diamond_tensor_used_twice():
    x = leaf([1.0, 2.0, 3.0], np.float64)
    h = sl.exp(x)
    y = h * h + h  # h used three times
    y.backward(sl.ones(3, dtype=np.float64))
    e = np.exp(x.numpy())
    close(x.grad, 2 * e * e + e, TOL64)


def test_diamond_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    v = rng.standard_normal((3, 3))
    x = leaf(v, np.float64)
    h = sl.tanh(x @ x)
    y = (h @ x + x * h - sl.sigmoid(h)).sum()
    y.backward()
    xt = torch.tensor(v, requires_grad=True)
    ht = torch.tanh(xt @ xt)
    (ht @ xt + xt * ht - torch.sigmoid(ht)).sum().backward()
    close(x.grad, xt.grad.numpy(), TOL64)


# ---- dtypes ---------------------------------------------------------------------------------------------------------------
def test_float64_everywhere():
    x = leaf([0.5, 1.5], np.float64)
    y = (sl.log(x) * sl.exp(x) / x - x ** 2).sum()
    assert y.dtype == np.float64
    y.backward()
    v = x.numpy()
    want = (1 / v) * np.exp(v) / v + np.log(v) * np.exp(v) / v - np.log(v) * np.exp(v) / v ** 2 - 2 * v
    assert x.grad.dtype == np.float64
    close(x.grad, want, TOL64)


def test_grad_keeps_leaf_dtype_when_dtypes_mix():
    x32 = leaf([1.0, 2.0], np.float32)
    w64 = leaf([3.0, 4.0], np.float64)
    y = x32 * w64
    assert y.dtype == np.float64
    y.sum().backward()
    assert x32.grad.dtype == np.float32 and w64.grad.dtype == np.float64
    close(x32.grad, [3, 4])
    close(w64.grad, [1, 2])


def test_seed_dtype_is_cast_to_output_dtype():
    x = leaf([1.0, 2.0], np.float64)
    (x * 2).backward(sl.tensor([1.0, 1.0]))  # float32 seed, float64 output
    assert x.grad.dtype == np.float64


def test_float16_leaf():
    x = leaf([1.0, 2.0], np.float16)
    (x * 3).sum().backward()
    assert x.grad.dtype == np.float16
    close(x.grad, [3, 3])


# ---- error messages --------------------------------------------------------------------------------------------------------
def test_implicit_gradient_error_names_shape_and_fix():
    x = leaf([[1.0, 2.0]])
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs") as info:
        (x * 2).backward()
    assert "(1, 2)" in str(info.value) and "gradient=" in str(info.value)


def test_mismatch_in_shape_names_both_shapes():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match=r"Mismatch in shape.*\(3,\).*\(2,\)"):
        (x * 2).backward(sl.ones(3))
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        (x * 2).backward(sl.ones(1, 2))  # broadcastable is not enough
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        sl.autograd.grad(x * 2, x, grad_outputs=sl.ones(2, 1))


def test_does_not_require_grad():
    with pytest.raises(RuntimeError, match="does not require grad"):
        sl.tensor([1.0, 2.0]).sum().backward()
    with pytest.raises(RuntimeError, match="does not require grad"):
        sl.autograd.grad(leaf([1.0]).sum(), sl.tensor([1.0]))


def test_errors_leave_grads_unchanged():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError):
        (x * 2).backward()
    with pytest.raises(RuntimeError):
        (x * 2).backward(sl.ones(5))
    assert x.grad is None


def test_a_non_leaf_node_has_no_variable_and_says_so_by_its_pytorch_name():
    a = sl.tensor(1.0, requires_grad=True)
    node = (a + a).grad_fn
    with pytest.raises(AttributeError, match="'AddBackward0' object has no attribute 'variable'"):
        node.variable


def test_t_of_a_vector_and_flatten_of_a_flat_tensor_behave_as_in_pytorch():
    x = sl.tensor([1.0, 2.0], requires_grad=True)
    assert x.t().grad_fn.name() == "TBackward0"
    assert x.flatten() is x
    m = sl.tensor([[1.0, 2.0]], requires_grad=True)
    assert m.flatten(1, 1) is m and m.flatten().grad_fn.name() == "ViewBackward0"
