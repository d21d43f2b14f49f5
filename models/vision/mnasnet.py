"""torchvision's MNASNet (Tan et al., arXiv:1807.11626, the B1 variant): one Sequential `layers` (a
stem, a depthwise separable convolution, six stacks of inverted residuals, a 1x1 convolution to 1280
channels), the spatial mean and `classifier` (dropout, linear). `alpha` scales the depths.

Versions. torchvision's MNASNet is at `_version` 2, where the stem's depths (32 and 16) scale with
alpha too; a version 1 state dict (saved by torchvision before 0.5) has the unscaled stem, which
torchvision's `_load_from_state_dict` rebuilds before loading. The weights torchvision ships are all
version 2 (their parameter counts are version 2's), and for alpha 1.0 the two versions are the same.
A `.pth` file's version metadata does not reach `load_state_dict` here, so `MNASNet.upgrade_keys`
(which `load_state_dict` and `models.load` call) recognises a version 1 file by its stem's widths
(32 and 16 where alpha gives other depths) and rebuilds the stem as torchvision does; loading stays
strict.
"""
import warnings
from typing import Any, Callable, Mapping, TypeVar

from saliency import Tensor, nn
from saliency._typing import Shape

from . import register
from .layers import init_he

_V = TypeVar("_V")

# the paper's momentum 0.9997 is TensorFlow's; PyTorch's momentum is 1 minus it
_BN_MOMENTUM = 1 - 0.9997


