"""The activation functions of ops/activation.py and nn/activation.py beyond the op-spec table:
PyTorch's values and gradients at the kinks and at non-finite inputs, GELU's lower tail,
signatures, `inplace`, reprs, errors, PReLU's weight, and the cropped VJP of a pixel seed through
a small network against PyTorch. (The normal CDF kernel is tested in tests/kernels.)"""
import inspect
import math
import warnings

import numpy as np
import pytest

import saliency as sl
import saliency.nn as nn
import saliency.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional
SQRT1_2 = 0.7071067811865476  # 1 / sqrt(2) correctly rounded (C's M_SQRT1_2; 1 / math.sqrt(2) is 1 ulp below)

# kinks of every op (0; +-1 for hardtanh; +-3 for hardswish/hardsigmoid; 6 for relu6; beta * x = threshold
# for softplus), far values, and the non-finite ones
# (NaN is compared separately, one element at a time: PyTorch's vectorised kernels give another gradient
# at NaN than its scalar ones, so its result for a NaN depends on the NaN's place in memory)
KINKS = np.array([-3.0, 0.0, 3.0, 6.0, -1.0, 1.0, 0.5, -0.5, 10.0, 20.0, 21.0, -20.0, -2.9999, 2.9999, 1e-300,
                  -1e-300, np.inf, -np.inf, 800.0, -800.0])

ACTIVATIONS = {  # name: (ours, PyTorch's)
    "relu6": (F.relu6, TF.relu6),
    "hardtanh": (F.hardtanh, TF.hardtanh),
    "hardtanh(-3, 0.5)": (lambda x: F.hardtanh(x, -3.0, 0.5), lambda x: TF.hardtanh(x, -3.0, 0.5)),
    "leaky_relu": (F.leaky_relu, TF.leaky_relu),
    "leaky_relu(-0.3)": (lambda x: F.leaky_relu(x, -0.3), lambda x: TF.leaky_relu(x, -0.3)),
    "elu": (F.elu, TF.elu),
    "elu(2)": (lambda x: F.elu(x, 2.0), lambda x: TF.elu(x, 2.0)),
    "silu": (F.silu, TF.silu),
    "hardswish": (F.hardswish, TF.hardswish),
    "hardsigmoid": (F.hardsigmoid, TF.hardsigmoid),
    "gelu": (F.gelu, TF.gelu),
    "gelu tanh": (lambda x: F.gelu(x, approximate="tanh"), lambda x: TF.gelu(x, approximate="tanh")),
    "softplus": (F.softplus, TF.softplus),
    "softplus(2, 1)": (lambda x: F.softplus(x, 2.0, 1.0), lambda x: TF.softplus(x, 2.0, 1.0)),
    "softplus(0.5, 3)": (lambda x: F.softplus(x, beta=0.5, threshold=3.0),
                         lambda x: TF.softplus(x, beta=0.5, threshold=3.0)),
    "mish": (F.mish, TF.mish),
    "relu": (F.relu, TF.relu),
    "sigmoid": (sl.sigmoid, torch.sigmoid),
    "tanh": (sl.tanh, torch.tanh),
}
# float32: PyTorch's vectorised float32 erf and tanh lose up to ~1e-4 relative where 1 + erf(x) cancels (ours
# is computed from erfc in float64); float64: rounding order, and x * Phi(x) at x = -20 is -5.5e-88 here, -0.0
# in PyTorch (1 + erf(-20 / sqrt 2) rounds to 0 there)
TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-13, atol=1e-15)}
# (name, dtype): inputs where PyTorch's result is not the reference, and why
KNOWN = {("gelu", np.float32): (np.isinf, "PyTorch's vectorised float32 erf gives NaN at +-inf; ours gives "
                                          "gelu(inf) = inf and gelu(-inf) = NaN, as PyTorch's float64 kernel")}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_kinks_and_nonfinite_inputs_match_pytorch(name, dtype):
    """Where finite differences say nothing, PyTorch's choice of gradient is the reference."""
    ours_fn, torch_fn = ACTIVATIONS[name]
    skip, _ = KNOWN.get((name, dtype), (lambda a: np.zeros(a.shape, bool), ""))
    values = KINKS[~skip(KINKS)]
    x = sl.tensor(values.astype(dtype), requires_grad=True)
    tx = torch.tensor(values.astype(dtype), requires_grad=True)
    y, ty = ours_fn(x), torch_fn(tx)
    assert y.dtype == dtype
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), equal_nan=True, **TOL[dtype])
    v = np.random.default_rng(0).uniform(1.0, 2.0, values.shape).astype(dtype)
    y.backward(sl.tensor(v))
    ty.backward(torch.tensor(v))
    assert x.grad.dtype == dtype
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), equal_nan=True, **TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_a_nan_input_gives_pytorchs_scalar_result(name, dtype):
    """NaN out; the gradient at NaN as PyTorch's scalar kernel (a one-element tensor) gives it."""
    ours_fn, torch_fn = ACTIVATIONS[name]
    x = sl.tensor(np.array([np.nan], dtype), requires_grad=True)
    tx = torch.tensor(np.array([np.nan], dtype), requires_grad=True)
    y, ty = ours_fn(x), torch_fn(tx)
    assert np.isnan(y.numpy()).all() and np.isnan(ty.detach().numpy()).all()
    y.backward(sl.tensor(np.array([1.5], dtype)))
    ty.backward(torch.tensor(np.array([1.5], dtype)))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), equal_nan=True, **TOL[dtype])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("shape,w_shape", [((20,), (1,)), ((1, 20), (20,)), ((20, 1), (1,)), ((), (1,))])
