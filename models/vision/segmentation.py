"""torchvision's semantic segmentation models: FCN (Long et al., arXiv:1411.4038) and DeepLabV3
(Chen et al., arXiv:1706.05587) on dilated ResNet backbones.

A model is a `backbone` (an `IntermediateLayerGetter`: the backbone's children up to the last one
used, returning the named feature maps), a `classifier` head on the "out" features and, with
`aux_loss=True`, an `aux_classifier` (an FCNHead on the "aux" features). Unlike torchvision's,
forward returns the "out" logits alone, (N, num_classes, H, W), upsampled bilinearly to the
input's size; the auxiliary head is built (its state-dict keys exist, so torchvision's files that
hold them load strict) but not computed.

The ResNet backbones are torchvision's resnet50 / resnet101 with replace_stride_with_dilation
[False, True, True] (output stride 8), "out" the output of layer4 and "aux" that of layer3.
"""
from typing import Callable, Mapping, Sequence

import saliency as sl
from saliency import Tensor, nn
from saliency.nn import functional as F

from . import register, resnet


class IntermediateLayerGetter(nn.ModuleDict):
    """The children of `model` in order, up to the last one named in `return_layers` ({child name:
    output name}); forward runs them one after the other and returns {output name: its output}."""

    def __init__(self, model: nn.Module, return_layers: Mapping[str, str]) -> None:
        children = dict(model.named_children())
        missing = sorted(set(return_layers) - set(children))
        if missing:
            raise ValueError(f"return_layers names {missing} are not children of the model; "
                             f"its children are {list(children)}")
        remaining = {str(k): str(v) for k, v in return_layers.items()}
        layers: dict[str, nn.Module] = {}
        for name, module in children.items():
            layers[name] = module
            remaining.pop(name, None)
            if not remaining:
                break
        super().__init__(layers)
        self.return_layers = {str(k): str(v) for k, v in return_layers.items()}

    def forward(self, x: Tensor) -> dict[str, Tensor]:
        out: dict[str, Tensor] = {}
        for name, module in self.items():
            x = module(x)
            if name in self.return_layers:
                out[self.return_layers[name]] = x
        return out


class _SegmentationModel(nn.Module):
    """`backbone` -> feature maps; `head(features)` -> logits at the features' resolution (the
    `classifier` on features["out"]); upsampled bilinearly (align_corners=False) to the input."""

    def __init__(self, backbone: nn.Module, classifier: nn.Module, aux_classifier: nn.Module | None = None) -> None:
        super().__init__()
        self.backbone = backbone
        self.classifier = classifier
        self.aux_classifier = aux_classifier

    def head(self, features: dict[str, Tensor]) -> Tensor:
        return self.classifier(features["out"])

    def forward(self, x: Tensor) -> Tensor:
        logits = self.head(self.backbone(x))
        return F.interpolate(logits, size=tuple(x.shape[-2:]), mode="bilinear", align_corners=False)


class FCN(_SegmentationModel):
    """Fully convolutional network: a backbone and an FCNHead."""


class DeepLabV3(_SegmentationModel):
    """DeepLabV3: a backbone and a DeepLabHead (atrous spatial pyramid pooling)."""


class FCNHead(nn.Sequential):
    """3x3 conv to in_channels / 4, BN, ReLU, dropout 0.1, 1x1 conv to `channels`."""

    def __init__(self, in_channels: int, channels: int) -> None:
        inter_channels = in_channels // 4
        super().__init__(
            nn.Conv2d(in_channels, inter_channels, 3, padding=1, bias=False), nn.BatchNorm2d(inter_channels),
            nn.ReLU(), nn.Dropout(0.1), nn.Conv2d(inter_channels, channels, 1),
        )


class ASPPConv(nn.Sequential):
    """3x3 conv dilated by `dilation` (padded to keep the size), BN, ReLU."""

    def __init__(self, in_channels: int, out_channels: int, dilation: int) -> None:
        super().__init__(
            nn.Conv2d(in_channels, out_channels, 3, padding=dilation, dilation=dilation, bias=False),
            nn.BatchNorm2d(out_channels), nn.ReLU(),
        )


