"""`Preprocess`: an image file -> the input array a network was trained on, as torchvision's
transforms make it (Resize, CenterCrop, ToTensor, Normalize on a Pillow image), and the crop the
network saw, unnormalised, to draw its maps over.

An 8-bit opaque image is resized by Pillow in 8 bits, exactly as torchvision resizes a Pillow
image, so the input equals torchvision's to the bit; a 16-bit, transparent (composited on white)
or float image is resized by Pillow in float32, in two passes clipped as the 8-bit ones are,
which differs from an 8-bit resize of the same picture by the 8-bit one's rounding: at most
1/255 with bilinear interpolation, about that with bicubic. Images are opened by
`read_pixels`: the formats, checks and EXIF orientation of `load_image`.
"""
from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass, fields
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NamedTuple, Sequence, Union

import numpy as np
from PIL import Image

from .errors import ImageError, VizError
from .files import _UPRIGHT, _bomb, _finished, _name, _opened, _read, _source  # load_image's opening and checks

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from .._typing import Float32
    from .files import ImageSource

Pixels = Union[Image.Image, "Float32"]   # an 8-bit Pillow image, or float32 (C, H, W) in [0, 1]

INTERPOLATIONS = {"bilinear": Image.Resampling.BILINEAR, "bicubic": Image.Resampling.BICUBIC,
                  "nearest": Image.Resampling.NEAREST}
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class Prepared(NamedTuple):
    """What `Preprocess.prepare` makes of an image: `input` (C, H, W) float32 for the network,
    `picture` (C, H, W) float32 in [0, 1] (the same crop, unnormalised), `note` (what was done
    that a user may not expect, or None)."""

    input: np.ndarray
    picture: np.ndarray
    note: str | None


def _size(value: Any, what: str) -> int | tuple[int, int] | None:
    """None, a positive int, or (H, W) of two positive ints (a tuple), else VizError."""
    def positive(n: object) -> bool:
        return isinstance(n, numbers.Integral) and not isinstance(n, bool) and n > 0  # type: ignore[operator]

    if value is None:
        return None
    if positive(value):
        return int(value)
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(positive(n) for n in value):
        return int(value[0]), int(value[1])
    raise VizError(f"{what} must be a positive int or (height, width) of two positive ints, got {value!r}")


def _per_channel(value: Any, what: str, channels: int, positive: bool = False) -> tuple[float, ...] | None:
    """None, or a tuple of `channels` finite floats (one number is repeated), else VizError."""
    if value is None:
        return None
    items = [value] if isinstance(value, numbers.Real) else value
    try:
        numbers_ok = all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in items)
        out = tuple(float(v) for v in items) if numbers_ok else None
    except TypeError:
        out = None
    if out is None or len(out) not in (1, channels) or not all(math.isfinite(v) for v in out):
        raise VizError(f"{what} must be {channels} finite numbers (one per channel) or one number, got {value!r}")
    if positive and min(out) <= 0:
        raise VizError(f"{what} must be positive (it divides), got {value!r}")
    return out * channels if len(out) == 1 else out


