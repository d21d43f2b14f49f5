"""Data for the zoo: deterministic generators, nothing downloaded.

* ``shapes(n, seed=0)`` -> images float32 (n, 3, 64, 64) in [0, 1], labels int64 (n,) indexing
  ``SHAPE_CLASSES``. One anti-aliased shape per image (random position, size, rotation and
  colour) on a noise, gradient or stripe background with small blobs and lines as clutter.
* ``scenes(n, seed=0)`` -> images float32 (n, 3, 128, 128) in [0, 1], depths float32
  (n, 1, 128, 128) in metres, masks bool (n, MAX_OBJECTS, 128, 128). Ray-cast scenes of a
  checkered ground (square tiles of ``TILE`` = 1 m: the cue to scale), a sky and 1 to 5
  spheres, boxes and upright cylinders. Depth is *z-depth*
  (distance along the camera's viewing axis), capped at ``MAX_DEPTH`` = 50 m, which is also the
  depth of the sky. Mask k holds the pixels where object slot k is the nearest surface (visible
  pixels only); a slot without an object, or an object hidden behind another, has an empty mask.
  ``ground_depth(height, pitch)`` is the ground plane's depth in closed form.
* ``digits(split, seed=0)`` -> images float32 (N, 1, 32, 32) in [0, 1], labels int64: the 1,797
  handwritten 8x8 digits shipped with scikit-learn, bilinearly upsampled, split 80/20 per class.

What a zoo model trains and is measured on is its `zoo.Spec`'s ``data``: ``Generated(draw)``, new
images every epoch from a generator such as ``shapes`` or ``scene_depths``, or ``Split(load)``, the
fixed split of a data set such as ``digits``, shifted a little every epoch.

The same arguments always give the same arrays (a ``numpy.random.Generator`` seeded with
``seed``; no global random state). Arrays of n images are drawn as a whole: the first k images of
``shapes(n)`` are not those of ``shapes(k)``.
"""
from __future__ import annotations

import gzip
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal, overload

import numpy as np

from ._data_scenes import FOCAL, MAX_DEPTH, MAX_OBJECTS, OBJECT_KINDS, TILE, ground_depth
from ._data_scenes import scenes as _scenes
from ._data_shapes import SHAPE_CLASSES, _bilinear_matrix
from ._data_shapes import shapes as _shapes

if TYPE_CHECKING:
    import os

    from numpy.typing import NDArray

    from saliency._typing import BoolArray, Float32, IntArray

__all__ = ["shapes", "scenes", "scene_depths", "digits", "ground_depth", "shifted", "Generated", "Split",
           "SHAPE_CLASSES", "OBJECT_KINDS", "FOCAL", "MAX_DEPTH", "MAX_OBJECTS", "TILE"]

DIGITS_SIZE = 32
_TEST_SHARE = 0.2


@overload
def shapes(n: int, seed: int = 0, *, return_info: Literal[False] = False) -> tuple[Float32, IntArray]: ...


@overload
def shapes(n: int, seed: int = 0, *,
           return_info: Literal[True]) -> tuple[Float32, IntArray, dict[str, NDArray[Any]]]: ...


@overload
def shapes(n: int, seed: int = 0, *, return_info: bool) -> tuple[Any, ...]: ...


def shapes(n: int, seed: int = 0, *, return_info: bool = False) -> tuple[Any, ...]:
    """n shape images and their labels (indices into SHAPE_CLASSES).

    With ``return_info=True`` a third value is a dict of what was drawn: ``"mask"`` (n, 64, 64)
    float32 coverage of the shape, ``"center"`` (n, 2) as (x, y) in pixels (pixel (row, col)
    has its centre at (col + 0.5, row + 0.5)), ``"radius"`` (n,) the circumradius in pixels,
    ``"angle"`` (n,) the rotation in radians, ``"color"`` (n, 3) the shape's RGB colour.
    """
    return _shapes(n, seed, return_info=return_info)


