"""Tensor construction, dtypes, factories, conversions, repr, operators, in-place rules, NaN/inf."""
import numpy as np
import pytest

import saliency as sl

FLOATS = [np.float16, np.float32, np.float64]
INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8]
NUMERIC = FLOATS + INTS + [np.bool_]


# ---- construction -------------------------------------------------------------------------------
def test_from_float_list_defaults_to_float32():
    t = sl.tensor([1.0, 2.5])
    assert t.dtype == np.float32 and t.shape == (2,)
    np.testing.assert_array_equal(t.numpy(), [1.0, 2.5])


def test_from_nested_list():
    t = sl.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert t.shape == (2, 3) and t.dtype == np.float32 and t.ndim == 2 and t.dim() == 2
    assert t.numel() == 6 and len(t) == 2 and t.size() == (2, 3) and t.size(1) == 3
    assert t.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]


def test_mixed_int_float_list_is_float32():
    assert sl.tensor([1, 2.5]).dtype == np.float32


@pytest.mark.parametrize("value, dtype", [(2.5, np.float32), (3, np.int64), (True, np.bool_),
                                          ([1, 2], np.int64), ([True, False], np.bool_)])
def test_from_python_scalars_and_lists(value, dtype):
    t = sl.tensor(value)
    assert t.dtype == dtype
    assert t.shape == np.shape(value)


@pytest.mark.parametrize("dtype", NUMERIC)
def test_numpy_array_keeps_its_dtype(dtype):
    a = np.array([[1, 0], [1, 1]], dtype=dtype)
    t = sl.tensor(a)
    assert t.dtype == dtype and t.shape == (2, 2)
    np.testing.assert_array_equal(t.numpy(), a)


@pytest.mark.parametrize("dtype", NUMERIC)
def test_numpy_scalar_keeps_its_dtype(dtype):
    t = sl.tensor(dtype(1))
    assert t.dtype == dtype and t.shape == ()
    assert t.item() == 1


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_tensors_can_require_grad(dtype):
    t = sl.tensor(np.ones(2, dtype=dtype), requires_grad=True)
    assert t.requires_grad and t.is_leaf and t.grad is None


@pytest.mark.parametrize("dtype", INTS + [np.bool_])
def test_integer_and_bool_tensors_cannot_require_grad(dtype):
    with pytest.raises(TypeError, match=f"floating point.*dtype {np.dtype(dtype)}.*float"):
        sl.tensor(np.ones(2, dtype=dtype), requires_grad=True)
    t = sl.tensor(np.ones(2, dtype=dtype))
    with pytest.raises(TypeError, match="floating point"):
        t.requires_grad_()
    with pytest.raises(TypeError, match="floating point"):
        sl.zeros(2, dtype=dtype, requires_grad=True)
    assert not t.requires_grad


@pytest.mark.parametrize("bad", ["abc", ["a", "b"], object(), [object()], {"a": 1}, [1.0, "x"], 1 + 2j])
def test_strings_objects_and_complex_raise_type_error(bad):
    with pytest.raises(TypeError, match="cannot make a tensor"):
        sl.tensor(bad)


def test_ragged_list_raises_type_error():
    with pytest.raises(TypeError, match="cannot make a tensor"):
        sl.tensor([[1.0, 2.0], [3.0]])


def test_explicit_dtype():
    t = sl.tensor([1, 2], dtype=np.float64)
    assert t.dtype == np.float64
    assert sl.tensor([1.5], dtype=sl.float64).dtype == np.float64
    assert sl.tensor(np.array([1.5, 2.5]), dtype=np.float32).dtype == np.float32


def test_tensor_copies_from_numpy_shares():
    a = np.array([1.0, 2.0])
    t = sl.tensor(a)
    s = sl.from_numpy(a)
    a[0] = 100.0
    assert t.numpy()[0] == 1.0
    assert s.numpy()[0] == 100.0
    assert np.shares_memory(s.numpy(), a) and not np.shares_memory(t.numpy(), a)
    assert s.dtype == np.float64
    with pytest.raises(TypeError, match="np.ndarray"):
        sl.from_numpy([1.0, 2.0])


def test_tensor_of_tensor_copies():
    a = sl.tensor([1.0, 2.0])
    b = sl.tensor(a)
    b.data[0] = 5.0
    assert a.numpy()[0] == 1.0


