"""The building blocks torchvision's architectures share (its `torchvision.ops.misc` and
`stochastic_depth`), with the same parameter names, so that their state-dict keys match.

* `Conv2dNormActivation`: a Sequential of a convolution ("0"), a norm layer ("1") and an
  activation ("2"); "same" padding by default, no bias when a norm layer follows.
* `SqueezeExcitation`: x * scale_activation(fc2(activation(fc1(avgpool(x))))), the two "fc"
  layers 1x1 convolutions.
* `StochasticDepth`: drops whole residual branches at random while training (`mode` "row": per
  image, "batch": all at once), scaling the kept ones by 1 / (1 - p); the identity in eval mode.
* `Permute`: x.permute(dims), as a layer (ConvNeXt's and Swin's channels-last stages).
* `MLP`: Linear ("0", "3", ... with norm, activation and dropout between), torchvision's layout.
* `init_he`: the initialisation most of torchvision's CNNs share.
"""
from typing import Callable, Sequence

import saliency as sl
from saliency import Tensor, nn
from saliency._typing import Size

# A norm layer's class (or a functools.partial of one): channels -> the layer
NormLayer = Callable[[int], nn.Module]
# An activation layer's class (or a partial of one), called with no arguments or with `inplace=`
ActivationLayer = Callable[..., nn.Module]


class Conv2dNormActivation(nn.Sequential):
    """conv (kernel_size, stride, dilation, groups) -> norm_layer -> activation_layer, as
    torchvision builds it; padding None is (kernel_size - 1) // 2 * dilation, bias None is "no bias
    when there is a norm layer"."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Size = 3, stride: Size = 1,
                 padding: Size | str | None = None, groups: int = 1, norm_layer: NormLayer | None = nn.BatchNorm2d,
                 activation_layer: ActivationLayer | None = nn.ReLU, dilation: Size = 1, inplace: bool | None = True,
                 bias: bool | None = None) -> None:
        if padding is None:
            pair = (lambda v: (v, v) if isinstance(v, int) else tuple(v))
            k, d = pair(kernel_size), pair(dilation)
            padding = tuple((k[i] - 1) // 2 * d[i] for i in range(2))
        if bias is None:
            bias = norm_layer is None
        layers: list[nn.Module] = [nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding,
                                             dilation=dilation, groups=groups, bias=bias)]
        if norm_layer is not None:
            layers.append(norm_layer(out_channels))
        if activation_layer is not None:
            layers.append(activation_layer())
        super().__init__(*layers)
        self.out_channels = out_channels


class SqueezeExcitation(nn.Module):
    """Channel attention: the input scaled per channel by a gate computed from its spatial mean."""

    def __init__(self, input_channels: int, squeeze_channels: int, activation: ActivationLayer = nn.ReLU,
                 scale_activation: ActivationLayer = nn.Sigmoid) -> None:
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(input_channels, squeeze_channels, 1)
        self.fc2 = nn.Conv2d(squeeze_channels, input_channels, 1)
        self.activation = activation()
        self.scale_activation = scale_activation()

    def forward(self, x: Tensor) -> Tensor:
        scale = self.scale_activation(self.fc2(self.activation(self.fc1(self.avgpool(x)))))
        return scale * x


class StochasticDepth(nn.Module):
    """Randomly drops the residual branch it wraps while training; the identity in eval mode."""

    def __init__(self, p: float, mode: str) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"drop probability has to be between 0 and 1, but got {p}")
        if mode not in ("batch", "row"):
            raise ValueError(f"mode has to be either 'batch' or 'row', but got {mode}")
        self.p, self.mode = p, mode

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        shape = [x.shape[0]] + [1] * (x.ndim - 1) if self.mode == "row" else [1] * x.ndim
        keep = 1.0 - self.p
        mask = (sl.rand(*shape, dtype=x.dtype) < keep).to(x.dtype)
        return x * mask / keep if keep > 0 else x * mask

    def extra_repr(self) -> str:
        return f"p={self.p}, mode={self.mode}"


class Permute(nn.Module):
    """x.permute(dims)."""

    def __init__(self, dims: Sequence[int]) -> None:
        super().__init__()
        self.dims = list(dims)

    def forward(self, x: Tensor) -> Tensor:
        return x.permute(*self.dims)


class MLP(nn.Sequential):
    """Linear layers of `hidden_channels` widths, each but the last followed by norm_layer (if
    any), activation_layer and Dropout; the last followed by Dropout. Keys as torchvision's."""

    def __init__(self, in_channels: int, hidden_channels: Sequence[int], norm_layer: NormLayer | None = None,
                 activation_layer: ActivationLayer = nn.ReLU, inplace: bool | None = None, bias: bool = True,
                 dropout: float = 0.0) -> None:
        layers: list[nn.Module] = []
        width = in_channels
        for hidden in hidden_channels[:-1]:
            layers.append(nn.Linear(width, hidden, bias=bias))
            if norm_layer is not None:
                layers.append(norm_layer(hidden))
            layers += [activation_layer(), nn.Dropout(dropout)]
            width = hidden
        layers += [nn.Linear(width, hidden_channels[-1], bias=bias), nn.Dropout(dropout)]
        super().__init__(*layers)


def init_he(model: nn.Module, linear: Callable[[nn.Linear], object] | None = None) -> None:
    """torchvision's initialisation of its CNNs: every convolution He-normal for ReLU (fan out)
    with a zero bias, every batch and group norm ones and zeros, and every Linear by `linear(m)`
    (None: as built)."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif linear is not None and isinstance(m, nn.Linear):
            linear(m)


def normal_linear(m: nn.Linear) -> None:
    """A Linear's weight N(0, 0.01^2), its bias zero (the mobile networks' and VGG's)."""
    nn.init.normal_(m.weight, 0.0, 0.01)
    nn.init.zeros_(m.bias)
