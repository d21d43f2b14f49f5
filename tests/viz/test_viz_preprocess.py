"""viz.Preprocess against torchvision's transforms (v1, on Pillow images: Resize with antialias,
CenterCrop, ToTensor, Normalize): an 8-bit opaque image equals them to the bit; the images read in
float (16-bit, transparent) are within 1/255 before normalisation.

torchvision has no answer of its own for a transparent or 16-bit picture (its loaders call
`convert("RGB")`, which drops alpha and clips 16-bit values), so the reference is the picture
Preprocess means, made in 8 bits: the RGBA image composited on white, the 16-bit one divided by
257. Their values are chosen exactly representable in 8 bits (alpha 0 or 255, 16-bit values
multiples of 257), so that the reference itself loses nothing.
"""
import json
import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageOps

from saliency import viz
from saliency.viz import Preprocess, VizError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models" / "vision"))
from _torchvision import torchvision  # noqa: E402

EIGHT_BITS = 1e-6              # float32 arithmetic only
FLOAT_PATH = 1 / 255 + 1e-6    # Pillow's 8-bit resize rounds twice (after each pass); a float one does not


@pytest.fixture(scope="module")
def transforms():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torchvision().transforms


def reference(T, img, resize, crop, interpolation="bilinear", mean=None, std=None):
    """torchvision's transforms of the Pillow image `img`, as a (C, H, W) array."""
    mode = {"bilinear": T.InterpolationMode.BILINEAR, "bicubic": T.InterpolationMode.BICUBIC}[interpolation]
    steps = [T.Resize(resize, interpolation=mode, antialias=True)]
    steps += [T.CenterCrop(crop)] if crop is not None else []
    steps += [T.ToTensor()] + ([T.Normalize(mean, std)] if mean is not None else [])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return T.Compose(steps)(img).numpy()


def noise(shape, seed=0):
    return (np.random.default_rng(seed).random(shape) * 255).astype(np.uint8)


SIZES = [(37, 53), (300, 200), (224, 224), (20, 30)]   # (H, W); 20x30 is padded by a crop of 24
STEPS = [(32, 24), (256, 224), ((40, 50), 30), (24, None)]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("resize, crop", STEPS)
@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic"])
def test_an_rgb_image_gives_torchvision_s_numbers_to_the_bit(transforms, tmp_path, size, resize, crop, interpolation):
    img = Image.fromarray(noise(size + (3,)))
    prep = Preprocess(resize, crop, interpolation=interpolation)
    want = reference(transforms, img, resize, crop, interpolation)
    np.testing.assert_allclose(prep.picture(img), want, rtol=0, atol=EIGHT_BITS)
    img.save(tmp_path / "a.png")
    np.testing.assert_allclose(prep.picture(tmp_path / "a.png"), want, rtol=0, atol=EIGHT_BITS)
    np.testing.assert_allclose(prep.picture(np.asarray(img)), want, rtol=0, atol=EIGHT_BITS)


@pytest.mark.parametrize("size", SIZES)
def test_normalisation_is_torchvision_s(transforms, size):
    img = Image.fromarray(noise(size + (3,), seed=1))
    prep = Preprocess.imagenet(resize=30, crop=24)
    want = reference(transforms, img, 30, 24, mean=prep.mean, std=prep.std)
    got = prep(img)
    assert got.dtype == np.float32 and got.shape == (3, 24, 24)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    np.testing.assert_allclose(prep.denormalize(got), prep.picture(img), rtol=0, atol=1e-6)


def _grey(size):
    return Image.fromarray(noise(size, seed=2), "L")


def _palette(size):
    return Image.fromarray(noise(size + (3,), seed=3)).convert("P", palette=Image.Palette.ADAPTIVE, colors=64)


@pytest.mark.parametrize("make", [_grey, _palette], ids=["L", "P"])
@pytest.mark.parametrize("size", SIZES[:2])
def test_grey_and_palette_images_are_converted_as_torchvision_s_loader_does(transforms, tmp_path, make, size):
    img = make(size)
    img.save(tmp_path / "a.png")
    want = reference(transforms, img.convert("RGB"), 32, 24)
    prep = Preprocess(32, 24)
    np.testing.assert_allclose(prep.picture(tmp_path / "a.png"), want, rtol=0, atol=EIGHT_BITS)
    grey = Preprocess(32, 24, channels=1).picture(tmp_path / "a.png")
    np.testing.assert_allclose(grey, reference(transforms, img.convert("L"), 32, 24), rtol=0, atol=EIGHT_BITS)


@pytest.mark.parametrize("orientation", [3, 6, 8])
def test_an_exif_rotated_jpeg_is_taken_upright(transforms, tmp_path, orientation):
    exif = Image.Exif()
    exif[0x0112] = orientation
    Image.fromarray(noise((40, 64, 3), seed=4)).save(tmp_path / "a.jpg", exif=exif, quality=95)
    with Image.open(tmp_path / "a.jpg") as opened:
        upright = ImageOps.exif_transpose(opened).convert("RGB")
    prepared = Preprocess(32, 28).prepare(tmp_path / "a.jpg")
    np.testing.assert_allclose(prepared.picture, reference(transforms, upright, 32, 28), rtol=0, atol=EIGHT_BITS)
    assert prepared.note.startswith("rotated as its EXIF orientation says")