class ASPPPooling(nn.Sequential):
    """Image-level features: global mean, 1x1 conv, BN, ReLU, spread back over the input's size."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__(nn.AdaptiveAvgPool2d(1), nn.Conv2d(in_channels, out_channels, 1, bias=False),
                         nn.BatchNorm2d(out_channels), nn.ReLU())

    def forward(self, x: Tensor) -> Tensor:
        size = tuple(x.shape[-2:])
        for module in self:
            x = module(x)
        return F.interpolate(x, size=size, mode="bilinear", align_corners=False)


class ASPP(nn.Module):
    """Atrous spatial pyramid pooling: a 1x1 branch, one dilated 3x3 branch per rate and the
    pooling branch (`convs`), concatenated and projected to `out_channels` (`project`)."""

    def __init__(self, in_channels: int, atrous_rates: Sequence[int], out_channels: int = 256) -> None:
        super().__init__()
        branches = [nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, bias=False), nn.BatchNorm2d(out_channels),
                                  nn.ReLU())]
        branches += [ASPPConv(in_channels, out_channels, rate) for rate in atrous_rates]
        branches.append(ASPPPooling(in_channels, out_channels))
        self.convs = nn.ModuleList(branches)
        self.project = nn.Sequential(
            nn.Conv2d(len(branches) * out_channels, out_channels, 1, bias=False), nn.BatchNorm2d(out_channels),
            nn.ReLU(), nn.Dropout(0.5),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.project(sl.cat([branch(x) for branch in self.convs], 1))


class DeepLabHead(nn.Sequential):
    """ASPP (rates 12, 24, 36 by default), 3x3 conv, BN, ReLU, 1x1 conv to `num_classes`."""

    def __init__(self, in_channels: int, num_classes: int, atrous_rates: Sequence[int] = (12, 24, 36)) -> None:
        super().__init__(
            ASPP(in_channels, atrous_rates), nn.Conv2d(256, 256, 3, padding=1, bias=False), nn.BatchNorm2d(256),
            nn.ReLU(), nn.Conv2d(256, num_classes, 1),
        )


def _check_backbone_weights(name: str, weights_backbone: object) -> None:
    if weights_backbone is not None:
        raise ValueError(f"{name}: weights_backbone must be None here, got {weights_backbone!r}; the backbone is "
                         f"built randomly initialised and weights load with saliency.models.load(name, weights=...)")


def _resnet_segmenter(model: type[_SegmentationModel], head: Callable[[int, int], nn.Module],
                      depth: int) -> Callable[..., _SegmentationModel]:
    """A builder of `model` (FCN, DeepLabV3) with `head` (FCNHead, DeepLabHead) on the dilated
    resnet`depth`, with torchvision's keyword arguments."""
    name = f"{'fcn' if model is FCN else 'deeplabv3'}_resnet{depth}"
    build_backbone = resnet.resnet50 if depth == 50 else resnet.resnet101

    def build(*, num_classes: int | None = None, aux_loss: bool | None = None,
              weights_backbone: object = None) -> _SegmentationModel:
        _check_backbone_weights(name, weights_backbone)
        num_classes = 21 if num_classes is None else num_classes
        backbone = build_backbone(replace_stride_with_dilation=[False, True, True])
        return_layers = {"layer4": "out", "layer3": "aux"} if aux_loss else {"layer4": "out"}
        aux_classifier = FCNHead(1024, num_classes) if aux_loss else None
        return model(IntermediateLayerGetter(backbone, return_layers), head(2048, num_classes), aux_classifier)

    build.__name__ = build.__qualname__ = name
    build.__doc__ = (f"{model.__name__} on a dilated ResNet-{depth}, with torchvision's keyword arguments "
                     f"(num_classes=21, aux_loss, weights_backbone=None).")
    return build


for _depth in (50, 101):
    register(f"fcn_resnet{_depth}", _resnet_segmenter(FCN, FCNHead, _depth), task="segmentation", min_size=1)
    register(f"deeplabv3_resnet{_depth}", _resnet_segmenter(DeepLabV3, DeepLabHead, _depth), task="segmentation",
             min_size=1)


# ---- MobileNetV3-Large segmenters: DeepLabV3 and LR-ASPP ----------------------------------------------

