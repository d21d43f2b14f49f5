"""How a command reads its images for the model: the preprocessing options (`--resize`, `--crop`,
`--size`, `--mean`, `--std`, `--normalize`, `--classes`) of map, batch, evaluate, receptive-field
and look-distance.

A torchvision architecture brings its weights' preprocessing (`model.preprocess`) and categories;
the options given replace those parts of it. A model file has none: without options, the image
is read as before (at the model's `input_shape`, or at its own size, values in [0, 1]); with
them, through the `viz.Preprocess` they make (resize and crop default to the model's input_shape
when it has one).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, TypeVar

import typer

from .mapping import MapError

if TYPE_CHECKING:
    from saliency.viz import Preprocess

F = TypeVar("F", bound=Callable[..., Any])


PANEL = "Preprocessing (a torchvision model's weights bring their own)"
OPTIONS = {
    "resize": ("--resize", "N|H,W", "Resize: the shorter side to N (the other keeps the aspect ratio), or to HxW."),
    "crop": ("--crop", "N|H,W", "Centre crop of NxN or HxW after the resize."),
    "size": ("--size", "H,W", "Stretch the image to HxW (no crop): the model's input size."),
    "mean": ("--mean", "R,G,B", "Subtract this mean per channel (values in [0, 1])."),
    "std": ("--std", "R,G,B", "Then divide by this standard deviation per channel."),
    "normalize": ("--normalize", "imagenet|none", "imagenet: ImageNet's mean and std; none: no normalisation."),
    "classes": ("--classes", "FILE", "Class names, one a line (UTF-8), for the model's outputs in order."),
}


def add_preprocess_options(command: F) -> F:
    """`command` with one keyword-only typer option per entry of OPTIONS added to its signature
    (default None), shown under one help panel; the command takes them with its **kwargs."""
    signature = inspect.signature(command)
    params = [p for p in signature.parameters.values() if p.kind != inspect.Parameter.VAR_KEYWORD]
    for name, (flag, metavar, text) in OPTIONS.items():
        default = typer.Option(None, flag, help=text, metavar=metavar, rich_help_panel=PANEL, show_default=False)
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=str))
    command.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    return command


def _ints(text: str, flag: str, counts: tuple[int, ...]) -> int | tuple[int, int]:
    """Positive ints from 'N' or 'H,W' (`counts`: the numbers of values allowed); one int alone, a tuple of two."""
    parts = [p.strip() for p in str(text).split(",")]
    if len(parts) not in counts or not all(p.isascii() and p.isdigit() and int(p) > 0 for p in parts):
        forms = " or ".join({1: "N", 2: "H,W"}[c] for c in counts)
        raise MapError(f"{flag} must be {forms} with positive integers, got {text!r}")
    return int(parts[0]) if len(parts) == 1 else (int(parts[0]), int(parts[1]))


def _floats(text: str, flag: str) -> tuple[float, ...]:
    """1 or 3 finite numbers from 'R,G,B' (or one number for every channel)."""
    import math

    try:
        values = tuple(float(p) for p in str(text).split(","))
    except ValueError:
        values = ()
    if len(values) not in (1, 3) or not all(math.isfinite(v) for v in values):
        raise MapError(f"{flag} must be R,G,B (three numbers) or one number, got {text!r}")
    if flag == "--std" and min(values) <= 0:
        raise MapError(f"--std must be positive (it divides), got {text!r}")
    return values


def _class_names(path: str | Path) -> list[str]:
    """The non-empty lines of the UTF-8 text file `path`."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MapError(f"--classes file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise MapError(f"cannot read the --classes file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    names = [line.strip() for line in text.splitlines() if line.strip()]
    if not names:
        raise MapError(f"the --classes file {path} holds no names; give one class name a line")
    return names


@dataclass(frozen=True)
class Request:
    """The preprocessing options as given (parsed; None where not given)."""

    resize: int | tuple[int, int] | None = None
    crop: int | tuple[int, int] | None = None
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    normalized: bool | None = None     # --normalize: True imagenet, False none
    classes: tuple[str, ...] | None = None

    @classmethod
    def parse(cls, given: Mapping[str, str | None]) -> Request:
        """The Request of the option texts `given` ({name: text or None}); MapError in one line."""
        given = {k: given.get(k) for k in OPTIONS}
        if given["size"] is not None and (given["resize"] is not None or given["crop"] is not None):
            raise MapError("--size stretches the image to the model's input; give --size, or --resize and --crop")
        resize = _ints(given["size"], "--size", (2,)) if given["size"] is not None else (
            _ints(given["resize"], "--resize", (1, 2)) if given["resize"] is not None else None)
        crop = _ints(given["crop"], "--crop", (1, 2)) if given["crop"] is not None else None
        mean = _floats(given["mean"], "--mean") if given["mean"] is not None else None
        std = _floats(given["std"], "--std") if given["std"] is not None else None
        normalized = None
        if given["normalize"] is not None:
            choice = given["normalize"].strip().lower()
            if choice not in ("imagenet", "none"):
                raise MapError(f"--normalize must be imagenet or none, got {given['normalize']!r}")
            if mean is not None or std is not None:
                raise MapError("--normalize sets the mean and std; give --normalize, or --mean and --std")
            normalized = choice == "imagenet"
        classes = tuple(_class_names(given["classes"])) if given["classes"] is not None else None
        return cls(resize, crop, mean, std, normalized, classes)

    @property
    def shapes_given(self) -> bool:
        return self.resize is not None or self.crop is not None

    @property
    def values_given(self) -> bool:
        return self.mean is not None or self.std is not None or self.normalized is not None

    def preprocess(self, model: Any) -> Preprocess | None:
        """The `viz.Preprocess` that reads images for `model`, or None (the image as before): the
        model's `.preprocess` with the parts given replaced, or one made of the parts given."""
        from saliency import viz
        from saliency.attribution.sources import model_preprocess

        base = model_preprocess(model)
        if not (self.shapes_given or self.values_given):
            return base
        parts: dict[str, Any] = {}
        if self.shapes_given:
            parts.update(resize=self.resize, crop=self.crop)
        if self.normalized is not None:
            imagenet = viz.Preprocess.imagenet()
            parts.update(mean=imagenet.mean if self.normalized else None, std=imagenet.std if self.normalized else None)
        for name in ("mean", "std"):
            if getattr(self, name) is not None:
                parts[name] = getattr(self, name)
        try:
            if base is not None:
                return replace(base, **parts)
            shape = getattr(model, "input_shape", None)
            if shape is not None and not self.shapes_given:  # the model's input size, as without options
                parts["resize"] = tuple(int(s) for s in shape[1:])
            channels = int(shape[0]) if shape is not None and shape[0] in (1, 3) else 3
            return viz.Preprocess(channels=channels, **parts)
        except viz.VizError as exc:
            raise MapError(str(exc)) from None

    def apply(self, model: Any) -> Preprocess | None:
        """The `viz.Preprocess` for `model` (`preprocess`), after giving the model the --classes names."""
        if self.classes is not None:
            try:
                model.classes = list(self.classes)
            except AttributeError:
                raise MapError("--classes needs a model that takes attributes (a saliency.nn.Module or a "
                               "function)") from None
        return self.preprocess(model)


def take(options: dict[str, Any]) -> Request:
    """The Request of the preprocessing options in a command's keyword arguments `options`,
    removed from them (what remains are the method's options)."""
    return Request.parse({name: options.pop(name, None) for name in OPTIONS})


def check_classes(model: Any, output: Any) -> None:
    """MapError when the model's class names (--classes) are not as many as the classes (or the
    channels of a dense output) of its `output` for one image, (K,) or (C, H, W), or a batch of them."""
    names = getattr(model, "classes", None)
    shape = tuple(getattr(output, "shape", ()))
    shape = shape[1:] if len(shape) in (2, 4) else shape
    if names and len(shape) in (1, 3) and shape[0] != len(names):
        raise MapError(f"{len(names)} class names for a model of {shape[0]} output "
                       f"{'classes' if len(shape) == 1 else 'channels'}; give one name a line for each")
