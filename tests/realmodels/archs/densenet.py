import torch
import torch.nn as nn
import torch.nn.functional as F

"""DenseNet-BC (L=100, k=12) for 32x32 images (Huang et al., "Densely Connected Convolutional
Networks").

Inside a dense block every layer sees the concatenation of the block's input and of all earlier
layers' outputs, and adds k (the growth rate) new channels: batch norm, ReLU, a 1x1 bottleneck
convolution to 4k channels, batch norm, ReLU and a 3x3 convolution to k channels. Between blocks
a transition layer (batch norm, ReLU, 1x1 convolution) compresses the channels by the factor
theta=0.5 and halves the resolution with a 2x2 average pool. Three blocks of 16 layers follow a
3x3 stem convolution with 2k channels; a last batch norm and ReLU, an 8x8 average pool and a
linear layer give the logits. Input: (N, 3, 32, 32); output: (N, num_classes).
"""

import math

INPUT = (3, 32, 32)
TEST_KWARGS = {"growth_rate": 4, "block_config": (3, 2, 2)}


class Bottleneck(nn.Module):
    def __init__(self, in_planes, growth_rate):
        super().__init__()
        inter = 4 * growth_rate
        self.bn1 = nn.BatchNorm2d(in_planes)
        self.conv1 = nn.Conv2d(in_planes, inter, kernel_size=1, bias=False)
        self.bn2 = nn.BatchNorm2d(inter)
        self.conv2 = nn.Conv2d(inter, growth_rate, kernel_size=3, padding=1, bias=False)

    def forward(self, x):
        out = self.conv1(F.relu(self.bn1(x)))
        out = self.conv2(F.relu(self.bn2(out)))
        return torch.cat([x, out], 1)


class Transition(nn.Module):
    def __init__(self, in_planes, out_planes):
        super().__init__()
        self.bn = nn.BatchNorm2d(in_planes)
        self.conv = nn.Conv2d(in_planes, out_planes, kernel_size=1, bias=False)

    def forward(self, x):
        out = self.conv(F.relu(self.bn(x)))
        return F.avg_pool2d(out, 2)


class DenseNet(nn.Module):
    def __init__(self, growth_rate=12, block_config=(16, 16, 16), reduction=0.5, num_classes=10):
        super().__init__()
        num_planes = 2 * growth_rate
        self.conv1 = nn.Conv2d(3, num_planes, kernel_size=3, padding=1, bias=False)

        stages = []
        for i, n in enumerate(block_config):
            layers = []
            for _ in range(n):
                layers.append(Bottleneck(num_planes, growth_rate))
                num_planes += growth_rate
            stages.append(nn.Sequential(*layers))
            if i != len(block_config) - 1:
                out_planes = int(math.floor(num_planes * reduction))
                stages.append(Transition(num_planes, out_planes))
                num_planes = out_planes
        self.features = nn.Sequential(*stages)
        self.bn = nn.BatchNorm2d(num_planes)
        self.linear = nn.Linear(num_planes, num_classes)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                n = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                m.weight.data.normal_(0, math.sqrt(2. / n))
            elif isinstance(m, nn.BatchNorm2d):
                m.weight.data.fill_(1)
                m.bias.data.zero_()
            elif isinstance(m, nn.Linear):
                m.bias.data.zero_()

    def forward(self, x):
        out = self.conv1(x)
        out = self.features(out)
        out = F.avg_pool2d(F.relu(self.bn(out)), 8)
        out = out.view(out.size(0), -1)
        return self.linear(out)


def build(num_classes=10, growth_rate=12, block_config=(16, 16, 16)):
    return DenseNet(growth_rate=growth_rate, block_config=tuple(block_config), num_classes=num_classes)
