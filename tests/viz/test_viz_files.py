"""saliency.viz.files: load_image (PNG/JPEG -> float (C, H, W), with notes) and save (PNG and figures)."""
import io

import numpy as np
import pytest
from matplotlib import cbook
from PIL import Image

from saliency.viz import ImageError, VizError, heatmap_figure, load_image, save
from saliency.viz.files import _pixels

RNG = np.random.default_rng(0)
RGB8 = RNG.integers(0, 256, size=(6, 5, 3), dtype=np.uint8)


def _write(tmp_path, image, name="x.png"):
    path = tmp_path / name
    image.save(path)
    return path


def _check(x, channels, height, width):
    assert x.dtype == np.float32 and x.shape == (channels, height, width)
    assert x.min() >= 0.0 and x.max() <= 1.0


# --- load_image -------------------------------------------------------------------------------

def test_rgb_png_is_read_exactly(tmp_path):
    x, note = load_image(_write(tmp_path, Image.fromarray(RGB8)))
    _check(x, 3, 6, 5)
    np.testing.assert_allclose(x, np.moveaxis(RGB8, -1, 0) / 255.0, rtol=0, atol=1e-7)
    assert note is None


def test_rgb_png_as_grey_uses_luma(tmp_path):
    x, note = load_image(_write(tmp_path, Image.fromarray(RGB8)), channels=1)
    _check(x, 1, 6, 5)
    luma = RGB8 @ np.array([0.299, 0.587, 0.114]) / 255.0
    np.testing.assert_allclose(x[0], luma, rtol=0, atol=1e-6)
    assert note == "RGB converted to grey"


def test_grey_png(tmp_path):
    grey = RGB8[..., 0]
    path = _write(tmp_path, Image.fromarray(grey))
    x, note = load_image(path, channels=1)
    _check(x, 1, 6, 5)
    np.testing.assert_allclose(x[0], grey / 255.0, rtol=0, atol=1e-7)
    assert note is None
    x3, note3 = load_image(path)
    _check(x3, 3, 6, 5)
    np.testing.assert_array_equal(x3, np.repeat(x, 3, axis=0))
    assert note3 == "grey repeated to 3 channels"


def test_rgba_png_is_composited_on_white_with_a_note(tmp_path):
    rgba = np.zeros((2, 2, 4), dtype=np.uint8)
    rgba[..., 0] = 200
    rgba[..., 3] = [[255, 0], [51, 255]]                     # opaque, transparent, 20 % covered, opaque
    x, note = load_image(_write(tmp_path, Image.fromarray(rgba)))
    _check(x, 3, 2, 2)
    np.testing.assert_allclose(x[:, 0, 0], [200 / 255, 0, 0], rtol=0, atol=1e-6)
    np.testing.assert_allclose(x[:, 0, 1], [1, 1, 1], rtol=0, atol=1e-6)
    np.testing.assert_allclose(x[:, 1, 0], 0.2 * np.array([200 / 255, 0, 0]) + 0.8, rtol=0, atol=1e-6)
    assert note == "transparent pixels composited on white"


def test_opaque_rgba_png_has_no_note(tmp_path):
    rgba = np.concatenate([RGB8, np.full((6, 5, 1), 255, np.uint8)], axis=-1)
    x, note = load_image(_write(tmp_path, Image.fromarray(rgba)))
    np.testing.assert_allclose(x, np.moveaxis(RGB8, -1, 0) / 255.0, rtol=0, atol=1e-7)
    assert note is None


def test_palette_png_keeps_its_colours(tmp_path):
    img = Image.new("P", (3, 2))
    img.putpalette([255, 0, 0, 0, 0, 255] + [0, 0, 0] * 254)
    img.putdata([0, 1, 0, 1, 0, 1])
    x, note = load_image(_write(tmp_path, img))
    _check(x, 3, 2, 3)
    np.testing.assert_allclose(x[:, 0, 0], [1, 0, 0], rtol=0, atol=0)
    np.testing.assert_allclose(x[:, 0, 1], [0, 0, 1], rtol=0, atol=0)
    assert note is None


