import torch
import torch.nn as nn
import torch.nn.functional as F

"""MobileNetV1 for 32x32 images (Howard et al., "MobileNets: Efficient Convolutional Neural
Networks for Mobile Vision Applications"), with ReLU6.

A full 3x3 convolution, then thirteen depthwise separable blocks: a 3x3 depthwise convolution
(groups equal to its input channels) with batch norm and ReLU6, then a 1x1 pointwise convolution
with batch norm and ReLU6. The width multiplier alpha thins every layer. For 32x32 inputs the
stem has stride 1 (four stride-2 blocks leave a 2x2 map); global average pool and a linear
layer give the logits. Input: (N, 3, 32, 32); output: (N, num_classes).
"""

INPUT = (3, 32, 32)
TEST_KWARGS = {"width_mult": 0.125}


def conv_bn(inp, oup, stride):
    return nn.Sequential(
        nn.Conv2d(inp, oup, 3, stride, 1, bias=False),
        nn.BatchNorm2d(oup),
        nn.ReLU6(inplace=True),
    )


def conv_dw(inp, oup, stride):
    return nn.Sequential(
        nn.Conv2d(inp, inp, 3, stride, 1, groups=inp, bias=False),
        nn.BatchNorm2d(inp),
        nn.ReLU6(inplace=True),
        nn.Conv2d(inp, oup, 1, 1, 0, bias=False),
        nn.BatchNorm2d(oup),
        nn.ReLU6(inplace=True),
    )


class MobileNet(nn.Module):
    # (out channels, stride) of each depthwise separable block
    cfg = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
           (512, 1), (512, 1), (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1)]

    def __init__(self, num_classes=10, width_mult=1.0):
        super().__init__()
        c = lambda n: max(8, int(n * width_mult))  # noqa: E731
        layers = [conv_bn(3, c(32), 1)]
        in_planes = c(32)
        for out_planes, stride in self.cfg:
            layers.append(conv_dw(in_planes, c(out_planes), stride))
            in_planes = c(out_planes)
        self.model = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_planes, num_classes)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.model(x)
        x = self.pool(x)
        x = x.view(x.size(0), -1)
        return self.fc(x)


def build(num_classes=10, width_mult=1.0):
    return MobileNet(num_classes=num_classes, width_mult=width_mult)
