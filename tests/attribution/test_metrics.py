"""saliency.attribution.metrics: each metric against its definition, on maps and models whose
answer is known by hand (a linear model's gradient is its weights), and in a store's evaluation:
the same numbers whichever way its batches are grouped."""
import numpy as np
import pytest

from saliency import attribution, nn
from saliency.attribution import metrics, seeds, store_evaluation


def linear_classifier(classes=3, shape=(2, 6, 5), seed=0):
    """(model, W): logits = W @ x.ravel() + b, float64; its gradient for class k is W[k]."""
    rng = np.random.default_rng(seed)
    size = int(np.prod(shape))
    fc = nn.Linear(size, classes)
    w, b = rng.standard_normal((classes, size)), rng.standard_normal(classes)
    fc.weight.data, fc.bias.data = w, b
    model = nn.Sequential(nn.Flatten(), fc)
    model.bias = b
    return model, w.reshape((classes,) + shape)


def images(n=4, shape=(2, 6, 5), seed=1):
    return np.random.default_rng(seed).random((n,) + shape)


# --- maps alone ---------------------------------------------------------------------------------------

def test_pointing_game_hits_when_a_largest_pixel_is_on_the_object():
    a = np.zeros((3, 2, 4, 4))
    a[0, 0, 1, 1] = 2           # largest at (1, 1), on the object
    a[1, 1, 3, 3] = 5           # largest at (3, 3), off it
    a[2, :, 0, 0] = 1           # ties: (0, 0) and (2, 2) both largest, one on the object
    a[2, :, 2, 2] = 1
    mask = np.zeros((3, 4, 4), bool)
    mask[:, 1:3, 1:3] = True
    np.testing.assert_array_equal(metrics.pointing_game(a, mask), [1.0, 0.0, 1.0])
    assert np.isnan(metrics.pointing_game(a[0], np.zeros((4, 4), bool)))     # nothing to point at
    with pytest.raises(TypeError, match="mask must be a bool array"):
        metrics.pointing_game(a, mask.astype(np.uint8))
    with pytest.raises(ValueError, match=r"mask of shape \(3, 5, 4\) does not fit maps of shape"):
        metrics.pointing_game(a, np.zeros((3, 5, 4), bool))


def test_relevance_mass_is_the_share_of_the_map_on_the_object():
    rng = np.random.default_rng(0)
    a = rng.random((2, 3, 5, 6))
    mask = rng.random((2, 5, 6)) > 0.6
    total = a.sum(axis=(1, 2, 3))
    inside = np.array([a[i].sum(axis=0)[mask[i]].sum() for i in range(2)])
    np.testing.assert_allclose(metrics.relevance_mass(a, mask), inside / total, rtol=1e-12)
    assert metrics.relevance_mass(a[0], np.ones((5, 6), bool)) == pytest.approx(1.0)
    assert np.isnan(metrics.relevance_mass(np.zeros((1, 5, 6)), np.ones((5, 6), bool)))


def test_sparseness_is_the_gini_index():
    one_pixel = np.zeros((1, 2, 2))
    one_pixel[0, 1, 1] = 3.0
    assert metrics.sparseness(one_pixel) == pytest.approx(0.75)          # (n - 1) / n for n = 4
    assert metrics.sparseness(np.ones((3, 4, 4))) == pytest.approx(0.0)   # spread evenly
    assert np.isnan(metrics.sparseness(np.zeros((1, 4, 4))))
    v = np.random.default_rng(1).random(50)
    pairs = np.abs(v[:, None] - v[None, :]).sum() / (2 * len(v) ** 2 * v.mean())  # the textbook form
    assert metrics.sparseness(v.reshape(1, 5, 10)) == pytest.approx(pairs, rel=1e-12)
    signed = np.random.default_rng(2).standard_normal((2, 1, 4, 4))
    np.testing.assert_allclose(metrics.sparseness(signed), metrics.sparseness(np.abs(signed)))


def test_ssim_of_a_map_with_itself_is_one_and_matches_scikit_image():
    rng = np.random.default_rng(3)
    a, b = rng.random((12, 10)), rng.random((12, 10))
    assert metrics.ssim(a, a) == pytest.approx(1.0)
    assert metrics.ssim(a, b) < 0.5
    skimage = pytest.importorskip("skimage.metrics")
    span = max(a.max(), b.max()) - min(a.min(), b.min())
    assert metrics.ssim(a, b) == pytest.approx(skimage.structural_similarity(a, b, data_range=span), abs=1e-12)


# --- against a model ------------------------------------------------------------------------------------

