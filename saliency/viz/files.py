"""Image files in: load_image reads PNG, JPEG, ... raster files as float (C, H, W) (pictures out: saving.py)."""
from __future__ import annotations

import contextlib
import errno
import numbers
import os
import re
import stat
import warnings
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Iterator, Sequence, Union, cast

import numpy as np
from PIL import Image, UnidentifiedImageError

from .errors import ImageError, VizError

if TYPE_CHECKING:
    from PIL.ImageFile import ImageFile

    from .._typing import Float32

ImageSource = Union[str, "os.PathLike[str]", IO[bytes]]   # a path, or a binary file object
Found = dict[str, Any]   # what decoding an image found: see _decoded and _read
Box = tuple[float, float, float, float]

# The formats load_image decodes (Pillow's names) and their suffixes: raster formats only. The rest, vector and
# document formats among them (Pillow hands EPS to Ghostscript, an external program), are refused whatever the name.
IMAGE_FORMATS = {"PNG": (".png", ".apng"), "JPEG": (".jpg", ".jpeg", ".jpe", ".jfif", ".mpo"), "GIF": (".gif",),
                 "BMP": (".bmp",), "TIFF": (".tif", ".tiff"), "WEBP": (".webp",),
                 "PPM": (".ppm", ".pgm", ".pbm", ".pnm", ".pfm")}
IMAGE_SUFFIXES = frozenset(suffix for suffixes in IMAGE_FORMATS.values() for suffix in suffixes)
_FORMATS_READ = f"{', '.join(list(IMAGE_FORMATS)[:-1])} or {list(IMAGE_FORMATS)[-1]}"
_SIXTEEN_BIT = ("I;16", "I;16L", "I;16B", "I;16N", "I")
_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)  # ITU-R 601, as Pillow's "L"


# EXIF orientation tag (0x0112) -> the transpose that shows the image upright
_UPRIGHT = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180, 4: Image.Transpose.FLIP_TOP_BOTTOM,
            5: Image.Transpose.TRANSPOSE, 6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE,
            8: Image.Transpose.ROTATE_90}
_STRIP_BYTES = 1 << 22  # float32 bytes of one tile of pixels converted at a time
_BOMB = re.compile(r"\((\d+) pixels\) exceeds limit of (\d+) pixels")
_ROW_BITS = 2**31 - 1   # Pillow's decoders refuse a row of more than INT_MAX // bits - 7 pixels
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _kind(mode: int) -> str:
    """What a file of st_mode `mode` that is not a regular file is, worded to follow its name."""
    return f"is {next((kind for test, kind in _KINDS if test(mode)), 'a special file')}, not an image file"


def _source(path: ImageSource) -> Path | IO[bytes]:
    """A binary file object (anything with .read) as it is, a path as a Path."""
    return cast("IO[bytes]", path) if hasattr(path, "read") else Path(cast("str", path))


def _name(path: Path | IO[bytes]) -> Any:
    """How an error names the image: its path, or a file object's name."""
    return path if isinstance(path, Path) else getattr(path, "name", "<file object>")


