"""saliency.viz.files against hostile input: formats other than the raster ones read (EPS goes to
Ghostscript), an image whose rows are longer than Pillow's decoders take, very long and very tall
images, and paths that are no regular file (a FIFO must never block)."""
import io
import os
import socket
import stat
import struct
import threading
import tracemalloc
import warnings
import zlib

import numpy as np
import pytest
from PIL import Image, ImageOps

from saliency.viz import ImageError, load_image
from saliency.viz import files
from saliency.viz.files import IMAGE_FORMATS, IMAGE_SUFFIXES, file_problem

FORMATS_READ = "PNG, JPEG, GIF, BMP, TIFF, WEBP or PPM"
EPS = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\nnewpath 0 0 moveto 10 10 lineto stroke\nshowpage\n"


def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _png_of_one_row(path, width, bands=3):
    """A valid 8-bit PNG of `width` x 1 pixels, all 0x80, written without holding the row: the row
    is deflated in blocks, each ended by a full flush so that every block compresses to the same
    bytes, which are repeated (170,000,000 RGB pixels: 0.5 MB, built in a fraction of a second)."""
    block_pixels = 10**6
    assert width % block_pixels == 0
    block = b"\x80" * (bands * block_pixels)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = deflate.compress(b"\0") + deflate.flush(zlib.Z_FULL_FLUSH)        # the row's filter byte
    body = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    tail = deflate.flush(zlib.Z_FINISH)
    adler = zlib.adler32(b"\0")
    for _ in range(width // block_pixels):
        adler = zlib.adler32(block, adler)
    stream = b"\x78\xda" + head + body * (width // block_pixels) + tail + struct.pack(">I", adler)
    colour = {1: 0, 3: 2}[bands]
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", width, 1, 8, colour, 0, 0, 0))
                     + _chunk(b"IDAT", stream) + _chunk(b"IEND", b""))
    return path


@pytest.fixture
def no_ghostscript(monkeypatch):
    """Fails the test if Pillow's EPS plugin (which runs Ghostscript to decode) is ever asked to open
    a file, by load_image or by the search for a bomb's stated size."""
    Image.init()
    factory, accept = Image.OPEN["EPS"]

    def refuse(*_):
        raise AssertionError("Pillow's EPS plugin was asked to open the file")
    refuse.format_description = factory.format_description
    monkeypatch.setitem(Image.OPEN, "EPS", (refuse, accept))


# --- 1. raster formats only ---------------------------------------------------------------------

@pytest.mark.parametrize("content", [EPS, b"%!PS-Adobe-3.0\n%%Pages: 1\nshowpage\n",
                                     b"\xc5\xd0\xd3\xc6" + bytes(28)])  # PostScript; DOS EPS binary header
def test_eps_named_png_is_refused_without_ghostscript(tmp_path, no_ghostscript, content):
    path = tmp_path / "x.png"
    path.write_bytes(content)
    with pytest.raises(ImageError) as err:
        load_image(path)
    assert str(err.value) == (f"cannot read image '{path}': its first bytes say EPS (Encapsulated Postscript), not a "
                              f"raster image format this tool reads ({FORMATS_READ})")


def test_eps_in_a_file_object_is_refused(no_ghostscript):
    with pytest.raises(ImageError, match=r"'<file object>': its first bytes say EPS "):
        load_image(io.BytesIO(EPS))


@pytest.mark.parametrize("fmt, said", [("ICO", "ICO (Windows Icon)"), ("PCX", "PCX (Paintbrush)"),
                                       ("SGI", "SGI (SGI Image File Format)"), ("DDS", "DDS (DirectDraw Surface)"),
                                       ("QOI", "QOI (Quite OK Image)"), ("TGA", None), ("IM", None)])
def test_other_formats_pillow_decodes_are_refused(tmp_path, fmt, said):
    """Named by their signature where they have one; TGA and IM have none (an RGB TGA's first bytes
    are those of a Windows cursor), and no decoder of theirs runs either."""
    path = tmp_path / "x.png"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)    # Pillow deprecates writing IM
        Image.new("RGB", (16, 16), (10, 200, 30)).save(path, format=fmt)
    with pytest.raises(ImageError) as err:
        load_image(path)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"cannot read image '{path}': ")
    assert message.endswith(f"format this tool reads ({FORMATS_READ})")
    if said:
        assert f"': its first bytes say {said}, not a raster image format" in message


