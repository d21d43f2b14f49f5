"""receptive_field: the map against the theoretical box and against closed forms of box filters."""
import numpy as np
import pytest
from _attribution_models import randomize

import saliency as sl
from saliency import nn
from saliency.attribution import SeedError, receptive_field, seeds
from saliency.attribution.receptive import mass_radius
from saliency.autograd.windows import Box, receptive_box


def box_filters(n, channels=1):
    """n linear 3x3 box filters (all weights 1/9, padding 1, no bias, no ReLU)."""
    model = nn.Sequential(*[nn.Conv2d(channels, channels, 3, padding=1, bias=False) for _ in range(n)]).double()
    for p in model.parameters():
        p.data = np.full(p.shape, 1 / (9 * channels))
    return model


def reference_map(n, size, centre):
    """The n-fold convolution of a 3x3 box, built with np.convolve on each axis (separable)."""
    k = np.array([1.0])
    for _ in range(n):
        k = np.convolve(k, np.full(3, 1 / 3))
    m = np.zeros((size, size))
    r = n  # k has 2n + 1 taps
    m[centre[0] - r:centre[0] + r + 1, centre[1] - r:centre[1] + r + 1] = np.outer(k, k)
    return m


def reference_radius(m, centre, fraction):
    """Smallest r over the candidate distances, by summing the mass within each r explicitly."""
    ii, jj = np.indices(m.shape)
    d = np.sqrt((ii - centre[0]) ** 2 + (jj - centre[1]) ** 2)
    for r in np.unique(d):
        if m[d <= r].sum() >= fraction * m.sum() * (1 - 1e-12):
            return r
    raise AssertionError("unreachable")


@pytest.mark.parametrize("n", [1, 3, 6])
def test_stacked_box_filters_match_the_n_fold_convolution_and_its_radius(n):
    size, centre = 31, (15, 15)
    x = np.random.default_rng(n).random((1, 1, size, size))
    attr = receptive_field(box_filters(n), x, centre)
    ref = reference_map(n, size, centre)
    np.testing.assert_allclose(attr.map[0, 0], ref, rtol=1e-12, atol=1e-15)
    # per-axis variance of the n-fold box: n times that of one box (2/3)
    rows = np.arange(size) - centre[0]
    var = (attr.map[0, 0].sum(axis=1) * rows ** 2).sum() / attr.map.sum()
    np.testing.assert_allclose(var, 2 * n / 3, rtol=1e-12)
    assert attr.extras["radius50"][0] == reference_radius(ref, centre, 0.5)
    assert attr.extras["radius90"][0] == reference_radius(ref, centre, 0.9)
    assert attr.extras["box"] == Box(15 - n, 15 - n, 16 + n, 16 + n)
    assert attr.extras["theoretical_size"] == (2 * n + 1, 2 * n + 1)
    # about a Gaussian of the same variance: r50 = sigma sqrt(2 ln 2), r90 = sigma sqrt(2 ln 10)
    if n == 6:
        sigma = np.sqrt(2 * n / 3)
        assert abs(attr.extras["radius50"][0] - sigma * np.sqrt(2 * np.log(2))) < 0.5
        assert abs(attr.extras["radius90"][0] - sigma * np.sqrt(2 * np.log(10))) < 0.6


def test_the_radius_is_the_smallest_one_holding_the_fraction():
    m = np.zeros((1, 5, 5))
    m[0, 2, 2], m[0, 2, 3], m[0, 0, 0] = 1.0, 1.0, 2.0  # distances 0, 1, sqrt(8) from (2, 2)
    assert mass_radius(m, (2, 2), 0.25)[0] == 0.0
    assert mass_radius(m, (2, 2), 0.5)[0] == 1.0
    assert mass_radius(m, (2, 2), 0.51)[0] == np.sqrt(8)
    assert np.isnan(mass_radius(np.zeros((2, 3, 3)), (1, 1), 0.5)).all()
    with pytest.raises(ValueError, match="fraction must be in"):
        mass_radius(m, (2, 2), 0.0)


def test_output_and_input_of_different_sizes_use_half_pixel_centres():
    model = nn.Sequential(nn.AvgPool2d(2)).double()  # output (r, c) averages rows 2r, 2r+1: centre 2r + 0.5
    attr = receptive_field(model, np.ones((3, 8, 10)), (1, 3))
    assert attr.extras["centre"] == (2.5, 6.5)
    assert attr.extras["radius50"] == attr.extras["radius90"] == np.sqrt(0.5)
    assert attr.extras["box"] == Box(2, 6, 4, 8)
    assert attr.map.shape == (3, 8, 10)


def dense_cnn(seed=0):
    """Conv, ReLU, max pool, stride-2 conv, bilinear upsampling x4, conv: output 16x16 from 16x16."""
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(4, 4, 3, stride=2, padding=1), nn.ReLU(),
                          nn.Upsample(scale_factor=4, mode="bilinear"), nn.Conv2d(4, 2, 3, padding=1))
    return randomize(model, seed)


@pytest.mark.parametrize("pixel", [(0, 0), (0, 15), (15, 7), (8, 8), (5, 11)])
def test_the_map_is_zero_outside_the_theoretical_box(pixel):
    model = dense_cnn()
    x = np.random.default_rng(1).standard_normal((2, 3, 16, 16))
    attr = receptive_field(model, x, pixel)
    r0, c0, r1, c1 = attr.extras["box"]
    outside = np.ones((16, 16), dtype=bool)
    outside[r0:r1, c0:c1] = False
    assert attr.map.dtype == np.float64 and np.any(attr.map != 0)
    assert np.all(attr.map[..., outside] == 0)
    assert (r1 - r0, c1 - c0) == attr.extras["theoretical_size"] and (r1 - r0) < 16
    xt = sl.tensor(x, requires_grad=True)
    assert attr.extras["box"] == receptive_box(model(xt), xt, *pixel)
    np.testing.assert_array_equal(attr.map, sl.attribution.gradient(model, x, seeds.pixel(*pixel)).map)
    assert attr.extras["radius50"].shape == (2,) and np.all(attr.extras["radius50"] <= attr.extras["radius90"])


def test_channel_default_pixel_and_an_unbatched_image():
    model = dense_cnn()
    x = np.random.default_rng(2).standard_normal((3, 16, 16))
    attr = receptive_field(model, x, channel=1)
    assert attr.seed.describe() == "pixel (8, 8) channel 1" and attr.method == "receptive_field"
    assert isinstance(attr.extras["radius50"], float) and attr.map.shape == (3, 16, 16)
    np.testing.assert_array_equal(attr.map, sl.attribution.gradient(model, x, seeds.pixel(8, 8, channel=1)).map)


def test_errors():
    model = dense_cnn()
    x = np.zeros((1, 3, 16, 16))
    with pytest.raises(SeedError, match=r"pixel \(16, 0\) is outside the 16x16 output map"):
        receptive_field(model, x, (16, 0))
    with pytest.raises(SeedError, match=r"pixel must be a \(row, col\) pair"):
        receptive_field(model, x, 3)
    with pytest.raises(SeedError, match="channel 2 is out of range"):
        receptive_field(model, x, (1, 1), channel=2)
    classifier = nn.Sequential(nn.Flatten(), nn.Linear(12, 3)).double()
    with pytest.raises(SeedError, match="needs a dense output"):
        receptive_field(classifier, np.zeros((1, 3, 2, 2)), (0, 0))
