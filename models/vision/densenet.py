"""torchvision's DenseNet-BC (Huang et al., arXiv:1608.06993): dense blocks in which every layer
sees the concatenation of all earlier feature maps of its block, joined by transitions that halve
the channels (1x1 convolution) and the resolution (2x2 average pool).

`memory_efficient` (torchvision's gradient checkpointing) is accepted and ignored: it changes
memory use, not results.
"""
import collections
import re
from typing import Any, Callable, Mapping, Sequence, TypeVar

import saliency as sl
from saliency import Tensor, nn
from saliency.nn import functional as F

from . import register

_V = TypeVar("_V")


class _DenseLayer(nn.Module):
    """BN-ReLU-1x1 conv to bn_size * growth_rate channels, then BN-ReLU-3x3 conv to growth_rate."""

    def __init__(self, num_input_features: int, growth_rate: int, bn_size: int, drop_rate: float,
                 memory_efficient: bool = False) -> None:
        super().__init__()
        self.norm1 = nn.BatchNorm2d(num_input_features)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(num_input_features, bn_size * growth_rate, kernel_size=1, stride=1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth_rate)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(bn_size * growth_rate, growth_rate, kernel_size=3, stride=1, padding=1, bias=False)
        self.drop_rate = float(drop_rate)
        self.memory_efficient = memory_efficient

    def forward(self, features: Tensor | list[Tensor] | tuple[Tensor, ...]) -> Tensor:
        """`features`: a Tensor, or the list of the block's earlier maps (concatenated first)."""
        x = sl.cat(features, 1) if isinstance(features, (list, tuple)) else features
        x = self.conv1(self.relu1(self.norm1(x)))
        x = self.conv2(self.relu2(self.norm2(x)))
        if self.drop_rate > 0:
            x = F.dropout(x, p=self.drop_rate, training=self.training)
        return x


class _DenseBlock(nn.ModuleDict):
    """Layers "denselayer1", ...; the output is the input and every layer's output, concatenated."""

    def __init__(self, num_layers: int, num_input_features: int, bn_size: int, growth_rate: int, drop_rate: float,
                 memory_efficient: bool = False) -> None:
        super().__init__()
        for i in range(num_layers):
            self.add_module(f"denselayer{i + 1}", _DenseLayer(num_input_features + i * growth_rate, growth_rate,
                                                              bn_size, drop_rate, memory_efficient))

    def forward(self, x: Tensor) -> Tensor:
        features = [x]
        for layer in self.values():
            features.append(layer(features))
        return sl.cat(features, 1)


class _Transition(nn.Sequential):
    """BN-ReLU-1x1 conv, then a 2x2 average pool."""

    def __init__(self, num_input_features: int, num_output_features: int) -> None:
        super().__init__(collections.OrderedDict([
            ("norm", nn.BatchNorm2d(num_input_features)),
            ("relu", nn.ReLU(inplace=True)),
            ("conv", nn.Conv2d(num_input_features, num_output_features, kernel_size=1, stride=1, bias=False)),
            ("pool", nn.AvgPool2d(kernel_size=2, stride=2)),
        ]))


class DenseNet(nn.Module):
    """`features` (stem "conv0".."pool0", "denseblock1".., "transition1".., "norm5") and a linear
    `classifier` on the ReLU'd, globally averaged features."""

    def __init__(self, growth_rate: int = 32, block_config: Sequence[int] = (6, 12, 24, 16),
                 num_init_features: int = 64, bn_size: int = 4, drop_rate: float = 0, num_classes: int = 1000,
                 memory_efficient: bool = False) -> None:
        super().__init__()
        self.features = nn.Sequential(collections.OrderedDict([
            ("conv0", nn.Conv2d(3, num_init_features, kernel_size=7, stride=2, padding=3, bias=False)),
            ("norm0", nn.BatchNorm2d(num_init_features)),
            ("relu0", nn.ReLU(inplace=True)),
            ("pool0", nn.MaxPool2d(kernel_size=3, stride=2, padding=1)),
        ]))
        channels = num_init_features
        for i, num_layers in enumerate(block_config):
            self.features.add_module(f"denseblock{i + 1}", _DenseBlock(num_layers, channels, bn_size, growth_rate,
                                                                       drop_rate, memory_efficient))
            channels += num_layers * growth_rate
            if i != len(block_config) - 1:
                self.features.add_module(f"transition{i + 1}", _Transition(channels, channels // 2))
                channels //= 2
        self.features.add_module("norm5", nn.BatchNorm2d(channels))
        self.classifier = nn.Linear(channels, num_classes)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, x: Tensor) -> Tensor:
        x = F.relu(self.features(x))
        return self.classifier(F.adaptive_avg_pool2d(x, (1, 1)).flatten(1))

    @staticmethod
    def upgrade_keys(mapping: Mapping[str, _V]) -> collections.OrderedDict[str, _V]:
        """The keys of a file torchvision published, which name a dense layer's parts `norm.1`,
        `relu.2`, `conv.2`, renamed as torchvision renames them when it loads one (`norm1`, ...)."""
        return collections.OrderedDict((_OLD_LAYER_KEY.sub(r"\1\2", k), v) for k, v in mapping.items())

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> nn.IncompatibleKeys:
        return super().load_state_dict(self.upgrade_keys(state_dict), strict)


_OLD_LAYER_KEY = re.compile(r"^(.*denselayer\d+\.(?:norm|relu|conv))\."
                            r"((?:[12])\.(?:weight|bias|running_mean|running_var))$")


def _family(growth_rate: int, block_config: tuple[int, ...], num_init_features: int) -> Callable[..., DenseNet]:
    def build(**kwargs: Any) -> DenseNet:
        return DenseNet(growth_rate, block_config, num_init_features, **kwargs)
    return build


register("densenet121", _family(32, (6, 12, 24, 16), 64), min_size=29)
register("densenet161", _family(48, (6, 12, 36, 24), 96), min_size=29)
register("densenet169", _family(32, (6, 12, 32, 32), 64), min_size=29)
register("densenet201", _family(32, (6, 12, 48, 32), 64), min_size=29)
