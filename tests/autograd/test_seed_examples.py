"""The numeric examples of the seed texts (SEED_EXAMPLES.md, cases 1-10 and 13), checked as a user would."""
import warnings

import numpy as np
import pytest

import saliency as sl

RTOL, ATOL = 1e-5, 1e-7


def check(t, expected, rtol=RTOL, atol=ATOL):
    assert isinstance(t, sl.Tensor), type(t)
    np.testing.assert_allclose(t.numpy(), np.asarray(expected, dtype=np.float64), rtol=rtol, atol=atol)


# ---- 1. x*2 with one-hot seeds -----------------------------------------------------------------
@pytest.mark.parametrize("seed, want", [
    ([[1.0, 0, 0, 0]], [[2, 0, 0, 0]]),
    ([[0, 1.0, 0, 0]], [[0, 2, 0, 0]]),
    ([[0, 0, 0, 1.0]], [[0, 0, 0, 2]]),
    ([[1.0, 1, 1, 1]], [[2, 2, 2, 2]]),
])
def test_case1_one_hot_seed_picks_one_output(seed, want):
    x = sl.tensor([[1.0, 2.0, 3.0, 4.0]], requires_grad=True)
    z = 2 * x
    z.backward(sl.tensor(seed))
    check(x.grad, want)


def test_case1_seeds_in_sequence_with_zeroing():
    x = sl.tensor([[1.0, 2.0, 3.0, 4.0]], requires_grad=True)
    z = 2 * x
    for seed, want in [([[1.0, 0, 0, 0]], [[2, 0, 0, 0]]), ([[0, 1.0, 0, 0]], [[0, 2, 0, 0]]),
                       ([[1.0, 1, 1, 1]], [[2, 2, 2, 2]])]:
        z.backward(sl.tensor(seed), retain_graph=True)
        check(x.grad, want)
        x.grad.zero_()
    check(x.grad, [[0, 0, 0, 0]])
    loss = z.sum(dim=1)
    assert loss.shape == (1,)
    loss.backward()  # one element: no gradient needed
    check(x.grad, [[2, 2, 2, 2]])


def test_case1_without_zeroing_the_seeds_add_up():
    x = sl.tensor([[1.0, 2.0, 3.0, 4.0]], requires_grad=True)
    z = 2 * x
    z.backward(sl.tensor([[1.0, 0, 0, 0]]), retain_graph=True)
    z.backward(sl.tensor([[0, 1.0, 0, 0]]))
    check(x.grad, [[2, 2, 0, 0]])


# ---- 2. matrix product: the seed picks a weighted sum of Jacobian rows -------------------------
@pytest.mark.parametrize("seed, want", [([[1.0, 0.0]], [[1, 3]]), ([[0.0, 1.0]], [[2, 4]]), ([[1.0, 1.0]], [[3, 7]])])
def test_case2_matmul_seed_selects_jacobian_rows(seed, want):
    x = sl.tensor([[2.0, 1.0]], requires_grad=True)
    M = sl.tensor([[1.0, 2.0], [3.0, 4.0]])
    y = x @ M
    check(y, [[5, 8]])
    y.backward(sl.tensor(seed))
    check(x.grad, want)
    assert M.grad is None


def test_case2_all_seeds_on_one_graph_and_mm():
    x = sl.tensor([[2.0, 1.0]], requires_grad=True)
    M = sl.tensor([[1.0, 2.0], [3.0, 4.0]])
    y = sl.mm(x, M)
    check(y, [[5, 8]])
    for seed, want in [([[1.0, 0.0]], [[1, 3]]), ([[0.0, 1.0]], [[2, 4]]), ([[1.0, 1.0]], [[3, 7]])]:
        y.backward(sl.tensor(seed), retain_graph=True)
        check(x.grad, want)
        x.grad = None


# ---- 3-5. three leaves: y = 3a + 2b^2 + log(c) ----------------------------------------------------
def abc(a, b, c):
    a = sl.tensor(a, requires_grad=True)
    b = sl.tensor(b, requires_grad=True)
    c = sl.tensor(c, requires_grad=True)
    return a, b, c, 3 * a + 2 * b * b + sl.log(c)


def test_case3_vector_seed_three_leaves():
    a, b, c, y = abc([1.0, 2.0, 3.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0])
    y.backward(sl.tensor([0.1, 1.0, 0.0001]))
    check(a.grad, [0.3, 3.0, 3e-4])
    check(b.grad, [1.2, 16.0, 0.002])
    check(c.grad, [0.0166667, 0.142857, 1.25e-5], rtol=1e-5)
    check(c.grad, [0.1 / 6, 1.0 / 7, 0.0001 / 8])


def test_case3_seed_given_as_list():
    a, b, c, y = abc([1.0, 2.0, 3.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0])
    y.backward([0.1, 1.0, 0.0001])
    check(b.grad, [1.2, 16.0, 0.002])


