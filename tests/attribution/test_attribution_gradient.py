"""gradient, input_x_gradient, guided_backprop: closed forms, batched seeds, shapes, no trace."""
import numpy as np
import pytest
from _attribution_models import (
    FunctionalReLUs,
    make_cnn,
    make_dense,
    make_linear,
    randomize,
)

import saliency as sl
from saliency import attribution as A
from saliency import nn
from saliency.attribution import seeds


def test_gradient_of_a_linear_model_is_its_weights():
    model = make_linear()
    x = np.random.default_rng(0).random((2, 3, 6, 5))
    w = model[1].weight.numpy()
    for k in range(4):
        attr = A.gradient(model, x, seeds.one_hot(k))
        np.testing.assert_allclose(attr.map, np.broadcast_to(w[k].reshape(3, 6, 5), x.shape), rtol=1e-12, atol=0)
    attr = A.gradient(model, x, seeds.weights(np.array([1.0, -2.0, 0.0, 0.5])))
    expected = (w[0] - 2 * w[1] + 0.5 * w[3]).reshape(3, 6, 5)
    np.testing.assert_allclose(attr.map[1], expected, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(A.input_x_gradient(model, x, seeds.one_hot(2)).map, x * w[2].reshape(3, 6, 5),
                               rtol=1e-12, atol=0)


def test_result_fields_and_array_protocol():
    model = make_cnn()
    x = np.random.default_rng(1).random((3, 3, 12, 12))
    attr = A.gradient(model, x)
    assert attr.method == "gradient" and attr.seconds >= 0
    assert attr.map.shape == x.shape and attr.map.dtype == np.float64
    assert np.asarray(attr) is attr.map
    assert np.asarray(attr, dtype=np.float32).dtype == np.float32
    y = model(sl.tensor(x)).numpy()
    np.testing.assert_allclose(attr.output, y, rtol=1e-12, atol=1e-12)
    assert str(attr.seed).startswith("predicted class")
    np.testing.assert_array_equal(attr.seed.vector(y).argmax(1), y.argmax(1))
    assert "method='gradient'" in repr(attr) and "(3, 3, 12, 12) float64" in repr(attr)
    with pytest.raises(AttributeError, match="gradient does not report a completeness error"):
        _ = attr.completeness_error


def test_default_seed_is_predicted_for_classifiers_and_ones_for_dense_outputs():
    x = np.random.default_rng(2).random((2, 3, 12, 12))
    cnn, dense = make_cnn(), make_dense()
    np.testing.assert_array_equal(A.gradient(cnn, x).map, A.gradient(cnn, x, seeds.predicted()).map)
    np.testing.assert_array_equal(A.gradient(dense, x).map, A.gradient(dense, x, seeds.ones()).map)


def test_a_batch_gives_each_image_its_own_map():
    model = make_cnn()
    x = np.random.default_rng(3).random((3, 3, 12, 12))
    batch = A.gradient(model, x, seeds.one_hot([0, 3, 4])).map
    for i, k in enumerate([0, 3, 4]):
        alone = A.gradient(model, x[i], seeds.one_hot(k))
        assert alone.map.shape == (3, 12, 12) and alone.output.shape == (5,)
        np.testing.assert_allclose(batch[i], alone.map, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("method", [A.gradient, A.input_x_gradient, A.guided_backprop])
def test_batched_classes_equal_the_loop_over_classes(method):
    model = make_cnn()
    x = np.random.default_rng(4).random((2, 3, 12, 12))
    batched = method(model, x, seeds.classes([4, 0, 2]))
    assert batched.map.shape == (3, 2, 3, 12, 12)
    for j, k in enumerate([4, 0, 2]):
        np.testing.assert_allclose(batched.map[j], method(model, x, seeds.one_hot(k)).map, rtol=1e-10, atol=1e-14)
    single = method(model, x[1], seeds.classes([4, 0, 2]))
    assert single.map.shape == (3, 3, 12, 12)
    np.testing.assert_allclose(single.map, batched.map[:, 1], rtol=1e-10, atol=1e-14)


def test_batched_pixels_equal_the_loop_over_pixels_on_a_dense_model():
    model = make_dense()
    x = np.random.default_rng(5).random((2, 3, 10, 9))
    points = [(0, 0), (4, 5), (9, 8)]
    batched = A.gradient(model, x, seeds.pixels(points))
    assert batched.map.shape == (3, 2, 3, 10, 9)
    for j, (r, c) in enumerate(points):
        one = A.gradient(model, x, seeds.pixel(r, c)).map
        np.testing.assert_allclose(batched.map[j], one, rtol=1e-10, atol=1e-14)
        # two 3x3 convs: the gradient of one output pixel lives in the 5x5 window around it
        outside = np.ones((10, 9), bool)
        outside[max(r - 2, 0):r + 3, max(c - 2, 0):c + 3] = False
        assert np.all(one[..., outside] == 0) and np.any(one != 0)


def test_region_seed_is_the_sum_of_its_pixel_seeds():
    model = make_dense()
    x = np.random.default_rng(6).random((1, 3, 8, 8))
    region = A.gradient(model, x, seeds.region((2, 3, 4, 5))).map
    total = sum(A.gradient(model, x, seeds.pixel(r, c)).map for r in (2, 3) for c in (3, 4))
    np.testing.assert_allclose(region, total, rtol=1e-10, atol=1e-14)


def test_float32_input_gives_a_float32_map_close_to_float64():
    model64, model32 = make_cnn(), make_cnn(np.float32)
    x = np.random.default_rng(7).random((2, 3, 12, 12))
    m32 = A.gradient(model32, x.astype(np.float32), seeds.one_hot(1)).map
    assert m32.dtype == np.float32
    np.testing.assert_allclose(m32, A.gradient(model64, x, seeds.one_hot(1)).map, rtol=1e-3, atol=1e-6)


def test_a_plain_function_is_a_model_and_a_tensor_is_an_input():
    w = np.random.default_rng(8).standard_normal((3, 4, 4))

    def model(t):
        return (t * sl.tensor(w)).sum(dim=(1, 2, 3)).reshape(-1, 1) ** 2

    x = np.random.default_rng(9).random((2, 3, 4, 4))
    attr = A.gradient(model, sl.tensor(x), seeds.ones())
    s = (x * w).sum(axis=(1, 2, 3))
    np.testing.assert_allclose(attr.map, 2 * s[:, None, None, None] * w, rtol=1e-12, atol=1e-14)


def test_bad_arguments_say_what_to_pass():
    model = make_cnn()
    with pytest.raises(ValueError, match=r"x must have shape \(N, C, H, W\) or \(C, H, W\), got shape \(12, 12\)"):
        A.gradient(model, np.zeros((12, 12)))
    with pytest.raises(TypeError, match=r"use seeds.parse\('class:1'\)"):
        A.gradient(model, np.zeros((3, 12, 12)), "class:1")
    with pytest.raises(A.ModelError, match="model must return a Tensor, got a value of type ndarray"):
        A.gradient(lambda t: t.numpy(), np.zeros((3, 12, 12)))
    with pytest.raises(A.ModelError, match="the model output does not depend on x"):
        A.gradient(lambda t: sl.tensor(t.numpy()) * 2, np.zeros((1, 3, 4, 4)), seeds.ones())
    with pytest.raises(seeds.SeedError, match="class 7 is out of range"):
        A.gradient(model, np.zeros((3, 12, 12)), seeds.one_hot(7))


# ---- guided backprop ------------------------------------------------------------------------------
class MLP(nn.Module):
    """y = W3 relu(W2 relu(W1 x)), ReLUs as functions or as modules."""

    def __init__(self, modules):
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(48, 20), nn.Linear(20, 16), nn.Linear(16, 3)
        self.act = nn.ReLU() if modules else sl.relu

    def forward(self, x):
        return self.l3(self.act(self.l2(self.act(self.l1(x.reshape(x.shape[0], -1))))))


def guided_reference(model, x, k):
    """The guided-backprop map by hand: at each ReLU, g <- max(g, 0) * [pre-activation > 0]."""
    w1, b1, w2, b2, w3 = (p.numpy() for p in (model.l1.weight, model.l1.bias, model.l2.weight, model.l2.bias,
                                           model.l3.weight))
    h1 = x.reshape(len(x), -1) @ w1.T + b1
    h2 = np.maximum(h1, 0) @ w2.T + b2
    g = np.zeros((len(x), 3))
    g[:, k] = 1
    g = np.maximum(g @ w3, 0) * (h2 > 0)
    g = np.maximum(g @ w2, 0) * (h1 > 0)
    return (g @ w1).reshape(x.shape)


@pytest.mark.parametrize("modules", [True, False], ids=["nn.ReLU", "sl.relu"])
def test_guided_backprop_clamps_negative_gradients_at_every_relu(modules):
    model = randomize(MLP(modules), seed=10)
    x = np.random.default_rng(11).standard_normal((4, 3, 4, 4))
    for k in range(3):
        guided = A.guided_backprop(model, x, seeds.one_hot(k)).map
        np.testing.assert_allclose(guided, guided_reference(model, x, k), rtol=1e-10, atol=1e-13)
        assert not np.allclose(guided, A.gradient(model, x, seeds.one_hot(k)).map)  # the rule did something


def test_guided_backprop_reaches_functional_and_module_relus_alike():
    conv = make_cnn()
    func = FunctionalReLUs().double()
    func.load_state_dict({"conv1.weight": conv[0].weight.numpy(), "conv1.bias": conv[0].bias.numpy(),
                          "conv2.weight": conv[3].weight.numpy(), "conv2.bias": conv[3].bias.numpy(),
                          "fc.weight": conv[7].weight.numpy(), "fc.bias": conv[7].bias.numpy()})
    x = np.random.default_rng(12).random((2, 3, 12, 12))
    np.testing.assert_allclose(A.gradient(func, x, seeds.one_hot(2)).map, A.gradient(conv, x, seeds.one_hot(2)).map,
                               rtol=1e-10, atol=1e-14)
    guided_f = A.guided_backprop(func, x, seeds.one_hot(2)).map
    np.testing.assert_allclose(guided_f, A.guided_backprop(conv, x, seeds.one_hot(2)).map, rtol=1e-10, atol=1e-14)
    assert not np.allclose(guided_f, A.gradient(func, x, seeds.one_hot(2)).map)


def test_guided_backprop_matches_torch_with_backward_hooks_on_its_relus():
    torch = pytest.importorskip("torch")
    ours = make_cnn()
    theirs = torch.nn.Sequential(torch.nn.Conv2d(3, 6, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                 torch.nn.Conv2d(6, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                 torch.nn.Flatten(), torch.nn.Linear(8, 5)).double()
    theirs.load_state_dict({k: torch.tensor(np.asarray(v)) for k, v in ours.state_dict().items()})
    for m in theirs.modules():
        if isinstance(m, torch.nn.ReLU):
            m.register_full_backward_hook(lambda mod, gin, gout: (torch.clamp(gin[0], min=0),))
    x = np.random.default_rng(13).random((3, 3, 12, 12))
    tx = torch.tensor(x, requires_grad=True)
    y = theirs(tx)
    v = torch.zeros_like(y)
    v[:, 1] = 1
    (expected,) = torch.autograd.grad(y, tx, v)
    got = A.guided_backprop(ours, x, seeds.one_hot(1)).map
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-10, atol=1e-14)


def test_relu_rule_is_read_by_the_vjp_and_restored_on_exit():
    x = sl.tensor([[-1.0, 2.0, 3.0]], requires_grad=True)
    y = sl.relu(x)
    assert y.grad_fn.name() == "ReluBackward0"
    g = sl.tensor([[5.0, -4.0, 6.0]])
    with sl.autograd.relu_rule("guided"):
        (guided,) = sl.autograd.grad(y, x, g, retain_graph=True)
        assert y.grad_fn.name() == "ReluBackward0"
    np.testing.assert_array_equal(guided.numpy(), [[0.0, 0.0, 6.0]])
    (plain,) = sl.autograd.grad(y, x, g, retain_graph=True)
    np.testing.assert_array_equal(plain.numpy(), [[0.0, -4.0, 6.0]])
    with pytest.raises(KeyError), sl.autograd.relu_rule("guided"):
        raise KeyError("boom")
    np.testing.assert_array_equal(sl.autograd.grad(y, x, g)[0].numpy(), [[0.0, -4.0, 6.0]])
    with pytest.raises(ValueError, match="relu_rule must be one of 'gradient', 'guided', got 'deconv'"):
        sl.autograd.relu_rule("deconv")
