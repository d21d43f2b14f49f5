"""deletion_insertion against closed forms of a linear model; randomisation_check and Spearman."""
import numpy as np
import pytest
from _attribution_models import make_cnn, randomize

from saliency import nn
from saliency.attribution import deletion_insertion, gradient, input_x_gradient, randomisation_check, seeds, smoothgrad
from saliency.attribution.evaluation import ranks, spearman


def positive_linear(shape=(2, 4, 4), k=1, seed=0):
    """f(x) = W flatten(x), W > 0, no bias: the output changes by sum_c w (x - b) when a pixel becomes b."""
    model = nn.Sequential(nn.Flatten(), nn.Linear(int(np.prod(shape)), k)).double()
    rng = np.random.default_rng(seed)
    model[1].weight.data = rng.uniform(0.1, 1.0, (k, int(np.prod(shape))))
    model[1].bias.data = np.zeros(k)
    return model


def closed_form(w, x, importance, b, counts):
    """Deletion and insertion curves of f = sum(w * x) (one image), pixels in order of `importance`."""
    contrib = (w * (x - b)).sum(axis=0).ravel()
    order = np.argsort(-importance.ravel(), kind="stable")
    cum = np.r_[0.0, np.cumsum(contrib[order])]
    fx, fb = (w * x).sum(), (w * np.broadcast_to(b, x.shape)).sum()
    return fx - cum[counts], fb + cum[counts]


def trapezoid(y, f):
    return ((y[1:] + y[:-1]) / 2 * np.diff(f)).sum()


