import torch
import torch.nn as nn
import torch.nn.functional as F

"""ShuffleNetV2 (1.0x) for 32x32 images (Ma et al., "ShuffleNet V2: Practical Guidelines for
Efficient CNN Architecture Design").

A basic unit splits its channels in two halves: one passes through untouched, the other goes
through a 1x1 convolution, a 3x3 depthwise convolution and another 1x1 convolution (batch norm
after each, ReLU after the 1x1s); the halves are concatenated and the channels shuffled between
two groups (reshape to (N, 2, C/2, H, W), swap the group axes, flatten back). A downsampling unit
feeds the whole input to both branches, the first being a stride-2 depthwise convolution and a
1x1 convolution, and doubles the width. Three stages of 4, 8 and 4 units (116, 232, 464
channels), a 1x1 convolution to 1024 channels, global average pooling and a linear layer. The
stem is a 3x3 convolution with stride 1 and no max pool for 32x32 inputs.
Input: (N, 3, 32, 32); output: (N, num_classes) logits.
"""

INPUT = (3, 32, 32)
TEST_KWARGS = {"stage_channels": (16, 32, 64), "stage_repeats": (2, 2, 1), "last_channel": 64}


def channel_shuffle(x, groups):
    batch, channels, height, width = x.size()
    x = x.view(batch, groups, channels // groups, height, width)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(batch, -1, height, width)


class ShuffleUnit(nn.Module):
    def __init__(self, inp, oup, stride):
        super().__init__()
        if stride not in (1, 2):
            raise ValueError("stride must be 1 or 2")
        self.stride = stride
        branch = oup // 2
        if stride == 1 and inp != branch * 2:
            raise ValueError("a stride-1 unit keeps its width")
        if stride > 1:
            self.branch1 = nn.Sequential(
                nn.Conv2d(inp, inp, 3, stride, 1, groups=inp, bias=False),
                nn.BatchNorm2d(inp),
                nn.Conv2d(inp, branch, 1, 1, 0, bias=False),
                nn.BatchNorm2d(branch),
                nn.ReLU(inplace=True),
            )
        else:
            self.branch1 = nn.Sequential()
        branch_in = inp if stride > 1 else branch
        self.branch2 = nn.Sequential(
            nn.Conv2d(branch_in, branch, 1, 1, 0, bias=False),
            nn.BatchNorm2d(branch),
            nn.ReLU(inplace=True),
            nn.Conv2d(branch, branch, 3, stride, 1, groups=branch, bias=False),
            nn.BatchNorm2d(branch),
            nn.Conv2d(branch, branch, 1, 1, 0, bias=False),
            nn.BatchNorm2d(branch),
            nn.ReLU(inplace=True),
        )

    def forward(self, x):
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    def __init__(self, stage_channels=(116, 232, 464), stage_repeats=(4, 8, 4), last_channel=1024,
                 num_classes=10, stem_channels=24):
        super().__init__()
        self.conv1 = nn.Sequential(
            nn.Conv2d(3, stem_channels, 3, 1, 1, bias=False),
            nn.BatchNorm2d(stem_channels),
            nn.ReLU(inplace=True),
        )
        inp = stem_channels
        for i, (channels, repeats) in enumerate(zip(stage_channels, stage_repeats)):
            units = [ShuffleUnit(inp, channels, 2)]
            units += [ShuffleUnit(channels, channels, 1) for _ in range(repeats - 1)]
            setattr(self, f"stage{i + 2}", nn.Sequential(*units))
            inp = channels
        self.conv5 = nn.Sequential(
            nn.Conv2d(inp, last_channel, 1, 1, 0, bias=False),
            nn.BatchNorm2d(last_channel),
            nn.ReLU(inplace=True),
        )
        self.fc = nn.Linear(last_channel, num_classes)

        for name, m in self.named_modules():
            if isinstance(m, nn.Conv2d):
                if "conv1" in name:
                    nn.init.normal_(m.weight, 0, 0.01)
                else:
                    nn.init.normal_(m.weight, 0, 1.0 / m.weight.shape[1])
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0.0001)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.constant_(m.bias, 0)

    def forward(self, x):
        x = self.conv1(x)
        x = self.stage2(x)
        x = self.stage3(x)
        x = self.stage4(x)
        x = self.conv5(x)
        x = x.mean([2, 3])
        return self.fc(x)


def build(num_classes=10, stage_channels=(116, 232, 464), stage_repeats=(4, 8, 4), last_channel=1024):
    return ShuffleNetV2(stage_channels, stage_repeats, last_channel, num_classes=num_classes)