def file_problem(path: str | os.PathLike[str]) -> str | None:
    """What keeps `path` from being read as an image file, worded to follow it ("is a FIFO (named
    pipe), not an image file", "is a symbolic link loop", "does not exist"), or None for a regular
    file (or a symbolic link to one) that this process may read. Only os.stat looks at it: nothing
    is opened, so a FIFO or a device is never touched."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a symbolic link loop (too many levels of symbolic links)"
        if exc.errno == errno.ENOENT and os.path.islink(path):
            return f"is a symbolic link to '{os.readlink(path)}', which does not exist"
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return "does not exist"
        return f"cannot be looked at: {(exc.strerror or str(exc)).lower()}"  # e.g. permission denied on a folder
    except ValueError:
        return "does not exist (a file name cannot hold a NUL character)"
    if not stat.S_ISREG(mode):
        return _kind(mode)
    return None if os.access(path, os.R_OK) else "cannot be read: permission denied"


def _open_file(path: Path) -> IO[bytes]:
    """The regular file at `path` opened for binary reading, or ImageError saying what is there. It is
    opened with O_NONBLOCK (a FIFO swapped in after os.stat looked does not block; a regular file
    reads as ever) and checked again."""
    problem = file_problem(path)
    if problem:
        raise ImageError(f"cannot read image '{path}': it {problem}")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise ImageError(f"cannot read image '{path}': {(exc.strerror or str(exc)).lower()}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise ImageError(f"cannot read image '{path}': it {_kind(mode)}")
    return open(fd, "rb")


def _unread_format(fp: IO[bytes]) -> str:
    """The message for a file `fp` that none of IMAGE_FORMATS opens: the format its first bytes say,
    by Pillow's signature checks alone (no decoder of another format runs; a short signature may
    match a file of another format, hence "say"), or that it is no image file at all."""
    Image.init()
    with contextlib.suppress(OSError, ValueError):  # a file object that cannot seek: no format named
        fp.seek(0)
        prefix = fp.read(16)
        for fmt in Image.ID:
            with contextlib.suppress(Exception):  # a signature check that fails on these bytes
                factory, accept = Image.OPEN[fmt]
                said = accept is not None and accept(prefix)
                if said and not isinstance(said, str):
                    what = getattr(factory, "format_description", None) or fmt
                    return (f"its {fmt} header cannot be read (a damaged file?)" if fmt in IMAGE_FORMATS else
                            f"its first bytes say {fmt}{'' if what == fmt else f' ({what})'}, not a raster image "
                            f"format this tool reads ({_FORMATS_READ})")
    return f"not an image file in a format this tool reads ({_FORMATS_READ})"


def _stated_size(fp: IO[bytes]) -> tuple[int, int] | None:
    """(width, height) that the header of the image in the open file `fp` states, found the way
    Image.open finds the file's format among IMAGE_FORMATS but without Pillow's pixel limit (only
    the header is read); None when no format reads it."""
    Image.init()
    fp.seek(0)
    prefix = fp.read(16)
    for fmt in IMAGE_FORMATS:
        factory, accept = Image.OPEN[fmt]
        accepted = not accept or accept(prefix)
        if not accepted or isinstance(accepted, str):
            continue
        try:
            fp.seek(0)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return factory(fp, "").size
        except Exception:  # this format does not read it (or checks the pixel limit itself)
            continue
    return None


def _bomb(path: Path | IO[bytes], fp: IO[bytes], exc: Exception) -> ImageError:
    """The ImageError for Pillow's DecompressionBombError `exc` on the image at `path` (open as
    `fp`): its width and height, its pixels, the limit and how to raise it."""
    found = _BOMB.search(str(exc))
    if not found:
        return ImageError(f"cannot read image '{_name(path)}': {exc} (raise PIL.Image.MAX_IMAGE_PIXELS for an "
                          "image you trust, or make the image smaller first)")
    try:
        stated = _stated_size(fp)
    except (OSError, ValueError):
        stated = None
    dims = f"{stated[0]}x{stated[1]} = " if stated and stated[0] * stated[1] == int(found[1]) else ""
    return ImageError(f"cannot read image '{_name(path)}': it has {dims}{int(found[1]):,} pixels, more than "
                      f"Pillow's limit of {int(found[2]):,} against decompression bombs (twice "
                      "PIL.Image.MAX_IMAGE_PIXELS; raise it for an image you trust, or make the image smaller first)")


def _check_rows(path: Path | IO[bytes], img: ImageFile) -> None:
    """ImageError when a row of a tile of `img` is longer than Pillow's decoders take: they keep a row
    in a buffer of at most 2**31 - 1 bits and raise an empty MemoryError for a longer one. The bits a
    pixel takes in the tile's raw mode (48 for a 16-bit RGB PNG's "RGB;16B") are found by asking
    Pillow to unpack 8 pixels: it takes `bits` bytes."""
    for tile in img.tile:
        width = (tile.extents[2] - tile.extents[0]) if tile.extents else img.size[0]
        rawmode = tile.args if isinstance(tile.args, str) else (tile.args or (None,))[0]
        if width <= _ROW_BITS // 128 - 7 or not isinstance(rawmode, str):  # fits, whatever its raw mode
            continue
        for bits in range(1, 129):
            try:
                Image.frombytes(img.mode, (8, 1), bytes(bits), "raw", rawmode)
            except ValueError:  # too few bytes, or a raw mode Pillow does not unpack
                continue
            if width > _ROW_BITS // bits - 7:
                raise ImageError(f"cannot read image '{_name(path)}': its rows of {width:,} pixels are longer than "
                                 f"Pillow's decoders take (at most {_ROW_BITS // bits - 7:,} pixels of {bits} bits: "
                                 "2**31 bits a row); make the image narrower first")
            break


@contextlib.contextmanager
def _opened(path: Path | IO[bytes]) -> Iterator[tuple[Image.Image, str | None, IO[bytes]]]:
    """The Pillow image at `path` (a Path or an open binary file), not yet decoded, and a note when
    it is larger than Pillow's MAX_IMAGE_PIXELS (which Pillow would print as a warning). Only
    IMAGE_FORMATS are opened; a Path must name a regular file (a FIFO or a device is never opened)."""
    with contextlib.ExitStack() as stack:
        fp = stack.enter_context(_open_file(path)) if isinstance(path, Path) else path
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", Image.DecompressionBombWarning)
                img = Image.open(fp, formats=list(IMAGE_FORMATS))
        except UnidentifiedImageError:
            raise ImageError(f"cannot read image '{_name(path)}': {_unread_format(fp)}") from None
        except Image.DecompressionBombError as exc:
            raise _bomb(path, fp, exc) from None
        except (OSError, ValueError) as exc:
            raise ImageError(f"cannot read image '{_name(path)}': {exc}") from None
        stack.enter_context(img)
        _check_rows(path, img)
        width, height = img.size
        limit = Image.MAX_IMAGE_PIXELS
        note = (f"a very large image ({width}x{height} = {width * height:,} pixels, over Pillow's MAX_IMAGE_PIXELS)"
                if limit and width * height > limit else None)
        yield img, note, fp


def _working_mode(img: Image.Image) -> str:
    """The mode each strip of `img` is converted to before it is shrunk or becomes floats."""
    mode = img.mode
    if mode in _SIXTEEN_BIT or mode in ("F", "L", "LA", "La", "RGB", "RGBA", "RGBa"):
        return mode
    if mode == "P":
        return "RGBA" if "transparency" in img.info else "RGB"
    if mode == "PA":                        # a palette of colours: "LA" would drop them
        return "RGBA"
    return {"1": "L"}.get(mode, "RGB")


def _pixels(img: Image.Image) -> tuple[Float32, Float32 | None]:
    """(float32 (H, W, C) with C = 1 or 3, alpha (H, W) or None) of a Pillow image; colour not
    multiplied by alpha (a premultiplied "La" or "RGBa" image is divided by it), values in [0, 1]
    except for mode "F", whose values are returned as they are."""
    mode = img.mode
    if mode in _SIXTEEN_BIT:
        return np.clip(np.asarray(img, dtype=np.float32) / 65535.0, 0.0, 1.0)[..., None], None
    if mode == "F":
        return np.asarray(img, dtype=np.float32)[..., None], None
    if mode != _working_mode(img):
        img = img.convert(_working_mode(img))
    arr = np.multiply(np.asarray(img), np.float32(1 / 255), dtype=np.float32)
    if arr.ndim == 2:
        arr = arr[..., None]
    if img.mode in ("La", "RGBa"):
        alpha = arr[..., -1:]
        return np.divide(arr[..., :-1], alpha, out=np.zeros_like(arr[..., :-1]), where=alpha > 0), alpha[..., 0]
    if img.mode in ("LA", "RGBA"):
        return arr[..., :-1], arr[..., -1]
    return arr, None


def _shrunk(tile: Image.Image, factor: tuple[int, int]) -> tuple[Image.Image, bool] | None:
    """(`tile` with each block of `factor` = (across, down) pixels averaged by Pillow's Image.reduce
    in an integer mode, whether any of its pixels is not opaque), or None for modes "F" and "I",
    which are averaged as floats. Colour is multiplied by alpha before it is averaged ("RGBA" ->
    "RGBa"), so a transparent pixel adds no colour to its block, and the result stays premultiplied
    (Pillow's reduce of "RGBA" divides it back in 8 bits, which rounds colour where alpha is small);
    16-bit images are averaged as 32-bit "I"."""
    if tile.mode in ("F", "I"):                 # clipped (and checked) per pixel before averaging
        return None
    if tile.mode in _SIXTEEN_BIT:
        return tile.convert("I").reduce(factor), False
    if tile.mode != _working_mode(tile):
        tile = tile.convert(_working_mode(tile))
    clear = tile.mode in ("LA", "La", "RGBA", "RGBa") and tile.getextrema()[-1][0] < 255  # type: ignore[index]
    if clear and tile.mode in ("LA", "RGBA"):
        tile = tile.convert(tile.mode[:-1] + "a")
    return tile.reduce(factor), clear


def _box_means(arr: Float32, factor: tuple[int, int]) -> Float32:
    """Means of the blocks of `factor` = (across, down) pixels of (h, w, C) `arr` (partial blocks at
    the bottom and right edges averaged over the pixels they have). Rows are summed, then columns:
    each sum has at most one block side of terms, so float32 keeps about six digits."""
    if factor == (1, 1):
        return arr
    (h, w), (fx, fy) = arr.shape[:2], factor
    rows, cols = np.arange(0, h, fy), np.arange(0, w, fx)
    sums = np.add.reduceat(np.add.reduceat(arr, rows, axis=0), cols, axis=1)
    counts = np.minimum(fy, h - rows)[:, None] * np.minimum(fx, w - cols)[None, :]
    return sums / counts[..., None].astype(np.float32)


def _decoded(img: Image.Image, factor: tuple[int, int]) -> tuple[Float32, Found]:
    """(float32 (H', W', C) of the decoded `img` composited on white, each block of `factor` =
    (across, down) pixels averaged; what was found: {"transparent": bool, "outside": values of a
    float image outside [0, 1], "bad": its NaN and infinite values}).

    The image is taken a tile of whole blocks at a time (whole rows unless a row is very long), each
    shrunk in its own 8- or 16-bit mode (`_shrunk`) before it becomes floats, so the extra memory is
    one tile in its own mode and the shrunk result; modes "F" and "I" become floats, then averaged."""
    (width, height), (fx, fy) = img.size, factor
    bands = 4 if len(_working_mode(img)) >= 3 else 2
    budget = _STRIP_BYTES // (4 * bands)       # pixels of one tile
    cols = min(width, max(fx, budget // fy // fx * fx))
    rows = max(fy, budget // cols // fy * fy)
    out: Float32 | None = None
    found: Found = {"transparent": False, "outside": 0, "bad": 0}
    for top in range(0, height, rows):
        for left in range(0, width, cols):
            whole = rows >= height and cols >= width
            tile = img if whole else img.crop((left, top, min(width, left + cols), min(height, top + rows)))
            shrunk = _shrunk(tile, factor) if factor != (1, 1) else None
            arr, alpha = _pixels(shrunk[0] if shrunk else tile)
            if img.mode == "F":
                finite = np.isfinite(arr)
                found["bad"] += int(arr.size - np.count_nonzero(finite))
                found["outside"] += int(np.count_nonzero(finite & ((arr < 0.0) | (arr > 1.0))))
                arr = np.clip(np.where(finite, arr, 0.0), 0.0, 1.0)
            if alpha is not None and (shrunk[1] if shrunk else alpha.min() < 1.0):
                arr = arr * alpha[..., None] + (1.0 - alpha[..., None])
                found["transparent"] = True
            if not shrunk:
                arr = _box_means(arr, factor)
            if out is None:  # filled tile by tile, so the float image is never held twice
                out = np.empty((-(-height // fy), -(-width // fx), arr.shape[-1]), np.float32)
            out[top // fy:top // fy + arr.shape[0], left // fx:left // fx + arr.shape[1]] = arr
    return cast("Float32", out), found


def _check_size(size: Any) -> tuple[int, int]:
    ok = (isinstance(size, (tuple, list)) and len(size) == 2
          and all(isinstance(n, numbers.Integral) and not isinstance(n, bool) and n > 0  # type: ignore[operator]
                  for n in size))
    if not ok:
        raise VizError(f"size must be (height, width) with two positive ints, or None, got {size!r}")
    return int(size[0]), int(size[1])


def load_image(path: ImageSource, size: Sequence[int] | None = None, channels: int = 3) -> tuple[Float32, str | None]:
    """(float32 (channels, H, W) in [0, 1], note) read from a raster image file (`path`: a path, or
    a binary file object) in one of IMAGE_FORMATS: PNG, JPEG, GIF, BMP, TIFF, WEBP or PPM (with PGM
    and PBM), whatever its name; any other format (EPS, PDF, ...) is an ImageError naming it, and so
    is a path that is not a regular file (a FIFO, a device, a socket, a symbolic link loop), which is
    never opened.

    Grey, RGB, RGBA, palette, 1-bit and 16-bit images are accepted (16-bit keeps its precision); a
    32-bit float image is taken as values in [0, 1] and refused if it holds NaN or infinite values.
    A transparent image is composited on white; grey becomes RGB by repetition and RGB becomes grey
    by ITU-R 601 luma; EXIF rotation is applied; an animated image gives its first frame; with
    `size` = (H, W) the image is stretched to it (bilinear). `note` says which of these happened,
    e.g. "resized 640x480 -> 64x64" (width x height), joined by "; ", or is None when the pixels
    were used as they are.

    Memory: an image at least four times `size` on a side is shrunk while it is decoded (a JPEG by
    its decoder's 1/2, 1/4 or 1/8 scaling, then any image by averaging blocks of pixels in its own
    8- or 16-bit mode, a tile at a time) to between two and four times `size` on each side before
    the final bilinear resize, so reading it takes about its decoded size in Pillow's memory, not a
    float copy of it. Pillow's guard against decompression bombs is kept as it is set: an image of
    more than twice `PIL.Image.MAX_IMAGE_PIXELS` pixels (by default 178,956,970) is an ImageError
    naming its width x height, one over it (e.g. 12000x12000) is read with a note; raise the limit,
    or set it to None, to read larger images you trust. Rows too long for Pillow's decoders (over
    2**31 bits, e.g. 89,478,479 RGB pixels) and running out of memory are ImageErrors too.
    """
    if channels not in (1, 3) or isinstance(channels, bool):
        raise VizError(f"channels must be 1 or 3, got {channels!r}")
    size = None if size is None else _check_size(size)
    source = _source(path)
    try:
        return _load(source, size, channels)
    except MemoryError:  # Pillow's is empty
        raise ImageError(f"cannot read image '{_name(source)}': not enough memory to read it; make the image "
                         "smaller first") from None


def _load(path: Path | IO[bytes], size: tuple[int, int] | None, channels: int) -> tuple[Float32, str | None]:
    """load_image's (image, note) for a Path or a file object `path` and checked options."""
    with _opened(path) as (img, large, fp):
        notes = [large] if large else []
        frames = getattr(img, "n_frames", 1)
        if frames > 1:
            notes.append(f"animated image: used its first frame of {frames}")
        try:
            with warnings.catch_warnings():  # a frame or tile over the limit: the whole image is noted
                warnings.simplefilter("ignore", Image.DecompressionBombWarning)
                arr, found = _read(img, size)
        except Image.DecompressionBombError as exc:
            raise _bomb(path, fp, exc) from None
        except (OSError, ValueError, EOFError) as exc:
            raise ImageError(f"cannot read image '{_name(path)}': {exc}") from None
    return _finished(arr, found, notes, size, channels, _name(path))


