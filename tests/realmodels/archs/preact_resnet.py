import torch
import torch.nn as nn
import torch.nn.functional as F

"""Pre-activation ResNet-18 for 32x32 images (He et al., "Identity Mappings in Deep Residual
Networks").

Each residual unit applies batch norm and ReLU *before* each of its two 3x3 convolutions, so the
identity path carries the sum unchanged from unit to unit. Where a unit changes the resolution or
the width, its shortcut is a 1x1 strided convolution fed with the pre-activated input; elsewhere
the shortcut is the identity. A final batch norm and ReLU precede the 4x4 average pool and the
linear classifier. Input: (N, 3, 32, 32); output: (N, num_classes) logits.
"""

INPUT = (3, 32, 32)
TEST_KWARGS = {"width": 8, "num_blocks": (2, 1, 1, 2)}


class PreActBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_planes)
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        if stride != 1 or in_planes != self.expansion * planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, self.expansion * planes, kernel_size=1, stride=stride, bias=False)
            )

    def forward(self, x):
        out = F.relu(self.bn1(x))
        shortcut = self.shortcut(out) if hasattr(self, "shortcut") else x
        out = self.conv1(out)
        out = self.conv2(F.relu(self.bn2(out)))
        out += shortcut
        return out


class PreActResNet(nn.Module):
    def __init__(self, block, num_blocks, num_classes=10, width=64):
        super().__init__()
        self.in_planes = width
        self.conv1 = nn.Conv2d(3, width, kernel_size=3, stride=1, padding=1, bias=False)
        self.layer1 = self._make_layer(block, width, num_blocks[0], stride=1)
        self.layer2 = self._make_layer(block, 2 * width, num_blocks[1], stride=2)
        self.layer3 = self._make_layer(block, 4 * width, num_blocks[2], stride=2)
        self.layer4 = self._make_layer(block, 8 * width, num_blocks[3], stride=2)
        self.bn = nn.BatchNorm2d(8 * width * block.expansion)
        self.linear = nn.Linear(8 * width * block.expansion, num_classes)

    def _make_layer(self, block, planes, num_blocks, stride):
        strides = [stride] + [1] * (num_blocks - 1)
        layers = []
        for s in strides:
            layers.append(block(self.in_planes, planes, s))
            self.in_planes = planes * block.expansion
        return nn.Sequential(*layers)

    def forward(self, x):
        out = self.conv1(x)
        out = self.layer1(out)
        out = self.layer2(out)
        out = self.layer3(out)
        out = self.layer4(out)
        out = F.relu(self.bn(out))
        out = F.avg_pool2d(out, 4)
        out = out.view(out.size(0), -1)
        return self.linear(out)


def build(num_classes=10, width=64, num_blocks=(2, 2, 2, 2)):
    return PreActResNet(PreActBlock, list(num_blocks), num_classes=num_classes, width=width)
