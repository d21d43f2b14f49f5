"""torchvision's GoogLeNet (Inception v1, Szegedy et al., arXiv:1409.4842), with batch norm after
every convolution and, as torchvision has it, 3x3 rather than 5x5 convolutions in the third branch
of each Inception block.

With `aux_logits` (torchvision's default) the two auxiliary classifiers `aux1` and `aux2` exist, so
their state-dict keys do; they are computed only in training mode, where forward returns
(logits, aux2, aux1). In eval mode forward returns the logits. `transform_input` maps an input
normalised with ImageNet's mean and std to one normalised to [-1, 1], as the original weights
expect.
"""
import collections
from typing import Any, Callable, Sequence

import saliency as sl
from saliency import Tensor, nn
from saliency.nn import functional as F

from . import register

# the class of a convolution block (or a builder of one): (in_channels, out_channels, **conv keywords) -> Module
ConvBlock = Callable[..., nn.Module]

GoogLeNetOutputs = collections.namedtuple("GoogLeNetOutputs", ["logits", "aux_logits2", "aux_logits1"])

# (mean, std) of ImageNet per channel: transform_input undoes that normalisation and applies (x - 0.5) / 0.5
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def renormalise_input(x: Tensor) -> Tensor:
    """An ImageNet-normalised (N, 3, H, W) input renormalised to mean 0.5, std 0.5 per channel."""
    channels = [x[:, c:c + 1] * (std / 0.5) + (mean - 0.5) / 0.5
                for c, (mean, std) in enumerate(zip(IMAGENET_MEAN, IMAGENET_STD))]
    return sl.cat(channels, 1)


class BasicConv2d(nn.Module):
    """conv (no bias) -> BatchNorm2d(eps=0.001) -> ReLU; keyword arguments go to the convolution."""

    def __init__(self, in_channels: int, out_channels: int, **kwargs: Any) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, bias=False, **kwargs)
        self.bn = nn.BatchNorm2d(out_channels, eps=0.001)

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(self.bn(self.conv(x)))


class Inception(nn.Module):
    """Four branches concatenated: 1x1; 1x1 -> 3x3; 1x1 -> 3x3; 3x3 max pool -> 1x1."""

    def __init__(self, in_channels: int, ch1x1: int, ch3x3red: int, ch3x3: int, ch5x5red: int, ch5x5: int,
                 pool_proj: int, conv_block: ConvBlock | None = None) -> None:
        super().__init__()
        conv_block = conv_block or BasicConv2d
        self.branch1 = conv_block(in_channels, ch1x1, kernel_size=1)
        self.branch2 = nn.Sequential(conv_block(in_channels, ch3x3red, kernel_size=1),
                                     conv_block(ch3x3red, ch3x3, kernel_size=3, padding=1))
        self.branch3 = nn.Sequential(conv_block(in_channels, ch5x5red, kernel_size=1),
                                     conv_block(ch5x5red, ch5x5, kernel_size=3, padding=1))
        self.branch4 = nn.Sequential(nn.MaxPool2d(kernel_size=3, stride=1, padding=1, ceil_mode=True),
                                     conv_block(in_channels, pool_proj, kernel_size=1))

    def forward(self, x: Tensor) -> Tensor:
        return sl.cat([self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)], 1)


class InceptionAux(nn.Module):
    """Auxiliary classifier: mean-pool to 4x4, 1x1 conv to 128, then two linear layers."""

    def __init__(self, in_channels: int, num_classes: int, conv_block: ConvBlock | None = None,
                 dropout: float = 0.7) -> None:
        super().__init__()
        conv_block = conv_block or BasicConv2d
        self.conv = conv_block(in_channels, 128, kernel_size=1)
        self.fc1 = nn.Linear(2048, 1024)
        self.fc2 = nn.Linear(1024, num_classes)
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, x: Tensor) -> Tensor:
        x = self.conv(F.adaptive_avg_pool2d(x, (4, 4))).flatten(1)
        return self.fc2(self.dropout(F.relu(self.fc1(x))))