class LRASPP(_SegmentationModel):
    """Lite R-ASPP (Howard et al., arXiv:1905.02244): a backbone returning "low" (output stride 8)
    and "high" (output stride 16) features and an LRASPPHead; no auxiliary head."""

    def __init__(self, backbone: nn.Module, low_channels: int, high_channels: int, num_classes: int,
                 inter_channels: int = 128) -> None:
        super().__init__(backbone, LRASPPHead(low_channels, high_channels, num_classes, inter_channels))

    def head(self, features: dict[str, Tensor]) -> Tensor:
        return self.classifier(features)


class LRASPPHead(nn.Module):
    """The high features through a 1x1 conv, BN, ReLU (`cbr`) gated per channel by a sigmoid of their
    global mean (`scale`), upsampled to the low features' size and classified (`high_classifier`),
    plus a 1x1 classifier of the low features (`low_classifier`)."""

    def __init__(self, low_channels: int, high_channels: int, num_classes: int, inter_channels: int) -> None:
        super().__init__()
        self.cbr = nn.Sequential(nn.Conv2d(high_channels, inter_channels, 1, bias=False),
                                 nn.BatchNorm2d(inter_channels), nn.ReLU(inplace=True))
        self.scale = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(high_channels, inter_channels, 1, bias=False),
                                   nn.Sigmoid())
        self.low_classifier = nn.Conv2d(low_channels, num_classes, 1)
        self.high_classifier = nn.Conv2d(inter_channels, num_classes, 1)

    def forward(self, features: dict[str, Tensor]) -> Tensor:
        low, high = features["low"], features["high"]
        x = self.cbr(high) * self.scale(high)
        x = F.interpolate(x, size=tuple(low.shape[-2:]), mode="bilinear", align_corners=False)
        return self.low_classifier(low) + self.high_classifier(x)


def _mobilenet_v3_stages(name: str, weights_backbone: object) -> tuple[nn.Sequential, int, int]:
    """The `features` of a MobileNetV3-Large whose last stage is dilated instead of strided (output
    stride 16), and the indices of its last layer ("C5") and of the last layer at output stride 8
    ("C2": the fourth stage boundary from the end, as torchvision counts the strided blocks)."""
    from .mobilenet import mobilenet_v3_large

    _check_backbone_weights(name, weights_backbone)
    features = mobilenet_v3_large(dilated=True).features
    boundaries = [0] + [i for i, b in enumerate(features) if getattr(b, "_is_cn", False)] + [len(features) - 1]
    return features, boundaries[-1], boundaries[-4]


def deeplabv3_mobilenet_v3_large(*, num_classes: int | None = None, aux_loss: bool | None = None,
                                 weights_backbone: object = None) -> DeepLabV3:
    """DeepLabV3 on a dilated MobileNetV3-Large ("out": its last layer, 960 channels; with aux_loss an
    FCNHead on "aux", the 40-channel output-stride-8 layer), with torchvision's keyword arguments."""
    features, out_pos, aux_pos = _mobilenet_v3_stages("deeplabv3_mobilenet_v3_large", weights_backbone)
    num_classes = 21 if num_classes is None else num_classes
    return_layers = {str(out_pos): "out"}
    if aux_loss:
        return_layers[str(aux_pos)] = "aux"
    aux_classifier = FCNHead(features[aux_pos].out_channels, num_classes) if aux_loss else None
    return DeepLabV3(IntermediateLayerGetter(features, return_layers),
                     DeepLabHead(features[out_pos].out_channels, num_classes), aux_classifier)


def lraspp_mobilenet_v3_large(*, num_classes: int | None = None, aux_loss: bool = False,
                              weights_backbone: object = None) -> LRASPP:
    """LR-ASPP on a dilated MobileNetV3-Large ("low": the 40-channel output-stride-8 layer, "high":
    the last layer), with torchvision's keyword arguments; it has no auxiliary head."""
    if aux_loss:
        raise NotImplementedError("This model does not use auxiliary loss")
    features, high_pos, low_pos = _mobilenet_v3_stages("lraspp_mobilenet_v3_large", weights_backbone)
    backbone = IntermediateLayerGetter(features, {str(low_pos): "low", str(high_pos): "high"})
    return LRASPP(backbone, features[low_pos].out_channels, features[high_pos].out_channels,
                  21 if num_classes is None else num_classes)


register("deeplabv3_mobilenet_v3_large", deeplabv3_mobilenet_v3_large, task="segmentation", min_size=1)
register("lraspp_mobilenet_v3_large", lraspp_mobilenet_v3_large, task="segmentation", min_size=1)