def _finished(arr: Float32, found: Found, notes: list[str], size: tuple[int, int] | None, channels: int,
              name: object) -> tuple[Float32, str | None]:
    """load_image's (image, note) from `_read`'s (arr, found): checked, in `channels`, at `size`."""
    if found["bad"]:
        raise ImageError(f"cannot read image '{name}': it holds {found['bad']} NaN or infinite values")
    if found["turned"]:
        notes.insert(0, "rotated as its EXIF orientation says")
    if found["transparent"]:
        notes.append("transparent pixels composited on white")
    if found["outside"]:
        notes.append(f"{found['outside']} values outside [0, 1] clipped")
    width, height = found["shown"]
    if arr.shape[-1] != channels:
        if channels == 3:
            arr = np.repeat(arr, 3, axis=-1)
            notes.append("grey repeated to 3 channels")
        else:
            # weighted sum elementwise: a BLAS product would leave NumPy's BLAS threads spinning
            arr = (arr[..., 0] * _LUMA[0] + arr[..., 1] * _LUMA[1] + arr[..., 2] * _LUMA[2])[..., None]
            notes.append("RGB converted to grey")
    if size is not None and size != (height, width):
        box = found["box"]  # the whole image in pixels of `arr`, whose edge pixels may stand for part blocks
        arr = np.stack([np.asarray(Image.fromarray(np.ascontiguousarray(arr[..., c]))
                                   .resize((size[1], size[0]), Image.Resampling.BILINEAR, box=box))
                        for c in range(channels)], -1)
        notes.append(f"resized {width}x{height} -> {size[1]}x{size[0]}")
    arr = np.clip(arr, 0.0, 1.0, dtype=np.float32)  # one pass over (H, W, C), then the layout
    chw = np.ascontiguousarray(arr.transpose(2, 0, 1))
    return chw, ("; ".join(notes) or None)


