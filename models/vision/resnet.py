"""torchvision's residual networks: ResNet (He et al., arXiv:1512.03385, in its "v1.5" form: a
bottleneck strides on its 3x3 convolution), ResNeXt (grouped 3x3 convolutions, `groups` x
`width_per_group`) and Wide ResNet (bottlenecks twice as wide).

`replace_stride_with_dilation=[a, b, c]` keeps layer2..layer4 at their input's resolution with a
dilated 3x3 convolution instead of a stride of 2 (the segmentation backbones use [False, True,
True]); `zero_init_residual` starts every residual branch at zero (its last norm's weight).
"""
from typing import Any, Callable, Sequence

from saliency import Tensor, nn

from . import register
from .layers import NormLayer, init_he


def conv3x3(in_planes: int, out_planes: int, stride: int = 1, groups: int = 1, dilation: int = 1) -> nn.Conv2d:
    """3x3 convolution without bias, padded to keep the size at stride 1."""
    return nn.Conv2d(in_planes, out_planes, 3, stride=stride, padding=dilation, groups=groups, bias=False,
                     dilation=dilation)


def conv1x1(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    """1x1 convolution without bias."""
    return nn.Conv2d(in_planes, out_planes, 1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    """relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), two 3x3 convolutions."""

    expansion = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None,
                 groups: int = 1, base_width: int = 64, dilation: int = 1, norm_layer: NormLayer | None = None) -> None:
        super().__init__()
        norm_layer = norm_layer or nn.BatchNorm2d
        if groups != 1 or base_width != 64:
            raise ValueError(f"BasicBlock takes groups=1 and width_per_group=64, got groups={groups} and "
                             f"width_per_group={base_width}; use a Bottleneck architecture (resnet50, ...)")
        if dilation > 1:
            raise NotImplementedError(f"BasicBlock does not take dilation > 1, got {dilation}; "
                                      f"replace_stride_with_dilation needs a Bottleneck architecture (resnet50, ...)")
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = norm_layer(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = norm_layer(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: Tensor) -> Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        shortcut = x if self.downsample is None else self.downsample(x)
        return self.relu(out + shortcut)


class Bottleneck(nn.Module):
    """1x1 (reduce) -> 3x3 (stride, groups, dilation) -> 1x1 (expand by 4), plus the shortcut."""

    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None,
                 groups: int = 1, base_width: int = 64, dilation: int = 1, norm_layer: NormLayer | None = None) -> None:
        super().__init__()
        norm_layer = norm_layer or nn.BatchNorm2d
        width = int(planes * (base_width / 64.0)) * groups
        self.conv1 = conv1x1(inplanes, width)
        self.bn1 = norm_layer(width)
        self.conv2 = conv3x3(width, width, stride, groups, dilation)
        self.bn2 = norm_layer(width)
        self.conv3 = conv1x1(width, planes * self.expansion)
        self.bn3 = norm_layer(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: Tensor) -> Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        shortcut = x if self.downsample is None else self.downsample(x)
        return self.relu(out + shortcut)


class ResNet(nn.Module):
    """A 7x7 stem and max pool, four stages of residual blocks (64, 128, 256, 512 planes), global
    average pooling and a linear classifier."""

    def __init__(self, block: type[BasicBlock | Bottleneck], layers: Sequence[int], num_classes: int = 1000,
                 zero_init_residual: bool = False, groups: int = 1, width_per_group: int = 64,
                 replace_stride_with_dilation: Sequence[bool] | None = None,
                 norm_layer: NormLayer | None = None) -> None:
        super().__init__()
        self._norm_layer = norm_layer or nn.BatchNorm2d
        self.inplanes, self.dilation = 64, 1
        dilate = list(replace_stride_with_dilation or [False, False, False])
        if len(dilate) != 3:
            raise ValueError(f"replace_stride_with_dilation should be None or a 3-element list, "
                             f"got {replace_stride_with_dilation!r}")
        self.groups, self.base_width = groups, width_per_group
        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = self._norm_layer(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], stride=2, dilate=dilate[0])
        self.layer3 = self._make_layer(block, 256, layers[2], stride=2, dilate=dilate[1])
        self.layer4 = self._make_layer(block, 512, layers[3], stride=2, dilate=dilate[2])
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)

        init_he(self)  # the convolutions have no bias; fc keeps its default initialisation
        if zero_init_residual:
            for m in self.modules():
                last = m.bn3 if isinstance(m, Bottleneck) else m.bn2 if isinstance(m, BasicBlock) else None
                if last is not None and last.weight is not None:
                    nn.init.zeros_(last.weight)

    def _make_layer(self, block: type[BasicBlock | Bottleneck], planes: int, blocks: int, stride: int = 1,
                    dilate: bool = False) -> nn.Sequential:
        """A stage of `blocks` blocks; the first one strides (or, with `dilate`, dilates the rest)."""
        norm_layer = self._norm_layer
        first_dilation = self.dilation
        if dilate:
            self.dilation *= stride
            stride = 1
        downsample: nn.Module | None = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes * block.expansion, stride),
                                       norm_layer(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample, self.groups, self.base_width, first_dilation,
                        norm_layer)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes, groups=self.groups, base_width=self.base_width,
                         dilation=self.dilation, norm_layer=norm_layer) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(self.avgpool(x).flatten(1))


def _fixed(kwargs: dict[str, Any], **values: Any) -> dict[str, Any]:
    """Set the keyword arguments an architecture fixes; passing another value is a ValueError, as
    torchvision's builders raise."""
    for key, value in values.items():
        if key in kwargs and kwargs[key] != value:
            raise ValueError(f"the parameter {key!r} expected value {value!r} but got {kwargs[key]!r} instead")
        kwargs[key] = value
    return kwargs


def _family(block: type[BasicBlock | Bottleneck], layers: list[int], **widths: int) -> Callable[..., ResNet]:
    def build(**kwargs: Any) -> ResNet:
        return ResNet(block, layers, **_fixed(kwargs, **widths))
    return build


resnet18 = register("resnet18", _family(BasicBlock, [2, 2, 2, 2]), min_size=1)
resnet34 = register("resnet34", _family(BasicBlock, [3, 4, 6, 3]), min_size=1)
resnet50 = register("resnet50", _family(Bottleneck, [3, 4, 6, 3]), min_size=1)
resnet101 = register("resnet101", _family(Bottleneck, [3, 4, 23, 3]), min_size=1)
resnet152 = register("resnet152", _family(Bottleneck, [3, 8, 36, 3]), min_size=1)
resnext50_32x4d = register("resnext50_32x4d", _family(Bottleneck, [3, 4, 6, 3], groups=32, width_per_group=4),
                           min_size=1)
resnext101_32x8d = register("resnext101_32x8d", _family(Bottleneck, [3, 4, 23, 3], groups=32, width_per_group=8),
                            min_size=1)
resnext101_64x4d = register("resnext101_64x4d", _family(Bottleneck, [3, 4, 23, 3], groups=64, width_per_group=4),
                            min_size=1)
wide_resnet50_2 = register("wide_resnet50_2", _family(Bottleneck, [3, 4, 6, 3], width_per_group=128), min_size=1)
wide_resnet101_2 = register("wide_resnet101_2", _family(Bottleneck, [3, 4, 23, 3], width_per_group=128),
                            min_size=1)