def test_prelu_at_kinks_and_nonfinite_inputs_matches_pytorch(shape, w_shape, dtype):
    values = KINKS[:int(np.prod(shape, dtype=int))].reshape(shape)
    w = np.random.default_rng(1).uniform(-0.5, 0.5, w_shape)
    x, wt = sl.tensor(values.astype(dtype), requires_grad=True), sl.tensor(w.astype(dtype), requires_grad=True)
    tx, twt = torch.tensor(values.astype(dtype), requires_grad=True), torch.tensor(w.astype(dtype), requires_grad=True)
    y, ty = F.prelu(x, wt), TF.prelu(tx, twt)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), equal_nan=True, **TOL[dtype])
    v = np.random.default_rng(0).uniform(1.0, 2.0, y.shape).astype(dtype)
    y.backward(sl.tensor(v))
    ty.backward(torch.tensor(v))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), equal_nan=True, **TOL[dtype])
    np.testing.assert_allclose(wt.grad.numpy(), twt.grad.numpy(), equal_nan=True, **TOL[dtype])


def test_inplace_is_accepted_and_leaves_the_input_alone():
    a = np.array([-2.0, -0.5, 0.5, 7.0])
    for name in ("relu", "relu6", "hardtanh", "leaky_relu", "elu", "silu", "hardswish", "hardsigmoid", "mish"):
        x = sl.tensor(a.copy(), requires_grad=True)
        y = getattr(F, name)(x, inplace=True)
        np.testing.assert_array_equal(x.numpy(), a)
        np.testing.assert_allclose(y.numpy(), getattr(TF, name)(torch.tensor(a)).numpy(), rtol=1e-14)
        y.sum().backward()
        assert x.grad is not None
    for layer in (nn.ReLU(True), nn.ReLU6(True), nn.Hardtanh(inplace=True), nn.LeakyReLU(inplace=True),
                  nn.ELU(inplace=True), nn.SiLU(True), nn.Hardswish(True), nn.Hardsigmoid(True), nn.Mish(True)):
        x = sl.tensor(a.copy())
        layer(x)
        np.testing.assert_array_equal(x.numpy(), a)


# ---- the normal CDF behind GELU ---------------------------------------------------------------------
def test_gelu_is_accurate_in_the_lower_tail():
    """x * Phi(x) from erfc keeps its relative precision where 1 + erf(x / sqrt 2) cancels."""
    x = np.array([-8.0, -12.0, -20.0, -30.0])
    want = np.array([v * 0.5 * math.erfc(-v * SQRT1_2) for v in x])
    np.testing.assert_allclose(F.gelu(sl.tensor(x)).numpy(), want, rtol=1e-15, atol=0)
    assert (F.gelu(sl.tensor(x)).numpy() < 0).all()


