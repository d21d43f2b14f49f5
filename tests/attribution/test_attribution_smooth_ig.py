"""smoothgrad and integrated_gradients: zero noise, the noisy-copy average, completeness, chunking."""
import numpy as np
import pytest
from _attribution_models import make_cnn, make_dense, make_linear

from saliency import attribution as A
from saliency.attribution import seeds


# ---- smoothgrad -----------------------------------------------------------------------------------
def test_smoothgrad_without_noise_is_the_gradient():
    model = make_cnn()
    x = np.random.default_rng(0).random((2, 3, 12, 12))
    g = A.gradient(model, x, seeds.one_hot(3)).map
    sg = A.smoothgrad(model, x, seeds.one_hot(3), noise=0.0, n=5)
    np.testing.assert_allclose(sg.map, g, rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(A.smoothgrad(model, x, seeds.one_hot(3), noise=0.0, n=5, variant="squared").map,
                               g * g, rtol=1e-10, atol=1e-20)
    np.testing.assert_allclose(A.smoothgrad(model, x, seeds.one_hot(3), noise=0.0, n=5, variant="vargrad").map,
                               0, rtol=0, atol=1e-20)


def test_smoothgrad_is_the_mean_gradient_over_the_same_noisy_copies():
    model = make_cnn()
    x = np.random.default_rng(1).random((2, 3, 12, 12))
    n, noise = 6, 0.2
    got = {v: A.smoothgrad(model, x, seeds.one_hot([1, 4]), noise=noise, n=n, variant=v,
                           rng=np.random.default_rng(5), batch=4).map for v in ("mean", "squared", "vargrad")}
    rng = np.random.default_rng(5)
    sigma = noise * (x.max(axis=(1, 2, 3)) - x.min(axis=(1, 2, 3)))[:, None, None, None]
    grads = np.stack([A.gradient(model, x + sigma * rng.standard_normal(x.shape), seeds.one_hot([1, 4])).map
                      for _ in range(n)])
    np.testing.assert_allclose(got["mean"], grads.mean(0), rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(got["squared"], (grads ** 2).mean(0), rtol=1e-9, atol=1e-20)
    np.testing.assert_allclose(got["vargrad"], grads.var(0), rtol=1e-7, atol=1e-18)
    assert not np.allclose(got["mean"], A.gradient(model, x, seeds.one_hot([1, 4])).map)


def test_smoothgrad_is_reproducible_and_independent_of_the_batch_size():
    model = make_dense()
    x = np.random.default_rng(2).random((3, 3, 8, 8))
    first = A.smoothgrad(model, x, seeds.pixel(3, 3), n=7).map
    np.testing.assert_array_equal(first, A.smoothgrad(model, x, seeds.pixel(3, 3), n=7).map)
    for batch in (1, 3, 5, 100):
        np.testing.assert_allclose(A.smoothgrad(model, x, seeds.pixel(3, 3), n=7, batch=batch).map, first,
                                   rtol=1e-10, atol=1e-15)


def test_smoothgrad_with_batched_seeds_equals_the_loop():
    model = make_cnn()
    x = np.random.default_rng(3).random((3, 12, 12))
    batched = A.smoothgrad(model, x, seeds.classes([0, 2]), n=4, batch=2).map
    assert batched.shape == (2, 3, 12, 12)
    for j, k in enumerate([0, 2]):
        np.testing.assert_allclose(batched[j], A.smoothgrad(model, x, seeds.one_hot(k), n=4).map,
                                   rtol=1e-10, atol=1e-15)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"variant": "max"}, ValueError, "variant must be one of 'mean', 'squared', 'vargrad', got 'max'"),
    ({"n": 0}, ValueError, "n must be a positive int"),
    ({"noise": -0.1}, ValueError, "noise must be a finite number >= 0"),
    ({"rng": 3}, TypeError, "rng must be an np.random.Generator"),
    ({"batch": 0}, ValueError, "batch must be a positive int"),
])
def test_smoothgrad_refuses_bad_options(kwargs, error, message):
    with pytest.raises(error, match=message):
        A.smoothgrad(make_cnn(), np.zeros((3, 12, 12)), **kwargs)


