"""The shipped models: what each one is, and loading it with its weights and its measured quality.

A model's weights are ``weights/<name>.npz`` (its state dict) beside a ``weights/<name>.json``
card: the metrics measured on held-out data, the command that trained it, its training time.
"""
from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Union

import numpy as np

from saliency import manual_seed, nn

from . import architectures, data

if TYPE_CHECKING:
    import os

StrPath = Union[str, "os.PathLike[str]"]
Model = Callable[..., Any]   # an nn.Module, or a plain function a user's model file builds

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"


class ZooError(LookupError):
    """An unknown model name, or a weights file that is missing or does not fit the architecture."""


@dataclass(frozen=True)
class Recipe:
    """How `saliency train` trains a model (models/train.py: Adam, cosine learning-rate decay)."""

    epochs: int
    per_epoch: int          # training images drawn per epoch (a fixed split trains on all of it)
    batch: int
    lr: float


@dataclass(frozen=True)
class Spec:
    """A zoo model: what it is, and how it is trained and measured. The last four are keywords."""

    name: str
    task: str                   # "classification" or "depth"
    input_shape: tuple[int, ...]            # (C, H, W)
    build: Callable[[], nn.Module]          # () -> nn.Module, freshly initialised
    classes: tuple[str, ...] = ()
    summary: str = ""
    data: data.Generated | data.Split = field(kw_only=True)   # training epochs, held-out data
    recipe: Recipe = field(kw_only=True)
    eval_count: int | None = field(kw_only=True)  # held-out images measured; None: all of a fixed test split
    eval_batch: int = field(default=64, kw_only=True)   # images per forward pass when measuring


SPECS = {
    "shapes": Spec("shapes", "classification", (3, 64, 64), architectures.shapes_net, tuple(data.SHAPE_CLASSES),
                   "8 shape classes on textured, cluttered backgrounds (RGB 64x64)",
                   data=data.Generated(data.shapes), recipe=Recipe(epochs=30, per_epoch=4000, batch=32, lr=3e-3),
                   eval_count=2000),
    "digits": Spec("digits", "classification", (1, 32, 32), architectures.digits_net, tuple(str(d) for d in range(10)),
                   "scikit-learn's handwritten digits, upsampled to 32x32 (grey)",
                   data=data.Split(data.digits, shift=3), recipe=Recipe(epochs=40, per_epoch=1438, batch=32, lr=3e-3),
                   eval_count=None),
    "depth": Spec("depth", "depth", (3, 128, 128), architectures.depth_net, (),
                  "per-pixel metric depth of ray-cast scenes (RGB 128x128 -> metres)",
                  data=data.Generated(data.scene_depths), recipe=Recipe(epochs=10, per_epoch=1600, batch=16, lr=2e-3),
                  eval_count=300, eval_batch=16),
}
DEFAULT = {"classification": "shapes", "depth": "depth"}


def spec(name: str) -> Spec:
    try:
        return SPECS[name]
    except KeyError:
        raise ZooError(f"unknown model {name!r}; the zoo has: {', '.join(SPECS)}") from None


def available() -> list[str]:
    """Names of the models whose weights are shipped (and can be loaded)."""
    return [name for name in SPECS if (WEIGHTS_DIR / f"{name}.npz").is_file()]


def card(name: str) -> dict[str, Any]:
    """The model's card: metrics, training command and time (an empty dict if it has none)."""
    path = WEIGHTS_DIR / f"{spec(name).name}.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def build(name: str) -> nn.Module:
    """A freshly initialised model of this architecture, with the zoo's attributes set (metrics empty),
    fused (`saliency.nn.fuse`: adjacent layers that can run as one op do; weights and keys unchanged)."""
    s = spec(name)
    model = nn.fuse(s.build())
    model.name, model.task, model.input_shape, model.classes, model.metrics = (
        s.name, s.task, s.input_shape, list(s.classes), {})
    return model


def _shown(path: object) -> str:
    """A path for a one-line message: as given, or its repr if it holds control characters."""
    text = str(path)
    return text if text.isprintable() else repr(text)


def _is_file(path: StrPath, what: str) -> bool:
    """Whether `path` is a regular file; ZooError when the system cannot even look (a name too long, ...)."""
    try:
        return Path(path).is_file()
    except OSError as err:
        raise ZooError(f"cannot look for {what} {_shown(path)}: {err.strerror or err}") from None


SHOWN_KEYS = 3


