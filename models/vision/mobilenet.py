"""torchvision's MobileNets: V2 (Sandler et al., arXiv:1801.04381; inverted residuals with linear
bottlenecks, ReLU6) and V3 (Howard et al., arXiv:1905.02244; hard-swish, squeeze-excitation gated
by a hard sigmoid), with torchvision's module names (`features`, `classifier`, each V2 block's
`conv`, each V3 block's `block`).

`width_mult` scales every width (rounded to a multiple of 8 by `make_divisible`). V3's
`dilated=True` replaces the stride of its last stage by a dilation of 2 (the segmentation
backbones), `reduced_tail=True` halves the widths of that stage.
"""
from functools import partial
from typing import Any, Callable, Sequence

from saliency import Tensor, nn

from . import register
from .layers import Conv2dNormActivation, NormLayer, SqueezeExcitation, init_he, normal_linear


def make_divisible(v: float, divisor: int, min_value: int | None = None) -> int:
    """`v` rounded to the nearest multiple of `divisor` (at least `min_value`, by default `divisor`),
    one multiple up when rounding would lose more than 10% (the TensorFlow reference's rule)."""
    min_value = divisor if min_value is None else min_value
    rounded = max(min_value, int(v + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * v else rounded


# ---- MobileNet V2 ---------------------------------------------------------------------------------

class InvertedResidual(nn.Module):
    """1x1 expansion (skipped when expand_ratio is 1) -> 3x3 depthwise -> 1x1 linear projection,
    plus the input when the shape is kept."""

    def __init__(self, inp: int, oup: int, stride: int, expand_ratio: float,
                 norm_layer: NormLayer | None = None) -> None:
        super().__init__()
        if stride not in (1, 2):
            raise ValueError(f"stride should be 1 or 2 instead of {stride}")
        norm_layer = norm_layer or nn.BatchNorm2d
        hidden = int(round(inp * expand_ratio))
        self.stride = stride
        self.use_res_connect = stride == 1 and inp == oup
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(Conv2dNormActivation(inp, hidden, 1, norm_layer=norm_layer, activation_layer=nn.ReLU6))
        layers += [Conv2dNormActivation(hidden, hidden, stride=stride, groups=hidden, norm_layer=norm_layer,
                                        activation_layer=nn.ReLU6),
                   nn.Conv2d(hidden, oup, 1, 1, 0, bias=False),
                   norm_layer(oup)]
        self.conv = nn.Sequential(*layers)
        self.out_channels = oup
        self._is_cn = stride > 1

    def forward(self, x: Tensor) -> Tensor:
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


# t (expansion), c (channels), n (blocks), s (stride of the first block)
_V2_SETTING = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2], [6, 96, 3, 1], [6, 160, 3, 2],
               [6, 320, 1, 1]]


class MobileNetV2(nn.Module):
    """A strided 3x3 stem (32 channels), the inverted residual stages of `inverted_residual_setting`
    ([t, c, n, s] rows), a 1x1 convolution to 1280 channels, global average pooling, dropout and a
    linear classifier."""

    def __init__(self, num_classes: int = 1000, width_mult: float = 1.0,
                 inverted_residual_setting: Sequence[Sequence[int]] | None = None, round_nearest: int = 8,
                 block: Callable[..., nn.Module] | None = None, norm_layer: NormLayer | None = None,
                 dropout: float = 0.2) -> None:
        super().__init__()
        block = block or InvertedResidual
        norm_layer = norm_layer or nn.BatchNorm2d
        setting = _V2_SETTING if inverted_residual_setting is None else inverted_residual_setting
        if len(setting) == 0 or len(setting[0]) != 4:
            raise ValueError(f"inverted_residual_setting should be non-empty or a 4-element list, got {setting}")
        width = make_divisible(32 * width_mult, round_nearest)
        self.last_channel = make_divisible(1280 * max(1.0, width_mult), round_nearest)
        features: list[nn.Module] = [Conv2dNormActivation(3, width, stride=2, norm_layer=norm_layer,
                                                          activation_layer=nn.ReLU6)]
        for t, c, n, s in setting:
            out = make_divisible(c * width_mult, round_nearest)
            for i in range(n):
                features.append(block(width, out, s if i == 0 else 1, expand_ratio=t, norm_layer=norm_layer))
                width = out
        features.append(Conv2dNormActivation(width, self.last_channel, 1, norm_layer=norm_layer,
                                             activation_layer=nn.ReLU6))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout), nn.Linear(self.last_channel, num_classes))
        init_he(self, normal_linear)

    def forward(self, x: Tensor) -> Tensor:
        x = nn.functional.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(x.flatten(1))


