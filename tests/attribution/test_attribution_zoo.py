"""The attribution methods on the shipped models: what a user of the zoo would check."""
import numpy as np
import pytest
import saliency.models as zoo
from saliency.models import data

import saliency as sl
from saliency import attribution as A
from saliency.attribution import seeds


@pytest.fixture(scope="module")
def shapes():
    return zoo.load("shapes"), data.shapes(3, seed=91)[0]


@pytest.fixture(scope="module")
def depth():
    return zoo.load("depth"), data.scenes(2, seed=92)[0]


def _relative_error(ig):
    return np.abs(ig.completeness_error) / np.abs(ig.extras["delta"])


@pytest.mark.slow
def test_integrated_gradients_completeness_on_the_classifier(shapes):
    """ReLU and max pooling make the path integrand jump, so the error falls like 1/steps:
    at 64 steps it is about 0.5% typically (a few percent on some images), at 256 under 1% here."""
    model, x = shapes
    model = model.double()
    try:
        x = data.shapes(8, seed=91)[0].astype(np.float64)
        e64 = _relative_error(A.integrated_gradients(model, x, steps=64))
        e256 = _relative_error(A.integrated_gradients(model, x, steps=256))
    finally:
        model.float()
    assert np.median(e64) < 0.01
    assert np.all(e256 < 0.01)
    assert np.mean(e256) < np.mean(e64)


@pytest.mark.slow
def test_integrated_gradients_completeness_on_the_depth_model(depth):
    """The depth model converges more slowly (measured on one scene, 6 pixels: 1-10% at 64
    steps, 0.03-1.9% at 256, under 1% at 1024). In float64: in float32 the sum of hundreds of
    gradient maps carries about 1% of rounding here."""
    model, x = depth
    seed = seeds.pixels([(90, 40), (60, 64), (30, 30)])
    model = model.double()
    try:
        e64 = _relative_error(A.integrated_gradients(model, x[:1].astype(np.float64), seed, steps=64))
        e256 = _relative_error(A.integrated_gradients(model, x[:1].astype(np.float64), seed, steps=256))
    finally:
        model.float()
    assert np.all(e64 < 0.15) and np.all(e256 < 0.025)
    assert e256.mean() < e64.mean()


def test_a_pixel_map_is_zero_outside_the_theoretical_receptive_field(depth):
    model, x = depth
    for pixel in [(0, 0), (64, 127), (127, 5)]:
        rf = A.receptive_field(model, x[0], pixel)
        box = rf.extras["box"]
        outside = np.ones(x.shape[-2:], bool)
        outside[box.r0:box.r1, box.c0:box.c1] = False
        assert np.abs(rf.map[:, outside]).max() == 0
        assert np.abs(rf.map).max() > 0
        assert 0 < rf.extras["radius50"] <= rf.extras["radius90"]


def test_batched_pixel_seeds_equal_one_pass_per_pixel(depth):
    model, x = depth
    points = [(5, 7), (64, 64), (120, 100)]
    batched = A.gradient(model, x, seeds.pixels(points)).map
    for k, (r, c) in enumerate(points):
        np.testing.assert_allclose(batched[k], A.gradient(model, x, seeds.pixel(r, c)).map, rtol=1e-4, atol=1e-6)


def test_region_seed_is_the_sum_of_its_pixel_seeds(depth):
    model, x = depth
    box = (60, 30, 63, 33)
    region = A.gradient(model, x[:1], seeds.region(box)).map
    pixels = A.gradient(model, x[:1], seeds.pixels([(r, c) for r in range(60, 63) for c in range(30, 33)])).map
    np.testing.assert_allclose(region, pixels.sum(axis=0), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("method", [A.gradient, A.input_x_gradient, A.guided_backprop, A.smoothgrad,
                                    A.integrated_gradients, A.occlusion])
def test_every_method_works_on_a_batch_for_both_tasks(shapes, depth, method):
    for model, x, seed in ((shapes[0], shapes[1], None), (depth[0], depth[1], seeds.pixel(70, 70))):
        options = {"n": 4} if method is A.smoothgrad else {"steps": 8} if method is A.integrated_gradients else \
            {"window": 16, "stride": 16} if method is A.occlusion else {}
        before = {k: np.array(v) for k, v in model.state_dict().items()}
        x_before = x.copy()
        attr = method(model, x, seed, **options)
        assert attr.map.shape == x.shape and np.isfinite(attr.map).all() and np.abs(attr.map).max() > 0
        np.testing.assert_array_equal(x, x_before)
        assert all(p.grad is None for p in model.parameters())
        for k, v in model.state_dict().items():
            np.testing.assert_array_equal(np.asarray(v), before[k])


def test_gradcam_on_both_tasks(shapes, depth):
    cam = A.gradcam(shapes[0], shapes[1], layer=shapes[0].features.block4.conv)
    assert cam.map.shape == (3, 1, 64, 64) and (cam.map >= 0).all()
    dense = A.gradcam(depth[0], depth[1], seeds.region((40, 40, 80, 80)), layer=depth[0].dec2.conv)
    assert dense.map.shape == (2, 1, 128, 128) and np.abs(dense.map).max() > 0


def test_the_randomisation_check_drops_the_correlation_on_the_classifier(shapes):
    model, x = shapes
    before = {k: np.array(v) for k, v in model.state_dict().items()}
    check = A.randomisation_check(model, x[:1], A.gradient, rng=np.random.default_rng(0))
    assert check.layers[0] == "fc"
    assert np.mean(check.correlations[-1]) < 0.5
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(np.asarray(v), before[k])


def test_the_classifier_map_concentrates_on_the_shape(shapes):
    """On held-out images the gradient mass of the predicted class lies mostly near the shape."""
    model = shapes[0]
    x, _, info = data.shapes(16, seed=93, return_info=True)
    mass = np.abs(A.gradient(model, x).map).sum(axis=1)
    rows, cols = np.mgrid[0:64, 0:64]
    near = np.hypot(cols + 0.5 - info["center"][:, 0, None, None],
                    rows + 0.5 - info["center"][:, 1, None, None]) <= info["radius"][:, None, None] + 3
    share = (mass * near).sum(axis=(1, 2)) / mass.sum(axis=(1, 2))
    area = near.mean(axis=(1, 2))
    assert np.median(share) > 0.5 and np.median(share / area) > 1.5     # well over its share of the area


def test_methods_accept_a_tensor_input(shapes):
    model, x = shapes
    a = A.gradient(model, sl.tensor(x[0]))
    assert a.map.shape == x[0].shape