def test_case4_scalars():
    a, b, c, y = abc(0.1, 1.0, 0.1)
    assert y.shape == ()
    y.backward()
    check(a.grad, 3.0)
    check(b.grad, 4.0)
    check(c.grad, 10.0)
    assert a.grad.shape == () and a.grad.dtype == np.float32


def test_case5_accumulation_over_two_backwards():
    a, b, c, y = abc(1.0, 1.0, 1.0)
    y.backward(retain_graph=True)
    check(a.grad, 3.0)
    y.backward()
    check(a.grad, 6.0)
    check(b.grad, 8.0)
    check(c.grad, 2.0)


# ---- 6. the doubling loop --------------------------------------------------------------------------
def test_case6_doubling_loop():
    rng = np.random.default_rng(0)
    x = sl.tensor(rng.standard_normal(3).astype(np.float32), requires_grad=True)
    y = x * 2
    k = 1
    while float(np.linalg.norm(y.numpy())) < 1000:
        y = y * 2
        k += 1
    assert k > 5
    check(y, x.numpy() * 2.0 ** k, rtol=1e-6)
    v = np.array([0.1, 1.0, 0.0001], dtype=np.float32)
    y.backward(sl.tensor(v))
    check(x.grad, v.astype(np.float64) * 2.0 ** k)


def test_case6_doubling_loop_with_tensor_norm():
    rng = np.random.default_rng(0)
    x = sl.randn(3, generator=rng, requires_grad=True)
    y = x * 2
    k = 1
    while y.norm().item() < 1000:
        y = y * 2
        k += 1
    y.backward(sl.tensor([0.1, 1.0, 0.0001]))
    check(x.grad, np.array([0.1, 1.0, 0.0001], dtype=np.float32) * 2.0 ** k)


# ---- 7. scalar sum ------------------------------------------------------------------------------------
def test_case7_sum_backward_gives_ones():
    x = sl.randn(3, generator=np.random.default_rng(0), requires_grad=True)
    x.sum().backward()
    check(x.grad, [1, 1, 1])


# ---- 8. the graph -------------------------------------------------------------------------------------
def test_case8_graph_structure_and_gradients():
    a = sl.tensor(2.0, requires_grad=True)
    b = sl.tensor(3.0, requires_grad=True)
    d = sl.tensor(4.0, requires_grad=True)
    c = a + b
    e = c * d
    check(e, 20.0)
    assert e.grad_fn.name() == "MulBackward0"
    (add, i0), (acc_d, i1) = e.grad_fn.next_functions
    assert (i0, i1) == (0, 0)
    assert add is c.grad_fn and add.name() == "AddBackward0"
    assert acc_d.name() == "AccumulateGrad"
    assert acc_d.variable is d
    with pytest.raises(AttributeError):
        add.variable
    (acc_a, _), (acc_b, _) = add.next_functions
    assert acc_a.variable is a and acc_b.variable is b
    assert all(n.name() == "AccumulateGrad" for n in (acc_a, acc_b))
    e.backward()
    check(a.grad, 4.0)
    check(b.grad, 4.0)
    check(d.grad, 5.0)


# ---- 9. gradient = target --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_case9_seed_equals_gradient_of_weighted_sum(dtype):
    rng = np.random.default_rng(0)
    w = sl.tensor(rng.standard_normal((3, 4)).astype(dtype), requires_grad=True)
    t = rng.standard_normal((2, 3)).astype(dtype)
    x_np = rng.standard_normal((2, 4)).astype(dtype)

    x1 = sl.tensor(x_np, requires_grad=True)
    y1 = sl.tanh(x1 @ w.transpose(0, 1))
    y1.backward(sl.tensor(t))
    gw1 = w.grad.numpy().copy()
    w.grad = None

    x2 = sl.tensor(x_np, requires_grad=True)
    y2 = sl.tanh(x2 @ w.transpose(0, 1))
    (y2 * sl.tensor(t)).sum().backward()
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(x1.grad.numpy(), x2.grad.numpy(), **tol)
    np.testing.assert_allclose(gw1, w.grad.numpy(), **tol)
    assert x1.grad.dtype == dtype


# ---- 10. leaves only ---------------------------------------------------------------------------------------
def test_case10_only_leaves_and_retained_get_grad():
    x = sl.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    k = x * 5
    k.retain_grad()
    (h * k).sum().backward()
    with pytest.warns(UserWarning, match="retain_grad"):
        assert h.grad is None
    check(k.grad, h.numpy())
    check(x.grad, 2 * 15 * x.numpy())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k.grad  # a retained gradient is read without a warning
        x.grad


# ---- 13. errors ---------------------------------------------------------------------------------------------
def test_case13_vector_output_needs_a_gradient():
    x = sl.randn(3, generator=np.random.default_rng(0), requires_grad=True)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        x.mul(2).backward()
    assert x.grad is None


def test_case13_gradient_of_wrong_shape():
    y = sl.tensor([1.0, 2.0, 3.0], requires_grad=True).sum()
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        y.backward(sl.ones(3))


def test_case13_second_backward_without_retain_graph():
    x = sl.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()
    check(x.grad, [2.0, 4.0])  # the failed call added nothing
