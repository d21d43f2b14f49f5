"""Ground-truth masks for the localisation metrics (pointing game, relevance mass): one mask image
per image of a store, found by the image's name in a folder, read at the maps' size.

A mask image's pixels of at least half the full value (128 of 255 and up) are the object, the rest
background. For an image `photos/cat.jpg` the mask is `FOLDER/cat.<ext>`, `ext` any image format
the tool reads (`viz.files.IMAGE_SUFFIXES`, in either case). It goes through the geometry that read the image (the
store's resize and centre crop, nearest-neighbour, no normalisation), so mask and map line up
pixel for pixel; without a recorded preprocessing it is stretched to the map size as the image
was.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

import numpy as np

from ._core import InputError

if TYPE_CHECKING:
    from ..viz.preprocess import Preprocess


class Masks:
    """The masks of the images `names` (the store's files) from `folder`, or given as a bool array
    (len(names), H, W); `read(rows)` gives (len(rows), H, W) bool at `shape` (H, W). `needed`: which
    images need a mask (bool per name; default all): a folder must hold the mask of each of those
    (an InputError naming the first missing before any is read), the others need none."""

    def __init__(self, masks: Union[str, Path, np.ndarray], names: Sequence[Any], shape: Sequence[int],
                 preprocess: Optional[Preprocess] = None, needed: Optional[np.ndarray] = None) -> None:
        self.shape = tuple(shape)
        self.array: Optional[np.ndarray] = None
        self.folder: Optional[Path] = None
        self.paths: list[Optional[Path]] = []
        self.preprocess: Optional[Preprocess] = None
        if isinstance(masks, (str, Path)):
            self.folder = Path(masks)
            if not self.folder.is_dir():
                raise InputError(f"the masks folder {self.folder} is not a folder")
            needed = np.ones(len(names), bool) if needed is None else needed
            self.paths = [self._path(name) if want else None for name, want in zip(names, needed)]
            self.preprocess = None if preprocess is None else dataclasses.replace(
                preprocess, interpolation="nearest", channels=1, mean=None, std=None)
        else:
            a = np.asarray(masks)
            if a.dtype != bool or a.shape != (len(names),) + self.shape:
                raise InputError(f"masks must be a folder of mask images or a bool array of shape "
                                 f"{(len(names),) + self.shape}, got {_described(masks)}")
            self.array = a

    def _path(self, name: Any) -> Path:
        from .. import viz

        assert self.folder is not None
        stem = Path(str(name)).stem
        for ext in sorted(viz.files.IMAGE_SUFFIXES):
            for candidate in (self.folder / (stem + ext), self.folder / (stem + ext.upper())):
                if candidate.is_file():
                    return candidate
        raise InputError(f"no mask for {name} in {self.folder} (looked for {stem}.png, {stem}.jpg and the other "
                         f"image formats); name each mask after its image")

    def read(self, rows: Sequence[int]) -> np.ndarray:
        if self.array is not None:
            return self.array[np.asarray(rows)]
        return np.stack([self._read(self.paths[i]) for i in rows])

    def _read(self, path: Optional[Path]) -> np.ndarray:
        from .. import viz

        if path is None:
            raise InputError("an image that needs no mask was asked for its mask")
        try:
            if self.preprocess is not None:
                picture = self.preprocess.picture(path)[0]
            else:
                picture = viz.load_image(path, size=self.shape, channels=1)[0][0]
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read the mask {path}: {exc}") from None
        if picture.shape != self.shape:
            raise InputError(f"the mask {path} is {picture.shape[1]}x{picture.shape[0]} after the store's "
                             f"preprocessing, not the maps' {self.shape[1]}x{self.shape[0]}")
        return picture >= 0.5


def _described(value: Any) -> str:
    shape = getattr(value, "shape", None)
    return f"an array of shape {shape} and dtype {value.dtype}" if shape is not None else type(value).__name__
