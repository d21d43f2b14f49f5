"""load_image on large, rotated, animated, deep and unusual images: the image shrunk while it is
decoded equals the full-resolution conversion, every mode is converted as a NumPy reference
conversion says, and memory stays near the decoded 8-bit image."""
import os
import struct
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from PIL import Image, ImageOps

from saliency.viz import ImageError, load_image
from saliency.viz.files import _pixels

SIZE = (48, 64)  # (H, W) the images are read at


def _smooth(height, width, channels, seed=0):
    """A smooth image (sums of low-frequency waves) in [0, 1], (H, W, C)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width] / max(height, width)
    out = np.empty((height, width, channels))
    for c in range(channels):
        fy, fx, phase = rng.uniform(0.5, 3.0), rng.uniform(0.5, 3.0), rng.uniform(0, 6)
        out[..., c] = 0.5 + 0.4 * np.sin(2 * np.pi * (fy * y + fx * x) + phase)
    return out


def _bytes8(values):
    return np.round(values * 255).astype(np.uint8)


def _resized(arr, size):
    """The full-resolution float image `arr` (H, W, C) stretched to `size` as load_image does it for
    a small image: Pillow's bilinear resize of each channel."""
    return np.stack([np.asarray(Image.fromarray(np.ascontiguousarray(arr[..., c], dtype=np.float32))
                                .resize((size[1], size[0]), Image.Resampling.BILINEAR))
                     for c in range(arr.shape[-1])], 0)


def _close(got, want):
    """Shrinking while decoding changes the filter a little: on these smooth images within 2/255
    everywhere and 0.5/255 on average."""
    assert got.shape == want.shape
    diff = np.abs(got - want)
    assert diff.max() < 2 / 255 and diff.mean() < 0.5 / 255, (diff.max() * 255, diff.mean() * 255)


# --- shrunk while decoding = converted at full resolution, then resized -------------------------

def _save(tmp_path, img, name, **kwargs):
    path = tmp_path / name
    img.save(path, **kwargs)
    return path


def test_rgb_png_shrunk_while_decoding_equals_the_full_conversion(tmp_path):
    rgb = _bytes8(_smooth(1100, 1500, 3))
    x, note = load_image(_save(tmp_path, Image.fromarray(rgb), "x.png"), size=SIZE)
    _close(x, _resized(rgb / 255.0, SIZE))
    assert note == "resized 1500x1100 -> 64x48"


def test_grey_png_read_as_rgb(tmp_path):
    grey = _bytes8(_smooth(1100, 1500, 1))[..., 0]
    x, note = load_image(_save(tmp_path, Image.fromarray(grey), "x.png"), size=SIZE)
    _close(x, np.repeat(_resized(grey[..., None] / 255.0, SIZE), 3, axis=0))
    assert note == "grey repeated to 3 channels; resized 1500x1100 -> 64x48"


def test_transparent_rgba_is_composited_before_it_is_shrunk(tmp_path):
    rgba = _bytes8(_smooth(1100, 1500, 4, seed=1))
    x, note = load_image(_save(tmp_path, Image.fromarray(rgba), "x.png"), size=SIZE)
    colour, alpha = rgba[..., :3] / 255.0, rgba[..., 3:] / 255.0
    _close(x, _resized(colour * alpha + (1 - alpha), SIZE))
    assert note == "transparent pixels composited on white; resized 1500x1100 -> 64x48"


def test_half_transparent_rgba_shrunk_equals_the_full_conversion(tmp_path):
    rgba = _bytes8(_smooth(1100, 1500, 4, seed=3))
    rgba[..., 3] = 128
    x, _ = load_image(_save(tmp_path, Image.fromarray(rgba), "x.png"), size=SIZE)
    colour = rgba[..., :3] / 255.0
    _close(x, _resized(colour * (128 / 255) + (127 / 255), SIZE))


def test_clear_pixels_add_no_colour_to_the_blocks_they_are_averaged_in(tmp_path):
    rgba = np.zeros((1152, 1536, 4), np.uint8)                 # clear black pixels ...
    rgba[:, ::2] = [255, 0, 0, 255]                             # ... between opaque red columns
    x, note = load_image(_save(tmp_path, Image.fromarray(rgba), "x.png"), size=SIZE)
    np.testing.assert_allclose(x, np.broadcast_to(np.array([1.0, 0.5, 0.5])[:, None, None], x.shape),
                               rtol=0, atol=1 / 255)            # half red, half white
    assert note == "transparent pixels composited on white; resized 1536x1152 -> 64x48"


