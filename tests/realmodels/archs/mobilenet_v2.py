import torch
import torch.nn as nn
import torch.nn.functional as F

"""MobileNetV2 for 32x32 images (Sandler et al., "MobileNetV2: Inverted Residuals and Linear
Bottlenecks").

Each inverted residual block expands its input with a 1x1 convolution (factor t), filters it with
a 3x3 depthwise convolution, and projects it back down with a 1x1 convolution that has no
activation (the linear bottleneck); ReLU6 follows the other two. A block with stride 1 and equal
input and output widths adds its input back. The stem convolution and the second stage use stride
1 for 32x32 inputs (the ImageNet network uses 2), leaving a 4x4 map before the last 1x1
convolution to 1280 channels, global average pooling, dropout and the classifier.
Input: (N, 3, 32, 32); output: (N, num_classes) logits.
"""

INPUT = (3, 32, 32)
TEST_KWARGS = {"width_mult": 0.25, "last_channel": 64}


def _make_divisible(v, divisor=8, min_value=None):
    """Round a channel count to the nearest multiple of divisor, never below 90% of v."""
    if min_value is None:
        min_value = divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class ConvBNReLU(nn.Sequential):
    def __init__(self, in_planes, out_planes, kernel_size=3, stride=1, groups=1):
        padding = (kernel_size - 1) // 2
        super().__init__(
            nn.Conv2d(in_planes, out_planes, kernel_size, stride, padding, groups=groups, bias=False),
            nn.BatchNorm2d(out_planes),
            nn.ReLU6(inplace=True),
        )


class InvertedResidual(nn.Module):
    def __init__(self, inp, oup, stride, expand_ratio):
        super().__init__()
        assert stride in (1, 2)
        hidden_dim = int(round(inp * expand_ratio))
        self.use_res_connect = stride == 1 and inp == oup
        layers = []
        if expand_ratio != 1:
            layers.append(ConvBNReLU(inp, hidden_dim, kernel_size=1))
        layers.extend([
            ConvBNReLU(hidden_dim, hidden_dim, stride=stride, groups=hidden_dim),
            nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False),
            nn.BatchNorm2d(oup),
        ])
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        if self.use_res_connect:
            return x + self.conv(x)
        return self.conv(x)


class MobileNetV2(nn.Module):
    def __init__(self, num_classes=10, width_mult=1.0, last_channel=1280, dropout=0.2):
        super().__init__()
        input_channel = 32
        # t (expansion), c (channels), n (repeats), s (stride of the first repeat)
        settings = [
            [1, 16, 1, 1],
            [6, 24, 2, 1],  # stride 2 on ImageNet
            [6, 32, 3, 2],
            [6, 64, 4, 2],
            [6, 96, 3, 1],
            [6, 160, 3, 2],
            [6, 320, 1, 1],
        ]
        input_channel = _make_divisible(input_channel * width_mult)
        self.last_channel = _make_divisible(last_channel * max(1.0, width_mult))
        features = [ConvBNReLU(3, input_channel, stride=1)]  # stride 2 on ImageNet
        for t, c, n, s in settings:
            output_channel = _make_divisible(c * width_mult)
            for i in range(n):
                features.append(InvertedResidual(input_channel, output_channel, s if i == 0 else 1, t))
                input_channel = output_channel
        features.append(ConvBNReLU(input_channel, self.last_channel, kernel_size=1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(
            nn.Dropout(dropout),
            nn.Linear(self.last_channel, num_classes),
        )

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.features(x)
        x = F.adaptive_avg_pool2d(x, 1)
        x = torch.flatten(x, 1)
        return self.classifier(x)


def build(num_classes=10, width_mult=1.0, last_channel=1280):
    return MobileNetV2(num_classes=num_classes, width_mult=width_mult, last_channel=last_channel)
