"""torchvision's architectures, written here on `saliency.nn` with torchvision's module names,
parameter shapes and state-dict keys, so that the `.pth` files torchvision writes and downloads
load into them unchanged (strict).

Each family's module registers its builders under torchvision's names (`register`);
`ARCHITECTURES` maps a name ("resnet50", "vit_b_16", "deeplabv3_mobilenet_v3_large", ...) to its
`Architecture`. A builder takes torchvision's keyword arguments (`num_classes=`, ...) and returns
the model randomly initialised, in training mode, as torchvision's builder does with
`weights=None`. `saliency.models.load(name, weights=...)` builds one with its weights, its
preprocessing and its categories (`weights.py`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, TypeVar

Builder = TypeVar("Builder", bound=Callable[..., Any])


@dataclass(frozen=True)
class Architecture:
    """A torchvision architecture: its builder name, the builder, its task ("classification", or
    "segmentation": the output is the `out` logits (N, classes, H, W) at the input's size) and the
    smallest input side it takes."""

    name: str
    build: Callable[..., Any]   # **kwargs -> nn.Module
    task: str
    min_size: int


ARCHITECTURES: dict[str, Architecture] = {}


def register(name: str, build: Builder, *, task: str = "classification", min_size: int = 32) -> Builder:
    """Register `build` (**kwargs -> Module) as the architecture `name`."""
    if name in ARCHITECTURES:
        raise TypeError(f"the architecture {name!r} is registered twice")
    ARCHITECTURES[name] = Architecture(name, build, task, min_size)
    return build


# the families register their builders as they are imported
from . import (  # noqa: E402,I100,F401
    alexnet,
    convnext,
    densenet,
    efficientnet,
    googlenet,
    inception,
    mnasnet,
    mobilenet,
    regnet,
    resnet,
    segmentation,
    shufflenet,
    squeezenet,
    swin,
    vgg,
    vit,
)

__all__ = ["ARCHITECTURES", "Architecture", "register"]
