import torch
import torch.nn as nn
import torch.nn.functional as F

"""An EfficientNet-B0-style network for 32x32 images (Tan and Le, "EfficientNet: Rethinking
Model Scaling for Convolutional Neural Networks"; the MBConv block of MnasNet).

Each MBConv block expands its input with a 1x1 convolution, filters it with a depthwise 3x3 or
5x5 convolution, rescales its channels by squeeze-and-excitation (global average pool, a 1x1
reduction to a quarter of the block's input width, SiLU, a 1x1 expansion and a sigmoid gate
multiplied into the features), and projects it with a linear 1x1 convolution; SiLU follows the
expansion and the depthwise convolution. Blocks with stride 1 and equal widths add their input,
with stochastic depth (a randomly dropped residual branch) in training only. Width and depth
multipliers scale channels and repeats. The stem and the second stage use stride 1 for 32x32
inputs. Input: (N, 3, 32, 32); output: (N, num_classes) logits.
"""

import math

INPUT = (3, 32, 32)
TEST_KWARGS = {"width_mult": 0.125, "depth_mult": 0.5, "head_channels": 64}

# expansion, output channels, repeats, stride, kernel size
BLOCKS = [
    (1, 16, 1, 1, 3),
    (6, 24, 2, 1, 3),  # stride 2 on ImageNet
    (6, 40, 2, 2, 5),
    (6, 80, 3, 2, 3),
    (6, 112, 3, 1, 5),
    (6, 192, 4, 2, 5),
    (6, 320, 1, 1, 3),
]


def round_filters(filters, width_mult, divisor=8):
    filters *= width_mult
    new_filters = max(divisor, int(filters + divisor / 2) // divisor * divisor)
    if new_filters < 0.9 * filters:
        new_filters += divisor
    return int(new_filters)


def round_repeats(repeats, depth_mult):
    return int(math.ceil(depth_mult * repeats))


class SqueezeExcitation(nn.Module):
    def __init__(self, channels, squeeze_channels):
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze_channels, 1)
        self.fc2 = nn.Conv2d(squeeze_channels, channels, 1)
        self.act = nn.SiLU(inplace=True)

    def forward(self, x):
        scale = self.avgpool(x)
        scale = self.fc2(self.act(self.fc1(scale)))
        return x * torch.sigmoid(scale)


def drop_path(x, p, training):
    """Zero whole samples of the residual branch with probability p (training only)."""
    if p == 0.0 or not training:
        return x
    keep = 1.0 - p
    mask = torch.rand(x.shape[0], 1, 1, 1, dtype=x.dtype, device=x.device) < keep
    return x * mask.to(x.dtype) / keep


class MBConv(nn.Module):
    def __init__(self, in_ch, out_ch, expand_ratio, stride, kernel_size, drop_rate=0.0):
        super().__init__()
        hidden = in_ch * expand_ratio
        self.use_residual = stride == 1 and in_ch == out_ch
        self.drop_rate = drop_rate
        layers = []
        if expand_ratio != 1:
            layers += [nn.Conv2d(in_ch, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.SiLU(inplace=True)]
        layers += [
            nn.Conv2d(hidden, hidden, kernel_size, stride, kernel_size // 2, groups=hidden, bias=False),
            nn.BatchNorm2d(hidden),
            nn.SiLU(inplace=True),
            SqueezeExcitation(hidden, max(1, in_ch // 4)),
            nn.Conv2d(hidden, out_ch, 1, bias=False),
            nn.BatchNorm2d(out_ch),
        ]
        self.block = nn.Sequential(*layers)

    def forward(self, x):
        out = self.block(x)
        if self.use_residual:
            out = drop_path(out, self.drop_rate, self.training) + x
        return out


class EfficientNet(nn.Module):
    def __init__(self, num_classes=10, width_mult=1.0, depth_mult=1.0, head_channels=1280, dropout=0.2,
                 drop_connect_rate=0.2):
        super().__init__()
        stem = round_filters(32, width_mult)
        self.stem = nn.Sequential(
            nn.Conv2d(3, stem, 3, stride=1, padding=1, bias=False),  # stride 2 on ImageNet
            nn.BatchNorm2d(stem),
            nn.SiLU(inplace=True),
        )
        total = sum(round_repeats(n, depth_mult) for _, _, n, _, _ in BLOCKS)
        blocks, in_ch, index = [], stem, 0
        for t, c, n, s, k in BLOCKS:
            out_ch = round_filters(c, width_mult)
            for i in range(round_repeats(n, depth_mult)):
                blocks.append(MBConv(in_ch, out_ch, t, s if i == 0 else 1, k, drop_connect_rate * index / total))
                in_ch = out_ch
                index += 1
        self.blocks = nn.Sequential(*blocks)
        head = round_filters(head_channels, max(1.0, width_mult))
        self.head = nn.Sequential(
            nn.Conv2d(in_ch, head, 1, bias=False),
            nn.BatchNorm2d(head),
            nn.SiLU(inplace=True),
        )
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(head, num_classes)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                bound = 1.0 / math.sqrt(m.weight.size(1))
                nn.init.uniform_(m.weight, -bound, bound)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.stem(x)
        x = self.blocks(x)
        x = self.head(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        x = self.dropout(x)
        return self.fc(x)


def build(num_classes=10, width_mult=1.0, depth_mult=1.0, head_channels=1280):
    return EfficientNet(num_classes=num_classes, width_mult=width_mult, depth_mult=depth_mult,
                        head_channels=head_channels)
