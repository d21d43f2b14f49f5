"""saliency.viz.normalize: shapes, channel reductions, sign modes, percentile scaling, common scales."""

import numpy as np
import pytest

from saliency.viz import (
    VizError,
    apply_sign,
    common_scale,
    normalize,
    normalize_with_scale,
    reduce_channels,
)

SIGNED = np.array([[-4.0, -1.0], [0.0, 2.0]])


# --- sign modes -------------------------------------------------------------------------------

def test_sign_abs_positive_negative_on_known_values():
    np.testing.assert_array_equal(apply_sign(SIGNED, "abs"), [[4.0, 1.0], [0.0, 2.0]])
    np.testing.assert_array_equal(apply_sign(SIGNED, "positive"), [[0.0, 0.0], [0.0, 2.0]])
    np.testing.assert_array_equal(apply_sign(SIGNED, "negative"), [[4.0, 1.0], [0.0, 0.0]])
    np.testing.assert_array_equal(apply_sign(SIGNED, "all"), SIGNED)


def test_normalize_positive_keeps_only_positive_values():
    out = normalize(SIGNED, sign="positive", clip_percentile=None)
    np.testing.assert_allclose(out, [[0.0, 0.0], [0.0, 1.0]], rtol=0, atol=1e-12)


def test_normalize_negative_gives_magnitudes_of_the_negative_part():
    out = normalize(SIGNED, sign="negative", clip_percentile=None)
    np.testing.assert_allclose(out, [[1.0, 0.25], [0.0, 0.0]], rtol=0, atol=1e-12)
    assert out.min() >= 0.0


def test_normalize_all_is_signed_with_symmetric_limits():
    out, scale = normalize_with_scale(SIGNED, sign="all", clip_percentile=None)
    assert scale == 4.0
    np.testing.assert_allclose(out, SIGNED / 4.0, rtol=0, atol=1e-12)
    # the limits are symmetric: +2 with a scale of 4 is 0.5, not 1 (it would be 1 with [min, max] limits)
    assert out[1, 1] == 0.5 and out.min() == -1.0


def test_normalize_abs_is_in_unit_interval():
    out = normalize(np.random.default_rng(0).normal(size=(3, 7, 5)), sign="abs")
    assert out.shape == (7, 5) and out.dtype == np.float64
    assert out.min() >= 0.0 and out.max() == 1.0


@pytest.mark.parametrize("sign", ["ABS", "pos", None, 1])
def test_unknown_sign_is_a_viz_error_naming_the_choices(sign):
    with pytest.raises(VizError, match=r"unknown sign .*choose one of: abs, positive, negative, all"):
        normalize(SIGNED, sign=sign)


# --- reductions -------------------------------------------------------------------------------

def test_reduce_sum_adds_the_channels():
    attr = np.stack([SIGNED, 2 * SIGNED, -SIGNED])
    np.testing.assert_array_equal(reduce_channels(attr, "sum"), 2 * SIGNED)


def test_reduce_max_abs_keeps_the_sign_of_the_largest_magnitude():
    attr = np.array([[[1.0, -5.0]], [[-3.0, 2.0]], [[2.0, 4.0]]])          # (3, 1, 2)
    np.testing.assert_array_equal(reduce_channels(attr, "max_abs"), [[-3.0, -5.0]])


def test_reduce_rgb_gives_three_maps_on_one_scale():
    attr = np.stack([np.full((2, 2), 1.0), np.full((2, 2), 2.0), np.full((2, 2), 4.0)])
    out, scale = normalize_with_scale(attr, reduce="rgb", clip_percentile=None)
    assert out.shape == (3, 2, 2) and scale == 4.0
    np.testing.assert_allclose(out[:, 0, 0], [0.25, 0.5, 1.0], rtol=0, atol=1e-12)


def test_reduce_rgb_needs_three_channels():
    with pytest.raises(VizError, match="reduce='rgb' needs a map with 3 channels, got 2"):
        reduce_channels(np.zeros((2, 4, 4)), "rgb")


def test_unknown_reduction_is_a_viz_error():
    with pytest.raises(VizError, match="unknown reduce 'mean'"):
        reduce_channels(np.zeros((4, 4)), "mean")


# --- accepted shapes --------------------------------------------------------------------------

def test_accepted_shapes_give_the_same_map():
    base = np.random.default_rng(1).normal(size=(5, 6))
    expected = normalize(base)
    np.testing.assert_array_equal(normalize(base[None]), expected)            # (C, H, W) with C = 1
    np.testing.assert_array_equal(normalize(base[None, None]), expected)      # (1, C, H, W)
    np.testing.assert_array_equal(normalize(base.astype(np.float32).tolist()), normalize(base.astype(np.float32)))
    three = np.stack([base, base, base])
    np.testing.assert_array_equal(normalize(three[None]), normalize(three))


def test_integer_maps_are_accepted():
    np.testing.assert_allclose(normalize(np.array([[0, 2], [4, 8]]), clip_percentile=None),
                               [[0.0, 0.25], [0.5, 1.0]], rtol=0, atol=1e-12)


@pytest.mark.parametrize("shape", [(5,), (2, 1, 3, 4, 4), (0, 4), (3, 0, 4)])
def test_bad_shapes_are_one_clear_viz_error(shape):
    with pytest.raises(VizError, match=r"^attr must have shape \(H, W\), \(C, H, W\) or \(1, C, H, W\)") as info:
        normalize(np.zeros(shape))
    assert str(shape) in str(info.value)


def test_a_batch_of_maps_is_refused_with_the_fix():
    with pytest.raises(VizError, match=r"attr has a batch of 2 maps \(shape \(2, 3, 4, 4\)\); pass one map, e\.g\. attr\[0\]"):
        normalize(np.zeros((2, 3, 4, 4)))


