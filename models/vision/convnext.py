"""torchvision's ConvNeXt (Liu et al., arXiv:2201.03545): a 4x4 patchify stem, four stages of CNBlocks
(depthwise 7x7, LayerNorm over channels, an inverted MLP with GELU, a learned per-channel
`layer_scale`, stochastic depth) with a LayerNorm and 2x2 strided convolution between stages, global
average pooling, and a LayerNorm + linear classifier; module names as torchvision's (`features`,
`classifier`; each block's `block`, `layer_scale`, `stochastic_depth`).
"""
from functools import partial
from typing import Any, Callable, Sequence

import saliency as sl
from saliency import Tensor, nn
from saliency.nn import functional as F

from . import register
from .layers import Conv2dNormActivation, NormLayer, Permute, StochasticDepth


class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over the channels of an (N, C, H, W) tensor, at every position."""

    def forward(self, x: Tensor) -> Tensor:
        x = F.layer_norm(x.permute(0, 2, 3, 1), self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class CNBlock(nn.Module):
    """x + stochastic_depth(layer_scale * block(x)); the MLP runs channels-last (Permute in and out)."""

    def __init__(self, dim: int, layer_scale: float, stochastic_depth_prob: float,
                 norm_layer: NormLayer | None = None) -> None:
        super().__init__()
        norm_layer = norm_layer or partial(nn.LayerNorm, eps=1e-6)
        self.block = nn.Sequential(nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim, bias=True),
                                   Permute([0, 2, 3, 1]),
                                   norm_layer(dim),
                                   nn.Linear(in_features=dim, out_features=4 * dim, bias=True),
                                   nn.GELU(),
                                   nn.Linear(in_features=4 * dim, out_features=dim, bias=True),
                                   Permute([0, 3, 1, 2]))
        self.layer_scale = nn.Parameter(sl.ones(dim, 1, 1) * layer_scale)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")

    def forward(self, x: Tensor) -> Tensor:
        return self.stochastic_depth(self.layer_scale * self.block(x)) + x


class CNBlockConfig:
    """A stage: `num_layers` blocks of width `input_channels`, then a downsampling to `out_channels`
    (none after the last stage, whose out_channels is None)."""

    def __init__(self, input_channels: int, out_channels: int | None, num_layers: int) -> None:
        self.input_channels, self.out_channels, self.num_layers = input_channels, out_channels, num_layers

    def __repr__(self) -> str:
        return (f"CNBlockConfig(input_channels={self.input_channels}, out_channels={self.out_channels}, "
                f"num_layers={self.num_layers})")


class ConvNeXt(nn.Module):
    """The stem, the stages of `block_setting` (stochastic depth growing linearly from 0 to
    `stochastic_depth_prob` over all blocks), pooling and the classifier."""

    def __init__(self, block_setting: Sequence[CNBlockConfig], stochastic_depth_prob: float = 0.0,
                 layer_scale: float = 1e-6, num_classes: int = 1000, block: Callable[..., nn.Module] | None = None,
                 norm_layer: NormLayer | None = None) -> None:
        super().__init__()
        if not block_setting:
            raise ValueError("The block_setting should not be empty")
        if not all(isinstance(s, CNBlockConfig) for s in block_setting):
            raise TypeError("The block_setting should be a list of CNBlockConfig")
        block = block or CNBlock
        norm_layer = norm_layer or partial(LayerNorm2d, eps=1e-6)
        layers: list[nn.Module] = [Conv2dNormActivation(3, block_setting[0].input_channels, kernel_size=4, stride=4,
                                                        padding=0, norm_layer=norm_layer, activation_layer=None,
                                                        bias=True)]
        total = sum(cnf.num_layers for cnf in block_setting)
        index = 0
        for cnf in block_setting:
            stage: list[nn.Module] = []
            for _ in range(cnf.num_layers):
                stage.append(block(cnf.input_channels, layer_scale, stochastic_depth_prob * index / (total - 1.0)))
                index += 1
            layers.append(nn.Sequential(*stage))
            if cnf.out_channels is not None:
                layers.append(nn.Sequential(norm_layer(cnf.input_channels),
                                            nn.Conv2d(cnf.input_channels, cnf.out_channels, kernel_size=2, stride=2)))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        last = block_setting[-1]
        width = last.out_channels if last.out_channels is not None else last.input_channels
        self.classifier = nn.Sequential(norm_layer(width), nn.Flatten(1), nn.Linear(width, num_classes))
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                # torchvision's trunc_normal_(std=0.02) cuts at +-2, 100 standard deviations out: the
                # cut never binds, so this is the same distribution (and init.trunc_normal_, which
                # inverts erf element by element, takes 20 s on convnext_tiny's 28M weights)
                nn.init.normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.avgpool(self.features(x)))


def _family(name: str, widths: list[int], depths: list[int],
            stochastic_depth_prob: float) -> Callable[..., ConvNeXt]:
    """Register the builder of `name`: stage widths and depths, the default stochastic depth."""
    def build(**kwargs: Any) -> ConvNeXt:
        setting = [CNBlockConfig(w, out, n) for w, out, n in zip(widths, widths[1:] + [None], depths)]
        return ConvNeXt(setting, stochastic_depth_prob=kwargs.pop("stochastic_depth_prob", stochastic_depth_prob),
                        **kwargs)
    return register(name, build, min_size=32)


convnext_tiny = _family("convnext_tiny", [96, 192, 384, 768], [3, 3, 9, 3], 0.1)
convnext_small = _family("convnext_small", [96, 192, 384, 768], [3, 3, 27, 3], 0.4)
convnext_base = _family("convnext_base", [128, 256, 512, 1024], [3, 3, 27, 3], 0.5)
convnext_large = _family("convnext_large", [192, 384, 768, 1536], [3, 3, 27, 3], 0.5)
