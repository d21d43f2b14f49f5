import torch
import torch.nn as nn
import torch.nn.functional as F

# An image classifier built on normalisations other than batch statistics, so it behaves the
# same for any batch size: group normalisation (Wu and He, 2018) in the convolutional stages,
# instance normalisation (Ulyanov et al., 2016) on the stem, and layer normalisation (Ba et
# al., 2016) twice: over the channels at every position, applied as in ConvNeXt by moving the
# channels last (permute), normalising the last dimension and moving them back; and over a
# whole C x H x W map at the end of the network, which fixes the input size.
#
# Stem: 3x3 conv -> InstanceNorm2d (affine) -> ReLU. Three stages, each a stride-2 3x3 conv
# with GroupNorm(4 groups) and ReLU, a residual block of two 3x3 convs with GroupNorm and
# ReLU, and a channels-last LayerNorm. Head: LayerNorm([C, H/8, W/8]), global average pooling,
# a linear layer to num_classes.
#
# Input: a batch of 3x64x64 images (image_size sets it).
# Output: N x num_classes logits.

INPUT = (1, 3, 64, 64)
TEST_KWARGS = {"width": 8, "num_classes": 7, "image_size": 32}
TEST_INPUT = (2, 3, 32, 32)


class ChannelLayerNorm(nn.Module):
    """LayerNorm over the channels of an N x C x H x W map, one position at a time."""

    def __init__(self, channels, eps=1e-6):
        super().__init__()
        self.norm = nn.LayerNorm(channels, eps=eps)

    def forward(self, x):
        x = x.permute(0, 2, 3, 1)
        x = self.norm(x)
        return x.permute(0, 3, 1, 2)


class ResBlockGN(nn.Module):
    def __init__(self, ch, groups=4):
        super().__init__()
        self.conv1 = nn.Conv2d(ch, ch, 3, padding=1, bias=False)
        self.gn1 = nn.GroupNorm(num_groups=groups, num_channels=ch)
        self.conv2 = nn.Conv2d(ch, ch, 3, padding=1, bias=False)
        self.gn2 = nn.GroupNorm(num_groups=groups, num_channels=ch)

    def forward(self, x):
        y = F.relu(self.gn1(self.conv1(x)))
        y = self.gn2(self.conv2(y))
        return F.relu(x + y)


class NormNet(nn.Module):
    def __init__(self, num_classes=10, width=32, image_size=64):
        super().__init__()
        w = [width, width * 2, width * 4, width * 8]
        self.stem = nn.Sequential(
            nn.Conv2d(3, w[0], 3, padding=1, bias=False),
            nn.InstanceNorm2d(w[0], affine=True),
            nn.ReLU(inplace=True),
        )
        stages = []
        for i in range(3):
            stages.append(nn.Sequential(
                nn.Conv2d(w[i], w[i + 1], 3, stride=2, padding=1, bias=False),
                nn.GroupNorm(4, w[i + 1]),
                nn.ReLU(inplace=True),
                ResBlockGN(w[i + 1]),
                ChannelLayerNorm(w[i + 1]),
            ))
        self.stages = nn.Sequential(*stages)
        s = image_size // 8
        self.final_norm = nn.LayerNorm([w[3], s, s])
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(w[3], num_classes)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.GroupNorm, nn.LayerNorm, nn.InstanceNorm2d)):
                if m.weight is not None:
                    nn.init.ones_(m.weight)
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.stem(x)
        x = self.stages(x)
        x = self.final_norm(x)
        x = self.pool(x)
        x = torch.flatten(x, 1)
        return self.fc(x)


def build(**kwargs):
    return NormNet(**kwargs)
