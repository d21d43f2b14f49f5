"""gradcam and occlusion against closed forms; every method leaves no trace and fits every shape."""
import numpy as np
import pytest
from _attribution_models import make_cnn, make_dense, make_linear, randomize

import saliency as sl
from saliency import attribution as A
from saliency import nn
from saliency.attribution import seeds
from saliency.attribution.gradcam import resize_bilinear


def identity_conv(c):
    """A 1x1 conv that returns its input: Grad-CAM on it sees A = its input."""
    conv = nn.Conv2d(c, c, 1, bias=False).double()
    conv.weight.data = np.eye(c).reshape(c, c, 1, 1)
    return conv


def test_gradcam_on_a_global_average_classifier_is_the_class_weighted_sum_of_channels():
    # y = Linear(mean over space of A), A = x: dy_k/dA_c = W[k, c] / (H W) everywhere
    layer = identity_conv(3)
    head = randomize(nn.Linear(3, 4), seed=3)
    model = nn.Sequential(layer, nn.AdaptiveAvgPool2d(1), nn.Flatten(), head)
    x = np.random.default_rng(0).standard_normal((2, 3, 6, 7))
    for k in range(4):
        attr = A.gradcam(model, x, seeds.one_hot(k), layer=layer)
        w = head.weight.numpy()[k]
        expected = np.maximum(np.einsum("c,nchw->nhw", w, x), 0)[:, None] / 42
        assert attr.map.shape == (2, 1, 6, 7)
        np.testing.assert_allclose(attr.map, expected, rtol=1e-10, atol=1e-15)
        assert np.any(attr.map > 0) and np.any(attr.map == 0)


