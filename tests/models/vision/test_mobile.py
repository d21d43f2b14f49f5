"""The mobile and efficient architectures of `saliency.models.vision` (ShuffleNet V2, MobileNet V2
and V3, MNASNet, EfficientNet, RegNet, ConvNeXt) against torchvision's, at small inputs.

- In full (outputs and input gradients), in float64, through `compare` (torchvision's own
  initialisation saved and loaded by name, strict): every architecture up to about 40M
  parameters (FULL).
- In full, in float64, through `compare_in_memory` (torchvision's built on the meta device and
  filled with random values, no initialisation drawn, its state dict loaded into ours without a
  file): EfficientNet B6, B7, V2-M, V2-L, RegNetX 16GF and 32GF, RegNetY 16GF and 32GF, ConvNeXt
  small and base (IN_MEMORY: 43M to 145M parameters, a test process peaking at 2.8 GB at most).
- In full, in float32 with a relative and absolute tolerance of 2e-4, through `compare_in_memory`:
  ConvNeXt large (IN_MEMORY_FLOAT32; 198M parameters: 3.5 GB in float64, 2 GB in float32).
- By keys and shapes only (KEYS_ONLY), against torchvision's built on the meta device, ours built
  without initialisation: RegNetY 128GF (644M parameters: about 10.5 GB in float64, 5.5 GB in
  float32); its blocks and configuration rules are those of the other RegNetYs.
"""
from collections import OrderedDict

import numpy as np
import pytest

from _torchvision import compare, compare_in_memory, on_meta, randomise_statistics, torchvision

# name -> input side: 32 px (the networks' stride); EfficientNet V2's weights say 33 at least
FULL = {
    "shufflenet_v2_x0_5": 32, "shufflenet_v2_x1_0": 32, "shufflenet_v2_x1_5": 32, "shufflenet_v2_x2_0": 32,
    "mobilenet_v2": 32, "mobilenet_v3_large": 32, "mobilenet_v3_small": 32,
    "mnasnet0_5": 32, "mnasnet0_75": 32, "mnasnet1_0": 32, "mnasnet1_3": 32,
    "efficientnet_b0": 32, "efficientnet_b1": 32, "efficientnet_b2": 32, "efficientnet_b3": 32,
    "efficientnet_b4": 32, "efficientnet_b5": 32, "efficientnet_v2_s": 33,
    "regnet_x_400mf": 32, "regnet_x_800mf": 32, "regnet_x_1_6gf": 32, "regnet_x_3_2gf": 32, "regnet_x_8gf": 32,
    "regnet_y_400mf": 32, "regnet_y_800mf": 32, "regnet_y_1_6gf": 32, "regnet_y_3_2gf": 32, "regnet_y_8gf": 32,
    "convnext_tiny": 32,
}
# built on the meta device and filled in memory (name -> input side), in float64 and in float32
IN_MEMORY = {
    "efficientnet_b6": 32, "efficientnet_b7": 32, "efficientnet_v2_m": 33, "efficientnet_v2_l": 33,
    "regnet_x_16gf": 32, "regnet_x_32gf": 32, "regnet_y_16gf": 32, "regnet_y_32gf": 32,
    "convnext_small": 32, "convnext_base": 32,
}
IN_MEMORY_FLOAT32 = {"convnext_large": 32}
KEYS_ONLY = ["regnet_y_128gf"]


@pytest.mark.parametrize("name", list(FULL))
def test_same_as_torchvision(name, tmp_path):
    compare(name, tmp_path, size=FULL[name])


def test_batch_of_two_with_builder_arguments(tmp_path):
    compare("mobilenet_v3_small", tmp_path, size=32, batch=2, num_classes=10, width_mult=0.75, reduced_tail=True,
            dropout=0.5)


@pytest.mark.parametrize("name", list(IN_MEMORY))
def test_large_same_as_torchvision(name):
    compare_in_memory(name, IN_MEMORY[name])


