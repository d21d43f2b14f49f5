"""Image files in (load_image: PNG/JPEG -> float (C, H, W)) and pictures out (save: PNG)."""
import numbers
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from PIL import Image, ImageOps, UnidentifiedImageError

from .._write import atomic_path
from .errors import ImageError, VizError

FIGURE_SUFFIXES = (".png", ".pdf", ".svg")
_SIXTEEN_BIT = ("I;16", "I;16L", "I;16B", "I;16N", "I")
_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)  # ITU-R 601, as Pillow's "L"


def _open(path):
    """The decoded Pillow image at `path` (a Path or an open binary file), EXIF orientation applied,
    and whether it was rotated."""
    if isinstance(path, Path) and not path.exists():
        raise ImageError(f"cannot read image '{path}': no such file")
    if isinstance(path, Path) and path.is_dir():
        raise ImageError(f"cannot read image '{path}': it is a folder, not an image file")
    try:
        with Image.open(path) as img:
            img.load()
            rotated = img.getexif().get(0x0112, 1) not in (0, 1)
            return (ImageOps.exif_transpose(img) if rotated else img.copy()), rotated
    except UnidentifiedImageError:
        path = getattr(path, "name", path)
        raise ImageError(f"cannot read image '{path}': not an image file Pillow can decode (use PNG or JPEG)") from None
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        path = getattr(path, "name", path)
        raise ImageError(f"cannot read image '{path}': {exc}") from None


def _pixels(img):
    """(float32 (H, W, C) in [0, 1] with C = 1 or 3, alpha (H, W) or None) of a Pillow image."""
    mode = img.mode
    if mode in _SIXTEEN_BIT:
        return np.clip(np.asarray(img, dtype=np.float32) / 65535.0, 0.0, 1.0)[..., None], None
    if mode == "F":
        return np.clip(np.nan_to_num(np.asarray(img, dtype=np.float32)), 0.0, 1.0)[..., None], None
    if mode == "P":
        img = img.convert("RGBA" if "transparency" in img.info else "RGB")
    elif mode == "PA":                  # a palette of colours: converting to "LA" would drop them
        img = img.convert("RGBA")
    elif mode == "La":
        img = img.convert("LA")
    elif mode == "RGBa":
        img = img.convert("RGBA")
    elif mode == "1":
        img = img.convert("L")
    elif img.mode not in ("L", "LA", "RGB", "RGBA"):
        img = img.convert("RGB")
    arr = np.asarray(img, dtype=np.float32) / 255.0
    if arr.ndim == 2:
        arr = arr[..., None]
    if img.mode in ("LA", "RGBA"):
        return arr[..., :-1], arr[..., -1]
    return arr, None


def _check_size(size):
    ok = (isinstance(size, (tuple, list)) and len(size) == 2
          and all(isinstance(n, numbers.Integral) and not isinstance(n, bool) and n > 0 for n in size))
    if not ok:
        raise VizError(f"size must be (height, width) with two positive ints, or None, got {size!r}")
    return int(size[0]), int(size[1])


def load_image(path, size=None, channels=3):
    """(float32 (channels, H, W) in [0, 1], note) read from a PNG, JPEG or other file Pillow decodes
    (`path`: a path, or a binary file object).

    Grey, RGB, RGBA, palette and 16-bit images are accepted (16-bit keeps its precision). A
    transparent image is composited on white; grey becomes RGB by repetition and RGB becomes grey
    by ITU-R 601 luma; EXIF rotation is applied; with `size` = (H, W) the image is stretched to it
    (bilinear). `note` says which of these happened, e.g. "resized 640x480 -> 64x64" (width x
    height), joined by "; ", or is None when the pixels were used as they are.
    """
    if channels not in (1, 3) or isinstance(channels, bool):
        raise VizError(f"channels must be 1 or 3, got {channels!r}")
    size = None if size is None else _check_size(size)
    path = path if hasattr(path, "read") else Path(path)
    img, rotated = _open(path)
    notes = ["rotated as its EXIF orientation says"] if rotated else []
    arr, alpha = _pixels(img)
    if alpha is not None and alpha.min() < 1.0:
        arr = arr * alpha[..., None] + (1.0 - alpha[..., None])
        notes.append("transparent pixels composited on white")
    if arr.shape[-1] != channels:
        if channels == 3:
            arr = np.repeat(arr, 3, axis=-1)
            notes.append("grey repeated to 3 channels")
        else:
            arr = (arr @ _LUMA)[..., None]
            notes.append("RGB converted to grey")
    height, width = arr.shape[:2]
    if size is not None and size != (height, width):
        arr = np.stack([np.asarray(Image.fromarray(np.ascontiguousarray(arr[..., c]))
                                   .resize((size[1], size[0]), Image.Resampling.BILINEAR)) for c in range(channels)], -1)
        notes.append(f"resized {width}x{height} -> {size[1]}x{size[0]}")
    chw = np.ascontiguousarray(np.clip(np.moveaxis(arr, -1, 0), 0.0, 1.0), dtype=np.float32)
    return chw, ("; ".join(notes) or None)


def _as_picture(array):
    """An array to save as uint8 (H, W), (H, W, 3) or (H, W, 4); floats are taken in [0, 1]."""
    arr = np.asarray(array)
    ok_shape = arr.ndim == 2 or (arr.ndim == 3 and arr.shape[-1] in (3, 4))
    if not ok_shape or arr.size == 0:
        raise VizError(f"cannot save an array of shape {arr.shape}; pass an (H, W), (H, W, 3) or (H, W, 4) "
                       "picture (for a (C, H, W) image use to_rgb)")
    if arr.dtype == np.uint8:
        return arr
    if not np.issubdtype(arr.dtype, np.floating):
        raise VizError(f"cannot save an array of dtype {arr.dtype}; pass uint8, or float in [0, 1]")
    if not np.isfinite(arr).all():
        raise VizError("cannot save an array holding NaN or infinite values")
    return np.round(np.clip(arr, 0.0, 1.0) * 255.0).astype(np.uint8)


def save(picture, path, dpi=150):
    """Write a Figure (.png, .pdf or .svg, at `dpi`) or a picture array / Pillow image (.png)
    to `path`, creating missing parent folders; returns the path. The file is written beside
    `path` and renamed into place, so `path` is never left truncated."""
    path = Path(path)
    suffix = path.suffix.lower()
    is_figure = isinstance(picture, Figure)
    allowed = FIGURE_SUFFIXES if is_figure else (".png",)
    if suffix not in allowed:
        kind = "a Figure" if is_figure else "a picture"
        raise VizError(f"cannot save {kind} to '{path}': use a path ending in {' or '.join(allowed)}")
    if not is_figure and not isinstance(picture, Image.Image):
        picture = Image.fromarray(np.ascontiguousarray(_as_picture(picture)))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            if is_figure:
                picture.savefig(tmp, dpi=dpi, format=suffix[1:])
            else:
                picture.save(tmp, format="PNG")
    except OSError as exc:
        raise VizError(f"cannot write '{path}': {exc.strerror or exc}") from None
    return path
