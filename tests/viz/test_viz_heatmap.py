"""saliency.viz.heatmap: colouring, heatmaps, image conversion, resizing, overlays."""

import numpy as np
import pytest
from matplotlib import colormaps

from saliency.viz import (
    VizError,
    colorize,
    get_cmap,
    heatmap,
    overlay,
    resize_values,
    to_rgb,
)

RNG = np.random.default_rng(0)
MAP = RNG.normal(size=(3, 8, 8))
IMAGE = RNG.random((3, 8, 8))


def _colour(name, position):
    return np.array(colormaps[name](position, bytes=True)[:3])


def test_heatmap_is_rgb_uint8_of_the_map_size():
    out = heatmap(MAP)
    assert out.shape == (8, 8, 3) and out.dtype == np.uint8 and out.flags.c_contiguous


def test_heatmap_uses_inferno_for_magnitudes_and_rdbu_for_sign_all():
    values = np.array([[0.0, 1.0], [-1.0, 0.0]])
    mag = heatmap(values, sign="abs", clip_percentile=None)
    np.testing.assert_array_equal(mag[0, 0], _colour("inferno", 0.0))
    np.testing.assert_array_equal(mag[0, 1], _colour("inferno", 1.0))
    signed = heatmap(values, sign="all", clip_percentile=None)
    np.testing.assert_array_equal(signed[0, 0], _colour("RdBu_r", 0.5))      # zero is the centre
    np.testing.assert_array_equal(signed[0, 1], _colour("RdBu_r", 1.0))
    np.testing.assert_array_equal(signed[1, 0], _colour("RdBu_r", 0.0))


def test_heatmap_positive_and_negative_show_the_two_parts():
    values = np.array([[2.0, -2.0]])
    pos, neg = heatmap(values, sign="positive"), heatmap(values, sign="negative")
    np.testing.assert_array_equal(pos[0, 0], neg[0, 1])      # both full scale
    np.testing.assert_array_equal(pos[0, 1], neg[0, 0])      # both zero
    assert not np.array_equal(pos[0, 0], pos[0, 1])


def test_heatmap_rgb_gives_three_pictures_on_one_scale():
    attr = np.stack([np.full((2, 2), 1.0), np.full((2, 2), 2.0), np.full((2, 2), 4.0)])
    out = heatmap(attr, reduce="rgb", clip_percentile=None)
    assert out.shape == (3, 2, 2, 3)
    np.testing.assert_array_equal(out[2, 0, 0], _colour("inferno", 1.0))
    np.testing.assert_array_equal(out[0, 0, 0], _colour("inferno", 0.25))


@pytest.mark.parametrize("sign", ["abs", "positive", "negative", "all"])
@pytest.mark.parametrize("fill", [0.0, 5.0, -5.0])
def test_constant_and_zero_maps_give_uniform_pictures_without_warnings(sign, fill):
    out = heatmap(np.full((1, 3, 4, 4), fill), sign=sign)
    assert out.dtype == np.uint8 and out.shape == (4, 4, 3)
    assert (out == out[0, 0]).all()


def test_shared_vmax_tells_a_map_from_twice_the_map():
    a = np.abs(RNG.normal(size=(6, 6))) + 0.1
    np.testing.assert_array_equal(heatmap(a), heatmap(2 * a))
    vmax = 2 * a.max()
    assert not np.array_equal(heatmap(a, vmax=vmax), heatmap(2 * a, vmax=vmax))


def test_get_cmap_accepts_names_and_colormaps_and_refuses_others():
    assert get_cmap("viridis").name == "viridis"
    assert get_cmap(colormaps["magma"]).name == "magma"
    assert get_cmap(None, "all").name == "RdBu_r" and get_cmap(None, "negative").name == "inferno"
    with pytest.raises(VizError, match="unknown cmap 'infernoo'; pass a matplotlib colormap or its name"):
        heatmap(MAP, cmap="infernoo")


def test_colorize_refuses_an_unknown_sign():
    with pytest.raises(VizError, match="unknown sign 'al'"):
        colorize(np.zeros((2, 2)), sign="al")


# --- to_rgb -----------------------------------------------------------------------------------

