"""torchvision's RegNets (Radosavovic et al., arXiv:2003.13678): RegNetX (residual bottlenecks with
grouped 3x3 convolutions) and RegNetY (the same with squeeze-excitation), their stage widths and
depths generated from the design-space parameters (w_0, w_a, w_m, depth, group width), with
torchvision's module names (`stem`, `trunk_output.block{i}.block{i}-{j}`, each block's `proj`, `f`
with "a", "b", "se", "c", `fc`).
"""
import math
from collections import OrderedDict
from functools import partial
from typing import Any, Callable, Iterator, Self

import numpy as np

from saliency import Tensor, nn

from . import register
from .layers import ActivationLayer, Conv2dNormActivation, NormLayer, SqueezeExcitation
from .mobilenet import make_divisible


class SimpleStemIN(Conv2dNormActivation):
    """The ImageNet stem: a strided 3x3 convolution, norm, activation."""

    def __init__(self, width_in: int, width_out: int, norm_layer: NormLayer, activation_layer: ActivationLayer) -> None:
        super().__init__(width_in, width_out, kernel_size=3, stride=2, norm_layer=norm_layer,
                         activation_layer=activation_layer)


class BottleneckTransform(nn.Sequential):
    """1x1 ("a"), grouped 3x3 with the stride ("b"), squeeze-excitation when se_ratio ("se"), 1x1 ("c")."""

    def __init__(self, width_in: int, width_out: int, stride: int, norm_layer: NormLayer,
                 activation_layer: ActivationLayer, group_width: int, bottleneck_multiplier: float,
                 se_ratio: float | None) -> None:
        w_b = int(round(width_out * bottleneck_multiplier))
        layers: OrderedDict[str, nn.Module] = OrderedDict()
        layers["a"] = Conv2dNormActivation(width_in, w_b, 1, norm_layer=norm_layer, activation_layer=activation_layer)
        layers["b"] = Conv2dNormActivation(w_b, w_b, 3, stride=stride, groups=w_b // group_width,
                                           norm_layer=norm_layer, activation_layer=activation_layer)
        if se_ratio:
            layers["se"] = SqueezeExcitation(w_b, int(round(se_ratio * width_in)), activation=activation_layer)
        layers["c"] = Conv2dNormActivation(w_b, width_out, 1, norm_layer=norm_layer, activation_layer=None)
        super().__init__(layers)


class ResBottleneckBlock(nn.Module):
    """activation(shortcut(x) + f(x)); the shortcut a strided 1x1 projection ("proj") when the shape changes."""

    def __init__(self, width_in: int, width_out: int, stride: int, norm_layer: NormLayer,
                 activation_layer: ActivationLayer, group_width: int = 1, bottleneck_multiplier: float = 1.0,
                 se_ratio: float | None = None) -> None:
        super().__init__()
        self.proj: nn.Module | None = None
        if width_in != width_out or stride != 1:
            self.proj = Conv2dNormActivation(width_in, width_out, 1, stride=stride, norm_layer=norm_layer,
                                             activation_layer=None)
        self.f = BottleneckTransform(width_in, width_out, stride, norm_layer, activation_layer, group_width,
                                     bottleneck_multiplier, se_ratio)
        self.activation = activation_layer(inplace=True)

    def forward(self, x: Tensor) -> Tensor:
        shortcut = x if self.proj is None else self.proj(x)
        return self.activation(shortcut + self.f(x))


class AnyStage(nn.Sequential):
    """`depth` blocks named "block{stage_index}-{i}"; the first changes the width and strides."""

    def __init__(self, width_in: int, width_out: int, stride: int, depth: int,
                 block_constructor: Callable[..., nn.Module], norm_layer: NormLayer, activation_layer: ActivationLayer,
                 group_width: int, bottleneck_multiplier: float, se_ratio: float | None = None,
                 stage_index: int = 0) -> None:
        super().__init__()
        for i in range(depth):
            self.add_module(f"block{stage_index}-{i}", block_constructor(
                width_in if i == 0 else width_out, width_out, stride if i == 0 else 1, norm_layer, activation_layer,
                group_width, bottleneck_multiplier, se_ratio))