def _some(keys: Iterable[str]) -> str:
    """A few keys for a one-line message: the first SHOWN_KEYS, then how many more."""
    keys = list(keys)
    text = ", ".join(keys[:SHOWN_KEYS])
    return text + (f" and {len(keys) - SHOWN_KEYS} more" if len(keys) > SHOWN_KEYS else "")


def _file_kind(path: StrPath) -> str:
    """What a weights file is ("an .npz archive", "a bare pickle", ...), judged by its content by the
    function saliency.nn.load dispatches with."""
    from saliency.nn.serialization import file_format

    try:
        return file_format(path).value
    except OSError:
        return "a weights file"


def _fit(model: nn.Module, shapes: Mapping[str, Any], path: StrPath, what: str) -> None:
    """ZooError in one line when the file's {key: shape} is not the model's state dict: how many keys
    are missing, unexpected or of another shape, with a few of each named."""
    wanted = {k: tuple(v.shape) for k, v in model.state_dict(keep_vars=True).items()}
    missing = [k for k in wanted if k not in shapes]
    unexpected = [k for k in shapes if k not in wanted]
    resized = [f"{k} {tuple(shapes[k])} for {wanted[k]}" for k in wanted
               if k in shapes and tuple(shapes[k]) != wanted[k]]
    if not (missing or unexpected or resized):
        return
    parts: list[str] = []

    def are(keys: list[str]) -> str:
        return "is" if len(keys) == 1 else "are"

    if missing:
        parts.append(f"{len(missing)} of the model's {len(wanted)} keys {are(missing)} missing ({_some(missing)})")
    if unexpected:
        parts.append(f"{len(unexpected)} of the file's {len(shapes)} keys {are(unexpected)} not the model's "
                     f"({_some(unexpected)})")
    if resized:
        parts.append(f"{len(resized)} {'key has' if len(resized) == 1 else 'keys have'} another shape "
                     f"({_some(resized)})")
    raise ZooError(f"{_shown(path)} ({_file_kind(path)}) does not fit {what}: {'; '.join(parts)}")


def _check_finite(state: Mapping[str, Any], path: StrPath) -> None:
    """ZooError naming the tensors of a weights file that hold NaN or infinite values."""
    bad = [k for k, v in state.items() if np.asarray(v).dtype.kind in "fc" and not np.isfinite(v).all()]
    if bad:
        raise ZooError(f"the weights in {_shown(path)} hold NaN or infinite values in {len(bad)} "
                       f"tensor{'s' if len(bad) > 1 else ''} ({_some(bad)}); a map needs finite weights")


def _with_counters(model: nn.Module, state: dict[str, Any]) -> dict[str, Any]:
    """`state` with the counters `num_batches_tracked` of the batch norms it holds taken from the
    model where it lacks them: files saved before PyTorch 0.4.1 (torchvision's oldest published
    weights among them) have none, and PyTorch loads them anyway (the counter plays no part in
    eval mode)."""
    counter = "num_batches_tracked"
    missing = [k for k in model.state_dict(keep_vars=True)
               if k.endswith(counter) and k not in state and k[:-len(counter)] + "running_mean" in state]
    if not missing:
        return state
    own = model.state_dict()
    return {**state, **{k: own[k] for k in missing}}


def _load_weights(model: nn.Module, path: StrPath, what: str) -> None:
    """Load a weights file into `model`, or ZooError in one line naming a few missing, unexpected or
    mis-shaped keys, a refused dtype, or the tensors that hold NaN or infinite values. The names and
    shapes of an `.npz` file are checked from its headers before any array is read (a small
    compressed file may declare gigabytes). A malformed file raises `saliency.nn.WeightsError`
    unchanged: it names the file and the defect. A model with an `upgrade_keys(mapping)` method
    (torchvision's ViT and DenseNet, whose published files use older key names; MNASNet, which
    rebuilds its stem for a version 1 file) sees the file's keys first, and its mapping is used."""
    from saliency.nn.npz import read_npz_shapes

    upgrade: Callable[[dict[str, Any]], dict[str, Any]] = (getattr(model, "upgrade_keys", None)
                                                           or (lambda mapping: mapping))
    try:
        if _file_kind(path) == "an .npz archive":
            _fit(model, upgrade({k: shape for k, (_, shape) in read_npz_shapes(path).items()}), path, what)
        state = _with_counters(model, upgrade(nn.load(path)))
        _fit(model, {k: getattr(v, "shape", ()) for k, v in state.items()}, path, what)
        _check_finite(state, path)
        model.load_state_dict(state)
    except (nn.WeightsError, ZooError):
        raise
    except (KeyError, RuntimeError, TypeError, ValueError) as err:
        detail = " ".join(str(err).split())        # the state-dict report spans lines; keep one
        raise ZooError(f"{_shown(path)} does not fit {what}: {detail}") from None