@pytest.mark.parametrize("fmt", list(IMAGE_FORMATS) + ["MPO"])
def test_every_format_read_is_read_whatever_the_file_is_called(tmp_path, fmt):
    rgb = np.zeros((8, 12, 3), np.uint8)
    rgb[:, 6:] = 255
    path = tmp_path / "picture.bin"
    options = {"lossless": True} if fmt == "WEBP" else {"quality": 100} if fmt in ("JPEG", "MPO") else {}
    Image.fromarray(rgb).save(path, format=fmt, **options)
    x, _ = load_image(path)
    np.testing.assert_allclose(x, np.moveaxis(rgb, -1, 0) / 255.0, rtol=0, atol=0.1)


def test_the_suffixes_are_those_pillow_registers_for_the_formats_read():
    registered = Image.registered_extensions()
    for suffix in IMAGE_SUFFIXES:
        assert {"MPO": "JPEG"}.get(registered[suffix], registered[suffix]) in IMAGE_FORMATS, suffix
    assert {s for s, fmt in registered.items() if fmt in IMAGE_FORMATS} <= IMAGE_SUFFIXES
    assert not IMAGE_SUFFIXES & {".eps", ".ps", ".pdf", ".svg", ".wmf", ".emf"}


def test_the_command_line_lists_a_folder_by_the_same_suffixes():
    from saliency.cli.mapping import IMAGE_SUFFIXES as CLI_SUFFIXES

    assert CLI_SUFFIXES is IMAGE_SUFFIXES


def test_stated_size_of_a_bomb_tries_only_the_formats_read(tmp_path, no_ghostscript, monkeypatch):
    path = tmp_path / "x.png"
    Image.new("L", (60, 50)).save(path)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    with pytest.raises(ImageError, match=r"it has 60x50 = 3,000 pixels, more than Pillow's limit of 2,000 "):
        load_image(path)
    with open(tmp_path / "eps", "wb+") as fp:
        fp.write(EPS)
        assert files._stated_size(fp) is None


def test_a_damaged_png_header_is_named(tmp_path):
    path = tmp_path / "x.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + b"not a chunk at all")
    with pytest.raises(ImageError, match=r"x\.png': its PNG header cannot be read \(a damaged file\?\)$"):
        load_image(path)


# --- 2. rows longer than Pillow's decoders take; very long and very tall images -------------------

def test_rgb_png_of_170_million_by_1_pixels_is_one_clear_line(tmp_path):
    """Pillow opens it (170,000,000 pixels are under twice MAX_IMAGE_PIXELS) but its decoders keep a row
    in a buffer of at most 2**31 - 1 bits and raise an empty MemoryError for 170,000,000 x 24 bits
    (the image's EXIF read decodes a PNG's pixels, where this used to surface)."""
    path = _png_of_one_row(tmp_path / "long.png", 170_000_000)
    assert path.stat().st_size < 700_000
    with pytest.raises(ImageError) as err:
        load_image(path, size=(64, 64))
    assert str(err.value) == (f"cannot read image '{path}': its rows of 170,000,000 pixels are longer than Pillow's "
                              "decoders take (at most 89,478,478 pixels of 24 bits: 2**31 bits a row); make the image "
                              "narrower first")


@pytest.mark.parametrize("width, depth, refused", [(89_478_478, 8, False), (89_478_479, 8, True),
                                                   (44_739_235, 16, False), (44_739_236, 16, True)])
