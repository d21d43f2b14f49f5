import torch
import torch.nn as nn
import torch.nn.functional as F

# U-Net (Ronneberger, Fischer and Brox, 2015) for dense prediction, in its common modern form:
# every stage is two 3x3 convolutions with padding 1 (so sizes are kept), each followed by
# batch normalisation and ReLU; the encoder halves the resolution with 2x2 max pooling and
# doubles the width (64, 128, 256, 512, 1024 by default); the decoder doubles the resolution
# with a 2x2 transposed convolution of stride 2 that also halves the width, concatenates the
# encoder feature map of the same resolution (the skip connection) along the channels and
# applies another pair of convolutions; a 1x1 convolution maps the last 64 channels to the
# class scores of every pixel.
#
# Input: a batch of 3x128x128 images (any height and width divisible by 16).
# Output: N x num_classes x H x W logits.

INPUT = (1, 3, 128, 128)
TEST_KWARGS = {"width": 4, "num_classes": 3}
TEST_INPUT = (1, 3, 32, 48)


class DoubleConv(nn.Module):
    """(3x3 conv -> BN -> ReLU) twice."""

    def __init__(self, in_ch, out_ch):
        super().__init__()
        self.block = nn.Sequential(
            nn.Conv2d(in_ch, out_ch, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_ch),
            nn.ReLU(inplace=True),
            nn.Conv2d(out_ch, out_ch, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_ch),
            nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.block(x)


class Down(nn.Module):
    """Halve the resolution, then a DoubleConv."""

    def __init__(self, in_ch, out_ch):
        super().__init__()
        self.pool = nn.MaxPool2d(2)
        self.conv = DoubleConv(in_ch, out_ch)

    def forward(self, x):
        return self.conv(self.pool(x))


class Up(nn.Module):
    """Transposed-convolution up-sampling, concatenation with the skip, DoubleConv."""

    def __init__(self, in_ch, out_ch):
        super().__init__()
        self.up = nn.ConvTranspose2d(in_ch, in_ch // 2, kernel_size=2, stride=2)
        self.conv = DoubleConv(in_ch, out_ch)

    def forward(self, x, skip):
        x = self.up(x)
        x = torch.cat([skip, x], dim=1)
        return self.conv(x)


class UNet(nn.Module):
    def __init__(self, in_channels=3, num_classes=2, width=64):
        super().__init__()
        w = [width, width * 2, width * 4, width * 8, width * 16]
        self.inc = DoubleConv(in_channels, w[0])
        self.down1 = Down(w[0], w[1])
        self.down2 = Down(w[1], w[2])
        self.down3 = Down(w[2], w[3])
        self.down4 = Down(w[3], w[4])
        self.up1 = Up(w[4], w[3])
        self.up2 = Up(w[3], w[2])
        self.up3 = Up(w[2], w[1])
        self.up4 = Up(w[1], w[0])
        self.outc = nn.Conv2d(w[0], num_classes, kernel_size=1)
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

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