def test_palette_png_with_transparency_is_composited(tmp_path):
    img = Image.new("P", (2, 1))
    img.putpalette([255, 0, 0, 0, 0, 255] + [0, 0, 0] * 254)
    img.putdata([0, 1])
    img.info["transparency"] = 1
    x, note = load_image(_write(tmp_path, img))
    np.testing.assert_allclose(x[:, 0, 0], [1, 0, 0], rtol=0, atol=0)
    np.testing.assert_allclose(x[:, 0, 1], [1, 1, 1], rtol=0, atol=0)
    assert note == "transparent pixels composited on white"


def test_palette_with_alpha_keeps_its_colours():
    img = Image.new("P", (2, 2))
    img.putpalette([255, 0, 0] * 256)
    pixels, alpha = _pixels(img.convert("PA"))                 # PNG cannot store "PA"; other formats can
    np.testing.assert_allclose(pixels[0, 0], [1, 0, 0], rtol=0, atol=0)
    assert alpha is not None and alpha.min() == 1.0


def test_sixteen_bit_png_keeps_its_precision(tmp_path):
    deep = np.array([[0, 1, 257], [32768, 65534, 65535]], dtype=np.uint16)
    path = _write(tmp_path, Image.fromarray(deep))
    x, note = load_image(path, channels=1)
    _check(x, 1, 2, 3)
    np.testing.assert_allclose(x[0], deep / 65535.0, rtol=1e-6, atol=1e-9)
    assert x[0, 0, 1] > 0.0 and x[0, 1, 1] < 1.0                # 8 bits would round these to 0 and 1
    assert note is None


def test_sample_jpeg_with_resize_note():
    path = cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)
    x, note = load_image(path)
    _check(x, 3, 600, 512)
    assert note is None
    small, note = load_image(path, size=(64, 48))
    _check(small, 3, 64, 48)
    assert note == "resized 512x600 -> 48x64"
    np.testing.assert_allclose(small.mean(axis=(1, 2)), x.mean(axis=(1, 2)), rtol=0, atol=0.02)


def test_resize_note_is_width_by_height(tmp_path):
    path = _write(tmp_path, Image.fromarray(RNG.integers(0, 256, size=(480, 640), dtype=np.uint8)))
    x, note = load_image(path, size=(64, 64), channels=1)
    _check(x, 1, 64, 64)
    assert note == "resized 640x480 -> 64x64"
    _, both = load_image(path, size=(64, 64))
    assert both == "grey repeated to 3 channels; resized 640x480 -> 64x64"
    _, same = load_image(path, size=(480, 640), channels=1)
    assert same is None


def test_file_objects_are_read():
    buffer = io.BytesIO()
    Image.fromarray(RGB8).save(buffer, format="PNG")
    buffer.seek(0)
    x, _ = load_image(buffer)
    np.testing.assert_allclose(x, np.moveaxis(RGB8, -1, 0) / 255.0, rtol=0, atol=1e-7)


def test_missing_file_is_an_image_error(tmp_path):
    path = tmp_path / "nope.png"
    with pytest.raises(ImageError, match=r"^cannot read image '.*nope\.png': it does not exist$"):
        load_image(path)


def test_folder_is_an_image_error(tmp_path):
    with pytest.raises(ImageError, match="it is a folder, not an image file"):
        load_image(tmp_path)


def test_text_file_named_png_is_an_image_error(tmp_path):
    path = tmp_path / "notes.png"
    path.write_text("this is not a picture\n")
    with pytest.raises(ImageError, match=r"^cannot read image '.*notes\.png': not an image file in a format this tool "
                       r"reads \(PNG, JPEG, GIF, BMP, TIFF, WEBP or PPM\)$"):
        load_image(path)


def test_truncated_png_is_an_image_error(tmp_path):
    good = _write(tmp_path, Image.fromarray(RNG.integers(0, 256, size=(64, 64, 3), dtype=np.uint8)))
    cut = tmp_path / "cut.png"
    cut.write_bytes(good.read_bytes()[:200])
    with pytest.raises(ImageError, match=r"^cannot read image '.*cut\.png'"):
        load_image(cut)


@pytest.mark.parametrize("kwargs, message", [
    ({"channels": 2}, "channels must be 1 or 3, got 2"),
    ({"channels": True}, "channels must be 1 or 3, got True"),
    ({"size": (0, 4)}, r"size must be \(height, width\) with two positive ints, or None, got \(0, 4\)"),
    ({"size": 64}, r"size must be \(height, width\)"),
])
def test_bad_options(tmp_path, kwargs, message):
    with pytest.raises(VizError, match=message):
        load_image(_write(tmp_path, Image.fromarray(RGB8)), **kwargs)