@pytest.mark.parametrize("steps", [8, 5, 16])
def test_linear_model_deleting_in_order_of_w_times_x(steps):
    rng = np.random.default_rng(steps)
    model = positive_linear()
    x = rng.uniform(0.1, 1.0, (2, 2, 4, 4))
    attr = input_x_gradient(model, x)  # w * x
    res = deletion_insertion(model, x, attr, steps=steps)
    counts = np.rint(np.arange(steps + 1) * 16 / steps).astype(int)
    np.testing.assert_array_equal(res.fractions, counts / 16)
    w = model[1].weight.numpy()[0].reshape(2, 4, 4)
    for i in range(2):
        dele, ins = closed_form(w, x[i], (w * x[i]).sum(axis=0), 0.0, counts)
        np.testing.assert_allclose(res.deletion[i], dele, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(res.insertion[i], ins, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(res.deletion_auc[i], trapezoid(dele, counts / 16), rtol=1e-12)
        np.testing.assert_allclose(res.insertion_auc[i], trapezoid(ins, counts / 16), rtol=1e-12)
    assert np.all(np.diff(res.deletion, axis=1) < 0) and np.all(np.diff(res.insertion, axis=1) > 0)
    assert res.deletion[:, -1] == pytest.approx(0, abs=1e-12) and np.all(res.deletion_auc < res.insertion_auc)
    # the best order for deletion: no other order removes output faster
    other = deletion_insertion(model, x, rng.random(x.shape), steps=steps)
    assert np.all(other.deletion >= res.deletion - 1e-12) and np.all(res.deletion_auc <= other.deletion_auc)


def test_baseline_array_batch_size_and_an_unbatched_image():
    rng = np.random.default_rng(1)
    model = positive_linear()
    x = rng.uniform(0.1, 1.0, (2, 4, 4))
    b = rng.uniform(0, 0.2, (2, 1, 4))  # broadcasts to (C, H, W)
    importance = rng.standard_normal((1, 4, 4))  # one channel, signed
    res = deletion_insertion(model, x, importance, steps=4, baseline=b, batch=1)
    w = model[1].weight.numpy()[0].reshape(2, 4, 4)
    dele, ins = closed_form(w, x, importance[0], b, np.array([0, 4, 8, 12, 16]))
    np.testing.assert_allclose(res.deletion, dele, rtol=1e-12)
    np.testing.assert_allclose(res.insertion, ins, rtol=1e-12)
    assert res.deletion.shape == (5,) and isinstance(res.insertion_auc, float)
    again = deletion_insertion(model, x, importance, steps=4, baseline=b, batch=64)
    np.testing.assert_allclose(again.deletion, res.deletion, rtol=1e-13)


def test_the_seed_comes_from_the_attribution():
    rng = np.random.default_rng(2)
    model = positive_linear(k=3)
    x = rng.uniform(0.1, 1.0, (2, 2, 4, 4))
    attr = gradient(model, x, seeds.one_hot(2))
    res = deletion_insertion(model, x, attr, steps=2)
    w2 = model[1].weight.numpy()[2]
    np.testing.assert_allclose(res.deletion[:, 0], x.reshape(2, -1) @ w2, rtol=1e-12)
    assert res.seed.describe() == "class 2"
    res1 = deletion_insertion(model, x, attr, seeds.one_hot(1), steps=2)
    np.testing.assert_allclose(res1.deletion[:, 0], x.reshape(2, -1) @ model[1].weight.numpy()[1], rtol=1e-12)


def test_deletion_insertion_errors():
    model = positive_linear()
    x = np.ones((2, 2, 4, 4))
    with pytest.raises(ValueError, match="does not fit the input"):
        deletion_insertion(model, x, np.ones((2, 2, 4, 5)))
    with pytest.raises(ValueError, match="several seeds' maps"):
        deletion_insertion(model, x, np.ones((3, 2, 2, 4, 4)))
    with pytest.raises(ValueError, match="steps must be a positive int"):
        deletion_insertion(model, x, np.ones(x.shape), steps=0)
    with pytest.raises(ValueError, match="batch must be a positive int"):
        deletion_insertion(model, x, np.ones(x.shape), batch=0)
    with pytest.raises(ValueError, match="takes one seed"):
        deletion_insertion(model, x, np.ones(x.shape), seeds.classes([0, 0]))


# ---- randomisation -------------------------------------------------------------------------------

def snapshot(model):
    return {k: v.copy() for k, v in model.state_dict().items()}


def assert_same_state(model, before, params):
    after = model.state_dict()
    assert after.keys() == before.keys()
    for k in before:
        np.testing.assert_array_equal(after[k], before[k])
        assert after[k].dtype == before[k].dtype
    assert all(p.numpy() is d for p, d in params)


def test_cascading_randomisation_of_the_gradient():
    model = make_cnn()
    x = np.random.default_rng(3).standard_normal((2, 3, 12, 12))
    before, params = snapshot(model), [(p, p.numpy()) for p in model.parameters()]
    res = randomisation_check(model, x, gradient)
    assert res.layers == ["7", "3", "0"]  # linear, second conv, first conv: top first
    assert res.correlations.shape == (3, 2) and len(res.maps) == 3
    assert not np.allclose(res.maps[0], res.original.map)  # randomising the top layer changes the map
    assert np.all(res.correlations[0] < 0.99)
    assert np.all(res.correlations[-1] < 0.5)  # all layers random: well below 1
    assert_same_state(model, before, params)
    np.testing.assert_array_equal(gradient(model, x).map, res.original.map)
    # the class is fixed at the original model's prediction
    assert res.original.seed.describe().startswith("predicted class")


def test_the_order_follows_the_forward_pass_and_the_method_can_be_any():
    class Backwards(nn.Module):
        def __init__(self):
            super().__init__()
            self.head = nn.Conv2d(4, 1, 3, padding=1)  # registered first, called last
            self.body = nn.Conv2d(3, 4, 3, padding=1)
            self.unused = nn.Linear(2, 2)

        def forward(self, x):
            return self.head(self.body(x))

    model = randomize(Backwards(), seed=4)
    x = np.random.default_rng(4).standard_normal((3, 8, 8))
    res = randomisation_check(model, x, lambda m, x, s: smoothgrad(m, x, s, n=4), seed=seeds.pixel(4, 4),
                              rng=np.random.default_rng(5))
    assert res.layers == ["head", "body"] and res.correlations.shape == (2,)


def test_weights_are_restored_when_the_method_fails():
    model = make_cnn()
    x = np.random.default_rng(6).standard_normal((1, 3, 12, 12))
    before, params = snapshot(model), [(p, p.numpy()) for p in model.parameters()]
    calls = []

    def flaky(m, x, s):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("boom")
        return gradient(m, x, s)

    with pytest.raises(RuntimeError, match="boom"):
        randomisation_check(model, x, flaky)
    assert len(calls) == 3
    assert_same_state(model, before, params)


def test_batch_norm_statistics_are_restored_for_a_model_in_training_mode():
    model = randomize(nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                                    nn.Conv2d(4, 2, 3, padding=1)), seed=8)
    model.train()
    x = np.random.default_rng(8).standard_normal((2, 3, 8, 8))
    before, params = snapshot(model), [(p, p.numpy()) for p in model.parameters()]
    res = randomisation_check(model, x, gradient, seeds.ones())
    assert res.layers == ["3", "1", "0"]
    assert_same_state(model, before, params)


def test_randomisation_errors():
    x = np.zeros((1, 3, 12, 12))
    with pytest.raises(TypeError, match="must be a saliency.nn.Module"):
        randomisation_check(lambda t: t, x, gradient)
    with pytest.raises(TypeError, match="rng must be an np.random.Generator"):
        randomisation_check(make_cnn(), x, gradient, rng=3)
    with pytest.raises(ValueError, match="no layer with parameters"):
        randomisation_check(nn.Sequential(nn.ReLU()), x, gradient)
    with pytest.raises(TypeError, match="must return an Attribution"):
        randomisation_check(make_cnn(), x, lambda m, x, s: np.zeros(3))


def test_spearman_against_the_formula_without_ties_and_with_average_ranks_for_ties():
    rng = np.random.default_rng(7)
    a, b = rng.permutation(20), rng.permutation(20)
    d = (np.argsort(np.argsort(a)) - np.argsort(np.argsort(b))).astype(float)
    assert spearman(a, b) == pytest.approx(1 - 6 * (d ** 2).sum() / (20 * (20 ** 2 - 1)), abs=1e-12)
    np.testing.assert_array_equal(ranks([3.0, 1.0, 3.0, 2.0, 3.0]), [4.0, 1.0, 4.0, 2.0, 4.0])
    np.testing.assert_array_equal(ranks([[1, 2, 2, 3]]), [[1, 2.5, 2.5, 4]])
    v = rng.random(30)
    assert spearman(v, np.exp(3 * v)) == pytest.approx(1.0) and spearman(v, -v) == pytest.approx(-1.0)
    assert np.isnan(spearman(v, np.ones(30)))
    # ties: Pearson of the average ranks, computed by hand for [1, 2, 2, 3] vs [1, 2, 3, 4]
    ra, rb = np.array([1, 2.5, 2.5, 4]), np.array([1, 2, 3, 4.0])
    want = np.corrcoef(ra, rb)[0, 1]
    assert spearman([1, 2, 2, 3], [10, 20, 30, 40]) == pytest.approx(want, abs=1e-12)