def _read(img: Image.Image, size: tuple[int, int] | None) -> tuple[Float32, Found]:
    """(float32 (H', W', C) upright, what was found: as `_decoded` says, and "turned" (EXIF
    orientation applied), "shown" (the upright image's full (width, height)), "box" (the whole
    image as (x0, y0, x1, y1) in pixels of the result, fractional where an edge column or row of
    the result stands for a partial block)) of the open image
    `img`, shrunk for `size` when it is at least four times as large."""
    orientation = img.getexif().get(0x0112, 1)  # a PNG's EXIF may follow its pixels: this decodes them
    sideways = orientation in (5, 6, 7, 8)
    width, height = img.size
    factor, extent = (1, 1), None
    if size is not None:
        want_w, want_h = (size[0], size[1]) if sideways else (size[1], size[0])  # in the stored layout
        if img.format in ("JPEG", "MPO") and min(width // want_w, height // want_h) >= 4:
            drafted = img.draft(img.mode, (2 * want_w, 2 * want_h))  # the decoder's scaling keeps >= this size
            if drafted:  # the image in decoded pixels: fractional where a partial 8x8 block was scaled
                extent = drafted[1][2:]
        # each side on its own: a 170,000,000 x 1 image becomes 2 * want_w x 1, not 170,000,000 floats
        factor = (max(1, img.size[0] // (2 * want_w)), max(1, img.size[1] // (2 * want_h)))
    img.load()
    arr, found = _decoded(img, factor)
    extent = extent or img.size
    box = (0.0, 0.0, extent[0] / factor[0], extent[1] / factor[1])  # the image, in pixels of `arr`
    if orientation in _UPRIGHT:
        box = _turn_box(box, arr.shape[1], arr.shape[0], _UPRIGHT[orientation])
        arr = _turn(arr, _UPRIGHT[orientation])
    found.update(turned=orientation in _UPRIGHT, shown=(height, width) if sideways else (width, height), box=box)
    return arr, found


def _turn_box(box: Box, width: float, height: float, method: Image.Transpose) -> Box:
    """`box` (x0, y0, x1, y1) in a (width, height) picture, where the picture transposed by
    `method` shows it."""
    T = Image.Transpose
    move = {T.FLIP_LEFT_RIGHT: lambda x, y: (width - x, y),
            T.FLIP_TOP_BOTTOM: lambda x, y: (x, height - y),
            T.ROTATE_180: lambda x, y: (width - x, height - y),
            T.ROTATE_90: lambda x, y: (y, width - x),
            T.ROTATE_270: lambda x, y: (height - y, x),
            T.TRANSPOSE: lambda x, y: (y, x),
            T.TRANSVERSE: lambda x, y: (height - y, width - x)}[method]
    (xa, ya), (xb, yb) = move(box[0], box[1]), move(box[2], box[3])
    return min(xa, xb), min(ya, yb), max(xa, xb), max(ya, yb)


def _turn(arr: Float32, method: Image.Transpose) -> Float32:
    """(H, W, C) `arr` transposed as Pillow's `Image.transpose(method)` would."""
    T = Image.Transpose
    return np.ascontiguousarray({
        T.FLIP_LEFT_RIGHT: lambda a: a[:, ::-1],
        T.FLIP_TOP_BOTTOM: lambda a: a[::-1],
        T.ROTATE_180: lambda a: a[::-1, ::-1],
        T.ROTATE_90: lambda a: np.rot90(a, 1),
        T.ROTATE_270: lambda a: np.rot90(a, -1),
        T.TRANSPOSE: lambda a: a.transpose(1, 0, 2),
        T.TRANSVERSE: lambda a: a[::-1, ::-1].transpose(1, 0, 2),
    }[method](arr))
