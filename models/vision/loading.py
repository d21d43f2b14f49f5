"""Loading a torchvision architecture by name: built here, its weights read from the `.pth` (or
`.npz`, `.safetensors`) file given, or found in PyTorch's hub cache, strict, fused, in eval mode,
with the attributes the tool reads: `.name`, `.task`, `.classes`, `.input_shape`, `.metrics`,
`.preprocess` (the `viz.Preprocess` of those weights), `.weights_name`, `.weights_file` and
`.notes` (what the user should know, e.g. that a file's preprocessing is a guess)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from saliency import nn

from . import ARCHITECTURES
from . import weights as published

if TYPE_CHECKING:
    import os

    from . import Architecture

# The auxiliary classifiers torchvision's builders make only to load a file that holds them, and
# drop afterwards (unless aux_logits was asked for): GoogLeNet's and Inception v3's
AUX_MODULES = ("aux1", "aux2", "AuxLogits")


def load(name: str, weights: str | os.PathLike[str] | None = None, **kwargs: Any) -> nn.Module:
    """The architecture `name` built with torchvision's keyword arguments `kwargs` (and those
    torchvision sets for the weight set), with `weights` loaded (strict; a file that does not fit is
    a ZooError naming the keys), fused (`saliency.nn.fuse`), in eval mode. `weights` None: the first
    of torchvision's files for it (its DEFAULT first) found in PyTorch's hub cache
    (`weights.hub_checkpoints()`), or a ZooError naming the files; nothing is downloaded."""
    from .. import zoo

    arch = ARCHITECTURES[name]
    if weights is None:
        path = published.find_in_hub(name)
        if path is None:
            raise zoo.ZooError(published.missing_message(name))
    else:
        path = Path(weights)
        if not zoo._is_file(path, "the weights file"):
            raise zoo.ZooError(f"no weights file {zoo._shown(path)}")
    try:
        choice = published.choose(name, path, kwargs.get("num_classes"))
    except LookupError as err:
        raise zoo.ZooError(str(err)) from None
    model = _build(arch, {**choice.build, **kwargs})
    zoo._load_weights(model, path, f"the {name!r} architecture")
    if "aux_logits" in choice.build and "aux_logits" not in kwargs:
        model.aux_logits = False
        for aux in AUX_MODULES:
            if aux in getattr(model, "_modules", {}):
                setattr(model, aux, None)
    model = nn.fuse(model)
    found = choice.weight_set
    model.name, model.task, model.classes = name, arch.task, list(choice.classes)
    model.preprocess = choice.preprocess
    model.input_shape = choice.preprocess.input_shape if arch.task == "classification" else None
    model.metrics = dict(found.metrics) if found is not None else {}
    model.weights_name = found.title if found is not None else None
    model.weights_file = str(path)
    model.notes = [choice.note] if choice.note else []
    return model.eval()


def _build(arch: Architecture, kwargs: dict[str, Any]) -> nn.Module:
    """arch.build(**kwargs); a ZooError in one line when the builder refuses the arguments."""
    from .. import zoo

    try:
        with nn.init.skipped():  # every parameter and buffer is loaded from the file next
            return arch.build(**kwargs)
    except (TypeError, ValueError) as err:
        shown = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        detail = " ".join(str(err).split())
        raise zoo.ZooError(f"cannot build {arch.name}({shown}): {detail}") from None