@pytest.mark.parametrize("name", list(IN_MEMORY_FLOAT32))
def test_largest_same_as_torchvision_in_float32(name):
    compare_in_memory(name, IN_MEMORY_FLOAT32[name], dtype="float32", rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("name", KEYS_ONLY)
def test_same_keys_and_shapes(name):
    from saliency import nn
    from saliency.models.vision import ARCHITECTURES

    theirs = [(k, tuple(v.shape)) for k, v in on_meta(name).state_dict().items()]
    with nn.init.skipped():
        ours = ARCHITECTURES[name].build()
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict(keep_vars=True).items()] == theirs


def test_every_architecture_is_tested():
    from saliency.models.vision import ARCHITECTURES

    families = ("shufflenet", "mobilenet", "mnasnet", "efficientnet", "regnet", "convnext")
    tested = set(FULL) | set(IN_MEMORY) | set(IN_MEMORY_FLOAT32) | set(KEYS_ONLY)
    assert {n for n in ARCHITECTURES if n.startswith(families)} == tested


@pytest.mark.parametrize("name", ["shufflenet_v2_x0_5", "mobilenet_v2", "mobilenet_v3_small", "mnasnet0_5",
                                  "efficientnet_b0", "efficientnet_v2_s", "regnet_y_400mf", "convnext_tiny"])
def test_runs_at_its_min_size(name):
    """torchvision's smallest input side for the architecture (its weights' `min_size`)."""
    import saliency as sl
    from saliency.models.vision import ARCHITECTURES

    arch = ARCHITECTURES[name]
    assert arch.min_size == {"efficientnet_v2_s": 33, "convnext_tiny": 32}.get(name, 1)
    model = arch.build(num_classes=5).eval()
    with sl.no_grad():
        y = model(sl.randn(1, 3, arch.min_size, arch.min_size))
    assert tuple(y.shape) == (1, 5)


@pytest.mark.parametrize("name, kwargs", [
    ("efficientnet_b0", {"stochastic_depth_prob": 0.5, "dropout": 0.1}),
    ("efficientnet_v2_s", {}),
    ("convnext_tiny", {"stochastic_depth_prob": 0.3, "layer_scale": 0.5}),
    ("mobilenet_v2", {"width_mult": 1.4, "round_nearest": 4, "dropout": 0.3}),
])
def test_builder_arguments_as_torchvision(name, kwargs, monkeypatch):
    """What the state dict does not show: dropout and stochastic-depth probabilities, norm eps and
    momentum, layer scale, as torchvision's builder sets them."""
    from saliency.models.vision import ARCHITECTURES

    def settings(model):
        out = []
        for m in model.modules():
            kind = type(m).__name__
            if kind in ("StochasticDepth", "Dropout"):
                out.append((kind, m.p))
            elif kind == "BatchNorm2d":
                out.append((kind, m.eps, m.momentum))
            elif kind in ("LayerNorm", "LayerNorm2d"):
                out.append((kind, m.eps))
        return out

    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    theirs = torchvision().models.get_model(name, weights=None, **kwargs)
    ours = ARCHITECTURES[name].build(**kwargs)
    assert settings(ours) == settings(theirs)
    if name == "convnext_tiny":
        assert np.all(ours.features[1][0].layer_scale.numpy() == np.float32(0.5))


def test_initialisation():
    """torchvision's schemes (the values are drawn here, not copied)."""
    from saliency.models.vision import ARCHITECTURES

    model = ARCHITECTURES["regnet_x_400mf"].build()
    conv = model.trunk_output.block4[0].f.b[0].weight.numpy()  # N(0, 2 / fan_out), fan_out = 9 * out channels
    assert abs(conv.std() / np.sqrt(2 / (9 * conv.shape[0])) - 1) < 0.05
    assert abs(model.fc.weight.numpy().std() / 0.01 - 1) < 0.05 and not np.any(model.fc.bias.numpy())
    model = ARCHITECTURES["efficientnet_b0"].build()
    linear = model.classifier[1].weight.numpy()  # U(-1/sqrt(out), 1/sqrt(out))
    assert np.abs(linear).max() <= 1 / np.sqrt(1000) and abs(linear.std() * np.sqrt(3000) - 1) < 0.05
    model = ARCHITECTURES["mobilenet_v3_small"].build()
    assert np.all(model.features[1].block[0][1].weight.numpy() == 1)
    assert abs(model.classifier[0].weight.numpy().std() / 0.01 - 1) < 0.05


