import torch
import torch.nn as nn
import torch.nn.functional as F

# U-Net (Ronneberger, Fischer and Brox, 2015), bilinear variant: the same encoder as the
# transposed-convolution U-Net (pairs of 3x3 conv -> BN -> ReLU, 2x2 max pooling), but the
# decoder enlarges the feature map with parameter-free bilinear interpolation
# (align_corners=True) and lets the following convolutions reduce the width. Because the
# encoder pools with floor division, an odd-sized feature map comes back one row or column
# short: the decoder tensor is zero-padded (half on each side, the odd pixel at the bottom /
# right) to the size of its skip before the two are concatenated. The deepest stage keeps
# the width of the one before it (512 by default), as the decoder has no learned up-sampling
# to halve it.
#
# Input: a batch of 3x128x128 images; any height and width of at least 16 work.
# Output: N x num_classes x H x W logits.

INPUT = (1, 3, 128, 128)
TEST_KWARGS = {"width": 4, "num_classes": 3}
TEST_INPUT = (1, 3, 36, 44)   # 36 -> 18 -> 9 -> 4 -> 2 and 44 -> 22 -> 11 -> 5 -> 2: padded on the way up


class DoubleConv(nn.Module):
    """(3x3 conv -> BN -> ReLU) twice; the first convolution goes to mid_ch channels."""

    def __init__(self, in_ch, out_ch, mid_ch=None):
        super().__init__()
        if mid_ch is None:
            mid_ch = out_ch
        self.block = nn.Sequential(
            nn.Conv2d(in_ch, mid_ch, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(mid_ch),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid_ch, out_ch, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_ch),
            nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.block(x)


class Down(nn.Module):
    def __init__(self, in_ch, out_ch):
        super().__init__()
        self.pool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(in_ch, out_ch))

    def forward(self, x):
        return self.pool_conv(x)


class Up(nn.Module):
    """Bilinear x2, pad to the skip's size, concatenate, DoubleConv (in_ch is the sum of both)."""

    def __init__(self, in_ch, out_ch):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
        self.conv = DoubleConv(in_ch, out_ch, in_ch // 2)

    def forward(self, x, skip):
        x = self.up(x)
        diffY = skip.size()[2] - x.size()[2]
        diffX = skip.size()[3] - x.size()[3]
        x = F.pad(x, [diffX // 2, diffX - diffX // 2, diffY // 2, diffY - diffY // 2])
        x = torch.cat([skip, x], dim=1)
        return self.conv(x)


class UNet(nn.Module):
    def __init__(self, in_channels=3, num_classes=2, width=64):
        super().__init__()
        w = [width, width * 2, width * 4, width * 8]
        self.inc = DoubleConv(in_channels, w[0])
        self.down1 = Down(w[0], w[1])
        self.down2 = Down(w[1], w[2])
        self.down3 = Down(w[2], w[3])
        self.down4 = Down(w[3], w[3])          # 1024 // 2: the bottleneck keeps 512 channels
        self.up1 = Up(w[3] * 2, w[2])
        self.up2 = Up(w[2] * 2, w[1])
        self.up3 = Up(w[1] * 2, w[0])
        self.up4 = Up(w[0] * 2, w[0])
        self.outc = nn.Conv2d(w[0], num_classes, kernel_size=1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x4 = self.down3(x3)
        x5 = self.down4(x4)
        x = self.up1(x5, x4)
        x = self.up2(x, x3)
        x = self.up3(x, x2)
        x = self.up4(x, x1)
        return self.outc(x)


def build(**kwargs):
    return UNet(**kwargs)