# ---- factories ----------------------------------------------------------------------------------
def test_zeros_ones_full():
    z = sl.zeros(2, 3)
    assert z.shape == (2, 3) and z.dtype == np.float32 and not z.numpy().any()
    assert sl.zeros((2, 3)).shape == (2, 3)
    o = sl.ones(4, dtype=np.float64, requires_grad=True)
    assert o.dtype == np.float64 and o.requires_grad
    np.testing.assert_array_equal(o.numpy(), np.ones(4))
    f = sl.full((2, 2), 7.5)
    assert f.dtype == np.float32
    np.testing.assert_array_equal(f.numpy(), np.full((2, 2), 7.5))
    assert sl.full(3, 1.0).shape == (3,)


def test_randn_with_generator_is_reproducible():
    a = sl.randn(3, 4, generator=np.random.default_rng(0))
    b = sl.randn(3, 4, generator=np.random.default_rng(0))
    c = sl.randn(3, 4, generator=np.random.default_rng(1))
    assert a.shape == (3, 4) and a.dtype == np.float32
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not np.array_equal(a.numpy(), c.numpy())
    np.testing.assert_allclose(a.numpy(), np.random.default_rng(0).standard_normal((3, 4)), rtol=1e-6, atol=1e-7)
    u = sl.rand(1000, generator=np.random.default_rng(0))
    assert 0.0 <= u.numpy().min() and u.numpy().max() < 1.0


def test_like_factories_copy_shape_and_dtype():
    x = sl.tensor(np.zeros((2, 3), dtype=np.float64), requires_grad=True)
    rng = np.random.default_rng(0)
    for t in (sl.zeros_like(x), sl.ones_like(x), sl.full_like(x, 3.0), sl.randn_like(x, generator=rng),
              sl.rand_like(x, generator=rng)):
        assert t.shape == (2, 3) and t.dtype == np.float64
        assert not t.requires_grad
    np.testing.assert_array_equal(sl.full_like(x, 3.0).numpy(), np.full((2, 3), 3.0))
    np.testing.assert_array_equal(sl.ones_like(x).numpy(), np.ones((2, 3)))
    assert sl.zeros_like(x, dtype=np.float32).dtype == np.float32
    assert sl.ones_like(np.zeros(4, dtype=np.float16)).dtype == np.float16


def test_arange():
    a = sl.arange(5)
    assert a.dtype == np.int64
    np.testing.assert_array_equal(a.numpy(), [0, 1, 2, 3, 4])
    b = sl.arange(1, 2, 0.25)
    assert b.dtype == np.float32
    np.testing.assert_allclose(b.numpy(), [1.0, 1.25, 1.5, 1.75], rtol=0, atol=0)
    c = sl.arange(3, dtype=np.float64)
    assert c.dtype == np.float64


# ---- conversions --------------------------------------------------------------------------------
def test_item_numpy_asarray():
    t = sl.tensor([[2.5]])
    assert t.item() == 2.5 and isinstance(t.item(), float)
    assert float(t) == 2.5 and int(sl.tensor(3)) == 3
    assert isinstance(sl.tensor(3).item(), int)
    with pytest.raises(ValueError, match="one element"):
        sl.tensor([1.0, 2.0]).item()
    x = sl.tensor([1.0, 2.0], requires_grad=True)
    n = x.numpy()
    assert isinstance(n, np.ndarray) and np.shares_memory(n, x.numpy())
    a = np.asarray(x)
    assert a.dtype == np.float32
    np.testing.assert_array_equal(a, [1.0, 2.0])
    assert np.asarray(x, dtype=np.float64).dtype == np.float64
    assert np.array(x).tolist() == [1.0, 2.0]


def test_bool_of_tensor():
    assert bool(sl.tensor([1.0])) and not bool(sl.tensor(0.0))
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(sl.tensor([1.0, 2.0]))