# ---- signatures, reprs, errors ------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["relu", "relu6", "hardtanh", "leaky_relu", "elu", "silu", "hardswish", "hardsigmoid",
                                  "mish"])
def test_functional_signatures_are_pytorchs(name):
    ours = inspect.signature(getattr(F, name)).parameters
    theirs = inspect.signature(getattr(TF, name)).parameters
    assert [(p.name, p.default) for p in ours.values()] == [(p.name, p.default) for p in theirs.values()]


def test_builtin_signatures_are_pytorchs():
    """gelu, softplus and prelu are C functions in PyTorch (no signature to read): as documented
    (names, kinds and defaults; the annotations are this package's)."""
    def plain(fn):
        sig = inspect.signature(fn)
        return str(sig.replace(parameters=[p.replace(annotation=inspect.Parameter.empty)
                                           for p in sig.parameters.values()],
                               return_annotation=inspect.Signature.empty))

    assert plain(F.gelu) == "(input, *, approximate='none')"
    assert plain(F.softplus) == "(input, beta=1.0, threshold=20.0)"
    assert plain(F.prelu) == "(input, weight)"
    with pytest.raises(TypeError):
        F.gelu(sl.tensor([1.0]), "tanh")  # keyword-only, as in PyTorch


LAYERS = ["ReLU()", "ReLU(True)", "ReLU6()", "ReLU6(inplace=True)", "Hardtanh()", "Hardtanh(-2, 2, True)",
          "Hardtanh(min_val=0.5, max_val=2.0)", "LeakyReLU()", "LeakyReLU(0.2, inplace=True)", "ELU()",
          "ELU(alpha=0.5, inplace=True)", "SiLU()", "SiLU(True)", "Hardswish()", "Hardswish(True)", "Hardsigmoid(True)",
          "GELU()", "GELU('tanh')", "GELU(approximate='none')", "Softplus()", "Softplus(2, 5)", "Softplus(beta=0.5)",
          "Mish()", "Mish(True)", "PReLU()", "PReLU(3)", "PReLU(num_parameters=4, init=0.1)", "Sigmoid()", "Tanh()"]


@pytest.mark.parametrize("expr", LAYERS)
def test_layer_repr_and_attributes_are_pytorchs(expr):
    ours, theirs = eval("nn." + expr), eval("torch.nn." + expr)
    assert repr(ours) == repr(theirs)
    for attr in ("inplace", "min_val", "max_val", "negative_slope", "alpha", "approximate", "beta", "threshold",
                 "num_parameters", "init"):
        assert hasattr(ours, attr) == hasattr(theirs, attr), attr
        if hasattr(theirs, attr):
            assert getattr(ours, attr) == getattr(theirs, attr), attr
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert isinstance(ours, nn.Hardtanh) == isinstance(theirs, torch.nn.Hardtanh)


def test_hardtanh_takes_the_deprecated_names_with_a_warning():
    with pytest.warns(FutureWarning, match="min_value"):
        layer = nn.Hardtanh(min_value=-2.0)
    assert (layer.min_val, layer.max_val) == (-2.0, 1.0)
    with pytest.warns(FutureWarning, match="max_value"):
        assert nn.Hardtanh(max_value=3.0).max_val == 3.0


@pytest.mark.parametrize("call,error,match", [
    (lambda: F.gelu(sl.tensor([1.0]), approximate="erf"), ValueError, "approximate"),
    (lambda: nn.GELU("fast"), ValueError, "approximate"),
    (lambda: F.hardtanh(sl.tensor([1.0]), 2.0, 1.0), ValueError, "min_val"),
    (lambda: nn.Hardtanh(1.0, 1.0), ValueError, "max_val"),
    (lambda: F.prelu(sl.tensor(np.ones((2, 3, 4))), sl.tensor(np.ones(4))), ValueError, "4 weights .* 3 channels"),
    (lambda: F.prelu(sl.tensor(np.ones(3)), sl.tensor(np.ones(3))), ValueError, "1 channels"),
    (lambda: F.prelu(sl.tensor(np.ones((2, 3))), sl.tensor(np.ones((1, 3)))), ValueError, "one dimension"),
    (lambda: F.prelu(sl.tensor(np.ones((2, 3))), sl.tensor(np.ones(3, np.float32))), TypeError, "dtype"),
    (lambda: nn.PReLU(device="cuda"), ValueError, "device"),
], ids=["gelu approximate", "GELU approximate", "hardtanh bounds", "Hardtanh bounds", "prelu channels",
        "prelu 1-d", "prelu 2-d weight", "prelu dtypes", "PReLU device"])
