"""DeepLift (rescale), DeepLiftShap and GradientShap on the engine's own ops: complete through every
nonlinearity and max pooling, the same map for functional code and reused modules, a RuleError for
an op without a rule. Against Captum itself: test_rule_parity.py."""
import numpy as np
import pytest

import saliency as sl
from saliency import nn
from saliency.attribution import RuleError, baselines, deeplift, deeplift_shap, gradient_shap, seeds
from saliency.autograd import trace
from saliency.nn import functional as F

from _attribution_models import randomize


def _net(act=nn.ReLU):
    model = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), act(), nn.MaxPool2d(2), nn.Conv2d(6, 8, 3, padding=1),
                          nn.BatchNorm2d(8), act(), nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(32, 16), act(),
                          nn.Linear(16, 5))
    model = randomize(model.double(), seed=1)
    model[4].running_var.numpy()[...] = np.linspace(0.5, 2, 8)
    return model.eval()


@pytest.mark.parametrize("act", [nn.ReLU, nn.Sigmoid, nn.Tanh, nn.ELU, nn.GELU, nn.SiLU, nn.Softplus],
                         ids=lambda a: a.__name__)
@pytest.mark.parametrize("baseline", [0.0, 0.5, baselines.Blur(1.0)], ids=["zero", "grey", "blur"])
def test_deeplift_is_complete_through_nonlinearities_and_max_pooling(act, baseline):
    model = _net(act)
    x = np.random.default_rng(2).uniform(0, 1, (3, 3, 8, 8))
    attr = deeplift(model, x, seeds.classes([0, 3]), baseline=baseline)
    y = model(sl.tensor(x)).numpy()
    b = baseline(x) if callable(baseline) else np.full_like(x, baseline)
    y0 = model(sl.tensor(b)).numpy()
    np.testing.assert_allclose(attr.extras["delta"], (y - y0)[:, [0, 3]].T, rtol=1e-12)
    assert np.abs(attr.extras["completeness_error"]).max() < 1e-9
    sums = attr.map.reshape(2, 3, -1).sum(axis=-1)
    np.testing.assert_allclose(sums, (y - y0)[:, [0, 3]].T, rtol=1e-9, atol=1e-12)


def test_on_a_linear_model_deeplift_is_the_gradient_times_the_difference():
    model = randomize(nn.Sequential(nn.Flatten(), nn.Linear(48, 4)).double(), seed=3)
    x, b = np.random.default_rng(4).uniform(0, 1, (2, 3, 4, 4)), np.full((3, 4, 4), 0.25)
    attr = deeplift(model, x, seeds.classes([2]), baseline=b)
    w = model[1].weight.numpy()[2].reshape(3, 4, 4)
    np.testing.assert_allclose(attr.map[0], (x - b) * w, rtol=1e-12)


class Functional(nn.Module):
    def __init__(self, reuse):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.fc = nn.Linear(4, 3)
        self.act = nn.ReLU()
        self.act2 = nn.ReLU()
        self.reuse = reuse

    def forward(self, x):
        if self.reuse is None:  # functions
            h = F.max_pool2d(F.relu(self.conv1(x)), 2)
            return self.fc(F.relu(self.conv2(h) + h).mean(dim=(2, 3)))
        second = self.act if self.reuse else self.act2
        h = F.max_pool2d(self.act(self.conv1(x)), 2)
        return self.fc(second(sl.add(self.conv2(h), h)).mean(dim=(2, 3)))


def test_functional_code_and_a_reused_relu_give_the_map_of_separate_modules():
    models = [randomize(Functional(r).double(), seed=5).eval() for r in (False, True, None)]
    x = np.random.default_rng(6).uniform(0, 1, (2, 3, 8, 8))
    maps = [deeplift(m, x).map for m in models]
    np.testing.assert_array_equal(maps[0], maps[1])
    np.testing.assert_array_equal(maps[0], maps[2])
    assert np.abs(maps[0]).sum() > 0


def test_pixel_seeds_give_the_map_of_the_dense_pass():
    model = randomize(nn.Sequential(nn.Conv2d(3, 5, 3, padding=1), nn.Tanh(), nn.MaxPool2d(2),
                                    nn.Upsample(scale_factor=2), nn.Conv2d(5, 2, 3, padding=1), nn.ReLU()).double(),
                      seed=7).eval()
    x = np.random.default_rng(8).uniform(0, 1, (1, 3, 32, 32))
    seed = seeds.pixels([(4, 4), (20, 9)], channel=0)
    cropped = deeplift(model, x, seed)
    with trace():
        dense = deeplift(model, x, seed)
    np.testing.assert_allclose(cropped.map, dense.map, rtol=1e-10, atol=1e-15)
    assert np.abs(cropped.extras["completeness_error"]).max() < 1e-9


