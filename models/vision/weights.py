"""torchvision's published weight sets, as data: which file is which architecture's weights, and
how an image must be prepared for them.

`weights.json` was made once from torchvision's `Weights` enums (classification and semantic
segmentation): for each file torchvision downloads (its URL's basename, e.g.
"resnet50-11ad3fa6.pth"), the architecture, the weight set (`ResNet50_Weights.IMAGENET1K_V2`),
whether it is torchvision's DEFAULT, the preprocessing (resize of the shorter side, centre crop or
none, interpolation, mean, std), the categories ("imagenet": `imagenet_classes.txt`, "voc":
`voc_classes.txt`, or null), the metrics torchvision reports, and the builder's keyword arguments
torchvision sets for those weights (`build`: `image_size` of ViT's 384-pixel sets, GoogLeNet's
`transform_input`, the segmenters' `aux_loss`). An architecture's entries follow torchvision's
enum order; its first is "the family's default".

Nothing is downloaded: a file is given, or found in PyTorch's hub cache (`hub_checkpoints`).
"""
from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from saliency.viz import Preprocess

HERE = Path(__file__).resolve().parent
CATEGORY_FILES = {"imagenet": "imagenet_classes.txt", "voc": "voc_classes.txt"}
CATEGORY_NAMES = {"imagenet": "ImageNet-1k", "voc": "Pascal VOC"}
# ImageNet's usual evaluation preprocessing: for an architecture with no published weight set
IMAGENET: dict[str, Any] = {"resize": 256, "crop": 224, "interpolation": "bilinear",
                            "mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)}


@dataclass(frozen=True)
class WeightSet:
    """One of torchvision's weight files and what goes with it (see the module docstring)."""

    file: str
    architecture: str
    task: str
    enum: str
    name: str
    default: bool
    url: str
    resize: int
    crop: int | None
    interpolation: str
    mean: tuple[float, ...]
    std: tuple[float, ...]
    categories: str | None
    metrics: dict[str, Any] = field(compare=False)
    num_params: int = 0
    min_size: tuple[int, ...] = ()
    build: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def title(self) -> str:
        """torchvision's name of the set, e.g. 'ResNet50_Weights.IMAGENET1K_V2'."""
        return f"{self.enum}.{self.name}"

    def preprocess(self) -> Preprocess:
        """The `viz.Preprocess` of these weights (torchvision's `weights.transforms()`)."""
        from saliency.viz import Preprocess

        return Preprocess(self.resize, self.crop, self.mean, self.std, self.interpolation)

    def classes(self) -> list[str]:
        """The category names of its outputs (empty for a set without categories)."""
        return list(categories(self.categories)) if self.categories else []


@functools.cache
def table() -> dict[str, WeightSet]:
    """{file name: WeightSet} of every weight set of weights.json, in its order."""
    data = json.loads((HERE / "weights.json").read_text(encoding="utf-8"))
    out: dict[str, WeightSet] = {}
    for file, entry in data["weights"].items():
        entry = dict(entry, mean=tuple(entry["mean"]), std=tuple(entry["std"]), min_size=tuple(entry["min_size"]))
        out[file] = WeightSet(file=file, **entry)
    return out


def of_architecture(name: str) -> list[WeightSet]:
    """The weight sets of architecture `name`, in torchvision's enum order (none: [])."""
    return [w for w in table().values() if w.architecture == name]


def preferred(name: str) -> list[WeightSet]:
    """The weight sets of `name`, torchvision's DEFAULT first: the order the hub cache is searched in."""
    sets = of_architecture(name)
    return sorted(sets, key=lambda w: not w.default)


def known(path: str | os.PathLike[str]) -> WeightSet | None:
    """The WeightSet whose file name is `path`'s, or None."""
    return table().get(Path(path).name)


@functools.cache
def categories(kind: str) -> tuple[str, ...]:
    """The category names of `kind` ("imagenet": 1000, "voc": 21), from their text file."""
    if kind not in CATEGORY_FILES:
        raise KeyError(f"no category list {kind!r}; there are: {', '.join(CATEGORY_FILES)}")
    text = (HERE / CATEGORY_FILES[kind]).read_text(encoding="utf-8")
    return tuple(line for line in text.splitlines() if line)


@dataclass(frozen=True)
class Choice:
    """What loading a weights file for an architecture uses: the weight set it is (None for a file
    torchvision does not publish), the preprocessing, the class names, the builder's keyword
    arguments for the file, and a note when the preprocessing is a guess."""

    weight_set: WeightSet | None
    preprocess: Preprocess
    classes: list[str]
    build: dict[str, Any]
    note: str | None = None


def choose(architecture: str, path: str | os.PathLike[str], num_classes: int | None = None) -> Choice:
    """The `Choice` for the weights file `path` of `architecture`: a file torchvision publishes for
    it gets its own preprocessing, classes and builder arguments; any other file the family's
    default preprocessing (its first weight set's, or ImageNet's usual resize 256, crop 224,
    bilinear) and classes (when `num_classes` is None or their number), with a note saying so.
    A published file of another architecture is a LookupError naming it."""
    from saliency.viz import Preprocess

    found = known(path)
    if found is not None and found.architecture != architecture:
        raise LookupError(f"{Path(path).name} is torchvision's {found.title} for {found.architecture}, not for "
                          f"{architecture}; load it with {found.architecture}")
    if found is not None:
        return Choice(found, found.preprocess(), found.classes(), dict(found.build))
    sets = of_architecture(architecture)
    first = sets[0] if sets else None
    preprocess = first.preprocess() if first else Preprocess(**IMAGENET)
    classes = first.classes() if first else list(categories("imagenet"))
    if num_classes is not None and num_classes != len(classes):
        classes = []
    files = ", ".join(w.file for w in sets)
    whose = f"{first.title}'s" if first else "ImageNet's usual"
    kind = first.categories if first else "imagenet"    # a set with classes has categories
    named = f" ({CATEGORY_NAMES[kind]} classes)" if classes else ""  # type: ignore[index]
    note = (f"{Path(path).name} is not a file torchvision publishes for {architecture}"
            f"{f' ({files})' if files else ''}, so it is preprocessed as {whose}{named}: {preprocess.describe()}")
    return Choice(None, preprocess, classes, {}, note)


def hub_checkpoints() -> Path:
    """PyTorch's hub cache of weight files, as torch finds it: $TORCH_HOME/hub/checkpoints, where
    TORCH_HOME defaults to $XDG_CACHE_HOME/torch, and XDG_CACHE_HOME to ~/.cache."""
    home = os.getenv("TORCH_HOME", os.path.join(os.getenv("XDG_CACHE_HOME", "~/.cache"), "torch"))
    return Path(os.path.expanduser(home)) / "hub" / "checkpoints"


def find_in_hub(architecture: str) -> Path | None:
    """The first of `architecture`'s published files (DEFAULT first) in the hub cache, or None."""
    folder = hub_checkpoints()
    for w in preferred(architecture):
        try:
            if (folder / w.file).is_file():
                return folder / w.file
        except OSError:
            continue
    return None


def in_hub(architecture: str) -> list[str]:
    """The names of `architecture`'s published files that are in the hub cache."""
    folder = hub_checkpoints()
    return [w.file for w in preferred(architecture) if (folder / w.file).is_file()]


def missing_message(architecture: str) -> str:
    """One line for an architecture loaded without a weights file when the hub cache has none."""
    sets = preferred(architecture)
    where = hub_checkpoints()
    if not sets:
        return (f"no weights given for {architecture}, and torchvision publishes none for it; give a weights "
                f"file (--weights FILE)")
    files = " or ".join(w.file for w in sets)
    return (f"no weights given for {architecture}, and none of torchvision's files for it ({files}) is in PyTorch's "
            f"hub cache {where}; give one with --weights FILE, or put one there (e.g. {sets[0].url}); nothing is "
            f"downloaded")
