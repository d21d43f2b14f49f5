"""torchvision's VGG (Simonyan & Zisserman, arXiv:1409.1556): configurations A (vgg11), B (vgg13),
D (vgg16) and E (vgg19) of 3x3 convolutions and 2x2 max pools, each with or without batch norm
(`_bn`), average-pooled to 7x7, then three linear layers with dropout."""
from typing import Any, Callable, Sequence, cast

from saliency import Tensor, nn

from . import register
from .layers import init_he, normal_linear

# output channels of each 3x3 convolution, "M" a 2x2 max pool
CONFIGS: dict[str, list[int | str]] = {
    "A": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "B": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "D": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    "E": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M"],
}


def make_layers(config: Sequence[int | str], batch_norm: bool = False) -> nn.Sequential:
    """The `features` Sequential of a configuration: conv (-> BatchNorm2d) -> ReLU, and max pools."""
    layers: list[nn.Module] = []
    channels = 3
    for v in config:
        if v == "M":
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
            continue
        v = cast(int, v)
        layers.append(nn.Conv2d(channels, v, kernel_size=3, padding=1))
        if batch_norm:
            layers.append(nn.BatchNorm2d(v))
        layers.append(nn.ReLU(inplace=True))
        channels = v
    return nn.Sequential(*layers)


class VGG(nn.Module):
    """`features`, `avgpool` (to 7x7) and `classifier` (linear layers of 4096 with dropout)."""

    def __init__(self, features: nn.Module, num_classes: int = 1000, init_weights: bool = True,
                 dropout: float = 0.5) -> None:
        super().__init__()
        self.features = features
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096), nn.ReLU(True), nn.Dropout(p=dropout),
            nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(p=dropout),
            nn.Linear(4096, num_classes),
        )
        if init_weights:
            init_he(self, normal_linear)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.avgpool(self.features(x)).flatten(1))


# builder name: (configuration, batch norm)
VARIANTS = {f"vgg{depth}{suffix}": (config, bool(suffix))
            for depth, config in ((11, "A"), (13, "B"), (16, "D"), (19, "E")) for suffix in ("", "_bn")}


def _family(config: str, batch_norm: bool) -> Callable[..., VGG]:
    def build(**kwargs: Any) -> VGG:
        return VGG(make_layers(CONFIGS[config], batch_norm), **kwargs)
    return build


for _name, (_config, _batch_norm) in VARIANTS.items():
    register(_name, _family(_config, _batch_norm), min_size=32)
