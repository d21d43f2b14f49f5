"""ViT and Swin (v1 and v2) against torchvision's own: outputs and input gradients at small inputs,
state-dict keys and shapes, and small configurations of the same classes for the options the
builders leave at their defaults.

- In full, in float64, through `compare` (torchvision's initialisation saved to a file and loaded by
  name): vit_b_16, vit_b_32, swin_t, swin_s and swin_v2_t.
- In full, in float64, through `compare_in_memory` (torchvision's built on the meta device and filled
  with random values, its state dict loaded into ours without a file): swin_b, swin_v2_s, swin_v2_b
  (50M-88M parameters, under 2 GB).
- In full, in float32 with a relative and absolute tolerance of 2e-4, through `compare_in_memory`:
  vit_l_16 and vit_l_32 (305M parameters: a test process would peak at about 5.3 GB in float64; it
  peaks at 2.9 GB in float32).
- By keys and shapes only, against torchvision's built on the meta device (no memory): vit_h_14
  (632M parameters: about 10.5 GB in float64, 5.5 GB in float32); its class is ViT-L's.

ViTs take image_size = twice the patch size (four patches and the class token) in both builders.
Building here draws random weights that the weights file replaces at once; the builds `compare`
loads skip the draw (`no_random_init`), and the initialisation itself is checked on small models."""
import numpy as np
import pytest

import saliency as sl
from saliency import nn
from saliency.models.vision import ARCHITECTURES, swin, vit

from _torchvision import compare, compare_in_memory, torchvision


@pytest.fixture
def no_random_init(monkeypatch):
    """Builders leave their weights unfilled (np.empty): the compared models load theirs from a file."""
    def keep(tensor, *args, **kwargs):
        return tensor

    for name in ("uniform_", "normal_", "trunc_normal_"):
        monkeypatch.setattr(nn.init, name, keep)


@pytest.mark.parametrize("name,size", [("vit_b_16", 32), ("vit_b_32", 64)])
def test_vit_matches_torchvision(name, size, tmp_path, no_random_init):
    compare(name, tmp_path, size=size, image_size=size)


# 112: shifted windows with no padding (28 and 14 patches, 4 and 2 windows a side), two images;
# 64: maps padded to whole windows (16 -> 21, 8 -> 14, 4 -> 7), shifts only where a map holds two windows
@pytest.mark.parametrize("name,size,batch", [("swin_t", 112, 2), ("swin_s", 64, 1), ("swin_v2_t", 64, 1)])
def test_swin_matches_torchvision(name, size, batch, tmp_path, no_random_init):
    compare(name, tmp_path, size=size, batch=batch)


# the same classes as the ones above, larger: built on the meta device, filled in memory
@pytest.mark.parametrize("name,size", [("swin_b", 64), ("swin_v2_s", 64), ("swin_v2_b", 64)])
def test_large_swin_matches_torchvision(name, size):
    compare_in_memory(name, size)


@pytest.mark.parametrize("name,size", [("vit_l_16", 32), ("vit_l_32", 64)])
def test_large_vit_matches_torchvision_in_float32(name, size):
    compare_in_memory(name, size, dtype="float32", rtol=2e-4, atol=2e-4, image_size=size)


def torch_shapes(name, **kwargs):
    """{key: shape} of torchvision's model, in its order, built on the meta device."""
    torch = pytest.importorskip("torch")
    tv = torchvision()
    with torch.device("meta"):
        model = tv.models.get_model(name, weights=None, **kwargs)
    return [(k, tuple(v.shape)) for k, v in model.state_dict().items()]


def test_vit_h_14_has_torchvisions_keys_and_shapes():
    with nn.init.skipped():
        ours = ARCHITECTURES["vit_h_14"].build(num_classes=10)
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict(keep_vars=True).items()] == \
        torch_shapes("vit_h_14", num_classes=10)


# ---- small configurations of the same classes, against torchvision's classes ----------------------------
def _same(ours, theirs, x, rtol=1e-10):
    """Load theirs into ours, both in float64; outputs and input gradients (all-ones seed) agree."""
    import torch

    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    ours.double().eval()
    theirs.double().eval()
    xs, xt = sl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y, yt = ours(xs), theirs(xt)
    np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), rtol=rtol, atol=rtol)
    y.sum().backward()
    yt.sum().backward()
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=rtol, atol=rtol)


SMALL_VIT = dict(image_size=24, patch_size=8, num_layers=2, num_heads=2, hidden_dim=8, mlp_dim=12, num_classes=5)