class GoogLeNet(nn.Module):
    """Stem, Inception blocks 3a..5b with max pools between, global mean, dropout, `fc`."""

    def __init__(self, num_classes: int = 1000, aux_logits: bool = True, transform_input: bool = False,
                 init_weights: bool | None = None, blocks: Sequence[Callable[..., nn.Module]] | None = None,
                 dropout: float = 0.2, dropout_aux: float = 0.7) -> None:
        super().__init__()
        blocks = blocks or (BasicConv2d, Inception, InceptionAux)
        if len(blocks) != 3:
            raise ValueError(f"blocks should have 3 entries (conv, inception, aux), got {len(blocks)}")
        conv_block, inception_block, aux_block = blocks
        self.aux_logits, self.transform_input = aux_logits, transform_input

        self.conv1 = conv_block(3, 64, kernel_size=7, stride=2, padding=3)
        self.maxpool1 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.conv2 = conv_block(64, 64, kernel_size=1)
        self.conv3 = conv_block(64, 192, kernel_size=3, padding=1)
        self.maxpool2 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.inception3a = inception_block(192, 64, 96, 128, 16, 32, 32)
        self.inception3b = inception_block(256, 128, 128, 192, 32, 96, 64)
        self.maxpool3 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.inception4a = inception_block(480, 192, 96, 208, 16, 48, 64)
        self.inception4b = inception_block(512, 160, 112, 224, 24, 64, 64)
        self.inception4c = inception_block(512, 128, 128, 256, 24, 64, 64)
        self.inception4d = inception_block(512, 112, 144, 288, 32, 64, 64)
        self.inception4e = inception_block(528, 256, 160, 320, 32, 128, 128)
        self.maxpool4 = nn.MaxPool2d(2, stride=2, ceil_mode=True)
        self.inception5a = inception_block(832, 256, 160, 320, 32, 128, 128)
        self.inception5b = inception_block(832, 384, 192, 384, 48, 128, 128)
        self.aux1 = aux_block(512, num_classes, dropout=dropout_aux) if aux_logits else None
        self.aux2 = aux_block(528, num_classes, dropout=dropout_aux) if aux_logits else None
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.dropout = nn.Dropout(p=dropout)
        self.fc = nn.Linear(1024, num_classes)

        if init_weights is None or init_weights:
            for m in self.modules():
                if isinstance(m, (nn.Conv2d, nn.Linear)):
                    nn.init.trunc_normal_(m.weight, mean=0.0, std=0.01, a=-2, b=2)
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.ones_(m.weight)
                    nn.init.zeros_(m.bias)

    def forward(self, x: Tensor) -> Tensor | GoogLeNetOutputs:
        if self.transform_input:
            x = renormalise_input(x)
        x = self.maxpool1(self.conv1(x))
        x = self.maxpool2(self.conv3(self.conv2(x)))
        x = self.maxpool3(self.inception3b(self.inception3a(x)))
        x = self.inception4a(x)
        aux_on = self.training and self.aux_logits
        aux1 = self.aux1(x) if aux_on and self.aux1 is not None else None
        x = self.inception4d(self.inception4c(self.inception4b(x)))
        aux2 = self.aux2(x) if aux_on and self.aux2 is not None else None
        x = self.maxpool4(self.inception4e(x))
        x = self.inception5b(self.inception5a(x))
        x = self.fc(self.dropout(self.avgpool(x).flatten(1)))
        return GoogLeNetOutputs(x, aux2, aux1) if aux_on else x


def googlenet(**kwargs: Any) -> GoogLeNet:
    """GoogLeNet with torchvision's keyword arguments (num_classes, aux_logits=True,
    transform_input=False, init_weights, dropout, dropout_aux)."""
    return GoogLeNet(**kwargs)


register("googlenet", googlenet, min_size=15)