def write_shapes(folder: str | os.PathLike[str], n: int, seed: int = 0, *,
                 progress: Callable[[int, int], object] | None = None) -> list[Path]:
    """Write n shape images as PNGs to FOLDER/images/shape_NNNNN.png and each one's ground-truth mask
    (the shape's coverage of at least one half, white on black) to FOLDER/masks/shape_NNNNN.png,
    and FOLDER/labels.csv (file, class index, class name); returns the images' paths. Each image
    is written as a new file (an existing one is a FileExistsError: nothing of a user's is
    overwritten). `progress(done, n)` is called after each image."""
    from PIL import Image

    folder = Path(folder)
    images, labels, info = _shapes(n, seed, return_info=True)
    paths: list[Path] = []
    for name in ("images", "masks"):
        (folder / name).mkdir(parents=True, exist_ok=True)
    digits = max(5, len(str(max(n - 1, 0))))
    rows = ["file,class,name"]
    for i in range(n):
        stem = f"shape_{i:0{digits}d}.png"
        picture = (np.moveaxis(images[i], 0, -1) * 255).round().clip(0, 255).astype(np.uint8)
        mask = np.where(info["mask"][i] >= 0.5, 255, 0).astype(np.uint8)
        for array, path in ((picture, folder / "images" / stem), (mask, folder / "masks" / stem)):
            with open(path, "xb") as f:
                Image.fromarray(array).save(f, format="PNG")
        paths.append(folder / "images" / stem)
        rows.append(f"{stem},{labels[i]},{SHAPE_CLASSES[labels[i]]}")
        if progress is not None:
            progress(i + 1, n)
    with open(folder / "labels.csv", "x") as f:
        f.write("\n".join(rows) + "\n")
    return paths


@overload
def scenes(n: int, seed: int = 0, *, objects: tuple[int, int] = (1, MAX_OBJECTS),
           return_params: Literal[False] = False) -> tuple[Float32, Float32, BoolArray]: ...


@overload
def scenes(n: int, seed: int = 0, *, objects: tuple[int, int] = (1, MAX_OBJECTS),
           return_params: Literal[True]) -> tuple[Float32, Float32, BoolArray, dict[str, Any]]: ...


@overload
def scenes(n: int, seed: int = 0, *, objects: tuple[int, int] = (1, MAX_OBJECTS),
           return_params: bool) -> tuple[Any, ...]: ...


def scenes(n: int, seed: int = 0, *, objects: tuple[int, int] = (1, MAX_OBJECTS),
           return_params: bool = False) -> tuple[Any, ...]:
    """n ray-cast scenes: (images, depths, masks); see the module docstring for the conventions.

    ``objects=(lo, hi)`` bounds the number of objects per scene (``(0, 0)`` gives empty
    ground-and-sky scenes); an object that does not fit beside the others is left out, so a
    scene can hold fewer than it drew. With ``return_params=True`` a fourth value is a dict:
    ``"focal"`` (pixels), ``"height"`` (n,) camera height in metres, ``"pitch"`` (n,) downward
    pitch in radians, ``"light"`` (n, 3) unit direction toward the light, ``"kind"`` (n, K)
    index into OBJECT_KINDS or -1 for an empty slot, ``"pos"`` (n, K, 2) ground position (x, z),
    ``"size"`` (n, K, 3) half width in x, height, half depth in z (a sphere's radius is the
    half width), ``"albedo"`` (n, K, 3).
    """
    return _scenes(n, seed, objects=objects, return_params=return_params)


def scene_depths(n: int, seed: int = 0) -> tuple[Float32, Float32]:
    """n ray-cast scenes as (images, depths), the pairs the depth model learns from."""
    images, depths, _ = scenes(n, seed)
    return images, depths


def _digits_file() -> Path:
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "digits() reads the handwritten digits shipped inside scikit-learn, which is not installed; "
            "install it with pip install 'saliency-maps[train]'")
    path = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" / "digits.csv.gz"
    if not path.is_file():
        raise FileNotFoundError(f"scikit-learn is installed but has no {path}; reinstall it with "
                                "pip install --force-reinstall scikit-learn")
    return path


