"""Resizing (F.interpolate, nn.Upsample), padding modes (F.pad) and pixel shuffles: PyTorch's sizes,
indices and errors over many shapes, the window rules against the exact support of the VJP, and the
integer nearest fast path (and its fusion with a following 3x3 convolution) left as it was."""
import warnings

import numpy as np
import pytest

import saliency as sl
from saliency import nn
from saliency.autograd.windows import Box, input_boxes
from saliency.nn import functional as F

from test_windows import check_op, leaf

torch = pytest.importorskip("torch")
TF = torch.nn.functional

RESIZES = [dict(scale_factor=s) for s in (0.3, 0.5, 2 / 3, 0.75, 1, 1.25, 1.5, 1.7, 2, 2.5, 3, 3.3, 4)]
RESIZES += [dict(scale_factor=s, recompute_scale_factor=True) for s in (0.3, 2 / 3, 1.5, 1.7, 3.3)]
RESIZES += [dict(size=(h, w)) for h, w in [(1, 1), (2, 3), (4, 9), (7, 5), (12, 17), (20, 3)]]
MODES = [("nearest", None), ("bilinear", False), ("bilinear", True)]


@pytest.mark.parametrize("mode, align_corners", MODES)
@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (1, 2, 3, 5), (2, 1, 7, 4), (1, 1, 10, 13)])
def test_interpolate_matches_pytorch_over_sizes_and_factors(shape, mode, align_corners):
    rng = np.random.default_rng(0)
    for kw in RESIZES:
        for dtype in (np.float32, np.float64):
            x = rng.standard_normal(shape).astype(dtype)
            try:
                want = TF.interpolate(torch.tensor(x), mode=mode, align_corners=align_corners, **kw)
            except (RuntimeError, ValueError):
                with pytest.raises(ValueError):
                    F.interpolate(sl.tensor(x), mode=mode, align_corners=align_corners, **kw)
                continue
            got = F.interpolate(sl.tensor(x), mode=mode, align_corners=align_corners, **kw)
            assert got.shape == tuple(want.shape), kw
            tol = 4e-6 if dtype == np.float32 else 1e-13  # float32: the order of the four products
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=tol, err_msg=str(kw))
            if mode == "nearest":  # indices, not weights: exactly the same values
                np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=str(kw))


@pytest.mark.parametrize("mode, align_corners", MODES)
@pytest.mark.parametrize("kw", [dict(scale_factor=1.5), dict(scale_factor=(0.6, 2.5)), dict(size=(4, 7)),
                                dict(size=(20, 5)), dict(scale_factor=3)], ids=str)
def test_resize_window_rule_is_the_support_of_the_vjp(kw, mode, align_corners):
    rng = np.random.default_rng(1)
    check_op(lambda x: F.interpolate(x, mode=mode, align_corners=align_corners, **kw), [leaf(rng, (1, 2, 9, 6))], rng)


def test_nearest_by_an_integer_factor_keeps_its_kernels_and_its_fusion():
    x = sl.tensor(np.random.default_rng(2).standard_normal((1, 2, 3, 4)), requires_grad=True)
    for kw in (dict(scale_factor=3), dict(scale_factor=3.0), dict(size=(9, 12)), dict(scale_factor=(3, 3))):
        node = F.interpolate(x, **kw).grad_fn
        assert node.scale == 3 and node.name() == "UpsampleNearest2DBackward0"
    assert F.interpolate(x, scale_factor=1.5).grad_fn.scale == 0
    assert F.interpolate(x, scale_factor=(2, 3)).grad_fn.scale == 0
    for up in (nn.Upsample(scale_factor=2), nn.Upsample(scale_factor=(2, 2)), nn.Upsample(scale_factor=2.0)):
        model = nn.fuse(nn.Sequential(up, nn.Conv2d(2, 2, 3, padding=1))).double()
        assert model(x).grad_fn.name() == "UpsampleConvolutionBackward0"
    for up in (nn.Upsample(scale_factor=1.5), nn.Upsample(size=(6, 8)), nn.Upsample(scale_factor=(2, 3)),
               nn.Upsample(scale_factor=2, mode="bilinear")):
        model = nn.fuse(nn.Sequential(up, nn.Conv2d(2, 2, 3, padding=1))).double()
        assert model(x).grad_fn.name() == "ConvolutionBackward0"


