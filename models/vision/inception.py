"""torchvision's Inception v3 (Szegedy et al., arXiv:1512.00567), for 299x299 inputs (75x75 at
least): a convolutional stem, Inception blocks A (Mixed_5*), B (6a), C (6b-6e, factorised 7x7),
D (7a) and E (7b, 7c, expanded 3x3), global mean, dropout and `fc`.

With `aux_logits` (torchvision's default) the auxiliary classifier `AuxLogits` exists, registered
between Mixed_6e and Mixed_7a (its state-dict keys sit there); it is computed only in training
mode, where forward returns (logits, aux_logits). `transform_input` as GoogLeNet's.
"""
import collections
from typing import Any, Callable, Sequence

import saliency as sl
from saliency import Tensor, nn
from saliency.nn import functional as F

from . import register
from .googlenet import BasicConv2d, ConvBlock, renormalise_input

InceptionOutputs = collections.namedtuple("InceptionOutputs", ["logits", "aux_logits"])


def _avg3(x: Tensor) -> Tensor:
    return F.avg_pool2d(x, kernel_size=3, stride=1, padding=1)


class InceptionA(nn.Module):
    """1x1; 1x1 -> 5x5; 1x1 -> 3x3 -> 3x3; 3x3 mean -> 1x1 (`pool_features`)."""

    def __init__(self, in_channels: int, pool_features: int, conv_block: ConvBlock | None = None) -> None:
        super().__init__()
        conv_block = conv_block or BasicConv2d
        self.branch1x1 = conv_block(in_channels, 64, kernel_size=1)
        self.branch5x5_1 = conv_block(in_channels, 48, kernel_size=1)
        self.branch5x5_2 = conv_block(48, 64, kernel_size=5, padding=2)
        self.branch3x3dbl_1 = conv_block(in_channels, 64, kernel_size=1)
        self.branch3x3dbl_2 = conv_block(64, 96, kernel_size=3, padding=1)
        self.branch3x3dbl_3 = conv_block(96, 96, kernel_size=3, padding=1)
        self.branch_pool = conv_block(in_channels, pool_features, kernel_size=1)

    def forward(self, x: Tensor) -> Tensor:
        return sl.cat([
            self.branch1x1(x),
            self.branch5x5_2(self.branch5x5_1(x)),
            self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x))),
            self.branch_pool(_avg3(x)),
        ], 1)


class InceptionB(nn.Module):
    """Grid reduction: 3x3 stride 2; 1x1 -> 3x3 -> 3x3 stride 2; 3x3 max pool stride 2."""

    def __init__(self, in_channels: int, conv_block: ConvBlock | None = None) -> None:
        super().__init__()
        conv_block = conv_block or BasicConv2d
        self.branch3x3 = conv_block(in_channels, 384, kernel_size=3, stride=2)
        self.branch3x3dbl_1 = conv_block(in_channels, 64, kernel_size=1)
        self.branch3x3dbl_2 = conv_block(64, 96, kernel_size=3, padding=1)
        self.branch3x3dbl_3 = conv_block(96, 96, kernel_size=3, stride=2)

    def forward(self, x: Tensor) -> Tensor:
        return sl.cat([
            self.branch3x3(x),
            self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x))),
            F.max_pool2d(x, kernel_size=3, stride=2),
        ], 1)


