"""The engine shows its work: `trace()` records every node's incoming gradient and outgoing VJPs;
`render_graph` draws next_functions as a tree."""
import numpy as np
import pytest

import saliency as sl

TOL = dict(rtol=1e-6, atol=1e-7)


def graph8():
    a, b, d = (sl.tensor(v, requires_grad=True) for v in (2.0, 3.0, 4.0))
    c = a + b
    e = c * d
    return a, b, c, d, e


def test_trace_seed_example_8_node_by_node():
    a, b, c, d, e = graph8()
    with sl.autograd.trace(names={"a": a, "b": b, "c": c, "d": d, "e": e}) as t:
        e.backward()
    assert [s.name for s in t] == ["MulBackward0", "AccumulateGrad", "AddBackward0", "AccumulateGrad",
                                   "AccumulateGrad"]
    assert [s.index for s in t] == [1, 2, 3, 4, 5] and len(t) == 5
    mul, acc_d, add, acc_a, acc_b = t
    assert mul.node is e.grad_fn and add.node is c.grad_fn
    assert acc_d.node.variable is d and acc_a.node.variable is a and acc_b.node.variable is b
    np.testing.assert_allclose(mul.grad_in, 1.0, **TOL)
    (to_add, g_add), (to_d, g_d) = mul.sends
    assert to_add is add.node and to_d is acc_d.node
    np.testing.assert_allclose(g_add, 4.0, **TOL)  # d
    np.testing.assert_allclose(g_d, 5.0, **TOL)  # c = a + b
    np.testing.assert_allclose(add.grad_in, 4.0, **TOL)
    assert [float(g) for _, g in add.sends] == [4.0, 4.0]
    for step, want in ((acc_d, 5.0), (acc_a, 4.0), (acc_b, 4.0)):
        assert step.sends == []
        np.testing.assert_allclose(step.grad_in, want, **TOL)
        np.testing.assert_allclose(step.leaf_grad, want, **TOL)
    assert mul.leaf_grad is None


def test_trace_x_matmul_m():
    x = sl.tensor([[2.0, 1.0]], requires_grad=True)
    M = sl.tensor([[1.0, 2.0], [3.0, 4.0]])
    y = x @ M
    for seed, want in [([[1.0, 0.0]], [[1, 3]]), ([[0.0, 1.0]], [[2, 4]]), ([[1.0, 1.0]], [[3, 7]])]:
        x.grad = None
        with sl.autograd.trace(names={"x": x}) as t:
            y.backward(sl.tensor(seed), retain_graph=True)
        assert [s.name for s in t] == ["MmBackward0", "AccumulateGrad"]
        mm, acc = t
        np.testing.assert_allclose(mm.grad_in, seed, **TOL)
        (to_x, gx), (to_m, gm) = mm.sends
        assert to_x is acc.node and to_m is None and gm is None  # M needs no gradient
        np.testing.assert_allclose(gx, want, **TOL)
        np.testing.assert_allclose(acc.leaf_grad, want, **TOL)
        np.testing.assert_allclose(x.grad.numpy(), want, **TOL)


def test_trace_leaf_grad_shows_accumulated_value():
    x = sl.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    y.backward(sl.ones(2), retain_graph=True)
    with sl.autograd.trace() as t:
        y.backward(sl.ones(2))
    np.testing.assert_allclose(t[-1].grad_in, [3, 3], **TOL)
    np.testing.assert_allclose(t[-1].leaf_grad, [6, 6], **TOL)


def test_trace_records_are_copies():
    x = sl.tensor([1.0, 2.0], requires_grad=True)
    with sl.autograd.trace() as t:
        (x * 2).sum().backward()
        (x * 2).sum().backward()
    assert len(t) == 6  # both passes, in order
    np.testing.assert_allclose(t[2].leaf_grad, [2, 2], **TOL)
    np.testing.assert_allclose(t[5].leaf_grad, [4, 4], **TOL)


def test_trace_sees_hook_modified_gradient():
    x = sl.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: g * 10)
    with sl.autograd.trace() as t:
        y.sum().backward()
    mul = [s for s in t if s.name == "MulBackward0"][0]
    np.testing.assert_allclose(mul.grad_in, [10, 10], **TOL)
    np.testing.assert_allclose(mul.sends[0][1], [20, 20], **TOL)


def test_trace_is_only_active_inside_the_block():
    x = sl.tensor([1.0], requires_grad=True)
    with sl.autograd.trace() as outer:
        with sl.autograd.trace() as inner:
            (x * 2).sum().backward()
        (x * 3).sum().backward()
    (x * 4).sum().backward()
    assert len(inner) == 3 and len(outer) == 3
    np.testing.assert_allclose(outer[1].sends[0][1], [3], **TOL)