def test_stochastic_depth_drops_rows_in_training_only():
    import saliency as sl
    from saliency import nn
    from saliency.models.vision.efficientnet import MBConv, MBConvConfig

    block = MBConv(MBConvConfig(6, 3, 1, 16, 16, 1), 0.5, nn.BatchNorm2d).eval()
    x = sl.randn(64, 16, 4, 4)
    with sl.no_grad():
        branch = block.block(x).numpy()
        np.testing.assert_allclose(block(x).numpy(), branch + x.numpy(), rtol=1e-6, atol=1e-6)
        block.stochastic_depth.train()
        y = block(x).numpy() - x.numpy()
    kept = np.array([np.allclose(row, 2 * b, rtol=1e-5, atol=1e-5) for row, b in zip(y, branch)])
    dropped = np.array([np.allclose(row, 0) for row in y])
    assert np.all(kept | dropped) and 10 < kept.sum() < 54


def test_mnasnet_loads_a_version_1_state_dict(tmp_path):
    """A state dict of torchvision's version 1 MNASNet (saved before torchvision 0.5; its stem does
    not scale with alpha) loads strict, the stem rebuilt as torchvision rebuilds it, and computes
    what torchvision computes."""
    import torch

    import saliency as sl
    from saliency import nn
    from saliency.models.vision import ARCHITECTURES

    tvm = torchvision().models.mnasnet
    torch.manual_seed(0)
    # torchvision's version 1 stem for alpha 0.5: depths 32 and 16, then the first stack into 16
    stem = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1, stride=2, bias=False), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 32, 3, padding=1, groups=32, bias=False), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 16, 1, bias=False), torch.nn.BatchNorm2d(16),
        tvm._stack(16, tvm._get_depths(0.5)[2], 3, 2, 3, 3, tvm._BN_MOMENTUM))
    stem_keys = tuple(f"layers.{i}." for i in range(9))
    later = {k: v for k, v in tvm.MNASNet(0.5).state_dict().items() if not k.startswith(stem_keys)}
    v1 = OrderedDict([(f"layers.{k}", v) for k, v in stem.state_dict().items()] + list(later.items()))
    v1._metadata = {"": {"version": 1}}
    theirs = tvm.MNASNet(0.5)
    with pytest.warns(UserWarning, match="new version of MNASNet"):
        theirs.load_state_dict(v1)
    theirs = randomise_statistics(theirs).double().eval()
    torch.save(theirs.state_dict(), tmp_path / "v1.pth")

    ours = ARCHITECTURES["mnasnet0_5"].build()
    with pytest.warns(UserWarning, match="new version of MNASNet"):
        ours.load_state_dict(nn.load(tmp_path / "v1.pth"))
    assert ours._version == 1 and ours.layers[0].weight.shape == (32, 3, 3, 3)
    ours = ours.double().eval()
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32))
    with torch.no_grad():
        expected = theirs(torch.tensor(x)).numpy()
    with sl.no_grad():
        np.testing.assert_allclose(ours(sl.tensor(x)).numpy(), expected, rtol=1e-9, atol=1e-9)
    # models.load by name, as the command line loads it: the stem is rebuilt before the file's shapes are checked
    from saliency import models

    with pytest.warns(UserWarning, match="new version of MNASNet"):
        loaded = models.load("mnasnet0_5", weights=tmp_path / "v1.pth")
    with sl.no_grad():
        got = loaded.double()(sl.tensor(x)).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)
    # a version 2 state dict leaves the model at version 2
    fresh = ARCHITECTURES["mnasnet0_5"].build()
    fresh.load_state_dict({k: v.numpy() for k, v in tvm.MNASNet(0.5).state_dict().items()})
    assert fresh._version == 2 and fresh.layers[0].weight.shape == (16, 3, 3, 3)
