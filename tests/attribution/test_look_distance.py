"""jacobian_rows and look_distance: against single-pixel gradients, brute force and the closed form of box filters."""
import numpy as np
import pytest
from _attribution_models import make_cnn, make_dense, randomize

from saliency import nn
from saliency.attribution import (
    SeedError,
    _core,
    gradient,
    jacobian_rows,
    look_distance,
    receptive_field,
    seeds,
    smoothgrad,
)
from saliency.attribution.look import default_stride, mass_spread


def box_filters(n):
    """n linear 3x3 box filters: weights 1/9, padding 1, no bias, no activation."""
    model = nn.Sequential(*[nn.Conv2d(1, 1, 3, padding=1, bias=False) for _ in range(n)]).double()
    for p in model.parameters():
        p.data = np.full(p.shape, 1 / 9)
    return model


def brute_radius(mass, centre, fraction):
    """The smallest distance d of a pixel such that the pixels within d hold >= fraction of the mass."""
    ii, jj = np.indices(mass.shape)
    d = np.sqrt((ii - centre[0]) ** 2 + (jj - centre[1]) ** 2)
    if not mass.sum() > 0:
        return np.nan
    for r in np.unique(d):
        if mass[d <= r].sum() >= fraction * mass.sum() * (1 - 1e-12):
            return r
    raise AssertionError("unreachable")


def dense_cnn(seed=0):
    """Conv, ReLU, max pool, stride-2 conv, bilinear upsampling x4, conv: (N, 3, 16, 16) -> (N, 2, 16, 16)."""
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(4, 4, 3, stride=2, padding=1), nn.ReLU(),
                          nn.Upsample(scale_factor=4, mode="bilinear"), nn.Conv2d(4, 2, 3, padding=1))
    return randomize(model, seed)


# ---------------------------------------------------------------- box filters: closed form and brute force

