"""The rule-based methods against their references, in float64: `lrp` against Zennit 0.5.1 (its five
composites, on a small VGG with batch norm and on torchvision's resnet18), `deeplift` and
`deeplift_shap` against Captum 0.9.0's DeepLift and DeepLiftShap, `gradient_shap` against Captum's
GradientShap with its random draws replayed. Each map must agree within 1e-7 of its largest
magnitude; the references are what users compare with, and the only independent implementations.

The models are copied torch -> saliency through their state dicts, with random batch-norm statistics
(as a trained model has). Zennit needs a canonizer to see residual additions and batch norms: the
functional ResNet below (`F.relu`, `out + identity`, no modules to hook) gets, with ours, the map
Zennit gives torchvision's module version with its ResNetCanonizer, and Zennit's own map of it does
not conserve the score.

Two documented quirks of the references shape the tests rather than the library:
- Zennit 0.5.1 merges batch norm into the layer before it and keeps the batch norm in place as an
  identity with its original eps, which then scales by 1 / sqrt(1 + eps): the models here use
  eps=1e-12, far below the tolerance.
- Captum's DeepLift is not complete where a ReLU feeds a max pool (its max-pool rule), so DeepLift
  is compared on a network without max pooling; on one with it, ours stays complete and Captum's
  does not (test_deeplift_stays_complete_where_a_relu_feeds_a_max_pool_and_captums_does_not).

Skipped without torch, torchvision, Zennit or Captum (`pip install -e .[parity]`).
"""
import contextlib
import functools
import sys
from pathlib import Path

import numpy as np
import pytest

import saliency as sl
from saliency import nn
from saliency.attribution import deeplift, deeplift_shap, gradient_shap, lrp
from saliency.models.vision import ARCHITECTURES

torch = pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models" / "vision"))
from _torchvision import randomise_statistics, torchvision  # noqa: E402

COMPOSITES = ("epsilon_plus", "epsilon_plus_flat", "epsilon_alpha2_beta1", "epsilon_alpha2_beta1_flat",
              "epsilon_gamma_box")
BN_EPS = 1e-12  # Zennit keeps eps in the batch norm it merges: 1 / sqrt(1 + eps) - 1 stays below the tolerance
RTOL = 1e-7     # relative to the reference map's largest magnitude


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """torch's float64 convolutions on two spinning OpenMP threads are slower on a busy two-core
    machine than on one (as in tests/models/vision/conftest.py)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@contextlib.contextmanager
def seeded(numpy_seed, torch_seed):
    """NumPy's and torch's global generators seeded (Captum draws from both), restored afterwards."""
    state = np.random.get_state()
    with torch.random.fork_rng():
        np.random.seed(numpy_seed)
        torch.manual_seed(torch_seed)
        try:
            yield
        finally:
            np.random.set_state(state)


def assert_same_map(ours, reference, rtol=RTOL):
    reference = np.asarray(reference.detach() if isinstance(reference, torch.Tensor) else reference)
    assert ours.shape == reference.shape
    scale = np.abs(reference).max()
    assert scale > 0
    np.testing.assert_allclose(ours, reference, rtol=0, atol=rtol * scale)


def ported(theirs, ours):
    """`ours` (a saliency module) in float64 and eval mode with the weights of `theirs` (torch)."""
    ours = ours.double()
    ours.load_state_dict({k: v.detach().numpy().copy() for k, v in theirs.state_dict().items()})
    return ours.eval()


# --- Zennit ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def zennit():
    """Zennit's attributor and composites by our names (zennit imports torchvision when imported, so
    torchvision is imported first without its ops' registrations)."""
    torchvision()
    pytest.importorskip("zennit")
    from zennit import composites
    from zennit.attribution import Gradient
    from zennit.torchvision import ResNetCanonizer, VGGCanonizer

    classes = {"epsilon_plus": composites.EpsilonPlus, "epsilon_plus_flat": composites.EpsilonPlusFlat,
               "epsilon_alpha2_beta1": composites.EpsilonAlpha2Beta1,
               "epsilon_alpha2_beta1_flat": composites.EpsilonAlpha2Beta1Flat,
               "epsilon_gamma_box": composites.EpsilonGammaBox}

    def relevance(model, x, composite, canonizer):
        """Zennit's input relevance of the top class, starting from y * one_hot (as `lrp` does)."""
        kwargs = {"low": 0.0, "high": 1.0} if composite == "epsilon_gamma_box" else {}
        comp = classes[composite](canonizers=[canonizer()] if canonizer else [], **kwargs)
        with Gradient(model=model, composite=comp) as attributor:
            _, rel = attributor(x, lambda y: y * torch.nn.functional.one_hot(y.argmax(1), y.shape[1]).to(y.dtype))
        return rel.detach().numpy()

    relevance.vgg, relevance.resnet = VGGCanonizer, ResNetCanonizer
    return relevance