class BlockParams:
    """Per-stage depths, widths, group widths, bottleneck multipliers and strides, and the SE ratio."""

    def __init__(self, depths: list[int], widths: list[int], group_widths: list[int],
                 bottleneck_multipliers: list[float], strides: list[int], se_ratio: float | None = None) -> None:
        self.depths, self.widths, self.group_widths = depths, widths, group_widths
        self.bottleneck_multipliers, self.strides, self.se_ratio = bottleneck_multipliers, strides, se_ratio

    @classmethod
    def from_init_params(cls, depth: int, w_0: int, w_a: float, w_m: float, group_width: int,
                         bottleneck_multiplier: float = 1.0, se_ratio: float | None = None) -> Self:
        """The stages of the design-space point: block j's width w_0 * w_m^round(log(1 + j w_a / w_0)
        / log w_m), quantised to 8; consecutive blocks of one width form a stage (stride 2 each).
        Computed in float32, as torchvision computes it, so that the roundings agree."""
        if w_a < 0 or w_0 <= 0 or w_m <= 1 or w_0 % 8 != 0:
            raise ValueError(f"Invalid RegNet settings: w_0={w_0}, w_a={w_a}, w_m={w_m} (need w_a >= 0, "
                             f"w_0 > 0 and a multiple of 8, w_m > 1)")
        f32 = np.float32
        cont = np.arange(depth, dtype=f32) * f32(w_a) + f32(w_0)
        capacity = np.round(np.log(cont / f32(w_0)) / f32(math.log(w_m)))
        block_widths = (np.round(f32(w_0) * np.power(f32(w_m), capacity) / f32(8)) * 8).astype(int).tolist()
        starts = [j for j in range(depth) if j == 0 or block_widths[j] != block_widths[j - 1]] + [depth]
        stage_widths = [block_widths[j] for j in starts[:-1]]
        stage_depths = [b - a for a, b in zip(starts, starts[1:])]
        n = len(stage_widths)
        multipliers = [bottleneck_multiplier] * n
        stage_widths, group_widths = cls._adjust_widths_groups_compatibilty(stage_widths, multipliers,
                                                                            [group_width] * n)
        return cls(stage_depths, stage_widths, group_widths, multipliers, [2] * n, se_ratio)

    def _get_expanded_params(self) -> Iterator[tuple[int, int, int, int, float]]:
        return zip(self.widths, self.strides, self.depths, self.group_widths, self.bottleneck_multipliers)

    @staticmethod
    def _adjust_widths_groups_compatibilty(stage_widths: list[int], bottleneck_ratios: list[float],
                                           group_widths: list[int]) -> tuple[list[int], list[int]]:
        """Bottleneck widths made multiples of their group widths (a group no wider than the bottleneck)."""
        bottlenecks = [int(w * b) for w, b in zip(stage_widths, bottleneck_ratios)]
        group_widths = [min(g, w) for g, w in zip(group_widths, bottlenecks)]
        bottlenecks = [make_divisible(w, g) for w, g in zip(bottlenecks, group_widths)]
        return [int(w / b) for w, b in zip(bottlenecks, bottleneck_ratios)], group_widths


