"""NaN and inf go through every elementwise op, forward and backward, as the math says: a NaN
input or a NaN in the seed is never silently turned into 0 (only where the op itself routes the
gradient elsewhere: relu below 0, clamp outside its bounds, the branch where() did not pick)."""
import numpy as np
import pytest

import saliency as sl

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

X = np.array([np.nan, np.inf, -np.inf, 0.7, -1.3, 2.0])
SEEDS = {"finite seed": np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
         "NaN in seed": np.array([1.0, 2.0, 3.0, np.nan, 5.0, np.nan])}


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


# name: (op on tensors, forward in NumPy, gradient in NumPy given x and the seed v)
UNARY = {
    "neg": (lambda x: -x, np.negative, lambda x, v: -v),
    "exp": (sl.exp, np.exp, lambda x, v: v * np.exp(x)),
    "log": (sl.log, np.log, lambda x, v: v / x),
    "sqrt": (sl.sqrt, np.sqrt, lambda x, v: v / (2 * np.sqrt(x))),
    "abs": (sl.abs, np.abs, lambda x, v: v * np.sign(x)),  # sign(NaN) is NaN here; PyTorch's is 0
    "relu": (sl.relu, lambda x: np.maximum(x, 0), lambda x, v: np.where(x <= 0, 0, v)),
    "sigmoid": (sl.sigmoid, _sigmoid, lambda x, v: v * _sigmoid(x) * (1 - _sigmoid(x))),
    "tanh": (sl.tanh, np.tanh, lambda x, v: v * (1 - np.tanh(x) ** 2)),
    "clamp": (lambda x: x.clamp(-1.0, 1.0), lambda x: np.clip(x, -1.0, 1.0),
              lambda x, v: np.where((x >= -1) & (x <= 1), v, 0)),
    "pow_number": (lambda x: x ** 3, lambda x: x ** 3, lambda x, v: v * 3 * x ** 2),
    "pow_number_base": (lambda x: 2.0 ** x, lambda x: 2.0 ** x, lambda x, v: v * 2.0 ** x * np.log(2.0)),
    "mul_scalar": (lambda x: x * 3.0, lambda x: x * 3.0, lambda x, v: 3.0 * v),
    "add_scalar": (lambda x: x + 3.0, lambda x: x + 3.0, lambda x, v: v),
    "rdiv_scalar": (lambda x: 3.0 / x, lambda x: 3.0 / x, lambda x, v: -3.0 * v / x ** 2),
    "clone": (sl.clone, np.copy, lambda x, v: v),
    "float": (lambda x: x.float(), lambda x: x.astype(np.float32), lambda x, v: v),
}


@pytest.mark.parametrize("seed", list(SEEDS))
@pytest.mark.parametrize("op", list(UNARY))
def test_unary_nonfinite(op, seed):
    fn, forward, grad = UNARY[op]
    x = sl.tensor(X, requires_grad=True)
    y = fn(x)
    with np.errstate(all="ignore"):
        want_y, want_g = forward(X), grad(X, SEEDS[seed])
    np.testing.assert_allclose(y.numpy(), want_y, rtol=1e-6, atol=0, equal_nan=True)
    y.backward(sl.tensor(SEEDS[seed].astype(y.dtype)))
    np.testing.assert_allclose(x.grad.numpy(), want_g, rtol=1e-6, atol=0, equal_nan=True)


A = np.array([np.nan, 1.0, np.inf, -np.inf, 2.0, np.inf, 0.5])
B = np.array([1.0, np.nan, 2.0, 3.0, np.inf, np.inf, 0.5])
WHERE = np.array([True, False, True, False, True, False, True])

# name: (op on tensors, forward in NumPy, gradients (dx, dy) in NumPy given x, y and the seed v)
BINARY = {
    "add": (lambda x, y: x + y, np.add, lambda x, y, v: (v, v)),
    "sub": (lambda x, y: x - y, np.subtract, lambda x, y, v: (v, -v)),
    "mul": (lambda x, y: x * y, np.multiply, lambda x, y, v: (v * y, v * x)),
    "div": (lambda x, y: x / y, np.divide, lambda x, y, v: (v / y, -v * x / y ** 2)),
    "maximum": (sl.maximum, np.maximum,
                lambda x, y, v: (np.where(x < y, 0, np.where(x == y, v / 2, v)),
                                 np.where(y < x, 0, np.where(x == y, v / 2, v)))),
    "minimum": (sl.minimum, np.minimum,
                lambda x, y, v: (np.where(x > y, 0, np.where(x == y, v / 2, v)),
                                 np.where(y > x, 0, np.where(x == y, v / 2, v)))),
    "where": (lambda x, y: sl.where(WHERE, x, y), lambda x, y: np.where(WHERE, x, y),
              lambda x, y, v: (np.where(WHERE, v, 0), np.where(WHERE, 0, v))),
}
BINARY_SEEDS = {"finite seed": np.arange(1.0, 8.0), "NaN in seed": np.array([1.0, np.nan, 3, 4, np.nan, 6, np.nan])}


