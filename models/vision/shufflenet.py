"""torchvision's ShuffleNet V2 (Ma et al., arXiv:1807.11164): a strided 3x3 stem and max pool, three
stages of units that split (or, when they stride, duplicate) the channels into two branches,
concatenate them and shuffle the channels of the two halves together, a 1x1 convolution, global
average pooling and a linear classifier; module names as torchvision's (`conv1`, `stage2`..`stage4`,
`conv5`, `fc`; a unit's `branch1` and `branch2`).
"""
from typing import Any, Callable, Sequence

import saliency as sl
from saliency import Tensor, nn

from . import register


def channel_shuffle(x: Tensor, groups: int) -> Tensor:
    """(N, groups * c, H, W) with channel g * c + i moved to i * groups + g."""
    n, channels, h, w = x.shape
    x = x.reshape(n, groups, channels // groups, h, w).transpose(1, 2)
    return x.reshape(n, channels, h, w)


def _depthwise(channels: int, stride: int) -> nn.Conv2d:
    return nn.Conv2d(channels, channels, 3, stride, 1, bias=False, groups=channels)


class InvertedResidual(nn.Module):
    """At stride 1, half the channels pass unchanged and half go through `branch2` (1x1, depthwise
    3x3, 1x1); at stride 2 both branches see the whole input (`branch1`: depthwise 3x3, 1x1)."""

    def __init__(self, inp: int, oup: int, stride: int) -> None:
        super().__init__()
        if not 1 <= stride <= 3:
            raise ValueError(f"illegal stride value {stride}; expected 1, 2 or 3")
        self.stride = stride
        half = oup // 2
        if stride == 1 and inp != half << 1:
            raise ValueError(f"Invalid combination of stride {stride}, inp {inp} and oup {oup} values. If stride == 1 "
                             f"then inp should be equal to oup // 2 << 1.")
        if stride > 1:
            self.branch1 = nn.Sequential(_depthwise(inp, stride), nn.BatchNorm2d(inp),
                                         nn.Conv2d(inp, half, 1, bias=False), nn.BatchNorm2d(half),
                                         nn.ReLU(inplace=True))
        else:
            self.branch1 = nn.Sequential()
        self.branch2 = nn.Sequential(nn.Conv2d(inp if stride > 1 else half, half, 1, bias=False),
                                     nn.BatchNorm2d(half), nn.ReLU(inplace=True),
                                     _depthwise(half, stride), nn.BatchNorm2d(half),
                                     nn.Conv2d(half, half, 1, bias=False), nn.BatchNorm2d(half),
                                     nn.ReLU(inplace=True))

    def forward(self, x: Tensor) -> Tensor:
        if self.stride == 1:
            kept, x2 = x.chunk(2, dim=1)
            out = sl.cat([kept, self.branch2(x2)], dim=1)
        else:
            out = sl.cat([self.branch1(x), self.branch2(x)], dim=1)
        return channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    """`stages_repeats`: units in stages 2-4; `stages_out_channels`: the widths of conv1, the three
    stages and conv5."""

    def __init__(self, stages_repeats: Sequence[int], stages_out_channels: Sequence[int], num_classes: int = 1000,
                 inverted_residual: Callable[..., nn.Module] = InvertedResidual) -> None:
        super().__init__()
        if len(stages_repeats) != 3:
            raise ValueError(f"expected stages_repeats as list of 3 positive ints, got {stages_repeats!r}")
        if len(stages_out_channels) != 5:
            raise ValueError(f"expected stages_out_channels as list of 5 positive ints, got {stages_out_channels!r}")
        self._stage_out_channels = list(stages_out_channels)
        width = stages_out_channels[0]
        self.conv1 = nn.Sequential(nn.Conv2d(3, width, 3, 2, 1, bias=False), nn.BatchNorm2d(width),
                                   nn.ReLU(inplace=True))
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        for i, (repeats, out) in enumerate(zip(stages_repeats, stages_out_channels[1:4]), start=2):
            units = [inverted_residual(width, out, 2)] + [inverted_residual(out, out, 1) for _ in range(repeats - 1)]
            setattr(self, f"stage{i}", nn.Sequential(*units))
            width = out
        last = stages_out_channels[-1]
        self.conv5 = nn.Sequential(nn.Conv2d(width, last, 1, 1, 0, bias=False), nn.BatchNorm2d(last),
                                   nn.ReLU(inplace=True))
        self.fc = nn.Linear(last, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.maxpool(self.conv1(x))
        x = self.conv5(self.stage4(self.stage3(self.stage2(x))))
        return self.fc(x.mean((2, 3)))


def _family(widths: list[int]) -> Callable[..., ShuffleNetV2]:
    def build(**kwargs: Any) -> ShuffleNetV2:
        return ShuffleNetV2([4, 8, 4], widths, **kwargs)
    return build


shufflenet_v2_x0_5 = register("shufflenet_v2_x0_5", _family([24, 48, 96, 192, 1024]), min_size=1)
shufflenet_v2_x1_0 = register("shufflenet_v2_x1_0", _family([24, 116, 232, 464, 1024]), min_size=1)
shufflenet_v2_x1_5 = register("shufflenet_v2_x1_5", _family([24, 176, 352, 704, 1024]), min_size=1)
shufflenet_v2_x2_0 = register("shufflenet_v2_x2_0", _family([24, 244, 488, 976, 2048]), min_size=1)
