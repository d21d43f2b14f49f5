import torch
import torch.nn as nn
import torch.nn.functional as F

"""SqueezeNet 1.1 (Iandola et al., "SqueezeNet: AlexNet-level accuracy with 50x fewer parameters")
at ImageNet's input size.

A 3x3 stride-2 stem, then fire modules: a 1x1 "squeeze" convolution to few channels, expanded by
a 1x1 and a 3x3 convolution side by side whose outputs are concatenated along the channels.
Max pools with ceil_mode=True between groups of fire modules (their last window may run past
the border), dropout, a 1x1 convolution to the classes, ReLU and a global average pool. Weights
start as in the paper's release: kaiming-uniform, except the final convolution, normal(0, 0.01).
Input: (N, 3, 224, 224); output: (N, num_classes).
"""

INPUT = (3, 224, 224)
TEST_INPUT = (2, 3, 61, 57)
TEST_KWARGS = {"num_classes": 7, "width": 0.25}


class Fire(nn.Module):
    def __init__(self, inplanes, squeeze, expand1x1, expand3x3):
        super().__init__()
        self.squeeze = nn.Conv2d(inplanes, squeeze, kernel_size=1)
        self.squeeze_activation = nn.ReLU(inplace=True)
        self.expand1x1 = nn.Conv2d(squeeze, expand1x1, kernel_size=1)
        self.expand1x1_activation = nn.ReLU(inplace=True)
        self.expand3x3 = nn.Conv2d(squeeze, expand3x3, kernel_size=3, padding=1)
        self.expand3x3_activation = nn.ReLU(inplace=True)

    def forward(self, x):
        x = self.squeeze_activation(self.squeeze(x))
        return torch.cat([self.expand1x1_activation(self.expand1x1(x)),
                          self.expand3x3_activation(self.expand3x3(x))], 1)


class SqueezeNet(nn.Module):
    def __init__(self, num_classes=1000, width=1.0):
        super().__init__()

        def c(n):
            return max(4, int(n * width))

        self.features = nn.Sequential(
            nn.Conv2d(3, c(64), kernel_size=3, stride=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
            Fire(c(64), c(16), c(64), c(64)),
            Fire(c(128), c(16), c(64), c(64)),
            nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
            Fire(c(128), c(32), c(128), c(128)),
            Fire(c(256), c(32), c(128), c(128)),
            nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
            Fire(c(256), c(48), c(192), c(192)),
            Fire(c(384), c(48), c(192), c(192)),
            Fire(c(384), c(64), c(256), c(256)),
            Fire(c(512), c(64), c(256), c(256)),
        )
        final_conv = nn.Conv2d(c(512), num_classes, kernel_size=1)
        self.classifier = nn.Sequential(
            nn.Dropout(p=0.5), final_conv, nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d((1, 1))
        )
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                if m is final_conv:
                    nn.init.normal_(m.weight, mean=0.0, std=0.01)
                else:
                    nn.init.kaiming_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.constant_(m.bias, 0)

    def forward(self, x):
        x = self.features(x)
        x = self.classifier(x)
        return torch.flatten(x, 1)


def build(**kwargs):
    return SqueezeNet(**kwargs)
