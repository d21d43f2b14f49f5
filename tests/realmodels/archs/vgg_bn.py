import torch
import torch.nn as nn
import torch.nn.functional as F

"""VGG-11 with batch normalization for 32x32 images (Simonyan and Zisserman, "Very Deep
Convolutional Networks for Large-Scale Image Recognition", configuration A, with batch norm
after every convolution as in Ioffe and Szegedy).

The feature extractor is read from a configuration list: a number is a 3x3 convolution (padding
1) with that many channels, followed by batch norm and ReLU; 'M' is a 2x2 max pool. Five pools
take 32x32 down to 1x1, so the classifier sees 512 features: two hidden fully connected layers
with dropout, then the class scores. Input: (N, 3, 32, 32); output: (N, num_classes) logits.
"""

import math

INPUT = (3, 32, 32)
TEST_KWARGS = {"width": 8, "hidden": 32}

cfg = {
    "VGG11": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "VGG13": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
}


class VGG(nn.Module):
    def __init__(self, vgg_name="VGG11", num_classes=10, width=64, hidden=512):
        super().__init__()
        config = [v if v == "M" else v * width // 64 for v in cfg[vgg_name]]
        self.features = self._make_layers(config)
        last = [v for v in config if v != "M"][-1]
        self.classifier = nn.Sequential(
            nn.Dropout(),
            nn.Linear(last, hidden),
            nn.ReLU(True),
            nn.Dropout(),
            nn.Linear(hidden, hidden),
            nn.ReLU(True),
            nn.Linear(hidden, num_classes),
        )
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                n = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                m.weight.data.normal_(0, math.sqrt(2. / n))
                m.bias.data.zero_()
            elif isinstance(m, nn.BatchNorm2d):
                m.weight.data.fill_(1)
                m.bias.data.zero_()
            elif isinstance(m, nn.Linear):
                m.weight.data.normal_(0, 0.01)
                m.bias.data.zero_()

    def _make_layers(self, config):
        layers = []
        in_channels = 3
        for v in config:
            if v == "M":
                layers += [nn.MaxPool2d(kernel_size=2, stride=2)]
            else:
                layers += [nn.Conv2d(in_channels, v, kernel_size=3, padding=1),
                           nn.BatchNorm2d(v),
                           nn.ReLU(inplace=True)]
                in_channels = v
        return nn.Sequential(*layers)

    def forward(self, x):
        out = self.features(x)
        out = out.view(out.size(0), -1)
        return self.classifier(out)


def build(num_classes=10, width=64, hidden=512):
    return VGG("VGG11", num_classes=num_classes, width=width, hidden=hidden)