# --- save -------------------------------------------------------------------------------------

def test_save_arrays_as_png_creating_folders(tmp_path):
    path = save(RGB8, tmp_path / "a" / "b" / "rgb.png")
    assert path == tmp_path / "a" / "b" / "rgb.png"
    np.testing.assert_array_equal(np.asarray(Image.open(path)), RGB8)
    grey = save(np.array([[0.0, 0.5], [1.0, 2.0]]), tmp_path / "grey.png")
    np.testing.assert_array_equal(np.asarray(Image.open(grey)), [[0, 128], [255, 255]])
    rgba = np.concatenate([RGB8, np.full((6, 5, 1), 7, np.uint8)], axis=-1)
    np.testing.assert_array_equal(np.asarray(Image.open(save(rgba, tmp_path / "rgba.png"))), rgba)


def test_save_channels_first_with_an_explicit_layout(tmp_path):
    chw = np.moveaxis(RGB8[:, :3], -1, 0)             # (3, 6, 3): channels first, width 3
    path = save(chw, tmp_path / "chw.png", layout="CHW")
    np.testing.assert_array_equal(np.asarray(Image.open(path)), RGB8[:, :3])
    path = save(RGB8[:3, :, :], tmp_path / "hwc.png", layout="HWC")      # (3, 5, 3) as rows, columns, RGB
    np.testing.assert_array_equal(np.asarray(Image.open(path)), RGB8[:3])
    grey = save(np.full((1, 2, 4), 0.5), tmp_path / "grey.png", layout="CHW")
    np.testing.assert_array_equal(np.asarray(Image.open(grey)), np.full((2, 4), 128))
    with pytest.raises(VizError, match="layout must be None, 'HWC' or 'CHW', got 'NCHW'"):
        save(RGB8, tmp_path / "x.png", layout="NCHW")


def test_save_pillow_image(tmp_path):
    path = save(Image.fromarray(RGB8), str(tmp_path / "pil.png"))
    np.testing.assert_array_equal(np.asarray(Image.open(path)), RGB8)


def test_save_figure_png_and_pdf(tmp_path):
    fig = heatmap_figure(RNG.normal(size=(8, 8)), panel_size=1.0)
    png = save(fig, tmp_path / "figs" / "map.png", dpi=50)
    with Image.open(png) as img:
        width, height = img.size
    assert (width, height) == tuple(round(v) for v in fig.get_size_inches() * 50)
    pdf = save(fig, tmp_path / "figs" / "map.pdf")
    assert pdf.read_bytes().startswith(b"%PDF")


@pytest.mark.parametrize("picture, name, message", [
    (RGB8, "x.jpg", r"cannot save a picture to '.*x\.jpg': use a path ending in \.png"),
    (None, "x.gif", r"cannot save a Figure to '.*x\.gif': use a path ending in \.png or \.pdf or \.svg"),
    (np.zeros((3, 5, 6)), "x.png", r"cannot save an array of shape \(3, 5, 6\); pass an \(H, W\), \(H, W, 3\) or "
                                   r"\(H, W, 4\) picture \(for a \(C, H, W\) image pass layout='CHW'\)"),
    (np.zeros((3, 5, 3)), "x.png", r"an array of shape \(3, 5, 3\) reads as \(C, H, W\) and as \(H, W, C\); pass "
                                   r"layout='CHW' or layout='HWC'"),
    (np.zeros((4, 5, 4)), "x.png", r"reads as \(C, H, W\) and as \(H, W, C\)"),
    (np.zeros((4, 4), dtype=np.int32), "x.png", "cannot save an array of dtype int32"),
    (np.full((4, 4), np.nan), "x.png", "cannot save an array holding NaN or infinite values"),
])
def test_save_errors(tmp_path, picture, name, message):
    picture = heatmap_figure(np.ones((4, 4))) if picture is None else picture
    with pytest.raises(VizError, match=message):
        save(picture, tmp_path / name)
    assert not (tmp_path / name).exists()


def test_save_into_a_file_used_as_folder_is_a_viz_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(VizError, match=r"^cannot write '.*file/x\.png'"):
        save(RGB8, blocker / "x.png")