class _InvertedResidual(nn.Module):
    """1x1 expansion, depthwise kxk (stride), 1x1 linear projection; plus the input when the shape is kept."""

    def __init__(self, in_ch: int, out_ch: int, kernel_size: int, stride: int, expansion_factor: int,
                 bn_momentum: float = 0.1) -> None:
        super().__init__()
        if stride not in (1, 2):
            raise ValueError(f"stride should be 1 or 2 instead of {stride}")
        if kernel_size not in (3, 5):
            raise ValueError(f"kernel_size should be 3 or 5 instead of {kernel_size}")
        mid = in_ch * expansion_factor
        self.apply_residual = in_ch == out_ch and stride == 1
        self.layers = nn.Sequential(
            nn.Conv2d(in_ch, mid, 1, bias=False), nn.BatchNorm2d(mid, momentum=bn_momentum), nn.ReLU(inplace=True),
            nn.Conv2d(mid, mid, kernel_size, padding=kernel_size // 2, stride=stride, groups=mid, bias=False),
            nn.BatchNorm2d(mid, momentum=bn_momentum), nn.ReLU(inplace=True),
            nn.Conv2d(mid, out_ch, 1, bias=False), nn.BatchNorm2d(out_ch, momentum=bn_momentum))

    def forward(self, x: Tensor) -> Tensor:
        return self.layers(x) + x if self.apply_residual else self.layers(x)


def _stack(in_ch: int, out_ch: int, kernel_size: int, stride: int, exp_factor: int, repeats: int,
           bn_momentum: float) -> nn.Sequential:
    """`repeats` inverted residuals; only the first changes the width and strides."""
    if repeats < 1:
        raise ValueError(f"repeats should be >= 1, instead got {repeats}")
    first = _InvertedResidual(in_ch, out_ch, kernel_size, stride, exp_factor, bn_momentum=bn_momentum)
    rest = [_InvertedResidual(out_ch, out_ch, kernel_size, 1, exp_factor, bn_momentum=bn_momentum)
            for _ in range(1, repeats)]
    return nn.Sequential(first, *rest)


def _round_to_multiple_of(val: float, divisor: int, round_up_bias: float = 0.9) -> int:
    """`val` rounded to a multiple of `divisor`, up unless that loses no more than 10%:
    (83, 8) -> 80, (84, 8) -> 88."""
    if not 0.0 < round_up_bias < 1.0:
        raise ValueError(f"round_up_bias should be greater than 0.0 and smaller than 1.0 instead of {round_up_bias}")
    rounded = max(divisor, int(val + divisor / 2) // divisor * divisor)
    return rounded if rounded >= round_up_bias * val else rounded + divisor


def _get_depths(alpha: float) -> list[int]:
    return [_round_to_multiple_of(depth * alpha, 8) for depth in (32, 16, 24, 40, 80, 96, 192, 320)]


def _stem(d0: int, d1: int, d2: int) -> list[nn.Module]:
    """The first nine entries of `layers`: conv, depthwise separable conv, the first stack."""
    return [nn.Conv2d(3, d0, 3, padding=1, stride=2, bias=False), nn.BatchNorm2d(d0, momentum=_BN_MOMENTUM),
            nn.ReLU(inplace=True),
            nn.Conv2d(d0, d0, 3, padding=1, stride=1, groups=d0, bias=False),
            nn.BatchNorm2d(d0, momentum=_BN_MOMENTUM), nn.ReLU(inplace=True),
            nn.Conv2d(d0, d1, 1, padding=0, stride=1, bias=False), nn.BatchNorm2d(d1, momentum=_BN_MOMENTUM),
            _stack(d1, d2, 3, 2, 3, 3, _BN_MOMENTUM)]


class MNASNet(nn.Module):
    """MNASNet B1 with depth multiplier `alpha`."""

    _version = 2  # 2: the stem's depths scale with alpha

    def __init__(self, alpha: float, num_classes: int = 1000, dropout: float = 0.2) -> None:
        super().__init__()
        if alpha <= 0.0:
            raise ValueError(f"alpha should be greater than 0.0 instead of {alpha}")
        self.alpha, self.num_classes = alpha, num_classes
        d = _get_depths(alpha)
        self.layers = nn.Sequential(
            *_stem(d[0], d[1], d[2]),
            _stack(d[2], d[3], 5, 2, 3, 3, _BN_MOMENTUM),
            _stack(d[3], d[4], 5, 2, 6, 3, _BN_MOMENTUM),
            _stack(d[4], d[5], 3, 1, 6, 2, _BN_MOMENTUM),
            _stack(d[5], d[6], 5, 2, 6, 4, _BN_MOMENTUM),
            _stack(d[6], d[7], 3, 1, 6, 1, _BN_MOMENTUM),
            nn.Conv2d(d[7], 1280, 1, padding=0, stride=1, bias=False),
            nn.BatchNorm2d(1280, momentum=_BN_MOMENTUM), nn.ReLU(inplace=True))
        self.classifier = nn.Sequential(nn.Dropout(p=dropout, inplace=True), nn.Linear(1280, num_classes))
        init_he(self, _init_linear)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.layers(x).mean((2, 3)))

    def upgrade_keys(self, mapping: Mapping[str, _V]) -> Mapping[str, _V]:
        """`mapping` (a state dict, or its keys' shapes) unchanged, the stem first rebuilt as
        version 1's when the mapping is a version 1 one (see the module docstring): the hook that
        `models.zoo` calls before it checks a file's shapes."""
        if hasattr(mapping, "get"):
            widths = [_shape(mapping.get(f"layers.{i}.weight"))[:1] for i in (0, 6)]
            if widths == [(32,), (16,)] and (self.layers[0].out_channels, self.layers[6].out_channels) != (32, 16):
                self.use_version_1_stem()
        return mapping

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> nn.IncompatibleKeys:
        """Module.load_state_dict of a version 2 or version 1 state dict; after a version 1 one the
        model stays at version 1, as torchvision's."""
        return super().load_state_dict(self.upgrade_keys(state_dict), strict)

    def use_version_1_stem(self) -> None:
        """Replace the stem by version 1's (depths 32 and 16 whatever alpha), as torchvision does when
        it loads a version 1 state dict."""
        for i, layer in enumerate(_stem(32, 16, _get_depths(self.alpha)[2])):
            self.layers[i] = layer
        self._version = 1
        warnings.warn("A new version of MNASNet model has been implemented. Your checkpoint was saved using the "
                      "previous version. This checkpoint will load and work as before, but you may want to upgrade "
                      "by training a newer model or transfer learning from an updated ImageNet checkpoint.",
                      UserWarning, stacklevel=3)


def _init_linear(m: nn.Linear) -> None:
    nn.init.kaiming_uniform_(m.weight, mode="fan_out", nonlinearity="sigmoid")
    nn.init.zeros_(m.bias)


def _shape(value: object) -> Shape:
    """The shape of an array, or a shape given as such."""
    return tuple(value) if isinstance(value, tuple) else tuple(getattr(value, "shape", ()))


def _family(alpha: float) -> Callable[..., MNASNet]:
    def build(**kwargs: Any) -> MNASNet:
        return MNASNet(alpha, **kwargs)
    return build


mnasnet0_5 = register("mnasnet0_5", _family(0.5), min_size=1)
mnasnet0_75 = register("mnasnet0_75", _family(0.75), min_size=1)
mnasnet1_0 = register("mnasnet1_0", _family(1.0), min_size=1)
mnasnet1_3 = register("mnasnet1_3", _family(1.3), min_size=1)