def test_non_finite_and_non_numeric_maps_are_refused():
    bad = np.ones((3, 3))
    bad[0, 0], bad[1, 1] = np.nan, np.inf
    with pytest.raises(VizError, match="attr holds 2 NaN or infinite values"):
        normalize(bad)
    with pytest.raises(VizError, match="attr must hold real numbers, got dtype bool"):
        normalize(np.ones((3, 3), dtype=bool))
    with pytest.raises(VizError, match="attr must hold real numbers, got dtype complex128"):
        normalize(np.ones((3, 3), dtype=complex))


def test_extreme_values_render_or_fail_clearly_without_warnings():
    huge = np.full((3, 2, 2), 1e308)                       # finite channels whose sum is not
    with pytest.raises(VizError, match="channel sum of attr overflows float64"):
        normalize(huge)
    np.testing.assert_array_equal(normalize(huge, reduce="max_abs"), np.ones((2, 2)))
    np.testing.assert_array_equal(normalize(np.array([[1e-300, 1e300]]), clip_percentile=None), [[0.0, 1.0]])
    np.testing.assert_array_equal(normalize(np.full((1, 1), 5e-324), sign="all"), [[1.0]])


# --- constant and zero maps -------------------------------------------------------------------

@pytest.mark.parametrize("sign", ["abs", "positive", "negative", "all"])
def test_all_zero_map_is_zero_with_no_warning(sign):
    out, scale = normalize_with_scale(np.zeros((3, 4, 4)), sign=sign)
    assert scale == 0.0
    assert np.isfinite(out).all()
    np.testing.assert_array_equal(out, np.zeros((4, 4)))


@pytest.mark.parametrize("sign, expected", [("abs", 1.0), ("positive", 1.0), ("negative", 0.0), ("all", 1.0)])
def test_constant_positive_map_is_full_scale_where_it_shows(sign, expected):
    out = normalize(np.full((4, 4), 3.0), sign=sign)
    np.testing.assert_array_equal(out, np.full((4, 4), expected))


def test_constant_negative_map_with_sign_all_is_minus_one():
    np.testing.assert_array_equal(normalize(np.full((4, 4), -0.5), sign="all"), np.full((4, 4), -1.0))


# --- percentile clipping ----------------------------------------------------------------------

def test_percentile_clipping_saturates_the_outlier():
    values = np.arange(1.0, 101.0).reshape(10, 10)           # 1..100
    out, scale = normalize_with_scale(values, clip_percentile=50)
    assert scale == pytest.approx(np.percentile(values, 50), rel=1e-12)
    assert (out[values >= scale] == 1.0).all()
    np.testing.assert_allclose(out[values < scale], values[values < scale] / scale, rtol=1e-12, atol=0)
    unclipped, top = normalize_with_scale(values, clip_percentile=None)
    assert top == 100.0 and (unclipped == 1.0).sum() == 1


def test_percentile_of_a_sparse_map_falls_back_to_the_maximum():
    values = np.zeros((10, 10))
    values[0, 0] = 7.0                                        # the 90th percentile is 0
    out, scale = normalize_with_scale(values, clip_percentile=90)
    assert scale == 7.0 and out[0, 0] == 1.0


@pytest.mark.parametrize("bad", [0, -5, 101, float("nan"), "99", True])
def test_bad_clip_percentile_is_refused(bad):
    with pytest.raises(VizError, match=r"clip_percentile must be a number in \(0, 100\] or None"):
        normalize(SIGNED, clip_percentile=bad)


# --- explicit and common scales ---------------------------------------------------------------

def test_explicit_vmax_divides_and_clips():
    out = normalize(SIGNED, sign="all", vmax=2.0)
    np.testing.assert_allclose(out, [[-1.0, -0.5], [0.0, 1.0]], rtol=0, atol=1e-12)


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), "1", False])
def test_bad_vmax_is_refused(bad):
    with pytest.raises(VizError, match="vmax must be a finite number > 0"):
        normalize(SIGNED, vmax=bad)


def test_common_scale_makes_maps_comparable():
    a = np.random.default_rng(2).normal(size=(6, 6))
    # each on its own scale, a map and twice the map look the same
    np.testing.assert_allclose(normalize(a), normalize(2 * a), rtol=0, atol=1e-12)
    vmax = common_scale([a, 2 * a], clip_percentile=None)
    assert vmax == pytest.approx(2 * np.abs(a).max(), rel=1e-12)
    half, full = normalize(a, vmax=vmax), normalize(2 * a, vmax=vmax)
    np.testing.assert_allclose(half, full / 2, rtol=0, atol=1e-12)
    assert full.max() == pytest.approx(1.0, abs=1e-12)


def test_common_scale_of_zero_maps_is_one_and_usable():
    assert common_scale([np.zeros((3, 3)), np.zeros((1, 3, 3))]) == 1.0
    np.testing.assert_array_equal(normalize(np.zeros((3, 3)), vmax=common_scale([np.zeros((3, 3))])),
                                  np.zeros((3, 3)))


def test_common_scale_follows_sign_and_reduce():
    a = np.array([[[-8.0, 1.0]], [[2.0, 1.0]]])                             # (2, 1, 2)
    assert common_scale([a], sign="positive", clip_percentile=None) == 2.0  # sum: [-6, 2]
    assert common_scale([a], sign="negative", clip_percentile=None) == 6.0
    assert common_scale([a], reduce="max_abs", clip_percentile=None) == 8.0


def test_common_scale_wants_a_non_empty_list():
    with pytest.raises(VizError, match=r"maps must be a list of maps, got ndarray; wrap a single map as \[attr\]"):
        common_scale(np.zeros((3, 3)))
    with pytest.raises(VizError, match="maps is empty; pass at least one map"):
        common_scale([])
