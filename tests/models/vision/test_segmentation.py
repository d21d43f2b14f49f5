"""FCN and DeepLabV3 on dilated ResNets against torchvision's, in float64 at small inputs: the "out"
logits (torchvision returns a dict, ours the Tensor) and their input gradients for one pixel's
seed; with aux_loss=True the auxiliary head's keys load too."""
import pytest

from _torchvision import compare, same_out_on_a_batch

CASES = [
    ("fcn_resnet50", {"aux_loss": True}),
    ("fcn_resnet101", {"num_classes": 5}),
    ("deeplabv3_resnet50", {}),
    ("deeplabv3_resnet101", {"aux_loss": True}),
]


@pytest.mark.parametrize("name, kwargs", CASES, ids=[c[0] for c in CASES])
def test_same_as_torchvision(name, kwargs, tmp_path):
    ours, theirs = compare(name, tmp_path, size=16, weights_backbone=None, **kwargs)
    assert ours.task == "segmentation"
    assert any(k.startswith("aux_classifier.") for k in ours.state_dict()) == bool(kwargs.get("aux_loss"))
    if name == "deeplabv3_resnet50":
        same_out_on_a_batch(ours, theirs, (2, 3, 17, 23))


def test_backbone_returns_the_named_layers():
    import saliency as sl
    from saliency.models.vision import ARCHITECTURES
    from saliency.models.vision.segmentation import IntermediateLayerGetter

    model = ARCHITECTURES["fcn_resnet50"].build(aux_loss=True).eval()
    assert isinstance(model.backbone, IntermediateLayerGetter)
    assert list(model.backbone.keys()) == ["conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4"]
    with sl.no_grad():
        features = model.backbone(sl.randn(1, 3, 24, 24))
    assert {k: tuple(v.shape) for k, v in features.items()} == {"aux": (1, 1024, 3, 3), "out": (1, 2048, 3, 3)}
    with pytest.raises(ValueError, match="not children"):
        IntermediateLayerGetter(model.backbone, {"layer5": "out"})


def test_weights_backbone_is_refused():
    from saliency.models.vision import ARCHITECTURES

    with pytest.raises(ValueError, match="weights_backbone"):
        ARCHITECTURES["deeplabv3_resnet50"].build(weights_backbone="IMAGENET1K_V1")