# ---- repr ---------------------------------------------------------------------------------------
def test_repr_like_pytorch():
    assert repr(sl.tensor([[1.0, 3.0]], requires_grad=True)) == "tensor([[1., 3.]], requires_grad=True)"
    a, b, d = (sl.tensor(v, requires_grad=True) for v in (2.0, 3.0, 4.0))
    assert repr((a + b) * d) == "tensor(20., grad_fn=<MulBackward0>)"
    assert repr(sl.tensor([0.1, 2.0])) == "tensor([0.1000, 2.0000])"
    assert repr(sl.tensor([1, 2, 3])) == "tensor([1, 2, 3])"
    assert repr(sl.tensor([True, False])) == "tensor([ True, False])"
    assert repr(sl.tensor(np.array([1.5, 2.0]))) == "tensor([1.5000, 2.0000], dtype=float64)"
    assert repr(sl.tensor([[1.0, 2.0], [3.0, 4.0]])) == "tensor([[1., 2.],\n        [3., 4.]])"


@pytest.mark.parametrize("values", [[0.1, 2.0], [1e-5, 1.0], [float("nan"), float("inf"), 1.5], [-1.5, 2.25],
                                    [0.0, 0.0], [-0.0, 1.0], [1e10, 3e10], [float("-inf"), 2.0], 2.5, [],
                                    [[1.0, 2.0], [3.0, 4.0]], list(np.linspace(0, 1, 30))])
def test_repr_matches_torch(values):
    torch = pytest.importorskip("torch")
    assert repr(sl.tensor(values)) == repr(torch.tensor(values, dtype=torch.float32))


def test_repr_of_large_tensor_is_summarized():
    text = repr(sl.zeros(100, 100))
    assert "..." in text and len(text) < 2000


# ---- operators with ndarrays and numbers ------------------------------------------------------------
@pytest.mark.parametrize("op", ["+", "-", "*", "/", "**"])
def test_ndarray_op_tensor_both_sides(op):
    rng = np.random.default_rng(0)
    a = rng.uniform(0.5, 2.0, (2, 3)).astype(np.float32)
    x_np = rng.uniform(0.5, 2.0, (2, 3)).astype(np.float32)
    x = sl.tensor(x_np, requires_grad=True)
    fn = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide, "**": np.power}[op]
    left = eval(f"a {op} x")
    right = eval(f"x {op} a")
    assert isinstance(left, sl.Tensor) and isinstance(right, sl.Tensor)
    assert left.requires_grad and right.requires_grad
    np.testing.assert_allclose(left.numpy(), fn(a, x_np), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(right.numpy(), fn(x_np, a), rtol=1e-6, atol=1e-6)


def test_ndarray_matmul_tensor_both_sides_and_grad():
    m = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    x = sl.tensor([[2.0, 1.0]], requires_grad=True)
    y = x @ m
    np.testing.assert_allclose(y.numpy(), [[5, 8]], rtol=0, atol=0)
    z = m @ x.transpose(0, 1)
    np.testing.assert_allclose(z.numpy(), [[4], [10]], rtol=0, atol=0)
    (y.sum() + z.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), [[3 + 4, 7 + 6]], rtol=0, atol=0)


def test_python_numbers_on_both_sides():
    x = sl.tensor([1.0, 2.0], requires_grad=True)
    y = 1 - x / 2 + 3 * x ** 2 - 2 ** x
    assert y.dtype == np.float32
    v = np.array([1.0, 2.0])
    np.testing.assert_allclose(y.numpy(), 1 - v / 2 + 3 * v ** 2 - 2 ** v, rtol=1e-6, atol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), -0.5 + 6 * v - np.log(2) * 2 ** v, rtol=1e-6, atol=1e-6)


def test_integer_ndarray_meets_float_tensor():
    x = sl.tensor([1.0, 2.0], requires_grad=True)
    y = x * np.array([2, 3])
    assert y.dtype == np.float32
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2, 3])


def test_comparisons_give_bool_tensors_without_grad():
    x = sl.tensor([1.0, 2.0, 3.0], requires_grad=True)
    a = np.array([2.0, 2.0, 2.0])
    results = {"<": x < 2, "<=": x <= 2, ">": x > 2, ">=": x >= 2, "==": x == 2, "!=": x != 2,
               "t<t": x < sl.tensor(a), "a<t": a < x, "a==t": a == x}
    want = {"<": [1, 0, 0], "<=": [1, 1, 0], ">": [0, 0, 1], ">=": [0, 1, 1], "==": [0, 1, 0], "!=": [1, 0, 1],
            "t<t": [1, 0, 0], "a<t": [0, 0, 1], "a==t": [0, 1, 0]}
    for key, r in results.items():
        assert isinstance(r, sl.Tensor), key
        assert r.dtype == np.bool_ and not r.requires_grad and r.grad_fn is None, key
        np.testing.assert_array_equal(r.numpy(), np.array(want[key], dtype=bool), err_msg=key)