@pytest.mark.parametrize("size", SIZES[:2])
def test_a_16_bit_image_is_within_1_255(transforms, tmp_path, size):
    eight = noise(size, seed=5)
    Image.fromarray(eight.astype(np.uint16) * 257).save(tmp_path / "a.png")
    with Image.open(tmp_path / "a.png") as saved:
        assert saved.mode.startswith("I")
    want = reference(transforms, Image.fromarray(eight, "L").convert("RGB"), 32, 24)
    np.testing.assert_allclose(Preprocess(32, 24).picture(tmp_path / "a.png"), want, rtol=0, atol=FLOAT_PATH)


@pytest.mark.parametrize("size", SIZES[:2])
def test_a_transparent_image_is_composited_on_white_within_1_255(transforms, tmp_path, size):
    rgba = noise(size + (4,), seed=6)
    rgba[..., 3] = np.where(rgba[..., 3] > 127, 255, 0)
    Image.fromarray(rgba, "RGBA").save(tmp_path / "a.png")
    white = Image.new("RGBA", (size[1], size[0]), (255, 255, 255, 255))
    flat = Image.alpha_composite(white, Image.fromarray(rgba, "RGBA")).convert("RGB")
    want = reference(transforms, flat, 32, 24)
    np.testing.assert_allclose(Preprocess(32, 24).picture(tmp_path / "a.png"), want, rtol=0, atol=FLOAT_PATH)
    floats = rgba.astype(np.float32) / 255
    np.testing.assert_allclose(Preprocess(32, 24).picture(floats), want, rtol=0, atol=FLOAT_PATH)


def test_sizes_follow_torchvision_s_rule():
    prep = Preprocess(resize=256, crop=224)
    assert prep.output_size(480, 640) == (256, 341)   # the longer side truncated
    assert prep.output_size(641, 480) == (341, 256)
    assert Preprocess(resize=(100, 50)).output_size(480, 640) == (100, 50)
    assert prep.input_shape == (3, 224, 224)
    assert Preprocess(resize=520).input_shape is None
    assert Preprocess(resize=(64, 48), channels=1).input_shape == (1, 64, 48)
    assert Preprocess().prepare(np.zeros((5, 7, 3), np.uint8)).input.shape == (3, 5, 7)


def test_a_note_says_what_was_done(tmp_path):
    Image.fromarray(noise((48, 64), seed=7), "L").save(tmp_path / "a.png")
    note = Preprocess.imagenet(32, 24).prepare(tmp_path / "a.png").note
    assert note == "grey repeated to 3 channels; resized 64x48 -> 42x32 (bilinear); centre crop 24x24"


def test_record_round_trip():
    for prep in (Preprocess.imagenet(), Preprocess(resize=(64, 48), crop=(32, 30), mean=0.5, std=(0.2, 0.3, 0.4),
                                                   interpolation="bicubic"),
                 Preprocess(), Preprocess(resize=10, channels=1, mean=0.1)):
        record = prep.record()
        assert Preprocess.from_record(json.loads(json.dumps(record))) == prep
    assert Preprocess(mean=0.5).mean == (0.5, 0.5, 0.5)
    assert Preprocess.imagenet().describe() == ("resize 256 (shorter side, bilinear), centre crop 224x224, ImageNet "
                                                "mean and std")


@pytest.mark.parametrize("kwargs, message", [
    ({"resize": 0}, "resize must be a positive int or (height, width) of two positive ints, got 0"),
    ({"resize": (1, 2, 3)}, "resize must be a positive int"),
    ({"crop": 2.5}, "crop must be a positive int or (height, width) of two positive ints, got 2.5"),
    ({"crop": True}, "crop must be a positive int"),
    ({"mean": (0.1, 0.2)}, "mean must be 3 finite numbers (one per channel) or one number, got (0.1, 0.2)"),
    ({"mean": float("nan")}, "mean must be 3 finite numbers"),
    ({"std": (1, 0, 1)}, "std must be positive (it divides), got (1, 0, 1)"),
    ({"std": "abc"}, "std must be 3 finite numbers"),
    ({"interpolation": "lanczos"}, "unknown interpolation 'lanczos'; choose one of: bilinear, bicubic, nearest"),
    ({"channels": 2}, "channels must be 1 or 3, got 2"),
])
def test_bad_values_are_one_line_viz_errors(kwargs, message):
    with pytest.raises(VizError, match="^" + re.escape(message)):
        Preprocess(**kwargs)


def test_bad_records_and_images_are_refused(tmp_path):
    with pytest.raises(VizError, match="a preprocessing record is a dict of resize, crop, mean, std, interpolation"):
        Preprocess.from_record({"size": 3})
    with pytest.raises(VizError, match=r"an image array must be \(H, W, C\) with C = 1, 3 or 4, got shape \(2, 3, 5\)"):
        Preprocess()(np.zeros((2, 3, 5)))
    with pytest.raises(VizError, match="the image array holds NaN or infinite values"):
        Preprocess()(np.full((2, 3, 3), np.nan))
    (tmp_path / "a.eps").write_bytes(b"%!PS-Adobe-3.0 EPSF-3.0\n")
    with pytest.raises(viz.ImageError, match="not a raster image format this tool reads"):
        Preprocess()(tmp_path / "a.eps")
    with pytest.raises(viz.ImageError, match="does not exist"):
        Preprocess()(tmp_path / "missing.png")