def test_str_is_a_readable_table():
    a, b, c, d, e = graph8()
    with sl.autograd.trace(names={"a": a, "b": b, "c": c, "d": d}) as t:
        e.backward()
    text = str(t)
    lines = text.splitlines()
    assert lines[0].split()[:2] == ["step", "node"] and "VJP" in lines[0]
    assert set(lines[1]) <= {"-", " "}
    assert len(lines) == 2 + 7  # two rows each for Mul and Add (one per input), one per leaf
    assert "MulBackward0" in lines[2] and "AddBackward0(c)" in lines[2] and lines[2].split()[-1] == "4"
    assert "AccumulateGrad(d)" in lines[3] and lines[3].split()[-1] == "5"
    assert any("a.grad" in line and line.split()[-1] == "4" for line in lines)
    assert repr(t) == text


def test_trace_of_batched_grad():
    x = sl.tensor([[2.0, 1.0]], requires_grad=True)
    M = sl.tensor([[1.0, 2.0], [3.0, 4.0]])
    y = x @ M
    y.backward(sl.tensor([[5.0, 5.0]]), retain_graph=True)  # x.grad = [[15, 35]]
    seeds = np.eye(2, dtype=np.float32)[:, None, :]  # (K=2, 1, 2)
    with sl.autograd.trace(names={"x": x}) as t:
        (g,) = sl.autograd.grad(y, x, grad_outputs=seeds, batched=True)
    assert g.shape == (2, 1, 2)
    np.testing.assert_allclose(g.numpy(), [[[1, 3]], [[2, 4]]], **TOL)
    mm, acc = t
    assert mm.grad_in.shape == (2, 1, 2)
    np.testing.assert_allclose(mm.sends[0][1], [[[1, 3]], [[2, 4]]], **TOL)
    np.testing.assert_allclose(acc.grad_in, [[[1, 3]], [[2, 4]]], **TOL)
    assert acc.leaf_grad is None  # autograd.grad does not touch x.grad ...
    assert "untouched" in str(t)  # ... and the table says so
    np.testing.assert_allclose(x.grad.numpy(), [[15, 35]], **TOL)


def test_format_of_large_gradients_is_a_summary():
    x = sl.tensor(np.arange(100, dtype=np.float32), requires_grad=True)
    with sl.autograd.trace() as t:
        (x * 2).sum().backward()
    assert "min 2, max 2, sum 200" in str(t)


# ---- render_graph ----------------------------------------------------------------------------------
def test_render_graph_example_8():
    a, b, c, d, e = graph8()
    text = sl.autograd.render_graph(e, names={"a": a, "b": b, "c": c, "d": d, "e": e})
    lines = text.splitlines()
    assert len(lines) == 5
    assert lines[0].startswith("#1 MulBackward0(e)")
    assert "[0] #2 AddBackward0(c)" in lines[1]
    assert "[0] #3 AccumulateGrad(a)" in lines[2] and "shape ()" in lines[2] and "= 2" in lines[2]
    assert "[1] #4 AccumulateGrad(b)" in lines[3]
    assert "[1] #5 AccumulateGrad(d)" in lines[4] and "= 4" in lines[4]
    # children are indented below their parent
    assert lines[2].index("[0]") > lines[1].index("[0]")
    assert lines[4].index("[1]") == lines[1].index("[0]")


def test_render_graph_shared_nodes_once_and_constants():
    x = sl.tensor(np.ones((2, 3), dtype=np.float32), requires_grad=True)
    w = sl.tensor(np.ones((3, 4), dtype=np.float32))
    h = x @ w
    z = (h * h + h).sum()
    text = sl.autograd.render_graph(z, names={"x": x, "h": h})
    assert text.count("#5 AccumulateGrad(x)") == 1
    assert text.count("MmBackward0(h)") == 3 and text.count("(shared, see #") == 2
    assert "leaf, shape (2, 3)" in text
    assert "None" in text and "[1] None" in text  # w needs no gradient
    assert "SumBackward0" in text.splitlines()[0]


def test_render_graph_without_graph():
    assert "no graph" in sl.autograd.render_graph(sl.tensor([1.0]))
    x = sl.tensor([1.0], requires_grad=True)
    assert sl.autograd.render_graph(x).startswith("#1 AccumulateGrad")


def test_render_graph_of_100000_op_chain():
    x = sl.tensor([1.0], requires_grad=True)
    y = x
    n = 100_000
    for _ in range(n):
        y = y + x
    text = sl.autograd.render_graph(y)
    lines = text.splitlines()
    assert len(lines) == n + 1 + n  # every AddBackward0, x's leaf once, x shared n times
    assert f"#{n} AddBackward0" in text and f"#{n + 1} AccumulateGrad" in text
    assert max(len(line) for line in lines) < 200  # indentation does not grow without end
    y.backward(sl.ones(1))
    np.testing.assert_allclose(x.grad.numpy(), [n + 1], **TOL)
