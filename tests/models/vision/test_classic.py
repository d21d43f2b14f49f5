"""The classic CNNs of `saliency.models.vision` (AlexNet, VGG, ResNet/ResNeXt/Wide ResNet, SqueezeNet,
DenseNet, GoogLeNet, Inception v3) against torchvision's, in float64 at small inputs.

Every ResNet, ResNeXt, Wide ResNet, DenseNet, SqueezeNet, AlexNet, GoogLeNet and Inception v3 is
compared in full in float64 (outputs and input gradients). Those of FULL go through `compare`
(torchvision's own initialisation, saved and loaded by name, strict); the larger ones (IN_MEMORY:
resnet101, resnet152, both ResNeXt-101s, both Wide ResNets, densenet161, densenet201; 20M to 127M
parameters, a test process peaking at 2.5 GB at most) through `compare_in_memory`, which builds
torchvision's on the meta device and fills it with random values instead of drawing its
initialisation, and loads its state dict into ours without a file. For VGG, whose cost is its
120M-parameter classifier, every configuration's `features` is compared in full and the whole of
vgg11_bn only. GoogLeNet and Inception v3 pass init_weights=False: their truncated-normal
initialisation is slow here and is overwritten by the loaded weights anyway. No architecture here
is checked by keys and shapes alone.
"""
import numpy as np
import pytest

from _torchvision import compare, compare_in_memory, randomise_statistics, torchvision

FULL = [
    ("alexnet", 63, {}),
    ("vgg11_bn", 32, {"init_weights": False}),
    ("resnet18", 32, {"zero_init_residual": True}),
    ("resnet34", 32, {"num_classes": 10}),
    ("resnet50", 32, {}),
    ("resnext50_32x4d", 32, {}),
    ("squeezenet1_0", 29, {}),
    ("squeezenet1_1", 25, {"num_classes": 10}),
    ("densenet121", 29, {"memory_efficient": True}),
    ("densenet169", 29, {}),
    ("googlenet", 31, {"init_weights": False}),
    ("inception_v3", 75, {"init_weights": False, "transform_input": True}),
]

# built on the meta device and filled in memory: 20M-127M parameters, about 16 bytes each in float64
IN_MEMORY = ["resnet101", "resnet152", "resnext101_32x8d", "resnext101_64x4d", "wide_resnet50_2",
             "wide_resnet101_2", "densenet161", "densenet201"]


@pytest.mark.parametrize("name, size, kwargs", FULL, ids=[f[0] for f in FULL])
def test_same_as_torchvision(name, size, kwargs, tmp_path):
    compare(name, tmp_path, size=size, **kwargs)


@pytest.mark.parametrize("name", IN_MEMORY)
def test_large_same_as_torchvision(name):
    compare_in_memory(name, 32)


def _same_outputs(ours, theirs, x, seed=0):
    """Load theirs (randomised statistics) into ours; same output and input gradient in float64."""
    import torch

    import saliency as sl

    theirs = randomise_statistics(theirs, seed).double().eval()
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    ours = ours.double().eval()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    xt = torch.tensor(x, requires_grad=True)
    y = theirs(xt)
    v = np.random.default_rng(seed).standard_normal(tuple(y.shape))
    (g,) = torch.autograd.grad(y, xt, torch.tensor(v))
    xs = sl.tensor(x, requires_grad=True)
    ys = ours(xs)
    np.testing.assert_allclose(ys.numpy(), y.detach().numpy(), rtol=1e-9, atol=1e-9)
    ys.backward(sl.tensor(v))
    np.testing.assert_allclose(xs.grad.numpy(), g.numpy(), rtol=1e-9, atol=1e-9 * max(1.0, float(g.abs().max())))


@pytest.mark.parametrize("name", ["vgg11", "vgg11_bn", "vgg13", "vgg13_bn", "vgg16", "vgg16_bn", "vgg19", "vgg19_bn"])
def test_vgg_features(name):
    import torch

    from saliency.models.vision import ARCHITECTURES, vgg

    tv = torchvision()
    assert name in ARCHITECTURES
    config, batch_norm = vgg.VARIANTS[name]
    torch.manual_seed(0)
    theirs = tv.models.vgg.make_layers(tv.models.vgg.cfgs[config], batch_norm=batch_norm)
    x = np.random.default_rng(1).standard_normal((1, 3, 32, 32))
    _same_outputs(vgg.make_layers(vgg.CONFIGS[config], batch_norm), theirs, x)


