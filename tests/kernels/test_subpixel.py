"""Sub-pixel convolution (nearest upsample then 3x3 conv) against "upsample, then conv2d"."""
import numpy as np
import pytest

from saliency.kernels import conv2d as K
from saliency.kernels import resize
from saliency.kernels import subpixel as S

from . import _reference as ref

# N, C, O, H, W, scale: odd and non-square sizes, 1x1 images, scale 3.
CASES = [(1, 3, 4, 5, 6, 2), (2, 4, 5, 4, 3, 2), (1, 2, 1, 1, 1, 2), (2, 2, 3, 3, 4, 3)]
IDS = [f"N{c[0]}C{c[1]}O{c[2]}_{c[3]}x{c[4]}_s{c[5]}" for c in CASES]
TOL = {np.float32: dict(rtol=1e-4, atol=1e-4), np.float64: dict(rtol=1e-10, atol=1e-10)}


def make(case, dtype, rng, seeds=()):
    N, C, O, H, W, s = case
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    w = rng.standard_normal((O, C, 3, 3)).astype(dtype)
    b = rng.standard_normal(O).astype(dtype)
    g = rng.standard_normal(seeds + (N, O, s * H, s * W)).astype(dtype)
    return x, w, b, g, s


def upsample_grad(g, s):
    """Adjoint of nearest upsampling: sum of each s x s block."""
    return g.reshape(g.shape[:-2] + (g.shape[-2] // s, s, g.shape[-1] // s, s)).sum(axis=(-3, -1))


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matches_upsample_then_conv2d_reference(case, dtype):
    rng = np.random.default_rng(0)
    x, w, b, g, s = make(case, dtype, rng, seeds=(2,))
    u = ref.upsample_nearest(x, s)
    y = S.upsample_conv2d_forward(x, w, b, s)
    assert y.dtype == dtype and y.shape == g.shape[1:]
    np.testing.assert_allclose(y, ref.conv2d(u, w, b, 1, 1), **TOL[dtype])
    dx = S.upsample_conv2d_grad_input(g, w, x.shape, s)
    assert dx.dtype == dtype and dx.shape == (2,) + x.shape
    dw = S.upsample_conv2d_grad_weight(g, x, w.shape, s)
    assert dw.dtype == dtype and dw.shape == (2,) + w.shape
    for k in range(2):
        np.testing.assert_allclose(dx[k], upsample_grad(ref.conv2d_grad_input(g[k], w, u.shape, 1, 1), s), **TOL[dtype])
        np.testing.assert_allclose(dw[k], ref.conv2d_grad_weight(g[k], u, w.shape, 1, 1), **TOL[dtype])


@pytest.mark.parametrize("case", CASES[:2], ids=IDS[:2])
def test_matches_the_kernels_composition_with_seed_dimensions(case):
    """Against resize.upsample_nearest2d_* composed with conv2d (correlation formulation), seeds (2, 3)."""
    rng = np.random.default_rng(1)
    x, w, b, g, s = make(case, np.float64, rng, seeds=(2, 3))
    u = resize.upsample_nearest2d_forward(x, s)
    np.testing.assert_allclose(S.upsample_conv2d_forward(x, w, b, s),
                               K.conv2d_forward(u, w, b, 1, 1, algorithm=K.ConvAlgorithm.DIRECT), rtol=1e-12, atol=1e-12)
    du = K.conv2d_grad_input(g, w, u.shape, 1, 1, algorithm=K.ConvAlgorithm.DIRECT)
    np.testing.assert_allclose(S.upsample_conv2d_grad_input(g, w, x.shape, s),
                               resize.upsample_nearest2d_grad_input(du, x.shape, s), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(S.upsample_conv2d_grad_weight(g, x, w.shape, s),
                               K.conv2d_grad_weight(g, u, w.shape, 1, 1, algorithm=K.ConvAlgorithm.DIRECT),
                               rtol=1e-12, atol=1e-12)


def test_vjps_satisfy_directional_finite_differences():
    rng = np.random.default_rng(2)
    x, w, b, _, s = make(CASES[1], np.float64, rng)
    ref.check_vjp(lambda x_: S.upsample_conv2d_forward(x_, w, b, s),
                  lambda v: S.upsample_conv2d_grad_input(v, w, x.shape, s), x, rng)
    ref.check_vjp(lambda w_: S.upsample_conv2d_forward(x, w_, b, s),
                  lambda v: S.upsample_conv2d_grad_weight(v, x, w.shape, s), w, rng)


def test_phase_weights_sum_the_taps_that_land_on_each_low_resolution_pixel():
    w = np.arange(9.0).reshape(1, 1, 3, 3)
    wph = S.phase_weights(w, 2)[:, :, 0, 0]
    # phase 0 reads rows i-1 (tap 0) and i (taps 1, 2); phase 1 reads row i (taps 0, 1) and i+1 (tap 2)
    np.testing.assert_array_equal(wph[0, 0], [[0, 1 + 2], [3 + 6, 4 + 5 + 7 + 8]])
    np.testing.assert_array_equal(wph[1, 1], [[0 + 1 + 3 + 4, 2 + 5], [6 + 7, 8]])
    assert wph.sum() == 4 * w.sum()


def test_nan_propagates_only_to_the_pixels_it_reaches():
    x = np.zeros((1, 1, 4, 4))
    x[0, 0, 1, 1] = np.nan
    y = S.upsample_conv2d_forward(x, np.ones((1, 1, 3, 3)), None, 2)
    # upsampled NaN block is rows/cols 2..3, the 3x3 conv spreads it to 1..4
    assert np.isnan(y[0, 0, 1:5, 1:5]).all() and np.isnan(y).sum() == 16


@pytest.mark.parametrize("call, message", [
    (lambda: S.upsample_conv2d_forward(np.zeros((1, 2, 4, 4)), np.zeros((3, 2, 5, 5))), "3, 3"),
    (lambda: S.upsample_conv2d_forward(np.zeros((1, 2, 4, 4)), np.zeros((3, 2, 3, 3)), scale=1), "scale"),
    (lambda: S.upsample_conv2d_forward(np.zeros((1, 2, 4, 4), np.float32), np.zeros((3, 2, 3, 3))), "one dtype"),
    (lambda: S.upsample_conv2d_grad_input(np.zeros((1, 3, 4, 4)), np.zeros((3, 2, 3, 3)), (1, 2, 4, 4)),
     "g must have shape"),
])
def test_bad_arguments_raise_clear_errors(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call()


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_input_vjp_in_chunks_of_images_equals_per_seed_calls(case, monkeypatch):
    """The wrapper builds its patches a few images at a time (im2col.CHUNK_BYTES); with one image
    per chunk the seed-batched VJP still equals one call per seed."""
    from saliency.kernels import im2col
    rng = np.random.default_rng(5)
    x, w, b, g, s = make(case, np.float64, rng, seeds=(3,))
    monkeypatch.setattr(im2col, "CHUNK_BYTES", 1)
    dx = S.upsample_conv2d_grad_input(g, w, x.shape, s)
    for k in range(3):
        np.testing.assert_allclose(dx[k], ref.conv2d_grad_input(g[k], w, ref.upsample_nearest(x, s).shape, 1, 1)
                                   .reshape(x.shape[:2] + (x.shape[2], s, x.shape[3], s)).sum(axis=(3, 5)),
                                   rtol=1e-10, atol=1e-10)