def test_to_rgb_layouts_agree():
    expected = np.round(np.moveaxis(IMAGE, 0, -1) * 255).astype(np.uint8)
    np.testing.assert_array_equal(to_rgb(IMAGE), expected)                    # float (C, H, W)
    np.testing.assert_array_equal(to_rgb(IMAGE[None]), expected)              # (1, C, H, W)
    np.testing.assert_array_equal(to_rgb(np.moveaxis(IMAGE, 0, -1)), expected)  # float (H, W, C)
    np.testing.assert_array_equal(to_rgb(expected), expected)                 # uint8 (H, W, C)
    np.testing.assert_array_equal(to_rgb(np.moveaxis(expected, -1, 0)), expected)  # uint8 (C, H, W)


def test_to_rgb_grey_is_repeated_and_floats_are_clipped():
    grey = np.array([[-0.5, 0.5], [1.0, 2.0]])
    out = to_rgb(grey)
    assert out.shape == (2, 2, 3)
    np.testing.assert_array_equal(out[..., 0], [[0, 128], [255, 255]])
    np.testing.assert_array_equal(out[..., 0], out[..., 2])
    np.testing.assert_array_equal(to_rgb(grey[None]), out)


@pytest.mark.parametrize("image, message", [
    (np.zeros((4, 5, 6)), "image of shape (4, 5, 6) has no axis of 1 or 3 channels"),
    (np.zeros((2, 3, 4, 4)), "image must have shape (C, H, W), (H, W, C) or (H, W), got (2, 3, 4, 4)"),
    (np.zeros((3, 4, 4), dtype=np.int64), "image must be float in [0, 1] or uint8, got dtype int64"),
    (np.full((3, 4, 4), np.nan), "image holds NaN or infinite values"),
])
def test_to_rgb_errors(image, message):
    with pytest.raises(VizError) as info:
        to_rgb(image)
    assert message in str(info.value)


# --- resizing and overlays --------------------------------------------------------------------

def test_resize_values_keeps_a_fitting_map_and_resizes_others():
    values = RNG.random((4, 4))
    np.testing.assert_allclose(resize_values(values, (4, 4)), values, rtol=1e-6, atol=0)
    up = resize_values(np.full((4, 4), 0.25), (12, 8))
    assert up.shape == (12, 8) and up.dtype == np.float64
    np.testing.assert_allclose(up, 0.25, rtol=1e-6, atol=0)


def test_overlay_alpha_zero_is_the_image_and_alpha_one_the_heatmap():
    rgb = to_rgb(IMAGE)
    np.testing.assert_array_equal(overlay(IMAGE, MAP, alpha=0.0), rgb)
    np.testing.assert_array_equal(overlay(IMAGE, MAP, alpha=1.0), heatmap(MAP))
    np.testing.assert_array_equal(overlay(IMAGE, MAP, alpha=1.0, sign="all"), heatmap(MAP, sign="all"))
    half = overlay(IMAGE, MAP, alpha=0.5).astype(int)
    np.testing.assert_allclose(half, (rgb.astype(int) + heatmap(MAP).astype(int)) / 2, rtol=0, atol=0.5)


def test_overlay_resizes_a_map_of_another_resolution():
    image = RNG.random((3, 16, 12))
    small = np.full((4, 3), 2.0)
    out = overlay(image, small, alpha=1.0)
    assert out.shape == (16, 12, 3)
    np.testing.assert_array_equal(out, heatmap(np.full((16, 12), 2.0)))      # constant stays constant
    gradient = np.arange(4.0)[:, None] * np.ones((1, 3))                     # rows 0..3
    big = overlay(image, gradient, alpha=1.0, clip_percentile=None)
    reference = heatmap(resize_values(gradient / 3.0, (16, 12)), clip_percentile=None, vmax=1.0)
    np.testing.assert_array_equal(big, reference)


def test_overlay_fade_leaves_unattributed_pixels_alone():
    attr = np.zeros((8, 8))
    attr[2:4, 2:4] = 1.0
    out = overlay(IMAGE, attr, alpha=1.0, fade=True, clip_percentile=None)
    rgb = to_rgb(IMAGE)
    np.testing.assert_array_equal(out[attr == 0], rgb[attr == 0])
    np.testing.assert_array_equal(out[attr == 1], heatmap(attr, clip_percentile=None)[attr == 1])


@pytest.mark.parametrize("alpha", [-0.1, 1.5, "0.5", True])
def test_overlay_bad_alpha(alpha):
    with pytest.raises(VizError, match=r"alpha must be a number in \[0, 1\]"):
        overlay(IMAGE, MAP, alpha=alpha)


def test_overlay_refuses_rgb_reduction():
    with pytest.raises(VizError, match="overlay needs one map per image"):
        overlay(IMAGE, MAP, reduce="rgb")