def test_sixteen_bit_png_keeps_its_precision_when_shrunk(tmp_path):
    deep = np.full((800, 1200), 257 * 100 + 7, dtype=np.uint16)   # between two 8-bit levels
    x, _ = load_image(_save(tmp_path, Image.fromarray(deep), "x.png"), size=(20, 30), channels=1)
    np.testing.assert_allclose(x, (257 * 100 + 7) / 65535, rtol=0, atol=1e-6)
    wave = np.round(_smooth(1100, 1500, 1, seed=2)[..., 0] * 65535).astype(np.uint16)
    x, _ = load_image(_save(tmp_path, Image.fromarray(wave), "w.png"), size=SIZE, channels=1)
    _close(x, _resized(wave[..., None] / 65535.0, SIZE))


def test_palette_png_with_transparency_shrunk(tmp_path):
    level = np.arange(256)
    palette = np.stack([level, 255 - level, 128 + level // 2], -1).astype(np.uint8)  # colours that vary smoothly
    index = (_smooth(1100, 1500, 1, seed=4)[..., 0] * 255).astype(np.uint8)
    clear = int(np.median(index))                               # this index is transparent
    img = Image.fromarray(index, mode="L").convert("P")  # a "P" image whose indices are `index`
    img.putpalette(palette.ravel().tolist())
    x, note = load_image(_save(tmp_path, img, "x.png", transparency=clear), size=SIZE)
    colour = palette[index] / 255.0
    colour[index == clear] = 1.0                                # white
    _close(x, _resized(colour, SIZE))
    assert note == "transparent pixels composited on white; resized 1500x1100 -> 64x48"


def test_large_jpeg_is_scaled_by_its_decoder_and_agrees(tmp_path):
    rgb = _bytes8(_smooth(1600, 2400, 3, seed=5))
    path = _save(tmp_path, Image.fromarray(rgb), "x.jpg", quality=95)
    with Image.open(path) as img:
        full = np.asarray(img.convert("RGB"), dtype=np.float32) / 255.0  # decoded at full size
    x, note = load_image(path, size=SIZE)
    _close(x, _resized(full, SIZE))
    assert note == "resized 2400x1600 -> 64x48"


# --- every mode as a NumPy reference conversion says --------------------------------------------

def test_one_bit_image(tmp_path):
    bits = np.random.default_rng(6).integers(0, 2, size=(5, 7)).astype(bool)
    x, note = load_image(_save(tmp_path, Image.fromarray(bits), "x.png"), channels=1)
    np.testing.assert_array_equal(x[0], bits.astype(np.float32))
    assert note is None


def test_grey_with_alpha(tmp_path):
    la = np.random.default_rng(7).integers(0, 256, size=(5, 7, 2), dtype=np.uint8)
    x, _ = load_image(_save(tmp_path, Image.fromarray(la, mode="LA"), "x.png"), channels=1)
    grey, alpha = la[..., 0] / 255.0, la[..., 1] / 255.0
    np.testing.assert_allclose(x[0], grey * alpha + 1 - alpha, rtol=0, atol=1e-6)


def test_palette_image_exactly(tmp_path):
    rng = np.random.default_rng(8)
    palette = rng.integers(0, 256, size=(256, 3), dtype=np.uint8)
    index = rng.integers(0, 256, size=(9, 11), dtype=np.uint8)
    img = Image.fromarray(index, mode="L").convert("P")
    img.putpalette(palette.ravel().tolist())
    x, note = load_image(_save(tmp_path, img, "x.png"))
    np.testing.assert_allclose(x, np.moveaxis(palette[index], -1, 0) / 255.0, rtol=0, atol=1e-7)
    assert note is None


def test_palette_with_alpha_tiff(tmp_path):
    rng = np.random.default_rng(10)
    palette = rng.integers(0, 256, size=(256, 3), dtype=np.uint8)
    index = rng.integers(0, 256, size=(5, 7), dtype=np.uint8)
    alpha = rng.integers(0, 256, size=(5, 7), dtype=np.uint8)
    img = Image.fromarray(index, mode="L").convert("P")
    img.putpalette(palette.ravel().tolist())
    img = img.convert("PA")
    img.putalpha(Image.fromarray(alpha))
    path = _save(tmp_path, img, "x.tif")
    with Image.open(path) as img:
        assert img.mode == "PA"
    x, note = load_image(path)
    a = alpha[..., None] / 255.0
    want = palette[index] / 255.0 * a + 1 - a
    np.testing.assert_allclose(x, np.moveaxis(want, -1, 0), rtol=0, atol=1e-6)
    assert note == "transparent pixels composited on white"


def _premultiplied_tiff(tmp_path, grey, alpha):
    """A TIFF of mode "La" (grey multiplied by alpha): Pillow writes "LA", whose ExtraSamples tag
    is switched from unassociated (2) to associated (1) alpha."""
    path = _save(tmp_path, Image.fromarray(np.stack([grey, alpha], -1), mode="LA"), "x.tif")
    unassociated = struct.pack("<HHII", 338, 3, 1, 2)
    data = path.read_bytes()
    assert data.count(unassociated) == 1
    path.write_bytes(data.replace(unassociated, struct.pack("<HHII", 338, 3, 1, 1)))
    with Image.open(path) as img:
        assert img.mode == "La"
    return path


def test_premultiplied_grey_with_alpha_tiff(tmp_path):
    rng = np.random.default_rng(11)
    alpha = rng.integers(1, 256, size=(5, 7)).astype(np.uint8)
    grey = np.round(rng.integers(0, 256, size=(5, 7)) * (alpha / 255.0)).astype(np.uint8)  # premultiplied
    x, _ = load_image(_premultiplied_tiff(tmp_path, grey, alpha), channels=1)
    np.testing.assert_allclose(x[0], grey / 255.0 + 1 - alpha / 255.0, rtol=0, atol=1 / 255)


def test_premultiplied_grey_with_alpha_shrunk(tmp_path):
    wave = _smooth(1100, 1500, 2, seed=13)
    alpha = _bytes8(wave[..., 1])
    grey = np.round(_bytes8(wave[..., 0]) * (alpha / 255.0)).astype(np.uint8)
    x, note = load_image(_premultiplied_tiff(tmp_path, grey, alpha), size=SIZE, channels=1)
    _close(x, _resized(grey[..., None] / 255.0 + 1 - alpha[..., None] / 255.0, SIZE))
    assert note == "transparent pixels composited on white; resized 1500x1100 -> 64x48"


def test_premultiplied_rgba_pixels():
    rng = np.random.default_rng(12)
    alpha = rng.integers(1, 256, size=(5, 7, 1)).astype(np.uint8)
    colour = np.round(rng.integers(0, 256, size=(5, 7, 3)) * (alpha / 255.0)).astype(np.uint8)
    img = Image.frombytes("RGBa", (7, 5), np.concatenate([colour, alpha], -1).tobytes())
    pixels, a = _pixels(img)                                    # no file format Pillow writes holds "RGBa"
    composited = pixels * a[..., None] + 1 - a[..., None]
    np.testing.assert_allclose(composited, colour / 255.0 + 1 - alpha / 255.0, rtol=0, atol=1 / 255)


@pytest.mark.parametrize("mode", ["I;16B", "I"])
def test_sixteen_and_32_bit_integer_tiff(tmp_path, mode):
    values = np.array([[0, 1, 257, 40000], [65534, 65535, 70000, -5]], dtype=np.int64)
    if mode == "I;16B":
        values = np.clip(values, 0, 65535)
        img = Image.frombytes(mode, (4, 2), values.astype(">u2").tobytes())
    else:
        img = Image.fromarray(values.astype(np.int32), mode="I")
    path = _save(tmp_path, img, "x.tif")
    with Image.open(path) as img:
        assert img.mode == mode
    x, note = load_image(path, channels=1)
    np.testing.assert_allclose(x[0], np.clip(values / 65535.0, 0, 1), rtol=0, atol=1e-6)


@pytest.mark.parametrize("orientation", range(2, 9))
def test_exif_orientation_shows_the_image_upright(tmp_path, orientation):
    rgb = np.random.default_rng(orientation).integers(0, 256, size=(4, 6, 3), dtype=np.uint8)
    img = Image.fromarray(rgb)
    exif = img.getexif()
    exif[0x0112] = orientation
    path = _save(tmp_path, img, "x.png", exif=exif)
    with Image.open(path) as opened:
        want = np.asarray(ImageOps.exif_transpose(opened).convert("RGB"), dtype=np.float32) / 255.0
    x, note = load_image(path)
    np.testing.assert_allclose(x, np.moveaxis(want, -1, 0), rtol=0, atol=1e-7)
    assert note == "rotated as its EXIF orientation says"


@pytest.mark.parametrize("name, options", [("x.png", {}), ("x.jpg", {"quality": 95})])
def test_large_rotated_image_is_shrunk_in_its_stored_layout(tmp_path, name, options):
    rgb = _bytes8(_smooth(1500, 1100, 3, seed=9))             # stored 1100 wide, shown 1500 wide
    img = Image.fromarray(rgb)
    exif = img.getexif()
    exif[0x0112] = 6
    path = _save(tmp_path, img, name, exif=exif, **options)
    with Image.open(path) as stored:
        rgb = np.asarray(stored.convert("RGB"))                # as decoded at full size
    x, note = load_image(path, size=SIZE)
    upright = np.rot90(rgb, -1) / 255.0                        # orientation 6: turned clockwise
    _close(x, _resized(upright, SIZE))
    assert note == "rotated as its EXIF orientation says; resized 1500x1100 -> 64x48"


@pytest.mark.parametrize("name, options", [("x.gif", {}), ("x.png", {}), ("x.webp", {"lossless": True})])
def test_animated_image_gives_its_first_frame(tmp_path, name, options):
    frames = [Image.new("RGB", (8, 6), colour) for colour in [(255, 0, 0), (0, 255, 0), (0, 0, 255)]]
    path = tmp_path / name
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=100, **options)
    x, note = load_image(path)
    np.testing.assert_allclose(x[:, 0, 0], [1, 0, 0], rtol=0, atol=1e-6)
    assert note == "animated image: used its first frame of 3"


def test_float_image_with_nan_is_refused_and_out_of_range_values_are_noted(tmp_path):
    values = np.linspace(-0.5, 1.5, 20, dtype=np.float32).reshape(4, 5)
    x, note = load_image(_save(tmp_path, Image.fromarray(values, mode="F"), "x.tif"), channels=1)
    np.testing.assert_allclose(x[0], np.clip(values, 0, 1), rtol=0, atol=1e-7)
    assert note == f"{int(np.sum((values < 0) | (values > 1)))} values outside [0, 1] clipped"
    values[1, 2] = np.nan
    values[3, 0] = np.inf
    with pytest.raises(ImageError, match=r"x\.tif': it holds 2 NaN or infinite values$"):
        load_image(_save(tmp_path, Image.fromarray(values, mode="F"), "x.tif"), channels=1)


def test_float_image_is_checked_at_full_resolution_when_shrunk(tmp_path):
    values = np.full((300, 400), 0.25, dtype=np.float32)
    values[10, 20] = 2.0
    values[290, 390] = -1.0
    x, note = load_image(_save(tmp_path, Image.fromarray(values, mode="F"), "x.tif"), size=(10, 10), channels=1)
    assert note == "2 values outside [0, 1] clipped; resized 400x300 -> 10x10"
    assert abs(float(np.median(x)) - 0.25) < 1e-6
    values[100:103, 200] = [np.nan, np.inf, -np.inf]
    with pytest.raises(ImageError, match=r"it holds 3 NaN or infinite values$"):
        load_image(_save(tmp_path, Image.fromarray(values, mode="F"), "x.tif"), size=(10, 10), channels=1)


# --- Pillow's limit against decompression bombs -------------------------------------------------

def test_images_over_the_pixel_limit_get_a_note_and_no_warning(tmp_path, monkeypatch):
    path = _save(tmp_path, Image.new("RGB", (40, 30)), "x.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, note = load_image(path)
    assert note == "a very large image (40x30 = 1,200 pixels, over Pillow's MAX_IMAGE_PIXELS)"


def test_images_over_twice_the_pixel_limit_are_one_line_errors(tmp_path, monkeypatch):
    path = _save(tmp_path, Image.new("RGB", (50, 50)), "x.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    with pytest.raises(ImageError) as err:
        load_image(path)
    message = str(err.value)
    assert message == (f"cannot read image '{path}': it has 50x50 = 2,500 pixels, more than Pillow's limit of "
                       "2,000 against decompression bombs (twice PIL.Image.MAX_IMAGE_PIXELS; raise it for an "
                       "image you trust, or make the image smaller first)")


def test_pixel_limit_error_names_the_size_of_a_file_object(tmp_path, monkeypatch):
    with open(_save(tmp_path, Image.new("L", (70, 20)), "x.jpg"), "rb") as file:
        monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 500)
        with pytest.raises(ImageError, match=r"it has 70x20 = 1,400 pixels, more than Pillow's limit of 1,000 "):
            load_image(file)


# --- memory -------------------------------------------------------------------------------------

PEAK = """
import sys
from saliency.viz import load_image

def peak():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM"))

load_image(sys.argv[2], size=(64, 64))  # Pillow's file plugins are imported by a first image
before = peak()
x, _ = load_image(sys.argv[1], size=(64, 64))
print(peak() - before)
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads the peak memory from /proc")
@pytest.mark.parametrize("mode", ["RGB", "RGBA"])
def test_reading_a_large_image_takes_less_than_one_and_a_half_times_its_8_bit_size(tmp_path, mode):
    height, width = 4000, 6000
    pixels = np.zeros((height, width, len(mode)), np.uint8)
    pixels[..., 0] = np.arange(width) * 255 // width
    pixels[..., 1] = (np.arange(height) * 255 // height)[:, None]
    if mode == "RGBA":
        pixels[..., 3] = 255 - pixels[..., 0]                   # from opaque to clear
    path = _save(tmp_path, Image.fromarray(pixels), "big.png", compress_level=1)
    del pixels
    small = _save(tmp_path, Image.new("RGB", (80, 80)), "small.png")
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(PEAK), str(path), str(small)], capture_output=True,
                         text=True, check=True, timeout=120)
    eight_bit = height * width * len(mode)
    growth = int(out.stdout)
    assert growth < 1.5 * eight_bit, f"peak grew by {growth / eight_bit:.2f}x the 8-bit image"