def test_infidelity_of_a_linear_models_gradient_is_zero_and_of_a_scaled_map_as_defined():
    model, w = linear_classifier()
    x = images()
    grad = attribution.gradient(model, x, seeds.one_hot(1)).map
    np.testing.assert_allclose(grad, np.broadcast_to(w[1], x.shape), atol=1e-12)
    for normalize in (False, True):
        got = metrics.infidelity(model, x, grad, seeds.one_hot(1), normalize=normalize)
        np.testing.assert_allclose(got, 0, atol=1e-20)
    rng = np.random.default_rng(4)
    d = rng.standard_normal((7,) + x.shape)
    double = 2 * grad                                          # predicts twice the change
    change = (d * w[1]).reshape(7, len(x), -1).sum(axis=2)
    np.testing.assert_allclose(metrics.infidelity(model, x, double, seeds.one_hot(1), normalize=False,
                                                  perturbations=d), (change ** 2).mean(axis=0), rtol=1e-9)
    np.testing.assert_allclose(metrics.infidelity(model, x, double, seeds.one_hot(1), perturbations=d), 0,
                               atol=1e-18)                      # normalised: judged up to scale
    squares = metrics.perturb(x, "square", size=2, samples=3, rng=np.random.default_rng(0))
    assert ((squares == 0) | (squares == np.broadcast_to(x, squares.shape))).all()
    assert ((squares != 0).reshape(3, len(x), -1).sum(axis=2) == 2 * 2 * 2).all()   # a 2x2 square, 2 channels
    with pytest.raises(ValueError, match="perturbation must be one of gaussian, square"):
        metrics.infidelity(model, x, grad, perturbation="blur")


def test_max_sensitivity_of_input_x_gradient_on_a_linear_model_is_the_largest_noise_ratio():
    model, w = linear_classifier()
    x = images()
    d = np.random.default_rng(5).uniform(-0.2, 0.2, (6,) + x.shape)
    got = metrics.max_sensitivity(model, x, attribution.input_x_gradient, seeds.one_hot(2), perturbations=d)
    want = (np.linalg.norm((d * w[2]).reshape(6, len(x), -1), axis=2).max(axis=0)
            / np.linalg.norm((x * w[2]).reshape(len(x), -1), axis=1))
    np.testing.assert_allclose(got, want, rtol=1e-10)
    flat = metrics.max_sensitivity(model, x, attribution.gradient, samples=3)   # a gradient that never changes
    np.testing.assert_allclose(flat, 0, atol=1e-12)
    drawn = metrics.max_sensitivity(model, x, attribution.input_x_gradient, seeds.one_hot(2), radius=0.2, samples=6,
                                    rng=np.random.default_rng(5))
    np.testing.assert_allclose(drawn, want, rtol=1e-10)         # the same draws from the same generator


def test_random_logit_compares_two_classes_maps_from_one_backward_pass():
    model, w = linear_classifier(classes=4, shape=(1, 9, 8))
    x = images(3, (1, 9, 8))
    calls = []

    def method(m, xs, seed):
        calls.append(seed.count)
        return attribution.gradient(m, xs, seed)

    got = metrics.random_logit(model, x, method, seeds.one_hot(0), others=[3, 1, 2])
    assert calls == [2]                                          # one call, both classes at once
    want = [metrics.ssim(np.abs(w[0, 0]), np.abs(w[k, 0])) for k in (3, 1, 2)]
    np.testing.assert_allclose(got, want, rtol=1e-10)
    drawn = metrics.random_logit(model, np.repeat(x[:1], 40, axis=0), attribution.gradient, seeds.one_hot(0))
    assert set(np.round(drawn, 10)) == {round(float(v), 10) for v in
                                        (metrics.ssim(np.abs(w[0, 0]), np.abs(w[k, 0])) for k in (1, 2, 3))}
    with pytest.raises(ValueError, match="not the seed's"):
        metrics.random_logit(model, x, method, seeds.one_hot(0), others=[0, 1, 2])
    dense = nn.Conv2d(1, 2, 3, padding=1)
    with pytest.raises(attribution.InputError, match="random_logit needs a classifier's output"):
        metrics.random_logit(dense, x, attribution.gradient)


