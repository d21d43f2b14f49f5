"""Linear imputation against the ROAD authors' NoisyLinearImputer (noise=0, stored by
fixtures/make_road_fixture.py) and against the equations it solves, written out in NumPy."""
from pathlib import Path

import numba
import numpy as np
import pytest

from saliency.kernels import impute
from saliency.kernels.impute import linear_impute

FIXTURE = Path(__file__).parent / "fixtures" / "road_imputation.npz"
EDGE, CORNER = 1 / 6, 1 / 12


def _cases():
    with np.load(FIXTURE) as f:
        return [tuple(str(v) for v in row) for row in f["cases"]]


def residuals(out, keep):
    """(in-image weight) * x - (weighted sum of in-image neighbours), at every pixel of out (N, C, H, W)."""
    N, C, H, W = out.shape
    padded = np.zeros((N, C, H + 2, W + 2))
    padded[:, :, 1:-1, 1:-1] = out
    inside = np.zeros((H + 2, W + 2))
    inside[1:-1, 1:-1] = 1.0
    total = np.zeros_like(out)
    weight = np.zeros((H, W))
    for dr in (-1, 0, 1):
        for dc in (-1, 0, 1):
            if dr == dc == 0:
                continue
            w = EDGE if dr == 0 or dc == 0 else CORNER
            total += w * padded[:, :, 1 + dr:H + 1 + dr, 1 + dc:W + 1 + dc]
            weight += w * inside[1 + dr:H + 1 + dr, 1 + dc:W + 1 + dc]
    return weight * out - total


@pytest.mark.parametrize("case, image, mask", _cases())
def test_equals_the_road_reference(case, image, mask):
    with np.load(FIXTURE) as f:
        x, keep, imputed = f[f"image_{image}"], f[f"keep_{mask}"], f[f"imputed_{case}"]
    if numba.config.DISABLE_JIT and (~keep).sum() > 1000:
        pytest.skip("with NUMBA_DISABLE_JIT (plain Python) this solve takes seconds; the smaller cases run")
    out = linear_impute(x[None], keep[None])[0]
    assert out.dtype == np.float64 and out.shape == x.shape
    # the reference returns float32: within its rounding (about 6e-8 for values in [0, 1])
    np.testing.assert_allclose(out[:, ~keep], imputed, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(out[:, keep], x[:, keep])


@pytest.mark.parametrize("shape, removed", [((2, 3, 20, 23), 0.6), ((1, 2, 5, 30), 0.8), ((1, 1, 30, 5), 0.8),
                                            ((3, 1, 1, 9), 0.5), ((1, 4, 7, 1), 0.5), ((1, 3, 9, 9), 0.97)])
def test_removed_pixels_solve_their_equations_and_kept_ones_stay(shape, removed):
    rng = np.random.default_rng(sum(shape))
    x = rng.random(shape)
    keep = rng.random((shape[0],) + shape[2:]) >= removed
    keep[:, 0, 0] = True                                     # never every pixel removed
    keep[0, -1, -1] = False
    out = linear_impute(x, keep)
    assert out.shape == x.shape and out.dtype == np.float64
    for n in range(shape[0]):
        np.testing.assert_array_equal(out[n][:, keep[n]], x[n][:, keep[n]])
        assert np.abs(residuals(out[n:n + 1], keep[n:n + 1])[0][:, ~keep[n]]).max() < 1e-12
    assert np.all((out >= x.min() - 1e-12) & (out <= x.max() + 1e-12))   # means of neighbours


def test_each_image_of_a_batch_is_solved_on_its_own():
    rng = np.random.default_rng(1)
    x = rng.random((3, 2, 11, 8))
    keep = rng.random((3, 11, 8)) >= 0.5
    keep[1] = True                                           # nothing removed in the middle one
    out = linear_impute(x, keep)
    for n in range(3):
        np.testing.assert_array_equal(out[n], linear_impute(x[n:n + 1], keep[n:n + 1])[0])
    np.testing.assert_array_equal(out[1], x[1])


@pytest.mark.parametrize("channels", [3, 4, 7])
def test_channels_solved_three_at_once_equal_channels_solved_alone(channels):
    rng = np.random.default_rng(channels)
    x = rng.random((2, channels, 15, 12))
    keep = rng.random((2, 15, 12)) >= 0.7
    keep[:, 0, 0] = True
    alone = np.concatenate([linear_impute(x[:, c:c + 1], keep) for c in range(channels)], axis=1)
    np.testing.assert_allclose(linear_impute(x, keep), alone, rtol=0, atol=1e-14)


def test_strided_input_gives_the_same_result():
    rng = np.random.default_rng(5)
    x = rng.random((2, 10, 9, 3)).transpose(0, 3, 1, 2)      # (2, 3, 10, 9), not contiguous
    keep = np.asfortranarray(rng.random((2, 10, 9)) >= 0.5)
    keep[:, 0, 0] = True
    np.testing.assert_array_equal(linear_impute(x, keep), linear_impute(np.ascontiguousarray(x), keep.copy()))


def test_nothing_removed_returns_a_float64_copy():
    x = np.random.default_rng(2).random((2, 3, 6, 5)).astype(np.float32)
    out = linear_impute(x, np.ones((2, 6, 5), bool))
    assert out.dtype == np.float64 and out is not x
    np.testing.assert_array_equal(out, x.astype(np.float64))
    assert linear_impute(np.zeros((0, 3, 4, 4)), np.zeros((0, 4, 4), bool)).shape == (0, 3, 4, 4)


def test_float32_input_is_solved_in_float64():
    rng = np.random.default_rng(3)
    x = rng.random((2, 3, 12, 10)).astype(np.float32)
    keep = rng.random((2, 12, 10)) >= 0.5
    keep[:, 0, 0] = True
    out = linear_impute(x, keep)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, linear_impute(x.astype(np.float64), keep))


def test_every_pixel_removed_raises():
    keep = np.ones((3, 4, 4), bool)
    keep[2] = False
    with pytest.raises(ValueError, match="keep removes every pixel of image 2"):
        linear_impute(np.zeros((3, 1, 4, 4)), keep)


@pytest.mark.parametrize("images, keep, error, match", [
    (np.zeros((3, 4, 4)), np.ones((3, 4, 4), bool), ValueError, r"images must have shape \(N, C, H, W\), got shape"),
    (np.zeros((2, 1, 4, 4)), np.ones((2, 4, 5), bool), ValueError, r"keep must have shape \(2, 4, 4\)"),
    (np.zeros((2, 1, 4, 4)), np.ones((2, 1, 4, 4), bool), ValueError, r"keep must have shape"),
    (np.zeros((1, 1, 4, 4), np.int64), np.ones((1, 4, 4), bool), TypeError, "images must be float32 or float64"),
    (np.zeros((1, 1, 4, 4)), np.ones((1, 4, 4)), TypeError, r"keep must be a bool array"),
])
def test_bad_arguments_raise(images, keep, error, match):
    with pytest.raises(error, match=match):
        linear_impute(images, keep)


def test_the_compiled_kernel_equals_its_python_function():
    rng = np.random.default_rng(4)
    x = rng.random((2, 3, 9, 7))
    keep = rng.random((2, 9, 7)) >= 0.6
    keep[:, 0, 0] = True
    compiled, python = x.copy(), x.copy()
    impute._impute(compiled, keep)
    getattr(impute._impute, "py_func", impute._impute)(python, keep)   # NUMBA_DISABLE_JIT
    np.testing.assert_allclose(compiled, python, rtol=0, atol=1e-14)