class InceptionC(nn.Module):
    """1x1; 7x7 factorised as 1x7, 7x1; twice factorised 7x7; 3x3 mean -> 1x1 (192 channels each)."""

    def __init__(self, in_channels: int, channels_7x7: int, conv_block: ConvBlock | None = None) -> None:
        super().__init__()
        conv_block = conv_block or BasicConv2d
        c7 = channels_7x7
        self.branch1x1 = conv_block(in_channels, 192, kernel_size=1)
        self.branch7x7_1 = conv_block(in_channels, c7, kernel_size=1)
        self.branch7x7_2 = conv_block(c7, c7, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7_3 = conv_block(c7, 192, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_1 = conv_block(in_channels, c7, kernel_size=1)
        self.branch7x7dbl_2 = conv_block(c7, c7, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_3 = conv_block(c7, c7, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7dbl_4 = conv_block(c7, c7, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_5 = conv_block(c7, 192, kernel_size=(1, 7), padding=(0, 3))
        self.branch_pool = conv_block(in_channels, 192, kernel_size=1)

    def forward(self, x: Tensor) -> Tensor:
        b7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        d7 = self.branch7x7dbl_1(x)
        for conv in (self.branch7x7dbl_2, self.branch7x7dbl_3, self.branch7x7dbl_4, self.branch7x7dbl_5):
            d7 = conv(d7)
        return sl.cat([self.branch1x1(x), b7, d7, self.branch_pool(_avg3(x))], 1)


class InceptionD(nn.Module):
    """Grid reduction: 1x1 -> 3x3 stride 2; 1x1 -> 1x7 -> 7x1 -> 3x3 stride 2; 3x3 max pool stride 2."""

    def __init__(self, in_channels: int, conv_block: ConvBlock | None = None) -> None:
        super().__init__()
        conv_block = conv_block or BasicConv2d
        self.branch3x3_1 = conv_block(in_channels, 192, kernel_size=1)
        self.branch3x3_2 = conv_block(192, 320, kernel_size=3, stride=2)
        self.branch7x7x3_1 = conv_block(in_channels, 192, kernel_size=1)
        self.branch7x7x3_2 = conv_block(192, 192, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7x3_3 = conv_block(192, 192, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7x3_4 = conv_block(192, 192, kernel_size=3, stride=2)

    def forward(self, x: Tensor) -> Tensor:
        b7 = x
        for conv in (self.branch7x7x3_1, self.branch7x7x3_2, self.branch7x7x3_3, self.branch7x7x3_4):
            b7 = conv(b7)
        return sl.cat([self.branch3x3_2(self.branch3x3_1(x)), b7, F.max_pool2d(x, kernel_size=3, stride=2)], 1)


class InceptionE(nn.Module):
    """1x1; 1x1 -> (1x3 | 3x1); 1x1 -> 3x3 -> (1x3 | 3x1); 3x3 mean -> 1x1."""

    def __init__(self, in_channels: int, conv_block: ConvBlock | None = None) -> None:
        super().__init__()
        conv_block = conv_block or BasicConv2d
        self.branch1x1 = conv_block(in_channels, 320, kernel_size=1)
        self.branch3x3_1 = conv_block(in_channels, 384, kernel_size=1)
        self.branch3x3_2a = conv_block(384, 384, kernel_size=(1, 3), padding=(0, 1))
        self.branch3x3_2b = conv_block(384, 384, kernel_size=(3, 1), padding=(1, 0))
        self.branch3x3dbl_1 = conv_block(in_channels, 448, kernel_size=1)
        self.branch3x3dbl_2 = conv_block(448, 384, kernel_size=3, padding=1)
        self.branch3x3dbl_3a = conv_block(384, 384, kernel_size=(1, 3), padding=(0, 1))
        self.branch3x3dbl_3b = conv_block(384, 384, kernel_size=(3, 1), padding=(1, 0))
        self.branch_pool = conv_block(in_channels, 192, kernel_size=1)

    def forward(self, x: Tensor) -> Tensor:
        b3 = self.branch3x3_1(x)
        b3 = sl.cat([self.branch3x3_2a(b3), self.branch3x3_2b(b3)], 1)
        d3 = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        d3 = sl.cat([self.branch3x3dbl_3a(d3), self.branch3x3dbl_3b(d3)], 1)
        return sl.cat([self.branch1x1(x), b3, d3, self.branch_pool(_avg3(x))], 1)


class InceptionAux(nn.Module):
    """Auxiliary classifier on the 17x17 grid: 5x5 mean stride 3, 1x1 conv, 5x5 conv, mean, `fc`."""

    def __init__(self, in_channels: int, num_classes: int, conv_block: ConvBlock | None = None) -> None:
        super().__init__()
        conv_block = conv_block or BasicConv2d
        self.conv0 = conv_block(in_channels, 128, kernel_size=1)
        self.conv1 = conv_block(128, 768, kernel_size=5)
        self.fc = nn.Linear(768, num_classes)
        self.fc.stddev = 0.001  # the init's std for this layer (0.1 for the others)

    def forward(self, x: Tensor) -> Tensor:
        x = self.conv1(self.conv0(F.avg_pool2d(x, kernel_size=5, stride=3)))
        return self.fc(F.adaptive_avg_pool2d(x, (1, 1)).flatten(1))


class Inception3(nn.Module):
    """Inception v3 with torchvision's attribute names (Conv2d_1a_3x3, ..., Mixed_7c, AuxLogits, fc)."""

    def __init__(self, num_classes: int = 1000, aux_logits: bool = True, transform_input: bool = False,
                 inception_blocks: Sequence[Callable[..., nn.Module]] | None = None, init_weights: bool | None = None,
                 dropout: float = 0.5) -> None:
        super().__init__()
        blocks = inception_blocks or (BasicConv2d, InceptionA, InceptionB, InceptionC, InceptionD, InceptionE,
                                      InceptionAux)
        if len(blocks) != 7:
            raise ValueError(f"inception_blocks should have 7 entries, got {len(blocks)}")
        conv_block, block_a, block_b, block_c, block_d, block_e, block_aux = blocks
        self.aux_logits, self.transform_input = aux_logits, transform_input

        self.Conv2d_1a_3x3 = conv_block(3, 32, kernel_size=3, stride=2)
        self.Conv2d_2a_3x3 = conv_block(32, 32, kernel_size=3)
        self.Conv2d_2b_3x3 = conv_block(32, 64, kernel_size=3, padding=1)
        self.maxpool1 = nn.MaxPool2d(kernel_size=3, stride=2)
        self.Conv2d_3b_1x1 = conv_block(64, 80, kernel_size=1)
        self.Conv2d_4a_3x3 = conv_block(80, 192, kernel_size=3)
        self.maxpool2 = nn.MaxPool2d(kernel_size=3, stride=2)
        self.Mixed_5b = block_a(192, pool_features=32)
        self.Mixed_5c = block_a(256, pool_features=64)
        self.Mixed_5d = block_a(288, pool_features=64)
        self.Mixed_6a = block_b(288)
        self.Mixed_6b = block_c(768, channels_7x7=128)
        self.Mixed_6c = block_c(768, channels_7x7=160)
        self.Mixed_6d = block_c(768, channels_7x7=160)
        self.Mixed_6e = block_c(768, channels_7x7=192)
        self.AuxLogits = block_aux(768, num_classes) if aux_logits else None
        self.Mixed_7a = block_d(768)
        self.Mixed_7b = block_e(1280)
        self.Mixed_7c = block_e(2048)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.dropout = nn.Dropout(p=dropout)
        self.fc = nn.Linear(2048, num_classes)

        if init_weights is None or init_weights:
            for m in self.modules():
                if isinstance(m, (nn.Conv2d, nn.Linear)):
                    std = float(getattr(m, "stddev", 0.1))
                    nn.init.trunc_normal_(m.weight, mean=0.0, std=std, a=-2, b=2)
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.ones_(m.weight)
                    nn.init.zeros_(m.bias)

    def forward(self, x: Tensor) -> Tensor | InceptionOutputs:
        if self.transform_input:
            x = renormalise_input(x)
        for layer in (self.Conv2d_1a_3x3, self.Conv2d_2a_3x3, self.Conv2d_2b_3x3, self.maxpool1,
                      self.Conv2d_3b_1x1, self.Conv2d_4a_3x3, self.maxpool2, self.Mixed_5b, self.Mixed_5c,
                      self.Mixed_5d, self.Mixed_6a, self.Mixed_6b, self.Mixed_6c, self.Mixed_6d, self.Mixed_6e):
            x = layer(x)
        aux_on = self.training and self.aux_logits
        aux = self.AuxLogits(x) if aux_on and self.AuxLogits is not None else None
        x = self.Mixed_7c(self.Mixed_7b(self.Mixed_7a(x)))
        x = self.fc(self.dropout(self.avgpool(x)).flatten(1))
        return InceptionOutputs(x, aux) if aux_on else x


def inception_v3(**kwargs: Any) -> Inception3:
    """Inception v3 with torchvision's keyword arguments (num_classes, aux_logits=True,
    transform_input=False, init_weights, dropout)."""
    return Inception3(**kwargs)


register("inception_v3", inception_v3, min_size=75)
