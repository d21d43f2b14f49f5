"""Every op of the spec table against PyTorch on identical inputs: the forward output and the
input gradients of y.backward(v) for a random v, in float32 and float64; plus ties and kinks."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import saliency as sl  # noqa: E402
from _op_specs import SPECS  # noqa: E402

TOLERANCES = {np.float32: dict(rtol=1e-4, atol=1e-5), np.float64: dict(rtol=1e-10, atol=1e-12)}


def _torch_dtype(dtype):
    return {np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64}[np.dtype(dtype)]


def _both(arrays):
    ours = [sl.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    return ours, theirs


def _assert_same_backward(ours, theirs, y, yt, v, tol):
    """Run y.backward(v) in both libraries and compare every input's gradient."""
    y.backward(sl.tensor(v))
    yt.backward(torch.tensor(v))
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a.grad is not None, f"input {i} got no gradient"
        assert a.grad.dtype == a.dtype, f"input {i}: gradient dtype {a.grad.dtype}, input dtype {a.dtype}"
        assert a.grad.shape == a.shape
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), err_msg=f"gradient of input {i}", **tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("spec", SPECS, ids=repr)
def test_forward_and_backward_match_torch(spec, dtype):
    rng = np.random.default_rng(0)
    arrays = spec.arrays(rng, dtype)
    ours, theirs = _both(arrays)
    y = spec.fn(*ours)
    yt = spec.torch_fn(*theirs)
    tol = TOLERANCES[dtype]
    assert y.shape == tuple(yt.shape)
    assert _torch_dtype(y.dtype) == yt.dtype, f"output dtype {y.dtype}, torch gives {yt.dtype}"
    np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), **tol)
    v = rng.standard_normal(y.shape).astype(y.dtype)
    _assert_same_backward(ours, theirs, y, yt, v, tol)


# ---- ties and kinks: where finite differences say nothing, PyTorch's choice is the reference -----
TIES = {
    "amax all, ties split evenly": lambda x: x.amax(),
    "amax dim, ties split evenly": lambda x: x.amax(1),
    "amin dims, ties split evenly": lambda x: x.amin((0, 1)),
    "max(), ties split evenly": lambda x: x.max(),
    "min(), ties split evenly": lambda x: x.min(),
    "max(dim) to the first index": lambda x: x.max(1).values,
    "max(dim, keepdim) to the first index": lambda x: x.max(0, keepdim=True)[0],
    "min(dim) to the first index": lambda x: x.min(1).values,
    "norm inf, ties split evenly": lambda x: x.norm(p=float("inf")),
    "clamp at both bounds passes": lambda x: x.clamp(-1.0, 2.0),
    "clamp min at the bound passes": lambda x: x.clamp(min=2.0),
    "clamp max at the bound passes": lambda x: x.clamp(max=-1.0),
    "relu at 0 gives 0": lambda x: x.relu(),
    "abs at 0 gives 0": lambda x: x.abs(),
    "norm 1 at 0 gives 0": lambda x: x.norm(p=1),
    "norm 2 of zeros gives 0": lambda x: (x * 0.0).norm(),
}
TIED = np.array([[2.0, -1.0, 2.0, 0.0], [-1.0, -1.0, 0.0, 2.0], [0.0, 2.0, 2.0, -1.0]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", list(TIES))
def test_ties_and_kinks_match_torch(name, dtype):
    fn = TIES[name]
    ours, theirs = _both([TIED.astype(dtype)])
    y, yt = fn(*ours), fn(*theirs)
    tol = TOLERANCES[dtype]
    np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), **tol)
    v = np.random.default_rng(0).uniform(1.0, 2.0, y.shape).astype(dtype)
    _assert_same_backward(ours, theirs, y, yt, v, tol)


def test_max_dim_gives_the_whole_gradient_to_the_first_maximum():
    x = sl.tensor([[3.0, 1.0, 3.0], [0.0, 5.0, 5.0]], requires_grad=True)
    x.max(1).values.backward(sl.tensor([1.0, 2.0]))
    np.testing.assert_allclose(x.grad.numpy(), [[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]], rtol=0, atol=0)


def test_amax_splits_the_gradient_between_ties():
    x = sl.tensor([[3.0, 1.0, 3.0], [3.0, 0.0, -1.0]], requires_grad=True)
    x.amax().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[1 / 3, 0.0, 1 / 3], [1 / 3, 0.0, 0.0]], rtol=1e-6, atol=0)


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_minimum_ties_split_in_half(op):
    a = np.array([[1.0, 2.0, -3.0], [0.5, 0.5, 4.0]])
    b = np.array([[1.0, -2.0, -3.0], [0.5, 1.5, 4.0]])
    ours, theirs = _both([a, b])
    y, yt = getattr(sl, op)(*ours), getattr(torch, op)(*theirs)
    v = np.arange(1.0, 7.0).reshape(2, 3)
    _assert_same_backward(ours, theirs, y, yt, v, TOLERANCES[np.float64])
    tie = a == b
    np.testing.assert_allclose(ours[0].grad.numpy()[tie], v[tie] / 2, rtol=0, atol=0)
    np.testing.assert_allclose(ours[1].grad.numpy()[tie], v[tie] / 2, rtol=0, atol=0)


