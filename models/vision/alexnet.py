"""torchvision's AlexNet (Krizhevsky et al., 2012, in the one-GPU form of arXiv:1404.5997): five
convolutions with three max pools, average-pooled to 6x6, and three linear layers with dropout."""
from typing import Any

from saliency import Tensor, nn

from . import register


class AlexNet(nn.Module):
    """`features` (convolutions), `avgpool` (to 6x6), `classifier` (dropout and linear layers)."""

    def __init__(self, num_classes: int = 1000, dropout: float = 0.5) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, kernel_size=11, stride=4, padding=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(64, 192, kernel_size=5, padding=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(192, 384, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
        )
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(p=dropout), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True),
            nn.Dropout(p=dropout), nn.Linear(4096, 4096), nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.avgpool(self.features(x)).flatten(1))


def alexnet(**kwargs: Any) -> AlexNet:
    """AlexNet with torchvision's keyword arguments (num_classes, dropout)."""
    return AlexNet(**kwargs)


register("alexnet", alexnet, min_size=63)
