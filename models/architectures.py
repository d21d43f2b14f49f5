"""The zoo's architectures, built from `saliency.nn` only, with named layers.

Every block is a Sequential of named modules (``conv``, ``bn``, ``relu``, ``pool``), so a layer
reads ``model.features.block3.conv`` in ``print(model)`` and in state-dict keys, and can be
handed to Grad-CAM as the module object.

* `shapes_net()`: a `Classifier`, 3x64x64 -> 8 class scores. Four conv blocks (16, 32, 64, 96
  channels), max pooling after the first three (64 -> 32 -> 16 -> 8 pixels), global average
  pooling, one linear layer.
* `digits_net()`: a `Classifier`, 1x32x32 -> 10 class scores. Three conv blocks (16, 32, 64
  channels), max pooling after the first two (32 -> 16 -> 8 pixels), global average pooling,
  one linear layer.
* `DepthNet` (`depth_net()`): 3x128x128 -> 1x128x128 depth in metres. A U-Net: an encoder of
  five stages (128 -> 8 pixels), a decoder that upsamples bilinearly (x2, align_corners=False),
  concatenates the encoder's features of the same size (skip connections) and mixes them with
  3x3 convolutions. The last layer predicts log-depth; the output is its exponential, so the
  attribution of a depth pixel is a gradient of metres.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Sequence

import saliency as sl
from saliency import nn


def conv_block(cin: int, cout: int, stride: int = 1, pool: bool = False) -> nn.Sequential:
    """conv 3x3 (padding 1) -> batch norm -> ReLU [-> max pool 2x2], as a named Sequential."""
    layers: list[tuple[str, nn.Module]] = [
        ("conv", nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)),
        ("bn", nn.BatchNorm2d(cout)),
        ("relu", nn.ReLU())]
    if pool:
        layers.append(("pool", nn.MaxPool2d(2)))
    return nn.Sequential(OrderedDict(layers))


class Classifier(nn.Module):
    """conv blocks -> global average pooling -> linear: `features`, `pool`, `flatten`, `fc`."""

    def __init__(self, in_channels: int, widths: Sequence[int], n_classes: int, pools: Sequence[bool]) -> None:
        super().__init__()
        blocks: list[tuple[str, nn.Module]] = []
        cin = in_channels
        for i, (w, p) in enumerate(zip(widths, pools), start=1):
            blocks.append((f"block{i}", conv_block(cin, w, pool=p)))
            cin = w
        self.features = nn.Sequential(OrderedDict(blocks))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(cin, n_classes)

    def forward(self, x: sl.Tensor) -> sl.Tensor:
        return self.fc(self.flatten(self.pool(self.features(x))))


def shapes_net(n_classes: int = 8) -> Classifier:
    return Classifier(3, (16, 32, 64, 96), n_classes, pools=(True, True, True, False))


def digits_net(n_classes: int = 10) -> Classifier:
    return Classifier(1, (16, 32, 64), n_classes, pools=(True, True, False))


class DepthNet(nn.Module):
    """U-Net for per-pixel depth: `enc1`..`enc5`, `dec4`..`dec1`, `head`; see the module docstring."""

    def __init__(self, widths: Sequence[int] = (16, 24, 32, 48, 64)) -> None:
        super().__init__()
        w1, w2, w3, w4, w5 = widths
        self.enc1 = conv_block(3, w1)               # 128
        self.enc2 = self._down(w1, w2)                                                  # 64
        self.enc3 = self._down(w2, w3)                                                  # 32
        self.enc4 = self._down(w3, w4)                                                  # 16
        self.enc5 = self._down(w4, w5)                                                  # 8
        self.up = nn.Upsample(scale_factor=2, mode="bilinear")
        self.dec4 = conv_block(w5 + w4, w4)                                             # 16
        self.dec3 = conv_block(w4 + w3, w3)                                             # 32
        self.dec2 = conv_block(w3 + w2, w2)                                             # 64
        self.dec1 = conv_block(w2 + w1, w1)                                             # 128
        self.head = nn.Conv2d(w1, 1, 3, padding=1)

    @staticmethod
    def _down(cin: int, cout: int) -> nn.Sequential:
        return nn.Sequential(OrderedDict(down=conv_block(cin, cout, stride=2), conv=conv_block(cout, cout)))

    def forward(self, x: sl.Tensor) -> sl.Tensor:
        return sl.exp(self.log_depth(x))

    def log_depth(self, x: sl.Tensor) -> sl.Tensor:
        """The head's output, log of the depth in metres (what training fits)."""
        e1 = self.enc1(x)
        e2 = self.enc2(e1)
        e3 = self.enc3(e2)
        e4 = self.enc4(e3)
        e5 = self.enc5(e4)
        d = self.dec4(sl.cat([self.up(e5), e4], dim=1))
        d = self.dec3(sl.cat([self.up(d), e3], dim=1))
        d = self.dec2(sl.cat([self.up(d), e2], dim=1))
        d = self.dec1(sl.cat([self.up(d), e1], dim=1))
        return self.head(d)


def depth_net() -> DepthNet:
    return DepthNet()


def n_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