class RegNet(nn.Module):
    """The stem, one AnyStage per stage of `block_params` (`trunk_output.block1`, ...), global average
    pooling and a linear classifier."""

    def __init__(self, block_params: BlockParams, num_classes: int = 1000, stem_width: int = 32,
                 stem_type: Callable[..., nn.Module] | None = None, block_type: Callable[..., nn.Module] | None = None,
                 norm_layer: NormLayer | None = None, activation: ActivationLayer | None = None) -> None:
        super().__init__()
        stem_type, block_type = stem_type or SimpleStemIN, block_type or ResBottleneckBlock
        norm_layer, activation = norm_layer or nn.BatchNorm2d, activation or nn.ReLU
        self.stem = stem_type(3, stem_width, norm_layer, activation)
        width = stem_width
        stages: OrderedDict[str, nn.Module] = OrderedDict()
        for i, (width_out, stride, depth, group_width, multiplier) in enumerate(block_params._get_expanded_params()):
            stages[f"block{i + 1}"] = AnyStage(width, width_out, stride, depth, block_type, norm_layer, activation,
                                               group_width, multiplier, block_params.se_ratio, stage_index=i + 1)
            width = width_out
        self.trunk_output = nn.Sequential(stages)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(in_features=width, out_features=num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                fan_out = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                nn.init.normal_(m.weight, mean=0.0, std=math.sqrt(2.0 / fan_out))
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, mean=0.0, std=0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x: Tensor) -> Tensor:
        x = self.avgpool(self.trunk_output(self.stem(x)))
        return self.fc(x.flatten(start_dim=1))


def _family(name: str, **design: Any) -> Callable[..., RegNet]:
    """Register the builder of `name`: its design-space point, torchvision's RegNet keywords
    (num_classes, stem_width, norm_layer, ...), BatchNorm2d(eps=1e-5, momentum=0.1) by default."""
    def build(**kwargs: Any) -> RegNet:
        norm_layer = kwargs.pop("norm_layer", partial(nn.BatchNorm2d, eps=1e-05, momentum=0.1))
        return RegNet(BlockParams.from_init_params(**design), norm_layer=norm_layer, **kwargs)
    return register(name, build, min_size=1)


regnet_y_400mf = _family("regnet_y_400mf", depth=16, w_0=48, w_a=27.89, w_m=2.09, group_width=8, se_ratio=0.25)
regnet_y_800mf = _family("regnet_y_800mf", depth=14, w_0=56, w_a=38.84, w_m=2.4, group_width=16, se_ratio=0.25)
regnet_y_1_6gf = _family("regnet_y_1_6gf", depth=27, w_0=48, w_a=20.71, w_m=2.65, group_width=24, se_ratio=0.25)
regnet_y_3_2gf = _family("regnet_y_3_2gf", depth=21, w_0=80, w_a=42.63, w_m=2.66, group_width=24, se_ratio=0.25)
regnet_y_8gf = _family("regnet_y_8gf", depth=17, w_0=192, w_a=76.82, w_m=2.19, group_width=56, se_ratio=0.25)
regnet_y_16gf = _family("regnet_y_16gf", depth=18, w_0=200, w_a=106.23, w_m=2.48, group_width=112, se_ratio=0.25)
regnet_y_32gf = _family("regnet_y_32gf", depth=20, w_0=232, w_a=115.89, w_m=2.53, group_width=232, se_ratio=0.25)
regnet_y_128gf = _family("regnet_y_128gf", depth=27, w_0=456, w_a=160.83, w_m=2.52, group_width=264, se_ratio=0.25)
regnet_x_400mf = _family("regnet_x_400mf", depth=22, w_0=24, w_a=24.48, w_m=2.54, group_width=16)
regnet_x_800mf = _family("regnet_x_800mf", depth=16, w_0=56, w_a=35.73, w_m=2.28, group_width=16)
regnet_x_1_6gf = _family("regnet_x_1_6gf", depth=18, w_0=80, w_a=34.01, w_m=2.25, group_width=24)
regnet_x_3_2gf = _family("regnet_x_3_2gf", depth=25, w_0=88, w_a=26.31, w_m=2.25, group_width=48)
regnet_x_8gf = _family("regnet_x_8gf", depth=23, w_0=80, w_a=49.56, w_m=2.88, group_width=120)
regnet_x_16gf = _family("regnet_x_16gf", depth=22, w_0=216, w_a=55.59, w_m=2.1, group_width=128)
regnet_x_32gf = _family("regnet_x_32gf", depth=23, w_0=320, w_a=69.86, w_m=2.0, group_width=168)
