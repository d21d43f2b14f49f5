"""DeepLabV3 and LR-ASPP on a dilated MobileNetV3-Large against torchvision's, in float64 at small
inputs: the "out" logits (torchvision returns a dict, ours the Tensor) and their input gradients
for one pixel's seed; with aux_loss=True the auxiliary head's keys load too."""
import pytest

from _torchvision import compare, same_out_on_a_batch

CASES = [
    ("deeplabv3_mobilenet_v3_large", {"aux_loss": True}),
    ("deeplabv3_mobilenet_v3_large", {"num_classes": 5}),
    ("lraspp_mobilenet_v3_large", {}),
]


@pytest.mark.parametrize("name, kwargs", CASES, ids=["deeplabv3-aux", "deeplabv3-5-classes", "lraspp"])
def test_same_as_torchvision(name, kwargs, tmp_path):
    ours, theirs = compare(name, tmp_path, size=32, weights_backbone=None, **kwargs)
    assert ours.task == "segmentation"
    assert any(k.startswith("aux_classifier.") for k in ours.state_dict()) == bool(kwargs.get("aux_loss"))
    if name == "lraspp_mobilenet_v3_large":
        same_out_on_a_batch(ours, theirs, (2, 3, 35, 29))


def test_backbone_is_the_dilated_mobilenet_v3_large():
    import saliency as sl
    from saliency.models.vision import ARCHITECTURES
    from saliency.models.vision.segmentation import IntermediateLayerGetter

    model = ARCHITECTURES["deeplabv3_mobilenet_v3_large"].build(aux_loss=True).eval()
    assert isinstance(model.backbone, IntermediateLayerGetter)
    assert list(model.backbone.keys()) == [str(i) for i in range(17)]
    assert model.backbone.return_layers == {"16": "out", "4": "aux"}
    assert model.backbone["13"].block[1][0].dilation == (2, 2) and model.backbone["13"].block[1][0].stride == (1, 1)
    with sl.no_grad():
        features = model.backbone(sl.randn(1, 3, 64, 64))
    assert {k: tuple(v.shape) for k, v in features.items()} == {"aux": (1, 40, 8, 8), "out": (1, 960, 4, 4)}
    lraspp = ARCHITECTURES["lraspp_mobilenet_v3_large"].build()
    assert lraspp.backbone.return_layers == {"4": "low", "16": "high"}
    assert not any(k.startswith("aux") for k in lraspp.state_dict())


def test_builder_arguments_refused_as_torchvision_refuses_them():
    from saliency.models.vision import ARCHITECTURES

    with pytest.raises(NotImplementedError, match="auxiliary loss"):
        ARCHITECTURES["lraspp_mobilenet_v3_large"].build(aux_loss=True)
    with pytest.raises(ValueError, match="weights_backbone"):
        ARCHITECTURES["deeplabv3_mobilenet_v3_large"].build(weights_backbone="IMAGENET1K_V1")
