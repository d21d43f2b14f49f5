"""The rule-based methods on every real architecture file (tests/realmodels/archs, ported by its import
lines): LRP under epsilon_plus_flat conserves the seeded score to 1e-6 with the biases zeroed and the
stabilisers small, and DeepLift is complete; or the method raises RuleError naming the op it has
no rule for (and for a gate, a product of two data-dependent tensors, conserves with Pass() given
for it). No PyTorch needed: the ported file is built on its own, with random weights.

"Conserves" counts what ZPlus cannot pass on, reported as `dropped`: relevance that reaches an
output with no positive contribution (possible where a branch joins a residual addition before
its ReLU, or below a sigmoid output) has no input to go to under Zennit's formula; the test
checks that the map, the biases and that account add up to the score, with the biases zeroed.
"""
import numpy as np
import pytest

import saliency
from saliency.attribution import Pass, RuleError, deeplift, lrp, seeds

from . import porting


def _model(path):
    """The file's small model (TEST_KWARGS), float64, eval mode: weights of He's scale (activations of
    order one however deep), batch norms with trained-looking statistics, every bias and running mean
    zeroed (so that only the stabilisers can lose relevance)."""
    shape, kwargs, xfail = porting.settings(path)
    if xfail:
        pytest.skip(xfail)
    saliency.manual_seed(0)
    model = porting.load(path, "saliency").build(**kwargs).double().eval()
    rng = np.random.default_rng(0)
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            p.numpy()[...] = 0
        elif p.ndim > 1:
            fan_in = p[0].numel() if "transpose" not in type(p).__name__.lower() else p.shape[0]
            p.numpy()[...] = rng.normal(0, np.sqrt(2 / fan_in), p.shape)
    for m in model.modules():
        var = getattr(m, "running_var", None)
        if var is not None:
            var.numpy()[...] = rng.uniform(0.5, 1.5, var.shape)
            m.running_mean.numpy()[...] = 0
    return model, shape


def _seed(y):
    """The top class of each image, or for a dense output the all-ones seed."""
    return seeds.ones() if y.ndim == 4 else None


CASES = [pytest.param(p, id=porting.arch_name(p)) for p in porting.arch_files()]


@pytest.mark.parametrize("path", CASES)
def test_lrp_conserves_the_score_or_names_the_op_without_a_rule(path):
    model, shape = _model(path)
    x = np.random.default_rng(1).uniform(0, 1, shape)
    y = model(saliency.tensor(x))
    kwargs = dict(composite="epsilon_plus_flat", epsilon=1e-12, stabilizer=1e-12)
    try:
        attr = lrp(model, x, _seed(y), **kwargs)
    except RuleError as exc:
        assert " in module " in str(exc) and "no rule for " in str(exc)
        if "no rule for Mul " not in str(exc):
            return
        # a gate (squeeze-and-excitation): Pass() gives the relevance to the signal, as the message says
        attr = lrp(model, x, _seed(y), rules={"Mul": Pass()}, **kwargs)
    c = attr.extras["conservation"]
    scale = np.abs(c["score"]).max()
    np.testing.assert_allclose(c["input"] + c["biases"] + c["dropped"], c["score"], rtol=0, atol=1e-6 * scale)
    np.testing.assert_allclose(c["biases"], 0, atol=1e-9 * scale)


@pytest.mark.parametrize("path", CASES)
def test_deeplift_is_complete_or_names_the_op_without_a_rule(path):
    model, shape = _model(path)
    x = np.random.default_rng(2).uniform(0, 1, shape)
    y = model(saliency.tensor(x))
    try:
        attr = deeplift(model, x, _seed(y), baseline=0.5)
    except RuleError as exc:
        assert " in module " in str(exc) and "no rule for " in str(exc)
        return
    delta = np.abs(attr.extras["delta"]).max()
    assert np.abs(attr.extras["completeness_error"]).max() <= 1e-9 * max(delta, 1.0)
