"""torchvision's VGG (Simonyan & Zisserman, arXiv:1409.1556): configurations A (vgg11), B (vgg13),
D (vgg16) and E (vgg19) of 3x3 convolutions and 2x2 max pools, each with or without batch norm
(`_bn`), average-pooled to 7x7, then three linear layers with dropout."""
from saliency import nn

from . import register
from .layers import init_he, normal_linear

# output channels of each 3x3 convolution, "M" a 2x2 max pool
CONFIGS = {
    "A": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "B": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "D": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    "E": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M"],
}


def make_layers(config, batch_norm=False):
    """The `features` Sequential of a configuration: conv (-> BatchNorm2d) -> ReLU, and max pools."""
    layers, channels = [], 3
    for v in config:
        if v == "M":
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
            continue
        layers.append(nn.Conv2d(channels, v, kernel_size=3, padding=1))
        if batch_norm:
            layers.append(nn.BatchNorm2d(v))
        layers.append(nn.ReLU(inplace=True))
        channels = v
    return nn.Sequential(*layers)


class VGG(nn.Module):
    """`features`, `avgpool` (to 7x7) and `classifier` (linear layers of 4096 with dropout)."""

    def __init__(self, features, num_classes=1000, init_weights=True, dropout=0.5):
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

    def forward(self, x):
        return self.classifier(self.avgpool(self.features(x)).flatten(1))


# builder name: (configuration, batch norm)
VARIANTS = {f"vgg{depth}{suffix}": (config, bool(suffix))
            for depth, config in ((11, "A"), (13, "B"), (16, "D"), (19, "E")) for suffix in ("", "_bn")}


def _family(config, batch_norm):
    def build(**kwargs):
        return VGG(make_layers(CONFIGS[config], batch_norm), **kwargs)
    return build


for _name, (_config, _batch_norm) in VARIANTS.items():
    register(_name, _family(_config, _batch_norm), min_size=32)
