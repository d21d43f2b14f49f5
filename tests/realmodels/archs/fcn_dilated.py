import torch
import torch.nn as nn
import torch.nn.functional as F

# A fully convolutional segmentation network with dilated convolutions, after Yu and Koltun
# (2016, "Multi-scale context aggregation by dilated convolutions") and the dilated residual
# networks (DRN) that followed: a front end of 3x3 conv -> BN -> ReLU blocks reduces the
# image to 1/8 of its size with three stride-2 convolutions; instead of reducing it further,
# the context module grows the receptive field with 3x3 convolutions of dilation 2, 4 and 8
# (padding equal to the dilation, so the map keeps its size), then a dilation-1 block
# smooths the gridding; a 1x1 convolution gives the scores of num_classes classes at 1/8
# resolution and bilinear interpolation (align_corners=False) brings them back to the input
# size.
#
# Input: a batch of 3x256x256 images (any size; the output matches it).
# Output: N x num_classes x H x W logits (21 classes, PASCAL VOC).

INPUT = (1, 3, 256, 256)
TEST_KWARGS = {"width": 8, "num_classes": 5}
TEST_INPUT = (1, 3, 40, 52)


class ConvBNReLU(nn.Sequential):
    def __init__(self, in_ch, out_ch, stride=1, dilation=1):
        super().__init__(
            nn.Conv2d(in_ch, out_ch, kernel_size=3, stride=stride, padding=dilation, dilation=dilation,
                      bias=False),
            nn.BatchNorm2d(out_ch),
            nn.ReLU(inplace=True),
        )


class DilatedFCN(nn.Module):
    def __init__(self, num_classes=21, width=64):
        super().__init__()
        w = width
        self.frontend = nn.Sequential(
            ConvBNReLU(3, w),
            ConvBNReLU(w, w, stride=2),            # 1/2
            ConvBNReLU(w, 2 * w),
            ConvBNReLU(2 * w, 2 * w, stride=2),    # 1/4
            ConvBNReLU(2 * w, 4 * w),
            ConvBNReLU(4 * w, 4 * w, stride=2),    # 1/8
        )
        self.context = nn.Sequential(
            ConvBNReLU(4 * w, 8 * w, dilation=2),
            ConvBNReLU(8 * w, 8 * w, dilation=4),
            ConvBNReLU(8 * w, 8 * w, dilation=8),
            ConvBNReLU(8 * w, 8 * w, dilation=1),
        )
        self.dropout = nn.Dropout(0.1)
        self.classifier = nn.Conv2d(8 * w, num_classes, kernel_size=1)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                if m.bias is not None:
                    nn.init.constant_(m.bias, 0)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def forward(self, x):
        size = x.shape[2:]
        y = self.frontend(x)
        y = self.context(y)
        y = self.classifier(self.dropout(y))
        return F.interpolate(y, size=size, mode="bilinear", align_corners=False)


def build(**kwargs):
    return DilatedFCN(**kwargs)