def test_bad_arguments_raise_one_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_node_names_are_pytorchs():
    x = sl.tensor(np.ones((2, 3)), requires_grad=True)
    tx = torch.ones((2, 3), dtype=torch.float64, requires_grad=True)
    assert F.relu6(x).grad_fn.name() == TF.relu6(tx).grad_fn.name() == "HardtanhBackward0"
    w, tw = sl.tensor(np.ones(3), requires_grad=True), torch.ones(3, dtype=torch.float64, requires_grad=True)
    assert F.prelu(x, w).grad_fn.name() == TF.prelu(tx, tw).grad_fn.name() == "PreluKernelBackward0"


# ---- PReLU -------------------------------------------------------------------------------------------------
def test_prelu_weight_is_a_parameter_named_weight_and_loads_from_pytorch():
    layer = nn.PReLU(3, dtype=np.float64)
    assert isinstance(layer.weight, nn.Parameter) and layer.weight.dtype == np.float64
    np.testing.assert_array_equal(layer.weight.numpy(), [0.25] * 3)
    theirs = torch.nn.PReLU(3)
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor([0.1, -0.2, 0.3]))
    ours = nn.PReLU(3)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 4)).astype(np.float32)
    np.testing.assert_allclose(ours(sl.tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(), rtol=1e-6)


def test_no_grad_keeps_no_derivative():
    x = sl.tensor(np.linspace(-4, 4, 9), requires_grad=True)
    with sl.no_grad():
        y = F.gelu(x)
    assert y.grad_fn is None
    np.testing.assert_allclose(y.numpy(), TF.gelu(torch.tensor(np.linspace(-4, 4, 9))).numpy(), rtol=1e-14)


# ---- a pixel seed through a small network: the cropped VJPs (and PReLU's weight sums) against PyTorch ----
def _network(lib):
    torch_nn = lib is torch
    m = torch.nn if torch_nn else nn
    return m.Sequential(m.Conv2d(2, 4, 3, padding=1), m.PReLU(4), m.Conv2d(4, 4, 3, padding=1), m.Hardswish(),
                        m.Conv2d(4, 3, 3, padding=1), m.GELU(), m.Conv2d(3, 3, 3, padding=1), m.ELU(0.5),
                        m.Conv2d(3, 2, 3, padding=1), m.Mish(), m.Conv2d(2, 2, 1), m.SiLU(), m.Softplus(2.0, 3.0),
                        m.LeakyReLU(0.1), m.ReLU6(), m.Hardsigmoid(), m.Hardtanh(0.2, 0.9))


def test_a_pixel_seed_through_every_activation_matches_pytorch():
    torch.manual_seed(0)
    theirs = _network(torch).double()
    ours = _network(sl)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    ours.double()
    x = np.random.default_rng(0).standard_normal((2, 2, 24, 20))
    xs, xt = sl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y, yt = ours(xs), theirs(xt)
    np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), rtol=1e-10, atol=1e-12)
    seed = np.zeros(y.shape)
    seed[1, 0, 11, 7] = 1.0  # one pixel: its gradient stays in windows (Patch) down to the input
    y.backward(sl.tensor(seed))
    yt.backward(torch.tensor(seed))
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-14)
    assert np.count_nonzero(xs.grad.numpy()) < xs.numel() // 2
    np.testing.assert_allclose(ours[1].weight.grad.numpy(), theirs[1].weight.grad.numpy(), rtol=1e-9, atol=1e-14)