def test_tensor_is_hashable_by_identity():
    a, b = sl.tensor([1.0]), sl.tensor([1.0])
    assert len({a, b}) == 2 and {a: 1}[a] == 1


# ---- in place -----------------------------------------------------------------------------------
@pytest.mark.parametrize("method, args", [("zero_", ()), ("fill_", (3.0,)), ("copy_", ([5.0, 6.0],)),
                                          ("add_", (1.0,)), ("mul_", (2.0,))])
def test_in_place_on_leaf_requiring_grad(method, args):
    x = sl.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="in place.*no_grad"):
        getattr(x, method)(*args)
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])
    with sl.no_grad():
        out = getattr(x, method)(*args)
    assert out is x and x.requires_grad
    expected = {"zero_": [0, 0], "fill_": [3, 3], "copy_": [5, 6], "add_": [2, 3], "mul_": [2, 4]}[method]
    np.testing.assert_array_equal(x.numpy(), expected)


def test_in_place_on_plain_tensor_and_grad():
    t = sl.tensor([1.0, 2.0])
    t.fill_(4.0)
    np.testing.assert_array_equal(t.numpy(), [4.0, 4.0])
    x = sl.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    x.grad.zero_()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0])


def test_grad_assignment():
    x = sl.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    x.grad = None
    assert x.grad is None
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])
    x.grad = sl.tensor([1.0, 1.0])
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 4.0])
    with pytest.raises(ValueError, match=r"\(3,\).*\(2,\)"):
        x.grad = sl.zeros(3)
    x.grad = np.array([1.0, 2.0])  # float64 data: the gradient keeps the tensor's dtype
    assert x.grad.dtype == np.float32
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 5.0])


# ---- NaN and inf --------------------------------------------------------------------------------
def test_nan_and_inf_propagate_forward_and_backward():
    x = sl.tensor([np.nan, np.inf, 1.0], requires_grad=True)
    y = x * x
    assert np.isnan(y.numpy()[0]) and np.isposinf(y.numpy()[1]) and y.numpy()[2] == 1.0
    y.sum().backward()
    g = x.grad.numpy()
    assert np.isnan(g[0]) and np.isposinf(g[1]) and g[2] == 2.0


def test_nan_in_seed_reaches_the_leaves():
    x = sl.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).backward(sl.tensor([np.nan, 1.0]))
    g = x.grad.numpy()
    assert np.isnan(g[0]) and g[1] == 3.0


def test_inf_times_zero_gradient_is_nan_not_zero():
    x = sl.tensor([0.0, 1.0], requires_grad=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        y = sl.log(x)  # -inf at 0, gradient 1/x = inf there
        assert np.isneginf(y.numpy()[0])
        (y * 0.0).sum().backward()  # 0 * (1/0) = nan, as in PyTorch
    assert np.isnan(x.grad.numpy()[0]) and x.grad.numpy()[1] == 0.0


def test_nan_matches_torch():
    torch = pytest.importorskip("torch")
    v = np.array([np.nan, np.inf, -np.inf, 0.0, 2.0])
    x = sl.tensor(v, requires_grad=True)
    with np.errstate(all="ignore"):
        y = sl.exp(x) * x + sl.sqrt(x * x)
        y.sum().backward()
    xt = torch.tensor(v, requires_grad=True)
    (torch.exp(xt) * xt + torch.sqrt(xt * xt)).sum().backward()
    np.testing.assert_array_equal(y.numpy(), (torch.exp(xt) * xt + torch.sqrt(xt * xt)).detach().numpy())
    np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())


def test_deepcopy_of_a_leaf_is_independent_and_of_a_non_leaf_is_refused():
    import copy

    x = sl.tensor([1.0, 2.0], requires_grad=True)
    (x * 2).sum().backward()
    y = copy.deepcopy(x)
    (y * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(y.grad.numpy(), [5.0, 5.0])
    with pytest.raises(RuntimeError, match="only leaf tensors can be deep-copied"):
        copy.deepcopy(x * 2)
