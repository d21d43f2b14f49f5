import torch
import torch.nn as nn
import torch.nn.functional as F

"""A sub-pixel super-resolution network (Shi et al., "Real-Time Single Image and Video
Super-Resolution Using an Efficient Sub-Pixel Convolutional Neural Network"), with a residual
bicubic-free skip: the low-resolution image is upsampled with nearest neighbours and added.

Three convolutions (5x5, 3x3, 3x3) with tanh, the last one producing channels * r^2 maps that
PixelShuffle rearranges into an r-times larger image. Reflection padding keeps the borders
free of zero-padding artefacts. Input: (N, 3, 64, 64); output: (N, 3, 64 r, 64 r), a dense map.
"""

INPUT = (3, 64, 64)
TEST_INPUT = (2, 3, 13, 17)
TEST_KWARGS = {"upscale": 2, "width": 8}


class ESPCN(nn.Module):
    def __init__(self, channels=3, upscale=3, width=64):
        super().__init__()
        self.upscale = upscale
        self.body = nn.Sequential(
            nn.ReflectionPad2d(2),
            nn.Conv2d(channels, width, 5),
            nn.Tanh(),
            nn.Conv2d(width, width // 2, 3, padding=1),
            nn.Tanh(),
            nn.Conv2d(width // 2, channels * upscale ** 2, 3, padding=1),
        )
        self.shuffle = nn.PixelShuffle(upscale)

    def forward(self, x):
        base = F.interpolate(x, scale_factor=self.upscale, mode="nearest")
        return self.shuffle(self.body(x)) + base


def build(**kwargs):
    return ESPCN(**kwargs)