# ---- MobileNet V3 ---------------------------------------------------------------------------------

class InvertedResidualConfig:
    """One row of the MobileNetV3 paper's tables 1 and 2; the widths scaled by `width_mult`."""

    def __init__(self, input_channels: int, kernel: int, expanded_channels: int, out_channels: int, use_se: bool,
                 activation: str, stride: int, dilation: int, width_mult: float) -> None:
        self.input_channels = self.adjust_channels(input_channels, width_mult)
        self.kernel = kernel
        self.expanded_channels = self.adjust_channels(expanded_channels, width_mult)
        self.out_channels = self.adjust_channels(out_channels, width_mult)
        self.use_se = use_se
        self.use_hs = activation == "HS"
        self.stride = stride
        self.dilation = dilation

    @staticmethod
    def adjust_channels(channels: float, width_mult: float) -> int:
        return make_divisible(channels * width_mult, 8)


class InvertedResidualV3(nn.Module):
    """1x1 expansion (when it widens) -> depthwise kxk (strided, or dilated instead) -> optional
    squeeze-excitation -> 1x1 projection, plus the input when the shape is kept; ReLU or hard-swish."""

    def __init__(self, cnf: InvertedResidualConfig, norm_layer: NormLayer,
                 se_layer: Callable[..., nn.Module] = partial(SqueezeExcitation,
                                                              scale_activation=nn.Hardsigmoid)) -> None:
        super().__init__()
        if not 1 <= cnf.stride <= 2:
            raise ValueError(f"illegal stride value {cnf.stride}; expected 1 or 2")
        self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
        activation = nn.Hardswish if cnf.use_hs else nn.ReLU
        wide = cnf.expanded_channels
        layers: list[nn.Module] = []
        if wide != cnf.input_channels:
            layers.append(Conv2dNormActivation(cnf.input_channels, wide, 1, norm_layer=norm_layer,
                                               activation_layer=activation))
        layers.append(Conv2dNormActivation(wide, wide, cnf.kernel, stride=1 if cnf.dilation > 1 else cnf.stride,
                                           dilation=cnf.dilation, groups=wide, norm_layer=norm_layer,
                                           activation_layer=activation))
        if cnf.use_se:
            layers.append(se_layer(wide, make_divisible(wide // 4, 8)))
        layers.append(Conv2dNormActivation(wide, cnf.out_channels, 1, norm_layer=norm_layer, activation_layer=None))
        self.block = nn.Sequential(*layers)
        self.out_channels = cnf.out_channels
        self._is_cn = cnf.stride > 1

    def forward(self, x: Tensor) -> Tensor:
        y = self.block(x)
        return y + x if self.use_res_connect else y


class MobileNetV3(nn.Module):
    """A strided 3x3 hard-swish stem, the blocks of `inverted_residual_setting`, a 1x1 convolution to
    6x the last width, global average pooling and a two-layer classifier (`last_channel` hidden)."""

    def __init__(self, inverted_residual_setting: Sequence[InvertedResidualConfig], last_channel: int,
                 num_classes: int = 1000, block: Callable[..., nn.Module] | None = None,
                 norm_layer: NormLayer | None = None, dropout: float = 0.2) -> None:
        super().__init__()
        if not inverted_residual_setting:
            raise ValueError("The inverted_residual_setting should not be empty")
        if not all(isinstance(s, InvertedResidualConfig) for s in inverted_residual_setting):
            raise TypeError("The inverted_residual_setting should be a list of InvertedResidualConfig")
        block = block or InvertedResidualV3
        norm_layer = norm_layer or partial(nn.BatchNorm2d, eps=0.001, momentum=0.01)
        first = inverted_residual_setting[0].input_channels
        layers: list[nn.Module] = [Conv2dNormActivation(3, first, 3, stride=2, norm_layer=norm_layer,
                                                        activation_layer=nn.Hardswish)]
        layers += [block(cnf, norm_layer) for cnf in inverted_residual_setting]
        last_in = inverted_residual_setting[-1].out_channels
        layers.append(Conv2dNormActivation(last_in, 6 * last_in, 1, norm_layer=norm_layer,
                                           activation_layer=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Linear(6 * last_in, last_channel), nn.Hardswish(inplace=True),
                                        nn.Dropout(p=dropout, inplace=True), nn.Linear(last_channel, num_classes))
        init_he(self, normal_linear)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.avgpool(self.features(x)).flatten(1))


def mobilenet_v3_config(arch: str, width_mult: float = 1.0, reduced_tail: bool = False,
                        dilated: bool = False) -> tuple[list[InvertedResidualConfig], int]:
    """(block configs, last_channel) of "mobilenet_v3_large" or "mobilenet_v3_small"."""
    r = 2 if reduced_tail else 1  # the last stage's widths are divided by r
    d = 2 if dilated else 1       # and its depthwise convolutions dilated by d
    conf = partial(InvertedResidualConfig, width_mult=width_mult)
    # input, kernel, expanded, out, SE, activation, stride, dilation
    if arch == "mobilenet_v3_large":
        rows = [(16, 3, 16, 16, False, "RE", 1, 1),
                (16, 3, 64, 24, False, "RE", 2, 1),
                (24, 3, 72, 24, False, "RE", 1, 1),
                (24, 5, 72, 40, True, "RE", 2, 1),
                (40, 5, 120, 40, True, "RE", 1, 1),
                (40, 5, 120, 40, True, "RE", 1, 1),
                (40, 3, 240, 80, False, "HS", 2, 1),
                (80, 3, 200, 80, False, "HS", 1, 1),
                (80, 3, 184, 80, False, "HS", 1, 1),
                (80, 3, 184, 80, False, "HS", 1, 1),
                (80, 3, 480, 112, True, "HS", 1, 1),
                (112, 3, 672, 112, True, "HS", 1, 1),
                (112, 5, 672, 160 // r, True, "HS", 2, d),
                (160 // r, 5, 960 // r, 160 // r, True, "HS", 1, d),
                (160 // r, 5, 960 // r, 160 // r, True, "HS", 1, d)]
        last = 1280 // r
    elif arch == "mobilenet_v3_small":
        rows = [(16, 3, 16, 16, True, "RE", 2, 1),
                (16, 3, 72, 24, False, "RE", 2, 1),
                (24, 3, 88, 24, False, "RE", 1, 1),
                (24, 5, 96, 40, True, "HS", 2, 1),
                (40, 5, 240, 40, True, "HS", 1, 1),
                (40, 5, 240, 40, True, "HS", 1, 1),
                (40, 5, 120, 48, True, "HS", 1, 1),
                (48, 5, 144, 48, True, "HS", 1, 1),
                (48, 5, 288, 96 // r, True, "HS", 2, d),
                (96 // r, 5, 576 // r, 96 // r, True, "HS", 1, d),
                (96 // r, 5, 576 // r, 96 // r, True, "HS", 1, d)]
        last = 1024 // r
    else:
        raise ValueError(f"unsupported model type {arch!r}; choose mobilenet_v3_large or mobilenet_v3_small")
    return [conf(*row) for row in rows], InvertedResidualConfig.adjust_channels(last, width_mult)


def mobilenet_v2(**kwargs: Any) -> MobileNetV2:
    return MobileNetV2(**kwargs)


def mobilenet_v3_large(*, width_mult: float = 1.0, reduced_tail: bool = False, dilated: bool = False,
                       **kwargs: Any) -> MobileNetV3:
    return MobileNetV3(*mobilenet_v3_config("mobilenet_v3_large", width_mult, reduced_tail, dilated), **kwargs)


def mobilenet_v3_small(*, width_mult: float = 1.0, reduced_tail: bool = False, dilated: bool = False,
                       **kwargs: Any) -> MobileNetV3:
    return MobileNetV3(*mobilenet_v3_config("mobilenet_v3_small", width_mult, reduced_tail, dilated), **kwargs)


register("mobilenet_v2", mobilenet_v2, min_size=1)
register("mobilenet_v3_large", mobilenet_v3_large, min_size=1)
register("mobilenet_v3_small", mobilenet_v3_small, min_size=1)