def vgg_bn(lib):
    """A small VGG with batch norm after each convolution, max and average pooling, dropout."""
    return lib.Sequential(
        lib.Conv2d(3, 8, 3, padding=1), lib.BatchNorm2d(8, eps=BN_EPS), lib.ReLU(),
        lib.Conv2d(8, 8, 3, padding=1), lib.BatchNorm2d(8, eps=BN_EPS), lib.ReLU(), lib.MaxPool2d(2),
        lib.Conv2d(8, 16, 3, padding=1), lib.BatchNorm2d(16, eps=BN_EPS), lib.ReLU(), lib.AvgPool2d(2),
        lib.Flatten(), lib.Linear(16 * 4 * 4, 32), lib.ReLU(), lib.Dropout(), lib.Linear(32, 10))


@pytest.fixture(scope="module")
def vggs():
    with torch.random.fork_rng():
        torch.manual_seed(0)
        theirs = randomise_statistics(vgg_bn(torch.nn).double(), seed=0).eval()
        x = torch.rand(2, 3, 16, 16, dtype=torch.float64)
    return theirs, ported(theirs, vgg_bn(nn)), x


@pytest.mark.parametrize("composite", COMPOSITES)
def test_lrp_on_a_vgg_with_batch_norm_is_zennits_map(composite, vggs, zennit):
    theirs, ours, x = vggs
    expected = zennit(theirs, x, composite, zennit.vgg)
    got = lrp(ours, x.numpy(), composite=composite)
    assert_same_map(got.map, expected)


