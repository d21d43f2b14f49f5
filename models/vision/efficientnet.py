"""torchvision's EfficientNets: B0-B7 (Tan & Le, arXiv:1905.11946; MBConv blocks, widths and depths
scaled per model) and V2 S/M/L (arXiv:2104.00298; Fused-MBConv blocks in the early stages), with
torchvision's module names (`features`, `classifier`; each block's `block` and `stochastic_depth`).

Each residual block's branch is dropped at random while training with a probability that grows
linearly from 0 to `stochastic_depth_prob` along the network (the identity in eval mode). B0-B4 use
BatchNorm2d's defaults, B5-B7 eps 1e-3 and momentum 0.01, V2 eps 1e-3, as torchvision's builders.
"""
import copy
import math
from functools import partial
from typing import Any, Callable, Sequence

from saliency import Tensor, nn

from . import register
from .layers import Conv2dNormActivation, NormLayer, SqueezeExcitation, StochasticDepth, init_he
from .mobilenet import make_divisible


class _MBConvConfig:
    """A stage: `num_layers` blocks of `block` type; only the first changes the width and strides."""

    def __init__(self, expand_ratio: float, kernel: int, stride: int, input_channels: int, out_channels: int,
                 num_layers: int, block: Callable[..., nn.Module]) -> None:
        self.expand_ratio, self.kernel, self.stride = expand_ratio, kernel, stride
        self.input_channels, self.out_channels, self.num_layers = input_channels, out_channels, num_layers
        self.block = block

    @staticmethod
    def adjust_channels(channels: float, width_mult: float, min_value: int | None = None) -> int:
        return make_divisible(channels * width_mult, 8, min_value)


class MBConvConfig(_MBConvConfig):
    """An MBConv stage, widths scaled by `width_mult` and depth by `depth_mult` (rounded up)."""

    def __init__(self, expand_ratio: float, kernel: int, stride: int, input_channels: int, out_channels: int,
                 num_layers: int, width_mult: float = 1.0, depth_mult: float = 1.0,
                 block: Callable[..., nn.Module] | None = None) -> None:
        super().__init__(expand_ratio, kernel, stride, self.adjust_channels(input_channels, width_mult),
                         self.adjust_channels(out_channels, width_mult), self.adjust_depth(num_layers, depth_mult),
                         block or MBConv)

    @staticmethod
    def adjust_depth(num_layers: int, depth_mult: float) -> int:
        return int(math.ceil(num_layers * depth_mult))


class FusedMBConvConfig(_MBConvConfig):
    """A Fused-MBConv stage (EfficientNet V2)."""

    def __init__(self, expand_ratio: float, kernel: int, stride: int, input_channels: int, out_channels: int,
                 num_layers: int, block: Callable[..., nn.Module] | None = None) -> None:
        super().__init__(expand_ratio, kernel, stride, input_channels, out_channels, num_layers, block or FusedMBConv)


class _Residual(nn.Module):
    """block(x), plus x (after stochastic depth on the branch) when the shape is kept."""

    def forward(self, x: Tensor) -> Tensor:
        y = self.block(x)
        return self.stochastic_depth(y) + x if self.use_res_connect else y