@dataclass(frozen=True)
class Preprocess:
    """How an image becomes a network's input, as torchvision's transforms on a Pillow image:
    `resize` an int (the shorter side becomes it, the other keeps the aspect ratio: torchvision's
    Resize(int)) or (H, W), with antialiasing, by `interpolation` ("bilinear", "bicubic",
    "nearest"); `crop` an int or (H, W), the centre crop (zero-padded where the image is smaller);
    then values in [0, 1], minus `mean`, divided by `std` (one number per channel; None: 0 and
    1). `channels`: 3 (RGB) or 1 (grey). None for resize or crop leaves that step out.

    `prep(image)` is the input (C, H, W) float32, `prep.picture(image)` the crop in [0, 1];
    `image` a path, a binary file object, a Pillow image or an (H, W, C) uint8 or float array.
    """

    resize: int | tuple[int, int] | None = None
    crop: int | tuple[int, int] | None = None
    mean: float | Sequence[float] | None = None
    std: float | Sequence[float] | None = None
    interpolation: str = "bilinear"
    channels: int = 3

    def __post_init__(self) -> None:
        if self.channels not in (1, 3) or isinstance(self.channels, bool):
            raise VizError(f"channels must be 1 or 3, got {self.channels!r}")
        if self.interpolation not in INTERPOLATIONS:
            raise VizError(f"unknown interpolation {self.interpolation!r}; choose one of: "
                           f"{', '.join(INTERPOLATIONS)}")
        checked = {"resize": _size(self.resize, "resize"), "crop": _size(self.crop, "crop"),
                   "mean": _per_channel(self.mean, "mean", self.channels),
                   "std": _per_channel(self.std, "std", self.channels, positive=True)}
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    @classmethod
    def imagenet(cls, resize: int | tuple[int, int] | None = 256, crop: int | tuple[int, int] | None = 224,
                 interpolation: str = "bilinear") -> Preprocess:
        """ImageNet's usual evaluation transform: the shorter side to `resize`, the centre `crop`,
        ImageNet's mean and std."""
        return cls(resize, crop, IMAGENET_MEAN, IMAGENET_STD, interpolation)

    @property
    def input_shape(self) -> tuple[int, ...] | None:
        """(C, H, W) of every input, or None when it depends on the image (no crop, an int resize)."""
        size = self.crop if self.crop is not None else self.resize
        if size is None or (isinstance(size, int) and self.crop is None):
            return None
        size = (size, size) if isinstance(size, int) else size
        return (self.channels,) + tuple(size)

    def __call__(self, image: ImageSource | Image.Image | NDArray[Any]) -> Float32:
        """The network's input for `image`: (C, H, W) float32."""
        return self.prepare(image).input

    def picture(self, image: ImageSource | Image.Image | NDArray[Any]) -> Float32:
        """The crop the network sees of `image`, unnormalised: (C, H, W) float32 in [0, 1]."""
        return self.prepare(image).picture

    def prepare(self, image: ImageSource | Image.Image | NDArray[Any]) -> Prepared:
        """`Prepared(input, picture, note)` of `image`, read once."""
        pixels, notes = _pixels(image, self.channels)
        shown = _dims(pixels)
        pixels, size = self._resized(pixels)
        if size != shown:
            notes.append(f"resized {shown[1]}x{shown[0]} -> {size[1]}x{size[0]} ({self.interpolation})")
        picture = _chw(pixels)
        if self.crop is not None:
            crop = (self.crop, self.crop) if isinstance(self.crop, int) else self.crop
            picture = center_crop(picture, crop)
            if crop != size:
                notes.append(f"centre crop {crop[1]}x{crop[0]}")
        return Prepared(self.normalize(picture), picture, "; ".join(notes) or None)

    def output_size(self, height: int, width: int) -> tuple[int, int]:
        """(H, W) of the resized image for an image of `height` x `width` (before the crop), by
        torchvision's rule: Resize(int) sets the shorter side and truncates the longer one."""
        if self.resize is None:
            return height, width
        if isinstance(self.resize, tuple):
            return self.resize
        short, long = (width, height) if width <= height else (height, width)
        new_long = int(self.resize * long / short)
        return (new_long, self.resize) if width <= height else (self.resize, new_long)

    def _resized(self, pixels: Pixels) -> tuple[Pixels, tuple[int, int]]:
        """(pixels resized by `output_size`: a Pillow image in 8 bits, an array (C, H, W) channel by
        channel in float32 and clipped to [0, 1], (H, W))."""
        height, width = _dims(pixels)
        size = self.output_size(height, width)
        if size == (height, width):
            return pixels, size
        method = INTERPOLATIONS[self.interpolation]
        if isinstance(pixels, Image.Image):
            return pixels.resize((size[1], size[0]), method), size
        # Pillow resizes across, then down; in 8 bits each pass is clipped to [0, 255], so a bicubic
        # overshoot is cut before the second pass: done here as two passes, each clipped
        arr = pixels
        for step in ((height, size[1]), size):
            planes = [Image.fromarray(np.ascontiguousarray(c, np.float32)) for c in arr]
            if planes[0].size != (step[1], step[0]):
                arr = np.clip(np.stack([np.asarray(p.resize((step[1], step[0]), method)) for p in planes]), 0, 1)
        return arr, size

    def normalize(self, picture: ArrayLike) -> Float32:
        """(picture - mean) / std in float32 (as torchvision's Normalize on a float32 tensor)."""
        x = np.asarray(picture, np.float32)
        if self.mean is not None:
            x = x - np.asarray(self.mean, np.float32)[:, None, None]
        if self.std is not None:
            x = x / np.asarray(self.std, np.float32)[:, None, None]
        return np.ascontiguousarray(x, np.float32)

    def denormalize(self, x: ArrayLike) -> Float32:
        """The picture of input `x` ((C, H, W) or (N, C, H, W)): x * std + mean, clipped to [0, 1]."""
        x = np.asarray(x, np.float32)
        if self.std is not None:
            x = x * np.asarray(self.std, np.float32)[:, None, None]
        if self.mean is not None:
            x = x + np.asarray(self.mean, np.float32)[:, None, None]
        return np.clip(x, 0.0, 1.0)

    def describe(self) -> str:
        """One line: 'resize 256 (shorter side, bilinear), centre crop 224x224, mean ..., std ...'."""
        parts = []
        if self.resize is not None:
            what = (f"{self.resize} (shorter side" if isinstance(self.resize, int) else
                    f"{self.resize[1]}x{self.resize[0]} (")
            parts.append(f"resize {what}, {self.interpolation})")
        if self.crop is not None:
            crop = (self.crop, self.crop) if isinstance(self.crop, int) else self.crop
            parts.append(f"centre crop {crop[1]}x{crop[0]}")
        if self.mean == IMAGENET_MEAN and self.std == IMAGENET_STD:
            parts.append("ImageNet mean and std")
        else:
            parts += [f"{k} {', '.join(f'{v:g}' for v in getattr(self, k))}" for k in ("mean", "std")
                      if getattr(self, k) is not None]
        return ", ".join(parts) or "the image as it is, in [0, 1]"

    def record(self) -> dict[str, Any]:
        """The preprocessing as JSON values (a batch store keeps it; `from_record` reads it)."""
        def plain(v: Any) -> Any:
            return list(v) if isinstance(v, tuple) else v

        return {f.name: plain(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Preprocess:
        """The Preprocess of a `record()`, or VizError."""
        names = [f.name for f in fields(cls)]
        if not isinstance(record, dict) or set(record) - set(names):
            raise VizError(f"a preprocessing record is a dict of {', '.join(names)}, got {record!r}")
        kwargs: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in record.items()}
        return cls(**kwargs)


# Modes of 8-bit opaque pixels, which read_pixels hands on as Pillow images converted to "RGB" or "L"
_EIGHT_BIT = ("RGB", "L", "1", "P", "CMYK", "YCbCr", "LAB", "HSV")


def read_pixels(image: ImageSource | Image.Image, channels: int = 3) -> tuple[Pixels, str | None]:
    """(pixels, note) of an image to preprocess exactly as torchvision does (Preprocess):
    `image` is a path or a binary file object, opened and checked as load_image opens one (the same
    formats and refusals), or a Pillow image; either is turned upright as its EXIF orientation says
    and an animated one gives its first frame. An 8-bit opaque image (grey, RGB, palette without
    transparency, ...) gives a Pillow image of mode "RGB" (channels 3) or "L" (channels 1),
    converted by Pillow as torchvision's image loaders convert it, so that resizing it in Pillow
    gives torchvision's numbers to the bit; any other image (16-bit, transparent, float) gives
    float32 (channels, H, W) in [0, 1] as load_image reads it."""
    if channels not in (1, 3) or isinstance(channels, bool):
        raise VizError(f"channels must be 1 or 3, got {channels!r}")
    if isinstance(image, Image.Image):
        return _pixels_of(image, channels, "<Pillow image>", None, None, None)
    path = _source(image)
    try:
        with _opened(path) as (img, large, fp):
            return _pixels_of(img, channels, _name(path), large, path, fp)
    except MemoryError:  # Pillow's is empty
        raise ImageError(f"cannot read image '{_name(path)}': not enough memory to read it; make the image "
                         "smaller first") from None


def _pixels_of(img: Image.Image, channels: int, name: object, large: str | None, path: Path | IO[bytes] | None,
               fp: IO[bytes] | None) -> tuple[Pixels, str | None]:
    """read_pixels of the open Pillow image `img` (from the file `fp` at `path`, or None)."""
    notes = [large] if large else []
    frames = getattr(img, "n_frames", 1)
    if frames > 1:
        notes.append(f"animated image: used its first frame of {frames}")
    eight_bit = img.mode in _EIGHT_BIT and not (img.mode == "P" and "transparency" in img.info)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            if not eight_bit:
                arr, found = _read(img, None)
            else:
                orientation = img.getexif().get(0x0112, 1)
                out = img.convert("RGB" if channels == 3 else "L")
    except Image.DecompressionBombError as exc:
        raise (_bomb(path, fp, exc) if fp is not None and path is not None
               else ImageError(f"cannot read image '{name}': {exc}")) from None
    except (OSError, ValueError, EOFError) as exc:
        raise ImageError(f"cannot read image '{name}': {exc}") from None
    if not eight_bit:
        return _finished(arr, found, notes, None, channels, name)
    if orientation in _UPRIGHT:
        out = out.transpose(_UPRIGHT[orientation])
        notes.insert(0, "rotated as its EXIF orientation says")
    grey = img.mode in ("L", "1")
    if grey and channels == 3:
        notes.append("grey repeated to 3 channels")
    elif not grey and channels == 1:
        notes.append("RGB converted to grey")
    return out, "; ".join(notes) or None


def _pixels(image: ImageSource | Image.Image | NDArray[Any], channels: int) -> tuple[Pixels, list[str]]:
    """(a Pillow image in 8 bits, or float32 (C, H, W); notes) of any image Preprocess takes."""
    if isinstance(image, np.ndarray):
        return _array_pixels(image, channels), []
    pixels, note = read_pixels(image, channels)
    return pixels, [note] if note else []


def _array_pixels(arr: NDArray[Any], channels: int) -> Pixels:
    """An (H, W, C) (or (H, W)) uint8 or float array as Preprocess's pixels: uint8 grey or RGB as a
    Pillow image, float (values in [0, 1]) as (C, H, W); RGBA is composited on white."""
    if arr.ndim == 2:
        arr = arr[..., None]
    if arr.ndim != 3 or arr.shape[-1] not in (1, 3, 4) or arr.size == 0:
        raise VizError(f"an image array must be (H, W, C) with C = 1, 3 or 4, got shape {arr.shape}")
    if arr.dtype == np.uint8 and arr.shape[-1] != 4:
        img = Image.fromarray(arr[..., 0] if arr.shape[-1] == 1 else arr)
        return img.convert("RGB" if channels == 3 else "L")
    if arr.dtype != np.uint8 and arr.dtype.kind != "f":
        raise VizError(f"an image array must be uint8 or float, got dtype {arr.dtype}")
    x = arr.astype(np.float32) / (255.0 if arr.dtype == np.uint8 else 1.0)
    if not np.isfinite(x).all():
        raise VizError("the image array holds NaN or infinite values")
    x = np.clip(x, 0.0, 1.0)
    if x.shape[-1] == 4:
        x = x[..., :3] * x[..., 3:] + (1.0 - x[..., 3:])
    if x.shape[-1] != channels:
        x = np.repeat(x, 3, axis=-1) if channels == 3 else (x @ np.array([0.299, 0.587, 0.114], np.float32))[..., None]
    return np.ascontiguousarray(x.transpose(2, 0, 1), np.float32)


def _dims(pixels: Pixels) -> tuple[int, int]:
    """(H, W) of a Pillow image or a (C, H, W) array."""
    return (pixels.size[1], pixels.size[0]) if isinstance(pixels, Image.Image) else pixels.shape[-2:]


def _chw(pixels: Pixels) -> Float32:
    """float32 (C, H, W) in [0, 1] of Preprocess's pixels (an 8-bit image: its values / 255, as
    torchvision's ToTensor)."""
    if not isinstance(pixels, Image.Image):
        return np.asarray(pixels, np.float32)
    arr = np.asarray(pixels, np.float32) / np.float32(255)
    return np.ascontiguousarray(arr[None] if arr.ndim == 2 else arr.transpose(2, 0, 1))


def center_crop(picture: Float32, size: tuple[int, int]) -> Float32:
    """The centre (H, W) `size` of (C, h, w) `picture`, as torchvision's CenterCrop: where the
    picture is smaller it is first padded with zeros ((size - h) // 2 before, the rest after);
    the crop starts at round((h - H) / 2) (rounding half to even)."""
    (h, w), (ch, cw) = picture.shape[-2:], size
    if ch > h or cw > w:
        dh, dw = max(ch - h, 0), max(cw - w, 0)
        picture = np.pad(picture, ((0, 0), (dh // 2, (dh + 1) // 2), (dw // 2, (dw + 1) // 2)))
        h, w = picture.shape[-2:]
    top, left = int(round((h - ch) / 2.0)), int(round((w - cw) / 2.0))
    return np.ascontiguousarray(picture[:, top:top + ch, left:left + cw])