@pytest.mark.parametrize("seed", list(BINARY_SEEDS))
@pytest.mark.parametrize("op", list(BINARY))
def test_binary_nonfinite(op, seed):
    fn, forward, grad = BINARY[op]
    x, y = sl.tensor(A, requires_grad=True), sl.tensor(B, requires_grad=True)
    z = fn(x, y)
    v = BINARY_SEEDS[seed]
    with np.errstate(all="ignore"):
        want_z, (want_gx, want_gy) = forward(A, B), grad(A, B, v)
    np.testing.assert_allclose(z.numpy(), want_z, rtol=1e-6, atol=0, equal_nan=True)
    z.backward(sl.tensor(v.astype(z.dtype)))
    np.testing.assert_allclose(x.grad.numpy(), want_gx, rtol=1e-6, atol=0, equal_nan=True)
    np.testing.assert_allclose(y.grad.numpy(), want_gy, rtol=1e-6, atol=0, equal_nan=True)


def test_nan_seed_reaches_a_broadcast_operand():
    """A NaN anywhere in the seed makes the summed gradient of a broadcast operand NaN."""
    x, b = sl.tensor(np.ones((2, 3)), requires_grad=True), sl.tensor(np.ones(3), requires_grad=True)
    (x * b).backward(sl.tensor([[1.0, np.nan, 1.0], [1.0, 1.0, 1.0]]))
    assert np.isnan(b.grad.numpy()[1]) and np.isfinite(b.grad.numpy()[[0, 2]]).all()
    assert np.isnan(x.grad.numpy()[0, 1]) and np.isfinite(np.delete(x.grad.numpy().ravel(), 1)).all()


@pytest.mark.parametrize("method", ["amax", "amin"])
def test_nan_extremum_gives_a_nan_gradient_not_zero(method):
    """amax of a row holding NaN is NaN; the row's gradient is NaN (as PyTorch's), other rows are exact."""
    x = sl.tensor([[1.0, np.nan, 3.0], [1.0, 5.0, -2.0]], requires_grad=True)
    y = getattr(x, method)(1)
    assert np.isnan(y.numpy()[0])
    y.backward(sl.tensor([1.0, 1.0]))
    assert np.isnan(x.grad.numpy()[0]).all()
    want = [0.0, 1.0, 0.0] if method == "amax" else [0.0, 0.0, 1.0]
    np.testing.assert_allclose(x.grad.numpy()[1], want, rtol=0, atol=0)


@pytest.mark.parametrize("fn", [lambda x: x.logsumexp(1), lambda x: x.softmax(1), lambda x: x.log_softmax(1),
                                lambda x: x.norm(dim=1), lambda x: x.norm(p=3, dim=1)],
                         ids=["logsumexp", "softmax", "log_softmax", "norm", "norm_p3"])
def test_nan_propagates_through_reductions_and_softmax(fn):
    """The derivative of these depends on every input of the row: a NaN makes it NaN."""
    x = sl.tensor([[1.0, np.nan, 3.0], [1.0, 5.0, -2.0]], requires_grad=True)
    y = fn(x)
    assert np.isnan(y.numpy()[0]).all() and np.isfinite(y.numpy()[1]).all()
    y.backward(sl.ones_like(y))
    assert np.isnan(x.grad.numpy()[0, 1])
    assert np.isfinite(x.grad.numpy()[1]).all()


@pytest.mark.parametrize("method, scale", [("sum", 1.0), ("mean", 1 / 3)])
def test_linear_reductions_of_nan(method, scale):
    """sum and mean are linear: NaN in the output, but the gradient (the seed) stays exact."""
    x = sl.tensor([[1.0, np.nan, 3.0], [1.0, 5.0, -2.0]], requires_grad=True)
    y = getattr(x, method)(1)
    assert np.isnan(y.numpy()[0]) and np.isfinite(y.numpy()[1])
    y.backward(sl.tensor([2.0, np.nan]))
    np.testing.assert_allclose(x.grad.numpy(), [[2 * scale] * 3, [np.nan] * 3], rtol=1e-6, atol=0, equal_nan=True)