def test_interpolate_errors_as_pytorch():
    x = sl.tensor(np.ones((1, 1, 4, 4)))
    with pytest.raises(ValueError, match="align_corners option can only be set"):
        F.interpolate(x, scale_factor=2, align_corners=False)
    with pytest.raises(ValueError, match="only one of size or scale_factor"):
        F.interpolate(x, size=3, scale_factor=2)
    with pytest.raises(ValueError, match="either size or scale_factor"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="recompute_scale_factor is not meaningful"):
        F.interpolate(x, size=3, recompute_scale_factor=True)
    with pytest.raises(ValueError, match="one value per spatial dimension"):
        F.interpolate(x, size=(3, 3, 3))
    with pytest.raises(TypeError, match="expected size"):
        F.interpolate(x, size=(3.5, 2))
    for mode, instead in [("bicubic", "bilinear"), ("area", "adaptive_avg_pool2d"), ("nearest-exact", "nearest"),
                          ("trilinear", "bilinear")]:
        with pytest.raises(NotImplementedError, match=f"{mode}.*{instead}"):
            F.interpolate(x, scale_factor=2, mode=mode)
    with pytest.raises(NotImplementedError, match="antialias"):
        F.interpolate(x, scale_factor=0.5, mode="bilinear", antialias=True)
    with pytest.raises(NotImplementedError, match="4-D input"):
        F.interpolate(sl.tensor(np.ones((1, 1, 4))), scale_factor=2)
    with pytest.raises(ValueError, match="greater than 0"):
        F.interpolate(x, scale_factor=0.1)