@pytest.mark.parametrize("inside", ["softmax", "layer_norm", "product", "training"])
def test_an_op_without_a_rule_is_a_rule_error_naming_it(inside):
    conv = randomize(nn.Conv2d(3, 4, 3, padding=1).double(), seed=9)
    bn = nn.BatchNorm2d(4).double()
    body = {"softmax": lambda h: F.softmax(h, dim=1), "layer_norm": lambda h: F.layer_norm(h, h.shape[1:]),
            "product": lambda h: h * h, "training": bn.train()}[inside]
    name = {"softmax": "Softmax", "layer_norm": "LayerNorm", "product": "Mul", "training": "BatchNorm"}[inside]

    def model(x):
        return body(conv(x)).mean(dim=(2, 3))

    with pytest.raises(RuleError, match=f"DeepLift has no rule for {name}"):
        deeplift(model, np.random.default_rng(10).uniform(0, 1, (2, 3, 4, 4)))


def test_deeplift_shap_is_the_mean_of_deeplift_over_the_baselines():
    model = _net()
    x = np.random.default_rng(11).uniform(0, 1, (2, 3, 8, 8))
    refs = np.random.default_rng(12).uniform(0, 1, (5, 3, 8, 8))
    attr = deeplift_shap(model, x, baselines=refs, batch=4)  # two passes of baselines
    each = [deeplift(model, x, baseline=r).map for r in refs]
    np.testing.assert_allclose(attr.map, np.mean(each, axis=0), rtol=1e-10, atol=1e-15)
    assert np.abs(attr.extras["completeness_error"]).max() < 1e-9 and attr.extras["baselines"] == 5
    noise = deeplift_shap(model, x, baselines=baselines.Uniform(3))
    np.testing.assert_allclose(noise.map, deeplift_shap(model, x, baselines=baselines.Uniform(3)(x)).map)


class Replay:
    """An rng that gives back draws fixed in advance, in the order gradient_shap takes them."""

    def __init__(self, picks, noise, alphas):
        self.picks, self.noise, self.alphas = picks, noise, alphas

    def integers(self, low, high, size):
        assert (low, high, size) == (0, self.high, len(self.picks))
        return self.picks

    def normal(self, mean, std, size):
        return self.noise

    def uniform(self, low, high, size):
        return self.alphas


def test_gradient_shap_averages_the_draws_it_is_given():
    """On a linear model every draw gives (x' - b) * w exactly: the map is their mean."""
    model = randomize(nn.Sequential(nn.Flatten(), nn.Linear(12, 3)).double(), seed=13)
    x = np.random.default_rng(14).uniform(0, 1, (2, 3, 2, 2))
    refs = np.random.default_rng(15).uniform(0, 1, (4, 3, 2, 2))
    samples = 3
    picks = np.array([0, 3, 3, 1, 2, 0])        # row i * samples + s
    noise = np.random.default_rng(16).normal(0, 0.1, (6, 3, 2, 2))
    rng = Replay(picks, noise, np.linspace(0.1, 0.9, 6))
    rng.high = 4
    attr = gradient_shap(model, x, seeds.classes([1]), baselines=refs, samples=samples, stdev=0.1, rng=rng)
    w = model[1].weight.numpy()[1].reshape(3, 2, 2)
    noisy = np.repeat(x, samples, axis=0) + noise
    expected = ((noisy - refs[picks]) * w).reshape(2, samples, 3, 2, 2).mean(axis=1)
    np.testing.assert_allclose(attr.map[0], expected, rtol=1e-12)


def test_gradient_shap_is_reproducible_from_a_seed_and_checks_its_options():
    model = _net()
    x = np.random.default_rng(17).uniform(0, 1, (1, 3, 8, 8))
    a = gradient_shap(model, x, baselines=baselines.Uniform(4), samples=6, rng=3)
    b = gradient_shap(model, x, baselines=baselines.Uniform(4), samples=6, rng=3, batch=2)
    np.testing.assert_allclose(a.map, b.map, rtol=1e-12)
    with pytest.raises(ValueError, match="samples must be a positive int"):
        gradient_shap(model, x, baselines=[0.0], samples=0)
    with pytest.raises(ValueError, match="baselines must be images"):
        gradient_shap(model, x, baselines=np.zeros((2, 3, 4, 4)))