# ---- integrated gradients -------------------------------------------------------------------------
@pytest.mark.parametrize("rule", ["gauss-legendre", "midpoint", "trapezoid"])
def test_integrated_gradients_of_a_linear_model_is_input_times_weights(rule):
    model = make_linear()
    x = np.random.default_rng(4).random((2, 3, 6, 5))
    base = np.full((3, 6, 5), 0.25)
    attr = A.integrated_gradients(model, x, seeds.one_hot(1), baseline=base, steps=3, rule=rule)
    np.testing.assert_allclose(attr.map, (x - base) * model[1].weight.numpy()[1].reshape(3, 6, 5), rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(attr.completeness_error, 0, rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_integrated_gradients_is_complete_to_1_percent_at_64_steps(dtype):
    model = make_cnn(dtype)
    x = np.random.default_rng(5).random((3, 3, 12, 12)).astype(dtype)
    attr = A.integrated_gradients(model, x, steps=64)
    assert attr.map.dtype == dtype and attr.map.shape == x.shape
    err, delta = attr.extras["completeness_error"], attr.extras["delta"]
    assert err.shape == delta.shape == (3,)
    assert np.all(np.abs(delta) > 1e-3)  # the check is not vacuous
    assert np.all(np.abs(err) < 0.01 * np.abs(delta)), (err, delta)
    # the reported error is what it says: sum(map) - (F(x) - F(baseline))
    y_x = attr.output
    y_0 = A.gradient(model, np.zeros_like(x), attr.seed).output
    k = attr.seed.vector(y_x).argmax(1)
    expected = attr.map.sum(axis=(1, 2, 3)) - (y_x[np.arange(3), k] - y_0[np.arange(3), k])
    np.testing.assert_allclose(err, expected, rtol=1e-3, atol=1e-6)


def test_integrated_gradients_rules_all_converge():
    model = make_cnn()
    x = np.random.default_rng(6).random((1, 3, 12, 12))
    for rule in ("gauss-legendre", "midpoint", "trapezoid"):
        coarse = A.integrated_gradients(model, x, steps=8, rule=rule)
        fine = A.integrated_gradients(model, x, steps=256, rule=rule)
        assert abs(fine.completeness_error[0]) < 2e-3 * abs(fine.extras["delta"][0])
        assert abs(fine.completeness_error[0]) < abs(coarse.completeness_error[0])


def test_integrated_gradients_is_independent_of_the_batch_size_and_takes_a_number_baseline():
    model = make_dense()
    x = np.random.default_rng(7).random((2, 3, 8, 8))
    ref = A.integrated_gradients(model, x, seeds.region((2, 2, 5, 5)), baseline=0.5, steps=10)
    for batch in (1, 3, 1000):
        got = A.integrated_gradients(model, x, seeds.region((2, 2, 5, 5)), baseline=0.5, steps=10, batch=batch)
        np.testing.assert_allclose(got.map, ref.map, rtol=1e-10, atol=1e-15)
    explicit = A.integrated_gradients(model, x, seeds.region((2, 2, 5, 5)), baseline=np.full(x.shape, 0.5), steps=10)
    np.testing.assert_allclose(explicit.map, ref.map, rtol=1e-12, atol=1e-15)


def test_integrated_gradients_with_batched_seeds_equals_the_loop():
    model = make_dense()
    x = np.random.default_rng(8).random((3, 8, 8))
    points = [(1, 1), (6, 2)]
    batched = A.integrated_gradients(model, x, seeds.pixels(points), steps=6)
    assert batched.map.shape == (2, 3, 8, 8) and batched.completeness_error.shape == (2,)
    for j, (r, c) in enumerate(points):
        one = A.integrated_gradients(model, x, seeds.pixel(r, c), steps=6)
        np.testing.assert_allclose(batched.map[j], one.map, rtol=1e-10, atol=1e-15)
        np.testing.assert_allclose(batched.completeness_error[j], one.completeness_error, rtol=1e-8, atol=1e-14)


def test_integrated_gradients_refuses_bad_options():
    model, x = make_cnn(), np.zeros((3, 12, 12))
    with pytest.raises(ValueError, match="baseline of shape \\(5,\\) does not broadcast to the input shape"):
        A.integrated_gradients(model, x, baseline=np.zeros(5))
    with pytest.raises(ValueError, match="rule must be one of"):
        A.integrated_gradients(model, x, rule="simpson")
    with pytest.raises(ValueError, match="the trapezoid rule needs steps >= 2"):
        A.integrated_gradients(model, x, steps=1, rule="trapezoid")
    with pytest.raises(ValueError, match="steps must be a positive int, got 0"):
        A.integrated_gradients(model, x, steps=0)