class MBConv(_Residual):
    """1x1 expansion (when it widens) -> depthwise kxk -> squeeze-excitation -> 1x1 projection, SiLU."""

    def __init__(self, cnf: _MBConvConfig, stochastic_depth_prob: float, norm_layer: NormLayer,
                 se_layer: Callable[..., nn.Module] = SqueezeExcitation) -> None:
        super().__init__()
        if not 1 <= cnf.stride <= 2:
            raise ValueError(f"illegal stride value {cnf.stride}; expected 1 or 2")
        self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
        wide = cnf.adjust_channels(cnf.input_channels, cnf.expand_ratio)
        layers: list[nn.Module] = []
        if wide != cnf.input_channels:
            layers.append(Conv2dNormActivation(cnf.input_channels, wide, 1, norm_layer=norm_layer,
                                               activation_layer=nn.SiLU))
        layers += [Conv2dNormActivation(wide, wide, cnf.kernel, stride=cnf.stride, groups=wide, norm_layer=norm_layer,
                                        activation_layer=nn.SiLU),
                   se_layer(wide, max(1, cnf.input_channels // 4), activation=partial(nn.SiLU, inplace=True)),
                   Conv2dNormActivation(wide, cnf.out_channels, 1, norm_layer=norm_layer, activation_layer=None)]
        self.block = nn.Sequential(*layers)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")
        self.out_channels = cnf.out_channels


class FusedMBConv(_Residual):
    """kxk expansion (strided) -> 1x1 projection; a single kxk convolution when it does not widen."""

    def __init__(self, cnf: _MBConvConfig, stochastic_depth_prob: float, norm_layer: NormLayer) -> None:
        super().__init__()
        if not 1 <= cnf.stride <= 2:
            raise ValueError(f"illegal stride value {cnf.stride}; expected 1 or 2")
        self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
        wide = cnf.adjust_channels(cnf.input_channels, cnf.expand_ratio)
        if wide != cnf.input_channels:
            layers = [Conv2dNormActivation(cnf.input_channels, wide, cnf.kernel, stride=cnf.stride,
                                           norm_layer=norm_layer, activation_layer=nn.SiLU),
                      Conv2dNormActivation(wide, cnf.out_channels, 1, norm_layer=norm_layer, activation_layer=None)]
        else:
            layers = [Conv2dNormActivation(cnf.input_channels, cnf.out_channels, cnf.kernel, stride=cnf.stride,
                                           norm_layer=norm_layer, activation_layer=nn.SiLU)]
        self.block = nn.Sequential(*layers)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")
        self.out_channels = cnf.out_channels


def _init_linear(m: nn.Linear) -> None:
    bound = 1.0 / math.sqrt(m.out_features)
    nn.init.uniform_(m.weight, -bound, bound)
    nn.init.zeros_(m.bias)


class EfficientNet(nn.Module):
    """A strided 3x3 SiLU stem, one Sequential per stage of `inverted_residual_setting`, a 1x1
    convolution to `last_channel` (4x the last width if None), global average pooling, dropout and
    a linear classifier."""

    def __init__(self, inverted_residual_setting: Sequence[_MBConvConfig], dropout: float,
                 stochastic_depth_prob: float = 0.2, num_classes: int = 1000, norm_layer: NormLayer | None = None,
                 last_channel: int | None = None) -> None:
        super().__init__()
        if not inverted_residual_setting:
            raise ValueError("The inverted_residual_setting should not be empty")
        if not all(isinstance(s, _MBConvConfig) for s in inverted_residual_setting):
            raise TypeError("The inverted_residual_setting should be a list of MBConvConfig or FusedMBConvConfig")
        norm_layer = norm_layer or nn.BatchNorm2d
        layers: list[nn.Module] = [Conv2dNormActivation(3, inverted_residual_setting[0].input_channels, 3, stride=2,
                                                        norm_layer=norm_layer, activation_layer=nn.SiLU)]
        total = sum(cnf.num_layers for cnf in inverted_residual_setting)
        index = 0
        for cnf in inverted_residual_setting:
            stage: list[nn.Module] = []
            for _ in range(cnf.num_layers):
                block_cnf = copy.copy(cnf)
                if stage:
                    block_cnf.input_channels, block_cnf.stride = block_cnf.out_channels, 1
                stage.append(block_cnf.block(block_cnf, stochastic_depth_prob * float(index) / total, norm_layer))
                index += 1
            layers.append(nn.Sequential(*stage))
        last_in = inverted_residual_setting[-1].out_channels
        last_out = last_channel if last_channel is not None else 4 * last_in
        layers.append(Conv2dNormActivation(last_in, last_out, 1, norm_layer=norm_layer, activation_layer=nn.SiLU))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout, inplace=True), nn.Linear(last_out, num_classes))
        init_he(self, _init_linear)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.avgpool(self.features(x)).flatten(1))