def test_road_scores_the_imputed_copies_of_each_fraction():
    seen = []
    model, w = linear_classifier(classes=2, shape=(3, 7, 6))

    def recording(t):
        seen.append(t.numpy().copy())
        return model(t)

    x = images(2, (3, 7, 6))
    a = np.random.default_rng(6).random((2, 1, 7, 6))
    r = metrics.road(recording, x, a, seeds.one_hot(1), fractions=(0.0, 0.25, 0.5), noise=0.0)
    copies = np.concatenate(seen[1:])                            # after the pass that resolves the seed
    assert copies.shape == (6 * 2, 3, 7, 6)
    order = np.argsort(-a.reshape(2, -1), axis=1, kind="stable")
    for j, (f, most) in enumerate([(0.0, True), (0.25, True), (0.5, True), (0.0, False), (0.25, False),
                                   (0.5, False)]):
        k = int(np.rint(f * 42))
        keep = np.ones((2, 42), bool)
        for i in range(2):
            keep[i, order[i, :k] if most else order[i, 42 - k:]] = False
        want = metrics.impute(x, keep.reshape(2, 7, 6), noise=0)
        np.testing.assert_allclose(copies[2 * j:2 * j + 2], want, atol=1e-12)
    logits = np.einsum("kchw,nchw->nk", w, copies)
    scores = (logits[:, 1] + model.bias[1]).reshape(6, 2)
    np.testing.assert_allclose(r.morf, scores[:3].T, rtol=1e-9)
    np.testing.assert_allclose(r.lerf, scores[3:].T, rtol=1e-9)
    np.testing.assert_allclose(r.morf_mean, scores[:3].mean(axis=0), rtol=1e-9)
    with pytest.raises(ValueError, match=r"fractions must be numbers in \[0, 1\)"):
        metrics.road(model, x, a, fractions=(0.5, 1.0))


def test_impute_adds_the_noise_to_the_removed_pixels_only():
    x = images(2, (3, 8, 8))
    keep = np.random.default_rng(7).random((2, 8, 8)) > 0.4
    draws = np.random.default_rng(8).standard_normal(x.shape)
    plain, noisy = metrics.impute(x, keep, noise=0), metrics.impute(x, keep, noise=0.5, draws=draws)
    kept = np.broadcast_to(keep[:, None], x.shape)
    np.testing.assert_array_equal(noisy[kept], x[kept])
    removed = ~kept
    np.testing.assert_allclose((noisy - plain)[removed], 0.5 * draws[removed], rtol=1e-12)


# --- declarations and a store ---------------------------------------------------------------------------

def test_every_metric_is_declared_with_its_numbers_and_options():
    for name, m in metrics.METRICS.items():
        assert m.name == name and m.about.count("\n") == 1, name       # two lines for the report and README
        assert all(better in ("lower", "higher") for _, _, better in m.columns)
        assert set(m.needs) <= {"method", "masks", "classifier"}
        assert set(m.defaults()) == {o.name for o in m.options}
    assert metrics.parse_names("all") == tuple(metrics.METRICS)
    assert metrics.parse_names("sparseness,road") == ("road", "sparseness")   # METRICS's order
    with pytest.raises(attribution.InputError, match="--metrics takes names from: deletion_insertion, "):
        metrics.parse_names("road,faithfulness")
    with pytest.raises(attribution.registry.OptionError, match="metric road has no option 'steps'"):
        metrics.METRICS["road"].check({"steps": 3})


@pytest.fixture(scope="module")
def shapes_store(shapes, tmp_path_factory):
    from saliency.models import data

    folder = tmp_path_factory.mktemp("shapes")
    paths = data.write_shapes(folder, 7, seed=11)
    store = attribution.batch(shapes, paths, "gradient", out=folder / "run", batch_size=3, use_zarr=False)
    return store, folder / "masks", paths


FAST = {"road": {"fractions": (0.3, 0.6)}, "max_sensitivity": {"samples": 2}, "infidelity": {"samples": 3}}


def test_every_metric_of_a_store_is_the_metric_of_its_images(shapes, shapes_store):
    store, masks, paths = shapes_store
    ev = attribution.evaluate_store(shapes, store.path, metrics="all", metric_options=FAST, masks=masks, sample=0)
    x = np.stack([attribution.sources.ImageSource(shapes, [p]).read(0, 1)[0][0] for p in paths])
    maps = np.asarray(store.maps, np.float64)
    from saliency.models import data

    truth = data.shapes(7, seed=11, return_info=True)[2]["mask"] >= 0.5
    np.testing.assert_array_equal(ev.values["pointing_game"], metrics.pointing_game(np.abs(maps), truth))
    np.testing.assert_allclose(ev.values["relevance_mass"], metrics.relevance_mass(np.abs(maps), truth))
    np.testing.assert_allclose(ev.values["sparseness"], metrics.sparseness(np.abs(maps)))
    first = slice(0, 3)                                          # batch 0's draws: rng([0, 0, metric])
    j = list(metrics.METRICS).index("infidelity")
    want = metrics.infidelity(shapes, x[first], maps[first], samples=3, rng=np.random.default_rng([0, 0, j]))
    np.testing.assert_allclose(ev.values["infidelity"][first], want, rtol=1e-6)
    assert ev.values["road_morf_curve"].shape == (7, 2)
    assert list(ev.points["road_morf_curve"]) == [1229 / 4096, 2458 / 4096]      # round(f * H * W) pixels
    assert np.isfinite(ev.values["max_sensitivity"]).all() and np.isfinite(ev.values["random_logit"]).all()


