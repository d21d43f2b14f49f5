"""torchvision's published weight files are older than its code: DenseNet's name a dense layer's
parts `norm.1`, `conv.2`, ViT's name the MLP layers `mlp.linear_1` / `mlp.linear_2`, and files saved
before PyTorch 0.4.1 have no `num_batches_tracked`. They load here as torchvision loads them."""
import re
from collections import OrderedDict

import numpy as np
from _torchvision import torchvision

import saliency as sl
from saliency import models
from saliency.models import zoo
from saliency.models.vision import vit


def _old_densenet_keys(state):
    return OrderedDict((re.sub(r"(denselayer\d+\.(?:norm|relu|conv))([12])\.", r"\1.\2.", k), v)
                       for k, v in state.items() if not k.endswith("num_batches_tracked"))


def test_a_densenet_file_with_the_old_keys_and_no_counters_loads(tmp_path):
    import torch

    tv = torchvision()
    theirs = tv.models.densenet121().eval()
    state = _old_densenet_keys(theirs.state_dict())
    assert "features.denseblock1.denselayer1.norm.1.weight" in state
    torch.save(state, tmp_path / "densenet121-a639ec97.pth")  # the name of torchvision's published file
    ours = models.load("densenet121", weights=tmp_path / "densenet121-a639ec97.pth")
    x = np.random.default_rng(0).standard_normal((1, 3, 40, 40)).astype(np.float32)
    np.testing.assert_allclose(ours(sl.tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(), rtol=1e-4,
                               atol=1e-5)


def test_a_vit_file_with_the_old_mlp_names_loads(tmp_path):
    import torch

    tv = torchvision()
    config = dict(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=16, mlp_dim=24)
    theirs = tv.models.vision_transformer.VisionTransformer(**config).eval()
    state = OrderedDict((re.sub(r"mlp\.([03])\.", lambda m: f"mlp.linear_{int(m.group(1)) // 3 + 1}.", k), v)
                        for k, v in theirs.state_dict().items())
    assert "encoder.layers.encoder_layer_0.mlp.linear_2.weight" in state
    torch.save(state, tmp_path / "vit.pth")
    ours = vit.VisionTransformer(**config)
    zoo._load_weights(ours, tmp_path / "vit.pth", "a small ViT")
    x = np.random.default_rng(1).standard_normal((2, 3, 32, 32)).astype(np.float32)
    np.testing.assert_allclose(ours.eval()(sl.tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(),
                               rtol=1e-4, atol=1e-5)
