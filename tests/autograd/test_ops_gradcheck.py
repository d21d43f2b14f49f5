"""Every op of the spec table against central finite differences in float64, one backward pass
per Jacobian row and one batched pass with all rows as seeds; and every node's name against
PyTorch's."""
import numpy as np
import pytest

import saliency as sl
from _op_specs import SPECS

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


def _leaves(spec, dtype=np.float64):
    rng = np.random.default_rng(0)
    return [sl.tensor(a, requires_grad=True) for a in spec.arrays(rng, dtype)]


@pytest.mark.parametrize("spec", SPECS, ids=repr)
def test_gradcheck(spec):
    inputs = _leaves(spec)
    assert sl.autograd.gradcheck(spec.fn, inputs, eps=spec.fd_eps, atol=1e-5, rtol=1e-3, check_batched=True)


@pytest.mark.parametrize("spec", SPECS, ids=repr)
def test_node_name_matches_torch(spec):
    torch = pytest.importorskip("torch")
    ours = spec.fn(*_leaves(spec))
    leaves = [torch.tensor(a, requires_grad=True) for a in spec.arrays(np.random.default_rng(0))]
    theirs = spec.torch_fn(*leaves)
    node = theirs.grad_fn
    if node is None:  # torch returned a leaf itself (e.g. .double() of a float64 tensor): so must we
        assert ours.grad_fn is None and ours.is_leaf
        return
    if not all(f is None or type(f).__name__ == "AccumulateGrad" for f, _ in node.next_functions):
        pytest.skip(f"torch builds several nodes for {spec.id}")
    assert ours.grad_fn is not None
    assert ours.grad_fn.name() == type(node).__name__


# ---- gradcheck itself: it must catch a wrong VJP, and a VJP that ignores seed dimensions ----------
class _SkewedExp(sl.autograd.Function):
    """exp with a VJP that is 1% too large."""

    def forward(self, x):
        self.save_for_backward(np.exp(x))
        return self.saved[0]

    def backward(self, g):
        return (g * self.saved[0] * 1.01,)


class _SeedBlindFlip(sl.autograd.Function):
    """x[::-1] whose VJP flips axis 0, which is the seed axis when seeds are batched."""

    def forward(self, x):
        return x[::-1].copy()

    def backward(self, g):
        return (g[::-1],)


def test_gradcheck_catches_a_wrong_vjp():
    x = sl.tensor(np.random.default_rng(0).standard_normal(3), requires_grad=True)
    with pytest.raises(sl.autograd.GradcheckError, match="differs from finite differences"):
        sl.autograd.gradcheck(_SkewedExp.apply, [x], eps=1e-6, atol=1e-5, rtol=1e-3)
    assert not sl.autograd.gradcheck(_SkewedExp.apply, [x], raise_exception=False)


def test_gradcheck_catches_a_vjp_that_ignores_seed_dimensions():
    x = sl.tensor(np.random.default_rng(0).standard_normal(4), requires_grad=True)
    assert sl.autograd.gradcheck(_SeedBlindFlip.apply, [x], check_batched=False)
    with pytest.raises(sl.autograd.GradcheckError, match="batched backward"):
        sl.autograd.gradcheck(_SeedBlindFlip.apply, [x], check_batched=True)


@pytest.mark.parametrize("layout", ["fortran", "read-only", "strided"])
def test_gradcheck_perturbs_inputs_of_any_layout_and_restores_them(layout):
    a = np.random.default_rng(0).standard_normal((4, 6))
    data = {"fortran": np.asfortranarray(a), "read-only": a.copy(), "strided": a[:, ::2]}[layout]
    data.flags.writeable = layout != "read-only"
    x = sl.Tensor(data, requires_grad=True)
    before = x.numpy().copy()
    assert sl.autograd.gradcheck(lambda t: (t * t).sum(1), [x], eps=1e-6, atol=1e-5, rtol=1e-3)
    assert x.numpy() is data
    np.testing.assert_array_equal(x.numpy(), before)
