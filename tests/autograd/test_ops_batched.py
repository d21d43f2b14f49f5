"""K seeds through ONE backward pass (`sl.autograd.grad(..., batched=True)`) equal K separate
passes, over composite expressions that chain many ops; each composite is also gradchecked."""
import numpy as np
import pytest

import saliency as sl
from _op_specs import COND, MASK, positive, real, spec

TARGET = np.array([2, 0, 1, 2])
K = 4


def mlp(x, w1, b1, w2):
    """A two-layer perceptron: softmax probabilities and per-row and mean cross-entropy."""
    logits = (x @ w1 + b1).relu() @ w2
    return sl.cat([logits.softmax(1).flatten(), sl.cross_entropy(logits, TARGET, reduction="none"),
                   sl.cross_entropy(logits, TARGET).reshape(1)])


def mlp_loss(x, w1, b1, w2):
    """A scalar training loss: mean cross-entropy plus weight decay."""
    logits = sl.tanh(x @ w1 + b1) @ w2
    return sl.cross_entropy(logits, TARGET) + 0.1 * ((w1 ** 2).sum() + w2.norm() ** 2)


def gather_and_stack(x, w):
    """Repeated-row, strided, array and mask indexing, matmul, cat, stack, permute, pad, max."""
    a = sl.cat([x[[0, 2, 2, 1]] @ w, x[1:, ::2], x[..., [3, 0]]], dim=0)  # (9, 2)
    b = sl.stack([a, a.tanh() * x[MASK].sum()], dim=-1).permute(2, 0, 1)  # (2, 9, 2)
    return sl.pad(b, (1, 0), value=-5.0).max(dim=2).values + b.logsumexp(0).sum(1)


def elementwise(x, y):
    """Broadcasting, where, maximum, clamp, pow, sqrt, exp, log, sigmoid, mse_loss."""
    z = sl.where(COND, x.sigmoid(), y.exp()) * (x ** 2 + 1).sqrt()
    return sl.maximum(z, x.clamp(-0.5, 0.5)) / (y.abs() + 1) - (sl.mse_loss(x, y.expand(3, 4), reduction="none")
                                                                + 1).log() + 2.0 ** y - y ** 0.5


def reductions(x):
    """norm, mean, amax, log_softmax, min(dim), sum over several dims, matmul of 3-D operands."""
    return sl.cat([x.norm(dim=-1).flatten(), x.mean((0, 2)), x.amax(1).flatten(),
                   x.log_softmax(1).min(2).values.flatten(), x.norm(p=3).reshape(1),
                   (x @ x.transpose(1, 2)).sum((0, -1)), x.unsqueeze(0).squeeze().sum(dim=[])[None]])


def seg_loss(x, w):
    """A 1x1-convolution-like head on (N, C, H, W) features and a per-pixel cross-entropy."""
    logits = (x.permute(0, 2, 3, 1) @ w).permute(0, 3, 1, 2)  # (2, 3, 2, 2)
    target = np.array([[[0, 2], [1, 1]], [[2, 0], [0, 1]]])
    return sl.stack([sl.cross_entropy(logits, target), sl.nll_loss(logits.log_softmax(1), target, "sum")])


COMPOSITES = [
    spec("mlp", mlp, [(4, 5), (5, 3), (3,), (3, 3)]),
    spec("mlp_loss", mlp_loss, [(4, 5), (5, 3), (3,), (3, 3)]),
    spec("gather_and_stack", gather_and_stack, [(3, 4), (4, 2)]),
    spec("elementwise", elementwise, [(3, 4), (4,)], domain=(real, positive)),
    spec("reductions", reductions, [(2, 3, 4)]),
    spec("seg_loss", seg_loss, [(2, 4, 2, 2), (4, 3)]),
]


def _leaves(s, dtype):
    return [sl.tensor(a, requires_grad=True) for a in s.arrays(np.random.default_rng(0), dtype)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("composite", COMPOSITES, ids=repr)
def test_batched_grad_equals_separate_grads(composite, dtype):
    leaves = _leaves(composite, dtype)
    y = composite.fn(*leaves)
    seeds = np.random.default_rng(1).standard_normal((K,) + y.shape).astype(dtype)
    batched = sl.autograd.grad(y, leaves, sl.tensor(seeds), retain_graph=True, batched=True)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)
    for leaf, rows in zip(leaves, batched):
        assert rows.shape == (K,) + leaf.shape
        assert rows.dtype == leaf.dtype
    for k in range(K):
        separate = sl.autograd.grad(y, leaves, sl.tensor(seeds[k]), retain_graph=True)
        for i, (rows, g) in enumerate(zip(batched, separate)):
            np.testing.assert_allclose(rows.numpy()[k], g.numpy(), err_msg=f"seed {k}, input {i}", **tol)


@pytest.mark.parametrize("composite", COMPOSITES, ids=repr)
def test_composite_gradcheck(composite):
    assert sl.autograd.gradcheck(composite.fn, _leaves(composite, np.float64), eps=1e-6, atol=1e-5, rtol=1e-3,
                                 check_batched=True)


def test_batched_grad_of_two_outputs_sums_their_vjps():
    x = sl.tensor(np.random.default_rng(0).standard_normal((3, 4)), requires_grad=True)
    y1, y2 = x.softmax(1), x.sum(0)
    rng = np.random.default_rng(1)
    v1, v2 = rng.standard_normal((K, 3, 4)), rng.standard_normal((K, 4))
    (both,) = sl.autograd.grad([y1, y2], [x], [sl.tensor(v1), sl.tensor(v2)], retain_graph=True, batched=True)
    for k in range(K):
        (a,) = sl.autograd.grad(y1, [x], sl.tensor(v1[k]), retain_graph=True)
        (b,) = sl.autograd.grad(y2, [x], sl.tensor(v2[k]), retain_graph=True)
        np.testing.assert_allclose(both.numpy()[k], a.numpy() + b.numpy(), rtol=1e-12, atol=1e-13)


def test_identity_seeds_give_the_jacobian_rows():
    """With the rows of the identity as seeds, the batched pass is the Jacobian: for x @ W it is W^T."""
    rng = np.random.default_rng(0)
    x = sl.tensor(rng.standard_normal(4), requires_grad=True)
    w = rng.standard_normal((4, 3))
    (jac,) = sl.autograd.grad(x @ w, [x], sl.tensor(np.eye(3)), batched=True)
    np.testing.assert_allclose(jac.numpy(), w.T, rtol=1e-12, atol=1e-13)
