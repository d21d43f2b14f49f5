import torch
import torch.nn as nn
import torch.nn.functional as F
import math

# Monocular depth estimation with a MobileNet encoder, after FastDepth (Wofk et al., 2019).
# Encoder: MobileNetV1 (Howard et al., 2017) without its classifier: a 3x3 stride-2
# convolution to 32 channels, then 13 depthwise separable blocks (3x3 depthwise conv -> BN ->
# ReLU6, 1x1 pointwise conv -> BN -> ReLU6), reaching 1024 channels at 1/32 of the input.
# Decoder: five stages, each a 5x5 depthwise convolution and a 1x1 pointwise convolution
# (both with BN and ReLU) followed by nearest-neighbour up-sampling by 2; the encoder maps at
# 1/16, 1/8, 1/4 and 1/2 of the input are added to the decoder maps of the same size and width
# (additive skips, cheaper than concatenation). A 1x1 convolution to one channel and a
# sigmoid give the depth of every pixel as a normalised inverse depth in (0, 1), as in
# Monodepth. width_mult scales every width, as in MobileNet.
#
# Input: a batch of 3x224x224 images (any height and width divisible by 32).
# Output: N x 1 x H x W inverse depth.

INPUT = (1, 3, 224, 224)
TEST_KWARGS = {"width_mult": 0.125}
TEST_INPUT = (1, 3, 64, 64)


def conv_bn(in_ch, out_ch, stride):
    return nn.Sequential(
        nn.Conv2d(in_ch, out_ch, 3, stride, 1, bias=False),
        nn.BatchNorm2d(out_ch),
        nn.ReLU6(inplace=True),
    )


def conv_dw(in_ch, out_ch, stride):
    """Depthwise separable block: 3x3 per-channel conv, then 1x1 across channels."""
    return nn.Sequential(
        nn.Conv2d(in_ch, in_ch, 3, stride, 1, groups=in_ch, bias=False),
        nn.BatchNorm2d(in_ch),
        nn.ReLU6(inplace=True),
        nn.Conv2d(in_ch, out_ch, 1, 1, 0, bias=False),
        nn.BatchNorm2d(out_ch),
        nn.ReLU6(inplace=True),
    )


def dw_pw_5x5(in_ch, out_ch):
    """Decoder block: 5x5 depthwise conv and 1x1 pointwise conv, each with BN and ReLU."""
    return nn.Sequential(
        nn.Conv2d(in_ch, in_ch, kernel_size=5, stride=1, padding=2, groups=in_ch, bias=False),
        nn.BatchNorm2d(in_ch),
        nn.ReLU(inplace=True),
        nn.Conv2d(in_ch, out_ch, kernel_size=1, stride=1, padding=0, bias=False),
        nn.BatchNorm2d(out_ch),
        nn.ReLU(inplace=True),
    )


class MobileNetDepth(nn.Module):
    def __init__(self, width_mult=1.0):
        super().__init__()

        def c(ch):
            return max(int(ch * width_mult), 1)

        # (out channels, stride) of the 13 depthwise separable blocks of MobileNetV1
        cfg = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
               (512, 1), (512, 1), (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1)]
        layers = [conv_bn(3, c(32), 2)]
        in_ch = c(32)
        for out_ch, stride in cfg:
            layers.append(conv_dw(in_ch, c(out_ch), stride))
            in_ch = c(out_ch)
        self.encoder = nn.ModuleList(layers)
        # encoder outputs added back in the decoder: index -> width at 1/2, 1/4, 1/8, 1/16
        self.skip_layers = {1: c(64), 3: c(128), 5: c(256), 11: c(512)}

        self.decode1 = dw_pw_5x5(c(1024), c(512))
        self.decode2 = dw_pw_5x5(c(512), c(256))
        self.decode3 = dw_pw_5x5(c(256), c(128))
        self.decode4 = dw_pw_5x5(c(128), c(64))
        self.decode5 = dw_pw_5x5(c(64), c(32))
        self.head = nn.Conv2d(c(32), 1, kernel_size=1, stride=1, padding=0, bias=True)
        self.output_act = nn.Sigmoid()

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                n = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                m.weight.data.normal_(0, math.sqrt(2. / n))
                if m.bias is not None:
                    m.bias.data.zero_()
            elif isinstance(m, nn.BatchNorm2d):
                m.weight.data.fill_(1)
                m.bias.data.zero_()

    def forward(self, x):
        skips = {}
        for i, layer in enumerate(self.encoder):
            x = layer(x)
            if i in self.skip_layers:
                skips[i] = x
        x = F.interpolate(self.decode1(x), scale_factor=2, mode="nearest")   # 1/16
        x = x + skips[11]
        x = F.interpolate(self.decode2(x), scale_factor=2, mode="nearest")   # 1/8
        x = x + skips[5]
        x = F.interpolate(self.decode3(x), scale_factor=2, mode="nearest")   # 1/4
        x = x + skips[3]
        x = F.interpolate(self.decode4(x), scale_factor=2, mode="nearest")   # 1/2
        x = x + skips[1]
        x = F.interpolate(self.decode5(x), scale_factor=2, mode="nearest")   # 1/1
        return self.output_act(self.head(x))


def build(**kwargs):
    return MobileNetDepth(**kwargs)