def _test_indices(labels: IntArray, rng: np.random.Generator) -> NDArray[np.intp]:
    """A stratified 20% of the indices: each class gives floor or ceil of its share, largest remainders first."""
    counts = np.bincount(labels)
    share = counts * _TEST_SHARE
    take = np.floor(share).astype(int)
    extra = round(len(labels) * _TEST_SHARE) - take.sum()
    take[np.argsort(-(share - take), kind="stable")[:extra]] += 1
    return np.sort(np.concatenate([rng.permutation(np.flatnonzero(labels == c))[:k] for c, k in enumerate(take)]))


def digits(split: str, seed: int = 0) -> tuple[Float32, IntArray]:
    """The train (1,438) or test (359) images of scikit-learn's digits, upsampled to 32x32.

    Pixels are the original 0..16 counts divided by 16, then bilinearly upsampled (half-pixel
    centres, as PyTorch's ``interpolate(mode="bilinear", align_corners=False)``). ``seed`` picks
    the stratified split; the same seed always gives the same split.
    """
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    with gzip.open(_digits_file(), "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.float64)
    pixels, labels = table[:, :64].reshape(-1, 8, 8).astype(np.float32) / 16, table[:, 64].astype(np.int64)
    test = np.zeros(len(labels), bool)
    test[_test_indices(labels, np.random.default_rng(seed))] = True
    keep = test if split == "test" else ~test
    up = _bilinear_matrix(DIGITS_SIZE, 8)  # half-pixel centres, edges clamped
    images = np.clip(up @ pixels[keep] @ up.T, 0, 1)[:, None].astype(np.float32)
    return images, labels[keep]


def shifted(images: Float32, rng: np.random.Generator, most: int) -> Float32:
    """Each image moved by a random whole number of pixels (up to `most`) along each axis, zero-filled."""
    out = np.zeros_like(images)
    n, _, h, w = images.shape
    dy, dx = rng.integers(-most, most + 1, (2, n))
    for i in range(n):
        ys, yd = (slice(0, h - dy[i]), slice(dy[i], h)) if dy[i] >= 0 else (slice(-dy[i], h), slice(0, h + dy[i]))
        xs, xd = (slice(0, w - dx[i]), slice(dx[i], w)) if dx[i] >= 0 else (slice(-dx[i], w), slice(0, w + dx[i]))
        out[i, :, yd, xd] = images[i, :, ys, xs]
    return out


# ---------------------------------------------------------------- what a zoo model trains on

@dataclass(frozen=True)
class Generated:
    """Images drawn by `draw(n, seed) -> (images, targets)`: every epoch trains on new ones (drawn with
    the epoch's seed), and held-out ones come from a seed that training never draws."""

    draw: Callable[[int, int], tuple[Any, Any]]

    def training(self, per_epoch: int) -> tuple[int, Callable[[int, np.random.Generator], tuple[Any, Any]]]:
        """(images per epoch, epoch(seed, rng) -> that epoch's (images, targets))."""
        return per_epoch, lambda seed, rng: self.draw(per_epoch, seed)

    def held_out(self, n: int, seed: int) -> tuple[Any, Any]:
        """n images drawn with `seed`."""
        return self.draw(n, seed)


@dataclass(frozen=True)
class Split:
    """A fixed data set, `load(split) -> (images, targets)` with split "train" or "test": every epoch
    trains on the whole train split (whatever the number of images per epoch), each image moved by up
    to `shift` pixels; held-out data is the test split."""

    load: Callable[[str], tuple[Any, Any]]
    shift: int = 3

    def training(self, per_epoch: int) -> tuple[int, Callable[[int, np.random.Generator], tuple[Any, Any]]]:
        """(images per epoch, epoch(seed, rng) -> that epoch's (images, targets)); the seed is unused,
        the shifts are drawn from `rng`."""
        images, targets = self.load("train")
        return len(targets), lambda seed, rng: (shifted(images, rng, self.shift), targets)

    def held_out(self, n: int | None, seed: int) -> tuple[Any, Any]:
        """The first n images of the test split (all of them for n None); the split has no seed to vary."""
        images, targets = self.load("test")
        return images[:n], targets[:n]