@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_box_filters_spread_is_the_closed_form_and_radii_are_brute_force(n):
    size = 2 * n + 9
    x = np.random.default_rng(n).random((1, size, size))
    look = look_distance(box_filters(n), x, stride=1)
    assert look.radius50.shape == (size, size) and look.std_rows.shape == (size, size)
    inside = slice(n, size - n)                     # pixels whose field (2n + 1 wide) stays in the image
    sigma = np.sqrt(2 * n / 3)                       # n-fold 3-tap box: variance n * 2/3 per axis
    np.testing.assert_allclose(look.std_rows[inside, inside], sigma, rtol=0, atol=1e-6)
    np.testing.assert_allclose(look.std_cols[inside, inside], sigma, rtol=0, atol=1e-6)
    maps = jacobian_rows(box_filters(n), x, [(r, c) for r in range(size) for c in range(size)])
    for k, (r, c) in enumerate((r, c) for r in range(size) for c in range(size)):
        mass = np.abs(maps[k]).sum(axis=0)
        assert look.radius50[r, c] == brute_radius(mass, (r, c), 0.5)
        assert look.radius90[r, c] == brute_radius(mass, (r, c), 0.9)
        rows = mass.sum(axis=1) / mass.sum()
        mean = (rows * np.arange(size)).sum()
        np.testing.assert_allclose(look.std_rows[r, c], np.sqrt((rows * (np.arange(size) - mean) ** 2).sum()),
                                   rtol=1e-12)
    # the corner's field is cut by the border: a smaller spread than the interior's
    assert look.std_rows[0, 0] < sigma and look.radius90[0, 0] <= look.radius90[size // 2, size // 2]


def test_mass_spread_of_known_distributions():
    m = np.zeros((2, 5, 7))
    m[0, 1, 3] = m[0, 3, 3] = 1.0                    # rows 1 and 3: std 1 along rows, 0 along columns
    out = mass_spread(m)
    np.testing.assert_allclose(out[0], [1.0, 0.0], atol=1e-15)
    assert np.isnan(out[1]).all()


# ---------------------------------------------------------------- jacobian_rows

BORDER_PIXELS = [(0, 0), (0, 15), (15, 0), (15, 15), (7, 0), (0, 9), (8, 8)]


@pytest.mark.parametrize("chunk", [None, 1, 3, 4, 100])
def test_jacobian_rows_equal_single_pixel_gradients(chunk):
    model = dense_cnn()
    x = np.random.default_rng(1).standard_normal((2, 3, 16, 16))
    rows = jacobian_rows(model, x, BORDER_PIXELS, chunk=chunk)
    assert rows.shape == (7, 2, 3, 16, 16) and rows.dtype == np.float64
    for k, p in enumerate(BORDER_PIXELS):
        np.testing.assert_allclose(rows[k], gradient(model, x, seeds.pixel(*p)).map, rtol=1e-12, atol=1e-12)
    one = jacobian_rows(model, x[1], BORDER_PIXELS, chunk=chunk, channel=1)
    assert one.shape == (7, 3, 16, 16)
    for k, p in enumerate(BORDER_PIXELS):
        np.testing.assert_allclose(one[k], gradient(model, x[1], seeds.pixel(*p, channel=1)).map, rtol=1e-12,
                                   atol=1e-12)


def test_reduce_gives_the_reduction_of_the_full_stack_and_progress_counts_seeds():
    model = dense_cnn(2)
    x = np.random.default_rng(3).standard_normal((3, 16, 16))
    pixels = np.array([(r, c) for r in range(0, 16, 5) for c in range(0, 16, 6)])     # 12 pixels
    full = jacobian_rows(model, x, pixels)
    calls = []
    total = jacobian_rows(model, x, pixels, chunk=5, reduce=lambda g: np.abs(g).sum(axis=(1, 2, 3)),
                          progress=lambda done, k: calls.append((done, k)))
    np.testing.assert_allclose(total, np.abs(full).sum(axis=(1, 2, 3)), rtol=1e-12)
    assert calls == [(5, 12), (10, 12), (12, 12)]
    per_channel = jacobian_rows(model, x, pixels, chunk=7, reduce=lambda g: g.sum(axis=(2, 3)))
    np.testing.assert_allclose(per_channel, full.sum(axis=(2, 3)), rtol=1e-12, atol=1e-13)
    with pytest.raises(ValueError, match="reduce must return an array with one entry per seed"):
        jacobian_rows(model, x, pixels, chunk=5, reduce=lambda g: g.sum())
    with pytest.raises(TypeError, match="reduce must be a callable"):
        jacobian_rows(model, x, pixels, reduce="sum")
    with pytest.raises(ValueError, match="chunk must be a positive int"):
        jacobian_rows(model, x, pixels, chunk=0)
    with pytest.raises(SeedError, match=r"pixel \(3, 16\) is outside the 16x16 output map"):
        jacobian_rows(model, x, [(1, 1), (3, 16)])


def test_many_pixel_seeds_run_in_passes_with_the_same_maps(monkeypatch):
    """Beyond SEED_BUDGET a batched seed is split into passes through one graph: same maps, gradient and smoothgrad."""
    model = make_dense()
    x = np.random.default_rng(4).standard_normal((2, 3, 6, 5))
    pixels = seeds.pixels([(r, c) for r in range(6) for c in range(5)])
    whole = gradient(model, x, pixels).map
    rng_a, rng_b = np.random.default_rng(0), np.random.default_rng(0)
    smooth = smoothgrad(model, x, pixels, n=3, rng=rng_a).map
    monkeypatch.setattr(_core, "SEED_BUDGET", 4 * x.size)           # 4 seeds per pass: 8 passes for 30
    assert _core.seeds_per_pass(None, 30, x.size) == 4
    np.testing.assert_allclose(gradient(model, x, pixels).map, whole, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(smoothgrad(model, x, pixels, n=3, rng=rng_b).map, smooth, rtol=1e-12, atol=1e-14)
    for k, (r, c) in enumerate([(0, 0), (5, 4), (2, 3)]):
        np.testing.assert_allclose(whole[r * 5 + c], gradient(model, x, seeds.pixel(r, c)).map, rtol=1e-12,
                                   atol=1e-14)


def test_pixel_vectors_of_a_slice_equal_the_rows_of_the_whole():
    y = np.zeros((2, 3, 6, 5))
    for channel in (None, 2):
        s = seeds.pixels([(0, 0), (5, 4), (2, 3), (5, 0)], channel=channel)
        whole = s.vector(y)
        np.testing.assert_array_equal(s.vectors(y, 1, 3), whole[1:3])
        assert whole.sum() == 4 * 2 * (3 if channel is None else 1)
    with pytest.raises(SeedError, match="outside"):
        seeds.pixels([(0, 0), (6, 0)]).vectors(y, 1, 2)


# ---------------------------------------------------------------- look_distance

def test_look_distance_on_a_depth_like_model_agrees_with_receptive_field():
    model = dense_cnn(5)
    x = np.random.default_rng(6).standard_normal((2, 3, 16, 16))
    look = look_distance(model, x, stride=5, fraction=(0.5, 0.9, 0.75), chunk=3)
    np.testing.assert_array_equal(look.rows, [0, 5, 10, 15])
    np.testing.assert_array_equal(look.cols, [0, 5, 10, 15])
    assert look.radius50.shape == look.std_cols.shape == (2, 4, 4) and look.output.shape == (2, 2, 16, 16)
    assert set(look.radii) == {0.5, 0.9, 0.75} and np.all(look.radius50 <= look.radius(0.75))
    for i, r in enumerate(look.rows):
        for j, c in enumerate(look.cols):
            rf = receptive_field(model, x, (int(r), int(c)))
            np.testing.assert_array_equal(look.radius50[:, i, j], rf.extras["radius50"])
            np.testing.assert_array_equal(look.radius90[:, i, j], rf.extras["radius90"])
            np.testing.assert_allclose(look.std_rows[:, i, j],
                                       mass_spread(np.abs(rf.map).sum(axis=1))[:, 0], rtol=1e-12)
    assert look.extent == (-0.5, 19.5, 19.5, -0.5) and look.seconds > 0
    assert "4x4 pixels of the 16x16 output at stride 5" in repr(look)
    with pytest.raises(KeyError, match="no radius for fraction 0.6"):
        look.radius(0.6)


def test_unbatched_input_channel_and_a_smaller_output():
    model = nn.Sequential(nn.Conv2d(3, 2, 3, padding=1), nn.AvgPool2d(2)).double()
    randomize(model, 7)
    x = np.random.default_rng(8).standard_normal((3, 12, 10))
    look = look_distance(model, x, stride=2, channel=1)
    assert look.radius50.shape == (3, 3) and look.output_size == (6, 5) and look.input_size == (12, 10)
    np.testing.assert_allclose(look.centres[0], [0.5, 4.5, 8.5])     # output row r is centred at 2r + 0.5
    rf = receptive_field(model, x, (2, 4), channel=1)
    assert rf.extras["centre"] == (look.centres[0][1], look.centres[1][2])
    assert look.radius50[1, 2] == rf.extras["radius50"] and look.radius90[1, 2] == rf.extras["radius90"]
    assert look.extent == (-0.5, 11.5, 11.5, -0.5)


def test_every_pixel_by_default_on_a_small_output_and_zero_gradients_are_nan():
    model = nn.Sequential(nn.Conv2d(1, 1, 3, padding=1, bias=False)).double()
    model[0].weight.data = np.zeros((1, 1, 3, 3))
    look = look_distance(model, np.ones((1, 1, 9, 9)))
    assert look.stride == 1 and look.radius50.shape == (1, 9, 9)
    assert np.isnan(look.radius50).all() and np.isnan(look.std_rows).all()
    assert default_stride(128, 128) == 4 and default_stride(32, 32) == 1 and default_stride(33, 33) == 2


def test_errors():
    model = dense_cnn()
    x = np.zeros((3, 16, 16))
    with pytest.raises(SeedError, match=r"needs a model with a dense output .* the output has shape \(1, 5\)"):
        look_distance(make_cnn(), np.zeros((3, 12, 12)))
    with pytest.raises(SeedError, match="needs a dense output"):
        jacobian_rows(make_cnn(), np.zeros((3, 12, 12)), [(0, 0)])
    with pytest.raises(ValueError, match="stride must be a positive int"):
        look_distance(model, x, stride=0)
    with pytest.raises(ValueError, match=r"fraction must be a number in \(0, 1\]"):
        look_distance(model, x, fraction=(0.5, 1.5))
    with pytest.raises(SeedError, match="channel 2 is out of range"):
        look_distance(model, x, channel=2)