def functional_resnet18(lib, num_classes=10):
    """torchvision's resnet18 (the same state-dict keys) written as most model files are: modules for
    the layers with weights, `F.relu`, `F.max_pool2d` and `out + identity` in forward. `lib` is torch
    or saliency: the file ported by its imports."""
    F = lib.nn.functional

    class BasicBlock(lib.nn.Module):
        def __init__(self, inplanes, planes, stride=1):
            super().__init__()
            self.conv1 = lib.nn.Conv2d(inplanes, planes, 3, stride=stride, padding=1, bias=False)
            self.bn1 = lib.nn.BatchNorm2d(planes, eps=BN_EPS)
            self.conv2 = lib.nn.Conv2d(planes, planes, 3, padding=1, bias=False)
            self.bn2 = lib.nn.BatchNorm2d(planes, eps=BN_EPS)
            self.downsample = None
            if stride != 1 or inplanes != planes:
                self.downsample = lib.nn.Sequential(lib.nn.Conv2d(inplanes, planes, 1, stride=stride, bias=False),
                                                    lib.nn.BatchNorm2d(planes, eps=BN_EPS))

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            identity = x if self.downsample is None else self.downsample(x)
            return F.relu(out + identity)

    class ResNet(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = lib.nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
            self.bn1 = lib.nn.BatchNorm2d(64, eps=BN_EPS)
            self.layer1 = lib.nn.Sequential(BasicBlock(64, 64), BasicBlock(64, 64))
            self.layer2 = lib.nn.Sequential(BasicBlock(64, 128, 2), BasicBlock(128, 128))
            self.layer3 = lib.nn.Sequential(BasicBlock(128, 256, 2), BasicBlock(256, 256))
            self.layer4 = lib.nn.Sequential(BasicBlock(256, 512, 2), BasicBlock(512, 512))
            self.fc = lib.nn.Linear(512, num_classes)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(lib.flatten(F.adaptive_avg_pool2d(x, 1), 1))

    return ResNet()


@pytest.fixture(scope="module")
def resnets():
    """torchvision's resnet18 (10 classes, random weights and statistics, batch-norm eps 1e-12) and a
    (2, 3, 32, 32) input."""
    tv = torchvision()
    with torch.random.fork_rng():
        torch.manual_seed(0)
        theirs = tv.models.resnet18(weights=None, num_classes=10).double()
        x = torch.rand(2, 3, 32, 32, dtype=torch.float64)
    for m in theirs.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.eps = BN_EPS
    return randomise_statistics(theirs, seed=0).eval(), x


@pytest.fixture(scope="module")
def zennit_resnet(resnets, zennit):
    """Zennit's map of torchvision's resnet18 with its ResNetCanonizer, by composite (computed once)."""
    theirs, x = resnets
    return functools.cache(lambda composite: zennit(theirs, x, composite, zennit.resnet))


@pytest.mark.parametrize("composite", COMPOSITES)
def test_lrp_on_resnet18_is_zennits_map_with_its_resnet_canonizer(composite, resnets, zennit_resnet):
    """Ours built by name (saliency.models.vision) with torchvision's weights."""
    theirs, x = resnets
    ours = ARCHITECTURES["resnet18"].build(num_classes=10)
    for m in ours.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.eps = BN_EPS
    got = lrp(ported(theirs, ours), x.numpy(), composite=composite)
    assert_same_map(got.map, zennit_resnet(composite))


@pytest.mark.parametrize("composite", COMPOSITES)
def test_lrp_on_a_functional_resnet_needs_no_canonizer(composite, resnets, zennit_resnet):
    """F.relu and `out + identity` give the map Zennit gives the module version canonized."""
    theirs, x = resnets
    ours = ported(theirs, functional_resnet18(sl))
    got = lrp(ours, x.numpy(), composite=composite)
    assert_same_map(got.map, zennit_resnet(composite))
    c = got.extras["conservation"]
    np.testing.assert_allclose(c["input"] + c["biases"] + c["stabilisers"], c["score"], rtol=1e-12)


def test_zennit_on_the_functional_resnet_does_not_conserve_the_score(resnets, zennit, zennit_resnet):
    """What the test above spares a user: Zennit hooks modules only, so on the functional file its
    ResNetCanonizer finds no block to canonize, both branches of each `+` receive the whole
    relevance, and the input relevance comes out about 110 times the score (measured) instead of the
    score less what the biases absorb."""
    theirs, x = resnets
    functional = functional_resnet18(torch).double()
    functional.load_state_dict(theirs.state_dict())
    functional.eval()
    with torch.no_grad():
        y = theirs(x)
        np.testing.assert_allclose(functional(x).numpy(), y.numpy(), rtol=1e-12, atol=1e-12)  # the same model
    score = y.max(1).values.numpy()
    canonized = zennit_resnet("epsilon_plus_flat").sum(axis=(1, 2, 3))
    assert np.all(np.abs(canonized) < np.abs(score))  # the biases absorb part of the score
    unseen = zennit(functional, x, "epsilon_plus_flat", zennit.resnet).sum(axis=(1, 2, 3))
    assert np.all(np.abs(unseen) > 10 * np.abs(score))


# --- Captum ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def captum():
    pytest.importorskip("captum")
    from captum import attr
    return attr


def no_max_pool(lib):
    """conv, ReLU, average pooling, Tanh, linear: where Captum's DeepLift is complete."""
    return lib.Sequential(
        lib.Conv2d(3, 6, 3, padding=1), lib.ReLU(), lib.AvgPool2d(2),
        lib.Conv2d(6, 8, 3, padding=1), lib.Tanh(), lib.AvgPool2d(2),
        lib.Flatten(), lib.Linear(8 * 4 * 4, 16), lib.ReLU(), lib.Linear(16, 5))


def relu_into_max_pool(lib):
    return lib.Sequential(
        lib.Conv2d(3, 6, 3, padding=1), lib.ReLU(), lib.MaxPool2d(2),
        lib.Conv2d(6, 8, 3, padding=1), lib.ReLU(), lib.MaxPool2d(2),
        lib.Flatten(), lib.Linear(8 * 4 * 4, 5))


def pair(make, seed):
    """(torch model, saliency model with its weights, x (3, 3, 16, 16), baselines (4, 3, 16, 16))."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        theirs = make(torch.nn).double().eval()
        x = torch.rand(3, 3, 16, 16, dtype=torch.float64)
        baselines = torch.rand(4, 3, 16, 16, dtype=torch.float64) * 0.2
    return theirs, ported(theirs, make(nn)), x, baselines


@pytest.fixture(scope="module")
def nets():
    return pair(no_max_pool, 0)


def top_class(model, x):
    with torch.no_grad():
        return model(x).argmax(1)


@pytest.mark.filterwarnings("ignore::UserWarning")  # Captum's notice that it hooks the activations
def test_deeplift_is_captums(nets, captum):
    theirs, ours, x, baselines = nets
    b = baselines[:1]
    expected = captum.DeepLift(theirs).attribute(x, b, target=top_class(theirs, x))
    got = deeplift(ours, x.numpy(), baseline=b.numpy()[0])
    assert_same_map(got.map, expected)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_deeplift_shap_is_captums(nets, captum):
    theirs, ours, x, baselines = nets
    expected = captum.DeepLiftShap(theirs).attribute(x, baselines, target=top_class(theirs, x))
    got = deeplift_shap(ours, x.numpy(), baselines=baselines.numpy())
    assert_same_map(got.map, expected)


class Replay:
    """Given draws handed out as `gradient_shap` asks for them, recording the order it asks in."""

    def __init__(self, picks, noise, alphas):
        self.picks, self.noise, self.alphas, self.calls = picks, noise, alphas, []

    def integers(self, low, high, size):
        self.calls.append("integers")
        assert np.shape(self.picks) == (size,) and 0 <= low <= min(self.picks) and max(self.picks) < high
        return self.picks

    def normal(self, mean, std, size):
        self.calls.append("normal")
        assert mean == 0.0 and self.noise is not None and self.noise.shape == tuple(size)
        return self.noise

    def uniform(self, low, high, size):
        self.calls.append("uniform")
        assert (low, high) == (0.0, 1.0) and np.shape(self.alphas) == (size,)
        return self.alphas


@pytest.mark.parametrize("stdev", [0.0, 0.1])
def test_gradient_shap_is_captums_with_its_draws_replayed(stdev, nets, captum):
    """Captum draws the baselines with np.random.choice, the noise (if any) with torch.normal of a
    float32 standard deviation (hence float32 values), and the points with np.random.uniform, in that
    order, row i * samples + s for image i: the same calls on the same seeds give the same draws."""
    theirs, ours, x, baselines = nets
    samples, rows = 7, 7 * len(x)
    with seeded(1, 2):
        expected = captum.GradientShap(theirs).attribute(x, baselines, n_samples=samples, stdevs=stdev,
                                                         target=top_class(theirs, x))
    with seeded(1, 2):
        picks = np.random.choice(len(baselines), rows)
        noise = None
        if stdev > 0:
            noise = torch.normal(0, torch.tensor(stdev).repeat((rows,) + tuple(x.shape[1:]))).numpy()
        alphas = np.random.uniform(0.0, 1.0, rows)
    rng = Replay(picks, None if noise is None else noise.astype(np.float64), alphas)
    got = gradient_shap(ours, x.numpy(), baselines=baselines.numpy(), samples=samples, stdev=stdev, rng=rng)
    assert rng.calls == (["integers", "normal", "uniform"] if stdev > 0 else ["integers", "uniform"])
    assert_same_map(got.map, expected)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_deeplift_stays_complete_where_a_relu_feeds_a_max_pool_and_captums_does_not(captum):
    """Why DeepLift is compared on a network without max pooling: there Captum's map misses the
    score difference by more than 1e-6 (3e-3 to 1e-2 measured), ours by rounding only."""
    theirs, ours, x, baselines = pair(relu_into_max_pool, 1)
    b = baselines[:1]
    _, delta = captum.DeepLift(theirs).attribute(x, b, target=top_class(theirs, x), return_convergence_delta=True)
    got = deeplift(ours, x.numpy(), baseline=b.numpy()[0])
    assert np.all(np.abs(got.extras["completeness_error"]) < 1e-9)
    assert np.all(np.abs(delta.detach().numpy()) > 1e-6)


def unflattened(lib):
    """relu_into_max_pool's layers with a reshape instead of nn.Flatten (Captum's LRP raises on a module
    type it has no rule for), as a `lib.nn.Module`."""
    layers = relu_into_max_pool(lib)

    class Net(lib.Module):
        def __init__(self):
            super().__init__()
            self.features = lib.Sequential(*list(layers)[:6])
            self.fc = layers[7]

        def forward(self, x):
            h = self.features(x)
            return self.fc(h.reshape(h.shape[0], -1))

    return Net()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_the_epsilon_composite_is_captums_lrp(captum):
    """Captum's default LRP is Epsilon on every layer (1e-9), max pooling included, where it divides by the
    winner's value plus 1e-9 instead of routing: the maps agree to about 1e-6 of the largest relevance."""
    with torch.random.fork_rng():
        torch.manual_seed(3)
        theirs = unflattened(torch.nn).double().eval()
        x = torch.rand(3, 3, 16, 16, dtype=torch.float64)
    ours = ported(theirs, unflattened(nn))
    expected = captum.LRP(theirs).attribute(x, target=top_class(theirs, x)).detach().numpy()
    got = lrp(ours, x.numpy(), composite="epsilon", epsilon=1e-9).map
    assert np.abs(got - expected).max() <= 1e-5 * np.abs(expected).max()
