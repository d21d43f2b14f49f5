"""The windowed-gradient kernels against plain NumPy: place each window into a padded full map."""
import numpy as np
import pytest

from saliency import kernels
from saliency.kernels import window

from . import _reference as ref

PAD = 8  # margin of the padded map the references place windows in


def place(data, origins, H, W):
    """Dense (K, L, H, W) from windows (K, L, h, w) at origins: the reference for add_into."""
    K, L, h, w = data.shape
    big = np.zeros((K, L, H + 2 * PAD + h, W + 2 * PAD + w), data.dtype)
    for k, (r, c) in enumerate(origins):
        big[k, :, r + PAD:r + PAD + h, c + PAD:c + PAD + w] += data[k]
    return big[:, :, PAD:PAD + H, PAD:PAD + W]


def cut(full, origins, h, w):
    """Windows (K, L, h, w) of a dense (K, L, H, W) at origins, zero outside: the reference for gather."""
    K, L, H, W = full.shape
    big = np.zeros((K, L, H + 2 * PAD + h, W + 2 * PAD + w), full.dtype)
    big[:, :, PAD:PAD + H, PAD:PAD + W] = full
    return np.stack([big[k, :, r + PAD:r + PAD + h, c + PAD:c + PAD + w] for k, (r, c) in enumerate(origins)])


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def origins_for(rng, K, H, W, h, w):
    """Inside, at every border and past the corners."""
    fixed = [(0, 0), (-2, -1), (H - h + 1, W - w + 2), (-1, W - w), (H - h, -3)]
    rand = [(int(rng.integers(-2, H - h + 3)), int(rng.integers(-2, W - w + 3))) for _ in range(K - len(fixed))]
    return np.array(fixed + rand, np.int64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gather_add_clip_against_numpy(rng, dtype):
    K, L, H, W, h, w = 9, 3, 11, 13, 4, 5
    origins = origins_for(rng, K, H, W, h, w)
    src = rng.normal(size=(L, H, W)).astype(dtype)
    got = window.gather(src, origins, (h, w))
    np.testing.assert_array_equal(got, cut(np.broadcast_to(src, (K, L, H, W)), origins, h, w))
    mask = src > 0
    np.testing.assert_array_equal(window.gather(mask, origins, (h, w)), cut(np.broadcast_to(mask, (K, L, H, W)),
                                                                              origins, h, w).astype(np.uint8))
    data = rng.normal(size=(K, L, h, w)).astype(dtype)
    dst = rng.normal(size=(K, L, H, W)).astype(dtype)
    expect = dst + place(data, origins, H, W)
    np.testing.assert_allclose(window.add_into(dst, data, origins), expect, rtol=1e-6)
    clipped = window.clip(data.copy(), origins, (H, W))
    np.testing.assert_array_equal(clipped, cut(place(data, origins, H, W), origins, h, w))


def test_support_is_the_bounding_box_of_the_non_zero_cells(rng):
    g = np.zeros((4, 2, 9, 10))
    g[0, 1, 3, 4] = 1.0
    g[1, 0, 0, 9] = -2.0
    g[1, 1, 8, 0] = 0.5
    g[2, 0, 5, 5] = np.nan
    np.testing.assert_array_equal(window.support(g), [[3, 4, 4, 5], [0, 0, 9, 10], [5, 5, 6, 6], [0, 0, 0, 0]])


@pytest.mark.parametrize("mode,scale", [("nearest", 2), ("nearest", 3), ("bilinear", 2), ("bilinear", 3)])
def test_resample_grad_is_the_dense_adjoint_on_windows(rng, mode, scale):
    K, L, H, W, h, w = 7, 2, 6, 7, 5, 4
    OH, OW = H * scale, W * scale
    origins = origins_for(rng, K, OH, OW, h, w)
    g = place(rng.normal(size=(K, L, h, w)), origins, OH, OW)
    g_win = cut(g, origins, h, w)
    rows = kernels.resample_table(H, scale, mode, np.float64)
    cols = kernels.resample_table(W, scale, mode, np.float64)
    dx, origins_in = window.resample_grad(g_win, origins, (OH, OW), rows, cols)
    up = ref.upsample_nearest if mode == "nearest" else ref.upsample_bilinear
    # the adjoint of the reference upsampling, by its matrix: dx = U^T g
    basis = np.eye(H * W).reshape(H * W, 1, H, W)
    U = up(basis, scale).reshape(H * W, OH * OW)
    dense = (g.reshape(K * L, OH * OW) @ U.T).reshape(K, L, H, W)
    np.testing.assert_allclose(place(dx, origins_in, H, W), dense, rtol=0, atol=1e-12)


def test_max_pool_grad_sends_each_cell_to_its_recorded_maximum(rng):
    K, N, C, H, W = 6, 2, 3, 11, 9
    x = rng.normal(size=(N, C, H, W))
    out, idx = kernels.max_pool2d_forward(x, 3, 2, 1)
    OH, OW = out.shape[2:]
    h, w = 3, 2
    origins = origins_for(rng, K, OH, OW, h, w)
    g = place(rng.normal(size=(K, N * C, h, w)), origins, OH, OW)
    origins_in = origins * 2 - 1
    size = ((h - 1) * 2 + 3, (w - 1) * 2 + 3)
    dx = window.max_pool_grad(cut(g, origins, h, w).reshape(K, N, C, h, w), origins, idx, W, origins_in, size)
    dense = np.stack([ref.max_pool2d_grad_input(gk, idx, x.shape) for gk in g.reshape(K, N, C, OH, OW)])
    np.testing.assert_allclose(place(dx.reshape(K, N * C, *size), origins_in, H, W),
                               dense.reshape(K, N * C, H, W), rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.bool_])
def test_times_window_multiplies_by_the_gathered_windows(rng, dtype):
    K, L, H, W, h, w = 8, 3, 9, 12, 5, 4
    origins = origins_for(rng, K, H, W, h, w)
    src = (rng.normal(size=(L, H, W)) > 0) if dtype is np.bool_ else rng.normal(size=(L, H, W)).astype(dtype)
    g = rng.normal(size=(K, L, h, w)).astype(np.float32)
    expect = g * cut(np.broadcast_to(src, (K, L, H, W)).astype(np.float64), origins, h, w)
    np.testing.assert_allclose(window.times_window(g, src, origins), expect, rtol=1e-6, atol=0)


@pytest.mark.parametrize("scale", [2, 3])
def test_nearest_grad_is_the_dense_adjoint_on_windows(rng, scale):
    K, L, H, W, h, w = 9, 2, 5, 6, 5, 4
    OH, OW = H * scale, W * scale
    origins = origins_for(rng, K, OH, OW, h, w)
    g = place(rng.normal(size=(K, L, h, w)), origins, OH, OW)
    dx, origins_in = window.nearest_grad(cut(g, origins, h, w), origins, scale)
    dense = g.reshape(K, L, H, scale, W, scale).sum(axis=(3, 5))
    np.testing.assert_allclose(place(dx, origins_in, H, W), dense, rtol=0, atol=1e-12)