def test_a_stores_metrics_computed_in_parts_are_those_computed_at_once(shapes, shapes_store):
    store, masks, _ = shapes_store
    kwargs = {"metrics": "all", "metric_options": FAST, "masks": masks}
    here = attribution.evaluate_store(shapes, store.path, sample=0, **kwargs)
    parts = [s for group in ([2], [0, 1]) for s in store_evaluation.batch_scores(shapes, store.path, group, **kwargs)]
    elsewhere = attribution.evaluate_store(shapes, store.path, sample=0, curves=parts, **kwargs)
    assert set(here.values) == set(elsewhere.values)
    for field, values in here.values.items():
        np.testing.assert_array_equal(elsewhere.values[field], values, err_msg=field)   # bit for bit
    other = attribution.evaluate_store(shapes, store.path, sample=0, random_seed=1, **kwargs)
    assert not np.array_equal(other.values["infidelity"], here.values["infidelity"])
    with pytest.raises(attribution.InputError, match="curves of batch 0 hold deletion, deletion_auc"):
        attribution.evaluate_store(shapes, store.path, sample=0, curves=parts, metrics="deletion_insertion")


def test_a_store_evaluation_says_what_a_metric_misses(shapes, shapes_store, tmp_path):
    store, masks, _ = shapes_store
    with pytest.raises(attribution.InputError, match=r"^pointing_game needs ground-truth masks: a folder"):
        attribution.evaluate_store(shapes, store.path, metrics="pointing_game")
    (tmp_path / "some").mkdir()
    with pytest.raises(attribution.InputError, match=r"^no mask for .*shape_00000.png in .*some \(looked for "):
        attribution.evaluate_store(shapes, store.path, metrics="relevance_mass", masks=tmp_path / "some")
    with pytest.raises(attribution.InputError, match="options given for the metric road, which is not evaluated"):
        attribution.evaluate_store(shapes, store.path, metrics="sparseness", metric_options={"road": {}})
    given = np.zeros((7, 64, 64), bool)
    given[:, :32] = True
    ev = attribution.evaluate_store(shapes, store.path, metrics="relevance_mass", masks=given)
    maps = np.abs(np.asarray(store.maps, np.float64)).sum(axis=1)
    np.testing.assert_allclose(ev.values["relevance_mass"], maps[:, :32].sum(axis=(1, 2)) / maps.sum(axis=(1, 2)))
    assert ev.deletion is None and ev.correlations is None


def test_classes_seed_takes_one_class_per_image():
    v = seeds.classes([(0, 2), (1, 1)]).vector(np.zeros((2, 3)))
    np.testing.assert_array_equal(v, [[[1, 0, 0], [0, 0, 1]], [[0, 1, 0], [0, 1, 0]]])


def test_metrics_run_on_float32_models_and_rule_based_maps(shapes):
    from saliency.models import data

    x, _, info = data.shapes(3, seed=2, return_info=True)
    lrp = attribution.lrp(shapes, x)
    assert lrp.map.dtype == np.float32
    assert np.isfinite(metrics.road(shapes, x, np.abs(lrp.map), fractions=(0.5,)).morf).all()
    assert np.isfinite(metrics.max_sensitivity(shapes, x, attribution.lrp, samples=2)).all()
    assert np.isfinite(metrics.random_logit(shapes, x, attribution.lrp)).all()
    assert np.isfinite(metrics.infidelity(shapes, x, lrp.map, samples=2)).all()


def test_a_store_of_a_rule_based_method_and_one_of_a_dense_model_are_evaluated(shapes, shapes_store, tmp_path):
    from saliency import models

    _, _, paths = shapes_store
    lrp = attribution.batch(shapes, paths[:3], "lrp", out=tmp_path / "lrp", use_zarr=False)
    ev = attribution.evaluate_store(shapes, lrp.path, metrics="max_sensitivity,random_logit,infidelity",
                                    metric_options={"max_sensitivity": {"samples": 2}, "infidelity": {"samples": 2}})
    for field in ("max_sensitivity", "random_logit", "infidelity"):
        assert ev.values[field].shape == (3,) and np.isfinite(ev.values[field]).all(), field
    depth = models.load("depth")
    x = models.data.scenes(2, seed=3)[0]
    dense = attribution.batch(depth, x, "gradient", out=tmp_path / "depth", use_zarr=False)
    ev = attribution.evaluate_store(depth, dense.path, images=x, metrics="road,max_sensitivity,sparseness",
                                    metric_options={"road": {"fractions": (0.5,)}, "max_sensitivity": {"samples": 1}})
    assert ev.values["road_morf_curve"].shape == (2, 1) and np.isfinite(ev.values["max_sensitivity"]).all()
    with pytest.raises(attribution.InputError, match=r"random_logit needs a classifier's output \(N, classes\)"):
        attribution.evaluate_store(depth, dense.path, images=x, metrics="random_logit")
