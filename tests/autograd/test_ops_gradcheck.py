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