def efficientnet_config(arch: str, width_mult: float = 1.0,
                        depth_mult: float = 1.0) -> tuple[list[_MBConvConfig], int | None]:
    """(stage configs, last_channel) of "efficientnet_b*" (scaled by width_mult and depth_mult),
    "efficientnet_v2_s", "_m" or "_l"."""
    if arch.startswith("efficientnet_b"):
        mb: Callable[..., _MBConvConfig] = partial(MBConvConfig, width_mult=width_mult, depth_mult=depth_mult)
        # expand ratio, kernel, stride, input, out, layers
        return [mb(1, 3, 1, 32, 16, 1), mb(6, 3, 2, 16, 24, 2), mb(6, 5, 2, 24, 40, 2), mb(6, 3, 2, 40, 80, 3),
                mb(6, 5, 1, 80, 112, 3), mb(6, 5, 2, 112, 192, 4), mb(6, 3, 1, 192, 320, 1)], None
    fused, mb = FusedMBConvConfig, MBConvConfig
    if arch == "efficientnet_v2_s":
        return [fused(1, 3, 1, 24, 24, 2), fused(4, 3, 2, 24, 48, 4), fused(4, 3, 2, 48, 64, 4),
                mb(4, 3, 2, 64, 128, 6), mb(6, 3, 1, 128, 160, 9), mb(6, 3, 2, 160, 256, 15)], 1280
    if arch == "efficientnet_v2_m":
        return [fused(1, 3, 1, 24, 24, 3), fused(4, 3, 2, 24, 48, 5), fused(4, 3, 2, 48, 80, 5),
                mb(4, 3, 2, 80, 160, 7), mb(6, 3, 1, 160, 176, 14), mb(6, 3, 2, 176, 304, 18),
                mb(6, 3, 1, 304, 512, 5)], 1280
    if arch == "efficientnet_v2_l":
        return [fused(1, 3, 1, 32, 32, 4), fused(4, 3, 2, 32, 64, 7), fused(4, 3, 2, 64, 96, 7),
                mb(4, 3, 2, 96, 192, 10), mb(6, 3, 1, 192, 224, 19), mb(6, 3, 2, 224, 384, 25),
                mb(6, 3, 1, 384, 640, 7)], 1280
    raise ValueError(f"unsupported model type {arch!r}")


def _family(arch: str, dropout: float, norm_layer: NormLayer | None = None,
            **scale: float) -> Callable[..., EfficientNet]:
    """The builder of `arch`: `dropout` its default; `norm_layer`, when given, fixed (torchvision's
    builders of B5-B7 and V2 pass their own, and refuse another)."""
    def build(**kwargs: Any) -> EfficientNet:
        setting, last_channel = efficientnet_config(arch, **scale)
        fixed: dict[str, Any] = {} if norm_layer is None else {"norm_layer": norm_layer}
        return EfficientNet(setting, kwargs.pop("dropout", dropout), last_channel=last_channel, **fixed, **kwargs)
    return register(arch, build, min_size=1 if arch.startswith("efficientnet_b") else 33)


_BN_B5 = partial(nn.BatchNorm2d, eps=0.001, momentum=0.01)
_BN_V2 = partial(nn.BatchNorm2d, eps=1e-03)

efficientnet_b0 = _family("efficientnet_b0", 0.2, width_mult=1.0, depth_mult=1.0)
efficientnet_b1 = _family("efficientnet_b1", 0.2, width_mult=1.0, depth_mult=1.1)
efficientnet_b2 = _family("efficientnet_b2", 0.3, width_mult=1.1, depth_mult=1.2)
efficientnet_b3 = _family("efficientnet_b3", 0.3, width_mult=1.2, depth_mult=1.4)
efficientnet_b4 = _family("efficientnet_b4", 0.4, width_mult=1.4, depth_mult=1.8)
efficientnet_b5 = _family("efficientnet_b5", 0.4, _BN_B5, width_mult=1.6, depth_mult=2.2)
efficientnet_b6 = _family("efficientnet_b6", 0.5, _BN_B5, width_mult=1.8, depth_mult=2.6)
efficientnet_b7 = _family("efficientnet_b7", 0.5, _BN_B5, width_mult=2.0, depth_mult=3.1)
efficientnet_v2_s = _family("efficientnet_v2_s", 0.2, _BN_V2)
efficientnet_v2_m = _family("efficientnet_v2_m", 0.3, _BN_V2)
efficientnet_v2_l = _family("efficientnet_v2_l", 0.4, _BN_V2)