def test_the_row_limit_is_pillows_to_the_pixel(tmp_path, width, depth, refused):
    path = tmp_path / "x.png"   # a header only: the check comes before any pixel is decoded
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", width, 1, depth, 2, 0, 0, 0))
                     + _chunk(b"IDAT", zlib.compress(b"\0")) + _chunk(b"IEND", b""))
    with pytest.raises(ImageError) as err:
        load_image(path)
    assert ("are longer than Pillow's decoders take" in str(err.value)) == refused, err.value
    with Image.open(path) as img:                # what Pillow itself does with the same file
        try:
            img.load()
            pillow_refuses = False
        except MemoryError:
            pillow_refuses = True
        except OSError:                          # truncated: the row fitted its decoder
            pillow_refuses = False
    assert pillow_refuses == refused


def test_a_long_grey_row_is_shrunk_on_its_own_axis_in_little_memory(tmp_path):
    """10,000,000 x 1 pixels (a ramp along x) read at 8 x 64: the row is averaged in blocks across only,
    so NumPy never holds a float copy of it (it used to hold 10,000,000 floats per channel)."""
    width = 10_000_000
    ramp = (np.arange(width, dtype=np.int64) * 256 // width).astype(np.uint8)
    path = tmp_path / "ramp.png"
    Image.frombytes("L", (width, 1), ramp.tobytes()).save(path, compress_level=1)
    tracemalloc.start()
    try:
        x, note = load_image(path, size=(8, 64))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 10**6, f"NumPy and Python held {peak / 1e6:.0f} MB"
    assert note == f"grey repeated to 3 channels; resized {width}x1 -> 64x8"
    want = (np.arange(64) + 0.5) / 64 * 256 / 255 - 0.5 / 255   # each column's mean of the ramp
    np.testing.assert_allclose(x, np.broadcast_to(want, x.shape), rtol=0, atol=3 / 255)


def test_a_tall_image_is_shrunk_on_its_own_axis(tmp_path):
    height = 1_000_000
    ramp = (np.arange(height, dtype=np.int64) * 256 // height).astype(np.uint8)
    path = tmp_path / "tall.png"
    Image.frombytes("L", (1, height), ramp.tobytes()).save(path, compress_level=1)
    x, note = load_image(path, size=(64, 8), channels=1)
    assert note == f"resized 1x{height} -> 8x64"
    want = (np.arange(64) + 0.5) / 64 * 256 / 255 - 0.5 / 255
    np.testing.assert_allclose(x[0], np.broadcast_to(want[:, None], (64, 8)), rtol=0, atol=3 / 255)


@pytest.mark.parametrize("orientation", [1, 6])
def test_a_long_rotated_image_is_upright_when_shrunk_on_each_axis(tmp_path, orientation):
    rgb = np.zeros((300, 4000, 3), np.uint8)             # stored 4000 wide, 300 high
    rgb[..., 0] = (np.arange(4000) * 255 // 3999)[None, :]
    rgb[..., 1] = (np.arange(300) * 255 // 299)[:, None]
    img = Image.fromarray(rgb)
    exif = img.getexif()
    exif[0x0112] = orientation
    path = tmp_path / "x.png"
    img.save(path, exif=exif)
    with Image.open(path) as opened:
        upright = np.asarray(ImageOps.exif_transpose(opened), dtype=np.float32) / 255.0
    x, _ = load_image(path, size=(48, 64))
    want = np.stack([np.asarray(Image.fromarray(np.ascontiguousarray(upright[..., c]))
                                .resize((64, 48), Image.Resampling.BILINEAR)) for c in range(3)])
    assert np.abs(x - want).max() < 2 / 255


def test_running_out_of_memory_is_one_clear_line(tmp_path, monkeypatch):
    path = tmp_path / "x.png"
    Image.new("RGB", (40, 30)).save(path)

    def no_memory(*_):
        raise MemoryError()
    monkeypatch.setattr(files, "_decoded", no_memory)
    with pytest.raises(ImageError, match=r"^cannot read image '.*x\.png': not enough memory to read it; make the "
                                         r"image smaller first$"):
        load_image(path)


# --- 3. paths that are no regular file ----------------------------------------------------------

def _without_blocking(fn, fifo=None):
    """fn() run in a thread that must end within 10 s. If it does not (it opened `fifo` and waits for
    a writer), a writer is opened to release it, and the test fails instead of hanging."""
    outcome = {}

    def run():
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome["error"] = exc
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(10)
    if thread.is_alive() and fifo is not None:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(10)
        pytest.fail(f"{fn} blocked on the FIFO {fifo}")
    assert not thread.is_alive()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


fifo_only = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")


@fifo_only
def test_a_fifo_is_named_and_never_opened(tmp_path):
    fifo = tmp_path / "x.png"
    os.mkfifo(fifo)
    with pytest.raises(ImageError) as err:
        _without_blocking(lambda: load_image(fifo), fifo)
    assert str(err.value) == f"cannot read image '{fifo}': it is a FIFO (named pipe), not an image file"
    assert file_problem(fifo) == "is a FIFO (named pipe), not an image file"


@fifo_only
def test_a_fifo_swapped_in_after_the_check_does_not_block(tmp_path, monkeypatch):
    fifo = tmp_path / "x.png"
    os.mkfifo(fifo)
    monkeypatch.setattr(files, "file_problem", lambda path: None)  # as if a regular file was there at os.stat
    with pytest.raises(ImageError, match=r"x\.png': it is a FIFO \(named pipe\), not an image file$"):
        _without_blocking(lambda: load_image(fifo), fifo)


def test_a_symbolic_link_loop_and_a_dangling_link(tmp_path):
    (tmp_path / "a.png").symlink_to(tmp_path / "b.png")
    (tmp_path / "b.png").symlink_to(tmp_path / "a.png")
    with pytest.raises(ImageError, match=r"a\.png': it is a symbolic link loop \(too many levels of symbolic "
                                         r"links\)$"):
        load_image(tmp_path / "a.png")
    (tmp_path / "c.png").symlink_to(tmp_path / "gone.png")
    with pytest.raises(ImageError, match=r"c\.png': it is a symbolic link to '.*gone\.png', which does not exist$"):
        load_image(tmp_path / "c.png")


def test_a_link_to_an_image_is_read(tmp_path):
    Image.new("RGB", (4, 3), (255, 0, 0)).save(tmp_path / "real.png")
    (tmp_path / "link.png").symlink_to(tmp_path / "real.png")
    x, note = load_image(tmp_path / "link.png")
    assert x.shape == (3, 3, 4) and note is None


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="needs Unix sockets")
def test_a_socket_is_named(tmp_path):
    path = tmp_path / "s.png"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        assert stat.S_ISSOCK(os.stat(path).st_mode)
        with pytest.raises(ImageError, match=r"s\.png': it is a socket, not an image file$"):
            load_image(path)


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="needs /dev/null")
def test_a_device_is_named():
    with pytest.raises(ImageError, match=r"^cannot read image '/dev/null': it is a character device, not an image "
                                         r"file$"):
        load_image("/dev/null")


def test_a_file_this_process_may_not_read(tmp_path, monkeypatch):
    path = tmp_path / "x.png"
    Image.new("RGB", (4, 3)).save(path)
    monkeypatch.setattr(files.os, "access", lambda *_: False)      # as for a user without read permission
    with pytest.raises(ImageError, match=r"x\.png': it cannot be read: permission denied$"):
        load_image(path)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root reads any file")
def test_a_file_without_read_permission(tmp_path):
    path = tmp_path / "x.png"
    Image.new("RGB", (4, 3)).save(path)
    path.chmod(0)
    with pytest.raises(ImageError, match=r"x\.png': it cannot be read: permission denied$"):
        load_image(path)