def test_gradcam_on_a_coarser_layer_is_upsampled_bilinearly():
    layer = identity_conv(2)
    head = randomize(nn.Linear(2, 3), seed=4)
    model = nn.Sequential(nn.AvgPool2d(4), layer, nn.AdaptiveAvgPool2d(1), nn.Flatten(), head)
    x = np.random.default_rng(1).standard_normal((1, 2, 16, 12))
    attr = A.gradcam(model, x, seeds.one_hot(2), layer=layer)
    pooled = x.reshape(1, 2, 4, 4, 3, 4).mean(axis=(3, 5))
    cam = np.maximum(np.einsum("c,nchw->nhw", head.weight.numpy()[2], pooled), 0)[:, None] / 12
    np.testing.assert_allclose(attr.extras["cam"], cam, rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(attr.map, resize_bilinear(cam, (16, 12)), rtol=1e-12, atol=1e-15)
    assert attr.map.shape == (1, 1, 16, 12)


@pytest.mark.parametrize("src, dst", [((4, 4), (16, 16)), ((5, 3), (13, 7)), ((16, 12), (6, 5)), ((1, 3), (4, 4))])
def test_resize_bilinear_matches_torch_interpolate(src, dst):
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(2).standard_normal((2, 3) + src)
    expected = torch.nn.functional.interpolate(torch.tensor(a), size=dst, mode="bilinear", align_corners=False)
    np.testing.assert_allclose(resize_bilinear(a, dst), expected.numpy(), rtol=1e-12, atol=1e-12)


def test_gradcam_on_a_dense_model_with_pixel_and_region_seeds():
    # y = sum_c u_c A_c with A = x: a pixel seed gives w_c = u_c / (H W), a region of n pixels n times that
    layer = identity_conv(3)
    head = randomize(nn.Conv2d(3, 1, 1, bias=False), seed=5)
    model = nn.Sequential(layer, head)
    x = np.random.default_rng(3).standard_normal((2, 3, 5, 6))
    u = head.weight.numpy().reshape(3)
    base = np.maximum(np.einsum("c,nchw->nhw", u, x), 0)[:, None] / 30
    np.testing.assert_allclose(A.gradcam(model, x, seeds.pixel(2, 4), layer=layer).map, base, rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(A.gradcam(model, x, seeds.region((0, 0, 2, 3)), layer=layer).map, 6 * base,
                               rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(A.gradcam(model, x, layer=layer).map, 30 * base, rtol=1e-10, atol=1e-15)
    batched = A.gradcam(model, x[0], seeds.pixels([(0, 0), (4, 5)]), layer=layer)
    assert batched.map.shape == (2, 1, 5, 6)
    np.testing.assert_allclose(batched.map, np.stack([base[0], base[0]]), rtol=1e-10, atol=1e-15)


def test_gradcam_takes_a_layer_by_name_and_defaults_to_the_last_convolution():
    model = make_cnn()
    x = np.random.default_rng(5).random((2, 3, 12, 12))
    by_module = A.gradcam(model, x, layer=model[3])
    np.testing.assert_array_equal(A.gradcam(model, x, layer="3").map, by_module.map)
    np.testing.assert_array_equal(A.gradcam(model, x).map, by_module.map)


def test_gradcam_refuses_a_layer_it_cannot_use():
    model = make_cnn()
    x = np.zeros((3, 12, 12))
    with pytest.raises(ValueError, match=r"needs a layer whose output is a Tensor \(N, C, h, w\), this layer "
                                         r"gives \(1, 8\)"):
        A.gradcam(model, x, layer=model[6])
    with pytest.raises(RuntimeError, match="the layer ran 0 times in one forward pass"):
        A.gradcam(model, x, layer=nn.ReLU())
    with pytest.raises(A.InputError, match="the model has no layer 'features.3'; its convolutions are: 0, 3$"):
        A.gradcam(model, x, layer="features.3")
    with pytest.raises(TypeError, match="layer must be a module of the model"):
        A.gradcam(model, x, layer=3)
    assert not model[6]._forward_hooks  # the hook is removed even when gradcam fails


# ---- occlusion ------------------------------------------------------------------------------------
def occlusion_closed_form(w, x, base, window, stride):
    """For y = sum(w * x): dropping window B changes y by sum_B w (x - base); each pixel averages
    that change over the windows covering it (starts every `stride`, plus one flush with the edge)."""
    n, c, h, wd = x.shape
    rows = list(range(0, h - window + 1, stride))
    cols = list(range(0, wd - window + 1, stride))
    rows += [h - window] if rows[-1] + window < h else []
    cols += [wd - window] if cols[-1] + window < wd else []
    total, count = np.zeros((n, h, wd)), np.zeros((h, wd))
    contrib = (w * (x - base)).sum(axis=1)
    for r in rows:
        for q in cols:
            total[:, r:r + window, q:q + window] += contrib[:, r:r + window, q:q + window].sum(axis=(1, 2))[:, None,
                                                                                                         None]
            count[r:r + window, q:q + window] += 1
    return np.repeat((total / count)[:, None], c, axis=1)


@pytest.mark.parametrize("window, stride", [(4, 4), (3, 2), (4, 3), (10, 1)])
def test_occlusion_of_a_linear_model_matches_its_closed_form(window, stride):
    model = make_linear(shape=(2, 10, 9), k=3)
    x = np.random.default_rng(4).random((2, 2, 10, 9))
    attr = A.occlusion(model, x, seeds.one_hot(1), window=window, stride=stride, baseline=0.3)
    w = model[1].weight.numpy()[1].reshape(2, 10, 9)
    np.testing.assert_allclose(attr.map, occlusion_closed_form(w, x, 0.3, min(window, 9), stride) if window < 9
                               else np.broadcast_to((w * (x - 0.3)).sum(axis=(1, 2, 3))[:, None, None, None],
                                                    x.shape), rtol=1e-10, atol=1e-13)


def test_occlusion_is_independent_of_the_batch_size_and_reports_progress():
    model = make_dense()
    x = np.random.default_rng(5).random((2, 3, 9, 9))
    calls = []
    ref = A.occlusion(model, x, seeds.pixels([(4, 4), (0, 8)]), window=3, stride=2, batch=1,
                      progress=lambda done, total: calls.append((done, total)))
    assert calls == [(i, 16) for i in range(1, 17)] and ref.extras["windows"] == 16
    assert ref.map.shape == (2, 2, 3, 9, 9)
    got = A.occlusion(model, x, seeds.pixels([(4, 4), (0, 8)]), window=3, stride=2)
    np.testing.assert_allclose(got.map, ref.map, rtol=1e-10, atol=1e-14)
    one = A.occlusion(model, x, seeds.pixel(0, 8), window=3, stride=2)
    np.testing.assert_allclose(got.map[1], one.map, rtol=1e-10, atol=1e-14)


def test_occlusion_refuses_bad_windows():
    with pytest.raises(ValueError, match=r"window must be a positive int or a pair \(rows, cols\) of them, got 0"):
        A.occlusion(make_cnn(), np.zeros((3, 12, 12)), window=0)
    with pytest.raises(ValueError, match="stride must be a positive int"):
        A.occlusion(make_cnn(), np.zeros((3, 12, 12)), stride=(1, 2, 3))


# ---- every method -------------------------------------------------------------------------------
METHODS = {
    "gradient": (A.gradient, {}),
    "input_x_gradient": (A.input_x_gradient, {}),
    "guided_backprop": (A.guided_backprop, {}),
    "smoothgrad": (A.smoothgrad, {"n": 3}),
    "integrated_gradients": (A.integrated_gradients, {"steps": 4}),
    "gradcam": (A.gradcam, {}),
    "occlusion": (A.occlusion, {"window": 4, "stride": 4}),
}


def call(name, model, x, seed=None, layer=None):
    method, kwargs = METHODS[name]
    if name == "gradcam":
        kwargs = {"layer": layer}
    return method(model, x, seed, **kwargs)


@pytest.mark.parametrize("name", list(METHODS))
@pytest.mark.parametrize("training", [True, False])
def test_methods_leave_no_trace(name, training):
    model = make_cnn().train(training)
    x_np = np.random.default_rng(6).random((2, 3, 12, 12))
    x_before = x_np.copy()
    weights_before = {k: np.array(v) for k, v in model.state_dict().items()}
    x_t = sl.tensor(x_np, requires_grad=True)
    for x in (x_np, x_t):
        call(name, model, x, layer=model[3])
    np.testing.assert_array_equal(x_np, x_before)
    np.testing.assert_array_equal(x_t.numpy(), x_before)
    assert x_t.grad is None and x_t.requires_grad
    assert all(p.grad is None and p.requires_grad for p in model.parameters())
    assert model.training is training and all(m.training is training for m in model.modules())
    assert not any(m._forward_hooks for m in model.modules())
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(np.asarray(v), weights_before[k])


@pytest.mark.parametrize("name", list(METHODS))
def test_every_method_on_single_images_batches_and_dense_seeds(name):
    cnn, dense = make_cnn(), make_dense()
    x = np.random.default_rng(7).random((3, 3, 12, 12))
    channels = 1 if name == "gradcam" else 3
    batch = call(name, cnn, x, layer=cnn[3])
    assert batch.map.shape == (3, channels, 12, 12) and batch.method == name
    assert np.all(np.isfinite(batch.map)) and np.any(batch.map != 0)
    alone = call(name, cnn, x[2], seeds.one_hot(int(batch.output[2].argmax())), layer=cnn[3])
    assert alone.map.shape == (channels, 12, 12) and alone.output.shape == (5,)
    if name != "smoothgrad":  # smoothgrad draws different noise for a batch of 3 than for one image
        np.testing.assert_allclose(alone.map, batch.map[2], rtol=1e-8, atol=1e-12)
    for seed in (seeds.pixel(5, 6), seeds.region((2, 3, 7, 9)), seeds.ones(), seeds.pixels([(0, 0), (11, 11)])):
        attr = call(name, dense, x, seed, layer=dense[0])
        lead = (2,) if seed.count else ()
        assert attr.map.shape == lead + (3, channels, 12, 12) and np.all(np.isfinite(attr.map))
        assert np.any(attr.map != 0)