@pytest.mark.parametrize("extra", [{}, {"representation_size": 6}, {"conv_stem": True}])
def test_vision_transformer_options_match_torchvision(extra):
    tv = torchvision()
    import torch

    from torchvision.models import vision_transformer as tvit

    kwargs = dict(SMALL_VIT, **{k: v for k, v in extra.items() if k != "conv_stem"})
    if extra.get("conv_stem"):
        kwargs["conv_stem_configs"] = [tvit.ConvStemConfig(4, 3, 2), tvit.ConvStemConfig(6, 3, 4)]
    torch.manual_seed(0)
    theirs = tv.models.VisionTransformer(**kwargs)
    with torch.no_grad():  # torchvision starts the head, the class token and biases at zero
        for p in theirs.parameters():
            p.add_(torch.randn(p.shape) * 0.3)
    if extra.get("conv_stem"):
        kwargs["conv_stem_configs"] = [vit.ConvStemConfig(4, 3, 2), vit.ConvStemConfig(6, 3, 4)]
    ours = vit.VisionTransformer(**kwargs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _same(ours, theirs, np.random.default_rng(0).standard_normal((2, 3, 24, 24)))


def test_torchvisions_released_vit_keys_load():
    """torchvision's downloadable ViT weights name the MLP layers mlp.linear_1 / mlp.linear_2."""
    ours = vit.VisionTransformer(**SMALL_VIT)
    state = {k.replace("mlp.0.", "mlp.linear_1.").replace("mlp.3.", "mlp.linear_2."): v + 1.0
             for k, v in ours.state_dict().items()}
    assert sum("linear_1" in k for k in state) == 4
    ours.load_state_dict(state)
    np.testing.assert_array_equal(ours.encoder.layers[1].mlp[3].bias.numpy(),
                                  state["encoder.layers.encoder_layer_1.mlp.linear_2.bias"])
    assert list(vit.upgrade_keys(state)) == list(ours.state_dict())


def test_vit_takes_its_image_size_only():
    with pytest.raises(ValueError, match="Expected 24x24 but got 32x32"):
        vit.VisionTransformer(**SMALL_VIT)(sl.zeros(1, 3, 32, 32))


@pytest.mark.parametrize("v2", [False, True])
@pytest.mark.parametrize("size", [36, 48])  # 36: the 9x9 map padded to 10x10 windows, shifted and masked
def test_swin_blocks_match_torchvision_with_non_square_windows(v2, size):
    """Window (5, 3), two images, padding and shifts: a small SwinTransformer against torchvision's."""
    torchvision()
    import torch

    from torchvision.models import swin_transformer as tswin

    torch.manual_seed(0)
    kwargs = dict(patch_size=[4, 4], embed_dim=8, depths=[2, 2], num_heads=[2, 4], window_size=[5, 3],
                  num_classes=5)
    blocks = dict(block=tswin.SwinTransformerBlockV2, downsample_layer=tswin.PatchMergingV2) if v2 else {}
    theirs = tswin.SwinTransformer(**kwargs, **blocks)
    with torch.no_grad():
        for p in theirs.parameters():
            p.add_(torch.randn(p.shape) * 0.3)
    blocks = dict(block=swin.SwinTransformerBlockV2, downsample_layer=swin.PatchMergingV2) if v2 else {}
    ours = swin.SwinTransformer(**kwargs, **blocks)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _same(ours, theirs, np.random.default_rng(1).standard_normal((2, 3, size, size)))


def test_initialisation_follows_torchvision():
    sl.manual_seed(0)
    model = vit.VisionTransformer(image_size=32, patch_size=16, num_layers=2, num_heads=4, hidden_dim=64,
                                  mlp_dim=256)
    block = model.encoder.layers[0]
    for zero in (model.class_token, model.heads.head.weight, model.heads.head.bias, model.conv_proj.bias,
                 block.self_attention.in_proj_bias, block.self_attention.out_proj.bias):
        assert not zero.numpy().any()
    assert abs(model.encoder.pos_embedding.numpy().std() - 0.02) < 0.004
    assert np.abs(block.mlp[0].bias.numpy()).max() < 1e-5
    w = block.self_attention.in_proj_weight.numpy()  # xavier_uniform_: U(-a, a), a = sqrt(6 / (64 + 192))
    assert np.abs(w).max() <= np.sqrt(6 / 256) and abs(w.std() - np.sqrt(6 / 256 / 3)) < 0.01
    w = model.conv_proj.weight.numpy()  # truncated normal, std sqrt(1 / fan_in)
    assert abs(w.std() - np.sqrt(1 / (3 * 16 * 16))) < 0.002
    model = swin.swin_t(num_classes=10)
    attn = model.features[1][0].attn
    assert abs(attn.relative_position_bias_table.numpy().std() - 0.02) < 0.002
    assert abs(model.head.weight.numpy().std() - 0.02) < 0.002 and not model.head.bias.numpy().any()
    assert not model.features[1][1].mlp[0].bias.numpy().any()  # the last loop zeroes every Linear's bias
    tv = torchvision()
    expected = tv.models.swin_transformer.ShiftedWindowAttention(8, [7, 7], [3, 3], 2).relative_position_index
    np.testing.assert_array_equal(attn.relative_position_index.numpy(), expected.numpy())
    v2 = swin.swin_v2_t().features[1][0].attn
    expected = tv.models.swin_transformer.ShiftedWindowAttentionV2(8, [8, 8], [4, 4], 2).relative_coords_table
    np.testing.assert_allclose(v2.relative_coords_table.numpy(), expected.numpy(), rtol=1e-6)
    assert not v2.qkv.bias.numpy().any()