def test_googlenet_without_aux_transformed_batch_of_two(tmp_path):
    ours, _ = compare("googlenet", tmp_path, size=31, batch=2, aux_logits=False, transform_input=True,
                      init_weights=False)
    assert not any(k.startswith("aux") for k in ours.state_dict())


@pytest.mark.parametrize("name, size, dtype, outputs", [
    ("googlenet", 31, "float64", ("logits", "aux_logits2", "aux_logits1")),
    ("inception_v3", 299, "float32", ("logits", "aux_logits")),  # its aux head needs 299 px; float32 for speed
])
def test_aux_logits_in_training_mode(name, size, dtype, outputs):
    """In training mode (dropout 0, batch statistics) forward gives the logits and the auxiliary
    classifiers' outputs, as torchvision's."""
    import torch

    import saliency as sl
    from saliency.models.vision import ARCHITECTURES

    tv = torchvision()
    dropouts = {"dropout": 0.0, "dropout_aux": 0.0} if name == "googlenet" else {"dropout": 0.0}
    torch.manual_seed(0)
    theirs = tv.models.get_model(name, weights=None, init_weights=False, **dropouts).to(getattr(torch, dtype))
    ours = ARCHITECTURES[name].build(init_weights=False, **dropouts)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    ours = ours.to(dtype=getattr(sl, dtype))
    assert ours.training
    x = np.random.default_rng(0).standard_normal((2, 3, size, size)).astype(dtype)
    with torch.no_grad():
        expected = theirs(torch.tensor(x))
    with sl.no_grad():
        got = ours(sl.tensor(x))
    assert type(got).__name__ == type(expected).__name__ and got._fields == outputs
    tol = 1e-9 if dtype == "float64" else 2e-4
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("name, aux", [("googlenet", "aux"), ("inception_v3", "AuxLogits")])
def test_without_aux_logits_no_aux_keys_and_logits_in_training(name, aux):
    import saliency as sl
    from saliency.models.vision import ARCHITECTURES

    with_aux = ARCHITECTURES[name].build(init_weights=False)
    assert any(k.startswith(aux) for k in with_aux.state_dict())
    model = ARCHITECTURES[name].build(aux_logits=False, init_weights=False, num_classes=7)
    assert not any(k.startswith(aux) for k in model.state_dict())
    size = ARCHITECTURES[name].min_size if name == "inception_v3" else 32
    with sl.no_grad():
        y = model(sl.randn(2, 3, size, size))
    assert isinstance(y, sl.Tensor) and tuple(y.shape) == (2, 7)


def test_resnet_initialisation():
    from saliency import nn
    from saliency.models.vision import ARCHITECTURES

    model = ARCHITECTURES["resnet18"].build(zero_init_residual=True)
    assert all(not np.any(block.bn2.weight.numpy()) for layer in (model.layer1, model.layer4) for block in layer)
    assert np.all(model.bn1.weight.numpy() == 1) and not np.any(model.bn1.bias.numpy())
    conv = model.layer4[0].conv2.weight.numpy()  # kaiming normal, fan_out: std sqrt(2 / (512 * 9))
    assert abs(conv.std() / np.sqrt(2 / (512 * 9)) - 1) < 0.02
    assert isinstance(model.layer4[0].downsample[1], nn.BatchNorm2d)


@pytest.mark.parametrize("name, kwargs, error", [
    ("resnext50_32x4d", {"groups": 8}, ValueError),
    ("wide_resnet50_2", {"width_per_group": 64}, ValueError),
    ("resnet18", {"width_per_group": 128}, ValueError),
    ("resnet34", {"replace_stride_with_dilation": [False, False, True]}, NotImplementedError),
    ("resnet50", {"replace_stride_with_dilation": [True]}, ValueError),
])
def test_resnet_rejects_what_torchvision_rejects(name, kwargs, error):
    from saliency.models.vision import ARCHITECTURES

    tv = torchvision()
    with pytest.raises(error):
        tv.models.get_model(name, weights=None, **kwargs)
    with pytest.raises(error):
        ARCHITECTURES[name].build(**kwargs)


@pytest.mark.parametrize("name", ["alexnet", "resnet18", "densenet121", "squeezenet1_0", "squeezenet1_1", "googlenet"])
def test_runs_at_its_min_size(name):
    """torchvision's smallest input side for the architecture (its weights' `min_size`)."""
    import saliency as sl
    from saliency.models.vision import ARCHITECTURES

    arch = ARCHITECTURES[name]
    model = arch.build(**({"init_weights": False} if name == "googlenet" else {})).eval()
    with sl.no_grad():
        y = model(sl.randn(1, 3, arch.min_size, arch.min_size))
    assert tuple(y.shape) == (1, 1000)
