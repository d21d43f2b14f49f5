"""The images of a run, and the thread that reads them ahead of the model, a batch at a time.

`ImageSource` is image files (read through a `viz.Preprocess`, the run's or the model's
`.preprocess`; without one, at the model's `input_shape`, or at the first readable image's size
for a model without one) or an array (N, C, H, W); `BatchReader` reads its batches on a thread
of its own while the model works on the last one. An image that cannot be read (or holds NaN)
reads as zeros with its error beside it: the run records it and goes on.
"""
from __future__ import annotations

import queue
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from ._core import InputError

if TYPE_CHECKING:
    import os
    from collections.abc import Iterator, Sequence

QUEUED_BATCHES = 2  # batches read ahead of the model at most (and waiting to be written)


def model_preprocess(model: object) -> Any:
    """The model's `.preprocess` when it is a `viz.Preprocess` (a torchvision architecture's), else None."""
    found = getattr(model, "preprocess", None)
    if found is None:
        return None
    from .. import viz  # only then: `import saliency.attribution` stays without matplotlib

    return found if isinstance(found, viz.Preprocess) else None


def checked_preprocess(preprocess: Any) -> Any:
    """`preprocess` if it is None or a `viz.Preprocess` (a record of one is read), else InputError."""
    if preprocess is None:
        return None
    from .. import viz

    if isinstance(preprocess, dict):
        return viz.Preprocess.from_record(preprocess)
    if not isinstance(preprocess, viz.Preprocess):
        raise InputError(f"preprocess must be a saliency.viz.Preprocess or None, got {type(preprocess).__name__}")
    return preprocess


class ImageSource:
    """The images of a run: paths (read through `preprocess`, by default the model's `.preprocess`;
    without one, at the model's input size) or an array (N, C, H, W), the model's input as it is;
    `names` (the paths as text, or image0, image1, ...), `shape` (C, H, W), `preprocess` (what
    reads the paths, or None)."""

    def __init__(self, model: object, images: np.ndarray | Sequence[str | os.PathLike[str]],
                 preprocess: Any = None) -> None:
        self.array: Optional[np.ndarray] = None
        self.preprocess: Any = None  # a viz.Preprocess, or None
        self.shape: tuple[int, ...]
        preprocess = checked_preprocess(preprocess)
        if isinstance(images, np.ndarray):
            if images.ndim != 4:
                raise InputError(f"images must be a list of image files or an array (N, C, H, W), got shape "
                                 f"{images.shape}")
            if preprocess is not None:
                raise InputError("preprocess reads image files; an array of images is the model's input as it is")
            self.array = images
            self.names = [f"image{i}" for i in range(len(images))]
            self.shape = images.shape[1:]
            return
        self.paths = [Path(p) for p in images]
        if not self.paths:
            raise InputError("no images given")
        self.names = [str(p) for p in self.paths]
        self.preprocess = preprocess if preprocess is not None else model_preprocess(model)
        shape = self.preprocess.input_shape if self.preprocess is not None else getattr(model, "input_shape", None)
        if shape is None:  # any input size: every image at the size of the first that reads
            shape = self._first_shape()
        self.shape = tuple(int(s) for s in shape)

    def _first_shape(self) -> tuple[int, ...]:
        from .. import viz  # images and heatmaps only: `import saliency.attribution` stays without matplotlib

        for p in self.paths:
            try:
                return self.preprocess(p).shape if self.preprocess is not None else viz.load_image(p)[0].shape
            except Exception:  # noqa: BLE001: an unreadable image is recorded when its batch is read
                continue
        raise InputError(f"none of the {len(self.paths)} images can be read")

    def _image(self, path: Path) -> np.ndarray:
        """One image file as the model's input of `shape`; an image whose preprocessed size is not
        the run's (no crop, images of other shapes) is a ValueError."""
        from .. import viz

        if self.preprocess is None:
            return viz.load_image(path, size=self.shape[1:], channels=self.shape[0])[0]
        x = self.preprocess(path)
        if x.shape != self.shape:
            raise ValueError(f"its preprocessed size {x.shape[2]}x{x.shape[1]} is not the run's "
                             f"{self.shape[2]}x{self.shape[1]} (the first image's); a batch of images of several "
                             f"shapes needs a crop (or a size) that makes them one")
        return x

    def __len__(self) -> int:
        return len(self.names)

    def read(self, a: int, b: int) -> tuple[np.ndarray, list[str]]:
        """(float32 (b - a, C, H, W), [error or "" per image]); an image that fails reads as zeros."""
        if self.array is not None:
            x = np.array(self.array[a:b], np.float32)
            finite: Any = np.isfinite(x.reshape(len(x), -1)).all(axis=1)
            x[~finite] = 0
            return x, ["" if ok else "the image holds NaN or infinite values" for ok in finite]
        x = np.zeros((b - a,) + self.shape, np.float32)
        errors: list[str] = []
        for i, p in enumerate(self.paths[a:b]):
            try:
                x[i] = self._image(p)
                errors.append("")
            except Exception as exc:  # noqa: BLE001: any image may fail; the run goes on and says why
                errors.append(error_text(exc))
        return x, errors


def error_text(exc: BaseException) -> str:
    """An image's error as the store records it: the message, with the type for an unexpected one."""
    return str(exc) if isinstance(exc, (ValueError, OSError)) else f"{type(exc).__name__}: {exc}"


class BatchReader(threading.Thread):
    """Reads the batches `todo` of `source` ahead of the model, at most QUEUED_BATCHES at a time;
    `batches()` yields (k, x, read errors) in order."""

    def __init__(self, source: ImageSource, todo: Sequence[int], batch_size: int) -> None:
        super().__init__(daemon=True)
        self.source, self.todo, self.batch_size = source, todo, batch_size
        self.items: queue.Queue[Optional[tuple[Any, ...]]] = queue.Queue(QUEUED_BATCHES)
        self.error: Optional[BaseException] = None
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            n = len(self.source)
            for k in self.todo:
                a, b = k * self.batch_size, min(n, (k + 1) * self.batch_size)
                if not self._offer((k,) + self.source.read(a, b)):
                    return
        except BaseException as exc:  # noqa: BLE001: raised on the calling thread
            self.error = exc
        self._offer(None)

    def _offer(self, item: Optional[tuple[Any, ...]]) -> bool:
        """Queue `item` unless the consumer stopped (then the thread ends instead of waiting forever)."""
        while not self.stop.is_set():
            try:
                self.items.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def batches(self) -> Iterator[tuple[int, np.ndarray, list[str]]]:
        while True:
            item = self.items.get()
            if item is None:
                if self.error is not None:
                    raise self.error
                return
            yield item