def test_upsample_aliases_and_layers():
    x = sl.tensor(np.random.default_rng(3).standard_normal((1, 2, 3, 4)))
    with pytest.warns(UserWarning, match="deprecated"):
        y = F.upsample(x, scale_factor=2, mode="bilinear")
    np.testing.assert_array_equal(y.numpy(), F.interpolate(x, scale_factor=2, mode="bilinear").numpy())
    with pytest.warns(UserWarning, match="deprecated"):
        y = F.upsample_bilinear(x, size=(5, 7))
    np.testing.assert_allclose(y.numpy(), TF.interpolate(torch.tensor(x.numpy()), size=(5, 7), mode="bilinear",
                                                         align_corners=True).numpy(), atol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert F.upsample_nearest(x, scale_factor=2).shape == (1, 2, 6, 8)
    for args, kw in [((), dict(scale_factor=2)), ((), dict(scale_factor=(1.5, 2))), (((3, 4),), dict(mode="bilinear")),
                     ((5,), dict(mode="bilinear", align_corners=True, recompute_scale_factor=None))]:
        ours, theirs = nn.Upsample(*args, **kw), torch.nn.Upsample(*args, **kw)
        assert repr(ours) == repr(theirs)
        assert (ours.size, ours.scale_factor, ours.mode, ours.align_corners) == \
            (theirs.size, theirs.scale_factor, theirs.mode, theirs.align_corners)
    assert repr(nn.UpsamplingBilinear2d(scale_factor=2)) == repr(torch.nn.UpsamplingBilinear2d(scale_factor=2))


@pytest.mark.parametrize("mode, pad", [("constant", (2, -1, -3, 2)), ("reflect", (3, 2, 1, 4)),
                                       ("reflect", (-2, 5, 4, -3)), ("replicate", (2, 3, 4, 1)),
                                       ("circular", (3, 1, 2, 2)), ("circular", (-1, 2, 0, 3))], ids=str)
def test_pad_window_rule_is_the_support_of_the_vjp(mode, pad):
    rng = np.random.default_rng(4)
    check_op(lambda x: F.pad(x, pad, mode=mode), [leaf(rng, (1, 2, 7, 6))], rng)


def test_pad_window_of_a_corner_is_its_mirror_or_its_edge():
    x = leaf(np.random.default_rng(5), (1, 1, 6, 6))
    assert input_boxes(F.pad(x, (2, 2, 2, 2), mode="reflect").grad_fn, Box(0, 0, 1, 1)) == (Box(2, 2, 3, 3),)
    assert input_boxes(F.pad(x, (2, 2, 2, 2), mode="replicate").grad_fn, Box(0, 0, 2, 3)) == (Box(0, 0, 1, 1),)
    assert input_boxes(F.pad(x, (2, 2, 2, 2), mode="circular").grad_fn, Box(0, 0, 1, 1)) == (Box(4, 4, 5, 5),)


def test_pad_errors_as_pytorch():
    x = sl.tensor(np.ones((1, 2, 4, 5)))
    with pytest.raises(NotImplementedError, match="padding size 2 is not supported for 4D"):
        F.pad(x, (1, 1), mode="reflect")
    with pytest.raises(NotImplementedError, match="unrecognised padding mode"):
        F.pad(x, (1, 1), mode="edge")
    with pytest.raises(ValueError, match="doesn't take in value"):
        F.pad(x, (1, 1, 1, 1), mode="replicate", value=1.0)
    with pytest.raises(ValueError, match="must be less than the size"):
        F.pad(x, (5, 0, 0, 0), mode="reflect")
    with pytest.raises(ValueError, match="wraps around more than once"):
        F.pad(x, (6, 0, 0, 0), mode="circular")
    with pytest.raises(ValueError, match="divisible by 2"):
        F.pad(x, (1, 2, 3))
    with pytest.raises(ValueError, match="less than or equal to two times"):
        F.pad(x, (1,) * 10)
    with pytest.raises(TypeError, match="tuple of ints"):
        F.pad(x, (1.5, 1))
    with pytest.raises(ValueError, match="crops more than"):
        F.pad(x, (-6, 2))
    assert F.pad(x, (1, 1, 1, 1), mode="reflect", value=0).shape == (1, 2, 6, 7)


@pytest.mark.parametrize("r, shape", [(2, (1, 8, 3, 4)), (3, (2, 9, 2, 3)), (2, (4, 2, 3)), (2, (2, 1, 8, 2, 2))])
def test_pixel_shuffle_and_unshuffle_match_pytorch_and_undo_each_other(r, shape):
    x = np.random.default_rng(6).standard_normal(shape)
    y = F.pixel_shuffle(sl.tensor(x), r)
    np.testing.assert_array_equal(y.numpy(), torch.pixel_shuffle(torch.tensor(x), r).numpy())
    np.testing.assert_array_equal(F.pixel_unshuffle(y, r).numpy(), x)
    np.testing.assert_array_equal(sl.pixel_unshuffle(y, r).numpy(), torch.pixel_unshuffle(torch.tensor(y.numpy()), r).numpy())


@pytest.mark.parametrize("r", [2, 3])
def test_pixel_shuffle_window_rules_are_the_support_of_the_vjp(r):
    rng = np.random.default_rng(7)
    check_op(lambda x: F.pixel_shuffle(x, r), [leaf(rng, (1, 2 * r * r, 4, 5))], rng)
    check_op(lambda x: F.pixel_unshuffle(x, r), [leaf(rng, (1, 2, 4 * r, 3 * r))], rng)


def test_pixel_shuffle_errors_as_pytorch():
    with pytest.raises(ValueError, match="at least 3 dimensions"):
        F.pixel_shuffle(sl.tensor(np.ones((2, 3))), 2)
    with pytest.raises(ValueError, match="divisible by the square of upscale_factor"):
        F.pixel_shuffle(sl.tensor(np.ones((1, 5, 2, 2))), 2)
    with pytest.raises(ValueError, match="positive upscale_factor"):
        F.pixel_shuffle(sl.tensor(np.ones((1, 4, 2, 2))), 0)
    with pytest.raises(ValueError, match="height to be divisible"):
        F.pixel_unshuffle(sl.tensor(np.ones((1, 4, 5, 2))), 2)
    with pytest.raises(ValueError, match="width to be divisible"):
        F.pixel_unshuffle(sl.tensor(np.ones((1, 4, 4, 3))), 2)
    with pytest.raises(TypeError, match="must be int"):
        F.pixel_shuffle(sl.tensor(np.ones((1, 4, 2, 2))), 2.0)
    assert repr(nn.PixelShuffle(2)) == repr(torch.nn.PixelShuffle(2))
    assert repr(nn.PixelUnshuffle(3)) == repr(torch.nn.PixelUnshuffle(3))