def test_maximum_ties_split_in_half_under_broadcasting():
    a = np.array([[1.0], [2.0]])
    b = np.array([1.0, 2.0, 0.0])
    ours, theirs = _both([a, b])
    y, yt = sl.maximum(*ours), torch.maximum(*theirs)
    _assert_same_backward(ours, theirs, y, yt, np.ones((2, 3)), TOLERANCES[np.float64])


@pytest.mark.parametrize("fn", [lambda x: x.relu(), lambda x: x.clamp(-1.0, 1.0), lambda x: x.sigmoid(),
                                lambda x: x.tanh(), lambda x: x.exp(), lambda x: x * 2.0],
                         ids=["relu", "clamp", "sigmoid", "tanh", "exp", "mul"])
def test_nonfinite_input_gradient_matches_torch(fn):
    """relu passes the gradient at NaN, as PyTorch's threshold_backward does (NaN <= 0 is false);
    clamp stops it (NaN is not inside the bounds). abs deliberately differs from PyTorch, whose
    sign(NaN) = 0 zeroes the gradient: see test_ops_nonfinite.py."""
    a = np.array([np.nan, -1.0, 0.5, np.inf, -np.inf])
    ours, theirs = _both([a])
    y, yt = fn(*ours), fn(*theirs)
    np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), rtol=0, atol=0, equal_nan=True)
    v = np.array([3.0, 1.0, 2.0, 4.0, 5.0])
    y.backward(sl.tensor(v))
    yt.backward(torch.tensor(v))
    np.testing.assert_allclose(ours[0].grad.numpy(), theirs[0].grad.numpy(), rtol=0, atol=0, equal_nan=True)


def test_relu_passes_the_gradient_at_nan():
    x = sl.tensor([np.nan, -1.0, 1.0], requires_grad=True)
    y = x.relu()
    assert np.isnan(y.numpy()[0])
    y.backward(sl.tensor([2.0, 2.0, 2.0]))
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 0.0, 2.0], rtol=0, atol=0)


# ---- type promotion: the result dtype PyTorch picks for mixed operands ---------------------------
OPERANDS = {
    "float32 (2,3)": np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3),
    "float64 (3,)": np.array([1.5, 2.0, 3.0]),
    "int64 (2,3)": np.arange(1, 7).reshape(2, 3),
    "float64 0-d": np.array(2.0),
    "float32 0-d": np.array(2.0, dtype=np.float32),
    "int64 0-d": np.array(3),
    "python float": 0.5,
    "python int": 2,
}
MIXED = [("float32 (2,3)", "int64 (2,3)"), ("int64 (2,3)", "float32 (2,3)"), ("float32 (2,3)", "float64 0-d"),
         ("float64 0-d", "float32 (2,3)"), ("float32 (2,3)", "float64 (3,)"), ("int64 (2,3)", "float64 0-d"),
         ("int64 (2,3)", "python float"), ("int64 0-d", "float32 0-d"), ("float32 (2,3)", "python int"),
         ("int64 (2,3)", "python int"), ("float64 0-d", "float32 0-d")]
PROMOTING_OPS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
                 "div": lambda a, b: a / b, "pow": lambda a, b: a ** b,
                 "maximum": lambda a, b: a.maximum(b) if not isinstance(a, (int, float)) else None}


def _as(lib, value):
    if isinstance(value, (int, float)):
        return value
    return sl.tensor(value) if lib is sl else torch.tensor(value)


@pytest.mark.parametrize("op", list(PROMOTING_OPS))
@pytest.mark.parametrize("pair", MIXED, ids=[f"{a} with {b}" for a, b in MIXED])
def test_mixed_dtypes_promote_as_torch(pair, op):
    fn = PROMOTING_OPS[op]
    a, b = (OPERANDS[k] for k in pair)
    if op == "maximum" and isinstance(b, (int, float)):
        b = np.array(b)  # torch.maximum takes tensors only
    ours, theirs = fn(_as(sl, a), _as(sl, b)), fn(_as(torch, a), _as(torch, b))
    assert str(ours.dtype) == str(theirs.dtype).replace("torch.", ""), f"{pair}: {ours.dtype} vs {theirs.dtype}"
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6, atol=0)


def test_where_promotes_as_torch():
    x32 = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    cond = x32 > 2
    ours = sl.where(cond, sl.tensor(x32), sl.tensor(np.array(-1.0)))
    theirs = torch.where(torch.tensor(cond), torch.tensor(x32), torch.tensor(np.array(-1.0)))
    assert ours.dtype == np.float32 and theirs.dtype == torch.float32
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=0, atol=0)