def load(name: str, weights: StrPath | None = None, **kwargs: Any) -> nn.Module:
    """The shipped model `name` in eval mode with its weights, `.task`, `.input_shape`, `.classes`
    and `.metrics`; `weights` loads another ``.npz``, ``.safetensors`` or ``.pth`` file into the same architecture.
    A torchvision architecture's name (`vision.ARCHITECTURES`: "resnet50", "vit_b_16", ...) builds
    it with torchvision's keyword arguments `kwargs` and loads its weights (`vision.loading.load`)."""
    if name not in SPECS:
        from .vision import ARCHITECTURES, loading

        if name in ARCHITECTURES:
            return loading.load(name, weights, **kwargs)
    if kwargs:
        raise ZooError(f"the zoo model {name!r} takes no arguments, got {', '.join(kwargs)}")
    model = build(name)
    path = Path(weights) if weights is not None else WEIGHTS_DIR / f"{model.name}.npz"
    if not _is_file(path, "the weights file"):
        hint = "" if weights is not None else f"; train it with: saliency train {name}"
        raise ZooError(f"no weights file {_shown(path)}{hint}")
    _load_weights(model, path, f"the {name!r} model")
    model.metrics = dict(card(name).get("metrics", {})) if weights is None else {}
    return model.eval()


def load_user(spec: str, weights: StrPath | None = None, args: str | None = None) -> Model:
    """A user's model from ``path/to/file.py:Name``, where Name is a Module class or a function
    that returns a Module or a callable, built with `args` (a JSON object of keyword arguments, a
    JSON array of positional ones, or None for none), with `weights` (``.npz``, ``.safetensors``
    or a ``.pth`` state dict) loaded into it, in eval mode when it has one. It is not fused: the
    builder may return ``saliency.nn.fuse(model)`` for that."""
    import importlib.util

    path, sep, fn = str(spec).rpartition(":")
    if not sep or not path.endswith(".py") or not fn.isidentifier():
        import difflib

        from .vision import ARCHITECTURES

        close = difflib.get_close_matches(str(spec), list(SPECS) + list(ARCHITECTURES), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ZooError(f"unknown model {spec!r}{hint}: give a zoo name ({', '.join(SPECS)}), a torchvision "
                       f"architecture (resnet50, vit_b_16, ...: saliency models lists them) or path/to/file.py:Name "
                       f"(a Module class or a function that builds the model)")
    positional, keywords = _model_args(args)
    if not _is_file(path, "the model file"):
        raise ZooError(f"model file {_shown(path)} does not exist")
    module_spec = importlib.util.spec_from_file_location(f"_saliency_user_model_{Path(path).stem}", path)
    module = importlib.util.module_from_spec(module_spec)  # type: ignore[arg-type]
    try:
        module_spec.loader.exec_module(module)  # type: ignore[union-attr]
    except SystemExit as err:
        raise ZooError(f"importing {_shown(path)} failed: it called sys.exit({err.code!r})") from None
    except Exception as err:
        detail = " ".join(str(err).split())
        raise ZooError(f"importing {_shown(path)} failed: {type(err).__name__}: {detail}") from None
    build_fn = getattr(module, fn, None)
    if not callable(build_fn):
        raise ZooError(f"{_shown(path)} has no class or function {fn}")
    shown_call = f"{fn}({', '.join([repr(a) for a in positional] + [f'{k}={v!r}' for k, v in keywords.items()])})"
    try:
        model = build_fn(*positional, **keywords)
    except SystemExit as err:
        raise ZooError(f"building the model with {shown_call} from {_shown(path)} failed: it called "
                       f"sys.exit({err.code!r})") from None
    except Exception as err:
        detail = " ".join(str(err).split())
        raise ZooError(f"building the model with {shown_call} from {_shown(path)} failed: "
                       f"{type(err).__name__}: {detail}") from None
    if weights is not None:
        if not isinstance(model, nn.Module):
            raise ZooError(f"{fn}() returned a {type(model).__name__}, not a saliency.nn.Module; "
                           "weights load only into a Module")
        if not _is_file(weights, "the weights file"):
            raise ZooError(f"no weights file {_shown(weights)}")
        _load_weights(model, weights, f"the model from {spec}")
    return model.eval() if isinstance(model, nn.Module) else model


def _model_args(text: str | None) -> tuple[list[Any], dict[str, Any]]:
    """(positional, keyword) arguments from the JSON text of --model-args (None: none)."""
    if text is None or not str(text).strip():
        return [], {}
    try:
        value = json.loads(text)
    except RecursionError:
        raise ZooError("--model-args nests too deeply to read; give a flat JSON object such as "
                       "'{\"num_classes\": 10}'") from None
    except ValueError as err:
        raise ZooError(f"--model-args is not valid JSON ({err}); give an object such as "
                       f"'{{\"num_classes\": 10}}' or an array of positional arguments") from None
    if isinstance(value, dict):
        return [], value
    if isinstance(value, list):
        return value, {}
    raise ZooError(f"--model-args must be a JSON object of keyword arguments or an array of positional ones, "
                   f"got {type(value).__name__} {text!r}")


def is_vision(name: object) -> bool:
    """Whether `name` is a torchvision architecture's name (`vision.ARCHITECTURES`) and no zoo model's."""
    if name in SPECS or not isinstance(name, str):
        return False
    from .vision import ARCHITECTURES

    return name in ARCHITECTURES


def is_onnx(name: object) -> bool:
    """Whether `name` names an ONNX file (path/to/net.onnx): a model that is data, no code."""
    return isinstance(name, str) and name.lower().endswith(".onnx") and name not in SPECS


def load_onnx_file(path: str, weights: StrPath | None = None, args: str | None = None) -> nn.Module:
    """The model of the ONNX file at `path` (`saliency.nn.load_onnx`); a ZooError for weights or
    arguments given with it, a file that is not there, and any OnnxError."""
    if weights is not None:
        raise ZooError(f"{_shown(path)} is an ONNX file, which holds its weights; --weights is for model files and "
                       f"architectures")
    if args:
        raise ZooError(f"--model-args is for a model file (path/to/file.py:Name); the ONNX file {_shown(path)} takes "
                       f"none")
    if not _is_file(path, "the ONNX file"):
        raise ZooError(f"ONNX file {_shown(path)} does not exist")
    try:
        return nn.load_onnx(path)
    except nn.OnnxError as exc:
        raise ZooError(str(exc)) from None


def resolve(name_or_path: str, weights: StrPath | None = None, args: str | None = None,
            random_seed: int | None = None) -> Model:
    """A zoo model by name (with other `weights` if given), a torchvision architecture by name
    (`weights` its file, or found in PyTorch's hub cache; `args` a JSON object of its builder's
    keyword arguments), an ONNX file (path/to/net.onnx: no weights, no arguments), or a user's
    model by path:Name built with `args` (JSON), fused
    (`saliency.nn.fuse`) as the command line runs it: same maps, fewer nodes. A model file given
    no `weights` is built after `saliency.manual_seed(random_seed)` (when given), so that its
    random initial weights are the same in every process."""
    if name_or_path in SPECS:
        if args:
            raise ZooError(f"--model-args is for a model file (path/to/file.py:Name); the zoo model "
                           f"{name_or_path!r} takes none")
        return load(name_or_path, weights)
    if is_vision(name_or_path):
        positional, keywords = _model_args(args)
        if positional:
            raise ZooError(f"--model-args of {name_or_path} is a JSON object of its builder's keyword arguments, "
                           f"e.g. '{{\"num_classes\": 10}}', got an array")
        return load(name_or_path, weights, **keywords)
    if is_onnx(name_or_path):
        return load_onnx_file(name_or_path, weights, args)
    if random_seed is not None:
        manual_seed(random_seed)
    model = load_user(name_or_path, weights, args)
    return nn.fuse(model) if isinstance(model, nn.Module) else model


@dataclass(frozen=True)
class ModelSource:
    """A model as the command line names it: a zoo name, a torchvision architecture's name or
    path/to/file.py:Name, its weights file, the JSON arguments of Name (or of the architecture's
    builder), and the random seed of its initial weights (a model file given no weights; None
    elsewhere). `load()` builds it and says what identifies it."""

    model: str = "shapes"
    weights: str | None = None
    model_args: str | None = None
    random_seed: int | None = None
    expected: tuple[tuple[str, Any], ...] | None = None  # the `identity` the model must have (`pinned`): sorted items

    def __call__(self) -> Model:
        """The model, built as `load()` builds it (in another process: a Dask worker); a ZooError
        when it has not the identity this source is `pinned` to (another weights or model file at
        the same path, another random initialisation)."""
        model, _, identity = self.load()
        changes = identity_changes(dict(self.expected or ()), identity)
        if changes:
            import socket

            raise ZooError(f"the model built on {socket.gethostname()} differs from the one the run was started "
                           f"with: {'; '.join(changes)}; every process must see the same model and weights files")
        return model

    def pinned(self, identity: Mapping[str, Any]) -> ModelSource:
        """This source, required to build a model of `identity` (see `__call__`)."""
        return replace(self, expected=tuple(sorted(identity.items())))

    @property
    def random_init(self) -> bool:
        """Whether the model's weights are its random initialisation (a model file without weights)."""
        return self.model not in SPECS and self.weights is None and not is_vision(self.model) \
            and not is_onnx(self.model)

    def load(self) -> tuple[Model, ModelSource, dict[str, Any]]:
        """(model, source, identity): the model; this source with the random seed it was built
        with (drawn now for a random initialisation that has none), or with the weights file found
        in PyTorch's hub cache for a torchvision architecture given none (so that every process
        loads that file); and `identity`'s record."""
        source = self
        if self.random_init and self.random_seed is None:
            source = replace(self, random_seed=secrets.randbelow(2 ** 31))
        if self.weights is None and is_vision(self.model):
            from .vision import weights as published

            found = published.find_in_hub(self.model)
            if found is None:
                raise ZooError(published.missing_message(self.model))
            source = replace(self, weights=str(found))
        model = resolve(source.model, source.weights, source.model_args,
                        source.random_seed if source.random_init else None)
        return model, source, identity(model, source)

    def record(self) -> dict[str, Any]:
        """The source as JSON values (a batch store keeps it)."""
        return {"model": self.model, "weights": self.weights, "model_args": self.model_args,
                "random_seed": self.random_seed if self.random_init else None}


def file_sha256(path: StrPath) -> str:
    """The SHA-256 of a file's bytes, as hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def parameters_sha256(model: Model) -> str | None:
    """The SHA-256 of a Module's state dict (every key, dtype, shape and value, in order), as hex;
    None for a model that is a plain function. Two models with the same architecture compute the
    same maps exactly when this agrees."""
    state = getattr(model, "state_dict", None)
    if not callable(state):
        return None
    digest = hashlib.sha256()
    for key, value in state().items():
        arr = np.ascontiguousarray(value.numpy() if hasattr(value, "numpy") else value)
        digest.update(f"{key}\0{arr.dtype.str}\0{arr.shape}\0".encode())
        digest.update(arr.tobytes())
    return digest.hexdigest()


def identity(model: Model, source: ModelSource) -> dict[str, Any]:
    """What identifies the weights and code of a model loaded from `source`: the SHA-256 of its
    model file (a zoo model: None, its code is this package's), of its weights file (a zoo model's
    shipped one when none is given) and of its parameters, and the random seed of a random
    initialisation. A torchvision architecture has no model file (its code is this package's).
    A resumed run or a Dask worker whose model differs is refused by comparing these."""
    path = source.model if is_onnx(source.model) else \
        source.model.rpartition(":")[0] if source.model not in SPECS and not is_vision(source.model) else None
    weights = source.weights if source.weights is not None else (
        WEIGHTS_DIR / f"{source.model}.npz" if source.model in SPECS else None)
    return {"model_sha256": file_sha256(path) if path else None,
            "weights_sha256": file_sha256(weights) if weights is not None else None,
            "parameters_sha256": parameters_sha256(model),
            "random_seed": source.random_seed if source.random_init else None}


IDENTITY_WHAT = {"model_sha256": "the model file's content", "weights_sha256": "the weights file's content",
                 "parameters_sha256": "the model's parameters", "random_seed": "the random seed of its initial weights"}


def identity_changes(then: Mapping[str, Any] | None, now: Mapping[str, Any]) -> list[str]:
    """Sentences saying how two `identity` records differ; none when `then` is empty or None (a store
    made before identities were recorded)."""
    def shown(key: str, value: Any) -> str:
        return f"sha256 {value[:12]}" if key.endswith("sha256") and isinstance(value, str) else repr(value)

    return [f"{what} ({shown(key, then.get(key))} then, {shown(key, now.get(key))} now)"
            for key, what in IDENTITY_WHAT.items() if then and then.get(key) != now.get(key)]
